#!/usr/bin/env python3
"""How full the link to the server was during a packet capture.

usage: bench/link_use.py CAPTURE.pcap [--port 2049] [--bin-ms 100]
                         [--rate-mbit MBIT] [--from S] [--to S]

Counts the TCP payload bytes sent toward the server (to --port) in bins of
--bin-ms, from the first such byte to the last, and prints the mean rate,
how many bins ran near the link's rate and how many idled, and the longest
idle stretches with their start times (seconds from the capture's first
packet). The link's rate is --rate-mbit, or else the fullest bin's.

Written to find where a write-through stream of WRITEs leaves the WAN link
idle (bench/run.sh CAPTURE=1 keeps a capture of each cell's timed phase);
a snap length that keeps only the headers is enough (payload sizes come
from the IP and TCP headers).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rpc_timeline import segments  # noqa: E402


def bins_toward(path, port, bin_s, t_from=None, t_to=None):
    """(first time, [bytes per bin]) of payload sent to port."""
    start, first, per = None, None, {}
    for t, _src, _sport, _dst, dport, _seq, _payload, n in segments(path):
        if start is None:
            start = t
        rel = t - start
        if dport != port or n == 0:
            continue
        if (t_from is not None and rel < t_from) or (t_to is not None and rel > t_to):
            continue
        if first is None:
            first = rel
        i = int((rel - first) / bin_s)
        per[i] = per.get(i, 0) + n
    if first is None:
        return None, []
    return first, [per.get(i, 0) for i in range(max(per) + 1)]


def idle_stretches(bins, limit):
    """[(first bin, length)] of runs of bins below limit, longest first."""
    runs, i = [], 0
    while i < len(bins):
        if bins[i] < limit:
            j = i
            while j < len(bins) and bins[j] < limit:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return sorted(runs, key=lambda r: (-r[1], r[0]))


def report(first, bins, bin_s, rate_bytes_per_bin):
    lines = []
    total = sum(bins)
    span = len(bins) * bin_s
    full = rate_bytes_per_bin or max(bins)
    lines.append("toward the server: %d bytes in %.2f s (%d bins of %d ms), "
                 "mean %.2f Mbit/s" % (total, span, len(bins),
                                       round(bin_s * 1000),
                                       total * 8 / span / 1e6))
    lines.append("link: %.2f Mbit/s (%s)" % (
        full * 8 / bin_s / 1e6,
        "given" if rate_bytes_per_bin else "the fullest bin"))
    lines.append("mean use: %.1f %% of the link" %
                 (100.0 * total / (full * len(bins))))
    for lo, hi in ((0.9, None), (0.5, 0.9), (0.1, 0.5), (None, 0.1)):
        n = sum(1 for b in bins
                if (lo is None or b >= lo * full) and (hi is None or b < hi * full))
        name = (">= %d %%" % (lo * 100) if hi is None else
                "< %d %%" % (hi * 100) if lo is None else
                "%d-%d %%" % (lo * 100, hi * 100))
        lines.append("bins at %-8s of the link: %5d (%.1f %%)" %
                     (name, n, 100.0 * n / len(bins)))
    runs = idle_stretches(bins, 0.1 * full)
    lines.append("longest stretches under 10 % of the link (start s, ms):")
    for i, n in runs[:10]:
        lines.append("  %8.2f  %6d" % (first + i * bin_s, round(n * bin_s * 1000)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--port", type=int, default=2049)
    ap.add_argument("--bin-ms", type=float, default=100.0)
    ap.add_argument("--rate-mbit", type=float, default=None)
    ap.add_argument("--from", dest="t_from", type=float, default=None)
    ap.add_argument("--to", dest="t_to", type=float, default=None)
    a = ap.parse_args()
    bin_s = a.bin_ms / 1000.0
    first, bins = bins_toward(a.capture, a.port, bin_s, a.t_from, a.t_to)
    if not bins:
        print("link_use: no payload toward port %d" % a.port, file=sys.stderr)
        return 1
    rate = a.rate_mbit * 1e6 / 8 * bin_s if a.rate_mbit else None
    print("\n".join(report(first, bins, bin_s, rate)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
