#include "device-plugin/dra/claim_preparer.h"

#include <optional>

#include "common/base/json_access.h"
#include "common/contract/dra_names.h"
#include "common/contract/gvirtus_properties.h"
#include "common/kube/client.h"

namespace gvirtus::device_plugin {
namespace {

using nlohmann::json;

class ApiClaimSource final : public ClaimSource {
 public:
  explicit ApiClaimSource(KubeClient& client) : client_(client) {}

  Result<json> claim(const std::string& ns, const std::string& name) override {
    return client_.get(dra::kResourceClaims, ns, name);
  }

  Result<std::vector<json>> slices() override {
    ListOptions options;
    options.fieldSelector = std::string("spec.driver=") + dra::kDriver;
    auto listed = client_.listAll(dra::kResourceSlices, "", options);
    if (!listed) {
      return fail(listed.error());
    }
    return std::move(listed->items);
  }

 private:
  KubeClient& client_;
};

}  // namespace

std::unique_ptr<ClaimSource> apiClaimSource(KubeClient& client) {
  return std::make_unique<ApiClaimSource>(client);
}

ClaimPreparer::ClaimPreparer(ClaimSource& source, const ClaimFiles& files,
                             std::vector<std::string> plugins)
    : source_(source),
      files_(files),
      plugins_(plugins.empty() ? defaultPlugins() : std::move(plugins)) {}

std::map<std::string, Result<PreparedDevice>> ClaimPreparer::prepare(
    const std::vector<ClaimRef>& claims) {
  std::map<std::string, Result<PreparedDevice>> results;
  // Listed once for the whole call, and only when a claim needs it.
  std::optional<Result<std::vector<json>>> slices;
  for (const ClaimRef& ref : claims) {
    results.insert_or_assign(ref.uid, prepareOne(ref, slices));
  }
  return results;
}

Result<PreparedDevice> ClaimPreparer::prepareOne(const ClaimRef& ref,
                                                 std::optional<Result<std::vector<json>>>& slices) {
  const std::string what = "claim " + ref.ns + "/" + ref.name;
  if (auto valid = validateClaimUid(ref.uid); !valid) {
    return fail(valid.error().context(what));
  }
  auto claim = source_.claim(ref.ns, ref.name);
  if (!claim) {
    return fail(claim.error().context("read " + what));
  }
  if (stringAt(*claim, {"metadata", "uid"}) != ref.uid) {
    return fail(what + " has UID " + stringAt(*claim, {"metadata", "uid"}) + ", not " + ref.uid +
                ": it was deleted and made again");
  }
  auto devices = dra::allocatedDevices(*claim);
  if (!devices) {
    return fail(devices.error().context(what));
  }
  if (devices->size() != 1) {
    return fail(what + " was allocated " + std::to_string(devices->size()) + " devices of " +
                dra::kDriver + "; a GVirtuS frontend talks to one backend, so a claim asks for " +
                "exactly one (count 1)");
  }
  PreparedDevice prepared{devices->front(), ClaimFiles::cdiDeviceName(ref.uid)};
  // Prepared before for this very allocation: its backend stays. Files left for another
  // (a claim deallocated and allocated again without an unprepare) are written anew.
  const auto& device = prepared.allocated;
  const std::string allocation =
      device.pool + "/" + device.device + (device.shareId ? " share " + *device.shareId : "");
  if (files_.preparedAllocation(ref.uid) == allocation) {
    return prepared;
  }
  if (!slices) {
    slices = source_.slices();
  }
  if (!*slices) {
    return fail(
        (*slices).error().context("list the ResourceSlices of " + std::string(dra::kDriver)));
  }
  auto endpoint = dra::deviceEndpoint(**slices, prepared.allocated);
  if (!endpoint) {
    return fail(endpoint.error().context(what));
  }
  auto properties = renderProperties(endpoint->ip, endpoint->port, plugins_);
  if (!properties) {
    return fail(properties.error().context(what));
  }
  if (auto written = files_.write(ref.uid, *properties, allocation); !written) {
    return fail(written.error().context("prepare " + what));
  }
  return prepared;
}

std::map<std::string, Result<void>> ClaimPreparer::unprepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, Result<void>> results;
  for (const ClaimRef& ref : claims) {
    results.insert_or_assign(ref.uid, files_.remove(ref.uid));
  }
  return results;
}

}  // namespace gvirtus::device_plugin
