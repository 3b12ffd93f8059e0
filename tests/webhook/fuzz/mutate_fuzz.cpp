// libFuzzer target over POST /mutate (built with clang and -DGVIRTUS_FUZZ=ON; see
// tests/webhook/CMakeLists.txt). Seeds: tests/webhook/fuzz/corpus/.
//   build-fuzz/tests/mutate_fuzz -max_total_time=60 tests/webhook/fuzz/corpus

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/telemetry/log.h"
#include "webhook/fuzz/mutate_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    gvirtus::log::configure(gvirtus::log::Level::Error, gvirtus::log::Format::Text);
    return true;
  }();
  static gvirtus::webhook::fuzz::FuzzHarness harness;
  (void)quiet;
  const std::string failure = gvirtus::webhook::fuzz::checkOneInput(
      harness, std::string_view(reinterpret_cast<const char*>(data), size));
  if (!failure.empty()) {
    std::fprintf(stderr, "mutate_fuzz: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
