// nachectl: the administrator's command for a running nache daemon, over
// its admin socket (proxy/admin/protocol.h). Parses the command line,
// sends one request, prints the answer; the daemon does the work and the
// rendering, so nachectl stays as old or new as the daemon it talks to.
//
// Exit status: 0 done; 1 the daemon answered with an error (or stopped
// answering); 2 a usage error; 3 no daemon to talk to.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "admin/client.h"
#include "admin/protocol.h"

namespace {

using nache::admin::ClientOutcome;
using nache::admin::Command;
using nache::admin::Request;

const char kUsage[] =
    "usage: nachectl [--socket PATH] COMMAND [OPTIONS]\n"
    "\n"
    "  status [--json]    upstream, cache, delegations, write-back, errors\n"
    "                     per export\n"
    "  stats              every counter of /metrics, for a person\n"
    "  flush [--wait] [--timeout SECONDS]\n"
    "                     send write-back data to the remote now; --wait:\n"
    "                     until nothing is dirty, showing progress\n"
    "  drain [--no-wait] [--timeout SECONDS]\n"
    "                     flush everything and keep new writes off\n"
    "                     write-back (they go to the remote at once) until\n"
    "                     undrain or a restart; waits until nothing is dirty\n"
    "  undrain            write-back again\n"
    "\n"
    "The socket: --socket, else $NACHE_ADMIN_SOCKET, else "
    "/run/nache/nache.sock\n"
    "(Admin_Socket in the NACHE block of the daemon's configuration).\n"
    "Exit status: 0 done, 1 failed, 2 usage, 3 no daemon.\n";

int Usage(const std::string &why) {
  if (!why.empty()) fprintf(stderr, "nachectl: %s\n", why.c_str());
  fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  std::string socket_path = nache::admin::DefaultSocketPath();
  std::vector<std::string> args(argv + 1, argv + argc);
  size_t i = 0;
  for (; i < args.size() && args[i].compare(0, 2, "--") == 0; i++) {
    if (args[i] == "--help") {
      fputs(kUsage, stdout);
      return 0;
    }
    if (args[i] == "--socket" && i + 1 < args.size()) {
      socket_path = args[++i];
    } else if (args[i].compare(0, 9, "--socket=") == 0) {
      socket_path = args[i].substr(9);
    } else {
      return Usage("unknown option " + args[i]);
    }
  }
  if (i >= args.size()) return Usage("");
  const std::string cmd = args[i++];
  Request req;
  if (cmd == "status") {
    req.command = Command::kStatus;
  } else if (cmd == "stats") {
    req.command = Command::kStats;
  } else if (cmd == "flush") {
    req.command = Command::kFlush;
  } else if (cmd == "drain") {
    req.command = Command::kDrain;
    req.wait = true;
  } else if (cmd == "undrain") {
    req.command = Command::kUndrain;
  } else if (cmd == "help") {
    fputs(kUsage, stdout);
    return 0;
  } else {
    return Usage("unknown command " + cmd);
  }
  for (; i < args.size(); i++) {
    const std::string &a = args[i];
    if (a == "--json" && req.command == Command::kStatus) {
      req.json = true;
    } else if (a == "--wait" && req.command == Command::kFlush) {
      req.wait = true;
    } else if (a == "--no-wait" && req.command == Command::kDrain) {
      req.wait = false;
    } else if (a == "--timeout" && i + 1 < args.size() &&
               (req.command == Command::kFlush ||
                req.command == Command::kDrain)) {
      char *end = nullptr;
      long v = strtol(args[++i].c_str(), &end, 10);
      if (!end || *end || v < 1 || v > 86400)
        return Usage("--timeout takes whole seconds, 1..86400");
      req.timeout_s = int(v);
    } else {
      return Usage("unexpected " + a + " for " + cmd);
    }
  }
  if (req.timeout_s && !req.wait)
    return Usage("--timeout needs waiting (flush --wait, or drain)");

  std::string error;
  ClientOutcome out = nache::admin::RunRequest(
      socket_path, nache::admin::FormatRequest(req),
      [](const std::string &tag, const std::string &text) {
        if (tag == "data" || tag == "progress" ||
            (tag == "ok" && !text.empty()))
          printf("%s\n", text.c_str());
        fflush(stdout);  // progress as it comes
      },
      &error);
  switch (out) {
    case ClientOutcome::kOk:
      return 0;
    case ClientOutcome::kNoDaemon:
      fprintf(stderr, "nachectl: %s\n", error.c_str());
      return 3;
    case ClientOutcome::kFailed:
      break;
  }
  fprintf(stderr, "nachectl: %s\n", error.c_str());
  return 1;
}
