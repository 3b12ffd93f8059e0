#pragma once

#include <chrono>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

// Facts the plugin reads off one pod (or any object): annotations, labels, times,
// conditions, gates. Absent fields read as absent, never throw.
namespace gvirtus::kubectl_gvirtus {

using TimePoint = std::chrono::system_clock::time_point;

std::string annotationOf(const nlohmann::json& object, std::string_view key);
std::string labelOf(const nlohmann::json& object, std::string_view key);

// An RFC 3339 time at `path`; nullopt where it is missing or unreadable.
std::optional<TimePoint> timeAt(const nlohmann::json& object,
                                std::initializer_list<std::string_view> path);

// How long ago `then` was; 0 when unknown or in the future.
std::chrono::seconds since(std::optional<TimePoint> then, TimePoint now);

// Behind the scheduling gate gvirtus.io/backend.
bool isGated(const nlohmann::json& pod);
// Has a deletionTimestamp.
bool isDeleting(const nlohmann::json& pod);

// "45s", "12m", "3h", "2d" as kubectl prints ages.
std::string formatAge(std::chrono::seconds age);

}  // namespace gvirtus::kubectl_gvirtus
