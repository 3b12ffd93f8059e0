#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/base/error.h"

// The one logger. Lines go to stderr, one per event, either as JSON objects
// ({"ts","level","msg",...fields}) or as text (`TS LEVEL msg key=value ...`).
namespace gvirtus::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };
enum class Format { Text, Json };

Result<Level> parseLevel(std::string_view text);
Result<Format> parseFormat(std::string_view text);

// Set once at start-up, before threads start.
void configure(Level level, Format format);
bool enabled(Level level);

// `fields` is a JSON object of extra key/values: {{"node", name}, {"attempt", 3}}.
void write(Level level, std::string_view message, const nlohmann::json& fields = nullptr);
inline void debug(std::string_view m, const nlohmann::json& f = nullptr) {
  write(Level::Debug, m, f);
}
inline void info(std::string_view m, const nlohmann::json& f = nullptr) {
  write(Level::Info, m, f);
}
inline void warn(std::string_view m, const nlohmann::json& f = nullptr) {
  write(Level::Warn, m, f);
}
inline void error(std::string_view m, const nlohmann::json& f = nullptr) {
  write(Level::Error, m, f);
}

// Formats one line without writing it (for tests and for the text format).
std::string formatLine(Level level, Format format, std::string_view timestamp,
                       std::string_view message, const nlohmann::json& fields);

}  // namespace gvirtus::log
