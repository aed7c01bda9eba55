// The core's delegations against the scripted upstream (scripted_upstream.h):
// opens and attributes served locally under a delegation, recalls that
// flush first, CB_GETATTR, our own read delegation returned before our
// write open, the open linger, a lapsed lease ending the trust.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

TEST_F(CoreDelegationsTest, WriteDelegationServesOpensAndAttributesLocally) {
  Start(DelegationType::kWrite);
  NacheOpen *o = OpenF(kBoth);  // the OPEN that brings the delegation
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(core_->CloseFile(o), 0u);  // no linger: CLOSE now
  EXPECT_EQ(up_->Count("OPEN"), 1);
  EXPECT_EQ(up_->Count("CLOSE"), 1);
  int getattrs = up_->Count("GETATTR");
  for (uint32_t access :
       {kBoth, kRead, uint32_t(upstream::kShareAccessWrite)}) {
    NacheOpen *again = OpenF(access);
    ASSERT_NE(again, nullptr);
    Attrs a;
    EXPECT_EQ(core_->Getattr(cr_, file_, &a), 0u);
    EXPECT_EQ(a.size, 5u);
    EXPECT_EQ(core_->CloseFile(again), 0u);
  }
  EXPECT_EQ(up_->Count("OPEN"), 1) << "opens granted under the delegation";
  EXPECT_EQ(up_->Count("CLOSE"), 1);
  EXPECT_EQ(up_->Count("GETATTR"), getattrs)
      << "attributes trusted past a zero attribute window";
}

// Issue 19: Ganesha looks nothing up before an exclusive create (its FSAL
// option atomic_exclusive_create), so nache answers what that lookup did:
// a name a fresh listing holds is refused here with no round trip, in
// either mode, while a name the listing lacks goes to the remote's OPEN.
TEST_F(CoreDelegationsTest, AnExclusiveCreateOfAListedNameIsRefusedHere) {
  up_->readdir = true;
  // (A listing is trusted within the attribute window.)
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->cache.attr_timeout_ms = 60 * 1000; });
  ListRoot();
  if (HasFatalFailure()) return;
  // (OPENs sent, whatever their answer.)
  auto opens_sent = [this] { return up_->Sends("OPEN").size(); };
  const size_t opens = opens_sent();
  NacheOpen *open = nullptr;
  Key key;
  bool created = false;
  EXPECT_EQ(OpenNamed(cr_, "f", NACHE_OPEN_GUARDED, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrExist));
  EXPECT_EQ(ExclusiveCreateOfF(cr_, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrExist));
  EXPECT_EQ(opens_sent(), opens) << "answered with no round trip";
  ASSERT_EQ(OpenNamed(cr_, "g", NACHE_OPEN_GUARDED, &open, &key, &created), 0u);
  EXPECT_TRUE(created);
  EXPECT_EQ(opens_sent(), opens + 1);
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// Ganesha leaves a create by name to nache's judgement (it checks the
// directory's search right before no GUARDED or EXCLUSIVE create:
// open_judged_by_server). So a listed name is answered as taken only to a
// caller who may search the directory: with no answer kept, nache asks the
// remote's (one ACCESS, no OPEN); with one kept, nothing.
TEST_F(CoreDelegationsTest, ACreateOfAListedNameIsJudgedBeforeItIsAnswered) {
  up_->readdir = true;
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->cache.attr_timeout_ms = 60 * 1000; });
  ListRoot();
  if (HasFatalFailure()) return;
  Creds mallory;
  mallory.uid = mallory.gid = 2000;
  up_->DenySearching(mallory.uid);
  auto sent = [this] {
    return up_->Sends("OPEN").size() + up_->Sends("ACCESS").size();
  };
  NacheOpen *open = nullptr;
  Key key;
  bool created = false;
  // No answer kept for mallory: the remote's is asked.
  size_t asked = up_->Sends("ACCESS").size(), opens = up_->Sends("OPEN").size();
  EXPECT_EQ(OpenNamed(mallory, "f", NACHE_OPEN_GUARDED, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(up_->Sends("ACCESS").size(), asked + 1) << "the remote not asked";
  EXPECT_EQ(up_->Sends("OPEN").size(), opens);
  // Its answer is kept: refused here with no round trip.
  const size_t before = sent();
  EXPECT_EQ(OpenNamed(mallory, "f", NACHE_OPEN_GUARDED, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrAccess))
      << "a name taken told to a caller who may not search the directory";
  EXPECT_EQ(ExclusiveCreateOfF(mallory, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(sent(), before) << "refused with no round trip";
}

// Issue 19: Ganesha gives nache an open without create of a name it does
// not hold by name (its FSAL option open_judged_by_server), and checks the
// caller's search right to the directory after the open. A listed name of
// a file that needs an OPEN anyway goes to the remote as one OPEN by name,
// whose COMPOUND also answers the caller's rights to the directory: none
// asked after it. An open of the name that our upstream open then covers,
// with that answer kept, asks nothing.
TEST_F(CoreDelegationsTest, AnOpenByNameIsOneRoundTripOrNone) {
  up_->readdir = true;
  up_->minor = 1;
  // (NFSv4.1: callbacks come on the session's back channel, no probe.)
  Start(
      DelegationType::kNone,
      [](CoreConfig *cfg) {
        cfg->minor_version = 1;
        cfg->cache.attr_timeout_ms = 60 * 1000;
      },
      false);
  ListRoot();
  if (HasFatalFailure()) return;
  // (A caller nothing was asked for yet.)
  Creds user;
  user.uid = user.gid = 1000;
  const int by_name = up_->Count("OPEN"), by_fh = up_->Count("OPEN(fh)");
  NacheOpen *first = nullptr, *second = nullptr;
  Key key = kNoKey;
  bool created = true;
  ASSERT_EQ(OpenNamed(user, "f", NACHE_OPEN_NOCREATE, &first, &key, &created),
            0u);
  EXPECT_EQ(key, file_);
  EXPECT_FALSE(created);
  EXPECT_EQ(up_->Count("OPEN") - by_name, 1);
  EXPECT_EQ(up_->Count("OPEN(fh)") - by_fh, 0);
  const int accesses = up_->Count("ACCESS");
  uint32_t bits = 0;
  ASSERT_EQ(core_->Access(user, root_, upstream::kAccessLookup, &bits), 0u);
  EXPECT_EQ(bits, uint32_t(upstream::kAccessLookup));
  EXPECT_EQ(up_->Count("ACCESS"), accesses)
      << "the directory's answer did not come with the OPEN";
  ASSERT_EQ(OpenNamed(user, "f", NACHE_OPEN_NOCREATE, &second, &key, &created),
            0u);
  EXPECT_EQ(key, file_);
  EXPECT_EQ(up_->Count("OPEN") + up_->Count("OPEN(fh)"), by_name + by_fh + 1)
      << "an open our upstream open covers was sent";
  EXPECT_EQ(core_->CloseFile(second), 0u);
  EXPECT_EQ(core_->CloseFile(first), 0u);
}

// Two local clients' first opens of one name, both by name (Ganesha gives
// nache an open of a name it does not hold by name): the second waits for
// the first's OPEN and opens by handle the file it found, joining its
// upstream open. One OPEN at the remote, not two with one closed again.
TEST_F(CoreDelegationsTest, ConcurrentOpensOfOneNameSendOneOpen) {
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->cache.attr_timeout_ms = 60 * 1000; });
  auto waits = [this] {
    for (const prometheus::MetricFamily &f : metrics_.Collect())
      if (f.name == "nache_open_name_waits_total" && f.metric.size() == 1)
        return f.metric[0].counter.value;
    return -1.0;
  };
  const int opens = up_->Count("OPEN") + up_->Count("OPEN(fh)");
  up_->hold_opens = true;
  NacheOpen *first = nullptr, *second = nullptr;
  Key k1 = kNoKey, k2 = kNoKey;
  std::atomic<uint32_t> st1{~0u}, st2{~0u};
  std::thread a([&] {
    bool created;
    st1 = OpenNamed(cr_, "f", NACHE_OPEN_NOCREATE, &first, &k1, &created);
  });
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->opens_waiting == 1; }));
  std::thread b([&] {
    bool created;
    st2 = OpenNamed(cr_, "f", NACHE_OPEN_NOCREATE, &second, &k2, &created);
  });
  // The second waits for the first (before the fix it went upstream).
  const bool waited = cb_client::WaitFor([&] { return waits() >= 1; });
  up_->ReleaseOpens();
  a.join();
  b.join();
  EXPECT_TRUE(waited) << "the second open did not wait for the first";
  ASSERT_EQ(st1, 0u);
  ASSERT_EQ(st2, 0u);
  EXPECT_EQ(k1, file_);
  EXPECT_EQ(k2, file_);
  EXPECT_EQ(up_->Count("OPEN") + up_->Count("OPEN(fh)") - opens, 1)
      << "each open went to the remote";
  EXPECT_EQ(up_->Count("CLOSE"), 0);
  EXPECT_EQ(waits(), 1.0);
  EXPECT_EQ(core_->CloseFile(second), 0u);
  EXPECT_EQ(core_->CloseFile(first), 0u);
  EXPECT_EQ(up_->Count("CLOSE"), 1) << "one upstream open, closed once";
}

// An export deep in the remote's tree, on a server of short COMPOUNDs: its
// path is walked in as many COMPOUNDs as that takes, none refused.
TEST_F(CoreDelegationsTest,
       ADeepUpstreamPathIsWalkedInCompoundsTheSessionTakes) {
  up_->minor = 1;
  up_->max_ops = 5;
  std::string path;
  for (int i = 0; i < 9; i++) path += "/d" + std::to_string(i);
  up_->AddFile(path.substr(1) + "/f", "below");
  Start(
      DelegationType::kNone,
      [&](CoreConfig *c) {
        c->minor_version = 1;
        c->upstream_path = path + "/";
      },
      false);
  // Start looked "f" up under the export's root: the deep one, not the
  // remote's /f ("hello").
  char buf[16] = {};
  size_t n = 0;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, file_, nullptr, 0, sizeof buf, buf, &n, &eof), 0u);
  EXPECT_EQ(std::string(buf, n), "below");
  EXPECT_EQ(up_->Count("TOO_MANY_OPS"), 0);
}

// Issue 19: over NFSv4.1 nache opens a file by its filehandle (CLAIM_FH),
// so a file renamed at the remote since nache learnt its name still gets
// an upstream open, and with it a delegation that serves the next opens;
// over NFSv4.0 the open of the old name finds nothing, and every open
// goes on without one.
TEST_F(CoreDelegationsTest, NfsV41OpensAFileRenamedAtTheRemoteByItsHandle) {
  for (uint32_t minor : {0u, 1u}) {
    SCOPED_TRACE(minor);
    TearDown();
    up_ = new ScriptedUpstream;
    up_->AddFile("f", "hello");
    up_->minor = minor;
    const std::string cache = dir_.path() + "/cache-v4" + std::to_string(minor);
    Start(DelegationType::kRead,
          [&cache](CoreConfig *cfg) { cfg->cache_dir = cache; });
    up_->ForeignRename("f", "g");
    for (int i = 0; i < 2; i++) {
      NacheOpen *o = OpenF(kRead);
      ASSERT_NE(o, nullptr);
      EXPECT_EQ(core_->CloseFile(o), 0u);
    }
    if (minor == 1) {
      EXPECT_EQ(up_->Count("OPEN(fh)"), 1) << "the second under the delegation";
      EXPECT_EQ(up_->Count("OPEN"), 0) << "no open by name";
    } else {
      EXPECT_EQ(up_->Count("OPEN(fh)"), 0);
      EXPECT_EQ(up_->Count("OPEN"), 0) << "the name is gone: NOENT";
    }
  }
}

TEST_F(CoreDelegationsTest, RecallFlushesWritesAndOpensUpstreamBeforeReturn) {
  Start(DelegationType::kWrite);
  ASSERT_EQ(core_->CloseFile(OpenF(kBoth)), 0u);
  NacheOpen *o = OpenF(kBoth);  // granted locally, still open at the recall
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  up_->hold_writes = true;
  std::string data(4096, 'x');
  size_t n = 0;
  upstream::StableHow committed = upstream::StableHow(99);  // unset
  ASSERT_EQ(core_->Write(cr_, file_, o, 0, data.size(), data.data(),
                         upstream::StableHow::kUnstable, &n, &committed),
            0u);
  EXPECT_EQ(committed, upstream::StableHow::kUnstable)
      << "queued (write-behind)";
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  up_->ReleaseWrites();
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("DELEGRETURN"); }));
  int write = up_->Index("WRITE"), reopen = up_->Index("OPEN", 1),
      ret = up_->Index("DELEGRETURN");
  ASSERT_GE(write, 0);
  ASSERT_GE(reopen, 0) << "the local open became an upstream open";
  EXPECT_LT(write, ret) << "queued data reaches the server first";
  EXPECT_LT(reopen, ret) << "the open exists upstream before the return";
  // Afterwards the open is an ordinary upstream open: its CLOSE goes up.
  EXPECT_EQ(core_->CloseFile(o), 0u);
  EXPECT_EQ(up_->Count("CLOSE"), 2);
}

// Write-back under a write delegation: the recall's flush is the
// delegation holder's, not a stranger's. Nobody else can have written the
// file, so there is no conflict check (a round trip of the recall's time,
// on wan about 80 ms of the 0.5 s an outside opener should wait), and its
// WRITEs go under the delegation's stateid, which the server still honours
// until the DELEGRETURN.
TEST_F(CoreDelegationsTest, TheRecallsFlushGoesUnderTheDelegation) {
  Start(DelegationType::kWrite, [](CoreConfig *cfg) {
    cfg->write_back = true;
    cfg->flush_age_ms = 3600 * 1000;
  });
  NacheOpen *o = OpenF(kBoth);
  ASSERT_NE(o, nullptr);
  std::string data(4096, 'x');
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, o, 0, data.size(), data.data(),
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  ASSERT_EQ(up_->Count("WRITE"), 0) << "kept here under the delegation";
  const size_t at_recall = up_->Log().size();
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("DELEGRETURN"); }));
  const std::vector<std::string> log = up_->Log();
  const int write = up_->Index("WRITE"), ret = up_->Index("DELEGRETURN");
  ASSERT_GE(write, 0);
  EXPECT_LT(write, ret);
  for (size_t i = at_recall; i < size_t(write); i++)
    EXPECT_NE(log[i], "GETATTR") << "a conflict check at " << i;
  const std::vector<std::string> sids = up_->WriteStateids();
  ASSERT_EQ(sids.size(), 1u);
  EXPECT_EQ(sids[0].substr(0, 6), "deleg1") << "the delegation's stateid";
  EXPECT_EQ(up_->Data("f"), data);
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

// The recall's flush is waited for: the opener that caused the recall
// retries at the remote until the DELEGRETURN. WRITEs that all go in one
// wave go FILE_SYNC, so no COMMIT's round trip comes between them and the
// return (on wan about 80 ms of the 0.5 s the opener should wait), and the
// data is durable at the remote before the delegation goes.
TEST_F(CoreDelegationsTest, TheRecallsFlushOfOneWaveNeedsNoCommit) {
  up_->unstable_writes = true;
  Start(DelegationType::kWrite, [](CoreConfig *cfg) {
    cfg->write_back = true;
    cfg->flush_age_ms = 3600 * 1000;
  });
  NacheOpen *o = OpenF(kBoth);
  ASSERT_NE(o, nullptr);
  // Three blocks apart: three WRITEs.
  std::string content;
  for (int b = 0; b < 3; b++) {
    std::string block(4096, char('a' + b));
    const uint64_t at = uint64_t(b) * 2 * 4096;
    size_t n = 0;
    upstream::StableHow committed{};
    ASSERT_EQ(core_->Write(cr_, file_, o, at, block.size(), block.data(),
                           upstream::StableHow::kFileSync, &n, &committed),
              0u);
    content.resize(at, '\0');
    content += block;
  }
  ASSERT_EQ(up_->Count("WRITE"), 0) << "kept here under the delegation";
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("DELEGRETURN"); }));
  EXPECT_EQ(up_->Count("WRITE"), 3);
  EXPECT_EQ(up_->Count("COMMIT"), 0) << "a round trip the opener waits for";
  EXPECT_EQ(up_->StableData("f"), content) << "durable before the return";
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

// Under a write delegation a lock is granted here (no other client of the
// server can open the file, so none can hold a lock on it); when the
// delegation is recalled the lock is sent, on the upstream open made for
// the local one, before the DELEGRETURN; an unlock of a range granted here
// sends nothing.
TEST_F(CoreDelegationsTest, LocksUnderAWriteDelegationAreSentAtTheRecall) {
  Start(DelegationType::kWrite);
  ASSERT_EQ(core_->CloseFile(OpenF(kBoth)), 0u);
  NacheOpen *o = OpenF(kBoth);  // granted locally
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(LockF(o, "owner-1", NACHE_LOCK, true, 0, 10), 0u);
  ASSERT_EQ(LockF(o, "owner-2", NACHE_LOCK, false, 100, 10), 0u);
  ASSERT_EQ(LockF(o, "owner-2", NACHE_UNLOCK, false, 100, 10), 0u);
  nache_lock_conflict conflict{};
  EXPECT_EQ(core_->Lock(cr_, file_, o, "owner-3", NACHE_LOCK_TEST, true, 0, 10,
                        false, &conflict),
            0u);
  EXPECT_EQ(up_->Count("LOCK") + up_->Count("LOCKU") + up_->Count("LOCKT"), 0)
      << "all decided here";
  EXPECT_FALSE(up_->Locked(0, 10));
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("DELEGRETURN"); }));
  ASSERT_EQ(up_->Count("LOCK"), 1) << "owner-2's range was unlocked here";
  EXPECT_LT(up_->Index("OPEN", 1), up_->Index("LOCK"));
  EXPECT_LT(up_->Index("LOCK"), up_->Index("DELEGRETURN"));
  EXPECT_TRUE(up_->Locked(0, 10));
  EXPECT_FALSE(up_->Locked(100, 110));
  // Now the server's: the unlock goes there.
  ASSERT_EQ(LockF(o, "owner-1", NACHE_UNLOCK, true, 0, 10), 0u);
  EXPECT_EQ(up_->Count("LOCKU"), 1);
  EXPECT_FALSE(up_->Locked(0, 10));
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

TEST_F(CoreDelegationsTest, CbGetattrAnswersFromTheCoresView) {
  Start(DelegationType::kWrite);
  NacheOpen *o = OpenF(kBoth);
  std::string data(100, 'y');
  size_t n = 0;
  upstream::StableHow committed = upstream::StableHow(99);  // unset
  ASSERT_EQ(core_->Write(cr_, file_, o, 0, data.size(), data.data(),
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  cb_client::Args args;
  args.Getattr("f:f", (1u << 3) | (1u << 4));  // change, size
  cb_client::Reply *r = client_.Call(CB_COMPOUND, args.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->ops.size(), 1u);
  ASSERT_EQ(r->ops[0].status, upstream::kNfs4Ok);
  ASSERT_EQ(r->ops[0].vals.size(), 16u);
  auto be64 = [](const std::string &s, size_t at) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) v = v << 8 | uint8_t(s[at + i]);
    return v;
  };
  EXPECT_EQ(be64(r->ops[0].vals, 0), up_->Change("f"));
  EXPECT_EQ(be64(r->ops[0].vals, 8), 100u);
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

TEST_F(CoreDelegationsTest, ReadDelegationIsReturnedBeforeOurOwnWriteOpen) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  NacheOpen *r = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "read open granted locally";
  EXPECT_EQ(core_->CloseFile(r), 0u);
  up_->grant = DelegationType::kNone;
  NacheOpen *w = OpenF(kBoth);
  ASSERT_NE(w, nullptr);
  int ret = up_->Index("DELEGRETURN"), open = up_->Index("OPEN", 1);
  ASSERT_GE(ret, 0) << "returned without being recalled";
  EXPECT_LT(ret, open);
  EXPECT_EQ(core_->CloseFile(w), 0u);
}

// An open for writing of a file we hold a read delegation on: the
// delegation goes back at the head of the OPEN's own COMPOUND, one round
// trip (a mail spool's append after a read).
TEST_F(CoreDelegationsTest, AWriteOpenReturnsOurReadDelegationInItsCompound) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  up_->grant = DelegationType::kNone;
  NacheOpen *w = OpenF(kBoth);
  ASSERT_NE(w, nullptr);
  const std::vector<std::string> returns = up_->Compounds("DELEGRETURN");
  ASSERT_EQ(returns.size(), 1u);
  const std::string &c = returns[0];
  ASSERT_NE(c.find("OPEN"), std::string::npos) << c;
  EXPECT_LT(c.find("DELEGRETURN"), c.find("OPEN")) << c;
  EXPECT_EQ(core_->CloseFile(w), 0u);
}

// Our read delegation went back at the head of the first of the sends
// COMPOUNDs that carry op, and in no other COMPOUND.
void ExpectReturnLeads(ScriptedUpstream *up, const std::string &op,
                       size_t sends) {
  const std::vector<std::string> with_op = up->Compounds(op);
  ASSERT_EQ(with_op.size(), sends);
  const std::string &c = with_op[0];
  ASSERT_NE(c.find("DELEGRETURN"), std::string::npos) << c;
  EXPECT_LT(c.find("DELEGRETURN"), c.find(op)) << c;
  EXPECT_EQ(up->Compounds("DELEGRETURN").size(), 1u);
}

// Removing a file we hold a read delegation on: the delegation goes back
// in the REMOVE's own COMPOUND, ahead of it (a server may take our own
// remove for a conflict): one round trip, not two.
TEST_F(CoreDelegationsTest, ARemoveReturnsOurReadDelegationInItsCompound) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  ASSERT_EQ(core_->Remove(cr_, root_, "f", file_), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectReturnLeads(up_, "REMOVE", 1));
  EXPECT_EQ(up_->Count("DELEGRETURN"), 1);
  EXPECT_EQ(up_->Tree(), "");
}

// The server refuses that DELEGRETURN (it dropped the delegation
// meanwhile): the COMPOUND stopped before the REMOVE, which goes alone.
TEST_F(CoreDelegationsTest, ARemoveWhoseDelegreturnIsRefusedStillRemoves) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  up_->delegreturn_status = upstream::kNfs4ErrBadStateid;
  ASSERT_EQ(core_->Remove(cr_, root_, "f", file_), 0u);
  EXPECT_EQ(up_->Compounds("REMOVE").size(), 2u);
  EXPECT_EQ(up_->Tree(), "");
  // Forgotten: nothing is returned again.
  EXPECT_EQ(up_->Compounds("DELEGRETURN").size(), 1u);
}

// A SETATTR of a file we hold a read delegation on (a chmod after a
// compile): the delegation goes back at the head of the SETATTR's own
// COMPOUND; refused there (refused: its status), the SETATTR goes alone.
void SetattrUnderOurReadDelegation(ScriptedUpstream *up, Core *core,
                                   const upstream::Creds &cr, Key file,
                                   uint32_t refused) {
  up->delegreturn_status = refused;
  Attrs set;
  set.mask = upstream::kAttrMode;
  set.mode = 0600;
  ASSERT_EQ(core->Setattr(cr, file, nullptr, set, nullptr), 0u);
  ExpectReturnLeads(up, "SETATTR", refused ? 2 : 1);
}

TEST_F(CoreDelegationsTest, ASetattrReturnsOurReadDelegationInItsCompound) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  SetattrUnderOurReadDelegation(up_, core_.get(), cr_, file_, 0);
}

TEST_F(CoreDelegationsTest, ASetattrWhoseDelegreturnIsRefusedStillSets) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  SetattrUnderOurReadDelegation(up_, core_.get(), cr_, file_,
                                upstream::kNfs4ErrBadStateid);
}

// A WRITE of a file we hold a read delegation on (NFSv3's, with no open;
// or a write open served under the delegation): the delegation goes back
// at the head of the WRITE's own COMPOUND, sent at once even when the
// client asked UNSTABLE (it waits for the return anyway); refused there
// (refused: its status), the WRITE goes alone.
void WriteUnderOurReadDelegation(ScriptedUpstream *up, Core *core,
                                 const upstream::Creds &cr, Key file,
                                 upstream::StableHow how, uint32_t refused) {
  up->delegreturn_status = refused;
  const std::string data = "HELLO";
  size_t n = 0;
  upstream::StableHow committed = upstream::StableHow(99);  // unset
  ASSERT_EQ(core->Write(cr, file, nullptr, 0, data.size(), data.data(), how, &n,
                        &committed),
            0u);
  EXPECT_EQ(n, data.size());
  EXPECT_EQ(committed, upstream::StableHow::kFileSync);
  ASSERT_NO_FATAL_FAILURE(ExpectReturnLeads(up, "WRITE", refused ? 2 : 1));
  EXPECT_EQ(up->Data("f"), data);
}

TEST_F(CoreDelegationsTest, AWriteReturnsOurReadDelegationInItsCompound) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  WriteUnderOurReadDelegation(up_, core_.get(), cr_, file_,
                              upstream::StableHow::kFileSync, 0);
}

TEST_F(CoreDelegationsTest, AnUnstableWriteGoesAtOnceWithOurDelegationsReturn) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  WriteUnderOurReadDelegation(up_, core_.get(), cr_, file_,
                              upstream::StableHow::kUnstable, 0);
}

// Write-behind over a WAN: a client's large UNSTABLE write to a remote
// that takes small WRITEs (knfsd on a small machine: 32 KiB) keeps twice
// a link's bandwidth-delay product in flight, 32 WRITEs of 32 KiB. With 8
// (256 KiB per round trip) a 32 MiB write through nache took 12.1 s on
// wan where a direct mount took 6.9 s; with 16 (the product itself, no
// margin) it was 1 to 5 % slower than the direct mount.
TEST_F(CoreDelegationsTest, ALargeUnstableWriteKeepsALinksWorthInFlight) {
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->max_io_size = 32 << 10; });
  NacheOpen *o = OpenF(kBoth);
  ASSERT_NE(o, nullptr);
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); i++) data[i] = char('a' + i % 23);
  up_->hold_writes = true;
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, o, 0, data.size(), data.data(),
                         upstream::StableHow::kUnstable, &n, &committed),
            0u);
  EXPECT_EQ(committed, upstream::StableHow::kUnstable) << "queued";
  const bool all =
      cb_client::WaitFor([&] { return up_->writes_waiting.load() >= 32; });
  const int waiting = up_->writes_waiting.load();
  up_->ReleaseWrites();
  EXPECT_TRUE(all) << "WRITEs in flight at once: " << waiting;
  EXPECT_LE(waiting, 32);
  EXPECT_EQ(core_->Commit(cr_, file_, 0, 0), 0u);
  EXPECT_EQ(up_->Data("f"), data);
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

TEST_F(CoreDelegationsTest, AWriteWhoseDelegreturnIsRefusedStillWrites) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  WriteUnderOurReadDelegation(up_, core_.get(), cr_, file_,
                              upstream::StableHow::kFileSync,
                              upstream::kNfs4ErrBadStateid);
}

// A server may delegate (read) to our open for writing, as knfsd does to an
// NFSv4.1 client: our writes under that open are no conflict, so the
// delegation stays, and what it vouches for stays current here (a
// GETATTR after the write asks nothing, the fixture trusting attributes
// only under a delegation).
TEST_F(CoreDelegationsTest,
       AWriteUnderOurOpenForWritingKeepsOurReadDelegation) {
  Start(DelegationType::kRead);
  NacheOpen *w = OpenF(kBoth);
  ASSERT_NE(w, nullptr);
  const std::string data = "HELLO, world";
  size_t n = 0;
  upstream::StableHow committed;
  ASSERT_EQ(core_->Write(cr_, file_, w, 0, data.size(), data.data(),
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  EXPECT_EQ(up_->Count("DELEGRETURN"), 0);
  const size_t sent = up_->Compounds("PUTFH").size();
  Attrs a;
  ASSERT_EQ(core_->Getattr(cr_, file_, &a), 0u);
  EXPECT_EQ(a.size, data.size());
  EXPECT_EQ(up_->Compounds("PUTFH").size(), sent) << "revalidated";
  EXPECT_EQ(core_->CloseFile(w), 0u);
  EXPECT_EQ(up_->Data("f"), data);
}

// Ganesha looks a new name up twice in one request before an UNCHECKED
// create: the second lookup, straight after on the same thread, is answered
// with the remote's first "no such name"; once only, not on another thread,
// and not after a create here.
TEST_F(CoreDelegationsTest, ASecondLookupOfANewNameAtOnceAsksNothing) {
  up_->change_info = true;  // (so that an OPEN says whether it created)
  Start(DelegationType::kNone);
  auto lookups = [&] { return up_->Compounds("LOOKUP").size(); };
  Key k;
  const size_t n0 = lookups();
  EXPECT_EQ(core_->Lookup(cr_, root_, "new", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  EXPECT_EQ(lookups(), n0 + 1);
  // Another thread asks for itself.
  std::thread([&] {
    Key k2;
    EXPECT_EQ(core_->Lookup(cr_, root_, "new", &k2, nullptr),
              uint32_t(upstream::kNfs4ErrNoent));
  }).join();
  EXPECT_EQ(lookups(), n0 + 2);
  EXPECT_EQ(core_->Lookup(cr_, root_, "new", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  EXPECT_EQ(lookups(), n0 + 2) << "the second asked the remote";
  EXPECT_EQ(core_->Lookup(cr_, root_, "new", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  EXPECT_EQ(lookups(), n0 + 3) << "used once";
  // Made here after the "no such name": found.
  NacheOpen *open = nullptr;
  bool created = false;
  ASSERT_EQ(core_->Lookup(cr_, root_, "g", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  ASSERT_EQ(OpenNamed(cr_, "g", NACHE_OPEN_UNCHECKED, &open, &k, &created), 0u);
  EXPECT_TRUE(created);
  ASSERT_EQ(core_->CloseFile(open), 0u);
  Key g;
  EXPECT_EQ(core_->Lookup(cr_, root_, "g", &g, nullptr), 0u);
  EXPECT_EQ(g, k);
}

TEST_F(CoreDelegationsTest, WriteBackFlushReturnsOurReadDelegationFirst) {
  StartWriteBack(DelegationType::kRead, 0);
  // An open by name goes upstream (on a single-writer export one by
  // handle is local) and brings the delegation.
  Core::OpenRequest req;
  req.key = root_;
  req.name = "f";
  req.access = kRead;
  NacheOpen *open = nullptr;
  Key key;
  bool created;
  ASSERT_EQ(core_->OpenFile(cr_, req, &open, &key, nullptr, &created), 0u);
  ASSERT_EQ(core_->CloseFile(open), 0u);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  std::string data(10, 'w');
  size_t n = 0;
  upstream::StableHow committed = upstream::StableHow(99);  // unset
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, data.size(), data.data(),
                         upstream::StableHow::kUnstable, &n, &committed),
            0u);
  EXPECT_EQ(committed, upstream::StableHow::kFileSync)
      << "durable here: FILE_SYNC";
  EXPECT_EQ(up_->Count("WRITE"), 0) << "kept local";
  // The flusher returns the read delegation (our WRITE would conflict
  // with it) and then writes: it must not wait for its own flush.
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("WRITE") > 0; }));
  ASSERT_GE(up_->Index("DELEGRETURN"), 0) << "the delegation was returned";
  EXPECT_LT(up_->Index("DELEGRETURN"), up_->Index("WRITE"));
}

// Not delegations: the open linger, against the same scripted upstream.
TEST_F(CoreDelegationsTest, UpstreamOpenLingersAfterTheLastCloseThenCloses) {
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->open_linger_ms = 2000; });
  NacheOpen *a = OpenF(kRead);
  NacheOpen *b = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "one upstream open for two local";
  EXPECT_EQ(core_->CloseFile(a), 0u);
  EXPECT_EQ(core_->CloseFile(b), 0u);
  EXPECT_EQ(up_->Count("CLOSE"), 0) << "lingering after the last close";
  NacheOpen *c = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "a reopen in the linger costs nothing";
  EXPECT_EQ(core_->CloseFile(c), 0u);
  // The linger thread closes it once the linger is over.
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("CLOSE") == 1; }));
  NacheOpen *d = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 2) << "after the CLOSE, a new OPEN";
  EXPECT_EQ(core_->CloseFile(d), 0u);
}

// An open by name of a file whose upstream open lingers, once the file's
// attributes are too old to answer the name here (a busy office: Ganesha
// gave the name to nache, not the handle), goes to the remote as an OPEN by
// name of the same owner: the remote merges it into the open it has, which
// one CLOSE ends. Counted, so that an admin (and cache_test's OPEN/CLOSE
// balance, which once failed on it under CI load: 28 OPENs, 27 CLOSEs)
// can tell it from an open left at the remote.
TEST_F(CoreDelegationsTest, AnOpenByNameJoiningALingeringOpenIsCounted) {
  Start(DelegationType::kNone, [](CoreConfig *cfg) {
    cfg->open_linger_ms = 60 * 1000;
    cfg->cache.attr_timeout_ms = 0;
  });
  auto joined = [this] {
    return CounterValue(metrics_, "nache_upstream_open_joins_total", {});
  };
  NacheOpen *a = nullptr, *b = nullptr;
  Key key = kNoKey;
  bool created = false;
  ASSERT_EQ(OpenNamed(cr_, "f", NACHE_OPEN_NOCREATE, &a, &key, &created), 0u);
  EXPECT_EQ(core_->CloseFile(a), 0u);
  EXPECT_EQ(joined(), 0);
  ASSERT_EQ(OpenNamed(cr_, "f", NACHE_OPEN_NOCREATE, &b, &key, &created), 0u);
  EXPECT_EQ(up_->Count("OPEN"), 2) << "the name asked again, by OPEN";
  EXPECT_EQ(joined(), 1);
  EXPECT_EQ(core_->CloseFile(b), 0u);
  core_.reset();  // the linger cut short: its CLOSE
  EXPECT_EQ(up_->Count("CLOSE"), 1);
  EXPECT_EQ(up_->Count("CLOSE"), up_->Count("OPEN") - joined());
}

TEST_F(CoreDelegationsTest, LapsedLeaseEndsTheTrust) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  up_->lease_end =
      (Clock::now() - std::chrono::seconds(1)).time_since_epoch().count();
  up_->grant = DelegationType::kNone;
  NacheOpen *o = OpenF(kRead);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(up_->Count("OPEN"), 2) << "no longer granted locally";
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

}  // namespace
}  // namespace coretest
}  // namespace nache
