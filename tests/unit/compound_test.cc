// The typed COMPOUND builder and decoder (upstream/compound.h): arguments are
// checked by encoding them with libnfs' XDR and decoding them back; replies
// by encoding hand-built COMPOUND4res structures with libnfs' XDR encoder
// and decoding those bytes with our own reader (Compound::DecodeWire); the
// op table's result shapes by replies written with rpc::XdrOut.
#include "upstream/compound.h"

#include <gtest/gtest.h>
// libnfs.h first: the other libnfs headers use what it defines.
// clang-format off
#include <nfsc/libnfs.h>
// clang-format on

#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-zdr.h>

#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "rpc/xdr.h"

namespace nache {
namespace upstream {
namespace {

// A 64-bit field of a structure libnfs' decoder allocated, read here (this
// file is compiled without the alignment check) and handed to gtest by
// value: its comparisons take references, which must not point at the
// field (libnfs aligns these structures to 4 bytes only, and gtest's
// comparison, compiled in another file, checks alignment).
uint64_t U64(uint64_t v) { return v; }

StateId MakeStateid(uint32_t seqid, uint8_t fill) {
  StateId s;
  s.seqid = seqid;
  std::memset(s.other, fill, sizeof(s.other));
  return s;
}

// Encodes c's arguments with libnfs' XDR and decodes them into a fresh
// COMPOUND4args, which lives (with its decoded memory) as long as this.
class ArgsRoundTrip {
 public:
  explicit ArgsRoundTrip(Compound *c, size_t bufsize = 1 << 16)
      : buf_(bufsize) {
    ZDR enc;
    zdrmem_create(&enc, buf_.data(), buf_.size(), ZDR_ENCODE);
    ok_ = zdr_COMPOUND4args(&enc, c->Args());
    encoded_size_ = zdr_getpos(&enc);
    zdr_destroy(&enc);
    std::memset(&args_, 0, sizeof(args_));
    zdrmem_create(&dec_, buf_.data(), encoded_size_, ZDR_DECODE);
    ok_ = ok_ && zdr_COMPOUND4args(&dec_, &args_);
  }
  ~ArgsRoundTrip() { zdr_destroy(&dec_); }
  bool ok() const { return ok_; }
  size_t encoded_size() const { return encoded_size_; }
  const nfs_argop4 &op(size_t i) const {
    return args_.argarray.argarray_val[i];
  }
  const COMPOUND4args &args() const { return args_; }

 private:
  std::vector<char> buf_;
  ZDR dec_;
  COMPOUND4args args_;
  bool ok_ = false;
  size_t encoded_size_ = 0;
};

std::string Str(const utf8string &s) {
  return std::string(s.utf8string_val, s.utf8string_len);
}

TEST(CompoundTest, ArgumentsRoundTrip) {
  Compound c;
  OpenArgs open;
  open.seqid = 7;
  open.share_access = kShareAccessBoth;
  open.owner = "open-owner-1";
  open.create = OpenArgs::Create::kUnchecked;
  open.create_attrs.mask = kAttrMode;
  open.create_attrs.mode = 0644;
  open.name = "file.txt";
  LockArgs lock;
  lock.type = LockType::kWrite;
  lock.offset = 100;
  lock.length = UINT64_MAX;
  lock.new_lock_owner = true;
  lock.open_seqid = 8;
  lock.open_stateid = MakeStateid(1, 0xaa);
  lock.owner = "lock-owner";
  const char data[] = "hello";
  c.SetTag("roundtrip")
      .Putrootfh()
      .Lookup("export")
      .Putfh(std::string("\x10\x20\x30", 3))
      .Open(open)
      .Write(MakeStateid(2, 0xbb), 4096, StableHow::kFileSync, data, 5)
      .Getattr(kAttrsObject)
      .Readdir(5, "12345678", 4096, 32768, kAttrType, true)
      .Lock(lock)
      .Lockt(LockType::kRead, 0, 10, 0, "tester")
      .Renew(0)
      .Setclientid("verif123", "nache-test", 0x40000000, "tcp", "127.0.0.1.8.1",
                   9);
  c.FillClientid(0xabcdef);
  ASSERT_EQ(c.size(), 11u);
  EXPECT_EQ(c.op(3), Op::kOpen);

  ArgsRoundTrip rt(&c);
  ASSERT_TRUE(rt.ok());
  EXPECT_LE(rt.encoded_size(), c.EncodedSizeHint());
  EXPECT_EQ(Str(rt.args().tag), "roundtrip");
  EXPECT_EQ(rt.args().minorversion, 0u);
  ASSERT_EQ(rt.args().argarray.argarray_len, 11u);

  EXPECT_EQ(rt.op(0).argop, OP_PUTROOTFH);
  EXPECT_EQ(Str(rt.op(1).nfs_argop4_u.oplookup.objname), "export");
  const nfs_fh4 &fh = rt.op(2).nfs_argop4_u.opputfh.object;
  EXPECT_EQ(std::string(fh.nfs_fh4_val, fh.nfs_fh4_len),
            std::string("\x10\x20\x30", 3));

  const OPEN4args &o = rt.op(3).nfs_argop4_u.opopen;
  EXPECT_EQ(o.seqid, 7u);
  EXPECT_EQ(o.share_access, uint32_t(kShareAccessBoth));
  EXPECT_EQ(U64(o.owner.clientid), 0xabcdefu);  // filled
  EXPECT_EQ(std::string(o.owner.owner.owner_val, o.owner.owner.owner_len),
            "open-owner-1");
  EXPECT_EQ(o.openhow.opentype, OPEN4_CREATE);
  EXPECT_EQ(o.openhow.openflag4_u.how.mode, UNCHECKED4);
  const fattr4 &ca = o.openhow.openflag4_u.how.createhow4_u.createattrs;
  ASSERT_EQ(ca.attrmask.bitmap4_len, 2u);
  EXPECT_EQ(ca.attrmask.bitmap4_val[1], 1u << (33 - 32));
  ASSERT_EQ(ca.attr_vals.attrlist4_len, 4u);
  EXPECT_EQ(o.claim.claim, CLAIM_NULL);
  EXPECT_EQ(Str(o.claim.open_claim4_u.file), "file.txt");

  const WRITE4args &w = rt.op(4).nfs_argop4_u.opwrite;
  EXPECT_EQ(w.stateid.seqid, 2u);
  EXPECT_EQ(uint8_t(w.stateid.other[11]), 0xbb);
  EXPECT_EQ(U64(w.offset), 4096u);
  EXPECT_EQ(w.stable, FILE_SYNC4);
  EXPECT_EQ(std::string(w.data.data_val, w.data.data_len), "hello");

  const GETATTR4args &g = rt.op(5).nfs_argop4_u.opgetattr;
  ASSERT_EQ(g.attr_request.bitmap4_len, 2u);
  EXPECT_NE(g.attr_request.bitmap4_val[0] & (1u << 4), 0u);  // size

  const READDIR4args &rd = rt.op(6).nfs_argop4_u.opreaddir;
  EXPECT_EQ(U64(rd.cookie), 5u);
  EXPECT_EQ(std::string(rd.cookieverf, 8), "12345678");
  EXPECT_EQ(rd.dircount, 4096u);
  EXPECT_EQ(rd.maxcount, 32768u);
  ASSERT_EQ(rd.attr_request.bitmap4_len, 1u);
  EXPECT_EQ(rd.attr_request.bitmap4_val[0], (1u << 1) | (1u << 19));

  const LOCK4args &l = rt.op(7).nfs_argop4_u.oplock;
  EXPECT_EQ(l.locktype, WRITE_LT);
  EXPECT_EQ(U64(l.length), UINT64_MAX);
  ASSERT_TRUE(l.locker.new_lock_owner);
  EXPECT_EQ(l.locker.locker4_u.open_owner.open_seqid, 8u);
  EXPECT_EQ(U64(l.locker.locker4_u.open_owner.lock_owner.clientid), 0xabcdefu);

  EXPECT_EQ(U64(rt.op(8).nfs_argop4_u.oplockt.owner.clientid), 0xabcdefu);
  EXPECT_EQ(U64(rt.op(9).nfs_argop4_u.oprenew.clientid), 0xabcdefu);

  const SETCLIENTID4args &s = rt.op(10).nfs_argop4_u.opsetclientid;
  EXPECT_EQ(std::string(s.client.verifier, 8), "verif123");
  EXPECT_EQ(std::string(s.client.id.id_val, s.client.id.id_len), "nache-test");
  EXPECT_EQ(s.callback.cb_program, 0x40000000u);
  EXPECT_STREQ(s.callback.cb_location.r_netid, "tcp");
  EXPECT_STREQ(s.callback.cb_location.r_addr, "127.0.0.1.8.1");
  EXPECT_EQ(s.callback_ident, 9u);
}

TEST(CompoundTest, FillClientidOverwritesOnlyAutoIds) {
  Compound c;
  OpenArgs open;
  open.clientid = 5;  // explicit: kept
  c.Open(open).Renew(0);
  c.FillClientid(1);
  c.FillClientid(2);  // a retry after recovery gets the new id
  ArgsRoundTrip rt(&c);
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(U64(rt.op(0).nfs_argop4_u.opopen.owner.clientid), 5u);
  EXPECT_EQ(U64(rt.op(1).nfs_argop4_u.oprenew.clientid), 2u);
}

TEST(CompoundTest, SizeHintBoundsEncodedSize) {
  std::string big(1 << 20, 'x');
  std::vector<Compound> cs(5);
  cs[0].Putrootfh().Getfh();
  cs[1]
      .SetTag(std::string(300, 't'))
      .Putfh(std::string(128, 'f'))
      .Lookup(std::string(255, 'n'))
      .Getfh()
      .Getattr(kAttrsObject);
  cs[2]
      .Putfh("fh")
      .Write(StateId(), 0, StableHow::kUnstable, big.data(),
             uint32_t(big.size()))
      .Getattr(kAttrSize);
  Attrs all;
  all.mask = kAttrSize | kAttrMode | kAttrOwner | kAttrOwnerGroup | kAttrAtime |
             kAttrMtime;
  all.uid = all.gid = 4294967295u;
  cs[3]
      .Putfh("fh")
      .Setattr(StateId(), all)
      .Create(FileType::kLnk, std::string(255, 'l'), all,
              std::string(1000, 'p'))
      .Rename(std::string(255, 'a'), std::string(255, 'b'))
      .VerifyChange(1)
      .NverifyChange(2);
  OpenArgs open;
  open.owner = std::string(1024, 'o');
  open.name = std::string(255, 'n');
  open.create = OpenArgs::Create::kGuarded;
  open.create_attrs = all;
  LockArgs lock;
  lock.new_lock_owner = true;
  lock.owner = std::string(1024, 'l');
  cs[4]
      .Open(open)
      .Lock(lock)
      .Locku(LockType::kRead, 1, StateId(), 0, 1)
      .ReleaseLockowner(0, std::string(1024, 'r'))
      .Setclientid("12345678", std::string(1024, 'i'), 1, "tcp",
                   "255.255.255.255.255.255", 1);
  for (size_t i = 0; i < cs.size(); i++) {
    ArgsRoundTrip rt(&cs[i], 2 << 20);
    ASSERT_TRUE(rt.ok()) << i;
    EXPECT_LE(rt.encoded_size(), cs[i].EncodedSizeHint()) << i;
  }
}

TEST(CompoundTest, OpNamesAndMoves) {
  EXPECT_STREQ(OpName(Op::kSetclientidConfirm), "SETCLIENTID_CONFIRM");
  Compound a;
  a.SetTag("moved").Putrootfh();
  Compound b(std::move(a));
  EXPECT_EQ(b.tag(), "moved");
  EXPECT_EQ(b.size(), 1u);
}

// The op table (ops.h): every row's number and name agree with libnfs'
// RFC numbering, session ops are not compound ops, and a number no row
// has is UNKNOWN.
TEST(CompoundTest, OpTableRowsAgreeWithTheRfcNumbers) {
  EXPECT_EQ(uint32_t(Op::kOpenDowngrade), uint32_t(OP_OPEN_DOWNGRADE));
  EXPECT_EQ(uint32_t(Op::kReleaseLockowner), uint32_t(OP_RELEASE_LOCKOWNER));
  EXPECT_EQ(uint32_t(Op::kSequence), 53u);
  EXPECT_EQ(kCompoundOpSlots, 76u);         // REMOVEXATTR (RFC 8276) is 75
  EXPECT_EQ(uint32_t(Op::kAllocate), 59u);  // RFC 7862
  EXPECT_EQ(uint32_t(Op::kDeallocate), 62u);
  EXPECT_EQ(uint32_t(Op::kCopy), 60u);
  EXPECT_EQ(uint32_t(Op::kReadPlus), 68u);
  EXPECT_EQ(uint32_t(Op::kSeek), 69u);
  EXPECT_EQ(uint32_t(Op::kGetxattr), 72u);  // RFC 8276
  EXPECT_TRUE(IsNfs42Op(uint32_t(Op::kListxattrs)));
  EXPECT_FALSE(IsNfs42Op(uint32_t(Op::kWrite)));
  EXPECT_TRUE(IsCompoundOp(uint32_t(Op::kWrite)));
  EXPECT_FALSE(IsCompoundOp(uint32_t(Op::kSequence)));
  EXPECT_FALSE(IsCompoundOp(7));  // LINK is 11; 7 is DELEGPURGE, unused
  EXPECT_STREQ(OpName(Op::kSequence), "SEQUENCE");
  EXPECT_STREQ(OpName(Op(7)), "UNKNOWN");
  size_t rows = 0;
#define COUNT_ROW(e, n, s, r) \
  rows++;                     \
  EXPECT_STREQ(OpName(Op::e), s);
  NACHE_COMPOUND_OPS(COUNT_ROW)
#undef COUNT_ROW
  EXPECT_EQ(rows, 42u);
}

// --- Reply decoding -------------------------------------------------------

// Owns a hand-built COMPOUND4res and everything it points to.
class ReplyBuilder {
 public:
  nfs_resop4 &Add(nfs_opnum4 op, uint32_t status) {
    nfs_resop4 r;
    std::memset(&r, 0, sizeof(r));
    r.resop = op;
    // Every arm starts with its nfsstat4.
    *reinterpret_cast<nfsstat4 *>(&r.nfs_resop4_u) = nfsstat4(status);
    ops_.push_back(r);
    return ops_.back();
  }
  char *Keep(const std::string &s) {
    strings_.push_back(s);
    return &strings_.back()[0];
  }
  fattr4 Fattr(std::vector<uint32_t> bitmap, const std::string &list) {
    bitmaps_.push_back(std::move(bitmap));
    fattr4 f;
    f.attrmask.bitmap4_len = u_int(bitmaps_.back().size());
    f.attrmask.bitmap4_val = bitmaps_.back().data();
    f.attr_vals.attrlist4_len = u_int(list.size());
    f.attr_vals.attrlist4_val = Keep(list);
    return f;
  }
  entry4 *Entry(uint64_t cookie, const std::string &name, fattr4 attrs) {
    entries_.emplace_back();
    entry4 &e = entries_.back();
    std::memset(&e, 0, sizeof(e));
    e.cookie = cookie;
    e.name.utf8string_len = u_int(name.size());
    e.name.utf8string_val = Keep(name);
    e.attrs = attrs;
    return &e;
  }
  const COMPOUND4res *Get(uint32_t status) {
    std::vector<nfs_resop4> flat(ops_.begin(), ops_.end());
    flat_ = flat;
    std::memset(&res_, 0, sizeof(res_));
    res_.status = nfsstat4(status);
    res_.resarray.resarray_len = u_int(flat_.size());
    res_.resarray.resarray_val = flat_.data();
    return &res_;
  }

 private:
  std::deque<nfs_resop4> ops_;
  std::vector<nfs_resop4> flat_;
  std::deque<std::string> strings_;
  std::deque<std::vector<uint32_t>> bitmaps_;
  std::deque<entry4> entries_;
  COMPOUND4res res_;
};

// The XDR of res as a server sends it (libnfs' encoder), decoded by c as an
// NFSv4.0 reply.
std::string EncodeRes(const COMPOUND4res *res) {
  std::vector<char> buf(1 << 16);
  ZDR z;
  zdrmem_create(&z, buf.data(), u_int(buf.size()), ZDR_ENCODE);
  COMPOUND4res copy = *res;
  char tag[] = "t";
  copy.tag.utf8string_len = 1;
  copy.tag.utf8string_val = tag;
  bool ok = zdr_COMPOUND4res(&z, &copy);
  const uint32_t used = zdr_getpos(&z);
  zdr_destroy(&z);
  EXPECT_TRUE(ok);
  return std::string(buf.data(), ok ? used : 0);
}

bool Decode(const Compound &c, const COMPOUND4res *res, CompoundReply *out) {
  std::string wire = EncodeRes(res);
  return c.DecodeWire(wire.data(), wire.size(), out, nullptr);
}

std::string Be32(uint32_t v) {
  return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}
std::string Be64(uint64_t v) {
  return Be32(uint32_t(v >> 32)) + Be32(uint32_t(v));
}
std::string XdrOpaque(const std::string &s) {
  return Be32(uint32_t(s.size())) + s +
         std::string((4 - s.size() % 4) % 4, '\0');
}

TEST(CompoundDecodeTest, Getattr) {
  Compound c;
  c.Putfh("fh").Getattr(kAttrsObject);
  ReplyBuilder rb;
  rb.Add(OP_PUTFH, NFS4_OK);
  nfs_resop4 &g = rb.Add(OP_GETATTR, NFS4_OK);
  // type(1) size(4) mode(33) owner(36) owner_group(37) time_modify(53)
  std::string list = Be32(1) + Be64(777) + Be32(0600) + XdrOpaque("1000") +
                     XdrOpaque("nobody@x") + Be64(50) + Be32(6);
  g.nfs_resop4_u.opgetattr.GETATTR4res_u.resok4.obj_attributes = rb.Fattr(
      {(1u << 1) | (1u << 4), (1u << 1) | (1u << 4) | (1u << 5) | (1u << 21)},
      list);
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, rb.Get(NFS4_OK), &reply));
  EXPECT_EQ(reply.status, kNfs4Ok);
  EXPECT_EQ(reply.FailedIndex(), -1);
  const OpResult *r = reply.Find(Op::kGetattr);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->attrs.type, FileType::kReg);
  EXPECT_EQ(U64(r->attrs.size), 777u);
  EXPECT_EQ(r->attrs.mode, 0600u);
  EXPECT_EQ(r->attrs.uid, 1000u);
  EXPECT_EQ(r->attrs.gid, 65534u);
  EXPECT_EQ(r->attrs.mtime.sec, 50);
  EXPECT_EQ(r->attrs.mtime.nsec, 6u);
}

TEST(CompoundDecodeTest, MalformedAttrsAreADecodeError) {
  Compound c;
  c.Getattr(kAttrSize);
  ReplyBuilder rb;
  nfs_resop4 &g = rb.Add(OP_GETATTR, NFS4_OK);
  g.nfs_resop4_u.opgetattr.GETATTR4res_u.resok4.obj_attributes =
      rb.Fattr({1u << 4}, Be32(1));  // size needs 8 bytes
  CompoundReply reply;
  EXPECT_FALSE(Decode(c, rb.Get(NFS4_OK), &reply));
}

TEST(CompoundDecodeTest, ReaddirWithFilehandles) {
  Compound c;
  c.Putfh("dir").Readdir(0, Verifier(8, '\0'), 8192, 32768, kAttrType, true);
  ReplyBuilder rb;
  rb.Add(OP_PUTFH, NFS4_OK);
  nfs_resop4 &r = rb.Add(OP_READDIR, NFS4_OK);
  std::vector<uint32_t> bm = {(1u << 1) | (1u << 19)};
  entry4 *second = rb.Entry(2, "b", rb.Fattr(bm, Be32(2) + XdrOpaque("fh-b")));
  entry4 *first = rb.Entry(1, "a", rb.Fattr(bm, Be32(1) + XdrOpaque("fh-a")));
  first->nextentry = second;
  READDIR4resok &ok = r.nfs_resop4_u.opreaddir.READDIR4res_u.resok4;
  std::memcpy(ok.cookieverf, "cookieve", 8);
  ok.reply.entries = first;
  ok.reply.eof = 1;
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, rb.Get(NFS4_OK), &reply));
  const OpResult *res = reply.Find(Op::kReaddir);
  ASSERT_NE(res, nullptr);
  EXPECT_TRUE(res->eof);
  EXPECT_EQ(res->verifier, "cookieve");
  ASSERT_EQ(res->entries.size(), 2u);
  EXPECT_EQ(U64(res->entries[0].cookie), 1u);
  EXPECT_EQ(res->entries[0].name, "a");
  EXPECT_EQ(res->entries[0].fh, "fh-a");
  EXPECT_EQ(res->entries[0].attrs.type, FileType::kReg);
  EXPECT_EQ(res->entries[1].name, "b");
  EXPECT_EQ(res->entries[1].fh, "fh-b");
  EXPECT_EQ(res->entries[1].attrs.type, FileType::kDir);
}

TEST(CompoundDecodeTest, ReadGoesToDest) {
  char dest[16];
  std::memset(dest, '.', sizeof(dest));
  Compound c;
  c.Putfh("f").Read(StateId::Bypass(), 0, 8, dest);
  ReplyBuilder rb;
  rb.Add(OP_PUTFH, NFS4_OK);
  nfs_resop4 &r = rb.Add(OP_READ, NFS4_OK);
  READ4resok &ok = r.nfs_resop4_u.opread.READ4res_u.resok4;
  ok.eof = 1;
  ok.data.data_len = 5;
  ok.data.data_val = rb.Keep("abcde");
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, rb.Get(NFS4_OK), &reply));
  const OpResult *res = reply.Find(Op::kRead);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->count, 5u);
  EXPECT_TRUE(res->eof);
  EXPECT_EQ(std::string(dest, 6), "abcde.");

  // More data than asked for must not reach the buffer.
  ok.data.data_len = 9;
  ok.data.data_val = rb.Keep("123456789");
  std::memset(dest, '.', sizeof(dest));
  EXPECT_FALSE(Decode(c, rb.Get(NFS4_OK), &reply));
  EXPECT_EQ(std::string(dest, 1), ".");
}

TEST(CompoundDecodeTest, OpenWithDelegation) {
  for (auto type : {OPEN_DELEGATE_READ, OPEN_DELEGATE_WRITE}) {
    Compound c;
    OpenArgs args;
    args.name = "f";
    c.Putfh("d").Open(args).Getfh();
    ReplyBuilder rb;
    rb.Add(OP_PUTFH, NFS4_OK);
    nfs_resop4 &o = rb.Add(OP_OPEN, NFS4_OK);
    OPEN4resok &ok = o.nfs_resop4_u.opopen.OPEN4res_u.resok4;
    ok.stateid.seqid = 1;
    std::memset(ok.stateid.other, 0x11, 12);
    ok.cinfo.atomic = 1;
    ok.cinfo.before = 10;
    ok.cinfo.after = 11;
    ok.rflags = 2;
    ok.delegation.delegation_type = type;
    stateid4 &ds = type == OPEN_DELEGATE_READ
                       ? ok.delegation.open_delegation4_u.read.stateid
                       : ok.delegation.open_delegation4_u.write.stateid;
    ds.seqid = 9;
    std::memset(ds.other, 0x22, 12);
    if (type == OPEN_DELEGATE_WRITE) {
      ok.delegation.open_delegation4_u.write.space_limit.limitby =
          NFS_LIMIT_SIZE;
      ok.delegation.open_delegation4_u.write.space_limit.nfs_space_limit4_u
          .filesize = 1 << 20;
    }
    nfs_resop4 &g = rb.Add(OP_GETFH, NFS4_OK);
    g.nfs_resop4_u.opgetfh.GETFH4res_u.resok4.object.nfs_fh4_len = 3;
    g.nfs_resop4_u.opgetfh.GETFH4res_u.resok4.object.nfs_fh4_val =
        rb.Keep("new");
    CompoundReply reply;
    ASSERT_TRUE(Decode(c, rb.Get(NFS4_OK), &reply));
    const OpResult *res = reply.Find(Op::kOpen);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(res->stateid.seqid, 1u);
    EXPECT_EQ(res->stateid.other[0], 0x11);
    EXPECT_EQ(res->open_rflags, 2u);
    EXPECT_TRUE(res->cinfo.atomic);
    EXPECT_EQ(res->cinfo.after, 11u);
    EXPECT_EQ(res->delegation.type, type == OPEN_DELEGATE_READ
                                        ? DelegationType::kRead
                                        : DelegationType::kWrite);
    EXPECT_EQ(res->delegation.stateid.seqid, 9u);
    EXPECT_EQ(res->delegation.stateid.other[11], 0x22);
    EXPECT_EQ(reply.Find(Op::kGetfh)->fh, "new");
  }
}

TEST(CompoundDecodeTest, LockDenied) {
  Compound c;
  LockArgs args;
  c.Putfh("f").Lock(args);
  ReplyBuilder rb;
  rb.Add(OP_PUTFH, NFS4_OK);
  nfs_resop4 &l = rb.Add(OP_LOCK, NFS4ERR_DENIED);
  LOCK4denied &d = l.nfs_resop4_u.oplock.LOCK4res_u.denied;
  d.offset = 10;
  d.length = 20;
  d.locktype = WRITE_LT;
  d.owner.clientid = 77;
  d.owner.owner.owner_len = 5;
  d.owner.owner.owner_val = rb.Keep("other");
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, rb.Get(NFS4ERR_DENIED), &reply));
  EXPECT_EQ(reply.status, kNfs4ErrDenied);
  EXPECT_EQ(reply.FailedIndex(), 1);
  const OpResult *res = reply.Find(Op::kLock);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->status, kNfs4ErrDenied);
  EXPECT_EQ(U64(res->denied.offset), 10u);
  EXPECT_EQ(U64(res->denied.length), 20u);
  EXPECT_EQ(res->denied.type, LockType::kWrite);
  EXPECT_EQ(res->denied.owner_clientid, 77u);
  EXPECT_EQ(res->denied.owner, "other");
}

TEST(CompoundDecodeTest, Setclientid) {
  Compound c;
  c.Setclientid("12345678", "id", 1, "tcp", "0.0.0.0.0.0", 1);
  ReplyBuilder rb;
  nfs_resop4 &s = rb.Add(OP_SETCLIENTID, NFS4_OK);
  SETCLIENTID4resok &ok = s.nfs_resop4_u.opsetclientid.SETCLIENTID4res_u.resok4;
  ok.clientid = 0x1234567890ull;
  std::memcpy(ok.setclientid_confirm, "confirm!", 8);
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, rb.Get(NFS4_OK), &reply));
  EXPECT_EQ(U64(reply.results[0].clientid), 0x1234567890ull);
  EXPECT_EQ(reply.results[0].verifier, "confirm!");

  ReplyBuilder inuse;
  nfs_resop4 &u = inuse.Add(OP_SETCLIENTID, NFS4ERR_CLID_INUSE);
  clientaddr4 &using_addr =
      u.nfs_resop4_u.opsetclientid.SETCLIENTID4res_u.client_using;
  using_addr.r_netid = inuse.Keep("tcp");
  using_addr.r_addr = inuse.Keep("10.0.0.1.3.4");
  ASSERT_TRUE(Decode(c, inuse.Get(NFS4ERR_CLID_INUSE), &reply));
  EXPECT_EQ(reply.status, kNfs4ErrClidInuse);
  EXPECT_EQ(reply.results[0].data, "tcp 10.0.0.1.3.4");
}

TEST(CompoundDecodeTest, ShortLongAndMismatchedReplies) {
  Compound c;
  c.Putfh("f").Lookup("x").Getfh();
  // The server stopped at LOOKUP.
  ReplyBuilder shortr;
  shortr.Add(OP_PUTFH, NFS4_OK);
  shortr.Add(OP_LOOKUP, NFS4ERR_NOENT);
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, shortr.Get(NFS4ERR_NOENT), &reply));
  EXPECT_EQ(reply.results.size(), 2u);
  EXPECT_EQ(reply.FailedIndex(), 1);
  EXPECT_EQ(reply.Find(Op::kGetfh), nullptr);

  ReplyBuilder mismatched;
  mismatched.Add(OP_PUTFH, NFS4_OK);
  mismatched.Add(OP_GETFH, NFS4_OK);
  EXPECT_FALSE(Decode(c, mismatched.Get(NFS4_OK), &reply));

  ReplyBuilder toolong;
  for (int i = 0; i < 4; i++) toolong.Add(OP_PUTFH, NFS4_OK);
  EXPECT_FALSE(Decode(c, toolong.Get(NFS4_OK), &reply));

  ReplyBuilder illegal;
  illegal.Add(OP_ILLEGAL, NFS4ERR_OP_ILLEGAL);
  ASSERT_TRUE(Decode(c, illegal.Get(NFS4ERR_OP_ILLEGAL), &reply));
  EXPECT_EQ(reply.results[0].status, kNfs4ErrOpIllegal);
}

TEST(CompoundDecodeTest, WriteCommitAccessRenameReadlink) {
  Compound c;
  c.Putfh("f")
      .Write(StateId(), 0, StableHow::kUnstable, "x", 1)
      .Commit(0, 0)
      .Access(kAccessRead | kAccessModify)
      .Rename("a", "b")
      .Readlink();
  ReplyBuilder rb;
  rb.Add(OP_PUTFH, NFS4_OK);
  WRITE4resok &w =
      rb.Add(OP_WRITE, NFS4_OK).nfs_resop4_u.opwrite.WRITE4res_u.resok4;
  w.count = 1;
  w.committed = DATA_SYNC4;
  std::memcpy(w.writeverf, "wverf001", 8);
  std::memcpy(rb.Add(OP_COMMIT, NFS4_OK)
                  .nfs_resop4_u.opcommit.COMMIT4res_u.resok4.writeverf,
              "wverf002", 8);
  ACCESS4resok &a =
      rb.Add(OP_ACCESS, NFS4_OK).nfs_resop4_u.opaccess.ACCESS4res_u.resok4;
  a.supported = kAccessRead | kAccessModify;
  a.access = kAccessRead;
  RENAME4resok &rn =
      rb.Add(OP_RENAME, NFS4_OK).nfs_resop4_u.oprename.RENAME4res_u.resok4;
  rn.source_cinfo.after = 3;
  rn.target_cinfo.after = 4;
  linktext4 &lt = rb.Add(OP_READLINK, NFS4_OK)
                      .nfs_resop4_u.opreadlink.READLINK4res_u.resok4.link;
  lt.utf8string_len = 6;
  lt.utf8string_val = rb.Keep("target");
  CompoundReply reply;
  ASSERT_TRUE(Decode(c, rb.Get(NFS4_OK), &reply));
  EXPECT_EQ(reply.Find(Op::kWrite)->count, 1u);
  EXPECT_EQ(reply.Find(Op::kWrite)->committed, StableHow::kDataSync);
  EXPECT_EQ(reply.Find(Op::kWrite)->verifier, "wverf001");
  EXPECT_EQ(reply.Find(Op::kCommit)->verifier, "wverf002");
  EXPECT_EQ(reply.Find(Op::kAccess)->access, uint32_t(kAccessRead));
  EXPECT_EQ(reply.Find(Op::kRename)->cinfo.after, 3u);
  EXPECT_EQ(reply.Find(Op::kRename)->cinfo2.after, 4u);
  EXPECT_EQ(reply.Find(Op::kReadlink)->data, "target");
}

// A WRITE reply claiming more bytes than were sent, or a stability that
// does not exist, cannot be true: the whole reply is refused (a caller
// would mark bytes that never left it as written, or read past its buffer).
TEST(CompoundDecodeTest, AWriteReplyBeyondWhatWasSentIsRefused) {
  struct Case {
    uint32_t count;
    uint32_t committed;
    bool ok;
  };
  for (const Case &k :
       {Case{4, FILE_SYNC4, true}, Case{3, UNSTABLE4, true},
        Case{5, FILE_SYNC4, false}, Case{0xffffffffu, UNSTABLE4, false},
        Case{4, FILE_SYNC4 + 1, false}}) {
    Compound c;
    c.Putfh("f").Write(StateId(), 0, StableHow::kUnstable, "abcd", 4);
    ReplyBuilder rb;
    rb.Add(OP_PUTFH, NFS4_OK);
    WRITE4resok &w =
        rb.Add(OP_WRITE, NFS4_OK).nfs_resop4_u.opwrite.WRITE4res_u.resok4;
    w.count = k.count;
    w.committed = stable_how4(k.committed);
    std::memcpy(w.writeverf, "wverf001", 8);
    CompoundReply reply;
    EXPECT_EQ(Decode(c, rb.Get(NFS4_OK), &reply), k.ok)
        << "count " << k.count << ", committed " << k.committed;
    if (k.ok) EXPECT_EQ(reply.Find(Op::kWrite)->count, k.count);
  }
}

// --- The op table's result shapes (ops.h) ---------------------------------
//
// Every operation whose row gives a shape has its result decoded by that
// shape alone. Each case below states the shape independently of the
// table and scripts a reply of that shape (written with rpc::XdrOut),
// followed by a GETFH result: a shape column that reads too little, too
// much or the wrong field fails the decode or the values, and a body cut
// short must be refused.

using rpc::XdrOut;

StateId Sid() {
  StateId s;
  s.seqid = 7;
  for (size_t i = 0; i < sizeof(s.other); i++) s.other[i] = uint8_t('a' + i);
  return s;
}

// One operation with a shaped result: its builder, and the shape its
// result has by the RFCs (not read from the table).
struct ShapedOp {
  Op op;
  ResultShape shape;
  std::function<void(Compound *)> add;
};

const std::vector<ShapedOp> &ShapedOps() {
  static const std::vector<ShapedOp> *ops = new std::vector<ShapedOp>{
      {Op::kClose, ResultShape::kStateid,
       [](Compound *c) { c->Close(1, Sid()); }},
      {Op::kOpenConfirm, ResultShape::kStateid,
       [](Compound *c) { c->OpenConfirm(Sid(), 2); }},
      {Op::kOpenDowngrade, ResultShape::kStateid,
       [](Compound *c) {
         c->OpenDowngrade(Sid(), 3, kShareAccessRead, kShareDenyNone);
       }},
      {Op::kLocku, ResultShape::kStateid,
       [](Compound *c) { c->Locku(LockType::kRead, 4, Sid(), 0, 10); }},
      {Op::kCommit, ResultShape::kVerifier,
       [](Compound *c) { c->Commit(0, 0); }},
      {Op::kLink, ResultShape::kChangeInfo,
       [](Compound *c) { c->Link("new"); }},
      {Op::kRemove, ResultShape::kChangeInfo,
       [](Compound *c) { c->Remove("old"); }},
      {Op::kSetxattr, ResultShape::kChangeInfo,
       [](Compound *c) { c->Setxattr(XattrOption::kEither, "k", "v"); }},
      {Op::kRemovexattr, ResultShape::kChangeInfo,
       [](Compound *c) { c->Removexattr("k"); }},
      {Op::kAllocate, ResultShape::kStatus,
       [](Compound *c) { c->Allocate(Sid(), 0, 1); }},
      {Op::kDeallocate, ResultShape::kStatus,
       [](Compound *c) { c->Deallocate(Sid(), 0, 1); }},
      {Op::kDelegReturn, ResultShape::kStatus,
       [](Compound *c) { c->DelegReturn(Sid()); }},
      {Op::kLookup, ResultShape::kStatus,
       [](Compound *c) { c->Lookup("name"); }},
      {Op::kLookupp, ResultShape::kStatus, [](Compound *c) { c->Lookupp(); }},
      {Op::kNverify, ResultShape::kStatus,
       [](Compound *c) { c->NverifyChange(9); }},
      {Op::kPutfh, ResultShape::kStatus, [](Compound *c) { c->Putfh("fh"); }},
      {Op::kPutrootfh, ResultShape::kStatus,
       [](Compound *c) { c->Putrootfh(); }},
      {Op::kRenew, ResultShape::kStatus, [](Compound *c) { c->Renew(5); }},
      {Op::kRestorefh, ResultShape::kStatus,
       [](Compound *c) { c->Restorefh(); }},
      {Op::kSavefh, ResultShape::kStatus, [](Compound *c) { c->Savefh(); }},
      {Op::kSetclientidConfirm, ResultShape::kStatus,
       [](Compound *c) { c->SetclientidConfirm(5, "confirm!"); }},
      {Op::kVerify, ResultShape::kStatus,
       [](Compound *c) { c->VerifyChange(9); }},
      {Op::kReleaseLockowner, ResultShape::kStatus,
       [](Compound *c) { c->ReleaseLockowner(5, "owner"); }},
  };
  return *ops;
}

// The body a result of shape has after an NFS4_OK status.
std::string Body(ResultShape shape) {
  std::string b;
  XdrOut x(&b);
  switch (shape) {
    case ResultShape::kStateid: {
      StateId s = Sid();
      x.U32(s.seqid);
      x.Fixed(s.other, sizeof(s.other));
      break;
    }
    case ResultShape::kChangeInfo:
      x.Bool(true);
      x.U64(11);
      x.U64(12);
      break;
    case ResultShape::kVerifier: x.Fixed("wverf001", 8); break;
    default: break;
  }
  return b;
}

// An NFSv4.0 reply: the compound's status, then each result's number,
// status and body as given.
struct Result {
  Op op;
  uint32_t status;
  std::string body;
};
std::string Reply(uint32_t status, const std::vector<Result> &results) {
  std::string b;
  XdrOut x(&b);
  x.U32(status);
  x.Opaque(std::string("t"));
  x.U32(uint32_t(results.size()));
  for (const Result &r : results) {
    x.U32(uint32_t(r.op));
    x.U32(r.status);
    x.Raw(r.body);
  }
  return b;
}

bool DecodeXdr(const Compound &c, const std::string &wire, CompoundReply *out) {
  return c.DecodeWire(wire.data(), wire.size(), out, nullptr);
}

// Every row with a shape other than kSpecial has a case here, and the
// table's shape is the one the case states.
TEST(OpTableTest, EveryShapedRowHasACase) {
  size_t shaped = 0;
#define NACHE_CHECK_ROW(e, n, s, r)                                       \
  if (ResultShape::r != ResultShape::kSpecial) {                          \
    shaped++;                                                             \
    bool found = false;                                                   \
    for (const ShapedOp &c : ShapedOps()) found = found || c.op == Op::e; \
    EXPECT_TRUE(found) << s << " has a shape but no case here";           \
  }
  NACHE_COMPOUND_OPS(NACHE_CHECK_ROW)
#undef NACHE_CHECK_ROW
  EXPECT_EQ(shaped, ShapedOps().size());
  for (const ShapedOp &c : ShapedOps())
    EXPECT_EQ(int(ResultShapeOf(c.op)), int(c.shape)) << OpName(c.op);
  EXPECT_EQ(ResultShapeOf(Op::kSequence), ResultShape::kSession);
  EXPECT_EQ(ResultShapeOf(Op::kOpen), ResultShape::kSpecial);
}

TEST(OpTableTest, EachShapeDecodesItsBody) {
  for (const ShapedOp &s : ShapedOps()) {
    SCOPED_TRACE(OpName(s.op));
    Compound c;
    s.add(&c);
    c.Getfh();
    std::string fh;
    XdrOut(&fh).Opaque(std::string("fh-after"));
    CompoundReply out;
    ASSERT_TRUE(DecodeXdr(c,
                          Reply(kNfs4Ok, {{s.op, kNfs4Ok, Body(s.shape)},
                                          {Op::kGetfh, kNfs4Ok, fh}}),
                          &out));
    ASSERT_EQ(out.results.size(), 2u);
    const OpResult &r = out.results[0];
    EXPECT_EQ(r.op, s.op);
    switch (s.shape) {
      case ResultShape::kStateid:
        EXPECT_EQ(r.stateid.seqid, 7u);
        EXPECT_EQ(std::memcmp(r.stateid.other, "abcdefghijkl", 12), 0);
        break;
      case ResultShape::kChangeInfo:
        EXPECT_TRUE(r.cinfo.atomic);
        EXPECT_EQ(r.cinfo.before, 11u);
        EXPECT_EQ(r.cinfo.after, 12u);
        break;
      case ResultShape::kVerifier: EXPECT_EQ(r.verifier, "wverf001"); break;
      default: break;
    }
    // What follows was read from where the shape's body ends.
    EXPECT_EQ(out.results[1].fh, "fh-after");
  }
}

TEST(OpTableTest, AShapedBodyCutShortIsRefused) {
  for (const ShapedOp &s : ShapedOps()) {
    const std::string body = Body(s.shape);
    if (body.empty()) continue;
    SCOPED_TRACE(OpName(s.op));
    Compound c;
    s.add(&c);
    CompoundReply out;
    EXPECT_TRUE(DecodeXdr(c, Reply(kNfs4Ok, {{s.op, kNfs4Ok, body}}), &out));
    EXPECT_FALSE(DecodeXdr(
        c, Reply(kNfs4Ok, {{s.op, kNfs4Ok, body.substr(0, body.size() - 4)}}),
        &out));
    EXPECT_TRUE(out.results.empty());
  }
}

// A failed operation's result is its status alone, whatever its shape.
TEST(OpTableTest, AFailureHasNoBody) {
  for (const ShapedOp &s : ShapedOps()) {
    SCOPED_TRACE(OpName(s.op));
    Compound c;
    s.add(&c);
    c.Getfh();
    CompoundReply out;
    ASSERT_TRUE(
        DecodeXdr(c, Reply(kNfs4ErrIo, {{s.op, kNfs4ErrIo, ""}}), &out));
    ASSERT_EQ(out.results.size(), 1u);
    EXPECT_EQ(out.results[0].status, kNfs4ErrIo);
    EXPECT_EQ(out.status, kNfs4ErrIo);
  }
}

}  // namespace
}  // namespace upstream
}  // namespace nache
