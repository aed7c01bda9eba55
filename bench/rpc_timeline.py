#!/usr/bin/env python3
"""The NFSv4 RPCs of a packet capture, one line per call, in time order.

usage: bench/rpc_timeline.py CAPTURE.pcap [--from SECONDS] [--to SECONDS]
                             [--hosts ADDR,ADDR] [--no-data]

For each ONC RPC call carried over TCP (NFSv4 COMPOUNDs to port 2049 and
the CB_COMPOUNDs a server sends back on an NFSv4.1 connection) it prints
when the call's first byte was seen, which host sent it, its xid, its
operations (WRITE with its byte count), and, once its reply is seen, the
reply's delay and the COMPOUND's status:

      t s   from          xid  ops                                   reply ms  status
    0.000   10.251.1.12   1a2b SEQUENCE PUTFH OPEN GETFH ACCESS ...    81.2     NFS4ERR_DELAY

Times are seconds from the capture's first packet, or from --from, which
also drops what came before it (--to what came after). --hosts keeps the
calls sent by, or to, those addresses. --no-data leaves out calls whose
operations are only SEQUENCE, PUTFH, WRITE and GETATTR (a flush's stream
of WRITEs, summarised in one line per run of them instead).

This reads the capture only; it needs no NFS decoder. Written to account
for where a conflicting OPEN's time goes during a recall
(bench/recall_dirty.sh CAPTURE=DIR); any capture of NFSv4 over TCP works
(tcpdump -s 0 -w FILE 'tcp port 2049').
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import NFS4_OPS as OPS  # noqa: E402  (the op numbers' names)

CB_OPS = {3: "CB_GETATTR", 4: "CB_RECALL", 5: "CB_LAYOUTRECALL",
          6: "CB_NOTIFY", 10: "CB_RECALL_ANY", 11: "CB_SEQUENCE"}
STATUS = {0: "OK", 2: "NFS4ERR_NOENT", 10008: "NFS4ERR_DELAY",
          10011: "NFS4ERR_EXPIRED", 10013: "NFS4ERR_GRACE",
          10025: "NFS4ERR_BAD_STATEID", 10052: "NFS4ERR_BADSESSION",
          10054: "NFS4ERR_BADSLOT", 10023: "NFS4ERR_STALE_CLIENTID",
          10022: "NFS4ERR_STALE_STATEID", 10087: "NFS4ERR_DELEG_REVOKED",
          13: "NFS4ERR_ACCESS", 10063: "NFS4ERR_SEQ_MISORDERED"}
NFS_PROGRAM = 100003
DATA_OPS = {"SEQUENCE", "PUTFH", "WRITE", "GETATTR"}


class Xdr:
    """Reads big-endian XDR items; runs past the end raise IndexError."""

    def __init__(self, b, pos=0):
        self.b, self.pos = b, pos

    def u32(self):
        if self.pos + 4 > len(self.b):
            raise IndexError("short")
        v = struct.unpack_from(">I", self.b, self.pos)[0]
        self.pos += 4
        return v

    def skip(self, n):
        if self.pos + n > len(self.b):
            raise IndexError("short")
        self.pos += n

    def opaque(self):
        n = self.u32()
        self.skip((n + 3) & ~3)
        return n

    def bitmap(self):
        self.skip(4 * self.u32())

    def fattr(self):
        self.bitmap()
        self.opaque()


def skip_open(x):
    x.skip(12)  # seqid, share_access, share_deny
    x.skip(8)  # clientid
    x.opaque()  # owner
    if x.u32() == 1:  # OPEN4_CREATE
        how = x.u32()
        if how in (0, 1):  # UNCHECKED, GUARDED
            x.fattr()
        elif how == 2:  # EXCLUSIVE
            x.skip(8)
        else:  # EXCLUSIVE4_1
            x.skip(8)
            x.fattr()
    claim = x.u32()
    if claim in (0, 3):  # NULL, DELEGATE_PREV
        x.opaque()
    elif claim == 1:  # PREVIOUS
        x.skip(4)
    elif claim == 2:  # DELEGATE_CUR
        x.skip(16)
        x.opaque()
    elif claim == 5:  # DELEG_CUR_FH
        x.skip(16)


# Bytes of the arguments of the operations whose arguments are fixed:
# SEQUENCE, CLOSE, COMMIT, DELEGRETURN, ACCESS, READ, FREE_STATEID, RENEW,
# RECLAIM_COMPLETE, DESTROY_SESSION.
FIXED_ARGS = {53: 32, 4: 20, 5: 12, 8: 16, 3: 4, 25: 28, 45: 16, 30: 8,
              58: 4, 44: 16}


def skip_args(op, x, write_bytes):
    """Steps over op's arguments; False when their layout is not known."""
    if op in FIXED_ARGS:
        x.skip(FIXED_ARGS[op])
    elif op in (10, 24, 31, 32, 16, 23):
        pass
    elif op in (22, 15, 28):  # PUTFH, LOOKUP, REMOVE
        x.opaque()
    elif op == 9:
        x.bitmap()
    elif op == 38:
        x.skip(16 + 8 + 4)
        write_bytes.append(x.opaque())
    elif op == 34:
        x.skip(16)
        x.fattr()
    elif op == 18:
        skip_open(x)
    elif op == 55:
        x.skip(16 * x.u32())
    else:
        return False
    return True


def skip_cb_args(op, x):
    if op == 11:  # CB_SEQUENCE
        x.skip(32)
        for _ in range(x.u32()):  # referring call lists
            x.skip(16)
            x.skip(8 * x.u32())
    elif op == 4:  # CB_RECALL
        x.skip(20)
        x.opaque()
    else:
        return False
    return True


def call_ops(x, prog):
    """The operation names of a COMPOUND or CB_COMPOUND's arguments."""
    x.opaque()  # tag
    x.u32()  # minorversion
    cb = prog != NFS_PROGRAM
    if cb:
        x.u32()  # callback_ident
    names = []
    for _ in range(min(x.u32(), 64)):
        op = x.u32()
        sizes = []
        names.append((CB_OPS if cb else OPS).get(op, "OP%d" % op))
        known = skip_cb_args(op, x) if cb else skip_args(op, x, sizes)
        if sizes:
            names[-1] += "(%d)" % sizes[0]
        if not known:
            names.append("...")
            break
    return names


class Rpc:
    def __init__(self, t, src, dst, xid, ops):
        self.t, self.src, self.dst, self.xid, self.ops = t, src, dst, xid, ops
        self.reply_t = None
        self.status = None


def parse_message(msg, first_t, last_t, src, dst, calls, out):
    """One RPC message (all fragments) sent src -> dst, its first byte
    seen at first_t, its last at last_t: a call counts from its first
    byte, a reply from its last."""
    x = Xdr(msg)
    try:
        xid, kind = x.u32(), x.u32()
        if kind == 0:
            x.u32()  # rpcvers
            prog, _vers, proc = x.u32(), x.u32(), x.u32()
            x.skip(4)
            x.opaque()  # cred
            x.skip(4)
            x.opaque()  # verf
            if proc != 1:
                return
            r = Rpc(first_t, src, dst, xid, call_ops(x, prog))
            calls[(src, dst, xid)] = r
            out.append(r)
        else:
            r = calls.pop((dst, src, xid), None)
            if r is None:
                return
            r.reply_t = last_t
            if x.u32() != 0:  # MSG_DENIED
                r.status = "RPC_DENIED"
                return
            x.skip(4)
            x.opaque()  # verf
            if x.u32() != 0:
                r.status = "RPC_ACCEPT_ERR"
                return
            st = x.u32()
            r.status = STATUS.get(st, str(st))
    except IndexError:
        pass


class Stream:
    """One direction of a TCP connection, cut into RPC messages."""

    def __init__(self, emit):
        self.emit = emit  # called with (message, first_t, last_t)
        self.next_seq = None
        self.buf = bytearray()
        self.pos = 0  # bytes of buf already cut off
        self.frags = bytearray()
        self.first_t = None

    def plausible(self, n):
        """Whether a record of n bytes at pos can begin an RPC message."""
        if n < 8 or n > 1 << 25:
            return False
        if len(self.buf) - self.pos < 12:
            return True
        return struct.unpack_from(">I", self.buf, self.pos + 8)[0] in (0, 1)

    def add(self, seq, payload, t):
        if self.next_seq is None:
            self.next_seq = seq
        off = (seq - self.next_seq) & 0xFFFFFFFF
        if off >= 0x80000000:  # retransmission of what was had
            back = 0x100000000 - off
            if back >= len(payload):
                return
            payload = payload[back:]
        elif off > 0:  # a gap: bytes not captured, resynchronise
            self.buf, self.pos, self.frags = bytearray(), 0, bytearray()
            self.first_t = None
            self.next_seq = (seq + len(payload)) & 0xFFFFFFFF
            return
        self.next_seq = (self.next_seq + len(payload)) & 0xFFFFFFFF
        if self.first_t is None:
            self.first_t = t
        self.buf += payload
        while len(self.buf) - self.pos >= 4:
            mark = struct.unpack_from(">I", self.buf, self.pos)[0]
            n = mark & 0x7FFFFFFF
            if not self.frags and not self.plausible(n):
                # A capture begun inside a message: wait for a packet
                # that starts one.
                self.buf, self.pos, self.first_t = bytearray(), 0, None
                return
            if len(self.buf) - self.pos < 4 + n:
                break
            self.frags += self.buf[self.pos + 4:self.pos + 4 + n]
            self.pos += 4 + n
            if mark & 0x80000000:
                self.emit(bytes(self.frags), self.first_t, t)
                self.frags = bytearray()
                self.first_t = t if self.pos < len(self.buf) else None
        if self.pos > 1 << 20 or self.pos == len(self.buf):
            del self.buf[:self.pos]
            self.pos = 0


def packets(path):
    """(time, src, sport, dst, dport, seq, payload) of each TCP/IPv4 packet."""
    for t, src, sport, dst, dport, seq, payload, _n in segments(path):
        yield t, src, sport, dst, dport, seq, payload


def segments(path):
    """(time, src, sport, dst, dport, seq, payload, length) of each TCP/IPv4
    packet: length is the payload's size on the wire, which a capture with
    a short snap length (tcpdump -s) holds only part of."""
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            return
        magic = struct.unpack("<I", hdr[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            e = "<"
        else:
            e = ">"
            magic = struct.unpack(">I", hdr[:4])[0]
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            raise SystemExit("rpc_timeline: %s is not a pcap file" % path)
        frac = 1e-9 if magic == 0xA1B23C4D else 1e-6
        link = struct.unpack(e + "I", hdr[20:24])[0]
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, sub, incl, _orig = struct.unpack(e + "IIII", rec)
            data = f.read(incl)
            if link == 1:  # Ethernet
                ip = 14
                etype = struct.unpack_from(">H", data, 12)[0]
            elif link == 113:  # Linux cooked
                ip = 16
                etype = struct.unpack_from(">H", data, 14)[0]
            else:
                raise SystemExit("rpc_timeline: link type %d not handled" % link)
            if etype != 0x0800 or len(data) < ip + 20:
                continue
            ihl = (data[ip] & 0xF) * 4
            if data[ip + 9] != 6:
                continue
            total = struct.unpack_from(">H", data, ip + 2)[0]
            src = ".".join(str(b) for b in data[ip + 12:ip + 16])
            dst = ".".join(str(b) for b in data[ip + 16:ip + 20])
            tcp = ip + ihl
            sport, dport, seq = struct.unpack_from(">HHI", data, tcp)
            doff = (data[tcp + 12] >> 4) * 4
            payload = data[tcp + doff:ip + total]
            yield (sec + sub * frac, src, sport, dst, dport, seq, payload,
                   max(0, total - ihl - doff))


def timeline(path):
    streams, calls, out = {}, {}, []
    for t, src, sport, dst, dport, seq, payload in packets(path):
        if not payload:
            continue
        key = (src, sport, dst, dport)
        s = streams.get(key)
        if s is None:
            # One emitter per direction, naming its two ends.
            ends = ("%s:%d" % (src, sport), "%s:%d" % (dst, dport))
            s = streams[key] = Stream(
                lambda msg, t0, t1, ends=ends: parse_message(
                    msg, t0, t1, ends[0], ends[1], calls, out))
        s.add(seq, payload, t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pcap")
    ap.add_argument("--from", dest="t0", type=float)
    ap.add_argument("--to", dest="t1", type=float)
    ap.add_argument("--hosts", default="")
    ap.add_argument("--no-data", action="store_true")
    a = ap.parse_args()
    # (Parsed as each message completes: a large WRITE after a small call
    # begun later.)
    rpcs = sorted(timeline(a.pcap), key=lambda r: r.t)
    if not rpcs:
        print("rpc_timeline: no RPC calls in %s" % a.pcap, file=sys.stderr)
        return 1
    base = a.t0 if a.t0 is not None else rpcs[0].t
    hosts = set(h for h in a.hosts.split(",") if h)
    print("%9s  %-21s %8s  %-60s %9s  %s" %
          ("t s", "from", "xid", "ops", "reply ms", "status"))
    run = None  # [first, last, count, bytes] of a run of data calls

    def flush_run():
        if run:
            print("%9.3f  %-21s %8s  %-60s %9s  %s" %
                  (run[0] - base, run[4], "", "%d WRITE COMPOUNDs, %d bytes, "
                   "the last reply at %.3f" % (run[2], run[3], run[1] - base),
                   "", ""))

    for r in rpcs:
        if a.t0 is not None and r.t < a.t0:
            continue
        if a.t1 is not None and r.t > a.t1:
            break
        if hosts and r.src.split(":")[0] not in hosts and \
                r.dst.split(":")[0] not in hosts:
            continue
        if a.no_data and all(o.split("(")[0] in DATA_OPS for o in r.ops) \
                and any(o.startswith("WRITE") for o in r.ops):
            size = sum(int(o[6:-1]) for o in r.ops if o.startswith("WRITE("))
            end = r.reply_t if r.reply_t is not None else r.t
            if run is None:
                run = [r.t, end, 0, 0, r.src]
            run[1] = max(run[1], end)
            run[2] += 1
            run[3] += size
            continue
        flush_run()
        run = None
        ms = "%.1f" % ((r.reply_t - r.t) * 1000) if r.reply_t else "-"
        print("%9.3f  %-21s %8x  %-60s %9s  %s" %
              (r.t - base, r.src, r.xid, " ".join(r.ops)[:60], ms,
               r.status or "-"))
    flush_run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
