// Admission webhook, ours against the Kubernetes project's own test webhook (agnhost
// `webhook`, its /mutating-pods-sidecar endpoint, which mutates every pod), side by side in
// one run on loopback: the same TLS certificate, the same AdmissionReview (a GVirtuS pod
// with two containers), the same load generator (tests/bench/load_generator.h) and the same
// number of keep-alive connections. Figures: reviews/s at saturation, CPU per review,
// p50/p99 at fixed rates, resident memory; each as a ratio ours/agnhost. The phases
// alternate between the two webhooks, in rounds whose order flips, so that a noisy
// neighbour hits both alike.
//
//   GVIRTUS_AGNHOST=$(bash tests/bench/build-agnhost.sh) build/tests/webhook_compare_bench
//   (BENCH_SECONDS per phase, default 5; BENCH_CLIENTS connections, default 4; BENCH_ROUNDS,
//   default 2; BENCH_RATES, default "500,1000")

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/load_generator.h"
#include "bench/process_stats.h"
#include "common/base/base64.h"
#include "common/telemetry/log.h"
#include "support/child_process.h"
#include "support/cluster_env.h"
#include "webhook/admission/mutate_handler.h"
#include "webhook/fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus::bench;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
using gvirtus::webhook::Backend;
using gvirtus::webhook::testing::admissionReview;
using gvirtus::webhook::testing::backend;
using gvirtus::webhook::testing::FakeBackendSource;
using gvirtus::webhook::testing::gvirtusPod;
using gvirtus::webhook::testing::TempDir;
using gvirtus::webhook::testing::TlsFiles;
using gvirtus::webhook::testing::WebhookProcess;
using nlohmann::json;

namespace {

std::vector<int> envRates() {
  std::vector<int> rates;
  std::istringstream in(gvirtus::testing::envOr("BENCH_RATES", "500,1000"));
  for (std::string item; std::getline(in, item, ',');) {
    rates.push_back(std::atoi(item.c_str()));
  }
  return rates;
}

std::unique_ptr<httplib::SSLClient> httpsClient(int port, const std::string& caFile) {
  auto client = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
  client->set_ca_cert_path(caFile.c_str());
  client->enable_server_certificate_verification(true);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  client->set_read_timeout(10, 0);
  return client;
}

// One webhook under test: its process, where to POST, and what the phases measured.
struct Subject {
  std::string name;
  int pid = 0;
  LoadTarget target;
  double idleRss = 0;
  std::unique_ptr<RssSampler> sampler;
  // Per phase ("saturation", "500/s", ...): every latency sample, and sums over rounds.
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, long> ok;
  std::map<std::string, long> failed;
  std::map<std::string, double> seconds;
  std::map<std::string, double> cpu;
  std::map<std::string, double> clientCpu;  // the load generator's, this process

  void record(const std::string& phase, const LoadResult& result, double cpuSeconds,
              double clientCpuSeconds) {
    auto& all = samples[phase];
    all.insert(all.end(), result.latenciesUs.begin(), result.latenciesUs.end());
    ok[phase] += result.ok;
    failed[phase] += result.failed;
    seconds[phase] += result.seconds;
    cpu[phase] += cpuSeconds;
    clientCpu[phase] += clientCpuSeconds;
  }
  double perSecond(const std::string& phase) { return ok[phase] / std::max(seconds[phase], 1e-9); }
  double cpuPerReviewUs(const std::string& phase) {
    return cpu[phase] * 1e6 / std::max<double>(static_cast<double>(ok[phase]), 1);
  }
  double clientCpuPerReviewUs(const std::string& phase) {
    return clientCpu[phase] * 1e6 / std::max<double>(static_cast<double>(ok[phase]), 1);
  }
  double p(const std::string& phase, double q) { return percentile(samples[phase], q); }
};

// Sends one review and returns the answer's JSON patch (decoded), checking the uid.
json patchOf(Subject& subject) {
  auto client = subject.target.connect();
  auto response = client->Post(subject.target.path, subject.target.body, "application/json");
  INFO(subject.name << " answered " << (response ? std::to_string(response->status) : "nothing"));
  REQUIRE(response);
  REQUIRE(response->status == 200);
  const json review = json::parse(response->body);
  REQUIRE(review["response"]["uid"] == "uid-1");
  REQUIRE(review["response"]["allowed"] == true);
  REQUIRE(review["response"].contains("patch"));
  auto decoded = gvirtus::base64Decode(review["response"]["patch"].get<std::string>());
  REQUIRE(decoded.has_value());
  return json::parse(*decoded);
}

// CPU time of our handler alone per review, in this process: no HTTP, no TLS.
double handlerAloneUs(const std::string& body, std::vector<Backend> backends) {
  gvirtus::log::configure(gvirtus::log::Level::Warn, gvirtus::log::Format::Text);
  FakeBackendSource source(std::move(backends));
  gvirtus::webhook::BackendChooser chooser;
  gvirtus::webhook::MutateHandler handler(gvirtus::webhook::MutateConfig{}, source, chooser);
  const int count = 20000;
  const double cpu0 = cpuSeconds(static_cast<int>(::getpid()));
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    failed += handler.handle(body).status == 200 ? 0 : 1;
  }
  CHECK(failed == 0);
  return (cpuSeconds(static_cast<int>(::getpid())) - cpu0) * 1e6 / count;
}

// Four cluster backends given 1,000 pods within the assignment window, by this replica and
// another: what each review sees during a burst of pods.
std::vector<Backend> burstBackends() {
  std::vector<Backend> backends;
  for (int b = 0; b < 4; ++b) {
    Backend one = backend("10.0.0." + std::to_string(b + 1), 0, 0, "backend-" + std::to_string(b));
    for (int p = 0; p < 250; ++p) {
      one.assigned.push_back({std::chrono::system_clock::now(), "gvirtus-webhook-7d9f8b6c5-x2k4q"});
    }
    backends.push_back(std::move(one));
  }
  return backends;
}

std::string ratio(double ours, double theirs) {
  return theirs > 0 ? format("%.2f", ours / theirs) : "n/a";
}

}  // namespace

TEST_CASE("webhook comparison: ours and agnhost's, same pods, same load", "[bench]") {
  const std::string agnhost = gvirtus::testing::envOr("GVIRTUS_AGNHOST", "");
  if (agnhost.empty()) {
    FAIL("GVIRTUS_AGNHOST is not set: GVIRTUS_AGNHOST=$(bash tests/bench/build-agnhost.sh)");
  }
  const auto phase = std::chrono::seconds(envInt("BENCH_SECONDS", 5));
  const int clients = envInt("BENCH_CLIENTS", 4);
  const int rounds = envInt("BENCH_ROUNDS", 2);
  const std::vector<int> rates = envRates();

  TempDir dir;
  TlsFiles tls(dir);
  const std::string body = admissionReview(gvirtusPod({"app", "worker"})).dump();

  WebhookProcess ourProcess({"--static-backends", "127.0.0.1:9999,127.0.0.2:9999",
                             "--tls-cert-file", tls.certFile, "--tls-key-file", tls.keyFile});
  const int agnhostPort = freePort();
  ChildProcess agnhostProcess({agnhost, "webhook", "--tls-cert-file", tls.certFile,
                               "--tls-private-key-file", tls.keyFile, "--port",
                               std::to_string(agnhostPort), "--sidecar-image", "example/sidecar"});
  REQUIRE(eventually([&] {
    auto response = httpsClient(agnhostPort, tls.caFile)->Get("/readyz");
    return response && response->status == 200;
  }));

  Subject ours;
  ours.name = "gvirtus-webhook";
  ours.pid = ourProcess.child().pid();
  ours.target = {[&] { return httpsClient(ourProcess.port(), tls.caFile); }, "/mutate", body};
  Subject peer;
  peer.name = "agnhost webhook";
  peer.pid = agnhostProcess.pid();
  peer.target = {[&] { return httpsClient(agnhostPort, tls.caFile); }, "/mutating-pods-sidecar",
                 body};

  // Both mutate the pod: ours wires GVirtuS in, agnhost adds a sidecar container.
  const json ourPatch = patchOf(ours);
  const json peerPatch = patchOf(peer);
  CHECK(ourPatch.size() > 1);
  CHECK(peerPatch.dump().find("webhook-added-sidecar") != std::string::npos);
  for (Subject* subject : {&ours, &peer}) {
    subject->idleRss = residentMemory(subject->pid).now;
    subject->sampler = std::make_unique<RssSampler>(subject->pid);
  }

  auto measure = [&](Subject& subject, const std::string& name, auto load) {
    const double cpu0 = cpuSeconds(subject.pid);
    const double clientCpu0 = cpuSeconds(static_cast<int>(::getpid()));
    const LoadResult result = load(subject.target);
    subject.record(name, result, cpuSeconds(subject.pid) - cpu0,
                   cpuSeconds(static_cast<int>(::getpid())) - clientCpu0);
    std::printf("  %-16s %-11s %7.0f reviews/s  p50 %6.0f us  p99 %6.0f us  %ld failed\n",
                subject.name.c_str(), name.c_str(), result.perSecond(),
                percentile(result.latenciesUs, 0.5), percentile(result.latenciesUs, 0.99),
                result.failed);
    std::fflush(stdout);
  };
  std::printf("\nwebhook comparison: %d keep-alive TLS connections, %lld s per phase, %d rounds\n",
              clients, static_cast<long long>(phase.count()), rounds);
  for (int round = 0; round < rounds; ++round) {
    std::vector<Subject*> order = {&ours, &peer};
    if (round % 2 == 1) {
      std::swap(order[0], order[1]);
    }
    for (Subject* subject : order) {
      measure(*subject, "saturation",
              [&](const LoadTarget& target) { return saturate(target, clients, phase); });
    }
    for (int rate : rates) {
      for (Subject* subject : order) {
        measure(*subject, std::to_string(rate) + "/s",
                [&](const LoadTarget& target) { return fixedRate(target, clients, rate, phase); });
      }
    }
  }

  // The report: one table, ours | agnhost | ratio.
  std::string table = format(
      "Both on loopback, same certificate, same AdmissionReview (a GVirtuS pod with two "
      "containers, %zu bytes), %d keep-alive TLS connections from one load generator; %d "
      "rounds of %lld s per phase, alternating. agnhost serves `/mutating-pods-sidecar` "
      "(adds a container: a %zu-byte JSON patch); ours serves `/mutate` (backend, "
      "properties, volume, env, node selector, GPU limit: a %zu-byte JSON patch). Latency "
      "at a fixed rate counts from the time a review was due.\n\n"
      "| | gvirtus-webhook | agnhost webhook | ours / agnhost |\n|---|---|---|---|\n",
      body.size(), clients, rounds, static_cast<long long>(phase.count()), peerPatch.dump().size(),
      ourPatch.dump().size());
  auto row = [&](const std::string& what, double a, double b, const char* unit) {
    table += format("| %s | %.0f %s | %.0f %s | %s |\n", what.c_str(), a, unit, b, unit,
                    ratio(a, b).c_str());
  };
  row("throughput at saturation", ours.perSecond("saturation"), peer.perSecond("saturation"),
      "reviews/s");
  row("CPU time per review at saturation", ours.cpuPerReviewUs("saturation"),
      peer.cpuPerReviewUs("saturation"), "us");
  // The load generator shares the machine's CPUs: at saturation it takes this much of
  // them per review, which bounds the throughput ratio below the CPU ratio.
  row("the load generator's CPU time per review at saturation",
      ours.clientCpuPerReviewUs("saturation"), peer.clientCpuPerReviewUs("saturation"), "us");
  table += format("| of which our handler alone (in-process, no HTTP, no TLS) | %.0f us | | |\n",
                  handlerAloneUs(body, {backend("127.0.0.1"), backend("127.0.0.2")}));
  table += format(
      "| our handler alone during a burst (4 backends given 1,000 pods in the last minute) | "
      "%.0f us | | |\n",
      handlerAloneUs(body, burstBackends()));
  row("p50 at saturation", ours.p("saturation", 0.5), peer.p("saturation", 0.5), "us");
  row("p99 at saturation", ours.p("saturation", 0.99), peer.p("saturation", 0.99), "us");
  for (int rate : rates) {
    const std::string name = std::to_string(rate) + "/s";
    row("p50 at " + std::to_string(rate) + " reviews/s", ours.p(name, 0.5), peer.p(name, 0.5),
        "us");
    row("p99 at " + std::to_string(rate) + " reviews/s", ours.p(name, 0.99), peer.p(name, 0.99),
        "us");
  }
  const double ourPeak = ours.sampler->highest();
  const double peerPeak = peer.sampler->highest();
  table += format("| resident memory, idle | %.1f MiB | %.1f MiB | %s |\n", ours.idleRss / 1048576,
                  peer.idleRss / 1048576, ratio(ours.idleRss, peer.idleRss).c_str());
  table += format("| resident memory, highest under load | %.1f MiB | %.1f MiB | %s |\n",
                  ourPeak / 1048576, peerPeak / 1048576, ratio(ourPeak, peerPeak).c_str());
  long ourFailed = 0;
  long peerFailed = 0;
  for (const auto& [name, count] : ours.failed) {
    ourFailed += count;
    peerFailed += peer.failed[name];
  }
  table += format("| failed reviews | %ld | %ld | |\n", ourFailed, peerFailed);
  const double ourTotal =
      ours.cpuPerReviewUs("saturation") + ours.clientCpuPerReviewUs("saturation");
  const double peerTotal =
      peer.cpuPerReviewUs("saturation") + peer.clientCpuPerReviewUs("saturation");
  table += format(
      "\nAt saturation the load generator and the webhook share this machine's %u CPUs: a "
      "review costs the two together %.0f us of CPU with ours, %.0f us with agnhost. The "
      "throughput ratio (%.2f) follows the ratio of those sums (%.2f) rather than the "
      "webhooks' own CPU ratio: 2 would need the load generator on other CPUs.\n",
      std::thread::hardware_concurrency(), ourTotal, peerTotal,
      ours.perSecond("saturation") / peer.perSecond("saturation"),
      ourTotal > 0 ? peerTotal / ourTotal : 0.0);
  std::printf("\n%s\n", table.c_str());
  append("webhook.md", table);

  const std::string section = "1";
  summaryRow("admission throughput at saturation, ours / agnhost",
             format("%.2f (%.0f vs %.0f reviews/s)",
                    ours.perSecond("saturation") / peer.perSecond("saturation"),
                    ours.perSecond("saturation"), peer.perSecond("saturation")),
             section);
  summaryRow("CPU time per review at saturation, ours / agnhost",
             format("%.2f (%.0f vs %.0f us)",
                    ours.cpuPerReviewUs("saturation") / peer.cpuPerReviewUs("saturation"),
                    ours.cpuPerReviewUs("saturation"), peer.cpuPerReviewUs("saturation")),
             section);
  for (int rate : rates) {
    const std::string name = std::to_string(rate) + "/s";
    summaryRow(
        format("admission p50 / p99 at %d reviews/s, ours / agnhost", rate),
        format("%.2f / %.2f (p99 %.0f vs %.0f us)", ours.p(name, 0.5) / peer.p(name, 0.5),
               ours.p(name, 0.99) / peer.p(name, 0.99), ours.p(name, 0.99), peer.p(name, 0.99)),
        section);
    writeCdf("webhook-ours-" + std::to_string(rate), ours.samples[name]);
    writeCdf("webhook-agnhost-" + std::to_string(rate), peer.samples[name]);
  }
  memoryRow("gvirtus-webhook (admission only, static backends)", ours.idleRss, ourPeak,
            format("%d connections at saturation", clients));
  memoryRow("agnhost webhook (peer, for comparison)", peer.idleRss, peerPeak,
            format("%d connections at saturation", clients));
  CHECK(ourFailed == 0);
  CHECK(peerFailed == 0);
}
