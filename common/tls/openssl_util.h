#pragma once

// The one place OpenSSL objects get RAII, with the PEM reading and error-queue helpers that
// go with them. Private to common/: only common/*.cpp include it, never a header, so it is
// not part of common's public interface and OpenSSL stays out of the headers.

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"

namespace gvirtus {

// One deleter per OpenSSL free function, so every object lives in a std::unique_ptr.
template <auto FreeFn>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* p) const {
    FreeFn(p);
  }
};

using X509Stack = STACK_OF(X509);
// Frees the stack and every certificate in it.
void freeX509Stack(X509Stack* stack);

using BioPtr = std::unique_ptr<BIO, OpenSslDeleter<&BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, OpenSslDeleter<&X509_free>>;
using X509StackPtr = std::unique_ptr<X509Stack, OpenSslDeleter<&freeX509Stack>>;
using StorePtr = std::unique_ptr<X509_STORE, OpenSslDeleter<&X509_STORE_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<&EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpenSslDeleter<&EVP_PKEY_CTX_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslDeleter<&BN_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpenSslDeleter<&X509_EXTENSION_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpenSslDeleter<&GENERAL_NAMES_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpenSslDeleter<&GENERAL_NAME_free>>;
using Ia5StringPtr = std::unique_ptr<ASN1_IA5STRING, OpenSslDeleter<&ASN1_IA5STRING_free>>;
using OctetStringPtr = std::unique_ptr<ASN1_OCTET_STRING, OpenSslDeleter<&ASN1_OCTET_STRING_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, OpenSslDeleter<&SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OpenSslDeleter<&SSL_free>>;

// An empty certificate stack; null when OpenSSL cannot allocate one.
X509StackPtr newX509Stack();
// Appends `cert`, which the stack then owns; false (and `cert` freed) when it cannot.
bool pushX509(X509Stack* stack, X509Ptr cert);

// ---- PEM -------------------------------------------------------------------------------

// A passphrase callback that never prompts on a terminal: encrypted PEM is refused.
int refusePassphrase(char* buf, int size, int rwflag, void* userdata);

// A read-only memory BIO over `data`, which must outlive it.
Result<BioPtr> memoryBio(std::string_view data);

// The certificates at the start of `bio`, in order, up to the first PEM block that is not
// one. Reading stops on an OpenSSL error left on the queue for the caller to report or
// clear: isEndOfPem() when the data simply ran out.
std::vector<X509Ptr> readPemCertificates(BIO* bio, pem_password_cb* passphrase = &refusePassphrase);

// The first private key in `bio`; null, with the reason on OpenSSL's error queue, when
// there is none or it cannot be read.
PkeyPtr readPemPrivateKey(BIO* bio, pem_password_cb* passphrase = &refusePassphrase);

// Whether the last error on the queue is PEM's "no start line": no (further) PEM block.
bool isEndOfPem();

// ---- Errors ----------------------------------------------------------------------------
// Each of these drains this thread's OpenSSL error queue.

// "what: PEM routines: no start line" from the last error; just `what` when there is none.
Error opensslError(const std::string& what);
// The certificate's notAfter.
Result<std::chrono::system_clock::time_point> certificateEnd(const X509* cert);
// The reason of the last error ("no start line"); "unknown OpenSSL error" when there is none.
std::string opensslReason();
// Every error in full, "; "-separated; "unknown OpenSSL error" when there is none.
std::string opensslErrors();

}  // namespace gvirtus
