#include "common/telemetry/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

// The process_* metrics every Prometheus client library exports, read from /proc.
namespace gvirtus {
namespace {

std::string readFile(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Fields of /proc/self/stat after the command name (which may hold spaces): index 0 is
// field 3 (state) of proc(5).
std::vector<std::string> selfStatFields() {
  std::string stat = readFile("/proc/self/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) {
    return {};
  }
  std::istringstream in(stat.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; in >> f;) {
    fields.push_back(f);
  }
  return fields;
}

double statField(const std::vector<std::string>& fields, size_t procField) {
  size_t index = procField - 3;
  if (index >= fields.size()) {
    return 0;
  }
  double value = 0;
  const std::string& f = fields[index];
  std::from_chars(f.data(), f.data() + f.size(), value);
  return value;
}

double bootTimeSeconds() {
  std::istringstream in(readFile("/proc/stat"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("btime ")) {
      return std::strtod(line.c_str() + 6, nullptr);
    }
  }
  return 0;
}

double clockTicks() {
  long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? static_cast<double>(ticks) : 100.0;
}

double pageSize() {
  long size = ::sysconf(_SC_PAGESIZE);
  return size > 0 ? static_cast<double>(size) : 4096.0;
}

double statmField(int index) {
  std::istringstream in(readFile("/proc/self/statm"));
  double value = 0;
  for (int i = 0; i <= index; ++i) {
    if (!(in >> value)) {
      return 0;
    }
  }
  return value;
}

}  // namespace

void MetricsRegistry::registerProcessMetrics() {
  counterFunction("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                  [] {
                    auto f = selfStatFields();
                    return (statField(f, 14) + statField(f, 15)) / clockTicks();
                  });
  gaugeFunction("process_open_fds", "Number of open file descriptors.", [] {
    std::error_code ec;
    double count = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++count;
    }
    return count;
  });
  gaugeFunction("process_max_fds", "Maximum number of open file descriptors.", [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
      return std::numeric_limits<double>::infinity();
    }
    return static_cast<double>(limit.rlim_cur);
  });
  gaugeFunction("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                [] { return statmField(0) * pageSize(); });
  gaugeFunction("process_resident_memory_bytes", "Resident memory size in bytes.",
                [] { return statmField(1) * pageSize(); });
  gaugeFunction("process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                [] { return bootTimeSeconds() + statField(selfStatFields(), 22) / clockTicks(); });
}

}  // namespace gvirtus
