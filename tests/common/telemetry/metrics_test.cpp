#include "common/telemetry/metrics.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gvirtus {
namespace {

// The value of the sample line starting with `prefix` + ' ', or NaN.
double sampleValue(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix + " ", 0) == 0) {
      return std::stod(line.substr(prefix.size() + 1));
    }
  }
  return std::nan("");
}

}  // namespace

TEST_CASE("MetricsRegistry renders counters, gauges and histograms exactly", "[metrics]") {
  MetricsRegistry registry;
  auto& requests = registry.counterFamily("gvirtus_requests_total", "Requests handled, by code.",
                                          {"code", "path"});
  requests.withLabels({"200", "/mutate"}).inc();
  requests.withLabels({"200", "/mutate"}).inc(2);
  requests.withLabels({"400", "/mutate"}).inc();
  auto& up = registry.gauge("gvirtus_up", "Whether it runs.\nSecond line with \\ backslash.");
  up.set(1);
  auto& latency =
      registry.histogramFamily("gvirtus_latency_seconds", "Latency.", {"policy"}, {0.1, 0.5, 1});
  auto& rr = latency.withLabels({"round-robin"});
  rr.observe(0.05);
  rr.observe(0.1);  // on a bound: counted in that bucket
  rr.observe(0.7);
  rr.observe(3);
  auto& escaped = registry.gaugeFamily("gvirtus_escaped", "Escaping.", {"value"});
  escaped.withLabels({"a\"b\\c\nd"}).set(-2.5);
  registry.counterFamily("gvirtus_unused_total", "Never touched.", {"x"});
  registry.counter("gvirtus_zero_total", "Registered, never incremented.");

  const std::string expected =
      "# HELP gvirtus_requests_total Requests handled, by code.\n"
      "# TYPE gvirtus_requests_total counter\n"
      "gvirtus_requests_total{code=\"200\",path=\"/mutate\"} 3\n"
      "gvirtus_requests_total{code=\"400\",path=\"/mutate\"} 1\n"
      "# HELP gvirtus_up Whether it runs.\\nSecond line with \\\\ backslash.\n"
      "# TYPE gvirtus_up gauge\n"
      "gvirtus_up 1\n"
      "# HELP gvirtus_latency_seconds Latency.\n"
      "# TYPE gvirtus_latency_seconds histogram\n"
      "gvirtus_latency_seconds_bucket{policy=\"round-robin\",le=\"0.1\"} 2\n"
      "gvirtus_latency_seconds_bucket{policy=\"round-robin\",le=\"0.5\"} 2\n"
      "gvirtus_latency_seconds_bucket{policy=\"round-robin\",le=\"1\"} 3\n"
      "gvirtus_latency_seconds_bucket{policy=\"round-robin\",le=\"+Inf\"} 4\n"
      "gvirtus_latency_seconds_sum{policy=\"round-robin\"} 3.85\n"
      "gvirtus_latency_seconds_count{policy=\"round-robin\"} 4\n"
      "# HELP gvirtus_escaped Escaping.\n"
      "# TYPE gvirtus_escaped gauge\n"
      "gvirtus_escaped{value=\"a\\\"b\\\\c\\nd\"} -2.5\n"
      "# HELP gvirtus_zero_total Registered, never incremented.\n"
      "# TYPE gvirtus_zero_total counter\n"
      "gvirtus_zero_total 0\n";
  CHECK(registry.render() == expected);
}

TEST_CASE("MetricsRegistry renders an unlabelled histogram", "[metrics]") {
  MetricsRegistry registry;
  auto& h = registry.histogram("gvirtus_size_bytes", "Sizes.", {1024, 64, 64});
  h.observe(10);
  h.observe(100);
  CHECK(registry.render() ==
        "# HELP gvirtus_size_bytes Sizes.\n"
        "# TYPE gvirtus_size_bytes histogram\n"
        "gvirtus_size_bytes_bucket{le=\"64\"} 1\n"
        "gvirtus_size_bytes_bucket{le=\"1024\"} 2\n"
        "gvirtus_size_bytes_bucket{le=\"+Inf\"} 2\n"
        "gvirtus_size_bytes_sum 110\n"
        "gvirtus_size_bytes_count 2\n");
}

TEST_CASE("MetricsRegistry returns the same family for the same name", "[metrics]") {
  MetricsRegistry registry;
  auto& a = registry.counterFamily("gvirtus_events_total", "Events.", {"kind"});
  auto& b = registry.counterFamily("gvirtus_events_total", "Events.", {"kind"});
  CHECK(&a == &b);
  CHECK(&a.withLabels({"x"}) == &b.withLabels({"x"}));
  CHECK(&registry.counter("gvirtus_plain_total", "P.") ==
        &registry.counter("gvirtus_plain_total", "P."));

  // Another type or other labels under a taken name: usable, but never rendered.
  auto& clash = registry.gauge("gvirtus_events_total", "Clash.");
  clash.set(5);
  auto& otherLabels = registry.counterFamily("gvirtus_events_total", "Events.", {"other"});
  CHECK(&otherLabels != &a);
  auto& invalid = registry.counter("0-bad name", "Invalid.");
  invalid.inc();
  auto& badLabel = registry.counterFamily("gvirtus_bad_label_total", "Bad.", {"__reserved"});
  badLabel.withLabels({"x"}).inc();
  auto& leLabel = registry.histogramFamily("gvirtus_le_seconds", "Le.", {"le"});
  leLabel.withLabels({"x"}).observe(1);

  a.withLabels({"x"}).inc();
  std::string text = registry.render();
  CHECK(text.find("Clash") == std::string::npos);
  CHECK(text.find("0-bad") == std::string::npos);
  CHECK(text.find("gvirtus_bad_label_total") == std::string::npos);
  CHECK(text.find("gvirtus_le_seconds") == std::string::npos);
  CHECK(text.find("gvirtus_events_total{kind=\"x\"} 1\n") != std::string::npos);
}

TEST_CASE("MetricsRegistry tolerates a wrong number of label values", "[metrics]") {
  MetricsRegistry registry;
  auto& family = registry.gaugeFamily("gvirtus_pairs", "Pairs.", {"a", "b"});
  family.withLabels({"only"}).set(1);
  family.withLabels({"x", "y", "z"}).set(2);
  std::string text = registry.render();
  CHECK(text.find("gvirtus_pairs{a=\"only\",b=\"\"} 1\n") != std::string::npos);
  CHECK(text.find("gvirtus_pairs{a=\"x\",b=\"y\"} 2\n") != std::string::npos);
}

TEST_CASE("Counters only go up, gauges go both ways", "[metrics]") {
  MetricsRegistry registry;
  auto& c = registry.counter("gvirtus_c_total", "C.");
  c.inc(-5);
  c.inc(0.5);
  CHECK(c.value() == 0.5);
  auto& g = registry.gauge("gvirtus_g", "G.");
  g.inc(3);
  g.dec(1.5);
  CHECK(g.value() == 1.5);
  g.set(-7);
  CHECK(g.value() == -7);
}

TEST_CASE("Metric values are formatted as Prometheus parses them", "[metrics]") {
  CHECK(formatMetricValue(0) == "0");
  CHECK(formatMetricValue(42) == "42");
  CHECK(formatMetricValue(0.25) == "0.25");
  CHECK(formatMetricValue(-1.5) == "-1.5");
  CHECK(formatMetricValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(formatMetricValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(formatMetricValue(std::nan("")) == "NaN");
  CHECK(std::stod(formatMetricValue(123456789012.0)) == 123456789012.0);
  CHECK(escapeLabelValue("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  CHECK(escapeHelp("a\\b\"c\nd") == "a\\\\b\"c\\nd");
}

TEST_CASE("Metrics are safe to update from many threads", "[metrics]") {
  MetricsRegistry registry;
  auto& family = registry.counterFamily("gvirtus_parallel_total", "Parallel.", {"worker"});
  auto& h = registry.histogram("gvirtus_parallel_seconds", "Parallel.", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        family.withLabels({std::to_string(t % 2)}).inc();
        h.observe(i % 2 == 0 ? 0.25 : 1.0);
        if (i % 1000 == 0) {
          (void)registry.render();
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  std::string text = registry.render();
  CHECK(sampleValue(text, "gvirtus_parallel_total{worker=\"0\"}") == 20000);
  CHECK(sampleValue(text, "gvirtus_parallel_total{worker=\"1\"}") == 20000);
  CHECK(sampleValue(text, "gvirtus_parallel_seconds_count") == 40000);
  CHECK(sampleValue(text, "gvirtus_parallel_seconds_bucket{le=\"0.5\"}") == 20000);
  CHECK(sampleValue(text, "gvirtus_parallel_seconds_sum") == 25000);
}

TEST_CASE("Function metrics and process metrics are read at render time", "[metrics]") {
  MetricsRegistry registry;
  double value = 1;
  registry.gaugeFunction("gvirtus_function", "Computed.", [&] { return value; });
  CHECK(sampleValue(registry.render(), "gvirtus_function") == 1);
  value = 7;
  CHECK(sampleValue(registry.render(), "gvirtus_function") == 7);

  registry.registerProcessMetrics();
  std::string text = registry.render();
  CHECK(text.find("# TYPE process_resident_memory_bytes gauge\n") != std::string::npos);
  CHECK(text.find("# TYPE process_cpu_seconds_total counter\n") != std::string::npos);
  CHECK(sampleValue(text, "process_resident_memory_bytes") > 1024 * 1024);
  CHECK(sampleValue(text, "process_virtual_memory_bytes") > 0);
  CHECK(sampleValue(text, "process_open_fds") >= 3);
  CHECK(sampleValue(text, "process_max_fds") > 0);
  CHECK(sampleValue(text, "process_cpu_seconds_total") >= 0);
  double start = sampleValue(text, "process_start_time_seconds");
  double now = static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
  CHECK(start > now - 24 * 3600);
  CHECK(start <= now + 1);
}

}  // namespace gvirtus
