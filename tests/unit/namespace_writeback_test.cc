// NamespaceWriteBack through its narrow Host (a real store, cache and
// handle map; a fake core that allows everything and answers the sends):
// local creates logged and named at once, cancelled by their remove,
// reloaded after a restart, sent (once GUARDED, then UNCHECKED); removes
// of what the remote has logged as whiteouts and sent later.
#include "writeback/namespace_writeback.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "writeback_fixture.h"

namespace nache {
namespace {

using upstream::Attrs;
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Creds;
using upstream::Fh;
using upstream::FileType;
using upstream::Op;
using upstream::OpResult;

class FakeCore : public NamespaceWriteBack::Host,
                 public testing_util::CacheWriteBackHost {
 public:
  // NamespaceWriteBack::Host
  uint32_t Lookup(const Creds &, Key dir, const std::string &name, Key *key,
                  Attrs *attrs) override {
    auto it = remote.find({dir, name});
    if (it == remote.end()) return upstream::kNfs4ErrNoent;
    *key = it->second;
    if (attrs) cache->KnownAttrs(it->second, attrs);
    return upstream::kNfs4Ok;
  }
  uint32_t Getattr(const Creds &, Key key, Attrs *attrs) override {
    return cache->KnownAttrs(key, attrs) ? upstream::kNfs4Ok
                                         : upstream::kNfs4ErrStale;
  }
  uint32_t Access(const Creds &, Key, uint32_t want,
                  uint32_t *allowed) override {
    *allowed = want;
    return upstream::kNfs4Ok;
  }
  void PrefetchListing(const Creds &, Key) override {}
  uint32_t FhOf(Key key, Fh *fh) override {
    if (ns->names().IsRemovedKey(key)) return upstream::kNfs4ErrStale;
    return FhOfAny(key, fh);
  }
  uint32_t FhOfAny(Key key, Fh *fh) override {
    HandleRecord r;
    if (!handles->Get(key, &r)) return upstream::kNfs4ErrStale;
    if (r.fh.empty()) {
      if (uint32_t st = ns->CreateRemotely(key)) return st;
      if (!handles->Get(key, &r) || r.fh.empty())
        return upstream::kNfs4ErrStale;
    }
    *fh = r.fh;
    return upstream::kNfs4Ok;
  }
  uint32_t MaxOps() override { return 15; }  // a session's 16, less SEQUENCE
  uint32_t Run(Compound &c, const Creds &, CompoundReply *rep) override {
    tags.push_back(c.tag());
    rep->results.push_back(OpResult{});  // PUTFH
    if (c.tag() == "flush_create") {     // CREATE, GETFH, GETATTR
      OpResult cr, fh, ga;
      cr.op = Op::kCreate;
      fh.op = Op::kGetfh;
      fh.fh = NextFh();
      ga.op = Op::kGetattr;
      rep->results.insert(rep->results.end(), {cr, fh, ga});
    } else if (c.tag() == "flush_remove") {
      for (int i = 0; i < removes_per_compound; i++) {
        OpResult r;
        r.op = Op::kRemove;
        rep->results.push_back(r);
      }
    }
    return upstream::kNfs4Ok;
  }
  uint32_t MaxWrite() override { return 1 << 20; }
  void CreateObjects(const Creds &, const Fh &,
                     const std::vector<NewObject> &files,
                     std::vector<NewObjectResult> *out) override {
    out->assign(files.size(), NewObjectResult());
    for (size_t i = 0; i < files.size(); i++) {
      NewObjectResult &r = (*out)[i];
      r.answered = true;
      if (files[i].type != upstream::FileType::kReg) {  // a CREATE
        Compound c;
        c.SetTag("flush_create").Putfh(Fh("dir"));
        Run(c, Creds(), &r.rep);
        r.status = upstream::kNfs4Ok;
        r.fh = r.rep.Find(Op::kGetfh)->fh;
        continue;
      }
      creates.push_back({files[i].name, files[i].how});
      if (fail_file_creates) continue;  // (DELAY)
      r.status = upstream::kNfs4Ok;
      r.fh = NextFh();
      r.rep.status = upstream::kNfs4ErrDelay;  // only the OPEN answered
    }
  }
  void NoteGrant(Key, const upstream::Delegation &) override {}
  void ReturnIfReadDelegated(Key) override {}
  void NoteFlushRefused(const char *, Key, const Creds &, uint32_t) override {}
  void NoteNewObjectOwner(Key, const Attrs &) override {}
  uint32_t StoreFailure() const override { return upstream::kNfs4ErrIo; }
  Key RootKey() const override { return root; }

  Fh NextFh() {
    Fh fh;
    fh.push_back(uint8_t(++fhs));
    fh.push_back(0xfe);
    return fh;
  }

  HandleMap *handles = nullptr;
  NamespaceWriteBack *ns = nullptr;
  Key root = kNoKey;
  std::map<std::pair<Key, std::string>, Key> remote;  // what Lookup finds
  std::vector<std::string> tags;                      // COMPOUNDs run
  struct FileCreate {
    std::string name;
    upstream::OpenArgs::Create how;
  };
  std::vector<FileCreate> creates;  // files CreateObjects was asked for
  bool fail_file_creates = false;
  int removes_per_compound = 1;
  int fhs = 0;
};

Creds User(uint32_t uid) {
  Creds cr;
  cr.uid = uid;
  cr.gid = uid;
  return cr;
}

Attrs DirAttrs(Key key) {
  Attrs a;
  a.mask = upstream::kAttrsObject;
  a.type = FileType::kDir;
  a.mode = 0777;
  a.nlink = 2;
  a.fileid = key;
  a.change = 1;
  return a;
}

class NamespaceWriteBackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Reopen();
    core_.root = handles_->Intern(core_.NextFh(), kNoKey, "");
    cache_->Validated(core_.root, DirAttrs(core_.root));
  }
  void Reopen() {
    ns_.reset();
    wb_.reset();
    cache_.reset();
    handles_.reset();
    store_.reset();
    ASSERT_NO_FATAL_FAILURE(testing_util::OpenWriteBackStore(
        dir_.path(), &store_, &cache_, &handles_));
    core_.cache = cache_.get();
    core_.handles = handles_.get();
    wb_.reset(new WriteBack(store_.get(), &core_));
    ns_.reset(new NamespaceWriteBack(store_.get(), cache_.get(), handles_.get(),
                                     wb_.get(), registry_.ForExport(1),
                                     &core_));
    core_.ns = ns_.get();
  }
  // A file of one link the remote has in the root, known here with *a.
  Key RemoteFile(const std::string &name, Attrs *a) {
    Key f = handles_->Intern(core_.NextFh(), core_.root, name);
    a->mask = upstream::kAttrsObject;
    a->type = FileType::kReg;
    a->mode = 0644;
    a->nlink = 1;
    a->fileid = f;
    a->change = 1;
    cache_->Validated(f, *a);
    core_.remote[{core_.root, name}] = f;
    return f;
  }
  // The remove of name in the root, logged, as user 1000.
  uint32_t RemoveLogged(const std::string &name, bool *done, Key *target) {
    return ns_->RemoveLogged(User(1000), core_.root, name, done, target);
  }
  Key CreateLocal(const std::string &name, FileType type) {
    Key k = kNoKey;
    Attrs in;
    EXPECT_EQ(ns_->CreateLocal(User(1000), core_.root, name, type, in, "", &k,
                               nullptr),
              upstream::kNfs4Ok);
    return k;
  }

  testing_util::TempDir dir_;
  metrics::Metrics registry_;
  FakeCore core_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Cache> cache_;
  std::unique_ptr<HandleMap> handles_;
  std::unique_ptr<WriteBack> wb_;
  std::unique_ptr<NamespaceWriteBack> ns_;
};

TEST_F(NamespaceWriteBackTest, ALocalCreateIsLoggedAndNamedAtOnce) {
  Key k = CreateLocal("d", FileType::kDir);
  ASSERT_NE(k, kNoKey);
  LocalNames::Entry e;
  ASSERT_TRUE(ns_->names().Find(core_.root, "d", &e));
  EXPECT_EQ(e.key, k);
  EXPECT_TRUE(ns_->NotAtRemote(k));
  EXPECT_EQ(ns_->log()->records(), 1u);
  Attrs a;
  ASSERT_TRUE(cache_->KnownAttrs(k, &a));
  EXPECT_EQ(a.type, FileType::kDir);
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_TRUE(core_.tags.empty());  // nothing sent
  // The name is taken now.
  Key again = kNoKey;
  EXPECT_EQ(ns_->CreateLocal(User(1000), core_.root, "d", FileType::kReg,
                             Attrs(), "", &again, nullptr),
            upstream::kNfs4ErrExist);
}

TEST_F(NamespaceWriteBackTest, ARemoveOfALocalObjectCancelsItsCreate) {
  Key k = CreateLocal("f", FileType::kReg);
  LocalNames::Entry e;
  ASSERT_TRUE(ns_->names().Find(core_.root, "f", &e));
  EXPECT_EQ(ns_->RemoveLocal(User(1000), core_.root, e), upstream::kNfs4Ok);
  EXPECT_FALSE(ns_->names().Find(core_.root, "f", nullptr));
  EXPECT_FALSE(ns_->NotAtRemote(k));
  EXPECT_EQ(ns_->log()->records(), 0u);
  EXPECT_TRUE(core_.tags.empty());
  EXPECT_TRUE(core_.creates.empty());
}

TEST_F(NamespaceWriteBackTest, LocalNamesAreReloadedFromTheLogAfterARestart) {
  Key d = CreateLocal("d", FileType::kDir);
  Key f = CreateLocal("f", FileType::kReg);
  Reopen();
  LocalNames::Entry e;
  ASSERT_TRUE(ns_->names().Find(core_.root, "d", &e));
  EXPECT_EQ(e.key, d);
  ASSERT_TRUE(ns_->names().Find(core_.root, "f", &e));
  EXPECT_EQ(e.key, f);
  EXPECT_TRUE(ns_->NotAtRemote(f));
  EXPECT_EQ(ns_->log()->records(), 2u);
}

TEST_F(NamespaceWriteBackTest, CreateRemotelySendsTheCreateAndDropsTheRecord) {
  Key d = CreateLocal("d", FileType::kDir);
  EXPECT_EQ(ns_->CreateRemotely(d), upstream::kNfs4Ok);
  EXPECT_EQ(core_.tags, std::vector<std::string>{"flush_create"});
  EXPECT_FALSE(ns_->NotAtRemote(d));
  EXPECT_FALSE(ns_->names().Find(core_.root, "d", nullptr));
  EXPECT_EQ(ns_->log()->records(), 0u);
  HandleRecord r;
  ASSERT_TRUE(handles_->Get(d, &r));
  EXPECT_FALSE(r.fh.empty());
  // Sent once: a second call has nothing to do.
  EXPECT_EQ(ns_->CreateRemotely(d), upstream::kNfs4Ok);
  EXPECT_EQ(core_.tags.size(), 1u);
}

TEST_F(NamespaceWriteBackTest, AFileCreateIsGuardedOnlyOnItsFirstTry) {
  Key f = CreateLocal("f", FileType::kReg);
  // The first try finds the name free or is somebody else's conflict;
  // after a try that may have gone through, its own file may be there.
  core_.fail_file_creates = true;
  EXPECT_NE(ns_->CreateRemotely(f), upstream::kNfs4Ok);
  core_.fail_file_creates = false;
  EXPECT_EQ(ns_->CreateRemotely(f), upstream::kNfs4Ok);
  ASSERT_EQ(core_.creates.size(), 2u);
  EXPECT_EQ(core_.creates[0].how, upstream::OpenArgs::Create::kGuarded);
  EXPECT_EQ(core_.creates[1].how, upstream::OpenArgs::Create::kUnchecked);
  EXPECT_FALSE(ns_->NotAtRemote(f));
  EXPECT_EQ(ns_->log()->records(), 0u);
}

TEST_F(NamespaceWriteBackTest, ARecordLoadedAfterARestartIsNotGuarded) {
  Key f = CreateLocal("f", FileType::kReg);
  Reopen();  // a run that crashed may have sent it
  EXPECT_EQ(ns_->CreateRemotely(f), upstream::kNfs4Ok);
  ASSERT_EQ(core_.creates.size(), 1u);
  EXPECT_EQ(core_.creates[0].how, upstream::OpenArgs::Create::kUnchecked);
}

TEST_F(NamespaceWriteBackTest, ARemoteFileRemovedIsAWhiteoutUntilSent) {
  Attrs a;
  Key f = RemoteFile("old", &a);
  bool done = false;
  Key target = kNoKey;
  EXPECT_EQ(RemoveLogged("old", &done, &target), upstream::kNfs4Ok);
  EXPECT_TRUE(done);
  EXPECT_EQ(target, f);
  EXPECT_TRUE(ns_->names().FindRemoved(core_.root, "old", nullptr));
  EXPECT_TRUE(ns_->names().IsRemovedKey(f));
  EXPECT_EQ(ns_->log()->records(), 1u);
  EXPECT_TRUE(core_.tags.empty());  // told later
  EXPECT_EQ(ns_->SendRemovesIn(core_.root), upstream::kNfs4Ok);
  EXPECT_EQ(core_.tags, std::vector<std::string>{"flush_remove"});
  EXPECT_FALSE(ns_->names().FindRemoved(core_.root, "old", nullptr));
  EXPECT_EQ(ns_->log()->records(), 0u);
}

// The remove of a remote file is logged (synced), then its unflushed data
// is dropped. A kill between the two left the data dirty: after the
// restart the flusher sent it, found the file gone (its REMOVE went
// first) and saved it as NAME.nache-lost-*, for a file the client had
// removed. The log is the word: data of a removed file is dropped at
// start.
TEST_F(NamespaceWriteBackTest, DataOfAFileRemovedBeforeAKillIsNotKept) {
  Attrs a;
  Key f = RemoteFile("old", &a);
  bool done = false;
  Key target = kNoKey;
  ASSERT_EQ(RemoveLogged("old", &done, &target), upstream::kNfs4Ok);
  // As the kill left it: the remove logged, the data still dirty.
  cache_->Validated(f, a);
  uint64_t need = 0, unchanged = 0;
  ASSERT_TRUE(cache_->LocalWrite(f, 0, "ours", 4, &need, &unchanged));
  ASSERT_TRUE(cache_->IsDirty(f));
  Reopen();
  EXPECT_TRUE(ns_->names().IsRemovedKey(f)) << "the remove is still to send";
  EXPECT_FALSE(cache_->IsDirty(f)) << "its data is not";
}

}  // namespace
}  // namespace nache
