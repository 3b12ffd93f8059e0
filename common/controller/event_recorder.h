#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "common/kube/client.h"
#include "common/time/duration.h"

namespace gvirtus {

enum class EventType { Normal, Warning };
inline std::string_view eventTypeName(EventType type) {
  return type == EventType::Warning ? "Warning" : "Normal";
}

// The object an Event is about (core v1 ObjectReference).
struct ObjectReference {
  std::string apiVersion;
  std::string kind;
  std::string ns;
  std::string name;
  std::string uid;
  std::string resourceVersion;
};

// The reference to a namespaced object: its own apiVersion and kind when it carries them
// (watch events do, items of a list do not), else the given ones.
ObjectReference referenceTo(const nlohmann::json& object, std::string_view apiVersion,
                            std::string_view kind);

struct EventRecorderOptions {
  std::string component;  // source.component and reportingComponent, e.g. "gvirtus-webhook"
  std::string host;       // source.host (the node); may be empty
  std::string instance;   // reportingInstance (e.g. the pod name); may be empty
  // The same object, reason and message again within this window is dropped; later it
  // raises the count of the Event written the first time (as `kubectl describe` shows it).
  // A message that comes back after another one of the same object and reason (A, B, A) is
  // not dropped: its Event's count and lastTimestamp are raised at once, so that the Event
  // with the latest lastTimestamp always holds the message recorded last.
  Duration dedupeWindow = std::chrono::minutes(10);
  // Events waiting to be written; more are dropped (and logged): a recorder never blocks
  // its caller and never grows without bound.
  size_t maxQueued = 1000;
  std::function<std::chrono::system_clock::time_point()> now;  // default: system clock
};

// The core v1 Event written the first time (count 1), named like client-go's events
// ("<object name>.<hex nanoseconds>"); the message is cut to 1024 bytes.
nlohmann::json buildEvent(const ObjectReference& object, EventType type, const std::string& reason,
                          const std::string& message, const EventRecorderOptions& options,
                          std::chrono::system_clock::time_point at);

// Records core v1 Events for any component, asynchronously: record() decides at once
// whether the Event is new (dedupe by object UID, type, reason and message within
// dedupeWindow, unless another message of the same object, type and reason was recorded
// since) and queues it; a thread writes it (create, or a patch of count and lastTimestamp for
// a repeat). A write that fails is logged and dropped: Events are best effort. Thread-safe.
// Needs RBAC create and patch on events.
class EventRecorder {
 public:
  EventRecorder(KubeClient& client, EventRecorderOptions options);
  ~EventRecorder() { stop(); }
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void start();
  // Writes what is queued (for at most a few seconds), then stops the thread. Idempotent.
  void stop();

  // True when the Event was queued; false when it repeats the message recorded last for the
  // object, type and reason within the window, or the queue is full.
  bool record(const ObjectReference& object, EventType type, const std::string& reason,
              const std::string& message);

  // Drops the Events of `object` with `reason` that are queued and not written yet: a state
  // that ended before its Event went out (a pod released while its WaitingForBackend Event
  // still waited behind others) is not reported after the fact. Returns how many.
  int withdraw(const ObjectReference& object, const std::string& reason);

  // Waits until every queued Event was written (or failed); false on timeout.
  bool flush(Duration timeout);

  struct Stats {
    int64_t created = 0;
    int64_t patched = 0;  // repeats after the window
    int64_t deduped = 0;
    int64_t dropped = 0;  // queue full
    int64_t withdrawn = 0;
    int64_t failed = 0;
  };
  Stats stats() const;

 private:
  struct Pending {
    std::string key;
    std::string objectId;  // the object's UID, or namespace/name without one
    std::string reason;
    // The Event to create; for a repeat, the one written before (its name) with the new
    // count and lastTimestamp.
    nlohmann::json event;
    bool repeat = false;
    // For a repeat: when its key was recorded before (restored if it is withdrawn).
    std::chrono::system_clock::time_point previous{};
  };
  // What was written for one key: the Event's namespace and name, its count, and when it
  // was last recorded. Records get distinct times, so among the keys of one object, type
  // and reason (adjacent in `written_`) the one with the latest `last` holds the current
  // message: no more is kept per key.
  struct Written {
    std::string ns;
    std::string name;
    int64_t count = 0;
    std::chrono::system_clock::time_point last;
  };

  void run(std::stop_token stop);
  void write(Pending& pending);
  void pruneLocked(std::chrono::system_clock::time_point now);
  // Whether no other message of the subject (object, type and reason) of `it` was recorded
  // after it.
  bool isLatestLocked(const std::string& subject,
                      std::map<std::string, Written>::const_iterator it) const;

  KubeClient& client_;
  EventRecorderOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<Pending> queue_;
  bool writing_ = false;
  std::map<std::string, Written> written_;
  std::chrono::system_clock::time_point lastNamed_{};
  Stats stats_;
  std::jthread thread_;  // last member: stopped first
};

}  // namespace gvirtus
