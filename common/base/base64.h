#pragma once

#include <string>
#include <string_view>

#include "common/base/error.h"

// Standard base64 with padding (RFC 4648 section 4), over OpenSSL: AdmissionResponse.patch,
// Secret data, caBundle, kubeconfig *-data.
namespace gvirtus {

std::string base64Encode(std::string_view bytes);
// Whitespace is skipped (kubeconfig writers wrap long values); anything else outside the
// alphabet, or bad padding, is an error.
Result<std::string> base64Decode(std::string_view text);

}  // namespace gvirtus
