#include "backend-shim/backend/listen_probe.h"

#include <charconv>

#include "backend-shim/backend/proc_file.h"

namespace gvirtus::backend_shim {
namespace {

// Socket states as the kernel numbers them (include/net/tcp_states.h).
constexpr unsigned kTcpEstablished = 0x01;
constexpr unsigned kTcpCloseWait = 0x08;
constexpr unsigned kTcpListen = 0x0A;

constexpr std::array<const char*, 13> kStateNames = {
    "UNKNOWN", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",   "TIME_WAIT",
    "CLOSE",   "CLOSE_WAIT",  "LAST_ACK", "LISTEN",   "CLOSING",   "NEW_SYN_RECV"};

bool parseHex(std::string_view text, unsigned& value) {
  if (text.empty()) {
    return false;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  return ec == std::errc() && end == text.data() + text.size();
}

// The next whitespace-separated field of `line`, advancing `pos`.
std::string_view nextField(std::string_view line, std::size_t& pos) {
  const auto start = line.find_first_not_of(" \t", pos);
  if (start == std::string_view::npos) {
    pos = line.size();
    return {};
  }
  auto end = line.find_first_of(" \t", start);
  if (end == std::string_view::npos) {
    end = line.size();
  }
  pos = end;
  return line.substr(start, end - start);
}

// The port of "0100007F:270F" (hex address, colon, hex port).
bool parsePort(std::string_view address, unsigned& port) {
  const auto colon = address.rfind(':');
  return colon != std::string_view::npos && parseHex(address.substr(colon + 1), port);
}

}  // namespace

void addProcNetTcp(std::string_view text, uint16_t port, PortState& state) {
  std::size_t lineStart = 0;
  while (lineStart < text.size()) {
    auto lineEnd = text.find('\n', lineStart);
    if (lineEnd == std::string_view::npos) {
      lineEnd = text.size();
    }
    const std::string_view line = text.substr(lineStart, lineEnd - lineStart);
    lineStart = lineEnd + 1;

    std::size_t pos = 0;
    const std::string_view slot = nextField(line, pos);
    if (slot.empty() || slot.back() != ':') {
      continue;  // the header, or not a socket line
    }
    const std::string_view local = nextField(line, pos);
    nextField(line, pos);  // remote address
    const std::string_view st = nextField(line, pos);
    unsigned localPort = 0;
    unsigned socketState = 0;
    if (!parsePort(local, localPort) || !parseHex(st, socketState) || localPort != port) {
      continue;
    }
    if (socketState < state.byState.size()) {
      ++state.byState[socketState];
    }
    if (socketState == kTcpListen) {
      state.listening = true;
    } else if (socketState == kTcpEstablished) {
      ++state.established;
    } else if (socketState == kTcpCloseWait) {
      ++state.closeWait;
    }
  }
}

std::string describeSockets(const PortState& state) {
  std::string out;
  for (std::size_t i = 1; i < state.byState.size(); ++i) {
    if (state.byState[i] == 0) {
      continue;
    }
    if (!out.empty()) {
      out += ' ';
    }
    out += std::string(kStateNames[i]) + "=" + std::to_string(state.byState[i]);
  }
  return out;
}

ListenProbe::ListenProbe(std::vector<std::string> paths) : paths_(std::move(paths)) {}

Result<PortState> ListenProbe::probe(uint16_t port) const {
  PortState state;
  bool readAny = false;
  std::string firstError;
  for (const auto& path : paths_) {
    auto text = readProcFile(path);
    if (!text) {
      if (firstError.empty()) {
        firstError = text.error().message;
      }
      continue;
    }
    addProcNetTcp(*text, port, state);
    readAny = true;
  }
  if (!readAny) {
    return fail("cannot read the socket tables: " +
                (firstError.empty() ? std::string("no path given") : firstError));
  }
  return state;
}

}  // namespace gvirtus::backend_shim
