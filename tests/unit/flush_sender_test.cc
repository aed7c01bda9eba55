// FlushSender through its narrow Host (a real store, cache and handle map;
// a fake core that answers the remote's side): a range goes in WRITEs no
// bigger than the server takes and reports the weakest stability and a
// verifier that changed between them; a directory's times the remote
// refuses to set are given up, a file's are not; the flush open-owners are
// named by the proxy's prefix and start their seqids afresh with a new
// client id.
#include "writeback/flush_sender.h"

#include <gtest/gtest.h>
#include <nfsc/libnfs-raw-nfs4.h>

#include <algorithm>
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
using upstream::StableHow;

class FakeCore : public FlushSender::Host,
                 public Conflicts::Host,
                 public testing_util::CacheWriteBackHost {
 public:
  // What one COMPOUND asked for.
  struct Call {
    std::string tag;
    std::vector<Op> ops;
    uint64_t write_offset = 0;  // its WRITE's
    uint32_t write_len = 0;
    uint32_t open_seqid = 0;  // its OPEN's or CLOSE's
    std::string open_owner;
  };

  // FlushSender::Host and Conflicts::Host
  uint32_t FhOf(Key key, Fh *fh) override {
    *fh = Fh("fh-") + std::to_string(key);
    return upstream::kNfs4Ok;
  }
  uint32_t MaxOps() override { return max_ops; }
  uint32_t Run(Compound &c, const Creds &, CompoundReply *rep) override {
    Call call;
    call.tag = c.tag();
    const COMPOUND4args *args = c.Args();
    for (size_t i = 0; i < c.size(); i++) {
      call.ops.push_back(c.op(i));
      const nfs_argop4 &a = args->argarray.argarray_val[i];
      if (c.op(i) == Op::kWrite) {
        call.write_offset = a.nfs_argop4_u.opwrite.offset;
        call.write_len = a.nfs_argop4_u.opwrite.data.data_len;
      } else if (c.op(i) == Op::kOpen) {
        const OPEN4args &o = a.nfs_argop4_u.opopen;
        call.open_seqid = o.seqid;
        call.open_owner.assign(o.owner.owner.owner_val,
                               o.owner.owner.owner_len);
      } else if (c.op(i) == Op::kClose) {
        call.open_seqid = a.nfs_argop4_u.opclose.seqid;
      }
    }
    calls.push_back(call);
    bool refuse = refuse_setattr && c.size() > 1 && c.op(1) == Op::kSetattr;
    int writes = 0;
    for (Op op : call.ops) {
      OpResult r;
      r.op = op;
      if (op == Op::kSetattr && refuse) r.status = upstream::kNfs4ErrPerm;
      if (op == Op::kWrite && writes++ == fail_write)
        r.status = upstream::kNfs4ErrNospc;
      if (op == Op::kWrite) {
        r.count = call.write_len;
        size_t n = calls.size() - 1;
        r.committed = n < write_replies.size() ? write_replies[n].first
                                               : StableHow::kFileSync;
        r.verifier = n < write_replies.size() ? write_replies[n].second
                                              : std::string("verifier");
      }
      if (op == Op::kGetfh) r.fh = Fh("new-file");
      rep->results.push_back(r);
      if (r.status) return rep->status = r.status;
    }
    return upstream::kNfs4Ok;
  }
  uint32_t MaxWrite() override { return max_write; }
  uint64_t Epoch() const override { return epoch; }
  uint32_t MinorVersion() const override { return minor; }
  uint32_t ConfirmIfAsked(const Creds &, const OpResult &, const Fh &,
                          OwnerSlot *owner, upstream::StateId *,
                          upstream::Delegation *) REQUIRES(owner->mu) override {
    return upstream::kNfs4Ok;
  }
  void ReturnIfReadDelegated(Key) override {}
  bool WriteDelegation(Key, upstream::StateId *) override { return false; }

  // Conflicts::Host (not reached: no file here is dirty)
  uint32_t WriteRange(const Creds &, const Fh &, const upstream::StateId &,
                      uint64_t, const char *, size_t, StableHow,
                      const char *) override {
    return upstream::kNfs4ErrServerfault;
  }
  uint32_t CreateClosedFile(const Creds &, const Fh &, const std::string &,
                            upstream::OpenArgs::Create, const Attrs &, Key,
                            const std::function<void(Compound *)> &,
                            CompoundReply *, Fh *,
                            upstream::Delegation *) override {
    return upstream::kNfs4ErrServerfault;
  }
  void NoteGrant(Key, const upstream::Delegation &) override {}
  bool WriteDelegated(Key) override { return false; }
  void NoteFlushRefused(const char *, Key, const Creds &, uint32_t) override {}
  Key RootKey() const override { return kNoKey; }

  uint32_t max_write = 1 << 20;
  uint64_t epoch = 1;
  uint32_t minor = 0;           // MinorVersion
  uint32_t max_ops = 15;        // MaxOps: a session's 16, less SEQUENCE
  int fail_write = -1;          // a COMPOUND's WRITE of this index: NOSPC
  bool refuse_setattr = false;  // SETATTR answered NFS4ERR_PERM
  // The stability and verifier of the nth COMPOUND's WRITE.
  std::vector<std::pair<StableHow, std::string>> write_replies;
  std::vector<Call> calls;
};

class FlushSenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing_util::OpenWriteBackStore(
        dir_.path(), &store_, &cache_, &handles_));
    core_.cache = cache_.get();
    wb_.reset(new WriteBack(store_.get(), &core_));
    conflicts_.reset(new Conflicts(cache_.get(), handles_.get(), wb_.get(),
                                   registry_.ForExport(1), &core_, true));
    FlushSender::Options so;
    so.owner_prefix = "nache-1-cafe";
    sender_.reset(new FlushSender(cache_.get(), wb_.get(), nullptr,
                                  conflicts_.get(), registry_.ForExport(1),
                                  &core_, so));
    dir_key_ = handles_->Intern("dir-d", kNoKey, "d");
    cache_->Validated(dir_key_, ObjectAttrs(dir_key_, FileType::kDir, 1));
    file_ = handles_->Intern("file-f", dir_key_, "f");
    cache_->Validated(file_, ObjectAttrs(file_, FileType::kReg, 1));
  }
  // n new files n0, n1, ..., each with one WRITE of data (which outlives
  // them).
  std::vector<NewObject> NewFiles(size_t n, const std::string &data) {
    std::vector<NewObject> files(n);
    for (size_t i = 0; i < n; i++) {
      files[i].name = "n" + std::to_string(i);
      files[i].key = file_;
      files[i].more_ops = 1;
      files[i].more_bytes = data.size();
      files[i].more = [&data](Compound *c, const upstream::StateId &sid) {
        c->Write(sid, 0, StableHow::kFileSync, data.data(),
                 uint32_t(data.size()));
      };
    }
    return files;
  }
  static Attrs Mtime() {
    Attrs set;
    set.mask = upstream::kAttrMtime;
    set.mtime.sec = 1700000000;
    return set;
  }

  testing_util::TempDir dir_;
  metrics::Metrics registry_;
  FakeCore core_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Cache> cache_;
  std::unique_ptr<HandleMap> handles_;
  std::unique_ptr<WriteBack> wb_;
  std::unique_ptr<Conflicts> conflicts_;
  std::unique_ptr<FlushSender> sender_;
  Key dir_key_ = kNoKey;
  Key file_ = kNoKey;
};

TEST_F(FlushSenderTest, ARangeGoesInWritesNoBiggerThanTheServerTakes) {
  core_.max_write = 4096;
  core_.write_replies = {{StableHow::kFileSync, "verf-one"},
                         {StableHow::kUnstable, "verf-one"},
                         {StableHow::kFileSync, "verf-two"}};
  std::string data(10000, 'x');
  Flusher::Sent sent;
  EXPECT_EQ(sender_->SendRange(file_, 8192, data, StableHow::kUnstable, &sent),
            upstream::kNfs4Ok);
  ASSERT_EQ(core_.calls.size(), 3u);
  EXPECT_EQ(core_.calls[0].write_offset, 8192u);
  EXPECT_EQ(core_.calls[0].write_len, 4096u);
  EXPECT_EQ(core_.calls[1].write_offset, 8192u + 4096);
  EXPECT_EQ(core_.calls[2].write_len, 10000u - 2 * 4096);
  // Only the last WRITE asks for the attributes after.
  EXPECT_EQ(core_.calls[0].ops.back(), Op::kWrite);
  EXPECT_EQ(core_.calls[2].ops.back(), Op::kGetattr);
  // The weakest stability; a verifier that changed matches no COMMIT.
  EXPECT_EQ(sent.committed, StableHow::kUnstable);
  EXPECT_TRUE(sent.mixed);
  EXPECT_EQ(sent.verifier, "verf-two");
}

TEST_F(FlushSenderTest, ADirectorysRefusedTimesAreGivenUp) {
  core_.refuse_setattr = true;
  Attrs after;
  EXPECT_EQ(sender_->Setattr(dir_key_, Mtime(), &after), upstream::kNfs4Ok);
  ASSERT_EQ(core_.calls.size(), 2u);
  EXPECT_EQ(core_.calls[0].ops[1], Op::kSetattr);
  // Then only its attributes at the remote, to follow from now on.
  EXPECT_EQ(core_.calls[1].ops, (std::vector<Op>{Op::kPutfh, Op::kGetattr}));
}

TEST_F(FlushSenderTest, AFilesRefusedTimesAreNotGivenUp) {
  core_.refuse_setattr = true;
  Attrs after;
  EXPECT_EQ(sender_->Setattr(file_, Mtime(), &after), upstream::kNfs4ErrPerm);
  EXPECT_EQ(core_.calls.size(), 1u);
}

// New files with their data in one COMPOUND (NFSv4.1): no more bytes than
// one WRITE's request, each file's own arguments counted too (knfsd's
// largest request is its largest WRITE and a page).
TEST_F(FlushSenderTest, ABatchHoldsWhatOneRequestTakes) {
  core_.minor = 1;
  core_.max_ops = 63;
  core_.max_write = 65536;
  const std::string data(21500, 'x');  // 3 of them fit, with no arguments
  std::vector<NewObject> files = NewFiles(6, data);
  std::vector<NewObjectResult> res;
  sender_->CreateObjects(Creds(), Fh("dir"), files, &res);
  ASSERT_EQ(core_.calls.size(), 3u);
  for (const FakeCore::Call &c : core_.calls)
    EXPECT_EQ(std::count(c.ops.begin(), c.ops.end(), Op::kOpen), 2) << c.tag;
  for (const NewObjectResult &r : res) EXPECT_EQ(r.status, upstream::kNfs4Ok);
}

// A file whose own operation fails stops the COMPOUND: it is made (its
// open closed apart, since its CLOSE was not reached), the one before it
// is made and closed in the COMPOUND, the one after it is not reached.
TEST_F(FlushSenderTest, AFailingFileStopsItsBatchAndIsClosedApart) {
  core_.minor = 1;
  core_.max_ops = 63;
  core_.fail_write = 1;  // the second file's WRITE
  const std::string data = "abc";
  std::vector<NewObject> files = NewFiles(3, data);
  std::vector<NewObjectResult> res;
  sender_->CreateObjects(Creds(), Fh("dir"), files, &res);
  ASSERT_EQ(core_.calls.size(), 2u);
  EXPECT_EQ(core_.calls[0].tag, "flush_create");
  EXPECT_EQ(core_.calls[1].tag, "flush_create_close");
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].status, upstream::kNfs4Ok);
  EXPECT_EQ(res[0].rep.status, upstream::kNfs4Ok);
  EXPECT_NE(res[0].rep.Find(Op::kClose), nullptr);
  EXPECT_EQ(res[1].status, upstream::kNfs4Ok) << "made";
  EXPECT_EQ(res[1].rep.status, upstream::kNfs4ErrNospc);
  EXPECT_EQ(res[1].fh, "new-file");
  EXPECT_EQ(res[2].status, upstream::kNfs4ErrDelay) << "not reached";
  EXPECT_TRUE(res[2].answered);
  EXPECT_TRUE(res[2].rep.results.empty());
}

TEST_F(FlushSenderTest, FlushOwnersStartAfreshWithANewClientId) {
  auto create = [this](const std::string &name) {
    CompoundReply rep;
    Fh fh;
    return sender_->CreateClosedFile(
        Creds(), Fh("dir"), name, upstream::OpenArgs::Create::kGuarded, Attrs(),
        file_, [](Compound *) {}, &rep, &fh, nullptr);
  };
  ASSERT_EQ(create("a"), upstream::kNfs4Ok);
  ASSERT_EQ(create("b"), upstream::kNfs4Ok);
  core_.epoch = 2;
  ASSERT_EQ(create("c"), upstream::kNfs4Ok);
  ASSERT_EQ(core_.calls.size(), 6u);  // OPEN, CLOSE each
  const std::string owner =
      "nache-1-cafe-flush" + std::to_string(file_ % WriteBack::kFlushOwners);
  EXPECT_EQ(core_.calls[0].tag, "flush_create");
  EXPECT_EQ(core_.calls[0].open_owner, owner);
  EXPECT_EQ(core_.calls[0].open_seqid, 0u);
  EXPECT_EQ(core_.calls[1].tag, "flush_create_close");
  EXPECT_EQ(core_.calls[1].open_seqid, 1u);
  EXPECT_EQ(core_.calls[2].open_seqid, 2u);
  EXPECT_EQ(core_.calls[4].open_owner, owner);
  EXPECT_EQ(core_.calls[4].open_seqid, 0u);
}

TEST_F(FlushSenderTest, ACleanFileIsPreparedWithoutAsking) {
  EXPECT_EQ(sender_->Prepare(file_, true), upstream::kNfs4Ok);
  EXPECT_TRUE(core_.calls.empty());
}

}  // namespace
}  // namespace nache
