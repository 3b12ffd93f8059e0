#include "common/telemetry/log.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "common/time/time_text.h"

namespace gvirtus::log {
namespace {

std::atomic<Level> gLevel{Level::Info};
std::atomic<Format> gFormat{Format::Text};
std::mutex gWriteMutex;

std::string_view levelName(Level level) {
  switch (level) {
    case Level::Debug:
      return "debug";
    case Level::Info:
      return "info";
    case Level::Warn:
      return "warn";
    case Level::Error:
      return "error";
  }
  return "info";
}

// Text values: strings unquoted unless they hold spaces or quotes; others as JSON.
std::string textValue(const nlohmann::json& value) {
  if (!value.is_string()) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const auto& s = value.get_ref<const std::string&>();
  const bool plain = std::none_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '"' || c == '=' || std::iscntrl(static_cast<unsigned char>(c));
  });
  if (!s.empty() && plain) {
    return s;
  }
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Result<Level> parseLevel(std::string_view text) {
  if (text == "debug") {
    return Level::Debug;
  }
  if (text == "info") {
    return Level::Info;
  }
  if (text == "warn" || text == "warning") {
    return Level::Warn;
  }
  if (text == "error") {
    return Level::Error;
  }
  return fail("must be one of debug, info, warn, error; got \"" + std::string(text) + "\"");
}

Result<Format> parseFormat(std::string_view text) {
  if (text == "text") {
    return Format::Text;
  }
  if (text == "json") {
    return Format::Json;
  }
  return fail("must be json or text; got \"" + std::string(text) + "\"");
}

void configure(Level level, Format format) {
  gLevel = level;
  gFormat = format;
}

bool enabled(Level level) {
  return level >= gLevel.load();
}

std::string formatLine(Level level, Format format, std::string_view timestamp,
                       std::string_view message, const nlohmann::json& fields) {
  if (format == Format::Json) {
    nlohmann::json line = {{"ts", timestamp}, {"level", levelName(level)}, {"msg", message}};
    if (fields.is_object()) {
      for (const auto& [key, value] : fields.items()) {
        if (key == "ts" || key == "level" || key == "msg") {
          continue;  // a field never overwrites the line's own keys
        }
        line[key] = value;
      }
    }
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line(timestamp);
  line += ' ';
  std::string level_text(levelName(level));
  for (auto& c : level_text) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  line += level_text;
  line += ' ';
  // A message never starts a forged second line.
  const bool oneLine = message.find_first_of("\r\n") == std::string_view::npos;
  line += oneLine ? std::string(message) : textValue(std::string(message));
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) {
      line += ' ';
      line += key;
      line += '=';
      line += textValue(value);
    }
  }
  return line;
}

void write(Level level, std::string_view message, const nlohmann::json& fields) {
  if (!enabled(level)) {
    return;
  }
  std::string line = formatLine(level, gFormat.load(),
                                formatMilliTime(std::chrono::system_clock::now()), message, fields);
  line += '\n';
  std::lock_guard lock(gWriteMutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace gvirtus::log
