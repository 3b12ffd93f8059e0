#pragma once

// Helpers of the device plugin's tests: temporary folders with short paths (a unix socket
// path must fit in 108 bytes), a fake kubelet serving Registration on kubelet.sock with
// the plugin's own generated API, a DevicePlugin client, and a plain HTTP GET.

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deviceplugin_v1beta1.grpc.pb.h"
#include "support/temp_dir.h"

namespace gvirtus::device_plugin::test {

using gvirtus::testing::TempDir;

// The kubelet's Registration service on <dir>/kubelet.sock; keeps every request.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(const std::filesystem::path& dir) : socket_(dir / "kubelet.sock") {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_.string(), grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
  }
  ~FakeKubelet() override { stop(); }

  // Ends the server; gRPC removes kubelet.sock with it.
  void stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_.reset();
    }
  }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(*request);
    }
    changed_.notify_all();
    return grpc::Status::OK;
  }

  size_t count() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }
  // Waits for the n-th request (1-based).
  std::optional<v1beta1::RegisterRequest> awaitRequest(
      size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return requests_.size() >= n; })) {
      return std::nullopt;
    }
    return requests_[n - 1];
  }

 private:
  std::filesystem::path socket_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<v1beta1::RegisterRequest> requests_;
};

inline std::unique_ptr<v1beta1::DevicePlugin::Stub> pluginClient(
    const std::filesystem::path& socket) {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
}

inline std::unique_ptr<grpc::ClientContext> callContext(
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

}  // namespace gvirtus::device_plugin::test
