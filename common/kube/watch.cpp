#include "common/kube/client_impl.h"

#include <algorithm>
#include <cstdint>
#include <functional>
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

QueryParams watchQuery(const WatchOptions& options, int timeoutSeconds) {
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
  return query;
}

// What one watch request reads: its status, the body of an error (64 KiB at most), and
// the events of a 200, each handed to the caller as soon as its line is whole.
class WatchReceiver {
 public:
  WatchReceiver(std::string what, const std::function<bool(const WatchEvent&)>& onEvent)
      : what_(std::move(what)), onEvent_(onEvent) {}

  int status = 0;

  // The body's next bytes; false ends the request (a bad event, one too large, an ERROR
  // event, or the caller done).
  bool receive(std::string_view data) {
    if (status != 200) {
      if (errorBody_.size() < kMaxErrorBody) {
        errorBody_.append(data.data(), std::min(data.size(), kMaxErrorBody - errorBody_.size()));
      }
      return true;
    }
    for (const auto& line : stream_.feed(data)) {
      if (!deliver(line)) {
        return false;
      }
    }
    if (stream_.overflowed()) {
      failure_ = Error{what_ + ": a watch event is larger than " +
                           std::to_string(WatchStream::kMaxLineBytes / (1024 * 1024)) + " MiB",
                       0,
                       {}};
      return false;
    }
    return true;
  }

  // After the body: a server that ended the stream without a final newline sent one more
  // event.
  void finish() {
    if (stream_.pending() > 0) {
      for (const auto& line : stream_.feed("\n")) {
        if (!deliver(line)) {
          return;
        }
      }
    }
  }

  bool endedByCaller() const { return endedByCaller_; }
  const std::optional<Error>& failure() const { return failure_; }
  const std::string& errorBody() const { return errorBody_; }

 private:
  static constexpr size_t kMaxErrorBody = 64 * 1024;

  bool deliver(const std::string& line) {
    auto event = parseWatchEvent(line);
    if (!event) {
      failure_ = event.error().context(what_);
      return false;
    }
    if (event->type == "ERROR") {
      failure_ = watchErrorOf(*event).context(what_);
      return false;
    }
    if (!onEvent_(*event)) {
      endedByCaller_ = true;
      return false;
    }
    return true;
  }

  const std::string what_;
  const std::function<bool(const WatchEvent&)>& onEvent_;
  WatchStream stream_;
  std::string errorBody_;
  std::optional<Error> failure_;
  bool endedByCaller_ = false;
};

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

  WatchReceiver receiver(what, onEvent);
  httplib::Request request;
  request.method = "GET";
  request.path = url_.basePath + path + queryString(watchQuery(options, timeoutSeconds));
  request.headers = headers();
  request.response_handler = [&receiver](const httplib::Response& response) {
    receiver.status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) -> bool {
    return !cancellation.cut() && receiver.receive(std::string_view(data, size));
  };

  httplib::Result result = http.send(request);
  if (cancellation.cut() || receiver.endedByCaller()) {
    return {};
  }
  if (receiver.failure()) {
    return fail(*receiver.failure());
  }
  if (receiver.status != 0 && receiver.status != 200) {
    return fail(statusError(what, receiver.status, receiver.errorBody()));
  }
  if (!result) {
    return fail(what + ": " + transportError(result.error(), *connection, config_.server));
  }
  if (receiver.status == 0 && result->status != 200) {
    return fail(statusError(what, result->status, result->body));
  }
  receiver.finish();
  return receiver.failure() ? fail(*receiver.failure()) : Result<void>{};
}

}  // namespace gvirtus
