#include "common/tls/openssl_util.h"

#include <openssl/err.h>

#include <array>
#include <climits>
#include <ctime>
#include <utility>

namespace gvirtus {
namespace {

// Empties the error queue and returns its last (most recent) code, 0 when it was empty.
unsigned long takeLastError() {
  unsigned long last = 0;
  while (unsigned long code = ERR_get_error()) {
    last = code;
  }
  return last;
}

}  // namespace

// OpenSSL's stack macros are written with C casts.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
void freeX509Stack(X509Stack* stack) {
  sk_X509_pop_free(stack, X509_free);
}
X509StackPtr newX509Stack() {
  return X509StackPtr(sk_X509_new_null());
}
bool pushX509(X509Stack* stack, X509Ptr cert) {
  if (sk_X509_push(stack, cert.get()) <= 0) {
    return false;
  }
  cert.release();  // the stack owns it now
  return true;
}
#pragma GCC diagnostic pop

int refusePassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) {
  return -1;
}

Result<BioPtr> memoryBio(std::string_view data) {
  if (data.size() > static_cast<size_t>(INT_MAX)) {
    return fail("PEM data too large");
  }
  BioPtr bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
  if (!bio) {
    return fail(opensslError("BIO_new_mem_buf"));
  }
  return bio;
}

std::vector<X509Ptr> readPemCertificates(BIO* bio, pem_password_cb* passphrase) {
  std::vector<X509Ptr> certs;
  while (X509Ptr cert{PEM_read_bio_X509(bio, nullptr, passphrase, nullptr)}) {
    certs.push_back(std::move(cert));
  }
  return certs;
}

PkeyPtr readPemPrivateKey(BIO* bio, pem_password_cb* passphrase) {
  return PkeyPtr(PEM_read_bio_PrivateKey(bio, nullptr, passphrase, nullptr));
}

bool isEndOfPem() {
  unsigned long code = ERR_peek_last_error();
  return ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE;
}

Error opensslError(const std::string& what) {
  const unsigned long last = takeLastError();
  if (last == 0) {
    return Error{what, 0, {}};
  }
  const char* lib = ERR_lib_error_string(last);
  const char* reason = ERR_reason_error_string(last);
  std::string detail;
  if (lib != nullptr) {
    detail = lib;
  }
  if (reason != nullptr) {
    detail += detail.empty() ? reason : std::string(": ") + reason;
  }
  if (detail.empty()) {
    std::array<char, 256> buffer{};
    ERR_error_string_n(last, buffer.data(), buffer.size());
    detail = buffer.data();
  }
  return Error{what + ": " + detail, 0, {}};
}

std::string opensslReason() {
  const unsigned long last = takeLastError();
  const char* reason = last != 0 ? ERR_reason_error_string(last) : nullptr;
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

std::string opensslErrors() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    std::array<char, 256> buffer{};
    ERR_error_string_n(code, buffer.data(), buffer.size());
    if (!out.empty()) {
      out += "; ";
    }
    out += buffer.data();
  }
  return out.empty() ? std::string("unknown OpenSSL error") : out;
}

Result<std::chrono::system_clock::time_point> certificateEnd(const X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) {
    return fail(opensslError("certificate notAfter"));
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace gvirtus
