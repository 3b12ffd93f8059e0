#include "common/strings.h"

namespace gvirtus {

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::vector<std::string> splitList(std::string_view text, char separator) {
  std::vector<std::string> items;
  while (true) {
    const auto end = text.find(separator);
    if (auto item = trim(text.substr(0, end)); !item.empty()) {
      items.emplace_back(item);
    }
    if (end == std::string_view::npos) {
      return items;
    }
    text.remove_prefix(end + 1);
  }
}

}  // namespace gvirtus
