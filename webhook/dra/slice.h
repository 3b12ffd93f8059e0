#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/contract/dra_names.h"
#include "webhook/placement/backend.h"

// The DRA view of a backend (docs/dra.md): each GPU of a Ready backend pod is one device of
// the driver gpu.gvirtus.io, published in a ResourceSlice of its own pool. The device is
// not on any node: the slice's node selector names the nodes frontends may run on, and
// kube-scheduler shares it among claims through consumable capacity (memory, sessions).
namespace gvirtus::webhook {

inline constexpr const char* kDraDriver = dra::kDriver;
// A backend without a session limit (maxSessions 0) offers this many per device: DRA has
// no unlimited capacity, and a shared device needs a sessions figure to be counted.
inline constexpr int64_t kUnlimitedSessions = 1024;
// The API's limit of devices in one ResourceSlice.
inline constexpr size_t kMaxSliceDevices = 128;
// On each slice the publisher writes, and each DeviceTaintRule the follower writes.
using dra::kManagedBy;
using dra::kManagedByLabel;

using dra::kResourceSlices;

// `name` as an object's name: as it is when it fits the API's 253 characters, else cut with a
// digest of the whole at its end, so that two long names stay apart.
std::string boundedName(const std::string& name);

// The ResourceSlice's name for a backend pod: "gvirtus-NAMESPACE-POD", shortened with a hash
// of the whole where that would be longer than a name may be. Stable: every replica, and
// the next leader, finds the slice it wrote.
std::string sliceName(const Backend& backend);

// The taint a draining backend's devices carry (effect NoSchedule): claims allocated there
// keep their pods, new ones go elsewhere.
inline constexpr const char* kBackendDrainingTaintKey = "gpu.gvirtus.io/draining";

// The ResourceSlice that publishes `backend`'s GPUs (apiVersion resource.k8s.io/v1), with
// pool generation `generation`; nullopt when it has none to offer: no load report, no GPU
// with memory. A backend whose node is draining takes no new claims: with `taintDraining`
// (the API server serves device taints, Kubernetes 1.37) its devices stay published tainted
// NoSchedule (kBackendDrainingTaintKey); without, it is withdrawn (nullopt).
//
// Its sessions are maxSessions shared evenly among its GPUs (a backend's limit is one for
// all its GPUs, and one device's capacity cannot be counted against another's: rounded down,
// so that together they never offer more; with fewer sessions than GPUs, one GPU per
// session is offered). The pool is "NAMESPACE/POD", or the slice's name where that would be
// too long.
std::optional<nlohmann::json> resourceSliceFor(const Backend& backend, int64_t generation = 1,
                                               bool taintDraining = false);

// What it takes to bring a slice the API server holds to the one it should be.
enum class SliceChange {
  kNone,
  // Its devices, node selector or label differ (an edit by someone else, or a changed
  // backend): an update.
  kUpdate,
  // It differs where the API server lets nothing change (driver, pool name, node name,
  // node selection): only deleting it and creating the right one will do.
  kReplace,
};
// Compares what `held` publishes with `wanted`, whatever form the API server wrote the
// quantities back in ("80Gi" for "81920Mi") and whatever the pool generation.
SliceChange compareSlices(const nlohmann::json& held, const nlohmann::json& wanted);

}  // namespace gvirtus::webhook
