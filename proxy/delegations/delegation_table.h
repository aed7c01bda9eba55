// The upstream delegations this export's NFSv4 client holds: per file, the
// type (read or write), the stateid, the client-id epoch it was granted in
// and whether a return is under way.
//
// A delegation is usable only while its epoch is the upstream's current one
// (a new client id means the server forgot it) and no return has started;
// Delegations (delegations.h), which owns the table, also requires the
// lease to be valid (upstream/upstream.h). The table itself sends nothing:
// Delegations records grants from OPEN replies and returns them (recall,
// or before a conflicting operation of our own).
//
// Thread safety: all methods are thread-safe (one mutex, never held across
// anything but the map): a leaf of the lock order, taken under
// Delegations' local_mu_.
#pragma once

#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "handles/handle_map.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

struct HeldDelegation {
  upstream::DelegationType type = upstream::DelegationType::kNone;
  upstream::StateId stateid;  // the delegation stateid
  uint64_t epoch = 0;         // upstream client-id epoch of the grant
  bool returning = false;     // a recall or our own return is under way
  // The return's own flush is running (SetReturnFlush): until the
  // DELEGRETURN, still ours, for that flush alone.
  bool return_flush = false;
  std::chrono::steady_clock::time_point since;  // when the return began
};

class DelegationTable {
 public:
  // Records a delegation granted with an OPEN of key (it replaces any older
  // one: the server hands out one per file and client).
  void Grant(Key key, upstream::DelegationType type,
             const upstream::StateId &sid, uint64_t epoch);
  // Whether key's delegation lets us serve locally an open with these share
  // modes: a read delegation covers read-only opens that deny nothing, a
  // write delegation any open. *sid: the delegation stateid (may be null).
  bool Covers(Key key, uint64_t epoch, uint32_t access, uint32_t deny,
              upstream::StateId *sid) const;
  // Whether key has a usable delegation of any type (attributes and data
  // of key need no revalidation).
  bool Usable(Key key, uint64_t epoch) const;
  // Key's delegation, usable or not.
  bool Find(Key key, HeldDelegation *out) const;
  // Marks (or unmarks) the flush a return of key's write delegation runs
  // before its DELEGRETURN. While marked, ReturnFlushCovers says the
  // delegation still covers that flush's WRITEs.
  void SetReturnFlush(Key key, bool on);
  // Whether key has a write delegation of epoch whose return's own flush
  // is running; *sid: its stateid (may be null).
  bool ReturnFlushCovers(Key key, uint64_t epoch, upstream::StateId *sid) const;
  // Starts returning key's delegation: it stops being usable. False when
  // there is none, its stateid differs from sid (when given), or a return
  // is already under way.
  bool BeginReturn(Key key, const upstream::StateId *sid);
  // Forgets key's delegation if it is still the one with sid's "other"
  // (a new one granted meanwhile stays).
  void Forget(Key key, const upstream::StateId &sid);
  // Forgets every delegation (the client id changed); returns them.
  std::vector<std::pair<Key, HeldDelegation>> Clear();
  // Delegations held, by type.
  size_t Count(upstream::DelegationType type) const;

 private:
  static bool UsableLocked(const HeldDelegation &d, uint64_t epoch) {
    return !d.returning && d.epoch == epoch;
  }

  mutable Mutex mu_{"delegation_table"};
  std::unordered_map<Key, HeldDelegation> held_ GUARDED_BY(mu_);
};

}  // namespace nache
