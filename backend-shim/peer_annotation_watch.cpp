#include "backend-shim/peer_annotation_watch.h"

#include "common/json_access.h"
#include "common/log.h"

namespace gvirtus::backend_shim {

PeerAnnotationWatch::PeerAnnotationWatch(ObjectCache& cache, Sink sink) : sink_(std::move(sink)) {
  ResourceEventHandlers handlers;
  handlers.onAdd = [this](const nlohmann::json& pod) { apply(pod); };
  handlers.onUpdate = [this](const nlohmann::json&, const nlohmann::json& pod) { apply(pod); };
  handlers.onDelete = [this](const nlohmann::json&) {
    log::warn("this pod was deleted; every session is refused from now on");
    publish(std::nullopt, PeerList());
  };
  cache.addHandlers(std::move(handlers));
}

void PeerAnnotationWatch::apply(const nlohmann::json& pod) {
  const nlohmann::json* value = memberAt(pod, {"metadata", "annotations", kPeersAnnotation});
  if (value == nullptr || !value->is_string()) {
    if (!published_ || text_) {
      log::warn(
          "this pod has no gvirtus.io/peers annotation; every session is refused until the "
          "webhook writes it (or run with --peer-check=false)");
      publish(std::nullopt, PeerList());
    }
    return;
  }
  const std::string& text = value->get_ref<const std::string&>();
  if (published_ && text_ == text) {
    return;
  }
  ParsedPeers parsed = parsePeers(text);
  if (parsed.malformed > 0) {
    log::warn("gvirtus.io/peers: entries that are not IPv4 addresses are ignored",
              {{"ignored", parsed.malformed}, {"first", parsed.firstMalformed}});
  }
  if (parsed.truncated) {
    log::warn("gvirtus.io/peers: more addresses than the limit; the rest are ignored",
              {{"limit", kMaxPeers}});
  }
  log::info("peer list updated", {{"peers", parsed.peers.size()}});
  publish(text, std::move(parsed.peers));
}

void PeerAnnotationWatch::publish(std::optional<std::string> text, PeerList peers) {
  published_ = true;
  text_ = std::move(text);
  ++updates_;
  sink_(std::move(peers));
}

nlohmann::json peersAnnotationFields(nlohmann::json pod) {
  nlohmann::json kept = {{"metadata", nlohmann::json::object()}};
  nlohmann::json& metadata = kept["metadata"];
  for (const char* key : {"name", "namespace", "resourceVersion"}) {
    if (const nlohmann::json* value = memberAt(pod, {"metadata", key})) {
      metadata[key] = *value;
    }
  }
  if (const nlohmann::json* peers = memberAt(pod, {"metadata", "annotations", kPeersAnnotation})) {
    metadata["annotations"][std::string(kPeersAnnotation)] = *peers;
  }
  return kept;
}

}  // namespace gvirtus::backend_shim
