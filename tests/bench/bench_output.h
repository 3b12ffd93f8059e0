#pragma once

// Where a benchmark leaves its figures for tests/bench/run.sh, which assembles
// docs/performance.md and the chart from them: the folder $GVIRTUS_BENCH_OUT. Without it a
// benchmark only prints. Files there:
//   <section>.md     Markdown appended by the benchmarks, in the order they run
//   summary.rows     rows of the summary table: | figure | value | section |
//   memory.rows      rows of the memory table:  | binary | idle | under load | load |
//   <name>.cdf       a latency distribution for gnuplot: "latency fraction" per line

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace gvirtus::bench {

inline std::string outputDir() {
  const char* dir = std::getenv("GVIRTUS_BENCH_OUT");
  return dir != nullptr ? dir : "";
}

// printf into a std::string.
[[gnu::format(printf, 1, 2)]] inline std::string format(const char* pattern, ...) {
  va_list args;
  va_start(args, pattern);
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, pattern, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(std::max(size, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), pattern, args);
  va_end(args);
  out.resize(static_cast<size_t>(std::max(size, 0)));
  return out;
}

// Appends `text` to <out>/<file> (nothing without $GVIRTUS_BENCH_OUT).
inline void append(const std::string& file, const std::string& text) {
  const std::string dir = outputDir();
  if (dir.empty()) {
    return;
  }
  std::ofstream(dir + "/" + file, std::ios::app) << text;
}

// `section`: where the page gives the details and the command ("1", "2", ...).
inline void summaryRow(const std::string& figure, const std::string& value,
                       const std::string& section) {
  append("summary.rows", "| " + figure + " | " + value + " | " + section + " |\n");
}

inline void memoryRow(const std::string& binary, double idleBytes, double loadedBytes,
                      const std::string& load) {
  append("memory.rows", format("| %s | %.1f MiB | %.1f MiB | %s |\n", binary.c_str(),
                               idleBytes / 1048576.0, loadedBytes / 1048576.0, load.c_str()));
}

// Writes the distribution of `samples` (any unit) as at most ~400 "value fraction" points,
// denser in the tail, for a cumulative plot.
inline void writeCdf(const std::string& name, std::vector<double> samples, double scale = 1) {
  const std::string dir = outputDir();
  if (dir.empty() || samples.empty()) {
    return;
  }
  std::sort(samples.begin(), samples.end());
  std::ofstream out(dir + "/" + name + ".cdf");
  const size_t n = samples.size();
  size_t last = n;
  auto point = [&](size_t i) {
    if (i == last) {
      return;
    }
    last = i;
    out << samples[i] * scale << ' ' << static_cast<double>(i + 1) / static_cast<double>(n) << '\n';
  };
  for (int k = 0; k < 300; ++k) {  // the body, evenly
    point(std::min(n - 1, n * static_cast<size_t>(k) / 300));
  }
  for (double tail = 0.99; tail < 1.0; tail += 0.0001) {  // the last percent, finely
    point(std::min(n - 1, static_cast<size_t>(tail * static_cast<double>(n))));
  }
  point(n - 1);
}

}  // namespace gvirtus::bench
