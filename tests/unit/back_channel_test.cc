// The NFSv4.1 back channel: CB_SEQUENCE first on its one slot (a
// retransmission gets the cached reply, a skipped id SEQ_MISORDERED),
// CB_RECALL and CB_GETATTR through the handler, and what is malformed or
// out of place refused without asking it.
#include "callback/back_channel.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
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
upstream::nfs41::SessionId Sid(char c) {
  upstream::nfs41::SessionId s;
  s.fill(uint8_t(c));
  return s;
}
std::string CbSequence(uint32_t seqid, uint32_t slot = 0, char session = 's') {
  std::string b;
  XdrOut x(&b);
  x.U32(11);
  x.Fixed(Sid(session).data(), 16);
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
    return Parse(r);
  }
  static Reply Parse(Reply r) {
    XdrIn out(r.raw.data(), r.raw.size());
    std::string tag;
    uint32_t n = 0;
    EXPECT_TRUE(out.U32(&r.status) && out.Opaque(&tag, 64) && out.U32(&n));
    for (uint32_t i = 0; i < n; i++) {
      uint32_t op, st;
      if (!out.U32(&op) || !out.U32(&st)) break;
      r.ops.push_back({op, st});
      if (st != 0) continue;
      if (op == 11) out.Skip(16 + 16);  // CB_SEQUENCE's body
      if (op == 3) {                    // CB_GETATTR: bitmap, attr values
        uint32_t nw = 0, w, len = 0;
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
  c.vers = 4;
  EXPECT_EQ(bc_.Serve(c, &in, &res), rpc::ReplyStatus::kProgMismatch);
  EXPECT_EQ(res, std::string("\0\0\0\1\0\0\0\1", 8))
      << "mismatch_info: versions 1 to 1";
  res.clear();
  c.vers = 1;
  c.proc = 0;  // CB_NULL
  EXPECT_EQ(bc_.Serve(c, &in, &res), rpc::ReplyStatus::kOk);
  EXPECT_TRUE(res.empty());
  c.proc = 7;
  EXPECT_EQ(bc_.Serve(c, &in, &res), rpc::ReplyStatus::kProcUnavail);
}

// Issue 15 defect 7: the back channel's slot belongs to the session.
TEST_F(BackChannelTest, ANewSessionStartsTheSlotAfreshAndItsRecallRuns) {
  bc_.SetSession(Sid('A'), 1);
  for (uint32_t id = 1; id <= 5; id++)
    ASSERT_EQ(Call(Compound({CbSequence(id, 0, 'A')})).status, 0u);
  bc_.SetSession(Sid('B'), 1);
  Reply r = Call(Compound({CbSequence(1, 0, 'B'), CbRecall("FH-B")}));
  EXPECT_EQ(r.status, 0u) << "seqid 1 is the new session's first call";
  ASSERT_EQ(h_.recalls.size(), 1u);
  EXPECT_EQ(h_.recalls[0], "FH-B");
  EXPECT_EQ(Call(Compound({CbSequence(2, 0, 'B')})).status, 0u);
}

TEST_F(BackChannelTest, ACallOnAnotherSessionIsBadSession) {
  bc_.SetSession(Sid('A'), 1);
  ASSERT_EQ(Call(Compound({CbSequence(1, 0, 'A')})).status, 0u);
  bc_.SetSession(Sid('B'), 1);
  Reply old = Call(Compound({CbSequence(2, 0, 'A'), CbRecall("FH1")}));
  EXPECT_EQ(old.status, uint32_t(upstream::kNfs4ErrBadSession));
  ASSERT_EQ(old.ops.size(), 1u) << "stopped at CB_SEQUENCE";
  Reply never = Call(Compound({CbSequence(1, 0, 'Z'), CbRecall("FH1")}));
  EXPECT_EQ(never.status, uint32_t(upstream::kNfs4ErrBadSession));
  EXPECT_TRUE(h_.recalls.empty());
  // The current session's slot was not touched by either.
  EXPECT_EQ(Call(Compound({CbSequence(1, 0, 'B')})).status, 0u);
}

// When the old session's last id was 1, the new session's first call (id 1
// too) is new, not a retransmission answered from the old one's cache.
TEST_F(BackChannelTest, ARecallOnANewSessionIsNotTakenForTheOldOnesReplay) {
  bc_.SetSession(Sid('A'), 1);
  ASSERT_EQ(Call(Compound({CbSequence(1, 0, 'A'), CbRecall("FH1")})).status,
            0u);
  bc_.SetSession(Sid('B'), 1);
  Reply r = Call(Compound({CbSequence(1, 0, 'B'), CbRecall("FH2")}));
  EXPECT_EQ(r.status, 0u);
  ASSERT_EQ(h_.recalls.size(), 2u) << "executed, not replayed";
  EXPECT_EQ(h_.recalls[1], "FH2");
}

TEST_F(BackChannelTest, SlotsBeyondTheSessionsAreBadSlotOthersCountAlone) {
  bc_.SetSession(Sid('A'), 2);
  EXPECT_EQ(Call(Compound({CbSequence(1, 1, 'A')})).status, 0u);
  EXPECT_EQ(Call(Compound({CbSequence(1, 0, 'A')})).status, 0u)
      << "each slot has its own sequence";
  EXPECT_EQ(Call(Compound({CbSequence(1, 2, 'A')})).status,
            uint32_t(upstream::kNfs4ErrBadSlot));
  EXPECT_EQ(Call(Compound({CbSequence(3, 1, 'A')})).status,
            uint32_t(upstream::kNfs4ErrSeqMisordered));
}

// Over our RPC transport: the server resends a CB_COMPOUND under a new
// XID; the cached answer goes back under that new XID, and the recall is
// not run twice.
TEST_F(BackChannelTest, ARetransmissionIsAnsweredUnderItsOwnXid) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto t = std::make_unique<rpc::Transport>(sv[0]);
  const int peer = sv[1];
  t->SetCallHandler(
      [this](const rpc::PeerCall &c, XdrIn *args, std::string *res) {
        return bc_.Serve(c, args, res);
      });
  bc_.SetSession(Sid('A'), 1);
  const std::string args = Compound({CbSequence(1, 0, 'A'), CbRecall("FH1")});
  auto call = [&args](uint32_t xid) {
    std::string b;
    XdrOut x(&b);
    for (uint32_t w : {xid, 0u, 2u, 0x40000000u, 1u, 1u, 0u, 0u, 0u, 0u})
      x.U32(w);  // CALL, RPC 2, CB_COMPOUND, AUTH_NONE, AUTH_NONE
    b += args;
    std::string r;
    XdrOut(&r).U32(0x80000000u | uint32_t(b.size()));
    return r + b;
  };
  // Serves until one whole reply record can be read, and returns it.
  auto reply = [&]() {
    std::string in;
    for (int i = 0; i < 500; i++) {
      pollfd p[2] = {{t->fd(), t->WantEvents(), 0}, {peer, POLLIN, 0}};
      poll(p, 2, 10);
      EXPECT_TRUE(t->Service(p[0].revents)) << t->error();
      if (p[1].revents & POLLIN) {
        char buf[4096];
        ssize_t n = read(peer, buf, sizeof buf);
        if (n > 0) in.append(buf, size_t(n));
      }
      if (in.size() >= 4) {
        uint32_t m;
        XdrIn(in.data(), 4).U32(&m);
        if (in.size() >= 4 + (m & 0x7fffffffu)) return in.substr(4);
      }
    }
    return std::string();
  };
  const std::string first_call = call(1000), second_call = call(2000);
  ASSERT_EQ(write(peer, first_call.data(), first_call.size()),
            ssize_t(first_call.size()));
  std::string first = reply();
  ASSERT_EQ(write(peer, second_call.data(), second_call.size()),
            ssize_t(second_call.size()));
  std::string second = reply();
  ASSERT_GT(first.size(), 24u);
  ASSERT_EQ(first.size(), second.size());
  uint32_t xid1, xid2;
  XdrIn(first.data(), 4).U32(&xid1);
  XdrIn(second.data(), 4).U32(&xid2);
  EXPECT_EQ(xid1, 1000u);
  EXPECT_EQ(xid2, 2000u) << "the resend's own XID";
  EXPECT_EQ(first.substr(4), second.substr(4)) << "the same answer";
  EXPECT_EQ(h_.recalls.size(), 1u) << "executed once";
  t.reset();
  close(peer);
}

}  // namespace
}  // namespace callback
}  // namespace nache
