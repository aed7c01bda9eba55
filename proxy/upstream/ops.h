// The NFSv4 operations nache sends upstream, one row each: the only place
// an operation's name in the code, its number, its name on the wire and
// in metrics, and the shape of its result are written. The Op enum,
// OpName, ResultShapeOf, the nfs41 session op numbers and the op labels of
// nache_upstream_ops_total come from these rows.
//
// Adding an operation: a row here, its builder (compound.h, compound.cc;
// an operation libnfs cannot encode writes its own arguments there), and
// the code that sends it. Its result is decoded by the row's shape; only a
// kSpecial result needs code of its own in compound_decode.cc. Nothing
// else names it.
//
// Each row is X(Enum, number, "WIRE NAME", shape), shape a ResultShape
// (below): what follows the status of the operation's result.
#pragma once

#include <cstddef>
#include <cstdint>

// Operations the core puts in a Compound: NFSv4.0's (RFC 7530 section 16),
// encoded by libnfs, and NFSv4.2's, encoded by us (libnfs 4.0.0 has no XDR
// for them) and sent only on an NFSv4.2 session.
#define NACHE_COMPOUND_OPS(X) NACHE_COMPOUND_OPS_40(X) NACHE_COMPOUND_OPS_42(X)

#define NACHE_COMPOUND_OPS_40(X)                             \
  X(kAccess, 3, "ACCESS", kSpecial)                          \
  X(kClose, 4, "CLOSE", kStateid)                            \
  X(kCommit, 5, "COMMIT", kVerifier)                         \
  X(kCreate, 6, "CREATE", kSpecial)                          \
  X(kDelegReturn, 8, "DELEGRETURN", kStatus)                 \
  X(kGetattr, 9, "GETATTR", kSpecial)                        \
  X(kGetfh, 10, "GETFH", kSpecial)                           \
  X(kLink, 11, "LINK", kChangeInfo)                          \
  X(kLock, 12, "LOCK", kSpecial)                             \
  X(kLockt, 13, "LOCKT", kSpecial)                           \
  X(kLocku, 14, "LOCKU", kStateid)                           \
  X(kLookup, 15, "LOOKUP", kStatus)                          \
  X(kLookupp, 16, "LOOKUPP", kStatus)                        \
  X(kNverify, 17, "NVERIFY", kStatus)                        \
  X(kOpen, 18, "OPEN", kSpecial)                             \
  X(kOpenConfirm, 20, "OPEN_CONFIRM", kStateid)              \
  X(kOpenDowngrade, 21, "OPEN_DOWNGRADE", kStateid)          \
  X(kPutfh, 22, "PUTFH", kStatus)                            \
  X(kPutrootfh, 24, "PUTROOTFH", kStatus)                    \
  X(kRead, 25, "READ", kSpecial)                             \
  X(kReaddir, 26, "READDIR", kSpecial)                       \
  X(kReadlink, 27, "READLINK", kSpecial)                     \
  X(kRemove, 28, "REMOVE", kChangeInfo)                      \
  X(kRename, 29, "RENAME", kSpecial)                         \
  X(kRenew, 30, "RENEW", kStatus)                            \
  X(kRestorefh, 31, "RESTOREFH", kStatus)                    \
  X(kSavefh, 32, "SAVEFH", kStatus)                          \
  X(kSetattr, 34, "SETATTR", kSpecial)                       \
  X(kSetclientid, 35, "SETCLIENTID", kSpecial)               \
  X(kSetclientidConfirm, 36, "SETCLIENTID_CONFIRM", kStatus) \
  X(kVerify, 37, "VERIFY", kStatus)                          \
  X(kWrite, 38, "WRITE", kSpecial)                           \
  X(kReleaseLockowner, 39, "RELEASE_LOCKOWNER", kStatus)

// NFSv4.2 (RFC 7862 section 15; extended attributes: RFC 8276 section 8).
#define NACHE_COMPOUND_OPS_42(X)             \
  X(kAllocate, 59, "ALLOCATE", kStatus)      \
  X(kCopy, 60, "COPY", kSpecial)             \
  X(kDeallocate, 62, "DEALLOCATE", kStatus)  \
  X(kReadPlus, 68, "READ_PLUS", kSpecial)    \
  X(kSeek, 69, "SEEK", kSpecial)             \
  X(kGetxattr, 72, "GETXATTR", kSpecial)     \
  X(kSetxattr, 73, "SETXATTR", kChangeInfo)  \
  X(kListxattrs, 74, "LISTXATTRS", kSpecial) \
  X(kRemovexattr, 75, "REMOVEXATTR", kChangeInfo)

// NFSv4.1 operations of the session layer (RFC 8881 section 18), which
// nfs41.cc encodes around the core's Compounds; the core never sends them.
#define NACHE_SESSION_OPS(X)                                  \
  X(kBindConnToSession, 41, "BIND_CONN_TO_SESSION", kSession) \
  X(kExchangeId, 42, "EXCHANGE_ID", kSession)                 \
  X(kCreateSession, 43, "CREATE_SESSION", kSession)           \
  X(kDestroySession, 44, "DESTROY_SESSION", kSession)         \
  X(kSequence, 53, "SEQUENCE", kSession)                      \
  X(kDestroyClientid, 57, "DESTROY_CLIENTID", kSession)       \
  X(kReclaimComplete, 58, "RECLAIM_COMPLETE", kSession)

namespace nache {
namespace upstream {

// What a result holds after its status (RFC 7530 section 16, RFC 7862
// section 15): the column that lets compound_decode.cc decode the common
// results without code of their own. A body other than kStatus is there
// only when the status is NFS4_OK.
enum class ResultShape : uint8_t {
  kStatus,      // nothing more
  kStateid,     // a stateid4 (OpResult::stateid)
  kChangeInfo,  // a change_info4 (OpResult::cinfo)
  kVerifier,    // a verifier4 (OpResult::verifier)
  kSpecial,     // its own decoder in compound_decode.cc
  kSession,     // a session operation's (nfs41.cc): never in a Compound
};

enum class Op : uint32_t {
#define NACHE_OP_ENUM(e, n, s, r) e = n,
  NACHE_COMPOUND_OPS(NACHE_OP_ENUM) NACHE_SESSION_OPS(NACHE_OP_ENUM)
#undef NACHE_OP_ENUM
};

// The wire name of op ("UNKNOWN" for a number no row has).
const char *OpName(Op op);

// The shape of op's result (kSpecial for a number no row has: no shape
// decodes it).
constexpr ResultShape ResultShapeOf(Op op) {
  switch (op) {
#define NACHE_OP_SHAPE(e, n, s, r) \
  case Op::e: return ResultShape::r;
    NACHE_COMPOUND_OPS(NACHE_OP_SHAPE) NACHE_SESSION_OPS(NACHE_OP_SHAPE)
#undef NACHE_OP_SHAPE
  }
  return ResultShape::kSpecial;
}

// One above the largest number of NACHE_COMPOUND_OPS: arrays indexed by a
// compound operation's number have this many slots.
constexpr size_t kCompoundOpSlots = [] {
  size_t top = 0;
#define NACHE_OP_MAX(e, n, s, r) top = top > n ? top : n;
  NACHE_COMPOUND_OPS(NACHE_OP_MAX)
#undef NACHE_OP_MAX
  return top + 1;
}();

// Whether number is an operation of NACHE_COMPOUND_OPS.
constexpr bool IsCompoundOp(uint32_t number) {
#define NACHE_OP_IS(e, n, s, r) \
  if (number == n) return true;
  NACHE_COMPOUND_OPS(NACHE_OP_IS)
#undef NACHE_OP_IS
  return false;
}

// Whether number is an NFSv4.2 operation of NACHE_COMPOUND_OPS_42 (sent
// only with minor version 2, encoded by compound_wire.cc).
constexpr bool IsNfs42Op(uint32_t number) {
#define NACHE_OP_IS42(e, n, s, r) \
  if (number == n) return true;
  NACHE_COMPOUND_OPS_42(NACHE_OP_IS42)
#undef NACHE_OP_IS42
  return false;
}

}  // namespace upstream
}  // namespace nache
