#!/usr/bin/python3
"""Command agent that runs inside every lab UML guest.

Owns: executing shell commands for the host, one command per TCP connection.
Each connection is served by its own thread, so a command stuck in the kernel
(a hung NFS mount) never blocks the others.

Protocol (host side: labtool.py run):
  request   one JSON line: {"cmd": str, "timeout": seconds,
                            "uid": int|null, "gid": int|null,
                            "groups": [int, ...]|null}
            With "uid", the command runs as uid:gid (gid defaults to uid)
            with exactly the supplementary groups in "groups" (none when
            absent or empty).
  response  frames of 1 type byte + 4-byte big-endian length + payload:
            b"O" stdout bytes, b"E" stderr bytes, b"X" exit status (ASCII).
            Status is 124 when the timeout killed the command and 128+N when
            signal N ended it.  If the host hangs up early, the command is
            killed.

Must not: write anywhere but the guest's tmpfs and the lab directory.  The
guest's root is the host's root (hostfs, mounted read-only by guest_init.sh).
"""

import json
import os
import selectors
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import time

TIMEOUT_STATUS = 124
# After SIGKILL a process in uninterruptible sleep (an NFS call to a dead
# server) may never exit; report the timeout anyway after this grace.
KILL_GRACE_S = 3


def frame(kind, payload):
    return kind + struct.pack("!I", len(payload)) + payload


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


class CommandHandler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline(1 << 20)
        try:
            req = json.loads(line)
        except ValueError:
            self.wfile.write(frame(b"E", b"agent: bad request\n"))
            self.wfile.write(frame(b"X", b"2"))
            return
        argv = ["/bin/bash", "-c", req["cmd"]]
        env = dict(os.environ)
        if req.get("uid") is not None:
            uid = int(req["uid"])
            gid = int(req["gid"] if req.get("gid") is not None else uid)
            groups = [int(g) for g in req.get("groups") or []]
            if groups:
                groups_arg = "--groups=" + ",".join(map(str, groups))
            else:
                groups_arg = "--clear-groups"
            argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}",
                    groups_arg, "--"] + argv
            env["HOME"] = "/tmp"
        timeout = float(req.get("timeout") or 300)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE,
                                    start_new_session=True, env=env,
                                    cwd="/")
        except OSError as err:
            self.send(b"E", f"agent: cannot start: {err}\n".encode())
            self.send(b"X", b"127")
            return
        status = self.relay(proc, timeout)
        self.send(b"X", str(status).encode())

    def send(self, kind, payload):
        try:
            self.wfile.write(frame(kind, payload))
            self.wfile.flush()
            return True
        except OSError:
            return False

    def relay(self, proc, timeout):
        """Copy output to the host until exit, timeout or host hang-up."""
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, b"O")
        sel.register(proc.stderr, selectors.EVENT_READ, b"E")
        sel.register(self.connection, selectors.EVENT_READ, None)
        deadline = time.monotonic() + timeout
        open_pipes = 2
        timed_out = False
        while open_pipes:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(min(left, 1.0)):
                if key.data is None:
                    # The host never sends after the request: readable means
                    # it hung up, so nobody wants this command any more.
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        kill_group(proc)
                        return 255
                    continue
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_pipes -= 1
                    continue
                if not self.send(key.data, chunk):
                    kill_group(proc)
                    return 255
        sel.close()
        if timed_out:
            kill_group(proc)
            try:
                proc.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            self.send(b"E", f"agent: command timed out after {timeout:g} s\n"
                      .encode())
            return TIMEOUT_STATUS
        # Pipes closed; the command itself may still be finishing.
        left = max(deadline - time.monotonic(), 0.1)
        try:
            code = proc.wait(left)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return TIMEOUT_STATUS
        # A background child may keep running; its group dies with us only
        # if the command asked for it, exactly like a normal shell.
        return code if code >= 0 else 128 - code


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main():
    addr = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 7777
    with Server((addr, port), CommandHandler) as server:
        print(f"agent listening on {addr}:{port}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
