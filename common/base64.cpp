#include "common/base64.h"

#include <openssl/evp.h>

#include <climits>

namespace gvirtus {

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve(4 * ((bytes.size() + 2) / 3) + 1);
  // EVP_EncodeBlock takes an int length; a multiple of 3 per call adds no padding between.
  constexpr size_t kChunk = 3 << 20;
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    const std::string_view part = bytes.substr(at, kChunk);
    const size_t start = out.size();
    out.resize(start + 4 * ((part.size() + 2) / 3) + 1);  // and the NUL it writes
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + start),
                                  reinterpret_cast<const unsigned char*>(part.data()),
                                  static_cast<int>(part.size()));
    out.resize(start + static_cast<size_t>(n));
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
