// Lost requests and replies of operations that are not idempotent:
// NFSv4.0 seqid-bearing requests resent unchanged, retries of creates,
// links, removes and renames whose reply was lost.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

// Lost replies of operations that are not idempotent. NFSv4.0 open-owner
// seqids first: an OPEN whose reply is lost may have been
// executed: the owner's seqid at the server is unknown. Resent unchanged, it
// is answered from the server's replay cache; were the owner's next OPEN
// (another file) sent with the same seqid instead, the server would answer
// it with the lost OPEN's reply, and writes to the second file would go to
// the first.
class LostReplyTest : public CoreDelegationsTest {
 protected:
  void SetUp() override {
    CoreDelegationsTest::SetUp();
    up_->AddFile("a", "AAA");
    up_->AddFile("b", "BBB");
  }
  // Opens name (in the root) for reading and writing; the status.
  uint32_t OpenName(const char *name, NacheOpen **open, Key *key) {
    bool created = false;
    return OpenNamed(cr_, name, NACHE_OPEN_NOCREATE, open, key, &created);
  }
  // Writes data at 0 through an open of name (write-through), closes it.
  void WriteThrough(const char *name, const std::string &data) {
    bool created = false;
    ASSERT_NE(WriteNamed(cr_, name, NACHE_OPEN_NOCREATE, data, &created),
              kNoKey);
  }
};

TEST_F(LostReplyTest, AnOpenWhoseReplyWasLostIsResentUnchanged) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->LoseReplyOf("OPEN");
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), 0u) << "the lost OPEN's resend";
  EXPECT_EQ(up_->Count("OPEN(replayed)"), 1);
  if (a) {
    EXPECT_EQ(core_->CloseFile(a), 0u);
  }
  WriteThrough("b", "b-wrote");
  EXPECT_EQ(up_->Data("b"), "b-wrote");
  EXPECT_EQ(up_->Data("a"), "AAA");
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "answered"}}),
            1);
  EXPECT_EQ(core_->CloseFile(f), 0u);
}

// A new owner's first OPEN is not sequenced by the server: resent, it would
// be executed anew, and a flushed create (GUARDED) would find its own file
// and make a false conflict. It is left to the flusher's retry, which
// knows the create may have happened (UNCHECKED).
TEST_F(LostReplyTest, ALostFirstOpenOfAFlushOwnerMakesNoConflict) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  up_->LoseReplyOf("OPEN");
  Key n = CreateWritten("n", "new-data");
  ASSERT_NE(n, kNoKey);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("n") == "new-data"; }))
      << "the remote holds \"" << up_->Data("n") << "\"";
  EXPECT_TRUE(up_->Names("n.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
}

// A flushed create (GUARDED) resent after its reply was lost, which the
// remote executes anew instead of answering from a replay cache: EXIST
// then means the file the first send made, not somebody else's. No
// conflict copy. (Files are flushed first until every flush owner is
// known to the server: n's OPEN is then resent, not left to the
// flusher's retry as a new owner's first OPEN is.)
TEST_F(LostReplyTest, AResentFlushCreateMeetingItsOwnFileMakesNoConflict) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  for (int i = 0; i < 8 * int(Core::kFlushOwners) &&
                  up_->OwnersSeen("-flush") < Core::kFlushOwners;
       i++) {
    std::string name = "p" + std::to_string(i);
    CreateWritten(name.c_str(), "p");
    ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data(name) == "p"; }));
  }
  ASSERT_EQ(up_->OwnersSeen("-flush"), Core::kFlushOwners);
  up_->no_replay = true;
  up_->LoseReplyOf("OPEN");
  const int lookups = up_->Count("LOOKUP");
  CreateWritten("n", "new-data");
  // The flush's outcome is known once the resent OPEN was answered (EXIST)
  // and n was looked up as ours (flush_create_lookup; a conflict copy
  // would have been made instead), and the data is there. (The data may
  // reach the remote before the resend: with the first send, when the
  // write was in the cache by then.)
  ASSERT_TRUE(cb_client::WaitFor([&] {
    return CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                        {{"outcome", "answered"}}) >= 1 &&
           up_->Count("LOOKUP") > lookups && up_->Data("n") == "new-data";
  })) << "the lost OPEN was never resent, n never taken for ours, or its "
         "data never sent";
  EXPECT_EQ(up_->Data("n"), "new-data");
  EXPECT_TRUE(up_->Names("n.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "answered"}}),
            1);
}

// The client's retry of an exclusive create (O_EXCL) whose reply was lost,
// which the remote did: the retry finds the name taken (EXIST) by the
// file this very create made, and opens it instead of failing; someone
// else's retry does not. (The first OPEN of an owner: Run does not resend
// it, as with NFSv4.1, whose session retires the slot instead.)
TEST_F(LostReplyTest, ARetryOfAnExclusiveCreateWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  const nache_createmode excl = NACHE_OPEN_EXCLUSIVE;
  NacheOpen *open = nullptr;
  Key key = kNoKey;
  bool created = false;
  up_->DieAfter("OPEN");
  EXPECT_EQ(OpenNamed(cr_, "x", excl, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrDelay));
  up_->dead = false;
  ASSERT_EQ(up_->Data("x"), "") << "made at the remote";
  ASSERT_EQ(OpenNamed(cr_, "x", excl, &open, &key, &created), 0u)
      << "the retry";
  EXPECT_TRUE(created);
  EXPECT_EQ(core_->CloseFile(open), 0u);
  up_->DieAfter("OPEN");
  EXPECT_NE(OpenNamed(cr_, "y", excl, &open, &key, &created), 0u);
  up_->dead = false;
  if (up_->restarts_asked.load() > 0)
    up_->Restart(false);  // the new client id the core asked for
  Creds someone;
  someone.uid = someone.gid = 4000;
  EXPECT_EQ(OpenNamed(someone, "y", excl, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrExist))
      << "not someone else's";
}

// The same for a hard link (write-through): the retry of a LINK done once
// finds the name holding the very object, and succeeds.
TEST_F(LostReplyTest, ARetryOfALinkWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  up_->DieAfter("LINK");
  EXPECT_EQ(core_->Link(cr_, file_, root_, "f2"),
            uint32_t(upstream::kNfs4ErrDelay));
  up_->dead = false;
  EXPECT_EQ(core_->Link(cr_, file_, root_, "f2"), 0u) << "the retry";
  EXPECT_EQ(core_->Link(cr_, file_, root_, "f2"),
            uint32_t(upstream::kNfs4ErrExist))
      << "once only";
  Key a = kNoKey;
  Attrs at;
  ASSERT_EQ(core_->Lookup(cr_, root_, "a", &a, &at), 0u);
  up_->DieAfter("LINK");
  EXPECT_NE(core_->Link(cr_, a, root_, "a2"), 0u);
  up_->dead = false;
  EXPECT_EQ(core_->Link(cr_, file_, root_, "a2"),
            uint32_t(upstream::kNfs4ErrExist))
      << "another object's name";
}

// A lost reply, and meanwhile a new client id (the server forgot the old
// one and its owners): the request is not resent under the new id, which
// would only earn STALE_CLIENTID and cost the new id too.
TEST_F(LostReplyTest, NothingIsResentUnderANewClientId) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->LoseReplyOf("OPEN", true);
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->Count("OPEN"), 2) << "resent under the new client id";
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total"), 0);
  EXPECT_EQ(up_->restarts_asked.load(), 0);
  core_->CloseFile(f);  // (its upstream open went with the old client id)
}

// A connection dropped with the reply and being made again is no lapsed
// lease: the request is resent once it is back, the client id kept.
TEST_F(LostReplyTest, AReconnectingUpstreamIsWaitedForNotGivenUp) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->reconnecting = true;
  up_->LoseReplyOf("OPEN");
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), 0u);
  EXPECT_EQ(up_->Count("OPEN(replayed)"), 1);
  EXPECT_EQ(up_->restarts_asked.load(), 0);
  up_->reconnecting = false;
  if (a) {
    EXPECT_EQ(core_->CloseFile(a), 0u);
  }
  EXPECT_EQ(core_->CloseFile(f), 0u);
}

// Once our lease has lapsed (a WAN cut) an unanswered request is not
// resent: the client id is given up at once. And once given up, no
// request of that client id bearing a seqid goes out until the new one is
// confirmed (the owner's next OPEN could be taken for the lost one's
// retransmission), nor is the client id given up twice.
TEST_F(LostReplyTest, AfterTheLeaseLapsedOrOnceGivenUpNothingIsResent) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->lease_end = Clock::now().time_since_epoch().count();  // lapsed
  up_->LoseReplyOf("OPEN");
  NacheOpen *o = nullptr;
  Key k = kNoKey;
  EXPECT_EQ(OpenName("a", &o, &k), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->restarts_asked.load(), 1);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "gave_up"}}),
            1);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total"), 1)
      << "resent after the lease lapsed";
  EXPECT_EQ(OpenName("b", &o, &k), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->Count("OPEN"), 2) << "an OPEN went out after giving up";
  EXPECT_EQ(up_->Count("OPEN(replayed)"), 0);
  EXPECT_EQ(up_->restarts_asked.load(), 1);
  core_->CloseFile(f);  // (its CLOSE waits for the new client id)
}

// The remote stays away longer than a lease after the lost reply: the
// seqid cannot be settled, so the client id is given up (the server then
// forgets the owner), and the next OPEN starts the owner afresh.
TEST_F(LostReplyTest, AnOpenUnansweredForALeaseGivesUpTheClientId) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);
  ASSERT_NE(f, nullptr);
  up_->DieAfter("OPEN");
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->restarts_asked.load(), 1);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "gave_up"}}),
            1);
  up_->dead = false;
  up_->Restart(false);  // the new client id: the old one's state is gone
  WriteThrough("b", "b-wrote");
  EXPECT_EQ(up_->Data("b"), "b-wrote");
  EXPECT_EQ(up_->Data("a"), "AAA");
  core_->CloseFile(f);
}

// A logged rename whose RENAME gets no answer is sent again: when the
// request was lost, the retry renames; when only the reply was, the retry
// finds the name gone and our object under the new one (done, not a
// refusal). Either way the remote ends with the rename, once.
class LostRenameTest : public CoreDelegationsTest,
                       public ::testing::WithParamInterface<bool> {};

TEST_P(LostRenameTest, ARenameWithoutAnAnswerIsSentAgain) {
  const bool reply_lost = GetParam();
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // sent when needed
  up_->AddFile("log", "L");
  up_->AddFile("dst", "D");
  Key k;
  ASSERT_EQ(core_->Lookup(cr_, root_, "log", &k, nullptr), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "log", root_, "dst"), 0u);  // logged
  if (reply_lost)
    up_->DieAfter("RENAME");
  else
    up_->LoseRequestWith("RENAME");
  // A new "log" needs the name at the remote: the RENAME goes out first
  // and gets no answer, so the truncate (which sends the create) fails.
  Key fresh = CreateWritten("log", "new");
  EXPECT_NE(SetSize(fresh, 2), 0u);
  // (The remote's dst is removed first: the rename replaces it.)
  EXPECT_EQ(up_->Data(reply_lost ? "dst" : "log"), "L");
  up_->dead = false;
  ASSERT_EQ(SetSize(fresh, 2), 0u);
  EXPECT_EQ(up_->Data("dst"), "L");
  EXPECT_EQ(up_->Data("log"), "ne");
  double refused = 0;
  for (const prometheus::MetricFamily &f : metrics_.Collect())
    if (f.name == "nache_writeback_renames_total")
      for (const prometheus::ClientMetric &m : f.metric)
        for (const prometheus::ClientMetric::Label &l : m.label)
          if (l.name == "outcome" && l.value == "refused")
            refused += m.counter.value;
  EXPECT_EQ(refused, 0) << "done, not refused";
}

INSTANTIATE_TEST_SUITE_P(RequestOrReply, LostRenameTest, ::testing::Bool());

// Write-through: a REMOVE or CREATE done at the remote whose reply was
// lost is retried by the client (told NFS4ERR_DELAY); the retry meets
// NOENT or EXIST, and is answered as the first try's success, for the
// same caller only.
TEST_F(CoreDelegationsTest, ARetryOfARemoveOrCreateWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  up_->AddFile("gone", "G");
  up_->AddFile("other", "O");
  up_->DieAfter("REMOVE");
  EXPECT_EQ(core_->Remove(cr_, root_, "gone"),
            uint32_t(upstream::kNfs4ErrDelay));
  ASSERT_TRUE(up_->dead.load());
  up_->dead = false;
  EXPECT_EQ(up_->Data("gone"), "<none>") << "done at the remote";
  EXPECT_EQ(core_->Remove(cr_, root_, "gone"), 0u) << "the retry";
  EXPECT_EQ(core_->Remove(cr_, root_, "gone"),
            uint32_t(upstream::kNfs4ErrNoent))
      << "once only";
  Creds someone;
  someone.uid = someone.gid = 4000;
  up_->DieAfter("REMOVE");
  EXPECT_NE(core_->Remove(cr_, root_, "other"), 0u);
  up_->dead = false;
  EXPECT_EQ(core_->Remove(someone, root_, "other"),
            uint32_t(upstream::kNfs4ErrNoent))
      << "not someone else's";

  Attrs mode, got;
  mode.mask = upstream::kAttrMode;
  mode.mode = 0755;
  Key k = kNoKey;
  up_->DieAfter("CREATE");
  EXPECT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode, "",
                          &k, &got),
            uint32_t(upstream::kNfs4ErrDelay));
  up_->dead = false;
  ASSERT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode, "",
                          &k, &got),
            0u)
      << "the retry";
  EXPECT_NE(k, kNoKey);
  EXPECT_EQ(got.type, upstream::FileType::kDir);
  EXPECT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode, "",
                          &k, &got),
            uint32_t(upstream::kNfs4ErrExist))
      << "once only";
}

// The same for a RENAME: done at the remote, its reply lost, the client's
// retry meets NOENT (the old name is gone) and must hear that its rename
// succeeded, once, when the new name holds the file it moved. Not when the
// new name holds another file, nor for another caller.
TEST_F(CoreDelegationsTest, ARetryOfARenameWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  up_->AddFile("from", "F");
  Key got = kNoKey;
  ASSERT_EQ(core_->Lookup(cr_, root_, "from", &got, nullptr), 0u);
  up_->DieAfter("RENAME");
  EXPECT_EQ(core_->Rename(cr_, root_, "from", root_, "to", got),
            uint32_t(upstream::kNfs4ErrDelay));
  ASSERT_TRUE(up_->dead.load());
  up_->dead = false;
  EXPECT_EQ(up_->Data("to"), "F") << "done at the remote";
  EXPECT_EQ(core_->Rename(cr_, root_, "from", root_, "to", got), 0u)
      << "the retry";
  EXPECT_EQ(core_->Rename(cr_, root_, "from", root_, "to", got),
            uint32_t(upstream::kNfs4ErrNoent))
      << "once only";
  Key to = kNoKey;
  ASSERT_EQ(core_->Lookup(cr_, root_, "to", &to, nullptr), 0u);
  EXPECT_EQ(to, got) << "the same file, under its new name";

  // Lost, and then the new name was replaced by someone else's file: the
  // retry's NOENT stands.
  up_->AddFile("a", "A");
  ASSERT_EQ(core_->Lookup(cr_, root_, "a", &got, nullptr), 0u);
  up_->DieAfter("RENAME");
  EXPECT_NE(core_->Rename(cr_, root_, "a", root_, "b", got), 0u);
  up_->dead = false;
  up_->ForeignRemove("b");
  up_->AddFile("b", "someone else's");
  EXPECT_EQ(core_->Rename(cr_, root_, "a", root_, "b", got),
            uint32_t(upstream::kNfs4ErrNoent));
  // And another caller's rename is not taken for ours.
  up_->AddFile("c", "C");
  ASSERT_EQ(core_->Lookup(cr_, root_, "c", &got, nullptr), 0u);
  Creds someone;
  someone.uid = someone.gid = 4000;
  up_->DieAfter("RENAME");
  EXPECT_NE(core_->Rename(cr_, root_, "c", root_, "d", got), 0u);
  up_->dead = false;
  EXPECT_EQ(core_->Rename(someone, root_, "c", root_, "d", got),
            uint32_t(upstream::kNfs4ErrNoent));
}

}  // namespace
}  // namespace coretest
}  // namespace nache
