#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/base/error.h"
#include "common/base/unique_fd.h"
#include "common/http/connection.h"
#include "common/time/duration.h"

// The reader of an HttpServer: every connection that waits for bytes, on one thread (epoll).
// It handshakes, waits between requests and reads requests until they are whole, for
// every connection at once, and hands complete requests to the workers. A client that
// trickles its bytes costs a buffer here, never a worker, and is closed at its deadline.
// Internal to HttpServer.
namespace gvirtus {

class HttpReader {
 public:
  struct Settings {
    Duration readTimeout;
    Duration requestTimeout;
    std::string name;
  };
  struct Hooks {
    // Takes the connection to a worker, or leaves it (every worker busy and the queue full).
    std::function<bool(std::unique_ptr<HttpConnection>&)> dispatch;
    std::function<void()> overloaded;
    // A request or handshake missed its deadline (`what` says which).
    std::function<void(const HttpConnection&, std::string_view what)> timedOut;
  };

  static Result<std::unique_ptr<HttpReader>> create(Settings settings, Hooks hooks);
  // Starts the thread; create() makes `epoll` and `wake`.
  HttpReader(Settings settings, Hooks hooks, UniqueFd epoll, UniqueFd wake);
  ~HttpReader();
  HttpReader(const HttpReader&) = delete;
  HttpReader& operator=(const HttpReader&) = delete;

  // Takes a connection whose phase and deadline are set (any thread); once stopped, closes
  // it instead.
  void add(std::unique_ptr<HttpConnection> connection);
  // Closes every connection it holds and joins its thread. Idempotent.
  void stop();

 private:
  enum class Next { Wait, Dispatch, Close };

  void loop();
  void take(std::unique_ptr<HttpConnection> connection);
  void advance(HttpConnection& c);
  Next step(HttpConnection& c);
  // Reads and drops what the client still sends, then closes (a lingering close).
  Next drain(HttpConnection& c);
  Next watch(HttpConnection& c, uint32_t events);
  // Takes the connection out of the reader's hands.
  std::unique_ptr<HttpConnection> release(int fd);
  void close(int fd);
  void dispatch(int fd);
  // Closes the connections past their deadlines, after a 408 for a request.
  void sweep(std::chrono::steady_clock::time_point now);

  const Settings settings_;
  const Hooks hooks_;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<HttpConnection>> arrived_;  // under mutex_
  bool stopped_ = false;                                  // under mutex_
  // Only the reader's thread touches these.
  std::unordered_map<int, std::unique_ptr<HttpConnection>> connections_;
  std::jthread thread_;
};

}  // namespace gvirtus
