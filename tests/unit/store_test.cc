// The store's open checks (a corrupt store, a store in use, other open
// errors, the upstream's identity) and a full cache filesystem (writes
// refused with NoSpace, reads served, nothing acknowledged lost, writes
// again once space is freed, a start on a full disk that does not abort).
#include "store/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "cache/cache.h"
#include "file_attrs.h"
#include "handles/handle_map.h"
#include "metrics/metrics.h"
#include "temp_dir.h"

namespace nache {
namespace {

using testing_util::TempDir;
using LabelMap = std::map<std::string, std::string>;

double Value(metrics::Metrics &m, const std::string &name,
             const LabelMap &want) {
  for (const prometheus::MetricFamily &f : m.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric &c : f.metric) {
      LabelMap have;
      for (const auto &l : c.label) have[l.name] = l.value;
      if (have == want)
        return f.type == prometheus::MetricType::Gauge ? c.gauge.value
                                                       : c.counter.value;
    }
  }
  return -1;
}

// How many entries of dir start with prefix.
int CountNamed(const std::string &dir, const std::string &prefix) {
  std::string cmd = "ls -a " + dir + " | grep -c '^" + prefix + "'";
  FILE *p = popen(cmd.c_str(), "r");
  int n = 0;
  if (p) {
    if (fscanf(p, "%d", &n) != 1) n = 0;
    pclose(p);
  }
  return n;
}

StoreOptions Upstream(const std::string &server, uint32_t port,
                      const std::string &path) {
  StoreOptions o;
  o.upstream_server = server;
  o.upstream_port = port;
  o.upstream_path = path;
  return o;
}

// One unflushed log record, as the write-back log would hold it.
void PutLogRecord(Store *s) {
  rocksdb::WriteOptions w;
  w.sync = true;
  ASSERT_TRUE(s->db()
                  ->Put(w, s->family(Store::kWbLog), std::string(8, '\1'),
                        "a create not yet sent")
                  .ok());
}

TEST(StoreOpenTest, CorruptStoreRefusesToStartAndIsLeftAlone) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  ASSERT_TRUE(Store::Open(db, &err)) << err;
  // Overwrite every file of the store with garbage.
  ASSERT_EQ(std::system(("for f in " + db +
                         "/*; do head -c 4096 /dev/urandom > \"$f\"; done")
                            .c_str()),
            0);
  EXPECT_FALSE(Store::Open(db, &err));
  EXPECT_EQ(err.find("Cache_Dir: "), 0u) << err;
  EXPECT_NE(err.find(db), std::string::npos) << err;
  EXPECT_NE(err.find("Corruption"), std::string::npos) << err;
  EXPECT_NE(err.find("Cache_Reset_If_Corrupt"), std::string::npos) << err;
  EXPECT_EQ(CountNamed(d.path(), "db."), 0);  // nothing moved
}

TEST(StoreOpenTest, ForeignFormatIsCorruptAndRefused) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  {
    auto s = Store::Open(db, &err);
    ASSERT_TRUE(s) << err;
    ASSERT_TRUE(s->PutMeta("format", "someone-else", true));
  }
  EXPECT_FALSE(Store::Open(db, &err));
  EXPECT_NE(err.find("unknown store format"), std::string::npos) << err;
  EXPECT_EQ(CountNamed(d.path(), "db."), 0);
}

// Allowed by Cache_Reset_If_Corrupt: moved aside, never deleted, and the
// unflushed data it held is said and counted.
TEST(StoreOpenTest, CorruptStoreWithUnflushedDataMovedAsideOnlyWhenAllowed) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  uint64_t first;
  {
    auto s = Store::Open(db, &err);
    ASSERT_TRUE(s) << err;
    first = s->incarnation();
    PutLogRecord(s.get());
    ASSERT_TRUE(s->PutMeta("format", "someone-else", true));
  }
  metrics::Metrics m;
  StoreOptions o;
  o.reset_if_corrupt = true;
  o.metrics = m.ForExport(4);
  auto s = Store::Open(db, o, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_NE(s->incarnation(), first);  // a new, empty store
  EXPECT_FALSE(s->CountUnflushed().any());
  EXPECT_EQ(CountNamed(d.path(), "db.corrupt-"), 1);
  EXPECT_EQ(
      Value(m, "nache_cache_store_moved_aside_total",
            {{"export", "4"}, {"reason", "corrupt"}, {"unflushed", "yes"}}),
      1);
}

TEST(StoreOpenTest, UnreadableCorruptStoreMovedAsideCountsUnknown) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  ASSERT_TRUE(Store::Open(db, &err)) << err;
  ASSERT_EQ(std::system(("for f in " + db +
                         "/*; do head -c 4096 /dev/urandom > \"$f\"; done")
                            .c_str()),
            0);
  metrics::Metrics m;
  StoreOptions o;
  o.reset_if_corrupt = true;
  o.metrics = m.ForExport(5);
  ASSERT_TRUE(Store::Open(db, o, &err)) << err;
  EXPECT_EQ(CountNamed(d.path(), "db.corrupt-"), 1);
  EXPECT_EQ(
      Value(m, "nache_cache_store_moved_aside_total",
            {{"export", "5"}, {"reason", "corrupt"}, {"unflushed", "unknown"}}),
      1);
}

// Two exports (or two daemons) on one Cache_Dir: the lock refuses the
// second, and the first one's store stays where it is.
TEST(StoreOpenTest, StoreInUseIsRefusedNotMovedAside) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  auto first = Store::Open(db, &err);
  ASSERT_TRUE(first) << err;
  EXPECT_FALSE(Store::Open(db, &err));  // this process holds it
  EXPECT_NE(err.find("is in use"), std::string::npos) << err;
  EXPECT_NE(err.find(db), std::string::npos) << err;
  EXPECT_EQ(CountNamed(d.path(), "db."), 0);
  EXPECT_TRUE(first->PutMeta("still", "mine", true));
  first.reset();

  // Another daemon: a process holding RocksDB's lock on the store.
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open((db + "/LOCK").c_str(), O_RDWR);
    struct flock l = {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    char c = fd >= 0 && fcntl(fd, F_SETLK, &l) == 0 ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    if (read(done[0], &c, 1) < 0) _exit(1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  EXPECT_FALSE(Store::Open(db, &err));
  EXPECT_NE(err.find("is in use"), std::string::npos) << err;
  EXPECT_EQ(CountNamed(d.path(), "db."), 0);
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status;
  waitpid(pid, &status, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
  auto again = Store::Open(db, &err);  // the same store, untouched
  ASSERT_TRUE(again) << err;
  std::string v;
  EXPECT_TRUE(again->GetMeta("still", &v));
}

// A passing error (here: out of file descriptors) is not a reason to
// discard anything.
TEST(StoreOpenTest, OtherOpenErrorsRefuseAndLeaveTheStore) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  {
    auto s = Store::Open(db, &err);
    ASSERT_TRUE(s) << err;
    PutLogRecord(s.get());
  }
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  struct rlimit low = saved;
  low.rlim_cur = 3;  // no descriptor left to open
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto s = Store::Open(db, &err);
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_FALSE(s);
  s.reset();
  EXPECT_EQ(err.find("Cache_Dir: cannot open the store in " + db), 0u) << err;
  EXPECT_EQ(CountNamed(d.path(), "db."), 0);
  s = Store::Open(db, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->CountUnflushed().log_records, 1u);
}

TEST(StoreUpstreamTest, IdentityIsRecordedAndAChangeRefusedNamingBoth) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  ASSERT_TRUE(Store::Open(db, Upstream("10.0.0.1", 2049, "/export"), &err))
      << err;
  ASSERT_TRUE(Store::Open(db, Upstream("10.0.0.1", 2049, "/export"), &err))
      << err;
  EXPECT_FALSE(Store::Open(db, Upstream("10.0.0.2", 2049, "/export"), &err));
  EXPECT_NE(err.find("10.0.0.1:2049/export"), std::string::npos) << err;
  EXPECT_NE(err.find("10.0.0.2:2049/export"), std::string::npos) << err;
  EXPECT_NE(err.find("Upstream_Server changed"), std::string::npos) << err;
  EXPECT_NE(err.find("Cache_Reset_On_Upstream_Change"), std::string::npos);
  EXPECT_FALSE(Store::Open(db, Upstream("10.0.0.1", 2049, "/other"), &err));
  EXPECT_NE(err.find("Upstream_Path changed"), std::string::npos) << err;
  EXPECT_FALSE(Store::Open(db, Upstream("10.0.0.1", 3049, "/export"), &err));
  EXPECT_NE(err.find("Upstream_Port changed"), std::string::npos) << err;
  EXPECT_EQ(CountNamed(d.path(), "db."), 0);
}

TEST(StoreUpstreamTest, StoreFromBeforeIdentitiesAdoptsTheCurrentOne) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  uint64_t id;
  {
    auto s = Store::Open(db, &err);  // records no identity
    ASSERT_TRUE(s) << err;
    id = s->incarnation();
  }
  auto s = Store::Open(db, Upstream("srv", 2049, "/a"), &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->incarnation(), id);  // the same store
  s.reset();
  EXPECT_FALSE(Store::Open(db, Upstream("srv", 2049, "/b"), &err));
}

// Allowed by Cache_Reset_On_Upstream_Change: the old store moves aside with
// its unflushed data intact, and nache starts empty.
TEST(StoreUpstreamTest, ResetOnChangeMovesTheOldStoreAsideIntact) {
  TempDir d;
  const std::string db = d.path() + "/db";
  std::string err;
  {
    auto s = Store::Open(db, Upstream("a", 2049, "/x"), &err);
    ASSERT_TRUE(s) << err;
    PutLogRecord(s.get());
  }
  metrics::Metrics m;
  StoreOptions o = Upstream("b", 2049, "/x");
  o.reset_on_upstream_change = true;
  o.metrics = m.ForExport(6);
  auto s = Store::Open(db, o, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_FALSE(s->CountUnflushed().any());
  ASSERT_EQ(CountNamed(d.path(), "db.upstream-changed-"), 1);
  EXPECT_EQ(Value(m, "nache_cache_store_moved_aside_total",
                  {{"export", "6"},
                   {"reason", "upstream_changed"},
                   {"unflushed", "yes"}}),
            1);
  s.reset();
  // The moved store still opens for its own upstream, data intact.
  std::string aside = d.path() + "/" + [&] {
    std::string cmd = "ls " + d.path() + " | grep upstream-changed";
    FILE *p = popen(cmd.c_str(), "r");
    char buf[256] = {};
    if (fgets(buf, sizeof(buf), p) == nullptr) buf[0] = 0;
    pclose(p);
    std::string n(buf);
    while (!n.empty() && n.back() == '\n') n.pop_back();
    return n;
  }();
  auto old = Store::Open(aside, Upstream("a", 2049, "/x"), &err);
  ASSERT_TRUE(old) << err;
  EXPECT_EQ(old->CountUnflushed().log_records, 1u);
}

// The store's reading of the cache's records: what a real cache leaves
// dirty is counted.
TEST(StoreUnflushedTest, CountsWhatTheCacheLeavesDirty) {
  TempDir d;
  std::string err;
  auto s = Store::Open(d.path() + "/db", &err);
  ASSERT_TRUE(s) << err;
  CacheOptions co;
  co.size_bytes = 1 << 20;
  co.block_size = 4096;
  co.attr_timeout_ms = 60000;
  Cache cache(s.get(), co, nullptr);
  cache.Validated(1, testing_util::FileAttrs(1, 0));
  cache.Validated(2, testing_util::FileAttrs(1, 0));
  uint64_t need;
  std::string data(6000, 'x');  // two blocks
  ASSERT_TRUE(cache.LocalWrite(1, 0, data.data(), data.size(), &need));
  upstream::Attrs set;
  set.mask = upstream::kAttrMode;
  set.mode = 0600;
  ASSERT_TRUE(cache.LocalSetattr(2, set));
  UnflushedCount n = s->CountUnflushed();
  EXPECT_EQ(n.dirty_blocks, 2u);
  EXPECT_EQ(n.pending_attrs, 1u);  // file 2's mode
  EXPECT_EQ(n.log_records, 0u);
}

// --- a full cache filesystem ------------------------------------------------

// The source name of our tmpfs mounts: "nache-unit-tmpfs-<pid>".
constexpr char kMountSource[] = "nache-unit-tmpfs-";

// Unmounts (and removes) the tmpfs of test processes that died without
// their teardown (a crash): their pid is in the mount's source name.
void SweepDeadMounts() {
  std::ifstream mounts("/proc/mounts");
  std::string source, target, rest;
  while (mounts >> source >> target && std::getline(mounts, rest)) {
    if (source.compare(0, strlen(kMountSource), kMountSource) != 0) continue;
    pid_t pid = pid_t(atol(source.c_str() + strlen(kMountSource)));
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (umount2(target.c_str(), MNT_DETACH) == 0)
      std::system(
          ("rm -rf '" + target.substr(0, target.rfind('/')) + "'").c_str());
  }
}

// A small tmpfs of its own, unmounted (and removed) however the test ends:
// by its teardown, or by the next run's sweep when the process crashed.
// Needs root (mount); CI runs as root.
class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u)
        << "needs root to mount a tmpfs (make test runs as root)";
    SweepDeadMounts();
    mnt_ = dir_.path() + "/mnt";
    ASSERT_EQ(mkdir(mnt_.c_str(), 0700), 0);
    std::string source = kMountSource + std::to_string(getpid());
    ASSERT_EQ(
        mount(source.c_str(), mnt_.c_str(), "tmpfs", 0, "size=16m,mode=0700"),
        0)
        << strerror(errno);
    mounted_ = true;
    db_ = mnt_ + "/db";
  }
  void TearDown() override {
    cache_.reset();
    store_.reset();
    if (mounted_) umount2(mnt_.c_str(), MNT_DETACH);
  }
  void Open() {
    cache_.reset();
    store_.reset();
    std::string err;
    StoreOptions o;
    o.metrics = metrics_.ForExport(9);
    store_ = Store::Open(db_, o, &err);
    ASSERT_TRUE(store_) << err;
    CacheOptions co;
    co.size_bytes = 64 << 20;  // more than the disk: the disk fills first
    co.block_size = kBs;
    co.attr_timeout_ms = 600000;
    cache_.reset(new Cache(store_.get(), co, nullptr));
  }
  // A file of the filesystem taking n bytes (so that deleting it frees
  // them); fills what is left when n is 0.
  void Filler(const std::string &name, size_t n) {
    std::ofstream f(mnt_ + "/" + name, std::ios::binary);
    std::string chunk(1 << 16, 'f');
    for (size_t done = 0; n == 0 || done < n; done += chunk.size())
      if (!f.write(chunk.data(), chunk.size()) || !f.flush()) break;
  }
  void Unfill(const std::string &name) {
    ASSERT_EQ(unlink((mnt_ + "/" + name).c_str()), 0);
  }
  upstream::Attrs FileAttrs(uint64_t size) {
    upstream::Attrs a;
    a.mask = upstream::kAttrsObject;
    a.type = upstream::FileType::kReg;
    a.change = 1;
    a.size = size;
    a.mode = 0644;
    return a;
  }

  static constexpr uint32_t kBs = 65536;
  TempDir dir_;
  std::string mnt_, db_;
  bool mounted_ = false;
  metrics::Metrics metrics_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Cache> cache_;
};

// The handle map writes through the store's path for writes that may meet
// a full disk (as the op log does): a handle that cannot be recorded puts
// the store in the no-space state (the core answers NFS4ERR_NOSPC), and
// once space is freed the next one resumes it. Before, they wrote to
// RocksDB directly: neither noticed, and nothing resumed the store.
TEST_F(FullDiskTest, HandleWritesEnterAndLeaveTheNoSpaceState) {
  Open();
  Filler("reserve", 7 << 20);
  HandleMap handles(store_.get());
  const std::string name(200, 'n');
  Key k = kNoKey;
  int made = 0;
  for (; made < 1000000; made++) {
    k = handles.NewLocal(1, name + std::to_string(made));
    if (k == kNoKey) break;
  }
  ASSERT_EQ(k, kNoKey) << "the disk never filled";
  EXPECT_TRUE(store_->no_space());
  Unfill("reserve");
  EXPECT_NE(handles.NewLocal(1, "after"), kNoKey);
  EXPECT_FALSE(store_->no_space());
}

// Objects seen while the disk is full still get keys that work: a LOOKUP
// of a new name must not answer ESTALE (before, the key was handed out and
// its record, never written, was not found). Their records are kept in
// memory and written once space is freed. A key is never handed out twice,
// across a reopen too: once no range of keys can be reserved on disk, the
// keys come from the process's own range.
TEST_F(FullDiskTest, HandlesSeenOnAFullDiskWorkAndKeysAreNeverReused) {
  Open();
  Filler("reserve", 7 << 20);
  std::set<Key> issued;
  {
    HandleMap handles(store_.get());
    const std::string name(200, 'n');
    for (int made = 0; made < 1000000; made++) {
      Key k = handles.NewLocal(1, name + std::to_string(made));
      if (k == kNoKey) break;
      issued.insert(k);
    }
    ASSERT_TRUE(store_->no_space()) << "the disk never filled";
    // More than one range of keys, none of which can be reserved now.
    std::map<Key, std::string> seen;
    for (int i = 0; i < 5000; i++) {
      const std::string fh = "remote-fh-" + std::to_string(i);
      Key k = handles.Intern(fh, 1, "f" + std::to_string(i));
      ASSERT_NE(k, kNoKey);
      ASSERT_TRUE(issued.insert(k).second) << "key " << k << " twice";
      seen[k] = fh;
    }
    size_t volatile_keys = 0;
    for (const auto &kv : seen) {
      HandleRecord r;
      ASSERT_TRUE(handles.Get(kv.first, &r)) << "key " << kv.first;
      EXPECT_EQ(r.fh, kv.second);
      EXPECT_EQ(handles.Find(kv.second), kv.first);
      if (kv.first & HandleMap::kVolatileKeyBit) volatile_keys++;
    }
    EXPECT_GT(volatile_keys, 0u) << "no range left to reserve: volatile keys";
    EXPECT_EQ(handles.Unsaved(), seen.size());
    Unfill("reserve");
    Key after = handles.Intern("remote-fh-after", 1, "after");
    ASSERT_TRUE(issued.insert(after).second);
    EXPECT_EQ(handles.Unsaved(), 0u) << "written once there was room";
  }
  Open();  // a restart
  HandleMap handles(store_.get());
  HandleRecord r;
  EXPECT_TRUE(handles.Get(handles.Find("remote-fh-0"), &r));
  for (int i = 0; i < 5000; i++)
    ASSERT_TRUE(
        issued.insert(handles.Intern("next-fh-" + std::to_string(i), 1, "g"))
            .second)
        << "a key handed out before the restart came again";
}

// Write-back writes on a full disk fail (NoSpace: the core's
// NFS4ERR_NOSPC) and show nothing; what was acknowledged before stays
// readable; once space is freed the next write goes in without a restart;
// after a reopen everything acknowledged is there.
TEST_F(FullDiskTest, WritesFailForSpaceAndResumeWhenSpaceIsFreed) {
  Open();
  // Freed later: enough for RocksDB to flush what it holds in memory.
  Filler("reserve", 7 << 20);
  cache_->Validated(1, FileAttrs(0));
  std::string block(kBs, 'a');
  uint64_t acked = 0, need = UINT64_MAX;
  for (int i = 0; i < 1000; i++) {
    block[0] = char('a' + i % 26);
    if (!cache_->LocalWrite(1, acked, block.data(), kBs, &need)) break;
    acked += kBs;
  }
  ASSERT_GT(acked, 0u);
  ASSERT_LT(acked, 1000u * kBs) << "the disk never filled";
  EXPECT_TRUE(store_->no_space());
  EXPECT_EQ(need, UINT64_MAX);  // the store failed, no block was missing
  EXPECT_EQ(Value(metrics_, "nache_cache_store_no_space", {{"export", "9"}}),
            1);
  // The refused write shows nothing: size and dirty bytes as acknowledged.
  upstream::Attrs a;
  ASSERT_TRUE(cache_->KnownAttrs(1, &a));
  EXPECT_EQ(a.size, acked);
  EXPECT_EQ(cache_->dirty_bytes(), acked);
  // Reads go on, and a fill from the remote is simply not cached.
  std::string got;
  ASSERT_TRUE(cache_->GetBlock(1, 0, &got));
  EXPECT_EQ(got[0], 'a');
  cache_->Validated(2, FileAttrs(kBs));
  EXPECT_FALSE(cache_->PutBlock(2, 0, cache_->Generation(2), block));
  EXPECT_FALSE(cache_->GetBlock(2, 0, &got));
  // More failures while full change nothing.
  EXPECT_FALSE(cache_->LocalWrite(1, acked, block.data(), kBs, &need));

  Unfill("reserve");
  block[0] = 'Z';
  ASSERT_TRUE(cache_->LocalWrite(1, acked, block.data(), kBs, &need));
  acked += kBs;
  EXPECT_FALSE(store_->no_space());
  EXPECT_EQ(Value(metrics_, "nache_cache_store_no_space", {{"export", "9"}}),
            0);

  Open();  // a restart: everything acknowledged is there
  ASSERT_TRUE(cache_->KnownAttrs(1, &a));
  EXPECT_EQ(a.size, acked);
  EXPECT_EQ(cache_->dirty_bytes(), acked);
  for (uint64_t i = 0; i < acked / kBs; i++) {
    ASSERT_TRUE(cache_->GetBlock(1, i, &got)) << "block " << i;
    EXPECT_EQ(got[0], i + 1 == acked / kBs ? 'Z' : char('a' + i % 26));
  }
}

// A start on a full disk refuses cleanly (no abort), leaves the store as it
// is, and the next start after space is freed finds everything.
TEST_F(FullDiskTest, StartOnAFullDiskRefusesWithoutAbortingOrMoving) {
  Open();
  cache_->Validated(1, FileAttrs(0));
  std::string block(kBs, 'q');
  uint64_t need;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, block.data(), kBs, &need));
  cache_.reset();
  store_.reset();
  Filler("all", 0);
  std::string err;
  auto s = Store::Open(db_, &err);
  if (!s) {
    EXPECT_NE(err.find("Cache_Dir: "), std::string::npos) << err;
    EXPECT_NE(err.find(db_), std::string::npos) << err;
    EXPECT_NE(err.find("full"), std::string::npos) << err;
  }
  s.reset();
  EXPECT_EQ(CountNamed(mnt_, "db."), 0);  // nothing moved aside
  Unfill("all");
  Open();
  std::string got;
  ASSERT_TRUE(cache_->GetBlock(1, 0, &got));
  EXPECT_EQ(got, block);
}

}  // namespace
}  // namespace nache
