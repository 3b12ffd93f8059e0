#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

// Compact JSON text on the admission path. Every review writes a few kilobytes of JSON (the
// patch, then the response around it in base64), and nlohmann's serializer decodes and
// escapes each byte of each string on its own: most of a review's time went there. This
// writer copies runs of plain ASCII whole.
namespace gvirtus {

// The same bytes as value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace):
// members in key order, strings escaped as nlohmann does (\", \\, \b \f \n \r \t, other
// control characters as \u00xx), numbers and strings with bytes above 0x7f written by
// nlohmann itself.
std::string compactJson(const nlohmann::json& value);
void appendCompactJson(std::string& out, const nlohmann::json& value);
// One JSON string, quoted and escaped by the same rules.
void appendJsonString(std::string& out, std::string_view text);

}  // namespace gvirtus
