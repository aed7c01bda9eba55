// CRC-32C, table-driven (one byte per step: the log checks records of at
// most a few MiB, once at start-up and once when flushing them).
#include "util/bytes.h"

namespace nache {
namespace {

struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
  }
};

}  // namespace

uint32_t Crc32c(const char *p, size_t n, uint32_t crc) {
  static const Crc32cTable table;
  crc = ~crc;
  for (size_t i = 0; i < n; i++)
    crc = table.t[(crc ^ uint8_t(p[i])) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace nache
