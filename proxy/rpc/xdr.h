// XDR (RFC 4506) by hand: a writer appending to a string and a bounded
// reader over a buffer. For what libnfs 4.0.0's generated code cannot do:
// ONC RPC headers of our own transport (rpc_transport.h), NFSv4.1
// operations, and callback arguments from a peer we must not trust (every
// length is checked against what is left before anything is read).
//
// Thread safety: none; each object belongs to one thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace nache {
namespace rpc {

class XdrOut {
 public:
  explicit XdrOut(std::string *out) : out_(out) {}
  void U32(uint32_t v) {
    char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    out_->append(b, 4);
  }
  void U64(uint64_t v) {
    U32(uint32_t(v >> 32));
    U32(uint32_t(v));
  }
  void Bool(bool v) { U32(v ? 1 : 0); }
  // opaque[n]: n bytes, padded to 4.
  void Fixed(const void *p, size_t n) {
    out_->append(static_cast<const char *>(p), n);
    out_->append((4 - n % 4) % 4, '\0');
  }
  // opaque<> and string<>: the length, then the bytes, padded.
  void Opaque(const void *p, size_t n) {
    U32(uint32_t(n));
    Fixed(p, n);
  }
  void Opaque(const std::string &s) { Opaque(s.data(), s.size()); }
  // Bytes already in XDR, as they are.
  void Raw(const std::string &s) { out_->append(s); }
  // Where the next byte goes (to patch a count written before the items).
  size_t pos() const { return out_->size(); }
  void PatchU32(size_t at, uint32_t v) {
    char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    out_->replace(at, 4, b, 4);
  }

 private:
  std::string *out_;  // appended to; not owned
};

class XdrIn {
 public:
  XdrIn(const char *p, size_t n) : p_(p), left_(n) {}
  bool U32(uint32_t *v) {
    if (left_ < 4) return false;
    const unsigned char *u = reinterpret_cast<const unsigned char *>(p_);
    *v = uint32_t(u[0]) << 24 | uint32_t(u[1]) << 16 | uint32_t(u[2]) << 8 |
         u[3];
    p_ += 4;
    left_ -= 4;
    return true;
  }
  bool U64(uint64_t *v) {
    uint32_t hi, lo;
    if (!U32(&hi) || !U32(&lo)) return false;
    *v = uint64_t(hi) << 32 | lo;
    return true;
  }
  bool Bool(bool *v) {
    uint32_t u;
    if (!U32(&u) || u > 1) return false;
    *v = u == 1;
    return true;
  }
  // opaque[n] into out.
  bool Fixed(void *out, size_t n) {
    const char *p;
    if (!Skip(n, &p)) return false;
    memcpy(out, p, n);
    return true;
  }
  // opaque<max>: *data points into the buffer (valid while it is).
  bool Opaque(const char **data, uint32_t *len, uint32_t max) {
    return U32(len) && *len <= max && Skip(*len, data);
  }
  bool Opaque(std::string *out, uint32_t max) {
    const char *d;
    uint32_t n;
    if (!Opaque(&d, &n, max)) return false;
    out->assign(d, n);
    return true;
  }
  // Steps over n bytes and their padding; *at: where they start.
  bool Skip(size_t n, const char **at = nullptr) {
    const size_t padded = n + (4 - n % 4) % 4;
    if (n > left_ || padded > left_) return false;
    if (at) *at = p_;
    p_ += padded;
    left_ -= padded;
    return true;
  }
  const char *pos() const { return p_; }
  size_t left() const { return left_; }

 private:
  const char *p_;  // next byte
  size_t left_;    // bytes left
};

}  // namespace rpc
}  // namespace nache
