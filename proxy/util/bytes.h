// Fixed-width big-endian integers (keys that sort in numeric order, and
// records with a stable layout) and CRC-32C, for the store's records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nache {

inline void PutBE64(std::string *s, uint64_t v) {
  for (int i = 7; i >= 0; i--) s->push_back(char((v >> (i * 8)) & 0xff));
}
inline uint64_t GetBE64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | uint8_t(p[i]);
  return v;
}
inline void PutBE32(std::string *s, uint32_t v) {
  for (int i = 3; i >= 0; i--) s->push_back(char((v >> (i * 8)) & 0xff));
}
inline uint32_t GetBE32(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = (v << 8) | uint8_t(p[i]);
  return v;
}

// CRC-32C (Castagnoli) of n bytes, continuing from crc (0 to start).
uint32_t Crc32c(const char *p, size_t n, uint32_t crc = 0);

}  // namespace nache
