#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/base/error.h"
#include "common/time/duration.h"
#include "common/tls/certificates.h"

// The server side of TLS for our listeners: TLS 1.2 and 1.3 only, forward-secret AEAD
// suites, ALPN "http/1.1", and a serving certificate that is replaced while serving (from
// memory, or re-read from files when they change). OpenSSL stays behind this header.
namespace gvirtus {

struct TlsServerOptions {
  // PEM files (certificate chain, leaf first; private key), re-read when they change, at
  // most once per `checkInterval`, by new handshakes; a pair that does not load keeps the
  // previous one serving and is logged. Or a pair from memory. Or neither: every handshake
  // fails until setCertificate.
  std::string certFile;
  std::string keyFile;
  std::optional<PemKeyPair> certificate;
  Duration checkInterval = std::chrono::seconds(1);
  // Names the server in log lines.
  std::string name = "tls";
};

// One server-side TLS session over a connected non-blocking socket.
class TlsSession {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // The steps below never wait: each says what it needs from the socket to go on, so that
  // one thread can carry many handshakes and slow requests at once.
  enum class Step { Done, WantRead, WantWrite, Closed, Failed };
  // The server handshake, as far as the socket allows (Done: finished). A failure is
  // logged at debug: scanners and health probes fail handshakes all day.
  Step handshake();
  // Done with `moved` > 0 bytes, or what blocks; Closed: the peer closed (reads).
  Step readSome(char* data, size_t size, size_t& moved);
  Step writeSome(const char* data, size_t size, size_t& moved);

  // As recv(2) and send(2) on the socket, waiting up to `deadline`: the bytes moved (> 0),
  // 0 when the peer closed (reads), -1 on an error or when the deadline passes.
  ssize_t read(char* data, size_t size, Deadline deadline);
  ssize_t write(const char* data, size_t size, Deadline deadline);
  // Bytes wait to be read without waiting on the socket (decrypted, or read ahead).
  bool pending() const;
  // Sends close_notify, best effort.
  void shutdown();

  struct Impl;
  explicit TlsSession(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class TlsServerContext {
 public:
  // Loads the certificate (an error when a file or pair does not load).
  static Result<std::unique_ptr<TlsServerContext>> create(TlsServerOptions options);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // A server session on `fd` (connected, non-blocking; it must outlive the session), its
  // handshake not begun (TlsSession::handshake). nullptr when OpenSSL cannot make one
  // (logged).
  std::unique_ptr<TlsSession> newSession(int fd);

  // Replaces the certificate for new handshakes; an invalid pair is an error and the
  // previous one keeps serving.
  Result<void> setCertificate(const PemKeyPair& pair);
  // The notAfter of the certificate in use; nullopt before one is loaded.
  std::optional<std::chrono::system_clock::time_point> certificateNotAfter() const;

  struct Impl;
  explicit TlsServerContext(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gvirtus
