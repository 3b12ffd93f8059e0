#pragma once

#include <functional>

#include "common/time/duration.h"

namespace gvirtus {

// Exponential backoff with jitter. The random source is a parameter so tests are
// deterministic (Envoy's backoff_strategy shape). Not thread-safe: one per loop.
class Backoff {
 public:
  // `random` returns a value in [0, 1); the default uses a seeded std::mt19937.
  Backoff(Duration initial = std::chrono::milliseconds(800),
          Duration max = std::chrono::seconds(30), double factor = 2.0, double jitter = 0.2,
          std::function<double()> random = {});
  // The next wait: initial * factor^n, capped at max, +/- jitter.
  Duration next();
  void reset();

 private:
  Duration initial_;
  Duration max_;
  double factor_;
  double jitter_;
  std::function<double()> random_;
  double current_ms_ = 0;
};

}  // namespace gvirtus
