// The NFSv4.1 fore channel's slot table: sequence ids per slot, busy slots
// skipped, a lost reply's slot settled by probes before it carries a
// request again (checked against a model of a server's slot with its reply
// cache), and the server's target honoured.
#include "upstream/slot_table.h"

#include <gtest/gtest.h>

#include <string>

namespace nache {
namespace upstream {
namespace {

using Outcome = SlotTable::Outcome;

TEST(SlotTableTest, EachSlotCountsItsOwnSequence) {
  SlotTable t(2);
  SlotTable::Slot a, b, c, r;
  ASSERT_TRUE(t.Acquire(&a));
  ASSERT_TRUE(t.Acquire(&b));
  EXPECT_EQ(a.slotid, 0u);
  EXPECT_EQ(b.slotid, 1u);
  EXPECT_EQ(a.sequenceid, 1u) << "a new slot starts at 1";
  EXPECT_FALSE(a.probe);
  EXPECT_EQ(b.highest_slotid, 1u);
  EXPECT_FALSE(t.Acquire(&c)) << "both busy";
  EXPECT_FALSE(t.Release(a, Outcome::kDone, &r));
  ASSERT_TRUE(t.Acquire(&c));
  EXPECT_EQ(c.slotid, 0u);
  EXPECT_EQ(c.sequenceid, 2u);
  // Not executed (say NFS4ERR_DELAY): the same id again.
  EXPECT_FALSE(t.Release(c, Outcome::kNotDone, &r));
  ASSERT_TRUE(t.Acquire(&c));
  EXPECT_EQ(c.sequenceid, 2u);
  EXPECT_EQ(t.busy(), 2u);
}

TEST(SlotTableTest, ALostReplysSlotIsProbedBeforeItCarriesARequest) {
  SlotTable t(1);
  SlotTable::Slot s, r;
  ASSERT_TRUE(t.Acquire(&s));  // id 1
  t.Release(s, Outcome::kDone, &r);
  ASSERT_TRUE(t.Acquire(&s));  // id 2, its reply lost
  EXPECT_EQ(s.sequenceid, 2u);
  t.Release(s, Outcome::kLost, &r);
  ASSERT_TRUE(t.Acquire(&s));
  EXPECT_TRUE(s.probe) << "no request of the caller's on it yet";
  EXPECT_EQ(s.sequenceid, 3u);
  // Misordered: the server is below 3; the probe goes again as 2.
  ASSERT_TRUE(t.Release(s, Outcome::kMisordered, &r));
  EXPECT_TRUE(r.probe);
  EXPECT_EQ(r.slotid, 0u);
  EXPECT_EQ(r.sequenceid, 2u);
  SlotTable::Slot none;
  EXPECT_FALSE(t.Acquire(&none)) << "the slot stays taken for the retry";
  // 2 answered (executed now, or the lost one's cached reply): at 2.
  EXPECT_FALSE(t.Release(r, Outcome::kDone, &r));
  ASSERT_TRUE(t.Acquire(&s));
  EXPECT_FALSE(s.probe);
  EXPECT_EQ(s.sequenceid, 3u);
  EXPECT_FALSE(t.Release(s, Outcome::kDone, &r));
  // A request of ours misordered on a settled slot: the server disagrees;
  // never resent here, the slot is probed (from 1: it may have started the
  // slot afresh) before it carries another.
  ASSERT_TRUE(t.Acquire(&s));
  EXPECT_EQ(s.sequenceid, 4u);
  EXPECT_FALSE(t.Release(s, Outcome::kMisordered, &r));
  EXPECT_EQ(t.busy(), 0u);
  ASSERT_TRUE(t.Acquire(&s));
  EXPECT_TRUE(s.probe);
  EXPECT_EQ(s.sequenceid, 1u);
  // And when even that is refused, the slot is given up, not looped on.
  EXPECT_FALSE(t.Release(s, Outcome::kMisordered, &r));
  EXPECT_EQ(t.retired(), 1u);
  EXPECT_FALSE(t.Acquire(&s));
}

// A server's slot as RFC 8881 section 2.10.6 and Linux knfsd keep it: the
// last id executed, its cached reply (here: what it answered), and whether
// a request is executing on it now.
struct ServerSlot {
  uint32_t seqid = 0;
  std::string cached;  // the request whose reply is cached
  bool inuse = false;
  std::string executing;
  int false_retries = 0;  // a new request answered with another's reply
  int executed_c = 0;
  // A request arrives. Returns the SEQUENCE outcome the client sees.
  Outcome Receive(uint32_t id, const std::string &what, bool probe) {
    // Busy: the executing id again is NFS4ERR_DELAY, any other misordered.
    if (inuse) return id == seqid ? Outcome::kNotDone : Outcome::kMisordered;
    if (id == seqid) {
      // A retransmission: the cached reply. Harmless for a probe; for a
      // request that is not the cached one, a false retry.
      if (!probe && what != cached) false_retries++;
      return Outcome::kDone;
    }
    if (id != seqid + 1) return Outcome::kMisordered;
    seqid = id;
    cached = what;
    if (what == "C") executed_c++;
    return Outcome::kDone;
  }
  // The request begins executing and is not done yet (a slow server).
  void Begin(uint32_t id, const std::string &what) {
    seqid = id;
    inuse = true;
    executing = what;
  }
  void Finish() {
    inuse = false;
    cached = executing;
  }
};

// Request B's reply is lost, and the server has B in one of three states:
// never received, executed, or still executing (its reply then cached once
// done). Request C then goes out on the slot, the table's way (probes
// first); the server never answers C with B's reply, and C is executed
// exactly once.
TEST(SlotTableTest, AfterALostReplyNoRequestIsTakenForAnothersRetry) {
  enum Fate { kNeverSeen, kExecuted, kExecuting };
  for (Fate fate : {kNeverSeen, kExecuted, kExecuting}) {
    SCOPED_TRACE(fate);
    SlotTable t(1);
    ServerSlot server;
    SlotTable::Slot s, r;
    ASSERT_TRUE(t.Acquire(&s));
    ASSERT_EQ(server.Receive(s.sequenceid, "A", false), Outcome::kDone);
    t.Release(s, Outcome::kDone, &r);
    ASSERT_TRUE(t.Acquire(&s));  // B
    if (fate == kExecuted) server.Receive(s.sequenceid, "B", false);
    if (fate == kExecuting) server.Begin(s.sequenceid, "B");
    t.Release(s, Outcome::kLost, &r);
    // C, sent the table's way until it is done; B finishes meanwhile.
    int rounds = 0;
    for (bool c_done = false; !c_done && rounds < 10; rounds++) {
      if (rounds == 2) server.Finish();
      ASSERT_TRUE(t.Acquire(&s));
      for (;;) {
        const bool probe = s.probe;
        Outcome o = server.Receive(s.sequenceid, probe ? "probe" : "C", probe);
        if (!probe && o == Outcome::kDone) c_done = true;
        if (!t.Release(s, o, &r)) break;
        s = r;  // a probe again, one id lower
      }
    }
    EXPECT_EQ(server.false_retries, 0);
    EXPECT_EQ(server.executed_c, 1);
    EXPECT_EQ(t.busy(), 0u);
    EXPECT_EQ(t.retired(), 0u);
  }
}

TEST(SlotTableTest, TheServersTargetLimitsTheSlotsUsed) {
  SlotTable t(4);
  t.SetTarget(1);
  SlotTable::Slot a, b, c;
  ASSERT_TRUE(t.Acquire(&a));
  ASSERT_TRUE(t.Acquire(&b));
  EXPECT_FALSE(t.Acquire(&c)) << "slots 2 and 3 are above the target";
  t.SetTarget(99);  // bounded by the table
  ASSERT_TRUE(t.Acquire(&c));
  EXPECT_EQ(c.slotid, 2u);
  EXPECT_EQ(t.size(), 4u);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
