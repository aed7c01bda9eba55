// Faults at each step of a flush: a kill (then a restart on the same
// store), a request lost, a reply lost with the client id gone.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

// The data acknowledged in every case: a write (kept here, write-back)
// and then its mtime, as tar sets it after the data (sent last).
constexpr char kOurs[] = "ours, and longer than theirs";

// A single-writer write-back export that flushes at once.
class FlushStepTest : public CoreDelegationsTest {
 protected:
  void StartFlushingAtOnce(bool probe_callbacks) {
    Start(
        DelegationType::kNone,
        [](CoreConfig *cfg) {
          cfg->write_back = true;
          cfg->single_writer = true;
          cfg->flush_age_ms = 0;
        },
        probe_callbacks);
  }
  // Writes kOurs to f, then sets its mtime; both acknowledged.
  void WriteOursThenMtime() {
    const std::string ours = kOurs;
    size_t n = 0;
    upstream::StableHow committed{};
    ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, ours.size(), ours.data(),
                           upstream::StableHow::kFileSync, &n, &committed),
              0u);
    Attrs set, attrs;
    set.mask = upstream::kAttrMtime;
    set.mtime.sec = 1234567890;
    ASSERT_EQ(core_->Setattr(cr_, file_, nullptr, set, &attrs), 0u);
  }
};

// A kill of nache at each step of a flush (simulated at the server: the
// op is done there, its reply never arrives, nothing more reaches the
// server), then a restart on the same cache: the remote ends with exactly
// the acknowledged data, and our own half-done flush is never taken for
// someone else's write (no conflict copy).
class FlushKillTest : public FlushStepTest,
                      public ::testing::WithParamInterface<const char *> {};

TEST_P(FlushKillTest, AKillAtThisStepLosesNothingAndMakesNoConflict) {
  StartFlushingAtOnce(true);
  up_->DieAfter(GetParam());
  WriteOursThenMtime();
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->dead.load(); }))
      << "the flush never reached " << GetParam();
  core_.reset();  // killed: what it wrote to its store is all that is left
  up_->dead = false;
  StartFlushingAtOnce(false);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("f") == kOurs; }))
      << "the remote holds \"" << up_->Data("f") << "\"";
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
}

// The flush's steps for a file the remote has: the conflict check's
// GETATTR, the WRITE of the data, the SETATTR of the mtime after it.
INSTANTIATE_TEST_SUITE_P(EveryStep, FlushKillTest,
                         ::testing::Values("GETATTR", "WRITE", "SETATTR"));

// Faults at each step of a flush, nache running on: the request lost on
// its way (not done); or the op done at the server, its reply lost, and
// the server having forgotten our client id and its state meanwhile (with
// an NFSv4.1 upstream, the session and the client id behind it: a lease
// that lapsed in a WAN cut). The flush carries on (under the new client
// id): the remote ends with exactly the acknowledged data, and the
// half-done flush is not taken for someone else's write.
enum class FlushFault { kRequestLost, kReplyAndStateLost };

class FlushFaultTest : public FlushStepTest,
                       public ::testing::WithParamInterface<
                           std::tuple<const char *, FlushFault>> {};

TEST_P(FlushFaultTest, AFaultAtThisStepLosesNothingAndMakesNoConflict) {
  const std::string op = std::get<0>(GetParam());
  StartFlushingAtOnce(true);
  if (std::get<1>(GetParam()) == FlushFault::kRequestLost)
    up_->LoseRequestWith(op);
  else
    up_->LoseReplyOf(op, true);
  WriteOursThenMtime();
  ASSERT_TRUE(cb_client::WaitFor([&] {
    return up_->Data("f") == kOurs && up_->Count("SETATTR") >= 1;
  })) << "the remote holds \""
      << up_->Data("f") << "\"";
  EXPECT_FALSE(up_->FaultPending()) << "the flush never reached " << op;
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryStep, FlushFaultTest,
    ::testing::Combine(::testing::Values("GETATTR", "WRITE", "SETATTR"),
                       ::testing::Values(FlushFault::kRequestLost,
                                         FlushFault::kReplyAndStateLost)));

}  // namespace
}  // namespace coretest
}  // namespace nache
