// nachectl's client of the admin socket. See client.h.
#include "admin/client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "admin/protocol.h"

namespace nache {
namespace admin {

std::string DefaultSocketPath() {
  const char *env = getenv("NACHE_ADMIN_SOCKET");
  return env && *env ? env : kDefaultSocket;
}

ClientOutcome RunRequest(
    const std::string &socket_path, const std::string &request,
    const std::function<void(const std::string &, const std::string &)>
        &on_line,
    std::string *error) {
  sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(a.sun_path)) {
    *error = "socket path too long: " + socket_path;
    return ClientOutcome::kNoDaemon;
  }
  memcpy(a.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return ClientOutcome::kFailed;
  }
  if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
    int e = errno;
    close(fd);
    switch (e) {
      case ENOENT:
        *error = "no nache daemon: " + socket_path +
                 " does not exist (is nache running? a daemon whose "
                 "Admin_Socket is elsewhere needs --socket)";
        break;
      case ECONNREFUSED:
        *error = "no nache daemon is listening on " + socket_path +
                 " (connection refused: the daemon stopped?)";
        break;
      case EACCES:
      case EPERM:
        *error =
            "permission denied on " + socket_path + ": run nachectl as root";
        break;
      default: *error = "cannot connect to " + socket_path + ": " + strerror(e);
    }
    return ClientOutcome::kNoDaemon;
  }
  std::string line = request + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error =
          "cannot send the request to " + socket_path + ": " + strerror(errno);
      close(fd);
      return ClientOutcome::kFailed;
    }
    off += size_t(n);
  }
  std::string buf;
  char chunk[4096];
  for (;;) {
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string tag, text;
      std::string one = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (!ParseAnswerLine(one, &tag, &text)) {
        *error = "unexpected answer from " + socket_path + ": " + one;
        close(fd);
        return ClientOutcome::kFailed;
      }
      on_line(tag, text);
      if (tag == "ok" || tag == "error") {
        close(fd);
        if (tag == "error") *error = text;
        return tag == "ok" ? ClientOutcome::kOk : ClientOutcome::kFailed;
      }
    }
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, size_t(n));
  }
  close(fd);
  *error = "the daemon on " + socket_path +
           " closed the connection before it answered (did it stop?)";
  return ClientOutcome::kFailed;
}

}  // namespace admin
}  // namespace nache
