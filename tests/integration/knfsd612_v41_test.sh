#!/usr/bin/env bash
# nache's upstream in NFSv4.1 (Upstream_Minor_Version = 1) against Linux
# 6.12 knfsd (under qemu): a session with its back channel on nache's own
# connections (no callback port), read delegations for read opens, and the
# write delegations knfsd gives NFSv4.1 clients only, seen in knfsd's own
# state file (read, not assumed). With write-back, data written under the
# write delegation stays in nache; a client mounting knfsd directly that
# opens the file for writing gets it recalled, and reads all of nache's
# data; then nache's clients read that writer's data. Locks taken under
# the write delegation stay in nache too, and reach knfsd with the recall,
# before the delegation goes back. After a knfsd reboot nache reclaims an
# open and its delegation over a new session.
set -uo pipefail
export LAB_KNFSD_KERNEL=6.12
# knfsd grants no delegation while any lock manager is in grace, lockd's
# included (50 s after boot by default): shorten lockd's.
export LAB_KNFSD_NLM_GRACE=10
# The reboot of the reclaim check must end within the lease: nache stops
# trusting its delegations once it cannot renew for 9/10 of a lease (the
# server might have revoked them), and has none left to reclaim. A qemu
# guest under TCG booted in 34 s on a loaded 2-core machine, past the
# lab's default 30 s lease: 90 s leaves room.
export LAB_KNFSD_LEASE=90
source "$(dirname "$0")/itest.sh"

V41='Upstream_Minor_Version = 1; Open_Linger = 1; Write_Policy = "write_back"; Flush_Age = 3600;'
lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		lab_nache_start "$V41" &&
	lab_clients_start 1 2 || { echo "lab did not start"; exit 1; }
K=$LAB_KNFSD_EXPORT_DIR
mount_nache 2 /mnt/n vers=4.1 || { echo "mount failed"; exit 1; }
lab_knfsd_run "echo nache-r > $K/nache-r && echo nache-rw > $K/nache-rw &&
	echo old > $K/nache-wb && echo lock-me > $K/nache-lk && chmod 666 $K/nache-lk" ||
	{ echo "cannot create files at the remote"; exit 1; }
NACHE='name: "nache/'            # in the info of nache's client at knfsd

source "$(dirname "$0")/../../lab/knfsd_states.sh"

callback_up() { [ "$(metric nache_callback_path_up)" = 1 ]; }
nache_reads() { read_delegs "$NACHE" /nache-r; }
nache_writes() { write_delegs "$NACHE" /nache-rw; }

nfsv41_session_with_back_channel() {
	lab_wait_until 30 callback_up || { echo "the back channel never came up" >&2; return 1; }
	expect_eq "nache's client at knfsd speaks" \
		"$(lab_knfsd_run 'cat /proc/fs/nfsd/clients/*/info' | awk '/name: "nache\// { ours = 1 } ours && /minor version/ { print $3; exit }')" 1
}

nache_read_open_gets_read_delegation() {
	local rc=0
	held_until_delegated 2 '<' /mnt/n/nache-r nache-r nache_reads || rc=1
	[ $rc = 0 ] || lab_knfsd_states >&2
	release 2 nache-r
	[ $rc = 0 ] && at_least "read delegations granted (nache's metric)" \
		"$(metric nache_delegations_granted_total 'type="read"')" 1
}

nache_read_write_open_gets_write_delegation() {
	local rc=0
	held_until_delegated 2 '<>' /mnt/n/nache-rw nache-rw nache_writes || rc=1
	echo "--- knfsd's states while nache's client holds /nache-rw open read-write:" >&2
	lab_knfsd_states >&2
	release 2 nache-rw
	[ $rc = 0 ] && at_least "write delegations granted (nache's metric)" \
		"$(metric nache_delegations_granted_total 'type="write"')" 1
}

nache_wb() { write_delegs "$NACHE" /nache-wb; }
# WRITEs knfsd executed so far (op 38 of its per-operation counters). The
# file itself is not looked at in the server: a local open there breaks
# the delegation (knfsd's delegations are leases).
knfsd_writes() { lab_knfsd_run 'grep proc4ops /proc/net/rpc/nfsd' | awk '{ print $41 }'; }

dirty_data_under_write_delegation_reaches_a_direct_writer() {
	local rc=0 want got w0
	# Client 2 holds the file open read-write until nache has it delegated
	# for writing, then writes 1 MiB into it and fsyncs. The holder keeps
	# it open throughout, so nache keeps the delegation.
	held_until_delegated 2 '<>' /mnt/n/nache-wb nache-wb nache_wb || { lab_knfsd_states >&2; return 1; }
	w0=$(knfsd_writes) &&
		want=$(on 2 "head -c 1048576 /dev/urandom > /tmp/blob && dd if=/tmp/blob of=/mnt/n/nache-wb bs=64k conv=fsync,notrunc status=none && sha256sum < /tmp/blob | cut -c1-64") ||
		{ release 2 nache-wb; return 1; }
	# Acknowledged, and still only in nache.
	at_least "dirty bytes in nache" "$(metric nache_dirty_bytes)" 1048576 &&
		expect_eq "WRITEs knfsd executed meanwhile" "$(($(knfsd_writes) - w0))" 0 ||
		{ release 2 nache-wb; return 1; }
	# A client of knfsd's own opens it for writing: knfsd recalls nache's
	# delegation; nache flushes, then returns it; the writer reads it all.
	lab_client_mount 1 "$LAB_KNFSD_ADDR" / /mnt/k vers=4.1 || { release 2 nache-wb; return 1; }
	got=$(on 1 "exec 3<>/mnt/k/nache-wb && sha256sum <&3 | cut -c1-64") || rc=1
	release 2 nache-wb
	expect_eq "what the direct writer reads" "$got" "$want" &&
		at_least "recalls received" "$(metric nache_delegation_recalls_total)" 1 &&
		at_least "WRITEs knfsd executed for the recall" "$(($(knfsd_writes) - w0))" 1 || rc=1
	# Its own write then shows through nache.
	on 1 "echo written-directly > /mnt/k/nache-wb" || rc=1
	lab_wait_until 30 eval '[ "$(on 2 "cat /mnt/n/nache-wb")" = written-directly ]' ||
		{ echo "nache's client reads: $(on 2 "head -c 40 /mnt/n/nache-wb" | od -c | head -2)" >&2; rc=1; }
	on 1 "umount /mnt/k" >/dev/null 2>&1
	return $rc
}

nache_lk() { write_delegs "$NACHE" /nache-lk; }
nache_locks_at_knfsd() { states_count "$NACHE" 'type: lock' /nache-lk; }
# trylock N PATH — client N opens PATH read-write and tries an exclusive
# lock of [0, 10) without waiting: prints ok or denied.
trylock() {
	on "$1" "python3 -c 'import fcntl, os
fd = os.open(\"$2\", os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
    print(\"ok\")
except OSError:
    print(\"denied\")'"
}

locks_under_write_delegation_stay_local_until_recalled() {
	local rc=0 l0
	held_until_delegated 2 '<>' /mnt/n/nache-lk nache-lk nache_lk || { lab_knfsd_states >&2; return 1; }
	l0=$(metric nache_delegation_local_locks_total) || rc=1
	# Client 2 locks [0, 10) exclusively and keeps it.
	on 2 "python3 -c 'import fcntl, os, time
fd = os.open(\"/mnt/n/nache-lk\", os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
open(\"/tmp/locked\", \"w\").close()
while os.path.exists(\"/tmp/locked\"):
    time.sleep(0.2)'" >/dev/null 2>&1 &
	lab_wait_until 30 on 2 "test -e /tmp/locked" || { release 2 nache-lk; return 1; }
	# Granted by nache under its write delegation: knfsd knows of no lock.
	at_least "locks granted under the delegation" \
		"$(($(metric nache_delegation_local_locks_total) - l0))" 1 &&
		expect_eq "nache's locks at knfsd" "$(nache_locks_at_knfsd)" 0 || rc=1
	# A client of knfsd's own opens it: the recall sends the lock before
	# the DELEGRETURN, so that client's lock is refused.
	lab_client_mount 1 "$LAB_KNFSD_ADDR" / /mnt/k vers=4.1 || rc=1
	expect_eq "a direct client's lock while nache's client holds one" \
		"$(trylock 1 /mnt/k/nache-lk)" denied &&
		at_least "nache's locks at knfsd after the recall" "$(nache_locks_at_knfsd)" 1 || rc=1
	# Unlocked through nache: the direct client gets it.
	on 2 "rm -f /tmp/locked"
	lab_wait_until 30 eval '[ "$(trylock 1 /mnt/k/nache-lk)" = ok ]' ||
		{ echo "the direct client's lock is still refused" >&2; rc=1; }
	release 2 nache-lk
	on 1 "umount /mnt/k" >/dev/null 2>&1
	return $rc
}

# knfsd reboots while nache's client holds a file open for reading, which
# knfsd delegated to nache: nache makes a new session, reclaims the open
# with its delegation in the grace period (CLAIM_PREVIOUS), then says
# RECLAIM_COMPLETE, after which new opens are served again.
remote_restart_reclaims_over_nfsv41() {
	local rc=0 r0
	r0=$(metric nache_upstream_reclaims_total 'state="delegation",outcome="reclaimed"') || return 1
	held_until_delegated 2 '<' /mnt/n/nache-r nache-r nache_reads || { lab_knfsd_states >&2; return 1; }
	lab_remote_knfsd_restart && lab_knfsd_wait_grace || rc=1
	if [ $rc = 0 ]; then
		echo "--- knfsd's states after its restart and grace period:" >&2
		lab_knfsd_states >&2
		at_least "delegations reclaimed" \
			"$(($(metric nache_upstream_reclaims_total 'state="delegation",outcome="reclaimed"') - r0))" 1 &&
			at_least "read delegations knfsd shows for nache" "$(states_count "$NACHE" 'type: deleg, access: r' /)" 1 &&
			expect_eq "a new open through nache after the grace" "$(on 2 "cat /mnt/n/nache-rw")" nache-rw || rc=1
	fi
	release 2 nache-r
	return $rc
}

check nfsv41_session_with_its_back_channel_on_our_connection nfsv41_session_with_back_channel
check nache_read_open_gets_nache_a_read_delegation nache_read_open_gets_read_delegation
check nache_read_write_open_gets_nache_a_write_delegation_from_knfsd_6_12 nache_read_write_open_gets_write_delegation
check dirty_data_under_a_write_delegation_reaches_a_direct_writer_through_the_recall dirty_data_under_write_delegation_reaches_a_direct_writer
check locks_under_a_write_delegation_stay_in_nache_until_it_is_recalled locks_under_write_delegation_stay_local_until_recalled
check a_remote_restart_is_reclaimed_over_nfsv41 remote_restart_reclaims_over_nfsv41
itest_finish
