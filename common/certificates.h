#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"

namespace gvirtus {

// A certificate and its private key, both PEM.
struct PemKeyPair {
  std::string certPem;
  std::string keyPem;
};

// A self-signed CA (ECDSA P-256, SHA-256), valid for `validity` from now (backdated a
// few minutes for clock skew).
Result<PemKeyPair> generateCa(const std::string& commonName, std::chrono::hours validity);

// A TLS server certificate signed by `ca`, with DNS and IP subject alternative names.
Result<PemKeyPair> generateServingCert(const PemKeyPair& ca, const std::string& commonName,
                                       const std::vector<std::string>& dnsNames,
                                       const std::vector<std::string>& ipAddresses,
                                       std::chrono::hours validity);

// A TLS client certificate signed by `ca` (CN = user, O = groups), as kubeconfigs carry.
Result<PemKeyPair> generateClientCert(const PemKeyPair& ca, const std::string& commonName,
                                      const std::vector<std::string>& organizations,
                                      std::chrono::hours validity);

// The notAfter of the first certificate in `certPem`.
Result<std::chrono::system_clock::time_point> certificateNotAfter(const std::string& certPem);

}  // namespace gvirtus
