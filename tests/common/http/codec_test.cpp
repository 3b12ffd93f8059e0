#include "common/http/codec.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace gvirtus;

namespace {

int refusal(std::string_view head) {
  auto parsed = parseRequestHead(head);
  return parsed ? 0 : parsed.error().status;
}

}  // namespace

TEST_CASE("parseRequestHead reads the request line, fields and framing", "[http_codec]") {
  auto head = parseRequestHead(
      "\r\nPOST /mutate%2Dpods?timeout=10s&b=x+y&a=%41 HTTP/1.1\r\n"
      "Host: webhook\r\nContent-Type:  application/json \r\nContent-Length: 12\r\n"
      "X-Two: 1\r\nx-two: 2\r\n\r\n");
  REQUIRE(head);
  CHECK(head->method == "POST");
  CHECK(head->path == "/mutate-pods");
  REQUIRE(head->query.size() == 3);
  CHECK(head->query[0] == std::pair<std::string, std::string>("a", "A"));
  CHECK(head->query[1] == std::pair<std::string, std::string>("b", "x y"));
  CHECK(head->query[2].first == "timeout");
  REQUIRE(head->headers.size() == 5);
  CHECK(head->headers[1] ==
        std::pair<std::string, std::string>("Content-Type", "application/json"));
  CHECK(head->headers[4].first == "x-two");  // spelling and order as received
  CHECK(head->framing == BodyFraming::ContentLength);
  CHECK(head->contentLength == 12);
  CHECK(head->keepAlive);
  CHECK_FALSE(head->expectContinue);
}

TEST_CASE("parseRequestHead keeps or closes the connection as the client asks", "[http_codec]") {
  CHECK_FALSE(parseRequestHead("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")->keepAlive);
  CHECK_FALSE(parseRequestHead("GET / HTTP/1.1\r\nConnection: Upgrade, Close\r\n\r\n")->keepAlive);
  CHECK_FALSE(parseRequestHead("GET / HTTP/1.0\r\n\r\n")->keepAlive);
  CHECK(parseRequestHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")->keepAlive);
  auto continued = parseRequestHead(
      "PUT /x HTTP/1.1\r\nExpect: 100-Continue\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  REQUIRE(continued);
  CHECK(continued->expectContinue);
  CHECK(continued->framing == BodyFraming::Chunked);
  CHECK(parseRequestHead("POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n")->framing ==
        BodyFraming::None);
}

TEST_CASE("parseRequestHead refuses what could smuggle or confuse", "[http_codec]") {
  // Malformed request lines.
  CHECK(refusal("GET /\r\n\r\n") == 400);
  CHECK(refusal("GET  / HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1 \r\n\r\n") == 400);
  CHECK(refusal("G(T / HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET http://host/ HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET /a\x01 HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTX/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/2.0\r\n\r\n") == 505);
  CHECK(refusal("GET /%zz HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET /?a=%4 HTTP/1.1\r\n\r\n") == 400);
  // Fields.
  CHECK(refusal("GET / HTTP/1.1\r\nHost : x\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nNo colon\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nX: a\nb\r\n\r\n") == 400);
  CHECK(refusal(std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26)) == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: x\r\n") == 400);  // no empty line
  // Framing.
  CHECK(refusal("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n") ==
        400);
  CHECK(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501);
  CHECK(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                "Transfer-Encoding: chunked\r\n\r\n") == 501);
  // The same Content-Length twice is one length.
  CHECK(parseRequestHead("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n")
            ->contentLength == 5);
}

TEST_CASE("parseChunkSize reads hex sizes and extensions", "[http_codec]") {
  CHECK(parseChunkSize("0") == 0u);
  CHECK(parseChunkSize("1a") == 26u);
  CHECK(parseChunkSize("FF;name=value") == 255u);
  CHECK_FALSE(parseChunkSize(""));
  CHECK_FALSE(parseChunkSize("x"));
  CHECK_FALSE(parseChunkSize("-1"));
  CHECK_FALSE(parseChunkSize("12345678901"));  // beyond 2^40
  CHECK_FALSE(parseChunkSize("1;\x01"));
}

TEST_CASE("appendResponseHead frames a response and drops unsafe fields", "[http_codec]") {
  HttpFields extra = {{"X-Reply", "yes"},
                      {"Content-Length", "999"},
                      {"Connection", "keep-alive"},
                      {"Bad Name", "x"},
                      {"X-Split", "a\r\nInjected: 1"}};
  std::string out;
  appendResponseHead(out, {.status = 201,
                           .contentType = "application/json",
                           .contentLength = 7,
                           .extra = &extra,
                           .close = false,
                           .keepAliveSeconds = 30,
                           .keepAliveMax = 99});
  CHECK(out ==
        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 7\r\n"
        "X-Reply: yes\r\nConnection: keep-alive\r\nKeep-Alive: timeout=30, max=99\r\n\r\n");

  out.clear();
  appendResponseHead(out, {.status = 204,
                           .contentType = "text/plain",
                           .contentLength = 0,
                           .extra = nullptr,
                           .close = true,
                           .keepAliveSeconds = 0,
                           .keepAliveMax = 0});
  CHECK(out == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  CHECK(reasonPhrase(413) == "Payload Too Large");
  CHECK(reasonPhrase(299) == "Unknown");
}

TEST_CASE("percentDecode decodes escapes and, in queries, plus signs", "[http_codec]") {
  CHECK(percentDecode("a%20b+c", false) == "a b+c");
  CHECK(percentDecode("a%20b+c", true) == "a b c");
  CHECK_FALSE(percentDecode("%", false));
  CHECK_FALSE(percentDecode("%2", false));
  CHECK_FALSE(percentDecode("%g0", false));
}

namespace {

// Feeds `request` to a scanner one byte at a time: the state after each byte.
std::vector<RequestScanner::State> scanByteByByte(const std::string& request,
                                                  RequestLimits limits = {}) {
  RequestScanner scanner(limits);
  std::vector<RequestScanner::State> states;
  for (size_t n = 1; n <= request.size(); ++n) {
    states.push_back(scanner.scan(std::string_view(request).substr(0, n)));
  }
  return states;
}

// The number of bytes after which the scanner first left NeedMore (0: never).
size_t decidedAfter(const std::vector<RequestScanner::State>& states) {
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i] != RequestScanner::State::NeedMore) {
      return i + 1;
    }
  }
  return 0;
}

}  // namespace

TEST_CASE("RequestScanner finds the end of a request as its bytes trickle in", "[http_codec]") {
  using State = RequestScanner::State;
  const std::string get = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  auto states = scanByteByByte(get + "GET /next");
  CHECK(decidedAfter(states) == get.size());
  CHECK(states.back() == State::Complete);  // what follows is the next request's

  const std::string post = "POST /mutate HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
  states = scanByteByByte(post + "hello");
  CHECK(decidedAfter(states) == post.size() + 5);
  CHECK(states.back() == State::Complete);

  const std::string chunked =
      "POST /mutate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n";
  states = scanByteByByte(chunked + "GET");
  CHECK(decidedAfter(states) == chunked.size());
  CHECK(states.back() == State::Complete);

  // At once, as when the whole request is in one read.
  RequestScanner scanner({});
  CHECK(scanner.scan(chunked) == State::Complete);
  scanner.reset();
  CHECK(scanner.scan("GET / HTTP/1.1\r\n") == State::NeedMore);
}

TEST_CASE("RequestScanner refuses what the server would refuse, without waiting for more",
          "[http_codec]") {
  using State = RequestScanner::State;
  RequestLimits limits;
  limits.maxBodyBytes = 8;
  auto verdict = [&](const std::string& request) {
    RequestScanner scanner(limits);
    return scanner.scan(request);
  };
  CHECK(verdict("GET /hello HTTP/3.0\r\n\r\n") == State::Refused);
  CHECK(verdict("POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n") == State::Refused);
  CHECK(verdict("POST / HTTP/1.1\r\nContent-Length: 8\r\n\r\n") == State::NeedMore);
  CHECK(verdict("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == State::Refused);
  CHECK(verdict("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n") ==
        State::Refused);  // over maxBodyBytes
  CHECK(verdict("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY") ==
        State::Refused);  // no CRLF after the chunk's data
  CHECK(verdict("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
                std::string(5000, 'e')) == State::Refused);  // an endless chunk-size line
  CHECK(verdict("GET / HTTP/1.1\r\nX: " + std::string(70 * 1024, 'x')) == State::Refused);
  // Chunk framing is bounded: many one-byte chunks with extensions.
  std::string tiny = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 8; ++i) {
    tiny += "0001;" + std::string(4000, 'e') + "\r\nx\r\n";
  }
  RequestLimits small;
  small.headBytes = 1024;
  small.maxBodyBytes = 16;
  RequestScanner bounded(small);
  CHECK(bounded.scan(tiny) == State::Refused);
}

TEST_CASE("RequestScanner says when a 100 Continue is owed", "[http_codec]") {
  RequestScanner scanner({});
  const std::string head = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
  CHECK(scanner.scan(head.substr(0, head.size() - 1)) == RequestScanner::State::NeedMore);
  CHECK_FALSE(scanner.wantsContinue());  // the head is not in yet
  CHECK(scanner.scan(head) == RequestScanner::State::NeedMore);
  CHECK(scanner.wantsContinue());
  CHECK(scanner.scan(head + "body") == RequestScanner::State::Complete);
  CHECK_FALSE(scanner.wantsContinue());

  RequestScanner plain({});
  CHECK(plain.scan("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n") ==
        RequestScanner::State::NeedMore);
  CHECK_FALSE(plain.wantsContinue());
}
