// The JSON reader against nlohmann's parser, which it replaces on every path that reads
// untrusted JSON (reviews, watch events, API answers): the same texts accepted, equal
// values, never a crash. The one known difference: nlohmann ends a text at a NUL byte,
// so with a NUL in the text only "we accept => nlohmann accepts the same value" holds.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/json_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto ours = gvirtus::readJson(text);
  const auto theirs = nlohmann::json::parse(text, nullptr, false);
  const bool hasNul = text.find('\0') != std::string_view::npos;
  if (ours.has_value() != !theirs.is_discarded() && !(hasNul && !ours.has_value())) {
    std::abort();
  }
  if (ours && (*ours != theirs || ours->dump() != theirs.dump())) {
    std::abort();
  }
  return 0;
}
