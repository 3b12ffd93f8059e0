#include "webhook/release/units.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "common/base/json_access.h"
#include "common/kube/api/resource.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_fields.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// A gang's unit key starts with this; no pod name holds a ':'.
constexpr std::string_view kGangPrefix = "gang:";

// KAI-Scheduler's PodGroups: read to learn a gang's minMember.
const KubeResource kPodGroups{"scheduling.run.ai", "v2alpha2", "podgroups", true};

// Of a PodGroup the cache keeps its name and minMember: a sync reads nothing else.
json podGroupFields(json group) {
  json kept = {{"metadata", json::object()}};
  for (const char* key : {"name", "namespace", "uid", "resourceVersion"}) {
    if (const json* value = memberAt(group, {"metadata", key})) {
      kept["metadata"][key] = *value;
    }
  }
  if (const json* minMember = memberAt(group, {"spec", "minMember"})) {
    kept["spec"]["minMember"] = *minMember;
  }
  return kept;
}

}  // namespace

std::vector<ObjectSnapshot> waitingPods(const std::vector<ObjectSnapshot>& pods) {
  std::vector<std::tuple<std::chrono::system_clock::time_point, std::string, ObjectSnapshot>>
      ranked;
  for (const auto& pod : pods) {
    if (isWaiting(*pod)) {
      ranked.emplace_back(createdAt(*pod), cacheKey(*pod), pod);
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<ObjectSnapshot> out;
  out.reserve(ranked.size());
  for (auto& entry : ranked) {
    out.push_back(std::move(std::get<2>(entry)));
  }
  return out;
}

std::string gangUnitKey(const std::string& ns, const std::string& group) {
  return std::string(kGangPrefix) + ns + "/" + group;
}

bool isGangUnitKey(const std::string& key) {
  return key.starts_with(kGangPrefix);
}

TermCaches::TermCaches(KubeClient& client, const std::string& ownNamespace, GvirtusPodStore* store)
    : pods(client, resources::kPods, "", std::string(kEnabledLabel) + "=true",
           "spec.nodeName=" +
               (ownNamespace.empty() ? std::string() : ",metadata.namespace!=" + ownNamespace),
           ResourceCacheOptions{.transform = waitingFields}),
      // A PodGroup's minMember may come after its pods: its add enqueues its gang.
      podGroups(client, kPodGroups, "", "", "",
                ResourceCacheOptions{.transform = podGroupFields, .absentMeansEmpty = true}),
      gvirtusPods(store) {
  if (gvirtusPods == nullptr) {
    ownGvirtusCache = std::make_unique<ResourceCache>(client, resources::kPods, "",
                                                      std::string(kEnabledLabel) + "=true", "",
                                                      gvirtusPodOptions());
    ownGvirtusPods = std::make_unique<GvirtusPodStore>(*ownGvirtusCache);
    gvirtusPods = ownGvirtusPods.get();
  }
}

void TermCaches::start() {
  pods.start();
  podGroups.start();
  if (ownGvirtusPods) {
    ownGvirtusPods->start();
  }
}

void TermCaches::stop() {
  if (ownGvirtusCache) {
    ownGvirtusCache->stop();
  }
  podGroups.stop();
  pods.stop();
}

bool TermCaches::synced() const {
  return pods.hasSynced() && podGroups.hasSynced() && gvirtusPods->hasSynced();
}

std::vector<ObjectSnapshot> ReleaseUnits::podsOf(const std::string& key) const {
  std::vector<ObjectSnapshot> found;
  if (isGangUnitKey(key)) {
    const std::string name = key.substr(kGangPrefix.size());
    const auto slash = name.find('/');
    const std::string ns = name.substr(0, slash);
    const std::string group = slash == std::string::npos ? "" : name.substr(slash + 1);
    for (const auto& pod : caches_.pods.list()) {
      if (stringAt(*pod, {"metadata", "namespace"}) == ns &&
          stringAt(*pod, {"metadata", "annotations", kPodGroupAnnotation}) == group) {
        found.push_back(pod);
      }
    }
  } else if (ObjectSnapshot pod = caches_.pods.getByKey(key)) {
    found.push_back(std::move(pod));
  }
  std::sort(found.begin(), found.end(), [](const ObjectSnapshot& a, const ObjectSnapshot& b) {
    return std::tuple(createdAt(*a), cacheKey(*a)) < std::tuple(createdAt(*b), cacheKey(*b));
  });
  return found;
}

std::string ReleaseUnits::unitOf(const json& pod) const {
  if (podGroupOf(pod)) {
    return gangUnitKey(stringAt(pod, {"metadata", "namespace"}),
                       stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation}));
  }
  return cacheKey(pod);
}

std::optional<Gang> ReleaseUnits::podGroupOf(const json& pod) const {
  const std::string group = stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation});
  if (group.empty()) {
    return std::nullopt;
  }
  const std::string ns = stringAt(pod, {"metadata", "namespace"});
  const ObjectSnapshot podGroup = caches_.podGroups.get(ns, group);
  if (!podGroup) {
    // Without KAI's CRD (or the right to list it) every pod goes alone; with it, a PodGroup
    // the watch has not brought yet is waited for (its add enqueues the gang).
    return caches_.podGroups.absent()
               ? std::nullopt
               : std::optional(Gang{.name = ns + "/" + group, .unseen = true});
  }
  const json* minMember = memberAt(*podGroup, {"spec", "minMember"});
  if (minMember == nullptr || !minMember->is_number_integer() || minMember->get<int64_t>() <= 1) {
    return std::nullopt;
  }
  return Gang{.name = ns + "/" + group,
              .minMember = static_cast<int>(std::min<int64_t>(minMember->get<int64_t>(), 1 << 20))};
}

std::optional<Gang> ReleaseUnits::gangOf(const json& pod) const {
  std::optional<Gang> gang = podGroupOf(pod);
  if (!gang || gang->unseen) {
    return gang;
  }
  // The members that no longer wait (the gate gone) and still run.
  const std::string ns = stringAt(pod, {"metadata", "namespace"});
  const std::string group = stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation});
  for (const auto& other : caches_.gvirtusPods->records()) {
    if (other->ns == ns && other->annotationOr(kPodGroupAnnotation) == group && !other->gated &&
        !other->deleting() && !other->finished()) {
      ++gang->others;
    }
  }
  return gang;
}

}  // namespace gvirtus::webhook
