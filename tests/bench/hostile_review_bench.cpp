// Resident memory of gvirtus-webhook under bursts of crafted AdmissionReviews (a benchmark:
// it prints figures, it asserts only that every request was answered). For each body
// shape, 16 clients POST a body just under --max-request-bytes (3 MiB) at once; the peak
// VmRSS during the burst and VmRSS one second after it are printed. The shapes are what
// an attacker who reaches the Service can send: tiny values in bulk (`[{},{},...]`, the
// shape that took the webhook to 4.4 GB), many small strings, many keys, one huge string.
//
//   build/tests/hostile_review_bench      (BENCH_CLIENTS, default 16)

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_output.h"
#include "bench/process_stats.h"
#include "webhook/fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus::bench;
using gvirtus::webhook::testing::admissionReview;
using gvirtus::webhook::testing::gvirtusPod;
using gvirtus::webhook::testing::TempDir;
using gvirtus::webhook::testing::TlsFiles;
using gvirtus::webhook::testing::WebhookProcess;
using nlohmann::json;

namespace {

constexpr size_t kBodyBytes = 3 * 1024 * 1024 - 4096;

// A review whose pod carries `filler` (JSON text) under spec, padded to about `bytes`
// (kBodyBytes by default) by repeating `unit` (with `separator` between units) inside
// `open`...`close`.
std::string craftedBody(const std::string& open, const std::string& unit,
                        const std::string& separator, const std::string& close,
                        size_t bytes = kBodyBytes) {
  json pod = gvirtusPod();
  pod["spec"]["x"] = "FILLER";
  std::string body = admissionReview(pod).dump();
  std::string filler = open;
  const size_t room = bytes - body.size();
  while (filler.size() + unit.size() + separator.size() + close.size() < room) {
    filler += filler.size() > open.size() ? separator + unit : unit;
  }
  filler += close;
  body.replace(body.find("\"FILLER\""), 8, filler);
  return body;
}

double mib(double bytes) {
  return bytes / (1024.0 * 1024.0);
}

}  // namespace

TEST_CASE("webhook memory under bursts of crafted AdmissionReviews", "[bench]") {
  const char* clientsText = std::getenv("BENCH_CLIENTS");
  const int clients = clientsText != nullptr ? std::atoi(clientsText) : 16;
  TempDir dir;
  TlsFiles tls(dir);
  WebhookProcess webhook({"--static-backends", "127.0.0.1:9999", "--tls-cert-file", tls.certFile,
                          "--tls-key-file", tls.keyFile});
  const int pid = webhook.child().pid();
  const std::map<std::string, std::string> shapes = {
      {"1 `[{},{},...]` (1.5 M empty objects)", craftedBody("[", "{}", ",", "]")},
      {"2 `[\"a\",\"a\",...]` (0.8 M strings)", craftedBody("[", "\"a\"", ",", "]")},
      {"3 `{\"k1\":0,...}` (many keys)", craftedBody("{", "\"k\":0", ",", "}")},
      {"4 one 3 MiB string", craftedBody("\"", "x", "", "\"")},
      // The worst body that is still parsed and answered normally: as many values as the
      // cap allows, small enough to skip the gate for large reviews.
      {"5 `[0,0,...]` (99 k values in 195 KiB)", craftedBody("[", "0", ",", "]", 195 * 1024)},
  };
  std::printf("\ngvirtus-webhook, %d concurrent bodies of %.1f MiB, per shape\n", clients,
              mib(kBodyBytes));
  std::printf("%-40s %10s %10s %10s %s\n", "shape", "idle MiB", "peak MiB", "after MiB", "answers");
  std::string table =
      "| body shape | idle | peak during the burst | 1 s after | answers "
      "|\n|---|---|---|---|---|\n";
  for (const auto& [name, body] : shapes) {
    const double idle = residentMemory(pid).now;
    RssSampler sampler(pid);
    std::mutex mutex;
    std::map<int, int> answers;  // HTTP status (0: no answer) -> count
    std::vector<std::jthread> threads;
    for (int i = 0; i < clients; ++i) {
      threads.emplace_back([&] {
        auto client = webhook.client(tls.caFile);
        client->set_read_timeout(30, 0);
        auto response = client->Post("/mutate", body, "application/json");
        std::lock_guard lock(mutex);
        ++answers[response ? response->status : 0];
      });
    }
    threads.clear();
    const double peak = sampler.highest();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double after = residentMemory(pid).now;
    std::string answered;
    for (const auto& [status, count] : answers) {
      answered += (answered.empty() ? "" : ", ") + std::to_string(count) + "x " +
                  (status == 0 ? std::string("none") : std::to_string(status));
    }
    std::printf("%-40s %10.1f %10.1f %10.1f %s\n", name.substr(2).c_str(), mib(idle), mib(peak),
                mib(after), answered.c_str());
    table += format("| %s | %.1f MiB | %.1f MiB | %.1f MiB | %s |\n", name.substr(2).c_str(),
                    mib(idle), mib(peak), mib(after), answered.c_str());
    CHECK(answers[0] == 0);  // every request answered
    REQUIRE(webhook.child().running());
  }
  append("hostile.md", "### Memory under crafted AdmissionReviews\n\n" + table + "\n");
}
