// A stand-in for gvirtus-backend, for the shim's tests. Like GVirtuS it serves each client
// on a thread of one process, and those threads share state (serveClient). Like GVirtuS it takes a
// properties.json path as its last argument, forks a child that listens on 0.0.0.0 on the
// port the file names, and the parent stays alive (idle) when that child dies. It has no
// SIGTERM handler. It asks for SO_REUSEADDR as GVirtuS does, with a one-byte value that Linux
// refuses, so it binds without it (unless the peer guard, preloaded, makes the request work):
// while an old connection lingers on the port it cannot bind, says so and never listens.
// Options, before the config path:
//   --child-exit-after SECONDS  the listening child exits after that long; the parent idles
//   --exit-after SECONDS        the parent exits (code 3) after that long; the child stays
//   --ignore-sigterm            both processes ignore SIGTERM (only SIGKILL stops them)
//   --echo                      every byte read is written back (no commands): a round trip
//                               that costs what the network path costs, for benchmarks
//   --leak-clients              like GVirtuS, never closes a finished client's socket
//                               (it stays in CLOSE_WAIT)
//   --marker FILE               appends "start PID MILLISECONDS_SINCE_EPOCH" per start, and
//                               "exit PID MILLISECONDS_SINCE_EPOCH" when --exit-after ends it
//   --env-out FILE              writes LD_LIBRARY_PATH and GVIRTUS_HOME as it saw them
//   --say TEXT                  the listening child prints "fake backend: TEXT" and a newline
//                               on stdout with C stdio, never flushed (as GVirtuS logs)
//   --say-partial TEXT          the listening child writes TEXT on stderr without a newline
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
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
  bool echo = false;
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
    } else if (arg == "--echo") {
      args.echo = true;
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

// State every connection of the process shares, as GVirtuS's sessions share one CUDA
// context: what one connection puts, another gets.
std::mutex noteMutex;
std::string note;

// GVirtuS's CUDA calls, as its cudart plugin makes them: the plugin (fake_cuda_plugin.cpp)
// is loaded with dlopen's local scope, the fake CUDA library as its dependency, as GVirtuS
// loads libcudart through its plugins. Its answer to one request (fakeCudaCommand).
std::string cudaCommand(const std::string& request) {
  using Command = int (*)(const char*, char*, size_t);
  static Command command = [] {
    void* plugin = ::dlopen(FAKE_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    return plugin == nullptr ? nullptr
                             : reinterpret_cast<Command>(::dlsym(plugin, "fakeCudaCommand"));
  }();
  if (command == nullptr) {
    return std::string("no plugin: ") + ::dlerror();
  }
  char reply[256] = {};
  command(request.c_str(), reply, sizeof(reply));
  return reply;
}

// One client, on a thread of its own as GVirtuS serves it. Lines of the stand-in's protocol
// are answered ("standin pid", "standin put TEXT", "standin get", "standin crash",
// "standin read PATH": "read N bytes" or "cannot read: REASON", "standin cuda REQUEST":
// cudaCommand's answer); any other bytes are read and
// dropped (with --echo: everything is echoed).
void serveClient(int client, bool leakClients, bool echo) {
  std::string line;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(client, buffer, sizeof(buffer));
    if (n <= 0) {
      break;
    }
    if (echo) {
      if (::write(client, buffer, static_cast<std::size_t>(n)) != n) {
        break;
      }
      continue;
    }
    line.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t end = line.find('\n'); end != std::string::npos; end = line.find('\n')) {
      const std::string command = line.substr(0, end);
      line.erase(0, end + 1);
      std::string reply;
      if (command == "standin pid") {
        reply = "pid " + std::to_string(::getpid()) + "\n";
      } else if (command.starts_with("standin put ")) {
        std::lock_guard lock(noteMutex);
        note = command.substr(std::strlen("standin put "));
        reply = "ok\n";
      } else if (command == "standin get") {
        std::lock_guard lock(noteMutex);
        reply = "got " + note + "\n";
      } else if (command == "standin crash") {
        std::abort();
      } else if (command.starts_with("standin cuda ")) {
        reply = cudaCommand(command.substr(std::strlen("standin cuda "))) + "\n";
      } else if (command.starts_with("standin read ")) {
        std::ifstream file(command.substr(std::strlen("standin read ")), std::ios::binary);
        const int error = errno;
        if (!file) {
          reply = "cannot read: " + std::string(std::strerror(error)) + "\n";
        } else {
          const std::string content{std::istreambuf_iterator<char>(file), {}};
          reply = "read " + std::to_string(content.size()) + " bytes\n";
        }
      }
      if (!reply.empty() && ::write(client, reply.data(), reply.size()) < 0) {
        break;
      }
    }
    if (line.size() > 4096) {
      line.clear();
    }
  }
  if (!leakClients) {
    ::close(client);
  }
}

// The listening child: accepts clients in a blocking loop, each served by a thread of its
// own, as GVirtuS's Process does.
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
  if (const std::optional<double> exitAfter = args.childExitAfter) {
    std::thread([seconds = *exitAfter] {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      std::printf("fake backend: listening child exits\n");
      std::fflush(stdout);
      std::_Exit(0);
    }).detach();
  }
  for (;;) {
    const int client = ::accept(listener, nullptr, nullptr);
    if (client >= 0) {
      std::thread(serveClient, client, args.leakClients, args.echo).detach();
    } else if (errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
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
