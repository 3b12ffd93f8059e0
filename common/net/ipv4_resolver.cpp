#include "common/net/ipv4_resolver.h"

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

namespace gvirtus {
namespace {

struct ChannelDeleter {
  void operator()(ares_channeldata* channel) const { ares_destroy(channel); }
};
using Channel = std::unique_ptr<ares_channeldata, ChannelDeleter>;

struct AddrinfoDeleter {
  void operator()(ares_addrinfo* info) const { ares_freeaddrinfo(info); }
};

Result<void> initLibrary() {
  static std::once_flag once;
  static int status = ARES_SUCCESS;
  std::call_once(once, [] { status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (status != ARES_SUCCESS) {
    return fail(std::string("initialising c-ares: ") + ares_strerror(status));
  }
  return {};
}

bool isIpv6(const std::string& text) {
  in6_addr addr{};
  return inet_pton(AF_INET6, text.c_str(), &addr) == 1;
}

// RFC 1123 host names (underscores allowed, as DNS allows them), with an optional
// trailing dot. The last label must not be all digits, so "1.2.3" is not a name.
bool isHostName(std::string_view host) {
  if (!host.empty() && host.back() == '.') {
    host.remove_suffix(1);
  }
  if (host.empty() || host.size() > 253) {
    return false;
  }
  std::string_view label;
  while (!host.empty()) {
    const auto dot = host.find('.');
    label = host.substr(0, dot);
    host = dot == std::string_view::npos ? std::string_view() : host.substr(dot + 1);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return false;
      }
    }
    if (dot != std::string_view::npos && host.empty()) {
      return false;  // "a..": an empty label
    }
  }
  return !std::all_of(label.begin(), label.end(),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "IP" or "IP:PORT" (IPv4) -> "IP:PORT" as ares_set_servers_ports_csv takes it.
Result<std::string> parseServer(const std::string& text) {
  const auto colon = text.find(':');
  const std::string ip = text.substr(0, colon);
  if (!isDottedIpv4(ip)) {
    return fail("DNS server \"" + text + "\": want IPv4 or IPv4:PORT");
  }
  if (colon == std::string::npos) {
    return ip + ":53";
  }
  const std::string port = text.substr(colon + 1);
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
    return fail("DNS server \"" + text + "\": port must be between 1 and 65535");
  }
  return ip + ":" + std::to_string(value);
}

// Validates the servers and joins them for ares_set_servers_ports_csv.
Result<std::string> serverList(const std::vector<std::string>& servers) {
  std::string csv;
  for (const auto& server : servers) {
    auto parsed = parseServer(server);
    if (!parsed) {
      return fail(parsed.error());
    }
    if (!csv.empty()) {
      csv += ',';
    }
    csv += *parsed;
  }
  return csv;
}

Result<Channel> openChannel(const Ipv4ResolverOptions& options) {
  ares_options settings{};
  // c-ares doubles the wait on each round; the caller's deadline caps the total.
  const auto perTry = std::max<int64_t>(1, options.timeout.count() / options.tries);
  settings.timeout = static_cast<int>(std::min<int64_t>(perTry, 3'600'000));
  settings.tries = options.tries;
  ares_channeldata* raw = nullptr;
  const int status = ares_init_options(&raw, &settings, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
  Channel channel(raw);
  if (status != ARES_SUCCESS) {
    return fail(std::string("setting up a DNS resolver: ") + ares_strerror(status));
  }
  if (!options.servers.empty()) {
    auto csv = serverList(options.servers);
    if (!csv) {
      return fail(csv.error());
    }
    const int set = ares_set_servers_ports_csv(channel.get(), csv->c_str());
    if (set != ARES_SUCCESS) {
      return fail("setting DNS servers \"" + *csv + "\": " + ares_strerror(set));
    }
  }
  return channel;
}

struct Lookup {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<std::string> addresses;
};

void onAddrinfo(void* arg, int status, int /*timeouts*/, ares_addrinfo* result) {
  std::unique_ptr<ares_addrinfo, AddrinfoDeleter> owned(result);
  auto* lookup = static_cast<Lookup*>(arg);
  lookup->done = true;
  lookup->status = status;
  if (status != ARES_SUCCESS || result == nullptr) {
    return;
  }
  for (const ares_addrinfo_node* node = result->nodes; node != nullptr; node = node->ai_next) {
    if (node->ai_family != AF_INET || node->ai_addr == nullptr ||
        node->ai_addrlen < sizeof(sockaddr_in)) {
      continue;
    }
    sockaddr_in address{};
    std::memcpy(&address, node->ai_addr, sizeof(address));
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text)) == nullptr) {
      continue;
    }
    if (std::find(lookup->addresses.begin(), lookup->addresses.end(), text) ==
        lookup->addresses.end()) {
      lookup->addresses.emplace_back(text);
    }
  }
}

// Runs the channel's queries until the lookup finishes or the deadline passes.
Result<void> drive(ares_channeldata* channel, const Lookup& lookup,
                   std::chrono::steady_clock::time_point deadline) {
  while (!lookup.done) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      ares_cancel(channel);  // calls back with ARES_ECANCELLED
      return {};
    }
    ares_socket_t sockets[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel, sockets, ARES_GETSOCK_MAXNUM);
    std::vector<pollfd> fds;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      const bool readable = ARES_GETSOCK_READABLE(bits, i) != 0;
      const bool writable = ARES_GETSOCK_WRITABLE(bits, i) != 0;
      if (!readable && !writable) {
        continue;
      }
      const short events = static_cast<short>((readable ? POLLIN : 0) | (writable ? POLLOUT : 0));
      fds.push_back(pollfd{sockets[i], events, 0});
    }
    const auto left = std::chrono::ceil<std::chrono::microseconds>(deadline - now).count();
    timeval most{static_cast<time_t>(left / 1'000'000), static_cast<suseconds_t>(left % 1'000'000)};
    timeval next{};
    const timeval* wait = ares_timeout(channel, &most, &next);
    const int waitMs = static_cast<int>(wait->tv_sec * 1000 + (wait->tv_usec + 999) / 1000);
    const int ready = poll(fds.data(), fds.size(), waitMs);
    if (ready < 0 && errno != EINTR) {
      return fail(std::string("waiting for DNS answers: ") + std::strerror(errno));
    }
    if (ready <= 0) {
      ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts, retries
      continue;
    }
    for (const auto& fd : fds) {
      if (lookup.done) {
        break;
      }
      if (fd.revents == 0) {
        continue;
      }
      const bool read = (fd.revents & (POLLIN | POLLERR | POLLHUP)) != 0;
      const bool write = (fd.revents & POLLOUT) != 0;
      ares_process_fd(channel, read ? fd.fd : ARES_SOCKET_BAD, write ? fd.fd : ARES_SOCKET_BAD);
    }
  }
  return {};
}

}  // namespace

bool isDottedIpv4(std::string_view text) {
  if (text.empty() || text.size() > 15) {
    return false;
  }
  in_addr addr{};
  return inet_pton(AF_INET, std::string(text).c_str(), &addr) == 1;
}

Result<std::unique_ptr<Ipv4Resolver>> Ipv4Resolver::create(Ipv4ResolverOptions options) {
  if (options.timeout.count() <= 0) {
    return fail("DNS timeout must be positive");
  }
  if (options.tries < 1) {
    return fail("DNS tries must be at least 1");
  }
  if (auto ok = initLibrary(); !ok) {
    return fail(ok.error());
  }
  if (auto probe = openChannel(options); !probe) {
    return fail(probe.error());
  }
  return std::make_unique<Ipv4Resolver>(PrivateTag{}, std::move(options));
}

Ipv4Resolver::Ipv4Resolver(PrivateTag, Ipv4ResolverOptions options)
    : options_(std::move(options)) {}

Result<std::vector<std::string>> Ipv4Resolver::resolve(const std::string& host) const {
  if (isDottedIpv4(host)) {
    return std::vector<std::string>{host};
  }
  if (isIpv6(host)) {
    return fail("\"" + host + "\" is an IPv6 address; GVirtuS needs an IPv4 address");
  }
  if (!isHostName(host)) {
    return fail("\"" + host + "\" is neither an IPv4 address nor a valid host name");
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  // Declared before the channel: destroying the channel calls back into it.
  Lookup lookup;
  auto channel = openChannel(options_);
  if (!channel) {
    return fail(channel.error().context("resolving \"" + host + "\""));
  }
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_INET;
  hints.ai_flags = ARES_AI_NOSORT;
  ares_getaddrinfo(channel->get(), host.c_str(), nullptr, &hints, onAddrinfo, &lookup);
  if (auto ok = drive(channel->get(), lookup, deadline); !ok) {
    return fail(ok.error().context("resolving \"" + host + "\""));
  }
  if (!lookup.done) {
    return fail("resolving \"" + host + "\": no answer");
  }
  switch (lookup.status) {
    case ARES_SUCCESS:
      if (lookup.addresses.empty()) {
        return fail("host \"" + host + "\" has no IPv4 address (no A record)");
      }
      return lookup.addresses;
    case ARES_ENODATA:
      return fail("host \"" + host + "\" has no IPv4 address (no A record)");
    case ARES_ENOTFOUND:
    case ARES_ENONAME:
      return fail("host \"" + host + "\" not found");
    case ARES_ETIMEOUT:
    case ARES_ECANCELLED:
      return fail("resolving \"" + host + "\": no answer within " +
                  formatDuration(options_.timeout));
    default:
      return fail("resolving \"" + host + "\": " + ares_strerror(lookup.status));
  }
}

}  // namespace gvirtus
