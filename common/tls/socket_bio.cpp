#include "common/tls/socket_bio.h"

#include <sys/socket.h>

#include <cerrno>

namespace gvirtus {
namespace {

int socketBioFd(BIO* bio) {
  return *static_cast<int*>(BIO_get_data(bio));
}

int socketBioWrite(BIO* bio, const char* data, size_t len, size_t* written) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(socketBioFd(bio), data, len, MSG_NOSIGNAL);
  if (n >= 0) {
    *written = static_cast<size_t>(n);
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    BIO_set_retry_write(bio);
  }
  return 0;
}

int socketBioRead(BIO* bio, char* data, size_t len, size_t* readBytes) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(socketBioFd(bio), data, len, 0);
  if (n > 0) {
    *readBytes = static_cast<size_t>(n);
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return 0;
}

long socketBioCtrl(BIO*, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    default:
      return 0;
  }
}

int socketBioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

}  // namespace

BIO_METHOD* socketBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gvirtus-socket");
    if (m != nullptr) {
      BIO_meth_set_write_ex(m, socketBioWrite);
      BIO_meth_set_read_ex(m, socketBioRead);
      BIO_meth_set_ctrl(m, socketBioCtrl);
      BIO_meth_set_create(m, socketBioCreate);
    }
    return m;
  }();
  return method;
}

}  // namespace gvirtus
