// Fuzz target: the NFSv4.0 callback service (proxy/callback/
// callback_server.cc): our RPC transport's call side (call header,
// credentials) and the CB_COMPOUND decoder behind it, over a real loopback
// TCP connection as the upstream server would call it. Input: one RPC
// record as the peer sends it (call header, credentials, arguments),
// without its record marker. After it a CB_NULL goes on the same
// connection; its reply (or the service closing the connection) says the
// input was dealt with.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "callback/callback_server.h"
#include "rpc/xdr.h"

namespace {

using namespace nache;

constexpr uint32_t kSentinelXid = 0x5e471e1;

class NullHandler : public callback::CallbackHandler {
 public:
  void OnContact() override {}
  uint32_t OnRecall(const upstream::StateId &, bool,
                    const upstream::Fh &fh) override {
    if (fh.size() > upstream::kMaxFhSize) abort();
    return 0;
  }
  uint32_t OnGetattr(const upstream::Fh &fh, uint64_t *change,
                     uint64_t *size) override {
    if (fh.size() > upstream::kMaxFhSize) abort();
    *change = 1;
    *size = 2;
    return 0;
  }
};

NullHandler handler;
std::unique_ptr<callback::CallbackServer> server;
int conn = -1;

int Connect() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(server->port());
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0) abort();
  int err = 0;
  if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
    err = errno;
    if (err == EINTR) {
      // Interrupted by libFuzzer's timer: the connection goes on being
      // made; wait for it and take its outcome.
      pollfd p{fd, POLLOUT, 0};
      while (poll(&p, 1, 10000) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof err;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    fprintf(stderr, "connect to the callback service: %s\n", strerror(err));
    abort();
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool SendAll(int fd, const std::string &b) {
  for (size_t off = 0; off < b.size();) {
    ssize_t n = send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// Reads records until the sentinel's reply; false when the connection
// ended first. A service that answers neither within 10 s is hung.
bool AwaitSentinel(int fd) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string in;
  for (;;) {
    while (in.size() >= 8) {
      rpc::XdrIn m(in.data(), in.size());
      uint32_t marker, xid;
      m.U32(&marker);
      m.U32(&xid);
      const size_t len = marker & 0x7fffffffu;
      if (in.size() < 4 + len) break;
      if (xid == kSentinelXid) return true;
      in.erase(0, 4 + len);
    }
    // libFuzzer's timeout timer (SIGALRM) interrupts poll: EINTR is no
    // hang, so wait again for what is left of the 10 s.
    pollfd p{fd, POLLIN, 0};
    int ready;
    do {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      ready = poll(&p, 1, int(std::max<int64_t>(left.count(), 0)));
    } while (ready < 0 && errno == EINTR);
    if (ready != 1) {
      fprintf(stderr, "callback service hung\n");
      abort();
    }
    char b[65536];
    // Acknowledge at once: the service writes each reply on its own, and
    // Nagle's algorithm on its side would wait for our delayed ACK.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    ssize_t n = recv(fd, b, sizeof b, 0);
    if (n <= 0) return false;
    in.append(b, size_t(n));
  }
}

std::string Record(const std::string &body) {
  std::string r;
  rpc::XdrOut x(&r);
  x.U32(0x80000000u | uint32_t(body.size()));
  r += body;
  return r;
}

std::string CbNull() {
  std::string b;
  rpc::XdrOut x(&b);
  for (uint32_t v : {kSentinelXid, 0u, 2u, 0x40000000u, 1u, 0u, 0u, 0u, 0u, 0u})
    x.U32(v);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  callback::CallbackOptions o;
  o.address = "127.0.0.1";
  std::string err;
  server = callback::CallbackServer::Start(o, &handler, &err);
  if (!server) {
    fprintf(stderr, "callback server: %s\n", err.c_str());
    abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1 << 20)) return 0;
  if (conn < 0) conn = Connect();
  std::string wire =
      Record(std::string(reinterpret_cast<const char *>(data), size)) +
      Record(CbNull());
  if (!SendAll(conn, wire) || !AwaitSentinel(conn)) {
    close(conn);
    conn = -1;
  }
  return 0;
}
