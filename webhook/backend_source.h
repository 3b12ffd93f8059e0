#pragma once

#include <functional>
#include <vector>

#include "webhook/backend.h"

namespace gvirtus::webhook {

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
  // The backends that can be given to pods now, a snapshot.
  virtual std::vector<Backend> backends() const = 0;
};

}  // namespace gvirtus::webhook
