#include "common/base64.h"

#include <openssl/evp.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gvirtus {

namespace {

// Two base64 characters for each 12 bits: a 3-byte group is two lookups and two stores.
struct Base64Pairs {
  std::array<char, 2 * 4096> pairs{};
  constexpr Base64Pairs() {
    constexpr std::string_view kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (std::size_t i = 0; i < 4096; ++i) {
      pairs[2 * i] = kAlphabet[i >> 6];
      pairs[2 * i + 1] = kAlphabet[i & 63];
    }
  }
};
constexpr Base64Pairs kBase64Pairs;

}  // namespace

std::string base64Encode(std::string_view bytes) {
  // Our own loop rather than EVP_EncodeBlock: every admission answer carries its patch in
  // base64, and a lookup per 12 bits takes half of OpenSSL's instructions (one per 6).
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t whole = bytes.size() / 3 * 3;
  std::string out(4 * ((bytes.size() + 2) / 3), '=');
  char* o = out.data();
  const char* pairs = kBase64Pairs.pairs.data();
  for (std::size_t i = 0; i < whole; i += 3, o += 4) {
    const std::uint32_t n =
        (std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8) | in[i + 2];
    std::memcpy(o, pairs + 2 * (n >> 12), 2);
    std::memcpy(o + 2, pairs + 2 * (n & 0xfff), 2);
  }
  if (const std::size_t rest = bytes.size() - whole; rest > 0) {
    const std::uint32_t n =
        (std::uint32_t{in[whole]} << 16) | (rest == 2 ? std::uint32_t{in[whole + 1]} << 8 : 0);
    std::memcpy(o, pairs + 2 * (n >> 12), 2);
    if (rest == 2) {
      o[2] = pairs[2 * (n & 0xfff)];
    }
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  std::string compact;
  compact.reserve(text.size());
  for (char c : text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
      compact += c;
    }
  }
  if (compact.size() % 4 != 0 || compact.size() > INT_MAX) {
    return fail("not base64 (bad length or padding)");
  }
  // '=' only as the last one or two symbols (EVP_DecodeBlock is lax about it).
  size_t padding = 0;
  while (padding < compact.size() && compact[compact.size() - 1 - padding] == '=') {
    ++padding;
  }
  if (padding > 2) {
    return fail("not base64 (bad length or padding)");
  }
  if (compact.find('=') < compact.size() - padding) {
    return fail("not base64");
  }
  std::string out(compact.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(compact.data()),
                                static_cast<int>(compact.size()));
  if (n < 0) {
    return fail("not base64");
  }
  // EVP_DecodeBlock counts the padding as zero bytes.
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

}  // namespace gvirtus
