#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"

// Host name -> IPv4 addresses, with c-ares. GVirtuS takes only dotted IPv4 addresses, so
// static backends given by name are resolved here (and re-resolved by the caller).
namespace gvirtus {

// True for a dotted-quad IPv4 address ("10.1.2.3"; no leading zeros, no short forms).
bool isDottedIpv4(std::string_view text);

struct Ipv4ResolverOptions {
  // DNS servers as "IP" or "IP:PORT" (IPv4), replacing those of /etc/resolv.conf.
  // Empty: the system's servers, search domains and /etc/hosts.
  std::vector<std::string> servers;
  // The longest one resolve() call takes, all tries included.
  Duration timeout = std::chrono::seconds(2);
  // How many times each server is asked before giving up.
  int tries = 2;
};

class Ipv4Resolver {
  struct PrivateTag {};

 public:
  // Checks the options and that a resolver can be set up with them.
  static Result<std::unique_ptr<Ipv4Resolver>> create(Ipv4ResolverOptions options = {});

  Ipv4Resolver(PrivateTag, Ipv4ResolverOptions options);

  // The IPv4 addresses of `host`, in the order the answer gave them, without duplicates.
  // A dotted IPv4 address is returned as is, without a query. An IPv6 address, an invalid
  // name, a name without A records and a timeout are errors naming the host. Thread-safe:
  // every call uses its own channel.
  Result<std::vector<std::string>> resolve(const std::string& host) const;

 private:
  Ipv4ResolverOptions options_;
};

}  // namespace gvirtus
