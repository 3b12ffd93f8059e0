#include "device-plugin/plugin/kubelet_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/telemetry/log.h"

namespace gvirtus::device_plugin {
namespace {

constexpr uint32_t kWatchMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

std::string errnoText(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

}  // namespace

KubeletWatcher::KubeletWatcher(std::filesystem::path dir, std::string pluginSocketName,
                               UniqueFd inotify, UniqueFd wake)
    : dir_(std::move(dir)),
      pluginSocketName_(std::move(pluginSocketName)),
      inotify_(std::move(inotify)),
      wake_(std::move(wake)) {}

Result<KubeletWatcher> KubeletWatcher::open(std::filesystem::path dir,
                                            std::string pluginSocketName) {
  UniqueFd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify.valid()) {
    return fail(errnoText("inotify_init1"));
  }
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    return fail(errnoText("eventfd"));
  }
  KubeletWatcher watcher(std::move(dir), std::move(pluginSocketName), std::move(inotify),
                         std::move(wake));
  if (auto added = watcher.addWatch(); !added) {
    return fail(added.error());
  }
  return watcher;
}

Result<void> KubeletWatcher::addWatch() {
  watch_ = ::inotify_add_watch(inotify_.get(), dir_.c_str(), kWatchMask);
  if (watch_ < 0) {
    return fail(errnoText("watch " + dir_.string()));
  }
  return {};
}

KubeletWatcher::Events KubeletWatcher::readEvents() {
  Events events;
  alignas(inotify_event) std::array<char, 16 * 1024> buffer;
  while (true) {
    const ssize_t n = ::read(inotify_.get(), buffer.data(), buffer.size());
    if (n <= 0) {
      break;  // EAGAIN: drained
    }
    for (ssize_t offset = 0; offset < n;) {
      inotify_event event;
      std::memcpy(&event, buffer.data() + offset, sizeof(event));
      const std::string name = event.len > 0 ? buffer.data() + offset + sizeof(event) : "";
      offset += static_cast<ssize_t>(sizeof(event) + event.len);

      if ((event.mask & IN_Q_OVERFLOW) != 0) {
        events.overflow = true;
      } else if ((event.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
        if (watch_ >= 0 && (event.mask & IN_IGNORED) == 0) {
          ::inotify_rm_watch(inotify_.get(), watch_);
        }
        watch_ = -1;
        events.overflow = true;
      } else if (name == kKubeletSocket) {
        events.kubeletSocketCreated |= (event.mask & (IN_CREATE | IN_MOVED_TO)) != 0;
        events.kubeletSocketRemoved |= (event.mask & (IN_DELETE | IN_MOVED_FROM)) != 0;
      } else if (name == pluginSocketName_) {
        events.pluginSocketRemoved |= (event.mask & (IN_DELETE | IN_MOVED_FROM)) != 0;
      }
    }
  }
  if (watch_ < 0 && events.overflow) {
    log::warn("the kubelet folder went away; watching for it to come back",
              {{"dir", dir_.string()}});
  }
  return events;
}

Result<KubeletWatcher::Events> KubeletWatcher::wait(Duration timeout, std::stop_token stop) {
  if (watch_ < 0) {
    // The folder went away; once it is back, everything in it is new.
    if (addWatch()) {
      Events events;
      events.overflow = true;
      return events;
    }
  }
  std::stop_callback wakeOnStop(stop, [this] {
    const uint64_t one = 1;
    [[maybe_unused]] auto written = ::write(wake_.get(), &one, sizeof(one));
  });
  if (stop.stop_requested()) {
    return Events{};
  }
  std::array<pollfd, 2> fds{{{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}}};
  const auto timeoutMs = std::clamp<int64_t>(timeout.count(), 0, std::numeric_limits<int>::max());
  const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeoutMs));
  if (ready < 0 && errno != EINTR) {
    return fail(errnoText("poll on inotify"));
  }
  if ((fds[1].revents & POLLIN) != 0) {
    uint64_t count = 0;
    [[maybe_unused]] auto drained = ::read(wake_.get(), &count, sizeof(count));
  }
  if ((fds[0].revents & POLLIN) != 0) {
    return readEvents();
  }
  return Events{};
}

}  // namespace gvirtus::device_plugin
