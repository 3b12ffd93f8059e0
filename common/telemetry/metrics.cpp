#include "common/telemetry/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/telemetry/log.h"

namespace gvirtus {

namespace {

bool validName(const std::string& name, bool allowColon) {
  if (name.empty()) {
    return false;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (allowColon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) {
      return false;
    }
  }
  return true;
}

bool validLabelNames(const std::vector<std::string>& names, MetricType type) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (!validName(names[i], false) || names[i].starts_with("__")) {
      return false;
    }
    if (type == MetricType::Histogram && names[i] == "le") {
      return false;
    }
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), names[i]) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      return false;
    }
  }
  return true;
}

const char* typeName(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
  }
  return "untyped";
}

void atomicAdd(std::atomic<double>& target, double amount) {
  target.fetch_add(amount, std::memory_order_relaxed);
}

// `{a="x",b="y"}`, with `extra` (already formatted, like `le="0.5"`) last; empty when
// there is nothing to show.
std::string labelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra = {}) {
  if (names.empty() && extra.empty()) {
    return {};
  }
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += names[i];
    out += "=\"";
    out += escapeLabelValue(i < values.size() ? values[i] : std::string());
    out += '"';
  }
  if (!extra.empty()) {
    if (!names.empty()) {
      out += ',';
    }
    out += extra;
  }
  out += '}';
  return out;
}

void writeHeader(std::string& out, const std::string& name, const std::string& help,
                 MetricType type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += escapeHelp(help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += typeName(type);
  out += '\n';
}

void writeSample(std::string& out, const std::string& name, const std::string& labels,
                 double value) {
  out += name;
  out += labels;
  out += ' ';
  out += formatMetricValue(value);
  out += '\n';
}

}  // namespace

// ---- Text format helpers -------------------------------------------------------------------

std::string escapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string escapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string formatMetricValue(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) {
    return "NaN";
  }
  return std::string(buf, end);
}

// ---- Metrics -------------------------------------------------------------------------------

void Counter::inc(double amount) {
  if (!(amount > 0)) {
    return;
  }
  atomicAdd(value_, amount);
}

void Gauge::inc(double amount) {
  atomicAdd(value_, amount);
}

Histogram::Histogram(std::vector<double> bounds) {
  std::erase_if(bounds, [](double b) { return std::isnan(b) || std::isinf(b); });
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  bounds_ = std::move(bounds);
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
}

void Histogram::observe(double value) {
  size_t bucket = bounds_.size();  // +Inf, also for NaN
  if (!std::isnan(value)) {
    bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                 bounds_.begin());
  }
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  atomicAdd(sum_, value);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  s.cumulative.reserve(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> defaultBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> exponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    out.push_back(bound);
    bound *= factor;
  }
  return out;
}

// ---- Families ------------------------------------------------------------------------------

template <typename M>
MetricFamily<M>::MetricFamily(std::string name, std::string help,
                              std::vector<std::string> labelNames,
                              std::function<std::unique_ptr<M>()> make)
    : name_(std::move(name)),
      help_(std::move(help)),
      labelNames_(std::move(labelNames)),
      make_(std::move(make)) {}

template <typename M>
M& MetricFamily<M>::withLabels(const std::vector<std::string>& labelValues) {
  std::vector<std::string> key = labelValues;
  if (key.size() != labelNames_.size()) {
    log::error("metric label values do not match its label names",
               {{"metric", name_}, {"want", labelNames_.size()}, {"got", labelValues.size()}});
    key.resize(labelNames_.size());
  }
  std::lock_guard lock(mutex_);
  auto it = children_.find(key);
  if (it == children_.end()) {
    it = children_.emplace(std::move(key), make_()).first;
  }
  return *it->second;
}

template <typename M>
void MetricFamily<M>::forEach(
    const std::function<void(const std::vector<std::string>&, const M&)>& fn) const {
  std::lock_guard lock(mutex_);
  for (const auto& [labels, metric] : children_) {
    fn(labels, *metric);
  }
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

// ---- Registry ------------------------------------------------------------------------------

struct MetricsRegistry::Entry {
  MetricType type = MetricType::Counter;
  std::string name;
  std::string help;
  std::vector<std::string> labelNames;
  std::unique_ptr<CounterFamily> counters;
  std::unique_ptr<GaugeFamily> gauges;
  std::unique_ptr<HistogramFamily> histograms;
  std::function<double()> read;  // set for function metrics

  template <typename M>
  std::unique_ptr<MetricFamily<M>>& slot();
};

template <>
std::unique_ptr<CounterFamily>& MetricsRegistry::Entry::slot<Counter>() {
  return counters;
}
template <>
std::unique_ptr<GaugeFamily>& MetricsRegistry::Entry::slot<Gauge>() {
  return gauges;
}
template <>
std::unique_ptr<HistogramFamily>& MetricsRegistry::Entry::slot<Histogram>() {
  return histograms;
}

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

template <typename M>
MetricFamily<M>& MetricsRegistry::family(MetricType type, const std::string& name,
                                         const std::string& help,
                                         const std::vector<std::string>& labelNames,
                                         std::function<std::unique_ptr<M>()> make) {
  std::lock_guard lock(mutex_);
  std::string problem;
  if (!validName(name, true)) {
    problem = "invalid metric name";
  } else if (!validLabelNames(labelNames, type)) {
    problem = "invalid label names";
  } else {
    for (auto& entry : entries_) {
      if (entry->name != name) {
        continue;
      }
      if (entry->type == type && entry->labelNames == labelNames && !entry->read) {
        return *entry->slot<M>();
      }
      problem = "metric already registered with another type or other labels";
      break;
    }
  }
  auto entry = std::make_unique<Entry>();
  entry->type = type;
  entry->name = name;
  entry->help = help;
  entry->labelNames = labelNames;
  entry->slot<M>() = std::make_unique<MetricFamily<M>>(name, help, labelNames, std::move(make));
  MetricFamily<M>& result = *entry->slot<M>();
  if (problem.empty()) {
    entries_.push_back(std::move(entry));
  } else {
    log::error("metric not registered: " + problem, {{"metric", name}});
    detached_.push_back(std::move(entry));
  }
  return result;
}

CounterFamily& MetricsRegistry::counterFamily(const std::string& name, const std::string& help,
                                              const std::vector<std::string>& labelNames) {
  return family<Counter>(MetricType::Counter, name, help, labelNames,
                         [] { return std::make_unique<Counter>(); });
}

GaugeFamily& MetricsRegistry::gaugeFamily(const std::string& name, const std::string& help,
                                          const std::vector<std::string>& labelNames) {
  return family<Gauge>(MetricType::Gauge, name, help, labelNames,
                       [] { return std::make_unique<Gauge>(); });
}

HistogramFamily& MetricsRegistry::histogramFamily(const std::string& name, const std::string& help,
                                                  const std::vector<std::string>& labelNames,
                                                  std::vector<double> buckets) {
  return family<Histogram>(
      MetricType::Histogram, name, help, labelNames,
      [buckets = std::move(buckets)] { return std::make_unique<Histogram>(buckets); });
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help) {
  return counterFamily(name, help, {}).withLabels({});
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help) {
  return gaugeFamily(name, help, {}).withLabels({});
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      std::vector<double> buckets) {
  return histogramFamily(name, help, {}, std::move(buckets)).withLabels({});
}

void MetricsRegistry::function(MetricType type, const std::string& name, const std::string& help,
                               std::function<double()> read) {
  std::lock_guard lock(mutex_);
  if (!validName(name, true)) {
    log::error("metric not registered: invalid metric name", {{"metric", name}});
    return;
  }
  for (auto& entry : entries_) {
    if (entry->name != name) {
      continue;
    }
    if (entry->type == type && entry->read) {
      entry->read = std::move(read);  // registered again: the newest reader wins
      return;
    }
    log::error("metric not registered: metric already registered with another type",
               {{"metric", name}});
    return;
  }
  auto entry = std::make_unique<Entry>();
  entry->type = type;
  entry->name = name;
  entry->help = help;
  entry->read = std::move(read);
  entries_.push_back(std::move(entry));
}

void MetricsRegistry::counterFunction(const std::string& name, const std::string& help,
                                      std::function<double()> read) {
  function(MetricType::Counter, name, help, std::move(read));
}

void MetricsRegistry::gaugeFunction(const std::string& name, const std::string& help,
                                    std::function<double()> read) {
  function(MetricType::Gauge, name, help, std::move(read));
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& entry : entries_) {
    const std::string& name = entry->name;
    if (entry->read) {
      double value = 0;
      try {
        value = entry->read();
      } catch (const std::exception& e) {
        log::warn("metric could not be read", {{"metric", name}, {"error", e.what()}});
        continue;
      }
      writeHeader(out, name, entry->help, entry->type);
      writeSample(out, name, "", value);
      continue;
    }
    std::string body;
    switch (entry->type) {
      case MetricType::Counter:
        entry->counters->forEach([&](const auto& labels, const Counter& c) {
          writeSample(body, name, labelText(entry->labelNames, labels), c.value());
        });
        break;
      case MetricType::Gauge:
        entry->gauges->forEach([&](const auto& labels, const Gauge& g) {
          writeSample(body, name, labelText(entry->labelNames, labels), g.value());
        });
        break;
      case MetricType::Histogram:
        entry->histograms->forEach([&](const auto& labels, const Histogram& h) {
          auto s = h.snapshot();
          for (size_t i = 0; i <= s.bounds.size(); ++i) {
            std::string le = i < s.bounds.size() ? formatMetricValue(s.bounds[i]) : "+Inf";
            writeSample(body, name + "_bucket",
                        labelText(entry->labelNames, labels, "le=\"" + le + "\""),
                        static_cast<double>(s.cumulative[i]));
          }
          std::string plain = labelText(entry->labelNames, labels);
          writeSample(body, name + "_sum", plain, s.sum);
          writeSample(body, name + "_count", plain, static_cast<double>(s.count));
        });
        break;
    }
    if (body.empty()) {
      continue;  // a labelled family with no child yet
    }
    writeHeader(out, name, entry->help, entry->type);
    out += body;
  }
  return out;
}

}  // namespace gvirtus
