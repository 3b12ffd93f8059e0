#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/contract/pod_status.h"

namespace gvirtus::webhook {

// Strings that many records hold the same (a backend's endpoint and pod, the replica that
// assigned it): one copy each. 50,000 pods name 200 backends. Not thread-safe: one pool per
// writer; the strings it hands out are immutable and may be read anywhere.
class StringPool {
 public:
  std::shared_ptr<const std::string> intern(const std::string& value);
  size_t size() const { return pool_.size(); }
  // Longer values get a string of their own: "namespace/name" of a pod is at most 317.
  static constexpr size_t kLongest = 320;

 private:
  // Weak: a string no record holds any more goes, and its entry with the next sweep.
  std::unordered_map<std::string, std::weak_ptr<const std::string>> pool_;
  size_t sweepAt_ = 1024;
};

// A GVirtuS pod as the webhook's cache of every GVirtuS pod of the cluster holds it: what
// frontendFields() (webhook/pods/pod_fields.h) keeps, as fields rather than a document. Each
// member of an nlohmann object is a map node of its own, and the 50,000 pods of
// `make bench-scale` took 3 KiB each as documents; as records they take about 1 KiB.
struct GvirtusPod {
  std::string ns;
  std::string name;
  std::string uid;
  std::string resourceVersion;
  std::string creationTimestamp;
  std::string deletionTimestamp;  // empty: not being deleted
  std::string enabledLabel;       // gvirtus.io/enabled; the cache lists by it
  // The kept annotations the pod has: (index in keptAnnotations(), value). The values are
  // those of few backends and replicas, shared between the records of a StringPool.
  std::vector<std::pair<uint8_t, std::shared_ptr<const std::string>>> annotations;
  nlohmann::json owners;  // compactOwners() (webhook/pods/backend_loss.h); null for most pods
  bool gated = false;     // carries the webhook's scheduling gate
  std::string phase;
  std::string podIP;
  nlohmann::json podIPs;    // only where podIP is not the IPv4 address
  std::string backendLost;  // the gvirtus.io/BackendLost condition's status; empty: none

  // The annotations frontendFields() keeps.
  static const std::vector<std::string_view>& keptAnnotations();

  // Of a document frontendFields() made; the annotation values from `pool` (null: each its
  // own). Values of a type the API server never sends (a number where a string goes) are
  // left out.
  static GvirtusPod from(const nlohmann::json& kept, StringPool* pool = nullptr);
  // That document again: GvirtusPod::from(frontendFields(pod)).document() ==
  // frontendFields(pod), for the readers that take a pod as JSON (the backend follower).
  nlohmann::json document() const;

  // Null when the pod does not have it.
  const std::string* annotation(std::string_view key) const;
  std::string annotationOr(std::string_view key, std::string otherwise = {}) const;
  bool deleting() const { return !deletionTimestamp.empty(); }
  bool finished() const { return phaseFinished(phase); }
};

}  // namespace gvirtus::webhook
