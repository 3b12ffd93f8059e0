#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

// Cuts a byte stream (the backend's stdout or stderr) into whole lines, so that each reaches
// the shim's output in one write and no other line is ever glued to a piece of it.
namespace gvirtus::backend_shim {

// Longest line written in one piece: at most PIPE_BUF (4096) bytes with its newline, so a
// write of it to a pipe is atomic even with another writer on the same pipe.
inline constexpr size_t kMaxLine = 4095;

class LineSplitter {
 public:
  using Emit = std::function<void(std::string_view line)>;

  explicit LineSplitter(size_t maxLine = kMaxLine) : maxLine_(maxLine) {}

  // Adds `bytes`; calls `emit` with each line they complete (without its '\n' and a '\r'
  // before it), and with each maxLine-byte piece of a longer line.
  void add(std::string_view bytes, const Emit& emit);
  // Emits the partial line held, if any (the writer went quiet or ended).
  void flush(const Emit& emit);
  bool pending() const { return !partial_.empty(); }

 private:
  size_t maxLine_;
  std::string partial_;
};

}  // namespace gvirtus::backend_shim
