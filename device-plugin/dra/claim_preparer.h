#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/contract/dra_claim.h"
#include "device-plugin/dra/claim_files.h"

namespace gvirtus {
class KubeClient;
}

// The DRA driver's node work for the claims the kubelet names (docs/dra.md): a claim
// allocated one device of gpu.gvirtus.io is prepared by writing a properties.json that names
// that device's backend and a CDI spec that hands it to the claim's containers. Free of
// gRPC: the server (dra/server.h) translates.
namespace gvirtus::device_plugin {

// Where the claim and the devices are read: the API server, or a test's objects.
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // The ResourceClaim, as the API server holds it now.
  virtual Result<nlohmann::json> claim(const std::string& ns, const std::string& name) = 0;
  // Every ResourceSlice of the driver gpu.gvirtus.io.
  virtual Result<std::vector<nlohmann::json>> slices() = 0;
};
// Reads through `client` (which must outlive it): GET of the claim, a list of the slices
// selected by spec.driver.
std::unique_ptr<ClaimSource> apiClaimSource(KubeClient& client);

// A claim as the kubelet names it.
struct ClaimRef {
  std::string ns;
  std::string name;
  std::string uid;
};

struct PreparedDevice {
  dra::AllocatedDevice allocated;
  std::string cdiDevice;  // "gvirtus.io/claim=<uid>"
};

class ClaimPreparer {
 public:
  // `plugins`: the frontend plugins properties.json lists. Both references must outlive it.
  ClaimPreparer(ClaimSource& source, const ClaimFiles& files, std::vector<std::string> plugins);

  // Each claim's device, or why it could not be prepared; keyed by UID. The claim is read
  // once per call and its UID compared with the kubelet's (a claim deleted and made again
  // under its name is another claim). It must have been allocated exactly one device of our
  // driver: a GVirtuS frontend talks to one backend. A claim prepared before for the same
  // device and share (its files are on disk) keeps the backend it was given, so a restarted
  // plugin, or a backend whose slice is being rewritten, does not move a running pod;
  // otherwise the device's slice names the backend.
  std::map<std::string, Result<PreparedDevice>> prepare(const std::vector<ClaimRef>& claims);

  // Removes each claim's files; keyed by UID. Nothing on disk is no error: the kubelet
  // repeats an unprepare it is unsure of.
  std::map<std::string, Result<void>> unprepare(const std::vector<ClaimRef>& claims);

 private:
  Result<PreparedDevice> prepareOne(const ClaimRef& ref,
                                    std::optional<Result<std::vector<nlohmann::json>>>& slices);

  ClaimSource& source_;
  const ClaimFiles& files_;
  std::vector<std::string> plugins_;
};

}  // namespace gvirtus::device_plugin
