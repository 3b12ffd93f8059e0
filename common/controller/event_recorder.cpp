#include "common/controller/event_recorder.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/base/json_access.h"
#include "common/controller/leader_election.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"

namespace gvirtus {
namespace {

using nlohmann::json;

constexpr size_t kMaxMessageBytes = 1024;
constexpr size_t kMaxNameBytes = 253;
// Keys remembered for aggregation; beyond this, the ones seen least recently are forgotten
// (a repeat of a forgotten key makes a new Event instead of raising a count).
constexpr size_t kMaxWritten = 4096;
// How long stop() keeps writing what is queued.
constexpr auto kDrainTime = std::chrono::seconds(3);

std::string topString(const json& object, std::string_view key, std::string_view fallback) {
  const json* value = member(object, key);
  const bool given = value && value->is_string() && !value->get_ref<const std::string&>().empty();
  return given ? value->get<std::string>() : std::string(fallback);
}

// Cuts `text` to at most `bytes` bytes without splitting a UTF-8 sequence.
std::string cut(const std::string& text, size_t bytes) {
  size_t end = std::min(bytes, text.size());
  while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return text.substr(0, end);
}

std::string objectId(const ObjectReference& object) {
  return object.uid.empty() ? object.ns + "/" + object.name : object.uid;
}

// What one Event is about: its object, type and reason. Its messages are keyed
// `subject + '\x1f' + message`, so that they lie side by side in an ordered map.
std::string subjectKey(const ObjectReference& object, EventType type, const std::string& reason) {
  return objectId(object) + '\x1f' + std::string(eventTypeName(type)) + '\x1f' + reason + '\x1f';
}

}  // namespace

ObjectReference referenceTo(const json& object, std::string_view apiVersion,
                            std::string_view kind) {
  ObjectReference ref;
  ref.apiVersion = topString(object, "apiVersion", apiVersion);
  ref.kind = topString(object, "kind", kind);
  ref.ns = stringAt(object, {"metadata", "namespace"});
  ref.name = stringAt(object, {"metadata", "name"});
  ref.uid = stringAt(object, {"metadata", "uid"});
  ref.resourceVersion = stringAt(object, {"metadata", "resourceVersion"});
  return ref;
}

json buildEvent(const ObjectReference& object, EventType type, const std::string& reason,
                const std::string& message, const EventRecorderOptions& options,
                std::chrono::system_clock::time_point at) {
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  char hex[32];
  std::snprintf(hex, sizeof hex, ".%llx", static_cast<unsigned long long>(nanos));
  const std::string name = cut(object.name, kMaxNameBytes - std::string_view(hex).size()) + hex;
  const std::string time = formatMicroTime(at);

  json involved = {{"apiVersion", object.apiVersion},
                   {"kind", object.kind},
                   {"namespace", object.ns},
                   {"name", object.name}};
  if (!object.uid.empty()) {
    involved["uid"] = object.uid;
  }
  if (!object.resourceVersion.empty()) {
    involved["resourceVersion"] = object.resourceVersion;
  }
  json source = {{"component", options.component}};
  if (!options.host.empty()) {
    source["host"] = options.host;
  }
  json event = {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"name", name}, {"namespace", object.ns}}},
                {"involvedObject", involved},
                {"reason", reason},
                {"message", cut(message, kMaxMessageBytes)},
                {"type", eventTypeName(type)},
                {"source", source},
                {"firstTimestamp", time},
                {"lastTimestamp", time},
                {"count", 1},
                {"reportingComponent", options.component}};
  if (!options.instance.empty()) {
    event["reportingInstance"] = options.instance;
  }
  return event;
}

EventRecorder::EventRecorder(KubeClient& client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)) {
  if (!options_.now) {
    options_.now = [] { return std::chrono::system_clock::now(); };
  }
}

void EventRecorder::start() {
  std::lock_guard lock(mutex_);
  if (!thread_.joinable()) {
    thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  }
}

void EventRecorder::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

void EventRecorder::pruneLocked(std::chrono::system_clock::time_point now) {
  if (written_.size() <= kMaxWritten) {
    return;
  }
  std::erase_if(written_, [&](const auto& entry) {
    return now - entry.second.last >= options_.dedupeWindow;
  });
  // The least recently recorded go first: of one subject's messages, the older ones.
  while (written_.size() > kMaxWritten) {
    auto oldest = written_.begin();
    for (auto it = written_.begin(); it != written_.end(); ++it) {
      if (it->second.last < oldest->second.last) {
        oldest = it;
      }
    }
    written_.erase(oldest);
  }
}

bool EventRecorder::isLatestLocked(const std::string& subject,
                                   std::map<std::string, Written>::const_iterator it) const {
  for (auto other = written_.lower_bound(subject);
       other != written_.end() && other->first.starts_with(subject); ++other) {
    if (other->second.last > it->second.last) {
      return false;
    }
  }
  return true;
}

bool EventRecorder::record(const ObjectReference& object, EventType type, const std::string& reason,
                           const std::string& message) {
  const std::string subject = subjectKey(object, type, reason);
  const std::string key = subject + message;
  std::lock_guard lock(mutex_);
  auto now = options_.now();
  auto it = written_.find(key);
  // A repeat within the window is dropped while its message is the subject's latest; one
  // that comes back after another message refreshes its Event at once.
  if (it != written_.end() && now - it->second.last < options_.dedupeWindow &&
      isLatestLocked(subject, it)) {
    ++stats_.deduped;
    return false;
  }
  if (queue_.size() >= options_.maxQueued) {
    ++stats_.dropped;
    log::warn("event queue full; event dropped",
              {{"object", object.ns + "/" + object.name}, {"reason", reason}});
    return false;
  }
  // Names carry the time in nanoseconds: keep them distinct even when the clock stands.
  if (now <= lastNamed_) {
    now = lastNamed_ + std::chrono::nanoseconds(1);
  }
  lastNamed_ = now;
  json event = buildEvent(object, type, reason, message, options_, now);
  const bool repeat = it != written_.end();
  std::chrono::system_clock::time_point previous{};
  if (repeat) {
    Written& written = it->second;
    previous = written.last;
    written.last = now;
    ++written.count;
    event["metadata"]["name"] = written.name;
    event["count"] = written.count;
  } else {
    written_[key] = Written{object.ns, event["metadata"]["name"], 1, now};
    pruneLocked(now);
  }
  queue_.push_back({key, objectId(object), reason, std::move(event), repeat, previous});
  changed_.notify_all();
  return true;
}

int EventRecorder::withdraw(const ObjectReference& object, const std::string& reason) {
  const std::string id = objectId(object);
  std::lock_guard lock(mutex_);
  const auto withdrawn = std::erase_if(queue_, [&](const Pending& pending) {
    if (pending.objectId != id || pending.reason != reason) {
      return false;
    }
    // Never written: the same Event later is new again. A repeat only counted up and moved
    // the time on, which goes back to what it was before the first repeat withdrawn.
    if (auto it = written_.find(pending.key); it != written_.end()) {
      if (pending.repeat) {
        --it->second.count;
        it->second.last = std::min(it->second.last, pending.previous);
      } else {
        written_.erase(it);
      }
    }
    return true;
  });
  stats_.withdrawn += static_cast<int64_t>(withdrawn);
  return static_cast<int>(withdrawn);
}

void EventRecorder::write(Pending& pending) {
  json& event = pending.event;
  const std::string ns = event["metadata"]["namespace"];
  const std::string name = event["metadata"]["name"];
  if (pending.repeat) {
    const json body = {{"count", event["count"]}, {"lastTimestamp", event["lastTimestamp"]}};
    auto patched = client_.patch(resources::kEvents, ns, name, PatchType::Merge, body.dump());
    if (patched || !patched.error().isNotFound()) {
      std::lock_guard lock(mutex_);
      if (patched) {
        ++stats_.patched;
      } else {
        ++stats_.failed;
        log::warn("cannot update event", {{"event", ns + "/" + name},
                                          {"reason", event.value("reason", "")},
                                          {"error", patched.error().message}});
      }
      return;
    }
    // The Event expired (the API server keeps Events an hour by default): write it anew.
    event["count"] = 1;
    event["firstTimestamp"] = event["lastTimestamp"];
    std::lock_guard lock(mutex_);
    if (auto it = written_.find(pending.key); it != written_.end() && it->second.name == name) {
      it->second.count = 1;
    }
  }
  auto created = client_.create(resources::kEvents, ns, event);
  std::lock_guard lock(mutex_);
  if (created) {
    ++stats_.created;
    return;
  }
  ++stats_.failed;
  log::warn("cannot write event", {{"object", ns + "/" + event["involvedObject"].value("name", "")},
                                   {"reason", event.value("reason", "")},
                                   {"error", created.error().message}});
}

void EventRecorder::run(std::stop_token stop) {
  std::optional<std::chrono::steady_clock::time_point> drainUntil;
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (stop.stop_requested()) {
      if (!drainUntil) {
        drainUntil = std::chrono::steady_clock::now() + kDrainTime;
      }
      if (queue_.empty() || std::chrono::steady_clock::now() >= *drainUntil) {
        break;
      }
    }
    Pending pending = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    write(pending);
    lock.lock();
    writing_ = false;
    changed_.notify_all();
  }
  stats_.failed += static_cast<int64_t>(queue_.size());
  queue_.clear();
  changed_.notify_all();
}

bool EventRecorder::flush(Duration timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return queue_.empty() && !writing_; });
}

EventRecorder::Stats EventRecorder::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace gvirtus
