// Attributes of a plain file (mode 0644) as the remote would report them,
// for tests that put files into a cache.
#pragma once

#include <cstdint>

#include "upstream/types.h"

namespace nache {
namespace testing_util {

inline upstream::Attrs FileAttrs(uint64_t change, uint64_t size) {
  upstream::Attrs a;
  a.mask = upstream::kAttrsObject;
  a.type = upstream::FileType::kReg;
  a.change = change;
  a.size = size;
  a.mode = 0644;
  return a;
}

}  // namespace testing_util
}  // namespace nache
