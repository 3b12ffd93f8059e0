#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/base/error.h"

// Time as Kubernetes writes it in objects (RFC 3339).
namespace gvirtus {

// "2026-11-22T10:00:00Z", fractions and offsets allowed.
Result<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text);

// UTC, whole seconds: "2026-11-22T10:00:00Z" (metav1.Time's form).
std::string formatRfc3339(std::chrono::system_clock::time_point when);

// metav1.MicroTime (Leases, Events): UTC with six fractional digits,
// "2026-11-22T10:00:00.000000Z"; read back as RFC 3339 that ends in Z, to the microsecond.
std::string formatMicroTime(std::chrono::system_clock::time_point when);
// UTC with three fractional digits, "2026-11-22T10:00:00.000Z": log lines, as Kubernetes
// components write them.
std::string formatMilliTime(std::chrono::system_clock::time_point when);
Result<std::chrono::system_clock::time_point> parseMicroTime(std::string_view text);

}  // namespace gvirtus
