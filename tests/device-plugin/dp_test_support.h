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

namespace gvirtus::device_plugin::test {

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/dp-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

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

// GET http://127.0.0.1:port/path; returns {status, body}, {0, ""} when nothing answers.
inline std::pair<int, std::string> httpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return {0, ""};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return {0, ""};
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    ::close(fd);
    return {0, ""};
  }
  std::string response;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (response.size() < 12)
    return {0, ""};
  const int status = std::stoi(response.substr(9, 3));
  const auto bodyAt = response.find("\r\n\r\n");
  return {status, bodyAt == std::string::npos ? "" : response.substr(bodyAt + 4)};
}

}  // namespace gvirtus::device_plugin::test
