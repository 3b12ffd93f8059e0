// Webhook benchmark (issue 5): the handler alone per review, then gvirtus-webhook over TLS
// with keep-alive on loopback: reviews per second at saturation, and p50/p99 latency at a
// fixed 1,000 reviews/s. Prints the figures; label bench (not part of `make test`).
//
//   build/tests/webhook_bench            (BENCH_SECONDS, BENCH_CLIENTS to change the run)

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_env.h"
#include "common/telemetry/log.h"
#include "webhook/admission/mutate_handler.h"
#include "webhook/fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using Clock = std::chrono::steady_clock;
using gvirtus::bench::envInt;

namespace {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

TEST_CASE("webhook benchmark: the handler alone", "[bench]") {
  gvirtus::log::configure(gvirtus::log::Level::Warn, gvirtus::log::Format::Text);
  FakeBackendSource source({backend("10.0.0.1", 3, 0, "a"), backend("10.0.0.2", 1, 0, "b")});
  BackendChooser chooser;
  MutateHandler handler(MutateConfig{}, source, chooser);
  const std::string body = admissionReview(gvirtusPod({"app", "worker"})).dump();
  std::vector<double> samples;
  const int count = envInt("BENCH_REVIEWS", 20000);
  samples.reserve(static_cast<size_t>(count));
  const auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    const auto t0 = Clock::now();
    auto response = handler.handle(body);
    samples.push_back(micros(Clock::now() - t0));
    REQUIRE(response.status == 200);
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("handler alone: %d reviews, %.1f us/review mean, p50 %.1f us, p99 %.1f us\n", count,
              total * 1e6 / count, percentile(samples, 0.5), percentile(samples, 0.99));
}

TEST_CASE("webhook benchmark: over TLS with keep-alive", "[bench]") {
  TempDir dir;
  TlsFiles tls(dir);
  WebhookProcess webhook({"--static-backends", "127.0.0.1:9999,127.0.0.2:9999", "--tls-cert-file",
                          tls.certFile, "--tls-key-file", tls.keyFile});
  const std::string body = admissionReview(gvirtusPod({"app", "worker"})).dump();
  const int seconds = envInt("BENCH_SECONDS", 5);
  const int clients = envInt("BENCH_CLIENTS", 4);

  // Saturation: every client sends the next review as soon as the last is answered.
  {
    std::atomic<bool> stop = false;
    std::atomic<long> done = 0;
    std::atomic<long> failed = 0;
    std::mutex mutex;
    std::vector<double> samples;
    std::vector<std::jthread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        auto client = webhook.client(tls.caFile);
        std::vector<double> mine;
        while (!stop) {
          const auto t0 = Clock::now();
          auto response = client->Post("/mutate", body, "application/json");
          mine.push_back(micros(Clock::now() - t0));
          (response && response->status == 200 ? done : failed)++;
        }
        std::lock_guard lock(mutex);
        samples.insert(samples.end(), mine.begin(), mine.end());
      });
    }
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    stop = true;
    threads.clear();
    std::printf(
        "TLS keep-alive saturation: %d clients, %.0f reviews/s, p50 %.0f us, p99 %.0f us, "
        "%ld failed\n",
        clients, static_cast<double>(done) / seconds, percentile(samples, 0.5),
        percentile(samples, 0.99), failed.load());
    CHECK(failed == 0);
  }

  // A fixed rate of 1,000 reviews/s, spread over the clients.
  {
    const int rate = envInt("BENCH_RATE", 1000);
    std::mutex mutex;
    std::vector<double> samples;
    std::atomic<long> failed = 0;
    std::vector<std::jthread> threads;
    const auto begin = Clock::now() + std::chrono::milliseconds(100);
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        auto client = webhook.client(tls.caFile);
        client->Post("/mutate", body, "application/json");  // connect first
        std::vector<double> mine;
        const auto period = std::chrono::nanoseconds(1'000'000'000LL * clients / rate);
        auto next = begin + period * c / clients;
        const auto end = begin + std::chrono::seconds(seconds);
        while (next < end) {
          std::this_thread::sleep_until(next);
          const auto t0 = Clock::now();
          auto response = client->Post("/mutate", body, "application/json");
          mine.push_back(micros(Clock::now() - t0));
          if (!response || response->status != 200) {
            ++failed;
          }
          next += period;
        }
        std::lock_guard lock(mutex);
        samples.insert(samples.end(), mine.begin(), mine.end());
      });
    }
    threads.clear();
    std::printf(
        "TLS keep-alive at %d reviews/s: %zu reviews, p50 %.0f us, p99 %.0f us, %ld failed\n", rate,
        samples.size(), percentile(samples, 0.5), percentile(samples, 0.99), failed.load());
    CHECK(failed == 0);
  }
  webhook.child().kill(SIGTERM);
  CHECK(webhook.child().wait(std::chrono::seconds(10)) == 0);
}
