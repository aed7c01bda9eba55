// The NFSv4.1 back channel (RFC 8881 section 2.10.3.1, 20): CB_COMPOUNDs
// the server sends on a connection we opened, through our RPC transport's
// call handler. CB_SEQUENCE comes first and is answered for our session's
// one back-channel slot (a retransmission gets the cached reply); then
// CB_RECALL and CB_GETATTR go to the same CallbackHandler as the NFSv4.0
// callback service's, and CB_RECALL_ANY is acknowledged. Anything else is
// NFS4ERR_OP_ILLEGAL. Arguments are read with the bounded XDR reader: the
// peer is not trusted with lengths.
//
// Thread safety: Serve may run on several connections' loop threads at
// once; the slot is guarded by a mutex. The handler must not block.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "callback/callback_server.h"
#include "rpc/rpc_transport.h"

namespace nache {
namespace callback {

class BackChannel {
 public:
  BackChannel(CallbackHandler *handler, uint32_t program);
  // rpc::Transport's CallHandler.
  rpc::ReplyStatus Serve(const rpc::PeerCall &call, rpc::XdrIn *args,
                         std::string *results);
  uint64_t calls() const;

 private:
  void Compound(rpc::XdrIn *args, std::string *results);

  CallbackHandler *const handler_;  // outlives us
  const uint32_t program_;          // the cb_program of CREATE_SESSION
  mutable std::mutex mu_;           // guards the slot and calls_
  uint32_t last_seqid_ = 0;         // slot 0's last sequence id served
  std::string last_reply_;          // its reply, for a retransmission
  uint64_t calls_ = 0;
};

}  // namespace callback
}  // namespace nache
