#pragma once

#include <stop_token>

#include "common/time/duration.h"

namespace gvirtus {

// Graceful shutdown on SIGTERM and SIGINT. install() must run first in main, before any
// thread starts: it blocks both signals in every thread (so they are never delivered to a
// random one), ignores SIGPIPE (a peer closing a socket is an error value, not a death),
// and starts a thread that turns the first signal into a stop request.
// How long a binary's teardown may still use the API server after SIGTERM (see
// ShutdownSignal::deadline): short enough that every binary exits within 2 s.
inline constexpr Duration kShutdownClientGrace = std::chrono::milliseconds(1500);

class ShutdownSignal {
 public:
  static ShutdownSignal& install();
  std::stop_token token() const;
  // Requested `grace` after the shutdown request: for what a binary's orderly teardown
  // may still use (its Kubernetes clients, to release a Lease), never longer, so that
  // SIGTERM ends the process promptly even when the API server does not answer. The
  // first call fixes the grace.
  std::stop_token deadline(Duration grace) const;
  // Blocks until a signal arrives or request() is called.
  void wait() const;
  void request();
  // The signal that asked for shutdown, 0 when none (or when request() did).
  int signalNumber() const;
  // How many SIGTERM/SIGINT the signal thread has taken, the first included. Each is
  // counted together with what it decided, so a test that sees a later signal counted
  // knows that signal has already been handled (and changed nothing).
  int signalsReceived() const;
};

}  // namespace gvirtus
