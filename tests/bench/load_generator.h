#pragma once

// The admission load generator of the webhook benchmarks, lifted out of
// tests/webhook/webhook_bench.cpp so that every webhook we measure (ours, agnhost's) gets the
// same one: N keep-alive HTTPS connections, each in its own thread, POSTing the same body.
//   saturate():  every connection sends the next request as soon as the last is answered;
//   fixedRate(): a fixed total rate spread evenly over the connections. Latency is counted
//                from the time a request was due, not from when it went out, so that a slow
//                answer which holds up the next request is charged to it (no coordinated
//                omission); below saturation both are the same.

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/percentile.h"

namespace gvirtus::bench {

using Clock = std::chrono::steady_clock;

// One connection of one load client: an HTTPS client with keep-alive that verifies the server.
using ClientFactory = std::function<std::unique_ptr<httplib::SSLClient>()>;

struct LoadTarget {
  ClientFactory connect;
  std::string path;  // e.g. /mutate
  std::string body;  // an AdmissionReview
};

struct LoadResult {
  long ok = 0;
  long failed = 0;
  double seconds = 0;
  std::vector<double> latenciesUs;  // one per request, failed ones included

  double perSecond() const { return seconds > 0 ? static_cast<double>(ok) / seconds : 0; }
};

namespace detail {

inline bool post(httplib::SSLClient& client, const LoadTarget& target) {
  auto response = client.Post(target.path, target.body, "application/json");
  return response && response->status == 200;
}

// Runs `work(client, samples)` on `clients` threads, each with its own connection opened and
// used once before the clock starts; gathers the samples and counts.
inline LoadResult run(
    const LoadTarget& target, int clients,
    const std::function<void(int, httplib::SSLClient&, std::vector<double>&, long&, long&)>& work) {
  LoadResult result;
  std::mutex mutex;
  std::vector<std::jthread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = target.connect();
      post(*client, target);  // TLS handshake and keep-alive before the measurement
      std::vector<double> mine;
      long ok = 0;
      long failed = 0;
      work(c, *client, mine, ok, failed);
      std::lock_guard lock(mutex);
      result.latenciesUs.insert(result.latenciesUs.end(), mine.begin(), mine.end());
      result.ok += ok;
      result.failed += failed;
    });
  }
  threads.clear();
  return result;
}

}  // namespace detail

// Every connection sends the next request as soon as the last is answered, for `duration`.
inline LoadResult saturate(const LoadTarget& target, int clients, Clock::duration duration) {
  const auto begin = Clock::now() + std::chrono::milliseconds(200);
  const auto end = begin + duration;
  auto result = detail::run(
      target, clients,
      [&](int, httplib::SSLClient& client, std::vector<double>& samples, long& ok, long& failed) {
        std::this_thread::sleep_until(begin);
        while (Clock::now() < end) {
          const auto t0 = Clock::now();
          (detail::post(client, target) ? ok : failed)++;
          samples.push_back(microseconds(Clock::now() - t0));
        }
      });
  result.seconds = std::chrono::duration<double>(duration).count();
  return result;
}

// `rate` requests per second in all, client c sending at begin + (k * clients + c) / rate,
// for `duration`.
inline LoadResult fixedRate(const LoadTarget& target, int clients, int rate,
                            Clock::duration duration) {
  const auto begin = Clock::now() + std::chrono::milliseconds(200);
  const auto end = begin + duration;
  const auto period = std::chrono::nanoseconds(1'000'000'000LL * clients / rate);
  auto result = detail::run(
      target, clients,
      [&](int c, httplib::SSLClient& client, std::vector<double>& samples, long& ok, long& failed) {
        for (auto due = begin + period * c / clients; due < end; due += period) {
          std::this_thread::sleep_until(due);
          (detail::post(client, target) ? ok : failed)++;
          samples.push_back(microseconds(Clock::now() - due));
        }
      });
  result.seconds = std::chrono::duration<double>(duration).count();
  return result;
}

}  // namespace gvirtus::bench
