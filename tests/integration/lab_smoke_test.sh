#!/bin/bash
# lab_smoke_test — proves the lab itself works: shaped WAN, both remote
# servers, the PROXY_V4 stand-in in the proxy position, two real NFS clients
# (UML), NFSv3/4.0/4.1 mounts, profile switching, and complete cleanup.
#
# Usage (root):
#   tests/integration/lab_smoke_test.sh              the smoke test
#   tests/integration/lab_smoke_test.sh --interrupt  runs the smoke test,
#       sends it SIGINT once its clients boot, and checks that nothing of
#       that lab survives
#   LAB_KEEP=1 keeps $LAB_DIR and its logs after the run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../lab/lab.sh
. "$here/../../lab/lab.sh"

step() { echo "=== [${SECONDS}s] $*"; }
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# leftovers ID DIR — print whatever of lab ID still exists (empty: clean).
leftovers() {
	local id=$1 dir=$2
	ip netns list | awk '{print $1}' | grep "^nl-$id-" | sed 's/^/netns /'
	pgrep -af -- "$dir" | grep -v -e pgrep -e lab_smoke_test | sed 's/^/process /'
	[ ! -e "$dir" ] || echo "dir $dir"
	[ ! -e "$LAB_REGISTRY/$id" ] || echo "registry $LAB_REGISTRY/$id"
}

# interrupt_test — SIGINT a running smoke test mid-way, check cleanup.
interrupt_test() {
	local out=/tmp/lab_smoke_interrupt.$$ pid id dir left
	# Job control on: without it, background jobs start with SIGINT ignored
	# and a shell cannot trap a signal ignored at entry.
	set -m
	LAB_KEEP=0 "$0" >"$out" 2>&1 &
	pid=$!
	set +m
	lab_wait_until 120 grep -q '=== .* clients' "$out" ||
		{ cat "$out"; kill -KILL -- -"$pid"; fail "smoke test never reached the clients step"; }
	# Mid-boot of the two clients: the most processes are in flight.
	sleep 1
	id=$(sed -n 's/.*\] lab \([0-9a-f]*\) in .*/\1/p' "$out" | head -n 1)
	dir=$(sed -n 's/.*\] lab [0-9a-f]* in \(.*\)$/\1/p' "$out" | head -n 1)
	[ -n "$id" ] && [ -n "$dir" ] || fail "no lab id in output"
	echo "sending SIGINT to smoke test $pid (lab $id)"
	kill -INT "$pid"
	local rc=0
	lab_wait_until 60 eval '! kill -0 '"$pid"' 2>/dev/null' ||
		fail "smoke test did not exit within 60 s of SIGINT"
	wait "$pid" || rc=$?
	tail -n 4 "$out"
	rm -f "$out"
	[ "$rc" = 130 ] || fail "exit status $rc after SIGINT, want 130"
	left=$(leftovers "$id" "$dir")
	[ -z "$left" ] || fail "left behind after SIGINT: $left"
	echo "PASS (interrupted run left nothing behind)"
}

if [ "${1:-}" = --interrupt ]; then
	interrupt_test
	exit 0
fi
# float_between VALUE LOW HIGH — LOW <= VALUE <= HIGH for decimal values.
float_between() {
	awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'
}

lab_cleanup_stale
lab_init
lab_net_up wan

step "servers and proxy stand-in"
lab_remote_knfsd_start # first: its grace period runs while the rest starts
lab_remote_vfs_start
lab_proxyv4_start

step "clients"
lab_clients_start 1 2 # booted in parallel

step "WAN round trip"
rtt=$(lab_rtt)
echo "wan rtt ${rtt} ms"
float_between "$rtt" 70 200 || fail "wan RTT $rtt ms not in [70, 200]"
# The same path seen by a client: client -> nache ns -> router -> remote.
lab_client_run 1 "python3 -B $LAB_SRC_DIR/labtool.py ping -c 3 -i 0.05 $LAB_REMOTE_ADDR" |
	tail -n 1

step "client 1: direct NFSv4.1 mount of the VFS remote over the WAN"
lab_client_mount 1 "$LAB_REMOTE_ADDR" /export /mnt/direct vers=4.1
lab_client_run 1 "grep ' /mnt/direct ' /proc/mounts"
lab_client_run 1 "head -c 1048576 /dev/urandom >/mnt/direct/smoke.bin && sync"
guest_sum=$(lab_client_run 1 "md5sum </mnt/direct/smoke.bin")
host_sum=$(md5sum <"$LAB_REMOTE_EXPORT_DIR/smoke.bin")
[ "${guest_sum%% *}" = "${host_sum%% *}" ] ||
	fail "server bytes differ: client $guest_sum host $host_sum"
echo "server has the client's bytes (${host_sum%% *})"

step "client 2: read it through PROXY_V4 (nache position)"
lab_client_mount 2 "$LAB_PROXYV4_ADDR" /export /mnt/proxy vers=4.1
proxy_sum=$(lab_client_run 2 "md5sum </mnt/proxy/smoke.bin")
[ "${proxy_sum%% *}" = "${host_sum%% *}" ] ||
	fail "PROXY_V4 read differs: $proxy_sum"
echo "PROXY_V4 read matches"

step "client 2: concurrent commands in one guest"
lab_client_run 2 "sleep 3; echo slow-done" >"$LAB_DIR/slow.out" &
slow=$!
t0=$SECONDS
[ "$(lab_client_run 2 'echo fast')" = fast ] || fail "fast command"
[ $((SECONDS - t0)) -lt 3 ] || fail "fast command waited for the slow one"
wait "$slow"
grep -q slow-done "$LAB_DIR/slow.out" || fail "slow command output"
rc=0
LAB_CMD_TIMEOUT=1 lab_client_run 2 "sleep 10" 2>/dev/null || rc=$?
[ $rc = 124 ] || fail "timeout returned $rc, want 124"
rc=0
lab_client_run 2 "exit 7" || rc=$?
[ $rc = 7 ] || fail "exit status $rc, want 7"
[ "$(lab_client_run_as 2 1000 1000 'id -u; id -g' | tr '\n' ' ')" = "1000 1000 " ] ||
	fail "run_as"

step "client 1: NFSv4.0 mount of knfsd"
lab_client_mount 1 "$LAB_KNFSD_ADDR" / /mnt/knfsd vers=4.0
lab_knfsd_wait_grace
lab_client_run 1 "echo hello-knfsd >/mnt/knfsd/k.txt && cat /mnt/knfsd/k.txt" |
	grep -qx hello-knfsd || fail "knfsd write/read"
lab_knfsd_run "cat $LAB_KNFSD_EXPORT_DIR/k.txt" | grep -qx hello-knfsd ||
	fail "knfsd server-side bytes"
lab_knfsd_stats | grep -q '^proc4ops' || fail "knfsd stats"
lab_knfsd_states | grep -q '# client' || fail "knfsd client states"
echo "knfsd serves NFSv4.0"

step "client 2: NFSv3 mount of the VFS remote"
lab_client_mount 2 "$LAB_REMOTE_ADDR" /export /mnt/v3 vers=3
lab_client_run 2 "grep ' /mnt/v3 ' /proc/mounts | grep -q vers=3 &&
	md5sum </mnt/v3/smoke.bin" | grep -q "${host_sum%% *}" ||
	fail "NFSv3 read"
echo "NFSv3 read matches"

step "lan profile"
lab_set_profile lan
rtt=$(lab_rtt)
echo "lan rtt ${rtt} ms"
float_between "$rtt" 0 20 || fail "lan RTT $rtt ms not below 20"
lab_client_run 1 "cat /mnt/direct/smoke.bin >/dev/null && ls /mnt/knfsd"

step "teardown leaves nothing behind"
id=$LAB_ID dir=$LAB_DIR
keep=${LAB_KEEP:-0}
lab_teardown
if [ "$keep" != 1 ]; then
	left=$(leftovers "$id" "$dir")
	[ -z "$left" ] || fail "left behind: $left"
fi

echo "PASS (${SECONDS}s)"
