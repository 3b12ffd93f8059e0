#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/error.h"

// The one JSON reader: text to nlohmann::json. Every review, watch event and API answer is
// read here. nlohmann's own parser takes each byte through a virtual-free but still
// per-character lexer that also copies it into an error buffer: a third of a review's time
// went there. This reader copies runs of plain bytes whole and builds the same values.
namespace gvirtus {

// Deeper documents are refused: values are read recursively, and no Kubernetes object
// nests anywhere near this deep.
inline constexpr int kJsonMaxDepth = 512;

// Reads one JSON document (RFC 8259), with only whitespace around it. It accepts and
// refuses the texts nlohmann::json::parse does and gives equal values: strings must be
// UTF-8, a repeated member keeps its last value, an integer that fits int64 (negative) or
// uint64 stays an integer and any other number is a double (a double that overflows is
// refused). One difference: nlohmann ends the text at a NUL byte between tokens and
// ignores what follows; here that is text after the value, refused. The error names the
// byte offset where the text went wrong.
Result<nlohmann::json> readJson(std::string_view text, int maxDepth = kJsonMaxDepth);

}  // namespace gvirtus
