// OwnReturn: our read delegation on a file, given back in the COMPOUND of
// an operation of ours that conflicts with it (an open for write, a
// SETATTR, a REMOVE): PUTFH of the file and DELEGRETURN at the head of the
// operation's own COMPOUND, one round trip for both, where returning it
// first cost one more (Delegations::BeginOwnReturn, EndOwnReturn).
//
// Use: construct (the return begins when there is a delegation of the
// current client id to return); when pending(), AddTo the COMPOUND with the
// file as current object; after the reply, Done: false when the server
// refused the DELEGRETURN, so that the operation after it never ran and
// is sent again without it. The return ends at destruction (Delegations::
// EndOwnReturn: what the delegation vouched for expired, Ganesha told),
// so destroy it with no lock of the operation held; one never added to a
// COMPOUND is sent on its own then.
//
// Thread safety: one per operation, on the operation's thread.
#pragma once

#include <cstdint>

#include "delegations/delegations.h"
#include "upstream/compound.h"

namespace nache {

class OwnReturn {
 public:
  // epoch: the upstream client id's; a delegation of an older one is
  // returned (or not: Host::SendReturn) at once, on its own.
  OwnReturn(Delegations *delegations, Key key, uint64_t epoch);
  ~OwnReturn();
  OwnReturn(const OwnReturn &) = delete;
  OwnReturn &operator=(const OwnReturn &) = delete;

  bool pending() const { return pending_; }
  // Appends the DELEGRETURN (the current object must be the file).
  void AddTo(upstream::Compound *c);
  // The COMPOUND it was added to came back (st: Core::Run's status).
  // False when the DELEGRETURN was refused.
  bool Done(const upstream::CompoundReply &rep, uint32_t st);

 private:
  Delegations *const delegations_;
  const Key key_;
  HeldDelegation deleg_;
  bool pending_ = false;  // begun, no COMPOUND came back with it
  bool begun_ = false;    // begun, not ended
  bool added_ = false;    // in a COMPOUND sent or about to be
  bool reached_ = false;  // the server executed the DELEGRETURN
  uint32_t status_ = 0;   // its status
};

}  // namespace nache
