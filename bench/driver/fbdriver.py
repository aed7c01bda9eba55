#!/usr/bin/env python3
"""nache benchmark workload driver (python3, standard library only).

Runs inside a lab client guest (or, for preparation, inside the server guest
or on the host) and prints one JSON report on stdout.  Two families:

Filebench personalities (webserver, webserver-zipf, varmail, fileserver,
webproxy): bench/workloads/*.f run by Filebench (built by
deploy/install-deps.sh into .deps/filebench), their `set` lines rewritten
with the scale's values; see "filebench engine" below for how the file sets
are made on the server and the run is held at the runner's barrier.

  fbdriver.py params   PERSONALITY [--scale S] [--set K=V ...]
  fbdriver.py prealloc PERSONALITY --dir D --list FILE [--filebench PATH]
                       [--scale S] [--set K=V ...]
  fbdriver.py run      PERSONALITY --dir D --list FILE [--logdir D]
                       [--filebench PATH] [--scale S] [--set K=V ...]
                       [--duration S] [--ready FILE --go FILE]
  fbdriver.py barrier  --ready FILE --go FILE   (Filebench calls it)

Fixed-work workloads (one job, timed as a whole or per I/O):

  fbdriver.py untar    --tar FILE --dir D          (GNU tar -xf)
  fbdriver.py lslr     --dir D                     (ls -lR)
  fbdriver.py genproject --dir D [--sources N] [--headers H]
  fbdriver.py build    --dir D [--jobs J] [--emulate]   (make -jJ with cc)
  fbdriver.py mkfile   --path P --size BYTES
  fbdriver.py seqread  --path P [--iosize BYTES]
  fbdriver.py seqwrite --path P --size BYTES [--iosize BYTES]
                                                   (write, then fsync)

Every timed command accepts --ready FILE --go FILE: it prepares without
touching the file system under test, creates READY, waits for GO to appear
(the runner snapshots the server's counters in between), then starts the
clock.  Report keys: workload, engine, elapsed_s, ops, errors, bytes_read,
bytes_written, latency ("per-op": every op timed; "per-item": only the
elapsed time of the whole job is known), total and flowops (ops, lat_sum_s,
lat_max_s, hist: {bucket: count}; bucket b holds latencies in
[BASE**b, BASE**(b+1)) microseconds).
"""

import argparse
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
# Parameters are the `set` variables of bench/workloads/*.f.  "filebench" is
# the stock personality; "full" is what `make bench` runs: the same file
# counts where they fit (webserver, varmail), fewer files where the stock set
# is gigabytes (fileserver, webproxy), and 16 threads instead of 50-100
# because a UML guest has one slow CPU; "smoke" is a few seconds' worth.

PERSONALITIES = {
    "webserver": {
        "nfiles": 1000, "meandirwidth": 20, "meanfilesize": 16 * KIB,
        "nthreads": 100, "iosize": MIB, "meanappendsize": 16 * KIB,
        "logfiles": 1, "seed": 1,
    },
    "varmail": {
        "nfiles": 1000, "meandirwidth": 1000000, "meanfilesize": 16 * KIB,
        "nthreads": 16, "iosize": MIB, "meanappendsize": 16 * KIB,
    },
    "fileserver": {
        "nfiles": 10000, "meandirwidth": 20, "meanfilesize": 128 * KIB,
        "nthreads": 50, "iosize": MIB, "meanappendsize": 16 * KIB,
    },
    "webproxy": {
        "nfiles": 10000, "meandirwidth": 1000000, "meanfilesize": 16 * KIB,
        "nthreads": 100, "iosize": MIB, "meaniosize": 16 * KIB,
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


def write_file(path, size, block):
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


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
    del values["duration"]
    if "seed" in values:
        # erand48 from nearby seeds gives nearby first draws: spread the
        # client numbers over its 48-bit state.
        values["seed"] = (values["seed"] * 0x9E3779B97F4A7C15) % (1 << 48)
    values["dir"] = values["logdir"] = setdir
    for key, value in values.items():
        text, n = re.subn(r"(?m)^set \$%s\s*=.*$" % re.escape(key),
                          lambda _m, k=key, v=value: "set $%s=%s" % (k, v),
                          text)
        if not n and key != "logdir":
            raise SystemExit("fbdriver: %s.f sets no $%s" % (workload, key))
    # The open's index variable: uniform over the set (webserver) or Zipf
    # weights (webserver-zipf), for the scale's $nfiles.
    table = zipf_randtable(p["nfiles"], zipf_s) if workload.endswith("zipf") \
        else "{{100, 0, %d}}" % (p["nfiles"] - 1)
    text = re.sub(r"randtable\s*=\s*\{\{.*?\}\}", "randtable = " + table,
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
    return io_report("seqread", time.monotonic() - t0, {"read": st}, nbytes, 0)


def cmd_seqwrite(args):
    """Writes SIZE bytes into a new file in IOSIZE write()s, then fsync:
    done when the file system says the data is stable (through nache's
    write-through, at the remote)."""
    block = os.urandom(args.iosize)
    wait_for_go(args)
    writes, syncs = Stat("write"), Stat("fsync")
    t0 = time.monotonic()
    nbytes = 0
    fd = os.open(args.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while nbytes < args.size:
            chunk = block[:min(args.iosize, args.size - nbytes)]
            t = time.perf_counter()
            n = os.write(fd, chunk)
            writes.add(time.perf_counter() - t)
            nbytes += n
        t = time.perf_counter()
        os.fsync(fd)
        syncs.add(time.perf_counter() - t)
    finally:
        os.close(fd)
    return io_report("seqwrite", time.monotonic() - t0,
                     {"write": writes, "fsync": syncs}, 0, nbytes)


def io_report(workload, elapsed, stats, bytes_read, bytes_written):
    """The report of a sequential I/O job: stats maps a flowop name to its
    Stat; every op was timed."""
    total = Stat()
    for s in stats.values():
        total.merge(s)
    return {"workload": workload, "engine": "python", "elapsed_s": elapsed,
            "ops": total.ops, "errors": 0, "bytes_read": bytes_read,
            "bytes_written": bytes_written, "latency": "per-op",
            "total": total.as_dict(),
            "flowops": {k: s.as_dict() for k, s in stats.items()}}


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

    def filebench(p):
        p.add_argument("--filebench", default=shutil.which("filebench"),
                       help="the filebench binary (default: on PATH)")
        p.add_argument("--list", required=True,
                       help="the file sets' listing (written by prealloc, "
                       "read by run)")
        p.add_argument("--dir", required=True)
        p.add_argument("--zipf-s", type=float, default=1.0,
                       help="webserver-zipf's exponent")

    p = sub.add_parser("params", help="print the resolved parameters")
    personality(p)
    p = sub.add_parser("prealloc", help="create the file sets")
    personality(p)
    filebench(p)
    p = sub.add_parser("run", help="run a personality")
    personality(p)
    barrier(p)
    filebench(p)
    p.add_argument("--logdir", help="webserver's log file set (default DIR)")
    p.add_argument("--duration", type=int)
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
    p = sub.add_parser("seqwrite", help="write a file sequentially, fsync")
    barrier(p)
    p.add_argument("--path", required=True)
    p.add_argument("--size", type=parse_size, required=True)
    p.add_argument("--iosize", type=parse_size, default=MIB)
    args = ap.parse_args()

    if args.cmd in ("params", "prealloc", "run"):
        p = resolve_params(args.personality, args.scale, args.set)
        if args.cmd == "params":
            report(p)
            return 0
        if not args.filebench:
            raise SystemExit("fbdriver: no filebench on PATH (--filebench)")
        if args.cmd == "prealloc":
            report(cmd_prealloc(args, args.personality, p))
            return 0
        if args.duration:
            p["duration"] = args.duration
        report(run_filebench(args, args.personality, p))
        return 0
    if args.cmd == "barrier":
        cmd_barrier(args)
        return 0
    handler = {"untar": cmd_untar, "lslr": cmd_lslr,
               "genproject": cmd_genproject, "build": cmd_build,
               "mkfile": cmd_mkfile, "seqread": cmd_seqread,
               "seqwrite": cmd_seqwrite}[args.cmd]
    report(handler(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
