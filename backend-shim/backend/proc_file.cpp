#include "backend-shim/backend/proc_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <sstream>

namespace gvirtus::backend_shim {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};

constexpr int kListAttempts = 5;

}  // namespace

Result<std::string> readProcFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return fail(path + ": " + std::strerror(errno));
  }
  FdCloser closer{fd};
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) {
      return text;
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail(path + ": " + std::strerror(errno));
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

std::optional<ProcStat> readProcStat(pid_t pid) {
  auto text = readProcFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text) {
    return std::nullopt;
  }
  // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses, so split at the last ')'.
  const auto close = text->rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(text->substr(close + 1));
  ProcStat stat;
  if (!(fields >> stat.state >> stat.parent >> stat.group)) {
    return std::nullopt;
  }
  return stat;
}

std::vector<pid_t> listPids() {
  std::vector<pid_t> pids;
  for (int attempt = 0; attempt < kListAttempts; ++attempt) {
    pids.clear();
    std::unique_ptr<DIR, DirCloser> dir(::opendir("/proc"));
    if (!dir) {
      continue;
    }
    errno = 0;
    while (const dirent* entry = ::readdir(dir.get())) {
      const std::string_view name = entry->d_name;
      pid_t pid = 0;
      auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
      if (ec == std::errc() && end == name.data() + name.size()) {
        pids.push_back(pid);
      }
    }
    if (errno == 0) {
      return pids;
    }
  }
  return pids;
}

}  // namespace gvirtus::backend_shim
