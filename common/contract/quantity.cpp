#include "common/contract/quantity.h"

#include <cmath>
#include <string>

namespace gvirtus {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};

// Longest first where one suffix is the prefix of another is not needed: matched exactly.
constexpr Suffix kSuffixes[] = {
    {"Ki", 1024.0},
    {"Mi", 1024.0 * 1024},
    {"Gi", 1024.0 * 1024 * 1024},
    {"Ti", 1024.0 * 1024 * 1024 * 1024},
    {"Pi", 1024.0 * 1024 * 1024 * 1024 * 1024},
    {"Ei", 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024},
    {"n", 1e-9},
    {"u", 1e-6},
    {"m", 1e-3},
    {"", 1.0},
    {"k", 1e3},
    {"M", 1e6},
    {"G", 1e9},
    {"T", 1e12},
    {"P", 1e15},
    {"E", 1e18},
};

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// A run of digits starting at `pos`; returns how many.
size_t digitsAt(std::string_view text, size_t pos) {
  size_t n = 0;
  while (pos + n < text.size() && isDigit(text[pos + n])) {
    ++n;
  }
  return n;
}

// An optional sign at `pos`, stepped over: -1 or 1.
int signAt(std::string_view text, size_t& pos) {
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    return text[pos++] == '-' ? -1 : 1;
  }
  return 1;
}

std::unexpected<Error> bad(std::string_view text, std::string_view why) {
  return fail("\"" + std::string(text) + "\" is not a quantity: " + std::string(why));
}

}  // namespace

Result<double> parseQuantity(std::string_view text) {
  if (text.empty()) {
    return bad(text, "empty");
  }
  size_t pos = 0;
  const double sign = signAt(text, pos);
  const size_t whole = digitsAt(text, pos);
  double value = 0;
  for (size_t i = 0; i < whole; ++i) {
    value = value * 10 + (text[pos + i] - '0');
  }
  pos += whole;
  size_t fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    fraction = digitsAt(text, pos);
    double scale = 0.1;
    for (size_t i = 0; i < fraction; ++i) {
      value += (text[pos + i] - '0') * scale;
      scale /= 10;
    }
    pos += fraction;
  }
  if (whole == 0 && fraction == 0) {
    return bad(text, "no digits");
  }
  const std::string_view suffix = text.substr(pos);
  if (!suffix.empty() && (suffix[0] == 'e' || suffix[0] == 'E') && suffix.size() > 1) {
    size_t p = 1;
    const int expSign = signAt(suffix, p);
    const size_t n = digitsAt(suffix, p);
    if (n == 0 || p + n != suffix.size() || n > 3) {
      return bad(text, "bad exponent");
    }
    int exponent = 0;
    for (size_t i = 0; i < n; ++i) {
      exponent = exponent * 10 + (suffix[p + i] - '0');
    }
    // 0e390 is 0 times infinity: not a number. Such a value is refused, not computed with.
    const double result = sign * value * std::pow(10.0, expSign * exponent);
    if (!std::isfinite(result)) {
      return bad(text, "out of range");
    }
    return result;
  }
  for (const auto& s : kSuffixes) {
    if (s.text == suffix) {
      const double result = sign * value * s.factor;
      if (!std::isfinite(result)) {
        return bad(text, "out of range");
      }
      return result;
    }
  }
  return bad(text, "unknown suffix \"" + std::string(suffix) + "\"");
}

Result<long long> parseMemoryMiB(std::string_view text) {
  auto value = parseQuantity(text);
  if (!value) {
    return fail(value.error());
  }
  if (*value < 0) {
    return fail("\"" + std::string(text) + "\" is negative");
  }
  const double mib = std::ceil(*value / (1024.0 * 1024.0));
  if (mib > 9e15) {
    return fail("\"" + std::string(text) + "\" is too large");
  }
  return static_cast<long long>(mib);
}

}  // namespace gvirtus
