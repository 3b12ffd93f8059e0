#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/base/error.h"

// What a ResourceClaim was given of the driver gpu.gvirtus.io, and where that device's
// backend listens. Both read only what the API server lets the scheduler and the slices'
// writers set (a claim's status, a slice), never what the claim's author wrote.
namespace gvirtus::dra {

// One result of a claim's allocation (status.allocation.devices.results) of our driver.
struct AllocatedDevice {
  std::string request;  // the claim's request, a subrequest's "/NAME" cut off
  std::string pool;
  std::string device;
  std::optional<std::string> shareId;  // set where the device is shared (consumable capacity)
  // The device's memory the scheduler counted for this claim (consumedCapacity.memory), in
  // MiB; nullopt where it counted none.
  std::optional<int64_t> memoryMiB;

  bool operator==(const AllocatedDevice&) const = default;
};

// The results of `claim` (a resource.k8s.io/v1 ResourceClaim) that name gpu.gvirtus.io, in
// the allocation's order. An error when it is not allocated or a result is malformed.
Result<std::vector<AllocatedDevice>> allocatedDevices(const nlohmann::json& claim);

struct DeviceEndpoint {
  std::string ip;  // dotted IPv4
  int port = 0;

  bool operator==(const DeviceEndpoint&) const = default;
};

// The endpoint of `device` as the slice of its pool publishes it. Only slices of our driver
// that no node owns count: a kubelet may write slices for its own node (spec.nodeName), so
// one of those naming our driver is someone else's, and its addresses are not trusted. An
// error says which device was not found, or which attribute is missing or malformed.
Result<DeviceEndpoint> deviceEndpoint(const std::vector<nlohmann::json>& slices,
                                      const AllocatedDevice& device);

}  // namespace gvirtus::dra
