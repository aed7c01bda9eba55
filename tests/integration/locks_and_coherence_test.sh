#!/usr/bin/env bash
# Two real kernel clients on nache and one mounting the remote directly:
# fcntl byte-range locks contended across clients (forwarded upstream, so
# the direct client sees them too), and close-to-open visibility between two
# nache clients and between nache and a direct client, both directions.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_up lan 3 || { echo "lab did not start"; exit 1; }
R=$LAB_REMOTE_EXPORT_DIR
M=/mnt/n
LOCKER="python3 $ITEST_DIR/tools/locker.py"
mount_nache 1 $M vers=4.1 && mount_nache 2 $M vers=4.0 && mount_direct 3 $M vers=4.1 ||
	{ echo "mounts failed"; exit 1; }

# hold_lock N FILE START LEN — client N holds an exclusive lock until
# release_lock N; returns once the lock is held.
hold_lock() {
	on "$1" "rm -f /tmp/locked /tmp/release; setsid $LOCKER hold $2 $3 $4 /tmp/locked /tmp/release 120 >/tmp/holder.log 2>&1 < /dev/null &" &&
		lab_wait_until 30 on "$1" "test -e /tmp/locked"
}
release_lock() { on "$1" "touch /tmp/release"; }

lock_conflict_between_nache_clients() {
	on 1 "echo data > $M/lockfile" &&
		hold_lock 1 $M/lockfile 0 100 &&
		{ on 2 "$LOCKER try $M/lockfile 50 10"; expect_eq "client 2 blocked" $? 3; } &&
		on 2 "$LOCKER try $M/lockfile 200 10" &&
		release_lock 1 &&
		lab_wait_until 30 on 2 "$LOCKER try $M/lockfile 50 10"
}

lock_seen_by_direct_client() {
	hold_lock 1 $M/lockfile 0 0 &&
		{ on 3 "$LOCKER try $M/lockfile 10 10"; expect_eq "direct client blocked" $? 3; } &&
		release_lock 1 &&
		lab_wait_until 30 on 3 "$LOCKER try $M/lockfile 10 10"
}

direct_lock_blocks_nache_client() {
	local t
	hold_lock 3 $M/lockfile 1000 10 &&
		{ on 1 "$LOCKER try $M/lockfile 1005 1"; expect_eq "nache client blocked" $? 3; } &&
		t=$(on 2 "$LOCKER test $M/lockfile 1000 10") &&
		expect_eq "F_GETLK conflict" "$(echo "$t" | cut -d' ' -f1-3)" "write 1000 10" &&
		release_lock 3 &&
		lab_wait_until 30 on 1 "$LOCKER try $M/lockfile 1005 1"
}

# Close-to-open: the reader has the old version cached; after the writer
# closes, the reader's next open sees the new data.
cto() {  # cto WRITER READER FILE
	local v1="old-$RANDOM" v2="new-$RANDOM-$RANDOM"
	on "$1" "echo $v1 > $M/$3" && expect_eq "reader sees v1" "$(on "$2" "cat $M/$3")" "$v1" &&
		on "$1" "echo $v2 > $M/$3" && expect_eq "reader sees v2" "$(on "$2" "cat $M/$3")" "$v2"
}

cto_nache_to_nache() { cto 1 2 cto1 && cto 2 1 cto1; }
cto_nache_to_direct() { cto 1 3 cto2; }
cto_direct_to_nache() { cto 3 1 cto3; }
cto_server_side_change() {
	echo before >$R/cto4
	expect_eq "nache client sees old" "$(on 1 "cat $M/cto4")" before &&
		echo changed-at-server-longer >$R/cto4 &&
		expect_eq "nache client sees server change" "$(on 1 "cat $M/cto4")" changed-at-server-longer
}

check fcntl_locks_contended_by_two_nache_clients lock_conflict_between_nache_clients
check nache_client_lock_blocks_direct_client lock_seen_by_direct_client
check direct_client_lock_blocks_nache_client direct_lock_blocks_nache_client
check close_to_open_between_two_nache_clients cto_nache_to_nache
check close_to_open_nache_to_direct cto_nache_to_direct
check close_to_open_direct_to_nache cto_direct_to_nache
check close_to_open_after_change_at_server cto_server_side_change
itest_finish
