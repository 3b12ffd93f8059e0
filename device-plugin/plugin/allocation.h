#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/contract/labels.h"

// What a container gets for the virtual GPUs the kubelet gives it, and which ones to
// prefer. Pure functions of the node's device IDs: the gRPC service translates.
namespace gvirtus::device_plugin {

// The comma list of the container's virtual GPU IDs, in the kubelet's order (also read by
// kai-reservation/).
inline constexpr const char* kVgpuIdsEnv = names::kVgpuIdsEnv;

struct ContainerAllocation {
  std::map<std::string, std::string> env;
  // Fully qualified CDI device names; empty when CDI is off.
  std::vector<std::string> cdiDevices;

  bool operator==(const ContainerAllocation&) const = default;
};

// `known` holds every device ID of the node. An empty request, an unknown or repeated
// ID, or more devices than the node has, is an error whose message says which.
Result<ContainerAllocation> allocateContainer(const std::vector<std::string>& known,
                                              const std::vector<std::string>& requested, bool cdi);

// `size` devices out of `available`: every `mustInclude` first, then the lowest indexes.
Result<std::vector<std::string>> preferredAllocation(const std::vector<std::string>& known,
                                                     const std::vector<std::string>& available,
                                                     const std::vector<std::string>& mustInclude,
                                                     int64_t size);

}  // namespace gvirtus::device_plugin
