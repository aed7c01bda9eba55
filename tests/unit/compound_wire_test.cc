// Replies from a hostile or broken server (issue 15): Compound::DecodeWire
// must refuse them, in either minor version, without trusting a count or a
// length, and only accept replies that keep CompoundReply's invariant
// (compound.h). Every reply here is built byte by byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fake_idmap.h"
#include "rpc/xdr.h"
#include "upstream/attrs.h"
#include "upstream/compound.h"
#include "upstream/nfs41.h"
#include "upstream/owners.h"

namespace nache {
namespace upstream {
namespace {

using rpc::XdrOut;

constexpr uint32_t kOpPutfh = 22, kOpLookup = 15, kOpGetfh = 10, kOpGetattr = 9,
                   kOpReaddir = 26, kOpOpen = 18, kOpIllegal = 10044,
                   kOpSequence = 53;

// A reply: header, optionally a SEQUENCE result, then what the test adds.
class Reply {
 public:
  Reply(uint32_t status, uint32_t nres, bool sequence = false) : x_(&b_) {
    x_.U32(status);
    x_.Opaque(std::string("t"));
    x_.U32(nres);
    if (sequence) {
      x_.U32(kOpSequence);
      x_.U32(kNfs4Ok);
      std::string sid(16, 's');
      x_.Fixed(sid.data(), sid.size());
      for (uint32_t v : {1u, 0u, 0u, 0u, 0u}) x_.U32(v);
    }
  }
  Reply &Result(uint32_t op, uint32_t status) {
    x_.U32(op);
    x_.U32(status);
    return *this;
  }
  Reply &U32(uint32_t v) {
    x_.U32(v);
    return *this;
  }
  Reply &U64(uint64_t v) {
    x_.U64(v);
    return *this;
  }
  Reply &Opaque(const std::string &s) {
    x_.Opaque(s);
    return *this;
  }
  Reply &Raw(const std::string &s) {
    b_.append(s);
    return *this;
  }
  const std::string &bytes() const { return b_; }

 private:
  std::string b_;
  XdrOut x_;
};

// DecodeWire as NFSv4.0 (seq = false) or NFSv4.1.
bool Decode(const Compound &c, const Reply &r, bool seq, CompoundReply *out,
            nfs41::SequenceRes *sr = nullptr, OwnerCodec *owners = nullptr) {
  nfs41::SequenceRes scratch;
  return c.DecodeWire(r.bytes().data(), r.bytes().size(), out,
                      seq ? (sr ? sr : &scratch) : nullptr, owners);
}

// The fattr4 of an owner and an owner_group, as a reply carries it.
std::string OwnerFattr(const std::string &owner, const std::string &group) {
  std::string list, out;
  XdrOut l(&list);
  l.Opaque(owner);
  l.Opaque(group);
  XdrOut o(&out);
  o.U32(2);
  o.U32(0);
  o.U32((1u << (36 - 32)) | (1u << (37 - 32)));
  o.Opaque(list);
  return out;
}

// A GETATTR result claiming 0x40000001 bitmap words (libnfs 4.0.0 allocates
// 4 bytes for them and writes as many words as the reply holds).
TEST(CompoundWireTest, HugeBitmapCountIsRefused) {
  for (bool seq : {false, true}) {
    Compound c;
    c.Putfh("fh").Getattr(kAttrsObject);
    Reply r(kNfs4Ok, seq ? 3 : 2, seq);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpGetattr, kNfs4Ok).U32(0x40000001);
    r.Raw(std::string(64 << 10, '\xff'));
    CompoundReply reply;
    EXPECT_FALSE(Decode(c, r, seq, &reply)) << "minor version " << seq;
    EXPECT_TRUE(reply.results.empty());
  }
}

// A result count of 0xffffffff: bounded by the operations sent and the
// bytes left before anything is allocated.
TEST(CompoundWireTest, HugeResultCountIsRefused) {
  for (bool seq : {false, true}) {
    Compound c;
    c.Putfh("fh").Getfh();
    Reply r(kNfs4Ok, 0xffffffffu, seq);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpGetfh, kNfs4Ok).Opaque("fh");
    CompoundReply reply;
    EXPECT_FALSE(Decode(c, r, seq, &reply)) << "minor version " << seq;
  }
}

// NFS4_OK with fewer results than operations sent: the core reads
// Find(op)-> after an OK status, so this must not decode.
TEST(CompoundWireTest, OkReplyMustAnswerEveryOperation) {
  for (bool seq : {false, true}) {
    Compound c;
    c.Putfh("fh").Lookup("x").Getfh();
    Reply shortr(kNfs4Ok, seq ? 2 : 1, seq);
    shortr.Result(kOpPutfh, kNfs4Ok);
    CompoundReply reply;
    EXPECT_FALSE(Decode(c, shortr, seq, &reply)) << "minor version " << seq;

    Reply none(kNfs4Ok, seq ? 1 : 0, seq);
    EXPECT_FALSE(Decode(c, none, seq, &reply)) << "minor version " << seq;

    Reply whole(kNfs4Ok, seq ? 4 : 3, seq);
    whole.Result(kOpPutfh, kNfs4Ok).Result(kOpLookup, kNfs4Ok);
    whole.Result(kOpGetfh, kNfs4Ok).Opaque("new");
    ASSERT_TRUE(Decode(c, whole, seq, &reply)) << "minor version " << seq;
    ASSERT_NE(reply.Find(Op::kGetfh), nullptr);
    EXPECT_EQ(reply.Find(Op::kGetfh)->fh, "new");
  }
}

TEST(CompoundWireTest, OkStatusNeedsEveryResultOk) {
  Compound c;
  c.Putfh("fh").Lookup("x").Getfh();
  Reply r(kNfs4Ok, 3);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpLookup, kNfs4ErrNoent);
  r.Result(kOpGetfh, kNfs4Ok).Opaque("new");
  CompoundReply reply;
  EXPECT_FALSE(Decode(c, r, false, &reply));

  Reply last(kNfs4Ok, 3);
  last.Result(kOpPutfh, kNfs4Ok).Result(kOpLookup, kNfs4Ok);
  last.Result(kOpGetfh, kNfs4ErrServerfault);
  EXPECT_FALSE(Decode(c, last, false, &reply));

  Reply illegal(kNfs4Ok, 1);
  illegal.Result(kOpIllegal, kNfs4ErrOpIllegal);
  EXPECT_FALSE(Decode(c, illegal, false, &reply));
}

TEST(CompoundWireTest, FailureIsTheLastResultsStatus) {
  for (bool seq : {false, true}) {
    Compound c;
    c.Putfh("fh").Lookup("x").Getfh();
    const uint32_t n = seq ? 1 : 0;  // SEQUENCE's result
    CompoundReply reply;

    Reply good(kNfs4ErrNoent, n + 2, seq);
    good.Result(kOpPutfh, kNfs4Ok).Result(kOpLookup, kNfs4ErrNoent);
    ASSERT_TRUE(Decode(c, good, seq, &reply));
    EXPECT_EQ(reply.status, kNfs4ErrNoent);
    EXPECT_EQ(reply.FailedIndex(), 1);
    EXPECT_EQ(reply.Find(Op::kGetfh), nullptr);

    Reply last_ok(kNfs4ErrNoent, n + 2, seq);
    last_ok.Result(kOpPutfh, kNfs4Ok).Result(kOpLookup, kNfs4Ok);
    EXPECT_FALSE(Decode(c, last_ok, seq, &reply));

    Reply other(kNfs4ErrNoent, n + 2, seq);
    other.Result(kOpPutfh, kNfs4Ok).Result(kOpLookup, kNfs4ErrAccess);
    EXPECT_FALSE(Decode(c, other, seq, &reply));

    Reply on_after(kNfs4ErrNoent, n + 2, seq);
    on_after.Result(kOpPutfh, kNfs4ErrNoent).Result(kOpLookup, kNfs4ErrNoent);
    EXPECT_FALSE(Decode(c, on_after, seq, &reply));

    Reply reordered(kNfs4ErrNoent, n + 2, seq);
    reordered.Result(kOpLookup, kNfs4Ok).Result(kOpPutfh, kNfs4ErrNoent);
    EXPECT_FALSE(Decode(c, reordered, seq, &reply));

    // No result at all: the whole compound refused (NFSv4.0); after a
    // SEQUENCE that succeeded, an operation ran and must be answered.
    Reply refused(kNfs4ErrResource, n, seq);
    EXPECT_EQ(Decode(c, refused, seq, &reply), !seq);
    if (!seq) {
      EXPECT_EQ(reply.status, kNfs4ErrResource);
      EXPECT_EQ(reply.Find(Op::kPutfh), nullptr);
    }
  }
}

// SEQUENCE's result reaches the caller only whole: the connection takes an
// unwritten one for "outcome unknown" and a written one for the slot's
// outcome.
TEST(CompoundWireTest, TruncatedSequenceIsNotReported) {
  Compound c;
  c.Putfh("fh");
  std::string b;
  XdrOut x(&b);
  x.U32(kNfs4Ok);
  x.Opaque(std::string("t"));
  x.U32(2);
  x.U32(kOpSequence);
  x.U32(kNfs4Ok);
  x.U32(0x12345678);  // the session id is cut short
  CompoundReply reply;
  nfs41::SequenceRes sr;
  sr.status = UINT32_MAX;
  EXPECT_FALSE(c.DecodeWire(b.data(), b.size(), &reply, &sr));
  EXPECT_EQ(sr.status, UINT32_MAX);
}

// READDIR's entries are a linked list on the wire: a long one must neither
// recurse per entry nor outgrow the maxcount asked for.
TEST(CompoundWireTest, ReaddirIsBoundedByMaxcount) {
  auto reply_with = [](uint32_t entries) {
    Reply r(kNfs4Ok, 2);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpReaddir, kNfs4Ok);
    r.Raw(std::string(8, 'v'));  // cookie verifier
    std::string entry;
    XdrOut e(&entry);
    e.U32(1);  // value follows
    e.U64(7);  // cookie
    e.Opaque(std::string("n"));
    e.U32(0);  // bitmap: no words
    e.U32(0);  // attrlist: empty
    std::string all;
    all.reserve(entry.size() * entries);
    for (uint32_t i = 0; i < entries; i++) all += entry;
    r.Raw(all).U32(0).U32(1);  // end of list, eof
    return r;
  };
  // Each entry is 28 bytes on the wire.
  Compound c;
  c.Putfh("d").Readdir(0, Verifier(8, '\0'), 1 << 20, 2 << 20, 0, false);
  CompoundReply reply;
  EXPECT_FALSE(Decode(c, reply_with(100000), false, &reply))
      << "2.8 MB of entries for a maxcount of 2 MiB";
  ASSERT_TRUE(Decode(c, reply_with(60000), false, &reply));
  ASSERT_NE(reply.Find(Op::kReaddir), nullptr);
  EXPECT_EQ(reply.Find(Op::kReaddir)->entries.size(), 60000u);
  EXPECT_TRUE(reply.Find(Op::kReaddir)->eof);

  Compound small;
  small.Putfh("d").Readdir(0, Verifier(8, '\0'), 1024, 4096, 0, false);
  EXPECT_FALSE(Decode(small, reply_with(1000), false, &reply));
  EXPECT_TRUE(Decode(small, reply_with(10), false, &reply));
}

// NFSv4.1's OPEN_DELEGATE_NONE_EXT (knfsd sends it when it declines a
// delegation it was asked for) decodes as no delegation.
TEST(CompoundWireTest, OpenWithNoDelegationExt) {
  Compound c;
  OpenArgs args;
  args.name = "f";
  c.Putfh("d").Open(args);
  Reply r(kNfs4Ok, 3, true);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpOpen, kNfs4Ok);
  r.U32(1).Raw(std::string(12, 'o'));  // stateid
  r.U32(1).U64(1).U64(2);              // cinfo
  r.U32(0).U32(0);                     // rflags, attrset (no words)
  r.U32(3).U32(1).U32(0);  // NONE_EXT, WND4_CONTENTION, will not push
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, r, true, &reply));
  ASSERT_NE(reply.Find(Op::kOpen), nullptr);
  EXPECT_EQ(reply.Find(Op::kOpen)->delegation.type, DelegationType::kNone);
  EXPECT_EQ(reply.Find(Op::kOpen)->stateid.seqid, 1u);
}

// SETATTR's result carries its attrsset bitmap whatever its status.
TEST(CompoundWireTest, SetattrFailureKeepsItsBitmap) {
  Compound c;
  Attrs a;
  a.mask = kAttrMode;
  c.Putfh("f").Setattr(StateId(), a).Getattr(kAttrSize);
  Reply r(kNfs4ErrPerm, 2);
  r.Result(kOpPutfh, kNfs4Ok).Result(34, kNfs4ErrPerm).U32(0);
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, r, false, &reply));
  EXPECT_EQ(reply.Find(Op::kSetattr)->status, kNfs4ErrPerm);
  Reply cut(kNfs4ErrPerm, 2);
  cut.Result(kOpPutfh, kNfs4Ok).Result(34, kNfs4ErrPerm);  // no bitmap
  EXPECT_FALSE(Decode(c, cut, false, &reply));
}

// Owners in settable attributes are encoded when the compound goes on the
// wire, in the format the export's codec says then: names once an auto
// codec has seen the remote send one (a reply decoded with it).
TEST(CompoundWireTest, OwnersGoOutAsTheCodecSaysWhenSent) {
  std::unique_ptr<IdMapper> mapper = testing_util::NewFakeMapper();
  OwnerCodec owners(OwnerFormat::kAuto, mapper.get());
  Attrs set;
  set.mask = kAttrOwner | kAttrOwnerGroup;
  set.uid = 1000;
  set.gid = 3000;
  OpenArgs open;
  open.name = "new";
  open.owner = "o";
  open.create = OpenArgs::Create::kGuarded;
  open.create_attrs = set;
  Compound c;
  c.Putfh("f").Setattr(StateId(), set).Create(FileType::kDir, "d", set);
  c.Open(open).Getattr(kAttrsObject);
  auto count = [](const std::string &wire, const std::string &s) {
    size_t n = 0;
    for (size_t at = wire.find(s); at != std::string::npos;
         at = wire.find(s, at + 1))
      n++;
    return n;
  };
  std::string numeric;
  ASSERT_TRUE(c.EncodeWire(&numeric, nullptr, &owners));
  EXPECT_EQ(count(numeric, "alice@example.org"), 0u) << "auto: numeric first";

  // A reply with a name teaches the codec; the owners decode through it.
  Compound g;
  g.Putfh("f").Getattr(kAttrOwner | kAttrOwnerGroup);
  Reply r(kNfs4Ok, 2);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpGetattr, kNfs4Ok);
  r.Raw(OwnerFattr("bob@example.org", "staff@example.org"));
  CompoundReply reply;
  ASSERT_TRUE(Decode(g, r, false, &reply, nullptr, &owners));
  EXPECT_EQ(reply.Find(Op::kGetattr)->attrs.uid, 2000u);
  EXPECT_EQ(reply.Find(Op::kGetattr)->attrs.gid, 3000u);
  EXPECT_TRUE(owners.SendsNames());

  std::string names;
  ASSERT_TRUE(c.EncodeWire(&names, nullptr, &owners));
  EXPECT_EQ(count(names, "alice@example.org"), 3u) << "SETATTR, CREATE, OPEN";
  EXPECT_EQ(count(names, "staff@example.org"), 3u);
  // (Args(), libnfs' view, is the one encoded last.)
  std::string v41;
  nfs41::SequenceArgs seq;
  ASSERT_TRUE(c.EncodeWire(&v41, &seq, &owners));
  EXPECT_EQ(count(v41, "alice@example.org"), 3u) << "NFSv4.1 too";
}

// Issue 19: an NFSv4.1 OPEN by filehandle goes out as RFC 8881 lays it
// out (libnfs cannot encode CLAIM_FH), between operations libnfs encodes,
// and never in an NFSv4.0 compound.
TEST(CompoundWireTest, OpenByFilehandleIsEncodedForNfsV41Only) {
  OpenArgs open;
  open.seqid = 7;
  open.share_access = kShareAccessRead;
  open.share_deny = kShareDenyWrite;
  open.clientid = 0x1122334455667788ull;
  open.owner = "own";
  open.claim = OpenArgs::Claim::kFh;
  Compound c;
  c.Putfh("fh").Open(open).Getattr(kAttrType);
  std::string v40;
  EXPECT_FALSE(c.EncodeWire(&v40, nullptr));
  EXPECT_TRUE(v40.empty());

  std::string v41;
  nfs41::SequenceArgs seq;
  ASSERT_TRUE(c.EncodeWire(&v41, &seq));
  // What must follow PUTFH("fh"): OPEN's arguments, then GETATTR.
  std::string want;
  XdrOut x(&want);
  x.U32(kOpPutfh);
  x.Opaque(std::string("fh"));
  for (uint32_t v :
       {kOpOpen, 7u, uint32_t(kShareAccessRead), uint32_t(kShareDenyWrite)})
    x.U32(v);
  x.U64(0x1122334455667788ull);
  x.Opaque(std::string("own"));
  x.U32(0);  // OPEN4_NOCREATE
  x.U32(4);  // CLAIM_FH
  x.U32(kOpGetattr);
  ASSERT_GE(v41.size(), want.size());
  size_t at = v41.find(want);
  ASSERT_NE(at, std::string::npos);
  // GETATTR's bitmap ends the compound.
  rpc::XdrIn in(v41.data() + at + want.size(), v41.size() - at - want.size());
  uint32_t words, w0;
  ASSERT_TRUE(in.U32(&words) && words >= 1 && in.U32(&w0));
  for (uint32_t i = 1; i < words; i++) ASSERT_TRUE(in.U32(&w0));
  EXPECT_EQ(in.left(), 0u);
}

// An EXCLUSIVE4_1 create (NFSv4.1) carries its verifier and attributes
// together: encoded by us, never in an NFSv4.0 compound.
TEST(CompoundWireTest, Exclusive41CreateIsEncodedForNfsV41Only) {
  OpenArgs open;
  open.seqid = 3;
  open.share_access = kShareAccessBoth;
  open.clientid = 0x0102030405060708ull;
  open.owner = "ow";
  open.create = OpenArgs::Create::kExclusive41;
  open.create_verf = Verifier("ABCDEFGH", 8);
  open.create_attrs.mask = kAttrMode;
  open.create_attrs.mode = 0640;
  open.name = "new";
  Compound c;
  c.Putfh("d").Open(open).Getfh();
  std::string v40;
  EXPECT_FALSE(c.EncodeWire(&v40, nullptr));
  EXPECT_TRUE(v40.empty());

  std::string v41;
  nfs41::SequenceArgs seq;
  ASSERT_TRUE(c.EncodeWire(&v41, &seq));
  std::vector<uint32_t> bitmap;
  std::string list;
  EncodeSettableAttrs(open.create_attrs, &bitmap, &list);
  std::string want;
  XdrOut x(&want);
  x.U32(kOpPutfh);
  x.Opaque(std::string("d"));
  for (uint32_t v : {kOpOpen, 3u, uint32_t(kShareAccessBoth), 0u}) x.U32(v);
  x.U64(0x0102030405060708ull);
  x.Opaque(std::string("ow"));
  x.U32(1);  // OPEN4_CREATE
  x.U32(3);  // EXCLUSIVE4_1
  x.Fixed("ABCDEFGH", 8);
  x.U32(uint32_t(bitmap.size()));
  for (uint32_t w : bitmap) x.U32(w);
  x.Opaque(list);
  x.U32(0);  // CLAIM_NULL
  x.Opaque(std::string("new"));
  x.U32(kOpGetfh);
  ASSERT_FALSE(list.empty());
  ASSERT_GE(v41.size(), want.size());
  size_t at = v41.find(want);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(at + want.size(), v41.size());  // GETFH ends the compound
}

// READDIR entries' owners decode through the codec too; one it cannot
// map is nobody, marked unmapped.
TEST(CompoundWireTest, ReaddirOwnersDecodeThroughTheCodec) {
  std::unique_ptr<IdMapper> mapper = testing_util::NewFakeMapper();
  OwnerCodec owners(OwnerFormat::kAuto, mapper.get());
  Compound c;
  c.Putfh("d").Readdir(0, Verifier(8, '\0'), 4096, 8192,
                       kAttrOwner | kAttrOwnerGroup, false);
  Reply r(kNfs4Ok, 2);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpReaddir, kNfs4Ok);
  r.Raw(std::string(8, 'v'));
  r.U32(1).U64(1).Opaque("a");
  r.Raw(OwnerFattr("alice@example.org", "staff@example.org"));
  r.U32(1).U64(2).Opaque("c");
  r.Raw(OwnerFattr("carol@example.org", "3000"));
  r.U32(0).U32(1);
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, r, false, &reply, nullptr, &owners));
  const std::vector<DirEntry> &e = reply.Find(Op::kReaddir)->entries;
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].attrs.uid, 1000u);
  EXPECT_EQ(e[0].attrs.mask & kAttrOwnerUnmapped, 0u);
  EXPECT_EQ(e[1].attrs.uid, kNobodyId);
  EXPECT_EQ(e[1].attrs.gid, 3000u);
  EXPECT_EQ(e[1].attrs.mask & (kAttrOwnerUnmapped | kAttrGroupUnmapped),
            kAttrOwnerUnmapped);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
