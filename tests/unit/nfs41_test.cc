// NFSv4.1's session operations (nfs41.cc) and a Compound on the wire in
// both minor versions (compound_wire.cc), checked field by field against
// RFC 8881's XDR.
#include "upstream/nfs41.h"

#include <gtest/gtest.h>

#include <string>

#include "upstream/compound.h"

namespace nache {
namespace upstream {
namespace {

using rpc::XdrIn;
using rpc::XdrOut;

// Reads n words from in.
std::vector<uint32_t> Words(XdrIn *in, size_t n) {
  std::vector<uint32_t> w(n);
  for (uint32_t &v : w)
    if (!in->U32(&v)) return {};
  return w;
}

nfs41::SessionId Sid(uint8_t fill) {
  nfs41::SessionId s;
  s.fill(fill);
  return s;
}

TEST(Nfs41Test, ExchangeIdIsEncodedAsRfc8881Says) {
  nfs41::ExchangeIdArgs a;
  a.verifier = {1, 2, 3, 4, 5, 6, 7, 8};
  a.owner = "nache-office";
  a.impl_domain = "nache.example";
  a.impl_name = "nache";
  std::string b;
  XdrOut x(&b);
  nfs41::EncodeExchangeId(&x, a);
  XdrIn in(b.data(), b.size());
  uint32_t op;
  ASSERT_TRUE(in.U32(&op));
  EXPECT_EQ(op, 42u);
  uint8_t verf[8];
  std::string owner, domain, name;
  ASSERT_TRUE(in.Fixed(verf, 8) && in.Opaque(&owner, 1024));
  EXPECT_EQ(verf[7], 8);
  EXPECT_EQ(owner, "nache-office");
  std::vector<uint32_t> w = Words(&in, 3);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], 0x10001u) << "SUPP_MOVED_REFER | USE_NON_PNFS";
  EXPECT_EQ(w[1], 0u) << "SP4_NONE";
  EXPECT_EQ(w[2], 1u) << "one nfs_impl_id4";
  uint64_t secs;
  uint32_t nsecs;
  ASSERT_TRUE(in.Opaque(&domain, 1024) && in.Opaque(&name, 1024) &&
              in.U64(&secs) && in.U32(&nsecs));
  EXPECT_EQ(name, "nache");
  EXPECT_EQ(in.left(), 0u);
}

TEST(Nfs41Test, ExchangeIdResultDecodes) {
  std::string b;
  XdrOut x(&b);
  x.U32(42);
  x.U32(0);
  x.U64(0x1122334455667788ull);  // clientid
  x.U32(1);                      // sequenceid
  x.U32(0x80010001u);            // flags
  x.U32(1);                      // SP4_MACH_CRED: two bitmaps follow
  x.U32(1);
  x.U32(0xff);
  x.U32(0);
  x.U64(9);  // server_owner4
  x.Opaque(std::string("major"));
  x.Opaque(std::string("scope"));
  x.U32(0);  // no impl id
  XdrIn in(b.data(), b.size());
  nfs41::ExchangeIdRes r;
  ASSERT_TRUE(nfs41::DecodeExchangeId(&in, &r));
  EXPECT_EQ(r.clientid, 0x1122334455667788ull);
  EXPECT_EQ(r.sequenceid, 1u);
  EXPECT_TRUE(r.flags & nfs41::kExchgIdConfirmed);
  EXPECT_EQ(r.server_scope, "scope");
  EXPECT_EQ(in.left(), 0u);
  // Cut short anywhere: refused, never read past the end.
  for (size_t n = 0; n < b.size(); n += 4) {
    XdrIn cut(b.data(), n);
    nfs41::ExchangeIdRes r2;
    EXPECT_FALSE(nfs41::DecodeExchangeId(&cut, &r2)) << n;
  }
}

TEST(Nfs41Test, CreateSessionRoundTrip) {
  nfs41::CreateSessionArgs a;
  a.clientid = 7;
  a.sequenceid = 1;
  a.fore.max_request = 1 << 20;
  a.fore.max_requests = 64;
  a.back.max_requests = 1;
  a.cb_machine = "nache";
  std::string b;
  XdrOut x(&b);
  nfs41::EncodeCreateSession(&x, a);
  XdrIn in(b.data(), b.size());
  uint32_t op, seq, flags;
  uint64_t clid;
  ASSERT_TRUE(in.U32(&op) && in.U64(&clid) && in.U32(&seq) && in.U32(&flags));
  EXPECT_EQ(op, 43u);
  EXPECT_EQ(clid, 7u);
  EXPECT_EQ(flags, nfs41::kCreateSessionConnBackChan);
  std::vector<uint32_t> fore = Words(&in, 7), back = Words(&in, 7);
  ASSERT_EQ(fore.size(), 7u);
  EXPECT_EQ(fore[1], 1u << 20);
  EXPECT_EQ(fore[5], 64u);
  EXPECT_EQ(fore[6], 0u) << "no RDMA ird";
  EXPECT_EQ(back[5], 1u);
  uint32_t prog, nsec, flavor, stamp;
  std::string machine;
  ASSERT_TRUE(in.U32(&prog) && in.U32(&nsec) && in.U32(&flavor) &&
              in.U32(&stamp) && in.Opaque(&machine, 255));
  EXPECT_EQ(prog, 0x40000000u);
  // Never RPCSEC_GSS, even under Upstream_Sec = krb5*: knfsd refuses it
  // in cb_sec_parms (config/README.md, "Callbacks under Kerberos").
  EXPECT_EQ(nsec, 2u) << "AUTH_SYS and AUTH_NONE only";
  EXPECT_EQ(flavor, 1u) << "AUTH_SYS first";
  EXPECT_EQ(machine, "nache");
  std::vector<uint32_t> rest = Words(&in, 4);
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(rest[3], 0u) << "then AUTH_NONE";
  EXPECT_EQ(in.left(), 0u);

  std::string r;
  XdrOut y(&r);
  y.U32(43);
  y.U32(0);
  y.Fixed(Sid(0xab).data(), 16);
  y.U32(1);
  y.U32(2);  // flags: back channel granted
  for (uint32_t v : {0u, 1048576u, 1048576u, 4096u, 16u, 32u, 0u}) y.U32(v);
  for (uint32_t v : {0u, 4096u, 4096u, 0u, 2u, 1u, 1u, 5u}) y.U32(v);
  XdrIn rin(r.data(), r.size());
  nfs41::CreateSessionRes res;
  ASSERT_TRUE(nfs41::DecodeCreateSession(&rin, &res));
  EXPECT_EQ(res.sessionid, Sid(0xab));
  EXPECT_EQ(res.fore.max_requests, 32u);
  EXPECT_EQ(res.back.max_requests, 1u);
  EXPECT_EQ(rin.left(), 0u) << "the back channel's one ird read too";
}

TEST(Nfs41Test, CbSequenceArgumentsAndResult) {
  std::string b;
  XdrOut x(&b);
  x.Fixed(Sid(3).data(), 16);
  x.U32(5);  // sequenceid
  x.U32(0);  // slot
  x.U32(0);  // highest
  x.Bool(false);
  x.U32(1);  // one referring call list
  x.Fixed(Sid(3).data(), 16);
  x.U32(2);  // two calls
  for (uint32_t v : {9u, 0u, 10u, 1u}) x.U32(v);
  XdrIn in(b.data(), b.size());
  nfs41::CbSequenceArgs a;
  ASSERT_TRUE(nfs41::DecodeCbSequenceArgs(&in, &a));
  EXPECT_EQ(a.sequenceid, 5u);
  EXPECT_EQ(in.left(), 0u);
  XdrIn cut(b.data(), b.size() - 4);
  EXPECT_FALSE(nfs41::DecodeCbSequenceArgs(&cut, &a));
  std::string r;
  XdrOut y(&r);
  nfs41::EncodeCbSequenceRes(&y, 0, a);
  XdrIn rin(r.data(), r.size());
  std::vector<uint32_t> head = Words(&rin, 2);
  EXPECT_EQ(head, (std::vector<uint32_t>{11, 0}));
  ASSERT_TRUE(rin.Skip(16));
  EXPECT_EQ(Words(&rin, 4), (std::vector<uint32_t>{5, 0, 0, 0}));
  EXPECT_EQ(rin.left(), 0u);
}

// An NFSv4.1 COMPOUND: our header and SEQUENCE, then libnfs' operations;
// its reply split the same way.
TEST(Nfs41Test, ACompoundGoesOutWithSequenceFirstAndComesBackSplit) {
  Compound c;
  c.SetTag("t41").Putrootfh().Getfh();
  nfs41::SequenceArgs seq;
  seq.sessionid = Sid(7);
  seq.sequenceid = 12;
  seq.slotid = 3;
  seq.highest_slotid = 5;
  std::string b;
  ASSERT_TRUE(c.EncodeWire(&b, &seq));
  XdrIn in(b.data(), b.size());
  std::string tag;
  ASSERT_TRUE(in.Opaque(&tag, 64));
  EXPECT_EQ(tag, "t41");
  EXPECT_EQ(Words(&in, 3), (std::vector<uint32_t>{1, 3, 53}))
      << "minor version 1, three operations, SEQUENCE first";
  nfs41::SessionId s;
  ASSERT_TRUE(in.Fixed(s.data(), 16));
  EXPECT_EQ(s, Sid(7));
  EXPECT_EQ(Words(&in, 4), (std::vector<uint32_t>{12, 3, 5, 0}));
  EXPECT_EQ(Words(&in, 2), (std::vector<uint32_t>{24, 10}))
      << "PUTROOTFH, GETFH (libnfs' encoding)";
  EXPECT_EQ(in.left(), 0u);

  std::string r;
  XdrOut y(&r);
  y.U32(0);
  y.Opaque(std::string("t41"));
  y.U32(3);
  y.U32(53);
  y.U32(0);
  y.Fixed(Sid(7).data(), 16);
  for (uint32_t v : {12u, 3u, 9u, 9u, uint32_t(nfs41::kSeqCbPathDown)})
    y.U32(v);
  y.U32(24);
  y.U32(0);
  y.U32(10);
  y.U32(0);
  y.Opaque(std::string("ROOTFH"));
  CompoundReply reply;
  nfs41::SequenceRes sr;
  ASSERT_TRUE(c.DecodeWire(r.data(), r.size(), &reply, &sr));
  EXPECT_EQ(sr.status, 0u);
  EXPECT_EQ(sr.highest_slotid, 9u);
  EXPECT_EQ(sr.status_flags, uint32_t(nfs41::kSeqCbPathDown));
  ASSERT_EQ(reply.results.size(), 2u) << "the SEQUENCE is not one of ours";
  EXPECT_EQ(reply.results[1].op, Op::kGetfh);
  EXPECT_EQ(reply.results[1].fh, "ROOTFH");

  // A failed SEQUENCE: the compound's status, no results.
  std::string bad;
  XdrOut z(&bad);
  z.U32(10052);
  z.Opaque(std::string("t41"));
  z.U32(1);
  z.U32(53);
  z.U32(10052);  // NFS4ERR_BADSESSION
  ASSERT_TRUE(c.DecodeWire(bad.data(), bad.size(), &reply, &sr));
  EXPECT_EQ(sr.status, 10052u);
  EXPECT_EQ(reply.status, 10052u);
  EXPECT_TRUE(reply.results.empty());
  // A result for an operation not asked: refused.
  std::string wrong = r;
  wrong[wrong.size() - 17] = 9;  // GETFH's number (10) becomes GETATTR's
  EXPECT_FALSE(c.DecodeWire(wrong.data(), wrong.size(), &reply, &sr));
}

TEST(Nfs41Test, NfsV40CompoundsStayLibnfsWhole) {
  Compound c;
  c.SetTag("t40").Putrootfh().Getfh();
  std::string b;
  ASSERT_TRUE(c.EncodeWire(&b, nullptr));
  XdrIn in(b.data(), b.size());
  std::string tag;
  ASSERT_TRUE(in.Opaque(&tag, 64));
  EXPECT_EQ(Words(&in, 4), (std::vector<uint32_t>{0, 2, 24, 10}));
  std::string r;
  XdrOut y(&r);
  y.U32(0);
  y.Opaque(std::string("t40"));
  y.U32(2);
  y.U32(24);
  y.U32(0);
  y.U32(10);
  y.U32(0);
  y.Opaque(std::string("FH"));
  CompoundReply reply;
  ASSERT_TRUE(c.DecodeWire(r.data(), r.size(), &reply, nullptr));
  ASSERT_EQ(reply.results.size(), 2u);
  EXPECT_EQ(reply.results[1].fh, "FH");
}

}  // namespace
}  // namespace upstream
}  // namespace nache
