#include "webhook/placement/cluster_source.h"

#include <algorithm>
#include <unordered_map>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/contract/gpu_share.h"
#include "common/contract/pod_origin.h"
#include "common/contract/pod_status.h"
#include "common/telemetry/log.h"
#include "common/time/time_text.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_fields.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The nvidia.com/gpu limits of the backend pod's containers, in all; nullopt when none asks
// (backend.gpus=0: the shim then sees what its node gives it).
std::optional<int64_t> gpusHeld(const json& pod) {
  const json* containers = memberAt(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) {
    return std::nullopt;
  }
  std::optional<int64_t> held;
  for (const json& container : *containers) {
    if (auto gpus = parseNonNegative(stringAt(container, {"resources", "limits", kGpuResource}))) {
      held = held.value_or(0) + *gpus;
    }
  }
  return held;
}

// The load report of a backend pod as the chooser may count it: nullopt when there is none;
// an error when it is unreadable, or when it lists more GPUs than its pod was given (a limit
// the shim cannot change) or, for a pod that asks for none (backend.gpus=0), than its node
// has (`node`: its Node, as the node cache keeps it; null when not known). Such a claim is
// one no one can check: a taken shim would draw the pods that ask for many GPUs or much
// memory. Both count as no report.
Result<std::optional<BackendLoad>> countedLoad(const json& pod, const json* node) {
  const std::string load = stringAt(pod, {"metadata", "annotations", kLoadAnnotation});
  if (load.empty()) {
    return std::nullopt;
  }
  auto parsed = parseBackendLoad(load);
  if (!parsed) {
    return fail(parsed.error().context("unreadable load report"));
  }
  const auto reported = std::ssize(parsed->gpus);
  if (const auto held = gpusHeld(pod)) {
    if (reported > *held) {
      return fail("the load report lists " + std::to_string(reported) +
                  " GPUs, the pod was given " + std::to_string(*held));
    }
  } else if (const auto onNode =
                 node ? parseNonNegative(stringAt(*node, {"status", "capacity", kGpuResource}))
                      : std::nullopt;
             onNode && reported > *onNode) {
    return fail("the load report lists " + std::to_string(reported) + " GPUs, its node has " +
                std::to_string(*onNode));
  }
  return std::optional{std::move(*parsed)};
}

// The key of wiredCount_: the endpoint a pod was given and the backend pod it names (empty
// where it names none).
std::string wiredKey(const std::string& endpoint, const std::string& backendPod) {
  return endpoint + " " + backendPod;
}

// gvirtus.io/backend.allowed=true: an operator opted the node in as a backend.
bool optedIn(const json& node) {
  return stringAt(node, {"metadata", "labels", kBackendAllowed}) == "true";
}

}  // namespace

std::optional<std::pair<std::string, AssignedPod>> assignedPod(const json& pod) {
  // A pod being deleted will never open its session: counting it would steer the next
  // pods away from a backend for nothing.
  if (podFinished(pod) || memberAt(pod, {"metadata", "deletionTimestamp"}) != nullptr) {
    return std::nullopt;
  }
  const std::string endpoint = stringAt(pod, {"metadata", "annotations", kBackendAnnotation});
  auto created = parseRfc3339(stringAt(pod, {"metadata", "creationTimestamp"}));
  if (endpoint.empty() || !created) {
    return std::nullopt;
  }
  return std::pair{
      endpoint,
      AssignedPod{*created, stringAt(pod, {"metadata", "annotations", kAssignedByAnnotation}),
                  cacheKey(pod),
                  stringAt(pod, {"metadata", "annotations", kBackendPodAnnotation})}};
}

std::optional<Backend> backendFromPod(const json& pod, const json* node, int port) {
  // Only on a node an operator opted in (a kubelet cannot set the label on its own Node):
  // a node whose opt-in is taken back gets no new session from the moment it is, not once
  // the DaemonSet controller has removed its backend pod.
  if (node == nullptr || !optedIn(*node)) {
    return std::nullopt;
  }
  const json* metadata = member(pod, "metadata");
  if (metadata == nullptr || member(*metadata, "deletionTimestamp") != nullptr || !podReady(pod)) {
    return std::nullopt;
  }
  // A kubelet may create a mirror pod in our namespace with the backend's labels: a taken
  // node would then be given tenants' sessions. Backends are the DaemonSet's pods, never a
  // node's own.
  if (isMirrorPod(pod)) {
    return std::nullopt;
  }
  Backend backend;
  backend.ip = podIpv4(pod);
  if (backend.ip.empty()) {
    return std::nullopt;
  }
  backend.port = port;
  backend.podNamespace = stringAt(pod, {"metadata", "namespace"});
  backend.podName = stringAt(pod, {"metadata", "name"});
  backend.node = stringAt(pod, {"spec", "nodeName"});
  backend.zone = stringAt(*node, {"metadata", "labels", kZoneLabel});
  backend.draining =
      !stringAt(*node, {"metadata", "annotations", kBackendDrainingAnnotation}).empty();
  if (auto load = countedLoad(pod, node); load && *load) {
    backend.load = std::move(**load);
  }
  return backend;
}

json nodeFields(json node) {
  json kept = {{"metadata", json::object()}};
  json& metadata = kept["metadata"];
  for (const char* key : {"name", "resourceVersion"}) {
    if (const json* value = memberAt(node, {"metadata", key})) {
      metadata[key] = *value;
    }
  }
  for (const char* label : {kZoneLabel, kBackendAllowed}) {
    if (const json* value = memberAt(node, {"metadata", "labels", label})) {
      metadata["labels"][label] = *value;
    }
  }
  if (const json* gpus = memberAt(node, {"status", "capacity", kGpuResource})) {
    kept["status"]["capacity"][kGpuResource] = *gpus;
  }
  if (const json* draining =
          memberAt(node, {"metadata", "annotations", kBackendDrainingAnnotation})) {
    metadata["annotations"][kBackendDrainingAnnotation] = *draining;
  }
  return kept;
}

namespace {

ResourceCacheOptions withTransform(std::function<json(json)> transform) {
  ResourceCacheOptions options;
  options.transform = std::move(transform);
  return options;
}

}  // namespace

ClusterBackendSource::ClusterBackendSource(KubeClient& client, std::string ns,
                                           std::string labelSelector, int port,
                                           Duration assignmentWindow)
    : port_(port),
      assignmentWindow_(assignmentWindow),
      nodes_(std::make_unique<ResourceCache>(client, resources::kNodes, "", "", "",
                                             withTransform(nodeFields))),
      pods_(std::make_unique<ResourceCache>(client, resources::kPods, std::move(ns),
                                            std::move(labelSelector))),
      frontends_(std::make_unique<ResourceCache>(client, resources::kPods, "",
                                                 std::string(kEnabledLabel) + "=true", "",
                                                 gvirtusPodOptions())),
      gvirtusPods_(std::make_unique<GvirtusPodStore>(*frontends_)) {}

ClusterBackendSource::~ClusterBackendSource() {
  stop();
}

void ClusterBackendSource::setOnChange(std::function<void()> onChange) {
  onChange_ = std::move(onChange);
}

void ClusterBackendSource::invalidate() {
  std::lock_guard lock(mutex_);
  ++generation_;
  built_.reset();
}

namespace {

// Sets or erases map[key]; true when that changed the map.
template <typename Map>
bool replaceEntry(Map& map, const std::string& key,
                  std::optional<typename Map::mapped_type> value) {
  auto it = map.find(key);
  if (value ? it != map.end() && it->second == *value : it == map.end()) {
    return false;
  }
  if (value) {
    map.insert_or_assign(key, std::move(*value));
  } else {
    map.erase(it);
  }
  return true;
}

}  // namespace

bool ClusterBackendSource::updateFrontend(
    const std::string& pod, std::optional<std::pair<std::string, GpuShare>> share,
    std::optional<std::pair<std::string, AssignedPod>> assigned) {
  // Only the assignments of the window are ever read (buildBackends()), and a pod's
  // creation time never changes: one created before the window is not kept at all. The
  // 50,000 pods of a cluster that run for good cost nothing here, but their backend's count.
  std::optional<std::string> wiredTo =
      assigned ? std::optional(wiredKey(assigned->first, assigned->second.backendPod))
               : std::nullopt;
  if (assigned &&
      assigned->second.created <= std::chrono::system_clock::now() - assignmentWindow_) {
    assigned.reset();
  }
  std::lock_guard lock(mutex_);
  const bool shareChanged = replaceEntry(shares_, pod, std::move(share));
  const auto was = assigned_.find(pod);
  const auto oldCreated =
      was == assigned_.end() ? std::nullopt : std::optional(was->second.second.created);
  const auto newCreated = assigned ? std::optional(assigned->second.created) : std::nullopt;
  if (replaceEntry(assigned_, pod, std::move(assigned))) {
    if (oldCreated) {
      recentAssigned_.erase({*oldCreated, pod});
    }
    if (newCreated) {
      recentAssigned_.emplace(*newCreated, pod);
    }
    ++assignmentChanges_;
  }
  if (const auto wired = wiredTo_.find(pod);
      (wired == wiredTo_.end() ? std::nullopt : std::optional(wired->second)) != wiredTo) {
    if (wired != wiredTo_.end() && --wiredCount_[wired->second] == 0) {
      wiredCount_.erase(wired->second);
    }
    if (wiredTo) {
      ++wiredCount_[*wiredTo];
    }
    replaceEntry(wiredTo_, pod, std::move(wiredTo));
    ++assignmentChanges_;
  }
  if (shareChanged) {
    ++generation_;
    built_.reset();
  }
  return shareChanged;
}

ObjectSnapshot ClusterBackendSource::nodeOf(const json& pod) const {
  const std::string nodeName = stringAt(pod, {"spec", "nodeName"});
  return nodeName.empty() ? nullptr : nodes_->get("", nodeName);
}

void ClusterBackendSource::start() {
  auto changed = [this] {
    invalidate();
    if (onChange_) {
      onChange_();
    }
  };
  auto warnBadLoad = [this](const json& pod) {
    if (auto load = countedLoad(pod, nodeOf(pod).get()); !load) {
      log::warn("backend pod's load report counts as unknown",
                {{"pod", cacheKey(pod)}, {"error", load.error().message}});
    }
  };
  pods_->addHandlers({[=](const json& pod) {
                        warnBadLoad(pod);
                        changed();
                      },
                      [=, this](const json& old, const json& pod) {
                        // What the list holds of a backend pod changed (its readiness, address,
                        // load report): not the peer publisher's gvirtus.io/peers, written for
                        // each new frontend of the backend.
                        const auto node = nodeOf(pod);
                        if (backendFromPod(old, node.get(), port_) ==
                            backendFromPod(pod, node.get(), port_)) {
                          return;
                        }
                        warnBadLoad(pod);
                        changed();
                      },
                      [=](const json&) { changed(); }});
  // A node that comes or goes changes the list only when it is opted in (its backend pod
  // becomes a backend, or stops being one): then the waiting pods are looked at again. Any
  // other node may still give a backend pod its zone later: the list is rebuilt.
  auto nodeSetChanged = [=, this](const json& node) {
    if (optedIn(node)) {
      changed();
    } else {
      invalidate();
    }
  };
  nodes_->addHandlers(
      {nodeSetChanged,
       [=](const json& old, const json& now) {
         if (optedIn(old) != optedIn(now) ||
             stringAt(old, {"status", "capacity", kGpuResource}) !=
                 stringAt(now, {"status", "capacity", kGpuResource}) ||
             stringAt(old, {"metadata", "labels", kZoneLabel}) !=
                 stringAt(now, {"metadata", "labels", kZoneLabel}) ||
             stringAt(old, {"metadata", "annotations", kBackendDrainingAnnotation}) !=
                 stringAt(now, {"metadata", "annotations", kBackendDrainingAnnotation})) {
           changed();
         }
       },
       nodeSetChanged});
  // A share that ends is room for a waiting pod: the parked ones are put back. A new or
  // changed one, and an assignment, only change the list.
  auto frontendNow = [this](const json& pod, bool gone) {
    auto share = gone ? std::nullopt : heldShare(pod);
    const bool ends = !share;
    if (updateFrontend(cacheKey(pod), std::move(share), gone ? std::nullopt : assignedPod(pod)) &&
        ends && onChange_) {
      onChange_();
    }
  };
  gvirtusPods_->addHandlers({[=](const json& pod) { frontendNow(pod, false); },
                             [=](const json&, const json& pod) { frontendNow(pod, false); },
                             [=](const json& pod) { frontendNow(pod, true); }});
  nodes_->start();
  pods_->start();
  gvirtusPods_->start();  // and with it frontends_
}

void ClusterBackendSource::stop() {
  frontends_->stop();
  pods_->stop();
  nodes_->stop();
}

bool ClusterBackendSource::ready() const {
  return pods_->hasSynced() && nodes_->hasSynced() && frontends_->hasSynced();
}

BackendSnapshot ClusterBackendSource::backends() const {
  uint64_t generation = 0;
  uint64_t assignmentChanges = 0;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    // Only assignments are newer than the list: it serves until it is kAssignmentRefresh
    // old, and while another caller builds the next one.
    if (built_ && (builtAssignmentChanges_ == assignmentChanges_ ||
                   now - builtAt_ < kAssignmentRefresh || building_)) {
      return built_;
    }
    generation = generation_;
    assignmentChanges = assignmentChanges_;
    building_ = true;
  }
  auto out = std::make_shared<const std::vector<Backend>>(buildBackends());
  std::lock_guard lock(mutex_);
  building_ = false;
  if (generation == generation_) {
    built_ = out;
    builtAt_ = now;
    builtAssignmentChanges_ = assignmentChanges;
  }
  return out;
}

std::vector<Backend> ClusterBackendSource::buildBackends() const {
  std::vector<Backend> out;
  {
    // A backend pod is read again only when it or its node has changed: during a burst of
    // admissions the list is built ten times a second, and its backend pods' load reports
    // are the same each time. A version unknown (empty) is never taken as unchanged.
    std::lock_guard lock(readMutex_);
    std::unordered_map<std::string, ReadBackend> read;
    for (const auto& pod : pods_->list()) {
      auto node = nodeOf(*pod);
      ReadBackend now{.podVersion = stringAt(*pod, {"metadata", "resourceVersion"}),
                      .nodeVersion = node ? stringAt(*node, {"metadata", "resourceVersion"}) : "",
                      .backend = std::nullopt};
      const std::string key = cacheKey(*pod);
      const auto was = read_.find(key);
      if (was != read_.end() && !now.podVersion.empty() &&
          was->second.podVersion == now.podVersion && (!node || !now.nodeVersion.empty()) &&
          was->second.nodeVersion == now.nodeVersion) {
        now.backend = std::move(was->second.backend);
      } else {
        now.backend = backendFromPod(*pod, node.get(), port_);
      }
      if (now.backend) {
        out.push_back(*now.backend);
      }
      read.insert_or_assign(key, std::move(now));
    }
    read_ = std::move(read);
  }
  // Each backend and its pod's "namespace/name" by endpoint, made once per build, not once
  // per assignment.
  std::unordered_map<std::string, std::pair<Backend*, std::string>> byEndpoint;
  for (auto& backend : out) {
    byEndpoint[backend.endpoint()] = {&backend, backend.podNamespace + "/" + backend.podName};
  }
  // Older assignments would only be counted out again by the chooser: the list stays short.
  const auto since = std::chrono::system_clock::now() - assignmentWindow_;
  std::lock_guard lock(mutex_);
  for (const auto& [pod, held] : shares_) {
    if (auto it = byEndpoint.find(held.first); it != byEndpoint.end()) {
      it->second.first->shares.push_back(held.second);
    }
  }
  // Only those created within the window, from the index by creation time (a pod's
  // creation time never changes): a build costs the recent assignments, not every GVirtuS
  // pod of the cluster, and what left the window leaves the index for good.
  const auto left =
      std::ranges::find_if(recentAssigned_, [&](const auto& entry) { return entry.first > since; });
  for (auto it = recentAssigned_.begin(); it != left; ++it) {
    assigned_.erase(it->second);
  }
  recentAssigned_.erase(recentAssigned_.begin(), left);
  for (const auto& recent : recentAssigned_) {
    const auto& given = assigned_.at(recent.second);
    auto it = byEndpoint.find(given.first);
    if (it == byEndpoint.end()) {
      continue;
    }
    const auto& [backend, podRef] = it->second;
    const std::string& backendPod = given.second.backendPod;
    if (backendPod.empty() || backendPod == podRef) {
      backend->assigned.push_back(given.second);
    }
  }
  auto wiredTo = [&](const std::string& key) {
    auto wired = wiredCount_.find(key);
    return wired == wiredCount_.end() ? int64_t{0} : wired->second;
  };
  for (auto& backend : out) {
    // Its own pods, and those that name no backend pod (written before the webhook named
    // one); not those of an earlier backend pod that had its address.
    backend.wired = wiredTo(wiredKey(backend.endpoint(), ""));
    if (!backend.podName.empty()) {
      backend.wired += wiredTo(wiredKey(backend.endpoint(), backend.podRef()));
    }
    backend.indexAssigned();
  }
  return out;
}

}  // namespace gvirtus::webhook
