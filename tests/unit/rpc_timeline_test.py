#!/usr/bin/env python3
"""bench/rpc_timeline.py on captures built here: RPC records cut across
TCP segments, a retransmitted segment, a capture that begins inside a
message, a WRITE run summarised, and a CB_RECALL on the back channel; and
bench/link_use.py (the link's use over time) on a capture of headers only."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "rpc_timeline.py")
LINK_USE = os.path.join(HERE, "..", "..", "bench", "link_use.py")
CLIENT, SERVER = (10, 0, 0, 2), (10, 0, 0, 9)


def u32(*v):
    return b"".join(struct.pack(">I", x) for x in v)


def opaque(b):
    return u32(len(b)) + b + b"\0" * (-len(b) % 4)


def call(xid, ops, prog=100003):
    """An RPC call carrying a COMPOUND (or CB_COMPOUND) of ops, each the
    op number and its encoded arguments."""
    head = u32(xid, 0, 2, prog, 4 if prog == 100003 else 1, 1, 0) + \
        opaque(b"") + u32(0) + opaque(b"")
    body = opaque(b"") + u32(1)
    if prog != 100003:
        body += u32(0)  # callback_ident
    body += u32(len(ops)) + b"".join(u32(op) + args for op, args in ops)
    return head + body


def reply(xid, status):
    return u32(xid, 1, 0, 0) + opaque(b"") + u32(0, status) + opaque(b"") + \
        u32(0)


def record(msg):
    return u32(0x80000000 | len(msg)) + msg


SEQ = (53, b"\1" * 16 + u32(1, 0, 0, 0))
PUTFH = (22, opaque(b"fh-of-the-file"))
GETATTR = (9, u32(1, 0x18))


def open_args():
    # seqid, access, deny, owner (clientid, opaque), NOCREATE, CLAIM_NULL
    return (18, u32(0, 2, 0) + b"\0" * 8 + opaque(b"owner") + u32(0) +
            u32(0) + opaque(b"name"))


def write_op(n):
    return (38, b"\0" * 16 + b"\0" * 8 + u32(0) + opaque(b"w" * n))


class Pcap:
    def __init__(self):
        self.recs = []
        self.seqs = {}

    def seg(self, t, src, dst, sport, dport, payload, seq=None, snap=None):
        key = (src, sport, dst, dport)
        if seq is None:
            seq = self.seqs.get(key, 1000)
            self.seqs[key] = seq + len(payload)
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18,
                          65535, 0, 0)
        ip = struct.pack(">BBHHHBBH4B4B", 0x45, 0, 20 + len(tcp) + len(payload),
                         0, 0, 64, 6, 0, *src, *dst)
        frame = b"\2" * 6 + b"\4" * 6 + b"\x08\x00" + ip + tcp + payload
        # snap: only the first bytes captured (tcpdump -s).
        self.recs.append((t, frame[:snap] if snap else frame, len(frame)))

    def send(self, t, src, dst, sport, dport, data, mss=1000):
        """data cut into segments of mss bytes, 1 ms apart."""
        for i in range(0, len(data), mss):
            self.seg(t + i // mss * 0.001, src, dst, sport, dport,
                     data[i:i + mss])

    def write(self, path):
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
            for t, frame, wire in self.recs:
                sec = int(t)
                f.write(struct.pack("<IIII", sec, int((t - sec) * 1e6),
                                    len(frame), wire))
                f.write(frame)


def run(pcap, *args):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "c.pcap")
        pcap.write(path)
        out = subprocess.run([sys.executable, TOOL, path, *args],
                             capture_output=True, text=True)
    return out.returncode, out.stdout.splitlines()[1:], out.stderr


class RpcTimelineTest(unittest.TestCase):
    def test_calls_and_replies_cut_across_segments(self):
        p = Pcap()
        t0 = 1000.0
        # The capture begins inside a message: its tail comes first.
        p.seg(t0 - 0.5, CLIENT, SERVER, 700, 2049, b"tail of a WRITE" * 40)
        p.send(t0, CLIENT, SERVER, 700, 2049,
               record(call(0x11, [SEQ, PUTFH, open_args(), GETATTR])), mss=7)
        p.send(t0 + 0.081, SERVER, CLIENT, 2049, 700, record(reply(0x11, 10008)))
        # A retransmission of the reply's last bytes changes nothing.
        p.seg(t0 + 0.09, SERVER, CLIENT, 2049, 700, b"\0\0\0\0",
              seq=p.seqs[(SERVER, 2049, CLIENT, 700)] - 4)
        p.send(t0 + 0.2, CLIENT, SERVER, 700, 2049,
               record(call(0x12, [SEQ, PUTFH, open_args(), GETATTR])))
        p.send(t0 + 0.28, SERVER, CLIENT, 2049, 700, record(reply(0x12, 0)))
        rc, lines, err = run(p, "--from", str(t0))
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(lines), 2, lines)
        first, second = (ln.split() for ln in lines)
        self.assertEqual(first[0], "0.000")
        self.assertEqual(first[1], "10.0.0.2:700")
        self.assertEqual(first[2], "11")
        self.assertEqual(first[3:7], ["SEQUENCE", "PUTFH", "OPEN", "GETATTR"])
        self.assertEqual(first[-1], "NFS4ERR_DELAY")
        self.assertAlmostEqual(float(first[-2]), 81.0, delta=1.5)
        self.assertEqual(second[0], "0.200")
        self.assertEqual(second[-1], "OK")

    def test_writes_summarised_and_a_recall_kept(self):
        p = Pcap()
        t0 = 50.0
        p.send(t0, SERVER, CLIENT, 2049, 800,
               record(call(0x21, [(11, b"\0" * 32 + u32(0)),
                                  (4, b"\0" * 20 + opaque(b"fh"))],
                           prog=0x40000000)))
        for i in range(3):
            p.send(t0 + 0.01 + i * 0.01, CLIENT, SERVER, 800, 2049,
                   record(call(0x30 + i, [SEQ, PUTFH, GETATTR,
                                          write_op(4096)])))
        for i in range(3):
            p.send(t0 + 0.1 + i * 0.01, SERVER, CLIENT, 2049, 800,
                   record(reply(0x30 + i, 0)))
        p.send(t0 + 0.2, CLIENT, SERVER, 800, 2049,
               record(call(0x40, [SEQ, PUTFH, (8, b"\0" * 16)])))
        rc, lines, err = run(p, "--no-data")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(lines), 3, lines)
        self.assertIn("CB_SEQUENCE CB_RECALL", lines[0])
        self.assertIn("3 WRITE COMPOUNDs, 12288 bytes", lines[1])
        self.assertIn("the last reply at 0.1", lines[1])
        self.assertIn("DELEGRETURN", lines[2])
        self.assertTrue(lines[2].split()[-2:] == ["-", "-"], lines[2])
        rc, lines, err = run(p, "--hosts", "10.0.0.77")
        self.assertEqual(lines, [])

    def test_not_a_capture_is_refused(self):
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"x" * 64)
            f.flush()
            out = subprocess.run([sys.executable, TOOL, f.name],
                                 capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("not a pcap", out.stderr)


class LinkUseTest(unittest.TestCase):
    def test_idle_stretch_found_in_a_capture_of_headers(self):
        p = Pcap()
        # 10 kB toward the server every 10 ms (1 MB/s) for 1 s, nothing for
        # 0.5 s (the server's small replies go on), then 1 s more; only
        # the headers captured.
        t = 10.0
        for phase, (start, end) in enumerate(((0.0, 1.0), (1.5, 2.5))):
            for i in range(int(round((end - start) / 0.01))):
                p.seg(t + start + i * 0.01, CLIENT, SERVER, 900, 2049,
                      b"w" * 10000, snap=54)
        for i in range(25):
            p.seg(t + i * 0.1, SERVER, CLIENT, 2049, 900, b"r" * 100)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.pcap")
            p.write(path)
            out = subprocess.run([sys.executable, LINK_USE, path,
                                  "--rate-mbit", "8"],
                                 capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("toward the server: 2000000 bytes in 2.50 s", lines[0])
        self.assertIn("mean use: 80.0 % of the link", lines[2])
        self.assertIn("bins at >= 90 %  of the link:    20", lines[3])
        self.assertIn("bins at < 10 %   of the link:     5", lines[6])
        longest = lines[8].split()
        self.assertEqual(longest, ["1.00", "500"])


if __name__ == "__main__":
    unittest.main()
