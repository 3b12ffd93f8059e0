#pragma once

// Who used the machine's CPU during one step of a benchmark: every process's CPU seconds
// from /proc, and the machine's busy time from /proc/stat. On a 2-core test bed the API
// server, etcd, kwok and the webhooks share the cores, and a latency or a rate the webhook
// does not reach on its own shows here as cores already busy with the others.

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_output.h"
#include "bench/process_stats.h"

namespace gvirtus::bench {

struct CpuReading {
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
  double machineBusy = 0;                               // CPU seconds, all cores
  std::map<int, std::pair<std::string, double>> byPid;  // pid: (command, CPU seconds)
};

inline std::string processName(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// user + nice + system + irq + softirq + steal of the "cpu" line, in seconds.
inline double machineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

inline CpuReading readCpu() {
  CpuReading reading;
  reading.machineBusy = machineBusySeconds();
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* entry = ::readdir(proc)) {
      const int pid = std::atoi(entry->d_name);
      if (pid > 0) {
        reading.byPid[pid] = {processName(pid), cpuSeconds(pid)};
      }
    }
    ::closedir(proc);
  }
  return reading;
}

// "cores busy 1.93 of 2: kube-apiserver 0.71, etcd 0.35, ...": the machine's busy cores
// between two readings and the `top` processes' share, in cores (CPU seconds per second).
// `names` renames pids the caller knows (the webhook replicas share one command name).
inline std::string cpuProfile(const CpuReading& before, const CpuReading& after, size_t top,
                              const std::map<int, std::string>& names = {}) {
  const double elapsed = std::chrono::duration<double>(after.at - before.at).count();
  if (elapsed <= 0) {
    return "no time passed";
  }
  std::map<std::string, double> byName;
  for (const auto& [pid, reading] : after.byPid) {
    const auto was = before.byPid.find(pid);
    const double used = reading.second - (was == before.byPid.end() ? 0 : was->second.second);
    const auto named = names.find(pid);
    byName[named == names.end() ? reading.first : named->second] += used;
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [name, used] : byName) {
    ranked.emplace_back(used, name);
  }
  std::ranges::sort(ranked, std::greater<>());
  std::string text =
      format("%.2f of %ld cores busy:", (after.machineBusy - before.machineBusy) / elapsed,
             ::sysconf(_SC_NPROCESSORS_ONLN));
  for (size_t i = 0; i < std::min(top, ranked.size()); ++i) {
    text += format("%s %s %.2f", i == 0 ? "" : ",", ranked[i].second.c_str(),
                   ranked[i].first / elapsed);
  }
  return text;
}

}  // namespace gvirtus::bench
