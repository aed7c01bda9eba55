#!/usr/bin/env bash
# Linux 6.12 knfsd (under qemu, LAB_KNFSD_KERNEL=6.12) as the remote grants
# WRITE delegations, which the lab's UML 6.1 knfsd never does: a UML client
# mounting knfsd directly (NFSv4.1) and holding a file open for reading and
# writing is shown one in the server's own state file (read, not assumed).
# nache in front of the same knfsd, its upstream in NFSv4.0 (asked for:
# NFSv4.1 is the default):
# its client's read-only open gets nache a read delegation; a read-write
# open reaches knfsd as one, and knfsd gives nache no write delegation for
# it: knfsd (since 6.6) offers write delegations only to NFSv4.1+ clients
# (with Upstream_Minor_Version = 1 nache gets them: knfsd612_v41_test.sh).
set -uo pipefail
export LAB_KNFSD_KERNEL=6.12
# knfsd grants no delegation while any lock manager is in grace, lockd's
# included (50 s after boot by default): shorten lockd's.
export LAB_KNFSD_NLM_GRACE=10
# This suite is about what knfsd offers an NFSv4.0 client.
export LAB_NACHE_MINOR=0
source "$(dirname "$0")/itest.sh"

lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		lab_nache_start 'Open_Linger = 1;' &&
	lab_clients_start 1 2 || { echo "lab did not start"; exit 1; }
K=$LAB_KNFSD_EXPORT_DIR
lab_client_mount 1 "$LAB_KNFSD_ADDR" / /mnt/k vers=4.1 &&
	mount_nache 2 /mnt/n vers=4.1 || { echo "mounts failed"; exit 1; }
# The files are written inside the knfsd guest: no NFS client's recent
# write or open stands in the way of a delegation.
lab_knfsd_run "echo direct > $K/direct && echo nache-r > $K/nache-r &&
	echo nache-rw > $K/nache-rw" || { echo "cannot create files at the remote"; exit 1; }
C1=$(lab_client_addr 1)
NACHE='name: "nache/'            # in the info of nache's client at knfsd

source "$(dirname "$0")/../../lab/knfsd_states.sh"

knfsd_runs_linux_6_12() {
	local release
	release=$(lab_knfsd_run 'uname -r') || return 1
	echo "knfsd guest: Linux $release" >&2
	[[ $release == 6.12.* ]] || { echo "expected Linux 6.12.*, got $release" >&2; return 1; }
}

c1_direct_writes() { write_delegs "address: \"$C1:" /direct; }

direct_client_gets_write_delegation() {
	local rc=0
	held_until_delegated 1 '<>' /mnt/k/direct direct c1_direct_writes || rc=1
	echo "--- knfsd's states while client 1 holds /direct open read-write:" >&2
	lab_knfsd_states >&2
	# Writing through the delegated open works and reaches the server.
	[ $rc = 0 ] && on 1 "echo written-under-delegation >/mnt/k/direct" || rc=1
	release 1 direct
	# (The holder's shell exits a moment after its release: until then the
	# mount is busy.)
	[ $rc = 0 ] && lab_wait_until 30 on 1 "umount /mnt/k" &&
		expect_eq "the server's copy" "$(lab_knfsd_run "cat $K/direct")" written-under-delegation
}

callback_up() { [ "$(metric nache_callback_path_up)" = 1 ]; }
nache_reads() { read_delegs "$NACHE" /nache-r; }

nache_read_open_gets_read_delegation() {
	local rc=0
	lab_wait_until 30 callback_up || { echo "nache's callback path never came up" >&2; return 1; }
	held_until_delegated 2 '<' /mnt/n/nache-r nache-r nache_reads || rc=1
	[ $rc = 0 ] || lab_knfsd_states >&2
	release 2 nache-r
	[ $rc = 0 ] && at_least "read delegations granted (nache's metric)" \
		"$(metric nache_delegations_granted_total 'type="read"')" 1
}

nache_rw_opens() { states_count "$NACHE" 'type: open, access: rw' /nache-rw; }

nache_read_write_open_gets_no_write_delegation() {
	local rc=0 granted
	# Unless knfsd delegates to nache at all by now (grace periods over,
	# callback path up), a missing write delegation would prove nothing.
	at_least "read delegations granted before (nache's metric)" \
		"$(metric nache_delegations_granted_total 'type="read"')" 1 &&
		callback_up || return 1
	hold 2 '<>' /mnt/n/nache-rw nache-rw || return 1
	# A delegation comes with the OPEN that the state file shows.
	lab_wait_until 30 eval '[ "$(nache_rw_opens)" -ge 1 ]' ||
		{ echo "knfsd shows no read-write open of nache's on /nache-rw" >&2; rc=1; }
	echo "--- knfsd's states while nache's client holds /nache-rw open read-write:" >&2
	lab_knfsd_states >&2
	granted=$(metric nache_delegations_granted_total 'type="write"') || rc=1
	echo "nache_delegations_granted_total{type=\"write\"} = $granted" >&2
	if [ $rc = 0 ] && [ "$(write_delegs "$NACHE" /nache-rw)" != 0 ]; then
		echo "knfsd delegated /nache-rw to nache for writing: nache's upstream speaks NFSv4.1 now? Then assert it here" >&2
		rc=1
	fi
	release 2 nache-rw
	[ $rc = 0 ] && expect_eq "write delegations granted (nache's metric)" "$granted" 0
}

check knfsd_guest_runs_linux_6_12 knfsd_runs_linux_6_12
check direct_nfsv41_client_holding_a_file_read_write_gets_a_write_delegation direct_client_gets_write_delegation
check nache_client_read_open_gets_nache_a_read_delegation_from_knfsd_6_12 nache_read_open_gets_read_delegation
check nache_read_write_open_gets_no_write_delegation_knfsd_offers_none_to_nfsv40 nache_read_write_open_gets_no_write_delegation
itest_finish
