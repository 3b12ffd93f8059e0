#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "backend-shim/peers/list.h"

// What the gate answers about a peer, given the peer list it has (or has not yet).
namespace gvirtus::backend_shim {

enum class Verdict { Allow, Refuse, Wait };

struct Decision {
  Verdict verdict = Verdict::Refuse;
  const char* reason = "";  // why refused, for the log; empty otherwise
};

// The peer list and the refusals made under it. Thread-safe: the gate asks on its thread,
// the pod watch updates on the cache's.
//
// A listed address is allowed. An address not listed may belong to a pod that has its IP
// but whose listing the webhook has not published yet: the gate waits for an update that
// lists it (--peer-wait). When that wait ends in vain the address is remembered, and later
// questions about it are refused at once until the list changes: the backend's accept waits
// on the answer, so an address that keeps knocking must not hold it up each time.
class PeerPolicy {
 public:
  // Refusals remembered; past this the memory starts over (a flood from this many addresses
  // is not the case it is for).
  static constexpr size_t kMaxRemembered = 4096;

  // Replaces the list. True when it differs from the one held (the first one always does):
  // the remembered refusals are then forgotten.
  bool update(PeerList peers);
  bool hasList() const;
  size_t peers() const;

  // A new question: Allow when listed, Refuse when refused before under this same list,
  // otherwise Wait (until the list changes, or giveUp()).
  Decision ask(Ipv4 address) const;
  // A waiting question again, after an update.
  bool listed(Ipv4 address) const;
  // The wait ended unlisted: Refuse, and remember it.
  Decision giveUp(Ipv4 address);

 private:
  mutable std::mutex mutex_;
  std::optional<PeerList> peers_;     // guarded by mutex_; none before the first list
  std::unordered_set<Ipv4> refused_;  // guarded by mutex_
};

}  // namespace gvirtus::backend_shim
