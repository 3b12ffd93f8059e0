#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// A small Prometheus registry, rendered in the text exposition format 0.0.4. Metrics are
// created once (at start-up, usually) and updated from any thread; references returned
// by the registry and by withLabels() stay valid as long as the registry lives.
namespace gvirtus {

class Counter {
 public:
  // Adds `amount` (negative amounts are ignored: counters only go up).
  void inc(double amount = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void inc(double amount = 1);
  void dec(double amount = 1) { inc(-amount); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: bucket upper bounds, sorted and deduplicated here; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then the +Inf bucket
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative
  std::atomic<double> sum_{0};
};

// Prometheus' default buckets, for durations in seconds.
std::vector<double> defaultBuckets();
// `count` buckets: start, start*factor, start*factor^2, ...
std::vector<double> exponentialBuckets(double start, double factor, int count);

enum class MetricType { Counter, Gauge, Histogram };

// A metric name with its label names; one child per distinct list of label values.
template <typename M>
class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, std::vector<std::string> labelNames,
               std::function<std::unique_ptr<M>()> make);
  // The child for these label values (one per label name, in order), created on first use.
  // A wrong number of values is logged and padded or cut to fit.
  M& withLabels(const std::vector<std::string>& labelValues);

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labelNames() const { return labelNames_; }
  // Calls `fn(labelValues, metric)` for each child, sorted by label values.
  void forEach(const std::function<void(const std::vector<std::string>&, const M&)>& fn) const;

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> labelNames_;
  std::function<std::unique_ptr<M>()> make_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registering a name again returns the family registered first. A name that is not a
  // valid metric name, or that is taken by another type or other label names, is logged
  // and gets a detached family: usable, never rendered.
  CounterFamily& counterFamily(const std::string& name, const std::string& help,
                               const std::vector<std::string>& labelNames);
  GaugeFamily& gaugeFamily(const std::string& name, const std::string& help,
                           const std::vector<std::string>& labelNames);
  HistogramFamily& histogramFamily(const std::string& name, const std::string& help,
                                   const std::vector<std::string>& labelNames,
                                   std::vector<double> buckets = defaultBuckets());

  // The unlabelled metric of a family without labels.
  Counter& counter(const std::string& name, const std::string& help);
  Gauge& gauge(const std::string& name, const std::string& help);
  Histogram& histogram(const std::string& name, const std::string& help,
                       std::vector<double> buckets = defaultBuckets());

  // A metric without labels whose value `read` computes at each render (under the
  // registry's lock: `read` must not call into the registry).
  void counterFunction(const std::string& name, const std::string& help,
                       std::function<double()> read);
  void gaugeFunction(const std::string& name, const std::string& help,
                     std::function<double()> read);

  // The standard process_* metrics, read from /proc/self when rendered:
  // process_resident_memory_bytes, process_virtual_memory_bytes,
  // process_start_time_seconds, process_open_fds, process_max_fds,
  // process_cpu_seconds_total.
  void registerProcessMetrics();

  // Every family in registration order, in the text format 0.0.4.
  std::string render() const;

  struct Entry;

 private:
  template <typename M>
  MetricFamily<M>& family(MetricType type, const std::string& name, const std::string& help,
                          const std::vector<std::string>& labelNames,
                          std::function<std::unique_ptr<M>()> make);
  void function(MetricType type, const std::string& name, const std::string& help,
                std::function<double()> read);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::unique_ptr<Entry>> detached_;
};

// Text format helpers, exposed for tests.
std::string escapeLabelValue(const std::string& value);
std::string escapeHelp(const std::string& help);
std::string formatMetricValue(double value);

}  // namespace gvirtus
