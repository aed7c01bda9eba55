// The delegation table (see delegation_table.h).
#include "delegations/delegation_table.h"

#include <cstring>

namespace nache {

using upstream::DelegationType;

void DelegationTable::Grant(Key key, DelegationType type,
                            const upstream::StateId &sid, uint64_t epoch) {
  if (type == DelegationType::kNone) return;
  MutexLock g(&mu_);
  HeldDelegation &d = held_[key];
  d.type = type;
  d.stateid = sid;
  d.epoch = epoch;
  d.returning = false;
}

bool DelegationTable::Covers(Key key, uint64_t epoch, uint32_t access,
                             uint32_t deny, upstream::StateId *sid) const {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  if (it == held_.end() || !UsableLocked(it->second, epoch)) return false;
  const HeldDelegation &d = it->second;
  // RFC 7530 10.4: under a read delegation the client may grant opens for
  // read locally, provided they deny nothing (a deny must be checked
  // against other clients' opens, which only the server knows); under a
  // write delegation no other client has the file open at all.
  bool ok = d.type == DelegationType::kWrite ||
            (access == upstream::kShareAccessRead && deny == 0);
  if (ok && sid) *sid = d.stateid;
  return ok;
}

bool DelegationTable::Usable(Key key, uint64_t epoch) const {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  return it != held_.end() && UsableLocked(it->second, epoch);
}

void DelegationTable::SetReturnFlush(Key key, bool on) {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  if (it != held_.end()) it->second.return_flush = on;
}

bool DelegationTable::ReturnFlushCovers(Key key, uint64_t epoch,
                                        upstream::StateId *sid) const {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  if (it == held_.end()) return false;
  const HeldDelegation &d = it->second;
  if (!d.return_flush || d.epoch != epoch ||
      d.type != upstream::DelegationType::kWrite)
    return false;
  if (sid) *sid = d.stateid;
  return true;
}

bool DelegationTable::Find(Key key, HeldDelegation *out) const {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  if (it == held_.end()) return false;
  *out = it->second;
  return true;
}

bool DelegationTable::BeginReturn(Key key, const upstream::StateId *sid) {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  if (it == held_.end() || it->second.returning) return false;
  // Compare only the "other" part: the seqid of a delegation stateid is
  // not meaningful to the server's recall (RFC 7530 9.1.4).
  if (sid &&
      memcmp(sid->other, it->second.stateid.other, sizeof(sid->other)) != 0)
    return false;
  it->second.returning = true;
  it->second.since = std::chrono::steady_clock::now();
  return true;
}

void DelegationTable::Forget(Key key, const upstream::StateId &sid) {
  MutexLock g(&mu_);
  auto it = held_.find(key);
  if (it != held_.end() &&
      memcmp(it->second.stateid.other, sid.other, sizeof(sid.other)) == 0)
    held_.erase(it);
}

std::vector<std::pair<Key, HeldDelegation>> DelegationTable::Clear() {
  MutexLock g(&mu_);
  std::vector<std::pair<Key, HeldDelegation>> gone(held_.begin(), held_.end());
  held_.clear();
  return gone;
}

size_t DelegationTable::Count(DelegationType type) const {
  MutexLock g(&mu_);
  size_t n = 0;
  for (auto &kv : held_) n += kv.second.type == type;
  return n;
}

}  // namespace nache
