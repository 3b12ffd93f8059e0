#include "common/tls/certificates.h"

#include <openssl/err.h>
#include <openssl/rand.h>

#include <array>
#include <climits>
#include <ctime>

#include "common/tls/openssl_util.h"

namespace gvirtus {
namespace {

constexpr long kBackdateSeconds = 5 * 60;

std::string bioContents(BIO* bio) {
  char* data = nullptr;
  long size = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);
  if (size <= 0 || data == nullptr) {
    return {};
  }
  return std::string(data, static_cast<size_t>(size));
}

// The error of a failed PEM read of a `what`: "no PEM <what> found" when there was no PEM
// block at all (the queue is cleared), else "bad PEM <what>: " and OpenSSL's reason.
Error pemReadError(const std::string& what) {
  if (isEndOfPem()) {
    ERR_clear_error();
    return Error{"no PEM " + what + " found", 0, {}};
  }
  return opensslError("bad PEM " + what);
}

Result<X509Ptr> readCertificate(const std::string& pem) {
  auto bio = memoryBio(pem);
  if (!bio) {
    return fail(bio.error());
  }
  X509Ptr cert(PEM_read_bio_X509(bio->get(), nullptr, &refusePassphrase, nullptr));
  if (!cert) {
    return fail(pemReadError("certificate"));
  }
  return cert;
}

Result<PkeyPtr> readPrivateKey(const std::string& pem) {
  // OpenSSL 3's decoders report a missing key as "unsupported"; say what is wrong instead.
  if (pem.find("-----BEGIN") == std::string::npos ||
      pem.find("PRIVATE KEY-----") == std::string::npos) {
    return fail("no PEM private key found");
  }
  auto bio = memoryBio(pem);
  if (!bio) {
    return fail(bio.error());
  }
  PkeyPtr key = readPemPrivateKey(bio->get());
  if (!key) {
    return fail(pemReadError("private key"));
  }
  return key;
}

Result<PkeyPtr> generateP256Key() {
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_group_name(ctx.get(), "P-256") <= 0) {
    return fail(opensslError("EC P-256 key setup"));
  }
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_generate(ctx.get(), &raw) <= 0) {
    return fail(opensslError("EC P-256 key generation"));
  }
  return PkeyPtr(raw);
}

Result<void> setRandomSerial(X509* cert) {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return fail(opensslError("random serial"));
  }
  bytes[0] = static_cast<unsigned char>((bytes[0] & 0x7f) | 0x40);  // positive, 16 bytes
  BignumPtr serial(BN_bin2bn(bytes.data(), static_cast<int>(bytes.size()), nullptr));
  if (!serial || BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) == nullptr) {
    return fail(opensslError("serial number"));
  }
  return {};
}

Result<void> addNameEntry(X509_NAME* name, const char* field, const std::string& value) {
  if (value.size() > static_cast<size_t>(INT_MAX) ||
      X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(value.data()),
                                 static_cast<int>(value.size()), -1, 0) != 1) {
    return fail(opensslError(std::string("subject ") + field + " \"" + value + "\""));
  }
  return {};
}

Result<void> addExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return fail(opensslError(std::string("extension ") + OBJ_nid2sn(nid) + "=" + value));
  }
  return {};
}

Result<void> addSubjectAltNames(X509* cert, const std::vector<std::string>& dnsNames,
                                const std::vector<std::string>& ipAddresses) {
  if (dnsNames.empty() && ipAddresses.empty()) {
    return {};
  }
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) {
    return fail(opensslError("subjectAltName"));
  }
  auto push = [&](GeneralNamePtr name) -> bool {
    if (sk_GENERAL_NAME_push(names.get(), name.get()) <= 0) {
      return false;
    }
    (void)name.release();  // now owned by the stack
    return true;
  };
  for (const auto& dns : dnsNames) {
    if (dns.empty() || dns.size() > 253) {
      return fail("invalid DNS name \"" + dns + "\"");
    }
    Ia5StringPtr text(ASN1_IA5STRING_new());
    GeneralNamePtr name(GENERAL_NAME_new());
    if (!text || !name ||
        ASN1_STRING_set(text.get(), dns.data(), static_cast<int>(dns.size())) != 1) {
      return fail(opensslError("subjectAltName DNS:" + dns));
    }
    GENERAL_NAME_set0_value(name.get(), GEN_DNS, text.release());
    if (!push(std::move(name))) {
      return fail(opensslError("subjectAltName DNS:" + dns));
    }
  }
  for (const auto& ip : ipAddresses) {
    OctetStringPtr address(a2i_IPADDRESS(ip.c_str()));
    if (!address) {
      ERR_clear_error();
      return fail("invalid IP address \"" + ip + "\"");
    }
    GeneralNamePtr name(GENERAL_NAME_new());
    if (!name) {
      return fail(opensslError("subjectAltName IP:" + ip));
    }
    GENERAL_NAME_set0_value(name.get(), GEN_IPADD, address.release());
    if (!push(std::move(name))) {
      return fail(opensslError("subjectAltName IP:" + ip));
    }
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return fail(opensslError("subjectAltName"));
  }
  return {};
}

// A certificate with version 3, a random serial, the validity window, the subject and the
// public key set; issuer and extensions are the caller's.
Result<X509Ptr> newCertificate(EVP_PKEY* key, const std::string& commonName,
                               const std::vector<std::string>& organizations,
                               std::chrono::hours validity) {
  if (validity.count() <= 0) {
    return fail("certificate validity must be positive");
  }
  if (validity.count() > 100L * 365 * 24) {
    return fail("certificate validity longer than 100 years");
  }
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return fail(opensslError("X509_new"));
  }
  if (auto r = setRandomSerial(cert.get()); !r) {
    return fail(r.error());
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdateSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(validity.count()) * 3600) ==
          nullptr) {
    return fail(opensslError("validity"));
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  for (const auto& org : organizations) {
    if (auto r = addNameEntry(subject, "O", org); !r) {
      return fail(r.error());
    }
  }
  if (auto r = addNameEntry(subject, "CN", commonName); !r) {
    return fail(r.error());
  }
  if (X509_set_pubkey(cert.get(), key) != 1) {
    return fail(opensslError("public key"));
  }
  return cert;
}

Result<PemKeyPair> toPem(X509* cert, EVP_PKEY* key) {
  BioPtr certBio(BIO_new(BIO_s_mem()));
  BioPtr keyBio(BIO_new(BIO_s_mem()));
  if (!certBio || !keyBio || PEM_write_bio_X509(certBio.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(keyBio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return fail(opensslError("PEM encoding"));
  }
  return PemKeyPair{bioContents(certBio.get()), bioContents(keyBio.get())};
}

struct LoadedCa {
  X509Ptr cert;
  PkeyPtr key;
};

Result<LoadedCa> loadCa(const PemKeyPair& ca) {
  auto cert = readCertificate(ca.certPem);
  if (!cert) {
    return fail(cert.error().context("CA certificate"));
  }
  auto key = readPrivateKey(ca.keyPem);
  if (!key) {
    return fail(key.error().context("CA key"));
  }
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return fail("CA key does not match the CA certificate");
  }
  return LoadedCa{std::move(*cert), std::move(*key)};
}

// A leaf certificate signed by `ca`, with the usages of `extendedKeyUsage`.
Result<PemKeyPair> generateLeaf(const PemKeyPair& caPem, const std::string& commonName,
                                const std::vector<std::string>& organizations,
                                const std::vector<std::string>& dnsNames,
                                const std::vector<std::string>& ipAddresses,
                                std::chrono::hours validity, const char* extendedKeyUsage) {
  auto ca = loadCa(caPem);
  if (!ca) {
    return fail(ca.error());
  }
  auto key = generateP256Key();
  if (!key) {
    return fail(key.error());
  }
  auto cert = newCertificate(key->get(), commonName, organizations, validity);
  if (!cert) {
    return fail(cert.error());
  }
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(ca->cert.get())) != 1) {
    return fail(opensslError("issuer name"));
  }
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            std::pair{NID_key_usage, "critical,digitalSignature"},
                            std::pair{NID_ext_key_usage, extendedKeyUsage},
                            std::pair{NID_subject_key_identifier, "hash"},
                            std::pair{NID_authority_key_identifier, "keyid"}}) {
    if (auto r = addExtension(c, ca->cert.get(), nid, value); !r) {
      return fail(r.error());
    }
  }
  if (auto r = addSubjectAltNames(c, dnsNames, ipAddresses); !r) {
    return fail(r.error());
  }
  if (X509_sign(c, ca->key.get(), EVP_sha256()) <= 0) {
    return fail(opensslError("signing"));
  }
  return toPem(c, key->get());
}

}  // namespace

Result<PemKeyPair> generateCa(const std::string& commonName, std::chrono::hours validity) {
  auto key = generateP256Key();
  if (!key) {
    return fail(key.error());
  }
  auto cert = newCertificate(key->get(), commonName, {}, validity);
  if (!cert) {
    return fail(cert.error());
  }
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1) {
    return fail(opensslError("issuer name"));
  }
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
        std::pair{NID_key_usage, "critical,digitalSignature,keyCertSign,cRLSign"},
        std::pair{NID_subject_key_identifier, "hash"},
        std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (auto r = addExtension(c, c, nid, value); !r) {
      return fail(r.error());
    }
  }
  if (X509_sign(c, key->get(), EVP_sha256()) <= 0) {
    return fail(opensslError("signing"));
  }
  return toPem(c, key->get());
}

Result<PemKeyPair> generateServingCert(const PemKeyPair& ca, const std::string& commonName,
                                       const std::vector<std::string>& dnsNames,
                                       const std::vector<std::string>& ipAddresses,
                                       std::chrono::hours validity) {
  return generateLeaf(ca, commonName, {}, dnsNames, ipAddresses, validity, "serverAuth");
}

Result<PemKeyPair> generateClientCert(const PemKeyPair& ca, const std::string& commonName,
                                      const std::vector<std::string>& organizations,
                                      std::chrono::hours validity) {
  return generateLeaf(ca, commonName, organizations, {}, {}, validity, "clientAuth");
}

Result<std::chrono::system_clock::time_point> certificateNotAfter(const std::string& certPem) {
  auto cert = readCertificate(certPem);
  if (!cert) {
    return fail(cert.error());
  }
  return certificateEnd(cert->get());
}

Result<void> validateCertificatePem(const std::string& pem) {
  auto bio = memoryBio(pem);
  if (!bio) {
    return fail(bio.error());
  }
  // Every block must be a certificate, and there must be one.
  if (readPemCertificates(bio->get()).empty() || !isEndOfPem()) {
    return fail(pemReadError("certificate"));
  }
  ERR_clear_error();
  return {};
}

Result<void> validatePrivateKeyPem(const std::string& pem) {
  auto key = readPrivateKey(pem);
  if (!key) {
    return fail(key.error());
  }
  return {};
}

}  // namespace gvirtus
