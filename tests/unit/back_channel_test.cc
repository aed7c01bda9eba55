// The NFSv4.1 back channel: CB_SEQUENCE first on its one slot (a
// retransmission gets the cached reply, a skipped id SEQ_MISORDERED),
// CB_RECALL and CB_GETATTR through the handler, and what is malformed or
// out of place refused without asking it.
#include "callback/back_channel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "upstream/nfs41.h"

namespace nache {
namespace callback {
namespace {

using rpc::XdrIn;
using rpc::XdrOut;

class FakeHandler : public CallbackHandler {
 public:
  void OnContact() override { contacts++; }
  uint32_t OnRecall(const upstream::StateId &sid, bool,
                    const upstream::Fh &fh) override {
    recalls.push_back(fh);
    last_seqid = sid.seqid;
    return upstream::kNfs4Ok;
  }
  uint32_t OnGetattr(const upstream::Fh &, uint64_t *change,
                     uint64_t *size) override {
    *change = 77;
    *size = 4096;
    return upstream::kNfs4Ok;
  }
  int contacts = 0;
  uint32_t last_seqid = 0;
  std::vector<upstream::Fh> recalls;
};

// CB_COMPOUND arguments: tag, minor version 1, ident, then the ops.
std::string Compound(const std::vector<std::string> &ops) {
  std::string b;
  XdrOut x(&b);
  x.Opaque(std::string("cb"));
  x.U32(1);
  x.U32(0);
  x.U32(uint32_t(ops.size()));
  for (const std::string &op : ops) b += op;
  return b;
}
std::string CbSequence(uint32_t seqid, uint32_t slot = 0) {
  std::string b;
  XdrOut x(&b);
  x.U32(11);
  std::string sid(16, 's');
  x.Fixed(sid.data(), 16);
  x.U32(seqid);
  x.U32(slot);
  x.U32(0);
  x.Bool(false);
  x.U32(0);  // no referring calls
  return b;
}
std::string CbRecall(const std::string &fh) {
  std::string b;
  XdrOut x(&b);
  x.U32(4);
  x.U32(3);  // stateid seqid
  std::string other(12, 'o');
  x.Fixed(other.data(), 12);
  x.Bool(false);
  x.Opaque(fh);
  return b;
}
std::string CbGetattr(const std::string &fh) {
  std::string b;
  XdrOut x(&b);
  x.U32(3);
  x.Opaque(fh);
  x.U32(1);
  x.U32((1u << 3) | (1u << 4));  // change, size
  return b;
}

struct Reply {
  uint32_t status = ~0u;
  std::vector<std::pair<uint32_t, uint32_t>> ops;  // (op, status)
  std::string raw;
};

class BackChannelTest : public ::testing::Test {
 protected:
  Reply Call(const std::string &args) {
    rpc::PeerCall c;
    c.prog = 0x40000000;
    c.vers = 1;
    c.proc = 1;
    XdrIn in(args.data(), args.size());
    Reply r;
    EXPECT_EQ(bc_.Serve(c, &in, &r.raw), rpc::ReplyStatus::kOk);
    XdrIn out(r.raw.data(), r.raw.size());
    std::string tag;
    uint32_t n;
    EXPECT_TRUE(out.U32(&r.status) && out.Opaque(&tag, 64) && out.U32(&n));
    for (uint32_t i = 0; i < n; i++) {
      uint32_t op, st;
      if (!out.U32(&op) || !out.U32(&st)) break;
      r.ops.push_back({op, st});
      if (st != 0) continue;
      if (op == 11) out.Skip(16 + 16);  // CB_SEQUENCE's body
      if (op == 3) {  // CB_GETATTR: bitmap, attr values
        uint32_t nw, w, len;
        out.U32(&nw);
        for (uint32_t k = 0; k < nw; k++) out.U32(&w);
        const char *v;
        out.Opaque(&v, &len, 64);
        EXPECT_EQ(len, 16u) << "change and size";
      }
    }
    EXPECT_EQ(out.left(), 0u);
    return r;
  }
  FakeHandler h_;
  BackChannel bc_{&h_, 0x40000000};
};

TEST_F(BackChannelTest, SequencedRecallAndGetattrReachTheHandler) {
  Reply r = Call(Compound({CbSequence(1), CbGetattr("FH1"), CbRecall("FH1")}));
  EXPECT_EQ(r.status, 0u);
  ASSERT_EQ(r.ops.size(), 3u);
  EXPECT_EQ(r.ops[0].first, 11u);
  EXPECT_EQ(r.ops[2], std::make_pair(4u, 0u));
  ASSERT_EQ(h_.recalls.size(), 1u);
  EXPECT_EQ(h_.recalls[0], "FH1");
  EXPECT_EQ(h_.last_seqid, 3u);
  EXPECT_EQ(h_.contacts, 1);
}

TEST_F(BackChannelTest, ARetransmissionGetsTheCachedReplyNotASecondRecall) {
  Reply first = Call(Compound({CbSequence(1), CbRecall("FH1")}));
  Reply again = Call(Compound({CbSequence(1), CbRecall("FH1")}));
  EXPECT_EQ(again.raw, first.raw);
  EXPECT_EQ(h_.recalls.size(), 1u) << "executed once";
  Reply next = Call(Compound({CbSequence(2), CbRecall("FH2")}));
  EXPECT_EQ(next.status, 0u);
  EXPECT_EQ(h_.recalls.size(), 2u);
  Reply skipped = Call(Compound({CbSequence(4), CbRecall("FH3")}));
  EXPECT_EQ(skipped.status, uint32_t(upstream::kNfs4ErrSeqMisordered));
  ASSERT_EQ(skipped.ops.size(), 1u) << "stopped at CB_SEQUENCE";
  EXPECT_EQ(h_.recalls.size(), 2u);
  // A misordered call is not cached: the next in order still works.
  EXPECT_EQ(Call(Compound({CbSequence(3), CbRecall("FH3")})).status, 0u);
}

TEST_F(BackChannelTest, WithoutSequenceFirstNothingIsDone) {
  Reply r = Call(Compound({CbRecall("FH1")}));
  EXPECT_EQ(r.status, uint32_t(upstream::kNfs4ErrOpNotInSession));
  EXPECT_TRUE(h_.recalls.empty());
  r = Call(Compound({CbSequence(1, 5)}));
  EXPECT_EQ(r.status, uint32_t(upstream::kNfs4ErrBadSlot)) << "one slot only";
  // Cut short: BADXDR, the handler not asked.
  std::string cut = Compound({CbSequence(1), CbRecall("FH1")});
  cut.resize(cut.size() - 6);
  r = Call(cut);
  EXPECT_EQ(r.status, uint32_t(upstream::kNfs4ErrBadxdr));
  EXPECT_TRUE(h_.recalls.empty());
}

TEST_F(BackChannelTest, OtherProgramsAndProceduresAreRefused) {
  rpc::PeerCall c;
  c.prog = 0x40000001;
  c.vers = 1;
  std::string res;
  XdrIn in("", 0);
  EXPECT_EQ(bc_.Serve(c, &in, &res), rpc::ReplyStatus::kProgUnavail);
  c.prog = 0x40000000;
  c.proc = 0;  // CB_NULL
  EXPECT_EQ(bc_.Serve(c, &in, &res), rpc::ReplyStatus::kOk);
  EXPECT_TRUE(res.empty());
  c.proc = 7;
  EXPECT_EQ(bc_.Serve(c, &in, &res), rpc::ReplyStatus::kProcUnavail);
}

}  // namespace
}  // namespace callback
}  // namespace nache
