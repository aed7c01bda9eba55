#!/usr/bin/env python3
"""hostile_proxy.py — a hostile NFS upstream: a TCP man-in-the-middle
between nache and its remote that corrupts the ONC RPC stream on demand.

    hostile_proxy.py serve --listen ADDR:PORT --upstream ADDR:PORT \\
        --control SOCKET --log FILE
    hostile_proxy.py ctl SOCKET 'set mode=truncate op=38 count=2 label=x'
    hostile_proxy.py ctl SOCKET pass
    hostile_proxy.py ctl SOCKET status

Every accepted connection gets its own connection to the upstream. Both
directions are parsed as RPC record marking (RFC 5531 section 11: 4-byte
fragment headers, last-fragment bit); records are re-sent as one fragment.
Calls (client -> server) are decoded as far as the proxy needs: XID, the
COMPOUND's tag and the operation numbers (as far as it knows their
arguments' sizes). A reply (server -> client) is matched to its call by
XID; a call the server makes on the connection (NFSv4.1 back channel) and
the client's replies to it pass untouched.

The rule (one at a time, replaced by each `set`) says what to do with the
records it selects:

  mode=pass        forward (the default)
  mode=truncate    cut the reply to its RPC header and half its results;
                   the fragment length says the new size (a short reply)
  mode=garbage     overwrite a field of the results: field=count (default:
                   the COMPOUND's result count becomes 0x40000001),
                   field=op (the first result's operation number becomes
                   0x7fffffff) or field=status (the COMPOUND's status
                   becomes 0x7fffffff)
  mode=oversize    a fragment header claiming 0x7ffffff0 bytes, then the
                   reply; with extra=N, claiming N bytes more than the
                   reply has (the next records' bytes complete it: the
                   stream is out of step from there on)
  mode=duplicate   the reply twice
  mode=reorder     hold the reply; send it right after the next record for
                   the same connection (or after hold_ms, default 1000, if
                   none comes)
  mode=late        send the reply delay_ms (default 3000) late; later
                   replies go past it
  mode=drop        close both connections: at=reply (default: the server
                   executed the call, its reply is lost), at=request (the
                   call never reaches the server), at=midreply (half the
                   reply is sent, then the connections close)

Selectors (all given must hold): op=N (the call has operation N among the
ones decoded), first=N (its first operation is N), tag=REGEX (its
COMPOUND tag matches, re.search); none: every reply (every call for
drop at=request). Then every=N acts on every Nth selected record, and
count=K stops after K mutations (then it passes everything). label=TEXT
goes into the log lines.

The log gets a line per mutated record (two for a reply held back: when
held, and when sent; a reorder whose reply went out in order after all
says so), and one per rule set and per connection accepted:
  <time> conn=<n> label=<label> mode=<mode> xid=0x<xid> tag=<tag> ops=<ops> <what>
A mutation that did not happen is not logged. With --trace, every call
(tag, operations) and every reply (the COMPOUND's status) is logged too,
as "trace" lines.
"""

import argparse
import os
import re
import socket
import struct
import sys
import threading
import time

LAST = 0x80000000
NFS_PROGRAM = 100003

# Argument sizes of the NFSv4 operations the proxy steps over to find the
# next operation number: a fixed size, or a function of the bytes.
STATEID = 16


def _opaque(b, p):
    n = struct.unpack_from(">I", b, p)[0]
    return p + 4 + ((n + 3) & ~3)


def _bitmap(b, p):
    n = struct.unpack_from(">I", b, p)[0]
    return p + 4 + 4 * n


def _fattr(b, p):
    return _opaque(b, _bitmap(b, p))


def _create(b, p):
    kind = struct.unpack_from(">I", b, p)[0]
    p += 4
    if kind == 5:  # NF4LNK: the link's text
        p = _opaque(b, p)
    elif kind in (3, 4):  # NF4BLK, NF4CHR: specdata
        p += 8
    return _fattr(b, _opaque(b, p))


def open_args(b, p):
    """(end, seqid, open-owner, name) of the OPEN whose arguments are at p
    (name: a CLAIM_NULL's or CLAIM_DELEGATE_PREV's, else '')."""
    seqid = struct.unpack_from(">I", b, p)[0]
    n = struct.unpack_from(">I", b, p + 20)[0]
    owner = b[p + 24:p + 24 + n].decode("ascii", "replace")
    p = _opaque(b, p + 20)  # past seqid, access, deny, clientid, owner
    if struct.unpack_from(">I", b, p)[0] == 1:  # OPEN4_CREATE
        how = struct.unpack_from(">I", b, p + 4)[0]
        p += 8
        if how in (0, 1):      # UNCHECKED4, GUARDED4: the attributes
            p = _fattr(b, p)
        elif how == 2:         # EXCLUSIVE4: the verifier
            p += 8
        else:                  # EXCLUSIVE4_1: both
            p = _fattr(b, p + 8)
    else:
        p += 4
    claim = struct.unpack_from(">I", b, p)[0]
    p += 4
    name = ""
    if claim in (0, 3):        # CLAIM_NULL, CLAIM_DELEGATE_PREV: a name
        k = struct.unpack_from(">I", b, p)[0]
        name = b[p + 4:p + 4 + k].decode("ascii", "replace")
        p = _opaque(b, p)
    elif claim == 1:           # CLAIM_PREVIOUS: a delegation type
        p += 4
    elif claim == 2:           # CLAIM_DELEGATE_CUR: stateid, name
        p = _opaque(b, p + STATEID)
    elif claim == 5:           # CLAIM_DELEG_CUR_FH: stateid
        p += STATEID
    return p, seqid, owner, name


ARGS = {
    3: 4,                                      # ACCESS
    4: 4 + STATEID,                            # CLOSE
    5: 12,                                     # COMMIT
    6: _create,                                # CREATE
    7: 8,                                      # DELEGPURGE
    8: STATEID,                                # DELEGRETURN
    9: _bitmap,                                # GETATTR
    10: 0,                                     # GETFH
    11: _opaque,                               # LINK
    15: _opaque,                               # LOOKUP
    16: 0,                                     # LOOKUPP
    17: _fattr,                                # NVERIFY
    18: lambda b, p: open_args(b, p)[0],       # OPEN
    19: 4,                                     # OPENATTR
    20: STATEID + 4,                           # OPEN_CONFIRM
    21: STATEID + 12,                          # OPEN_DOWNGRADE
    22: _opaque,                               # PUTFH
    23: 0,                                     # PUTPUBFH
    24: 0,                                     # PUTROOTFH
    25: STATEID + 12,                          # READ
    26: lambda b, p: _bitmap(b, p + 24),       # READDIR
    27: 0,                                     # READLINK
    28: _opaque,                               # REMOVE
    29: lambda b, p: _opaque(b, _opaque(b, p)),  # RENAME
    30: 8,                                     # RENEW
    31: 0,                                     # RESTOREFH
    32: 0,                                     # SAVEFH
    34: lambda b, p: _fattr(b, p + STATEID),   # SETATTR
    36: 16,                                    # SETCLIENTID_CONFIRM
    37: _fattr,                                # VERIFY
    38: lambda b, p: _opaque(b, p + STATEID + 12),  # WRITE
    53: 32,                                    # SEQUENCE
    58: 4,                                     # RECLAIM_COMPLETE
}


def decode_call(rec):
    """(xid, tag, ops, notes) of a call record; tag '' and ops [] where it
    stops; notes: what the trace says of some operations (OPEN's seqid,
    open-owner and name)."""
    xid = struct.unpack_from(">I", rec, 0)[0]
    tag, ops, notes = "", [], []
    try:
        _, _, prog, _, proc = struct.unpack_from(">5I", rec, 4)
        p = _opaque(rec, 28)          # credential body
        p = _opaque(rec, p + 4)       # verifier body
        if prog != NFS_PROGRAM:
            return xid, "prog%d" % prog, ops, notes
        if proc == 0:
            return xid, "NULL", ops, notes
        n = struct.unpack_from(">I", rec, p)[0]
        tag = rec[p + 4:p + 4 + n].decode("ascii", "replace")
        p = _opaque(rec, p) + 4       # minorversion
        count = struct.unpack_from(">I", rec, p)[0]
        p += 4
        for _ in range(min(count, 64)):
            op = struct.unpack_from(">I", rec, p)[0]
            ops.append(op)
            if op == 18:
                _, seqid, owner, name = open_args(rec, p + 4)
                notes.append("open(seqid=%d owner=%s name=%s)" %
                             (seqid, owner, name))
            size = ARGS.get(op)
            if size is None:
                break
            p = size(rec, p + 4) if callable(size) else p + 4 + size
    except (struct.error, IndexError):
        pass
    return xid, tag, ops, notes


def reply_results_at(rec):
    """Offset of an accepted, successful reply's results (None otherwise)."""
    try:
        stat = struct.unpack_from(">I", rec, 8)[0]
        if stat != 0:
            return None
        p = _opaque(rec, 16)  # verifier: flavor at 12, body
        if struct.unpack_from(">I", rec, p)[0] != 0:
            return None
        return p + 4 if p + 4 <= len(rec) else None
    except struct.error:
        return None


class Rule:
    def __init__(self, words):
        self.mode = "pass"
        self.op = self.first = None
        self.tag = None
        self.every = 1
        self.count = None
        self.label = "-"
        self.field = "count"
        self.at = "reply"
        self.delay_ms = 3000
        self.hold_ms = 1000
        self.extra = 0
        self.seen = 0
        self.fired = 0
        for w in words:
            k, _, v = w.partition("=")
            if k == "mode":
                if v not in ("pass", "truncate", "garbage", "oversize",
                             "duplicate", "reorder", "late", "drop"):
                    raise ValueError("unknown mode " + v)
                self.mode = v
            elif k in ("op", "first", "every", "count", "delay_ms", "hold_ms",
                       "extra"):
                setattr(self, k, int(v, 0))
            elif k == "tag":
                self.tag = re.compile(v)
            elif k == "field":
                if v not in ("count", "op", "status"):
                    raise ValueError("unknown field " + v)
                self.field = v
            elif k == "at":
                if v not in ("reply", "request", "midreply"):
                    raise ValueError("unknown drop point " + v)
                self.at = v
            elif k == "label":
                self.label = v
            else:
                raise ValueError("unknown word " + w)
        if self.every < 1:
            raise ValueError("every must be at least 1")

    def selects(self, tag, ops):
        if self.op is not None and self.op not in ops:
            return False
        if self.first is not None and (not ops or ops[0] != self.first):
            return False
        if self.tag is not None and not self.tag.search(tag):
            return False
        return True


class Proxy:
    def __init__(self, upstream, log_path):
        self.upstream = upstream
        self.lock = threading.Lock()
        self.rule = Rule([])
        self.log_file = open(log_path, "a", buffering=1)
        self.conns = 0
        self.trace = False

    def log(self, line):
        now = time.time()
        t = time.strftime("%H:%M:%S", time.localtime(now)) + \
            ("%.3f" % (now % 1))[1:]
        with self.lock:
            self.log_file.write("%s %s\n" % (t, line))

    def set_rule(self, words):
        rule = Rule(words)
        with self.lock:
            self.rule = rule

    def decide(self, point, tag, ops):
        """The rule when it acts on this record (at point: 'reply' or
        'request'), else None. Counts the record as seen when selected."""
        with self.lock:
            r = self.rule
            if r.mode == "pass":
                return None
            wants = "request" if r.mode == "drop" and r.at == "request" else "reply"
            if point != wants or not r.selects(tag, ops):
                return None
            if r.count is not None and r.fired >= r.count:
                return None
            r.seen += 1
            if r.seen % r.every != 0:
                return None
            r.fired += 1
            return r

    def status(self):
        with self.lock:
            r = self.rule
            return "mode=%s label=%s seen=%d fired=%d conns=%d" % (
                r.mode, r.label, r.seen, r.fired, self.conns)


class Conn:
    def __init__(self, proxy, n, csock, ssock):
        self.proxy, self.n = proxy, n
        self.csock, self.ssock = csock, ssock
        self.calls = {}            # xid -> (tag, ops)
        self.calls_lock = threading.Lock()
        self.wlock = threading.Lock()  # writes to the client
        self.held = None           # reorder: (record, what to log)
        self.closed = False

    def close(self):
        with self.wlock:
            if self.closed:
                return
            self.closed = True
        for s in (self.csock, self.ssock):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def send_client(self, data):
        with self.wlock:
            if self.closed:
                return False
            try:
                self.csock.sendall(data)
                return True
            except OSError:
                pass
        self.close()
        return False

    def logm(self, r, xid, tag, ops, what):
        self.proxy.log("conn=%d label=%s mode=%s xid=0x%08x tag=%s ops=%s %s" % (
            self.n, r.label, r.mode, xid, tag or "-",
            ",".join(map(str, ops)) or "-", what))


def frame(rec):
    return struct.pack(">I", LAST | len(rec)) + rec


def read_record(f):
    """One whole record (fragments joined), or None at the end."""
    parts = []
    while True:
        h = f.read(4)
        if len(h) < 4:
            return None
        m = struct.unpack(">I", h)[0]
        n = m & ~LAST
        data = f.read(n)
        if len(data) < n:
            return None
        parts.append(data)
        if m & LAST:
            return b"".join(parts)


def pump_calls(c):
    """Client -> server: note each call; drop at=request acts here."""
    f = c.csock.makefile("rb", buffering=1 << 16)
    try:
        while True:
            rec = read_record(f)
            if rec is None or len(rec) < 8:
                break
            if struct.unpack_from(">I", rec, 4)[0] == 0:  # CALL
                xid, tag, ops, notes = decode_call(rec)
                with c.calls_lock:
                    c.calls[xid] = (tag, ops)
                if c.proxy.trace:
                    c.proxy.log("conn=%d trace call xid=0x%08x tag=%s ops=%s%s" % (
                        c.n, xid, tag or "-", ",".join(map(str, ops)),
                        "".join(" " + n for n in notes)))
                r = c.proxy.decide("request", tag, ops)
                if r is not None:
                    c.logm(r, xid, tag, ops, "dropped the connection before "
                           "the call reached the server")
                    break
            c.ssock.sendall(frame(rec))
    except OSError:
        pass
    c.close()


def pump_replies(c):
    """Server -> client: the rule acts on replies to the client's calls."""
    f = c.ssock.makefile("rb", buffering=1 << 16)
    try:
        while True:
            rec = read_record(f)
            if rec is None or len(rec) < 8:
                break
            xid, mtype = struct.unpack_from(">II", rec, 0)
            if mtype != 1:  # a call from the server (back channel)
                if not forward(c, rec):
                    break
                continue
            with c.calls_lock:
                tag, ops = c.calls.pop(xid, ("", []))
            if c.proxy.trace:
                res = reply_results_at(rec)
                st = struct.unpack_from(">I", rec, res)[0] if res else -1
                c.proxy.log("conn=%d trace reply xid=0x%08x tag=%s status=%d "
                            "%d bytes" % (c.n, xid, tag or "-", st, len(rec)))
            # While a reply is held for reordering, the next one is the
            # one it goes behind: forwarded as it is.
            with c.wlock:
                holding = c.held is not None
            r = None if holding else c.proxy.decide("reply", tag, ops)
            if r is None:
                if not forward(c, rec):
                    break
                continue
            if not mutate(c, r, rec, xid, tag, ops):
                break
    except OSError:
        pass
    c.close()


def forward(c, rec):
    """Sends rec, then a reply held for reordering (after it)."""
    if not c.send_client(frame(rec)):
        return False
    with c.wlock:
        held, c.held = c.held, None
    if held is not None:
        r, xid, tag, ops, hrec = held
        c.logm(r, xid, tag, ops, "sent after the reply to xid 0x%08x" %
               struct.unpack_from(">I", rec, 0)[0])
        return c.send_client(frame(hrec))
    return True


def mutate(c, r, rec, xid, tag, ops):
    res = reply_results_at(rec)
    if r.mode == "truncate":
        start = res if res is not None else 8
        keep = start + ((len(rec) - start) // 2 & ~3)
        if keep >= len(rec):
            keep = start
        c.logm(r, xid, tag, ops, "cut %d -> %d bytes" % (len(rec), keep))
        return c.send_client(frame(rec[:keep]))
    if r.mode == "garbage":
        b = bytearray(rec)
        what = "results not accepted/successful: overwrote the RPC status"
        try:
            if res is None:
                at = 8
            elif r.field == "status":
                at = res
                what = "COMPOUND status"
            else:
                at = _opaque(rec, res + 4)  # past status and tag
                what = "result count"
                if r.field == "op":
                    at += 4
                    what = "first result's op number"
            old = struct.unpack_from(">I", b, at)[0]
            new = 0x40000001 if r.field == "count" else 0x7fffffff
            struct.pack_into(">I", b, at, new)
        except struct.error:
            at, old, new = len(rec) - 4, 0, 0xffffffff
            struct.pack_into(">I", b, at, new)
            what = "last word"
        c.logm(r, xid, tag, ops, "%s at byte %d: 0x%x -> 0x%x" %
               (what, at, old, new))
        return c.send_client(frame(bytes(b)))
    if r.mode == "oversize":
        claim = len(rec) + r.extra if r.extra > 0 else 0x7FFFFFF0
        c.logm(r, xid, tag, ops, "fragment header claims 0x%x bytes, "
               "%d follow" % (claim, len(rec)))
        return c.send_client(struct.pack(">I", LAST | claim) + rec)
    if r.mode == "duplicate":
        c.logm(r, xid, tag, ops, "sent twice")
        return c.send_client(frame(rec) + frame(rec))
    if r.mode == "reorder":
        with c.wlock:
            c.held = (r, xid, tag, ops, rec)
        c.logm(r, xid, tag, ops, "held")

        def release():
            with c.wlock:
                held = c.held
                if held is None or held[1] != xid:
                    return
                c.held = None
            c.logm(r, xid, tag, ops, "no later reply within %d ms: sent "
                   "in order" % r.hold_ms)
            c.send_client(frame(rec))
        threading.Timer(r.hold_ms / 1000.0, release).start()
        return True
    if r.mode == "late":
        c.logm(r, xid, tag, ops, "held for %d ms" % r.delay_ms)

        def late():
            if c.send_client(frame(rec)):
                c.logm(r, xid, tag, ops, "sent %d ms late" % r.delay_ms)
        threading.Timer(r.delay_ms / 1000.0, late).start()
        return True
    if r.mode == "drop":
        if r.at == "midreply":
            half = len(rec) // 2
            c.logm(r, xid, tag, ops, "sent %d of %d bytes, dropped the "
                   "connection" % (half, len(rec)))
            c.send_client(frame(rec)[:4 + half])
        else:
            c.logm(r, xid, tag, ops, "the server executed the call; "
                   "dropped the connection before its reply")
        c.close()
        return False
    return forward(c, rec)


def serve_control(proxy, path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path + ".tmp")
    srv.listen(8)
    os.rename(path + ".tmp", path)  # appears once it accepts
    while True:
        s, _ = srv.accept()
        with s:
            line = s.makefile("r").readline().split()
            try:
                if not line:
                    raise ValueError("empty command")
                if line[0] == "set":
                    proxy.set_rule(line[1:])
                    proxy.log("control: set " + " ".join(line[1:]))
                    answer = "ok " + proxy.status()
                elif line[0] == "pass":
                    proxy.set_rule([])
                    proxy.log("control: pass")
                    answer = "ok " + proxy.status()
                elif line[0] == "status":
                    answer = "ok " + proxy.status()
                else:
                    raise ValueError("unknown command " + line[0])
            except ValueError as e:
                answer = "error " + str(e)
            s.sendall((answer + "\n").encode())


def serve(args):
    host, port = args.upstream.rsplit(":", 1)
    proxy = Proxy((host, int(port)), args.log)
    proxy.trace = args.trace
    lhost, lport = args.listen.rsplit(":", 1)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((lhost, int(lport)))
    srv.listen(16)
    threading.Thread(target=serve_control, args=(proxy, args.control),
                     daemon=True).start()
    proxy.log("listening on %s, upstream %s" % (args.listen, args.upstream))
    while True:
        csock, peer = srv.accept()
        try:
            ssock = socket.create_connection(proxy.upstream, timeout=10)
            ssock.settimeout(None)
        except OSError as e:
            proxy.log("connection from %s:%d: upstream unreachable: %s" %
                      (peer[0], peer[1], e))
            csock.close()
            continue
        for s in (csock, ssock):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with proxy.lock:
            proxy.conns += 1
            n = proxy.conns
        proxy.log("conn=%d from %s:%d" % (n, peer[0], peer[1]))
        c = Conn(proxy, n, csock, ssock)
        threading.Thread(target=pump_calls, args=(c,), daemon=True).start()
        threading.Thread(target=pump_replies, args=(c,), daemon=True).start()


def ctl(args):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(args.socket)
    s.sendall((" ".join(args.command) + "\n").encode())
    answer = s.makefile("r").readline().strip()
    print(answer)
    return 0 if answer.startswith("ok") else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--upstream", required=True)
    s.add_argument("--control", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--trace", action="store_true",
                   help="also log every call and every reply's status")
    c = sub.add_parser("ctl")
    c.add_argument("socket")
    c.add_argument("command", nargs="+")
    args = ap.parse_args()
    return serve(args) if args.cmd == "serve" else ctl(args)


if __name__ == "__main__":
    sys.exit(main())
