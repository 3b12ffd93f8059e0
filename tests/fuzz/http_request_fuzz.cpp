// Request heads and chunk-size lines from any client that reaches the webhook's port:
// parsed or refused with a 4xx/5xx, never a crash; what is parsed keeps its promises.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/http/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto head = gvirtus::parseRequestHead(text);
  if (head) {
    if (head->path.empty() || head->method.empty()) {
      std::abort();
    }
    if (head->framing == gvirtus::BodyFraming::ContentLength && head->contentLength == 0) {
      std::abort();
    }
    for (const auto& [name, value] : head->headers) {
      if (name.empty() || value.find_first_of("\r\n") != std::string::npos) {
        std::abort();
      }
    }
    // What the server writes back for a parsed request frames itself.
    std::string out;
    gvirtus::appendResponseHead(out, {.status = 200,
                                      .contentType = "text/plain",
                                      .contentLength = 0,
                                      .extra = &head->headers,
                                      .close = !head->keepAlive,
                                      .keepAliveSeconds = 30,
                                      .keepAliveMax = 10});
    if (out.find("\r\n\r\n") != out.size() - 4) {
      std::abort();
    }
  } else if (head.error().status < 400 || head.error().status > 599) {
    std::abort();
  }
  (void)gvirtus::parseChunkSize(text);
  return 0;
}
