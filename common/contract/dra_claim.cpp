#include "common/contract/dra_claim.h"

#include <cstdint>
#include <limits>

#include "common/contract/dra_names.h"
#include "common/contract/quantity.h"
#include "common/net/ipv4_resolver.h"

namespace gvirtus::dra {
namespace {

using nlohmann::json;

const json* member(const json& object, const char* name) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

std::string stringMember(const json& object, const char* name) {
  const json* value = member(object, name);
  return value && value->is_string() ? value->get<std::string>() : std::string();
}

// A slice of our driver that belongs to no node: what the webhook's publisher writes.
bool isPublisherSlice(const json& slice) {
  const json* spec = member(slice, "spec");
  if (!spec || stringMember(*spec, "driver") != kDriver) {
    return false;
  }
  if (!stringMember(*spec, "nodeName").empty()) {
    return false;
  }
  const json* perDevice = member(*spec, "perDeviceNodeSelection");
  return !(perDevice && perDevice->is_boolean() && perDevice->get<bool>());
}

int64_t poolGeneration(const json& spec) {
  const json* pool = member(spec, "pool");
  const json* generation = pool ? member(*pool, "generation") : nullptr;
  return generation && generation->is_number_integer() ? generation->get<int64_t>() : 0;
}

}  // namespace

Result<std::vector<AllocatedDevice>> allocatedDevices(const json& claim) {
  const json* status = member(claim, "status");
  const json* allocation = status ? member(*status, "allocation") : nullptr;
  const json* devices = allocation ? member(*allocation, "devices") : nullptr;
  const json* results = devices ? member(*devices, "results") : nullptr;
  if (!results) {
    return fail("the claim is not allocated");
  }
  if (!results->is_array()) {
    return fail("the claim's allocation results are not a list");
  }
  std::vector<AllocatedDevice> ours;
  for (const json& result : *results) {
    if (stringMember(result, "driver") != kDriver) {
      continue;
    }
    AllocatedDevice device{stringMember(result, "request"), stringMember(result, "pool"),
                           stringMember(result, "device"), std::nullopt, std::nullopt};
    if (device.request.empty() || device.pool.empty() || device.device.empty()) {
      return fail("an allocation result of " + std::string(kDriver) +
                  " lacks its request, pool or device");
    }
    device.request = device.request.substr(0, device.request.find('/'));
    if (const json* share = member(result, "shareID"); share && share->is_string()) {
      device.shareId = share->get<std::string>();
    }
    const json* consumed = member(result, "consumedCapacity");
    if (const json* memory = consumed ? member(*consumed, "memory") : nullptr;
        memory && memory->is_string()) {
      auto mebibytes = parseMemoryMiB(memory->get<std::string>());
      if (!mebibytes) {
        return fail("an allocation result of " + std::string(kDriver) +
                    " has a consumed memory that is not a quantity: " + mebibytes.error().message);
      }
      device.memoryMiB = *mebibytes;
    }
    ours.push_back(std::move(device));
  }
  return ours;
}

Result<DeviceEndpoint> deviceEndpoint(const std::vector<json>& slices,
                                      const AllocatedDevice& device) {
  const std::string name = device.pool + "/" + device.device;
  // The pool's newest generation wins: a slice being replaced may still be listed.
  const json* found = nullptr;
  int64_t newest = std::numeric_limits<int64_t>::min();
  for (const json& slice : slices) {
    if (!isPublisherSlice(slice)) {
      continue;
    }
    const json& spec = slice["spec"];
    const json* pool = member(spec, "pool");
    if (!pool || stringMember(*pool, "name") != device.pool) {
      continue;
    }
    const json* devices = member(spec, "devices");
    if (!devices || !devices->is_array()) {
      continue;
    }
    for (const json& candidate : *devices) {
      if (stringMember(candidate, "name") == device.device && poolGeneration(spec) > newest) {
        found = &candidate;
        newest = poolGeneration(spec);
      }
    }
  }
  if (!found) {
    return fail("device " + name + " is in no ResourceSlice of " + kDriver +
                " (its backend is gone or not ready)");
  }
  const json* attributes = member(*found, "attributes");
  const json* ip = attributes ? member(*attributes, kIpAttribute) : nullptr;
  const json* port = attributes ? member(*attributes, kPortAttribute) : nullptr;
  DeviceEndpoint endpoint;
  endpoint.ip = ip ? stringMember(*ip, "string") : std::string();
  if (!isDottedIpv4(endpoint.ip)) {
    return fail("device " + name + " has no IPv4 address in its attribute \"" + kIpAttribute +
                "\"");
  }
  const json* portValue = port ? member(*port, "int") : nullptr;
  if (!portValue || !portValue->is_number_integer() || portValue->get<int64_t>() < 1 ||
      portValue->get<int64_t>() > 65535) {
    return fail("device " + name + " has no port between 1 and 65535 in its attribute \"" +
                kPortAttribute + "\"");
  }
  endpoint.port = static_cast<int>(portValue->get<int64_t>());
  return endpoint;
}

}  // namespace gvirtus::dra
