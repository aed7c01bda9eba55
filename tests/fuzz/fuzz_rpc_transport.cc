// Fuzz target: our RPC transport's receiving side (proxy/rpc/): record
// marking and fragment reassembly, reply matching by XID, reply headers,
// and calls from the peer (served by an NFSv4.1 BackChannel, as on a real
// connection). Input: the byte stream the peer sends. Three of our calls
// are pending; a record whose XID is 0, 1 or 2 is given the XID of that
// call (the fuzzer cannot guess the transport's random XIDs).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "callback/back_channel.h"
#include "rpc/rpc_transport.h"
#include "rpc/xdr.h"

namespace {

using namespace nache;

class NullHandler : public callback::CallbackHandler {
 public:
  void OnContact() override {}
  uint32_t OnRecall(const upstream::StateId &, bool,
                    const upstream::Fh &) override {
    return 0;
  }
  uint32_t OnGetattr(const upstream::Fh &, uint64_t *change,
                     uint64_t *size) override {
    *change = 1;
    *size = 2;
    return 0;
  }
};

void PutU32(std::string *s, size_t at, uint32_t v) {
  (*s)[at] = char(v >> 24);
  (*s)[at + 1] = char(v >> 16);
  (*s)[at + 2] = char(v >> 8);
  (*s)[at + 3] = char(v);
}

uint32_t GetU32(const std::string &s, size_t at) {
  const unsigned char *u = reinterpret_cast<const unsigned char *>(&s[at]);
  return uint32_t(u[0]) << 24 | uint32_t(u[1]) << 16 | uint32_t(u[2]) << 8 |
         u[3];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) abort();
  int done_count[3] = {0, 0, 0};
  {
    NullHandler handler;
    callback::BackChannel back(&handler, 0x40000000);
    rpc::Transport t(sv[0], 1 << 20);
    t.SetCallHandler(
        [&back](const rpc::PeerCall &c, rpc::XdrIn *args,
                std::string *results) { return back.Serve(c, args, results); });
    uint32_t xids[3];
    for (int i = 0; i < 3; i++) {
      xids[i] = t.Call(100003, 4, 1, nullptr, std::string(8, 'a'),
                       [&done_count, i](rpc::ReplyStatus st, rpc::XdrIn *res) {
                         done_count[i]++;
                         if ((st == rpc::ReplyStatus::kOk) != (res != nullptr))
                           abort();
                         if (res != nullptr) {
                           uint32_t v;
                           while (res->U32(&v)) {
                           }
                         }
                       });
    }
    // XIDs 0..2 of first fragments become the pending calls' XIDs.
    std::string in(reinterpret_cast<const char *>(data), size);
    bool record_start = true;
    for (size_t pos = 0; pos + 4 <= in.size();) {
      const uint32_t marker = GetU32(in, pos);
      const size_t len = marker & 0x7fffffffu;
      if (record_start && len >= 4 && pos + 8 <= in.size()) {
        const uint32_t x = GetU32(in, pos + 4);
        if (x < 3) PutU32(&in, pos + 4, xids[x]);
      }
      record_start = (marker & 0x80000000u) != 0;
      if (len > in.size() - pos - 4) break;
      pos += 4 + len;
    }
    // The stream, then the peer's end closes: the transport reads it all.
    size_t off = 0;
    bool alive = true;
    while (alive) {
      if (off < in.size()) {
        ssize_t n = send(sv[1], in.data() + off, in.size() - off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) off += size_t(n);
      }
      if (off == in.size()) shutdown(sv[1], SHUT_WR);
      alive = t.Service(POLLIN | POLLOUT);
      // Drain what the transport sent (calls, replies to peer calls).
      char sink[65536];
      while (recv(sv[1], sink, sizeof sink, MSG_DONTWAIT) > 0) {
      }
      if (off == in.size() && alive) {
        // Everything sent and read; nothing more will come but the EOF,
        // which the next Service sees.
        alive = t.Service(POLLIN);
        if (alive) abort();  // EOF must end the transport
      }
    }
  }  // ~Transport fails what is still pending
  for (int n : done_count)
    if (n != 1) abort();  // each call ends exactly once
  close(sv[1]);
  return 0;
}
