#!/usr/bin/env bash
# nache restarts under clients holding open files (no ESTALE: handles live in
# the persistent store), and survives its upstream being unreachable at start
# and in the middle of a run: clients wait or get retryable errors, recover
# when the remote returns, and nache never crashes.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# A short grace period so clients reclaim their opens after a restart.
export LAB_GRACE=1 LAB_LEASE_LIFETIME=10 LAB_GRACE_PERIOD=12
NACHE_OPTS="Startup_Wait = 1000; Upstream_Timeout = 4000;"

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_nache_start "$NACHE_OPTS" &&
	lab_clients_start 1 || { echo "lab did not start"; exit 1; }
R=$LAB_REMOTE_EXPORT_DIR
M=/mnt/n
HOLDER="python3 $ITEST_DIR/tools/holder.py"
mount_nache 1 $M vers=4.1 || { echo "mount failed"; exit 1; }

restart_with_open_file() {
	on 1 "mkdir -p $M/r && rm -f /tmp/ready /tmp/go /tmp/holder.out; setsid sh -c '$HOLDER $M/r/held /tmp/ready /tmp/go 300 > /tmp/holder.out 2>&1; echo \$? > /tmp/holder.rc' < /dev/null > /dev/null 2>&1 &" &&
		lab_wait_until 30 on 1 "test -e /tmp/ready" &&
		lab_nache_restart "$NACHE_OPTS" &&
		on 1 "touch /tmp/go" &&
		lab_wait_until 120 on 1 "test -e /tmp/holder.rc" &&
		expect_eq "holder exit" "$(on 1 "cat /tmp/holder.rc")" 0 &&
		expect_eq "server bytes" "$(cat $R/r/held)" "$(printf 'before\nafter')" &&
		expect_eq "old directory handle" "$(on 1 "ls $M/r")" held
}

restart_keeps_handles_without_estale() {
	local before after
	on 1 "mkdir -p $M/deep/er && echo v > $M/deep/er/f && cd $M/deep/er && cat f" >/dev/null &&
		before=$(on 1 "stat -c %i $M/deep/er/f") &&
		lab_nache_restart "$NACHE_OPTS" &&
		after=$(on 1 "stat -c %i $M/deep/er/f && cat $M/deep/er/f") &&
		expect_eq "same inode, same data" "$after" "$(printf '%s\nv' "$before")"
}

# still_running_after N SECONDS — the background command in client N is
# still running after SECONDS (the outage lasts that long on purpose: this
# checks that clients wait through it rather than fail).
still_running_after() {
	local n=$1 end=$((SECONDS + $2))
	while [ $SECONDS -lt $end ]; do
		if ! on "$n" "test ! -e /tmp/bg.rc"; then
			echo "client command ended during the outage: $(on "$n" "cat /tmp/bg.out")" >&2
			return 1
		fi
		lab_wait_until 1 false 2>/dev/null || true
	done
	return 0
}

upstream_down_mid_run() {
	local pid
	pid=$(lab_nache_pid)
	echo payload >$R/mid
	step "first read" on 1 "cat $M/mid" >/dev/null &&
		step "stop remote" lab_remote_vfs_stop &&
		step "start reader" on 1 "rm -f /tmp/bg.rc; setsid sh -c 'cat $M/mid > /tmp/bg.out 2>&1; echo \$? > /tmp/bg.rc; ls $M >> /tmp/bg.out 2>&1' < /dev/null > /dev/null 2>&1 &" &&
		step "reader waits through the outage" still_running_after 1 10 &&
		expect_eq "nache alive, same pid" "$(lab_nache_pid)" "$pid" &&
		step "restart remote" lab_remote_vfs_start &&
		step "reader finishes" lab_wait_until 120 on 1 "test -e /tmp/bg.rc" &&
		expect_eq "client command succeeded" "$(on 1 "cat /tmp/bg.rc")" 0 &&
		expect_eq "data after recovery" "$(on 1 "head -1 /tmp/bg.out")" payload &&
		expect_eq "nache alive, same pid" "$(lab_nache_pid)" "$pid"
}

upstream_down_at_start() {
	step "umount" on 1 "cd /; umount $M || umount -l $M" &&
		lab_nache_stop && lab_remote_vfs_stop &&
		lab_nache_start "$NACHE_OPTS" &&
		on 1 "rm -f /tmp/bg.rc; setsid sh -c 'mount -t nfs4 -o vers=4.1 $LAB_NACHE_ADDR:/export $M && cat $M/mid > /tmp/bg.out 2>&1; echo \$? > /tmp/bg.rc' < /dev/null > /dev/null 2>&1 &" &&
		still_running_after 1 8 &&
		lab_remote_vfs_start &&
		lab_wait_until 180 on 1 "test -e /tmp/bg.rc" &&
		expect_eq "mount and read succeeded" "$(on 1 "cat /tmp/bg.rc; cat /tmp/bg.out")" "$(printf '0\npayload')"
}

check proxy_restart_while_client_holds_file_open restart_with_open_file
check proxy_restart_keeps_filehandles_no_estale restart_keeps_handles_without_estale
check upstream_unreachable_mid_run_client_waits_and_recovers upstream_down_mid_run
check upstream_unreachable_at_start_client_waits_and_recovers upstream_down_at_start
itest_finish
