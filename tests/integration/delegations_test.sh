#!/usr/bin/env bash
# Upstream delegations with Linux knfsd (6.1 under user-mode-linux, which
# grants read delegations) as the remote: knfsd is seen to delegate to nache
# (its own state file, not assumed); two clients opening the same 100 files
# 8 times cost the remote at most one OPEN per file; a client writing the
# file directly at the remote recalls nache's delegation, also while a
# nache client holds the file open, and both sides see each other's data;
# over NFSv4.0 (delegations_v40_test.sh), with the callback path blocked
# there are no delegations and everything stays correct, while over
# NFSv4.1 (nache's default) the same blocked address changes nothing, the
# back channel being nache's own connection; a remote restart while a client holds a lock and nache
# a delegation has them reclaimed in knfsd's grace period, and drops the
# delegations of files nobody has open. Ganesha
# delegates to nache's own clients (Delegations = readwrite): a recall from
# the remote reaches them first, and a conflict between two of them is
# resolved inside the office with no recall from the remote.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# knfsd grants no delegation while any lock manager is in grace, lockd's
# included (50 s after boot by default): shorten lockd's.
export LAB_KNFSD_NLM_GRACE=10
export LAB_NACHE_DELEGATIONS=readwrite
lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		lab_nache_start 'Open_Linger = 2;' &&
	lab_clients_start 1 2 3 || { echo "lab did not start"; exit 1; }
M=/mnt/n
D=/mnt/k
K=$LAB_KNFSD_EXPORT_DIR
mount_nache 1 $M vers=4.1 && mount_nache 2 $M vers=4.1 &&
	lab_client_mount 3 "$LAB_KNFSD_ADDR" / $D vers=4.0 ||
	{ echo "mounts failed"; exit 1; }

# knfsd_op NAME — the server's count of NFSv4 operation NAME
# ("proc4ops COUNT v0 v1 ...": operation number i is field i+3).
knfsd_op() {
	local n
	case $1 in
	ACCESS) n=3 ;; CLOSE) n=4 ;; DELEGRETURN) n=8 ;; GETATTR) n=9 ;;
	LOCK) n=12 ;; LOCKU) n=14 ;; OPEN) n=18 ;; OPEN_CONFIRM) n=20 ;;
	READ) n=25 ;;
	*) echo "unknown op $1" >&2; return 1 ;;
	esac
	lab_knfsd_stats | awk -v f=$((n + 3)) '$1 == "proc4ops" { print $f }'
}
# nache_states TYPE — states of TYPE (open, lock, deleg) knfsd shows for
# nache's client.
nache_states() {
	lab_knfsd_states | awk -v t="type: $1," '/^# client/ { ours = 0 }
		/name: "nache\// { ours = 1 }
		ours && index($0, t) { n++ } END { print n + 0 }'
}
# nache_delegs — delegations knfsd shows for nache's client (its client id
# string starts with "nache/").
nache_delegs() { nache_states deleg; }
callback_up() { [ "$(metric nache_callback_path_up)" = 1 ]; }
# The files are written inside the knfsd guest, so no NFS client's recent
# write stands in the way of a delegation.
# d/e* are read by one test each (the loop below gives every d/f* a local
# delegation in both nache clients). Synced: the remote's crash tests
# expect its files to outlive a crash, as long-standing files do.
lab_knfsd_run "mkdir -p $K/d && for i in \$(seq 1 100); do echo file-\$i > $K/d/f\$i; echo e-\$i > $K/d/e\$i; done && sync" ||
	{ echo "cannot create files at the remote"; exit 1; }

reopen_until_delegated() {
	if [ "$(metric nache_upstream_open_files)" = 0 ]; then
		on 1 "cat $M/d/f1" >/dev/null
	fi
	[ "$(nache_delegs)" -ge 1 ]
}

remote_delegates_to_nache() {
	lab_wait_until 30 callback_up || { echo "callback path never came up" >&2; return 1; }
	expect_eq "content" "$(on 1 "cat $M/d/f1")" file-1 || return 1
	# Until knfsd's grace periods end it delegates nothing; each new
	# upstream OPEN (once the linger, 2 s, closed the previous one) asks
	# again.
	lab_wait_until 60 reopen_until_delegated ||
		{ lab_knfsd_states >&2; return 1; }
	at_least "read delegations granted (nache's metric)" \
		"$(metric nache_delegations_held 'type="read"')" 1
}

shared_files_opened_once_upstream() {
	local o0 c0 g0 r0 f0 j0 o1 g1 r1 f1 j1 opens
	o0=$(knfsd_op OPEN) c0=$(knfsd_op CLOSE) g0=$(knfsd_op GETATTR) r0=$(knfsd_op READ)
	f0=$(knfsd_op OPEN_CONFIRM) j0=$(metric nache_upstream_open_joins_total)
	local loop='for r in 1 2 3 4 5 6 7 8; do for i in $(seq 1 100); do cat '$M'/d/f$i >/dev/null || exit 1; done; done'
	on 1 "$loop" & local p1=$!
	on 2 "$loop" & local p2=$!
	wait $p1 && wait $p2 || { echo "a client's loop failed" >&2; return 1; }
	o1=$(knfsd_op OPEN) g1=$(knfsd_op GETATTR) r1=$(knfsd_op READ)
	f1=$(knfsd_op OPEN_CONFIRM) j1=$(metric nache_upstream_open_joins_total)
	echo "100 files x 8 rounds x 2 clients at the remote: OPEN $((o1 - o0)) (OPEN_CONFIRM $((f1 - f0)), joined an open held $((j1 - j0))) GETATTR $((g1 - g0)) READ $((r1 - r0))" >&2
	# At most one open per file: an OPEN_CONFIRM's COMPOUND repeats its
	# OPEN (the same open, now by a confirmed owner, which is what knfsd
	# delegates to), and an OPEN by name of a file nache holds open
	# already (its attributes too old to answer the name here, as under
	# load) is merged by the remote into that open (cache_test.sh,
	# every_open_gets_its_close), so those OPENs are not new opens.
	opens=$((o1 - o0 - (f1 - f0) - (j1 - j0)))
	[ "$opens" -le 100 ] || {
		echo "expected at most 100 upstream opens, got $opens" \
			"(opens by name that waited for another: $(metric nache_open_name_waits_total);" \
			"read delegations granted: $(metric nache_delegations_granted_total 'type="read"'))" >&2
		return 1
	}
	at_least "delegations held" "$(nache_delegs)" 90 &&
		# Once the linger expires every upstream open is closed.
		lab_wait_until 30 eval '[ $(($(knfsd_op CLOSE) - c0)) -ge $opens ]' ||
		{ echo "CLOSE $(($(knfsd_op CLOSE) - c0)) < opens $opens" >&2; return 1; }
}

direct_writer_recalls_and_sees_data() {
	local rec0 d0
	rec0=$(metric nache_delegation_recalls_total) d0=$(knfsd_op DELEGRETURN)
	expect_eq "through nache" "$(on 1 "cat $M/d/f2")" file-2 &&
		on 3 "echo direct-2 > $D/d/f2" &&
		at_least "recalls" "$(metric nache_delegation_recalls_total)" $((rec0 + 1)) &&
		at_least "DELEGRETURNs at the remote" "$(knfsd_op DELEGRETURN)" $((d0 + 1)) &&
		expect_eq "nache after the direct write" "$(on 2 "cat $M/d/f2")" direct-2
}

recall_while_a_nache_client_has_it_open() {
	local o0 rec0
	expect_eq "through nache" "$(on 1 "cat $M/d/f3")" file-3 || return 1
	rec0=$(metric nache_delegation_recalls_total) o0=$(knfsd_op OPEN)
	# Client 2 holds f3 open for read (granted locally under the
	# delegation) while client 3 writes it at the remote; then reads
	# through that open, which must still work.
	on 2 "exec 3<$M/d/f3; echo held > /tmp/held; while [ -e /tmp/held ]; do sleep 0.2; done; cat <&3 >/dev/null && echo read-ok" \
		>"$LAB_DIR/held.out" & local holder=$!
	lab_wait_until 10 on 2 "test -e /tmp/held" &&
		on 3 "echo direct-3 > $D/d/f3" &&
		at_least "recalls" "$(metric nache_delegation_recalls_total)" $((rec0 + 1)) &&
		# The local open became an upstream OPEN before the return.
		at_least "upstream OPENs" "$(knfsd_op OPEN)" $((o0 + 1))
	local rc=$?
	on 2 "rm -f /tmp/held"
	wait $holder || rc=1
	[ $rc = 0 ] && expect_eq "the holder reads on" "$(cat "$LAB_DIR/held.out")" read-ok &&
		expect_eq "a new open through nache" "$(on 1 "cat $M/d/f3")" direct-3
}

nache_write_then_direct_read() {
	on 1 "cat $M/d/f4 >/dev/null && echo via-nache > $M/d/f4" &&
		expect_eq "direct reader" "$(on 3 "cat $D/d/f4")" via-nache &&
		on 3 "echo direct-4 > $D/d/f4" &&
		expect_eq "nache after the direct write" "$(on 2 "cat $M/d/f4")" direct-4
}

local_delegs() { metric nache_local_delegations_held; }
recalls() { metric nache_delegation_recalls_total; }

# Client 1 gets a delegation from Ganesha on e1 (nache holds the remote's);
# a direct writer makes the remote recall nache's, and nache has Ganesha
# recall client 1's first: otherwise client 1 would go on reading its
# cached copy under its delegation.
# read_gets_local_delegation FILE CONTENT — client 1 reads FILE through
# nache (it must hold CONTENT) and Ganesha delegates it to client 1.
read_gets_local_delegation() {
	local l0
	l0=$(local_delegs)
	expect_eq "through nache" "$(on 1 "cat $M/$1")" "$2" &&
		lab_wait_until 10 eval '[ "$(local_delegs)" -gt '"$l0"' ]' ||
		{ echo "no local delegation granted ($(local_delegs))" >&2; return 1; }
}

remote_recall_reaches_local_delegation() {
	local r0
	r0=$(recalls)
	read_gets_local_delegation d/e1 e-1 || return 1
	on 3 "echo direct-e1 > $D/d/e1" &&
		at_least "recalls from the remote" "$(recalls)" $((r0 + 1)) &&
		expect_eq "client 1 after the recall" "$(on 1 "cat $M/d/e1")" direct-e1
}

# Client 1 holds a delegation from Ganesha on e2; client 2 writes e2
# through nache. Ganesha recalls client 1's delegation itself, nache returns
# its own before writing: the remote never has to recall anything.
local_conflict_needs_no_remote_recall() {
	local r0
	r0=$(recalls)
	read_gets_local_delegation d/e2 e-2 || return 1
	on 2 "echo local-e2 > $M/d/e2" &&
		expect_eq "client 1 sees client 2's write" "$(on 1 "cat $M/d/e2")" local-e2 &&
		expect_eq "the remote has it" "$(on 3 "cat $D/d/e2")" local-e2 &&
		expect_eq "recalls from the remote" "$(recalls)" "$r0"
}

knfsd_delegated() { lab_knfsd_states | grep 'type: deleg' | grep -q "\"$1\""; }

# A WAN cut longer than the lease: knfsd cannot recall nache's delegation,
# so it lets a direct writer in once nache's lease is over. nache must
# stop trusting the delegation (and have its clients' local ones recalled)
# by then: after the cut, its clients see the writer's data.
lease_lapse_serves_no_stale_data() {
	expect_eq "through nache" "$(on 1 "cat $M/d/e3")" e-3 &&
		lab_wait_until 10 knfsd_delegated d/e3 ||
		{ echo "knfsd did not delegate d/e3" >&2; lab_knfsd_states >&2; return 1; }
	cut_upstream "$LAB_KNFSD_ADDR" || { heal_upstream; return 1; }
	local rc=0
	on 3 "echo direct-e3 > $D/d/e3" || rc=1
	heal_upstream
	[ $rc = 0 ] &&
		expect_eq "client 1 after the cut" "$(on 1 "cat $M/d/e3")" direct-e3 &&
		expect_eq "client 2 after the cut" "$(on 2 "cat $M/d/e3")" direct-e3
}

# knfsd crashes and reboots while client 1 holds an exclusive lock on
# [0, 10) of d/e5 (through an open for read and write, so no delegation)
# and client 2 holds d/e6 open for reading, which knfsd delegated to nache.
# In knfsd's grace period nache reclaims both opens (e6's with its
# delegation) and the lock: after the grace knfsd shows them, and a
# direct client's conflicting lock is still refused until client 1 lets
# go. Without the reclaim the lock would be free at the remote while
# client 1 believes it holds it.
# The delegation nache reclaimed is held at knfsd, or nache gave it back
# because knfsd asked for it at once: knfsd grants a reclaimed delegation
# with "recall" set while its probe of our callback path after its
# restart has not answered yet (RFC 7530 16.16.5), a race with our reclaim
# that either side may win. (Nothing else recalls d/e6 meanwhile.)
reclaimed_delegation_held_or_given_back_as_asked() {
	local returned=$(($(metric nache_delegation_return_seconds_count 'reason="recall"') - $1))
	[ "$(nache_delegs)" -ge 1 ] && return 0
	echo "knfsd shows no delegation for nache; nache returned $returned on a recall since the restart" >&2
	[ "$returned" -ge 1 ]
}

remote_restart_reclaims_opens_locks_and_delegations() {
	local locker="python3 $ITEST_DIR/tools/locker.py" rc=0 returns0
	on 1 "rm -f /tmp/locked /tmp/release; setsid $locker hold $M/d/e5 0 10 /tmp/locked /tmp/release 300 >/tmp/holder.log 2>&1 </dev/null &" &&
		lab_wait_until 30 on 1 "test -e /tmp/locked" || return 1
	on 2 "exec 3<$M/d/e6; echo held > /tmp/held6; while [ -e /tmp/held6 ]; do sleep 0.2; done" &
	local holder=$!
	{ lab_wait_until 10 on 2 "test -e /tmp/held6" &&
		lab_wait_until 30 knfsd_delegated d/e6 &&
		lab_knfsd_states | grep 'type: lock' | grep -q '"d/e5"'; } ||
		{ echo "before the restart: no delegation on d/e6 or no lock on d/e5" >&2; lab_knfsd_states >&2; rc=1; }
	returns0=$(metric nache_delegation_return_seconds_count 'reason="recall"') || rc=1
	if [ $rc = 0 ]; then
		lab_remote_knfsd_restart && lab_knfsd_wait_grace || rc=1
	fi
	if [ $rc = 0 ]; then
		echo "--- knfsd's states after its restart and grace period:" >&2
		lab_knfsd_states >&2
		at_least "opens reclaimed" "$(metric nache_upstream_reclaims_total 'state="open",outcome="reclaimed"')" 2 &&
			at_least "locks reclaimed" "$(metric nache_upstream_reclaims_total 'state="lock",outcome="reclaimed"')" 1 &&
			at_least "delegations reclaimed" "$(metric nache_upstream_reclaims_total 'state="delegation",outcome="reclaimed"')" 1 &&
			# (knfsd names a file reclaimed by handle "/" in its states.)
			reclaimed_delegation_held_or_given_back_as_asked "$returns0" &&
			at_least "locks knfsd shows for nache" "$(nache_states lock)" 1 &&
			{ on 3 "$locker try $D/d/e5 0 10"; expect_eq "direct client's lock after the restart" $? 3; } || rc=1
	fi
	on 1 "touch /tmp/release"
	on 2 "rm -f /tmp/held6"
	wait $holder
	[ $rc = 0 ] && lab_wait_until 30 on 3 "$locker try $D/d/e5 0 10"
}

remote_restart_drops_delegations() {
	local e0
	e0=$(metric nache_upstream_clientid_epoch)
	lab_remote_knfsd_restart && lab_knfsd_wait_grace || return 1
	lab_wait_until 60 eval '[ "$(metric nache_upstream_clientid_epoch)" -gt '"$e0"' ]' ||
		{ echo "nache did not re-establish its client id" >&2; return 1; }
	expect_eq "delegations after the restart (nache)" \
		"$(metric nache_delegations_held)" 0 &&
		on 3 "echo after-restart > $D/d/f5" &&
		expect_eq "nache sees the remote's data" "$(on 1 "cat $M/d/f5")" after-restart
}

# nache restarted with its callback address one the remote's side cannot
# reach (nache's LAN address, blackholed at the remote).
restart_with_unreachable_callback() {
	ip -n "$LAB_NS_REMOTE" route replace blackhole "$LAB_NACHE_ADDR/32" || return 1
	lab_nache_stop &&
		LAB_NACHE_CALLBACK="Callback_Address = $LAB_NACHE_ADDR; Callback_Port = $LAB_NACHE_CALLBACK_PORT;" \
			LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start 'Open_Linger = 2;'
}

# NFSv4.0: the callback path stays down, so no delegations, and the
# office still sees the remote's writes (close-to-open).
callback_blocked_means_no_delegations() {
	local held
	restart_with_unreachable_callback &&
		expect_eq "read" "$(on 1 "cat $M/d/f6")" file-6 &&
		on 3 "echo direct-6 > $D/d/f6" &&
		expect_eq "close-to-open without delegations" "$(on 2 "cat $M/d/f6")" direct-6 &&
		held=$(metric nache_delegations_held) &&
		expect_eq "delegations held" "$held" 0 &&
		expect_eq "callback path" "$(metric nache_callback_path_up)" 0
	local rc=$?
	ip -n "$LAB_NS_REMOTE" route del blackhole "$LAB_NACHE_ADDR/32"
	return $rc
}

# NFSv4.1: the back channel is nache's own connection, so the same
# unreachable address changes nothing: the path is up, the remote
# delegates, and its recall still reaches nache.
callback_address_unused_by_the_back_channel() {
	local rec0
	restart_with_unreachable_callback &&
		lab_wait_until 30 callback_up &&
		expect_eq "read" "$(on 1 "cat $M/d/f6")" file-6 &&
		lab_wait_until 30 eval '[ "$(metric nache_delegations_held)" -ge 1 ] || { on 1 "cat $M/d/f6" >/dev/null; false; }' &&
		rec0=$(metric nache_delegation_recalls_total) &&
		on 3 "echo direct-6 > $D/d/f6" &&
		at_least "recalls" "$(metric nache_delegation_recalls_total)" $((rec0 + 1)) &&
		expect_eq "the office reads the remote's write" "$(on 2 "cat $M/d/f6")" direct-6
	local rc=$?
	ip -n "$LAB_NS_REMOTE" route del blackhole "$LAB_NACHE_ADDR/32"
	return $rc
}

check remote_delegates_read_delegation_to_nache remote_delegates_to_nache
check two_clients_100_files_8_rounds_one_upstream_open_each shared_files_opened_once_upstream
check direct_writer_recalls_nache_delegation_and_both_see_data direct_writer_recalls_and_sees_data
check recall_while_a_nache_client_holds_the_file_open recall_while_a_nache_client_has_it_open
check nache_write_returns_delegation_and_direct_reader_sees_it nache_write_then_direct_read
check remote_recall_reaches_a_local_clients_delegation_first remote_recall_reaches_local_delegation
check conflict_between_local_clients_needs_no_recall_from_the_remote local_conflict_needs_no_remote_recall
check wan_cut_longer_than_the_lease_serves_no_stale_data lease_lapse_serves_no_stale_data
check remote_restart_reclaims_opens_locks_and_delegations remote_restart_reclaims_opens_locks_and_delegations
check remote_restart_drops_delegations_without_stale_data remote_restart_drops_delegations
if [ "$(lab_nache_minor)" = 0 ]; then
	check callback_path_blocked_no_delegations_still_correct callback_blocked_means_no_delegations
else
	check unreachable_callback_address_leaves_the_v41_back_channel_up callback_address_unused_by_the_back_channel
fi
itest_finish
