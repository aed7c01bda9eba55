#!/usr/bin/python3
"""Small network helpers for the nache lab, used by lab.sh on the host and in guests.

Owns: the host side of the guest command channel (``run``), readiness probes
(``wait-agent``, ``wait-rpc``), and measurements (``ping``, ``tput-sink``,
``tput-send``).  It must not change any system state: it only opens sockets.

The host has no ping, nc or iperf, so everything here is plain Python 3
standard library.  Run it with ``python3 -B`` so nothing is written next to it
(guests see this file through a read-only hostfs root).

Exit codes of ``run``: the command's own status, 124 when the guest-side
timeout killed it, 255 when the channel itself failed (no agent, connection
lost, host-side timeout).
"""

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

CHANNEL_FAILURE = 255


def connect(addr, port, timeout):
    """Open a TCP connection, or raise OSError."""
    sock = socket.create_connection((addr, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock, n):
    """Read exactly n bytes; return fewer only at end of stream."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


# ---------------------------------------------------------------- run

def group_list(text):
    """Parse run's --groups: '1,2,3' -> [1, 2, 3], '' -> []."""
    try:
        return [int(g) for g in text.split(",") if g.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of gids: {text!r}")


def cmd_run(args):
    """Run one shell command through the guest agent, relaying its output."""
    request = {
        "cmd": args.command,
        "timeout": args.timeout,
        "uid": args.uid,
        "gid": args.gid,
        "groups": args.groups,
    }
    try:
        sock = connect(args.addr, args.port, 10)
    except OSError as err:
        print(f"labtool: cannot reach agent {args.addr}:{args.port}: {err}",
              file=sys.stderr)
        return CHANNEL_FAILURE
    # The guest enforces the command timeout; the host allows a margin on top
    # so that a wedged guest cannot hang the caller forever.
    sock.settimeout(args.timeout + 30)
    # A reader that stops early (``| grep -q``) must not turn the command's
    # status into a channel failure: discard the rest of that stream.
    outputs = {b"O": sys.stdout.buffer, b"E": sys.stderr.buffer}

    def relay(kind, payload):
        stream = outputs.get(kind)
        if stream is None:
            return
        try:
            stream.write(payload)
            stream.flush()
        except BrokenPipeError:
            outputs[kind] = None
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)

    try:
        sock.sendall(json.dumps(request).encode() + b"\n")
        while True:
            header = recv_exact(sock, 5)
            if len(header) < 5:
                print("labtool: agent connection closed without exit status",
                      file=sys.stderr)
                return CHANNEL_FAILURE
            kind, length = header[:1], struct.unpack("!I", header[1:])[0]
            payload = recv_exact(sock, length)
            if kind in (b"O", b"E"):
                relay(kind, payload)
            elif kind == b"X":
                return int(payload.decode())
    except socket.timeout:
        print("labtool: host-side timeout waiting for the agent",
              file=sys.stderr)
        return CHANNEL_FAILURE
    except OSError as err:
        print(f"labtool: agent channel error: {err}", file=sys.stderr)
        return CHANNEL_FAILURE
    finally:
        sock.close()


# ---------------------------------------------------------------- probes

def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    if not pid:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


def agent_answers(addr, port):
    """True when the agent runs a trivial command successfully."""
    try:
        with connect(addr, port, 1) as sock:
            sock.settimeout(5)
            sock.sendall(json.dumps({"cmd": "true", "timeout": 5}).encode() +
                         b"\n")
            data = b""
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.endswith(b"X\x00\x00\x00\x010")
    except OSError:
        return False


def rpc_null(addr, port, prog, vers):
    """One ONC RPC NULL call over TCP; True when accepted with SUCCESS."""
    xid = int.from_bytes(os.urandom(4), "big")
    # xid, CALL, rpcvers 2, prog, vers, proc 0, AUTH_NONE cred and verifier
    body = struct.pack("!IIIIIIIIII", xid, 0, 2, prog, vers, 0, 0, 0, 0, 0)
    try:
        with connect(addr, port, 1) as sock:
            sock.settimeout(3)
            sock.sendall(struct.pack("!I", 0x80000000 | len(body)) + body)
            mark = recv_exact(sock, 4)
            if len(mark) < 4:
                return False
            reply = recv_exact(sock, struct.unpack("!I", mark)[0] & 0x7fffffff)
            if len(reply) < 24:
                return False
            rxid, mtype, stat = struct.unpack("!III", reply[:12])
            # reply: xid, REPLY(1), MSG_ACCEPTED(0), verf(flavor,len=0), accept_stat
            accept = struct.unpack("!I", reply[20:24])[0]
            return rxid == xid and mtype == 1 and stat == 0 and accept == 0
    except OSError:
        return False


def wait_loop(check, args):
    """Poll check() until it holds (0), pid dies (2) or timeout (1)."""
    deadline = time.monotonic() + args.timeout
    while True:
        if check():
            return 0
        if not pid_alive(args.pid):
            return 2
        if time.monotonic() >= deadline:
            return 1
        time.sleep(args.interval)


def cmd_wait_agent(args):
    return wait_loop(lambda: agent_answers(args.addr, args.port), args)


def cmd_wait_rpc(args):
    def check():
        if not rpc_null(args.addr, args.port, args.prog, args.vers):
            return False
        if args.log_contains:
            try:
                with open(args.log, errors="replace") as f:
                    return args.log_contains in f.read()
            except OSError:
                return False
        return True
    return wait_loop(check, args)


def cmd_rpcping(args):
    return 0 if rpc_null(args.addr, args.port, args.prog, args.vers) else 1


# ---------------------------------------------------------------- ping

def icmp_checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xffff)
    total += total >> 16
    return ~total & 0xffff


def cmd_ping(args):
    """ICMP echo with a raw socket (needs root); prints per-reply RTT in ms."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xffff
    rtts = []
    for seq in range(args.count):
        payload = struct.pack("!d", time.monotonic()) + b"nache-lab" * 4
        header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        csum = icmp_checksum(header + payload)
        packet = struct.pack("!BBHHH", 8, 0, csum, ident, seq) + payload
        sent = time.monotonic()
        sock.sendto(packet, (args.addr, 0))
        deadline = sent + args.wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print(f"seq={seq} timeout")
                break
            ready, _, _ = select.select([sock], [], [], left)
            if not ready:
                continue
            data, _ = sock.recvfrom(2048)
            ihl = (data[0] & 0x0f) * 4
            icmp = data[ihl:]
            rtype, _, _, rid, rseq = struct.unpack("!BBHHH", icmp[:8])
            if rtype == 0 and rid == ident and rseq == seq:
                rtt = (time.monotonic() - sent) * 1000
                rtts.append(rtt)
                print(f"seq={seq} rtt={rtt:.2f} ms")
                break
        if seq + 1 < args.count:
            time.sleep(args.interval)
    if not rtts:
        print(f"ping {args.addr}: no replies")
        return 1
    rtts.sort()
    avg = sum(rtts) / len(rtts)
    print(f"rtt min/avg/max/median = {rtts[0]:.2f}/{avg:.2f}/{rtts[-1]:.2f}/"
          f"{rtts[len(rtts) // 2]:.2f} ms received={len(rtts)}/{args.count}")
    return 0


# ---------------------------------------------------------------- throughput

def cmd_tput_sink(args):
    """Accept one connection, count bytes until EOF, send the count back."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(1)
    srv.settimeout(args.timeout)
    conn, _ = srv.accept()
    conn.settimeout(args.timeout)
    total = 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        total += len(chunk)
    conn.sendall(struct.pack("!Q", total))
    conn.close()
    srv.close()
    return 0


def cmd_tput_send(args):
    """Send for N seconds; report goodput acknowledged by the sink."""
    deadline = time.monotonic() + 10
    while True:
        try:
            sock = connect(args.addr, args.port, 5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock.settimeout(args.seconds + 60)
    block = b"\xa5" * (256 * 1024)
    start = time.monotonic()
    end = start + args.seconds
    sent = 0
    while time.monotonic() < end:
        sock.sendall(block)
        sent += len(block)
    sock.shutdown(socket.SHUT_WR)
    ack = recv_exact(sock, 8)
    elapsed = time.monotonic() - start
    got = struct.unpack("!Q", ack)[0] if len(ack) == 8 else 0
    mbit = got * 8 / elapsed / 1e6
    print(f"throughput {mbit:.1f} Mbit/s ({got} bytes in {elapsed:.2f} s)")
    return 0 if got == sent else 1


# ---------------------------------------------------------------- rpcbind stub

def rpcbind_reply(call):
    """Reply to one rpcbind/portmap call, or None for garbage.

    Only Ganesha talks to this stub (it listens on loopback): SET and UNSET
    succeed, look-ups find nothing.  Clients in the lab mount NFSv3 with
    explicit ports, so nobody needs real answers.
    """
    if len(call) < 24:
        return None
    xid, mtype, rpcvers, prog, vers, proc = struct.unpack("!6I", call[:24])
    if mtype != 0:
        return None
    head = struct.pack("!IIIII", xid, 1, 0, 0, 0)  # REPLY, ACCEPTED, null verf
    if rpcvers != 2 or prog != 100000:
        return head + struct.pack("!I", 1)  # PROG_UNAVAIL
    if proc == 0:
        return head + struct.pack("!I", 0)
    if proc in (1, 2):  # SET, UNSET (all versions): bool TRUE
        return head + struct.pack("!II", 0, 1)
    if proc == 3:  # v2 GETPORT -> port 0; v3/v4 GETADDR -> ""
        return head + struct.pack("!II", 0, 0)
    return head + struct.pack("!I", 3)  # PROC_UNAVAIL


def cmd_rpcbind_stub(args):
    """Serve rpcbind_reply over TCP and UDP on port args.port of each
    address in args.bind until killed.  Ganesha's registration (libntirpc)
    asks "localhost" and tries only its first address, which is ::1 where
    the namespace has IPv6: so the stub answers on both loopbacks."""
    import threading

    def serve_udp(usock):
        while True:
            data, peer = usock.recvfrom(65536)
            reply = rpcbind_reply(data)
            if reply:
                usock.sendto(reply, peer)

    def serve_tcp_conn(conn):
        with conn:
            while True:
                mark = recv_exact(conn, 4)
                if len(mark) < 4:
                    return
                size = struct.unpack("!I", mark)[0] & 0x7fffffff
                reply = rpcbind_reply(recv_exact(conn, size))
                if reply is None:
                    return
                conn.sendall(struct.pack("!I", 0x80000000 | len(reply)) +
                             reply)

    def serve_tcp(tsock):
        while True:
            conn, _ = tsock.accept()
            threading.Thread(target=serve_tcp_conn, args=(conn,),
                             daemon=True).start()

    threads = []
    for addr in args.bind.split(","):
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        try:
            usock = socket.socket(family, socket.SOCK_DGRAM)
            usock.bind((addr, args.port))
            tsock = socket.socket(family, socket.SOCK_STREAM)
            tsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tsock.bind((addr, args.port))
        except OSError as e:
            if family == socket.AF_INET6:  # no IPv6 here: nobody asks ::1
                print(f"rpcbind stub: not on {addr}: {e}", flush=True)
                continue
            raise
        tsock.listen(16)
        for target, sock in ((serve_udp, usock), (serve_tcp, tsock)):
            threads.append(threading.Thread(target=target, args=(sock,),
                                            daemon=True))
        print(f"rpcbind stub on {addr}:{args.port}", flush=True)
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ---------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="sub", required=True)

    p = sub.add_parser("run", help="run a command through a guest agent")
    p.add_argument("addr")
    p.add_argument("command")
    p.add_argument("--port", type=int, default=7777)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--uid", type=int)
    p.add_argument("--gid", type=int)
    p.add_argument("--groups", type=group_list, default=None,
                   help="supplementary groups with --uid, comma-separated")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("wait-agent", help="wait until a guest agent answers")
    p.add_argument("addr")
    p.add_argument("--port", type=int, default=7777)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("--pid", type=int, help="give up when this pid exits")
    p.set_defaults(func=cmd_wait_agent)

    for name, func in (("wait-rpc", cmd_wait_rpc), ("rpcping", cmd_rpcping)):
        p = sub.add_parser(name, help="RPC NULL probe (wait: until it works)")
        p.add_argument("addr")
        p.add_argument("--port", type=int, default=2049)
        p.add_argument("--prog", type=int, default=100003)
        p.add_argument("--vers", type=int, default=4)
        p.add_argument("--timeout", type=float, default=60)
        p.add_argument("--interval", type=float, default=0.2)
        p.add_argument("--pid", type=int, help="give up when this pid exits")
        p.add_argument("--log", help="file that must contain --log-contains")
        p.add_argument("--log-contains")
        p.set_defaults(func=func)

    p = sub.add_parser("ping", help="ICMP echo RTT")
    p.add_argument("addr")
    p.add_argument("-c", "--count", type=int, default=5)
    p.add_argument("-i", "--interval", type=float, default=0.2)
    p.add_argument("-W", "--wait", type=float, default=2)
    p.set_defaults(func=cmd_ping)

    p = sub.add_parser("tput-sink", help="TCP throughput receiver")
    p.add_argument("bind")
    p.add_argument("--port", type=int, default=5201)
    p.add_argument("--timeout", type=float, default=60)
    p.set_defaults(func=cmd_tput_sink)

    p = sub.add_parser("tput-send", help="TCP throughput sender")
    p.add_argument("addr")
    p.add_argument("--port", type=int, default=5201)
    p.add_argument("--seconds", type=float, default=3)
    p.set_defaults(func=cmd_tput_send)

    p = sub.add_parser("rpcbind-stub", help="loopback rpcbind for Ganesha")
    p.add_argument("--bind", default="127.0.0.1,::1",
                   help="comma-separated addresses")
    p.add_argument("--port", type=int, default=111)
    p.set_defaults(func=cmd_rpcbind_stub)

    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
