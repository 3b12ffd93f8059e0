#pragma once

// The guard's few lines on the backend's stderr (the shim forwards it to the pod's log).
// Async-signal-safe: one write(2) per line, no allocation, no lock.
namespace gvirtus::peer_guard {

// "gvirtus-peer-guard: MESSAGE (DETAIL)\n"; DETAIL may be null.
void report(const char* message, const char* detail);

// The same with an errno number for DETAIL, at most once every ten seconds in the whole
// process: for what can go wrong at every accept (the gate unreachable) and must not flood.
void reportThrottled(const char* message, int error);

}  // namespace gvirtus::peer_guard
