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
  // max_io: the largest WRITE (0: the default).
  void StartFlushingAtOnce(bool probe_callbacks, uint32_t max_io = 0) {
    Start(
        DelegationType::kNone,
        [max_io](CoreConfig *cfg) {
          cfg->write_back = true;
          cfg->single_writer = true;
          cfg->flush_age_ms = 0;
          if (max_io) cfg->max_io_size = max_io;
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

// Clean-clone run 54's crash loop: a file created here with more data
// than one WRITE, flushed (its create, then its data as UNSTABLE WRITEs
// and a COMMIT), moved into a directory, with nache killed once in the
// first flush and once in the flush after the move and a rename of the
// directory, at each step. After a last restart the remote holds the
// acknowledged data under the new name, and nothing beside it.
class MoveKillTest : public FlushStepTest,
                     public ::testing::WithParamInterface<
                         std::tuple<const char *, const char *>> {
 protected:
  // (4 KiB WRITEs: several, then a COMMIT.)
  void StartAgain() { StartFlushingAtOnce(false, 4096); }
  // A kill at the first op of that name ("" none) once it is reached, or
  // once done() says the flush has ended without it.
  void KillAt(const char *op, const std::function<bool()> &done = nullptr) {
    if (*op && !done) {
      EXPECT_TRUE(cb_client::WaitFor([&] { return up_->dead.load(); }))
          << "never reached " << op;
    } else if (*op) {
      EXPECT_TRUE(
          cb_client::WaitFor([&] { return up_->dead.load() || done(); }));
    }
    up_->hold_writes = false;
    core_.reset();
    up_->dead = false;
    up_->DieAfter("");
  }
};

TEST_P(MoveKillTest, KillsAroundAMoveIntoADirectoryLoseNothing) {
  const char *first = std::get<0>(GetParam());
  const char *second = std::get<1>(GetParam());
  up_->minor = 1;
  up_->unstable_writes = true;
  up_->AddDir("d");
  std::string data(5 * 4096, '\0');
  for (size_t i = 0; i < data.size(); i++) data[i] = char('a' + i * 7 % 23);
  StartAgain();
  up_->DieAfter(first);
  CreateWritten("w", data);
  KillAt(first);
  // Restarted: the data's flush waits at its first WRITE while the move
  // is logged, then goes on, and is killed at the second step if it
  // comes (after a kill at the OPEN the move is a local one: no RENAME).
  up_->hold_writes = true;
  StartAgain();
  Key d;
  ASSERT_EQ(core_->Lookup(cr_, root_, "d", &d, nullptr), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "w", d, "w"), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "d", root_, "e"), 0u);
  up_->DieAfter(second);
  up_->hold_writes = false;
  KillAt(second, [&] {
    return up_->Data("e/w") == data && up_->Data("w") == "<none>";
  });
  StartAgain();
  std::string err;
  ASSERT_TRUE(core_->AdminFlush(
      std::chrono::steady_clock::now() + std::chrono::seconds(20), &err))
      << err;
  EXPECT_EQ(up_->Data("e/w"), data);
  EXPECT_EQ(up_->Data("w"), "<none>");
  EXPECT_EQ(up_->Tree(), "e/ e/w f");
}

INSTANTIATE_TEST_SUITE_P(
    EveryStep, MoveKillTest,
    ::testing::Combine(::testing::Values("OPEN", "WRITE", "COMMIT"),
                       ::testing::Values("", "WRITE", "COMMIT", "RENAME",
                                         "SETATTR")));

// The same kill at the create's OPEN (done at the remote, its reply
// lost), then a remove here: the file the lost OPEN made is removed
// too, whether it holds data or not.
TEST_F(MoveKillTest, AKillAtTheCreateThenARemoveLeavesNothing) {
  up_->minor = 1;
  StartAgain();
  up_->DieAfter("OPEN");
  CreateWritten("w", "short-lived");
  KillAt("OPEN");
  ASSERT_EQ(up_->Data("w"), "") << "made by the lost OPEN";
  StartAgain();
  ASSERT_EQ(core_->Remove(cr_, root_, "w"), 0u);
  Key k;
  EXPECT_EQ(core_->Lookup(cr_, root_, "w", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  std::string err;
  ASSERT_TRUE(core_->AdminFlush(
      std::chrono::steady_clock::now() + std::chrono::seconds(20), &err))
      << err;
  EXPECT_EQ(up_->Tree(), "f");
}

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
