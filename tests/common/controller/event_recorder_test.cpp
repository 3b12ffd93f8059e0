// EventRecorder against a loopback TLS server standing in for the API server's events
// endpoints (create, merge patch); the real API server is exercised by the webhook's
// integration tests.
#include "common/controller/event_recorder.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "support/tls_test_server.h"

namespace gvirtus {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const testing::TestPki& pki() {
  static const testing::TestPki value = testing::makeTestPki("event-recorder-test-ca");
  return value;
}

// The events of a namespace, as the stand-in API server keeps them.
class FakeEvents {
 public:
  explicit FakeEvents(testing::TlsTestServer& server) {
    server.http().Post(R"(/api/v1/namespaces/([^/]+)/events)",
                       [this](const httplib::Request& request, httplib::Response& response) {
                         std::lock_guard lock(mutex_);
                         json event = json::parse(request.body);
                         const std::string name = event["metadata"]["name"];
                         requests_.push_back("create " + name);
                         if (events_.contains(name)) {
                           response.status = 409;
                           response.set_content(R"({"kind":"Status","reason":"AlreadyExists"})",
                                                "application/json");
                           return;
                         }
                         events_[name] = event;
                         response.status = 201;
                         response.set_content(event.dump(), "application/json");
                       });
    server.http().Patch(R"(/api/v1/namespaces/([^/]+)/events/([^/]+))",
                        [this](const httplib::Request& request, httplib::Response& response) {
                          std::lock_guard lock(mutex_);
                          const std::string name = request.matches[2];
                          requests_.push_back("patch " + name);
                          auto it = events_.find(name);
                          if (it == events_.end()) {
                            response.status = 404;
                            response.set_content(R"({"kind":"Status","reason":"NotFound"})",
                                                 "application/json");
                            return;
                          }
                          it->second.merge_patch(json::parse(request.body));
                          response.status = 200;
                          response.set_content(it->second.dump(), "application/json");
                        });
  }

  std::map<std::string, json> events() {
    std::lock_guard lock(mutex_);
    return events_;
  }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  void expireAll() {
    std::lock_guard lock(mutex_);
    events_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, json> events_;
  std::vector<std::string> requests_;
};

const json kPod = {{"metadata",
                    {{"name", "trainer"},
                     {"namespace", "team-a"},
                     {"uid", "0b6e-uid"},
                     {"resourceVersion", "42"}}}};

struct FakeClock {
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

EventRecorderOptions optionsWith(FakeClock& clock) {
  EventRecorderOptions options;
  options.component = "gvirtus-webhook";
  options.host = "node-1";
  options.instance = "gvirtus-webhook-abc";
  options.now = [&clock] { return clock.now; };
  return options;
}

std::unique_ptr<KubeClient> clientOf(const testing::TlsTestServer& server) {
  KubeClientOptions options;
  options.maxRetries = 0;
  auto client = KubeClient::create(server.kubeConfig(), options);
  REQUIRE(client.has_value());
  return std::move(*client);
}

}  // namespace

TEST_CASE("a reference to an object with the kind it lacks as a list item", "[events]") {
  const ObjectReference ref = referenceTo(kPod, "v1", "Pod");
  CHECK(ref.apiVersion == "v1");
  CHECK(ref.kind == "Pod");
  CHECK(ref.ns == "team-a");
  CHECK(ref.name == "trainer");
  CHECK(ref.uid == "0b6e-uid");
  CHECK(ref.resourceVersion == "42");
  json withKind = kPod;
  withKind["apiVersion"] = "apps/v1";
  withKind["kind"] = "StatefulSet";
  CHECK(referenceTo(withKind, "v1", "Pod").kind == "StatefulSet");
  CHECK(referenceTo(withKind, "v1", "Pod").apiVersion == "apps/v1");
}

TEST_CASE("the core v1 Event a recorder writes", "[events]") {
  FakeClock clock;
  const auto options = optionsWith(clock);
  const json event = buildEvent(referenceTo(kPod, "v1", "Pod"), EventType::Normal,
                                "WaitingForBackend", "no backend", options, clock.now);
  CHECK(event["apiVersion"] == "v1");
  CHECK(event["kind"] == "Event");
  CHECK(event["metadata"]["namespace"] == "team-a");
  CHECK(std::regex_match(event["metadata"]["name"].get<std::string>(),
                         std::regex(R"(trainer\.[0-9a-f]+)")));
  CHECK(event["involvedObject"] == json({{"apiVersion", "v1"},
                                         {"kind", "Pod"},
                                         {"namespace", "team-a"},
                                         {"name", "trainer"},
                                         {"uid", "0b6e-uid"},
                                         {"resourceVersion", "42"}}));
  CHECK(event["type"] == "Normal");
  CHECK(event["reason"] == "WaitingForBackend");
  CHECK(event["message"] == "no backend");
  CHECK(event["source"] == json({{"component", "gvirtus-webhook"}, {"host", "node-1"}}));
  CHECK(event["reportingComponent"] == "gvirtus-webhook");
  CHECK(event["reportingInstance"] == "gvirtus-webhook-abc");
  CHECK(event["count"] == 1);
  CHECK(event["firstTimestamp"] == event["lastTimestamp"]);

  // Long messages are cut, long names too (an Event name is at most 253 bytes).
  json longPod = kPod;
  longPod["metadata"]["name"] = std::string(253, 'p');
  const json cut = buildEvent(referenceTo(longPod, "v1", "Pod"), EventType::Warning, "R",
                              std::string(5000, 'm'), options, clock.now);
  CHECK(cut["message"].get<std::string>().size() == 1024);
  CHECK(cut["metadata"]["name"].get<std::string>().size() <= 253);
  CHECK(cut["type"] == "Warning");
}

TEST_CASE("the same event within the window is written once and later counts up", "[events]") {
  testing::TlsTestServer server(pki());
  FakeEvents api(server);
  server.start();
  auto client = clientOf(server);
  FakeClock clock;
  EventRecorder recorder(*client, optionsWith(clock));
  recorder.start();
  const ObjectReference pod = referenceTo(kPod, "v1", "Pod");

  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "none ready"));
  CHECK_FALSE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "none ready"));
  clock.now += 9min;
  CHECK_FALSE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "none ready"));
  // Another message, or another object, is another event.
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "1 at maxSessions"));
  ObjectReference other = pod;
  other.uid = "other-uid";
  other.name = "other";
  CHECK(recorder.record(other, EventType::Normal, "WaitingForBackend", "none ready"));
  REQUIRE(recorder.flush(10s));
  CHECK(api.events().size() == 3);
  CHECK(recorder.stats().created == 3);
  CHECK(recorder.stats().deduped == 2);

  // After the window, the first Event's count goes up instead of a new Event.
  clock.now += 2min;
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "none ready"));
  REQUIRE(recorder.flush(10s));
  CHECK(api.events().size() == 3);
  CHECK(recorder.stats().patched == 1);
  int counted = 0;
  for (const auto& [name, event] : api.events()) {
    if (event["message"] == "none ready" && event["involvedObject"]["name"] == "trainer") {
      CHECK(event["count"] == 2);
      CHECK(event["lastTimestamp"] != event["firstTimestamp"]);
      ++counted;
    }
  }
  CHECK(counted == 1);

  // An Event the API server dropped (they expire) is written anew.
  api.expireAll();
  clock.now += 11min;
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "none ready"));
  REQUIRE(recorder.flush(10s));
  REQUIRE(api.events().size() == 1);
  CHECK(api.events().begin()->second["count"] == 1);
  const auto requests = api.requests();
  CHECK(requests[requests.size() - 2].starts_with("patch "));
  CHECK(requests.back().starts_with("create "));
}

TEST_CASE("events of one object at one instant get distinct names", "[events]") {
  testing::TlsTestServer server(pki());
  FakeEvents api(server);
  server.start();
  auto client = clientOf(server);
  FakeClock clock;  // the clock stands still
  EventRecorder recorder(*client, optionsWith(clock));
  recorder.start();
  const ObjectReference pod = referenceTo(kPod, "v1", "Pod");
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "none ready"));
  CHECK(recorder.record(pod, EventType::Normal, "BackendAssigned", "10.0.0.1:9999"));
  REQUIRE(recorder.flush(10s));
  CHECK(api.events().size() == 2);
  CHECK(recorder.stats().failed == 0);
}

TEST_CASE("a full queue drops events instead of blocking", "[events]") {
  testing::TlsTestServer server(pki());
  FakeEvents api(server);
  server.start();
  auto client = clientOf(server);
  FakeClock clock;
  auto options = optionsWith(clock);
  options.maxQueued = 2;
  EventRecorder recorder(*client, options);  // not started: nothing drains the queue
  const ObjectReference pod = referenceTo(kPod, "v1", "Pod");
  CHECK(recorder.record(pod, EventType::Normal, "A", "a"));
  CHECK(recorder.record(pod, EventType::Normal, "B", "b"));
  CHECK_FALSE(recorder.record(pod, EventType::Normal, "C", "c"));
  CHECK(recorder.stats().dropped == 1);
  // What was queued is written once the recorder runs, and stop() writes what is left.
  recorder.start();
  recorder.stop();
  CHECK(api.events().size() == 2);
}

TEST_CASE("events withdrawn before they were written are never written", "[events]") {
  testing::TlsTestServer server(pki());
  FakeEvents api(server);
  server.start();
  auto client = clientOf(server);
  FakeClock clock;
  EventRecorder recorder(*client, optionsWith(clock));  // not started: the queue holds them
  const ObjectReference pod = referenceTo(kPod, "v1", "Pod");
  json otherPod = kPod;
  otherPod["metadata"]["uid"] = "other-uid";
  const ObjectReference other = referenceTo(otherPod, "v1", "Pod");
  REQUIRE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "waits"));
  REQUIRE(recorder.record(other, EventType::Normal, "WaitingForBackend", "waits"));
  REQUIRE(recorder.record(pod, EventType::Normal, "Other", "stays"));
  // Only this pod's Events of this reason go.
  CHECK(recorder.withdraw(pod, "WaitingForBackend") == 1);
  CHECK(recorder.withdraw(pod, "WaitingForBackend") == 0);
  CHECK(recorder.stats().withdrawn == 1);
  // Never written, so the same Event again is new, not a repeat of a missing one.
  REQUIRE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "waits again"));
  CHECK(recorder.withdraw(pod, "WaitingForBackend") == 1);
  REQUIRE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "waits"));
  recorder.start();
  REQUIRE(recorder.flush(std::chrono::seconds(10)));
  std::vector<std::string> written;
  for (const auto& [name, event] : api.events()) {
    written.push_back(event["involvedObject"]["uid"].get<std::string>() + " " +
                      event["reason"].get<std::string>() + " " +
                      event["message"].get<std::string>() + " " +
                      std::to_string(event["count"].get<int>()));
  }
  std::sort(written.begin(), written.end());
  CHECK(written == std::vector<std::string>{"0b6e-uid Other stays 1",
                                            "0b6e-uid WaitingForBackend waits 1",
                                            "other-uid WaitingForBackend waits 1"});
  CHECK(recorder.stats().patched == 0);
  recorder.stop();
}

}  // namespace gvirtus

namespace gvirtus {
namespace {

// The message of the object's Event of `reason` with the latest lastTimestamp, as
// `kubectl gvirtus why` picks it.
std::string latestMessage(FakeEvents& api, const std::string& reason) {
  std::string latest;
  std::string message;
  for (const auto& [name, event] : api.events()) {
    if (event["reason"] == reason && event["lastTimestamp"].get<std::string>() > latest) {
      latest = event["lastTimestamp"];
      message = event["message"];
    }
  }
  return message;
}

}  // namespace

TEST_CASE("a message that comes back after another is refreshed at once", "[events]") {
  testing::TlsTestServer server(pki());
  FakeEvents api(server);
  server.start();
  auto client = clientOf(server);
  FakeClock clock;
  EventRecorder recorder(*client, optionsWith(clock));
  recorder.start();
  const ObjectReference pod = referenceTo(kPod, "v1", "Pod");
  json otherPod = kPod;
  otherPod["metadata"]["uid"] = "other-uid";
  const ObjectReference other = referenceTo(otherPod, "v1", "Pod");

  // A -> B -> A, all within the window: A's Event becomes the latest again.
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  clock.now += 1min;
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "B"));
  REQUIRE(recorder.flush(10s));
  CHECK(latestMessage(api, "WaitingForBackend") == "B");
  clock.now += 1min;
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  REQUIRE(recorder.flush(10s));
  CHECK(api.events().size() == 2);
  CHECK(latestMessage(api, "WaitingForBackend") == "A");
  for (const auto& [name, event] : api.events()) {
    CHECK(event["count"] == (event["message"] == "A" ? 2 : 1));
  }
  auto requests = api.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[2].starts_with("patch "));

  // A steady A is not written again within the window, whatever other reasons and other
  // objects record meanwhile.
  clock.now += 1min;
  CHECK(recorder.record(pod, EventType::Normal, "BackendAssigned", "x"));
  CHECK(recorder.record(other, EventType::Normal, "WaitingForBackend", "B"));
  for (int pass = 0; pass < 8; ++pass) {
    clock.now += 1min;
    CHECK_FALSE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  }
  REQUIRE(recorder.flush(10s));
  CHECK(api.requests().size() == 5);  // the two Events of the other subjects only
  CHECK(recorder.stats().deduped == 8);
  CHECK(recorder.stats().patched == 1);

  // After the window A counts up as before; then B is the latest again, and B once more is
  // dropped.
  clock.now += 2min;
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  clock.now += 1s;
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "B"));
  CHECK_FALSE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "B"));
  REQUIRE(recorder.flush(10s));
  CHECK(recorder.stats().patched == 3);
  CHECK(latestMessage(api, "WaitingForBackend") == "B");
  recorder.stop();
}

TEST_CASE("a refresh withdrawn before it was written leaves the latest message as it was",
          "[events]") {
  testing::TlsTestServer server(pki());
  FakeEvents api(server);
  server.start();
  auto client = clientOf(server);
  FakeClock clock;
  EventRecorder recorder(*client, optionsWith(clock));
  const ObjectReference pod = referenceTo(kPod, "v1", "Pod");
  recorder.start();
  REQUIRE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  clock.now += 1min;
  REQUIRE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "B"));
  REQUIRE(recorder.flush(10s));
  recorder.stop();  // what follows stays queued

  clock.now += 1min;
  REQUIRE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  CHECK(recorder.withdraw(pod, "WaitingForBackend") == 1);
  // B is still the latest written: A again is a refresh, B again is not.
  clock.now += 1min;
  CHECK_FALSE(recorder.record(pod, EventType::Normal, "WaitingForBackend", "B"));
  CHECK(recorder.record(pod, EventType::Normal, "WaitingForBackend", "A"));
  recorder.start();
  REQUIRE(recorder.flush(10s));
  CHECK(latestMessage(api, "WaitingForBackend") == "A");
  for (const auto& [name, event] : api.events()) {
    CHECK(event["count"] == (event["message"] == "A" ? 2 : 1));
  }
  recorder.stop();
}

}  // namespace gvirtus
