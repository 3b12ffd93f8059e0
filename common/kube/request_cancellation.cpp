#include "common/kube/request_cancellation.h"

#include <sys/socket.h>

#include <utility>

namespace gvirtus::kube_detail {

RequestCancellation::RequestCancellation(httplib::ClientImpl& http, std::stop_token first,
                                         std::stop_token second)
    : http_(http) {
  http_.set_socket_options([this](socket_t socket) {
    socket_.store(socket);
    if (cut_.load()) {
      http_.set_connection_timeout(0, 1000);
      http_.set_read_timeout(0, 1000);
    }
  });
  onFirst_.emplace(std::move(first), Cut{this});
  onSecond_.emplace(std::move(second), Cut{this});
}

RequestCancellation::~RequestCancellation() {
  onFirst_.reset();
  onSecond_.reset();
  http_.set_socket_options(nullptr);
}

void RequestCancellation::Cut::operator()() const {
  self->cut_.store(true);
  if (const int socket = self->socket_.load(); socket >= 0) {
    ::shutdown(socket, SHUT_RDWR);  // not close: the descriptor stays httplib's
  } else {
    self->http_.stop();
  }
}

}  // namespace gvirtus::kube_detail
