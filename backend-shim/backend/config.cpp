#include "backend-shim/backend/config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend-shim/peer_guard/peer_guard_protocol.h"

extern char** environ;

namespace gvirtus::backend_shim {
namespace {

bool isExecutableFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::string absolutePath(const std::string& path) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.string();
}

bool hasName(const std::string& entry, const std::string& name) {
  return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
         entry[name.size()] == '=';
}

}  // namespace

std::string renderBackendConfig(uint16_t port, const std::vector<std::string>& plugins) {
  nlohmann::ordered_json endpoint = {{"suite", "tcp/ip"},
                                     {"protocol", "tcp"},
                                     {"server_address", "0.0.0.0"},
                                     {"port", std::to_string(port)}};
  nlohmann::ordered_json communicator = {{"endpoint", endpoint}, {"plugins", plugins}};
  nlohmann::ordered_json config = {{"communicator", nlohmann::ordered_json::array({communicator})},
                                   {"secure_application", false}};
  return config.dump();
}

Result<void> writeBackendConfig(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return fail("cannot create " + target.parent_path().string() + ": " + ec.message());
    }
  }
  const fs::path temporary = target.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      return fail("cannot write " + temporary.string() + ": " + std::strerror(errno));
    }
    out << text << '\n';
    if (!out.flush()) {
      return fail("cannot write " + temporary.string() + ": " + std::strerror(errno));
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    fs::remove(temporary, ec);
    return fail("cannot write " + path + ": " + ec.message());
  }
  return {};
}

std::vector<std::string> backendArgv(std::vector<std::string> command,
                                     const std::string& configPath) {
  command.push_back(configPath);
  return command;
}

std::vector<std::string> backendEnvironment(const std::vector<std::string>& base,
                                            const std::string& gvirtusHome) {
  if (gvirtusHome.empty()) {
    return base;
  }
  std::vector<std::string> env;
  for (const auto& entry : base) {
    if (!hasName(entry, "LD_LIBRARY_PATH") && !hasName(entry, "GVIRTUS_HOME")) {
      env.push_back(entry);
    }
  }
  env.push_back("GVIRTUS_HOME=" + gvirtusHome);
  env.push_back("LD_LIBRARY_PATH=" + (std::filesystem::path(gvirtusHome) / "lib").string());
  return env;
}

std::vector<std::string> withPreload(const std::vector<std::string>& base,
                                     const std::string& library) {
  std::string preload = library;
  std::vector<std::string> env;
  for (const auto& entry : base) {
    if (hasName(entry, "LD_PRELOAD")) {
      // ld.so takes colons or spaces between entries; ours goes last, after what the image
      // preloads already.
      const std::string earlier = entry.substr(entry.find('=') + 1);
      if (!earlier.empty()) {
        preload = earlier + ":" + library;
      }
    } else {
      env.push_back(entry);
    }
  }
  env.push_back("LD_PRELOAD=" + preload);
  return env;
}

std::vector<std::string> withPeerGuard(const std::vector<std::string>& base,
                                       const PeerGuardSettings& guard) {
  namespace protocol = gvirtus::peer_guard;
  std::vector<std::string> env;
  for (auto& entry : withPreload(base, guard.library)) {
    if (!hasName(entry, protocol::kSocketEnv) && !hasName(entry, protocol::kPortEnv) &&
        !hasName(entry, protocol::kTimeoutEnv)) {
      env.push_back(std::move(entry));
    }
  }
  const auto timeoutMs = std::chrono::ceil<std::chrono::milliseconds>(guard.timeout).count();
  env.push_back(std::string(protocol::kSocketEnv) + "=" + guard.socket);
  env.push_back(std::string(protocol::kPortEnv) + "=" + std::to_string(guard.port));
  env.push_back(std::string(protocol::kTimeoutEnv) + "=" + std::to_string(timeoutMs));
  return env;
}

std::vector<std::string> currentEnvironment() {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  return env;
}

Result<std::string> resolveExecutable(const std::string& command) {
  if (command.empty()) {
    return fail("empty backend command");
  }
  if (command.find('/') != std::string::npos) {
    if (!isExecutableFile(command)) {
      return fail(command + " is not an executable file");
    }
    return absolutePath(command);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
    if (isExecutableFile(candidate)) {
      return absolutePath(candidate);
    }
  }
  return fail(command + " was not found on PATH");
}

}  // namespace gvirtus::backend_shim
