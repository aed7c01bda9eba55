// nachectl's side of the admin socket: connect, send one request line, read
// the answer line by line (protocol.h). Kept out of nachectl's main so that
// unit tests drive it against a real AdminServer.
//
// Thread safety: no shared state.
#pragma once

#include <functional>
#include <string>

namespace nache {
namespace admin {

// The socket nachectl tries without --socket: $NACHE_ADMIN_SOCKET, else
// the packaged daemon's default (the systemd unit's run directory).
constexpr const char *kDefaultSocket = "/run/nache/nache.sock";
std::string DefaultSocketPath();

enum class ClientOutcome {
  kOk,        // the answer ended with ok
  kFailed,    // it ended with error, or without an end
  kNoDaemon,  // nothing to connect to (*error says what was tried)
};

// Sends request (one line, no newline) to the daemon at socket_path and
// calls on_line for each answer line (tag and text, protocol.h) as it
// arrives, the final ok or error included. On kFailed and kNoDaemon,
// *error is a message for a person naming the socket.
ClientOutcome RunRequest(
    const std::string &socket_path, const std::string &request,
    const std::function<void(const std::string &tag, const std::string &text)>
        &on_line,
    std::string *error);

}  // namespace admin
}  // namespace nache
