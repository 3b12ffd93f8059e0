#pragma once

// A plain-HTTP stand-in for the API paths the shim uses on its own pod: list and watch of
// pods in one namespace (one pod, whatever the field selector) and the merge patch of its
// load annotation. The shim's tests point a kubeconfig at it to run the peer check end to
// end without a cluster; the real API server is tests/backend-shim's integration test's.

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
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

  FakePodApi(std::string ns, std::string name) : ns_(std::move(ns)) {
    pod_ = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", std::move(name)},
              {"namespace", ns_},
              {"resourceVersion", std::to_string(version_)},
              {"annotations", json::object()}}}};
    const std::string pods = "/api/v1/namespaces/" + ns_ + "/pods";
    server_.Get(pods, [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true") {
        watch(std::stoll("0" + req.get_param_value("resourceVersion")), res);
      } else {
        std::lock_guard lock(mutex_);
        ++lists_;
        json list = {{"kind", "PodList"},
                     {"apiVersion", "v1"},
                     {"metadata", {{"resourceVersion", std::to_string(version_)}}},
                     {"items", json::array({pod_})}};
        res.set_content(list.dump(), "application/json");
      }
    });
    server_.Patch(pods + "/([^/]+)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      pod_.merge_patch(json::parse(req.body));
      changed();
      res.set_content(pod_.dump(), "application/json");
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

  // Sets gvirtus.io/peers (nullopt: removes it); open watches get the new pod.
  void setPeers(const std::optional<std::string>& peers) {
    std::lock_guard lock(mutex_);
    auto& annotations = pod_["metadata"]["annotations"];
    if (peers) {
      annotations["gvirtus.io/peers"] = *peers;
    } else {
      annotations.erase("gvirtus.io/peers");
    }
    changed();
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
  // Under mutex_.
  void changed() {
    pod_["metadata"]["resourceVersion"] = std::to_string(++version_);
    events_.push_back({version_, json{{"type", "MODIFIED"}, {"object", pod_}}.dump() + "\n"});
    changed_.notify_all();
  }

  // Every event after resourceVersion `from`, until the server stops.
  void watch(int64_t from, httplib::Response& res) {
    std::lock_guard lock(mutex_);
    ++openWatches_;
    size_t next = 0;
    while (next < events_.size() && events_[next].first <= from) {
      ++next;
    }
    res.set_chunked_content_provider(
        "application/json", [this, next](size_t, httplib::DataSink& sink) mutable {
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
            out += events_[next].second;
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
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  int64_t version_ = 100;
  json pod_;
  std::vector<std::pair<int64_t, std::string>> events_;  // resourceVersion, line
  int lists_ = 0;
  int openWatches_ = 0;
};

}  // namespace gvirtus::backend_shim::test
