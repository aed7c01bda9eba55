#!/usr/bin/env bash
# Recall time (issue: delegations): how long a conflicting OPEN from outside
# the office waits while nache gives a delegation back. Linux knfsd 6.1
# (read delegations) is the remote; client 1 reads FILES files through nache
# (nache then holds knfsd's read delegation on each); client 2 mounts knfsd
# directly across the same WAN and opens each file for writing: knfsd
# recalls nache's delegation (CB_RECALL), nache recalls what Ganesha
# delegated to its own clients, returns it (DELEGRETURN), and only then does
# client 2's OPEN succeed. For scale, the same OPEN of files nobody holds a
# delegation on ("no delegation").
#
# Dirty data under a write delegation (flushed before DELEGRETURN) is not
# measured: no server here gives nache one (knfsd 6.1 grants read
# delegations only; knfsd 6.12 grants write delegations to NFSv4.1 clients
# only, and nache's upstream speaks NFSv4.0; see README "Known limits").
#
# Prints CSV case,metric,value (metrics: open_ms_median, open_ms_p90,
# open_ms_max, recalls, files) and a markdown table on stderr.
# usage: bench/recall_time.sh [PROFILE] [FILES]   (wan 10)
set -uo pipefail
# The lab (lab.sh, with NACHE_BUILD_DIR's stage), `metric` and `on`.
source "$(dirname "$0")/../lab/helpers.sh"
source "$(dirname "$0")/../lab/knfsd_states.sh"
PROFILE=${1:-wan}
FILES=${2:-10}
# knfsd grants no delegation while any lock manager is in grace, lockd's
# included: shorten lockd's.
export LAB_KNFSD_NLM_GRACE=${LAB_KNFSD_NLM_GRACE:-10}
M=/mnt/r
D=/mnt/d

die() { echo "recall_time: $*" >&2; exit 1; }
log() { printf '[recall_time %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
[[ $FILES =~ ^[1-9][0-9]*$ ]] || die "FILES must be a positive integer, got '$FILES'"
case $PROFILE in wan | lan | lanrouter) ;; *) die "unknown profile '$PROFILE' (wan|lan|lanrouter)" ;; esac

lab_init || die "lab_init failed"
lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ LAB_NACHE_DELEGATIONS=readwrite \
		lab_nache_start && lab_clients_start 1 2 || die "lab did not start"
K=$LAB_KNFSD_EXPORT_DIR
lab_knfsd_run "mkdir -p $K/r && chmod 777 $K/r && for i in \$(seq 1 $FILES); do head -c 65536 /dev/urandom > $K/r/held\$i && head -c 65536 /dev/urandom > $K/r/free\$i || exit 1; done; chmod 666 $K/r/*; sync" ||
	die "cannot create the files at the remote"
knfsd_bench_ready "$PROFILE" "$M" "$D" || die "cannot switch to profile $PROFILE or mount"
log "profile $PROFILE, RTT ${RTT} ms, $FILES files per case"

# Client 1 reads the held files through nache: nache gets their delegations.
on 1 "cat $M/r/held* >/dev/null" || die "reads through nache failed"
held=$(metric nache_delegations_held 'type="read"')
[ "${held%.*}" -ge "$FILES" ] ||
	die "nache holds $held read delegations, wanted $FILES (knfsd did not delegate?)"
recalls0=$(metric nache_delegation_recalls_total)

# open_times PREFIX — client 2 opens PREFIX1..PREFIXn for writing, one at a
# time; prints each open's milliseconds.
open_times() {
	on 2 "python3 -c '
import os, sys, time
for i in range(1, $FILES + 1):
    s = time.monotonic()
    fd = os.open(\"$D/r/$1%d\" % i, os.O_WRONLY)
    print(round((time.monotonic() - s) * 1000, 1))
    os.close(fd)
'"
}
# stats — median, p90, max of numbers on stdin.
stats() {
	python3 -c '
import sys
v = sorted(float(x) for x in sys.stdin.read().split())
pick = lambda q: v[min(len(v) - 1, int(q * len(v)))]
print(pick(0.5), pick(0.9), v[-1], len(v))'
}

free=$(open_times free | stats) || die "opens of free files failed"
held_t=$(open_times held | stats) || die "opens of held files failed"
recalls=$(($(metric nache_delegation_recalls_total) - recalls0))
echo "case,metric,value"
for c in free held; do
	read -r med p90 max n <<<"$([ $c = free ] && echo "$free" || echo "$held_t")"
	name=$([ $c = free ] && echo "no delegation" || echo "recall of nache's delegation")
	echo "$name,open_ms_median,$med"
	echo "$name,open_ms_p90,$p90"
	echo "$name,open_ms_max,$max"
	echo "$name,files,$n"
done
echo "recall of nache's delegation,recalls,$recalls"
{
	echo
	echo "Conflicting OPEN (client 2, direct to knfsd over $PROFILE, RTT ${RTT} ms), $FILES files each:"
	echo
	echo "| case | median ms | p90 ms | max ms | recalls nache received |"
	echo "|---|---:|---:|---:|---:|"
	read -r med p90 max n <<<"$free"
	echo "| no delegation held | $med | $p90 | $max | – |"
	read -r med p90 max n <<<"$held_t"
	echo "| nache holds a read delegation | $med | $p90 | $max | $recalls |"
} >&2
[ "$recalls" -ge "$FILES" ] || die "nache received $recalls recalls, wanted $FILES"
