#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/base/error.h"

// Reading /proc without exceptions: a process's files vanish mid-read (ESRCH) when it exits,
// which iostreams report by throwing.
namespace gvirtus::backend_shim {

// The whole file, read with read(2).
Result<std::string> readProcFile(const std::string& path);

struct ProcStat {
  char state = 0;  // R, S, D, Z, ...
  pid_t parent = 0;
  pid_t group = 0;  // process group id
};

// /proc/PID/stat's state, parent and process group; nullopt when the process is gone.
std::optional<ProcStat> readProcStat(pid_t pid);

// Every pid /proc lists now (a listing that fails midway is tried again a few times).
std::vector<pid_t> listPids();

}  // namespace gvirtus::backend_shim
