#!/usr/bin/env bash
# Kerberos on the office side (issue 20, parts 1 and 2): a real MIT KDC in
# the lab (lab_krb5_start), real kernel clients with rpc.gssd, and nache's
# Ganesha accepting RPCSEC_GSS (LAB_NACHE_KRB5=1) while it still speaks
# AUTH_SYS upstream, to the Ganesha VFS remote. For each of sec=krb5,
# krb5i and krb5p:
#  - the lab itself: client 1 mounts the knfsd guest directly (knfsd with
#    rpc.svcgssd, exported sec=sys:krb5:krb5i:krb5p) and alice, with a
#    ticket, writes and reads there; knfsd sees her uid as the owner; the
#    same on the VFS remote (LAB_REMOTE_KRB5=1: a Kerberos remote for
#    nache's RPCSEC_GSS client to come);
#  - through nache: alice with a ticket writes and reads; the remote sees
#    her uid (1000) as the file's owner (Ganesha mapped alice@NACHE.LAB to
#    1000, nache sent that upstream); bob, who has no ticket, is refused;
#  - alice after kdestroy, on a fresh mount, is refused (krb5 only);
#  - on the office LAN (nache's bridge, tcpdump in nache's namespace) a
#    file's bytes cross in clear under sec=sys and krb5i (the controls that
#    prove the capture and the grep work) and never under krb5p.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# A command stuck in an upcall fails the check instead of the whole run.
export LAB_CMD_TIMEOUT=60
export LAB_NACHE_KRB5=1 LAB_REMOTE_KRB5=1
export LAB_KNFSD_EXPORT_OPTS="rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync,sec=sys:krb5:krb5i:krb5p"
FLAVOURS="krb5 krb5i krb5p"
ALICE=1000
BOB=2000
PAYLOAD=65536                        # bytes of a marker file

lab_init && lab_net_up lan && lab_krb5_start || { echo "lab did not start"; exit 1; }
lab_remote_vfs_start && lab_nache_start && lab_remote_knfsd_start &&
	lab_clients_start 1 || { echo "lab did not start"; exit 1; }
K=$LAB_KNFSD_EXPORT_DIR
R=$LAB_REMOTE_EXPORT_DIR
# A directory everyone may write in, at both remotes.
mkdir -m 1777 "$R/k" && lab_knfsd_run "mkdir -m 1777 $K/k" ||
	{ echo "cannot make the shared directories"; exit 1; }

# as_user UID CMD — CMD in client 1 as UID (group UID).
as_user() { lab_client_run_as 1 "$1" "$1" "$2"; }

# mount_sec SERVER EXPORT MNT FLAVOUR — client 1 mounts with sec=FLAVOUR
# (NFSv4.1) and the kernel says it did.
mount_sec() {
	lab_client_mount 1 "$1" "$2" "$3" "vers=4.1,sec=$4" || return 1
	on 1 "grep -E ' $3 nfs4 .*sec=$4(,|\$| )' /proc/mounts" >/dev/null ||
		{ echo "$3 is not mounted with sec=$4:" >&2; on 1 "grep ' $3 ' /proc/mounts" >&2; return 1; }
}

# refused UID CMD — CMD as UID fails with a permission error.
refused() {
	local out rc=0
	out=$(as_user "$1" "$2" 2>&1) || rc=$?
	echo "as $1: exit $rc: $out" >&2
	[ $rc != 0 ] && [ $rc != 124 ] &&
		[[ $out == *"Permission denied"* || $out == *"Key has expired"* ]]
}

# ---------------------------------------------------------------- the lab

lab_realm_works() {
	lab_client_kinit 1 alice || return 1
	on 1 "klist -c FILE:/tmp/krb5cc_$ALICE" | grep -F "alice@$LAB_KRB5_REALM" >&2 &&
		on 1 "test \"\$(stat -c %u /tmp/krb5cc_$ALICE)\" = $ALICE" &&
		on 1 "pgrep -x rpc.gssd >/dev/null" &&
		lab_knfsd_run "pgrep -x rpc.svcgssd >/dev/null" &&
		tr '\0' '\n' <"/proc/$(lab_nache_pid)/environ" |
		grep -qx "KRB5_CONFIG=$LAB_KRB5_CONF" ||
		{ echo "nache runs without the lab's KRB5_CONFIG" >&2; return 1; }
}
check lab_realm_gives_alice_a_ticket_and_runs_the_gss_daemons lab_realm_works

# direct_knfsd FLAVOUR — alice writes and reads on knfsd mounted directly.
direct_knfsd() {
	local f=$1 m=/mnt/d-$1 rc=0
	mount_sec "$LAB_KNFSD_ADDR" / "$m" "$f" || return 1
	as_user $ALICE "echo direct-$f > $m/k/direct-$f" &&
		expect_eq "read back" "$(as_user $ALICE "cat $m/k/direct-$f")" "direct-$f" &&
		expect_eq "owner at knfsd" "$(lab_knfsd_run "stat -c %u $K/k/direct-$f")" $ALICE ||
		rc=1
	lab_client_umount 1 "$m"
	return $rc
}
# direct_vfs FLAVOUR — the same on the VFS remote (LAB_REMOTE_KRB5).
direct_vfs() {
	local f=$1 m=/mnt/v-$1 rc=0
	mount_sec "$LAB_REMOTE_ADDR" /export "$m" "$f" || return 1
	as_user $ALICE "echo vfs-$f > $m/k/vfs-$f" &&
		expect_eq "read back" "$(as_user $ALICE "cat $m/k/vfs-$f")" "vfs-$f" &&
		expect_eq "owner at the remote" "$(stat -c %u "$R/k/vfs-$f")" $ALICE ||
		rc=1
	lab_client_umount 1 "$m"
	return $rc
}
for f in $FLAVOURS; do
	check "lab_client_mounts_knfsd_directly_with_sec_${f}_as_alice" direct_knfsd "$f"
	check "lab_client_mounts_the_vfs_remote_directly_with_sec_${f}_as_alice" direct_vfs "$f"
done

# ---------------------------------------------------------------- nache

# through_nache FLAVOUR — alice writes and reads through nache; the remote
# sees her uid; bob (no ticket) can neither write nor read.
through_nache() {
	local f=$1 m=/mnt/n-$1 rc=0
	mount_sec "$LAB_NACHE_ADDR" /export "$m" "$f" || return 1
	{
		as_user $ALICE "echo nache-$f > $m/k/nache-$f" &&
			expect_eq "read back" "$(as_user $ALICE "cat $m/k/nache-$f")" "nache-$f" &&
			expect_eq "owner at the remote" "$(stat -c %u "$R/k/nache-$f")" $ALICE &&
			expect_eq "content at the remote" "$(cat "$R/k/nache-$f")" "nache-$f" &&
			refused $BOB "echo bob > $m/k/bob-$f" &&
			refused $BOB "cat $m/k/nache-$f" &&
			[ ! -e "$R/k/bob-$f" ]
	} || rc=1
	lab_client_umount 1 "$m"
	return $rc
}
for f in $FLAVOURS; do
	check "alice_with_a_ticket_writes_through_nache_with_sec_${f}_bob_without_is_refused" \
		through_nache "$f"
done

# The kernel keeps a security context until the mount's RPC client goes:
# a fresh mount after kdestroy must ask rpc.gssd, which finds no ticket.
after_kdestroy() {
	local m=/mnt/n-gone rc=0
	lab_client_kdestroy 1 alice || return 1
	on 1 "! test -e /tmp/krb5cc_$ALICE" || return 1
	mount_sec "$LAB_NACHE_ADDR" /export "$m" krb5 || rc=1
	[ $rc != 0 ] || refused $ALICE "cat $m/k/nache-krb5" || rc=1
	lab_client_umount 1 "$m"
	lab_client_kinit 1 alice || rc=1
	return $rc
}
check alice_after_kdestroy_is_refused_through_nache after_kdestroy

# ---------------------------------------------------------------- the wire

# size_at_least FILE BYTES — FILE holds BYTES or more.
size_at_least() { [ "$(stat -c %s "$1")" -ge "$2" ]; }

# capture FLAVOUR — client 1 mounts nache with sec=FLAVOUR while tcpdump
# captures the client's NFS traffic on nache's bridge; alice writes
# PAYLOAD bytes of a marker unique to this run. Prints how many packets of
# the capture carry the marker in clear.
capture() {
	local f=$1 m=/mnt/w-$1 pcap=$LAB_DIR/wire-$1.pcap rc=0
	local marker="nache-wire-marker-$f-$LAB_ID-$RANDOM$RANDOM"
	mount_sec "$LAB_NACHE_ADDR" /export "$m" "$f" || return 1
	lab_helper_start "tcpdump-$f" "$LAB_NS_LAN" tcpdump -i br0 -n -U -s 0 \
		-Z root -w "$pcap" "host $(lab_client_addr 1) and tcp port 2049" &&
		lab_wait_until 20 grep -q "listening on br0" "$LAB_DIR/logs/tcpdump-$f.log" ||
		{ echo "tcpdump did not start" >&2; cat "$LAB_DIR/logs/tcpdump-$f.log" >&2; rc=1; }
	# (The client flushes a file's data before close returns.)
	[ $rc != 0 ] || as_user $ALICE "yes $marker | head -c $PAYLOAD > $m/k/wire-$f" ||
		rc=1
	# The capture holds at least the written bytes: the traffic was seen.
	[ $rc != 0 ] || lab_wait_until 20 size_at_least "$pcap" $PAYLOAD ||
		{ echo "capture of $(stat -c %s "$pcap") bytes" >&2; rc=1; }
	lab_helper_stop "tcpdump-$f"
	lab_client_umount 1 "$m"
	[ $rc = 0 ] && expect_eq "wire-$f at the remote" "$(stat -c %s "$R/k/wire-$f")" $PAYLOAD ||
		return 1
	grep -a -c -F "$marker" "$pcap"
}
in_clear() {
	local n
	n=$(capture "$1") || [ -n "$n" ] || return 1
	echo "$1: $n packet lines with the marker in clear" >&2
	[ "$n" -gt 0 ]
}
never_in_clear() {
	local n
	n=$(capture "$1") || [ -n "$n" ] || return 1
	echo "$1: $n packet lines with the marker in clear" >&2
	[ "$n" = 0 ]
}
check file_bytes_cross_the_office_lan_in_clear_under_sec_sys in_clear sys
check file_bytes_cross_the_office_lan_in_clear_under_krb5i in_clear krb5i
check krb5p_carries_no_file_bytes_in_clear_on_the_office_lan never_in_clear krb5p

itest_finish
