#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "common/base/error.h"
#include "common/kube/client.h"
#include "common/time/clock.h"
#include "common/time/duration.h"
#include "common/time/time_text.h"

namespace gvirtus {

// The leader-election fields of a coordination.k8s.io/v1 Lease spec.
struct LeaseRecord {
  std::string holderIdentity;
  int64_t leaseDurationSeconds = 0;
  std::string acquireTime;  // MicroTime
  std::string renewTime;    // MicroTime
  int64_t leaseTransitions = 0;

  static LeaseRecord fromLease(const nlohmann::json& lease);
  // Writes the fields into lease.spec, keeping the spec's other fields.
  void applyTo(nlohmann::json& lease) const;
  bool operator==(const LeaseRecord&) const = default;
};

// When we last saw the Lease record change, by our own monotonic clock. Expiry is judged
// from this, not from the renewTime the holder wrote, so that clock skew between machines
// does not matter (client-go's observedTime).
class LeaseObservation {
 public:
  using Clock = std::chrono::steady_clock;
  // Records `record` seen at `now`; the observation time moves only when it changed.
  void observe(const LeaseRecord& record, Clock::time_point now);
  // Someone other than `identity` holds the lease and it has not expired: the holder's
  // record changed less than its leaseDurationSeconds ago.
  bool heldByOther(const std::string& identity, Clock::time_point now) const;
  const std::optional<LeaseRecord>& record() const { return record_; }
  Clock::time_point observedAt() const { return observedAt_; }

 private:
  std::optional<LeaseRecord> record_;
  Clock::time_point observedAt_{};
};

// What the record to write is, when `identity` takes or renews `current` at `now`
// (renewing keeps acquireTime and leaseTransitions; a takeover increments the transitions).
LeaseRecord nextLeaseRecord(const std::optional<LeaseRecord>& current, const std::string& identity,
                            Duration leaseDuration, std::chrono::system_clock::time_point now);

struct LeaderElectionConfig {
  std::string ns;
  std::string name;
  std::string identity;
  Duration leaseDuration = std::chrono::seconds(15);
  Duration renewDeadline = std::chrono::seconds(10);
  Duration retryPeriod = std::chrono::seconds(2);
  // What the election reads the time from and waits on (tests advance a manual one).
  Clock* clock = &systemClock();
  // Runs on its own thread when leadership is gained; `stop` is requested when it is lost
  // (or on stop()), and the elector waits for the callback to return before going on.
  std::function<void(std::stop_token stop)> onStartedLeading;
  // Runs on the elector's thread after leadership was lost or given up.
  std::function<void()> onStoppedLeading;
  // Runs when a new leader is observed (another identity or ourselves).
  std::function<void(const std::string& identity)> onNewLeader;
};

// Checks the timings: all positive, renewDeadline < leaseDuration, retryPeriod <
// renewDeadline (client-go's rules), identity, namespace and name set.
Result<void> validate(const LeaderElectionConfig& config);

// Leader election on a Lease, like client-go's leaderelection with a LeaseLock: create the
// Lease when missing, take it over when its holder stopped renewing for leaseDuration (by
// our clock), renew every retryPeriod, and give up leadership when renewing failed for
// renewDeadline. Writes are compare-and-swap updates on metadata.resourceVersion: a 409
// means someone else wrote first.
//
// The KubeClient's requestTimeout should be well below renewDeadline: a renewal blocked in
// a request still ends leadership at the deadline (a watchdog stops the leader's work), but
// the thread can only notice the end of the request afterwards.
class LeaderElector {
 public:
  LeaderElector(KubeClient& client, LeaderElectionConfig config);
  // stop().
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts the election thread; a second call does nothing.
  Result<void> start();
  // Stops trying; when leading, ends the leader's work, then releases the Lease (holder
  // cleared, leaseDurationSeconds 1) so that a successor takes over at once. Idempotent.
  void stop();

  bool isLeader() const;
  // The holder seen last ("" when none or not yet known).
  std::string leader() const;
  const LeaderElectionConfig& config() const { return config_; }

 private:
  enum class Attempt { Acquired, Renewed, HeldByOther, Failed };
  void run(std::stop_token stop);
  // One try: get (or create) the Lease and write our record when allowed.
  Attempt tryAcquireOrRenew();
  // The two halves of a try: no Lease yet, create it with our record; a Lease read, write
  // our record over it unless another holds it. `newLeader` is set when the holder changed.
  Attempt createLease(Clock::TimePoint now, std::chrono::system_clock::time_point wallNow,
                      std::string& newLeader);
  Attempt renewLease(const nlohmann::json& got, Clock::TimePoint now,
                     std::chrono::system_clock::time_point wallNow, std::string& newLeader);
  void release();
  void startLeading();
  void stopLeading();

  KubeClient& client_;
  const LeaderElectionConfig config_;

  mutable std::mutex mutex_;
  LeaseObservation observation_;
  nlohmann::json lease_;  // the last Lease object read or written (for its resourceVersion)
  std::string leader_;
  Clock::TimePoint lastRenew_{};
  bool leading_ = false;

  std::atomic<bool> started_ = false;
  std::jthread work_;      // onStartedLeading
  std::jthread watchdog_;  // ends leadership at the renew deadline
  std::jthread thread_;    // the election loop; last: stopped first
};

}  // namespace gvirtus
