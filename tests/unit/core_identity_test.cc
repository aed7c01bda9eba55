// Write-back under the right identity, and owners the remote named that
// nache could not map (issue 16).
#include "scripted_upstream.h"
#include "util/log.h"

namespace nache {
namespace coretest {
namespace {

// Write-back under the caller's identity (issue 16): what a user did here
// reaches the remote as that user, supplementary groups and all, also
// after a restart; and the remote's refusal is counted.
class WriteBackIdentityTest : public CoreDelegationsTest {
 protected:
  static Creds User(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups) {
    Creds cr;
    cr.uid = uid;
    cr.gid = gid;
    cr.groups = std::move(groups);
    return cr;
  }
  void StartSentWhenNeeded(bool probe = true) {
    Start(
        DelegationType::kNone,
        [](CoreConfig *cfg) {
          cfg->write_back = true;
          cfg->single_writer = true;
          cfg->flush_age_ms = 3600 * 1000;  // sent when needed
        },
        probe);
  }
  // Kills nache (nothing more reaches the server) and restarts it on the
  // same cache.
  void KillAndRestart() {
    up_->dead = true;
    core_.reset();
    up_->dead = false;
    StartSentWhenNeeded(false);
  }
  static void ExpectCreds(const Creds &got, uint32_t uid, uint32_t gid,
                          std::vector<uint32_t> groups) {
    EXPECT_EQ(got.uid, uid);
    EXPECT_EQ(got.gid, gid);
    EXPECT_EQ(got.groups, groups);
  }
};

TEST_F(WriteBackIdentityTest, ALocalCreateIsSentAsItsCreatorWithItsGroups) {
  StartSentWhenNeeded();
  // Only members of group 3000 may create here, at the remote.
  up_->Guard({"OPEN"}, 3000);
  Key k = CreateAs(User(2000, 2000, {3000}), "mine", "data");
  EXPECT_EQ(up_->Sends("OPEN").size(), 0u) << "logged, not sent";
  ASSERT_EQ(SetSize(k, 2), 0u);
  std::vector<ScriptedUpstream::Sent> opens = up_->Sends("OPEN");
  ASSERT_EQ(opens.size(), 1u);
  ExpectCreds(opens[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("mine"), "da");
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_refused_total"), 0);
}

TEST_F(WriteBackIdentityTest, ACreateLoggedBeforeARestartIsSentAsItsCreator) {
  StartSentWhenNeeded();
  up_->Guard({"OPEN"}, 3000);
  CreateAs(User(2000, 2000, {3000}), "mine", "data");
  KillAndRestart();
  Key k;
  ASSERT_EQ(core_->Lookup(cr_, root_, "mine", &k, nullptr), 0u);
  ASSERT_EQ(SetSize(k, 2), 0u);
  std::vector<ScriptedUpstream::Sent> opens = up_->Sends("OPEN");
  ASSERT_EQ(opens.size(), 1u);
  ExpectCreds(opens[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("mine"), "da");
}

// Directories' times, moved here by a local mkdir, sent as a caller the
// remote does not let set them (SETATTR refused): given up, the remote's
// times stand and the directories are clean, not retried for ever.
TEST_F(CoreDelegationsTest, RefusedDirectoryTimesAreGivenUp) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  up_->Guard({"SETATTR"}, 3000);
  Key sub = kNoKey;
  ASSERT_EQ(Mkdir("sub", &sub), 0u);
  ASSERT_TRUE(cb_client::WaitFor(
      [&] { return up_->Tree().find("sub/") != std::string::npos; }));
  EXPECT_TRUE(cb_client::WaitFor([&] {
    return !core_->cache()->IsDirty(root_) && !core_->cache()->IsDirty(sub);
  })) << "a directory stays dirty (its times retried)";
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_refused_total"), 0);
}

TEST_F(WriteBackIdentityTest, DataWrittenBeforeARestartIsSentAsItsWriter) {
  StartSentWhenNeeded();
  up_->Guard({"WRITE"}, 3000);
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(
      core_->Write(User(2000, 2000, {3000}), file_, nullptr, 0, 5, "OURS!",
                   upstream::StableHow::kFileSync, &n, &committed),
      0u);
  KillAndRestart();
  ASSERT_EQ(SetSize(file_, 4), 0u);  // flushes the data first
  std::vector<ScriptedUpstream::Sent> writes = up_->Sends("WRITE");
  ASSERT_GE(writes.size(), 1u);
  ExpectCreds(writes[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("f"), "OURS");
}

TEST_F(WriteBackIdentityTest, RemovesAndRenamesAreSentAsTheirCaller) {
  StartSentWhenNeeded();
  up_->AddFile("old", "x");
  up_->AddFile("moved", "y");
  up_->Guard({"REMOVE", "RENAME"}, 3000);
  const Creds u = User(2000, 2000, {3000});
  ASSERT_EQ(core_->Remove(u, root_, "old"), 0u);
  ASSERT_EQ(core_->Rename(u, root_, "moved", root_, "there"), 0u);
  EXPECT_EQ(up_->Sends("REMOVE").size() + up_->Sends("RENAME").size(), 0u)
      << "logged, not sent";
  // New files under the old names need them free at the remote.
  ASSERT_EQ(SetSize(CreateWritten("old", "new"), 1), 0u);
  ASSERT_EQ(SetSize(CreateWritten("moved", "new"), 1), 0u);
  std::vector<ScriptedUpstream::Sent> removes = up_->Sends("REMOVE");
  std::vector<ScriptedUpstream::Sent> renames = up_->Sends("RENAME");
  ASSERT_EQ(removes.size(), 1u);
  ASSERT_EQ(renames.size(), 1u);
  ExpectCreds(removes[0].cr, 2000, 2000, {3000});
  ExpectCreds(renames[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("there"), "y");
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_refused_total"), 0);
}

TEST_F(WriteBackIdentityTest, ARefusalAtFlushIsCounted) {
  StartSentWhenNeeded();
  // The creator lacks the group the remote asks for: allowed here (our
  // ACCESS says yes), refused at the flush.
  up_->Guard({"OPEN", "WRITE"}, 3000);
  Key k = CreateAs(User(2000, 2000, {}), "theirs", "data");
  EXPECT_EQ(SetSize(k, 2), uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_GE(CounterValue(metrics_, "nache_writeback_refused_total"), 1);
  // Data of a file the remote has, written by a non-member.
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(User(2001, 2001, {}), file_, nullptr, 0, 5, "OURS!",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  double before = CounterValue(metrics_, "nache_writeback_refused_total");
  EXPECT_NE(SetSize(file_, 4), 0u);
  EXPECT_GT(CounterValue(metrics_, "nache_writeback_refused_total"), before);
  EXPECT_EQ(up_->Data("f"), "hello");
}

// The flush of data to a file the remote has begins with a check of the
// file's change attribute, as the writer: refused there (with
// Upstream_Identity = user, when the writer's credentials cannot be had,
// every call as the writer is), the data's flush is refused, counted and
// logged, and the data waits. (Before, a refused check was only "a flush
// failed": the metric never said so.)
TEST_F(WriteBackIdentityTest, ARefusalOfTheFlushsFirstCheckIsCounted) {
  StartSentWhenNeeded();
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(User(2001, 2001, {}), file_, nullptr, 0, 5, "OURS!",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  up_->Guard({"GETATTR"}, 3000);
  EXPECT_NE(SetSize(file_, 4), 0u);
  EXPECT_GE(CounterValue(metrics_, "nache_writeback_refused_total",
                         {{"op", "write"}}),
            1);
  EXPECT_EQ(up_->Sends("WRITE").size(), 0u);
  EXPECT_TRUE(core_->cache()->IsDirty(file_)) << "the data waits";
  EXPECT_EQ(up_->Data("f"), "hello");
}

// An owner or group the remote named and the core could not map shows as
// nobody (65534), and nobody (an office client's root, squashed) gets no
// owner or group rights from it here: a chmod it makes is not kept
// locally but sent to the remote to judge, Ganesha's owner_skip shortcut
// does not apply, and a file made in a set-group-id directory of such a
// group gives no group rights either. The remote's own nobody (65534 by
// number) keeps its rights.
class UnmappedOwnerTest : public WriteBackIdentityTest {
 protected:
  static constexpr uint32_t kNobody = upstream::kNobodyId;
  static constexpr uint64_t kUnmapped =
      upstream::kAttrOwnerUnmapped | upstream::kAttrGroupUnmapped;
  const Creds nobody_ = User(kNobody, kNobody, {});
  Key LookupRoot(const char *name) {
    Key k = kNoKey;
    EXPECT_EQ(core_->Lookup(cr_, root_, name, &k, nullptr), 0u);
    return k;
  }
  uint32_t Chmod(const Creds &cr, Key k, uint32_t mode) {
    Attrs set, out;
    set.mask = upstream::kAttrMode;
    set.mode = mode;
    return core_->Setattr(cr, k, nullptr, set, &out);
  }
};

TEST_F(UnmappedOwnerTest, NobodysChmodOfTheirFileGoesToTheRemote) {
  up_->AddFile("theirs", "x");
  up_->Own("theirs", kNobody, kNobody, kUnmapped);
  up_->AddFile("nobodys", "y");
  up_->Own("nobodys", kNobody, kNobody, 0);
  StartSentWhenNeeded();
  Key theirs = LookupRoot("theirs"), nobodys = LookupRoot("nobodys");
  ASSERT_EQ(Chmod(nobody_, nobodys, 0600), 0u);
  EXPECT_EQ(up_->Sends("SETATTR").size(), 0u) << "its owner: kept here";
  ASSERT_EQ(Chmod(nobody_, theirs, 0600), 0u);
  std::vector<ScriptedUpstream::Sent> sent = up_->Sends("SETATTR");
  ASSERT_EQ(sent.size(), 1u) << "not its owner: the remote judges";
  ExpectCreds(sent[0].cr, kNobody, kNobody, {});
}

TEST_F(UnmappedOwnerTest, OwnerSkipNeverTakesNobodyForAnUnmappedOwner) {
  up_->AddFile("theirs", "x");
  up_->Own("theirs", kNobody, kNobody, kUnmapped);
  up_->AddFile("nobodys", "y");
  up_->Own("nobodys", kNobody, kNobody, 0);
  StartSentWhenNeeded();
  Key theirs = LookupRoot("theirs"), nobodys = LookupRoot("nobodys");
  EXPECT_FALSE(core_->CallerOwnsKnown(nobody_, theirs));
  EXPECT_TRUE(core_->CallerOwnsKnown(nobody_, nobodys));
  EXPECT_FALSE(core_->CallerOwnsKnown(User(1000, 1000, {}), nobodys));
  Attrs a;
  ASSERT_EQ(core_->Getattr(cr_, theirs, &a), 0u);
  EXPECT_EQ(a.uid, kNobody) << "shown as nobody";
  nache_attrs c;
  AttrsToC(a, &c);
  EXPECT_TRUE(c.owner_unmapped);
  EXPECT_TRUE(c.group_unmapped);
}

// Root gives the file to alice, kept here (write-back): the owner is a
// local id from then on, no longer unmapped.
TEST_F(UnmappedOwnerTest, AChownHereMakesTheOwnerMapped) {
  up_->AddFile("theirs", "x");
  up_->Own("theirs", kNobody, kNobody, kUnmapped);
  StartSentWhenNeeded();
  Key theirs = LookupRoot("theirs");
  Attrs set, a;
  set.mask = upstream::kAttrOwner;
  set.uid = 1000;
  ASSERT_EQ(core_->Setattr(cr_, theirs, nullptr, set, &a), 0u);
  EXPECT_EQ(up_->Sends("SETATTR").size(), 0u) << "root's: kept here";
  ASSERT_EQ(core_->Getattr(cr_, theirs, &a), 0u);
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.mask & kUnmapped, upstream::kAttrGroupUnmapped);
  EXPECT_TRUE(core_->CallerOwnsKnown(User(1000, 1000, {}), theirs));
}

TEST_F(UnmappedOwnerTest, ASetgidDirectorysUnmappedGroupPassesOnUnmapped) {
  up_->AddDir("shared");
  up_->Own("shared", 0, kNobody, upstream::kAttrGroupUnmapped, 02777);
  StartSentWhenNeeded();
  Key dir = LookupRoot("shared");
  Core::OpenRequest req;
  req.key = dir;
  req.name = "new";
  req.access = kBoth;
  req.mode = NACHE_OPEN_GUARDED;
  req.create_attrs.mask = upstream::kAttrMode;
  req.create_attrs.mode = 0660;
  NacheOpen *open = nullptr;
  Key k = kNoKey;
  bool created = false;
  const Creds alice = User(1000, 1000, {});
  ASSERT_EQ(core_->OpenFile(alice, req, &open, &k, nullptr, &created), 0u);
  ASSERT_EQ(core_->CloseFile(open), 0u);
  EXPECT_EQ(up_->Sends("OPEN").size(), 0u) << "made here, not sent";
  Attrs a;
  ASSERT_EQ(core_->Getattr(alice, k, &a), 0u);
  EXPECT_EQ(a.gid, kNobody);
  EXPECT_NE(a.mask & upstream::kAttrGroupUnmapped, 0u);
  uint32_t allowed = 0;
  ASSERT_EQ(
      core_->Access(User(2000, kNobody, {}), k,
                    upstream::kAccessRead | upstream::kAccessModify, &allowed),
      0u);
  EXPECT_EQ(allowed, 0u) << "no group rights from an unmapped group";
  ASSERT_EQ(core_->Access(alice, k, upstream::kAccessRead, &allowed), 0u);
  EXPECT_EQ(allowed, upstream::kAccessRead) << "its creator owns it";
}

// What nache's log says while a test runs (its warnings about owners).
class LogCapture {
 public:
  LogCapture() {
    Lines().clear();
    nache_log_set_sink(&Sink);
  }
  ~LogCapture() { nache_log_set_sink(nullptr); }
  // The messages so far that contain text.
  static int Count(const std::string &text) {
    std::lock_guard<std::mutex> g(Mu());
    int n = 0;
    for (const std::string &l : Lines())
      if (l.find(text) != std::string::npos) n++;
    return n;
  }

 private:
  static void Sink(int level, const char *component, const char *message) {
    std::lock_guard<std::mutex> g(Mu());
    Lines().push_back(std::string(component) + ": " + message);
  }
  static std::mutex &Mu() {
    static std::mutex mu;
    return mu;
  }
  static std::vector<std::string> &Lines() {
    static std::vector<std::string> lines;
    return lines;
  }
};

// Upstream_Sec krb5* as nache's own principal, at a remote that maps that
// principal to nobody: what nache makes there is nobody's. Each such
// object is counted, and the log says once what is wrong and what to do.
TEST_F(CoreDelegationsTest, ObjectsMadeAsNobodyUnderNachesPrincipalWarnOnce) {
  LogCapture log;
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->remote_sees_machine = true; });
  up_->new_owner = upstream::kNobodyId;
  Key sub = kNoKey;
  ASSERT_EQ(Mkdir("sub", &sub), 0u);
  bool created = false;
  WriteNamed(cr_, "made", NACHE_OPEN_GUARDED, "data", &created);
  ASSERT_TRUE(created);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_created_as_nobody_total"),
            2);
  EXPECT_EQ(LogCapture::Count("owned by nobody"), 1) << "logged once";
  EXPECT_EQ(LogCapture::Count("Upstream_Identity = user"), 1) << "the fix";
  // A remote that maps nache to someone: nothing more.
  up_->new_owner = 0;
  WriteNamed(cr_, "made2", NACHE_OPEN_GUARDED, "data", &created);
  ASSERT_TRUE(created);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_created_as_nobody_total"),
            2);
}

}  // namespace
}  // namespace coretest
}  // namespace nache
