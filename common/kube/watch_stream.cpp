#include "common/kube/watch_stream.h"

#include <algorithm>

#include "common/base/json_access.h"

namespace gvirtus {
namespace {

bool isBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

std::vector<std::string> WatchStream::feed(std::string_view bytes) {
  std::vector<std::string> lines;
  if (overflowed_) {
    return lines;
  }
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    if (partial_.size() + piece.size() > kMaxLineBytes) {
      overflowed_ = true;
      partial_.clear();
      partial_.shrink_to_fit();
      return lines;
    }
    if (newline == std::string_view::npos) {
      partial_.append(piece);
      break;
    }
    std::string line;
    if (partial_.empty()) {
      line.assign(piece);
    } else {
      line = std::move(partial_);
      partial_.clear();
      line.append(piece);
    }
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (!isBlank(line)) {
      lines.push_back(std::move(line));
    }
    bytes.remove_prefix(newline + 1);
  }
  return lines;
}

Result<WatchEvent> parseWatchEvent(std::string_view line) {
  auto parsed = parseJson(line);
  if (!parsed) {
    return fail(parsed.error().context("watch event is not JSON"));
  }
  nlohmann::json& doc = *parsed;
  if (!doc.is_object()) {
    return fail("watch event is not a JSON object");
  }
  auto type = doc.find("type");
  if (type == doc.end() || !type->is_string() || type->get_ref<const std::string&>().empty()) {
    return fail("watch event has no type");
  }
  auto object = doc.find("object");
  if (object == doc.end() || !object->is_object()) {
    return fail("watch event " + type->get<std::string>() + " has no object");
  }
  return WatchEvent{type->get<std::string>(), std::move(*object)};
}

Error watchErrorOf(const WatchEvent& event) {
  const nlohmann::json& status = event.object;
  auto text = [&](const char* key) -> std::string {
    auto it = status.find(key);
    return it != status.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Error error;
  if (status.is_object()) {
    error.reason = text("reason");
    auto code = status.find("code");
    if (code != status.end() && code->is_number_integer()) {
      error.httpStatus = code->get<int>();
    }
  }
  if (error.httpStatus == 0 && (error.reason == "Expired" || error.reason == "Gone")) {
    error.httpStatus = 410;
  }
  std::string message = status.is_object() ? text("message") : std::string();
  if (message.empty()) {
    message = status.is_object() && !status.empty() ? status.dump() : "no details";
  }
  std::string head = "watch error";
  if (error.httpStatus != 0) {
    head += " " + std::to_string(error.httpStatus);
  }
  if (!error.reason.empty()) {
    head += " " + error.reason;
  }
  error.message = head + ": " + message;
  return error;
}

}  // namespace gvirtus
