#include "common/kube/client_impl.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "common/kube/request_cancellation.h"
#include "common/kube/status.h"
#include "common/kube/watch_stream.h"

// KubeClient::Impl::watch: one watch request, its events streamed to the caller.
namespace gvirtus {
namespace {

using kube_detail::Connection;
using kube_detail::QueryParams;
using kube_detail::queryString;
using kube_detail::RequestCancellation;
using kube_detail::statusError;
using kube_detail::transportError;

// The read timeout of a watch is this much above its timeoutSeconds.
constexpr int kWatchReadSlackSeconds = 30;

int randomWatchTimeout() {
  thread_local std::mt19937 engine{std::random_device{}()};
  return std::uniform_int_distribution<int>(300, 600)(engine);
}

}  // namespace

Result<void> KubeClient::Impl::watch(const std::string& path, const WatchOptions& options,
                                     const std::function<bool(const WatchEvent&)>& onEvent,
                                     std::stop_token stop) {
  count("watch");
  const std::string what = "GET " + path + " (watch)";
  if (stop.stop_requested() || options_.cancel.stop_requested()) {
    return {};
  }
  const int timeoutSeconds =
      options.timeoutSeconds > 0 ? options.timeoutSeconds : randomWatchTimeout();
  QueryParams query{{"watch", "1"}};
  if (!options.resourceVersion.empty()) {
    query.emplace_back("resourceVersion", options.resourceVersion);
  }
  if (options.allowBookmarks) {
    query.emplace_back("allowWatchBookmarks", "true");
  }
  if (!options.labelSelector.empty()) {
    query.emplace_back("labelSelector", options.labelSelector);
  }
  if (!options.fieldSelector.empty()) {
    query.emplace_back("fieldSelector", options.fieldSelector);
  }
  query.emplace_back("timeoutSeconds", std::to_string(timeoutSeconds));

  if (!takeToken()) {
    return {};  // cancelled: the process is shutting down
  }
  // Each watch has its own client, so that cutting it interrupts only this watch.
  auto made = newConnection(std::chrono::seconds(timeoutSeconds + kWatchReadSlackSeconds));
  if (!made) {
    return fail(made.error().context(what));
  }
  std::unique_ptr<Connection> connection = std::move(*made);
  httplib::ClientImpl& http = *connection->http;
  http.set_keep_alive(false);
  RequestCancellation cancellation(http, stop, options_.cancel);

  int status = 0;
  std::string errorBody;
  WatchStream stream;
  std::optional<Error> failure;
  bool endedByCaller = false;
  auto deliver = [&](const std::string& line) -> bool {
    auto event = parseWatchEvent(line);
    if (!event) {
      failure = event.error().context(what);
      return false;
    }
    if (event->type == "ERROR") {
      failure = watchErrorOf(*event).context(what);
      return false;
    }
    if (!onEvent(*event)) {
      endedByCaller = true;
      return false;
    }
    return true;
  };

  httplib::Request request;
  request.method = "GET";
  request.path = url_.basePath + path + queryString(query);
  request.headers = headers();
  request.response_handler = [&status](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) -> bool {
    if (cancellation.cut()) {
      return false;
    }
    if (status != 200) {
      if (errorBody.size() < 64 * 1024) {
        errorBody.append(data, std::min(size, 64 * 1024 - errorBody.size()));
      }
      return true;
    }
    for (const auto& line : stream.feed(std::string_view(data, size))) {
      if (!deliver(line)) {
        return false;
      }
    }
    if (stream.overflowed()) {
      failure = Error{what + ": a watch event is larger than " +
                          std::to_string(WatchStream::kMaxLineBytes / (1024 * 1024)) + " MiB",
                      0,
                      {}};
      return false;
    }
    return true;
  };

  httplib::Result result = http.send(request);
  if (cancellation.cut() || endedByCaller) {
    return {};
  }
  if (failure) {
    return fail(*failure);
  }
  if (status != 0 && status != 200) {
    return fail(statusError(what, status, errorBody));
  }
  if (!result) {
    return fail(what + ": " + transportError(result.error(), *connection, config_.server));
  }
  if (status == 0) {
    status = result->status;
    if (status != 200) {
      return fail(statusError(what, status, result->body));
    }
  }
  if (stream.pending() > 0) {
    // The server ended the stream without a final newline: the rest is one more event.
    auto rest = stream.feed("\n");
    for (const auto& line : rest) {
      if (!deliver(line)) {
        return failure ? fail(*failure) : Result<void>{};
      }
    }
  }
  return {};
}

}  // namespace gvirtus
