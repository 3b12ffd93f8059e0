#include "common/time/duration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace gvirtus {

Result<Duration> parseDuration(std::string_view text) {
  const std::string original(text);
  if (text.empty()) {
    return fail("empty duration");
  }
  double total_ms = 0;
  while (!text.empty()) {
    size_t i = 0;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == 0) {
      return fail("invalid duration \"" + original + "\" (want e.g. 500ms, 2s, 1m)");
    }
    double value = 0;
    const std::string_view number = text.substr(0, i);
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) {
      return fail("invalid duration \"" + original + "\"");
    }
    text.remove_prefix(i);
    size_t u = 0;
    while (u < text.size() && std::isalpha(static_cast<unsigned char>(text[u]))) {
      ++u;
    }
    const std::string_view unit = text.substr(0, u);
    text.remove_prefix(u);
    double scale = 0;
    if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60'000;
    } else if (unit == "h") {
      scale = 3'600'000;
    } else {
      return fail("invalid duration \"" + original + "\": unit must be ms, s, m or h");
    }
    total_ms += value * scale;
  }
  if (total_ms > 1e12) {
    return fail("duration \"" + original + "\" is too large");
  }
  return Duration(static_cast<int64_t>(std::llround(total_ms)));
}

std::string formatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) {
    return "0s";
  }
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms < 1000) {
    return out + std::to_string(ms) + "ms";
  }
  const int64_t hours = ms / 3'600'000;
  const int64_t minutes = (ms / 60'000) % 60;
  const int64_t millis = ms % 60'000;
  if (hours > 0) {
    out += std::to_string(hours) + "h";
  }
  if (minutes > 0) {
    out += std::to_string(minutes) + "m";
  }
  if (millis > 0) {
    if (millis % 1000 == 0) {
      out += std::to_string(millis / 1000) + "s";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(millis) / 1000.0);
      out += std::string(buf) + "s";
    }
  }
  return out;
}

}  // namespace gvirtus
