#include "common/time/backoff.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

namespace gvirtus {
namespace {

std::function<double()> defaultRandom() {
  auto engine = std::make_shared<std::mt19937>(std::random_device{}());
  return [engine]() { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

}  // namespace

Backoff::Backoff(Duration initial, Duration max, double factor, double jitter,
                 std::function<double()> random)
    : initial_(std::max(initial, Duration(1))),
      max_(std::max(max, initial_)),
      factor_(factor < 1.0 ? 1.0 : factor),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      random_(random ? std::move(random) : defaultRandom()) {}

Duration Backoff::next() {
  const auto maxMs = static_cast<double>(max_.count());
  current_ms_ = current_ms_ == 0 ? static_cast<double>(initial_.count())
                                 : std::min(current_ms_ * factor_, maxMs);
  // r in [0, 1) maps to a factor in [1 - jitter, 1 + jitter); the result never exceeds max.
  const double r = std::clamp(random_(), 0.0, 1.0);
  const double jittered = current_ms_ * (1.0 + jitter_ * (2.0 * r - 1.0));
  return Duration(std::llround(std::clamp(jittered, 1.0, maxMs)));
}

void Backoff::reset() {
  current_ms_ = 0;
}

}  // namespace gvirtus
