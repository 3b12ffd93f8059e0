#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/base/error.h"

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

// Checks that `pem` holds at least one PEM certificate and nothing unparsable; the error
// is one line ("no PEM certificate found", "bad PEM certificate: ...").
Result<void> validateCertificatePem(const std::string& pem);
// Checks that `pem` holds a readable, unencrypted PEM private key.
Result<void> validatePrivateKeyPem(const std::string& pem);

}  // namespace gvirtus
