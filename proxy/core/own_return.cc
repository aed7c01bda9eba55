// Our read delegation given back in a conflicting operation's COMPOUND.
// See own_return.h.
#include "core/own_return.h"

namespace nache {

OwnReturn::OwnReturn(Delegations *delegations, Key key, uint64_t epoch)
    : delegations_(delegations), key_(key) {
  if (!delegations_->BeginOwnReturn(key_, &deleg_)) return;
  begun_ = true;
  pending_ = deleg_.epoch == epoch;  // (else sent alone, or not at all)
}

OwnReturn::~OwnReturn() {
  if (begun_) delegations_->EndOwnReturn(key_, deleg_, reached_, status_);
}

void OwnReturn::AddTo(upstream::Compound *c) {
  if (!pending_) return;
  c->DelegReturn(deleg_.stateid);
  added_ = true;
}

bool OwnReturn::Done(const upstream::CompoundReply &rep, uint32_t st) {
  if (!pending_ || !added_) return true;
  pending_ = false;
  const upstream::OpResult *dr = rep.Find(upstream::Op::kDelegReturn);
  reached_ = dr != nullptr;
  status_ = dr ? dr->status : st;
  return !dr || dr->status == upstream::kNfs4Ok;
}

}  // namespace nache
