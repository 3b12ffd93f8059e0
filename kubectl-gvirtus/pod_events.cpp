#include "kubectl-gvirtus/pod_events.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "common/base/json_access.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

using nlohmann::json;

std::optional<TimePoint> eventTime(const json& event) {
  for (auto path : {std::initializer_list<std::string_view>{"lastTimestamp"},
                    {"eventTime"},
                    {"firstTimestamp"},
                    {"metadata", "creationTimestamp"}}) {
    if (auto t = timeAt(event, path)) {
      return t;
    }
  }
  return std::nullopt;
}

uint64_t revisionOf(const json& event) {
  const std::string text = stringAt(event, {"metadata", "resourceVersion"});
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() ? value : 0;
}

std::string nameKey(const json& pod) {
  return stringAt(pod, {"metadata", "namespace"}) + "/" + stringAt(pod, {"metadata", "name"});
}

}  // namespace

EventView eventView(const json& event) {
  EventView view;
  view.type = stringAt(event, {"type"});
  view.reason = stringAt(event, {"reason"});
  view.message = stringAt(event, {"message"});
  view.source = stringAt(event, {"source", "component"});
  if (view.source.empty()) {
    view.source = stringAt(event, {"reportingComponent"});
  }
  if (const json* c = member(event, "count"); c != nullptr && c->is_number_integer()) {
    view.count = c->get<int64_t>();
  }
  view.last = eventTime(event);
  view.revision = revisionOf(event);
  return view;
}

PodEvents::PodEvents(const std::vector<json>& events) {
  for (const auto& event : events) {
    const std::string uid = stringAt(event, {"involvedObject", "uid"});
    if (!uid.empty()) {
      byUid_[uid].push_back(&event);
    }
    if (stringAt(event, {"involvedObject", "kind"}) == "Pod") {
      byName_[stringAt(event, {"involvedObject", "namespace"}) + "/" +
              stringAt(event, {"involvedObject", "name"})]
          .push_back(&event);
    }
  }
}

std::vector<EventView> PodEvents::of(const json& pod) const {
  std::vector<EventView> out;
  // An Event with the pod's UID is about it; one without names it (as kubectl matches).
  const std::string uid = stringAt(pod, {"metadata", "uid"});
  if (!uid.empty()) {
    if (auto it = byUid_.find(uid); it != byUid_.end()) {
      for (const json* event : it->second) {
        out.push_back(eventView(*event));
      }
    }
  }
  if (auto it = byName_.find(nameKey(pod)); it != byName_.end()) {
    for (const json* event : it->second) {
      if (uid.empty() || stringAt(*event, {"involvedObject", "uid"}).empty()) {
        out.push_back(eventView(*event));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const EventView& a, const EventView& b) {
    return std::tuple(a.last.value_or(TimePoint::min()), a.revision) <
           std::tuple(b.last.value_or(TimePoint::min()), b.revision);
  });
  return out;
}

const EventView* latestOf(const std::vector<EventView>& events,
                          std::initializer_list<std::string_view> reasons) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (std::find(reasons.begin(), reasons.end(), it->reason) != reasons.end()) {
      return &*it;
    }
  }
  return nullptr;
}

}  // namespace gvirtus::kubectl_gvirtus
