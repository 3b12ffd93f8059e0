#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/kube/access/config.h"
#include "common/kube/api/resource.h"
#include "common/time/clock.h"
#include "common/time/duration.h"

namespace gvirtus {

struct KubeClientOptions {
  double qps = 20;  // client-side rate limit, token bucket
  int burst = 40;
  std::string userAgent = "gvirtus";
  Duration requestTimeout = std::chrono::seconds(30);
  int maxRetries = 5;  // for 429 and 5xx, honouring Retry-After
  // A kept-alive connection idle longer than this is not reused: servers and proxies drop
  // idle connections (the API server's Go server after 90 s), and a request sent on a
  // dropped one fails, unretried when it is not idempotent.
  Duration maxIdle = std::chrono::seconds(30);
  // What connection idleness is measured with.
  Clock* clock = &systemClock();
  // How often a request may look at the token file for a rotated token (tests: zero).
  Duration tokenCheckInterval = std::chrono::seconds(1);
  // When requested, requests in flight are cut, retry and rate-limit waits end, and new
  // requests fail at once: a binary exits promptly even when the API server does not
  // answer (ShutdownSignal::deadline()).
  std::stop_token cancel;
};

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;
  int64_t limit = 0;  // 0: the server's default (no paging)
  std::string continueToken;
  std::string resourceVersion;
};

struct ListPage {
  std::vector<nlohmann::json> items;
  std::string resourceVersion;
  std::string continueToken;
};

enum class PatchType { Merge, StrategicMerge, Json, Apply };

struct WriteOptions {
  bool dryRun = false;
  std::string fieldManager;  // required for PatchType::Apply
  bool force = false;        // server-side apply conflicts
  std::string subresource;   // "status", ...
};

struct WatchOptions {
  std::string labelSelector;
  std::string fieldSelector;
  std::string resourceVersion;  // start point, normally the list's resourceVersion
  bool allowBookmarks = true;
  // 0: randomized 5-10 minutes; the read timeout is set above it.
  int timeoutSeconds = 0;
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  nlohmann::json object;
};

// Requests sent, by verb (get, list, watch, create, update, patch, delete); for metrics and
// for tests that assert a component makes the minimum number of writes. A call counts once,
// however often it is retried; each page of listAll counts as a list.
struct RequestCounts {
  std::map<std::string, int64_t> byVerb;
};

// The one Kubernetes REST client. Thread-safe. Errors carry the HTTP status and the API
// Status message and reason.
class KubeClient {
 public:
  static Result<std::unique_ptr<KubeClient>> create(KubeConfig config,
                                                    KubeClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  Result<nlohmann::json> get(const KubeResource& resource, const std::string& ns,
                             const std::string& name);
  Result<ListPage> list(const KubeResource& resource, const std::string& ns,
                        const ListOptions& options = {});
  // Follows `continue` until the end; the resourceVersion is the first page's.
  Result<ListPage> listAll(const KubeResource& resource, const std::string& ns,
                           ListOptions options = {});
  Result<nlohmann::json> create(const KubeResource& resource, const std::string& ns,
                                const nlohmann::json& object, const WriteOptions& options = {});
  // PUT; the object's metadata.resourceVersion makes it a compare-and-swap.
  Result<nlohmann::json> update(const KubeResource& resource, const std::string& ns,
                                const std::string& name, const nlohmann::json& object,
                                const WriteOptions& options = {});
  Result<nlohmann::json> patch(const KubeResource& resource, const std::string& ns,
                               const std::string& name, PatchType type, const std::string& body,
                               const WriteOptions& options = {});
  // DELETE; with `uid`, only that object (a precondition): a pod recreated under the same
  // name meanwhile (a StatefulSet's) is left alone, and the answer is a conflict (409).
  Result<void> remove(const KubeResource& resource, const std::string& ns, const std::string& name,
                      const std::string& uid = "");

  // Streams events to `onEvent` until it returns false, the server ends the watch
  // (timeoutSeconds), `stop` is requested, or an error. Returns success for a normal end;
  // an error with httpStatus 410 (from the HTTP status or from an ERROR event) means the
  // caller must relist. It does not retry: callers (the cache) own the backoff loop.
  Result<void> watch(const KubeResource& resource, const std::string& ns,
                     const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& onEvent,
                     std::stop_token stop = {});

  RequestCounts requestCounts() const;
  const std::string& server() const;

 private:
  class Impl;
  explicit KubeClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gvirtus
