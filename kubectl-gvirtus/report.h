#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kubectl-gvirtus/cluster_view.h"
#include "kubectl-gvirtus/tainted_backends.h"

// The plugin's output: aligned tables as kubectl prints them, or JSON for scripts.
namespace gvirtus::kubectl_gvirtus {

// Rows of the table of pods with a lost backend that status prints; the rest are counted
// (-o json lists them all).
inline constexpr size_t kLostRows = 20;

std::string backendsTable(const std::vector<BackendView>& backends);
std::string waitingTable(const std::vector<WaitingView>& waiting);
// At most `rows` pods, and a line that counts the others.
std::string lostTable(const std::vector<LostView>& lost, TimePoint now, size_t rows = kLostRows);
std::string taintedTable(const std::vector<TaintedView>& tainted);
// The summary line, the backends, the waiting pods, and the pods with a lost backend and the
// lost backends whose devices are tainted (when there are any).
std::string statusText(const std::vector<BackendView>& backends,
                       const std::vector<WaitingView>& waiting, const std::vector<LostView>& lost,
                       const std::vector<TaintedView>& tainted, TimePoint now);
std::string explanationText(const PodExplanation& explanation, TimePoint now);

nlohmann::json toJson(const BackendView& backend);
nlohmann::json toJson(const WaitingView& waiting);
nlohmann::json toJson(const LostView& lost);
nlohmann::json toJson(const TaintedView& tainted);
nlohmann::json toJson(const PodExplanation& explanation);

// Columns padded to the widest cell, separated by three spaces, as kubectl does.
std::string formatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace gvirtus::kubectl_gvirtus
