#include "common/kube/access/token_source.h"

#include <fstream>
#include <sstream>
#include <system_error>

#include "common/base/strings.h"
#include "common/telemetry/log.h"

namespace gvirtus::kube_detail {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string TokenSource::current() {
  if (file_.empty()) {
    return static_;
  }
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (loaded_ && now - checked_ < checkInterval_) {
    return cached_;
  }
  checked_ = now;
  std::error_code ec;
  const auto mtime = fs::last_write_time(file_, ec);
  const auto size = ec ? 0 : fs::file_size(file_, ec);
  if (ec) {
    if (!warned_) {
      log::warn("cannot stat the token file", {{"file", file_}, {"error", ec.message()}});
      warned_ = true;
    }
    return loaded_ ? cached_ : static_;
  }
  if (loaded_ && mtime == mtime_ && size == size_) {
    return cached_;
  }
  std::ifstream in(file_, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string token(trim(contents.str()));
  if (!in.good() && !in.eof()) {
    return loaded_ ? cached_ : static_;
  }
  if (token.empty()) {
    // Mid-rotation or broken: keep the last good token.
    return loaded_ ? cached_ : static_;
  }
  if (loaded_ && token != cached_) {
    log::debug("bearer token file changed", {{"file", file_}});
  }
  cached_ = std::move(token);
  mtime_ = mtime;
  size_ = size;
  loaded_ = true;
  warned_ = false;
  return cached_;
}

}  // namespace gvirtus::kube_detail
