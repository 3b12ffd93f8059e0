#include "common/controller/leader_election.h"

#include <cstdio>
#include <ctime>
#include <random>
#include <utility>

#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"

namespace gvirtus {

using nlohmann::json;

namespace {

std::string stringField(const json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t intField(const json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::chrono::seconds leaseSeconds(Duration leaseDuration) {
  return std::chrono::duration_cast<std::chrono::seconds>(leaseDuration);
}

}  // namespace

LeaseRecord LeaseRecord::fromLease(const json& lease) {
  LeaseRecord record;
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) {
    return record;
  }
  record.holderIdentity = stringField(*spec, "holderIdentity");
  record.leaseDurationSeconds = intField(*spec, "leaseDurationSeconds");
  record.acquireTime = stringField(*spec, "acquireTime");
  record.renewTime = stringField(*spec, "renewTime");
  record.leaseTransitions = intField(*spec, "leaseTransitions");
  return record;
}

void LeaseRecord::applyTo(json& lease) const {
  if (!lease.contains("spec") || !lease["spec"].is_object()) {
    lease["spec"] = json::object();
  }
  json& spec = lease["spec"];
  spec["holderIdentity"] = holderIdentity;
  spec["leaseDurationSeconds"] = leaseDurationSeconds;
  if (acquireTime.empty()) {
    spec.erase("acquireTime");
  } else {
    spec["acquireTime"] = acquireTime;
  }
  if (renewTime.empty()) {
    spec.erase("renewTime");
  } else {
    spec["renewTime"] = renewTime;
  }
  spec["leaseTransitions"] = leaseTransitions;
}

void LeaseObservation::observe(const LeaseRecord& record, Clock::time_point now) {
  if (!record_ || *record_ != record) {
    record_ = record;
    observedAt_ = now;
  }
}

bool LeaseObservation::heldByOther(const std::string& identity, Clock::time_point now) const {
  if (!record_ || record_->holderIdentity.empty() || record_->holderIdentity == identity) {
    return false;
  }
  return observedAt_ + std::chrono::seconds(record_->leaseDurationSeconds) > now;
}

LeaseRecord nextLeaseRecord(const std::optional<LeaseRecord>& current, const std::string& identity,
                            Duration leaseDuration, std::chrono::system_clock::time_point now) {
  LeaseRecord next;
  next.holderIdentity = identity;
  next.leaseDurationSeconds = leaseSeconds(leaseDuration).count();
  next.renewTime = formatMicroTime(now);
  if (current && current->holderIdentity == identity) {
    next.acquireTime = current->acquireTime.empty() ? next.renewTime : current->acquireTime;
    next.leaseTransitions = current->leaseTransitions;
  } else {
    next.acquireTime = next.renewTime;
    next.leaseTransitions = current ? current->leaseTransitions + 1 : 0;
  }
  return next;
}

Result<void> validate(const LeaderElectionConfig& config) {
  if (config.ns.empty() || config.name.empty()) {
    return fail("leader election: the Lease namespace and name are required");
  }
  if (config.identity.empty()) {
    return fail("leader election: an identity is required");
  }
  if (leaseSeconds(config.leaseDuration).count() < 1) {
    return fail("leader election: leaseDuration must be at least 1s");
  }
  if (config.retryPeriod <= Duration::zero() || config.renewDeadline <= Duration::zero()) {
    return fail("leader election: renewDeadline and retryPeriod must be positive");
  }
  if (config.renewDeadline >= leaseSeconds(config.leaseDuration)) {
    return fail("leader election: renewDeadline must be shorter than leaseDuration");
  }
  if (config.retryPeriod * 12 / 10 >= config.renewDeadline) {
    return fail("leader election: renewDeadline must be longer than 1.2 * retryPeriod");
  }
  return {};
}

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {}

LeaderElector::~LeaderElector() {
  stop();
}

Result<void> LeaderElector::start() {
  if (auto ok = validate(config_); !ok) {
    return ok;
  }
  if (started_.exchange(true)) {
    return {};
  }
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  return {};
}

void LeaderElector::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool LeaderElector::isLeader() const {
  std::lock_guard lock(mutex_);
  return leading_ && config_.clock->now() - lastRenew_ < config_.renewDeadline;
}

std::string LeaderElector::leader() const {
  std::lock_guard lock(mutex_);
  return leader_;
}

void LeaderElector::run(std::stop_token stop) {
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int64_t> jitter(0, config_.retryPeriod.count() / 5);
  const json where = {{"lease", config_.ns + "/" + config_.name}, {"identity", config_.identity}};
  log::info("leader election started", where);
  while (!stop.stop_requested()) {
    const Attempt first = tryAcquireOrRenew();
    if (first != Attempt::Acquired && first != Attempt::Renewed) {
      config_.clock->sleepUnlessStopped(stop, config_.retryPeriod + Duration(jitter(random)));
      continue;
    }
    log::info("leader election: leading", where);
    startLeading();
    while (config_.clock->sleepUnlessStopped(stop, config_.retryPeriod)) {
      {
        std::lock_guard lock(mutex_);
        if (!leading_) {
          break;  // the watchdog ended it: the renew deadline passed
        }
      }
      const Attempt attempt = tryAcquireOrRenew();
      const auto now = config_.clock->now();
      std::unique_lock lock(mutex_);
      if (attempt == Attempt::Renewed || attempt == Attempt::Acquired) {
        if (leading_) {
          lastRenew_ = now;
          continue;
        }
        break;  // renewed, but too late: the deadline had passed; start over
      }
      if (attempt == Attempt::HeldByOther) {
        log::warn("leader election: the lease was taken by another holder",
                  {{"lease", where["lease"]}, {"identity", config_.identity}, {"holder", leader_}});
        break;
      }
      if (now - lastRenew_ >= config_.renewDeadline) {
        log::warn("leader election: could not renew within the deadline",
                  {{"lease", where["lease"]},
                   {"identity", config_.identity},
                   {"renewDeadline", formatDuration(config_.renewDeadline)}});
        break;
      }
    }
    stopLeading();
    log::info("leader election: stopped leading", where);
    if (config_.onStoppedLeading) {
      config_.onStoppedLeading();
    }
    if (stop.stop_requested()) {
      break;
    }
  }
  release();  // only when the last record seen names us
}

LeaderElector::Attempt LeaderElector::tryAcquireOrRenew() {
  const auto now = config_.clock->now();
  const auto wallNow = std::chrono::system_clock::now();
  std::string newLeader;
  Attempt outcome = Attempt::Failed;
  auto got = client_.get(resources::kLeases, config_.ns, config_.name);
  if (got) {
    outcome = renewLease(*got, now, wallNow, newLeader);
  } else if (got.error().isNotFound()) {
    outcome = createLease(now, wallNow, newLeader);
  } else {
    log::warn("leader election: cannot read the lease",
              {{"lease", config_.ns + "/" + config_.name}, {"error", got.error().message}});
  }
  if (!newLeader.empty() && config_.onNewLeader) {
    config_.onNewLeader(newLeader);
  }
  return outcome;
}

LeaderElector::Attempt LeaderElector::createLease(Clock::TimePoint now,
                                                  std::chrono::system_clock::time_point wallNow,
                                                  std::string& newLeader) {
  const LeaseRecord record =
      nextLeaseRecord(std::nullopt, config_.identity, config_.leaseDuration, wallNow);
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", config_.name}, {"namespace", config_.ns}}}};
  record.applyTo(lease);
  auto created = client_.create(resources::kLeases, config_.ns, lease);
  if (!created) {
    // 409 AlreadyExists: another candidate created it first.
    log::write(created.error().isConflict() ? log::Level::Debug : log::Level::Warn,
               "leader election: cannot create the lease",
               {{"lease", config_.ns + "/" + config_.name}, {"error", created.error().message}});
    return Attempt::Failed;
  }
  std::lock_guard lock(mutex_);
  lease_ = *created;
  observation_.observe(record, now);
  if (leader_ != config_.identity) {
    leader_ = newLeader = config_.identity;
  }
  return Attempt::Acquired;
}

LeaderElector::Attempt LeaderElector::renewLease(const json& got, Clock::TimePoint now,
                                                 std::chrono::system_clock::time_point wallNow,
                                                 std::string& newLeader) {
  const LeaseRecord old = LeaseRecord::fromLease(got);
  {
    std::lock_guard lock(mutex_);
    lease_ = got;
    observation_.observe(old, now);
    if (!old.holderIdentity.empty() && leader_ != old.holderIdentity) {
      leader_ = newLeader = old.holderIdentity;
    }
    if (observation_.heldByOther(config_.identity, now)) {
      return Attempt::HeldByOther;
    }
  }
  const LeaseRecord next = nextLeaseRecord(old, config_.identity, config_.leaseDuration, wallNow);
  json lease = got;  // keeps metadata.resourceVersion: a compare-and-swap
  next.applyTo(lease);
  auto updated = client_.update(resources::kLeases, config_.ns, config_.name, lease);
  if (!updated) {
    // 409 Conflict: someone else wrote between our read and our write.
    log::write(updated.error().isConflict() ? log::Level::Debug : log::Level::Warn,
               "leader election: cannot update the lease",
               {{"lease", config_.ns + "/" + config_.name}, {"error", updated.error().message}});
    return Attempt::Failed;
  }
  std::lock_guard lock(mutex_);
  lease_ = *updated;
  observation_.observe(next, now);
  if (leader_ != config_.identity) {
    leader_ = newLeader = config_.identity;
  }
  const Attempt outcome =
      old.holderIdentity == config_.identity ? Attempt::Renewed : Attempt::Acquired;
  if (outcome == Attempt::Acquired && !old.holderIdentity.empty()) {
    log::info("leader election: took over an expired lease",
              {{"lease", config_.ns + "/" + config_.name},
               {"previousHolder", old.holderIdentity},
               {"transitions", next.leaseTransitions}});
  }
  return outcome;
}

void LeaderElector::startLeading() {
  {
    std::lock_guard lock(mutex_);
    leading_ = true;
    lastRenew_ = config_.clock->now();
  }
  if (config_.onStartedLeading) {
    work_ = std::jthread([this](std::stop_token stop) { config_.onStartedLeading(stop); });
  }
  watchdog_ = std::jthread([this](std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested() && leading_) {
      const auto deadline = lastRenew_ + config_.renewDeadline;
      const auto now = config_.clock->now();
      if (now >= deadline) {
        leading_ = false;
        lock.unlock();  // stop callbacks run inside request_stop and may call isLeader()
        log::warn("leader election: renew deadline passed, ending the leader's work",
                  {{"lease", config_.ns + "/" + config_.name}, {"identity", config_.identity}});
        work_.request_stop();
        return;
      }
      // Until the deadline seen now; a renewal meanwhile moves it, and the loop looks again.
      lock.unlock();
      config_.clock->sleepUnlessStopped(stop, std::chrono::ceil<Duration>(deadline - now));
      lock.lock();
    }
  });
}

void LeaderElector::stopLeading() {
  if (watchdog_.joinable()) {
    watchdog_.request_stop();
    watchdog_.join();
  }
  {
    std::lock_guard lock(mutex_);
    leading_ = false;
  }
  if (work_.joinable()) {
    work_.request_stop();
    work_.join();
  }
}

void LeaderElector::release() {
  for (int attempt = 0; attempt < 2; ++attempt) {
    json lease;
    {
      std::lock_guard lock(mutex_);
      lease = lease_;
    }
    if (lease.is_null()) {
      return;
    }
    const LeaseRecord held = LeaseRecord::fromLease(lease);
    if (held.holderIdentity != config_.identity) {
      return;  // someone else holds it already
    }
    const std::string now = formatMicroTime(std::chrono::system_clock::now());
    const LeaseRecord released{"", 1, now, now, held.leaseTransitions};
    released.applyTo(lease);
    auto updated = client_.update(resources::kLeases, config_.ns, config_.name, lease);
    if (updated) {
      std::lock_guard lock(mutex_);
      lease_ = *updated;
      log::info("leader election: released the lease",
                {{"lease", config_.ns + "/" + config_.name}, {"identity", config_.identity}});
      return;
    }
    if (!updated.error().isConflict()) {
      log::warn("leader election: cannot release the lease",
                {{"lease", config_.ns + "/" + config_.name}, {"error", updated.error().message}});
      return;
    }
    auto fresh = client_.get(resources::kLeases, config_.ns, config_.name);
    if (!fresh) {
      return;
    }
    std::lock_guard lock(mutex_);
    lease_ = *fresh;
  }
}

}  // namespace gvirtus
