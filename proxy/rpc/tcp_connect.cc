// See tcp_connect.h.
#include "rpc/tcp_connect.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace nache {
namespace rpc {

namespace {

// Binds fd to a free port below 1024, starting at a varying one (a port
// just given up may still be in TIME_WAIT towards the same server). False
// when we may not (not root, no CAP_NET_BIND_SERVICE) or none is free: the
// kernel then picks an ephemeral port at connect.
bool BindReservedPort(int fd, int family) {
  constexpr int kLow = 600, kHigh = 1023;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int start = kLow + int(ts.tv_nsec % (kHigh - kLow + 1));
  for (int i = 0; i <= kHigh - kLow; i++) {
    int port = kLow + (start - kLow + i) % (kHigh - kLow + 1);
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET6) {
      auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_any;
      a->sin6_port = htons(uint16_t(port));
      len = sizeof(*a);
    } else {
      auto *a = reinterpret_cast<sockaddr_in *>(&ss);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_ANY);
      a->sin_port = htons(uint16_t(port));
      len = sizeof(*a);
    }
    if (bind(fd, reinterpret_cast<sockaddr *>(&ss), len) == 0) return true;
    if (errno != EADDRINUSE) return false;  // EACCES: not allowed at all
  }
  return false;
}

}  // namespace

int StartConnect(const std::string &host, int port, std::string *error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo *res = nullptr;
  int rc =
      getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd =
      socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    freeaddrinfo(res);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // A server that restarted forgot the connection without a word: the
  // first probe of an idle one, kKeepIdleSeconds in, meets its reset, and
  // the reconnection finds the session or client id gone while its grace
  // period still runs (our lease renewal may come too late for a short
  // one). A connection whose probes all go unanswered is closed, and
  // made again when the server answers.
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleSeconds,
             sizeof kKeepIdleSeconds);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalSeconds,
             sizeof kKeepIntervalSeconds);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepProbes, sizeof kKeepProbes);
  BindReservedPort(fd, res->ai_family);
  rc = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    *error = std::string("connect: ") + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

int ConnectResult(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  if (err != 0) return err;
  sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &plen) != 0)
    return errno == ENOTCONN ? EINPROGRESS : errno;
  return 0;
}

}  // namespace rpc
}  // namespace nache
