// A fake directory for the owner-name mapper (upstream/idmap.h): users
// alice (1000) and bob (2000), group staff (3000), all at example.org;
// it counts the questions it gets and how many run at once.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "upstream/idmap.h"

namespace nache {
namespace testing_util {

// A directory of two users and a group, counting the questions it gets.
class FakeBackend : public upstream::IdmapBackend {
 public:
  FakeBackend() {
    users_["alice@example.org"] = 1000;
    users_["bob@example.org"] = 2000;
    groups_["staff@example.org"] = 3000;
  }
  bool NameToId(upstream::IdKind kind, const std::string &name,
                uint32_t *id) override {
    Enter();
    const auto &m = kind == upstream::IdKind::kUser ? users_ : groups_;
    auto it = m.find(name);
    bool found = it != m.end();
    if (found) *id = it->second;
    Leave();
    return found;
  }
  bool IdToName(upstream::IdKind kind, uint32_t id,
                std::string *name) override {
    Enter();
    bool found = false;
    for (const auto &kv : kind == upstream::IdKind::kUser ? users_ : groups_)
      if (kv.second == id) {
        *name = kv.first;
        found = true;
      }
    Leave();
    return found;
  }

  std::atomic<int> calls{0};
  std::atomic<int> inside{0}, most_inside{0};  // calls under way at once
  // When set, each call runs it first (a slow NSS lookup, under test
  // control).
  std::function<void()> during;

 private:
  void Enter() {
    calls++;
    int now = ++inside;
    int seen = most_inside.load();
    while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
    }
    if (during) during();
  }
  void Leave() { inside--; }
  std::map<std::string, uint32_t> users_, groups_;
};

// A mapper over a FakeBackend, with the default cache options.
inline std::unique_ptr<upstream::IdMapper> NewFakeMapper() {
  return std::unique_ptr<upstream::IdMapper>(new upstream::IdMapper(
      std::unique_ptr<upstream::IdmapBackend>(new FakeBackend()),
      upstream::IdMapper::Options()));
}

}  // namespace testing_util
}  // namespace nache
