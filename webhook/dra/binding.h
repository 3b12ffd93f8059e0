#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/contract/dra_claim.h"
#include "common/time/duration.h"
#include "webhook/placement/backend.h"

// Binding conditions (KEP-5007, on by default from Kubernetes 1.36): each published device
// names a condition kube-scheduler waits for before it binds a pod whose claim was given
// that device, and one that makes it give the device up. The claim binder answers them in
// the claim's status.devices once it has asked the device's backend whether it has room for
// one more session: the same question the chooser answers on the label path (docs/dra.md).
namespace gvirtus::webhook {

// True: the backend has room; kube-scheduler binds the pod.
inline constexpr const char* kBackendReadyCondition = "gpu.gvirtus.io/BackendReady";
// True: the backend is gone, draining, or stayed full past --dra-binding-timeout;
// kube-scheduler gives the device up and allocates the claim again.
inline constexpr const char* kBackendRefusedCondition = "gpu.gvirtus.io/BackendRefused";

// What a claim waits for from the binder: the results of our driver that carry our binding
// conditions (kube-scheduler copies them from the slice at allocation) and have no answer
// of ours in status.devices yet. Empty when nothing waits.
struct BindingWait {
  std::vector<dra::AllocatedDevice> devices;
  // status.allocation.allocationTimestamp: when kube-scheduler allocated it; what the
  // binding timeout counts from. Unset where the scheduler wrote none.
  std::optional<std::chrono::system_clock::time_point> allocatedAt;
};
BindingWait bindingWait(const nlohmann::json& claim);

enum class BindingAnswer { kReady, kWait, kRefuse };

struct BindingDecision {
  BindingAnswer answer = BindingAnswer::kWait;
  // For the condition (CamelCase) and the log line.
  std::string reason;
  std::string message;
};

// One device's answer. `backend`: the backend pod the device's pool names, null when it is
// not among the backends that can be given pods now (gone, not ready). `noRoom`: why the
// chooser found no room there for one more session, nullopt when it did. `waited`: since
// allocation. A backend gone or draining is refused at once, so that kube-scheduler
// allocates again elsewhere; a full one is waited for until `timeout`.
BindingDecision decideBinding(const Backend* backend, const std::optional<std::string>& noRoom,
                              Duration waited, Duration timeout);

// The server-side apply body that gives each of `devices` of `claim` its condition: `True`
// of kBackendReadyCondition, or of kBackendRefusedCondition, as `decision` says.
nlohmann::json bindingStatus(const nlohmann::json& claim,
                             const std::vector<dra::AllocatedDevice>& devices,
                             const BindingDecision& decision,
                             std::chrono::system_clock::time_point now);

// The binding conditions a published device carries (webhook/dra/slice.h): added to each
// device of `slice`.
void addBindingConditions(nlohmann::json& slice);

}  // namespace gvirtus::webhook
