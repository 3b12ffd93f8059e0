#include "common/time/time_text.h"

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>

namespace gvirtus {
namespace {

// Digits at text[pos..pos+n) as a number; nullopt when they are not all digits.
std::optional<int> number(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) {
    return std::nullopt;
  }
  int value = 0;
  auto [end, ec] = std::from_chars(text.data() + pos, text.data() + pos + n, value);
  if (ec != std::errc() || end != text.data() + pos + n) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

Result<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text) {
  auto bad = [&] { return fail("\"" + std::string(text) + "\" is not an RFC 3339 time"); };
  // YYYY-MM-DDTHH:MM:SS
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return bad();
  }
  auto year = number(text, 0, 4);
  auto month = number(text, 5, 2);
  auto day = number(text, 8, 2);
  auto hour = number(text, 11, 2);
  auto minute = number(text, 14, 2);
  auto second = number(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *month < 1 || *month > 12 ||
      *day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60) {
    return bad();
  }
  size_t pos = 19;
  std::chrono::nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t nanos = 0;
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) {
        nanos = nanos * 10 + (text[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) {
      return bad();
    }
    for (int i = digits; i < 9; ++i) {
      nanos *= 10;
    }
    fraction = std::chrono::nanoseconds(nanos);
  }
  std::chrono::seconds offset{0};
  const std::string_view zone = text.substr(pos);
  if (zone == "Z" || zone == "z") {
    // UTC
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    auto oh = number(zone, 1, 2);
    auto om = number(zone, 4, 2);
    if (!oh || !om || *oh > 23 || *om > 59) {
      return bad();
    }
    offset = std::chrono::hours(*oh) + std::chrono::minutes(*om);
    if (zone[0] == '-') {
      offset = -offset;
    }
  } else {
    return bad();
  }
  const std::chrono::year_month_day date{std::chrono::year(*year),
                                         std::chrono::month(static_cast<unsigned>(*month)),
                                         std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) {
    return bad();
  }
  const auto midnight = std::chrono::sys_days(date);
  const auto time = midnight + std::chrono::hours(*hour) + std::chrono::minutes(*minute) +
                    std::chrono::seconds(*second) - offset;
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::system_clock::time_point(time) +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(fraction));
}

std::string formatRfc3339(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

namespace {

// formatRfc3339 with the fraction of a second in `Unit`s, as many digits as it takes.
template <typename Unit>
std::string formatWithFraction(std::chrono::system_clock::time_point when, int digits) {
  const auto units = std::chrono::floor<Unit>(when.time_since_epoch());
  const auto seconds = std::chrono::floor<std::chrono::seconds>(units);
  std::string text = formatRfc3339(std::chrono::system_clock::time_point(seconds));
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, ".%0*lldZ", digits,
                static_cast<long long>((units - seconds).count()));
  text.replace(text.size() - 1, 1, fraction);
  return text;
}

}  // namespace

std::string formatMicroTime(std::chrono::system_clock::time_point when) {
  return formatWithFraction<std::chrono::microseconds>(when, 6);
}

std::string formatMilliTime(std::chrono::system_clock::time_point when) {
  return formatWithFraction<std::chrono::milliseconds>(when, 3);
}

Result<std::chrono::system_clock::time_point> parseMicroTime(std::string_view text) {
  if (text.empty() || (text.back() != 'Z' && text.back() != 'z')) {
    return fail("invalid time \"" + std::string(text) + "\": must end in Z (UTC)");
  }
  auto parsed = parseRfc3339(text);
  if (!parsed) {
    return fail(parsed.error());
  }
  return std::chrono::floor<std::chrono::microseconds>(*parsed);
}

}  // namespace gvirtus
