// The client side of a TCP connection for an RPC transport: a non-blocking
// connect, from a reserved source port when the process may bind one
// (servers exporting with "secure", knfsd's default, refuse others).
#pragma once

#include <string>

namespace nache {
namespace rpc {

// TCP keepalive of the connections made here: the first probe after this
// long idle, then one every kKeepIntervalSeconds, kKeepProbes in all.
constexpr int kKeepIdleSeconds = 5;
constexpr int kKeepIntervalSeconds = 2;
constexpr int kKeepProbes = 3;

// Starts connecting to host (an address, or a name resolved here,
// synchronously) and port. Returns the socket, non-blocking with
// TCP_NODELAY and the keepalive above, its connect possibly still in
// progress (poll it for
// POLLOUT, then ask ConnectResult); or -1, with *error saying why.
int StartConnect(const std::string &host, int port, std::string *error);

// 0 once fd is connected; EINPROGRESS while it is still connecting; else
// the errno the connect failed with.
int ConnectResult(int fd);

}  // namespace rpc
}  // namespace nache
