#!/usr/bin/env python3
"""Where a client's workload threads spend a timed phase (python3,
standard library only; runs inside a lab client guest).

  probe.py SECONDS [--every MS] [--comm NAME ...]

Samples, every MS milliseconds (default 50) for SECONDS, each thread of
the processes named NAME (default: filebench, python3, cc1, make, tar):
its scheduler state (R running or runnable, S sleeping, D in
uninterruptible wait: usually the NFS client waiting on its server) and
its kernel wait channel (/proc/PID/task/TID/wchan; "-" when the kernel
does not say). Prints one JSON object: samples taken, and per (state,
wait channel) the thread-samples counted, most first. A thread runnable
but not running shows as R, like one on the CPU.
"""

import argparse
import collections
import json
import os
import time


def threads_of(comms):
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm not in comms:
            continue
        try:
            tids = os.listdir("/proc/%s/task" % pid)
        except OSError:
            continue
        for tid in tids:
            yield comm, "/proc/%s/task/%s" % (pid, tid)


def sample(comms, counts):
    for comm, task in threads_of(comms):
        try:
            with open(task + "/stat") as f:
                # The state follows the command, which is in parentheses
                # and may hold spaces.
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(task + "/wchan") as f:
                wchan = f.read().strip() or "-"
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
        if wchan == "0":
            wchan = "-"
        counts[(comm, state, wchan)] += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seconds", type=float)
    ap.add_argument("--every", type=float, default=50.0, help="ms")
    ap.add_argument("--comm", nargs="*",
                    default=["filebench", "python3", "cc1", "make", "tar"])
    a = ap.parse_args()
    comms = set(a.comm)
    counts = collections.Counter()
    samples = 0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        sample(comms, counts)
        samples += 1
        time.sleep(a.every / 1000.0)
    print(json.dumps({
        "samples": samples, "every_ms": a.every,
        "threads": [{"comm": c, "state": s, "wchan": w, "count": n}
                    for (c, s, w), n in counts.most_common()]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
