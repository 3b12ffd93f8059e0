#pragma once

#include <stop_token>

namespace gvirtus {

// Graceful shutdown on SIGTERM and SIGINT. install() must run first in main, before any
// thread starts: it blocks both signals in every thread (so they are never delivered to a
// random one), ignores SIGPIPE (a peer closing a socket is an error value, not a death),
// and starts a thread that turns the first signal into a stop request.
class ShutdownSignal {
 public:
  static ShutdownSignal& install();
  std::stop_token token() const;
  // Blocks until a signal arrives or request() is called.
  void wait() const;
  void request();
  // The signal that asked for shutdown, 0 when none (or when request() did).
  int signalNumber() const;
};

}  // namespace gvirtus
