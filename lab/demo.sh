#!/usr/bin/env bash
# make demo: what nache does for a branch office, measured in this run.
#
# The lab with the `wan` profile (80 ms RTT, 50 Mbit/s): the remote is
# Linux knfsd (6.1, in a user-mode-linux guest; it grants read
# delegations, which Ganesha's VFS server does not), nache in the office in
# front of it with write-back on, and two real Linux kernel clients: client
# 1 ("the office") mounts nache, client 2 mounts the remote directly across
# the same WAN. Five scenes, every number measured here:
#   (a) a cold run, through nache and direct;
#   (b) the same run warm (each client's own page cache dropped first, so
#       only the path differs), and the direct mount on a LAN for scale;
#   (c) an untar through nache with write-back, the moment the remote has
#       it all (nachectl flush --wait), and the same untar direct;
#   (d) the direct client writes a file nache holds a delegation on: the
#       remote recalls it, and the office reads the new data at once;
#   (e) nachectl status and three figures from nache's /metrics.
# DEMO_SCALE=small (the integration test) uses smaller trees. Exits
# non-zero when a step fails. Everything is torn down at the end, also on
# Ctrl-C.
set -uo pipefail
DEMO_DIR=$(cd "$(dirname "$0")" && pwd)
: "${NACHE_SOURCE_DIR:=$(dirname "$DEMO_DIR")}"
: "${NACHE_BUILD_DIR:=$NACHE_SOURCE_DIR/build}"
# nache's export squashes root, as shipped (config/nache.conf).
: "${LAB_NACHE_SQUASH:=Root_Squash}"
# knfsd delegates nothing while lockd is in grace (50 s after its boot by
# default).
: "${LAB_KNFSD_NLM_GRACE:=10}"
export LAB_NACHE_SQUASH LAB_KNFSD_NLM_GRACE
# shellcheck source=helpers.sh
source "$DEMO_DIR/helpers.sh"
# shellcheck source=knfsd_states.sh
source "$DEMO_DIR/knfsd_states.sh"
PROFILE=${DEMO_PROFILE:-wan}
NACHECTL=$NACHE_BUILD_DIR/stage/bin/nachectl

case ${DEMO_SCALE:-full} in
full) T_DIRS=8 T_FILES=60 T_BYTES=1000000 BLOB_MIB=16 U_DIRS=15 U_FILES=200 U_BYTES=1000000 ;;
small) T_DIRS=5 T_FILES=30 T_BYTES=300000 BLOB_MIB=2 U_DIRS=4 U_FILES=25 U_BYTES=100000 ;;
*)
	echo "DEMO_SCALE must be full or small" >&2
	exit 2
	;;
esac

say() { printf '\n== %s\n' "$*"; }
die() {
	printf 'demo failed: %s\n' "$*" >&2
	exit 1
}

say "starting the lab ($PROFILE profile): remote knfsd, WAN, nache, two kernel clients"
lab_init && lab_net_up "$PROFILE" && lab_remote_knfsd_start || die "the lab did not start"
K=$LAB_KNFSD_EXPORT_DIR
# The remote's content, made at the server itself: a small generated source
# tree, a big file beside it, and the file of scene (d). The top of the export is
# writable by all (sticky, like /tmp): the office's root is squashed.
lab_knfsd_run "chmod 1777 $K && mkdir -p $K/sample &&
	GEN_DIRS=$T_DIRS GEN_FILES=$T_FILES GEN_BYTES=$T_BYTES python3 -B $NACHE_SOURCE_DIR/bench/gen_tree.py $K/sample >/dev/null &&
	head -c $((BLOB_MIB << 20)) /dev/urandom >$K/blob.bin &&
	echo 'plan v1: ship on Friday' >$K/plan.txt && echo probe >$K/probe.txt &&
	chmod -R a+rX $K/sample $K/blob.bin $K/plan.txt $K/probe.txt" || die "cannot fill the remote"
GEN_DIRS=$U_DIRS GEN_FILES=$U_FILES GEN_BYTES=$U_BYTES \
	python3 -B "$NACHE_SOURCE_DIR/bench/gen_tree.py" --tar "$LAB_DIR/project.tar" >/dev/null ||
	die "cannot make the tarball"
LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
	lab_nache_start 'Write_Policy = write_back; Single_Writer = true;' &&
	lab_clients_start 1 2 || die "nache or the clients did not start"
lab_client_mount 1 "$LAB_NACHE_ADDR" /export /mnt/nache vers=4.1 &&
	lab_client_mount 2 "$LAB_KNFSD_ADDR" / /mnt/direct vers=4.1 || die "mounts failed"
ctl() { "$NACHECTL" --socket "$LAB_DIR/nache/nache.sock" "$@"; }
say "client 1: mount -t nfs4 $LAB_NACHE_ADDR:/export /mnt/nache   (the office, through nache)"
say "client 2: mount -t nfs4 $LAB_KNFSD_ADDR:/ /mnt/direct       (straight across the WAN)"
printf '   WAN round trip: %s ms\n' "$(lab_rtt)"

# knfsd delegates only once its grace periods are over and its callbacks
# reach nache: wait for a first delegation (on a file no scene uses), so
# that the runs below are not timed against a server still in grace.
# Each new upstream OPEN asks for a delegation; an open that lingers after
# the last close (Open_Linger) serves the next cat without one, so the
# file is read again only once nache has closed it upstream (an OPEN that
# came too early, in a grace period, would otherwise be reused for ever).
delegated() {
	if [ "$(metric nache_upstream_open_files)" = 0 ]; then
		on 1 "cat /mnt/nache/probe.txt" >/dev/null
	fi
	[ "$(metric nache_delegations_held 'type="read"')" -ge 1 ]
}
lab_wait_until 90 delegated || die "the remote never delegated to nache"

# timed N CMD — runs CMD in client N; prints its wall time in seconds
# (two decimals); fails when CMD fails.
timed() {
	lab_client_run "$1" "s=\$(date +%s%N); { $2; } >/dev/null || exit 1
		echo \$(( (\$(date +%s%N) - s) / 10000000 ))" |
		awk '{ printf "%d.%02d\n", $1 / 100, $1 % 100 }'
}
drop_caches() { on "$1" 'sync; echo 3 >/proc/sys/vm/drop_caches'; }

STEPS=("ls -lR of $T_FILES files in $T_DIRS directories"
	"read every file of the tree"
	"read a $BLOB_MIB MiB file")
step_cmd() {  # step_cmd I MNT
	case $1 in
	0) echo "ls -lR $2/sample" ;;
	1) echo "find $2/sample -type f -exec cat {} +" ;;
	2) echo "cat $2/blob.bin" ;;
	esac
}
# run_pass SCENE — the three steps, in client 1 through nache and in
# client 2 direct, each client's page cache dropped first; one line each.
run_pass() {
	local i n d
	printf '   %-46s %12s %12s\n' "" "nache" "direct (WAN)"
	drop_caches 1 && drop_caches 2 || die "cannot drop the clients' caches"
	for i in 0 1 2; do
		n=$(timed 1 "$(step_cmd $i /mnt/nache)") || die "$1: '${STEPS[$i]}' failed through nache"
		d=$(timed 2 "$(step_cmd $i /mnt/direct)") || die "$1: '${STEPS[$i]}' failed direct"
		printf '   %-46s %10s s %10s s\n' "${STEPS[$i]}" "$n" "$d"
	done
}

say "(a) cold: nobody has read the tree yet"
run_pass "(a)"

say "(b) warm: the same run again (nache's cache is warm; the clients' own caches dropped)"
run_pass "(b)"
# LAN speed for scale: the direct mount with the router bypassed.
lab_set_profile lan || die "cannot switch to the lan profile"
drop_caches 2 || die "cannot drop client 2's cache"
lan=()
for i in 0 1 2; do
	t=$(timed 2 "$(step_cmd $i /mnt/direct)") || die "(b): the LAN run failed"
	lan+=("$t")
done
lab_set_profile "$PROFILE" || die "cannot switch back to $PROFILE"
printf '   %-46s %s\n' "for scale, direct on a LAN (no WAN):" "${lan[0]} s, ${lan[1]} s, ${lan[2]} s"

say "(c) untar of $U_FILES files in $U_DIRS directories ($((U_BYTES / 1000)) kB), write-back"
untar() { echo "mkdir $1 && tar -x --no-same-owner -f $LAB_DIR/project.tar -C $1"; }
remote_files() { lab_knfsd_run "find $K/$1 -type f 2>/dev/null | wc -l"; }
t0=$(date +%s%N)
n=$(timed 1 "$(untar /mnt/nache/untar-office)") || die "(c): the untar through nache failed"
printf '   %-46s %10s s\n' "client 1 through nache: tar -x" "$n"
printf '   %-46s %10s\n' "files at the remote right after it" "$(remote_files untar-office)"
ctl flush --wait >"$LAB_DIR/flush.out" 2>&1 || { cat "$LAB_DIR/flush.out"; die "(c): nachectl flush --wait failed"; }
t1=$(date +%s%N)
got=$(remote_files untar-office)
[ "$got" = "$U_FILES" ] || die "(c): the remote has $got of $U_FILES files after the flush"
printf '   %-46s %10s\n' "nachectl flush --wait: files at the remote" "$got of $U_FILES"
printf '   %-46s %10s s\n' "remote had it all, after the untar's start" \
	"$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 1e9 }')"
d=$(timed 2 "$(untar /mnt/direct/untar-direct)") || die "(c): the direct untar failed"
printf '   %-46s %10s s\n' "client 2 direct: tar -x" "$d"

say "(d) a write at the remote recalls nache's delegation; the office sees it at once"
plan_delegated() {
	on 1 "cat /mnt/nache/plan.txt" >/dev/null
	[ "$(read_delegs nache/ /plan.txt)" -ge 1 ]
}
lab_wait_until 60 plan_delegated || die "(d): no delegation on plan.txt"
printf '   %-46s %s\n' "client 1 through nache reads plan.txt:" "$(on 1 'cat /mnt/nache/plan.txt')"
printf '   %-46s %s\n' "the remote's state for plan.txt:" "a read delegation held by nache"
printf '   %-46s %s\n' "read delegations nache holds (its /metrics):" \
	"$(metric nache_delegations_held 'type="read"')"
rec0=$(metric nache_delegation_recalls_total)
w=$(timed 2 "echo 'plan v2: ship on Monday' >/mnt/direct/plan.txt") || die "(d): the direct write failed"
printf '   %-46s %10s s\n' "client 2 direct writes plan.txt (recall inside)" "$w"
rec=$(($(metric nache_delegation_recalls_total) - rec0))
[ "$rec" -ge 1 ] || die "(d): the remote recalled no delegation"
printf '   %-46s %10s\n' "recalls nache answered" "$rec"
s=$(date +%s%N)
seen=$(on 1 'cat /mnt/nache/plan.txt') || die "(d): the read through nache failed"
e=$(date +%s%N)
[ "$seen" = "plan v2: ship on Monday" ] || die "(d): the office read '$seen'"
printf '   %-46s %s (%s s)\n' "client 1 through nache reads plan.txt:" "$seen" \
	"$(awk -v d=$((e - s)) 'BEGIN { printf "%.2f", d / 1e9 }')"

say "(e) nachectl status"
ctl status | sed 's/^/   /'
[ "${PIPESTATUS[0]}" = 0 ] || die "(e): nachectl status failed"
say "(e) from nache's /metrics (http://$LAB_NACHE_ADDR:9464/metrics)"
saved=$(metric nache_local_ops_without_upstream_total) &&
	ops=$(metric nache_local_ops_total) &&
	hits=$(metric nache_cache_hits_total) &&
	misses=$(metric nache_cache_misses_total) &&
	bytes=$(metric nache_cache_hit_bytes_total) || die "(e): cannot read /metrics"
awk -v s="$saved" -v o="$ops" -v h="$hits" -v m="$misses" -v b="$bytes" 'BEGIN {
	printf "   %-46s %s of %s\n", "ops saved (answered with no WAN round trip)", s, o
	printf "   %-46s %.1f %% (%d of %d lookups)\n", "cache hit ratio", h + m ? 100 * h / (h + m) : 0, h, h + m
	printf "   %-46s %.1f MiB\n", "WAN bytes saved (data served from the cache)", b / 1048576
}'
say "tearing down"
