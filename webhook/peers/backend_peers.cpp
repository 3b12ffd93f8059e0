#include "webhook/peers/backend_peers.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/base/json_access.h"
#include "webhook/base/names.h"
#include "webhook/placement/cluster_source.h"
#include "webhook/pods/pod_fields.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {

using nlohmann::json;

namespace {

// An address as a number, for sorting in address order (10.0.0.2 before 10.0.0.10).
uint32_t addressOrder(const std::string& ip) {
  in_addr address{};
  return inet_pton(AF_INET, ip.c_str(), &address) == 1 ? ntohl(address.s_addr) : 0;
}

}  // namespace

std::optional<PeerClaim> peerClaim(const json& pod) {
  if (stringAt(pod, {"metadata", "labels", kEnabledLabel}) != "true") {
    return std::nullopt;
  }
  // The chooser's rule for a pod that holds a session on its backend: given one, not
  // finished, not being deleted.
  auto assigned = assignedPod(pod);
  if (!assigned || assigned->second.backendPod.empty() || isWaiting(pod)) {
    return std::nullopt;
  }
  std::string ip = podIpv4(pod);
  if (ip.empty()) {
    return std::nullopt;
  }
  std::optional<GpuShare> share;
  if (auto held = heldShare(pod)) {
    share = std::move(held->second);
  }
  return PeerClaim{std::move(assigned->second.backendPod), std::move(assigned->first),
                   std::move(ip), std::move(share)};
}

std::string backendEndpoint(const json& backendPod, int port) {
  const std::string ip = podIpv4(backendPod);
  return ip.empty() ? "" : ip + ":" + std::to_string(port);
}

bool claimsBackend(const PeerClaim& claim, std::string_view backendPod, std::string_view endpoint) {
  return !endpoint.empty() && claim.backendPod == backendPod && claim.endpoint == endpoint;
}

std::vector<std::string> backendPeers(std::string_view backendPod, std::string_view endpoint,
                                      const std::vector<PeerClaim>& claims) {
  std::vector<std::pair<uint32_t, std::string>> found;
  for (const auto& claim : claims) {
    if (claimsBackend(claim, backendPod, endpoint)) {
      found.emplace_back(addressOrder(claim.ip), claim.ip);
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& entry : found) {
    out.push_back(std::move(entry.second));
  }
  return out;
}

std::string peersValue(const std::vector<std::string>& peers, size_t max) {
  std::string out;
  const size_t count = std::min(peers.size(), max);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) {
      out += ',';
    }
    out += peers[i];
  }
  return out;
}

std::vector<PeerShare> backendPeerShares(std::string_view backendPod, std::string_view endpoint,
                                         const std::vector<PeerClaim>& claims,
                                         const std::vector<GpuLoad>& gpus) {
  std::vector<std::pair<uint32_t, PeerShare>> found;
  for (const auto& claim : claims) {
    if (!claim.share || !claimsBackend(claim, backendPod, endpoint)) {
      continue;
    }
    int64_t totalMiB = 0;
    for (const auto& gpu : gpus) {
      if (gpu.index == claim.share->gpuIndex) {
        totalMiB = gpu.memoryTotalMiB;
      }
    }
    const int64_t mebibytes = memoryDemandMiB(claim.share->demand, totalMiB);
    if (mebibytes > 0) {
      found.emplace_back(addressOrder(claim.ip), PeerShare{claim.ip, mebibytes});
    }
  }
  // By address, the smallest share first: the first of each address is kept.
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end(),
                          [](const auto& a, const auto& b) { return a.first == b.first; }),
              found.end());
  std::vector<PeerShare> out;
  out.reserve(found.size());
  for (auto& entry : found) {
    out.push_back(std::move(entry.second));
  }
  return out;
}

std::string peerMemoryValue(const std::vector<PeerShare>& shares, size_t max) {
  std::string out;
  const size_t count = std::min(shares.size(), max);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) {
      out += ',';
    }
    out += shares[i].first + "=" + std::to_string(shares[i].second);
  }
  return out;
}

}  // namespace gvirtus::webhook
