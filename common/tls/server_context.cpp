#include "common/tls/server_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/net/sockets.h"
#include "common/telemetry/log.h"
#include "common/tls/openssl_util.h"
#include "common/tls/socket_bio.h"

namespace gvirtus {

namespace {

// TLS 1.2 suites: forward secret AEAD only (TLS 1.3 keeps OpenSSL's defaults, all AEAD).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// OpenSSL's option macros are written with C casts.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
constexpr uint64_t kSslOptions =
    SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE;
#pragma GCC diagnostic pop

// A serving certificate (leaf, intermediates) and its key, parsed once.
struct TlsMaterial {
  X509Ptr cert;
  PkeyPtr key;
  X509StackPtr chain;
};

Result<std::shared_ptr<const TlsMaterial>> parseTlsMaterial(const std::string& certPem,
                                                            const std::string& keyPem) {
  ERR_clear_error();
  auto material = std::make_shared<TlsMaterial>();
  auto certBio = memoryBio(certPem);
  if (!certBio) {
    return fail(certBio.error().context("allocate BIO"));
  }
  std::vector<X509Ptr> certs = readPemCertificates(certBio->get(), &refusePassphrase);
  if (certs.empty()) {
    return fail("parse certificate: " + opensslErrors());
  }
  ERR_clear_error();  // the read that ended the chain left "no start line"
  material->cert = std::move(certs.front());
  material->chain = newX509Stack();
  if (!material->chain) {
    return fail("allocate certificate chain: " + opensslErrors());
  }
  for (size_t i = 1; i < certs.size(); ++i) {
    if (!pushX509(material->chain.get(), std::move(certs[i]))) {
      return fail("build certificate chain: " + opensslErrors());
    }
  }
  auto keyBio = memoryBio(keyPem);
  if (!keyBio) {
    return fail(keyBio.error().context("allocate BIO"));
  }
  material->key = readPemPrivateKey(keyBio->get(), &refusePassphrase);
  if (!material->key) {
    return fail("parse private key: " + opensslErrors());
  }
  if (X509_check_private_key(material->cert.get(), material->key.get()) != 1) {
    ERR_clear_error();
    return fail("the private key does not match the certificate");
  }
  return std::shared_ptr<const TlsMaterial>(std::move(material));
}

Result<std::string> readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail("open " + path + ": " + errnoText(errno));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) {
    return fail("read " + path);
  }
  return out.str();
}

// What identifies one version of a file: a rewrite or a symlink swap (Kubernetes secret
// volumes) changes at least one of these.
struct FileStamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtimeSec = 0;
  int64_t mtimeNsec = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp stampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return {};
  }
  return {true, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

int alpnSelect(SSL*, const unsigned char** out, unsigned char* outLen, const unsigned char* in,
               unsigned int inLen, void*) {
  // Only HTTP/1.1 is spoken; a client offering it (Go offers "h2,http/1.1") gets it.
  static const unsigned char kHttp11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
  for (unsigned int i = 0; i < inLen;) {
    unsigned int len = in[i];
    if (i + 1 + len > inLen) {
      break;
    }
    if (len == sizeof(kHttp11) && std::memcmp(in + i + 1, kHttp11, len) == 0) {
      *out = in + i + 1;
      *outLen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

// ---- A session ------------------------------------------------------------------------------

struct TlsSession::Impl {
  Impl(int socket, std::string serverName) : fd(socket), name(std::move(serverName)) {}
  int fd;            // read by the BIO through its data pointer: this object does not move
  std::string name;  // of the server, for log lines
  SslPtr ssl;
};

TlsSession::TlsSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsSession::~TlsSession() = default;

namespace {

// Repeats one SSL_read or SSL_write until it moves bytes, waiting on the socket for what
// OpenSSL asks (a read may need to write, during a key update, and the reverse).
template <typename Transfer>
ssize_t transferTls(SSL* ssl, int fd, TlsSession::Deadline deadline, Transfer transfer) {
  for (;;) {
    ERR_clear_error();
    int n = transfer(ssl);
    if (n > 0) {
      return n;
    }
    int err = SSL_get_error(ssl, n);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      ERR_clear_error();
      return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
    if (!waitForFd(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
      return -1;
    }
  }
}

// One SSL call that may not wait on the socket; `rc` is what it returned.
TlsSession::Step stepOf(SSL* ssl, int rc) {
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
      return TlsSession::Step::WantRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsSession::Step::WantWrite;
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      return TlsSession::Step::Closed;
    default:
      return TlsSession::Step::Failed;
  }
}

}  // namespace

TlsSession::Step TlsSession::handshake() {
  SSL* ssl = impl_->ssl.get();
  ERR_clear_error();
  int rc = SSL_do_handshake(ssl);
  if (rc == 1) {
    return Step::Done;
  }
  Step step = stepOf(ssl, rc);
  if (step != Step::WantRead && step != Step::WantWrite) {
    if (log::enabled(log::Level::Debug)) {
      log::debug("TLS handshake failed", {{"server", impl_->name}, {"error", opensslErrors()}});
    }
    ERR_clear_error();
    return Step::Failed;
  }
  return step;
}

TlsSession::Step TlsSession::readSome(char* data, size_t size, size_t& moved) {
  SSL* ssl = impl_->ssl.get();
  moved = 0;
  ERR_clear_error();
  int n = SSL_read(ssl, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
  if (n > 0) {
    moved = static_cast<size_t>(n);
    return Step::Done;
  }
  Step step = stepOf(ssl, n);
  ERR_clear_error();
  return step;
}

TlsSession::Step TlsSession::writeSome(const char* data, size_t size, size_t& moved) {
  SSL* ssl = impl_->ssl.get();
  moved = 0;
  ERR_clear_error();
  int n = SSL_write(ssl, data, static_cast<int>(std::min<size_t>(size, 64 * 1024)));
  if (n > 0) {
    moved = static_cast<size_t>(n);
    return Step::Done;
  }
  Step step = stepOf(ssl, n);
  ERR_clear_error();
  return step == Step::Closed ? Step::Failed : step;  // a write moves bytes or fails
}

ssize_t TlsSession::read(char* data, size_t size, Deadline deadline) {
  int want = static_cast<int>(std::min<size_t>(size, 1 << 30));
  return transferTls(impl_->ssl.get(), impl_->fd, deadline,
                     [&](SSL* ssl) { return SSL_read(ssl, data, want); });
}

ssize_t TlsSession::write(const char* data, size_t size, Deadline deadline) {
  int chunk = static_cast<int>(std::min<size_t>(size, 64 * 1024));
  ssize_t n = transferTls(impl_->ssl.get(), impl_->fd, deadline,
                          [&](SSL* ssl) { return SSL_write(ssl, data, chunk); });
  return n == 0 ? -1 : n;  // a write moves bytes or fails
}

bool TlsSession::pending() const {
  // Not SSL_pending: with read-ahead, records read but not yet decrypted count too.
  return SSL_has_pending(impl_->ssl.get()) == 1;
}

void TlsSession::shutdown() {
  ERR_clear_error();
  SSL_shutdown(impl_->ssl.get());
  ERR_clear_error();
}

// ---- The context ----------------------------------------------------------------------------

struct TlsServerContext::Impl {
  explicit Impl(TlsServerOptions o) : options(std::move(o)) {}

  TlsServerOptions options;
  SslCtxPtr sslCtx;
  mutable std::mutex certMutex;
  std::shared_ptr<const TlsMaterial> material;
  std::chrono::steady_clock::time_point lastCertCheck{};
  std::mutex reloadMutex;
  FileStamp certStamp;
  FileStamp keyStamp;

  Result<void> init();
  Result<void> loadCertFiles(bool initial);
  std::shared_ptr<const TlsMaterial> currentMaterial();
  static int certCallback(SSL* ssl, void* arg);
};

Result<void> TlsServerContext::Impl::init() {
  ERR_clear_error();
  sslCtx.reset(SSL_CTX_new(TLS_server_method()));
  if (!sslCtx) {
    return fail("create TLS context: " + opensslErrors());
  }
  SSL_CTX* ctx = sslCtx.get();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return fail("set TLS minimum version: " + opensslErrors());
  }
  SSL_CTX_set_options(ctx, kSslOptions);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  // One recv takes whatever records have arrived (a request is often two: head, body)
  // instead of two per record (its header, then the rest): 4 recvs a review became 1.
  SSL_CTX_set_read_ahead(ctx, 1);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return fail("set TLS ciphers: " + opensslErrors());
  }
  SSL_CTX_set_cert_cb(ctx, &Impl::certCallback, this);
  SSL_CTX_set_alpn_select_cb(ctx, alpnSelect, nullptr);
  if (!options.certFile.empty() || !options.keyFile.empty()) {
    if (options.certFile.empty() || options.keyFile.empty()) {
      return fail("TLS needs both a certificate file and a key file");
    }
    if (auto r = loadCertFiles(true); !r) {
      return r;
    }
  } else if (options.certificate) {
    auto parsed = parseTlsMaterial(options.certificate->certPem, options.certificate->keyPem);
    if (!parsed) {
      return fail(parsed.error().context("TLS certificate"));
    }
    material = *parsed;
  }
  return {};
}

// Reads the certificate and key files when they changed since the last attempt. On the
// first load an error is returned; later a bad pair is logged and the old one kept.
Result<void> TlsServerContext::Impl::loadCertFiles(bool initial) {
  std::unique_lock reload(reloadMutex, std::try_to_lock);
  if (!reload.owns_lock()) {
    return {};  // another handshake is reloading right now
  }
  FileStamp cert = stampOf(options.certFile);
  FileStamp key = stampOf(options.keyFile);
  if (!initial && cert == certStamp && key == keyStamp) {
    return {};
  }
  certStamp = cert;
  keyStamp = key;
  auto load = [&]() -> Result<std::shared_ptr<const TlsMaterial>> {
    auto certPem = readWholeFile(options.certFile);
    if (!certPem) {
      return fail(certPem.error());
    }
    auto keyPem = readWholeFile(options.keyFile);
    if (!keyPem) {
      return fail(keyPem.error());
    }
    return parseTlsMaterial(*certPem, *keyPem);
  };
  auto loaded = load();
  if (!loaded) {
    Error e = loaded.error().context("load TLS certificate " + options.certFile + " and key " +
                                     options.keyFile);
    if (initial) {
      return fail(e);
    }
    log::error("TLS certificate reload failed; serving the previous certificate",
               {{"server", options.name}, {"error", e.message}});
    return {};
  }
  {
    std::lock_guard lock(certMutex);
    material = *loaded;
  }
  if (!initial) {
    log::info("TLS certificate reloaded",
              {{"server", options.name}, {"certFile", options.certFile}});
  }
  return {};
}

std::shared_ptr<const TlsMaterial> TlsServerContext::Impl::currentMaterial() {
  if (!options.certFile.empty()) {
    bool due = false;
    {
      std::lock_guard lock(certMutex);
      auto now = std::chrono::steady_clock::now();
      if (now - lastCertCheck >= options.checkInterval) {
        lastCertCheck = now;
        due = true;
      }
    }
    if (due) {
      (void)loadCertFiles(false);
    }
  }
  std::lock_guard lock(certMutex);
  return material;
}

int TlsServerContext::Impl::certCallback(SSL* ssl, void* arg) {
  auto* self = static_cast<Impl*>(arg);
  auto current = self->currentMaterial();
  if (!current) {
    return 0;  // no certificate yet: fail the handshake
  }
  return SSL_use_cert_and_key(ssl, current->cert.get(), current->key.get(), current->chain.get(),
                              1) == 1
             ? 1
             : 0;
}

TlsServerContext::TlsServerContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsServerContext::~TlsServerContext() = default;

Result<std::unique_ptr<TlsServerContext>> TlsServerContext::create(TlsServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (auto r = impl->init(); !r) {
    return fail(r.error());
  }
  return std::make_unique<TlsServerContext>(std::move(impl));
}

std::unique_ptr<TlsSession> TlsServerContext::newSession(int fd) {
  auto session = std::make_unique<TlsSession::Impl>(fd, impl_->options.name);
  ERR_clear_error();
  SslPtr& ssl = session->ssl;
  ssl.reset(SSL_new(impl_->sslCtx.get()));
  BIO* bio = ssl ? BIO_new(socketBioMethod()) : nullptr;
  if (!ssl || bio == nullptr) {
    log::error("TLS: cannot set up a connection",
               {{"server", impl_->options.name}, {"error", opensslErrors()}});
    return nullptr;
  }
  BIO_set_data(bio, &session->fd);
  SSL_set_bio(ssl.get(), bio, bio);  // the SSL owns the BIO now
  SSL_set_accept_state(ssl.get());
  return std::make_unique<TlsSession>(std::move(session));
}

Result<void> TlsServerContext::setCertificate(const PemKeyPair& pair) {
  auto parsed = parseTlsMaterial(pair.certPem, pair.keyPem);
  if (!parsed) {
    return fail(parsed.error().context("TLS certificate"));
  }
  std::lock_guard lock(impl_->certMutex);
  impl_->material = *parsed;
  return {};
}

std::optional<std::chrono::system_clock::time_point> TlsServerContext::certificateNotAfter() const {
  std::shared_ptr<const TlsMaterial> material;
  {
    std::lock_guard lock(impl_->certMutex);
    material = impl_->material;
  }
  if (!material || !material->cert) {
    return std::nullopt;
  }
  auto end = certificateEnd(material->cert.get());
  return end ? std::optional(*end) : std::nullopt;
}

}  // namespace gvirtus
