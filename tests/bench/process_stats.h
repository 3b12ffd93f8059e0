#pragma once

// What a benchmark reads about a process from /proc: resident memory (VmRSS now, VmHWM at its
// peak) and CPU time; and a sampler that keeps the highest VmRSS seen while load runs.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace gvirtus::bench {

struct Rss {
  double now = 0;   // bytes
  double peak = 0;  // bytes, the process's high-water mark
};

// 0s when the process is gone.
inline Rss residentMemory(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  Rss rss;
  while (std::getline(in, line)) {
    // "VmRSS:	   12345 kB"
    const bool isRss = line.starts_with("VmRSS:");
    if (isRss || line.starts_with("VmHWM:")) {
      (isRss ? rss.now : rss.peak) = std::atof(line.c_str() + 6) * 1024;
    }
  }
  return rss;
}

// User plus system CPU seconds of the process (all its threads); 0 when it is gone.
inline double cpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) {
    return 0;
  }
  // Fields after the command: state is field 3, utime 14, stime 15.
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index >= 14) {
      ticks += std::atof(field.c_str());
    }
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Samples VmRSS of `pid` every 50 ms while it lives; highest() is the most seen.
class RssSampler {
 public:
  explicit RssSampler(int pid)
      : thread_([this, pid](std::stop_token stop) {
          while (!stop.stop_requested()) {
            const double now = residentMemory(pid).now;
            double seen = highest_.load();
            while (now > seen && !highest_.compare_exchange_weak(seen, now)) {
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }) {}
  double highest() const { return highest_.load(); }
  void reset() { highest_ = 0; }

 private:
  std::atomic<double> highest_{0};
  std::jthread thread_;  // last: stops before highest_ goes away
};

}  // namespace gvirtus::bench
