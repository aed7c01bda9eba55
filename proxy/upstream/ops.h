// The NFSv4 operations nache sends upstream, one row each: the only place
// an operation's name in the code, its number and its name on the wire and
// in metrics are written. The Op enum, OpName, the nfs41 session op numbers
// and the op labels of nache_upstream_ops_total come from these rows.
//
// Adding an operation: a row here, its builder and encoder (compound.h and
// compound.cc), its reply decoder (compound_decode.cc), and the code that
// sends it. Nothing else names it.
//
// Each row is X(Enum, number, "WIRE NAME").
#pragma once

#include <cstddef>
#include <cstdint>

// Operations the core puts in a Compound: NFSv4.0's (RFC 7530 section 16),
// encoded by libnfs, and NFSv4.2's, encoded by us (libnfs 4.0.0 has no XDR
// for them) and sent only on an NFSv4.2 session.
#define NACHE_COMPOUND_OPS(X) NACHE_COMPOUND_OPS_40(X) NACHE_COMPOUND_OPS_42(X)

#define NACHE_COMPOUND_OPS_40(X)                    \
  X(kAccess, 3, "ACCESS")                           \
  X(kClose, 4, "CLOSE")                             \
  X(kCommit, 5, "COMMIT")                           \
  X(kCreate, 6, "CREATE")                           \
  X(kDelegReturn, 8, "DELEGRETURN")                 \
  X(kGetattr, 9, "GETATTR")                         \
  X(kGetfh, 10, "GETFH")                            \
  X(kLink, 11, "LINK")                              \
  X(kLock, 12, "LOCK")                              \
  X(kLockt, 13, "LOCKT")                            \
  X(kLocku, 14, "LOCKU")                            \
  X(kLookup, 15, "LOOKUP")                          \
  X(kLookupp, 16, "LOOKUPP")                        \
  X(kNverify, 17, "NVERIFY")                        \
  X(kOpen, 18, "OPEN")                              \
  X(kOpenConfirm, 20, "OPEN_CONFIRM")               \
  X(kOpenDowngrade, 21, "OPEN_DOWNGRADE")           \
  X(kPutfh, 22, "PUTFH")                            \
  X(kPutrootfh, 24, "PUTROOTFH")                    \
  X(kRead, 25, "READ")                              \
  X(kReaddir, 26, "READDIR")                        \
  X(kReadlink, 27, "READLINK")                      \
  X(kRemove, 28, "REMOVE")                          \
  X(kRename, 29, "RENAME")                          \
  X(kRenew, 30, "RENEW")                            \
  X(kRestorefh, 31, "RESTOREFH")                    \
  X(kSavefh, 32, "SAVEFH")                          \
  X(kSetattr, 34, "SETATTR")                        \
  X(kSetclientid, 35, "SETCLIENTID")                \
  X(kSetclientidConfirm, 36, "SETCLIENTID_CONFIRM") \
  X(kVerify, 37, "VERIFY")                          \
  X(kWrite, 38, "WRITE")                            \
  X(kReleaseLockowner, 39, "RELEASE_LOCKOWNER")

// NFSv4.2 (RFC 7862 section 15; extended attributes: RFC 8276 section 8).
#define NACHE_COMPOUND_OPS_42(X)   \
  X(kAllocate, 59, "ALLOCATE")     \
  X(kCopy, 60, "COPY")             \
  X(kDeallocate, 62, "DEALLOCATE") \
  X(kReadPlus, 68, "READ_PLUS")    \
  X(kSeek, 69, "SEEK")             \
  X(kGetxattr, 72, "GETXATTR")     \
  X(kSetxattr, 73, "SETXATTR")     \
  X(kListxattrs, 74, "LISTXATTRS") \
  X(kRemovexattr, 75, "REMOVEXATTR")

// NFSv4.1 operations of the session layer (RFC 8881 section 18), which
// nfs41.cc encodes around the core's Compounds; the core never sends them.
#define NACHE_SESSION_OPS(X)                        \
  X(kBindConnToSession, 41, "BIND_CONN_TO_SESSION") \
  X(kExchangeId, 42, "EXCHANGE_ID")                 \
  X(kCreateSession, 43, "CREATE_SESSION")           \
  X(kDestroySession, 44, "DESTROY_SESSION")         \
  X(kSequence, 53, "SEQUENCE")                      \
  X(kDestroyClientid, 57, "DESTROY_CLIENTID")       \
  X(kReclaimComplete, 58, "RECLAIM_COMPLETE")

namespace nache {
namespace upstream {

enum class Op : uint32_t {
#define NACHE_OP_ENUM(e, n, s) e = n,
  NACHE_COMPOUND_OPS(NACHE_OP_ENUM) NACHE_SESSION_OPS(NACHE_OP_ENUM)
#undef NACHE_OP_ENUM
};

// The wire name of op ("UNKNOWN" for a number no row has).
const char *OpName(Op op);

// One above the largest number of NACHE_COMPOUND_OPS: arrays indexed by a
// compound operation's number have this many slots.
constexpr size_t kCompoundOpSlots = [] {
  size_t top = 0;
#define NACHE_OP_MAX(e, n, s) top = top > n ? top : n;
  NACHE_COMPOUND_OPS(NACHE_OP_MAX)
#undef NACHE_OP_MAX
  return top + 1;
}();

// Whether number is an operation of NACHE_COMPOUND_OPS.
constexpr bool IsCompoundOp(uint32_t number) {
#define NACHE_OP_IS(e, n, s) \
  if (number == n) return true;
  NACHE_COMPOUND_OPS(NACHE_OP_IS)
#undef NACHE_OP_IS
  return false;
}

// Whether number is an NFSv4.2 operation of NACHE_COMPOUND_OPS_42 (sent
// only with minor version 2, encoded by compound_wire.cc).
constexpr bool IsNfs42Op(uint32_t number) {
#define NACHE_OP_IS42(e, n, s) \
  if (number == n) return true;
  NACHE_COMPOUND_OPS_42(NACHE_OP_IS42)
#undef NACHE_OP_IS42
  return false;
}

}  // namespace upstream
}  // namespace nache
