#include "backend-shim/sessions/process.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "common/net/sockets.h"

namespace gvirtus::backend_shim {

namespace protocol = gvirtus::peer_guard;

Result<UniqueFd> openPidfd(pid_t pid) {
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    return fail("cannot watch process " + std::to_string(pid) + ": " + errnoText(errno));
  }
  return UniqueFd(static_cast<int>(fd));
}

Result<std::unique_ptr<SessionProcess>> SessionProcess::start(const std::vector<std::string>& argv,
                                                              std::vector<std::string> env,
                                                              uint16_t port, ProcessOutput output) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return fail("cannot make a handoff socket: " + errnoText(errno));
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  env.push_back(std::string(protocol::kHandoffFdEnv) + "=" +
                std::to_string(ProcessGroup::kPassedFd));
  env.push_back(std::string(protocol::kHandoffPortEnv) + "=" + std::to_string(port));
  auto group = ProcessGroup::start(argv, env, ReapScope::Leader, output, theirs.get());
  if (!group) {
    return fail(group.error());
  }
  auto watch = openPidfd(group->pid());
  if (!watch) {
    return fail(watch.error());
  }
  return std::make_unique<SessionProcess>(PassKey{}, std::move(*group), std::move(ours),
                                          std::move(*watch));
}

SessionProcess::SessionProcess(PassKey, ProcessGroup group, UniqueFd control, UniqueFd leaderPidfd)
    : group_(std::move(group)),
      control_(std::move(control)),
      leaderPidfd_(std::move(leaderPidfd)) {}

Result<bool> SessionProcess::readAnnouncement() {
  uint8_t message[protocol::kReadySize + 1];
  const ssize_t got = ::recv(control_.get(), message, sizeof(message), MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
    return ready();
  }
  if (got <= 0) {
    return fail(got == 0 ? "its handoff socket was closed"
                         : "its handoff socket: " + errnoText(errno));
  }
  if (got != protocol::kReadySize || message[0] != protocol::kReady) {
    return fail("it sent " + std::to_string(got) + " bytes that are not an announcement");
  }
  int32_t pid = 0;
  std::memcpy(&pid, message + 1, sizeof(pid));
  if (serverPid_ != 0) {
    return true;  // a second accepting thread said it again
  }
  // The accepting process must be of this group: its pid is not taken on trust.
  if (pid <= 0 || ::getpgid(pid) != group_.pid()) {
    return fail("it announced pid " + std::to_string(pid) + ", which is not of its group");
  }
  auto watch = openPidfd(pid);
  if (!watch) {
    return fail(watch.error());
  }
  serverPidfd_ = std::move(*watch);
  serverPid_ = pid;
  return true;
}

Result<void> SessionProcess::limit(uint64_t gpuMemoryBytes) {
  uint8_t message[protocol::kLimitsSize];
  message[0] = protocol::kLimits;
  std::memcpy(message + 1, &gpuMemoryBytes, sizeof(gpuMemoryBytes));
  for (;;) {
    if (::send(control_.get(), message, sizeof(message), MSG_NOSIGNAL | MSG_DONTWAIT) ==
        static_cast<ssize_t>(sizeof(message))) {
      return {};
    }
    if (errno != EINTR) {
      return fail("cannot send the pod's limits: " + errnoText(errno));
    }
  }
}

Result<void> SessionProcess::hand(int connection) {
  uint8_t kind = protocol::kSession;
  iovec part{&kind, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &connection, sizeof(int));
  for (;;) {
    if (::sendmsg(control_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
      return {};
    }
    if (errno != EINTR) {
      return fail("cannot hand the connection over: " + errnoText(errno));
    }
  }
}

void SessionProcess::kill() {
  (void)group_.signal(SIGKILL);
}

bool SessionProcess::gone() {
  group_.reap();
  return !group_.leaderRunning() && !group_.groupAlive();
}

}  // namespace gvirtus::backend_shim
