#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Small text helpers that flags, annotations and files all need.
namespace gvirtus {

// `text` without whitespace (space, tab, CR, LF) at either end.
std::string_view trim(std::string_view text);

// The items of a list such as "a, b,,c": split at `separator`, each trimmed, empty items
// dropped, order kept.
std::vector<std::string> splitList(std::string_view text, char separator = ',');

// ASCII case-insensitive equality (HTTP field names, tokens).
bool equalsIgnoreCase(std::string_view a, std::string_view b);

// A non-negative decimal integer that is the whole text ("16"); nullopt for "", "-1",
// "+1", "1.5", "16 " or a value beyond int64.
std::optional<int64_t> parseNonNegative(std::string_view text);

// The value of one hexadecimal digit; -1 for any other character.
int hexDigitValue(char c);

// RFC 3986 percent-encoding: keeps the unreserved characters (letters, digits, - . _ ~)
// and those in `alsoKept`, encodes every other byte as %XX.
std::string percentEncode(std::string_view text, std::string_view alsoKept = {});

}  // namespace gvirtus
