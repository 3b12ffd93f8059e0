#include "common/time/backoff.h"

#include <catch2/catch.hpp>
#include <vector>

namespace gvirtus {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<long> take(Backoff& backoff, int n) {
  std::vector<long> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(static_cast<long>(backoff.next().count()));
  }
  return out;
}

TEST_CASE("backoff without jitter doubles up to the cap", "[backoff]") {
  // random() = 0.5 is the middle of the jitter range: no jitter at all.
  Backoff backoff(milliseconds(100), seconds(1), 2.0, 0.2, [] { return 0.5; });
  CHECK(take(backoff, 7) == std::vector<long>{100, 200, 400, 800, 1000, 1000, 1000});
  backoff.reset();
  CHECK(take(backoff, 2) == std::vector<long>{100, 200});
}

TEST_CASE("backoff jitter follows the injected random source", "[backoff]") {
  std::vector<double> draws{0.0, 0.99999, 0.25, 0.75, 0.0, 0.99999};
  size_t i = 0;
  Backoff backoff(milliseconds(1000), seconds(10), 2.0, 0.2, [&] { return draws[i++]; });
  // 1000*(1-0.2), 2000*(1+0.2), 4000*(1-0.1), 8000*(1+0.1), 10000*(1-0.2), capped at 10000.
  CHECK(take(backoff, 6) == std::vector<long>{800, 2400, 3600, 8800, 8000, 10000});
}

TEST_CASE("backoff sequences are deterministic for the same random source", "[backoff]") {
  auto run = [] {
    uint32_t state = 12345;
    auto lcg = [state]() mutable {
      state = state * 1664525u + 1013904223u;
      return static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
    };
    Backoff backoff(milliseconds(800), seconds(30), 2.0, 0.2, lcg);
    return take(backoff, 12);
  };
  const auto first = run();
  CHECK(first == run());
  for (size_t i = 0; i < first.size(); ++i) {
    const double base = std::min(800.0 * (1 << std::min<size_t>(i, 10)), 30000.0);
    CHECK(first[i] >= static_cast<long>(base * 0.8) - 1);
    CHECK(first[i] <= std::min(static_cast<long>(base * 1.2) + 1, 30000L));
  }
}

TEST_CASE("backoff defaults and odd parameters", "[backoff]") {
  Backoff defaults;
  const auto first = defaults.next();
  CHECK(first >= milliseconds(640));
  CHECK(first <= milliseconds(960));
  for (int i = 0; i < 20; ++i) {
    CHECK(defaults.next() <= seconds(30));
  }
  // A factor below 1 would shrink: it is treated as 1 (constant backoff).
  Backoff constant(milliseconds(50), seconds(1), 0.5, 0.0, [] { return 0.3; });
  CHECK(take(constant, 3) == std::vector<long>{50, 50, 50});
  // Out-of-range random values are clamped.
  Backoff clamped(milliseconds(100), seconds(1), 2.0, 0.5, [] { return 7.0; });
  CHECK(take(clamped, 1) == std::vector<long>{150});
}

}  // namespace
}  // namespace gvirtus
