#include "common/json_text.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace gvirtus {
namespace {

using nlohmann::json;

void appendNlohmann(std::string& out, const json& value) {
  out += value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// True when one of the 8 bytes of `word` needs more than a copy: a control character, '"',
// '\\', or a byte above 0x7f (bit tricks: a byte is zero exactly where (v - 1) & ~v has its
// top bit set).
bool anySpecial(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kTops = 0x8080808080808080ull;
  auto hasZeroByte = [](uint64_t v) { return ((v - kOnes) & ~v & kTops) != 0; };
  const bool below0x20 = ((word - 0x20 * kOnes) & ~word & kTops) != 0;
  return (word & kTops) != 0 || below0x20 || hasZeroByte(word ^ ('"' * kOnes)) ||
         hasZeroByte(word ^ ('\\' * kOnes));
}

// Bytes copied as they are inside a JSON string: printable ASCII but '"' and '\\'.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) {
    plain[c] = c != '"' && c != '\\';
  }
  return plain;
}();

// The escape of one ASCII byte that is not plain.
void appendEscape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
  }
}

}  // namespace

void appendJsonString(std::string& out, std::string_view text) {
  const char* data = text.data();
  const std::size_t size = text.size();
  const std::size_t start = out.size();
  out.reserve(start + size + 2);
  out += '"';
  std::size_t run = 0;  // start of the plain run not yet copied
  std::size_t i = 0;
  while (true) {
    // Plain bytes are skipped eight at a time, then one at a time up to the next other one.
    for (uint64_t word; i + 8 <= size; i += 8) {
      std::memcpy(&word, data + i, sizeof word);
      if (anySpecial(word)) {
        break;
      }
    }
    while (i < size && kPlain[static_cast<unsigned char>(data[i])]) {
      ++i;
    }
    if (i == size) {
      break;
    }
    const auto c = static_cast<unsigned char>(data[i]);
    if (c >= 0x80) {
      // Multi-byte UTF-8, valid or not: nlohmann's rules (it replaces invalid bytes).
      out.resize(start);
      appendNlohmann(out, nlohmann::json(std::string(text)));
      return;
    }
    out.append(data + run, i - run);
    appendEscape(out, c);
    run = ++i;
  }
  out.append(data + run, size - run);
  out += '"';
}

namespace {

template <typename Integer>
void appendInteger(std::string& out, Integer n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  out.append(digits, end);
}

}  // namespace

void appendCompactJson(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.items()) {
        if (!first) {
          out += ',';
        }
        first = false;
        appendJsonString(out, key);
        out += ':';
        appendCompactJson(out, member);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (i > 0) {
          out += ',';
        }
        appendCompactJson(out, value[i]);
      }
      out += ']';
      return;
    }
    case json::value_t::string:
      appendJsonString(out, value.get_ref<const std::string&>());
      return;
    case json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case json::value_t::null:
      out += "null";
      return;
    case json::value_t::number_integer:
      appendInteger(out, value.get<json::number_integer_t>());
      return;
    case json::value_t::number_unsigned:
      appendInteger(out, value.get<json::number_unsigned_t>());
      return;
    default:  // floats (nlohmann's shortest round-trip form), binary, discarded
      appendNlohmann(out, value);
      return;
  }
}

std::string compactJson(const json& value) {
  std::string out;
  appendCompactJson(out, value);
  return out;
}

}  // namespace gvirtus
