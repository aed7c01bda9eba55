// Plain value types of the upstream NFSv4.0 client: filehandles, stateids,
// attributes, credentials, status. Nothing here depends on libnfs, so the
// rest of the core (and the unit tests) can use these types without ever
// seeing an XDR union.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nache {
namespace upstream {

// NFSv4 status codes we name in code (values from RFC 7530). Other codes pass
// through as numbers.
enum Nfs4Status : uint32_t {
  kNfs4Ok = 0,
  kNfs4ErrPerm = 1,
  kNfs4ErrNoent = 2,
  kNfs4ErrIo = 5,
  kNfs4ErrNxio = 6,
  kNfs4ErrAccess = 13,
  kNfs4ErrExist = 17,
  kNfs4ErrXdev = 18,
  kNfs4ErrNotdir = 20,
  kNfs4ErrIsdir = 21,
  kNfs4ErrInval = 22,
  kNfs4ErrFbig = 27,
  kNfs4ErrNospc = 28,
  kNfs4ErrRofs = 30,
  kNfs4ErrMlink = 31,
  kNfs4ErrNametoolong = 63,
  kNfs4ErrNotempty = 66,
  kNfs4ErrDquot = 69,
  kNfs4ErrStale = 70,
  kNfs4ErrBadhandle = 10001,
  kNfs4ErrBadCookie = 10003,
  kNfs4ErrNotsupp = 10004,
  kNfs4ErrToosmall = 10005,
  kNfs4ErrServerfault = 10006,
  kNfs4ErrBadtype = 10007,
  kNfs4ErrDelay = 10008,
  kNfs4ErrSame = 10009,
  kNfs4ErrDenied = 10010,
  kNfs4ErrExpired = 10011,
  kNfs4ErrLocked = 10012,
  kNfs4ErrGrace = 10013,
  kNfs4ErrFhexpired = 10014,
  kNfs4ErrShareDenied = 10015,
  kNfs4ErrWrongsec = 10016,
  kNfs4ErrClidInuse = 10017,
  kNfs4ErrResource = 10018,
  kNfs4ErrMoved = 10019,
  kNfs4ErrNofilehandle = 10020,
  kNfs4ErrMinorVersMismatch = 10021,
  kNfs4ErrStaleClientid = 10022,
  kNfs4ErrStaleStateid = 10023,
  kNfs4ErrOldStateid = 10024,
  kNfs4ErrBadStateid = 10025,
  kNfs4ErrBadSeqid = 10026,
  kNfs4ErrNotSame = 10027,
  kNfs4ErrLockRange = 10028,
  kNfs4ErrSymlink = 10029,
  kNfs4ErrRestorefh = 10030,
  kNfs4ErrLeaseMoved = 10031,
  kNfs4ErrAttrnotsupp = 10032,
  kNfs4ErrNoGrace = 10033,
  kNfs4ErrReclaimBad = 10034,
  kNfs4ErrReclaimConflict = 10035,
  kNfs4ErrBadxdr = 10036,
  kNfs4ErrLocksHeld = 10037,
  kNfs4ErrOpenmode = 10038,
  kNfs4ErrBadowner = 10039,
  kNfs4ErrBadchar = 10040,
  kNfs4ErrBadname = 10041,
  kNfs4ErrBadRange = 10042,
  kNfs4ErrLockNotsupp = 10043,
  kNfs4ErrOpIllegal = 10044,
  kNfs4ErrDeadlock = 10045,
  kNfs4ErrFileOpen = 10046,
  kNfs4ErrAdminRevoked = 10047,
  kNfs4ErrCbPathDown = 10048,
  // NFSv4.1 (RFC 8881)
  kNfs4ErrBadSession = 10052,
  kNfs4ErrBadSlot = 10053,
  kNfs4ErrConnNotBoundToSession = 10055,
  kNfs4ErrSeqMisordered = 10063,
  kNfs4ErrSequencePos = 10064,
  kNfs4ErrRetryUncachedRep = 10068,
  kNfs4ErrTooManyOps = 10070,
  kNfs4ErrOpNotInSession = 10071,
  kNfs4ErrDeadSession = 10078,
  // NFSv4.2 extended attributes (RFC 8276)
  kNfs4ErrNoxattr = 10095,
  kNfs4ErrXattr2big = 10096,
};

// SEEK's data_content4 (RFC 7862 15.11).
enum class SeekWhat : uint32_t { kData = 0, kHole = 1 };

// SETXATTR's setxattr_option4 (RFC 8276 8.4.2.1).
enum class XattrOption : uint32_t { kEither = 0, kCreate = 1, kReplace = 2 };

// Outcome of one upstream call at the transport level. An NFS-level error is
// kOk here with the NFS status in CompoundReply::status.
enum class CallStatus {
  kOk,            // a reply was received and decoded
  kDisconnected,  // no connection to the upstream (retryable)
  kTimeout,       // no reply within the call timeout (retryable)
  kEncodeError,   // the request could not be encoded (a bug or oversize)
  kDecodeError,   // the reply could not be decoded
  kShutdown,      // the client is shutting down
};

const char *CallStatusName(CallStatus s);

// A remote filehandle: opaque bytes, at most 128 (NFS4_FHSIZE).
using Fh = std::string;
constexpr size_t kMaxFhSize = 128;

struct StateId {
  uint32_t seqid = 0;
  uint8_t other[12] = {0};

  static StateId Anonymous() { return StateId(); }  // all zeros
  // NFSv4.1's current stateid (RFC 8881 16.2.3.1.2): the one the last
  // operation of the COMPOUND set (an OPEN's), seqid 1 and other zeros.
  static StateId Current() {
    StateId s;
    s.seqid = 1;
    return s;
  }
  static StateId Bypass() {  // all ones (READ bypass)
    StateId s;
    s.seqid = 0xffffffffu;
    for (auto &b : s.other) b = 0xff;
    return s;
  }
  bool operator==(const StateId &o) const;
};

using Verifier = std::string;  // 8 opaque bytes (NFS4_VERIFIER_SIZE)

// The caller's AUTH_SYS identity, forwarded on every call.
struct Creds {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // clamped to 16 when encoded
  // Upstream_Identity = user: this call goes under the machine's context
  // although it carries a user's identity (a reclaim, reclaim.cc). Not
  // part of the identity (==).
  bool as_machine = false;
  bool operator==(const Creds &o) const {
    return uid == o.uid && gid == o.gid && groups == o.groups;
  }
  bool operator!=(const Creds &o) const { return !(*this == o); }
};

struct Time {
  int64_t sec = 0;
  uint32_t nsec = 0;
};

enum class FileType : uint32_t {
  kNone = 0,
  kReg = 1,
  kDir = 2,
  kBlk = 3,
  kChr = 4,
  kLnk = 5,
  kSock = 6,
  kFifo = 7,
};

// Which fields of Attrs are valid (decoded) or wanted (to set / to fetch).
// These are our own bits, not fattr4 bit numbers; attrs.cc maps them.
enum AttrBit : uint64_t {
  kAttrType = 1ull << 0,
  kAttrChange = 1ull << 1,
  kAttrSize = 1ull << 2,
  kAttrFsid = 1ull << 3,
  kAttrFileid = 1ull << 4,
  kAttrMode = 1ull << 5,
  kAttrNlink = 1ull << 6,
  kAttrOwner = 1ull << 7,       // numeric uid
  kAttrOwnerGroup = 1ull << 8,  // numeric gid
  kAttrRawdev = 1ull << 9,
  kAttrSpaceUsed = 1ull << 10,
  kAttrAtime = 1ull << 11,  // time_access (get) / time_access_set (set)
  kAttrMtime = 1ull << 12,  // time_modify (get) / time_modify_set (set)
  kAttrCtime = 1ull << 13,  // time_metadata
  kAttrLeaseTime = 1ull << 14,
  kAttrMaxRead = 1ull << 15,
  kAttrMaxWrite = 1ull << 16,
  kAttrFilesAvail = 1ull << 17,
  kAttrFilesFree = 1ull << 18,
  kAttrFilesTotal = 1ull << 19,
  kAttrSpaceAvail = 1ull << 20,
  kAttrSpaceFree = 1ull << 21,
  kAttrSpaceTotal = 1ull << 22,
  kAttrMountedOnFileid = 1ull << 23,
  kAttrRdattrError = 1ull << 24,  // READDIR per-entry error
  kAttrSupported = 1ull << 25,    // supported_attrs (as our bits)
  kAttrMaxName = 1ull << 26,
  kAttrMaxLink = 1ull << 27,
  kAttrMaxFileSize = 1ull << 28,
  // Not attributes but facts about two: the remote named the owner (the
  // owner_group) and we could not map the name (upstream/owners.h). uid
  // (gid) is then kNobodyId for display only: no caller is its owner (a
  // member of its group) here, whatever its own uid (OwnerIs, GroupIs).
  kAttrOwnerUnmapped = 1ull << 29,
  kAttrGroupUnmapped = 1ull << 30,
};

// The attributes an object's GETATTR normally fetches.
constexpr uint64_t kAttrsObject =
    kAttrType | kAttrChange | kAttrSize | kAttrFsid | kAttrFileid | kAttrMode |
    kAttrNlink | kAttrOwner | kAttrOwnerGroup | kAttrRawdev | kAttrSpaceUsed |
    kAttrAtime | kAttrMtime | kAttrCtime;

constexpr uint64_t kAttrsStatfs = kAttrFilesAvail | kAttrFilesFree |
                                  kAttrFilesTotal | kAttrSpaceAvail |
                                  kAttrSpaceFree | kAttrSpaceTotal;

struct Attrs {
  uint64_t mask = 0;  // AttrBit set: which fields below are meaningful
  FileType type = FileType::kNone;
  uint64_t change = 0;
  uint64_t size = 0;
  uint64_t fsid_major = 0, fsid_minor = 0;
  uint64_t fileid = 0;
  uint32_t mode = 0;  // permission bits only (07777)
  uint32_t nlink = 0;
  uint32_t uid = 0, gid = 0;
  uint32_t rdev_major = 0, rdev_minor = 0;
  uint64_t space_used = 0;
  Time atime, mtime, ctime;
  // For SETATTR only: set atime/mtime to the server's clock rather than the
  // given value (SET_TO_SERVER_TIME4).
  bool atime_server = false, mtime_server = false;
  uint32_t lease_time = 0;
  uint64_t maxread = 0, maxwrite = 0;
  uint64_t files_avail = 0, files_free = 0, files_total = 0;
  uint64_t space_avail = 0, space_free = 0, space_total = 0;
  uint64_t mounted_on_fileid = 0;
  uint32_t rdattr_error = 0;
  uint64_t supported = 0;  // AttrBit set the server supports
  uint32_t maxname = 0, maxlink = 0;
  uint64_t maxfilesize = 0;
};

// Whether uid owns the object a describes (never when its owner is
// unmapped: nobody is no one's stand-in).
inline bool OwnerIs(const Attrs &a, uint32_t uid) {
  return a.uid == uid && !(a.mask & kAttrOwnerUnmapped);
}
// Whether gid is the object's group (never when it is unmapped).
inline bool GroupIs(const Attrs &a, uint32_t gid) {
  return a.gid == gid && !(a.mask & kAttrGroupUnmapped);
}

struct ChangeInfo {
  bool atomic = false;
  uint64_t before = 0, after = 0;
};

enum class DelegationType : uint32_t { kNone = 0, kRead = 1, kWrite = 2 };

struct Delegation {
  DelegationType type = DelegationType::kNone;
  StateId stateid;
  bool recall = false;  // server asked for it back at grant time
};

struct DirEntry {
  uint64_t cookie = 0;
  std::string name;
  Attrs attrs;  // as asked for in READDIR's attr_request
  Fh fh;        // when kAttrFilehandle-like request was made (see READDIR)
};

enum class LockType : uint32_t {
  kRead = 1,       // READ_LT
  kWrite = 2,      // WRITE_LT
  kReadWait = 3,   // READW_LT
  kWriteWait = 4,  // WRITEW_LT
};

struct LockDenied {
  uint64_t offset = 0, length = 0;
  LockType type = LockType::kRead;
  uint64_t owner_clientid = 0;
  std::string owner;
};

// OPEN share access / deny bits (RFC 7530).
enum : uint32_t {
  kShareAccessRead = 1,
  kShareAccessWrite = 2,
  kShareAccessBoth = 3,
  kShareDenyNone = 0,
  kShareDenyRead = 1,
  kShareDenyWrite = 2,
  kShareDenyBoth = 3,
};

// open_claim_type4 of NFSv4.1's OPEN by filehandle (RFC 8881 18.16.1).
constexpr uint32_t kClaimFh = 4;
// createmode4 EXCLUSIVE4_1 (RFC 8881 18.16.1), new in NFSv4.1.
constexpr uint32_t kCreateExclusive41 = 3;

// ACCESS bits (RFC 7530).
enum : uint32_t {
  kAccessRead = 0x01,
  kAccessLookup = 0x02,
  kAccessModify = 0x04,
  kAccessExtend = 0x08,
  kAccessDelete = 0x10,
  kAccessExecute = 0x20,
  kAccessAll = 0x3f,  // every bit: one answer serves every later question
};

enum class StableHow : uint32_t { kUnstable = 0, kDataSync = 1, kFileSync = 2 };

}  // namespace upstream
}  // namespace nache
