// One upstream connection's loop against a peer the test plays by hand on
// loopback TCP (an NFSv4.1 server that answers SEQUENCE, or does not
// answer at all): a session operation that times out completes kTimeout; a
// reply that comes after its call timed out, a duplicate reply and a reply
// to no call of ours are dropped; a slot whose reply was lost is settled
// by a probe (SEQUENCE alone) before a request goes out on it again; a
// lost session fails the call retryably and frees its slot.
#include "upstream/connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "rpc/xdr.h"
#include "tcp_peer.h"
#include "upstream/nfs41.h"

namespace nache {
namespace upstream {
namespace {

using rpc::XdrIn;
using rpc::XdrOut;
constexpr auto kWait = std::chrono::seconds(5);

// What the peer read of one of our NFSv4.1 COMPOUND calls.
struct SeenCall {
  uint32_t xid = 0;
  std::string tag;
  bool sequenced = false;  // SEQUENCE first
  uint32_t seqid = 0, slotid = 0;
};

bool ParseCall(const std::string &rec, SeenCall *c) {
  XdrIn in(rec.data(), rec.size());
  uint32_t type, rpcvers, prog, vers, proc, flavor, minor, nops, op;
  std::string body;
  if (!in.U32(&c->xid) || !in.U32(&type) || type != 0 || !in.U32(&rpcvers) ||
      !in.U32(&prog) || !in.U32(&vers) || !in.U32(&proc) || !in.U32(&flavor) ||
      !in.Opaque(&body, 400) || !in.U32(&flavor) || !in.Opaque(&body, 400) ||
      !in.Opaque(&c->tag, 1024) || !in.U32(&minor) || !in.U32(&nops))
    return false;
  if (nops == 0 || !in.U32(&op) || op != nfs41::kOpSequence) return true;
  c->sequenced = true;
  uint32_t highest;
  return in.Skip(16) && in.U32(&c->seqid) && in.U32(&c->slotid) &&
         in.U32(&highest);
}

// The reply to a COMPOUND of SEQUENCE alone: SEQUENCE's status (and, when
// OK, its result for the call's slot and id).
std::string SequenceReply(const SeenCall &c, const nfs41::SessionId &sid,
                          uint32_t status) {
  std::string b;
  XdrOut x(&b);
  x.U32(c.xid);
  x.U32(1);  // REPLY
  x.U32(0);  // accepted
  x.U32(0);  // verifier AUTH_NONE
  x.U32(0);
  x.U32(0);  // SUCCESS
  x.U32(status);
  x.Opaque(c.tag);
  x.U32(1);
  x.U32(nfs41::kOpSequence);
  x.U32(status);
  if (status != 0) return b;
  x.Fixed(sid.data(), sid.size());
  for (uint32_t v : {c.seqid, c.slotid, 1u, 1u, 0u}) x.U32(v);
  return b;
}

class Listener : public ConnectionListener {
 public:
  void OnConnectionUp(int) override {}
  void OnConnectionDown(int) override {}
  std::shared_ptr<Session41> CurrentSession() override { return session; }
  bool Sessions() const override { return true; }
  void OnSequence(Session41 &, const nfs41::SequenceRes &r,
                  Clock::time_point) override {
    std::lock_guard<std::mutex> g(mu);
    last_sequence_status = r.status;
  }
  std::shared_ptr<Session41> session;
  std::mutex mu;
  uint32_t last_sequence_status = ~0u;
};

// A call's outcome, waited for with a deadline.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  CallStatus status = CallStatus::kOk;
  uint32_t nfs_status = ~0u;
  bool Wait() {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, kWait, [this] { return done; });
  }
};

class ConnectionTest : public ::testing::Test {
 protected:
  void Start(int call_timeout_ms) {
    opts_.server = "127.0.0.1";
    opts_.port = peer_.port();
    opts_.call_timeout_ms = call_timeout_ms;
    opts_.connect_timeout_ms = 2000;
    opts_.minor_version = 1;
    conn_.reset(new Connection(0, opts_, &listener_));
    conn_->Start();
    ASSERT_TRUE(peer_.Accept());
    ASSERT_TRUE(WaitConnected());
  }
  bool WaitConnected() {
    const auto end = Clock::now() + kWait;
    while (!conn_->connected()) {
      if (Clock::now() > end) return false;
      poll(nullptr, 0, 1);
    }
    return true;
  }
  // A COMPOUND of SEQUENCE alone (what Compound encodes with no ops),
  // tagged tag, its outcome into *o.
  void Submit(const std::string &tag, int timeout_ms,
              const std::shared_ptr<Outcome> &o) {
    auto call = std::make_unique<PendingCall>();
    call->owned = std::make_unique<Compound>();
    call->owned->SetTag(tag);
    call->compound = call->owned.get();
    call->deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    call->done = [o](CallStatus st, CompoundReply &&r) {
      std::lock_guard<std::mutex> g(o->mu);
      o->done = true;
      o->status = st;
      o->nfs_status = r.status;
      o->cv.notify_all();
    };
    conn_->Submit(std::move(call));
  }
  SeenCall Read() {
    SeenCall c;
    std::string rec = peer_.ReadRecord();
    EXPECT_TRUE(ParseCall(rec, &c)) << "a record of " << rec.size();
    return c;
  }

  Peer peer_;
  Listener listener_;
  UpstreamOptions opts_;
  std::unique_ptr<Connection> conn_;  // last: stopped before the rest goes
  nfs41::SessionId sid_{{7, 7, 7}};
};

// Issue 15 defect 6: EXCHANGE_ID, CREATE_SESSION and BIND_CONN_TO_SESSION
// have no Compound; their timeout used to dereference it.
TEST_F(ConnectionTest, ARawSessionOperationThatTimesOutFailsRetryably) {
  listener_.session = std::make_shared<Session41>(sid_, 1);
  Start(200);
  auto o = std::make_shared<Outcome>();
  bool replied = false;
  auto call = std::make_unique<PendingCall>();
  call->raw_tag = "exchange_id";
  call->raw_encode = [](std::string *rec) {
    XdrOut x(rec);
    nfs41::EncodeCompoundHeader(&x, "exchange_id", 1);
    nfs41::ExchangeIdArgs a;
    a.owner = "test";
    nfs41::EncodeExchangeId(&x, a);
    return true;
  };
  call->raw_reply = [&replied](XdrIn *) { replied = true; };
  call->deadline = Clock::now() + std::chrono::milliseconds(200);
  call->done = [o](CallStatus st, CompoundReply &&) {
    std::lock_guard<std::mutex> g(o->mu);
    o->done = true;
    o->status = st;
    o->cv.notify_all();
  };
  conn_->Submit(std::move(call));
  SeenCall seen = Read();  // it went out; the peer never answers
  EXPECT_EQ(seen.tag, "exchange_id");
  ASSERT_TRUE(o->Wait());
  EXPECT_EQ(o->status, CallStatus::kTimeout);
  EXPECT_FALSE(replied);
  // The loop lives on: the connection comes back (it was presumed dead,
  // nothing having come back) and a call goes out on it.
  ASSERT_TRUE(peer_.Accept());
  ASSERT_TRUE(WaitConnected());
  auto next = std::make_shared<Outcome>();
  Submit("after", 5000, next);
  SeenCall c = Read();
  EXPECT_EQ(c.tag, "after");
  peer_.WriteRecord(SequenceReply(c, sid_, 0));
  ASSERT_TRUE(next->Wait());
  EXPECT_EQ(next->status, CallStatus::kOk);
  EXPECT_EQ(conn_->load(), 0);
}

// A call times out while the connection lives (another call is answered
// meanwhile); its reply comes late, another reply twice, and one to no call
// of ours: all dropped. The slot of the call that timed out is uncertain
// (the server may have executed it, or not yet): the next request on it
// is preceded by a SEQUENCE alone, never sent on an id the server could
// take for a retransmission of the lost one.
TEST_F(ConnectionTest,
       LateDuplicateAndUnknownRepliesAreDroppedAndTheSlotIsProbed) {
  listener_.session = std::make_shared<Session41>(sid_, 2);
  Start(5000);
  auto a = std::make_shared<Outcome>(), c = std::make_shared<Outcome>();
  // (Long enough for c's reply to come first: a connection on which
  // nothing at all came back is presumed dead, not what is tested here.)
  Submit("a", 1000, a);
  SeenCall sa = Read();
  EXPECT_EQ(sa.tag, "a");
  EXPECT_TRUE(sa.sequenced);
  EXPECT_EQ(sa.slotid, 0u);
  EXPECT_EQ(sa.seqid, 1u);
  Submit("c", 5000, c);
  SeenCall sc = Read();
  EXPECT_EQ(sc.slotid, 1u);
  peer_.WriteRecord(SequenceReply(sc, sid_, 0));
  ASSERT_TRUE(c->Wait());
  EXPECT_EQ(c->status, CallStatus::kOk);
  ASSERT_TRUE(a->Wait());
  EXPECT_EQ(a->status, CallStatus::kTimeout);
  // The late reply, a duplicate of c's, and one for an XID never used.
  peer_.WriteRecord(SequenceReply(sa, sid_, 0));
  peer_.WriteRecord(SequenceReply(sc, sid_, 0));
  SeenCall stranger = sa;
  stranger.xid = sa.xid ^ 0x5a5a5a5au;
  peer_.WriteRecord(SequenceReply(stranger, sid_, 0));

  auto b = std::make_shared<Outcome>();
  Submit("b", 5000, b);
  SeenCall probe = Read();
  EXPECT_EQ(probe.tag, "slot_probe") << "b went out on the uncertain slot";
  EXPECT_EQ(probe.slotid, 0u);
  EXPECT_EQ(probe.seqid, 2u) << "the id after the lost one";
  // This server never saw a: the probe is misordered, then goes as 1.
  peer_.WriteRecord(SequenceReply(probe, sid_, kNfs4ErrSeqMisordered));
  SeenCall probe2 = Read();
  EXPECT_EQ(probe2.tag, "slot_probe");
  EXPECT_EQ(probe2.seqid, 1u);
  peer_.WriteRecord(SequenceReply(probe2, sid_, 0));
  SeenCall sb = Read();
  EXPECT_EQ(sb.tag, "b");
  EXPECT_EQ(sb.slotid, 0u);
  EXPECT_EQ(sb.seqid, 2u);
  peer_.WriteRecord(SequenceReply(sb, sid_, 0));
  ASSERT_TRUE(b->Wait());
  EXPECT_EQ(b->status, CallStatus::kOk);
  EXPECT_EQ(b->nfs_status, 0u);
  EXPECT_TRUE(conn_->connected()) << "dropped, not a protocol error";
  EXPECT_EQ(listener_.session->slots.busy(), 0u);
  EXPECT_EQ(conn_->load(), 0) << "the probe counted in and out";
}

// A request refused SEQ_MISORDERED was not executed: it is not failed but
// sent again once a probe has settled the slot.
TEST_F(ConnectionTest, AMisorderedRequestGoesAgainAfterAProbe) {
  listener_.session = std::make_shared<Session41>(sid_, 1);
  Start(5000);
  auto first = std::make_shared<Outcome>(), m = std::make_shared<Outcome>();
  Submit("first", 5000, first);
  SeenCall s1 = Read();
  peer_.WriteRecord(SequenceReply(s1, sid_, 0));
  ASSERT_TRUE(first->Wait());
  Submit("m", 5000, m);
  SeenCall s2 = Read();
  EXPECT_EQ(s2.seqid, 2u);
  peer_.WriteRecord(SequenceReply(s2, sid_, kNfs4ErrSeqMisordered));
  SeenCall probe = Read();
  EXPECT_EQ(probe.tag, "slot_probe");
  EXPECT_EQ(probe.seqid, 1u) << "the server may have started the slot afresh";
  peer_.WriteRecord(SequenceReply(probe, sid_, 0));
  SeenCall again = Read();
  EXPECT_EQ(again.tag, "m");
  EXPECT_EQ(again.seqid, 2u);
  peer_.WriteRecord(SequenceReply(again, sid_, 0));
  ASSERT_TRUE(m->Wait());
  EXPECT_EQ(m->status, CallStatus::kOk);
  EXPECT_EQ(m->nfs_status, 0u);
}

// The server lost the session (say it restarted mid-flush): the call is
// failed retryably and its slot is not left taken.
TEST_F(ConnectionTest, ALostSessionFailsTheCallRetryablyAndFreesItsSlot) {
  listener_.session = std::make_shared<Session41>(sid_, 1);
  Start(5000);
  auto o = std::make_shared<Outcome>();
  Submit("write", 5000, o);
  SeenCall s = Read();
  peer_.WriteRecord(SequenceReply(s, sid_, kNfs4ErrBadSession));
  ASSERT_TRUE(o->Wait());
  EXPECT_EQ(o->status, CallStatus::kDisconnected);
  {
    std::lock_guard<std::mutex> g(listener_.mu);
    EXPECT_EQ(listener_.last_sequence_status, uint32_t(kNfs4ErrBadSession));
  }
  EXPECT_EQ(listener_.session->slots.busy(), 0u);
  // The slot goes on with the same id (the request was not executed).
  auto next = std::make_shared<Outcome>();
  Submit("again", 5000, next);
  SeenCall s2 = Read();
  EXPECT_EQ(s2.tag, "again");
  EXPECT_EQ(s2.seqid, s.seqid);
  peer_.WriteRecord(SequenceReply(s2, sid_, 0));
  ASSERT_TRUE(next->Wait());
  EXPECT_EQ(next->status, CallStatus::kOk);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
