#include "device-plugin/plugin/allocation.h"

#include <algorithm>
#include <set>

#include "device-plugin/cdi/spec.h"

namespace gvirtus::device_plugin {
namespace {

std::string quote(const std::string& text) {
  return "\"" + text + "\"";
}

// The position of `id` among the node's devices, or an error naming it.
Result<size_t> indexOf(const std::vector<std::string>& known, const std::string& id) {
  auto it = std::ranges::find(known, id);
  if (it == known.end()) {
    std::string range = known.empty() ? "none" : known.front() + " .. " + known.back();
    return fail("unknown device " + quote(id) + " (this node has " + range + ")");
  }
  return static_cast<size_t>(it - known.begin());
}

std::string joinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) {
    if (!out.empty()) {
      out += ',';
    }
    out += id;
  }
  return out;
}

}  // namespace

Result<ContainerAllocation> allocateContainer(const std::vector<std::string>& known,
                                              const std::vector<std::string>& requested, bool cdi) {
  if (requested.empty()) {
    return fail("no device requested");
  }
  if (requested.size() > known.size()) {
    return fail(std::to_string(requested.size()) + " devices requested but this node has only " +
                std::to_string(known.size()));
  }
  std::set<std::string> seen;
  ContainerAllocation allocation;
  for (const auto& id : requested) {
    if (auto index = indexOf(known, id); !index) {
      return fail(index.error());
    }
    if (!seen.insert(id).second) {
      return fail("device " + quote(id) + " requested twice");
    }
    if (cdi) {
      allocation.cdiDevices.push_back(cdiDeviceName(id));
    }
  }
  allocation.env[kVgpuIdsEnv] = joinIds(requested);
  return allocation;
}

Result<std::vector<std::string>> preferredAllocation(const std::vector<std::string>& known,
                                                     const std::vector<std::string>& available,
                                                     const std::vector<std::string>& mustInclude,
                                                     int64_t size) {
  if (size < 1) {
    return fail("allocation size must be at least 1, got " + std::to_string(size));
  }
  std::set<size_t> candidates;  // indexes, so iteration is in index order
  for (const auto& id : available) {
    auto index = indexOf(known, id);
    if (!index) {
      return fail(index.error().context("available devices"));
    }
    candidates.insert(*index);
  }
  if (static_cast<size_t>(size) > candidates.size()) {
    return fail("allocation size " + std::to_string(size) + " exceeds the " +
                std::to_string(candidates.size()) + " available devices");
  }
  if (mustInclude.size() > static_cast<size_t>(size)) {
    return fail(std::to_string(mustInclude.size()) +
                " must-include devices exceed the allocation size " + std::to_string(size));
  }
  std::vector<std::string> chosen;
  for (const auto& id : mustInclude) {
    auto index = indexOf(known, id);
    if (!index) {
      return fail(index.error().context("must-include devices"));
    }
    if (std::ranges::find(chosen, id) != chosen.end()) {
      return fail("must-include device " + quote(id) + " listed twice");
    }
    if (!candidates.contains(*index)) {
      return fail("must-include device " + quote(id) + " is not available");
    }
    candidates.erase(*index);
    chosen.push_back(id);
  }
  for (auto it = candidates.begin(); chosen.size() < static_cast<size_t>(size); ++it) {
    chosen.push_back(known[*it]);
  }
  return chosen;
}

}  // namespace gvirtus::device_plugin
