#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "common/base/error.h"
#include "common/cache/object_cache.h"
#include "common/controller/leader_controller.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/placement/source.h"

// The DRA slice publisher (--dra, docs/dra.md): keeps one ResourceSlice of the driver
// gpu.gvirtus.io per backend pod that has GPUs to offer (webhook/dra/slice.h), and none for
// any other: a backend that is gone or not ready is withdrawn, a draining one too unless its
// devices can be tainted (SlicePublisherOptions::taintDraining).
namespace gvirtus::webhook {

// The writes of the publisher, one ResourceSlice each.
struct SliceApi {
  std::function<Result<void>(const nlohmann::json& slice)> create;
  // PUT; the slice carries the resourceVersion it replaces (a compare-and-swap).
  std::function<Result<void>(const nlohmann::json& slice)> update;
  // DELETE, only if it still has `uid` (a precondition).
  std::function<Result<void>(const std::string& name, const std::string& uid)> remove;
};
SliceApi sliceApi(KubeClient& client);

// The cache of this driver's ResourceSlices that the publisher compares with (and only
// those: a field selector on spec.driver).
std::string sliceFieldSelector();

struct SlicePublisherOptions {
  // A draining backend's devices stay published, tainted NoSchedule, instead of withdrawn
  // (resourceSliceFor()): only where the API server serves device taints.
  bool taintDraining = false;
  // Each device carries the claim binder's binding conditions (webhook/dra/binding.h): only
  // where the API server serves them.
  bool bindingConditions = false;
  // A failed write comes back after these, per slice.
  Duration backoffInitial = std::chrono::milliseconds(500);
  Duration backoffMax = std::chrono::seconds(30);
};

// On the shared controller loop (common/controller/controller.h), one key per slice name: a change
// of the backends (backendsChanged(), from the source's onChange) queues the slice of every backend
// and every slice held; a slice that changed or went queues itself (an edit or a delete by someone
// else is undone); gaining leadership queues all. sync(name) writes at most one create, update
// (pool generation raised by one) or delete. A backend's load report changes every few seconds and
// its devices do not: a slice is rewritten only when what it publishes differs (compareSlices());
// one that differs where the API server lets nothing change (another pool, a node name: someone
// else's) is deleted and made again.
class SlicePublisher {
 public:
  // Adds its handlers to `slices`, which must not have started. Both must outlive it.
  SlicePublisher(const BackendSource& backends, ObjectCache& slices, SliceApi api,
                 SlicePublisherOptions options = {});

  // The backends may have changed: the slices of those whose offer changed (or that came
  // or went) are looked at. A load report changes no offer, and comes every few seconds
  // from every backend.
  void backendsChanged();

  // The leader's work: runs until `stop`. May run again after it returned.
  void run(std::stop_token stop);

  // Brings the slice `name` to what the backends say; true when it wrote.
  Result<bool> sync(const std::string& name);

 private:
  void enqueueAll();
  // Deletes `held`, the slice this cache holds; gone already is no error.
  Result<void> remove(const nlohmann::json& held);

  const BackendSource& backends_;
  ObjectCache& slices_;
  const SliceApi api_;
  const bool taintDraining_;
  const bool bindingConditions_;
  LeaderController leader_;
  std::mutex mutex_;
  // By slice name: what its backend offered at the last change (offerOf()).
  std::map<std::string, std::string> offers_;
};

}  // namespace gvirtus::webhook
