// Owner names <-> ids (upstream/idmap.h, upstream/owners.h): the mapper's
// cache (answers, absences, its bound), its lock contract (one backend call
// at a time; cache hits never wait for one), libnfsidmap itself with an
// idmapd.conf of the test's own (a name in the domain, an unknown name, an
// unknown domain), and the codec's numeric owners, names, nobody and the
// outbound format (auto learns names from the remote).
#include "upstream/idmap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "fake_idmap.h"
#include "temp_dir.h"
#include "upstream/attrs.h"
#include "upstream/owners.h"

namespace nache {
namespace {

using testing_util::FakeBackend;
using upstream::IdKind;
using upstream::IdMapper;
using upstream::kNobodyId;
using upstream::OwnerCodec;
using upstream::OwnerFormat;
using Clock = std::chrono::steady_clock;

class IdMapperTest : public ::testing::Test {
 protected:
  IdMapper::Options Opts(size_t max_entries = 100) {
    IdMapper::Options o;
    o.max_entries = max_entries;
    o.found_ttl = std::chrono::seconds(600);
    o.missing_ttl = std::chrono::seconds(30);
    o.now = [this] { return now_; };
    return o;
  }
  // The mapper over a FakeBackend the test keeps a pointer to.
  std::unique_ptr<IdMapper> Make(size_t max_entries = 100) {
    backend_ = new FakeBackend();
    return std::unique_ptr<IdMapper>(new IdMapper(
        std::unique_ptr<upstream::IdmapBackend>(backend_), Opts(max_entries)));
  }
  Clock::time_point now_ = Clock::now();
  FakeBackend *backend_ = nullptr;  // owned by the mapper
};

TEST_F(IdMapperTest, NamesAndIdsMapBothWaysAndAreAskedOnce) {
  auto m = Make();
  uint32_t id = 0;
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "alice@example.org", &id));
  EXPECT_EQ(id, 1000u);
  ASSERT_TRUE(m->NameToId(IdKind::kGroup, "staff@example.org", &id));
  EXPECT_EQ(id, 3000u);
  std::string name;
  ASSERT_TRUE(m->IdToName(IdKind::kUser, 2000, &name));
  EXPECT_EQ(name, "bob@example.org");
  // A group is not a user.
  EXPECT_FALSE(m->NameToId(IdKind::kUser, "staff@example.org", &id));
  int asked = backend_->calls;
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(m->NameToId(IdKind::kUser, "alice@example.org", &id));
    ASSERT_TRUE(m->IdToName(IdKind::kUser, 2000, &name));
  }
  EXPECT_EQ(backend_->calls, asked) << "answered from the cache";
  // Until the answer expires.
  now_ += std::chrono::seconds(601);
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "alice@example.org", &id));
  EXPECT_EQ(backend_->calls, asked + 1);
}

TEST_F(IdMapperTest, AnUnknownNameIsRememberedForAShorterTime) {
  auto m = Make();
  uint32_t id = 77;
  EXPECT_FALSE(m->NameToId(IdKind::kUser, "carol@example.org", &id));
  EXPECT_EQ(id, 77u) << "untouched";
  std::string name;
  EXPECT_FALSE(m->IdToName(IdKind::kUser, 4000, &name));
  EXPECT_EQ(backend_->calls, 2);
  now_ += std::chrono::seconds(29);
  EXPECT_FALSE(m->NameToId(IdKind::kUser, "carol@example.org", &id));
  EXPECT_FALSE(m->IdToName(IdKind::kUser, 4000, &name));
  EXPECT_EQ(backend_->calls, 2) << "the absence is cached";
  now_ += std::chrono::seconds(2);
  EXPECT_FALSE(m->NameToId(IdKind::kUser, "carol@example.org", &id));
  EXPECT_EQ(backend_->calls, 3) << "and asked again after missing_ttl";
}

TEST_F(IdMapperTest, TheCacheIsBoundedAndKeepsTheRecentlyUsed) {
  auto m = Make(2);
  uint32_t id;
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "alice@example.org", &id));
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "bob@example.org", &id));
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "alice@example.org", &id));  // used
  ASSERT_TRUE(m->NameToId(IdKind::kGroup, "staff@example.org", &id));
  EXPECT_EQ(m->CachedEntries(), 2u);
  int asked = backend_->calls;
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "alice@example.org", &id));
  EXPECT_EQ(backend_->calls, asked) << "kept: used most recently";
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "bob@example.org", &id));
  EXPECT_EQ(backend_->calls, asked + 1) << "evicted";
  EXPECT_EQ(m->CachedEntries(), 2u);
}

TEST_F(IdMapperTest, BackendCallsAreSerialised) {
  auto m = Make();
  // Each call waits (bounded) for another to enter the backend: without
  // the mapper's lock the second does, at once.
  std::mutex mu;
  std::condition_variable cv;
  backend_->during = [&] {
    std::unique_lock<std::mutex> g(mu);
    cv.notify_all();
    cv.wait_for(g, std::chrono::milliseconds(300),
                [&] { return backend_->inside.load() > 1; });
  };
  uint32_t a = 0, b = 0;
  std::thread t([&] { m->NameToId(IdKind::kUser, "alice@example.org", &a); });
  m->NameToId(IdKind::kUser, "bob@example.org", &b);
  t.join();
  EXPECT_EQ(a, 1000u);
  EXPECT_EQ(b, 2000u);
  EXPECT_EQ(backend_->most_inside.load(), 1);
}

TEST_F(IdMapperTest, ACacheHitNeverWaitsForALookupInProgress) {
  auto m = Make();
  uint32_t id;
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "bob@example.org", &id));
  // A lookup of alice blocks in the backend until a cached lookup of bob
  // has finished meanwhile (or 10 s pass: then the hit waited).
  std::mutex mu;
  std::condition_variable cv;
  bool hit_done = false, in_backend = false;
  backend_->during = [&] {
    std::unique_lock<std::mutex> g(mu);
    in_backend = true;
    cv.notify_all();
    cv.wait_for(g, std::chrono::seconds(10), [&] { return hit_done; });
  };
  std::thread slow([&] {
    uint32_t a;
    m->NameToId(IdKind::kUser, "alice@example.org", &a);
  });
  {
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(
        cv.wait_for(g, std::chrono::seconds(10), [&] { return in_backend; }));
  }
  const auto t0 = Clock::now();
  uint32_t bob = 0;
  ASSERT_TRUE(m->NameToId(IdKind::kUser, "bob@example.org", &bob));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  {
    std::lock_guard<std::mutex> g(mu);
    hit_done = true;
  }
  cv.notify_all();
  slow.join();
  EXPECT_EQ(bob, 2000u);
}

// libnfsidmap itself, with nsswitch and a domain of the test's own: root
// (uid and gid 0) is the one name every machine has.
TEST(LibNfsIdmapTest, NamesInTheDomainMapOthersDoNot) {
  testing_util::TempDir dir;
  const std::string conf = dir.path() + "/idmapd.conf";
  std::ofstream(conf) << "[General]\nDomain = nache.test\n"
                         "[Mapping]\nNobody-User = nobody\n"
                         "Nobody-Group = nogroup\n"
                         "[Translation]\nMethod = nsswitch\n";
  std::string why;
  ASSERT_TRUE(upstream::ConfigureLibNfsIdmap(conf, &why)) << why;
  IdMapper m(upstream::NewLibNfsIdmapBackend(), IdMapper::Options());
  uint32_t id = 77;
  ASSERT_TRUE(m.NameToId(IdKind::kUser, "root@nache.test", &id));
  EXPECT_EQ(id, 0u);
  id = 77;
  ASSERT_TRUE(m.NameToId(IdKind::kGroup, "root@nache.test", &id));
  EXPECT_EQ(id, 0u);
  EXPECT_FALSE(m.NameToId(IdKind::kUser, "no-such-user-nache@nache.test", &id))
      << "unknown name";
  EXPECT_FALSE(m.NameToId(IdKind::kUser, "root@elsewhere.test", &id))
      << "unknown domain";
  EXPECT_FALSE(m.NameToId(IdKind::kUser, "root", &id)) << "no domain";
  std::string name;
  ASSERT_TRUE(m.IdToName(IdKind::kUser, 0, &name));
  EXPECT_EQ(name, "root@nache.test");
  ASSERT_TRUE(m.IdToName(IdKind::kGroup, 0, &name));
  EXPECT_EQ(name, "root@nache.test");
  // Read once per process: another file is refused from now on.
  EXPECT_FALSE(upstream::ConfigureLibNfsIdmap(dir.path() + "/other", &why));
  EXPECT_TRUE(upstream::ConfigureLibNfsIdmap(conf, &why)) << why;
}

class OwnerCodecTest : public IdMapperTest {};

TEST_F(OwnerCodecTest, NumericOwnersNeedNoMapper) {
  auto m = Make();
  OwnerCodec c(OwnerFormat::kAuto, m.get());
  uint32_t id = 0;
  EXPECT_TRUE(c.Decode(IdKind::kUser, "1000", &id));
  EXPECT_EQ(id, 1000u);
  EXPECT_TRUE(c.Decode(IdKind::kGroup, "3000@example.org", &id));
  EXPECT_EQ(id, 3000u);
  EXPECT_TRUE(c.Decode(IdKind::kUser, "65534", &id)) << "nobody, by number";
  EXPECT_EQ(id, kNobodyId);
  EXPECT_EQ(backend_->calls, 0);
  EXPECT_FALSE(c.SendsNames()) << "nothing but numbers seen";
  EXPECT_EQ(c.Encode(IdKind::kUser, 1000), "1000");
}

TEST_F(OwnerCodecTest, NamesMapAndTheUnmappableAreNobody) {
  auto m = Make();
  OwnerCodec c(OwnerFormat::kAuto, m.get());
  uint32_t id = 0;
  EXPECT_TRUE(c.Decode(IdKind::kUser, "alice@example.org", &id));
  EXPECT_EQ(id, 1000u);
  EXPECT_TRUE(c.Decode(IdKind::kGroup, "staff@example.org", &id));
  EXPECT_EQ(id, 3000u);
  for (const char *s : {"carol@example.org", "alice@elsewhere.org", "nobody",
                        "4294967296", "", "@example.org"}) {
    id = 0;
    EXPECT_FALSE(c.Decode(IdKind::kUser, s, &id)) << s;
    EXPECT_EQ(id, kNobodyId) << s;
  }
  // Without a mapper, names are nobody too.
  OwnerCodec numeric(OwnerFormat::kAuto, nullptr);
  EXPECT_FALSE(numeric.Decode(IdKind::kUser, "alice@example.org", &id));
  EXPECT_EQ(id, kNobodyId);
  EXPECT_EQ(numeric.Encode(IdKind::kUser, 1000), "1000");
}

TEST_F(OwnerCodecTest, AutoSendsNamesOnceTheRemoteDoes) {
  auto m = Make();
  OwnerCodec c(OwnerFormat::kAuto, m.get());
  EXPECT_EQ(c.Encode(IdKind::kUser, 1000), "1000");
  uint32_t id;
  c.Decode(IdKind::kUser, "bob@example.org", &id);
  EXPECT_TRUE(c.SendsNames());
  EXPECT_EQ(c.Encode(IdKind::kUser, 1000), "alice@example.org");
  EXPECT_EQ(c.Encode(IdKind::kGroup, 3000), "staff@example.org");
  EXPECT_EQ(c.Encode(IdKind::kUser, 1234), "1234") << "no name: numeric";
}

TEST_F(OwnerCodecTest, AutoSendsNamesOnceTheRemoteRefusesANumber) {
  auto m = Make();
  OwnerCodec c(OwnerFormat::kAuto, m.get());
  OwnerCodec numeric(OwnerFormat::kNumeric, m.get());
  c.NoteOwnerRefused();
  numeric.NoteOwnerRefused();
  EXPECT_EQ(c.Encode(IdKind::kUser, 1000), "alice@example.org");
  EXPECT_EQ(numeric.Encode(IdKind::kUser, 1000), "1000") << "as configured";
}

TEST_F(OwnerCodecTest, NumericAndNamesFormatsAreFixed) {
  auto m = Make();
  OwnerCodec numeric(OwnerFormat::kNumeric, m.get());
  OwnerCodec names(OwnerFormat::kNames, m.get());
  uint32_t id;
  numeric.Decode(IdKind::kUser, "bob@example.org", &id);
  EXPECT_EQ(id, 2000u) << "names coming in map whatever the format";
  EXPECT_EQ(numeric.Encode(IdKind::kUser, 1000), "1000");
  EXPECT_EQ(names.Encode(IdKind::kUser, 1000), "alice@example.org");
  OwnerFormat f;
  EXPECT_TRUE(upstream::ParseOwnerFormat("auto", &f));
  EXPECT_EQ(f, OwnerFormat::kAuto);
  EXPECT_TRUE(upstream::ParseOwnerFormat("names", &f));
  EXPECT_EQ(f, OwnerFormat::kNames);
  EXPECT_TRUE(upstream::ParseOwnerFormat("numeric", &f));
  EXPECT_EQ(f, OwnerFormat::kNumeric);
  EXPECT_FALSE(upstream::ParseOwnerFormat("Names", &f));
  EXPECT_FALSE(upstream::ParseOwnerFormat(nullptr, &f));
}

}  // namespace
}  // namespace nache
