#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/base/error.h"

namespace gvirtus {

using Duration = std::chrono::milliseconds;

// Parses durations the way Kubernetes tools write them: "500ms", "2s", "1m", "1h30m",
// "1.5s". A unit is required (a bare "5" is an error, so "5" never means 5 ms by accident).
Result<Duration> parseDuration(std::string_view text);

// The inverse: 1500ms -> "1.5s", 90000ms -> "1m30s", 0 -> "0s".
std::string formatDuration(Duration d);

}  // namespace gvirtus
