#pragma once

// A tiny in-process stand-in for the few kube-apiserver paths the resource cache and the
// leader elector use: list (with limit/continue) and watch (with bookmarks, 410 after a
// "compaction", timeoutSeconds) of ConfigMaps, and get/create/update (compare-and-swap on
// resourceVersion) of Leases. It listens on 127.0.0.1, port 0, over real TLS. It is for
// unit tests of the loop logic only: the real API server is exercised by
// tests/integration/.

#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/config.h"
#include "common/tls/certificates.h"

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
    std::unique_ptr<BIO, decltype(&BIO_free)> certBio(
        BIO_new_mem_buf(serving->certPem.data(), static_cast<int>(serving->certPem.size())),
        &BIO_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(
        PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr), &X509_free);
    std::unique_ptr<BIO, decltype(&BIO_free)> keyBio(
        BIO_new_mem_buf(serving->keyPem.data(), static_cast<int>(serving->keyPem.size())),
        &BIO_free);
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
        PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
    // SSLServer takes its own references.
    server_ = std::make_unique<httplib::SSLServer>(cert.get(), key.get());
    routes();
    port_ = server_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      throw std::runtime_error("fake apiserver: cannot bind");
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
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

  // Creates or updates ConfigMap ns/name with `data`; returns the stored object.
  json putConfigMap(const std::string& ns, const std::string& name, const json& data) {
    std::lock_guard lock(mutex_);
    const std::string key = ns + "/" + name;
    const bool exists = configMaps_.contains(key);
    json object = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata",
                    {{"name", name},
                     {"namespace", ns},
                     {"resourceVersion", std::to_string(++resourceVersion_)}}},
                   {"data", data}};
    configMaps_[key] = object;
    record(exists ? "MODIFIED" : "ADDED", object);
    return object;
  }

  void deleteConfigMap(const std::string& ns, const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = configMaps_.find(ns + "/" + name);
    if (it == configMaps_.end()) {
      return;
    }
    json object = it->second;
    object["metadata"]["resourceVersion"] = std::to_string(++resourceVersion_);
    configMaps_.erase(it);
    record("DELETED", object);
  }

  // Sends a BOOKMARK at a new resourceVersion (as if other kinds had changed).
  int64_t bookmark() {
    std::lock_guard lock(mutex_);
    ++resourceVersion_;
    record("BOOKMARK", {{"kind", "ConfigMap"},
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

  std::optional<json> lease(const std::string& ns, const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = leases_.find(ns + "/" + name);
    if (it == leases_.end()) {
      return std::nullopt;
    }
    return it->second;
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
  struct Entry {
    int64_t resourceVersion;
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

  // Under mutex_.
  void record(const std::string& type, const json& object) {
    history_.push_back({resourceVersion_, json{{"type", type}, {"object", object}}.dump() + "\n"});
    changed_.notify_all();
  }

  void routes() {
    server_->Get(R"(/api/v1/configmaps)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   if (req.has_param("watch") && req.get_param_value("watch") != "false" &&
                       req.get_param_value("watch") != "0") {
                     watch(req, res);
                   } else {
                     list(req, res);
                   }
                 });
    server_->Get(R"(/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases/([^/]+))",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard lock(mutex_);
                   if (failLeases_) {
                     return answer(res, 403, status(403, "Forbidden", "leases are forbidden"));
                   }
                   auto it = leases_.find(req.matches[1].str() + "/" + req.matches[2].str());
                   if (it == leases_.end()) {
                     return answer(res, 404, status(404, "NotFound", "lease not found"));
                   }
                   answer(res, 200, it->second);
                 });
    server_->Post(R"(/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases)",
                  [this](const httplib::Request& req, httplib::Response& res) {
                    std::lock_guard lock(mutex_);
                    if (failLeases_) {
                      return answer(res, 403, status(403, "Forbidden", "leases are forbidden"));
                    }
                    json object = json::parse(req.body);
                    const std::string key =
                        req.matches[1].str() + "/" + object["metadata"]["name"].get<std::string>();
                    if (leases_.contains(key)) {
                      return answer(res, 409, status(409, "AlreadyExists", "lease exists"));
                    }
                    object["metadata"]["namespace"] = req.matches[1].str();
                    object["metadata"]["resourceVersion"] = std::to_string(++resourceVersion_);
                    leases_[key] = object;
                    answer(res, 201, object);
                  });
    server_->Put(R"(/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases/([^/]+))",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard lock(mutex_);
                   if (failLeases_) {
                     return answer(res, 403, status(403, "Forbidden", "leases are forbidden"));
                   }
                   json object = json::parse(req.body);
                   auto it = leases_.find(req.matches[1].str() + "/" + req.matches[2].str());
                   if (it == leases_.end()) {
                     return answer(res, 404, status(404, "NotFound", "lease not found"));
                   }
                   if (object["metadata"].value("resourceVersion", "") !=
                       it->second["metadata"]["resourceVersion"].get<std::string>()) {
                     return answer(res, 409,
                                   status(409, "Conflict",
                                          "Operation cannot be fulfilled on leases: the object "
                                          "has been modified"));
                   }
                   object["metadata"]["resourceVersion"] = std::to_string(++resourceVersion_);
                   it->second = object;
                   answer(res, 200, object);
                 });
  }

  void list(const httplib::Request& req, httplib::Response& res) {
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
    json items = json::array();
    std::string last;
    bool more = false;
    for (auto it = after.empty() ? configMaps_.begin() : configMaps_.upper_bound(after);
         it != configMaps_.end(); ++it) {
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
    json body = {{"kind", "ConfigMapList"},
                 {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", version}}},
                 {"items", items}};
    if (more) {
      body["metadata"]["continue"] = version + "|" + last;
    }
    answer(res, 200, body);
  }

  void watch(const httplib::Request& req, httplib::Response& res) {
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
    res.set_chunked_content_provider("application/json", [this, next, generation, deadline](
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
        out += history_[next].line;
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
  std::map<std::string, json> configMaps_;
  std::vector<Entry> history_;
  std::map<std::string, json> leases_;
};

}  // namespace gvirtus::testing
