#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"

// What a prepared claim leaves on the node (docs/dra.md): its properties.json, in a folder
// of its own under the driver's state folder, and a CDI spec of one device,
// "gvirtus.io/claim=<claim UID>", that mounts that file read-only at
// /etc/gvirtus/properties.json and sets GVIRTUS_CONFIG to it. Both stay until the claim is
// unprepared, so containers (re)started after a restart of the plugin find them as before.
namespace gvirtus::device_plugin {

// Where a prepared claim's file appears in its containers, as on the webhook's path.
inline constexpr const char* kClaimConfigPath = "/etc/gvirtus/properties.json";
inline constexpr const char* kClaimConfigEnv = "GVIRTUS_CONFIG";

// A Kubernetes UID as a file name: 1-64 of [0-9A-Za-z-]. Anything else (a path, "..") is
// refused before it comes near a file.
Result<void> validateClaimUid(std::string_view uid);

// The CDI spec of one prepared claim: device `uid` of kind gvirtus.io/claim whose edits
// mount `hostProperties` read-only and set GVIRTUS_CONFIG.
std::string renderClaimCdiSpec(std::string_view uid, const std::filesystem::path& hostProperties);

class ClaimFiles {
 public:
  // Both absolute; the state folder must be the same path on the host as here (the CDI spec
  // names it to the container runtime).
  ClaimFiles(std::filesystem::path stateDir, std::filesystem::path cdiDir);

  // Writes the claim's properties.json and `allocation` (what it was prepared for: the
  // device and share the kubelet was told), then its CDI spec (each atomically; the same
  // content again changes nothing). Returns the CDI device name.
  Result<std::string> write(std::string_view uid, std::string_view properties,
                            std::string_view allocation) const;
  // Removes the CDI spec first (no new container gets the device), then the claim's folder.
  // A claim with nothing on disk is no error.
  Result<void> remove(std::string_view uid) const;
  // True when the claim's properties.json and CDI spec are both there.
  bool prepared(std::string_view uid) const;
  // What the claim was prepared for (write()'s `allocation`); empty when not prepared.
  std::string preparedAllocation(std::string_view uid) const;
  // The UIDs of the claims prepared on disk, sorted.
  std::vector<std::string> preparedClaims() const;

  std::filesystem::path propertiesPath(std::string_view uid) const;
  std::filesystem::path cdiSpecPath(std::string_view uid) const;
  std::filesystem::path allocationPath(std::string_view uid) const;
  static std::string cdiDeviceName(std::string_view uid);

 private:
  std::filesystem::path claimsDir_;
  std::filesystem::path cdiDir_;
};

}  // namespace gvirtus::device_plugin
