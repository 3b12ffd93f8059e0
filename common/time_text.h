#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/error.h"

// Time as Kubernetes writes it in objects (RFC 3339).
namespace gvirtus {

// "2026-11-22T10:00:00Z", fractions and offsets allowed.
Result<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text);

// UTC, whole seconds: "2026-11-22T10:00:00Z" (metav1.Time's form).
std::string formatRfc3339(std::chrono::system_clock::time_point when);

}  // namespace gvirtus
