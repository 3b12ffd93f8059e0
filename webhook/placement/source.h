#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "webhook/placement/backend.h"

namespace gvirtus::webhook {

// The backends at one moment, shared and never changed: taking one copies nothing. Every
// review takes one, and during a burst of pods each backend carries a long list of recent
// assignments.
using BackendSnapshot = std::shared_ptr<const std::vector<Backend>>;

// Where backends come from: static addresses (--static-backends) or backend pods watched
// in the cluster. Implementations are thread-safe.
class BackendSource {
 public:
  virtual ~BackendSource() = default;

  // Set before start(): called on the source's own thread whenever the backends or their
  // loads may have changed (the waiting-pod controller wakes up on it).
  virtual void setOnChange(std::function<void()> onChange) = 0;
  virtual void start() = 0;
  // Idempotent; the destructor stops too.
  virtual void stop() = 0;

  // True once the source has its first view (first resolution, first cache sync).
  virtual bool ready() const = 0;
  // The backends that can be given to pods now; never null.
  virtual BackendSnapshot backends() const = 0;
};

}  // namespace gvirtus::webhook
