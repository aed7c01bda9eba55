// rpc::Transport against a peer scripted on the other end of a socketpair:
// the bytes of a call, replies matched by XID (out of order, fragmented,
// trickling in), error replies, calls from the peer served on the same
// connection, and the ways a connection ends.
#include "rpc/rpc_transport.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "rpc/tcp_connect.h"

namespace nache {
namespace rpc {
namespace {

constexpr uint32_t kNfsProg = 100003, kCbProg = 0x40000000;

class RpcTransportTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(16u << 20); }
  void TearDown() override {
    t_.reset();
    if (peer_ >= 0) close(peer_);
  }
  void Open(size_t max_record) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    t_.reset(new Transport(sv[0], max_record));
    peer_ = sv[1];
  }
  // Services the transport until cond holds (or a bounded number of
  // rounds passed, each waiting for the socket at most 100 ms).
  bool ServiceUntil(const std::function<bool()> &cond) {
    for (int i = 0; i < 200 && !cond(); i++) {
      pollfd p{t_->fd(), t_->WantEvents(), 0};
      poll(&p, 1, 100);
      if (!t_->Service(p.revents)) return cond();
    }
    return cond();
  }
  // The peer: writes bytes; reads one whole record (all fragments).
  void PeerWrite(const std::string &b) {
    ASSERT_EQ(write(peer_, b.data(), b.size()), ssize_t(b.size()));
  }
  std::string PeerReadRecord() {
    std::string rec;
    for (bool last = false; !last;) {
      uint32_t m = 0;
      std::string mb = PeerReadN(4);
      XdrIn(mb.data(), 4).U32(&m);
      last = m & 0x80000000u;
      rec += PeerReadN(m & 0x7fffffffu);
    }
    return rec;
  }
  std::string PeerReadN(size_t n) {
    std::string b(n, '\0');
    size_t got = 0;
    while (got < n) {
      // The transport only sends from Service: drive it meanwhile.
      pollfd p{peer_, POLLIN, 0};
      if (poll(&p, 1, 0) == 0) {
        pollfd q{t_->fd(), t_->WantEvents(), 0};
        poll(&q, 1, 10);
        t_->Service(q.revents);
        continue;
      }
      ssize_t r = read(peer_, &b[got], n - got);
      if (r <= 0) return b.substr(0, got);
      got += size_t(r);
    }
    return b;
  }
  // A record: the marker (last fragment) and the body.
  static std::string Record(const std::string &body) {
    std::string r;
    XdrOut(&r).U32(0x80000000u | uint32_t(body.size()));
    return r + body;
  }
  // An accepted reply to xid with accept_stat and results.
  static std::string Reply(uint32_t xid, uint32_t accept_stat,
                           const std::string &results = "") {
    std::string b;
    XdrOut x(&b);
    x.U32(xid);
    x.U32(1);  // REPLY
    x.U32(0);  // MSG_ACCEPTED
    x.U32(0);  // verifier AUTH_NONE
    x.U32(0);
    x.U32(accept_stat);
    return b + results;
  }
  static std::string Str(const std::string &s) {
    std::string b;
    XdrOut(&b).Opaque(s);
    return b;
  }
  // Results of a call that ended: status, and the results' text (an XDR
  // string) when ok.
  struct Outcome {
    bool done = false;
    ReplyStatus status = ReplyStatus::kOk;
    std::string text;
  };
  Transport::ReplyFn Into(Outcome *o) {
    return [o](ReplyStatus st, XdrIn *results) {
      o->done = true;
      o->status = st;
      if (results) results->Opaque(&o->text, 1 << 20);
    };
  }

  std::unique_ptr<Transport> t_;
  int peer_ = -1;
};

TEST_F(RpcTransportTest, ACallIsEncodedAsRfc5531Says) {
  AuthSys auth;
  auth.stamp = 7;
  auth.machine = "nache";
  auth.uid = 1000;
  auth.gid = 100;
  auth.gids = {100, 4};
  Outcome o;
  uint32_t xid = t_->Call(kNfsProg, 4, 1, &auth, "ABCD", Into(&o));
  std::string rec = PeerReadRecord();
  XdrIn in(rec.data(), rec.size());
  uint32_t v[6];
  for (uint32_t &w : v) ASSERT_TRUE(in.U32(&w));
  EXPECT_EQ(v[0], xid);
  EXPECT_EQ(v[1], 0u) << "CALL";
  EXPECT_EQ(v[2], 2u) << "RPC version";
  EXPECT_EQ(v[3], kNfsProg);
  EXPECT_EQ(v[4], 4u);
  EXPECT_EQ(v[5], 1u);
  uint32_t flavor;
  std::string body;
  ASSERT_TRUE(in.U32(&flavor) && in.Opaque(&body, 400));
  EXPECT_EQ(flavor, 1u) << "AUTH_SYS";
  XdrIn b(body.data(), body.size());
  uint32_t stamp, uid, gid, ngids, g0, g1;
  std::string machine;
  ASSERT_TRUE(b.U32(&stamp) && b.Opaque(&machine, 255) && b.U32(&uid) &&
              b.U32(&gid) && b.U32(&ngids) && b.U32(&g0) && b.U32(&g1));
  EXPECT_EQ(stamp, 7u);
  EXPECT_EQ(machine, "nache");
  EXPECT_EQ(uid, 1000u);
  EXPECT_EQ(gid, 100u);
  EXPECT_EQ(ngids, 2u);
  EXPECT_EQ(g1, 4u);
  EXPECT_EQ(b.left(), 0u);
  uint32_t vflavor, vlen;
  ASSERT_TRUE(in.U32(&vflavor) && in.U32(&vlen));
  EXPECT_EQ(vflavor + vlen, 0u) << "verifier AUTH_NONE";
  ASSERT_EQ(in.left(), 4u);
  EXPECT_EQ(std::string(in.pos(), 4), "ABCD");
  EXPECT_EQ(t_->pending(), 1u);
  EXPECT_FALSE(o.done);
  t_.reset();  // (o dies with this test: nothing may call it later)
  EXPECT_EQ(o.status, ReplyStatus::kDisconnected);
}

TEST_F(RpcTransportTest, RepliesAreMatchedByXidOutOfOrderAndInFragments) {
  Outcome a, b;
  uint32_t xa = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&a));
  uint32_t xb = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&b));
  PeerReadRecord();
  PeerReadRecord();
  PeerWrite(Record(Reply(xb, 0, Str("second"))));
  ASSERT_TRUE(ServiceUntil([&] { return b.done; }));
  EXPECT_FALSE(a.done);
  EXPECT_EQ(b.text, "second");
  // a's reply in two fragments, trickling in a few bytes at a time.
  std::string body = Reply(xa, 0, Str("first, in pieces"));
  std::string wire;
  XdrOut(&wire).U32(10);  // not the last fragment
  wire += body.substr(0, 10);
  XdrOut(&wire).U32(0x80000000u | uint32_t(body.size() - 10));
  wire += body.substr(10);
  for (size_t i = 0; i < wire.size(); i += 3) {
    PeerWrite(wire.substr(i, 3));
    pollfd p{t_->fd(), POLLIN, 0};
    poll(&p, 1, 100);
    ASSERT_TRUE(t_->Service(p.revents)) << t_->error();
    if (i + 3 < wire.size()) EXPECT_FALSE(a.done) << "done at byte " << i;
  }
  ASSERT_TRUE(a.done);
  EXPECT_EQ(a.status, ReplyStatus::kOk);
  EXPECT_EQ(a.text, "first, in pieces");
  EXPECT_EQ(t_->pending(), 0u);
}

TEST_F(RpcTransportTest, ErrorRepliesAreReportedAsSuch) {
  Outcome proc, auth, garbled;
  uint32_t x1 = t_->Call(kNfsProg, 4, 9, nullptr, "", Into(&proc));
  uint32_t x2 = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&auth));
  uint32_t x3 = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&garbled));
  std::string denied;
  XdrOut d(&denied);
  d.U32(x2);
  d.U32(1);  // REPLY
  d.U32(1);  // MSG_DENIED
  d.U32(1);  // AUTH_ERROR
  d.U32(1);  // AUTH_BADCRED
  std::string short_reply;
  XdrOut s(&short_reply);
  s.U32(x3);
  s.U32(1);
  s.U32(0);  // accepted, then nothing
  PeerWrite(Record(Reply(x1, 3)) + Record(denied) + Record(short_reply));
  ASSERT_TRUE(ServiceUntil([&] { return garbled.done; }));
  EXPECT_EQ(proc.status, ReplyStatus::kProcUnavail);
  EXPECT_EQ(auth.status, ReplyStatus::kAuthError);
  EXPECT_EQ(garbled.status, ReplyStatus::kBadReply);
  EXPECT_TRUE(t_->error().empty()) << "the connection goes on";
}

TEST_F(RpcTransportTest, CancelledAndUnknownRepliesAreDropped) {
  Outcome o;
  uint32_t x = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&o));
  EXPECT_TRUE(t_->Cancel(x));
  EXPECT_FALSE(t_->Cancel(x));
  PeerWrite(Record(Reply(x, 0, Str("late"))) +
            Record(Reply(x + 1000, 0, Str("never ours"))));
  ASSERT_TRUE(ServiceUntil([&] { return t_->dropped_replies() == 2; }));
  EXPECT_FALSE(o.done);
}

// The NFSv4.1 back channel: the server calls us on our connection, while
// our own call's reply comes on it too.
TEST_F(RpcTransportTest, CallsFromThePeerAreServedOnTheSameConnection) {
  std::vector<uint32_t> seen;
  t_->SetCallHandler([&](const PeerCall &c, XdrIn *args, std::string *res) {
    seen.push_back(c.proc);
    std::string text;
    if (c.prog != kCbProg || !args->Opaque(&text, 100))
      return ReplyStatus::kGarbageArgs;
    XdrOut(res).Opaque("echo " + text);
    return ReplyStatus::kOk;
  });
  Outcome o;
  uint32_t ours = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&o));
  PeerReadRecord();
  auto call = [](uint32_t xid, uint32_t rpcvers, uint32_t prog,
                 const std::string &args) {
    std::string b;
    XdrOut x(&b);
    x.U32(xid);
    x.U32(0);  // CALL
    x.U32(rpcvers);
    x.U32(prog);
    x.U32(1);
    x.U32(1);  // CB_COMPOUND
    x.U32(1);  // AUTH_SYS, an empty-ish body
    x.Opaque(std::string(20, '\0'));
    x.U32(0);
    x.U32(0);
    return b + args;
  };
  PeerWrite(Record(call(77, 2, kCbProg, Str("hello"))) +
            Record(Reply(ours, 0, Str("yours"))) +
            Record(call(78, 2, kCbProg + 1, "")) +
            Record(call(79, 3, kCbProg, "")));
  ASSERT_TRUE(ServiceUntil([&] { return o.done && seen.size() == 2; }));
  EXPECT_EQ(o.text, "yours");
  // Three replies, in order: results; garbage args; RPC_MISMATCH.
  std::string r1 = PeerReadRecord();
  XdrIn in(r1.data(), r1.size());
  uint32_t xid, type, stat, vf, vl, accept;
  std::string text;
  ASSERT_TRUE(in.U32(&xid) && in.U32(&type) && in.U32(&stat) && in.U32(&vf) &&
              in.U32(&vl) && in.U32(&accept) && in.Opaque(&text, 100));
  EXPECT_EQ(xid, 77u);
  EXPECT_EQ(type, 1u) << "REPLY";
  EXPECT_EQ(stat, 0u) << "accepted";
  EXPECT_EQ(accept, 0u) << "SUCCESS";
  EXPECT_EQ(text, "echo hello");
  EXPECT_EQ(in.left(), 0u);
  std::string r2 = PeerReadRecord();
  XdrIn in2(r2.data(), r2.size());
  ASSERT_TRUE(in2.U32(&xid) && in2.U32(&type) && in2.U32(&stat) &&
              in2.U32(&vf) && in2.U32(&vl) && in2.U32(&accept));
  EXPECT_EQ(xid, 78u);
  EXPECT_EQ(accept, 4u) << "GARBAGE_ARGS";
  EXPECT_EQ(in2.left(), 0u) << "no results";
  std::string r3 = PeerReadRecord();
  XdrIn in3(r3.data(), r3.size());
  uint32_t reject, low, high;
  ASSERT_TRUE(in3.U32(&xid) && in3.U32(&type) && in3.U32(&stat) &&
              in3.U32(&reject) && in3.U32(&low) && in3.U32(&high));
  EXPECT_EQ(xid, 79u);
  EXPECT_EQ(stat, 1u) << "denied";
  EXPECT_EQ(reject, 0u) << "RPC_MISMATCH";
  EXPECT_EQ(low + high, 4u);
  EXPECT_EQ(seen, (std::vector<uint32_t>{1, 1}))
      << "the RPC version mismatch never reached the handler";
}

TEST_F(RpcTransportTest, WithoutAHandlerCallsAreAnsweredProgUnavail) {
  std::string b;
  XdrOut x(&b);
  for (uint32_t w : {5u, 0u, 2u, kCbProg, 1u, 0u, 0u, 0u, 0u, 0u}) x.U32(w);
  PeerWrite(Record(b));
  std::string r = PeerReadRecord();
  XdrIn in(r.data(), r.size());
  uint32_t w[6];
  for (uint32_t &v : w) ASSERT_TRUE(in.U32(&v));
  EXPECT_EQ(w[0], 5u);
  EXPECT_EQ(w[5], 1u) << "PROG_UNAVAIL";
}

// PROG_MISMATCH carries the versions the handler serves (RFC 5531's
// mismatch_info); a handler that gives none makes it SYSTEM_ERR.
TEST_F(RpcTransportTest, ProgMismatchCarriesTheVersionsServed) {
  bool give_info = true;
  t_->SetCallHandler([&](const PeerCall &, XdrIn *, std::string *res) {
    if (give_info) {
      XdrOut(res).U32(3);
      XdrOut(res).U32(4);
    }
    return ReplyStatus::kProgMismatch;
  });
  auto reply_words = [this](uint32_t xid) {
    std::string b;
    XdrOut x(&b);
    for (uint32_t w : {xid, 0u, 2u, kCbProg, 9u, 0u, 0u, 0u, 0u, 0u}) x.U32(w);
    PeerWrite(Record(b));
    std::string r = PeerReadRecord();
    XdrIn in(r.data(), r.size());
    std::vector<uint32_t> words;
    uint32_t w;
    while (in.U32(&w)) words.push_back(w);
    return words;
  };
  EXPECT_EQ(reply_words(5), (std::vector<uint32_t>{5, 1, 0, 0, 0, 2, 3, 4}))
      << "PROG_MISMATCH, versions 3 to 4";
  give_info = false;
  EXPECT_EQ(reply_words(6), (std::vector<uint32_t>{6, 1, 0, 0, 0, 5}))
      << "SYSTEM_ERR";
}

// A peer that calls without reading the replies: with set_max_queued, the
// transport stops reading its calls once that much waits to be sent (and
// the socket takes no more), and serves the rest as the peer reads.
TEST_F(RpcTransportTest, QueuedRepliesBoundHowMuchOfThePeersCallsIsRead) {
  int small = 4096;  // the kernel's minimum: a few replies fill it
  ASSERT_EQ(setsockopt(t_->fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small),
            0);
  constexpr size_t kBound = 8192, kReply = 1000;
  constexpr uint32_t kCalls = 400;
  t_->set_max_queued(kBound);
  uint32_t served = 0;
  t_->SetCallHandler([&](const PeerCall &, XdrIn *, std::string *res) {
    served++;
    res->append(kReply, 'r');
    return ReplyStatus::kOk;
  });
  std::string calls;
  for (uint32_t xid = 1; xid <= kCalls; xid++) {
    std::string b;
    XdrOut x(&b);
    for (uint32_t w : {xid, 0u, 2u, kCbProg, 1u, 0u, 0u, 0u, 0u, 0u}) x.U32(w);
    calls += Record(b);
  }
  PeerWrite(calls);  // 400 calls of 44 bytes: the socket takes them all
  for (int round = 0; round < 20; round++) {
    pollfd p{t_->fd(), t_->WantEvents(), 0};
    poll(&p, 1, 10);
    ASSERT_TRUE(t_->Service(p.revents)) << t_->error();
    ASSERT_LE(t_->queued_bytes(), kBound + kReply + 100);
  }
  EXPECT_LT(served, kCalls) << "read everything, replies unbounded";
  EXPECT_GT(t_->queued_bytes(), kBound);
  EXPECT_EQ(t_->WantEvents() & POLLIN, 0) << "still asks for calls";
  // The peer reads: every call is served, in order.
  for (uint32_t xid = 1; xid <= kCalls; xid++) {
    std::string r = PeerReadRecord();
    uint32_t got = 0;
    ASSERT_GE(r.size(), 4u) << "reply " << xid;
    XdrIn(r.data(), 4).U32(&got);
    ASSERT_EQ(got, xid);
  }
  EXPECT_EQ(served, kCalls);
  EXPECT_EQ(t_->queued_bytes(), 0u);
}

TEST_F(RpcTransportTest, AnOversizedRecordEndsTheConnection) {
  Open(1024);
  Outcome o;
  t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&o));
  PeerReadRecord();
  std::string m;
  XdrOut(&m).U32(0x80000000u | 4096u);
  PeerWrite(m);
  pollfd p{t_->fd(), POLLIN, 0};
  poll(&p, 1, 1000);
  EXPECT_FALSE(t_->Service(p.revents));
  EXPECT_NE(t_->error().find("1024"), std::string::npos) << t_->error();
  EXPECT_FALSE(o.done);
  t_.reset();  // the owner drops it: what was pending fails
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.status, ReplyStatus::kDisconnected);
}

TEST_F(RpcTransportTest, ThePeerClosingFailsTheConnection) {
  Outcome o;
  t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&o));
  PeerReadRecord();
  close(peer_);
  peer_ = -1;
  EXPECT_FALSE(ServiceUntil([] { return false; }));
  EXPECT_NE(t_->error().find("closed"), std::string::npos) << t_->error();
  t_->FailAll();
  EXPECT_EQ(o.status, ReplyStatus::kDisconnected);
}

// Issue 15 defect 12: the first XID came from getpid() << 20 (a signed
// overflow) mixed with the clock; now 32 random bits. Transports made in
// the same second by one process differ across all 32 bits (the old seed's
// top bits were fixed by the second and the pid), so a restart does not
// land next to the XIDs its previous incarnation used.
TEST_F(RpcTransportTest, FirstXidsAreSpreadOverAll32Bits) {
  std::vector<uint32_t> xids;
  for (int i = 0; i < 64; i++) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Transport t(sv[0]);
    Outcome o;
    xids.push_back(t.Call(kNfsProg, 4, 0, nullptr, "", Into(&o)));
    t.Cancel(xids.back());
    close(sv[1]);
  }
  std::sort(xids.begin(), xids.end());
  EXPECT_EQ(std::unique(xids.begin(), xids.end()), xids.end());
  int top_set = 0, second_set = 0;
  for (uint32_t x : xids) {
    top_set += (x >> 31) & 1;
    second_set += (x >> 30) & 1;
  }
  EXPECT_GT(top_set, 0);
  EXPECT_LT(top_set, 64);
  EXPECT_GT(second_set, 0);
  EXPECT_LT(second_set, 64);
}

// A reply twice, a reply after its call was given up (timed out), and one
// to an XID never ours: each dropped and counted, the calls around them
// untouched, the connection fine.
TEST_F(RpcTransportTest, DuplicateLateAndUnknownRepliesAreDropped) {
  int a_runs = 0;
  Outcome b, c;
  uint32_t xa = t_->Call(kNfsProg, 4, 1, nullptr, "",
                         [&a_runs](ReplyStatus, XdrIn *) { a_runs++; });
  uint32_t xb = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&b));
  uint32_t xc = t_->Call(kNfsProg, 4, 1, nullptr, "", Into(&c));
  EXPECT_TRUE(t_->Cancel(xb));  // b timed out
  PeerWrite(Record(Reply(xa, 0, Str("a"))) + Record(Reply(xa, 0, Str("a2"))) +
            Record(Reply(xb, 0, Str("late"))) +
            Record(Reply(xa ^ xb ^ xc ^ 0x5a5a5a5au, 0, Str("stranger"))));
  ASSERT_TRUE(ServiceUntil([&] { return t_->dropped_replies() == 3; }));
  EXPECT_EQ(a_runs, 1);
  EXPECT_FALSE(b.done);
  EXPECT_FALSE(c.done);
  EXPECT_EQ(t_->pending(), 1u);
  PeerWrite(Record(Reply(xc, 0, Str("c"))));
  ASSERT_TRUE(ServiceUntil([&] { return c.done; }));
  EXPECT_EQ(c.text, "c");
  EXPECT_TRUE(t_->error().empty()) << t_->error();
}

// Record marking from the peer: a fragment header claiming 2 GiB ends the
// connection on its 4 bytes, before anything is buffered; so do fragments
// that each fit but add up past the bound.
TEST_F(RpcTransportTest, RecordLengthsFromThePeerAreBounded) {
  std::string m;
  XdrOut(&m).U32(0xffffffffu);  // last fragment, 2^31 - 1 bytes
  PeerWrite(m);
  pollfd p{t_->fd(), POLLIN, 0};
  poll(&p, 1, 1000);
  EXPECT_FALSE(t_->Service(p.revents));
  EXPECT_NE(t_->error().find("more than"), std::string::npos) << t_->error();
  close(peer_);
  Open(1024);
  std::string frags;
  for (int i = 0; i < 3; i++) {
    XdrOut(&frags).U32(400);  // not the last
    frags += std::string(400, 'x');
  }
  PeerWrite(frags);
  EXPECT_FALSE(ServiceUntil([] { return false; }));
  EXPECT_NE(t_->error().find("1024"), std::string::npos) << t_->error();
}

// What we send is bounded the same way: a call longer than the bound is
// refused, not sent; a reply to the peer too long to send is SYSTEM_ERR.
TEST_F(RpcTransportTest, RecordsOfOursLongerThanTheBoundAreNotSent) {
  Open(1024);
  Outcome o;
  EXPECT_EQ(t_->Call(kNfsProg, 4, 1, nullptr, std::string(2000, 'x'), Into(&o)),
            0u);
  EXPECT_EQ(t_->pending(), 0u);
  EXPECT_EQ(t_->queued_bytes(), 0u);
  t_->SetCallHandler([](const PeerCall &, XdrIn *, std::string *res) {
    res->append(4096, 'r');
    return ReplyStatus::kOk;
  });
  std::string b;
  XdrOut x(&b);
  for (uint32_t w : {9u, 0u, 2u, kCbProg, 1u, 1u, 0u, 0u, 0u, 0u}) x.U32(w);
  PeerWrite(Record(b));
  std::string r = PeerReadRecord();
  XdrIn in(r.data(), r.size());
  uint32_t w[6];
  for (uint32_t &v : w) ASSERT_TRUE(in.U32(&v));
  EXPECT_EQ(w[0], 9u);
  EXPECT_EQ(w[5], 5u) << "SYSTEM_ERR";
  EXPECT_EQ(in.left(), 0u);
  EXPECT_FALSE(o.done);
}

// A call larger than the socket takes at once goes out across many
// partial sends, whole and in order.
TEST_F(RpcTransportTest, ALargeCallIsSentAcrossPartialWrites) {
  std::string args(4u << 20, '\0');
  for (size_t i = 0; i < args.size(); i++) args[i] = char(i * 7 + i / 4096);
  Outcome o;
  t_->Call(kNfsProg, 4, 1, nullptr, args, Into(&o));
  EXPECT_GT(t_->queued_bytes(), args.size());
  std::string rec = PeerReadRecord();
  ASSERT_GE(rec.size(), args.size());
  EXPECT_TRUE(rec.compare(rec.size() - args.size(), args.size(), args) == 0);
  EXPECT_EQ(t_->queued_bytes(), 0u);
  t_.reset();  // (o dies with this test: nothing may call it later)
  EXPECT_EQ(o.status, ReplyStatus::kDisconnected);
}

// The client side of a connection: a listener on loopback is reached (from
// a reserved port when the test runs as root); a closed port is refused.
TEST(TcpConnectTest, ConnectsAndReportsRefusal) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(l, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(listen(l, 1), 0);
  ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr *>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  std::string error;
  int fd = StartConnect("127.0.0.1", port, &error);
  ASSERT_GE(fd, 0) << error;
  pollfd p{fd, POLLOUT, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  EXPECT_EQ(ConnectResult(fd), 0);
  sockaddr_in local{};
  len = sizeof local;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len), 0);
  if (geteuid() == 0) EXPECT_LT(ntohs(local.sin_port), 1024) << "reserved";
  close(fd);
  close(l);  // nothing listens there now
  fd = StartConnect("127.0.0.1", port, &error);
  if (fd >= 0) {
    pollfd q{fd, POLLOUT, 0};
    ASSERT_EQ(poll(&q, 1, 5000), 1);
    EXPECT_EQ(ConnectResult(fd), ECONNREFUSED);
    close(fd);
  } else {
    EXPECT_NE(error.find("refused"), std::string::npos) << error;
  }
  EXPECT_LT(StartConnect("no-such-host.invalid", port, &error), 0);
  EXPECT_NE(error.find("resolve"), std::string::npos) << error;
}

// A connection probes its peer once idle for a few seconds: a server that
// restarted (and forgot the connection without a word) is found out while
// its grace period still runs, not at our next lease renewal. Seen as
// knfsd612_v41's reclaim after a restart failing: knfsd's 10 s grace was
// over when nache first spoke to it again, 30 s after its last renewal.
TEST(TcpConnectTest, IdleConnectionsProbeTheirPeerWithinSeconds) {
  std::string error;
  int fd = StartConnect("127.0.0.1", 9, &error);  // the connect may fail
  ASSERT_GE(fd, 0) << error;
  auto opt = [fd](int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    EXPECT_EQ(getsockopt(fd, level, name, &v, &len), 0);
    return v;
  };
  EXPECT_EQ(opt(SOL_SOCKET, SO_KEEPALIVE), 1);
  const int idle = opt(IPPROTO_TCP, TCP_KEEPIDLE);
  const int interval = opt(IPPROTO_TCP, TCP_KEEPINTVL);
  const int probes = opt(IPPROTO_TCP, TCP_KEEPCNT);
  EXPECT_LE(idle, 5);
  // An unanswered connection is given up within 15 s of going idle.
  EXPECT_LE(idle + interval * probes, 15);
  EXPECT_GE(probes, 2);
  close(fd);
}

}  // namespace
}  // namespace rpc
}  // namespace nache
