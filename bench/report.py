#!/usr/bin/env python3
"""Results of the nache benchmark runner (bench/run.sh).

  report.py cell --csv RESULTS.csv --workload W --profile P --clients N
                 --config C --dir CELLDIR [--server knfsd|nache|none]
      Aggregates one cell: the client reports CELLDIR/client*.json (from
      bench/driver/fbdriver.py) and the server counter snapshots
      CELLDIR/{knfsd,nache}.{before,after}; appends rows to RESULTS.csv.

  report.py summarize RUNDIR
      Writes RUNDIR/summary.md (one table per workload, profile and client
      count, configurations side by side) and, when matplotlib is importable,
      RUNDIR/plots/*.png; says so clearly when it is not.

  report.py merge OUTDIR RUNDIR [RUNDIR ...]
      One table from several runs (a matrix run in parts): their
      results.csv rows in OUTDIR/results.csv (a cell measured again in a
      later RUNDIR replaces the earlier one), OUTDIR/params.txt naming
      the runs, then summarize OUTDIR.

  report.py clients CELLDIR [CELLDIR ...]
      What each client of a cell sent during its timed phase, from the
      guests' /proc/self/mountstats snapshots CELLDIR/mountstats.I.before
      and .after (the mount under test only): per NFS operation the RPCs,
      and their mean queue, round-trip and execution times in ms. Where a
      client waited on its server, and for what.

Server op counts: with --server knfsd, the difference of the knfsd guest's
/proc/net/rpc/nfsd between the snapshots ("proc4ops": one counter per NFSv4
operation number, "proc4": NULL and COMPOUND calls).  With --server nache,
nache's own /metrics (nache_upstream_ops_total by op,
nache_upstream_compounds_total).  Standard library only, except the plots.
"""

import argparse
import csv
import glob
import json
import os
import re
import sys

HIST_BASE = 1.04          # must match fbdriver.py

# NFSv4 operation numbers: RFC 7530 (4.0), RFC 8881 (4.1), RFC 7862 (4.2),
# RFC 8276 (extended attributes).
NFS4_OPS = {
    3: "ACCESS", 4: "CLOSE", 5: "COMMIT", 6: "CREATE", 7: "DELEGPURGE",
    8: "DELEGRETURN", 9: "GETATTR", 10: "GETFH", 11: "LINK", 12: "LOCK",
    13: "LOCKT", 14: "LOCKU", 15: "LOOKUP", 16: "LOOKUPP", 17: "NVERIFY",
    18: "OPEN", 19: "OPENATTR", 20: "OPEN_CONFIRM", 21: "OPEN_DOWNGRADE",
    22: "PUTFH", 23: "PUTPUBFH", 24: "PUTROOTFH", 25: "READ", 26: "READDIR",
    27: "READLINK", 28: "REMOVE", 29: "RENAME", 30: "RENEW",
    31: "RESTOREFH", 32: "SAVEFH", 33: "SECINFO", 34: "SETATTR",
    35: "SETCLIENTID", 36: "SETCLIENTID_CONFIRM", 37: "VERIFY", 38: "WRITE",
    39: "RELEASE_LOCKOWNER",
    40: "BACKCHANNEL_CTL", 41: "BIND_CONN_TO_SESSION", 42: "EXCHANGE_ID",
    43: "CREATE_SESSION", 44: "DESTROY_SESSION", 45: "FREE_STATEID",
    46: "GET_DIR_DELEGATION", 47: "GETDEVICEINFO", 48: "GETDEVICELIST",
    49: "LAYOUTCOMMIT", 50: "LAYOUTGET", 51: "LAYOUTRETURN",
    52: "SECINFO_NO_NAME", 53: "SEQUENCE", 54: "SET_SSV", 55: "TEST_STATEID",
    56: "WANT_DELEGATION", 57: "DESTROY_CLIENTID", 58: "RECLAIM_COMPLETE",
    59: "ALLOCATE", 60: "COPY", 61: "COPY_NOTIFY", 62: "DEALLOCATE",
    63: "IO_ADVISE", 64: "LAYOUTERROR", 65: "LAYOUTSTATS",
    66: "OFFLOAD_CANCEL", 67: "OFFLOAD_STATUS", 68: "READ_PLUS", 69: "SEEK",
    70: "WRITE_SAME", 71: "CLONE", 72: "GETXATTR", 73: "SETXATTR",
    74: "LISTXATTRS", 75: "REMOVEXATTR",
}

HEADER = ["workload", "profile", "clients", "config", "metric", "value",
          "unit"]
CONFIG_ORDER = ["direct", "proxyv4", "nache", "nache-wb"]


# ------------------------------------------------------------ counters

def knfsd_counters(text):
    """{'ops': {NAME: n}, 'compounds': n} from /proc/net/rpc/nfsd."""
    ops, compounds = {}, None
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "proc4ops":
            # "proc4ops COUNT v0 v1 ...": v[i] counts operation number i.
            for num, value in enumerate(f[2:]):
                if num in NFS4_OPS:
                    ops[NFS4_OPS[num]] = int(value)
                elif int(value):
                    ops["OP%d" % num] = int(value)
        elif f[0] == "proc4" and len(f) >= 4:
            # "proc4 2 NULL COMPOUND"
            compounds = int(f[3])
    if compounds is None:
        raise ValueError("no proc4 line in knfsd statistics")
    return {"ops": ops, "compounds": compounds}


METRIC_LINE = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$')


def nache_counters(text):
    """{'ops': {OP: n}, 'compounds': n} from nache's /metrics page."""
    ops, compounds, seen = {}, 0, False
    for line in text.splitlines():
        m = METRIC_LINE.match(line.strip())
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        value = float(m.group(3))
        if m.group(1) == "nache_upstream_ops_total":
            op = labels.get("op", "?")
            ops[op] = ops.get(op, 0) + int(value)
            seen = True
        elif m.group(1) == "nache_upstream_compounds_total":
            compounds += int(value)
            seen = True
    if not seen:
        raise ValueError("no nache_upstream_* series in the metrics page")
    return {"ops": ops, "compounds": compounds}


def diff(before, after):
    ops = {}
    for op, n in after["ops"].items():
        d = n - before["ops"].get(op, 0)
        if d:
            ops[op] = d
    return {"ops": ops, "compounds": after["compounds"] - before["compounds"]}


def read_pair(celldir, kind, parse):
    try:
        with open(os.path.join(celldir, kind + ".before")) as f:
            before = parse(f.read())
        with open(os.path.join(celldir, kind + ".after")) as f:
            after = parse(f.read())
    except (OSError, ValueError) as err:
        print("report: %s counters of %s unusable: %s" % (kind, celldir, err),
              file=sys.stderr)
        return None
    return diff(before, after)


# ------------------------------------------------------------ latency

def hist_merge(into, hist):
    for b, c in hist.items():
        into[int(b)] = into.get(int(b), 0) + c


def hist_quantile(hist, q):
    total = sum(hist.values())
    if not total:
        return None
    acc = 0
    for b in sorted(hist):
        acc += hist[b]
        if acc >= q * total:
            return HIST_BASE ** b * (1 + HIST_BASE) / 2 / 1000.0
    return None


def kind_of(name, st):
    return st.get("kind") or re.sub(r"\d+$", "", name)


# ------------------------------------------------------------ cell

def fmt(v):
    if v is None or v == "":
        return ""
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return "%.6g" % v


def cmd_cell(a):
    reports = []
    for path in sorted(glob.glob(os.path.join(a.dir, "client*.json"))):
        try:
            with open(path) as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as err:
            print("report: %s: %s" % (path, err), file=sys.stderr)
    rows = []

    def row(metric, value, unit):
        rows.append([a.workload, a.profile, a.clients, a.config, metric,
                     fmt(value), unit])

    if len(reports) != a.clients:
        print("report: %s: %d of %d client reports" %
              (a.dir, len(reports), a.clients), file=sys.stderr)
        row("failed", 1, "flag")
    if reports:
        ops = sum(r["ops"] for r in reports)
        errors = sum(r.get("errors") or 0 for r in reports)
        duration = max(r["elapsed_s"] for r in reports)
        rate = sum(r["ops"] / r["elapsed_s"] for r in reports
                   if r["elapsed_s"] > 0)
        row("duration_s", duration, "s")
        # Write-back: nache's flush, sent at once after the clients
        # finished, from its start until the remote has everything; and
        # until then from the clients' start.
        flush = os.path.join(a.dir, "flush_s")
        if os.path.exists(flush):
            with open(flush) as f:
                flush_s = float(f.read())
            row("flush_s", flush_s, "s")
            row("remote_complete_s", duration + flush_s, "s")
        row("ops", ops, "ops")
        row("ops_per_s", rate, "ops/s")
        nbytes = [(r.get("bytes_read") or 0) + (r.get("bytes_written") or 0)
                  for r in reports]
        if any(nbytes):
            row("throughput_mb_s", sum(n / r["elapsed_s"] for n, r in
                                       zip(nbytes, reports)) / 1e6, "MB/s")
        elif any(r.get("mb_per_s") for r in reports):
            row("throughput_mb_s", sum(r.get("mb_per_s") or 0
                                       for r in reports) * 1.048576, "MB/s")
        lat_sum = sum(r["total"].get("lat_sum_s", 0) for r in reports)
        per_item = any(r.get("latency") == "per-item" for r in reports)
        if per_item:
            # One job per client: the mean time per item of each client's
            # job, averaged over clients.
            row("latency_mean_ms", sum(r["total"].get("lat_mean_ms", 0)
                                       for r in reports) / len(reports), "ms")
        elif ops:
            row("latency_mean_ms", lat_sum / ops * 1e3, "ms")
        hist = {}
        for r in reports:
            hist_merge(hist, r["total"].get("hist") or {})
        p99 = hist_quantile(hist, 0.99)
        if p99 is not None:
            row("latency_p99_ms", p99, "ms")
        row("errors", errors, "count")
        # Per flowop kind (openfile, readwholefile, ...), all clients.
        kinds = {}
        for r in reports:
            for name, st in (r.get("flowops") or {}).items():
                k = kinds.setdefault(kind_of(name, st),
                                     {"ops": 0, "lat": 0.0, "hist": {}})
                k["ops"] += st.get("ops", 0)
                k["lat"] += st.get("lat_sum_s", 0.0)
                hist_merge(k["hist"], st.get("hist") or {})
        if len(kinds) > 1:
            for k, v in sorted(kinds.items()):
                if not v["ops"]:
                    continue
                row("latency_mean_ms_" + k, v["lat"] / v["ops"] * 1e3, "ms")
                p = hist_quantile(v["hist"], 0.99)
                if p is not None:
                    row("latency_p99_ms_" + k, p, "ms")
    else:
        ops = 0

    server = None
    if a.server == "knfsd":
        server = read_pair(a.dir, "knfsd", knfsd_counters)
    elif a.server == "nache":
        server = read_pair(a.dir, "nache", nache_counters)
    if a.server == "none":
        # Server counters are not readable for this cell (REMOTE=vfs and a
        # configuration other than nache): the rows stay, empty.
        row("server_ops_total", "", "ops")
        row("server_compounds", "", "compounds")
    elif server is not None:
        total = sum(server["ops"].values())
        row("server_ops_total", total, "ops")
        row("server_compounds", server["compounds"], "compounds")
        if ops:
            row("server_ops_per_op", total / ops, "ratio")
        for op, n in sorted(server["ops"].items()):
            row("server_ops_" + op, n, "ops")
    if a.config.startswith("nache") and a.server != "nache":
        up = read_pair(a.dir, "nache", nache_counters)
        if up is not None:
            row("nache_upstream_ops_total", sum(up["ops"].values()), "ops")
            row("nache_upstream_compounds", up["compounds"], "compounds")

    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    with open(a.csv, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(HEADER)
        w.writerows(rows)
    return 0


# ------------------------------------------------------------ summary

MAIN_METRICS = [
    ("duration_s", "duration (s)"),
    ("flush_s", "flush, from its start (s)"),
    ("remote_complete_s", "until the remote has it (s)"),
    ("ops_per_s", "ops/s"),
    ("throughput_mb_s", "MB/s"),
    ("latency_mean_ms", "latency mean (ms)"),
    ("latency_p99_ms", "latency p99 (ms)"),
    ("errors", "errors"),
    ("server_ops_total", "**server ops**"),
    ("server_compounds", "server COMPOUNDs"),
    ("server_ops_per_op", "server ops per client op"),
    ("nache_upstream_ops_total", "nache upstream ops (its /metrics)"),
]


def load(rundir):
    path = os.path.join(rundir, "results.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    data = {}
    for r in rows:
        key = (r["workload"], r["profile"], int(r["clients"]))
        data.setdefault(key, {}).setdefault(r["config"], {})[r["metric"]] = \
            r["value"]
    return data


def ordered_configs(configs):
    return sorted(configs, key=lambda c: (CONFIG_ORDER.index(c)
                                          if c in CONFIG_ORDER else 99, c))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def show(v):
    x = num(v)
    if x is None:
        return "–" if v in (None, "") else str(v)
    if x.is_integer():
        return "{:,}".format(int(x))
    if abs(x) >= 100:
        return "{:,.0f}".format(x)
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.3g" % x


def cmd_summarize(a):
    rundir = a.rundir
    data = load(rundir)
    params = {}
    ppath = os.path.join(rundir, "params.txt")
    if os.path.exists(ppath):
        with open(ppath) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                params[k] = v
    plots = make_plots(rundir, data)
    out = ["# nache benchmark run %s" % os.path.basename(
        os.path.abspath(rundir)), ""]
    if params:
        out += ["| parameter | value |", "|---|---|"]
        out += ["| %s | %s |" % (k, v) for k, v in params.items()]
        out.append("")
    out += ["Server ops: NFSv4 operations the remote server executed during "
            "the timed phase (%s). Lower is better for a caching proxy; "
            "`server ops per client op` normalises by the work done." %
            ("knfsd's /proc/net/rpc/nfsd" if params.get("remote", "knfsd")
             == "knfsd" else "nache's /metrics; empty for other "
             "configurations with REMOTE=vfs"), ""]
    if plots is None:
        out += ["_No plots: python3-matplotlib is not installed "
                "(`apt-get install python3-matplotlib`)._", ""]
    out += overview(data)
    groups = sorted({(w, p) for (w, p, _) in data})
    for w, p in groups:
        out.append("## %s — %s" % (w, p))
        out.append("")
        if plots and (w, p) in plots:
            out += ["![%s %s](%s)" % (w, p, plots[(w, p)]), ""]
        for n in sorted(c for (ww, pp, c) in data if (ww, pp) == (w, p)):
            cell = data[(w, p, n)]
            configs = ordered_configs(cell)
            out.append("### %d client%s" % (n, "" if n == 1 else "s"))
            out.append("")
            out.append("| metric | " + " | ".join(configs) + " |")
            out.append("|---|" + "---:|" * len(configs))
            metrics = list(MAIN_METRICS)
            ops = sorted({m for c in configs for m in cell[c]
                          if m.startswith("server_ops_") and m not in
                          ("server_ops_total", "server_ops_per_op")},
                         key=lambda m: -max(num(cell[c].get(m)) or 0
                                            for c in configs))
            metrics += [(m, "server " + m[len("server_ops_"):])
                        for m in ops]
            for key, label in metrics:
                if not any(key in cell[c] for c in configs):
                    continue
                out.append("| %s | " % label + " | ".join(
                    show(cell[c].get(key)) for c in configs) + " |")
            if any("failed" in cell[c] for c in configs):
                out.append("")
                out.append("**Failed cells:** " + ", ".join(
                    c for c in configs if "failed" in cell[c]))
            out.append("")
    with open(os.path.join(rundir, "summary.md"), "w") as f:
        f.write("\n".join(out))
    if plots is None:
        print("report: matplotlib is not importable: wrote results.csv and "
              "summary.md but no plots (install python3-matplotlib)",
              file=sys.stderr)
    return 0


FIXED_WORK = ("untar", "lslr", "build", "seqread", "seqwrite")


def overview(data):
    """One row per workload, profile and client count: each
    configuration's result (ops/s, or seconds for fixed-work jobs) and the
    server operations it cost (per client op, or in all)."""
    configs = ordered_configs({c for cell in data.values() for c in cell})
    out = ["## Overview", "",
           "Personalities: ops/s (all clients) · server ops per client op. "
           "Fixed-work jobs: seconds (slowest client) · server ops in all. "
           "`failed`: a client's report is missing.", "",
           "| workload | profile | clients | " + " | ".join(configs) + " |",
           "|---|---|---:|" + "---:|" * len(configs)]
    for (w, p, n) in sorted(data, key=lambda k: (k[1], k[0], k[2])):
        cell = data[(w, p, n)]
        row = []
        for c in configs:
            m = cell.get(c)
            if m is None:
                row.append("")
            elif "failed" in m:
                row.append("failed")
            elif w in FIXED_WORK:
                row.append("%s s · %s" % (show(m.get("duration_s")),
                                          show(m.get("server_ops_total"))))
            else:
                row.append("%s · %s" % (show(m.get("ops_per_s")),
                                        show(m.get("server_ops_per_op"))))
        out.append("| %s | %s | %d | %s |" % (w, p, n, " | ".join(row)))
    out.append("")
    return out


def make_plots(rundir, data):
    """One PNG per workload and profile: server ops by operation, latency,
    throughput (or duration for one-job workloads), per configuration and
    client count.  Returns {(workload, profile): relative path}, or None
    without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    pdir = os.path.join(rundir, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = {}
    for w, p in sorted({(w, p) for (w, p, _) in data}):
        counts = sorted(c for (ww, pp, c) in data if (ww, pp) == (w, p))
        configs = ordered_configs({c for n in counts
                                   for c in data[(w, p, n)]})
        bars = [(n, c) for n in counts for c in configs
                if c in data[(w, p, n)]]
        labels = ["%s\n%d cl" % (c, n) for n, c in bars]
        cells = [data[(w, p, n)][c] for n, c in bars]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
        # Server ops, stacked by operation (the six largest, then the rest).
        totals = {}
        for cell in cells:
            for m, v in cell.items():
                if m.startswith("server_ops_") and m not in (
                        "server_ops_total", "server_ops_per_op"):
                    totals[m] = totals.get(m, 0) + (num(v) or 0)
        top = [m for m, _ in sorted(totals.items(), key=lambda kv: -kv[1])][:6]
        x = list(range(len(cells)))
        bottom = [0.0] * len(cells)
        ax = axes[0]
        for m in top + ["other"]:
            if m == "other":
                vals = [max(0.0, (num(c.get("server_ops_total")) or 0) - sum(
                    num(c.get(t)) or 0 for t in top)) for c in cells]
                name = "other"
            else:
                vals = [num(c.get(m)) or 0 for c in cells]
                name = m[len("server_ops_"):]
            if any(vals):
                ax.bar(x, vals, bottom=bottom, label=name)
                bottom = [b + v for b, v in zip(bottom, vals)]
        for i, c in enumerate(cells):
            ratio = num(c.get("server_ops_per_op"))
            if ratio is not None:
                ax.annotate("%.2f/op" % ratio, (i, bottom[i]),
                            ha="center", va="bottom", fontsize=7)
        ax.set_title("server ops (timed phase; per client op on top)")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=8)
        if top:
            ax.legend(fontsize=7)
        # Latency.
        ax = axes[1]
        mean = [num(c.get("latency_mean_ms")) or 0 for c in cells]
        p99 = [num(c.get("latency_p99_ms")) or 0 for c in cells]
        width = 0.4
        ax.bar([i - width / 2 for i in x], mean, width, label="mean")
        if any(p99):
            ax.bar([i + width / 2 for i in x], p99, width, label="p99")
        ax.set_title("time per item (ms)" if w in ("untar", "lslr", "build")
                     else "latency per op (ms)")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=8)
        ax.legend(fontsize=7)
        # Throughput, or duration for one-job workloads.
        ax = axes[2]
        if w in FIXED_WORK:
            ax.bar(x, [num(c.get("duration_s")) or 0 for c in cells],
                   color="tab:green")
            ax.set_title("duration (s, lower is better)")
        else:
            ax.bar(x, [num(c.get("ops_per_s")) or 0 for c in cells],
                   color="tab:green")
            ax.set_title("throughput (ops/s, all clients)")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=8)
        fig.suptitle("%s — %s" % (w, p))
        fig.tight_layout()
        name = "%s-%s.png" % (w, p)
        fig.savefig(os.path.join(pdir, name), dpi=90)
        plt.close(fig)
        made[(w, p)] = "plots/" + name
    return made


def cmd_merge(a):
    cells = {}   # (workload, profile, clients, config) -> rows
    header = None
    for rundir in a.rundirs:
        with open(os.path.join(rundir, "results.csv"), newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            mine = {}
            for row in reader:
                mine.setdefault(tuple(row[:4]), []).append(row)
        cells.update(mine)  # later runs win, whole cells at a time
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for key in sorted(cells):
            w.writerows(cells[key])
    with open(os.path.join(a.outdir, "params.txt"), "w") as f:
        f.write("merged_runs=%s\n" % " ".join(
            os.path.basename(os.path.abspath(r)) for r in a.rundirs))
        for rundir in a.rundirs:
            ppath = os.path.join(rundir, "params.txt")
            if not os.path.exists(ppath):
                continue
            with open(ppath) as p:
                got = dict(l.rstrip("\n").partition("=")[::2] for l in p)
            f.write("%s=%s; %s; clients %s; commit %s; scale %s\n" % (
                got.get("run_id", os.path.basename(rundir)),
                got.get("workloads", "?"), got.get("profiles", "?"),
                got.get("clients", "?"), got.get("commit", "?"),
                got.get("scale", "?")))
    return cmd_summarize(argparse.Namespace(rundir=a.outdir))


MOUNT_POINT = "/mnt/b"   # bench/run.sh's mount under test in the guests


def mountstats_ops(path):
    """Per-operation counters of the mount under test in a mountstats
    file: op -> [ops, transmissions, major timeouts, bytes sent, bytes
    received, queue ms, round-trip ms, execute ms] (cumulative)."""
    ops, mine, in_ops = {}, False, False
    with open(path) as f:
        for line in f:
            if line.startswith("device "):
                mine = (" mounted on %s " % MOUNT_POINT) in line
                in_ops = False
            elif mine and "per-op statistics" in line:
                in_ops = True
            elif mine and in_ops:
                m = re.match(r"\s*([A-Z_0-9]+):\s+([\d\s]+)$", line)
                if m:
                    ops[m.group(1)] = [int(x) for x in m.group(2).split()[:8]]
    return ops


def cmd_clients(a):
    for celldir in a.celldirs:
        befores = sorted(glob.glob(os.path.join(celldir, "mountstats.*.before")),
                         key=lambda p: int(p.split(".")[-2]))
        if not befores:
            print("%s: no mountstats snapshots" % celldir, file=sys.stderr)
            return 1
        for before in befores:
            after = before[:-len("before")] + "after"
            i = before.split(".")[-2]
            if not os.path.exists(after):
                print("%s: client %s: no snapshot after" % (celldir, i),
                      file=sys.stderr)
                return 1
            b, e = mountstats_ops(before), mountstats_ops(after)
            diff = {}
            for op, v in e.items():
                d = [y - x for x, y in zip(b.get(op, [0] * 8), v)]
                if d[0] > 0:
                    diff[op] = d
            print("%s client %s: %d RPCs" % (
                os.path.basename(os.path.normpath(celldir)), i,
                sum(d[0] for d in diff.values())))
            print("| op | RPCs | queue ms | round trip ms | execute ms |")
            print("|---|---:|---:|---:|---:|")
            for op, d in sorted(diff.items(), key=lambda kv: -kv[1][0]):
                print("| %s | %d | %.2f | %.2f | %.2f |" % (
                    op, d[0], d[5] / d[0], d[6] / d[0], d[7] / d[0]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("cell")
    p.add_argument("--csv", required=True)
    p.add_argument("--workload", required=True)
    p.add_argument("--profile", required=True)
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--server", default="knfsd",
                   choices=["knfsd", "nache", "none"])
    p = sub.add_parser("summarize")
    p.add_argument("rundir")
    p = sub.add_parser("merge")
    p.add_argument("outdir")
    p.add_argument("rundirs", nargs="+")
    p = sub.add_parser("clients")
    p.add_argument("celldirs", nargs="+")
    a = ap.parse_args()
    return {"cell": cmd_cell, "summarize": cmd_summarize,
            "merge": cmd_merge, "clients": cmd_clients}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
