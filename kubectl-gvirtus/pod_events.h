#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kubectl-gvirtus/pod_facts.h"

// The Events the plugin read, found by the pod they are about.
namespace gvirtus::kubectl_gvirtus {

// An Event on a pod.
struct EventView {
  std::string type;
  std::string reason;
  std::string message;
  std::string source;
  int64_t count = 1;
  std::optional<TimePoint> last;
  // Orders Events written within the same second (lastTimestamp has whole seconds): the API
  // server's resourceVersion, read as a number where it is one (0 where not).
  uint64_t revision = 0;
};

EventView eventView(const nlohmann::json& event);

// The Events of each pod, looked up by the pod's UID (or namespace and name for Events that
// lack one), built once: a cluster's status reads thousands of pods against thousands of
// Events. The Events must outlive the index.
class PodEvents {
 public:
  explicit PodEvents(const std::vector<nlohmann::json>& events);
  explicit PodEvents(std::vector<nlohmann::json>&& events) = delete;  // would dangle

  // The pod's Events, oldest first (by lastTimestamp, then revision).
  std::vector<EventView> of(const nlohmann::json& pod) const;

 private:
  std::unordered_map<std::string, std::vector<const nlohmann::json*>> byUid_;
  std::unordered_map<std::string, std::vector<const nlohmann::json*>> byName_;  // ns/name
};

// The latest of `events` (oldest first) with one of `reasons`; null without one.
const EventView* latestOf(const std::vector<EventView>& events,
                          std::initializer_list<std::string_view> reasons);

}  // namespace gvirtus::kubectl_gvirtus
