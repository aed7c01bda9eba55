#!/usr/bin/env bash
# Recall time with dirty data (issue: delegations): how long a conflicting
# OPEN from outside the office waits while nache flushes what it wrote
# under a write delegation and gives the delegation back. Linux 6.12 knfsd
# (under qemu; it grants write delegations to NFSv4.1 clients) is the
# remote; nache speaks NFSv4.1 to it with write-back (data under a write
# delegation stays local until the delegation is recalled).
#
# Per case (DIRTY bytes: 0, 1 MiB, 32 MiB) and file: client 1 holds the
# file open read-write through nache until knfsd shows nache's write
# delegation on it, writes DIRTY bytes into it (fsync: acknowledged, kept
# in nache); client 2, mounting knfsd directly over the same WAN, opens it
# for writing and is timed: knfsd recalls, nache flushes the data, returns
# the delegation, and only then does the OPEN succeed (the Linux client
# retries it meanwhile, backing off from 100 ms). "no delegation": the
# same OPEN of a file nobody holds.
#
# Also, per case, how long nache itself took from the CB_RECALL to its
# DELEGRETURN (nache_delegation_return_seconds, mean), which the opener's
# time includes plus its retry backoff; and, for scale, how long client 2
# takes to write the same bytes to knfsd directly (with fsync).
#
# Prints CSV case,metric,value (open_ms_median, open_ms_max, files,
# flushed_bytes, return_ms_mean, direct_write_ms) and a markdown table on
# stderr.
#
# CAPTURE=DIR: also capture the WAN side of nache's namespace (tcpdump,
# DIR/recall.pcap) and write, per conflicting open, the RPCs of the
# opener and of nache during it (bench/rpc_timeline.py, DIR/<file>.txt):
# where the opener's time goes.
# usage: [CAPTURE=DIR] bench/recall_dirty.sh [PROFILE] [FILES]   (wan 3)
set -uo pipefail
export LAB_KNFSD_KERNEL=6.12
export LAB_KNFSD_NLM_GRACE=${LAB_KNFSD_NLM_GRACE:-10}
source "$(dirname "$0")/../lab/helpers.sh"
source "$(dirname "$0")/../lab/knfsd_states.sh"
PROFILE=${1:-wan}
FILES=${2:-3}
M=/mnt/r
D=/mnt/d
die() { echo "recall_dirty: $*" >&2; exit 1; }
log() { printf '[recall_dirty %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
CAPTURE=${CAPTURE:-}
[[ $FILES =~ ^[1-9][0-9]*$ ]] || die "FILES must be a positive integer, got '$FILES'"
case $PROFILE in wan | lan | lanrouter) ;; *) die "unknown profile '$PROFILE' (wan|lan|lanrouter)" ;; esac

V41='Upstream_Minor_Version = 1; Open_Linger = 1; Write_Policy = "write_back"; Flush_Age = 3600;'
lab_init || die "lab_init failed"
lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start "$V41" &&
	lab_clients_start 1 2 || die "lab did not start"
K=$LAB_KNFSD_EXPORT_DIR
lab_knfsd_run "mkdir -p $K/r && chmod 777 $K/r && for c in 0 1 32; do for i in \$(seq 1 $FILES); do echo x > $K/r/d\$c-\$i; done; done; for i in \$(seq 1 $FILES); do echo x > $K/r/free\$i; done; chmod 666 $K/r/*" ||
	die "cannot create the files at the remote"
knfsd_bench_ready "$PROFILE" "$M" "$D" || die "cannot switch to profile $PROFILE or mount"
log "profile $PROFILE, RTT ${RTT} ms, $FILES files per case"
if [ -n "$CAPTURE" ]; then
	mkdir -p "$CAPTURE" && CAPTURE=$(cd "$CAPTURE" && pwd) && : >"$CAPTURE/opens" ||
		die "cannot write to CAPTURE=$CAPTURE"
	lab_helper_start tcpdump "$LAB_NS_LAN" tcpdump -i wan0 -n -U -s 0 -Z root \
		-w "$CAPTURE/recall.pcap" 'tcp port 2049' &&
		lab_wait_until 20 grep -q "listening on wan0" "$LAB_DIR/logs/tcpdump.log" ||
		die "tcpdump did not start: $(cat "$LAB_DIR/logs/tcpdump.log" 2>/dev/null)"
fi
# timed_open FILE — open_ms FILE; with CAPTURE, notes when it ran.
timed_open() {
	local t0 ms
	t0=$(date +%s.%N)
	ms=$(open_ms "$1") || return 1
	[ -z "$CAPTURE" ] || echo "$1 $t0 $(date +%s.%N)" >>"$CAPTURE/opens"
	echo "$ms"
}

NACHE='name: "nache/'
cur_write_delegs() { write_delegs "$NACHE" "r/$CUR"; }
# open_ms FILE — client 2 opens FILE (on knfsd) for writing; prints ms.
open_ms() {
	on 2 "python3 -c '
import os, time
s = time.monotonic()
fd = os.open(\"$D/r/$1\", os.O_WRONLY)
print(round((time.monotonic() - s) * 1000, 1))
os.close(fd)'"
}
# held FILE DIRTY — client 1 holds FILE open through nache until it is
# delegated for writing, then writes DIRTY bytes; leaves it held (tag h).
held() {
	CUR=$1
	held_until_delegated 1 '<>' "$M/r/$1" h cur_write_delegs "r/$1" ||
		{ echo "--- knfsd's states:" >&2; lab_knfsd_states >&2; return 1; }
	[ "$2" = 0 ] || on 1 "head -c $2 /dev/urandom > /tmp/blob && dd if=/tmp/blob of=$M/r/$1 bs=1M conv=fsync,notrunc status=none"
}
# return_sum / return_count — nache's recall-to-DELEGRETURN histogram.
return_sum() { metric nache_delegation_return_seconds_sum 'reason="recall"'; }
return_count() { metric nache_delegation_return_seconds_count 'reason="recall"'; }
# direct_write_ms BYTES — client 2 writes BYTES to a new file on knfsd
# directly, with fsync; prints ms.
direct_write_ms() {
	on 2 "head -c $1 /dev/urandom > /tmp/dblob && python3 -c '
import os, time
data = open(\"/tmp/dblob\", \"rb\").read()
s = time.monotonic()
fd = os.open(\"$D/r/direct-$1\", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)
os.fsync(fd)
os.close(fd)
print(round((time.monotonic() - s) * 1000, 1))'"
}
stats() {
	python3 -c '
import sys
v = sorted(float(x) for x in sys.stdin.read().split())
print(v[len(v) // 2], v[-1], len(v))'
}

declare -A RESULT
free=""
for i in $(seq 1 "$FILES"); do free+="$(timed_open "free$i") " || die "open of free$i failed"; done
RESULT[free]=$(echo "$free" | stats)
for c in 0 1 32; do
	bytes=$((c * 1048576))
	times=""
	w0=$(metric nache_upstream_bytes_total 'direction="write"')
	rs0=$(return_sum) rc0=$(return_count)
	for i in $(seq 1 "$FILES"); do
		held "d$c-$i" "$bytes" || die "no write delegation on d$c-$i"
		[ "$c" = 0 ] || at_least "dirty bytes" "$(metric nache_dirty_bytes)" "$bytes" || die "d$c-$i: the data is not dirty in nache"
		t=$(timed_open "d$c-$i") || die "open of d$c-$i failed"
		release 1 h
		times+="$t "
		log "dirty ${c} MiB, file $i: conflicting open took $t ms"
	done
	ret=$(python3 -c "print(round(($(return_sum) - $rs0) / max(1, $(return_count) - $rc0) * 1000, 1))")
	direct=$([ "$c" = 0 ] && echo – || direct_write_ms "$bytes") || die "direct write failed"
	RESULT[$c]="$(echo "$times" | stats) $(($(metric nache_upstream_bytes_total 'direction="write"') - w0)) $ret $direct"
done
if [ -n "$CAPTURE" ]; then
	while read -r f t0 t1; do
		python3 "$(dirname "$0")/rpc_timeline.py" "$CAPTURE/recall.pcap" --from "$t0" --to "$t1" \
			--hosts "$(lab_client_addr 2),$LAB_NACHE_WAN_ADDR" --no-data >"$CAPTURE/$f.txt" ||
			die "no timeline of $f in $CAPTURE/recall.pcap"
	done <"$CAPTURE/opens"
	log "RPC timelines of the conflicting opens in $CAPTURE"
fi
echo "case,metric,value"
read -r med max n <<<"${RESULT[free]}"
echo "no delegation,open_ms_median,$med"
echo "no delegation,open_ms_max,$max"
for c in 0 1 32; do
	read -r med max n flushed ret direct <<<"${RESULT[$c]}"
	echo "write delegation ${c} MiB dirty,open_ms_median,$med"
	echo "write delegation ${c} MiB dirty,open_ms_max,$max"
	echo "write delegation ${c} MiB dirty,files,$n"
	echo "write delegation ${c} MiB dirty,flushed_bytes,$flushed"
	echo "write delegation ${c} MiB dirty,return_ms_mean,$ret"
	echo "write delegation ${c} MiB dirty,direct_write_ms,$direct"
done
{
	echo
	echo "Conflicting OPEN (client 2, direct to knfsd 6.12 over $PROFILE, RTT ${RTT} ms), $FILES files each:"
	echo
	echo "| case | open median ms | open max ms | nache recall to DELEGRETURN, mean ms | bytes nache flushed | the same bytes written directly (fsync), ms |"
	echo "|---|---:|---:|---:|---:|---:|"
	read -r med max n <<<"${RESULT[free]}"
	echo "| no delegation held | $med | $max | – | – | – |"
	for c in 0 1 32; do
		read -r med max n flushed ret direct <<<"${RESULT[$c]}"
		echo "| nache holds a write delegation, $c MiB dirty | $med | $max | $ret | $flushed | $direct |"
	done
} >&2
