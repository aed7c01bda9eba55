// The typed NFSv4.0 COMPOUND builder and its decoded reply.
//
// This is the only interface the rest of the core uses to talk NFSv4: callers
// append typed operations to a Compound, hand it to Upstream::Call, and read
// typed OpResults. Encoding to libnfs' COMPOUND4args lives in compound.cc;
// replies are decoded by our own bounded reader (compound_decode.cc), not by
// libnfs. Nothing outside these files touches libnfs XDR unions.
//
// Thread safety: a Compound and a CompoundReply are plain values owned by one
// thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "upstream/ops.h"
#include "upstream/types.h"

struct COMPOUND4args;  // libnfs

namespace nache {
namespace rpc {
class XdrIn;
}  // namespace rpc
namespace upstream {
namespace nfs41 {
struct SequenceArgs;
struct SequenceRes;
}  // namespace nfs41
class OwnerCodec;

// Largest extended attribute value nache sends or accepts (Linux's
// XATTR_SIZE_MAX).
constexpr uint32_t kMaxXattrValue = 65536;

// Arguments of one OPEN.
struct OpenArgs {
  uint32_t seqid = 0;  // open-owner sequence id
  uint32_t share_access = kShareAccessRead;
  uint32_t share_deny = kShareDenyNone;
  uint64_t clientid = 0;  // filled by Upstream::Call if 0
  std::string owner;      // open-owner name
  enum class Create {
    kNoCreate,
    kUnchecked,
    kGuarded,
    kExclusive,
    // NFSv4.1 (RFC 8881 18.16.3): the verifier and attributes together.
    // Encoded by us (libnfs 4.0.0 knows only 4.0's modes), so never in an
    // NFSv4.0 compound; its owners, if any, go out numeric.
    kExclusive41
  } create = Create::kNoCreate;
  Attrs create_attrs;    // kUnchecked/kGuarded/kExclusive41
  Verifier create_verf;  // kExclusive/kExclusive41 (8 bytes)
  enum class Claim {
    kNull,
    kPrevious,
    kDelegateCur,
    kDelegatePrev,
    // NFSv4.1: the file itself, the current filehandle (RFC 8881 18.16.3);
    // no name needed, never with a create. Encoded by us (libnfs 4.0.0
    // knows only 4.0's claims), so never in an NFSv4.0 compound.
    kFh
  } claim = Claim::kNull;
  std::string name;  // kNull (file name in the current dir),
                     // kDelegatePrev
  DelegationType delegate_type = DelegationType::kNone;  // kPrevious
  StateId delegate_stateid;                              // kDelegateCur
};

// Arguments of one LOCK.
struct LockArgs {
  LockType type = LockType::kRead;
  bool reclaim = false;
  uint64_t offset = 0;
  uint64_t length = 0;  // UINT64_MAX = to end of file
  // A new lock-owner is introduced with its open's stateid and seqid; an
  // existing one with its lock stateid and lock seqid.
  bool new_lock_owner = false;
  uint32_t open_seqid = 0;  // new_lock_owner
  StateId open_stateid;     // new_lock_owner
  uint32_t lock_seqid = 0;  // both cases
  uint64_t clientid = 0;    // new_lock_owner; filled by Call if 0
  std::string owner;        // new_lock_owner: lock-owner name
  StateId lock_stateid;     // !new_lock_owner
};

// Arguments of one NFSv4.2 operation (compound_wire.cc encodes them; the
// scripted server of the unit tests reads them through nfs42_args).
struct Nfs42Args {
  // ALLOCATE, DEALLOCATE, SEEK, READ_PLUS; COPY's source:
  StateId stateid;
  uint64_t offset = 0;  // ALLOCATE, DEALLOCATE, SEEK, READ_PLUS, COPY
  uint64_t length = 0;  // ALLOCATE, DEALLOCATE, READ_PLUS and COPY's count
  SeekWhat what = SeekWhat::kData;            // SEEK
  std::string name;                           // GETXATTR, SETXATTR, REMOVEXATTR
  std::string value;                          // SETXATTR
  XattrOption option = XattrOption::kEither;  // SETXATTR
  uint64_t cookie = 0;                        // LISTXATTRS
  uint32_t maxcount = 0;                      // LISTXATTRS (bounds the reply)
  StateId dst_stateid;                        // COPY's destination
  uint64_t dst_offset = 0;                    // COPY's destination
};

// One operation's decoded result. Only the fields of that operation's kind are
// meaningful; the others keep their defaults.
struct OpResult {
  Op op = Op::kPutfh;
  uint32_t status = kNfs4Ok;  // nfsstat4

  Fh fh;                     // GETFH
  Attrs attrs;               // GETATTR; OPEN/CREATE: attrset not decoded
  StateId stateid;           // OPEN, LOCK; ResultShape::kStateid's (CLOSE,
                             // OPEN_CONFIRM, OPEN_DOWNGRADE, LOCKU, ...)
  uint32_t open_rflags = 0;  // OPEN (OPEN4_RESULT_CONFIRM = 2)
  Delegation delegation;     // OPEN
  ChangeInfo cinfo;          // OPEN, CREATE, RENAME (source);
                             // ResultShape::kChangeInfo's (REMOVE, LINK,
                             // SETXATTR, REMOVEXATTR, ...)
  ChangeInfo cinfo2;         // RENAME (target)
  uint32_t count = 0;        // READ (bytes copied), WRITE (bytes written),
                             // READ_PLUS (bytes its segments cover)
  uint32_t hole_bytes = 0;   // READ_PLUS: of count, zeros sent as holes
  bool eof = false;          // READ, READDIR, SEEK, LISTXATTRS
  uint64_t offset = 0;       // SEEK (where the data or hole starts)
  uint64_t copied = 0;       // COPY: bytes copied
  bool copy_async = false;   // COPY: the server went on alone (a callback
                             // id came back instead of the whole copy)
  uint64_t cookie = 0;       // LISTXATTRS (where the next call goes on)
  std::vector<std::string> names;              // LISTXATTRS
  StableHow committed = StableHow::kUnstable;  // WRITE, COPY
  Verifier verifier;              // WRITE, COPY, ResultShape::kVerifier's
                                  // (COMMIT, ...): write verifier; READDIR
                                  // (cookie verifier); SETCLIENTID (confirm)
  std::string data;               // READLINK (link text), GETXATTR (value)
  std::vector<DirEntry> entries;  // READDIR
  uint32_t access_supported = 0, access = 0;  // ACCESS
  LockDenied denied;                          // LOCK, LOCKT with NFS4ERR_DENIED
  uint64_t clientid = 0;                      // SETCLIENTID
};

// The decoded reply of one COMPOUND. results holds one entry per operation
// the server executed (it stops at the first failure).
//
// Invariant of every reply Compound::DecodeWire accepts (anything else is a
// decode failure, CallStatus::kDecodeError): results answer the operations
// sent, in order, with the same operation numbers (results[i].op is the
// i-th operation's; a server that did not know it may answer OP_ILLEGAL,
// kept as status NFS4ERR_OP_ILLEGAL); and
//  - status OK: one result per operation sent, every one OK. So after an OK
//    status, Find(op) of any operation the compound sent is never null.
//  - status not OK: every result but the last is OK and the last carries
//    that status; or, in NFSv4.0 only, there is no result at all (the
//    server refused the whole compound, e.g. NFS4ERR_RESOURCE). So after a
//    non-OK status Find(op) may be null for any op, the failing one
//    included: check before using it.
struct CompoundReply {
  uint32_t status = kNfs4Ok;  // status of the whole compound (first failure)
  std::vector<OpResult> results;
  // Times the compound was sent for this reply: more than 1 when the core
  // resent it unchanged after getting no reply (an NFSv4.0 seqid-bearing
  // request), so the server may have executed it before. A GUARDED create
  // answered EXIST then may have met the file it made itself.
  int sends = 1;

  // The result of the i-th operation of kind op, or nullptr when the server
  // did not reach it.
  const OpResult *Find(Op op, int nth = 0) const;
  // Index of the failing operation, or -1.
  int FailedIndex() const;
};

class Compound {
 public:
  Compound();
  ~Compound();
  Compound(Compound &&) noexcept;
  Compound &operator=(Compound &&) noexcept;
  Compound(const Compound &) = delete;
  Compound &operator=(const Compound &) = delete;

  // A short tag for logs ("lookup", "open", ...).
  Compound &SetTag(const std::string &tag);
  const std::string &tag() const;

  Compound &Putfh(const Fh &fh);
  Compound &Putrootfh();
  Compound &Lookup(const std::string &name);
  Compound &Lookupp();
  Compound &Getfh();
  Compound &Getattr(uint64_t attr_mask);
  Compound &Savefh();
  Compound &Restorefh();
  Compound &Access(uint32_t access_mask);
  // READ copies up to count bytes straight into dest (no intermediate copy);
  // dest must stay valid until the reply has been decoded.
  Compound &Read(const StateId &stateid, uint64_t offset, uint32_t count,
                 char *dest);
  // WRITE sends len bytes from data; data must stay valid until the call
  // completes (it is not copied). Up to 1 MiB per WRITE.
  Compound &Write(const StateId &stateid, uint64_t offset, StableHow stable,
                  const char *data, uint32_t len);
  Compound &Commit(uint64_t offset, uint32_t count);
  Compound &Open(const OpenArgs &args);
  Compound &OpenConfirm(const StateId &stateid, uint32_t seqid);
  Compound &OpenDowngrade(const StateId &stateid, uint32_t seqid,
                          uint32_t share_access, uint32_t share_deny);
  Compound &Close(uint32_t seqid, const StateId &stateid);
  // CREATE of a non-regular object: kDir, kLnk (link_text), kBlk/kChr
  // (rdev in attrs.rdev_*), kSock, kFifo.
  Compound &Create(FileType type, const std::string &name, const Attrs &attrs,
                   const std::string &link_text = std::string());
  Compound &Remove(const std::string &name);
  // RENAME from the saved filehandle's directory to the current one.
  Compound &Rename(const std::string &old_name, const std::string &new_name);
  // LINK the saved filehandle into the current directory.
  Compound &Link(const std::string &new_name);
  Compound &Readlink();
  // READDIR returning attr_mask for each entry (plus the entry's filehandle
  // when want_fh, decoded into DirEntry::fh).
  Compound &Readdir(uint64_t cookie, const Verifier &cookieverf,
                    uint32_t dircount, uint32_t maxcount, uint64_t attr_mask,
                    bool want_fh);
  Compound &Setattr(const StateId &stateid, const Attrs &attrs);
  Compound &Lock(const LockArgs &args);
  Compound &Lockt(LockType type, uint64_t offset, uint64_t length,
                  uint64_t clientid, const std::string &owner);
  Compound &Locku(LockType type, uint32_t seqid, const StateId &lock_stateid,
                  uint64_t offset, uint64_t length);
  Compound &ReleaseLockowner(uint64_t clientid, const std::string &owner);
  Compound &Renew(uint64_t clientid);
  Compound &Setclientid(const Verifier &verifier, const std::string &id,
                        uint32_t cb_program, const std::string &cb_netid,
                        const std::string &cb_uaddr, uint32_t cb_ident);
  Compound &SetclientidConfirm(uint64_t clientid, const Verifier &confirm);
  Compound &DelegReturn(const StateId &stateid);
  // NFSv4.1's RECLAIM_COMPLETE (whole file system set). Only in a compound
  // of its own, sent with EncodeWire's SEQUENCE; its status is the
  // reply's, with no results.
  Compound &ReclaimComplete();
  // NFSv4.2 (sent only on an NFSv4.2 session; EncodeWire refuses them in
  // any other). ALLOCATE and DEALLOCATE of [offset, offset + length).
  Compound &Allocate(const StateId &stateid, uint64_t offset, uint64_t length);
  Compound &Deallocate(const StateId &stateid, uint64_t offset,
                       uint64_t length);
  // READ_PLUS (RFC 7862 15.10): as READ, into dest, but the server may
  // send runs of zeros as holes (their length alone); the holes are
  // zeroed in dest. count bytes at most, from offset on.
  Compound &ReadPlus(const StateId &stateid, uint64_t offset, uint32_t count,
                     char *dest);
  // COPY (RFC 7862 15.2) of count bytes (0: to the end) from the saved
  // filehandle's src_offset to the current one's dst_offset, within the
  // server, asked synchronous and consecutive.
  Compound &Copy(const StateId &src_stateid, const StateId &dst_stateid,
                 uint64_t src_offset, uint64_t dst_offset, uint64_t count);
  // SEEK to the first byte of data (or of a hole) at or after offset.
  Compound &Seek(const StateId &stateid, uint64_t offset, SeekWhat what);
  // Extended attributes of the user namespace, by their name without the
  // "user." prefix (RFC 8276). A value up to kMaxXattrValue bytes.
  Compound &Getxattr(const std::string &name);
  Compound &Setxattr(XattrOption option, const std::string &name,
                     const std::string &value);
  // Names from cookie on; maxcount bounds the reply's size.
  Compound &Listxattrs(uint64_t cookie, uint32_t maxcount);
  Compound &Removexattr(const std::string &name);
  // VERIFY / NVERIFY of the change attribute (the only use we have).
  Compound &VerifyChange(uint64_t change);
  Compound &NverifyChange(uint64_t change);

  size_t size() const;  // number of operations
  Op op(size_t i) const;
  // Operation i's arguments when it is an NFSv4.2 operation (else null).
  const Nfs42Args *nfs42_args(size_t i) const;
  // The seqid of operation i when it is an OPEN (else 0).
  uint32_t open_seqid(size_t i) const;
  // Whether operation i is an OPEN by filehandle (CLAIM_FH, NFSv4.1).
  bool open_by_fh(size_t i) const;
  // Where operation i, a READ, puts its data (else null). For upstream/
  // and tests only (a scripted server).
  char *read_dest(size_t i) const;
  // An upper bound of the encoded size in bytes (for the encode buffer).
  size_t EncodedSizeHint() const;
  // Whether any operation carries a clientid left 0 for Call to fill in.
  void FillClientid(uint64_t clientid);

  // Builds libnfs' COMPOUND4args view of this compound. The returned struct
  // points into this Compound; it stays valid while the Compound lives and is
  // not modified. For upstream/ and tests only.
  COMPOUND4args *Args();

  // The COMPOUND on the wire (compound_wire.cc). Appends the arguments'
  // XDR to out: NFSv4.0 when seq is null, else minor version minor (1 or
  // 2) with seq's SEQUENCE first. Owners in settable attributes are
  // encoded by owners (numeric when null). False when they do not encode
  // (out unchanged), and for an NFSv4.2 operation in a compound of an
  // earlier minor version.
  bool EncodeWire(std::string *out, const nfs41::SequenceArgs *seq,
                  OwnerCodec *owners = nullptr, uint32_t minor = 1);
  // Whether any operation is an NFSv4.2 one.
  bool NeedsNfs42() const;
  // Whether any operation exists only from NFSv4.1 on (an OPEN by
  // filehandle).
  bool NeedsNfs41() const;
  // Decodes a reply's XDR (as EncodeWire sent it, with or without
  // SEQUENCE); for NFSv4.1 the SEQUENCE result goes to *seq_res, and
  // out->results hold this compound's operations only. A failed SEQUENCE
  // leaves out->status set to its status and no results. False when it
  // does not decode or does not match the request (CompoundReply's
  // invariant); *out is then empty. *seq_res is written only when
  // SEQUENCE decoded whole, even if what follows it does not. READ data
  // goes to the Read dest (bounded by the count asked for). Owners in
  // attributes are decoded by owners (numeric only when null). p need not
  // be aligned; every length in it is checked before use.
  bool DecodeWire(const char *p, size_t n, CompoundReply *out,
                  nfs41::SequenceRes *seq_res,
                  OwnerCodec *owners = nullptr) const;

 private:
  // The results after the reply header (and SEQUENCE): nres of them,
  // checked against the operations sent and CompoundReply's invariant
  // (compound_decode.cc).
  bool DecodeResults(rpc::XdrIn *in, uint32_t status, uint32_t nres,
                     bool after_sequence, OwnerCodec *owners,
                     CompoundReply *out) const;
  // ALLOCATE or DEALLOCATE (op) of a range.
  Compound &AddRangeOp(Op op, const StateId &stateid, uint64_t offset,
                       uint64_t length);
  // Encodes the owners of settable attributes again with owners
  // (compound.cc).
  void EncodeOwners(OwnerCodec *owners);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace upstream
}  // namespace nache
