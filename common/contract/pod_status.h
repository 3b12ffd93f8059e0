#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

// What every component reads of a pod's status, read one way: its conditions, whether it is
// Ready and since when, and its IPv4 address.
namespace gvirtus {

// The pod's status condition of `type`; null without one.
const nlohmann::json* podCondition(const nlohmann::json& pod, std::string_view type);

// Phase Succeeded or Failed: its containers will not run again, and it holds nothing.
bool podFinished(const nlohmann::json& pod);
bool phaseFinished(std::string_view phase);

// Condition Ready is "True".
bool podReady(const nlohmann::json& pod);

// When condition Ready last changed (its lastTransitionTime); nullopt without one.
std::optional<std::chrono::system_clock::time_point> podReadySince(const nlohmann::json& pod);

// The pod's IPv4 address: status.podIP, or for an IPv6-first dual-stack pod the first IPv4
// address of status.podIPs; empty when it has none. GVirtuS frontends take IPv4 only.
std::string podIpv4(const nlohmann::json& pod);

}  // namespace gvirtus
