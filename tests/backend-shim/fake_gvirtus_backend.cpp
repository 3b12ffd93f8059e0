// A stand-in for gvirtus-backend, for the shim's tests. Like GVirtuS it takes a
// properties.json path as its last argument, forks a child that listens on 0.0.0.0 on the
// port the file names, and the parent stays alive (idle) when that child dies. It has no
// SIGTERM handler. It asks for SO_REUSEADDR as GVirtuS does, with a one-byte value that Linux
// refuses, so it binds without it (unless the peer guard, preloaded, makes the request work):
// while an old connection lingers on the port it cannot bind, says so and never listens.
// Options, before the config path:
//   --child-exit-after SECONDS  the listening child exits after that long; the parent idles
//   --exit-after SECONDS        the parent exits (code 3) after that long; the child stays
//   --ignore-sigterm            both processes ignore SIGTERM (only SIGKILL stops them)
//   --leak-clients              like GVirtuS, never closes a finished client's socket
//                               (it stays in CLOSE_WAIT)
//   --marker FILE               appends "start PID MILLISECONDS_SINCE_EPOCH" per start, and
//                               "exit PID MILLISECONDS_SINCE_EPOCH" when --exit-after ends it
//   --env-out FILE              writes LD_LIBRARY_PATH and GVIRTUS_HOME as it saw them
//   --say TEXT                  the listening child prints "fake backend: TEXT" and a newline
//                               on stdout with C stdio, never flushed (as GVirtuS logs)
//   --say-partial TEXT          the listening child writes TEXT on stderr without a newline
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::optional<double> childExitAfter;
  std::optional<double> exitAfter;
  bool ignoreSigterm = false;
  bool leakClients = false;
  std::string marker;
  std::string envOut;
  std::string say;
  std::string sayPartial;
  std::string config;
};

std::optional<Args> parseArgs(int argc, char** argv) {
  Args args;
  if (argc < 2) {
    return std::nullopt;
  }
  for (int i = 1; i < argc - 1; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc - 1 ? argv[++i] : ""; };
    if (arg == "--child-exit-after") {
      args.childExitAfter = std::atof(value().c_str());
    } else if (arg == "--exit-after") {
      args.exitAfter = std::atof(value().c_str());
    } else if (arg == "--ignore-sigterm") {
      args.ignoreSigterm = true;
    } else if (arg == "--leak-clients") {
      args.leakClients = true;
    } else if (arg == "--marker") {
      args.marker = value();
    } else if (arg == "--env-out") {
      args.envOut = value();
    } else if (arg == "--say") {
      args.say = value();
    } else if (arg == "--say-partial") {
      args.sayPartial = value();
    } else {
      std::fprintf(stderr, "fake backend: unknown argument %s\n", arg.c_str());
      return std::nullopt;
    }
  }
  args.config = argv[argc - 1];
  return args;
}

int readPort(const std::string& path) {
  try {
    std::ifstream in(path);
    const auto config = nlohmann::json::parse(in);
    return std::stoi(config.at("communicator").at(0).at("endpoint").at("port").get<std::string>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake backend: cannot read %s: %s\n", path.c_str(), e.what());
    return -1;
  }
}

long long millisSinceEpoch() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The listening child: accepts clients and keeps each until it closes.
int serve(int port, const Args& args) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  // GVirtuS's request, as it makes it: a bool, which Linux refuses (EINVAL), unchecked.
  const bool reuse = true;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener, 64) != 0) {
    // GVirtuS's words; it then never listens (here the child ends, the parent idles).
    std::fprintf(stderr, "fake backend: Can't bind socket: %s\n", std::strerror(errno));
    return 1;
  }
  std::printf("fake backend: listening on 0.0.0.0:%d (pid %d)\n", port, ::getpid());
  std::fflush(stdout);
  if (!args.say.empty()) {
    std::printf("fake backend: %s\n", args.say.c_str());  // never flushed
  }
  if (!args.sayPartial.empty()) {
    std::fputs(args.sayPartial.c_str(), stderr);
  }
  const std::optional<double> exitAfter = args.childExitAfter;
  const bool leakClients = args.leakClients;
  const auto start = Clock::now();
  std::vector<pollfd> fds{{listener, POLLIN, 0}};
  for (;;) {
    if (exitAfter && Clock::now() - start >= std::chrono::duration<double>(*exitAfter)) {
      std::printf("fake backend: listening child exits\n");
      std::fflush(stdout);
      return 0;
    }
    if (::poll(fds.data(), fds.size(), 50) <= 0) {
      continue;
    }
    for (std::size_t i = fds.size(); i-- > 1;) {
      if (fds[i].revents == 0) {
        continue;
      }
      char buffer[512];
      if (::read(fds[i].fd, buffer, sizeof(buffer)) <= 0) {
        if (!leakClients) {
          ::close(fds[i].fd);
        }
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if ((fds[0].revents & POLLIN) != 0) {
      const int client = ::accept(listener, nullptr, nullptr);
      if (client >= 0) {
        fds.push_back({client, POLLIN, 0});
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parseArgs(argc, argv);
  if (!args) {
    std::fprintf(stderr, "usage: fake_gvirtus_backend [options] CONFIG.json\n");
    return 2;
  }
  const int port = readPort(args->config);
  if (port <= 0) {
    return 2;
  }
  if (!args->marker.empty()) {
    std::ofstream(args->marker, std::ios::app)
        << "start " << ::getpid() << " " << millisSinceEpoch() << "\n";
  }
  if (!args->envOut.empty()) {
    const char* ld = std::getenv("LD_LIBRARY_PATH");
    const char* home = std::getenv("GVIRTUS_HOME");
    std::ofstream(args->envOut) << "LD_LIBRARY_PATH=" << (ld != nullptr ? ld : "") << "\n"
                                << "GVIRTUS_HOME=" << (home != nullptr ? home : "") << "\n";
  }
  if (args->ignoreSigterm) {
    ::signal(SIGTERM, SIG_IGN);
  }
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) {
    return 1;
  }
  if (child == 0) {
    std::_Exit(serve(port, *args));
  }
  const auto start = Clock::now();
  bool childGone = false;
  for (;;) {
    if (args->exitAfter &&
        Clock::now() - start >= std::chrono::duration<double>(*args->exitAfter)) {
      if (!args->marker.empty()) {
        std::ofstream(args->marker, std::ios::app)
            << "exit " << ::getpid() << " " << millisSinceEpoch() << "\n";
      }
      std::printf("fake backend: parent exits\n");
      std::fflush(stdout);
      return 3;
    }
    if (!childGone && ::waitpid(child, nullptr, WNOHANG) == child) {
      childGone = true;  // like GVirtuS: the parent stays, listening on nothing
      std::printf("fake backend: the listening child is gone; the parent idles\n");
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}
