#pragma once

#include <memory>
#include <string>

#include "common/base/error.h"
#include "common/base/unique_fd.h"

namespace gvirtus::backend_shim {

// A listening unix stream socket (non-blocking, close-on-exec) in a folder of its own that
// only this user can enter (mode 0700, from mkdtemp): the socket needs no permission of its
// own, and nobody else can connect or put another file in its place. The folder goes with
// the object.
class PrivateUnixListener {
 public:
  // In a new folder "<parentDir>/<prefix>XXXXXX" (parentDir empty: $TMPDIR, else /tmp),
  // the socket named `name`.
  static Result<std::unique_ptr<PrivateUnixListener>> open(const std::string& parentDir,
                                                           const std::string& prefix,
                                                           const std::string& name, int backlog);
  ~PrivateUnixListener();
  PrivateUnixListener(const PrivateUnixListener&) = delete;
  PrivateUnixListener& operator=(const PrivateUnixListener&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }

  class PassKey {
    friend class PrivateUnixListener;
    explicit PassKey() = default;
  };
  PrivateUnixListener(PassKey, std::string dir);

 private:
  std::string dir_;
  std::string path_;
  UniqueFd fd_;
};

}  // namespace gvirtus::backend_shim
