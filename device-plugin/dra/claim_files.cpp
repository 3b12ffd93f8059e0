#include "device-plugin/dra/claim_files.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/base/atomic_file.h"
#include "common/contract/dra_names.h"
#include "device-plugin/cdi/spec.h"

namespace gvirtus::device_plugin {
namespace {

constexpr size_t kMaxUidLength = 64;
// "<vendor>-<class>_<device>.json": one spec per claim, each naming one device of the kind.
constexpr const char* kCdiSpecPrefix = "gvirtus.io-claim_";

}  // namespace

Result<void> validateClaimUid(std::string_view uid) {
  const bool valid = !uid.empty() && uid.size() <= kMaxUidLength &&
                     std::all_of(uid.begin(), uid.end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                              (c >= 'A' && c <= 'Z') || c == '-';
                     });
  if (!valid) {
    return fail("claim UID \"" + std::string(uid.substr(0, kMaxUidLength)) +
                "\" is not 1-64 letters, digits and '-'");
  }
  return {};
}

std::string renderClaimCdiSpec(std::string_view uid, const std::filesystem::path& hostProperties) {
  nlohmann::ordered_json edits = {{"env", {std::string(kClaimConfigEnv) + "=" + kClaimConfigPath}},
                                  {"mounts",
                                   {{{"hostPath", hostProperties.string()},
                                     {"containerPath", kClaimConfigPath},
                                     {"options", {"ro", "nosuid", "nodev", "noexec", "bind"}}}}}};
  nlohmann::ordered_json spec = {
      {"cdiVersion", kCdiVersion},
      {"kind", dra::kClaimCdiKind},
      {"devices", {{{"name", std::string(uid)}, {"containerEdits", edits}}}}};
  return spec.dump(2) + "\n";
}

ClaimFiles::ClaimFiles(std::filesystem::path stateDir, std::filesystem::path cdiDir)
    : claimsDir_(std::move(stateDir) / "claims"), cdiDir_(std::move(cdiDir)) {}

std::filesystem::path ClaimFiles::propertiesPath(std::string_view uid) const {
  return claimsDir_ / std::string(uid) / "properties.json";
}

std::filesystem::path ClaimFiles::allocationPath(std::string_view uid) const {
  return claimsDir_ / std::string(uid) / "allocation";
}

std::filesystem::path ClaimFiles::cdiSpecPath(std::string_view uid) const {
  return cdiDir_ / (kCdiSpecPrefix + std::string(uid) + ".json");
}

std::string ClaimFiles::cdiDeviceName(std::string_view uid) {
  return std::string(dra::kClaimCdiKind) + "=" + std::string(uid);
}

Result<std::string> ClaimFiles::write(std::string_view uid, std::string_view properties,
                                      std::string_view allocation) const {
  if (auto valid = validateClaimUid(uid); !valid) {
    return fail(valid.error());
  }
  if (auto written = writeFileAtomically(allocationPath(uid), allocation, 0644); !written) {
    return fail(written.error());
  }
  // Readable by the container's user, whoever that is: it names an address, no secret.
  if (auto written = writeFileAtomically(propertiesPath(uid), properties, 0644); !written) {
    return fail(written.error());
  }
  if (auto written =
          writeFileAtomically(cdiSpecPath(uid), renderClaimCdiSpec(uid, propertiesPath(uid)), 0644);
      !written) {
    return fail(written.error());
  }
  return cdiDeviceName(uid);
}

Result<void> ClaimFiles::remove(std::string_view uid) const {
  if (auto valid = validateClaimUid(uid); !valid) {
    return fail(valid.error());
  }
  std::error_code ec;
  std::filesystem::remove(cdiSpecPath(uid), ec);
  if (ec) {
    return fail("remove " + cdiSpecPath(uid).string() + ": " + ec.message());
  }
  std::filesystem::remove_all(claimsDir_ / std::string(uid), ec);
  if (ec) {
    return fail("remove " + (claimsDir_ / std::string(uid)).string() + ": " + ec.message());
  }
  return {};
}

std::string ClaimFiles::preparedAllocation(std::string_view uid) const {
  return prepared(uid) ? readWholeFile(allocationPath(uid)) : std::string();
}

bool ClaimFiles::prepared(std::string_view uid) const {
  std::error_code ec;
  return validateClaimUid(uid) && std::filesystem::is_regular_file(propertiesPath(uid), ec) &&
         std::filesystem::is_regular_file(cdiSpecPath(uid), ec);
}

std::vector<std::string> ClaimFiles::preparedClaims() const {
  std::vector<std::string> uids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(claimsDir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string uid = it->path().filename().string();
    if (prepared(uid)) {
      uids.push_back(std::move(uid));
    }
  }
  std::sort(uids.begin(), uids.end());
  return uids;
}

}  // namespace gvirtus::device_plugin
