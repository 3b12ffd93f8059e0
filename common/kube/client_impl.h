#pragma once

// KubeClient::Impl, the state behind a KubeClient, and the types its parts share. Private to
// the KubeClient: only common/kube/*.cpp include it, so httplib and OpenSSL stay out of
// client.h.

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/kube/access/config.h"
#include "common/kube/access/server_url.h"
#include "common/kube/access/token_source.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "common/time/rate_limiter.h"
#include "common/tls/openssl_util.h"

namespace gvirtus {
namespace kube_detail {

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// "?key=value&...", the values percent-encoded; "" without parameters.
std::string queryString(const QueryParams& params);

struct Call {
  std::string verb;  // for RequestCounts
  std::string method;
  std::string path;
  QueryParams query;
  std::string body;
  std::string contentType;

  std::string what() const { return method + " " + path; }
};

// One HTTP(S) client with its keep-alive connection. Used by one thread at a time: httplib's
// client is not safe for concurrent requests.
struct Connection {
  std::unique_ptr<httplib::ClientImpl> http;
  // Why the server certificate was refused, filled in by the verify callback.
  std::string verifyError;
  std::chrono::steady_clock::time_point idleSince;
};

// The error text of a request on `connection` that got no response: the transport failure,
// or why the server certificate was refused.
std::string transportError(httplib::Error error, const Connection& connection,
                           const std::string& server);

}  // namespace kube_detail

// Its members are defined by part: requests and retries in client.cpp, credentials in
// credentials.cpp, connections in connection_pool.cpp, watches in watch.cpp.
class KubeClient::Impl {
 public:
  Impl(KubeConfig config, KubeClientOptions options, kube_detail::ServerUrl url)
      : config_(std::move(config)),
        options_(std::move(options)),
        url_(std::move(url)),
        limiter_(options_.qps, options_.burst),
        tokens_(config_.token, config_.tokenFile, options_.tokenCheckInterval) {}

  // Reads the kubeconfig's client certificate, key and certificate authority.
  Result<void> loadCredentials();

  const std::string& server() const { return config_.server; }

  RequestCounts counts() const {
    std::lock_guard lock(countsMutex_);
    return counts_;
  }

  void count(const std::string& verb) {
    std::lock_guard lock(countsMutex_);
    ++counts_.byVerb[verb];
  }

  Result<httplib::Response> send(const kube_detail::Call& call);
  Result<nlohmann::json> sendJson(const kube_detail::Call& call);
  // Waits `duration` unless the client is cancelled first; false when cancelled.
  bool waitUnlessCancelled(Duration duration);
  // A rate-limiter token, waiting for it unless cancelled; false when cancelled.
  bool takeToken();
  Result<void> watch(const std::string& path, const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& onEvent, std::stop_token stop);

 private:
  Result<std::unique_ptr<kube_detail::Connection>> newConnection(Duration readTimeout);
  std::unique_ptr<kube_detail::Connection> takeIdle();
  void giveBack(std::unique_ptr<kube_detail::Connection> connection);
  void dropIdle();
  httplib::Headers headers();
  // Logs each distinct Warning header of the API server once (deprecated APIs, ignored
  // fields): what an operator must see before the next release removes something.
  void reportWarnings(const kube_detail::Call& call, const httplib::Response& response);

  const KubeConfig config_;
  const KubeClientOptions options_;
  const kube_detail::ServerUrl url_;
  X509Ptr clientCert_;
  std::vector<X509Ptr> clientChain_;
  PkeyPtr clientKey_;
  std::vector<X509Ptr> caCerts_;
  RateLimiter limiter_;
  kube_detail::TokenSource tokens_;

  std::mutex idleMutex_;
  std::vector<std::unique_ptr<kube_detail::Connection>> idle_;

  mutable std::mutex countsMutex_;
  RequestCounts counts_;

  std::mutex warningsMutex_;
  std::set<std::string> warnings_;
};

}  // namespace gvirtus
