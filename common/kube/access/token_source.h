#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>

#include "common/time/duration.h"

// Private to the KubeClient (kube_*.cpp).
namespace gvirtus::kube_detail {

// The bearer token: static, or read from a file that is re-read when it changes
// (projected service account tokens rotate). Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file, Duration checkInterval)
      : static_(std::move(token)), file_(std::move(file)), checkInterval_(checkInterval) {}

  // The token to send: the file's (looked at no more often than the check interval), the
  // last good one while the file cannot be read, or the static one.
  std::string current();

 private:
  const std::string static_;
  const std::string file_;
  const Duration checkInterval_;
  std::mutex mutex_;
  bool loaded_ = false;
  bool warned_ = false;
  std::string cached_;
  std::filesystem::file_time_type mtime_;
  uintmax_t size_ = 0;
  std::chrono::steady_clock::time_point checked_;
};

}  // namespace gvirtus::kube_detail
