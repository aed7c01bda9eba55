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
# Prints CSV case,metric,value (open_ms_median, open_ms_max, files,
# flushed_bytes) and a markdown table on stderr.
# usage: bench/recall_dirty.sh [PROFILE] [FILES]   (wan 3)
set -uo pipefail
export LAB_KNFSD_KERNEL=6.12
export LAB_KNFSD_NLM_GRACE=${LAB_KNFSD_NLM_GRACE:-10}
source "$(dirname "$0")/../tests/integration/itest.sh"
PROFILE=${1:-wan}
FILES=${2:-3}
M=/mnt/r
D=/mnt/d
die() { echo "recall_dirty: $*" >&2; exit 1; }
log() { printf '[recall_dirty %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
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
ready_at=$(($(cut -d. -f1 "$LAB_DIR/run/knfsd.started") + LAB_KNFSD_NLM_GRACE + 1))
while [ "$(date +%s)" -lt "$ready_at" ]; do sleep 1; done
lab_set_profile "$PROFILE" || die "cannot switch to profile $PROFILE"
RTT=$(lab_rtt "$LAB_NS_LAN" "$LAB_KNFSD_ADDR") || RTT=?
lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$M" vers=4.1 &&
	lab_client_mount 2 "$LAB_KNFSD_ADDR" / "$D" vers=4.1 || die "mounts failed"
log "profile $PROFILE, RTT ${RTT} ms, $FILES files per case"

NACHE='name: "nache/'
nache_write_delegs() {
	lab_knfsd_states | awk -v file="filename: \"/r/$1\"" '
		/^# client/ { ours = 0 } index($0, "name: \"nache/") { ours = 1 }
		ours && /type: deleg, access: w/ && index($0, file) { n++ }
		END { print n + 0 }'
}
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
# delegated for writing, then writes DIRTY bytes; leaves it held.
held() {
	local try
	for try in 1 2 3 4 5 6 7 8 9 10; do
		on 1 "exec 3<>$M/r/$1 || exit 1; touch /tmp/h; while [ -e /tmp/h ]; do sleep 0.2; done" >/dev/null 2>&1 &
		lab_wait_until 30 on 1 "test -e /tmp/h" || return 1
		if lab_wait_until 5 eval '[ "$(nache_write_delegs "$1")" -ge 1 ]'; then
			[ "$2" = 0 ] || on 1 "head -c $2 /dev/urandom > /tmp/blob && dd if=/tmp/blob of=$M/r/$1 bs=1M conv=fsync,notrunc status=none" || return 1
			return 0
		fi
		on 1 "rm -f /tmp/h"
		sleep 2 # the lingering upstream open closes (Open_Linger 1 s): not a condition we can see cheaply
	done
	return 1
}
stats() {
	python3 -c '
import sys
v = sorted(float(x) for x in sys.stdin.read().split())
print(v[len(v) // 2], v[-1], len(v))'
}

declare -A RESULT
free=""
for i in $(seq 1 "$FILES"); do free+="$(open_ms "free$i") " || die "open of free$i failed"; done
RESULT[free]=$(echo "$free" | stats)
for c in 0 1 32; do
	bytes=$((c * 1048576))
	times=""
	w0=$(metric nache_upstream_bytes_total 'direction="write"')
	for i in $(seq 1 "$FILES"); do
		held "d$c-$i" "$bytes" || die "no write delegation on d$c-$i"
		[ "$c" = 0 ] || at_least "dirty bytes" "$(metric nache_dirty_bytes)" "$bytes" || die "d$c-$i: the data is not dirty in nache"
		t=$(open_ms "d$c-$i") || die "open of d$c-$i failed"
		on 1 "rm -f /tmp/h"
		times+="$t "
		log "dirty ${c} MiB, file $i: conflicting open took $t ms"
	done
	RESULT[$c]="$(echo "$times" | stats) $(($(metric nache_upstream_bytes_total 'direction="write"') - w0))"
done
echo "case,metric,value"
read -r med max n <<<"${RESULT[free]}"
echo "no delegation,open_ms_median,$med"
echo "no delegation,open_ms_max,$max"
for c in 0 1 32; do
	read -r med max n flushed <<<"${RESULT[$c]}"
	echo "write delegation ${c} MiB dirty,open_ms_median,$med"
	echo "write delegation ${c} MiB dirty,open_ms_max,$max"
	echo "write delegation ${c} MiB dirty,files,$n"
	echo "write delegation ${c} MiB dirty,flushed_bytes,$flushed"
done
{
	echo
	echo "Conflicting OPEN (client 2, direct to knfsd 6.12 over $PROFILE, RTT ${RTT} ms), $FILES files each:"
	echo
	echo "| case | median ms | max ms | bytes nache flushed |"
	echo "|---|---:|---:|---:|"
	read -r med max n <<<"${RESULT[free]}"
	echo "| no delegation held | $med | $max | – |"
	for c in 0 1 32; do
		read -r med max n flushed <<<"${RESULT[$c]}"
		echo "| nache holds a write delegation, $c MiB dirty | $med | $max | $flushed |"
	done
} >&2
