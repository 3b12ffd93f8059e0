#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The HTTP/1.1 text the server reads and writes (RFC 9112): request heads in, response
// heads out. No I/O here, so every rule can be tested and fuzzed on its own.
namespace gvirtus {

using HttpFields = std::vector<std::pair<std::string, std::string>>;

// How the body after a request head is delimited.
enum class BodyFraming { None, ContentLength, Chunked };

struct RequestHead {
  std::string method;
  // Percent-decoded, without the query string.
  std::string path;
  // Decoded ("+" is a space), sorted by name, order kept among equal names.
  HttpFields query;
  // As received: spelling and order kept.
  HttpFields headers;
  int minorVersion = 1;  // HTTP/1.0 or HTTP/1.1
  BodyFraming framing = BodyFraming::None;
  uint64_t contentLength = 0;
  // The client allows the connection to stay open after the response.
  bool keepAlive = true;
  bool expectContinue = false;
};

// Why a request head was refused: the status to answer with, and what was wrong.
struct HeadError {
  int status = 400;
  std::string reason;
};

// Parses a request head: the request line and header fields, each ended by CRLF, up to
// and including the empty line. Leading empty lines are skipped (RFC 9112 §2.2). Refused
// with 400: obsolete line folding, bare CR or LF, control characters, a field name that is
// not a token, conflicting or malformed Content-Length, Content-Length beside
// Transfer-Encoding (request smuggling); 501 for a transfer coding other than chunked;
// 505 for a version other than HTTP/1.0 and HTTP/1.1.
std::expected<RequestHead, HeadError> parseRequestHead(std::string_view head);

// What one request may take; the scanner below and the server's reader share them.
struct RequestLimits {
  // The request line and header fields; also the trailer fields of a chunked body.
  size_t headBytes = 64 * 1024;
  size_t maxBodyBytes = 1024 * 1024;
  // A chunk-size line or a trailer field.
  size_t chunkLineBytes = 4096;
  // Chunk-size lines may add this much to a body: every byte of a request is held until
  // the request is whole, so many tiny chunks with long extensions are bounded too.
  size_t maxChunkFraming() const { return headBytes + maxBodyBytes; }
};

// Tells, as the bytes of one request arrive, when all of it is there: the head, and the
// body its framing announces. Each call looks only at what arrived since the last one, so
// a request that trickles in costs no more to watch than one that arrives at once.
class RequestScanner {
 public:
  enum class State {
    NeedMore,
    // The head and its whole body (more bytes may follow: a pipelined request).
    Complete,
    // A rule or a limit is broken; the bytes so far are enough to answer it (the same
    // rules as parseRequestHead and parseChunkSize, within `limits`).
    Refused,
  };

  explicit RequestScanner(RequestLimits limits) : limits_(limits) {}

  // `buffered`: the request from its first byte on (leading empty lines dropped), the
  // same bytes at each call with more appended; it may have moved in memory.
  State scan(std::string_view buffered);
  // The head is in, asks for 100-continue, and its body is still to come.
  bool wantsContinue() const;
  // For the next request.
  void reset() { *this = RequestScanner(limits_); }

 private:
  enum class Phase { Head, Body, ChunkSize, ChunkEnd, Trailer, Done };
  // One CRLF-ended line from pos_ within `limit` bytes; nullopt: not there yet, and
  // `refused` when it cannot end within the limit.
  std::optional<std::string_view> line(std::string_view buffered, size_t limit, bool& refused);
  // One phase's look at the bytes buffered so far: true to go on to the next phase now;
  // false when more bytes are needed or the request is refused (state_ says which).
  bool scanHead(std::string_view buffered);
  bool scanChunkSize(std::string_view buffered);
  bool scanChunkEnd(std::string_view buffered);
  bool scanTrailer(std::string_view buffered);

  RequestLimits limits_;
  Phase phase_ = Phase::Head;
  State state_ = State::NeedMore;
  size_t pos_ = 0;      // the next byte to look at (Head: where the search goes on)
  size_t bodyEnd_ = 0;  // Body: the end of a Content-Length body; ChunkEnd: of a chunk
  uint64_t bodyBytes_ = 0;
  size_t framing_ = 0;
  size_t trailers_ = 0;
  bool expectContinue_ = false;
};

// The size in a chunk-size line ("1a;ext=x", without CRLF); nullopt when malformed or
// beyond 2^40.
std::optional<uint64_t> parseChunkSize(std::string_view line);

// %XX escapes decoded, and "+" as a space when `plusIsSpace` (query strings); nullopt for
// a malformed escape.
std::optional<std::string> percentDecode(std::string_view text, bool plusIsSpace);

// "OK" for 200, "Not Found" for 404, ...; "Unknown" for a status it does not name.
std::string_view reasonPhrase(int status);

// A status line and fields, ended by the empty line. Content-Length is written unless the
// status forbids a body (1xx, 204, 304). Of `extra`, the fields that frame the message
// (Content-Type, Content-Length, Transfer-Encoding, Connection, Keep-Alive) are the
// server's own and left out, and so are fields whose name is not a token or whose value
// holds a control character.
struct ResponseHead {
  int status = 200;
  std::string_view contentType;
  uint64_t contentLength = 0;
  const HttpFields* extra = nullptr;
  // Connection: close; otherwise keep-alive, advertised with these limits.
  bool close = false;
  int64_t keepAliveSeconds = 0;
  uint64_t keepAliveMax = 0;
};
void appendResponseHead(std::string& out, const ResponseHead& head);

// A status without a body under any method (RFC 9110 §6.4.1).
bool statusHasNoBody(int status);

}  // namespace gvirtus
