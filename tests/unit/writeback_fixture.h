// What the unit tests of write-back's components share: a real store,
// cache and handle map in a test's directory, and an object's attributes
// as the remote gives them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cache/cache.h"
#include "handles/handle_map.h"
#include "store/store.h"
#include "upstream/types.h"
#include "writeback/writeback.h"

namespace nache {
namespace testing_util {

// Opens the store in dir/db (made when new) with a 1 MiB cache of 4 KiB
// blocks, a 60 s attribute window, and the handle map. Use under
// ASSERT_NO_FATAL_FAILURE.
inline void OpenWriteBackStore(const std::string &dir,
                               std::unique_ptr<Store> *store,
                               std::unique_ptr<Cache> *cache,
                               std::unique_ptr<HandleMap> *handles) {
  std::string err;
  *store = Store::Open(dir + "/db", &err);
  ASSERT_TRUE(*store) << err;
  CacheOptions o;
  o.size_bytes = 1 << 20;
  o.block_size = 4096;
  o.attr_timeout_ms = 60000;
  cache->reset(new Cache(store->get(), o, nullptr));
  handles->reset(new HandleMap(store->get()));
}

// The attributes of an object the remote has: empty, mode 0777 (a
// directory, two links) or 0644, fileid key, change attribute change.
inline upstream::Attrs ObjectAttrs(Key key, upstream::FileType type,
                                   uint64_t change) {
  upstream::Attrs a;
  a.mask = upstream::kAttrsObject;
  a.type = type;
  a.mode = type == upstream::FileType::kDir ? 0777 : 0644;
  a.nlink = type == upstream::FileType::kDir ? 2 : 1;
  a.fileid = key;
  a.change = change;
  a.size = 0;
  return a;
}

// WriteBack::Host answered from a cache, as the core's own does: the
// base of the tests' fake cores (set cache before use).
class CacheWriteBackHost : public WriteBack::Host {
 public:
  bool IsDirty(Key key) override { return cache->IsDirty(key); }
  bool KnownAttrs(Key key, upstream::Attrs *attrs) override {
    return cache->KnownAttrs(key, attrs);
  }

  Cache *cache = nullptr;
};

}  // namespace testing_util
}  // namespace nache
