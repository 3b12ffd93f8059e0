#include "webhook/placement/assigner.h"

#include "webhook/base/names.h"

namespace gvirtus::webhook {
namespace {

NotAssigned denied(std::string reason) {
  return {.kind = NotAssigned::Kind::Denied, .reason = std::move(reason)};
}

}  // namespace

BackendAssigner::BackendAssigner(BackendChooser& chooser, const std::vector<std::string>& plugins)
    : chooser_(chooser), properties_(plugins.empty() ? defaultPlugins() : plugins) {}

AssignResult BackendAssigner::assign(const std::vector<Backend>& backends,
                                     const BackendRequirements& pod, const AssignRequest& request) {
  ChooseResult choice = std::unexpected(NoBackend{});
  if (request.pinned) {
    const std::string named =
        std::string(kBackendAnnotation) + " \"" + request.pinned->substr(0, 64) + "\"";
    auto known = std::ranges::find(backends, *request.pinned, &Backend::endpoint);
    if (known == backends.end()) {
      return std::unexpected(denied(named +
                                    " is not a known GVirtuS backend; remove the annotation and "
                                    "the webhook chooses one"));
    }
    choice = chooser_.choose({*known}, pod, request.record);
    if (!choice) {
      return std::unexpected(denied(named + " cannot take this pod (" + choice.error().reason +
                                    "); remove the annotation and the webhook chooses one"));
    }
    choice->preferredZone.clear();  // the author chose the backend, not a zone
  } else {
    choice = chooser_.choose(backends, pod, request.record);
    if (!choice) {
      return std::unexpected(
          NotAssigned{.kind = NotAssigned::Kind::Waits, .reason = choice.error().reason});
    }
  }
  auto properties = properties_.forBackend(choice->backend.ip, choice->backend.port);
  if (!properties) {
    chooser_.cancelAssignment(*choice);
    return std::unexpected(
        NotAssigned{.kind = NotAssigned::Kind::Error, .reason = properties.error().message});
  }
  if (request.podExists) {
    // Not only for the short life of an assignment made at admission for a pod that may
    // never appear: the pod is there.
    chooser_.confirmAssignment(*choice);
  }
  Assignment assignment{.endpoint = choice->backend.endpoint(),
                        .backendPod = choice->backend.podRef(),
                        .properties = std::move(*properties),
                        .preferredZone = choice->preferredZone,
                        .gpuIndex = choice->gpuIndex,
                        .assignedBy = chooser_.instance()};
  return Assigned{.assignment = std::move(assignment), .choice = std::move(*choice)};
}

}  // namespace gvirtus::webhook
