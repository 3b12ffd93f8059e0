#pragma once

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "common/contract/backend_requirements.h"
#include "common/contract/gvirtus_properties.h"
#include "webhook/placement/backend.h"
#include "webhook/placement/chooser.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {

// One backend given to one pod: what the pod carries (Assignment) and what the chooser
// recorded (Choice, which BackendChooser::cancelAssignment() takes back).
struct Assigned {
  Assignment assignment;
  Choice choice;
};

// Why a pod gets no backend now.
struct NotAssigned {
  enum class Kind {
    Waits,   // no backend can take it yet
    Denied,  // the backend its author pinned is unknown or cannot take it
    Error,   // properties.json could not be rendered
  };
  Kind kind = Kind::Waits;
  std::string reason = {};
};

using AssignResult = std::expected<Assigned, NotAssigned>;

struct AssignRequest {
  // The endpoint the pod's author named in gvirtus.io/backend (empty is a name too, of no
  // backend); none: the policy chooses.
  std::optional<std::string> pinned = std::nullopt;
  // Count the assignment (false for a dry run, which must have no side effect).
  bool record = true;
  // The pod exists (a release): its assignment counts for the whole window at once.
  bool podExists = false;
};

// The one decision of which backend a GVirtuS pod gets. Admission (MutateHandler) and the
// waiting-pod controller's release of a waiting pod both ask it, so that a pinned backend, the
// chooser's policy and reservation, and properties.json take one path.
//
// A backend named by the pod's author is not trusted: it would bypass the policy,
// maxSessions and the GPU constraints, and could point the frontend anywhere. It is
// honoured only for a known backend that can take the pod, and counted like a choice.
class BackendAssigner {
 public:
  // `plugins`: the frontend plugins properties.json lists; empty: defaultPlugins().
  BackendAssigner(BackendChooser& chooser, const std::vector<std::string>& plugins);

  AssignResult assign(const std::vector<Backend>& backends, const BackendRequirements& pod,
                      const AssignRequest& request);
  // Takes back what assign() recorded: the pod did not get the backend after all.
  void cancel(const Assigned& assigned) { chooser_.cancelAssignment(assigned.choice); }
  // What gvirtus.io/assigned-by says on the pods this assigner gives backends.
  const std::string& instance() const { return chooser_.instance(); }

 private:
  BackendChooser& chooser_;
  PropertiesCache properties_;
};

}  // namespace gvirtus::webhook
