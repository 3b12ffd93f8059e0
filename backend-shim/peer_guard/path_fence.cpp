// Fences gvirtus-backend off one directory (kHiddenPathEnv: the shim's ServiceAccount
// token) before its main runs, with Landlock (Linux 5.13 and later, unprivileged). The
// backend parses tenants' bytes; a tenant that takes it over must not read the token that
// may write the backend pod's load report.
//
// Landlock grants, it does not deny: the process may read only beneath the hierarchies a
// rule names. So the rules name everything but the hidden directory: every entry of each of
// its ancestors except the next one on the way down (the siblings along its path), and the
// ancestors themselves for listing only. Symbolic links get no rule of their own: a path
// through one is checked where it leads (/var/run/secrets leads to /run/secrets). Only
// reading is handled; writing, executing and the rest stay as the image allows.
//
// The library's rules hold (accept_guard.cpp): the C library alone, no C++ library. This
// runs once, in a constructor, before any thread exists.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend-shim/peer_guard/guard_report.h"
#include "backend-shim/peer_guard/peer_guard_protocol.h"

namespace gvirtus::peer_guard {
namespace {

constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;

// What getdents64 writes, one entry after another.
struct DirectoryEntry {
  uint64_t inode;
  int64_t offset;
  unsigned short length;
  unsigned char type;
  char name[1];
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool allow(int ruleset, int fd, uint64_t access) {
  landlock_path_beneath_attr rule{};
  rule.allowed_access = access;
  rule.parent_fd = fd;
  return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) == 0;
}

// Grants reading beneath every entry of `directory` but `keep` and symbolic links.
bool allowSiblings(int ruleset, int directory, const char* keep) {
  alignas(8) char buffer[4096];
  for (;;) {
    const long size = syscall(SYS_getdents64, directory, buffer, sizeof(buffer));
    if (size < 0) {
      return false;
    }
    if (size == 0) {
      return true;
    }
    for (long at = 0; at < size;) {
      const auto* entry = reinterpret_cast<const DirectoryEntry*>(buffer + at);
      at += entry->length;
      const char* name = entry->name;
      if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, keep) == 0) {
        continue;
      }
      Fd child(openat(directory, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
      struct stat status {};
      if (child.get() < 0 || syscall(SYS_fstat, child.get(), &status) != 0) {
        continue;  // gone meanwhile: nothing to read there
      }
      if (S_ISLNK(status.st_mode)) {
        continue;
      }
      const uint64_t access = S_ISDIR(status.st_mode) ? kRead : LANDLOCK_ACCESS_FS_READ_FILE;
      if (!allow(ruleset, child.get(), access)) {
        return false;
      }
    }
  }
}

// Adds the rules for the rest of the hidden path, `rest` ("a/b/c"), below `directory`.
bool addRulesBelow(int ruleset, int directory, char* rest) {
  char* slash = strchr(rest, '/');
  if (slash != nullptr) {
    *slash = '\0';
  }
  if (!allowSiblings(ruleset, directory, rest)) {
    return false;
  }
  if (slash == nullptr) {
    return true;  // `rest` is the hidden directory: no rule reaches beneath it
  }
  // One level down: that ancestor may be listed, and its other entries read.
  Fd next(openat(directory, rest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  return next.get() >= 0 && allow(ruleset, next.get(), LANDLOCK_ACCESS_FS_READ_DIR) &&
         addRulesBelow(ruleset, next.get(), slash + 1);
}

// Adds the rules for `hidden` (an absolute path with no symbolic link, not "/").
bool addRules(int ruleset, char* hidden) {
  Fd root(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return root.get() >= 0 && allow(ruleset, root.get(), LANDLOCK_ACCESS_FS_READ_DIR) &&
         addRulesBelow(ruleset, root.get(), hidden + 1);
}

[[gnu::constructor]] void fenceHiddenPath() {
  const char* wanted = getenv(kHiddenPathEnv);
  if (wanted == nullptr || *wanted == '\0') {
    return;
  }
  char hidden[PATH_MAX];
  if (realpath(wanted, hidden) == nullptr) {
    return;  // nothing there to hide (no token mounted)
  }
  if (strcmp(hidden, "/") == 0) {
    report("GVIRTUS_HIDDEN_PATH names the root; the process exits", wanted);
    syscall(SYS_exit_group, 2);
  }
  landlock_ruleset_attr attributes{};
  attributes.handled_access_fs = kRead;
  Fd ruleset(
      static_cast<int>(syscall(SYS_landlock_create_ruleset, &attributes, sizeof(attributes), 0)));
  if (ruleset.get() < 0) {
    // An old kernel, or a seccomp profile without Landlock: the shim says so at its start.
    report("Landlock is not available: this process can read", hidden);
    return;
  }
  // A fence half built would hide too much or too little: the process does not run.
  if (!addRules(ruleset.get(), hidden) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    report("cannot fence off the hidden path; the process exits", hidden);
    syscall(SYS_exit_group, 2);
  }
}

}  // namespace
}  // namespace gvirtus::peer_guard
