#pragma once

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

}  // namespace gvirtus
