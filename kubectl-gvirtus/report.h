#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kubectl-gvirtus/cluster_view.h"

// The plugin's output: aligned tables as kubectl prints them, or JSON for scripts.
namespace gvirtus::kubectl_gvirtus {

std::string backendsTable(const std::vector<BackendView>& backends);
std::string waitingTable(const std::vector<WaitingView>& waiting);
std::string statusText(const std::vector<BackendView>& backends,
                       const std::vector<WaitingView>& waiting);
std::string explanationText(const PodExplanation& explanation);

nlohmann::json toJson(const BackendView& backend);
nlohmann::json toJson(const WaitingView& waiting);
nlohmann::json toJson(const PodExplanation& explanation);

// Columns padded to the widest cell, separated by three spaces, as kubectl does.
std::string formatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace gvirtus::kubectl_gvirtus
