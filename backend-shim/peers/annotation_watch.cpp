#include "backend-shim/peers/annotation_watch.h"

#include "common/base/json_access.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {

PeerAnnotationWatch::PeerAnnotationWatch(ObjectCache& cache, Sink sink) : sink_(std::move(sink)) {
  ResourceEventHandlers handlers;
  handlers.onAdd = [this](const nlohmann::json& pod) { apply(pod); };
  handlers.onUpdate = [this](const nlohmann::json&, const nlohmann::json& pod) { apply(pod); };
  handlers.onDelete = [this](const nlohmann::json&) {
    log::warn("this pod was deleted; every session is refused from now on");
    publish({}, PeerList(), PeerShares());
  };
  cache.addHandlers(std::move(handlers));
}

void PeerAnnotationWatch::apply(const nlohmann::json& pod) {
  Texts texts{optionalStringAt(pod, {"metadata", "annotations", kPeersAnnotation}),
              optionalStringAt(pod, {"metadata", "annotations", kPeerMemoryAnnotation})};
  if (!texts.peers) {
    if (!published_ || texts_.peers) {
      log::warn(
          "this pod has no gvirtus.io/peers annotation; every session is refused until the "
          "webhook writes it (or run with --peer-check=false)");
      publish({}, PeerList(), PeerShares());
    }
    return;
  }
  if (published_ && texts_ == texts) {
    return;
  }
  ParsedPeers parsed = parsePeers(*texts.peers);
  if (parsed.malformed > 0) {
    log::warn("gvirtus.io/peers: entries that are not IPv4 addresses are ignored",
              {{"ignored", parsed.malformed}, {"first", parsed.firstMalformed}});
  }
  if (parsed.truncated) {
    log::warn("gvirtus.io/peers: more addresses than the limit; the rest are ignored",
              {{"limit", kMaxPeers}});
  }
  ParsedShares shares = parsePeerShares(texts.shares.value_or(""));
  if (shares.malformed > 0) {
    log::warn("gvirtus.io/peer-memory: entries that are not ADDRESS=MiB are ignored",
              {{"ignored", shares.malformed}, {"first", shares.firstMalformed}});
  }
  log::info("peer list updated",
            {{"peers", parsed.peers.size()}, {"gpuMemoryShares", shares.shares.size()}});
  publish(std::move(texts), std::move(parsed.peers), std::move(shares.shares));
}

void PeerAnnotationWatch::publish(Texts texts, PeerList peers, PeerShares shares) {
  published_ = true;
  texts_ = std::move(texts);
  ++updates_;
  sink_(std::move(peers), std::move(shares));
}

nlohmann::json peersAnnotationFields(nlohmann::json pod) {
  nlohmann::json kept = {{"metadata", nlohmann::json::object()}};
  nlohmann::json& metadata = kept["metadata"];
  for (const char* key : {"name", "namespace", "resourceVersion"}) {
    if (const nlohmann::json* value = memberAt(pod, {"metadata", key})) {
      metadata[key] = *value;
    }
  }
  for (std::string_view annotation : {kPeersAnnotation, kPeerMemoryAnnotation}) {
    if (const nlohmann::json* value = memberAt(pod, {"metadata", "annotations", annotation})) {
      metadata["annotations"][std::string(annotation)] = *value;
    }
  }
  return kept;
}

}  // namespace gvirtus::backend_shim
