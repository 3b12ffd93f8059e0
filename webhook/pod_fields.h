#pragma once

#include <nlohmann/json.hpp>
#include <string>

// What the webhook reads of pods it holds in watch caches, and keeps of them.
namespace gvirtus::webhook {

// A pod's IPv4 address: status.podIP, or for an IPv6-first dual-stack pod the first IPv4
// address of status.podIPs; empty when it has none.
std::string podIpv4(const nlohmann::json& pod);

// What the cache of GVirtuS pods keeps of each (ResourceCacheOptions::transform): what
// heldShare(), assignedPod() (webhook/cluster_backend_source.h) and peerClaim()
// (webhook/backend_peers.h) read, and no more: the cache holds every GVirtuS pod of the
// cluster.
nlohmann::json frontendFields(nlohmann::json pod);

}  // namespace gvirtus::webhook
