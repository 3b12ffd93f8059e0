#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "common/base/error.h"
#include "common/base/unique_fd.h"

// The listening socket of an HttpServer: accepts connections and hands each on, and opens
// the socket again on the same port when accepting fails. Internal to HttpServer.
namespace gvirtus {

class HttpListener {
 public:
  using Admit = std::function<void(UniqueFd)>;

  // `name` names the server in log lines.
  HttpListener(std::string host, int port, std::string name);

  // Binds the address (an address in use is an error).
  Result<void> bind();
  // Hands accepted connections (non-blocking) to `admit` until stop(); when accepting
  // fails, opens the socket again once a second until it can.
  void run(const Admit& admit);
  // Wakes run() and makes it return. Idempotent.
  void stop();
  // The bound port (useful with port 0); 0 before bind().
  int port() const;

 private:
  // Until the socket is shut down or fails.
  void acceptConnections(const Admit& admit);
  Result<void> bindLocked();
  // False once stopped.
  bool reopen(std::unique_lock<std::mutex>& lock);

  const std::string host_;
  int requestedPort_;
  const std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> stopped_{false};  // set under mutex_
  UniqueFd fd_;                       // changed under mutex_, by run() once it runs
  std::atomic<int> port_{0};
};

}  // namespace gvirtus
