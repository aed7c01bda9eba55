#!/usr/bin/env bash
# NFSv3 byte-range locks (NLM) through nache, from real kernel clients.
# Clients 1 and 2 mount nache over NFSv3 with locking (no nolock: nache's
# box runs rpcbind and rpc.statd, LAB_NLM=1); client 3 mounts the remote
# directly over NFSv4.1. nache forwards each NLM lock upstream as an NFSv4
# lock, so the direct client meets it, and a direct client's lock meets
# nache's NFSv3 clients. A blocked NFSv3 lock is granted by nache's
# NLM_GRANTED call to the client's lockd once the holder lets go. After a
# restart of nache, the box's statd has the clients reclaim their locks.
# Every check runs against the Ganesha VFS remote (vfs_*), then against
# knfsd (knfsd_*, nache restarted in front of it).
set -uo pipefail
export LAB_NLM=1
# knfsd refuses NFSv4 locks while its lockd is in its grace period (50 s
# after boot by default).
export LAB_KNFSD_NLM_GRACE=10
# nache logs its NLM answers (blocked_since).
export LAB_NACHE_GLOBAL='LOG { COMPONENTS { NLM = DEBUG; } }'
source "$(dirname "$0")/itest.sh"

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_remote_knfsd_start &&
	lab_nache_start && lab_clients_start 1 2 3 || { echo "lab did not start"; exit 1; }
M=/mnt/n   # nache over NFSv3, on clients 1 and 2
D=/mnt/d   # the remote over NFSv4.1, on client 3
LOCKER="python3 $ITEST_DIR/tools/locker.py"

# mount_all DIRECT_SERVER DIRECT_EXPORT — clients 1 and 2 mount nache over
# NFSv3 (lab_client_mount adds no nolock, no ports: rpcbind tells them),
# client 3 the remote over NFSv4.1.
mount_all() {
	mount_nache 1 $M vers=3 && mount_nache 2 $M vers=3 &&
		lab_client_mount 3 "$1" "$2" $D vers=4.1 &&
		on 1 "grep ' $M ' /proc/mounts | grep -v nolock | grep -q vers=3" ||
		{ echo "mounts failed" >&2; return 1; }
}
# umount_all — holders a failed check left behind end first.
umount_all() {
	local n
	for n in 1 2 3; do on $n 'kill -9 $(cat /tmp/holder.pid) 2>/dev/null; true'; done
	lab_client_umount 1 $M && lab_client_umount 2 $M && lab_client_umount 3 $D
}

# start_holder N HOW FILE — client N starts taking a lock of FILE, kept
# until release N: HOW flock (flock(1), exclusive, the whole file), write
# or read (locker.py: fcntl, exclusive or shared, bytes 0..99). The lock
# call blocks until granted; then /tmp/locked appears in client N.
start_holder() {
	local cmd
	case $2 in
	flock) cmd="flock -x $3 sh -c 'touch /tmp/locked; while [ ! -e /tmp/release ]; do sleep 0.05; done'" ;;
	write) cmd="$LOCKER hold $3 0 100 /tmp/locked /tmp/release 300" ;;
	read) cmd="$LOCKER hold $3 0 100 /tmp/locked /tmp/release 300 shared" ;;
	esac
	on "$1" "rm -f /tmp/locked /tmp/release
		setsid $cmd >/tmp/holder.log 2>&1 </dev/null & echo \$! >/tmp/holder.pid"
}
holding() { on "$1" "test -e /tmp/locked"; }
holder_gone() { on "$1" '! kill -0 $(cat /tmp/holder.pid) 2>/dev/null'; }
# hold N HOW FILE — start_holder, and return once client N holds the lock
# (fail once its holder gave up).
hold() {
	start_holder "$@" &&
		lab_wait_until 60 eval "holding $1 || holder_gone $1" && holding "$1" ||
		{ echo "client $1 did not get its $2 lock of $3: $(on "$1" "cat /tmp/holder.log")" >&2; return 1; }
}
# release N — client N's holder unlocks and exits.
release() { on "$1" "touch /tmp/release" && lab_wait_until 30 holder_gone "$1"; }
# blocked_answers — NLM locks nache has answered "blocked" so far (the
# client then waits for nache's NLM_GRANTED); blocked_since N — more than N.
blocked_answers() { grep -c 'nlm4_Lock NLM4_BLOCKED' "$(lab_nache_log)" || true; }
blocked_since() { [ "$(blocked_answers)" -gt "$1" ]; }

# refused N WHAT — a non-blocking lock attempt (WHAT: a command that exits
# 3 on a conflict) is refused as a conflict, not failed otherwise.
refused() {
	local rc=0
	on "$1" "$2" || rc=$?
	expect_eq "exit of '$2' in client $1 (3: lock refused)" $rc 3
}
conflicts() { local rc=0; on "$1" "$2" || rc=$?; [ $rc = 3 ]; }
# try FILE [START LEN] / try_flock FILE — the attempts refused takes.
try() { echo "$LOCKER try $1 ${2:-0} ${3:-0}"; }
try_flock() { echo "flock -E 3 -n -x $1 true"; }

# The file NAME through nache and at the direct mount; created empty.
new_file() { on 1 "echo data > $M/$1"; }

exclusive_lock_refuses_other_v3_client() {
	new_file "$1" && hold 1 flock $M/"$1" &&
		refused 2 "$(try_flock $M/"$1")" && refused 2 "$(try $M/"$1")" &&
		release 1 &&
		lab_wait_until 30 on 2 "$(try_flock $M/"$1")"
}

v3_lock_is_an_nfsv4_lock_at_remote() {
	local t
	new_file "$1" && hold 1 write $M/"$1" &&
		refused 3 "$(try $D/"$1" 50 10)" &&
		on 3 "$(try $D/"$1" 200 10)" &&
		t=$(on 3 "$LOCKER test $D/$1 0 0") &&
		expect_eq "F_GETLK at the direct client" "$(echo "$t" | cut -d' ' -f1-3)" "write 0 100" &&
		release 1 &&
		lab_wait_until 30 on 3 "$(try $D/"$1" 50 10)"
}

# Client 2's lock waits at nache for client 1's; client 1's unlock makes
# nache grant it and call client 2's lockd (NLM_GRANTED): well within the
# 30 s after which the client would ask again by itself.
blocked_lock_granted_on_unlock() {
	local before
	new_file "$1" && hold 1 write $M/"$1" && before=$(blocked_answers) &&
		start_holder 2 write $M/"$1" && lab_wait_until 30 blocked_since "$before" &&
		! holding 2 && release 1 &&
		lab_wait_until 15 holding 2 && release 2
}

# The direct client's lock refuses nache's clients (LOCK and F_GETLK go
# upstream); a blocked lock of theirs is granted when it goes (nache polls
# the remote: Blocked_Lock_Poller_Interval, 2 s in the lab).
direct_lock_blocks_v3_clients() {
	local t before
	new_file "$1" && hold 3 write $D/"$1" &&
		refused 1 "$(try $M/"$1" 50 1)" && refused 2 "$(try_flock $M/"$1")" &&
		t=$(on 1 "$LOCKER test $M/$1 0 0") &&
		expect_eq "F_GETLK at a v3 client" "$(echo "$t" | cut -d' ' -f1-3)" "write 0 100" &&
		before=$(blocked_answers) &&
		start_holder 2 write $M/"$1" && lab_wait_until 30 blocked_since "$before" &&
		! holding 2 && release 3 &&
		lab_wait_until 20 holding 2 && release 2
}

shared_locks_coexist_and_exclude_writers() {
	new_file "$1" && hold 1 read $M/"$1" && hold 2 read $M/"$1" &&
		refused 3 "$(try $D/"$1" 0 10)" &&
		on 3 "$LOCKER try $D/$1 0 10 shared" &&
		release 1 && refused 3 "$(try $D/"$1" 0 10)" &&
		release 2 && lab_wait_until 30 on 3 "$(try $D/"$1" 0 10)"
}

# The holder is killed: its client's kernel unlocks (NLM_UNLOCK), and
# nache gives the lock back upstream.
lock_released_when_process_dies() {
	new_file "$1" && hold 1 write $M/"$1" && refused 2 "$(try $M/"$1")" &&
		on 1 'kill -9 $(cat /tmp/holder.pid)' && lab_wait_until 30 holder_gone 1 &&
		lab_wait_until 30 on 2 "$(try $M/"$1")" &&
		lab_wait_until 30 on 3 "$(try $D/"$1")"
}

# nache restarts while a v3 client holds a lock. nache's lock at the remote
# goes with it; the box's statd, as nache.service drives it
# (deploy/nache-nsm), then tells the client, whose lockd reclaims the lock
# in nache's grace period: the remote's again (the direct client is
# refused), and the other v3 client's too, until the holder unlocks.
lock_reclaimed_after_restart() {
	new_file "$1" && hold 1 write $M/"$1" && refused 3 "$(try $D/"$1")" &&
		lab_nache_stop && lab_nsm_retire &&
		LAB_GRACE=1 LAB_GRACE_PERIOD=20 LAB_LEASE_LIFETIME=20 lab_nache_start &&
		lab_nsm_notify &&
		lab_wait_until 60 conflicts 3 "$(try $D/"$1")" &&
		refused 2 "$(try $M/"$1")" && holding 1 &&
		release 1 &&
		lab_wait_until 30 on 2 "$(try $M/"$1")" &&
		lab_wait_until 30 on 3 "$(try $D/"$1")"
}

# run_checks REMOTE — every check, its name and files prefixed by REMOTE.
# The restart goes last: its grace period holds back new locks.
run_checks() {
	local r=$1
	check "${r}_exclusive_v3_lock_refuses_the_other_v3_client" \
		exclusive_lock_refuses_other_v3_client "$r-excl"
	check "${r}_v3_lock_reaches_the_remote_as_an_nfsv4_lock" \
		v3_lock_is_an_nfsv4_lock_at_remote "$r-remote"
	check "${r}_blocked_v3_lock_is_granted_when_the_holder_unlocks" \
		blocked_lock_granted_on_unlock "$r-granted"
	check "${r}_direct_clients_lock_blocks_v3_clients_until_it_goes" \
		direct_lock_blocks_v3_clients "$r-direct"
	check "${r}_shared_v3_locks_coexist_and_exclude_writers" \
		shared_locks_coexist_and_exclude_writers "$r-shared"
	check "${r}_v3_lock_is_released_when_its_process_dies" \
		lock_released_when_process_dies "$r-killed"
	check "${r}_v3_lock_is_reclaimed_after_a_restart_of_nache" \
		lock_reclaimed_after_restart "$r-restart"
}

mount_all "$LAB_REMOTE_ADDR" /export || exit 1
run_checks vfs

# The same in front of knfsd: nache restarted with a new cache (another
# upstream), clients mounting afresh.
export LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/
umount_all && lab_nache_stop && rm -rf "$LAB_DIR/nache/cache" &&
	lab_nache_start && mount_all "$LAB_KNFSD_ADDR" / || exit 1
# knfsd's lockd grace period (LAB_KNFSD_NLM_GRACE) is over once it grants a
# lock (until then the client waits and retries).
on 3 "echo probe > $D/probe" && lab_wait_until 60 on 3 "$(try $D/probe)" ||
	{ echo "knfsd grants no lock"; exit 1; }
run_checks knfsd
itest_finish
