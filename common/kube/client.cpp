#include "common/kube/client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/kube/access/server_url.h"
#include "common/kube/client_impl.h"
#include "common/kube/request_cancellation.h"
#include "common/kube/status.h"
#include "common/telemetry/log.h"
#include "common/time/backoff.h"
#include "common/time/stoppable_sleep.h"

// KubeClient::create and the one request loop under every verb but watch: rate limit,
// connection, retries, and the error of a failed answer.
namespace gvirtus {
namespace {

using kube_detail::Call;
using kube_detail::Connection;
using kube_detail::parseServerUrl;
using kube_detail::queryString;
using kube_detail::RequestCancellation;
using kube_detail::statusError;
using kube_detail::transportError;
using nlohmann::json;

// Retries of 429 and 5xx without Retry-After, and of connection failures.
constexpr Duration kRetryInitial = std::chrono::milliseconds(250);
constexpr Duration kRetryMax = std::chrono::seconds(10);
// A Retry-After larger than this is clipped: a request does not sleep for an hour.
constexpr Duration kMaxRetryAfter = std::chrono::seconds(60);

std::optional<Duration> retryAfterOf(const httplib::Response& response) {
  if (!response.has_header("Retry-After")) {
    return std::nullopt;
  }
  const std::string value = response.get_header_value("Retry-After");
  if (value.empty() || value.size() > 9 ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;  // an HTTP date: fall back to the backoff
  }
  return std::min<Duration>(std::chrono::seconds(std::stol(value)), kMaxRetryAfter);
}

bool isIdempotent(const std::string& method) {
  return method == "GET" || method == "PUT" || method == "DELETE" || method == "HEAD";
}

}  // namespace

namespace kube_detail {

std::string queryString(const QueryParams& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    out += out.empty() ? "?" : "&";
    out += key + "=" + percentEncode(value);
  }
  return out;
}

}  // namespace kube_detail

void KubeClient::Impl::reportWarnings(const Call& call, const httplib::Response& response) {
  // At most a handful of distinct texts exist; a server that sent endless new ones would
  // only grow this set to the cap.
  constexpr size_t kMaxDistinctWarnings = 64;
  const size_t count = response.get_header_value_count("Warning");
  for (size_t i = 0; i < count; ++i) {
    std::string text = response.get_header_value("Warning", i);
    {
      std::lock_guard lock(warningsMutex_);
      if (warnings_.size() >= kMaxDistinctWarnings || !warnings_.insert(text).second) {
        continue;
      }
    }
    log::warn("the API server warns", {{"request", call.what()}, {"warning", text}});
  }
}

bool KubeClient::Impl::waitUnlessCancelled(Duration duration) {
  return sleepUnlessStopped(options_.cancel, duration);
}

namespace {

httplib::Request requestFor(const Call& call, const std::string& basePath,
                            httplib::Headers headers) {
  httplib::Request request;
  request.method = call.method;
  request.path = basePath + call.path + queryString(call.query);
  request.headers = std::move(headers);
  if (!call.contentType.empty()) {
    request.body = call.body;
    request.set_header("Content-Type", call.contentType);
  }
  return request;
}

// Retry only what cannot have been processed, or cannot hurt:
// - no connection was made (refused, connect timeout, TLS reset; not a refused
//   certificate), or a kept-alive connection turned out closed when writing: any verb;
// - a connection lost while reading, for idempotent verbs, unless the read timed out
//   (a server that takes the whole timeout will take it again).
bool transportRetryable(httplib::Error error, const Connection& connection, bool reused,
                        bool idempotent, bool timedOut) {
  const bool notSent = error == httplib::Error::Connection ||
                       error == httplib::Error::ConnectionTimeout ||
                       (error == httplib::Error::SSLConnection && connection.verifyError.empty()) ||
                       (error == httplib::Error::Write && reused);
  const bool lostRead = error == httplib::Error::Read && idempotent && !timedOut;
  return notSent || lostRead;
}

}  // namespace

bool KubeClient::Impl::takeToken() {
  const auto wait = limiter_.reserve();
  return wait <= RateLimiter::Clock::duration::zero() ||
         waitUnlessCancelled(std::chrono::duration_cast<Duration>(wait));
}

httplib::Headers KubeClient::Impl::headers() {
  httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", options_.userAgent}};
  const std::string token = tokens_.current();
  if (!token.empty()) {
    headers.emplace("Authorization", "Bearer " + token);
  }
  return headers;
}

Result<httplib::Response> KubeClient::Impl::send(const Call& call) {
  count(call.verb);
  const bool idempotent = isIdempotent(call.method);
  Backoff backoff(kRetryInitial, kRetryMax);
  const std::string cancelled = call.what() + ": cancelled: the process is shutting down";
  bool freshConnection = false;
  for (int attempt = 0;; ++attempt) {
    if (options_.cancel.stop_requested() || !takeToken()) {
      return fail(cancelled);
    }
    std::unique_ptr<Connection> connection = freshConnection ? nullptr : takeIdle();
    if (!connection) {
      auto fresh = newConnection(options_.requestTimeout);
      if (!fresh) {
        return fail(fresh.error().context(call.what()));
      }
      connection = std::move(*fresh);
    }
    const httplib::Request request = requestFor(call, url_.basePath, headers());
    connection->verifyError.clear();
    const bool reused = connection->http->is_socket_open() != 0;
    const auto sentAt = std::chrono::steady_clock::now();
    httplib::Result result = [&] {
      RequestCancellation cancellation(*connection->http, options_.cancel, {});
      return connection->http->send(request);
    }();
    if (options_.cancel.stop_requested()) {
      return fail(cancelled);
    }
    if (!result) {
      const httplib::Error error = result.error();
      const std::string detail = transportError(error, *connection, config_.server);
      const bool timedOut =
          std::chrono::steady_clock::now() - sentAt >= options_.requestTimeout * 9 / 10;
      if (attempt < options_.maxRetries &&
          transportRetryable(error, *connection, reused, idempotent, timedOut)) {
        // A kept-alive connection that failed says the idle ones may be dead too (the
        // server restarted, or dropped them): retry on a fresh one, not on the next of them.
        if (reused) {
          dropIdle();
          freshConnection = true;
        }
        const Duration wait = reused ? Duration::zero() : backoff.next();
        log::debug("retrying Kubernetes request", {{"request", call.what()},
                                                   {"error", detail},
                                                   {"attempt", attempt + 1},
                                                   {"retryIn", formatDuration(wait)}});
        if (!waitUnlessCancelled(wait)) {
          return fail(cancelled);
        }
        continue;
      }
      return fail(call.what() + ": " + detail);
    }
    httplib::Response response = std::move(result.value());
    giveBack(std::move(connection));
    reportWarnings(call, response);
    const int status = response.status;
    if ((status == 429 || status >= 500) && attempt < options_.maxRetries) {
      const auto retryAfter = retryAfterOf(response);
      // 429 means the request was not processed; a 5xx is retried for idempotent verbs, or
      // when the server explicitly asks for a retry.
      if (status == 429 || idempotent || retryAfter) {
        const Duration wait = retryAfter ? *retryAfter : backoff.next();
        log::debug("retrying Kubernetes request", {{"request", call.what()},
                                                   {"status", status},
                                                   {"attempt", attempt + 1},
                                                   {"retryIn", formatDuration(wait)}});
        if (!waitUnlessCancelled(wait)) {
          return fail(cancelled);
        }
        continue;
      }
    }
    if (status < 200 || status > 299) {
      return fail(statusError(call.what(), status, response.body));
    }
    return response;
  }
}

Result<json> KubeClient::Impl::sendJson(const Call& call) {
  auto response = send(call);
  if (!response) {
    return fail(response.error());
  }
  if (response->body.empty()) {
    return json::object();
  }
  auto parsed = parseJson(response->body);
  if (!parsed) {
    return fail(parsed.error().context(call.what() + ": response is not JSON"));
  }
  return parsed;
}

Result<std::unique_ptr<KubeClient>> KubeClient::create(KubeConfig config,
                                                       KubeClientOptions options) {
  auto url = parseServerUrl(config.server);
  if (!url) {
    return fail(url.error());
  }
  if (options.requestTimeout <= Duration::zero()) {
    return fail("request timeout must be positive");
  }
  if (options.maxRetries < 0) {
    options.maxRetries = 0;
  }
  auto impl = std::make_unique<Impl>(std::move(config), std::move(options), std::move(*url));
  if (auto loaded = impl->loadCredentials(); !loaded) {
    return fail(loaded.error());
  }
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(impl)));
}

KubeClient::KubeClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeClient::~KubeClient() = default;

RequestCounts KubeClient::requestCounts() const {
  return impl_->counts();
}

const std::string& KubeClient::server() const {
  return impl_->server();
}

}  // namespace gvirtus
