// nachectl's work on a path, in the core (core_admin.cc, core/warm.h) with
// the scripted upstream: warm fetches every object's attributes and, with
// data, every file's blocks, to the depth asked, counting what the remote
// refuses as skipped; it stops rather than evict what it fetched; pins
// keep data from the size bound, also across a restart, and are refused
// beyond their share; evict drops clean state and keeps dirty data (which
// still flushes right); flush PATH sends only that subtree. Then the admin
// server in front of a real core: warm --wait streams progress.
#include "admin/admin_server.h"
#include "admin/client.h"
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

using admin::WarmProgress;
using admin::WarmRequest;

class AdminPathTest : public CoreDelegationsTest {
 protected:
  void SetUp() override {
    CoreDelegationsTest::SetUp();
    up_->readdir = true;
  }
  // A small tree: d/a, d/b, d/sub/c, d/sub/deep/e (sizes in blocks of the
  // fixture's 4 KiB: 2.5, 1, 3, 0.25).
  void MakeTree() {
    up_->AddFile("d/a", Bytes('a', 10000));
    up_->AddFile("d/b", Bytes('b', 4096));
    up_->AddFile("d/sub/c", Bytes('c', 12288));
    up_->AddFile("d/sub/deep/e", Bytes('e', 1000));
  }
  static std::string Bytes(char c, size_t n) { return std::string(n, c); }
  // Starts a core with cache_bytes of cache (write-back when asked).
  void StartWith(uint64_t cache_bytes, bool write_back = false) {
    Start(DelegationType::kNone, [=](CoreConfig *cfg) {
      cfg->cache.size_bytes = cache_bytes;
      cfg->readahead_max = 0;  // reads fetch only what they ask
      if (write_back) {
        cfg->write_back = true;
        cfg->single_writer = true;
        cfg->flush_age_ms = 3600 * 1000;  // only when asked
      }
    });
  }
  // Runs a warm to its end; its last progress.
  WarmProgress WarmAndWait(const WarmRequest &req) {
    std::string err;
    EXPECT_TRUE(core_->AdminStartWarm(req, &err)) << err;
    EXPECT_TRUE(
        cb_client::WaitFor([&] { return !core_->AdminWarm().running; }));
    return core_->AdminWarm();
  }
  // The key of path (from the root), looked up as root.
  Key KeyOf(const std::string &path) {
    std::string p = path, err;
    Key k = kNoKey;
    Attrs a;
    EXPECT_TRUE(core_->AdminResolve(&p, &k, &a, &err)) << err;
    return k;
  }
  // Reads all of key through the core as a client would (no open); its
  // bytes.
  std::string ReadAll(Key key) {
    std::string out;
    char buf[65536];
    for (uint64_t off = 0;;) {
      size_t n = 0;
      bool eof = false;
      EXPECT_EQ(core_->Read(cr_, key, nullptr, off, sizeof(buf), buf, &n, &eof),
                0u);
      out.append(buf, n);
      off += n;
      if (eof || n == 0) break;
    }
    return out;
  }
  // Whether every block of key (size bytes) is in the cache.
  bool AllCached(Key key, uint64_t size) {
    for (uint64_t i = 0; i * 4096 < size; i++)
      if (!core_->cache()->HasBlock(key, i)) return false;
    return true;
  }
};

TEST_F(AdminPathTest, WarmFetchesEveryFilesAttributesAndData) {
  MakeTree();
  StartWith(16 << 20);
  WarmRequest req;
  req.path = "d/";  // normalised to /d
  req.data = true;
  WarmProgress w = WarmAndWait(req);
  EXPECT_TRUE(w.ok) << w.outcome;
  EXPECT_EQ(w.request.path, "/d");
  EXPECT_EQ(w.dirs, 3u);  // d, sub, deep
  EXPECT_EQ(w.files, 4u);
  EXPECT_EQ(w.bytes_fetched, 10000u + 4096 + 12288 + 1000);
  EXPECT_EQ(w.skipped, 0u);
  // Attributes of every object are cached, and reading every file now
  // costs no READ.
  const int reads = up_->Count("READ");
  for (const char *p : {"/d/a", "/d/b", "/d/sub/c", "/d/sub/deep/e"}) {
    Key k = KeyOf(p);
    Attrs a;
    EXPECT_TRUE(core_->cache()->KnownAttrs(k, &a)) << p;
    EXPECT_EQ(ReadAll(k), up_->Data(std::string(p).substr(1))) << p;
  }
  EXPECT_EQ(up_->Count("READ"), reads) << "a warmed file was read again";
  // A second warm finds it all cached.
  w = WarmAndWait(req);
  EXPECT_TRUE(w.ok);
  EXPECT_EQ(w.bytes_fetched, 0u);
  EXPECT_EQ(w.bytes_cached, 10000u + 4096 + 12288 + 1000);
  EXPECT_EQ(up_->Count("READ"), reads);
}

TEST_F(AdminPathTest, WarmWithoutDataFetchesOnlyMetadata) {
  MakeTree();
  StartWith(16 << 20);
  WarmRequest req;
  req.path = "/d";
  WarmProgress w = WarmAndWait(req);
  EXPECT_TRUE(w.ok) << w.outcome;
  EXPECT_EQ(w.files, 4u);
  EXPECT_EQ(w.bytes_fetched, 0u);
  EXPECT_EQ(up_->Count("READ"), 0);
  Attrs a;
  EXPECT_TRUE(core_->cache()->KnownAttrs(KeyOf("/d/sub/deep/e"), &a));
}

TEST_F(AdminPathTest, WarmStopsAtTheDepthAsked) {
  MakeTree();
  StartWith(16 << 20);
  WarmRequest req;
  req.path = "/d";
  req.data = true;
  req.depth = 1;  // d's entries; sub is reached, not listed
  const int listings = up_->Count("READDIR");  // (the root's, by lookups)
  WarmProgress w = WarmAndWait(req);
  EXPECT_TRUE(w.ok) << w.outcome;
  EXPECT_EQ(w.dirs, 2u);
  EXPECT_EQ(w.files, 2u);
  EXPECT_EQ(w.bytes_fetched, 10000u + 4096);
  EXPECT_EQ(up_->Count("READDIR"), listings + 1) << "only d was listed";
  req.depth = 0;  // d itself
  w = WarmAndWait(req);
  EXPECT_EQ(w.dirs, 1u);
  EXPECT_EQ(w.files, 0u);
}

TEST_F(AdminPathTest, WarmCountsWhatTheRemoteRefusesAsSkipped) {
  MakeTree();
  up_->RefuseReading("d/b");         // a file nobody may read
  up_->RefuseReading("d/sub/deep");  // a directory nobody may list
  StartWith(16 << 20);
  WarmRequest req;
  req.path = "/d";
  req.data = true;
  WarmProgress w = WarmAndWait(req);
  EXPECT_TRUE(w.ok) << "a refusal does not stop the walk: " << w.outcome;
  EXPECT_EQ(w.skipped, 2u);
  EXPECT_NE(w.last_skip.find("permission denied"), std::string::npos)
      << w.last_skip;
  EXPECT_EQ(w.bytes_fetched, 10000u + 12288) << "a and c";
  EXPECT_TRUE(AllCached(KeyOf("/d/a"), 10000));
  EXPECT_TRUE(AllCached(KeyOf("/d/sub/c"), 12288));
}

TEST_F(AdminPathTest, OneWarmAtATimeAndCancelStopsIt) {
  MakeTree();
  StartWith(16 << 20);
  WarmRequest req;
  req.path = "/d";
  req.data = true;
  req.rate = 4096;  // a block a second: it runs for a while
  std::string err;
  ASSERT_TRUE(core_->AdminStartWarm(req, &err)) << err;
  EXPECT_FALSE(core_->AdminStartWarm(req, &err));
  EXPECT_NE(err.find("a warm of /d is running"), std::string::npos) << err;
  EXPECT_TRUE(core_->AdminWarm().running);
  ASSERT_TRUE(core_->AdminCancelWarm(&err)) << err;
  ASSERT_TRUE(cb_client::WaitFor([&] { return !core_->AdminWarm().running; }));
  WarmProgress w = core_->AdminWarm();
  EXPECT_FALSE(w.ok);
  EXPECT_EQ(w.outcome, "cancelled");
  EXPECT_LT(w.bytes_fetched, 10000u + 4096 + 12288 + 1000);
  EXPECT_FALSE(core_->AdminCancelWarm(&err)) << "nothing runs";
}

TEST_F(AdminPathTest, WarmStopsBeforeTheCacheWouldEvictWhatItFetched) {
  MakeTree();
  StartWith(20000);  // a, b and part of c
  WarmRequest req;
  req.path = "/d";
  req.data = true;
  WarmProgress w = WarmAndWait(req);
  EXPECT_FALSE(w.ok);
  EXPECT_EQ(w.outcome.compare(0, 10, "cache full"), 0) << w.outcome;
  EXPECT_EQ(core_->cache()->evictions(), 0u);
  EXPECT_TRUE(AllCached(KeyOf("/d/a"), 10000));
  EXPECT_TRUE(AllCached(KeyOf("/d/b"), 4096));
}

TEST_F(AdminPathTest, PinnedDataSurvivesTheSizeBoundAndARestart) {
  up_->AddFile("p/x", Bytes('x', 12288));
  up_->AddFile("p/y", Bytes('y', 8192));
  for (int i = 0; i < 4; i++)
    up_->AddFile("q/" + std::to_string(i), Bytes(char('0' + i), 8192));
  StartWith(32768);  // eight blocks
  WarmRequest req;
  req.path = "/p";
  req.data = true;
  ASSERT_TRUE(WarmAndWait(req).ok);
  std::string summary, err;
  ASSERT_TRUE(core_->AdminPin("/p", nullptr, &summary, &err)) << err;
  EXPECT_NE(summary.find("pinned /p: 3 objects"), std::string::npos) << summary;
  admin::ExportStatus s = core_->AdminStatus();
  EXPECT_EQ(s.pins, 1u);
  EXPECT_EQ(s.pinned_size, 20480u);
  EXPECT_EQ(s.pinned_cached, 20480u);
  ASSERT_EQ(s.pin_list.size(), 1u);
  EXPECT_EQ(s.pin_list[0].path, "/p");
  // Reading all of q (32 KiB) fills the cache past its bound: only q's
  // own blocks can go.
  auto read_q = [&] {
    for (int i = 0; i < 4; i++)
      EXPECT_EQ(ReadAll(KeyOf("/q/" + std::to_string(i))),
                Bytes(char('0' + i), 8192));
  };
  read_q();
  EXPECT_GT(core_->cache()->evictions(), 0u);
  EXPECT_LE(core_->cache()->bytes(), 32768u);
  EXPECT_TRUE(AllCached(KeyOf("/p/x"), 12288));
  EXPECT_TRUE(AllCached(KeyOf("/p/y"), 8192));
  // The pin outlives the core.
  core_.reset();
  Start(
      DelegationType::kNone,
      [](CoreConfig *cfg) {
        cfg->cache.size_bytes = 32768;
        cfg->readahead_max = 0;
      },
      false);
  s = core_->AdminStatus();
  EXPECT_EQ(s.pins, 1u);
  EXPECT_EQ(s.pinned_objects, 3u);
  const uint64_t evicted = core_->cache()->evictions();
  read_q();
  EXPECT_GT(core_->cache()->evictions(), evicted);
  EXPECT_TRUE(AllCached(KeyOf("/p/x"), 12288));
  EXPECT_TRUE(AllCached(KeyOf("/p/y"), 8192));
  const int reads = up_->Count("READ");
  EXPECT_EQ(ReadAll(KeyOf("/p/x")), Bytes('x', 12288));
  EXPECT_EQ(up_->Count("READ"), reads);
  // Unpinned, its data may go again.
  ASSERT_TRUE(core_->AdminUnpin("/p/", &summary, &err)) << err;
  EXPECT_EQ(core_->AdminStatus().pins, 0u);
  read_q();
  EXPECT_FALSE(AllCached(KeyOf("/p/x"), 12288) &&
               AllCached(KeyOf("/p/y"), 8192));
}

TEST_F(AdminPathTest, PinsBeyondTheirShareOfTheCacheAreRefused) {
  up_->AddFile("big/a", Bytes('a', 20000));
  up_->AddFile("big/b", Bytes('b', 10000));
  up_->AddFile("small/c", Bytes('c', 4096));
  StartWith(32768);  // pins: 29491 bytes at most
  std::string summary, err;
  EXPECT_FALSE(core_->AdminPin("/big", nullptr, &summary, &err));
  EXPECT_NE(err.find("pin of /big refused"), std::string::npos) << err;
  EXPECT_NE(err.find("90% of Cache_Size"), std::string::npos) << err;
  EXPECT_EQ(core_->AdminStatus().pins, 0u);
  ASSERT_TRUE(core_->AdminPin("/small", nullptr, &summary, &err)) << err;
  ASSERT_TRUE(core_->AdminPin("/big/a", nullptr, &summary, &err)) << err;
  EXPECT_FALSE(core_->AdminPin("/big/b", nullptr, &summary, &err))
      << "4096 + 20000 + 10000 is over the share";
  EXPECT_FALSE(core_->AdminPin("/big", nullptr, &summary, &err))
      << "b would go over the share";
  // A part of a pin is not a pin of its own.
  EXPECT_FALSE(core_->AdminUnpin("/small/c", &summary, &err));
  EXPECT_NE(err.find("part of the pin of /small"), std::string::npos) << err;
  EXPECT_FALSE(core_->AdminPin("/nothing", nullptr, &summary, &err));
  EXPECT_NE(err.find("no such file or directory"), std::string::npos) << err;
}

TEST_F(AdminPathTest, EvictDropsCleanDataAndKeepsDirtyData) {
  up_->AddFile("e/clean", Bytes('c', 8192));
  up_->AddFile("e/dirty", Bytes('d', 8192));
  StartWith(16 << 20, true);
  Key clean = KeyOf("/e/clean"), dirty = KeyOf("/e/dirty");
  EXPECT_EQ(ReadAll(clean), Bytes('c', 8192));
  EXPECT_EQ(ReadAll(dirty), Bytes('d', 8192));
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, dirty, nullptr, 100, 5, "LOCAL",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  ASSERT_TRUE(core_->cache()->IsDirty(dirty));
  std::string summary, err;
  ASSERT_TRUE(core_->AdminEvict("/e", false, &summary, &err)) << err;
  EXPECT_NE(summary.find("1 object kept: not yet at the remote"),
            std::string::npos)
      << summary;
  EXPECT_FALSE(core_->cache()->HasBlock(clean, 0));
  Attrs a;
  EXPECT_FALSE(core_->cache()->KnownAttrs(clean, &a));
  EXPECT_TRUE(AllCached(dirty, 8192));
  // The clean file is read from the remote again.
  const int reads = up_->Count("READ");
  EXPECT_EQ(ReadAll(clean), Bytes('c', 8192));
  EXPECT_GT(up_->Count("READ"), reads);
  // The dirty data still flushes right.
  ASSERT_TRUE(core_->AdminFlush(Clock::now() + std::chrono::seconds(10), &err))
      << err;
  std::string want = Bytes('d', 8192);
  want.replace(100, 5, "LOCAL");
  EXPECT_EQ(up_->Data("e/dirty"), want);
}

TEST_F(AdminPathTest, EvictLeavesPinsUnlessToldToUnpin) {
  up_->AddFile("k/f", Bytes('f', 4096));
  StartWith(16 << 20);
  Key f = KeyOf("/k/f");
  EXPECT_EQ(ReadAll(f), Bytes('f', 4096));
  std::string summary, err;
  ASSERT_TRUE(core_->AdminPin("/k", nullptr, &summary, &err)) << err;
  ASSERT_TRUE(core_->AdminEvict("/k", false, &summary, &err)) << err;
  EXPECT_NE(summary.find("kept: pinned"), std::string::npos) << summary;
  EXPECT_TRUE(core_->cache()->HasBlock(f, 0));
  ASSERT_TRUE(core_->AdminEvict("/k", true, &summary, &err)) << err;
  EXPECT_NE(summary.find("unpinned first: /k"), std::string::npos) << summary;
  EXPECT_FALSE(core_->cache()->HasBlock(f, 0));
  EXPECT_EQ(core_->AdminStatus().pins, 0u);
}

TEST_F(AdminPathTest, FlushPathSendsOnlyThatFile) {
  up_->AddFile("w/one", "11111");
  up_->AddFile("w/two", "22222");
  StartWith(16 << 20, true);
  Key one = KeyOf("/w/one"), two = KeyOf("/w/two");
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, one, nullptr, 0, 5, "AAAAA",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  ASSERT_EQ(core_->Write(cr_, two, nullptr, 0, 5, "BBBBB",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  std::vector<Key> objects;
  std::string summary, err;
  ASSERT_TRUE(core_->AdminFlushPath("/w/two", &objects, &summary, &err)) << err;
  EXPECT_EQ(objects, std::vector<Key>{two});
  ASSERT_TRUE(cb_client::WaitFor([&] {
    uint64_t bytes, count;
    core_->AdminDirtyAmong(objects, &bytes, &count);
    return count == 0;
  }));
  EXPECT_EQ(up_->Data("w/two"), "BBBBB");
  EXPECT_EQ(up_->Data("w/one"), "11111") << "flushed with the other";
  EXPECT_TRUE(core_->cache()->IsDirty(one));
  // A subtree: everything dirty below it.
  ASSERT_TRUE(core_->AdminFlushPath("/w", &objects, &summary, &err)) << err;
  EXPECT_EQ(objects.size(), 1u);
  ASSERT_TRUE(
      cb_client::WaitFor([&] { return up_->Data("w/one") == "AAAAA"; }));
}

TEST_F(AdminPathTest, PathsAreInsideTheExport) {
  MakeTree();
  StartWith(16 << 20);
  std::string p = "//d/./sub//", err;
  Key k;
  Attrs a;
  ASSERT_TRUE(core_->AdminResolve(&p, &k, &a, &err)) << err;
  EXPECT_EQ(p, "/d/sub");
  p = "/d/../etc";
  EXPECT_FALSE(core_->AdminResolve(&p, &k, &a, &err));
  EXPECT_NE(err.find("'..' is not allowed"), std::string::npos) << err;
  p = "/d/a/x";
  EXPECT_FALSE(core_->AdminResolve(&p, &k, &a, &err));
  EXPECT_NE(err.find("/d/a is not a directory"), std::string::npos) << err;
  p = "/";
  ASSERT_TRUE(core_->AdminResolve(&p, &k, &a, &err)) << err;
}

// The admin server in front of this core (it registers itself in the
// process-wide registry): warm --wait streams progress and ends with the
// summary; pin, evict and unpin answer with theirs.
TEST_F(AdminPathTest, NachectlWarmWaitShowsProgressAndTheSummary) {
  MakeTree();
  StartWith(16 << 20);
  admin::AdminServerOptions o;
  o.socket_path = dir_.path() + "/nache.sock";
  o.registry = &admin::Registry::Global();
  o.progress_every = std::chrono::milliseconds(20);
  std::string err;
  std::unique_ptr<admin::AdminServer> server =
      admin::AdminServer::Start(o, &err);
  ASSERT_TRUE(server) << err;
  auto ask = [&](const std::string &request, std::vector<std::string> *lines) {
    lines->clear();
    return admin::RunRequest(
        o.socket_path, request,
        [&](const std::string &tag, const std::string &text) {
          lines->push_back(tag + " " + text);
        },
        &err);
  };
  std::vector<std::string> lines;
  // Slow enough (a block each 50 ms) for progress to show.
  ASSERT_EQ(ask("warm data rate=81920 wait /d", &lines),
            admin::ClientOutcome::kOk)
      << err;
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0].compare(0, 9, "progress "), 0) << lines[0];
  EXPECT_NE(lines[0].find(" directories, "), std::string::npos) << lines[0];
  EXPECT_NE(lines.back().find("ok warm of /d done in "), std::string::npos)
      << lines.back();
  EXPECT_NE(lines.back().find("3 directories, 4 files, 26.7 KiB fetched"),
            std::string::npos)
      << lines.back();
  ASSERT_EQ(ask("status", &lines), admin::ClientOutcome::kOk) << err;
  std::string all;
  for (const std::string &l : lines) all += l + "\n";
  EXPECT_NE(all.find("warm         /d: done in "), std::string::npos) << all;
  ASSERT_EQ(ask("pin /d/sub", &lines), admin::ClientOutcome::kOk) << err;
  EXPECT_NE(lines.back().find("pinned /d/sub: 4 objects"), std::string::npos)
      << lines.back();
  ASSERT_EQ(ask("status json", &lines), admin::ClientOutcome::kOk) << err;
  all.clear();
  for (const std::string &l : lines) all += l + "\n";
  EXPECT_NE(all.find("\"list\": [{\"path\": \"/d/sub\", \"objects\": 4"),
            std::string::npos)
      << all;
  ASSERT_EQ(ask("evict /d", &lines), admin::ClientOutcome::kOk) << err;
  EXPECT_NE(lines.back().find("kept: pinned"), std::string::npos)
      << lines.back();
  EXPECT_EQ(ask("unpin /d", &lines), admin::ClientOutcome::kFailed);
  EXPECT_NE(err.find("/d is not pinned"), std::string::npos) << err;
  ASSERT_EQ(ask("unpin /d/sub", &lines), admin::ClientOutcome::kOk) << err;
  EXPECT_EQ(ask("warm cancel", &lines), admin::ClientOutcome::kFailed);
  EXPECT_NE(err.find("no warm is running"), std::string::npos) << err;
  EXPECT_EQ(ask("warm export=9 /d", &lines), admin::ClientOutcome::kFailed);
  EXPECT_NE(err.find("no NACHE export 9"), std::string::npos) << err;
}

}  // namespace
}  // namespace coretest
}  // namespace nache
