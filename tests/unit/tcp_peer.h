// A peer the unit tests play by hand on loopback TCP: a listener whose
// accepted connection the test reads and writes record by record.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "rpc/xdr.h"

namespace nache {

// A socket listening on a free port of 127.0.0.1 (backlog: how many
// connections the kernel completes unaccepted); sets *port.
inline int ListenOnLoopback(int backlog, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr *>(&a), len);
  listen(fd, backlog);
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// A TCP port on 127.0.0.1 that completes handshakes (the kernel backlog)
// but never reads or answers: the server that hangs.
class SilentServer {
 public:
  SilentServer() { fd_ = ListenOnLoopback(16, &port_); }
  ~SilentServer() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A listener on 127.0.0.1 whose accepted connection the test reads and
// writes itself.
class Peer {
 public:
  Peer() { listen_fd_ = ListenOnLoopback(4, &port_); }
  ~Peer() {
    if (fd_ >= 0) close(fd_);
    close(listen_fd_);
  }
  int port() const { return port_; }
  // Takes the next connection (closing the one before); false after 5 s.
  bool Accept() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return false;
    if (fd_ >= 0) close(fd_);
    fd_ = accept(listen_fd_, nullptr, nullptr);
    return fd_ >= 0;
  }
  // One record, all fragments; empty after 5 s or at the end of the stream.
  std::string ReadRecord() {
    std::string rec;
    for (bool last = false; !last;) {
      std::string m = ReadN(4);
      if (m.size() < 4) return "";
      uint32_t marker = 0;
      rpc::XdrIn(m.data(), 4).U32(&marker);
      last = marker & 0x80000000u;
      std::string frag = ReadN(marker & 0x7fffffffu);
      if (frag.size() < (marker & 0x7fffffffu)) return "";
      rec += frag;
    }
    return rec;
  }
  void WriteRecord(const std::string &body) {
    std::string r;
    rpc::XdrOut(&r).U32(0x80000000u | uint32_t(body.size()));
    r += body;
    ASSERT_EQ(write(fd_, r.data(), r.size()), ssize_t(r.size()));
  }

 private:
  std::string ReadN(size_t n) {
    std::string b(n, '\0');
    size_t got = 0;
    while (got < n) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 5000) != 1) break;
      ssize_t r = read(fd_, &b[got], n - got);
      if (r <= 0) break;
      got += size_t(r);
    }
    b.resize(got);
    return b;
  }
  int listen_fd_ = -1;
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace nache
