#pragma once

// A socket BIO that never raises SIGPIPE. OpenSSL's own socket BIO writes with write(2),
// which kills a process that has not ignored SIGPIPE when the peer is gone; this one sends
// with MSG_NOSIGNAL. Private to common/ (like common/tls/openssl_util.h): only common/*.cpp
// include it.

#include <openssl/bio.h>

namespace gvirtus {

// The method of such BIOs: BIO_new(socketBioMethod()), then BIO_set_data(bio, &fd) with an
// int that outlives the BIO. Process-lifetime and shared by every server; deliberately never
// freed, since OpenSSL's own exit-time cleanup may run before static destructors.
BIO_METHOD* socketBioMethod();

}  // namespace gvirtus
