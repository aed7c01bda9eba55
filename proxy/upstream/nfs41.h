// NFSv4.1's session operations (RFC 8881), encoded and decoded by hand on
// rpc/xdr.h: libnfs 4.0.0's XDR knows only NFSv4.0 and fails on any other
// operation number (proxy/upstream/NFSV41.md). What the upstream client
// needs to hold a session: EXCHANGE_ID, CREATE_SESSION, SEQUENCE,
// BIND_CONN_TO_SESSION, RECLAIM_COMPLETE, DESTROY_SESSION and
// DESTROY_CLIENTID; and on the back channel CB_SEQUENCE and CB_RECALL_ANY.
// The NFSv4.0 operations inside a 4.1 COMPOUND stay libnfs' (compound.cc).
//
// Each Encode* appends an operation's arguments (its number included) to an
// XDR stream; each Decode* reads an operation's result (its number
// included) and fails on anything malformed. Pure functions, no state.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rpc/xdr.h"
#include "upstream/ops.h"

namespace nache {
namespace upstream {
namespace nfs41 {

// Operation numbers: the session ops' from the op table (ops.h); the back
// channel's own (RFC 8881 section 20).
enum : uint32_t {
  kOpBindConnToSession = uint32_t(Op::kBindConnToSession),
  kOpExchangeId = uint32_t(Op::kExchangeId),
  kOpCreateSession = uint32_t(Op::kCreateSession),
  kOpDestroySession = uint32_t(Op::kDestroySession),
  kOpSequence = uint32_t(Op::kSequence),
  kOpDestroyClientid = uint32_t(Op::kDestroyClientid),
  kOpReclaimComplete = uint32_t(Op::kReclaimComplete),
  kCbOpRecallAny = 8,
  kCbOpSequence = 11,
};

// EXCHANGE_ID flags.
enum : uint32_t {
  kExchgIdSuppMovedRefer = 0x1,
  kExchgIdUseNonPnfs = 0x10000,
  kExchgIdConfirmed = 0x80000000u,
};
// CREATE_SESSION flags.
enum : uint32_t { kCreateSessionConnBackChan = 0x2 };
// SEQUENCE's sr_status_flags that matter to a client without pNFS.
enum : uint32_t {
  kSeqCbPathDown = 0x1,
  kSeqCbGssContextsExpiring = 0x2,
  kSeqCbGssContextsExpired = 0x4,
  kSeqExpiredAllStateRevoked = 0x8,
  kSeqExpiredSomeStateRevoked = 0x10,
  kSeqAdminStateRevoked = 0x20,
  kSeqRecallableStateRevoked = 0x40,
  kSeqLeaseMoved = 0x80,
  kSeqRestartReclaimNeeded = 0x100,
  kSeqCbPathDownSession = 0x200,
  kSeqBackchannelFault = 0x400,
};
// BIND_CONN_TO_SESSION directions.
enum : uint32_t { kCdfc4Fore = 1, kCdfc4Back = 2, kCdfc4BackOrBoth = 7 };
enum : uint32_t { kCdfs4Fore = 1, kCdfs4Back = 2, kCdfs4Both = 3 };

using SessionId = std::array<uint8_t, 16>;

struct ExchangeIdArgs {
  std::array<uint8_t, 8> verifier{};  // new per incarnation of the client
  std::string owner;                  // the same across restarts
  uint32_t flags = kExchgIdSuppMovedRefer | kExchgIdUseNonPnfs;
  std::string impl_domain, impl_name;  // nfs_impl_id4 (sent when non-empty)
};
struct ExchangeIdRes {
  uint32_t status = 0;
  uint64_t clientid = 0;
  uint32_t sequenceid = 0;
  uint32_t flags = 0;
  uint32_t state_protect = 0;  // SP4_NONE is all we ask for
  uint64_t server_minor_id = 0;
  std::string server_major_id, server_scope;
};

struct ChannelAttrs {
  uint32_t header_pad = 0;
  uint32_t max_request = 0, max_response = 0, max_response_cached = 0;
  uint32_t max_operations = 0, max_requests = 0;
};
struct CreateSessionArgs {
  uint64_t clientid = 0;
  uint32_t sequenceid = 0;
  uint32_t flags = kCreateSessionConnBackChan;
  ChannelAttrs fore, back;
  uint32_t cb_program = 0x40000000;
  // The back channel's security: AUTH_SYS as this uid/gid and machine.
  uint32_t cb_uid = 0, cb_gid = 0;
  std::string cb_machine;
};
struct CreateSessionRes {
  uint32_t status = 0;
  SessionId sessionid{};
  uint32_t sequenceid = 0;
  uint32_t flags = 0;
  ChannelAttrs fore, back;
};

struct SequenceArgs {
  SessionId sessionid{};
  uint32_t sequenceid = 0, slotid = 0, highest_slotid = 0;
  bool cachethis = false;
};
struct SequenceRes {
  uint32_t status = 0;
  SessionId sessionid{};
  uint32_t sequenceid = 0, slotid = 0, highest_slotid = 0;
  uint32_t target_highest_slotid = 0, status_flags = 0;
};

struct BindConnRes {
  uint32_t status = 0;
  SessionId sessionid{};
  uint32_t dir = 0;
};

// CB_SEQUENCE's arguments (referring call lists are read and skipped) and
// the result we send.
struct CbSequenceArgs {
  SessionId sessionid{};
  uint32_t sequenceid = 0, slotid = 0, highest_slotid = 0;
  bool cachethis = false;
};

void EncodeExchangeId(rpc::XdrOut *x, const ExchangeIdArgs &a);
bool DecodeExchangeId(rpc::XdrIn *in, ExchangeIdRes *r);
void EncodeCreateSession(rpc::XdrOut *x, const CreateSessionArgs &a);
bool DecodeCreateSession(rpc::XdrIn *in, CreateSessionRes *r);
void EncodeSequence(rpc::XdrOut *x, const SequenceArgs &a);
bool DecodeSequence(rpc::XdrIn *in, SequenceRes *r);
void EncodeBindConnToSession(rpc::XdrOut *x, const SessionId &s, uint32_t dir);
bool DecodeBindConnToSession(rpc::XdrIn *in, BindConnRes *r);
void EncodeReclaimComplete(rpc::XdrOut *x, bool one_fs);
void EncodeDestroySession(rpc::XdrOut *x, const SessionId &s);
void EncodeDestroyClientid(rpc::XdrOut *x, uint64_t clientid);
// The result of an operation whose result is its status alone
// (RECLAIM_COMPLETE, DESTROY_SESSION, DESTROY_CLIENTID): its number must
// be op.
bool DecodeStatusOnly(rpc::XdrIn *in, uint32_t op, uint32_t *status);

bool DecodeCbSequenceArgs(rpc::XdrIn *in, CbSequenceArgs *a);
// CB_SEQUENCE's result (its op number, status and, when OK, the body).
void EncodeCbSequenceRes(rpc::XdrOut *x, uint32_t status,
                         const CbSequenceArgs &a);

// A COMPOUND's header: tag, minor version (1, or 2 on an NFSv4.2
// session), the number of operations.
void EncodeCompoundHeader(rpc::XdrOut *x, const std::string &tag, uint32_t nops,
                          uint32_t minor = 1);
// A COMPOUND reply's header: status, tag, number of results.
bool DecodeCompoundReplyHeader(rpc::XdrIn *in, uint32_t *status,
                               uint32_t *nres);

}  // namespace nfs41
}  // namespace upstream
}  // namespace nache
