// nachectl: the administrator's command for a running nache daemon, over
// its admin socket (proxy/admin/protocol.h). Parses the command line,
// sends one request, prints the answer; the daemon does the work and the
// rendering, so nachectl stays as old or new as the daemon it talks to.
//
// Exit status: 0 done; 1 the daemon answered with an error (or stopped
// answering); 2 a usage error; 3 no daemon to talk to.
#include <cerrno>
#include <cstdint>
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
    "  flush [PATH] [--wait] [--timeout SECONDS] [--export ID]\n"
    "                     send write-back data to the remote now (only\n"
    "                     PATH's, when given); --wait: until it is all\n"
    "                     there, showing progress\n"
    "  drain [--no-wait] [--timeout SECONDS]\n"
    "                     flush everything and keep new writes off\n"
    "                     write-back (they go to the remote at once) until\n"
    "                     undrain or a restart; waits until nothing is dirty\n"
    "  undrain            write-back again\n"
    "  warm PATH [--depth N] [--data] [--rate BYTES] [--parallel K] [--wait]\n"
    "                     fetch PATH's tree (metadata; --data: file data too)\n"
    "                     into the cache in the background, N levels deep,\n"
    "                     at most K operations in flight (default 4) and\n"
    "                     BYTES/s of data (K, M, G suffixes); --wait: show\n"
    "                     progress until it ends (^C leaves it running)\n"
    "  warm --cancel      stop the running warm\n"
    "  pin PATH           keep PATH's tree (its objects now) from eviction,\n"
    "                     also across restarts\n"
    "  unpin PATH         end the pin made as PATH\n"
    "  evict PATH [--unpin]\n"
    "                     drop PATH's tree's clean cached data and\n"
    "                     attributes (unflushed and pinned objects stay;\n"
    "                     --unpin: pins inside it end first)\n"
    "\n"
    "PATH is a path inside the export, from its root as clients mount it\n"
    "(/projects/a), not a client's mount point. With several exports,\n"
    "--export ID picks one.\n"
    "\n"
    "The socket: --socket, else $NACHE_ADMIN_SOCKET, else "
    "/run/nache/nache.sock\n"
    "(Admin_Socket in the NACHE block of the daemon's configuration).\n"
    "Exit status: 0 done, 1 failed, 2 usage, 3 no daemon.\n";

// A whole number in [lo, hi].
bool Number(const std::string &s, long lo, long hi, long *out) {
  char *end = nullptr;
  errno = 0;
  long v = strtol(s.c_str(), &end, 10);
  if (s.empty() || !end || *end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Bytes with an optional K, M or G (binary) suffix.
bool Bytes(const std::string &s, uint64_t *out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (s.empty() || !end || end == s.c_str() || errno || s[0] == '-')
    return false;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (*end || v == 0 || v > (1ull << 50) >> shift) return false;
  *out = uint64_t(v) << shift;
  return true;
}

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
  } else if (cmd == "warm") {
    req.command = Command::kWarm;
  } else if (cmd == "pin") {
    req.command = Command::kPin;
  } else if (cmd == "unpin") {
    req.command = Command::kUnpin;
  } else if (cmd == "evict") {
    req.command = Command::kEvict;
  } else if (cmd == "help") {
    fputs(kUsage, stdout);
    return 0;
  } else {
    return Usage("unknown command " + cmd);
  }
  const bool on_path =
      req.command == Command::kFlush || req.command == Command::kWarm ||
      req.command == Command::kPin || req.command == Command::kUnpin ||
      req.command == Command::kEvict;
  const bool warm = req.command == Command::kWarm;
  for (; i < args.size(); i++) {
    const std::string &a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--json" && req.command == Command::kStatus) {
      req.json = true;
    } else if (a == "--wait" && (req.command == Command::kFlush || warm)) {
      req.wait = true;
    } else if (on_path && !a.empty() && a.compare(0, 2, "--") != 0 &&
               req.path.empty()) {
      // Inside the export, from its root: "projects/a" is "/projects/a".
      req.path = a[0] == '/' ? a : "/" + a;
    } else if (on_path && a == "--export" && has_value) {
      long v;
      if (!Number(args[++i], 0, 65535, &v))
        return Usage("--export takes an export id, 0..65535");
      req.export_id = v;
    } else if (warm && a == "--depth" && has_value) {
      long v;
      if (!Number(args[++i], 0, 1000000, &v))
        return Usage("--depth takes a number of levels, 0..1000000");
      req.depth = int(v);
    } else if (warm && a == "--data") {
      req.data = true;
    } else if (warm && a == "--cancel") {
      req.cancel = true;
    } else if (warm && a == "--parallel" && has_value) {
      long v;
      if (!Number(args[++i], 1, 64, &v)) return Usage("--parallel takes 1..64");
      req.parallel = int(v);
    } else if (warm && a == "--rate" && has_value) {
      if (!Bytes(args[++i], &req.rate))
        return Usage(
            "--rate takes bytes per second (K, M, G: KiB, MiB, "
            "GiB)");
    } else if (req.command == Command::kEvict && a == "--unpin") {
      req.unpin = true;
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
  if (req.cancel && (!req.path.empty() || req.wait || req.data ||
                     req.depth >= 0 || req.rate || req.parallel))
    return Usage("warm --cancel takes no path or other option");
  if (on_path && req.command != Command::kFlush && !req.cancel &&
      req.path.empty())
    return Usage(cmd + " needs a PATH inside the export");

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
    case ClientOutcome::kOk: return 0;
    case ClientOutcome::kNoDaemon:
      fprintf(stderr, "nachectl: %s\n", error.c_str());
      return 3;
    case ClientOutcome::kFailed: break;
  }
  fprintf(stderr, "nachectl: %s\n", error.c_str());
  return 1;
}
