#pragma once

// What the benchmarks on the local control plane share: reading a pod's state as the
// benchmarks see it, the API server's own request counts, and many writes in parallel.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster_env.h"
#include "webhook/cluster_fixtures.h"

namespace gvirtus::bench {

// The waiting-pod gate is off and a backend is named.
inline bool released(const nlohmann::json& pod) {
  return !gvirtus::webhook::testing::gated(pod) &&
         pod["metadata"]
             .value("annotations", nlohmann::json::object())
             .contains("gvirtus.io/backend");
}

inline bool podReady(const nlohmann::json& pod) {
  const nlohmann::json status = pod.value("status", nlohmann::json::object());
  if (status.value("podIP", "").empty()) {
    return false;
  }
  for (const auto& condition : status.value("conditions", nlohmann::json::array())) {
    if (condition.value("type", "") == "Ready" && condition.value("status", "") == "True") {
      return true;
    }
  }
  return false;
}

// The API server's /metrics.
inline std::string apiMetrics() {
  auto [code, text] = gvirtus::testing::kubectl({"get", "--raw", "/metrics"});
  REQUIRE(code == 0);
  return text;
}

// apiserver_request_total summed by "VERB resource[/subresource]" (core group) or
// "VERB resource.group[/subresource]".
inline std::map<std::string, double> apiRequests(const std::string& text = apiMetrics()) {
  std::map<std::string, double> counts;
  std::istringstream lines(text);
  auto label = [](const std::string& line, const std::string& name) {
    const auto at = line.find(name + "=\"");
    if (at == std::string::npos) {
      return std::string();
    }
    const auto begin = at + name.size() + 2;
    return line.substr(begin, line.find('"', begin) - begin);
  };
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("apiserver_request_total{")) {
      continue;
    }
    std::string key = label(line, "verb") + " " + label(line, "resource");
    if (const std::string group = label(line, "group"); !group.empty()) {
      key += "." + group;
    }
    if (const std::string sub = label(line, "subresource"); !sub.empty()) {
      key += "/" + sub;
    }
    counts[key] += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return counts;
}

// The sum of the samples of `name` (exactly: `name{...}` or `name value`) whose labels
// contain every one of `labels` (each written as in the text: `verb="PATCH"`).
inline double seriesTotal(const std::string& text, const std::string& name,
                          const std::vector<std::string>& labels = {}) {
  double total = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(name) || line.size() <= name.size() ||
        (line[name.size()] != '{' && line[name.size()] != ' ') ||
        !std::ranges::all_of(labels, [&](const std::string& label) {
          return line.find(label) != std::string::npos;
        })) {
      continue;
    }
    total += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return total;
}

// A Prometheus histogram as cumulative counts by upper bound, summed over the series whose
// labels contain every one of `labels`.
inline std::map<double, double> histogramBuckets(const std::string& text, const std::string& name,
                                                 const std::vector<std::string>& labels = {}) {
  std::map<double, double> buckets;
  std::istringstream lines(text);
  const std::string prefix = name + "_bucket{";
  for (std::string line; std::getline(lines, line);) {
    const auto le = line.find("le=\"");
    if (!line.starts_with(prefix) || le == std::string::npos ||
        !std::ranges::all_of(labels, [&](const std::string& label) {
          return line.find(label) != std::string::npos;
        })) {
      continue;
    }
    const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
    const double upper =
        bound == "+Inf" ? std::numeric_limits<double>::infinity() : std::atof(bound.c_str());
    buckets[upper] += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return buckets;
}

// The q-quantile of what a histogram counted between two readings: the upper bound of the
// bucket it falls in (Prometheus's histogram_quantile without interpolation), so a figure
// says "at most". NaN when nothing was counted.
inline double quantileBetween(const std::map<double, double>& before,
                              const std::map<double, double>& after, double q) {
  const double total =
      after.empty() ? 0 : after.rbegin()->second - (before.empty() ? 0 : before.rbegin()->second);
  if (total <= 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  for (const auto& [upper, count] : after) {
    const auto was = before.find(upper);
    if (count - (was == before.end() ? 0 : was->second) >= q * total) {
      return upper;
    }
  }
  return std::numeric_limits<double>::infinity();
}

inline double delta(const std::map<std::string, double>& before,
                    const std::map<std::string, double>& after, const std::string& key) {
  const auto a = after.find(key);
  const auto b = before.find(key);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

// The `top` most frequent requests between two apiRequests() readings `seconds` apart, as
// "PATCH pods 80/s, PUT leases.coordination.k8s.io 17/s": what the API server was kept busy
// with beside a figure it limits.
inline std::string busiestRequests(const std::map<std::string, double>& before,
                                   const std::map<std::string, double>& after, double seconds,
                                   size_t top) {
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [key, count] : after) {
    ranked.emplace_back(delta(before, after, key), key);
  }
  std::ranges::sort(ranked, std::greater<>());
  std::string text;
  for (size_t i = 0; i < std::min(top, ranked.size()) && seconds > 0; ++i) {
    text += (i == 0 ? "" : ", ") + ranked[i].second + " " +
            std::to_string(static_cast<long>(std::lround(ranked[i].first / seconds))) + "/s";
  }
  return text;
}

// Runs `work(i)` for i in [0, count) on `threads` threads; the number of calls that
// returned false.
inline int parallelFor(int count, int threads, const std::function<bool(int)>& work) {
  std::atomic<int> next = 0;
  std::atomic<int> failed = 0;
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int i = next++; i < count; i = next++) {
          if (!work(i)) {
            ++failed;
          }
        }
      });
    }
  }
  return failed.load();
}

}  // namespace gvirtus::bench
