#pragma once

// gvirtus-backend-shim run as a child process over the fake backend, for the tests that
// treat the binary as a black box.

#include <signal.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/shim_test_support.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

namespace gvirtus::backend_shim::test {

// The environment every run gets: no pod to publish to, no GVirtuS install. The guard
// library is preloaded into the backend with or without --peer-check (kAsanPreloadOrder).
inline const std::vector<std::string> kShimEnv{
    "POD_NAME=", "POD_NAMESPACE=", "GVIRTUS_HOME=", kAsanPreloadOrder};

// A shim over the fake backend, with its own ports and files.
struct RunningShim {
  TempDir dir;
  int port = gvirtus::testing::freePort();
  int healthPort = gvirtus::testing::freePort();
  std::string marker = dir.file("starts.txt");
  std::unique_ptr<gvirtus::testing::ChildProcess> process;
  std::vector<std::string> env = kShimEnv;

  // A failed test must not leave backends behind: the shim's own group is killed by
  // ChildProcess, the backends' groups here.
  ~RunningShim() {
    process.reset();
    for (const auto& start : readStarts(marker)) {
      ::kill(-start.pid, SIGKILL);
    }
  }

  // Without a --peer-check flag of its own, the shim runs with --peer-check=false: it has
  // no pod to read the peers from. Without --sessions, with --sessions=shared: these tests
  // are about the one supervised process (session_host_test.cpp and shim_sessions_test.cpp
  // are about per-pod processes).
  void start(std::vector<std::string> shimFlags, std::vector<std::string> fakeFlags = {}) {
    auto given = [&shimFlags](const char* prefix) {
      return std::any_of(shimFlags.begin(), shimFlags.end(),
                         [prefix](const std::string& flag) { return flag.starts_with(prefix); });
    };
    if (!given("--peer-check")) {
      shimFlags.push_back("--peer-check=false");
    }
    if (!given("--sessions")) {
      shimFlags.push_back("--sessions=shared");
    }
    std::vector<std::string> argv{kShimBinary,
                                  "--port",
                                  std::to_string(port),
                                  "--health-addr",
                                  "127.0.0.1:" + std::to_string(healthPort),
                                  "--config-out",
                                  dir.file("etc/properties.json"),
                                  "--nvml-library",
                                  FAKE_NVML_LIBRARY};
    argv.insert(argv.end(), shimFlags.begin(), shimFlags.end());
    argv.insert(argv.end(), {"--", kFakeBackend, "--marker", marker});
    argv.insert(argv.end(), fakeFlags.begin(), fakeFlags.end());
    process = std::make_unique<gvirtus::testing::ChildProcess>(argv, env, dir.file("shim.log"));
  }
  int readyz() const { return gvirtus::testing::httpFetch(healthPort, "/readyz").status; }
  std::string metrics() const { return gvirtus::testing::httpFetch(healthPort, "/metrics").body; }
  bool metric(const std::string& line) const {
    return metrics().find("\n" + line + "\n") != std::string::npos;
  }
  // A line of the shim's log holds `text` (the drain's lines need --log-level debug).
  bool logged(const std::string& text) const {
    return process->output().find(text) != std::string::npos;
  }
  pid_t backendPid() const {
    const auto starts = readStarts(marker);
    return starts.empty() ? 0 : starts.back().pid;
  }
};

}  // namespace gvirtus::backend_shim::test
