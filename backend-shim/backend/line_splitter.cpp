#include "backend-shim/backend/line_splitter.h"

namespace gvirtus::backend_shim {
namespace {

std::string_view withoutCarriageReturn(std::string_view line) {
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  return line;
}

}  // namespace

void LineSplitter::add(std::string_view bytes, const Emit& emit) {
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    if (partial_.size() + piece.size() > maxLine_) {
      // Too long for one write: its first maxLine bytes go out as a line of their own.
      const size_t fits = maxLine_ - partial_.size();
      partial_.append(piece.substr(0, fits));
      emit(partial_);
      partial_.clear();
      bytes.remove_prefix(fits);
      continue;
    }
    if (newline == std::string_view::npos) {
      partial_.append(piece);
      return;
    }
    if (partial_.empty()) {
      emit(withoutCarriageReturn(piece));
    } else {
      partial_.append(piece);
      emit(withoutCarriageReturn(partial_));
      partial_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void LineSplitter::flush(const Emit& emit) {
  if (!partial_.empty()) {
    emit(partial_);
    partial_.clear();
  }
}

}  // namespace gvirtus::backend_shim
