#include "backend-shim/peers/policy.h"

namespace gvirtus::backend_shim {

bool PeerPolicy::update(PeerList peers) {
  std::lock_guard lock(mutex_);
  if (peers_ && *peers_ == peers) {
    return false;
  }
  peers_ = std::move(peers);
  refused_.clear();
  return true;
}

bool PeerPolicy::hasList() const {
  std::lock_guard lock(mutex_);
  return peers_.has_value();
}

size_t PeerPolicy::peers() const {
  std::lock_guard lock(mutex_);
  return peers_ ? peers_->size() : 0;
}

Decision PeerPolicy::ask(Ipv4 address) const {
  std::lock_guard lock(mutex_);
  if (peers_ && peers_->contains(address)) {
    return {Verdict::Allow};
  }
  if (refused_.contains(address)) {
    return {Verdict::Refuse,
            peers_ ? "not listed in gvirtus.io/peers (refused before, the list has not changed)"
                   : "no peer list yet (refused before)"};
  }
  return {Verdict::Wait};
}

bool PeerPolicy::listed(Ipv4 address) const {
  std::lock_guard lock(mutex_);
  return peers_ && peers_->contains(address);
}

Decision PeerPolicy::giveUp(Ipv4 address) {
  std::lock_guard lock(mutex_);
  if (refused_.size() >= kMaxRemembered) {
    refused_.clear();
  }
  refused_.insert(address);
  return {Verdict::Refuse, peers_ ? "not listed in gvirtus.io/peers within --peer-wait"
                                  : "no peer list yet (gvirtus.io/peers not read within "
                                    "--peer-wait)"};
}

}  // namespace gvirtus::backend_shim
