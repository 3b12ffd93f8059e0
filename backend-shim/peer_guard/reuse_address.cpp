// GVirtuS's TCP communicator asks for SO_REUSEADDR with a one-byte option value (a bool).
// Linux wants an int and refuses it with EINVAL, which GVirtuS does not check, so the backend
// binds its port without SO_REUSEADDR: restarted, it cannot bind while any connection of the
// run before lingers on the port (TIME_WAIT, FIN_WAIT2, LAST_ACK: up to about two minutes),
// and it never listens. Preloaded, this setsockopt() passes such a value on as the int the
// kernel wants, so the backend gets the option it asked for; its connections then carry it
// too, and the next run binds at once. Every other option passes on unchanged.
//
// The library's rules hold here (accept_guard.cpp): the raw system call, no allocation.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" [[gnu::visibility("default")]] int setsockopt(int fd, int level, int name,
                                                         const void* value,
                                                         socklen_t length) noexcept {
  int widened = 0;
  if (level == SOL_SOCKET && name == SO_REUSEADDR && value != nullptr && length > 0 &&
      length < sizeof(int)) {
    const auto* bytes = static_cast<const unsigned char*>(value);
    for (socklen_t i = 0; i < length; ++i) {
      widened |= bytes[i];
    }
    widened = widened != 0 ? 1 : 0;
    value = &widened;
    length = sizeof(widened);
  }
  return static_cast<int>(syscall(SYS_setsockopt, fd, level, name, value, length));
}
