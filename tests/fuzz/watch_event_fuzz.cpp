// The watch stream decoder: arbitrary bytes, fed in chunks that split them anywhere, as
// the API server's chunked responses do. Lines are bounded; every line decodes to an
// event or an error, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/kube/watch_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The first byte chooses the chunk size, the rest is the stream.
  const size_t chunk = size == 0 ? 1 : static_cast<size_t>(data[0] % 64) + 1;
  gvirtus::WatchStream stream;
  for (size_t at = size == 0 ? 0 : 1; at < size; at += chunk) {
    for (const auto& line : stream.feed(bytes.substr(at, chunk))) {
      if (line.size() > gvirtus::WatchStream::kMaxLineBytes) {
        std::abort();
      }
      if (auto event = gvirtus::parseWatchEvent(line); event && event->type == "ERROR") {
        (void)gvirtus::watchErrorOf(*event);
      }
    }
  }
  return 0;
}
