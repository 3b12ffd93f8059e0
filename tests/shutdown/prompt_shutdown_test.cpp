// Each binary, its API server a black hole (connections accepted by the kernel, never
// answered): started, left to block in its first requests, then sent SIGTERM. It must
// exit 0 within 2 s, as a kubelet expects of a pod within its grace period.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/black_hole.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

namespace {

using namespace std::chrono_literals;
using gvirtus::testing::BlackHole;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::freePort;
namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() /
                 ("gvirtus-shutdown-" + std::to_string(::getpid()) + "-" +
                  std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string kubeconfig(int port) const {
    const fs::path path = dir / "kubeconfig";
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: hole\n  cluster:\n"
                        << "    server: https://127.0.0.1:" << port
                        << "\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n"
                        << "    token: t\ncontexts:\n- name: c\n  context: {cluster: hole, user: "
                           "u}\ncurrent-context: c\n";
    return path.string();
  }
};

std::string bin(const std::string& name) {
  return gvirtus::testing::binDir() + "/" + name;
}

// Starts `argv`, waits until it is `busy` (its first requests hang), sends SIGTERM and
// returns the exit code and how long the exit took.
std::pair<std::optional<int>, std::chrono::milliseconds> terminate(
    const std::vector<std::string>& argv, const std::vector<std::string>& env, const Scratch& s,
    const std::function<bool()>& busy) {
  ChildProcess process(argv, env, (s.dir / "log").string());
  REQUIRE(gvirtus::testing::eventually(busy, 30s));
  REQUIRE(process.running());
  const auto sent = std::chrono::steady_clock::now();
  ::kill(process.pid(), SIGTERM);
  const auto code = process.wait(10s);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - sent);
  INFO(process.output());
  return {code, took};
}

}  // namespace

TEST_CASE("every binary exits 0 within 2 s of SIGTERM while the API server black-holes it",
          "[shutdown]") {
  BlackHole hole;
  Scratch scratch;
  const std::string kubeconfig = scratch.kubeconfig(hole.port());
  const int healthPort = freePort();
  const std::string health = "127.0.0.1:" + std::to_string(healthPort);
  std::vector<std::string> argv;
  std::vector<std::string> env;
  // Those with an API server are busy once a request hangs in the black hole.
  std::function<bool()> busy = [&hole] { return hole.hasClient(); };
  SECTION("gvirtus-labeler") {
    argv = {bin("gvirtus-labeler"), "--kubeconfig", kubeconfig, "--node-name", "node-1",
            "--health-addr",        health};
  }
  SECTION("gvirtus-webhook, its own CA and the waiting-pod controller") {
    argv = {bin("gvirtus-webhook"),
            "--kubeconfig",
            kubeconfig,
            "--health-addr",
            health,
            "--listen",
            "127.0.0.1:" + std::to_string(freePort()),
            "--leader-elect"};
    env = {"POD_NAMESPACE=gvirtus-system"};
  }
  SECTION("gvirtus-backend-shim, publishing its load") {
    const int port = freePort();
    argv = {bin("gvirtus-backend-shim"),
            "--kubeconfig",
            kubeconfig,
            "--health-addr",
            health,
            "--port",
            std::to_string(port),
            "--config-out",
            (scratch.dir / "p.json").string(),
            "--publish-interval",
            "100ms",
            "--",
            FAKE_GVIRTUS_BACKEND};
    env = {"POD_NAME=backend-1", "POD_NAMESPACE=gvirtus-system"};
  }
  SECTION("gvirtus-device-plugin, no kubelet") {
    fs::create_directories(scratch.dir / "kubelet");
    argv = {bin("gvirtus-device-plugin"),
            "--health-addr",
            health,
            "--kubelet-dir",
            (scratch.dir / "kubelet").string(),
            "--cdi-dir",
            (scratch.dir / "cdi").string()};
    // Up, and looking for a kubelet that never comes.
    busy = [healthPort] { return !gvirtus::testing::httpGet(healthPort, "/healthz").empty(); };
  }
  const auto [code, took] = terminate(argv, env, scratch, busy);
  INFO(argv[0] << " took " << took.count() << " ms");
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(took < 2000ms);
}
