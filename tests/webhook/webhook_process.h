#pragma once

// gvirtus-webhook as a child process on loopback, for the black-box and integration tests:
// TLS files from a fresh test CA, ports picked by the process itself (port 0) and read
// back from its JSON log, and an HTTPS client that verifies the serving certificate.

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/tls/certificates.h"
#include "support/child_process.h"
#include "support/cluster_env.h"
#include "support/temp_dir.h"

namespace gvirtus::webhook::testing {

inline std::string webhookBinary() {
  return gvirtus::testing::binDir() + "/gvirtus-webhook";
}

// A temporary folder removed with the object.
using gvirtus::testing::TempDir;

// A CA and a serving certificate for 127.0.0.1 and localhost, written to files.
struct TlsFiles {
  PemKeyPair ca;
  PemKeyPair serving;
  std::string caFile;
  std::string certFile;
  std::string keyFile;

  explicit TlsFiles(const TempDir& dir) {
    auto madeCa = generateCa("gvirtus-webhook-test-ca", std::chrono::hours(24));
    REQUIRE(madeCa.has_value());
    ca = *madeCa;
    auto madeServing =
        generateServingCert(ca, "127.0.0.1", {"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
    REQUIRE(madeServing.has_value());
    serving = *madeServing;
    caFile = dir.write("ca.crt", ca.certPem);
    certFile = dir.write("tls.crt", serving.certPem);
    keyFile = dir.write("tls.key", serving.keyPem);
  }
};

// The child's JSON log lines whose "msg" is `message`, oldest first.
inline std::vector<nlohmann::json> loggedEntries(const gvirtus::testing::ChildProcess& child,
                                                 std::string_view message) {
  std::vector<nlohmann::json> entries;
  std::istringstream lines(child.output());
  std::string line;
  while (std::getline(lines, line)) {
    auto entry = nlohmann::json::parse(line, nullptr, false);
    if (entry.is_object() && entry.value("msg", "") == message) {
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

// The port a server of the child logged ("HTTP server listening" with "server": name).
inline int loggedPort(const gvirtus::testing::ChildProcess& child, const std::string& server) {
  for (const auto& entry : loggedEntries(child, "HTTP server listening")) {
    if (entry.value("server", "") == server) {
      return entry.value("port", 0);
    }
  }
  return 0;
}

// gvirtus-webhook started with `args` plus --listen/--health-addr on 127.0.0.1:0 and JSON
// logs; waits until both listeners are up (the health listener alone for --ca-role=issue,
// the CA step, which has no admission listener).
class WebhookProcess {
 public:
  explicit WebhookProcess(std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {webhookBinary(), "--listen",    "127.0.0.1:0",
                                     "--health-addr", "127.0.0.1:0", "--log-format",
                                     "json"};
    argv.insert(argv.end(), args.begin(), args.end());
    const bool admission = std::find(args.begin(), args.end(), "--ca-role=issue") == args.end();
    child_ = std::make_unique<gvirtus::testing::ChildProcess>(argv, env);
    // The ports logged, or the child gone.
    gvirtus::testing::eventually([&] {
      port_ = admission ? loggedPort(*child_, "webhook") : 0;
      healthPort_ = loggedPort(*child_, "health");
      return ((port_ != 0 || !admission) && healthPort_ != 0) || !child_->running();
    });
    INFO(child_->output());
    REQUIRE(child_->running());
    REQUIRE((port_ != 0 || !admission));
    REQUIRE(healthPort_ != 0);
  }

  int port() const { return port_; }
  int healthPort() const { return healthPort_; }
  // One sample of its /metrics (e.g. "gvirtus_webhook_backends_available"); -1 when absent.
  double metric(const std::string& sample) const {
    return gvirtus::testing::metricValue(gvirtus::testing::httpGet(healthPort_, "/metrics"),
                                         sample);
  }
  gvirtus::testing::ChildProcess& child() { return *child_; }
  // Its JSON log lines with this "msg", oldest first.
  std::vector<nlohmann::json> logged(std::string_view message) const {
    return loggedEntries(*child_, message);
  }

  // An HTTPS client of the webhook that trusts only `caFile` and checks the host name.
  std::unique_ptr<httplib::SSLClient> client(const std::string& caFile) const {
    auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port_);
    c->set_ca_cert_path(caFile.c_str());
    c->enable_server_certificate_verification(true);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_read_timeout(10, 0);
    return c;
  }

 private:
  std::unique_ptr<gvirtus::testing::ChildProcess> child_;
  int port_ = 0;
  int healthPort_ = 0;
};

}  // namespace gvirtus::webhook::testing
