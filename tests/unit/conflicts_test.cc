// Conflicts through its narrow Host (a real store, cache and handle map; a
// fake core that answers the remote's side): a clean file, one under our
// write delegation and one whose change attribute did not move are left
// alone; one changed at the remote keeps both versions; one gone at the
// remote is saved beside where it was.
#include "writeback/conflicts.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "writeback_fixture.h"

namespace nache {
namespace {

using testing_util::ObjectAttrs;
using upstream::Attrs;
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Creds;
using upstream::Fh;
using upstream::FileType;
using upstream::Op;
using upstream::OpResult;

class FakeCore : public Conflicts::Host,
                 public testing_util::CacheWriteBackHost {
 public:
  // Conflicts::Host
  uint32_t FhOf(Key key, Fh *fh) override {
    HandleRecord r;
    if (!handles->Get(key, &r) || r.fh.empty()) return upstream::kNfs4ErrStale;
    *fh = r.fh;
    return upstream::kNfs4Ok;
  }
  uint32_t MaxOps() override { return 15; }  // a session's 16, less SEQUENCE
  uint32_t Run(Compound &c, const Creds &, CompoundReply *rep) override {
    tags.push_back(c.tag());
    rep->results.push_back(OpResult{});  // PUTFH
    if (c.tag() == "flush_check") {      // GETATTR
      OpResult ga;
      ga.op = Op::kGetattr;
      ga.attrs.mask = upstream::kAttrChange | upstream::kAttrSize;
      ga.attrs.change = remote_change;
      ga.attrs.size = 14;
      rep->results.push_back(ga);
    } else {
      OpResult r;  // SETATTR
      r.op = Op::kSetattr;
      rep->results.push_back(r);
    }
    return upstream::kNfs4Ok;
  }
  uint32_t WriteRange(const Creds &, const Fh &, const upstream::StateId &,
                      uint64_t offset, const char *data, size_t len,
                      upstream::StableHow, const char *) override {
    written.push_back(std::string(data, len));
    return upstream::kNfs4Ok;
  }
  uint32_t CreateClosedFile(const Creds &, const Fh &, const std::string &name,
                            upstream::OpenArgs::Create, const Attrs &, Key,
                            const std::function<void(Compound *)> &,
                            CompoundReply *rep, Fh *fh,
                            upstream::Delegation *) override {
    created.push_back(name);
    *fh = Fh("copy-") + name;
    OpResult o;
    o.op = Op::kOpen;
    rep->results.push_back(o);
    return upstream::kNfs4Ok;
  }
  void NoteGrant(Key, const upstream::Delegation &) override {}
  bool WriteDelegated(Key) override { return write_delegated; }
  void NoteFlushRefused(const char *, Key, const Creds &, uint32_t) override {}
  Key RootKey() const override { return root; }

  HandleMap *handles = nullptr;
  Key root = kNoKey;
  uint64_t remote_change = 0;  // the change attribute the remote answers
  bool write_delegated = false;
  std::vector<std::string> tags;     // COMPOUNDs run
  std::vector<std::string> created;  // copies made
  std::vector<std::string> written;  // data written into them
};

class ConflictsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing_util::OpenWriteBackStore(
        dir_.path(), &store_, &cache_, &handles_));
    core_.cache = cache_.get();
    core_.handles = handles_.get();
    wb_.reset(new WriteBack(store_.get(), &core_));
    conflicts_.reset(new Conflicts(cache_.get(), handles_.get(), wb_.get(),
                                   registry_.ForExport(1), &core_, true));
    core_.root = handles_->Intern("root", kNoKey, "");
    cache_->Validated(core_.root, ObjectAttrs(core_.root, FileType::kDir, 1));
    file_ = handles_->Intern("file-f", core_.root, "f");
    cache_->Validated(file_, ObjectAttrs(file_, FileType::kReg, 5));
  }
  // A local write of "ours" to f, based on the remote's change 5.
  void WriteOurs() {
    uint64_t need = 0;
    ASSERT_TRUE(cache_->LocalWrite(file_, 0, "ours", 4, &need));
    ASSERT_TRUE(cache_->IsDirty(file_));
  }

  testing_util::TempDir dir_;
  metrics::Metrics registry_;
  FakeCore core_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Cache> cache_;
  std::unique_ptr<HandleMap> handles_;
  std::unique_ptr<WriteBack> wb_;
  std::unique_ptr<Conflicts> conflicts_;
  Key file_ = kNoKey;
};

TEST_F(ConflictsTest, ACleanFileIsNotChecked) {
  EXPECT_EQ(conflicts_->CheckForConflict(file_), upstream::kNfs4Ok);
  EXPECT_TRUE(core_.tags.empty());
}

TEST_F(ConflictsTest, AFileUnderOurWriteDelegationIsNotChecked) {
  WriteOurs();
  core_.write_delegated = true;
  core_.remote_change = 6;
  EXPECT_EQ(conflicts_->CheckForConflict(file_), upstream::kNfs4Ok);
  EXPECT_TRUE(core_.tags.empty());
  EXPECT_TRUE(cache_->IsDirty(file_));
}

TEST_F(ConflictsTest, AnUnmovedChangeAttributeIsNoConflict) {
  WriteOurs();
  core_.remote_change = 5;
  EXPECT_EQ(conflicts_->CheckForConflict(file_), upstream::kNfs4Ok);
  EXPECT_EQ(core_.tags, std::vector<std::string>{"flush_check"});
  EXPECT_TRUE(core_.created.empty());
  EXPECT_TRUE(cache_->IsDirty(file_));
}

TEST_F(ConflictsTest, AMovedChangeAttributeKeepsBothVersions) {
  WriteOurs();
  core_.remote_change = 6;
  EXPECT_EQ(conflicts_->CheckForConflict(file_), upstream::kNfs4Ok);
  ASSERT_EQ(core_.created.size(), 1u);
  EXPECT_EQ(core_.created[0].rfind("f.nache-conflict-", 0), 0u)
      << core_.created[0];
  ASSERT_EQ(core_.written.size(), 1u);
  EXPECT_EQ(core_.written[0], "ours");
  // Ours is in the copy; the file follows the remote again.
  EXPECT_FALSE(cache_->IsDirty(file_));
}

TEST_F(ConflictsTest, ALostFileIsSavedBesideWhereItWas) {
  WriteOurs();
  EXPECT_EQ(conflicts_->SaveLostFile(file_), upstream::kNfs4Ok);
  ASSERT_EQ(core_.created.size(), 1u);
  EXPECT_EQ(core_.created[0].rfind("f.nache-lost-", 0), 0u) << core_.created[0];
  ASSERT_EQ(core_.written.size(), 1u);
  EXPECT_EQ(core_.written[0], "ours");
  EXPECT_FALSE(cache_->IsDirty(file_));
}

}  // namespace
}  // namespace nache
