#include "common/json_reader.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/strings.h"

namespace gvirtus {
namespace {

using nlohmann::json;

// Bytes a string holds as they are: printable ASCII other than the quote and the backslash.
constexpr std::array<bool, 256> kPlainStringByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) {
    plain[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  }
  return plain;
}();

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

void appendUtf8(std::string& out, std::uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// A recursive-descent reader over one text. Each step returns false after refuse() has
// recorded why; the value it was building is then dropped whole.
class Reader {
 public:
  Reader(std::string_view text, int maxDepth)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        maxDepth_(maxDepth) {}

  Result<json> document() {
    // nlohmann skips a UTF-8 byte order mark before the value: so do we.
    if (std::string_view(p_, static_cast<std::size_t>(end_ - p_)).starts_with("\xEF\xBB\xBF")) {
      p_ += 3;
    }
    json out;
    skipSpace();
    if (!value(out, 0)) {
      return fail(std::move(error_));
    }
    skipSpace();
    if (p_ != end_) {
      refuse("text after the JSON value");
      return fail(std::move(error_));
    }
    return out;
  }

 private:
  bool value(json& out, int depth) {
    if (p_ == end_) {
      return refuse("the text ends where a value should start");
    }
    switch (*p_) {
      case '{':
        return object(out, depth + 1);
      case '[':
        return array(out, depth + 1);
      case '"':
        ++p_;
        out = json(json::value_t::string);
        return string(out.get_ref<json::string_t&>());
      case 't':
        return literal("true", out, true);
      case 'f':
        return literal("false", out, false);
      case 'n':
        return literal("null", out, nullptr);
      default:
        return number(out);
    }
  }

  bool object(json& out, int depth) {
    if (depth > maxDepth_) {
      return refuse("nested deeper than " + std::to_string(maxDepth_) + " levels");
    }
    ++p_;  // '{'
    out = json(json::value_t::object);
    auto& members = out.get_ref<json::object_t&>();
    skipSpace();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      if (p_ == end_ || *p_ != '"') {
        return refuse("expected a member name");
      }
      ++p_;
      std::string key;
      if (!string(key)) {
        return false;
      }
      skipSpace();
      if (p_ == end_ || *p_ != ':') {
        return refuse("expected ':' after a member name");
      }
      ++p_;
      skipSpace();
      // A repeated name is read again into the same slot: the last value stays. The hint
      // makes names that arrive in order (Go's maps are written sorted) cost no search.
      json& slot = members.try_emplace(members.end(), std::move(key))->second;
      if (!value(slot, depth)) {
        return false;
      }
      skipSpace();
      if (p_ == end_) {
        return refuse("the text ends inside an object");
      }
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      if (*p_ != ',') {
        return refuse("expected ',' or '}' in an object");
      }
      ++p_;
      skipSpace();
    }
  }

  bool array(json& out, int depth) {
    if (depth > maxDepth_) {
      return refuse("nested deeper than " + std::to_string(maxDepth_) + " levels");
    }
    ++p_;  // '['
    out = json(json::value_t::array);
    auto& items = out.get_ref<json::array_t&>();
    skipSpace();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      if (!value(items.emplace_back(), depth)) {
        return false;
      }
      skipSpace();
      if (p_ == end_) {
        return refuse("the text ends inside an array");
      }
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_ != ',') {
        return refuse("expected ',' or ']' in an array");
      }
      ++p_;
      skipSpace();
    }
  }

  // The rest of a string whose opening quote was read.
  bool string(std::string& out) {
    for (;;) {
      const char* run = p_;
      while (p_ != end_ && kPlainStringByte[static_cast<unsigned char>(*p_)]) {
        ++p_;
      }
      out.append(run, p_);
      if (p_ == end_) {
        return refuse("the text ends inside a string");
      }
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (!escape(out)) {
          return false;
        }
      } else if (c < 0x20) {
        return refuse("a control character inside a string (it must be escaped)");
      } else if (!utf8Sequence(out)) {
        return false;
      }
    }
  }

  // One character of two to four bytes, in the ranges of RFC 3629: no overlong forms, no
  // surrogates, nothing above U+10FFFF.
  bool utf8Sequence(std::string& out) {
    const auto lead = static_cast<unsigned char>(*p_);
    std::ptrdiff_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      low = lead == 0xE0 ? 0xA0 : 0x80;
      high = lead == 0xED ? 0x9F : 0xBF;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      low = lead == 0xF0 ? 0x90 : 0x80;
      high = lead == 0xF4 ? 0x8F : 0xBF;
    } else {
      return refuse("a string is not UTF-8");
    }
    if (end_ - p_ < length) {
      return refuse("a string is not UTF-8");
    }
    for (std::ptrdiff_t i = 1; i < length; ++i) {
      const auto next = static_cast<unsigned char>(p_[i]);
      if (next < (i == 1 ? low : 0x80) || next > (i == 1 ? high : 0xBF)) {
        return refuse("a string is not UTF-8");
      }
    }
    out.append(p_, static_cast<std::size_t>(length));
    p_ += length;
    return true;
  }

  bool escape(std::string& out) {
    ++p_;  // the backslash
    if (p_ == end_) {
      return refuse("the text ends inside a string");
    }
    switch (*p_++) {
      case '"':
        out += '"';
        return true;
      case '\\':
        out += '\\';
        return true;
      case '/':
        out += '/';
        return true;
      case 'b':
        out += '\b';
        return true;
      case 'f':
        out += '\f';
        return true;
      case 'n':
        out += '\n';
        return true;
      case 'r':
        out += '\r';
        return true;
      case 't':
        out += '\t';
        return true;
      case 'u':
        return unicodeEscape(out);
      default:
        --p_;
        return refuse("an unknown escape in a string");
    }
  }

  bool hex4(std::uint32_t& code) {
    if (end_ - p_ < 4) {
      return refuse("a \\u escape needs four hex digits");
    }
    code = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      const int digit = hexDigitValue(*p_);
      if (digit < 0) {
        return refuse("a \\u escape needs four hex digits");
      }
      code = code * 16 + static_cast<std::uint32_t>(digit);
    }
    return true;
  }

  // \uXXXX, a UTF-16 unit: a surrogate pair makes one character, a lone half none.
  bool unicodeEscape(std::string& out) {
    std::uint32_t code = 0;
    if (!hex4(code)) {
      return false;
    }
    if (code >= 0xDC00 && code <= 0xDFFF) {
      return refuse("a \\u escape is a low surrogate without a high one");
    }
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
        return refuse("a \\u escape is a high surrogate without a low one");
      }
      p_ += 2;
      std::uint32_t second = 0;
      if (!hex4(second)) {
        return false;
      }
      if (second < 0xDC00 || second > 0xDFFF) {
        return refuse("a \\u escape is a high surrogate without a low one");
      }
      code = 0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00);
    }
    appendUtf8(out, code);
    return true;
  }

  bool number(json& out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) {
      ++p_;
    }
    if (p_ == end_ || !isDigit(*p_)) {
      return refuse(negative ? "a '-' without digits" : "expected a JSON value");
    }
    if (*p_ == '0') {
      ++p_;  // no leading zeros: "01" ends at "0", and the '1' is refused after it
    } else {
      skipDigits();
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ == end_ || !isDigit(*p_)) {
        return refuse("a number needs digits after its '.'");
      }
      skipDigits();
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) {
        ++p_;
      }
      if (p_ == end_ || !isDigit(*p_)) {
        return refuse("a number needs digits in its exponent");
      }
      skipDigits();
    }
    // An integer too large for its type becomes a double, as in nlohmann.
    if (integer && negative) {
      std::int64_t n = 0;
      if (std::from_chars(start, p_, n).ec == std::errc()) {
        out = static_cast<json::number_integer_t>(n);
        return true;
      }
    } else if (integer) {
      std::uint64_t n = 0;
      if (std::from_chars(start, p_, n).ec == std::errc()) {
        out = static_cast<json::number_unsigned_t>(n);
        return true;
      }
    }
    double d = 0;
    const auto [end, ec] = std::from_chars(start, p_, d);
    if (ec == std::errc::result_out_of_range) {
      // from_chars gives up on underflow too, which nlohmann (strtod) reads as a tiny
      // number or zero: ask strtod, in the "C" locale our binaries keep.
      d = std::strtod(std::string(start, p_).c_str(), nullptr);
    } else if (ec != std::errc() || end != p_) {
      return refuse("a number that cannot be read");
    }
    if (!std::isfinite(d)) {
      return refuse("a number too large for a double");
    }
    out = d;
    return true;
  }

  template <typename Value>
  bool literal(std::string_view word, json& out, Value value) {
    if (std::string_view(p_, static_cast<std::size_t>(end_ - p_)).starts_with(word)) {
      p_ += word.size();
      out = value;
      return true;
    }
    return refuse("expected a JSON value");
  }

  void skipDigits() {
    while (p_ != end_ && isDigit(*p_)) {
      ++p_;
    }
  }

  void skipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }

  bool refuse(const std::string& what) {
    if (error_.empty()) {
      error_ = "invalid JSON at byte " + std::to_string(p_ - begin_) + ": " + what;
    }
    return false;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  int maxDepth_;
  std::string error_;
};

}  // namespace

Result<json> readJson(std::string_view text, int maxDepth) {
  return Reader(text, maxDepth).document();
}

}  // namespace gvirtus
