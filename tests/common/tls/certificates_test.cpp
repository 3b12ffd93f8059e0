#include "common/tls/certificates.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace gvirtus {
namespace {

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct StoreFree {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

X509Ptr parse(const std::string& pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

std::string subjectField(X509* cert, int nid) {
  std::string out;
  X509_NAME* name = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(name, nid, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(name, nid, i)) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    if (!out.empty()) {
      out += ",";
    }
    out += std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                       static_cast<size_t>(ASN1_STRING_length(data)));
  }
  return out;
}

// X509_verify_cert of `leaf` against a store holding only `ca`, for `purpose`.
int verify(X509* ca, X509* leaf, int purpose) {
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca);
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  if (X509_verify_cert(ctx.get()) == 1) {
    return X509_V_OK;
  }
  return X509_STORE_CTX_get_error(ctx.get());
}

const std::chrono::hours kDay{24};

TEST_CASE("generateCa makes a self-signed P-256 CA", "[certificates]") {
  auto ca = generateCa("test-ca", kDay * 365);
  REQUIRE(ca.has_value());
  CHECK(ca->certPem.starts_with("-----BEGIN CERTIFICATE-----"));
  CHECK(ca->keyPem.find("PRIVATE KEY-----") != std::string::npos);
  auto cert = parse(ca->certPem);
  REQUIRE(cert);
  CHECK(subjectField(cert.get(), NID_commonName) == "test-ca");
  CHECK(X509_check_ca(cert.get()) >= 1);
  CHECK((X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN) != 0);
  CHECK(X509_get_version(cert.get()) == X509_VERSION_3);
  CHECK(X509_check_issued(cert.get(), cert.get()) == X509_V_OK);
  EVP_PKEY* pub = X509_get0_pubkey(cert.get());
  REQUIRE(pub != nullptr);
  CHECK(EVP_PKEY_is_a(pub, "EC") == 1);
  CHECK(EVP_PKEY_get_bits(pub) == 256);
  CHECK(X509_get0_subject_key_id(cert.get()) != nullptr);
  CHECK(X509_get_signature_nid(cert.get()) == NID_ecdsa_with_SHA256);

  auto notAfter = certificateNotAfter(ca->certPem);
  REQUIRE(notAfter.has_value());
  auto expected = std::chrono::system_clock::now() + kDay * 365;
  CHECK(std::chrono::abs(*notAfter - expected) < std::chrono::minutes(2));
  // Backdated for clock skew.
  CHECK(X509_cmp_current_time(X509_get0_notBefore(cert.get())) < 0);
}

TEST_CASE("serving certificates chain to the CA and carry SANs", "[certificates]") {
  auto ca = generateCa("test-ca", kDay);
  REQUIRE(ca.has_value());
  auto serving =
      generateServingCert(*ca, "webhook.gvirtus-system.svc",
                          {"webhook.gvirtus-system.svc", "localhost"}, {"127.0.0.1", "::1"}, kDay);
  REQUIRE(serving.has_value());
  auto caCert = parse(ca->certPem);
  auto cert = parse(serving->certPem);
  REQUIRE(caCert);
  REQUIRE(cert);
  CHECK(verify(caCert.get(), cert.get(), X509_PURPOSE_SSL_SERVER) == X509_V_OK);
  CHECK(X509_check_ca(cert.get()) == 0);
  CHECK((X509_get_extended_key_usage(cert.get()) & XKU_SSL_SERVER) != 0);
  CHECK((X509_get_extended_key_usage(cert.get()) & XKU_SSL_CLIENT) == 0);
  CHECK((X509_get_key_usage(cert.get()) & KU_DIGITAL_SIGNATURE) != 0);
  CHECK(X509_check_host(cert.get(), "webhook.gvirtus-system.svc", 0, 0, nullptr) == 1);
  CHECK(X509_check_host(cert.get(), "localhost", 0, 0, nullptr) == 1);
  CHECK(X509_check_host(cert.get(), "evil.example.com", 0, 0, nullptr) == 0);
  CHECK(X509_check_ip_asc(cert.get(), "127.0.0.1", 0) == 1);
  CHECK(X509_check_ip_asc(cert.get(), "::1", 0) == 1);
  CHECK(X509_check_ip_asc(cert.get(), "10.0.0.1", 0) == 0);
  // The authority key identifier names the CA's subject key identifier.
  REQUIRE(X509_get0_authority_key_id(cert.get()) != nullptr);
  CHECK(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(cert.get()),
                              X509_get0_subject_key_id(caCert.get())) == 0);

  // The key is the certificate's.
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(serving->keyPem.data(), static_cast<int>(serving->keyPem.size())));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  REQUIRE(key);
  CHECK(X509_check_private_key(cert.get(), key.get()) == 1);

  // Another CA does not verify it.
  auto other = generateCa("other-ca", kDay);
  REQUIRE(other.has_value());
  auto otherCert = parse(other->certPem);
  CHECK(verify(otherCert.get(), cert.get(), X509_PURPOSE_SSL_SERVER) != X509_V_OK);
}

TEST_CASE("client certificates carry user and groups", "[certificates]") {
  auto ca = generateCa("test-ca", kDay);
  REQUIRE(ca.has_value());
  auto client = generateClientCert(*ca, "alice", {"system:masters", "devs"}, kDay);
  REQUIRE(client.has_value());
  auto caCert = parse(ca->certPem);
  auto cert = parse(client->certPem);
  REQUIRE(cert);
  CHECK(subjectField(cert.get(), NID_commonName) == "alice");
  CHECK(subjectField(cert.get(), NID_organizationName) == "system:masters,devs");
  CHECK((X509_get_extended_key_usage(cert.get()) & XKU_SSL_CLIENT) != 0);
  CHECK((X509_get_extended_key_usage(cert.get()) & XKU_SSL_SERVER) == 0);
  CHECK(verify(caCert.get(), cert.get(), X509_PURPOSE_SSL_CLIENT) == X509_V_OK);
  CHECK(verify(caCert.get(), cert.get(), X509_PURPOSE_SSL_SERVER) != X509_V_OK);
}

TEST_CASE("serial numbers are random", "[certificates]") {
  auto ca = generateCa("test-ca", kDay);
  REQUIRE(ca.has_value());
  auto a = generateClientCert(*ca, "a", {}, kDay);
  auto b = generateClientCert(*ca, "a", {}, kDay);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  auto ca_ = parse(a->certPem);
  auto cb = parse(b->certPem);
  CHECK(ASN1_INTEGER_cmp(X509_get0_serialNumber(ca_.get()), X509_get0_serialNumber(cb.get())) != 0);
  CHECK(ASN1_INTEGER_get(X509_get0_serialNumber(ca_.get())) != 0);
}

TEST_CASE("certificate errors are values", "[certificates]") {
  auto ca = generateCa("test-ca", kDay);
  auto other = generateCa("other-ca", kDay);
  REQUIRE(ca.has_value());
  REQUIRE(other.has_value());

  SECTION("garbage CA") {
    auto r = generateServingCert({"garbage", "garbage"}, "x", {"x"}, {}, kDay);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "CA certificate: no PEM certificate found");
  }
  SECTION("mismatched CA key") {
    auto r = generateServingCert({ca->certPem, other->keyPem}, "x", {"x"}, {}, kDay);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "CA key does not match the CA certificate");
  }
  SECTION("bad IP") {
    auto r = generateServingCert(*ca, "x", {}, {"300.1.2.3"}, kDay);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "invalid IP address \"300.1.2.3\"");
  }
  SECTION("zero validity") {
    auto r = generateCa("x", std::chrono::hours(0));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "certificate validity must be positive");
  }
  SECTION("notAfter of garbage") {
    auto r = certificateNotAfter("not a certificate");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "no PEM certificate found");
  }
}

TEST_CASE("PEM validation", "[certificates]") {
  auto ca = generateCa("test-ca", kDay);
  REQUIRE(ca.has_value());
  CHECK(validateCertificatePem(ca->certPem).has_value());
  CHECK(validateCertificatePem(ca->certPem + ca->certPem).has_value());
  CHECK(validatePrivateKeyPem(ca->keyPem).has_value());

  auto noCert = validateCertificatePem("hello");
  REQUIRE_FALSE(noCert.has_value());
  CHECK(noCert.error().message == "no PEM certificate found");

  std::string broken = ca->certPem;
  broken.replace(40, 8, "!!!!!!!!");
  auto bad = validateCertificatePem(broken);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.starts_with("bad PEM certificate: "));
  CHECK(bad.error().message.find('\n') == std::string::npos);

  auto noKey = validatePrivateKeyPem(ca->certPem);
  REQUIRE_FALSE(noKey.has_value());
  CHECK(noKey.error().message == "no PEM private key found");

  std::string brokenKey = ca->keyPem;
  brokenKey.replace(40, 8, "!!!!!!!!");
  auto badKey = validatePrivateKeyPem(brokenKey);
  REQUIRE_FALSE(badKey.has_value());
  CHECK(badKey.error().message.starts_with("bad PEM private key"));
}

}  // namespace
}  // namespace gvirtus
