#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"
#include "common/kube/client.h"

namespace gvirtus {

// A watch response is a stream of JSON objects separated by newlines, delivered in chunks
// that split lines at arbitrary bytes. WatchStream reassembles whole lines.
class WatchStream {
 public:
  // Feeds bytes; returns the complete lines they finished (without the newline).
  std::vector<std::string> feed(std::string_view bytes);
  // Bytes held back waiting for their newline.
  size_t pending() const { return partial_.size(); }
  // Upper bound for one event; a longer line is an error (the stream is corrupt or hostile).
  static constexpr size_t kMaxLineBytes = 16 * 1024 * 1024;
  bool overflowed() const { return overflowed_; }

 private:
  std::string partial_;
  bool overflowed_ = false;
};

// Decodes one line into an event. An ERROR event keeps its Status object; use
// watchErrorOf() to turn it into an Error (httpStatus from Status.code, 410 means relist).
Result<WatchEvent> parseWatchEvent(std::string_view line);
Error watchErrorOf(const WatchEvent& event);

}  // namespace gvirtus
