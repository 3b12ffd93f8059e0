#pragma once

// A plain-HTTP stand-in for the API paths the shim uses on pods of one namespace: list and
// watch (a field selector metadata.name=NAME and a label selector of KEY=VALUE terms are
// honoured, nothing else) and the merge patch of its load annotation. It holds the shim's
// own pod and the other backend pods a test adds, each with the backend's labels, an IP and a
// Ready condition. The shim's tests point a kubeconfig at it to run the peer check and the
// leak restart's look at the other backends without a cluster; the real API server is
// tests/backend-shim's integration test's.

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gvirtus::backend_shim::test {

class FakePodApi {
 public:
  using json = nlohmann::json;

  FakePodApi(std::string ns, std::string name) : ns_(std::move(ns)), name_(std::move(name)) {
    pods_[name_] = backendPod(name_);
    const std::string pods = "/api/v1/namespaces/" + ns_ + "/pods";
    server_.Get(pods, [this](const httplib::Request& req, httplib::Response& res) {
      const Selector selector{req.get_param_value("fieldSelector"),
                              req.get_param_value("labelSelector")};
      if (req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true") {
        watch(std::stoll("0" + req.get_param_value("resourceVersion")), selector, res);
      } else {
        std::lock_guard lock(mutex_);
        ++lists_;
        json items = json::array();
        for (const auto& [podName, pod] : pods_) {
          if (selector.matches(pod)) {
            items.push_back(pod);
          }
        }
        json list = {{"kind", "PodList"},
                     {"apiVersion", "v1"},
                     {"metadata", {{"resourceVersion", std::to_string(version_)}}},
                     {"items", std::move(items)}};
        res.set_content(list.dump(), "application/json");
      }
    });
    server_.Patch(pods + "/([^/]+)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      auto pod = pods_.find(req.matches[1]);
      if (pod == pods_.end()) {
        res.status = 404;
        return;
      }
      pod->second.merge_patch(json::parse(req.body));
      changed(pod->second);
      res.set_content(pod->second.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      throw std::runtime_error("fake pod api: cannot bind");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  ~FakePodApi() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    server_.stop();
    thread_.join();
  }

  FakePodApi(const FakePodApi&) = delete;
  FakePodApi& operator=(const FakePodApi&) = delete;

  // Sets gvirtus.io/peers of the shim's pod (nullopt: removes it); open watches get the pod.
  void setPeers(const std::optional<std::string>& peers) {
    std::lock_guard lock(mutex_);
    auto& annotations = pods_[name_]["metadata"]["annotations"];
    if (peers) {
      annotations["gvirtus.io/peers"] = *peers;
    } else {
      annotations.erase("gvirtus.io/peers");
    }
    changed(pods_[name_]);
  }

  // Another pod with an IP, Ready or not: a backend's labels, or another component's.
  void addPod(const std::string& name, bool ready, const std::string& component = "backend") {
    std::lock_guard lock(mutex_);
    pods_[name] = backendPod(name);
    pods_[name]["metadata"]["labels"]["app.kubernetes.io/component"] = component;
    setReadyLocked(name, ready);
  }
  // What the kubelet writes when a pod's readiness probe changes its mind.
  void setReady(const std::string& name, bool ready) {
    std::lock_guard lock(mutex_);
    setReadyLocked(name, ready);
  }

  // A kubeconfig for this server, written to `path`.
  void writeKubeconfig(const std::string& path) const {
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
                        << "    server: http://127.0.0.1:" << port_ << "\nusers:\n- name: fake\n"
                        << "  user: {token: fake}\ncontexts:\n- name: fake\n"
                        << "  context: {cluster: fake, user: fake}\ncurrent-context: fake\n";
  }

  int lists() {
    std::lock_guard lock(mutex_);
    return lists_;
  }
  int openWatches() {
    std::lock_guard lock(mutex_);
    return openWatches_;
  }

 private:
  // A list's or watch's selectors: metadata.name=NAME, and KEY=VALUE labels.
  struct Selector {
    std::string fields;
    std::string labels;
    bool matches(const json& pod) const {
      return terms(fields,
                   [&](const std::string& key, const std::string& value) {
                     return key == "metadata.name" && pod["metadata"]["name"] == value;
                   }) &&
             terms(labels, [&](const std::string& key, const std::string& value) {
               const json& podLabels = pod["metadata"]["labels"];
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

  json backendPod(const std::string& name) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", ns_},
              {"resourceVersion", std::to_string(version_)},
              {"labels",
               {{"app.kubernetes.io/name", "gvirtus-backend"},
                {"app.kubernetes.io/component", "backend"}}},
              {"annotations", json::object()}}},
            {"status",
             {{"podIP", "10.0.0." + std::to_string(pods_.size() + 1)},
              {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  }

  // Under mutex_.
  void setReadyLocked(const std::string& name, bool ready) {
    pods_[name]["status"]["conditions"][0]["status"] = ready ? "True" : "False";
    changed(pods_[name]);
  }

  // Under mutex_.
  void changed(json& pod) {
    pod["metadata"]["resourceVersion"] = std::to_string(++version_);
    events_.push_back({version_, pod});
    changed_.notify_all();
  }

  // Every event after resourceVersion `from` of the pods `selector` matches, until the server
  // stops.
  void watch(int64_t from, Selector selector, httplib::Response& res) {
    std::lock_guard lock(mutex_);
    ++openWatches_;
    size_t next = 0;
    while (next < events_.size() && events_[next].first <= from) {
      ++next;
    }
    res.set_chunked_content_provider(
        "application/json",
        [this, next, selector = std::move(selector)](size_t, httplib::DataSink& sink) mutable {
          std::unique_lock inner(mutex_);
          changed_.wait_for(inner, std::chrono::milliseconds(100),
                            [&] { return stopping_ || next < events_.size(); });
          if (stopping_) {
            --openWatches_;
            inner.unlock();
            sink.done();
            return true;
          }
          std::string out;
          for (; next < events_.size(); ++next) {
            if (selector.matches(events_[next].second)) {
              out += json{{"type", "MODIFIED"}, {"object", events_[next].second}}.dump() + "\n";
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

  std::string ns_;
  std::string name_;  // the shim's own pod
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  int64_t version_ = 100;
  std::map<std::string, json> pods_;              // by name
  std::vector<std::pair<int64_t, json>> events_;  // resourceVersion, the pod changed
  int lists_ = 0;
  int openWatches_ = 0;
};

}  // namespace gvirtus::backend_shim::test
