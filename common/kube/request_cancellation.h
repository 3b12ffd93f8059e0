#pragma once

#include <httplib.h>

#include <atomic>
#include <optional>
#include <stop_token>

// Private to the KubeClient: only common/kube/*.cpp include it, so httplib stays out of
// client.h.
namespace gvirtus::kube_detail {

// Cuts the request in flight on `http` when either token is requested. The socket a
// request makes is shut down directly: httplib's stop() would wait for a connect or TLS
// handshake in progress (it holds a lock through both), up to the connection timeout,
// while an API server that black-holes connections keeps the handshake hanging. A stop
// before the request has a socket is caught by the socket-options hook, which runs on the
// requesting thread while the socket is made and shrinks its timeouts; a kept-alive
// socket (no hook) is cut by stop(), which then does not wait.
class RequestCancellation {
 public:
  RequestCancellation(httplib::ClientImpl& http, std::stop_token first, std::stop_token second);
  ~RequestCancellation();
  RequestCancellation(const RequestCancellation&) = delete;
  RequestCancellation& operator=(const RequestCancellation&) = delete;

  bool cut() const { return cut_.load(); }

 private:
  struct Cut {
    RequestCancellation* self;
    void operator()() const;
  };
  httplib::ClientImpl& http_;
  std::atomic<bool> cut_{false};
  std::atomic<int> socket_{-1};
  std::optional<std::stop_callback<Cut>> onFirst_;
  std::optional<std::stop_callback<Cut>> onSecond_;
};

}  // namespace gvirtus::kube_detail
