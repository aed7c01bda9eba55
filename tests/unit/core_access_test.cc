// The remote decides access (issue 16): opens that send no OPEN are asked
// per caller, upgrades ask for the caller's modes and are judged by its
// ACCESS answer, a recall ends the answers kept under the delegation.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

// The remote decides who may read: an open that joins another caller's
// upstream open, or is granted under our delegation, sends no OPEN, so
// the remote's ACCESS answer for this caller decides it; answers are kept
// per caller (one ACCESS each while they hold), never shared.
TEST_F(CoreDelegationsTest, OpensWithoutAnUpstreamOpenAreAskedPerCaller) {
  Start(DelegationType::kRead);
  up_->DenyReading(2000);
  NacheOpen *first = OpenF(kRead);  // the upstream OPEN, and a delegation
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  auto open_as = [this](uint32_t uid, NacheOpen **out) {
    Creds who;
    who.uid = who.gid = uid;
    return OpenFAs(who, kRead, out);
  };
  NacheOpen *denied = nullptr, *allowed = nullptr;
  EXPECT_EQ(open_as(2000, &denied), uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(denied, nullptr);
  const int asked = up_->Count("ACCESS");
  EXPECT_EQ(open_as(2000, &denied), uint32_t(upstream::kNfs4ErrAccess))
      << "asked again: still denied";
  EXPECT_EQ(up_->Count("ACCESS"), asked) << "the answer is kept";
  ASSERT_EQ(open_as(3000, &allowed), 0u);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "granted under the delegation";
  uint32_t bits = 0;
  ASSERT_EQ(core_->Access(cr_, file_, upstream::kAccessRead, &bits), 0u);
  EXPECT_EQ(bits, uint32_t(upstream::kAccessRead));
  Creds other;
  other.uid = other.gid = 2000;
  ASSERT_EQ(core_->Access(other, file_, upstream::kAccessRead, &bits), 0u);
  EXPECT_EQ(bits, 0u) << "2000's answer, not the first reader's";
  EXPECT_EQ(core_->CloseFile(allowed), 0u);
  EXPECT_EQ(core_->CloseFile(first), 0u);
}

// A directory made here is filled next (tar, mkdir -p): the caller's
// rights to it come back with its CREATE, so the checks of the creates in
// it cost no round trip of their own.
TEST_F(CoreDelegationsTest, TheRightsToANewDirectoryComeWithItsCreate) {
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->cache.attr_timeout_ms = 60000; });
  Key sub = kNoKey;
  ASSERT_EQ(Mkdir("sub", &sub), 0u);
  const int asked = up_->Count("ACCESS");
  const uint32_t want = upstream::kAccessModify | upstream::kAccessExtend |
                        upstream::kAccessLookup | upstream::kAccessDelete;
  uint32_t bits = 0;
  ASSERT_EQ(core_->Access(cr_, sub, want, &bits), 0u);
  EXPECT_EQ(bits, want);
  EXPECT_EQ(up_->Count("ACCESS"), asked) << "the remote was asked again";
}

// A user the remote lets write a file but not read it opens it write-only
// while another user's read open is upstream: the upgrade of that open
// asks for this caller's access only (WRITE), which the remote grants;
// asking for the union (READ|WRITE) as this caller was refused. And an
// upgrade that the upstream open already covers is still the remote's to
// judge for this caller (its ACCESS answer), not granted for free.
TEST_F(CoreDelegationsTest, AnUpgradeAsksTheRemoteForTheCallersAccessOnly) {
  Start(DelegationType::kNone);
  up_->DenyReading(2000);
  NacheOpen *reader = OpenF(kRead);
  ASSERT_NE(reader, nullptr);
  Creds writer;
  writer.uid = writer.gid = 2000;
  const uint32_t kWrite = upstream::kShareAccessWrite;
  NacheOpen *wo = nullptr;
  ASSERT_EQ(OpenFAs(writer, kWrite, &wo), 0u)
      << "a write-only open by a user who may not read";
  EXPECT_EQ(up_->Count("OPEN"), 2) << "the reader's OPEN, then the upgrade";
  // Now the upstream open reads and writes: 2000 asking to read too is
  // covered, but the remote's answer to ACCESS refuses it.
  EXPECT_EQ(core_->Reopen(writer, wo, kBoth, 0),
            uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(core_->Reopen(writer, wo, kWrite, 0), 0u) << "its modes kept";
  EXPECT_EQ(core_->CloseFile(wo), 0u);
  EXPECT_EQ(core_->CloseFile(reader), 0u);
}

// An upgrade of our upstream open is judged here, by the remote's ACCESS
// answer for the caller: not every remote judges the upgrade's OPEN
// (Ganesha 4.3 reopens for the open's owner unchecked, whoever asks), and
// Ganesha in front leaves an open by handle, and every reopen, to us. A
// user who may read a file but not write it gets no write open, neither
// by opening it for writing while another's read open is upstream, nor by
// upgrading its own read open; and no upgrade is sent.
TEST_F(CoreDelegationsTest, AnUpgradeOfOurUpstreamOpenIsJudgedHere) {
  Start(DelegationType::kNone);
  up_->DenyWritingButNotOpens(2000);
  NacheOpen *reader = OpenF(kRead);
  ASSERT_NE(reader, nullptr);
  Creds user;
  user.uid = user.gid = 2000;
  const uint32_t kWrite = upstream::kShareAccessWrite;
  NacheOpen *wo = nullptr;
  EXPECT_EQ(OpenFAs(user, kWrite, &wo), uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(wo, nullptr);
  NacheOpen *ro = nullptr;
  ASSERT_EQ(OpenFAs(user, kRead, &ro), 0u) << "reading is allowed";
  EXPECT_EQ(core_->Reopen(user, ro, kBoth, 0),
            uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(up_->Count("OPEN"), 1) << "an upgrade was sent";
  EXPECT_EQ(core_->CloseFile(ro), 0u);
  EXPECT_EQ(core_->CloseFile(reader), 0u);
}

// Upstream_Sec krb5*: the remote sees nache's principal, a machine it
// trusts, so its ACCESS answers are that machine's, not the caller's. A
// file of uid 1000 with mode 0600, which the remote would let nache read
// and write, is then no one else's: what a caller gets is what the remote
// and the mode bits both allow.
TEST_F(CoreDelegationsTest, WhenTheRemoteSeesNacheTheModeBitsBoundTheCaller) {
  up_->Own("f", 1000, 1000, 0, 0600);
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->remote_sees_machine = true; });
  Creds owner, other;
  owner.uid = owner.gid = 1000;
  other.uid = other.gid = 2000;
  const uint32_t rw = upstream::kAccessRead | upstream::kAccessModify;
  uint32_t bits = 0;
  ASSERT_EQ(core_->Access(owner, file_, rw, &bits), 0u);
  EXPECT_EQ(bits, rw);
  ASSERT_EQ(core_->Access(other, file_, rw, &bits), 0u);
  EXPECT_EQ(bits, 0u) << "the remote said yes to nache, the mode says no";
  NacheOpen *o = nullptr;
  EXPECT_EQ(OpenFAs(other, kRead, &o), uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(o, nullptr);
  // The remote still has its say: what it refuses stays refused.
  up_->DenyReading(1000);
  Creds fresh;  // another caller id: no kept answer
  fresh.uid = 1000;
  fresh.gid = 1001;
  ASSERT_EQ(core_->Access(fresh, file_, rw, &bits), 0u);
  EXPECT_EQ(bits, uint32_t(upstream::kAccessModify));
}

// The same for a create of a name nache has listed, which it answers
// without asking the remote (Ganesha leaves a create by name to nache's
// judgement): the remote's answer for nache's principal lets it search the
// directory, the directory's mode (0700, uid 1000's) keeps uid 2000 out,
// and uid 2000 is refused, not told the name is taken.
TEST_F(CoreDelegationsTest, WhenTheRemoteSeesNacheACreateNeedsTheModesSearch) {
  up_->readdir = true;
  up_->Own("d/f", 1000, 1000, 0, 0644);
  up_->Own("d", 1000, 1000, 0, 0700);
  Start(DelegationType::kNone, [](CoreConfig *cfg) {
    cfg->remote_sees_machine = true;
    cfg->cache.attr_timeout_ms = 60000;
  });
  Key d = kNoKey;
  ASSERT_EQ(core_->Lookup(cr_, root_, "d", &d, nullptr), 0u);
  ListDir(d);
  if (HasFatalFailure()) return;
  Creds other;
  other.uid = other.gid = 2000;
  uint32_t bits = 0;
  ASSERT_EQ(core_->Access(other, d, upstream::kAccessLookup, &bits), 0u);
  ASSERT_EQ(bits, 0u) << "the mode keeps uid 2000 out of d";
  Core::OpenRequest req;
  req.key = d;
  req.name = "f";
  req.access = kBoth;
  req.mode = NACHE_OPEN_GUARDED;
  NacheOpen *open = nullptr;
  Key key;
  bool created = false;
  EXPECT_EQ(core_->OpenFile(other, req, &open, &key, nullptr, &created),
            uint32_t(upstream::kNfs4ErrAccess))
      << "told f is taken in a directory it may not search";
}

// A recall ends the trust the delegation gave at once: the server recalls
// it before a change (Linux knfsd when a chmod or an ACL entry is set at
// the remote), so an ACCESS answer kept while it was held is not used
// after the return, however fresh the attribute window (60 s here) would
// call it, and the FSAL is told to drop its own copy of the attributes
// (Ganesha's MDCACHE), once the DELEGRETURN is done. Without that, a
// reader the change revokes kept reading through the shared upstream open
// until the window ended.
TEST_F(CoreDelegationsTest, ARecallEndsTheAccessAnswersKeptUnderIt) {
  Start(DelegationType::kRead,
        [](CoreConfig *cfg) { cfg->cache.attr_timeout_ms = 60000; });
  std::atomic<int> stale_calls{0}, returned_before{-1};
  std::atomic<Key> stale_key{kNoKey};
  core_->SetAttrsStale([&](Key k) {
    stale_key = k;
    returned_before = up_->Count("DELEGRETURN");
    stale_calls++;
  });
  NacheOpen *first = OpenF(kRead);  // the upstream OPEN, and a delegation
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  Creds reader;
  reader.uid = reader.gid = 2000;
  auto open_as_reader = [&](NacheOpen **out) {
    return OpenFAs(reader, kRead, out);
  };
  NacheOpen *o = nullptr;
  ASSERT_EQ(open_as_reader(&o), 0u);  // asked once, kept
  ASSERT_EQ(core_->CloseFile(o), 0u);
  ASSERT_EQ(open_as_reader(&o), 0u);
  ASSERT_EQ(core_->CloseFile(o), 0u);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "granted under the delegation";
  // At the remote, 2000 loses the right to read: the server recalls the
  // delegation first, and the change lands once it is returned.
  auto returns = [this] {
    double n = 0;
    for (const prometheus::MetricFamily &f : metrics_.Collect())
      if (f.name == "nache_delegation_return_seconds")
        for (const prometheus::ClientMetric &m : f.metric)
          for (const prometheus::ClientMetric::Label &l : m.label)
            if (l.name == "reason" && l.value == "recall")
              n += double(m.histogram.sample_count);
    return n;
  };
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  ASSERT_TRUE(cb_client::WaitFor([&] { return returns() >= 1; }))
      << "the delegation was returned";
  EXPECT_EQ(stale_calls.load(), 1) << "the FSAL's attributes were not dropped";
  EXPECT_EQ(stale_key.load(), file_);
  EXPECT_EQ(returned_before.load(), 1) << "dropped after the DELEGRETURN";
  up_->ForeignDenyReading("f", 2000);
  const int asked = up_->Count("ACCESS");
  o = nullptr;
  EXPECT_EQ(open_as_reader(&o), uint32_t(upstream::kNfs4ErrAccess))
      << "the answer kept under the delegation was used after its recall";
  EXPECT_EQ(o, nullptr);
  if (o) core_->CloseFile(o);
  EXPECT_GT(up_->Count("ACCESS"), asked) << "the remote was asked again";
  // The first reader's open, an upstream open again, is unaffected.
  EXPECT_EQ(core_->CloseFile(first), 0u);
  core_->SetAttrsStale(nullptr);  // its captures end here
}

}  // namespace
}  // namespace coretest
}  // namespace nache
