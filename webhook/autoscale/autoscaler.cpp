#include "webhook/autoscale/autoscaler.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/telemetry/log.h"
#include "common/time/time_text.h"
#include "webhook/base/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

std::optional<SystemTime> timeAnnotation(const json& node, std::string_view key) {
  const std::string text = stringAt(node, {"metadata", "annotations", key});
  if (text.empty()) {
    return std::nullopt;
  }
  auto parsed = parseRfc3339(text);
  return parsed ? std::optional(*parsed) : std::nullopt;
}

// `next` becomes `d` when sooner (never below 100 ms): when the autoscaler looks again.
void keepSoonest(std::optional<Duration>& next, Duration d) {
  d = std::max<Duration>(d, std::chrono::milliseconds(100));
  next = next ? std::min(*next, d) : d;
}

std::string seconds(Duration d) {
  return formatDuration(std::chrono::duration_cast<Duration>(d));
}

// Patches on an autoscaled node first check that it is still ours as we read it: opted in,
// with the opt-in time we wrote.
JsonPatch stillOurs(const CandidateNode& node) {
  JsonPatch patch;
  patch.test(jsonPointer({"metadata", "labels", kBackendAllowed}), "true");
  patch.test(jsonPointer({"metadata", "annotations", kAutoscaledAnnotation}),
             stringAt(node.object, {"metadata", "annotations", kAutoscaledAnnotation}));
  return patch;
}

// `guards`, then what turns the node's metadata as cached into what `edit` makes of a copy
// of it. A map that loses a key is written whole (JsonPatch::between), so the patch also
// tests the resourceVersion: it never overwrites a label or an annotation written since
// the cache read the node (the write fails and the next pass reads it again).
template <typename Edit>
JsonPatch edited(const CandidateNode& node, JsonPatch guards, Edit edit) {
  const json* metadata = memberAt(node.object, {"metadata"});
  json from = {{"metadata", metadata != nullptr ? *metadata : json::object()}};
  json to = from;
  edit(to["metadata"]);
  const std::string resourceVersion = stringAt(node.object, {"metadata", "resourceVersion"});
  if (!resourceVersion.empty()) {
    guards.test(jsonPointer({"metadata", "resourceVersion"}), resourceVersion);
  }
  return guards.append(JsonPatch::between(from, std::move(to)));
}

void setEntry(json& metadata, const char* map, const char* key, std::string value) {
  json& entries = metadata[map];
  if (!entries.is_object()) {
    entries = json::object();
  }
  entries[key] = std::move(value);
}

void eraseEntry(json& metadata, const char* map, const char* key) {
  if (auto it = metadata.find(map); it != metadata.end() && it->is_object()) {
    it->erase(key);
  }
}

}  // namespace

CandidateNode candidateFromNode(const json& node) {
  CandidateNode out;
  out.name = stringAt(node, {"metadata", "name"});
  out.optedIn = stringAt(node, {"metadata", "labels", kBackendAllowed}) == "true";
  out.autoscaled = timeAnnotation(node, kAutoscaledAnnotation);
  out.marked = memberAt(node, {"metadata", "annotations", kAutoscaledAnnotation}) != nullptr;
  out.draining = timeAnnotation(node, kBackendDrainingAnnotation);
  out.gpus = parseNonNegative(stringAt(node, {"metadata", "labels", kGpuCountLabel}));
  if (!out.gpus) {
    out.gpus = parseNonNegative(stringAt(node, {"status", "capacity", kGpuResource}));
  }
  out.gpuMemoryMiB = parseNonNegative(stringAt(node, {"metadata", "labels", kGpuMemoryLabel}));
  out.zone = stringAt(node, {"metadata", "labels", kZoneLabel});
  out.object = node;
  return out;
}

JsonPatch optInPatch(const CandidateNode& node, SystemTime now) {
  return edited(node, {}, [&](json& metadata) {
    setEntry(metadata, "labels", kBackendAllowed, "true");
    setEntry(metadata, "annotations", kAutoscaledAnnotation, formatRfc3339(now));
    eraseEntry(metadata, "annotations", kBackendDrainingAnnotation);
  });
}

JsonPatch drainPatch(const CandidateNode& node, SystemTime now) {
  return edited(node, stillOurs(node), [&](json& metadata) {
    setEntry(metadata, "annotations", kBackendDrainingAnnotation, formatRfc3339(now));
  });
}

JsonPatch undrainPatch(const CandidateNode& node) {
  return edited(node, stillOurs(node), [](json& metadata) {
    eraseEntry(metadata, "annotations", kBackendDrainingAnnotation);
  });
}

JsonPatch optOutPatch(const CandidateNode& node) {
  // Back to what the labeler writes on a node nobody opted in.
  return edited(node, stillOurs(node), [](json& metadata) {
    setEntry(metadata, "labels", kBackendAllowed, "false");
    eraseEntry(metadata, "annotations", kAutoscaledAnnotation);
    eraseEntry(metadata, "annotations", kBackendDrainingAnnotation);
  });
}

BackendAutoscaler::BackendAutoscaler(AutoscaleOptions options, AutoscalerActions actions)
    : options_(std::move(options)), actions_(std::move(actions)) {
  if (!actions_.now) {
    actions_.now = [] { return std::chrono::system_clock::now(); };
  }
}

void BackendAutoscaler::reset() {
  written_.clear();
  idleSince_.clear();
  optedOut_.clear();
  status_ = {};
  logged_.reset();
}

std::optional<Duration> BackendAutoscaler::step(const std::vector<json>& candidateNodes,
                                                const std::vector<Backend>& backends,
                                                const std::vector<CapacityDemand>& demand) {
  const SystemTime now = actions_.now();
  status_.optedIn = status_.optedOut = 0;
  std::optional<Duration> next;
  std::vector<CandidateNode> nodes = currentCandidates(candidateNodes, now);
  std::vector<CapacityDemand> due;
  for (const auto& pod : demand) {
    const auto waited = now - pod.waitingSince;
    if (waited >= options_.scaleUpAfter) {
      due.push_back(pod);
    } else {
      keepSoonest(next, std::chrono::duration_cast<Duration>(options_.scaleUpAfter - waited));
    }
  }
  status_.waiting = static_cast<int64_t>(demand.size());
  status_.due = static_cast<int64_t>(due.size());
  status_.backends = static_cast<int64_t>(backends.size());

  const ScaleUpPlan plan = planScaleUp(due, nodes, backends, optedOut_, now, options_);
  scaleUp(nodes, plan, due, now);
  scaleDown(nodes, backends, plan, now, next);
  recordStatus(nodes, plan);
  return next;
}

std::vector<CandidateNode> BackendAutoscaler::currentCandidates(
    const std::vector<json>& candidateNodes, SystemTime now) {
  std::vector<CandidateNode> nodes;
  std::set<std::string> seen;
  for (const auto& object : candidateNodes) {
    const std::string name = stringAt(object, {"metadata", "name"});
    seen.insert(name);
    auto mine = written_.find(name);
    if (mine != written_.end() &&
        mine->second.over == stringAt(object, {"metadata", "resourceVersion"})) {
      nodes.push_back(candidateFromNode(mine->second.node));
      continue;
    }
    if (mine != written_.end()) {
      written_.erase(mine);
    }
    nodes.push_back(candidateFromNode(object));
  }
  std::erase_if(written_, [&](const auto& entry) { return !seen.contains(entry.first); });
  std::erase_if(idleSince_, [&](const auto& entry) { return !seen.contains(entry.first); });
  std::erase_if(optedOut_, [&](const auto& entry) {
    return now - entry.second >= options_.cooldownOrDefault();
  });
  std::sort(nodes.begin(), nodes.end(),
            [](const CandidateNode& a, const CandidateNode& b) { return a.name < b.name; });
  return nodes;
}

void BackendAutoscaler::scaleUp(std::vector<CandidateNode>& nodes, const ScaleUpPlan& plan,
                                const std::vector<CapacityDemand>& due, SystemTime now) {
  auto byName = [&nodes](const std::string& name) -> CandidateNode& {
    return *std::find_if(nodes.begin(), nodes.end(),
                         [&](const CandidateNode& node) { return node.name == name; });
  };
  for (const auto& name : plan.undrain) {
    CandidateNode& node = byName(name);
    if (write(node, undrainPatch(node), "undrain")) {
      nodeEvent(node, "BackendUndrained",
                "GVirtuS autoscaler: pods wait for this node's backend again; it takes new pods");
    }
  }
  for (const auto& name : plan.optIn) {
    CandidateNode& node = byName(name);
    if (!write(node, optInPatch(node, now), "opt in")) {
      continue;
    }
    ++status_.optedIn;
    optedOut_.erase(name);
    idleSince_.erase(name);
    auto pods = plan.podsOf.find(name);
    const size_t served = pods == plan.podsOf.end() ? 0 : pods->second.size();
    nodeEvent(node, "BackendOptedIn",
              "GVirtuS autoscaler opted the node in (gvirtus.io/backend.allowed=true): " +
                  (served == 0 ? std::string("--autoscale-min is ") + std::to_string(options_.min)
                               : std::to_string(served) + " pod(s) waited more than " +
                                     seconds(options_.scaleUpAfter) + " for a backend"));
    log::info("autoscaler opted a backend node in",
              {{"node", name}, {"pods", static_cast<int64_t>(served)}});
    for (size_t i = 0; pods != plan.podsOf.end() && i < pods->second.size(); ++i) {
      if (actions_.event) {
        actions_.event(due[pods->second[i]].pod, "TriggeredScaleUp",
                       "GVirtuS autoscaler opted in node " + name + " for a backend for this pod");
      }
    }
  }
}

void BackendAutoscaler::recordStatus(const std::vector<CandidateNode>& nodes,
                                     const ScaleUpPlan& plan) {
  status_.wanted = plan.wanted;
  status_.autoscaled = std::count_if(nodes.begin(), nodes.end(),
                                     [](const CandidateNode& node) { return node.ours(); });
  status_.held = std::count_if(nodes.begin(), nodes.end(),
                               [](const CandidateNode& node) { return node.heldByOperator(); });
  if (logged_ != status_) {
    // What each look concluded, once per change: the record of its decisions, including
    // those to do nothing.
    log::debug("autoscaler looked", {{"waiting", status_.waiting},
                                     {"due", status_.due},
                                     {"backends", status_.backends},
                                     {"autoscaled", status_.autoscaled},
                                     {"wanted", status_.wanted},
                                     {"optedIn", status_.optedIn},
                                     {"optedOut", status_.optedOut},
                                     {"held", status_.held}});
    logged_ = status_;
  }
}

void BackendAutoscaler::scaleDown(std::vector<CandidateNode>& nodes,
                                  const std::vector<Backend>& backends, const ScaleUpPlan& plan,
                                  SystemTime now, std::optional<Duration>& next) {
  int64_t staying = 0;
  for (const auto& node : nodes) {
    staying += node.ours() && !node.draining ? 1 : 0;
  }
  for (auto& node : nodes) {
    if (!node.ours() || plan.podsOf.contains(node.name)) {
      idleSince_.erase(node.name);
      continue;
    }
    const Backend* backend = nullptr;
    for (const auto& candidate : backends) {
      if (candidate.node == node.name) {
        backend = &candidate;
      }
    }
    if (backend != nullptr && backend->load && backend->load->connections > 0) {
      idleSince_.erase(node.name);
      continue;
    }
    // Idle as far as connections tell; the pods given it are asked only when it matters.
    idleSince_.emplace(node.name, now);
    if (!node.draining) {
      drainIfIdle(node, backend, now, staying, next);
    } else {
      optOutIfDrained(node, backend, now, next);
    }
  }
}

std::optional<int64_t> BackendAutoscaler::podsGiven(const CandidateNode& node,
                                                    const Backend* backend) {
  if (backend == nullptr || !actions_.assignedPods) {
    return 0;
  }
  auto count = actions_.assignedPods(*backend);
  if (!count) {
    log::warn("autoscaler cannot count the pods given a backend; it stays",
              {{"node", node.name}, {"error", count.error().message}});
    return std::nullopt;
  }
  return *count;
}

void BackendAutoscaler::drainIfIdle(CandidateNode& node, const Backend* backend, SystemTime now,
                                    int64_t& staying, std::optional<Duration>& next) {
  const auto idle = now - idleSince_.at(node.name);
  if (idle < options_.scaleDownAfter) {
    keepSoonest(next, std::chrono::duration_cast<Duration>(options_.scaleDownAfter - idle));
    return;
  }
  if (staying <= options_.min) {
    return;
  }
  auto pods = podsGiven(node, backend);
  if (!pods || *pods > 0) {
    if (pods) {
      log::debug("autoscaler: a backend without connections still has pods; it stays",
                 {{"node", node.name}, {"pods", *pods}});
    }
    idleSince_[node.name] = now;
    return;
  }
  if (write(node, drainPatch(node, now), "drain")) {
    --staying;
    nodeEvent(node, "BackendDraining",
              "GVirtuS autoscaler: the backend had no connection and no pod for " +
                  seconds(options_.scaleDownAfter) +
                  "; it takes no new pods and the node is opted out next");
    keepSoonest(next, options_.drainGrace());
  }
}

void BackendAutoscaler::optOutIfDrained(CandidateNode& node, const Backend* backend, SystemTime now,
                                        std::optional<Duration>& next) {
  const auto drained = now - *node.draining;
  if (drained < options_.drainGrace()) {
    keepSoonest(next, std::chrono::duration_cast<Duration>(options_.drainGrace() - drained));
    return;
  }
  auto pods = podsGiven(node, backend);
  if (!pods || *pods > 0) {
    return;  // stays draining until its last pod is gone
  }
  const std::string name = node.name;
  if (write(node, optOutPatch(node), "opt out")) {
    ++status_.optedOut;
    optedOut_[name] = now;
    idleSince_.erase(name);
    nodeEvent(node, "BackendOptedOut",
              "GVirtuS autoscaler opted the node out (gvirtus.io/backend.allowed=false): its "
              "backend was idle");
    log::info("autoscaler opted a backend node out", {{"node", name}});
  }
}

bool BackendAutoscaler::write(CandidateNode& node, const JsonPatch& patch, const char* what) {
  const std::string over = stringAt(node.object, {"metadata", "resourceVersion"});
  auto written = actions_.patchNode(node.name, patch);
  if (!written) {
    // A refused test: the node changed meanwhile (an operator, the kubelet); the next look
    // reads it again.
    log::info("autoscaler: node not patched; it is looked at again",
              {{"node", node.name}, {"action", what}, {"error", written.error().message}});
    return false;
  }
  written_[node.name] = {over, *written};
  node = candidateFromNode(*written);
  return true;
}

void BackendAutoscaler::nodeEvent(const CandidateNode& node, const std::string& reason,
                                  const std::string& message) {
  if (!actions_.event) {
    return;
  }
  // Like the kubelet's, a Node's Events go to the default namespace.
  ObjectReference ref = referenceTo(node.object, "v1", "Node");
  ref.ns = "default";
  actions_.event(ref, reason, message);
}

}  // namespace gvirtus::webhook
