#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"

// Whether a leak restart (--max-leaked-sockets), which can wait, may take this backend down
// now: only while another backend pod is Ready to take new pods, or once it has waited
// --leak-restart-max-defer (a cluster of one backend must still restart). Pure functions;
// LeakRestartGate runs them.
namespace gvirtus::backend_shim {

// A backend pod as the decision reads it.
struct BackendPod {
  std::string name;
  bool ready = false;  // Ready, with an IP, not terminating: the webhook may choose it
};

// `pod` as a BackendPod: ready when its Ready condition is True, it has an IP and no
// deletionTimestamp (the webhook's rule for a backend it may hand out).
BackendPod backendPodFrom(const nlohmann::json& pod);

struct LeakRestartDecision {
  bool restart = false;
  std::string reason;  // for the log: why it may go, or why it waits
};

// `pods`: the backend pods as just read (this one, `self`, among them or not), or why they
// could not be read. `deferredFor`: how long this restart has been due. A read that failed
// defers too: without it no other backend is known to be Ready.
LeakRestartDecision decideLeakRestart(const Result<std::vector<BackendPod>>& pods,
                                      const std::string& self, Duration deferredFor,
                                      Duration maxDefer);

// Whether `self` shows as not Ready in `pods` (its own not-readiness has reached the API
// server, where the other backends read it); false when it is not among them.
bool seenNotReady(const std::vector<BackendPod>& pods, const std::string& self);

}  // namespace gvirtus::backend_shim
