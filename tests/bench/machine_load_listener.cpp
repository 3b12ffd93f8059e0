// Linked into every benchmark (gvirtus_test, label bench): after each test case, the load
// of the whole machine while it ran, from /proc/stat's CPU times at its start and end, and
// the load average at its end. A figure taken while the machine was busy with anything else
// (another build, the control plane) says so beside it; with $GVIRTUS_BENCH_OUT, run.sh
// puts the lines in docs/performance.md too (load.rows).
#include <unistd.h>

// Catch2's listener interface is declared only where this is defined.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "bench/bench_output.h"

namespace {

struct CpuTimes {
  unsigned long long busy = 0;
  unsigned long long total = 0;
};

// The first line of /proc/stat: "cpu user nice system idle iowait irq softirq steal ...".
std::optional<CpuTimes> readCpuTimes() {
  std::ifstream stat("/proc/stat");
  std::string line;
  if (!std::getline(stat, line) || !line.starts_with("cpu ")) {
    return std::nullopt;
  }
  std::istringstream fields(line.substr(4));
  CpuTimes times;
  unsigned long long value = 0;
  for (int i = 0; i < 8 && fields >> value; ++i) {
    times.total += value;
    if (i != 3 && i != 4) {  // idle and iowait are not work
      times.busy += value;
    }
  }
  return times;
}

double loadAverage() {
  double oneMinute = 0;
  std::ifstream("/proc/loadavg") >> oneMinute;
  return oneMinute;
}

class MachineLoadListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    start_ = readCpuTimes();
    began_ = std::chrono::steady_clock::now();
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    TestEventListenerBase::testCaseEnded(stats);
    const auto end = readCpuTimes();
    if (!start_ || !end || end->total <= start_->total) {
      return;
    }
    const double busy = 100.0 * static_cast<double>(end->busy - start_->busy) /
                        static_cast<double>(end->total - start_->total);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    const std::string& name = stats.testInfo.name;
    std::printf(
        "machine load while \"%s\" ran (%.0f s): %ld CPUs %.0f%% busy, every process counted; "
        "load average %.2f at its end\n",
        name.c_str(), seconds, cpus, busy, loadAverage());
    std::fflush(stdout);
    gvirtus::bench::append(
        "load.rows", gvirtus::bench::format("| %s | %.0f s | %.0f%% of %ld CPUs | %.2f |\n",
                                            name.c_str(), seconds, busy, cpus, loadAverage()));
  }

 private:
  std::optional<CpuTimes> start_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace

CATCH_REGISTER_LISTENER(MachineLoadListener)
