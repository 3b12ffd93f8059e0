#pragma once

// The one in-process stand-in for the kube-apiserver paths our clients use, for unit tests
// of their loop logic and for the binaries' tests that need an API without a cluster (the
// real API server is the integration tests' and the e2e's). Over real TLS on 127.0.0.1,
// port 0:
//   - ConfigMaps and Pods, cluster-wide or in a namespace: list (limit and continue;
//     fieldSelector metadata.name=NAME and labelSelector KEY=VALUE,... honoured, nothing
//     else) and watch (from a resourceVersion, BOOKMARKs, 410 Gone after compact(),
//     timeoutSeconds), and a merge patch of one object;
//   - Leases: get, create, update (a compare-and-swap on resourceVersion).
// Tests change objects with put(), update() and remove(); open watches see each change.

#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/base/base64.h"
#include "common/kube/access/config.h"
#include "common/tls/certificates.h"
#include "support/eventually.h"
#include "support/tls_test_server.h"

namespace gvirtus::testing {

class FakeApiServer {
 public:
  using json = nlohmann::json;

  FakeApiServer() {
    // A watch the client abandons makes the server's next TLS write raise SIGPIPE
    // (OpenSSL writes without MSG_NOSIGNAL); the binaries ignore it, and so do the tests.
    ::signal(SIGPIPE, SIG_IGN);
    auto ca = generateCa("fake-apiserver-ca", std::chrono::hours(24));
    if (!ca) {
      throw std::runtime_error(ca.error().message);
    }
    auto serving =
        generateServingCert(*ca, "localhost", {"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
    if (!serving) {
      throw std::runtime_error(serving.error().message);
    }
    caPem_ = ca->certPem;
    // SSLServer takes its own references.
    server_ = std::make_unique<httplib::SSLServer>(tls_detail::certificate(serving->certPem).get(),
                                                   tls_detail::privateKey(serving->keyPem).get());
    routes();
    port_ = server_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      throw std::runtime_error("fake apiserver: cannot bind");
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // httplib 0.11's stop() does nothing before the loop has started.
    eventually([this] { return server_->is_running(); }, std::chrono::seconds(10),
               std::chrono::milliseconds(1));
  }

  ~FakeApiServer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    server_->stop();
    thread_.join();
  }

  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  KubeConfig kubeConfig() const {
    KubeConfig config;
    config.server = "https://127.0.0.1:" + std::to_string(port_);
    config.caPem = caPem_;
    config.token = "fake";
    return config;
  }
  // The same as a kubeconfig file at `path`, for a binary under test (--kubeconfig).
  void writeKubeconfig(const std::string& path) const {
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
                        << "    server: https://127.0.0.1:" << port_ << "\n"
                        << "    certificate-authority-data: " << base64Encode(caPem_) << "\n"
                        << "users:\n- name: fake\n  user: {token: fake}\ncontexts:\n- name: fake\n"
                        << "  context: {cluster: fake, user: fake}\ncurrent-context: fake\n";
  }

  // Stores `object` among `resource` ("configmaps", "pods", "leases") where its metadata
  // says, created or replaced, at a new resourceVersion; open watches get ADDED or MODIFIED.
  json put(const std::string& resource, json object) {
    std::lock_guard lock(mutex_);
    return store(resource, std::move(object));
  }
  // The stored object changed by `change`, then stored as put() does; nullopt when absent.
  std::optional<json> update(const std::string& resource, const std::string& ns,
                             const std::string& name, const std::function<void(json&)>& change) {
    std::lock_guard lock(mutex_);
    auto it = objects_[resource].find(ns + "/" + name);
    if (it == objects_[resource].end()) {
      return std::nullopt;
    }
    json object = it->second;
    change(object);
    return store(resource, std::move(object));
  }
  // Removes the object; open watches get DELETED.
  void remove(const std::string& resource, const std::string& ns, const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = objects_[resource].find(ns + "/" + name);
    if (it == objects_[resource].end()) {
      return;
    }
    json object = it->second;
    object["metadata"]["resourceVersion"] = std::to_string(++resourceVersion_);
    objects_[resource].erase(it);
    record("DELETED", resource, object);
  }
  std::optional<json> get(const std::string& resource, const std::string& ns,
                          const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = objects_[resource].find(ns + "/" + name);
    return it == objects_[resource].end() ? std::nullopt : std::optional<json>(it->second);
  }

  // ConfigMap ns/name holding `data`, created or updated; returns the stored object.
  json putConfigMap(const std::string& ns, const std::string& name, const json& data) {
    return put("configmaps", {{"apiVersion", "v1"},
                              {"kind", "ConfigMap"},
                              {"metadata", {{"name", name}, {"namespace", ns}}},
                              {"data", data}});
  }
  void deleteConfigMap(const std::string& ns, const std::string& name) {
    remove("configmaps", ns, name);
  }
  std::optional<json> lease(const std::string& ns, const std::string& name) {
    return get("leases", ns, name);
  }

  // Sends every open watch a BOOKMARK at a new resourceVersion (as if other kinds changed).
  int64_t bookmark() {
    std::lock_guard lock(mutex_);
    ++resourceVersion_;
    record("BOOKMARK", "",
           {{"kind", "ConfigMap"},
            {"apiVersion", "v1"},
            {"metadata", {{"resourceVersion", std::to_string(resourceVersion_)}}}});
    return resourceVersion_;
  }
  // Ends the open watches normally (as a server-side timeout does).
  void endWatches() {
    {
      std::lock_guard lock(mutex_);
      ++generation_;
    }
    changed_.notify_all();
  }
  // While on, open watches end and new ones are answered with 403.
  void failWatches(bool on) {
    {
      std::lock_guard lock(mutex_);
      failWatches_ = on;
      ++generation_;
    }
    changed_.notify_all();
  }
  // While on, a list's second and later pages are answered with 500: a list fails partway.
  void failContinuedLists(bool on) {
    std::lock_guard lock(mutex_);
    failContinuedLists_ = on;
  }
  // Forgets the history: a watch from any version older than now gets 410 Gone.
  void compact() {
    std::lock_guard lock(mutex_);
    compactedBelow_ = resourceVersion_;
  }
  // While on, every Lease request is answered with 403 (as if RBAC was revoked).
  void failLeases(bool on) {
    std::lock_guard lock(mutex_);
    failLeases_ = on;
  }

  int64_t resourceVersion() {
    std::lock_guard lock(mutex_);
    return resourceVersion_;
  }
  int lists() {
    std::lock_guard lock(mutex_);
    return lists_;
  }
  int watches() {
    std::lock_guard lock(mutex_);
    return watches_;
  }
  int openWatches() {
    std::lock_guard lock(mutex_);
    return openWatches_;
  }
  // The `limit` of every list request, in order.
  std::vector<int64_t> listLimits() {
    std::lock_guard lock(mutex_);
    return listLimits_;
  }

 private:
  // What a list or a watch asked for: a resource, a namespace ("" for all), selectors.
  struct Query {
    std::string resource;
    std::string ns;
    std::string fields;  // metadata.name=NAME
    std::string labels;  // KEY=VALUE,...

    bool matches(const json& object) const {
      const json& metadata = object["metadata"];
      return (ns.empty() || metadata.value("namespace", "") == ns) &&
             terms(fields,
                   [&](const std::string& key, const std::string& value) {
                     return key == "metadata.name" && metadata.value("name", "") == value;
                   }) &&
             terms(labels, [&](const std::string& key, const std::string& value) {
               const json podLabels = metadata.value("labels", json::object());
               return podLabels.contains(key) && podLabels[key] == value;
             });
    }
    template <typename Match>
    static bool terms(const std::string& text, Match match) {
      size_t start = 0;
      while (start < text.size()) {
        const size_t end = std::min(text.find(',', start), text.size());
        const std::string term = text.substr(start, end - start);
        const size_t equals = term.find('=');
        if (equals == std::string::npos ||
            !match(term.substr(0, equals), term.substr(equals + 1))) {
          return false;
        }
        start = end + 1;
      }
      return true;
    }
  };
  struct Event {
    int64_t resourceVersion;
    std::string resource;  // "" for a BOOKMARK, which every watch gets
    json object;
    std::string line;
  };

  static json status(int code, const std::string& reason, const std::string& message) {
    return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  }
  static void answer(httplib::Response& res, int code, const json& body) {
    res.status = code;
    res.set_content(body.dump(), "application/json");
  }
  static std::string listKind(const std::string& resource) {
    return resource == "pods" ? "PodList" : "ConfigMapList";
  }

  // Under mutex_.
  json store(const std::string& resource, json object) {
    const std::string key = object["metadata"].value("namespace", "") + "/" +
                            object["metadata"]["name"].get<std::string>();
    const bool exists = objects_[resource].contains(key);
    object["metadata"]["resourceVersion"] = std::to_string(++resourceVersion_);
    objects_[resource][key] = object;
    record(exists ? "MODIFIED" : "ADDED", resource, object);
    return object;
  }
  // Under mutex_.
  void record(const std::string& type, const std::string& resource, const json& object) {
    history_.push_back({resourceVersion_, resource, object,
                        json{{"type", type}, {"object", object}}.dump() + "\n"});
    changed_.notify_all();
  }

  void routes() {
    server_->Get(R"(/api/v1(?:/namespaces/([^/]+))?/(configmaps|pods))",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   const Query query{req.matches[2].str(), req.matches[1].str(),
                                     req.get_param_value("fieldSelector"),
                                     req.get_param_value("labelSelector")};
                   if (req.has_param("watch") && req.get_param_value("watch") != "false" &&
                       req.get_param_value("watch") != "0") {
                     watch(query, req, res);
                   } else {
                     list(query, req, res);
                   }
                 });
    server_->Patch(R"(/api/v1/namespaces/([^/]+)/(configmaps|pods)/([^/]+))",
                   [this](const httplib::Request& req, httplib::Response& res) {
                     auto patched =
                         update(req.matches[2].str(), req.matches[1].str(), req.matches[3].str(),
                                [&](json& object) { object.merge_patch(json::parse(req.body)); });
                     if (!patched) {
                       return answer(res, 404, status(404, "NotFound", "not found"));
                     }
                     answer(res, 200, *patched);
                   });
    leaseRoutes();
  }

  // Under mutex_: answers 403 while failLeases() is on.
  bool leasesRefused(httplib::Response& res) const {
    if (failLeases_) {
      answer(res, 403, status(403, "Forbidden", "leases are forbidden"));
    }
    return failLeases_;
  }

  void leaseRoutes() {
    const std::string leases = R"(/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases)";
    server_->Get(leases + "/([^/]+)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      if (leasesRefused(res)) {
        return;
      }
      auto it = objects_["leases"].find(req.matches[1].str() + "/" + req.matches[2].str());
      if (it == objects_["leases"].end()) {
        return answer(res, 404, status(404, "NotFound", "lease not found"));
      }
      answer(res, 200, it->second);
    });
    server_->Post(leases, [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      if (leasesRefused(res)) {
        return;
      }
      json object = json::parse(req.body);
      object["metadata"]["namespace"] = req.matches[1].str();
      if (objects_["leases"].contains(req.matches[1].str() + "/" +
                                      object["metadata"]["name"].get<std::string>())) {
        return answer(res, 409, status(409, "AlreadyExists", "lease exists"));
      }
      answer(res, 201, store("leases", std::move(object)));
    });
    server_->Put(leases + "/([^/]+)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      if (leasesRefused(res)) {
        return;
      }
      json object = json::parse(req.body);
      auto it = objects_["leases"].find(req.matches[1].str() + "/" + req.matches[2].str());
      if (it == objects_["leases"].end()) {
        return answer(res, 404, status(404, "NotFound", "lease not found"));
      }
      if (object["metadata"].value("resourceVersion", "") !=
          it->second["metadata"]["resourceVersion"].get<std::string>()) {
        return answer(res, 409,
                      status(409, "Conflict",
                             "Operation cannot be fulfilled on leases: the object has been "
                             "modified"));
      }
      answer(res, 200, store("leases", std::move(object)));
    });
  }

  void list(const Query& query, const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mutex_);
    ++lists_;
    const int64_t limit = req.has_param("limit") ? std::stoll(req.get_param_value("limit")) : 0;
    listLimits_.push_back(limit);
    // The continue token carries the first page's version and the last key sent.
    std::string version = std::to_string(resourceVersion_);
    std::string after;
    if (req.has_param("continue") && failContinuedLists_) {
      return answer(res, 500, status(500, "InternalError", "the page failed"));
    }
    if (req.has_param("continue")) {
      const std::string token = req.get_param_value("continue");
      const auto bar = token.find('|');
      version = token.substr(0, bar);
      after = token.substr(bar + 1);
    }
    const auto& objects = objects_[query.resource];
    json items = json::array();
    std::string last;
    bool more = false;
    for (auto it = after.empty() ? objects.begin() : objects.upper_bound(after);
         it != objects.end(); ++it) {
      if (!query.matches(it->second)) {
        continue;
      }
      if (limit > 0 && static_cast<int64_t>(items.size()) == limit) {
        more = true;
        break;
      }
      json item = it->second;
      item.erase("kind");  // list items carry no kind, as the real server sends them
      item.erase("apiVersion");
      items.push_back(item);
      last = it->first;
    }
    json body = {{"kind", listKind(query.resource)},
                 {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", version}}},
                 {"items", items}};
    if (more) {
      body["metadata"]["continue"] = version + "|" + last;
    }
    answer(res, 200, body);
  }

  void watch(const Query& query, const httplib::Request& req, httplib::Response& res) {
    std::unique_lock lock(mutex_);
    ++watches_;
    if (failWatches_) {
      return answer(res, 403, status(403, "Forbidden", "watches are failing"));
    }
    const int64_t from = req.has_param("resourceVersion")
                             ? std::stoll("0" + req.get_param_value("resourceVersion"))
                             : 0;
    if (from < compactedBelow_) {
      res.status = 200;
      res.set_content(json{{"type", "ERROR"},
                           {"object", status(410, "Expired",
                                             "too old resource version: " + std::to_string(from) +
                                                 " (" + std::to_string(compactedBelow_) + ")")}}
                              .dump() +
                          "\n",
                      "application/json");
      return;
    }
    size_t next = 0;
    while (next < history_.size() && history_[next].resourceVersion <= from) {
      ++next;
    }
    const int64_t timeout =
        req.has_param("timeoutSeconds") ? std::stoll(req.get_param_value("timeoutSeconds")) : 0;
    const auto deadline = timeout > 0
                              ? std::chrono::steady_clock::now() + std::chrono::seconds(timeout)
                              : std::chrono::steady_clock::time_point::max();
    const int64_t generation = generation_;
    ++openWatches_;
    res.set_chunked_content_provider("application/json", [this, query, next, generation, deadline](
                                                             size_t,
                                                             httplib::DataSink& sink) mutable {
      std::unique_lock inner(mutex_);
      changed_.wait_for(inner, std::chrono::milliseconds(50), [&] {
        return stopping_ || generation_ != generation || next < history_.size();
      });
      if (stopping_ || generation_ != generation || std::chrono::steady_clock::now() >= deadline) {
        --openWatches_;
        inner.unlock();
        sink.done();
        return true;
      }
      std::string out;
      for (; next < history_.size(); ++next) {
        const Event& event = history_[next];
        if (event.resource.empty() ||
            (event.resource == query.resource && query.matches(event.object))) {
          out += event.line;
        }
      }
      inner.unlock();
      if (!out.empty() && !sink.write(out.data(), out.size())) {
        std::lock_guard relock(mutex_);
        --openWatches_;
        return false;
      }
      return true;
    });
  }

  std::string caPem_;
  std::unique_ptr<httplib::SSLServer> server_;
  int port_ = 0;
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  int64_t resourceVersion_ = 100;
  int64_t compactedBelow_ = 0;
  int64_t generation_ = 0;
  bool failWatches_ = false;
  bool failContinuedLists_ = false;
  bool failLeases_ = false;
  int lists_ = 0;
  int watches_ = 0;
  int openWatches_ = 0;
  std::vector<int64_t> listLimits_;
  std::map<std::string, std::map<std::string, json>> objects_;  // resource, then "ns/name"
  std::vector<Event> history_;
};

}  // namespace gvirtus::testing
