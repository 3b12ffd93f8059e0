#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/time/duration.h"

// One connection's byte stream, plain or TLS, buffered. The reader thread uses the calls
// that never wait (fillNow, writeNow); a worker reads the request the reader found whole
// and writes its answer with the calls that wait, within their deadlines. Internal to
// HttpServer.
namespace gvirtus {

class TlsSession;

class HttpStream {
 public:
  // `tls`: null for plain HTTP; it must outlive the stream.
  HttpStream(int fd, TlsSession* tls, Duration readTimeout, Duration writeTimeout);

  enum class Read { Ok, Closed, TooLarge };
  // What a read that may not wait found.
  enum class Fill { Got, WantRead, WantWrite, Closed };

  // Reads that wait end by this time at the latest: the deadline of the request.
  void setReadDeadline(std::chrono::steady_clock::time_point deadline) { readDeadline_ = deadline; }

  // The bytes read and not yet taken.
  std::string_view buffered() const { return {buf_.data() + begin_, end_ - begin_}; }

  // Leading empty lines do not start a request (RFC 9112 §2.2).
  void skipEmptyLines();

  // Reads what the socket has now into the buffer, without waiting.
  Fill fillNow();
  // Writes `data` without waiting; false when the socket does not take all of it at once
  // (short answers of the reader: 100 Continue, 408, 503).
  bool writeNow(std::string_view data);

  // The next request head, up to and including its empty line, at most `limit` bytes; it
  // stays valid until the next read.
  Read readHead(size_t limit, std::string_view& head);
  // One line without its CRLF, at most `limit` bytes (chunk sizes, trailers).
  Read readLine(size_t limit, std::string& line);
  // Appends exactly `n` bytes to `out`; false when the connection ends first.
  bool readExact(size_t n, std::string& out);
  bool writeAll(std::string_view data);

 private:
  // Space after end_: the unread bytes moved to the front, or the buffer doubled when they
  // fill it (a request over the buffer: bounded by the limits of its reader).
  void makeRoom();
  // Reads what the socket has into the buffer, waiting for it; false on end of stream,
  // error or timeout.
  bool fill();
  ssize_t write(const char* ptr, size_t size);
  ssize_t rawRead(char* ptr, size_t size);

  int fd_;
  TlsSession* tls_;
  Duration readTimeout_;
  Duration writeTimeout_;
  std::chrono::steady_clock::time_point readDeadline_ =
      std::chrono::steady_clock::time_point::max();
  std::vector<char> buf_;
  size_t begin_ = 0;  // unread bytes are buf_[begin_, end_)
  size_t end_ = 0;
};

}  // namespace gvirtus
