#pragma once

// Waiting pods, a fake API that applies release patches to copies of them (and refuses
// some writes, as a policy or a failing API server would), and KAI gangs, for the unit
// tests of the waiting-pod controller's release passes.

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/json_patch.h"
#include "webhook/base/names.h"
#include "webhook/fixtures.h"
#include "webhook/release/controller.h"

namespace gvirtus::webhook::release_testing {

using nlohmann::json;
using testing::gvirtusPod;

// `pods` as a cache hands them out.
inline std::vector<gvirtus::ObjectSnapshot> snapshotsOf(const std::vector<json>& pods) {
  std::vector<gvirtus::ObjectSnapshot> out;
  for (const auto& pod : pods) {
    out.push_back(std::make_shared<const json>(pod));
  }
  return out;
}

// Copies of what a cache handed out.
inline std::vector<json> copiesOf(const std::vector<gvirtus::ObjectSnapshot>& pods) {
  std::vector<json> out;
  for (const auto& pod : pods) {
    out.push_back(*pod);
  }
  return out;
}

// A GVirtuS pod as the admission left it when no backend could take it: wired, and gated.
inline json waitingPod(const std::string& name, const std::string& created,
                       json annotations = json::object(), const std::string& ns = "team-a") {
  json pod = gvirtusPod();
  REQUIRE(wirePod(pod, {}).has_value());
  pod["metadata"]["name"] = name;
  pod["metadata"]["namespace"] = ns;
  pod["metadata"]["uid"] = "uid-" + ns + "-" + name;
  pod["metadata"]["resourceVersion"] = "100";
  pod["metadata"]["creationTimestamp"] = created;
  annotations["gvirtus.io/backend-status"] = "waiting";
  pod["metadata"]["annotations"] = annotations;
  pod["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
  return pod;
}

// Five pods created a second apart, in a shuffled list.
inline std::vector<json> fivePods() {
  std::vector<json> pods;
  for (int i : {3, 1, 5, 2, 4}) {
    pods.push_back(
        waitingPod("pod-" + std::to_string(i), "2026-11-22T10:00:0" + std::to_string(i) + "Z"));
  }
  return copiesOf(waitingPods(snapshotsOf(pods)));
}

inline std::string nameOf(const json& pod) {
  return pod["metadata"]["name"];
}

// A writer that applies each patch to its own copy of the pods, as the API server would,
// and can be told to refuse some: always (`refuse`, a 500), or the next few writes of a
// pod (`refusals`: how many, and the error, e.g. a ValidatingAdmissionPolicy's 403).
struct FakeApi {
  struct Refusal {
    int times = 1;
    Error error{"Internal error", 500, ""};
  };
  std::map<std::string, json> pods;
  std::set<std::string> refuse;
  std::map<std::string, Refusal> refusals;
  std::vector<std::string> written;
  std::vector<std::string> tried;  // every write, in order, refused or not
  std::mutex mutex;

  explicit FakeApi(const std::vector<json>& from) {
    for (const auto& pod : from) {
      pods[nameOf(pod)] = pod;
    }
  }
  ReleaseWriter writer() {
    return [this](const json& pod, const JsonPatch& patch) -> Result<void> {
      std::lock_guard lock(mutex);
      const std::string name = nameOf(pod);
      tried.push_back(name);
      if (refuse.contains(name)) {
        return gvirtus::fail("Internal error", 500);
      }
      if (auto it = refusals.find(name); it != refusals.end() && it->second.times > 0) {
        --it->second.times;
        return gvirtus::fail(it->second.error);
      }
      auto result = gvirtus::applyJsonPatch(pods.at(name), patch.toJson());
      if (!result) {
        return gvirtus::fail("testing value failed: " + result.error().message, 422);
      }
      pods[name] = *result;
      written.push_back(name);
      return {};
    };
  }
};

inline std::vector<std::string> released(const std::vector<PodOutcome>& outcomes) {
  std::vector<std::string> out;
  for (const auto& o : outcomes) {
    if (o.kind == PodOutcome::Kind::Released) {
      out.push_back(nameOf(*o.pod));
    }
  }
  return out;
}

inline std::map<std::string, std::string> waitingReasons(const std::vector<PodOutcome>& outcomes) {
  std::map<std::string, std::string> out;
  for (const auto& o : outcomes) {
    if (o.kind == PodOutcome::Kind::Waiting) {
      out[nameOf(*o.pod)] = o.reason;
    }
  }
  return out;
}

using Names = std::vector<std::string>;

// Pods of one KAI PodGroup (annotation pod-group-name), created after a pod alone.
inline std::vector<json> gangAndLoner(int members) {
  std::vector<json> pods = {waitingPod("loner", "2026-11-22T10:00:00Z")};
  for (int i = 1; i <= members; ++i) {
    pods.push_back(waitingPod("gang-" + std::to_string(i),
                              "2026-11-22T10:00:0" + std::to_string(i) + "Z",
                              {{std::string(kPodGroupAnnotation), "trainers"}}));
  }
  return copiesOf(waitingPods(snapshotsOf(pods)));
}

// The lookup the controller makes from the PodGroup: minMember, and members released before.
inline GangLookup gangOfTrainers(int minMember, int others = 0) {
  return [=](const json& pod) -> std::optional<Gang> {
    if (!pod["metadata"]["annotations"].contains(std::string(kPodGroupAnnotation))) {
      return std::nullopt;
    }
    return Gang{"team-a/trainers", minMember, others};
  };
}

}  // namespace gvirtus::webhook::release_testing
