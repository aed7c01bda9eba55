// What the NFSv4.0 callback service (callback_server.*) and the NFSv4.1
// back channel (back_channel.*) serve alike: the CallbackHandler they ask,
// and the callback operations of both minor versions, CB_RECALL and
// CB_GETATTR (RFC 7530 16.2, RFC 8881 20.1-20.2): their arguments read with
// the bounded XDR reader (the peer is not trusted with lengths), the handler
// asked, their results (nfs_cb_resop4) and the CB_COMPOUND4res around them
// written. The RPC header, the program checks and the COMPOUND's own rules
// (callback_ident, CB_SEQUENCE) are the callers'.
//
// Thread safety: the functions keep no state; the handler's own contract
// applies.
#pragma once

#include <cstdint>
#include <string>

#include "rpc/rpc_transport.h"
#include "rpc/xdr.h"
#include "upstream/types.h"

namespace nache {
namespace callback {

// Program NFS4_CALLBACK's procedures and operation numbers.
constexpr uint32_t kCbProcNull = 0, kCbProcCompound = 1;
constexpr uint32_t kOpCbGetattr = 3, kOpCbRecall = 4, kOpCbIllegal = 10044;
constexpr uint32_t kMaxCbOps = 16;    // ops of one CB_COMPOUND we evaluate
constexpr uint32_t kMaxCbTag = 1024;  // bytes of a tag we echo

class CallbackHandler {
 public:
  virtual ~CallbackHandler() = default;
  // Any call from an allowed peer arrived (CB_NULL included): the callback
  // path works.
  virtual void OnContact() = 0;
  // CB_RECALL. Runs on the callback thread and must not block: the handler
  // queues the work and returns a status for the op (NFS4_OK normally;
  // NFS4ERR_BADHANDLE / NFS4ERR_BAD_STATEID when it holds no such
  // delegation).
  virtual uint32_t OnRecall(const upstream::StateId &stateid, bool truncate,
                            const upstream::Fh &fh) = 0;
  // CB_GETATTR. Fills our view of the file's change attribute and size
  // (including data not yet written upstream). Returns NFS4_OK or an error
  // (e.g. NFS4ERR_BADHANDLE). Must not block.
  virtual uint32_t OnGetattr(const upstream::Fh &fh, uint64_t *change,
                             uint64_t *size) = 0;
};

// The program check of a call to program (NFS4_CALLBACK) version 1: kOk;
// kProgUnavail for another program; kProgMismatch for another version,
// with the versions served (1 to 1) appended to *results as RFC 5531's
// mismatch_info. The procedure is the caller's to check.
rpc::ReplyStatus CheckCbProgram(const rpc::PeerCall &call, uint32_t program,
                                std::string *results);

// CB_RECALL4args.
struct CbRecallArgs {
  upstream::StateId stateid;
  bool truncate = false;
  upstream::Fh fh;  // at most upstream::kMaxFhSize bytes
};
// CB_GETATTR4args: of the requested bitmap4 only word 0 is kept (it holds
// all we serve).
struct CbGetattrArgs {
  upstream::Fh fh;  // at most upstream::kMaxFhSize bytes
  uint32_t word0 = 0;
};

// Read the op's arguments (after its op code); false when they do not
// parse (cut short, a handle too long, a bool neither 0 nor 1).
bool ReadCbRecallArgs(rpc::XdrIn *in, CbRecallArgs *a);
bool ReadCbGetattrArgs(rpc::XdrIn *in, CbGetattrArgs *a);

// Ask the handler, append the op's nfs_cb_resop4 to *out and return its
// status. CB_GETATTR answers, of what word0 asks, what we serve (change,
// size), in bit order.
uint32_t ServeCbRecall(CallbackHandler *handler, const CbRecallArgs &a,
                       rpc::XdrOut *out);
uint32_t ServeCbGetattr(CallbackHandler *handler, const CbGetattrArgs &a,
                        rpc::XdrOut *out);
// Appends the nfs_cb_resop4 of an op that failed before the handler was
// asked (or was never asked): its op code and status only.
void PutCbOpStatus(rpc::XdrOut *out, uint32_t op, uint32_t status);

// Appends CB_COMPOUND4res: status (the last op's), the tag echoed, and the
// nres results already encoded in ops.
void PutCbCompoundRes(std::string *out, uint32_t status, const char *tag,
                      uint32_t tag_len, uint32_t nres, const std::string &ops);

}  // namespace callback
}  // namespace nache
