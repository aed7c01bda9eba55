// NFSv4.2's operations on the wire (RFC 7862, RFC 8276): encoded by us
// between libnfs' 4.0 operations in a minor-version-2 COMPOUND, refused in
// any other, and their replies decoded with every count and length bounded.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rpc/xdr.h"
#include "upstream/compound.h"
#include "upstream/nfs41.h"

namespace nache {
namespace upstream {
namespace {

using rpc::XdrIn;
using rpc::XdrOut;

constexpr uint32_t kOpPutfh = 22, kOpGetattr = 9, kOpSequence = 53,
                   kOpAllocate = 59, kOpCopy = 60, kOpDeallocate = 62,
                   kOpReadPlus = 68, kOpSeek = 69, kOpGetxattr = 72,
                   kOpSetxattr = 73, kOpListxattrs = 74, kOpRemovexattr = 75;

StateId Sid() {
  StateId s;
  s.seqid = 7;
  for (size_t i = 0; i < sizeof(s.other); i++) s.other[i] = char('a' + i);
  return s;
}

uint32_t U32(XdrIn *in) {
  uint32_t v = 0xdeadbeef;
  EXPECT_TRUE(in->U32(&v));
  return v;
}
uint64_t U64(XdrIn *in) {
  uint64_t v = ~0ull;
  EXPECT_TRUE(in->U64(&v));
  return v;
}
std::string Str(XdrIn *in) {
  std::string s;
  EXPECT_TRUE(in->Opaque(&s, 1 << 20));
  return s;
}
void ExpectSid(XdrIn *in) {
  EXPECT_EQ(U32(in), 7u);
  char other[12];
  ASSERT_TRUE(in->Fixed(other, sizeof other));
  EXPECT_EQ(std::string(other, 12), "abcdefghijkl");
}

// Reads the header and SEQUENCE of an encoded 4.x COMPOUND; returns the
// minor version and the number of operations after SEQUENCE.
void Header(XdrIn *in, uint32_t *minor, uint32_t *nops) {
  EXPECT_EQ(Str(in), "t42");
  *minor = U32(in);
  *nops = U32(in) - 1;
  EXPECT_EQ(U32(in), kOpSequence);
  ASSERT_TRUE(in->Skip(16 + 4 * 4));  // sessionid, seqid, slot, high, cache
}

TEST(Nfs42WireTest, OperationsGoOutBetweenLibnfsOnesInMinorVersionTwo) {
  Compound c;
  c.SetTag("t42")
      .Putfh("fh1")
      .Allocate(Sid(), 4096, 1 << 20)
      .Deallocate(Sid(), 8192, 512)
      .Seek(Sid(), 100, SeekWhat::kHole)
      .Getattr(kAttrChange)
      .Getxattr("color")
      .Setxattr(XattrOption::kCreate, "shape", std::string("r\0und", 5))
      .Listxattrs(33, 4000)
      .Removexattr("gone");
  nfs41::SequenceArgs seq;
  std::string b;
  ASSERT_TRUE(c.EncodeWire(&b, &seq, nullptr, 2));
  XdrIn in(b.data(), b.size());
  uint32_t minor, nops;
  Header(&in, &minor, &nops);
  EXPECT_EQ(minor, 2u);
  EXPECT_EQ(nops, 9u);
  EXPECT_EQ(U32(&in), kOpPutfh);
  EXPECT_EQ(Str(&in), "fh1");
  EXPECT_EQ(U32(&in), kOpAllocate);
  ExpectSid(&in);
  EXPECT_EQ(U64(&in), 4096u);
  EXPECT_EQ(U64(&in), 1u << 20);
  EXPECT_EQ(U32(&in), kOpDeallocate);
  ExpectSid(&in);
  EXPECT_EQ(U64(&in), 8192u);
  EXPECT_EQ(U64(&in), 512u);
  EXPECT_EQ(U32(&in), kOpSeek);
  ExpectSid(&in);
  EXPECT_EQ(U64(&in), 100u);
  EXPECT_EQ(U32(&in), 1u) << "NFS4_CONTENT_HOLE";
  EXPECT_EQ(U32(&in), kOpGetattr);
  EXPECT_EQ(U32(&in), 1u);  // one bitmap word (change is attribute 3)
  EXPECT_EQ(U32(&in), 1u << 3);
  EXPECT_EQ(U32(&in), kOpGetxattr);
  EXPECT_EQ(Str(&in), "color");
  EXPECT_EQ(U32(&in), kOpSetxattr);
  EXPECT_EQ(U32(&in), 1u) << "SETXATTR4_CREATE";
  EXPECT_EQ(Str(&in), "shape");
  EXPECT_EQ(Str(&in), std::string("r\0und", 5));
  EXPECT_EQ(U32(&in), kOpListxattrs);
  EXPECT_EQ(U64(&in), 33u);
  EXPECT_EQ(U32(&in), 4000u);
  EXPECT_EQ(U32(&in), kOpRemovexattr);
  EXPECT_EQ(Str(&in), "gone");
  EXPECT_EQ(in.left(), 0u);
  EXPECT_TRUE(c.nfs42_args(1) != nullptr);
  EXPECT_EQ(c.nfs42_args(1)->length, 1u << 20);
  EXPECT_TRUE(c.nfs42_args(0) == nullptr) << "PUTFH is no 4.2 operation";
}

TEST(Nfs42WireTest, NotSentInAnEarlierMinorVersion) {
  Compound c;
  c.Putfh("f").Seek(Sid(), 0, SeekWhat::kData);
  std::string b = "kept";
  EXPECT_FALSE(c.EncodeWire(&b, nullptr)) << "NFSv4.0";
  nfs41::SequenceArgs seq;
  EXPECT_FALSE(c.EncodeWire(&b, &seq, nullptr, 1)) << "NFSv4.1";
  EXPECT_EQ(b, "kept");
  Compound plain;
  plain.SetTag("t42").Putfh("f");
  std::string p;
  ASSERT_TRUE(plain.EncodeWire(&p, &seq, nullptr, 2));
  XdrIn in(p.data(), p.size());
  uint32_t minor, nops;
  Header(&in, &minor, &nops);
  EXPECT_EQ(minor, 2u) << "a 4.2 session's every COMPOUND says 2";
}

// A reply: header, SEQUENCE, then what the test adds.
class Reply {
 public:
  Reply(uint32_t status, uint32_t nres) : x_(&b_) {
    x_.U32(status);
    x_.Opaque(std::string("t"));
    x_.U32(nres + 1);
    x_.U32(kOpSequence);
    x_.U32(kNfs4Ok);
    std::string sid(16, 's');
    x_.Fixed(sid.data(), sid.size());
    for (uint32_t v : {1u, 0u, 0u, 0u, 0u}) x_.U32(v);
  }
  XdrOut &x() { return x_; }
  Reply &Result(uint32_t op, uint32_t status) {
    x_.U32(op);
    x_.U32(status);
    return *this;
  }
  bool Decode(const Compound &c, CompoundReply *out) const {
    nfs41::SequenceRes sr;
    return c.DecodeWire(b_.data(), b_.size(), out, &sr);
  }

 private:
  std::string b_;
  XdrOut x_;
};

void ChangeInfo(XdrOut *x) {
  x->Bool(true);
  x->U64(5);
  x->U64(6);
}

TEST(Nfs42WireTest, RepliesDecode) {
  Compound c;
  c.Putfh("f")
      .Allocate(Sid(), 0, 1)
      .Seek(Sid(), 10, SeekWhat::kData)
      .Getxattr("k")
      .Setxattr(XattrOption::kEither, "k", "v")
      .Listxattrs(0, 4096)
      .Removexattr("k")
      .Deallocate(Sid(), 0, 1);
  Reply r(kNfs4Ok, 8);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpAllocate, kNfs4Ok);
  r.Result(kOpSeek, kNfs4Ok);
  r.x().Bool(false);
  r.x().U64(65536);
  r.Result(kOpGetxattr, kNfs4Ok);
  r.x().Opaque(std::string("blue"));
  r.Result(kOpSetxattr, kNfs4Ok);
  ChangeInfo(&r.x());
  r.Result(kOpListxattrs, kNfs4Ok);
  r.x().U64(77);
  r.x().U32(2);
  r.x().Opaque(std::string("a"));
  r.x().Opaque(std::string("bb"));
  r.x().Bool(true);
  r.Result(kOpRemovexattr, kNfs4Ok);
  ChangeInfo(&r.x());
  r.Result(kOpDeallocate, kNfs4Ok);
  CompoundReply out;
  ASSERT_TRUE(r.Decode(c, &out));
  ASSERT_EQ(out.results.size(), 8u);
  EXPECT_FALSE(out.Find(Op::kSeek)->eof);
  EXPECT_EQ(out.Find(Op::kSeek)->offset, 65536u);
  EXPECT_EQ(out.Find(Op::kGetxattr)->data, "blue");
  EXPECT_EQ(out.Find(Op::kSetxattr)->cinfo.after, 6u);
  EXPECT_EQ(out.Find(Op::kListxattrs)->cookie, 77u);
  EXPECT_EQ(out.Find(Op::kListxattrs)->names,
            (std::vector<std::string>{"a", "bb"}));
  EXPECT_TRUE(out.Find(Op::kListxattrs)->eof);
  EXPECT_EQ(out.Find(Op::kRemovexattr)->cinfo.before, 5u);
}

TEST(Nfs42WireTest, AFailureEndsTheReply) {
  Compound c;
  c.Putfh("f").Getxattr("missing").Getattr(kAttrChange);
  Reply r(kNfs4ErrNoxattr, 2);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpGetxattr, kNfs4ErrNoxattr);
  CompoundReply out;
  ASSERT_TRUE(r.Decode(c, &out));
  EXPECT_EQ(out.status, kNfs4ErrNoxattr);
  EXPECT_EQ(out.Find(Op::kGetattr), nullptr);
}

// Lengths and counts from a hostile server are checked before anything is
// read or allocated.
TEST(Nfs42WireTest, HostileRepliesAreRefused) {
  {  // an xattr value larger than any we accept
    Compound c;
    c.Putfh("f").Getxattr("k");
    Reply r(kNfs4Ok, 2);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpGetxattr, kNfs4Ok);
    r.x().Opaque(std::string(kMaxXattrValue + 1, 'x'));
    CompoundReply out;
    EXPECT_FALSE(r.Decode(c, &out));
  }
  {  // a name count far beyond the bytes there are
    Compound c;
    c.Putfh("f").Listxattrs(0, 4096);
    Reply r(kNfs4Ok, 2);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpListxattrs, kNfs4Ok);
    r.x().U64(0);
    r.x().U32(0x40000000);
    CompoundReply out;
    EXPECT_FALSE(r.Decode(c, &out));
  }
  {  // names beyond the maxcount asked for
    Compound c;
    c.Putfh("f").Listxattrs(0, 64);
    Reply r(kNfs4Ok, 2);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpListxattrs, kNfs4Ok);
    r.x().U64(0);
    r.x().U32(200);
    for (int i = 0; i < 200; i++) r.x().Opaque(std::string(60, 'n'));
    r.x().Bool(true);
    CompoundReply out;
    EXPECT_FALSE(r.Decode(c, &out));
  }
  {  // a SEEK result cut short
    Compound c;
    c.Putfh("f").Seek(Sid(), 0, SeekWhat::kData);
    Reply r(kNfs4Ok, 2);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpSeek, kNfs4Ok);
    r.x().Bool(true);
    CompoundReply out;
    EXPECT_FALSE(r.Decode(c, &out));
  }
  {  // the answer to another operation than the one sent
    Compound c;
    c.Putfh("f").Allocate(Sid(), 0, 1);
    Reply r(kNfs4Ok, 2);
    r.Result(kOpPutfh, kNfs4Ok).Result(kOpDeallocate, kNfs4Ok);
    CompoundReply out;
    EXPECT_FALSE(r.Decode(c, &out));
  }
}

// READ_PLUS goes out as stateid, offset, count.
TEST(Nfs42WireTest, ReadPlusGoesOutLikeRead) {
  char buf[16];
  Compound c;
  c.SetTag("t42").Putfh("f").ReadPlus(Sid(), 1 << 20, sizeof buf, buf);
  nfs41::SequenceArgs seq;
  std::string b;
  ASSERT_TRUE(c.EncodeWire(&b, &seq, nullptr, 2));
  EXPECT_FALSE(c.EncodeWire(&b, &seq, nullptr, 1)) << "NFSv4.1";
  XdrIn in(b.data(), b.size());
  uint32_t minor, nops;
  Header(&in, &minor, &nops);
  EXPECT_EQ(nops, 2u);
  EXPECT_EQ(U32(&in), kOpPutfh);
  EXPECT_EQ(Str(&in), "f");
  EXPECT_EQ(U32(&in), kOpReadPlus);
  ExpectSid(&in);
  EXPECT_EQ(U64(&in), 1u << 20);
  EXPECT_EQ(U32(&in), sizeof buf);
  EXPECT_EQ(in.left(), 0u);
}

// COPY goes out with both stateids, offsets and count, asked consecutive
// and synchronous, naming no source server; its result decodes whole.
TEST(Nfs42WireTest, CopyGoesOutAndItsResultDecodes) {
  Compound c;
  c.SetTag("t42").Putfh("s").Savefh().Putfh("d").Copy(Sid(), Sid(), 10, 20, 30);
  nfs41::SequenceArgs seq;
  std::string b;
  ASSERT_TRUE(c.EncodeWire(&b, &seq, nullptr, 2));
  XdrIn in(b.data(), b.size());
  uint32_t minor, nops;
  Header(&in, &minor, &nops);
  ASSERT_EQ(nops, 4u);
  ASSERT_TRUE(in.Skip(4 + 4 + 4));  // PUTFH "s"
  ASSERT_TRUE(in.Skip(4));          // SAVEFH
  ASSERT_TRUE(in.Skip(4 + 4 + 4));  // PUTFH "d"
  EXPECT_EQ(U32(&in), kOpCopy);
  ExpectSid(&in);
  ExpectSid(&in);
  EXPECT_EQ(U64(&in), 10u);
  EXPECT_EQ(U64(&in), 20u);
  EXPECT_EQ(U64(&in), 30u);
  EXPECT_EQ(U32(&in), 1u);  // consecutive
  EXPECT_EQ(U32(&in), 1u);  // synchronous
  EXPECT_EQ(U32(&in), 0u);  // no source server
  EXPECT_EQ(in.left(), 0u);

  Compound one;
  one.Putfh("d").Copy(Sid(), Sid(), 0, 0, 0);
  Reply r(kNfs4Ok, 2);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpCopy, kNfs4Ok);
  r.x().U32(0);  // no callback id: done
  r.x().U64(4096);
  r.x().U32(2);  // FILE_SYNC4
  r.x().Fixed("verifier", 8);
  r.x().Bool(true);
  r.x().Bool(true);
  CompoundReply out;
  ASSERT_TRUE(r.Decode(one, &out));
  const OpResult *cp = out.Find(Op::kCopy);
  EXPECT_EQ(cp->copied, 4096u);
  EXPECT_FALSE(cp->copy_async);
  EXPECT_EQ(cp->committed, StableHow::kFileSync);
  EXPECT_EQ(cp->verifier, Verifier("verifier", 8));

  Reply a(kNfs4Ok, 2);  // the server goes on alone: a callback id
  a.Result(kOpPutfh, kNfs4Ok).Result(kOpCopy, kNfs4Ok);
  a.x().U32(1);
  a.x().U32(1);
  a.x().Fixed("callbackid12", 12);
  a.x().U64(0);
  a.x().U32(0);
  a.x().Fixed("verifier", 8);
  a.x().Bool(true);
  a.x().Bool(false);
  ASSERT_TRUE(a.Decode(one, &out));
  EXPECT_TRUE(out.Find(Op::kCopy)->copy_async);

  Reply two(kNfs4Ok, 2);  // two callback ids: not a write_response4
  two.Result(kOpPutfh, kNfs4Ok).Result(kOpCopy, kNfs4Ok);
  two.x().U32(2);
  EXPECT_FALSE(two.Decode(one, &out));

  Reply noreqs(10094, 2);  // NFS4ERR_OFFLOAD_NO_REQS: the requirements
  noreqs.Result(kOpPutfh, kNfs4Ok).Result(kOpCopy, 10094);
  noreqs.x().Bool(true);
  noreqs.x().Bool(false);
  ASSERT_TRUE(noreqs.Decode(one, &out));
  EXPECT_EQ(out.status, 10094u);
}

// One READ_PLUS segment for a reply: data at offset, or a hole.
void DataSegment(XdrOut *x, uint64_t offset, const std::string &data) {
  x->U32(0);  // NFS4_CONTENT_DATA
  x->U64(offset);
  x->Opaque(data);
}
void HoleSegment(XdrOut *x, uint64_t offset, uint64_t length) {
  x->U32(1);  // NFS4_CONTENT_HOLE
  x->U64(offset);
  x->U64(length);
}

// Decodes a READ_PLUS of [offset, offset + count) into buf (filled with
// '#' first) whose reply segments add() writes after eof.
bool DecodeReadPlus(uint64_t offset, uint32_t count, bool eof, uint32_t nsegs,
                    const std::function<void(XdrOut *)> &add, std::string *buf,
                    OpResult *res) {
  buf->assign(count, '#');
  Compound c;
  c.Putfh("f").ReadPlus(Sid(), offset, count, &(*buf)[0]);
  Reply r(kNfs4Ok, 2);
  r.Result(kOpPutfh, kNfs4Ok).Result(kOpReadPlus, kNfs4Ok);
  r.x().Bool(eof);
  r.x().U32(nsegs);
  add(&r.x());
  CompoundReply out;
  if (!r.Decode(c, &out)) return false;
  *res = *out.Find(Op::kReadPlus);
  return true;
}

// Data and holes land in the buffer in their places, the holes as zeros;
// a hole that began before the range, or runs past it, is clipped.
TEST(Nfs42WireTest, ReadPlusDataAndHolesFillTheBuffer) {
  std::string buf;
  OpResult res;
  ASSERT_TRUE(DecodeReadPlus(
      100, 12, false, 3,
      [](XdrOut *x) {
        HoleSegment(x, 90, 14);  // [90, 104): 4 bytes of the range
        DataSegment(x, 104, "abcd");
        HoleSegment(x, 108, 1000);  // runs past the range's end, 112
      },
      &buf, &res));
  EXPECT_EQ(buf, std::string("\0\0\0\0abcd\0\0\0\0", 12));
  EXPECT_EQ(res.count, 12u);
  EXPECT_EQ(res.hole_bytes, 8u);
  EXPECT_FALSE(res.eof);
  // The end of the file: data up to it, eof, nothing after.
  ASSERT_TRUE(DecodeReadPlus(
      0, 12, true, 1, [](XdrOut *x) { DataSegment(x, 0, "xyz"); }, &buf, &res));
  EXPECT_EQ(buf.substr(0, 4), "xyz#");
  EXPECT_EQ(res.count, 3u);
  EXPECT_EQ(res.hole_bytes, 0u);
  EXPECT_TRUE(res.eof);
  // At the end: one empty data segment (Ganesha), or none.
  ASSERT_TRUE(DecodeReadPlus(
      50, 12, true, 1, [](XdrOut *x) { DataSegment(x, 50, ""); }, &buf, &res));
  EXPECT_EQ(res.count, 0u);
  ASSERT_TRUE(DecodeReadPlus(
      50, 12, true, 0, [](XdrOut *) {}, &buf, &res));
  EXPECT_EQ(res.count, 0u);
  EXPECT_EQ(buf, std::string(12, '#'));
  // Ganesha 4.3 over a FSAL without READ_PLUS: an empty data segment at
  // offset 0, not the end: it covers nothing (the core then reads).
  ASSERT_TRUE(DecodeReadPlus(
      50, 12, false, 1, [](XdrOut *x) { DataSegment(x, 0, ""); }, &buf, &res));
  EXPECT_EQ(res.count, 0u);
  EXPECT_FALSE(res.eof);
}

// What a hostile or broken server may send is refused before a byte is
// written outside the range: data past it, gaps, overlaps, segments out of
// order, unknown content types, counts beyond the bytes there are.
TEST(Nfs42WireTest, HostileReadPlusRepliesAreRefused) {
  std::string buf;
  OpResult res;
  struct Bad {
    const char *what;
    uint32_t nsegs;
    std::function<void(XdrOut *)> add;
  };
  const Bad bad[] = {
      {"data past the range", 1,
       [](XdrOut *x) { DataSegment(x, 100, std::string(13, 'd')); }},
      {"data after a range already covered", 2,
       [](XdrOut *x) {
         HoleSegment(x, 100, 12);
         DataSegment(x, 112, "d");
       }},
      {"a gap before the first segment", 1,
       [](XdrOut *x) { DataSegment(x, 101, "d"); }},
      {"a gap between segments", 2,
       [](XdrOut *x) {
         DataSegment(x, 100, "ab");
         HoleSegment(x, 103, 4);
       }},
      {"overlapping data", 2,
       [](XdrOut *x) {
         DataSegment(x, 100, "ab");
         DataSegment(x, 101, "cd");
       }},
      {"a hole wholly behind", 2,
       [](XdrOut *x) {
         DataSegment(x, 100, "ab");
         HoleSegment(x, 90, 5);
       }},
      {"an empty hole", 1, [](XdrOut *x) { HoleSegment(x, 100, 0); }},
      {"a hole whose end overflows", 1,
       [](XdrOut *x) { HoleSegment(x, 100, ~0ull); }},
      {"an unknown content type", 1,
       [](XdrOut *x) {
         x->U32(2);  // NFS4_CONTENT_ALLOCATE... not in RFC 7862's union
         x->U64(100);
       }},
      {"a segment count beyond the bytes", 0x40000000,
       [](XdrOut *x) { DataSegment(x, 100, "ab"); }},
  };
  for (const Bad &b : bad) {
    EXPECT_FALSE(DecodeReadPlus(100, 12, false, b.nsegs, b.add, &buf, &res))
        << b.what;
    // Nothing was written past the buffer (it has no room to be), and
    // what the decoder wrote, before it refused, is inside the range.
    EXPECT_EQ(buf.size(), 12u) << b.what;
  }
}

}  // namespace
}  // namespace upstream
}  // namespace nache
