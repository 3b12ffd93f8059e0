#include "common/http/codec.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "common/base/strings.h"

namespace gvirtus {

namespace {

// RFC 9110 §5.6.2: tchar.
constexpr std::array<bool, 256> kTokenChars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) {
    t[c] = true;
  }
  for (int c = 'a'; c <= 'z'; ++c) {
    t[c] = true;
  }
  for (int c = 'A'; c <= 'Z'; ++c) {
    t[c] = true;
  }
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) {
    t[static_cast<unsigned char>(c)] = true;
  }
  return t;
}();

bool isToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return kTokenChars[static_cast<unsigned char>(c)];
  });
}

// Field values and request targets: visible characters, obs-text, and (values only) SP/HT.
bool isFieldValue(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

bool isTarget(std::string_view s) {
  return !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f;
  });
}

std::string_view trimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Fields the server writes itself from the response it frames.
bool isFramingField(std::string_view name) {
  return equalsIgnoreCase(name, "Content-Type") || equalsIgnoreCase(name, "Content-Length") ||
         equalsIgnoreCase(name, "Transfer-Encoding") || equalsIgnoreCase(name, "Connection") ||
         equalsIgnoreCase(name, "Keep-Alive");
}

std::unexpected<HeadError> refuse(int status, std::string reason) {
  return std::unexpected(HeadError{status, std::move(reason)});
}

// Splits "a=1&b=2" into decoded pairs, sorted by name.
std::optional<HttpFields> parseQuery(std::string_view text) {
  HttpFields query;
  while (!text.empty()) {
    auto end = text.find('&');
    std::string_view item = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (item.empty()) {
      continue;
    }
    auto eq = item.find('=');
    auto name = percentDecode(item.substr(0, eq), true);
    auto value = percentDecode(
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1), true);
    if (!name || !value) {
      return std::nullopt;
    }
    query.emplace_back(std::move(*name), std::move(*value));
  }
  std::stable_sort(query.begin(), query.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return query;
}

std::expected<void, HeadError> parseRequestLine(std::string_view line, RequestHead& head) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return refuse(400, "malformed request line");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!isToken(method)) {
    return refuse(400, "malformed method");
  }
  if (!isTarget(target) || (target.front() != '/' && target != "*")) {
    return refuse(400, "malformed request target");
  }
  if (version.size() != 8 || !version.starts_with("HTTP/") || version[6] != '.' ||
      hexDigitValue(version[5]) < 0 || hexDigitValue(version[5]) > 9 ||
      hexDigitValue(version[7]) < 0 || hexDigitValue(version[7]) > 9) {
    return refuse(400, "malformed HTTP version");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return refuse(505, "HTTP version not supported");
  }
  head.minorVersion = version[7] - '0';
  head.method = std::string(method);

  auto question = target.find('?');
  auto path = percentDecode(target.substr(0, question), false);
  if (!path) {
    return refuse(400, "malformed percent-encoding in the path");
  }
  head.path = std::move(*path);
  if (question != std::string_view::npos) {
    auto query = parseQuery(target.substr(question + 1));
    if (!query) {
      return refuse(400, "malformed percent-encoding in the query");
    }
    head.query = std::move(*query);
  }
  return {};
}

// The header fields that frame the body and the connection, as parseRequestHead meets them.
struct FramingHeaders {
  std::optional<uint64_t> length;
  bool chunked = false;
  bool close = false;
  bool keepAlive = false;

  // One field; refused when it contradicts one before it or names a coding we do not take.
  std::expected<void, HeadError> take(std::string_view name, std::string_view value,
                                      RequestHead& head) {
    if (equalsIgnoreCase(name, "Content-Length")) {
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || value.size() > 19 || ec != std::errc() ||
          end != value.data() + value.size() || (length && *length != n)) {
        return refuse(400, "malformed Content-Length");
      }
      length = n;
    } else if (equalsIgnoreCase(name, "Transfer-Encoding")) {
      if (chunked || !equalsIgnoreCase(value, "chunked")) {
        return refuse(501, "only the chunked transfer coding is accepted");
      }
      chunked = true;
    } else if (equalsIgnoreCase(name, "Connection")) {
      for (const auto& option : splitList(value)) {
        close = close || equalsIgnoreCase(option, "close");
        keepAlive = keepAlive || equalsIgnoreCase(option, "keep-alive");
      }
    } else if (equalsIgnoreCase(name, "Expect")) {
      head.expectContinue = equalsIgnoreCase(value, "100-continue");
    }
    return {};
  }

  // After the last field: the body's framing and whether the connection stays open.
  std::expected<void, HeadError> applyTo(RequestHead& head) const {
    if (chunked && length) {
      return refuse(400, "both Content-Length and Transfer-Encoding");
    }
    if (chunked) {
      head.framing = BodyFraming::Chunked;
    } else if (length && *length > 0) {
      head.framing = BodyFraming::ContentLength;
      head.contentLength = *length;
    }
    head.keepAlive = head.minorVersion == 1 ? !close : keepAlive && !close;
    return {};
  }
};

}  // namespace

std::optional<std::string> percentDecode(std::string_view text, bool plusIsSpace) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) {
        return std::nullopt;
      }
      int hi = hexDigitValue(text[i + 1]);
      int lo = hexDigitValue(text[i + 2]);
      if (hi < 0 || lo < 0) {
        return std::nullopt;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plusIsSpace) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::expected<RequestHead, HeadError> parseRequestHead(std::string_view text) {
  // A request line ends at the first CRLF; blank lines before it are skipped.
  while (text.starts_with("\r\n")) {
    text.remove_prefix(2);
  }
  RequestHead head;
  auto nextLine = [&text]() -> std::optional<std::string_view> {
    auto end = text.find("\r\n");
    if (end == std::string_view::npos) {
      return std::nullopt;
    }
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 2);
    return line;
  };
  auto requestLine = nextLine();
  if (!requestLine) {
    return refuse(400, "incomplete request head");
  }
  if (requestLine->find_first_of("\r\n") != std::string_view::npos) {
    return refuse(400, "bare CR or LF in the request line");
  }
  if (auto r = parseRequestLine(*requestLine, head); !r) {
    return std::unexpected(r.error());
  }

  FramingHeaders framing;
  for (;;) {
    auto line = nextLine();
    if (!line) {
      return refuse(400, "incomplete request head");
    }
    if (line->empty()) {
      break;
    }
    if (line->front() == ' ' || line->front() == '\t') {
      return refuse(400, "obsolete line folding");
    }
    auto colon = line->find(':');
    if (colon == std::string_view::npos || !isToken(line->substr(0, colon))) {
      return refuse(400, "malformed header field name");
    }
    std::string_view name = line->substr(0, colon);
    std::string_view value = trimOws(line->substr(colon + 1));
    if (!isFieldValue(value)) {
      return refuse(400, "control character in a header field");
    }
    if (auto taken = framing.take(name, value, head); !taken) {
      return std::unexpected(taken.error());
    }
    head.headers.emplace_back(std::string(name), std::string(value));
  }
  if (!text.empty()) {
    return refuse(400, "bytes after the request head");
  }
  if (auto framed = framing.applyTo(head); !framed) {
    return std::unexpected(framed.error());
  }
  return head;
}

std::optional<uint64_t> parseChunkSize(std::string_view line) {
  auto end = line.find(';');
  std::string_view digits = trimOws(line.substr(0, end));
  if (digits.empty() || digits.size() > 10) {
    return std::nullopt;
  }
  uint64_t size = 0;
  for (char c : digits) {
    int v = hexDigitValue(c);
    if (v < 0) {
      return std::nullopt;
    }
    size = size * 16 + static_cast<uint64_t>(v);
  }
  if (end != std::string_view::npos && !isFieldValue(line.substr(end))) {
    return std::nullopt;
  }
  return size;
}

RequestScanner::State RequestScanner::scan(std::string_view buffered) {
  while (state_ == State::NeedMore) {
    bool goOn = false;
    switch (phase_) {
      case Phase::Head:
        goOn = scanHead(buffered);
        break;
      case Phase::Body:
        if (buffered.size() < bodyEnd_) {
          return state_;
        }
        phase_ = Phase::Done;
        state_ = State::Complete;
        goOn = true;
        break;
      case Phase::ChunkSize:
        goOn = scanChunkSize(buffered);
        break;
      case Phase::ChunkEnd:
        goOn = scanChunkEnd(buffered);
        break;
      case Phase::Trailer:
        goOn = scanTrailer(buffered);
        break;
      case Phase::Done:
        return state_;
    }
    if (!goOn) {
      return state_;
    }
  }
  return state_;
}

bool RequestScanner::scanHead(std::string_view buffered) {
  auto end = buffered.find("\r\n\r\n", pos_);
  if (end == std::string_view::npos || end + 4 > limits_.headBytes) {
    if (buffered.size() >= limits_.headBytes) {
      state_ = State::Refused;
      return false;
    }
    pos_ = buffered.size() >= 3 ? buffered.size() - 3 : 0;
    return false;
  }
  auto head = parseRequestHead(buffered.substr(0, end + 4));
  if (!head) {
    state_ = State::Refused;
    return false;
  }
  pos_ = end + 4;
  expectContinue_ = head->expectContinue;
  if (head->framing == BodyFraming::None) {
    phase_ = Phase::Done;
    state_ = State::Complete;
  } else if (head->framing == BodyFraming::Chunked) {
    phase_ = Phase::ChunkSize;
  } else if (head->contentLength > limits_.maxBodyBytes) {
    state_ = State::Refused;
    return false;
  } else {
    bodyEnd_ = pos_ + head->contentLength;
    phase_ = Phase::Body;
  }
  return true;
}

bool RequestScanner::scanChunkSize(std::string_view buffered) {
  bool refused = false;
  auto text = line(buffered, limits_.chunkLineBytes, refused);
  if (!text) {
    state_ = refused ? State::Refused : state_;
    return false;
  }
  framing_ += text->size() + 4;
  auto size = parseChunkSize(*text);
  if (framing_ > limits_.maxChunkFraming() || !size || *size > limits_.maxBodyBytes - bodyBytes_) {
    state_ = State::Refused;
    return false;
  }
  if (*size == 0) {
    phase_ = Phase::Trailer;
  } else {
    bodyBytes_ += *size;
    bodyEnd_ = pos_ + *size;
    phase_ = Phase::ChunkEnd;
  }
  return true;
}

bool RequestScanner::scanChunkEnd(std::string_view buffered) {
  if (buffered.size() < bodyEnd_ + 2) {
    return false;
  }
  if (buffered.substr(bodyEnd_, 2) != "\r\n") {
    state_ = State::Refused;
    return false;
  }
  pos_ = bodyEnd_ + 2;
  phase_ = Phase::ChunkSize;
  return true;
}

bool RequestScanner::scanTrailer(std::string_view buffered) {
  bool refused = false;
  auto text = line(buffered, limits_.chunkLineBytes, refused);
  if (!text) {
    state_ = refused ? State::Refused : state_;
    return false;
  }
  if (text->empty()) {
    phase_ = Phase::Done;
    state_ = State::Complete;
    return true;
  }
  trailers_ += text->size() + 2;
  if (trailers_ > limits_.headBytes) {
    state_ = State::Refused;
    return false;
  }
  return true;
}

bool RequestScanner::wantsContinue() const {
  return expectContinue_ && state_ == State::NeedMore && phase_ != Phase::Head;
}

std::optional<std::string_view> RequestScanner::line(std::string_view buffered, size_t limit,
                                                     bool& refused) {
  std::string_view rest = buffered.substr(pos_);
  auto end = rest.find("\r\n");
  if (end != std::string_view::npos && end <= limit) {
    pos_ += end + 2;
    return rest.substr(0, end);
  }
  refused = rest.size() > limit + 1;
  return std::nullopt;
}

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

bool statusHasNoBody(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

void appendResponseHead(std::string& out, const ResponseHead& head) {
  auto number = [&out](uint64_t n) {
    std::array<char, 24> digits{};
    auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), n);
    out.append(digits.data(), end);
  };
  out += "HTTP/1.1 ";
  number(static_cast<uint64_t>(std::clamp(head.status, 100, 999)));
  out += ' ';
  out += reasonPhrase(head.status);
  out += "\r\n";
  if (!statusHasNoBody(head.status)) {
    if (!head.contentType.empty() && isFieldValue(head.contentType)) {
      out += "Content-Type: ";
      out += head.contentType;
      out += "\r\n";
    }
    out += "Content-Length: ";
    number(head.contentLength);
    out += "\r\n";
  }
  if (head.extra != nullptr) {
    for (const auto& [name, value] : *head.extra) {
      if (!isToken(name) || !isFieldValue(value) || isFramingField(name)) {
        continue;
      }
      out += name;
      out += ": ";
      out += value;
      out += "\r\n";
    }
  }
  if (head.close) {
    out += "Connection: close\r\n";
  } else {
    out += "Connection: keep-alive\r\nKeep-Alive: timeout=";
    number(static_cast<uint64_t>(std::max<int64_t>(head.keepAliveSeconds, 1)));
    out += ", max=";
    number(head.keepAliveMax);
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace gvirtus
