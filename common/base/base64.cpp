#include "common/base/base64.h"

#include <openssl/evp.h>

#include <climits>
#include <string_view>

namespace gvirtus {

std::string base64Encode(std::string_view bytes) {
  // EVP_EncodeBlock writes a NUL after the text, hence one byte more; it takes an int
  // length, and a pod patch or a certificate is far below it.
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
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
