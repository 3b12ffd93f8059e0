#pragma once

// Where a process's CPU went during one benchmark step, by function, from Linux perf: the
// evidence beside a figure that misses its goal when /proc's CPU seconds say only how much.
// Optional: recorded only when $BENCH_PERF names the perf binary (BENCH_PERF=perf finds it
// on PATH); perf's DWARF unwinding reads the -g of our RelWithDebInfo-like build.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_output.h"
#include "support/child_process.h"
#include "support/temp_dir.h"

namespace gvirtus::bench {

// One line of `perf report --children`: the share of samples in `name` and below it, and in
// it alone.
struct PerfFunction {
  double children = 0;
  double self = 0;
  std::string name;
};

// perf report's symbol, without its argument list (the first parenthesis outside template
// arguments) and clipped: enough to find it in the code.
inline std::string shortFunction(std::string name) {
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    depth += name[i] == '<' ? 1 : name[i] == '>' ? -1 : 0;
    if (name[i] == '(' && depth == 0 && i > 0) {
      name.resize(i);
      break;
    }
  }
  constexpr size_t kLongest = 90;
  if (name.size() > kLongest) {
    name = "..." + name.substr(name.size() - kLongest);
  }
  return name;
}

// The functions of `perf report --stdio --children --sort symbol -g none`, as it lists them.
inline std::vector<PerfFunction> parsePerfReport(const std::string& report) {
  std::vector<PerfFunction> functions;
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    PerfFunction function;
    int nameAt = 0;
    char kind = 0;
    if (line.starts_with("#") ||
        std::sscanf(line.c_str(), " %lf%% %lf%% [%c] %n", &function.children, &function.self, &kind,
                    &nameAt) != 3 ||
        nameAt == 0) {
      continue;
    }
    // The symbol ends where perf's padding before its IPC columns begins.
    function.name = line.substr(nameAt, line.find("  ", nameAt) - nameAt);
    if (function.name.ends_with(" (inlined)")) {
      function.name.resize(function.name.size() - std::string_view(" (inlined)").size());
    }
    functions.push_back(std::move(function));
  }
  return functions;
}

// "name 41%, name 17%": the first `top` of `functions` that `keep` keeps, by `share` (of at
// least 0.5%, perf report's own limit).
template <typename Keep, typename Share>
std::string perfShares(std::vector<PerfFunction> functions, int top, Keep keep, Share share) {
  std::erase_if(functions, [&](const PerfFunction& f) { return !keep(f) || share(f) < 0.5; });
  std::ranges::sort(functions, [&](const auto& a, const auto& b) { return share(a) > share(b); });
  std::string text;
  for (int i = 0; i < top && i < static_cast<int>(functions.size()); ++i) {
    text += format("%s%s %.1f%%", text.empty() ? "" : ", ",
                   shortFunction(functions[i].name).c_str(), share(functions[i]));
  }
  return text.empty() ? std::string("none") : text;
}

// perf record on one process from construction to report().
class PerfRecording {
 public:
  // 29 samples a second: each copies 16 KiB of stack for perf report to unwind, and perf's
  // own CPU shows in the step's CPU row (at 49 it took half a core in a small run).
  // The recording stays as <$GVIRTUS_BENCH_OUT>/perf-<name>.data for `perf report -i` when
  // that is set (make bench-scale sets it), in a folder removed with the object otherwise.
  PerfRecording(int pid, const std::string& name) {
    const char* perf = std::getenv("BENCH_PERF");
    if (perf == nullptr || *perf == '\0') {
      return;
    }
    perf_ = perf;
    data_ = outputDir().empty() ? dir_.file("perf.data").string()
                                : outputDir() + "/perf-" + name + ".data";
    record_ = std::make_unique<gvirtus::testing::ChildProcess>(std::vector<std::string>{
        "/usr/bin/env", perf_, "record", "--quiet", "-F", "29", "--call-graph", "dwarf,16384", "-p",
        std::to_string(pid), "-o", data_});
  }

  // Stops the recording; two table rows on `step`: our functions (namespace gvirtus) with
  // the largest share of the samples including what they call, and every function by its
  // own share. One row saying how to get them when BENCH_PERF is unset.
  std::string report(const std::string& step, const std::string& process, int top = 12) {
    if (!record_) {
      return format("| %s: %s's CPU by function | not recorded (BENCH_PERF=perf records it) |\n",
                    step.c_str(), process.c_str());
    }
    record_->kill(SIGINT);
    if (!record_->wait(std::chrono::minutes(2))) {
      return format("| %s: %s's CPU by function | perf record did not stop |\n", step.c_str(),
                    process.c_str());
    }
    const auto [code, output] = gvirtus::testing::runCommand(
        {"/usr/bin/env", perf_, "report", "-i", data_, "--stdio", "--children", "--sort", "symbol",
         "-g", "none", "--percent-limit", "0.5"},
        {}, std::chrono::minutes(10));
    const auto functions = parsePerfReport(output);
    if (code != 0 || functions.empty()) {
      return format("| %s: %s's CPU by function | %s |\n", step.c_str(), process.c_str(),
                    code != 0 ? format("perf report failed (%d)", code).c_str() : "no samples");
    }
    auto ours = [](const PerfFunction& f) { return f.name.starts_with("gvirtus::"); };
    return format(
        "| %s: %s's CPU by function (perf), ours with what they call | %s |\n"
        "| %s: %s's CPU by function (perf), each alone | %s |\n",
        step.c_str(), process.c_str(),
        perfShares(functions, top, ours, [](const auto& f) { return f.children; }).c_str(),
        step.c_str(), process.c_str(),
        perfShares(
            functions, top, [](const PerfFunction&) { return true; },
            [](const auto& f) { return f.self; })
            .c_str());
  }

 private:
  gvirtus::testing::TempDir dir_{"gvirtus-perf"};
  std::string perf_;
  std::string data_;
  std::unique_ptr<gvirtus::testing::ChildProcess> record_;
};

}  // namespace gvirtus::bench
