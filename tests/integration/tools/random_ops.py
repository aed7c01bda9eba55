#!/usr/bin/env python3
"""random_ops.py — a seeded random-operation data checker for a mounted file
system (data_integrity_test.sh runs it in a lab client, on a mount of nache).

It keeps, for each of a few files, a model of the file's expected content
(a bytearray) and applies one random operation per step to the real file
and to the model:

  write     pwrite at a random offset, also beyond EOF (leaving a hole)
  truncate  ftruncate: shrink, extend (a hole), or to zero
  append    a write on an O_APPEND descriptor
  rewrite   the whole file replaced: open with O_TRUNC, write new content
  mmap      mmap a region, change bytes in it, msync (flush), munmap
  fsync     fsync the file's descriptor
  reopen    close the file's descriptor and open it again

Every --check-every steps it reads the files back and compares them with
their models; every --deep-every steps it first fsyncs every file and drops
the client's page cache (so the reads go to the server: nache), and some
checks read with O_DIRECT (also sent to the server).  The sequence of
operations and their data depend only on the seed, so a failing run is
repeated exactly with the same --seed (and --steps, --files, --max-size).

On a mismatch it prints the seed, the failing step, the file, the first
differing offset, the sizes, and the last operations on that file, and
exits 1 (2 when an operation itself fails).  At the end it writes a
manifest of the models' contents to --manifest, in sha256sum's format
(names relative to --dir), for `sha256sum -c` elsewhere: at the remote,
through a direct mount of it.
"""
import argparse
import hashlib
import mmap
import os
import random
import sys

PAGE = mmap.PAGESIZE


class Mismatch(Exception):
    pass


class Checker:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        self.dir = args.dir
        self.names = [f"f{i}" for i in range(args.files)]
        self.model = {n: bytearray() for n in self.names}
        self.fds = {}
        self.history = {n: [] for n in self.names}  # (step, description)
        self.log = []  # (step, name, description), every file
        self.step = 0
        self.counts = {}
        self.checks = 0
        self.deep_checks = 0
        self.direct_checks = 0
        self.current = "setup"
        self.logf = open(args.log, "w") if args.log else None

    # --- helpers ----------------------------------------------------------
    def path(self, n):
        return os.path.join(self.dir, n)

    def fd(self, n):
        if n not in self.fds:
            self.fds[n] = os.open(self.path(n), os.O_RDWR | os.O_CREAT, 0o644)
        return self.fds[n]

    def note(self, n, what):
        self.history[n].append((self.step, what))
        self.log.append((self.step, n, what))
        if self.a.verbose:
            print(f"step {self.step}: {n} {what}", flush=True)
        if self.logf:
            print(f"step {self.step}: {n} {what}", file=self.logf, flush=True)

    def data(self, length):
        return self.rng.randbytes(length)

    def length(self):
        # Mostly small, sometimes up to --max-write; never 0.
        r = self.rng.random()
        if r < 0.5:
            return self.rng.randint(1, 4096)
        if r < 0.85:
            return self.rng.randint(1, 65536)
        return self.rng.randint(1, self.a.max_write)

    @staticmethod
    def set_range(buf, off, data):
        if off > len(buf):
            buf.extend(bytes(off - len(buf)))
        buf[off:off + len(data)] = data

    def write_all(self, fd, data, off=None):
        done = 0
        while done < len(data):
            chunk = data[done:]
            if off is None:
                w = os.write(fd, chunk)
            else:
                w = os.pwrite(fd, chunk, off + done)
            if w <= 0:
                raise OSError(f"short write ({w})")
            done += w

    # --- operations -------------------------------------------------------
    def op_write(self, n):
        m = self.model[n]
        size = len(m)
        # Inside the file, just past EOF, or well beyond it (a hole).
        r = self.rng.random()
        if r < 0.6 or size == 0 and r < 0.7:
            off = self.rng.randint(0, max(size, 1) - 1)
        elif r < 0.8:
            off = size
        else:
            off = size + self.rng.randint(1, 3 * 65536)
        data = self.data(self.length())
        if off + len(data) > self.a.max_size:
            off = self.rng.randint(0, max(0, self.a.max_size - len(data)))
        self.write_all(self.fd(n), data, off)
        self.set_range(m, off, data)
        self.note(n, f"write off={off} len={len(data)}")

    def op_truncate(self, n):
        m = self.model[n]
        r = self.rng.random()
        if r < 0.2:
            new, kind = 0, "zero"
        elif r < 0.6 and len(m) > 0:
            new, kind = self.rng.randint(0, len(m) - 1), "shrink"
        else:
            new = min(self.a.max_size, len(m) + self.rng.randint(1, 200000))
            kind = "extend"
        os.ftruncate(self.fd(n), new)
        if new < len(m):
            del m[new:]
        else:
            m.extend(bytes(new - len(m)))
        self.note(n, f"truncate {kind} to {new}")

    def op_append(self, n):
        m = self.model[n]
        data = self.data(self.length())
        if len(m) + len(data) > self.a.max_size:
            return self.op_truncate(n)
        fd = os.open(self.path(n), os.O_WRONLY | os.O_APPEND)
        try:
            self.write_all(fd, data)
            if self.rng.random() < 0.3:
                os.fsync(fd)
        finally:
            os.close(fd)
        m.extend(data)
        self.note(n, f"append len={len(data)} (at {len(m) - len(data)})")

    def op_rewrite(self, n):
        data = self.data(self.rng.choice([0, 1, 100, 4096, 5000]) if
                         self.rng.random() < 0.2 else self.length())
        # The file's own descriptor goes: a rewrite is a new open.
        self.close(n)
        fd = os.open(self.path(n), os.O_WRONLY | os.O_TRUNC)
        try:
            self.write_all(fd, data)
        finally:
            os.close(fd)
        self.model[n][:] = data
        self.note(n, f"rewrite O_TRUNC len={len(data)}")

    def op_mmap(self, n):
        m = self.model[n]
        if len(m) == 0:
            return self.op_write(n)
        start = self.rng.randint(0, len(m) - 1) // PAGE * PAGE
        span = min(len(m) - start, self.rng.randint(1, 4 * 65536))
        fd = self.fd(n)
        mm = mmap.mmap(fd, span, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
        try:
            edits = []
            for _ in range(self.rng.randint(1, 4)):
                o = self.rng.randint(0, span - 1)
                d = self.data(self.rng.randint(1, min(span - o, 8192)))
                mm[o:o + len(d)] = d
                m[start + o:start + o + len(d)] = d
                edits.append(f"{start + o}+{len(d)}")
            mm.flush()  # msync(MS_SYNC)
        finally:
            mm.close()
        self.note(n, f"mmap [{start},{start + span}) writes {' '.join(edits)}, msync")

    def op_fsync(self, n):
        os.fsync(self.fd(n))
        self.note(n, "fsync")

    def op_reopen(self, n):
        self.close(n)
        self.fd(n)
        self.note(n, "close, reopen")

    def close(self, n):
        fd = self.fds.pop(n, None)
        if fd is not None:
            os.close(fd)

    OPS = [("write", 30), ("truncate", 10), ("append", 12), ("rewrite", 5),
           ("mmap", 12), ("fsync", 10), ("reopen", 8)]

    # --- checking ---------------------------------------------------------
    def read_direct(self, n, size):
        # O_DIRECT into a page-aligned buffer (an anonymous mmap).
        fd = os.open(self.path(n), os.O_RDONLY | os.O_DIRECT)
        try:
            want = (size + 1 + PAGE - 1) // PAGE * PAGE
            buf = mmap.mmap(-1, max(want, PAGE))
            got = bytearray()
            off = 0
            while True:
                k = os.preadv(fd, [buf], off)
                if k <= 0:
                    break
                got += buf[:k]
                off += k
            buf.close()
            return bytes(got)
        finally:
            os.close(fd)

    def read_plain(self, n):
        with open(self.path(n), "rb") as f:
            return f.read()

    def compare(self, n, got, how):
        want = self.model[n]
        if got == want:
            return
        first = next((i for i in range(min(len(got), len(want)))
                      if got[i] != want[i]), min(len(got), len(want)))
        lines = [f"MISMATCH seed={self.a.seed} step={self.step} file={n} "
                 f"read={how}: size {len(got)}, model {len(want)}, "
                 f"first difference at offset {first}"]
        if first < min(len(got), len(want)):
            lines.append(f"  got   {bytes(got[first:first + 16]).hex()}")
            lines.append(f"  model {bytes(want[first:first + 16]).hex()}")
            last = max(i for i in range(min(len(got), len(want)))
                       if got[i] != want[i])
            lines.append(f"  last difference at offset {last}")
        lines.append(f"  last operations on {n}:")
        for s, what in self.history[n][-15:]:
            lines.append(f"    step {s}: {what}")
        raise Mismatch("\n".join(lines))

    def check(self, deep):
        self.checks += 1
        if deep:
            self.deep_checks += 1
            for n in self.names:
                if n in self.fds:
                    os.fsync(self.fds[n])
            if self.a.drop:
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
        for n in self.names:
            size = os.stat(self.path(n)).st_size
            if size != len(self.model[n]):
                self.compare(n, self.read_plain(n), "stat+read")
            if self.a.direct and self.rng.random() < 0.3:
                self.direct_checks += 1
                self.compare(n, self.read_direct(n, size), "O_DIRECT")
            else:
                self.compare(n, self.read_plain(n), "read")

    # --- the run ----------------------------------------------------------
    def run(self):
        os.makedirs(self.dir, exist_ok=True)
        for n in self.names:
            fd = os.open(self.path(n), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.close(fd)
        names = [o for o, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for self.step in range(1, self.a.steps + 1):
            n = self.rng.choice(self.names)
            op = self.rng.choices(names, weights)[0]
            self.counts[op] = self.counts.get(op, 0) + 1
            self.current = f"{op} on {n}"
            if self.logf:
                print(f"step {self.step}: {self.current} ...", file=self.logf, flush=True)
            getattr(self, "op_" + op)(n)
            if self.step % self.a.check_every == 0 or self.step == self.a.steps:
                deep = self.step % self.a.deep_every == 0
                self.current = f"check after step {self.step}"
                if self.logf:
                    print(f"step {self.step}: check{' (deep)' if deep else ''} ...",
                          file=self.logf, flush=True)
                self.check(deep)
        for n in list(self.fds):
            os.fsync(self.fds[n])
            self.close(n)
        self.check(deep=True)

    def manifest(self, out):
        with open(out, "w") as f:
            for n in self.names:
                f.write(f"{hashlib.sha256(self.model[n]).hexdigest()}  {n}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, help="directory for the files")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--max-size", type=int, default=1 << 20)
    p.add_argument("--max-write", type=int, default=256 << 10)
    p.add_argument("--check-every", type=int, default=5)
    p.add_argument("--deep-every", type=int, default=25)
    p.add_argument("--no-direct", dest="direct", action="store_false",
                   help="no O_DIRECT reads")
    p.add_argument("--no-drop", dest="drop", action="store_false",
                   help="deep checks do not drop the page cache")
    p.add_argument("--manifest", help="write the models' sha256sum lines here")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--log", help="log every step to this file as it starts and ends")
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 32)
    if a.deep_every % a.check_every:
        p.error("--deep-every must be a multiple of --check-every")
    print(f"random_ops: seed={a.seed} steps={a.steps} files={a.files} "
          f"max_size={a.max_size} dir={a.dir}", flush=True)
    c = Checker(a)
    try:
        c.run()
    except Mismatch as e:
        print(e, file=sys.stderr)
        print(f"random_ops: FAILED (seed={a.seed}, step {c.step})", flush=True)
        return 1
    except OSError as e:
        print(f"random_ops: error at step {c.step} (seed={a.seed}) in "
              f"{c.current}: {e!r}", file=sys.stderr)
        for s, n, what in c.log[-10:]:
            print(f"    step {s}: {n} {what}", file=sys.stderr)
        print(f"random_ops: FAILED (seed={a.seed}, step {c.step})", flush=True)
        return 2
    if a.manifest:
        c.manifest(a.manifest)
    ops = " ".join(f"{k}={v}" for k, v in sorted(c.counts.items()))
    sizes = " ".join(f"{n}={len(c.model[n])}" for n in c.names)
    print(f"random_ops: OK seed={a.seed}: {a.steps} steps ({ops}), "
          f"{c.checks} checks ({c.deep_checks} after dropping caches, "
          f"{c.direct_checks} O_DIRECT reads); final sizes {sizes}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
