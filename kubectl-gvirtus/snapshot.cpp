#include "kubectl-gvirtus/snapshot.h"

#include <iterator>

#include "common/contract/dra_names.h"
#include "common/contract/labels.h"
#include "common/kube/api/resource.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

// Pages of this many objects: a large cluster's pods are not read in one response.
constexpr int64_t kPageSize = 500;

Result<std::vector<nlohmann::json>> listAll(KubeClient& client, const KubeResource& resource,
                                            const std::string& ns, ListOptions options,
                                            const std::string& what) {
  options.limit = kPageSize;
  auto page = client.listAll(resource, ns, options);
  if (!page) {
    return fail(page.error().context("list " + what));
  }
  return std::move(page->items);
}

}  // namespace

Result<Snapshot> readCluster(KubeClient& client, const Options& options, bool withEvents) {
  Snapshot out;
  ListOptions backends;
  backends.labelSelector = options.backendSelector;
  auto pods = listAll(client, resources::kPods, options.backendNamespace, backends,
                      "backend pods in " + options.backendNamespace);
  if (!pods) {
    return fail(pods.error());
  }
  out.backendPods = std::move(*pods);
  ListOptions gvirtus;
  gvirtus.labelSelector = std::string(names::kEnabledLabel) + "=true";
  pods = listAll(client, resources::kPods, "", gvirtus, "GVirtuS pods");
  if (!pods) {
    return fail(pods.error());
  }
  out.gvirtusPods = std::move(*pods);
  if (!withEvents) {
    return out;
  }
  // A field selector matches one value per field: one list per reason.
  for (const char* reason :
       {"WaitingForBackend", names::kBackendLostReason, names::kBackendLostRecreatedReason}) {
    ListOptions about;
    about.fieldSelector = std::string("involvedObject.kind=Pod,reason=") + reason;
    auto events = listAll(client, resources::kEvents, "", about, std::string(reason) + " Events");
    if (!events) {
      return fail(events.error());
    }
    out.events.insert(out.events.end(), std::make_move_iterator(events->begin()),
                      std::make_move_iterator(events->end()));
  }
  ListOptions webhooks;
  webhooks.labelSelector = std::string(dra::kManagedByLabel) + "=" + dra::kManagedBy;
  if (auto rules = listAll(client, dra::kDeviceTaintRules, "", webhooks, "DeviceTaintRules")) {
    out.taintRules = std::move(*rules);
  } else if (!rules.error().isNotFound() && rules.error().httpStatus != 403) {
    return fail(rules.error());
  }
  return out;
}

Result<PodSnapshot> readPod(KubeClient& client, const std::string& ns, const std::string& name) {
  PodSnapshot out;
  auto pod = client.get(resources::kPods, ns, name);
  if (!pod) {
    if (pod.error().isNotFound()) {
      return fail("pod " + ns + "/" + name + " not found");
    }
    return fail(pod.error().context("get pod " + ns + "/" + name));
  }
  out.pod = std::move(*pod);
  ListOptions about;
  about.fieldSelector = "involvedObject.kind=Pod,involvedObject.name=" + name;
  auto events = listAll(client, resources::kEvents, ns, about, "Events of " + ns + "/" + name);
  if (!events) {
    return fail(events.error());
  }
  out.events = std::move(*events);
  return out;
}

}  // namespace gvirtus::kubectl_gvirtus
