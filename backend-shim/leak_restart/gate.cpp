#include "backend-shim/leak_restart/gate.h"

#include <algorithm>
#include <random>

#include "common/kube/api/resource.h"
#include "common/kube/client.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {
namespace {

std::function<double()> seededRandom() {
  auto engine = std::make_shared<std::mt19937>(std::random_device{}());
  return [engine]() { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

Duration scaled(Duration d, double fraction) {
  return Duration(static_cast<Duration::rep>(static_cast<double>(d.count()) * fraction));
}

}  // namespace

LeakRestartGate::LeakRestartGate(LeakRestartGateOptions options) : options_(std::move(options)) {
  if (!options_.random) {
    options_.random = seededRandom();
  }
}

LeakRestartGate::~LeakRestartGate() {
  stop();
}

void LeakRestartGate::start() {
  if (!thread_.joinable()) {
    thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
  }
}

void LeakRestartGate::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool LeakRestartGate::permit(bool overLimit, bool idle) {
  std::lock_guard lock(mutex_);
  overLimit_ = overLimit;
  idle_ = idle;
  if (!overLimit) {
    dueSince_.reset();
    granted_ = false;
    restarting_ = false;
    draining_ = false;
    return false;
  }
  if (!dueSince_) {
    dueSince_ = options_.clock->now();
  }
  if (!idle) {
    // A client connected: it is served, and the restart waits for the backend to be idle.
    granted_ = false;
    draining_ = false;
    return false;
  }
  if (!granted_) {
    return false;
  }
  granted_ = false;
  restarting_ = true;  // and still draining: the restart begins now
  ++permits_;
  return true;
}

bool LeakRestartGate::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

int64_t LeakRestartGate::deferrals() const {
  std::lock_guard lock(mutex_);
  return deferrals_;
}

int64_t LeakRestartGate::permits() const {
  std::lock_guard lock(mutex_);
  return permits_;
}

bool LeakRestartGate::wanted() const {
  std::lock_guard lock(mutex_);
  return overLimit_ && idle_ && !granted_ && !restarting_;
}

std::optional<Duration> LeakRestartGate::dueFor() const {
  std::lock_guard lock(mutex_);
  if (!dueSince_) {
    return std::nullopt;
  }
  return std::chrono::duration_cast<Duration>(options_.clock->now() - *dueSince_);
}

void LeakRestartGate::setDraining(bool draining) {
  std::lock_guard lock(mutex_);
  draining_ = draining && overLimit_ && idle_;
}

void LeakRestartGate::grant(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!overLimit_ || !idle_) {
      return;  // no longer due: the loop looks again
    }
    granted_ = true;
  }
  log::info("the leak restart may go", {{"reason", reason}});
}

void LeakRestartGate::defer(const std::string& reason, Duration deferredFor) {
  {
    std::lock_guard lock(mutex_);
    ++deferrals_;
  }
  log::info("leak restart deferred",
            {{"reason", reason},
             {"deferredFor", formatDuration(deferredFor)},
             {"restartAnywayIn",
              formatDuration(std::max(options_.maxDefer - deferredFor, Duration::zero()))}});
  if (options_.onDeferred) {
    options_.onDeferred();
  }
}

LeakRestartGate::Step LeakRestartGate::look(Phase phase) {
  const Duration due = dueFor().value_or(Duration::zero());
  const auto pods = options_.listBackends();
  const LeakRestartDecision decision =
      decideLeakRestart(pods, options_.self, due, options_.maxDefer);
  if (!decision.restart) {
    defer(decision.reason, due);
    return Step::Wait;
  }
  if (due >= options_.maxDefer) {
    log::warn("restarting the backend to free leaked sockets without waiting any longer",
              {{"reason", decision.reason}});
    phase = Phase::Last;
  }
  switch (phase) {
    case Phase::First:
      return Step::Drain;
    case Phase::Settling:
      return pods && seenNotReady(*pods, options_.self) ? Step::Settled : Step::Drain;
    case Phase::Last:
      break;
  }
  grant(decision.reason);
  return Step::Go;
}

LeakRestartGate::Step LeakRestartGate::settle(const std::stop_token& stop) {
  const auto deadline = options_.clock->now() + options_.settleTimeout;
  for (;;) {
    if (!options_.clock->sleepUnlessStopped(stop, options_.look) || !wanted()) {
      return Step::Cancelled;
    }
    if (const Step step = look(Phase::Settling); step != Step::Drain) {
      return step;
    }
    if (options_.clock->now() >= deadline) {
      log::info("this pod does not show as not Ready yet; looking at the other backends anyway",
                {{"after", formatDuration(options_.settleTimeout)}});
      return Step::Settled;
    }
  }
}

void LeakRestartGate::loop(std::stop_token stop) {
  Clock& clock = *options_.clock;
  // After a deferral: a random pause, so that two shims that deferred together part, never
  // past the moment the restart goes anyway.
  auto retryPause = [this]() {
    Duration pause = options_.retry + scaled(options_.retry, options_.random());
    const Duration due = dueFor().value_or(Duration::zero());
    if (due < options_.maxDefer) {
      pause = std::min(pause, options_.maxDefer - due);
    }
    return std::max(pause, Duration(1));
  };
  while (!stop.stop_requested()) {
    if (!wanted()) {
      clock.sleepUnlessStopped(stop, options_.look);
      continue;
    }
    Step step = look(Phase::First);
    if (step == Step::Drain) {
      setDraining(true);
      log::info(
          "a leak restart is due and another backend is ready: not ready now; the backend is "
          "restarted once this pod shows not Ready while another backend still is Ready");
      step = settle(stop);
      if (step == Step::Settled) {
        const bool waited =
            clock.sleepUnlessStopped(stop, scaled(options_.jitter, options_.random()));
        step = waited && wanted() ? look(Phase::Last) : Step::Cancelled;
      }
      if (step == Step::Wait || step == Step::Cancelled) {
        setDraining(false);  // ready again: deferred, or a client came, or stopping
      }
    }
    if (step == Step::Wait) {
      clock.sleepUnlessStopped(stop, retryPause());
    }
  }
}

std::function<Result<std::vector<BackendPod>>()> backendPodLister(KubeClient& client,
                                                                  std::string ns,
                                                                  std::string selector) {
  return [&client, ns = std::move(ns),
          selector = std::move(selector)]() -> Result<std::vector<BackendPod>> {
    ListOptions list;
    list.labelSelector = selector;
    auto page = client.list(resources::kPods, ns, list);
    if (!page) {
      return fail(page.error().context("list the backend pods (" + selector + ") in " + ns));
    }
    std::vector<BackendPod> pods;
    pods.reserve(page->items.size());
    for (const auto& item : page->items) {
      pods.push_back(backendPodFrom(item));
    }
    return pods;
  };
}

}  // namespace gvirtus::backend_shim
