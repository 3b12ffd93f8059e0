#include "backend-shim/peer_guard/guard_report.h"

#include <time.h>
#include <unistd.h>

namespace gvirtus::peer_guard {
namespace {

constexpr long kThrottleSeconds = 10;
// Monotonic seconds of the last throttled line, plus one (0: none yet).
long lastThrottled = 0;

class Line {
 public:
  void add(const char* text) {
    while (text != nullptr && *text != '\0' && size_ < sizeof(buffer_) - 1) {
      buffer_[size_++] = *text++;
    }
  }
  void addNumber(int value) {
    char digits[12];
    int count = 0;
    unsigned magnitude =
        value < 0 ? 0u - static_cast<unsigned>(value) : static_cast<unsigned>(value);
    do {
      digits[count++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) {
      add("-");
    }
    while (count > 0 && size_ < sizeof(buffer_) - 1) {
      buffer_[size_++] = digits[--count];
    }
  }
  void write() {
    buffer_[size_++] = '\n';
    // Nothing to do when stderr is gone; the result is only read to please the compiler.
    const ssize_t written = ::write(STDERR_FILENO, buffer_, size_);
    (void)written;
  }

 private:
  char buffer_[512];
  unsigned long size_ = 0;
};

}  // namespace

void report(const char* message, const char* detail) {
  Line line;
  line.add("gvirtus-peer-guard: ");
  line.add(message);
  if (detail != nullptr) {
    line.add(" (");
    line.add(detail);
    line.add(")");
  }
  line.write();
}

void reportThrottled(const char* message, int error) {
  timespec now{};
  if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
    return;
  }
  const long stamp = static_cast<long>(now.tv_sec) + 1;
  long last = __atomic_load_n(&lastThrottled, __ATOMIC_RELAXED);
  if (last != 0 && stamp - last < kThrottleSeconds) {
    return;
  }
  // One thread of several that got here at once writes the line.
  if (!__atomic_compare_exchange_n(&lastThrottled, &last, stamp, false, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED)) {
    return;
  }
  Line line;
  line.add("gvirtus-peer-guard: ");
  line.add(message);
  line.add(" (errno ");
  line.addNumber(error);
  line.add(")");
  line.write();
}

}  // namespace gvirtus::peer_guard
