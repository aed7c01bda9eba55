// The NFSv4.1 back channel (RFC 8881 section 2.10.3.1, 20): CB_COMPOUNDs
// the server sends on a connection we opened, through our RPC transport's
// call handler. CB_SEQUENCE comes first and is answered from the current
// session's back-channel slot table (section 2.10.6, 20.9); then CB_RECALL
// and CB_GETATTR go to the same CallbackHandler as the NFSv4.0 callback
// service's, and CB_RECALL_ANY is acknowledged. Anything else is
// NFS4ERR_OP_ILLEGAL. Arguments are read with the bounded XDR reader: the
// peer is not trusted with lengths.
//
// The slot table belongs to the session: SetSession (each CREATE_SESSION,
// through UpstreamOptions::on_new_session) starts every slot afresh at
// sequence id 0, so the new session's first call (id 1) is new, and a
// CB_SEQUENCE naming any other session is NFS4ERR_BADSESSION. On a slot, the
// id after the last is a new call; the last id again is a retransmission,
// answered with the cached reply (its results, under the retransmission's
// own XID: the RPC header is the transport's), or NFS4ERR_DELAY while the
// first is still being served; any other id is NFS4ERR_SEQ_MISORDERED. A
// slot id beyond the table is NFS4ERR_BADSLOT.
//
// Until SetSession is first called (an owner that does not wire
// on_new_session), the session is taken from the calls: one naming a
// session other than the last one seen starts the table afresh for it.
//
// Thread safety: Serve may run on several connections' loop threads at
// once, and SetSession on any thread; the table is guarded by a mutex,
// not held while the handler runs. The handler must not block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "callback/cb_ops.h"
#include "rpc/rpc_transport.h"
#include "upstream/nfs41.h"
#include "util/mutex.h"

namespace nache {
namespace callback {

class BackChannel {
 public:
  BackChannel(CallbackHandler *handler, uint32_t program);
  // The session now current, with its number of back-channel slots (the
  // ca_maxrequests CREATE_SESSION gave; at least 1 is kept).
  void SetSession(const upstream::nfs41::SessionId &session, uint32_t slots);
  // rpc::Transport's CallHandler.
  rpc::ReplyStatus Serve(const rpc::PeerCall &call, rpc::XdrIn *args,
                         std::string *results);
  uint64_t calls() const;

 private:
  // One back-channel slot of the current session.
  struct Slot {
    uint32_t seqid = 0;  // the last sequence id served (0: none yet)
    std::string reply;   // its CB_COMPOUND results, for a retransmission;
                         // empty while it is being served
  };
  void Compound(rpc::XdrIn *args, std::string *results);

  CallbackHandler *const handler_;  // outlives us
  const uint32_t program_;          // the cb_program of CREATE_SESSION
  mutable Mutex mu_{"back_channel"};
  bool told_ GUARDED_BY(mu_) = false;          // SetSession was called
  bool have_session_ GUARDED_BY(mu_) = false;  // session_ is set
  upstream::nfs41::SessionId session_ GUARDED_BY(mu_){};  // the current one
  // Its slot table.
  std::vector<Slot> slots_ GUARDED_BY(mu_) = std::vector<Slot>(1);
  uint64_t calls_ GUARDED_BY(mu_) = 0;
};

}  // namespace callback
}  // namespace nache
