#!/usr/bin/env python3
"""nache benchmark workload driver (python3, standard library only).

Runs inside a lab client guest (or, for preparation, inside the server guest
or on the host) and prints one JSON report on stdout.  Two families:

Filebench personalities (webserver, webserver-zipf, varmail, fileserver,
webproxy), reproduced from Filebench's workload model: a file set whose
directory widths and file sizes are gamma distributed (shape 1.5, Filebench's
default dirgamma/sizegamma) around meandirwidth / meanfilesize, the
personality's flowop loop run by nthreads threads for a duration, latency
measured per flowop.  When a `filebench` binary is present (and --engine is
auto or filebench), the matching bench/workloads/*.f file is run by it
instead and its report is converted to the same JSON.

  fbdriver.py params   PERSONALITY [--scale S] [--set K=V ...]
  fbdriver.py prealloc PERSONALITY --dir D [--scale S] [--set K=V] [--seed N]
  fbdriver.py run      PERSONALITY --dir D [--scale S] [--set K=V] [--seed N]
                       [--duration S] [--choice uniform|zipf] [--engine E]
                       [--ready FILE --go FILE]

Fixed-work workloads (one job, timed as a whole or per I/O):

  fbdriver.py untar    --tar FILE --dir D          (GNU tar -xf)
  fbdriver.py lslr     --dir D                     (ls -lR)
  fbdriver.py genproject --dir D [--sources N] [--headers H]
  fbdriver.py build    --dir D [--jobs J] [--emulate]   (make -jJ with cc)
  fbdriver.py mkfile   --path P --size BYTES
  fbdriver.py seqread  --path P [--iosize BYTES]

Every timed command accepts --ready FILE --go FILE: it prepares without
touching the file system under test, creates READY, waits for GO to appear
(the runner snapshots the server's counters in between), then starts the
clock.  Report keys: workload, engine, elapsed_s, ops, errors, bytes_read,
bytes_written, latency ("per-op": every op timed; "per-item": only the
elapsed time of the whole job is known; "mean-only": filebench), total and
flowops (ops, lat_sum_s, lat_max_s, hist: {bucket: count}; bucket b holds
latencies in [BASE**b, BASE**(b+1)) microseconds).
"""

import argparse
import bisect
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

HIST_BASE = 1.04          # histogram bucket ratio: p99 to within 4 %
KIB = 1024
MIB = 1024 * 1024

# ------------------------------------------------------------ personalities
#
# Parameters follow the names of Filebench's workload files.  "filebench" is
# the stock personality; "full" is what `make bench` runs: the same file
# counts where they fit (webserver, varmail), fewer files where the stock set
# is gigabytes (fileserver, webproxy), and 16 threads instead of 50-100
# because a UML guest has one slow CPU; "smoke" is a few seconds' worth.

PERSONALITIES = {
    "webserver": {
        "nfiles": 1000, "meandirwidth": 20, "meanfilesize": 16 * KIB,
        "nthreads": 100, "iosize": MIB, "meanappendsize": 16 * KIB,
        "prealloc": 100, "logfiles": 1,
    },
    "varmail": {
        "nfiles": 1000, "meandirwidth": 1000000, "meanfilesize": 16 * KIB,
        "nthreads": 16, "iosize": MIB, "meanappendsize": 16 * KIB,
        "prealloc": 80,
    },
    "fileserver": {
        "nfiles": 10000, "meandirwidth": 20, "meanfilesize": 128 * KIB,
        "nthreads": 50, "iosize": MIB, "meanappendsize": 16 * KIB,
        "prealloc": 80,
    },
    "webproxy": {
        "nfiles": 10000, "meandirwidth": 1000000, "meanfilesize": 16 * KIB,
        "nthreads": 100, "iosize": MIB, "meaniosize": 16 * KIB,
        "prealloc": 80,
    },
}
PERSONALITIES["webserver-zipf"] = dict(PERSONALITIES["webserver"])

SCALES = {
    "filebench": {"duration": 60},
    "full": {
        "duration": 60,
        "webserver": {"nthreads": 16},
        "webserver-zipf": {"nthreads": 16},
        "varmail": {"nthreads": 16},
        "fileserver": {"nfiles": 1000, "nthreads": 16},
        "webproxy": {"nfiles": 2000, "nthreads": 16},
    },
    "smoke": {
        "duration": 10,
        "webserver": {"nfiles": 100, "nthreads": 4},
        "webserver-zipf": {"nfiles": 100, "nthreads": 4},
        "varmail": {"nfiles": 100, "nthreads": 4},
        "fileserver": {"nfiles": 100, "meanfilesize": 32 * KIB,
                       "nthreads": 4},
        "webproxy": {"nfiles": 100, "nthreads": 4},
    },
}

GAMMA_SHAPE = 1.5


def parse_size(text):
    """'16k' -> 16384; plain integers pass through."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)\s*", str(text))
    if not m:
        raise ValueError("bad size %r" % text)
    mult = {"": 1, "k": KIB, "m": MIB, "g": 1024 * MIB}[m.group(2).lower()]
    return int(m.group(1)) * mult


def resolve_params(personality, scale, sets):
    if personality not in PERSONALITIES:
        raise SystemExit("unknown personality %r (one of %s)" %
                         (personality, ", ".join(sorted(PERSONALITIES))))
    if scale not in SCALES:
        raise SystemExit("unknown scale %r (one of %s)" %
                         (scale, ", ".join(SCALES)))
    params = dict(PERSONALITIES[personality])
    params["duration"] = SCALES[scale]["duration"]
    params.update(SCALES[scale].get(personality, {}))
    for item in sets or []:
        key, _, value = item.partition("=")
        if key not in params:
            raise SystemExit("unknown parameter %r for %s" % (key, personality))
        params[key] = parse_size(value)
    return params


def flowops_of(personality, p):
    """The personality's flowop loop: (name, kind, attributes)."""
    fo = []
    if personality.startswith("webserver"):
        for i in range(1, 11):
            fo += [("openfile%d" % i, "openfile", {"fileset": "big", "fd": 1}),
                   ("readfile%d" % i, "readwholefile",
                    {"fd": 1, "iosize": p["iosize"]}),
                   ("closefile%d" % i, "closefile", {"fd": 1})]
        fo.append(("appendlog", "appendfilerand",
                   {"fileset": "log", "fd": 11,
                    "iosize": p["meanappendsize"]}))
    elif personality == "varmail":
        a = p["meanappendsize"]
        fo = [("deletefile1", "deletefile", {"fileset": "big"}),
              ("createfile2", "createfile", {"fileset": "big", "fd": 1}),
              ("appendfilerand2", "appendfilerand", {"fd": 1, "iosize": a}),
              ("fsyncfile2", "fsync", {"fd": 1}),
              ("closefile2", "closefile", {"fd": 1}),
              ("openfile3", "openfile", {"fileset": "big", "fd": 1}),
              ("readfile3", "readwholefile", {"fd": 1, "iosize": p["iosize"]}),
              ("appendfilerand3", "appendfilerand", {"fd": 1, "iosize": a}),
              ("fsyncfile3", "fsync", {"fd": 1}),
              ("closefile3", "closefile", {"fd": 1}),
              ("openfile4", "openfile", {"fileset": "big", "fd": 1}),
              ("readfile4", "readwholefile", {"fd": 1, "iosize": p["iosize"]}),
              ("closefile4", "closefile", {"fd": 1})]
    elif personality == "fileserver":
        fo = [("createfile1", "createfile", {"fileset": "big", "fd": 1}),
              ("wrtfile1", "writewholefile", {"fd": 1, "iosize": p["iosize"]}),
              ("closefile1", "closefile", {"fd": 1}),
              ("openfile1", "openfile", {"fileset": "big", "fd": 1}),
              ("appendfilerand1", "appendfilerand",
               {"fd": 1, "iosize": p["meanappendsize"]}),
              ("closefile2", "closefile", {"fd": 1}),
              ("openfile2", "openfile", {"fileset": "big", "fd": 1}),
              ("readfile1", "readwholefile", {"fd": 1, "iosize": p["iosize"]}),
              ("closefile3", "closefile", {"fd": 1}),
              ("deletefile1", "deletefile", {"fileset": "big"}),
              ("statfile1", "statfile", {"fileset": "big"})]
    elif personality == "webproxy":
        fo = [("deletefile1", "deletefile", {"fileset": "big"}),
              ("createfile1", "createfile", {"fileset": "big", "fd": 1}),
              ("appendfilerand1", "appendfilerand",
               {"fd": 1, "iosize": p["meaniosize"]}),
              ("closefile1", "closefile", {"fd": 1})]
        for i in range(2, 7):
            fo += [("openfile%d" % i, "openfile", {"fileset": "big", "fd": 1}),
                   ("readfile%d" % i, "readwholefile",
                    {"fd": 1, "iosize": p["iosize"]}),
                   ("closefile%d" % i, "closefile", {"fd": 1})]
    return fo


# ------------------------------------------------------------ file sets

def gamma(rng, mean):
    """Gamma variate with Filebench's shape 1.5 and the given mean."""
    return rng.gammavariate(GAMMA_SHAPE, mean / GAMMA_SHAPE)


class FileSet:
    """A Filebench-style file set: a directory tree under DIR/NAME whose
    directory widths are gamma(meandirwidth) and whose files have gamma
    (meanfilesize) sizes.  Deterministic for a given seed, so the preparation
    (prealloc, possibly on the server) and the run agree on every name.
    Entry state (exists, busy) is kept in memory during a run, as Filebench
    does."""

    def __init__(self, root, name, entries, meandirwidth, meanfilesize,
                 prealloc_pct, seed, readonly=False):
        rng = random.Random("%s/%s/%d" % (name, seed, entries))
        self.root = os.path.join(root, name)
        self.readonly = readonly
        self.paths, self.dirs = self._layout(rng, entries, meandirwidth)
        self.sizes = [max(1, int(gamma(rng, meanfilesize)))
                      for _ in range(entries)]
        npre = int(round(entries * prealloc_pct / 100.0))
        pre = set(rng.sample(range(entries), npre)) if npre < entries \
            else set(range(entries))
        self.preallocated = pre
        self.lock = threading.Lock()
        self.exists = sorted(pre)                   # dense list for picking
        self.pos = {i: k for k, i in enumerate(self.exists)}
        self.free = [i for i in range(entries) if i not in pre]
        self.busy = set()
        self.zipf_cdf = None

    def _layout(self, rng, entries, width):
        # Bottom-up: files are grouped into leaf directories of gamma(width)
        # entries, those into parents the same way, until one level fits
        # under the file set's root.
        def group(n):
            sizes = []
            while sum(sizes) < n:
                sizes.append(max(1, int(round(gamma(rng, width)))))
            sizes[-1] -= sum(sizes) - n
            return [s for s in sizes if s > 0]
        levels = []       # levels[k][j]: children of the j-th node of level k
        n = entries
        while True:
            g = group(n)
            levels.append(g)
            if len(g) <= max(1, width) or len(levels) > 8:
                break
            n = len(g)
        # Top-down: the top level's nodes sit under the root; each node of
        # level k holds levels[k][j] nodes of level k-1; level 0 holds files.
        names = ["%08d" % (j + 1) for j in range(len(levels[-1]))]
        for k in range(len(levels) - 1, 0, -1):
            children = []
            for parent, count in zip(names, levels[k]):
                for _ in range(count):
                    children.append("%s/%08d" % (parent, len(children) + 1))
            names = children
        prefixes = names
        all_dirs = set()
        paths = []
        for d, count in zip(prefixes, levels[0]):
            parts = d.split("/")
            for i in range(1, len(parts) + 1):
                all_dirs.add("/".join(parts[:i]))
            for _ in range(count):
                paths.append("%s/%08d" % (d, len(paths) + 1))
        return paths, sorted(all_dirs, key=lambda s: (s.count("/"), s))

    def path(self, i):
        return os.path.join(self.root, self.paths[i])

    def prealloc(self, block):
        for d in self.dirs:
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        for i in sorted(self.preallocated):
            write_file(self.path(i), self.sizes[i], block)

    def set_zipf(self, s, rng):
        # Popularity rank r (1..n) gets weight 1/r**s; ranks are assigned to
        # files by a seeded shuffle.
        order = list(range(len(self.paths)))
        rng.shuffle(order)
        self.zipf_order = order
        acc, cdf = 0.0, []
        for r in range(1, len(order) + 1):
            acc += 1.0 / r ** s
            cdf.append(acc)
        self.zipf_cdf = [c / acc for c in cdf]

    def pick_existing(self, rng, choice):
        """An existing entry; marked busy unless the set is read-only (then
        threads may share a file, as readers of a web server do)."""
        with self.lock:
            if not self.exists:
                return None
            for _ in range(64):
                if choice == "zipf" and self.zipf_cdf:
                    r = bisect.bisect_left(self.zipf_cdf, rng.random())
                    i = self.zipf_order[min(r, len(self.zipf_order) - 1)]
                    if i not in self.pos:
                        continue
                else:
                    i = self.exists[rng.randrange(len(self.exists))]
                if self.readonly:
                    return i
                if i not in self.busy:
                    self.busy.add(i)
                    return i
            return None

    def pick_free(self, rng):
        with self.lock:
            for _ in range(64):
                if not self.free:
                    return None
                k = rng.randrange(len(self.free))
                i = self.free[k]
                if i in self.busy:
                    continue
                self.free[k] = self.free[-1]
                self.free.pop()
                self.busy.add(i)
                return i
            return None

    def unpick_free(self, i):
        with self.lock:
            self.busy.discard(i)
            self.free.append(i)

    def mark_exists(self, i):
        with self.lock:
            if i not in self.pos:
                self.pos[i] = len(self.exists)
                self.exists.append(i)

    def mark_deleted(self, i):
        with self.lock:
            k = self.pos.pop(i, None)
            if k is not None:
                last = self.exists.pop()
                if last != i:
                    self.exists[k] = last
                    self.pos[last] = k
            self.free.append(i)

    def release(self, i):
        with self.lock:
            self.busy.discard(i)


def write_file(path, size, block):
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def filesets_of(personality, p, root, seed):
    readonly = personality.startswith("webserver")
    sets = {"big": FileSet(root, "bigfileset", p["nfiles"], p["meandirwidth"],
                           p["meanfilesize"], p["prealloc"], seed, readonly)}
    if personality.startswith("webserver"):
        sets["log"] = FileSet(root, "logfiles", p["logfiles"],
                              p["meandirwidth"], p["meanfilesize"], 100, seed)
    return sets


# ------------------------------------------------------------ statistics

class Stat:
    __slots__ = ("ops", "errors", "lat_sum", "lat_max", "hist", "kind")

    def __init__(self, kind=""):
        self.ops = 0
        self.errors = 0
        self.lat_sum = 0.0
        self.lat_max = 0.0
        self.hist = {}
        self.kind = kind

    def add(self, seconds):
        self.ops += 1
        self.lat_sum += seconds
        if seconds > self.lat_max:
            self.lat_max = seconds
        us = seconds * 1e6
        b = int(math.log(us, HIST_BASE)) if us >= 1 else 0
        self.hist[b] = self.hist.get(b, 0) + 1

    def merge(self, other):
        self.ops += other.ops
        self.errors += other.errors
        self.lat_sum += other.lat_sum
        self.lat_max = max(self.lat_max, other.lat_max)
        for b, c in other.hist.items():
            self.hist[b] = self.hist.get(b, 0) + c

    def as_dict(self):
        d = {"ops": self.ops, "errors": self.errors,
             "lat_sum_s": self.lat_sum, "lat_max_s": self.lat_max,
             "hist": {str(b): c for b, c in sorted(self.hist.items())}}
        if self.kind:
            d["kind"] = self.kind
        if self.ops:
            d["lat_mean_ms"] = self.lat_sum / self.ops * 1e3
            d["lat_p99_ms"] = hist_quantile(self.hist, 0.99)
        return d


def hist_quantile(hist, q):
    """Quantile q of a bucket histogram, in ms (bucket midpoint)."""
    total = sum(hist.values())
    if not total:
        return None
    want = q * total
    acc = 0
    for b in sorted(int(k) for k in hist):
        acc += hist[b] if b in hist else hist[str(b)]
        if acc >= want:
            lo = HIST_BASE ** b
            return lo * (1 + HIST_BASE) / 2 / 1000.0
    return None


# ------------------------------------------------------------ barrier

def wait_for_go(args):
    """Create READY, wait for GO (the runner snapshots counters between)."""
    if getattr(args, "ready", None):
        with open(args.ready + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(args.ready + ".tmp", args.ready)
    if getattr(args, "go", None):
        deadline = time.monotonic() + args.go_timeout
        while not os.path.exists(args.go):
            if time.monotonic() > deadline:
                raise SystemExit("fbdriver: no go signal after %d s" %
                                 args.go_timeout)
            time.sleep(0.02)


def report(obj):
    json.dump(obj, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    sys.stdout.flush()


# ------------------------------------------------------------ python engine

class Worker(threading.Thread):
    def __init__(self, idx, flowops, sets, choice, seed, stop_at, block):
        super().__init__(daemon=True)
        self.flowops = flowops
        self.sets = sets
        self.choice = choice
        self.rng = random.Random("%d/%d" % (seed, idx))
        self.stop_at = stop_at
        self.block = block
        self.stats = {name: Stat(kind) for name, kind, _ in flowops}
        self.fds = {}                  # fd number -> (fileset key, entry, os fd)
        self.bytes_read = 0
        self.bytes_written = 0
        self.error_samples = []

    def run(self):
        try:
            while time.monotonic() < self.stop_at:
                for name, kind, attrs in self.flowops:
                    if time.monotonic() >= self.stop_at:
                        break
                    self.one(name, kind, attrs)
        finally:
            for key, entry, fd in self.fds.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
                if entry is not None:
                    self.sets[key].release(entry)

    def one(self, name, kind, attrs):
        st = self.stats[name]
        t0 = time.perf_counter()
        try:
            done = getattr(self, "op_" + kind)(attrs)
        except OSError as err:
            st.errors += 1
            if len(self.error_samples) < 5:
                self.error_samples.append("%s: %s" % (name, err))
            # A failed op leaves no half-open descriptor behind.
            fdn = attrs.get("fd")
            if kind in ("openfile", "createfile") and fdn in self.fds:
                self.drop_fd(fdn)
            return
        if done:
            st.add(time.perf_counter() - t0)

    def drop_fd(self, fdn):
        key, entry, fd = self.fds.pop(fdn)
        try:
            os.close(fd)
        except OSError:
            pass
        if entry is not None:
            self.sets[key].release(entry)

    # Each op returns True when it did something (a pick can find nothing,
    # e.g. all files busy or deleted; Filebench then also skips).

    def op_openfile(self, a):
        fs = self.sets[a["fileset"]]
        if a["fd"] in self.fds:
            self.drop_fd(a["fd"])
        i = fs.pick_existing(self.rng, self.choice)
        if i is None:
            return False
        flags = os.O_RDONLY if fs.readonly else os.O_RDWR
        try:
            fd = os.open(fs.path(i), flags)
        except OSError:
            if not fs.readonly:
                fs.release(i)
            raise
        self.fds[a["fd"]] = (a["fileset"], None if fs.readonly else i, fd)
        return True

    def op_createfile(self, a):
        fs = self.sets[a["fileset"]]
        if a["fd"] in self.fds:
            self.drop_fd(a["fd"])
        i = fs.pick_free(self.rng)
        if i is None:
            return False
        try:
            # As Filebench: O_CREAT on a name that does not exist.
            fd = os.open(fs.path(i), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            fs.unpick_free(i)
            raise
        fs.mark_exists(i)
        self.fds[a["fd"]] = (a["fileset"], i, fd)
        return True

    def op_closefile(self, a):
        if a["fd"] not in self.fds:
            return False
        key, entry, fd = self.fds.pop(a["fd"])
        if entry is not None:
            self.sets[key].release(entry)
        os.close(fd)
        return True

    def op_readwholefile(self, a):
        if a["fd"] not in self.fds:
            return False
        fd = self.fds[a["fd"]][2]
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            data = os.read(fd, a["iosize"])
            if not data:
                break
            self.bytes_read += len(data)
        return True

    def op_writewholefile(self, a):
        if a["fd"] not in self.fds:
            return False
        key, entry, fd = self.fds[a["fd"]]
        left = self.sets[key].sizes[entry]
        os.lseek(fd, 0, os.SEEK_SET)
        while left > 0:
            n = os.write(fd, self.block[:min(left, a["iosize"])])
            left -= n
            self.bytes_written += n
        return True

    def op_appendfilerand(self, a):
        fdn = a["fd"]
        if fdn not in self.fds:
            if "fileset" not in a:
                return False
            # Filebench opens a file of the named set on first use and keeps
            # it open (webserver's shared log file).
            fs = self.sets[a["fileset"]]
            i = self.rng.randrange(len(fs.paths))
            self.fds[fdn] = (a["fileset"], None,
                             os.open(fs.path(i), os.O_RDWR | os.O_CREAT,
                                     0o644))
        fd = self.fds[fdn][2]
        n = self.rng.randint(1, a["iosize"])
        os.lseek(fd, 0, os.SEEK_END)
        self.bytes_written += os.write(fd, self.block[:n])
        return True

    def op_fsync(self, a):
        if a["fd"] not in self.fds:
            return False
        os.fsync(self.fds[a["fd"]][2])
        return True

    def op_deletefile(self, a):
        fs = self.sets[a["fileset"]]
        i = fs.pick_existing(self.rng, "uniform")
        if i is None:
            return False
        try:
            os.unlink(fs.path(i))
        except OSError:
            fs.release(i)
            raise
        fs.mark_deleted(i)
        fs.release(i)
        return True

    def op_statfile(self, a):
        fs = self.sets[a["fileset"]]
        i = fs.pick_existing(self.rng, "uniform")
        if i is None:
            return False
        try:
            os.stat(fs.path(i))
        finally:
            fs.release(i)
        return True


def run_python(args, personality, p):
    seed = args.seed
    sets = filesets_of(personality, p, args.dir, seed)
    if args.choice == "zipf":
        sets["big"].set_zipf(args.zipf_s, random.Random(seed))
    flowops = flowops_of(personality, p)
    block = os.urandom(max(p["iosize"], MIB))
    # Threads wait for the GIL after each system call; a short switch
    # interval keeps that wait (part of every measured latency, the same
    # for every configuration) near 1 ms instead of 5 ms.
    sys.setswitchinterval(0.001)
    wait_for_go(args)
    t0 = time.monotonic()
    stop_at = t0 + p["duration"]
    workers = [Worker(k, flowops, sets, args.choice, seed, stop_at, block)
               for k in range(p["nthreads"])]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - t0
    per = {name: Stat(kind) for name, kind, _ in flowops}
    total = Stat()
    errors = []
    for w in workers:
        for name, st in w.stats.items():
            per[name].merge(st)
            total.merge(st)
        errors += w.error_samples
    return {
        "workload": "webserver-zipf" if personality == "webserver" and
        args.choice == "zipf" else personality,
        "engine": "python",
        "params": p,
        "choice": args.choice,
        "elapsed_s": elapsed,
        "ops": total.ops,
        "errors": total.errors,
        "error_samples": errors[:10],
        "bytes_read": sum(w.bytes_read for w in workers),
        "bytes_written": sum(w.bytes_written for w in workers),
        "latency": "per-op",
        "total": total.as_dict(),
        "flowops": {name: st.as_dict() for name, st in per.items()},
    }


# ------------------------------------------------------------ filebench engine
#
# Filebench runs in two places.  On the server (the knfsd guest, or the host
# for the VFS remote) `prealloc` runs the personality's script with `create
# files` instead of `run`: Filebench lays its file sets out and writes them
# where neither proxy sees them, and the driver writes the tree's listing.
# In each client `run` makes a local shadow of that listing (empty files in
# the guest's tmpfs) and runs one Filebench whose script says
#
#   create files                 (trusttree: Filebench opens every file it
#                                 believes exists, here in the shadow)
#   set $dir=<the mount>         (the file sets' paths follow the variable)
#   system "fbdriver.py barrier" (ready, wait for the runner's go)
#   run DURATION
#
# so the client's Filebench touches the mount only in the timed phase.  Both
# Filebench processes lay the sets out alike: Filebench never seeds its
# generators (Mersenne Twister's default seed, rand() without srand), so the
# same script gives the same names, sizes and preallocated entries.

WORKLOAD_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "workloads")
# Filebench's per-flowop latency histogram (`enable lathist`): bucket i
# counts latencies in [2**(i-1), 2**i) ns.
FB_FLOWOP = re.compile(r"^(\S+)\s+(\d+)ops\s+([\d.]+)ops/s\s+([\d.]+)mb/s\s+"
                       r"([\d.]+)ms/op(?:\s+\[[^\]]*\])?(?:\s+\[([\d\s]*)\])?")
FB_SUMMARY = re.compile(r"IO Summary:\s+(\d+) ops\s+([\d.]+) ops/s\s+"
                        r"(\d+)/(\d+) rd/wr\s+([\d.]+)mb/s\s+([\d.]+)ms/op")
FB_RAN = re.compile(r"Run took (\d+) seconds")
FB_DEFINED = re.compile(r"^\s*flowop\s+(\w+)\s+name=([\w-]+)", re.M)
READ_KINDS = ("readwholefile", "read")


def zipf_randtable(nfiles, s):
    """Filebench tabular randvar approximating Zipf(s) over file indexes
    0..nfiles-1: power-of-two index ranges weighted by their Zipf mass
    (integer percentages summing to 100)."""
    ranges, lo = [], 0
    while lo < nfiles:
        hi = min(nfiles - 1, max(lo, 2 * lo))
        ranges.append((lo, hi))
        lo = hi + 1
    mass = [sum(1.0 / (k + 1) ** s for k in range(a, b + 1)) for a, b in ranges]
    total = sum(mass)
    pct = [max(1, int(round(100 * m / total))) for m in mass]
    pct[pct.index(max(pct))] += 100 - sum(pct)
    return "{" + ", ".join("{%d, %d, %d}" % (w, a, b)
                           for w, (a, b) in zip(pct, ranges)) + "}"


def filebench_script(workload, p, zipf_s, setdir):
    """bench/workloads/WORKLOAD.f with the scale's values, $dir and $logdir
    set to SETDIR and without its `run` line (the caller appends what the
    phase needs)."""
    with open(os.path.join(WORKLOAD_DIR, workload + ".f")) as f:
        text = f.read()
    values = dict(p)
    values["dir"] = values["logdir"] = setdir
    for key, value in values.items():
        text = re.sub(r"(?m)^set \$%s\s*=.*$" % re.escape(key),
                      lambda _m, k=key, v=value: "set $%s=%s" % (k, v), text)
    text = re.sub(r"randtable\s*=\s*\{\{.*?\}\}",
                  "randtable = " + zipf_randtable(p["nfiles"], zipf_s),
                  text, flags=re.S)
    return re.sub(r"(?m)^run\b.*$", "", text)


def filebench_argv(filebench, script):
    # Filebench's processes share memory mapped at fixed addresses: no
    # address-space randomization for this process tree (the guest's
    # setting stays as it is).
    return ["setarch", os.uname().machine, "-R", filebench, "-f", script]


def cmd_prealloc(args, workload, p):
    """Creates the file sets under DIR with Filebench and writes their
    listing (`d PATH` / `f PATH`, relative to DIR) to LIST."""
    os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fbdriver-")
    try:
        script = os.path.join(work, "create.f")
        with open(script, "w") as f:
            f.write(filebench_script(workload, p, args.zipf_s, args.dir))
            f.write("create files\n")
        proc = subprocess.run(filebench_argv(args.filebench, script), cwd=work,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = proc.stdout.decode(errors="replace")
        if proc.returncode != 0 or \
                "pre-allocation of filesets completed" not in out:
            sys.stderr.write(out)
            raise SystemExit("fbdriver: filebench did not create the file "
                             "sets in %s" % args.dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    files = 0
    with open(args.list + ".tmp", "w") as f:
        for root, dirs, names in os.walk(args.dir):
            rel = os.path.relpath(root, args.dir)
            for d in sorted(dirs):
                f.write("d %s\n" % os.path.normpath(os.path.join(rel, d)))
            for n in sorted(names):
                f.write("f %s\n" % os.path.normpath(os.path.join(rel, n)))
                files += 1
    os.rename(args.list + ".tmp", args.list)
    return {"prealloc": args.dir, "files": files, "engine": "filebench"}


def make_shadow(listing, root):
    """Empty files and directories named as in LISTING under ROOT."""
    with open(listing) as f:
        for line in f:
            kind, _, rel = line.rstrip("\n").partition(" ")
            path = os.path.join(root, rel)
            if kind == "d":
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "w").close()


def lathist_to_hist(counts):
    """Filebench's power-of-two ns buckets -> our HIST_BASE us buckets
    (each count at its bucket's geometric middle: p99 to within a factor
    of 1.4)."""
    hist = {}
    for i, c in enumerate(counts):
        if not c:
            continue
        us = (2.0 ** (i - 0.5)) / 1000.0
        b = int(math.log(us, HIST_BASE)) if us >= 1 else 0
        hist[str(b)] = hist.get(str(b), 0) + c
    return hist


def parse_filebench(out, workload, p, kinds, errors):
    m = FB_SUMMARY.search(out)
    if not m:
        raise SystemExit("fbdriver: no IO Summary in filebench's output")
    ran = FB_RAN.search(out)
    if not ran or int(ran.group(1)) < p["duration"]:
        raise SystemExit("fbdriver: filebench ran %s s of %d" % (
            ran.group(1) if ran else "?", p["duration"]))
    ops, rate = int(m.group(1)), float(m.group(2))
    elapsed = ops / rate if rate > 0 else float(ran.group(1))
    flowops, total = {}, Stat()
    nread = nwritten = 0
    for line in out.splitlines():
        f = FB_FLOWOP.match(re.sub(r"^[\d.]+:\s*", "", line.strip()))
        if not f or f.group(1) not in kinds:
            continue
        n, ms = int(f.group(2)), float(f.group(5))
        hist = lathist_to_hist([int(x) for x in (f.group(6) or "").split()])
        st = {"ops": n, "errors": 0, "lat_sum_s": n * ms / 1e3, "hist": hist,
              "kind": kinds[f.group(1)]}
        if n:
            st["lat_mean_ms"] = ms
        flowops[f.group(1)] = st
        total.ops += n
        total.lat_sum += n * ms / 1e3
        for b, c in hist.items():
            total.hist[int(b)] = total.hist.get(int(b), 0) + c
        nbytes = float(f.group(4)) * MIB * elapsed
        if kinds[f.group(1)] in READ_KINDS:
            nread += nbytes
        else:
            nwritten += nbytes
    return {
        "workload": workload, "engine": "filebench", "params": p,
        "elapsed_s": elapsed, "ops": ops, "errors": errors,
        "bytes_read": int(nread), "bytes_written": int(nwritten),
        "mb_per_s": float(m.group(5)), "latency": "per-op",
        "total": total.as_dict(), "flowops": flowops,
    }


def run_filebench(args, workload, p):
    work = tempfile.mkdtemp(prefix="fbdriver-")
    try:
        shadow = os.path.join(work, "shadow")
        make_shadow(args.list, shadow)
        text = filebench_script(workload, p, args.zipf_s, shadow)
        kinds = {name: kind for kind, name in FB_DEFINED.findall(text)}
        barrier = "python3 -B %s barrier" % os.path.abspath(__file__)
        if args.ready:
            barrier += " --ready %s --go %s --go-timeout %d" % (
                args.ready, args.go, args.go_timeout)
        script = os.path.join(work, "run.f")
        with open(script, "w") as f:
            f.write(re.sub(r"(?m)^(define fileset .*)$", r"\1,trusttree", text))
            f.write("enable lathist\ncreate files\n")
            f.write("set $dir=%s\nset $logdir=%s\n" % (
                args.dir, args.logdir or args.dir))
            f.write('system "%s"\nrun %d\n' % (barrier, p["duration"]))
        proc = subprocess.run(filebench_argv(args.filebench, script), cwd=work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = proc.stdout.decode(errors="replace")
        err = proc.stderr.decode(errors="replace")
        sys.stderr.write(out + err)
        if args.go and not os.path.exists(args.go):
            raise SystemExit("fbdriver: filebench ran without the go signal")
        # Filebench exits 0 whatever happened; its errors go to stderr.
        errors = sum(1 for line in err.splitlines() if line.strip())
        res = parse_filebench(out, workload, p, kinds, errors)
        if errors:
            res["error_samples"] = err.splitlines()[:10]
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cmd_barrier(args):
    """Called by Filebench's `system` between creating its file sets and
    its run: ready, then wait for go.  (Filebench ignores the command's
    exit status: run_filebench checks that go was given.)"""
    wait_for_go(args)


def drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


# ------------------------------------------------------------ fixed work

def timed_job(args, workload, argv, items, bytes_read=0, bytes_written=0,
              cwd=None):
    wait_for_go(args)
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE)
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit("fbdriver: %s exited %d" % (argv[0], proc.returncode))
    if callable(items):
        items = items(proc.stdout)
    return item_report(workload, "tool", elapsed, items, bytes_read,
                       bytes_written)


def item_report(workload, engine, elapsed, items, bytes_read, bytes_written):
    total = {"ops": items, "errors": 0, "lat_sum_s": elapsed, "hist": {}}
    if items:
        total["lat_mean_ms"] = elapsed / items * 1e3
    return {"workload": workload, "engine": engine, "elapsed_s": elapsed,
            "ops": items, "errors": 0, "bytes_read": bytes_read,
            "bytes_written": bytes_written, "latency": "per-item",
            "total": total, "flowops": {}}


def cmd_untar(args):
    with tarfile.open(args.tar) as t:
        members = t.getmembers()
    size = sum(m.size for m in members if m.isfile())
    if args.mkdir:
        os.makedirs(args.dir, exist_ok=True)
    return timed_job(args, "untar", ["tar", "-xf", args.tar, "-C", args.dir],
                     len(members), 0, size)


def cmd_lslr(args):
    def entries(out):
        return sum(1 for line in out.splitlines()
                   if line[:1] in (b"-", b"d", b"l"))
    return timed_job(args, "lslr", ["ls", "-lR", args.dir], entries)


# The generated C project: SOURCES translation units in src/, HEADERS
# headers in include/ (every unit includes common.h and three others, so the
# headers are shared and read again and again), a Makefile with explicit
# header dependencies (make stats every header once per unit).

def cmd_genproject(args):
    rng = random.Random(args.seed)
    inc = os.path.join(args.dir, "include")
    src = os.path.join(args.dir, "src")
    os.makedirs(inc, exist_ok=True)
    os.makedirs(src, exist_ok=True)
    headers = ["h%02d.h" % k for k in range(args.headers)]
    with open(os.path.join(inc, "common.h"), "w") as f:
        f.write("#ifndef COMMON_H\n#define COMMON_H\n#include <stddef.h>\n")
        for k in range(200):
            f.write("#define COMMON_K%d %d\n" % (k, rng.randrange(1 << 20)))
        f.write("#endif\n")
    for k, h in enumerate(headers):
        with open(os.path.join(inc, h), "w") as f:
            guard = "H%02d_H" % k
            f.write("#ifndef %s\n#define %s\n" % (guard, guard))
            for j in range(60):
                f.write("struct s%d_%d { int a; long b[%d]; };\n"
                        % (k, j, rng.randrange(1, 9)))
                f.write("static inline int f%d_%d(int x) "
                        "{ return x * %d + %d; }\n"
                        % (k, j, rng.randrange(3, 99), rng.randrange(99)))
            f.write("#endif\n")
    deps = []
    for n in range(args.sources):
        used = ["common.h"] + rng.sample(headers, min(3, len(headers)))
        name = "u%03d.c" % n
        with open(os.path.join(src, name), "w") as f:
            for h in used:
                f.write('#include "%s"\n' % h)
            for j in range(30):
                f.write("int u%d_%d(int x) { int y = x; "
                        "for (int i = 0; i < %d; i++) y = y * 31 + i; "
                        "return y ^ %d; }\n"
                        % (n, j, rng.randrange(2, 50), rng.randrange(1 << 16)))
        deps.append("src/u%03d.o: src/%s %s" % (
            n, name, " ".join("include/" + h for h in used)))
    with open(os.path.join(args.dir, "Makefile"), "w") as f:
        f.write("# generated by bench/driver/fbdriver.py genproject\n"
                "CC ?= cc\nCFLAGS ?= -O0 -Iinclude\n"
                "OBJS := $(patsubst %.c,%.o,$(wildcard src/*.c))\n"
                "prog.a: $(OBJS)\n\tar rcs $@ $^\n"
                "%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n")
        f.write("\n".join(deps) + "\n")
    return {"generated": args.dir, "sources": args.sources,
            "headers": args.headers + 1}


def have_compiler():
    return shutil.which("make") is not None and shutil.which("cc") is not None


def cmd_build(args):
    if args.emulate or not have_compiler():
        return emulated_build(args)
    # Count the units after the build (the listing is then warm anyway).
    res = timed_job(args, "build", ["make", "-s", "-j%d" % args.jobs,
                                    "-C", args.dir], 0)
    units = sum(1 for n in os.listdir(os.path.join(args.dir, "src"))
                if n.endswith(".c"))
    res["ops"] = units + 1
    res["total"]["ops"] = units + 1
    res["total"]["lat_mean_ms"] = res["elapsed_s"] / (units + 1) * 1e3
    res["engine"] = "make+cc"
    return res


def emulated_build(args):
    """No compiler in the guest: read what a compiler reads (the unit and
    every header it includes), write an object of twice the unit's size,
    then read all objects and write the archive, JOBS units at a time."""
    wait_for_go(args)
    t0 = time.monotonic()
    src = os.path.join(args.dir, "src")
    units = sorted(n for n in os.listdir(src) if n.endswith(".c"))
    lock = threading.Lock()
    counters = {"r": 0, "w": 0}

    def compile_unit(name):
        path = os.path.join(src, name)
        with open(path, "rb") as f:
            text = f.read()
        nread = len(text)
        for h in re.findall(rb'#include "([^"]+)"', text):
            with open(os.path.join(args.dir, "include", h.decode()), "rb") as f:
                nread += len(f.read())
        obj = path[:-2] + ".o"
        with open(obj, "wb") as f:
            f.write(text * 2)
        with lock:
            counters["r"] += nread
            counters["w"] += 2 * len(text)

    queue = list(units)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                name = queue.pop()
            compile_unit(name)

    threads = [threading.Thread(target=worker) for _ in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(os.path.join(args.dir, "prog.a"), "wb") as out:
        for name in units:
            with open(os.path.join(src, name[:-2] + ".o"), "rb") as f:
                data = f.read()
            out.write(data)
            counters["r"] += len(data)
            counters["w"] += len(data)
    return item_report("build", "emulated", time.monotonic() - t0,
                       len(units) + 1, counters["r"], counters["w"])


def cmd_mkfile(args):
    block = os.urandom(MIB)
    os.makedirs(os.path.dirname(args.path) or ".", exist_ok=True)
    write_file(args.path, args.size, block)
    return {"created": args.path, "size": args.size}


def cmd_seqread(args):
    wait_for_go(args)
    st = Stat("read")
    t0 = time.monotonic()
    nbytes = 0
    fd = os.open(args.path, os.O_RDONLY)
    try:
        while True:
            t = time.perf_counter()
            data = os.read(fd, args.iosize)
            if not data:
                break
            st.add(time.perf_counter() - t)
            nbytes += len(data)
    finally:
        os.close(fd)
    elapsed = time.monotonic() - t0
    return {"workload": "seqread", "engine": "python", "elapsed_s": elapsed,
            "ops": st.ops, "errors": 0, "bytes_read": nbytes,
            "bytes_written": 0, "latency": "per-op", "total": st.as_dict(),
            "flowops": {"read": st.as_dict()}}


# ------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def barrier(p):
        p.add_argument("--ready", help="create this file when prepared")
        p.add_argument("--go", help="start when this file appears")
        p.add_argument("--go-timeout", type=int, default=900)

    def personality(p):
        p.add_argument("personality", choices=sorted(PERSONALITIES))
        p.add_argument("--scale", default="full", choices=list(SCALES))
        p.add_argument("--set", action="append", metavar="K=V",
                       help="override a parameter (nfiles=500, "
                            "meanfilesize=32k, nthreads=8, ...)")
        p.add_argument("--seed", type=int, default=1)

    p = sub.add_parser("params", help="print the resolved parameters")
    personality(p)
    def filebench(p):
        p.add_argument("--filebench", default=shutil.which("filebench"),
                       help="the filebench binary (default: on PATH)")
        p.add_argument("--list", help="the file sets' listing (written by "
                       "prealloc, read by run)")

    p = sub.add_parser("prealloc", help="create the file sets")
    personality(p)
    filebench(p)
    p.add_argument("--dir", required=True)
    p.add_argument("--engine", default="auto",
                   choices=["auto", "python", "filebench"])
    p.add_argument("--zipf-s", type=float, default=1.0)
    p = sub.add_parser("run", help="run a personality")
    personality(p)
    barrier(p)
    filebench(p)
    p.add_argument("--dir", required=True)
    p.add_argument("--logdir", help="webserver's log file set (default DIR)")
    p.add_argument("--duration", type=int)
    p.add_argument("--choice", choices=["uniform", "zipf"])
    p.add_argument("--zipf-s", type=float, default=1.0)
    p.add_argument("--engine", default="auto",
                   choices=["auto", "python", "filebench"])
    p = sub.add_parser("barrier", help="create READY, wait for GO")
    barrier(p)
    p = sub.add_parser("untar", help="tar -xf TAR -C DIR")
    barrier(p)
    p.add_argument("--tar", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--mkdir", action="store_true",
                   help="create DIR first (before READY)")
    p = sub.add_parser("lslr", help="ls -lR DIR")
    barrier(p)
    p.add_argument("--dir", required=True)
    p = sub.add_parser("genproject", help="write the C project")
    p.add_argument("--dir", required=True)
    p.add_argument("--sources", type=int, default=200)
    p.add_argument("--headers", type=int, default=19,
                   help="headers besides common.h (default 19: 20 in all)")
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("build", help="make -jJOBS in DIR")
    barrier(p)
    p.add_argument("--dir", required=True)
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--emulate", action="store_true",
                   help="emulate the compiler's I/O even if cc exists")
    p = sub.add_parser("mkfile", help="write a file of SIZE bytes")
    p.add_argument("--path", required=True)
    p.add_argument("--size", type=parse_size, required=True)
    p = sub.add_parser("seqread", help="read a file sequentially")
    barrier(p)
    p.add_argument("--path", required=True)
    p.add_argument("--iosize", type=parse_size, default=MIB)
    args = ap.parse_args()

    if args.cmd in ("params", "prealloc", "run"):
        p = resolve_params(args.personality, args.scale, args.set)
        if args.cmd == "params":
            report(p)
            return 0
        engine = args.engine
        if engine == "auto":
            engine = "filebench" if args.filebench else "python"
        if engine == "filebench" and not (args.filebench and args.list):
            raise SystemExit("fbdriver: the filebench engine needs "
                             "--filebench and --list")
        if args.cmd == "prealloc" and engine == "filebench":
            report(cmd_prealloc(args, args.personality, p))
            return 0
        if args.cmd == "prealloc":
            sets = filesets_of(args.personality, p, args.dir, args.seed)
            block = os.urandom(MIB)
            for fs in sets.values():
                fs.prealloc(block)
            report({"prealloc": args.dir, "files": sum(
                len(fs.preallocated) for fs in sets.values())})
            return 0
        if args.duration:
            p["duration"] = args.duration
        if args.choice is None:
            args.choice = "zipf" if args.personality.endswith("zipf") \
                else "uniform"
        if engine == "filebench":
            report(run_filebench(args, args.personality, p))
        else:
            report(run_python(args, args.personality, p))
        return 0
    if args.cmd == "barrier":
        cmd_barrier(args)
        return 0
    handler = {"untar": cmd_untar, "lslr": cmd_lslr,
               "genproject": cmd_genproject, "build": cmd_build,
               "mkfile": cmd_mkfile, "seqread": cmd_seqread}[args.cmd]
    report(handler(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
