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
# knfsd grants no delegation while lockd is in grace (50 s after its boot
# by default): shorten it, for the callback check.
export LAB_KNFSD_NLM_GRACE=10
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
# marker_lines CAPTURE FLAVOUR — runs CAPTURE (capture, wan_write) for
# FLAVOUR and prints how many capture lines carry its marker in clear.
marker_lines() {
	local n
	n=$("$1" "$2") || [ -n "$n" ] || return 1
	echo "$2: $n capture lines with the marker in clear ($1)" >&2
	echo "$n"
}
# in_clear / never_in_clear CAPTURE FLAVOUR — the marker is seen / never.
in_clear() {
	local n
	n=$(marker_lines "$1" "$2") && [ "$n" -gt 0 ]
}
never_in_clear() {
	local n
	n=$(marker_lines "$1" "$2") && [ "$n" = 0 ]
}
check file_bytes_cross_the_office_lan_in_clear_under_sec_sys in_clear capture sys
check file_bytes_cross_the_office_lan_in_clear_under_krb5i in_clear capture krb5i
check krb5p_carries_no_file_bytes_in_clear_on_the_office_lan never_in_clear capture krb5p

# ---------------------------------------------------------------- upstream
# nache's own calls to the remote under RPCSEC_GSS (Upstream_Sec): knfsd
# now exports with Kerberos only, so nache reaches it only with a context
# of its own (nfs/nache... from its keytab); the office client mounts
# nache with sec=sys. For each flavour: a file written through nache is
# at knfsd, and its bytes cross the WAN (captured on the remote's bridge)
# in clear under krb5 and krb5i, never under krb5p. Then knfsd forgets
# every context mid-run (its auth.rpcsec.context cache flushed, as when a
# context expires or the server restarts): nache's next call is refused
# (RPCSEC_GSS_CREDPROBLEM), not executed, and nache makes a new context
# and the client's write goes through.

# upstream_nache FLAVOUR [MORE] — nache restarted with Upstream_Sec =
# FLAVOUR to knfsd (and the export options MORE), in NFSv4.1 (UPSTREAM_MINOR
# says another minor version).
upstream_nache() {
	lab_nache_stop || return 1
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		LAB_NACHE_GLOBAL='LOG { COMPONENTS { FSAL = INFO; } }' \
		lab_nache_start "Upstream_Sec = $1; Upstream_Keytab = \"$LAB_KRB5_NACHE_KEYTAB\";
		Upstream_Principal = \"$LAB_KRB5_KNFSD_PRINCIPAL\";
		Upstream_Minor_Version = ${UPSTREAM_MINOR:-1};
		Cache_Reset_On_Upstream_Change = true; ${2:-}"
}

# knfsd_krb5_only — knfsd exports with Kerberos flavours only: AUTH_SYS
# from nache is refused (WRONGSEC), so what follows must be RPCSEC_GSS.
knfsd_krb5_only() {
	lab_knfsd_run "exportfs -o rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync,sec=krb5:krb5i:krb5p '*:$K' && exportfs -v" >&2
}

# wan_write FLAVOUR — through nache (sec=sys at the client), root writes
# PAYLOAD bytes of a marker; knfsd has them. Prints how many capture lines
# on the remote's side of the WAN carry the marker in clear.
wan_write() {
	local f=$1 m=/mnt/up-$1 pcap=$LAB_DIR/wan-$1.pcap rc=0
	local marker="nache-wan-marker-$f-$LAB_ID-$RANDOM$RANDOM"
	upstream_nache "$f" || return 1
	grep -q "RPCSEC_GSS context ($f" "$(lab_nache_log)" ||
		lab_wait_until 30 grep -q "RPCSEC_GSS context ($f" "$(lab_nache_log)" ||
		{ echo "no RPCSEC_GSS context in nache's log" >&2; return 1; }
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$m" "vers=4.1,sec=sys" || return 1
	lab_helper_start "tcpdump-wan-$f" "$LAB_NS_REMOTE" tcpdump -i br0 -n -U -s 0 \
		-Z root -w "$pcap" "host $LAB_KNFSD_ADDR and tcp port 2049" &&
		lab_wait_until 20 grep -q "listening on br0" "$LAB_DIR/logs/tcpdump-wan-$f.log" ||
		{ echo "tcpdump did not start" >&2; rc=1; }
	[ $rc != 0 ] || on 1 "yes $marker | head -c $PAYLOAD > $m/k/wan-$f" || rc=1
	[ $rc != 0 ] || lab_wait_until 20 size_at_least "$pcap" $PAYLOAD ||
		{ echo "capture of $(stat -c %s "$pcap") bytes" >&2; rc=1; }
	lab_helper_stop "tcpdump-wan-$f"
	lab_client_umount 1 "$m"
	[ $rc = 0 ] &&
		expect_eq "wan-$f at knfsd" "$(lab_knfsd_run "stat -c %s $K/k/wan-$f")" $PAYLOAD ||
		return 1
	grep -a -c -F "$marker" "$pcap"
}
# With AUTH_SYS nache cannot use the Kerberos-only export: the control
# that proves the export refuses it.
sys_refused() {
	local m=/mnt/up-sys rc=0
	lab_nache_stop || return 1
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		lab_nache_start "Upstream_Minor_Version = 1; Cache_Reset_On_Upstream_Change = true;" ||
		return 1
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$m" "vers=4.1,sec=sys,soft,timeo=50,retrans=1" &&
		on 1 "timeout 20 sh -c 'echo x > $m/k/sys-refused'" && rc=1
	lab_client_umount 1 "$m" 2>/dev/null
	lab_knfsd_run "! test -e $K/k/sys-refused" || rc=1
	return $rc
}
check knfsd_exports_with_kerberos_only knfsd_krb5_only
check nache_with_auth_sys_cannot_write_to_the_kerberos_only_export sys_refused
check nache_writes_to_knfsd_under_upstream_krb5_bytes_in_clear_on_the_wan in_clear wan_write krb5

# made_as_nobody_warned — knfsd maps nache's principal (nfs/nache...) to
# nobody: the file root wrote through nache under krb5 just now is
# nobody's there. nache counts it and says once why and what to do.
made_as_nobody_warned() {
	local log
	log=$(lab_nache_log)
	expect_eq "owner at knfsd (the lab's mapping)" \
		"$(lab_knfsd_run "stat -c %u $K/k/wan-krb5")" 65534 &&
		at_least "objects made as nobody" "$(metric nache_upstream_created_as_nobody_total)" 1 &&
		expect_eq "warnings" "$(grep -c 'owned by nobody' "$log")" 1 &&
		grep 'owned by nobody' "$log" | grep -q 'Upstream_Identity = user' ||
		{ grep -i 'nobody' "$log" | tail -5 >&2; return 1; }
}
check nache_warns_once_when_knfsd_maps_its_principal_to_nobody made_as_nobody_warned
check nache_writes_to_knfsd_under_upstream_krb5i_bytes_in_clear_on_the_wan in_clear wan_write krb5i
check nache_writes_to_knfsd_under_upstream_krb5p_no_file_bytes_in_clear_on_the_wan \
	never_in_clear wan_write krb5p

# context_lost — under krb5i, knfsd forgets its contexts between two
# writes: the second still reaches knfsd whole, through a new context.
context_lost() {
	local m=/mnt/up-ctx rc=0 before after
	upstream_nache krb5i || return 1
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$m" "vers=4.1,sec=sys" || return 1
	on 1 "head -c 1048576 /dev/urandom > /tmp/ctx-a && cp /tmp/ctx-a $m/k/ctx-a" || rc=1
	before=$(grep -c "RPCSEC_GSS context (krb5i" "$(lab_nache_log)")
	lab_knfsd_run 'echo $(( $(date +%s) + 1 )) > /proc/net/rpc/auth.rpcsec.context/flush' || rc=1
	[ $rc != 0 ] || on 1 "head -c 1048576 /dev/urandom > /tmp/ctx-b && cp /tmp/ctx-b $m/k/ctx-b" ||
		rc=1
	after=$(grep -c "RPCSEC_GSS context (krb5i" "$(lab_nache_log)")
	echo "contexts made: $before before the flush, $after after" >&2
	[ $rc = 0 ] && [ "$after" -gt "$before" ] &&
		grep -q "RPCSEC_GSS context refused" "$(lab_nache_log)" &&
		expect_eq "ctx-b at knfsd" "$(lab_knfsd_run "md5sum < $K/k/ctx-b")" \
			"$(on 1 "md5sum < /tmp/ctx-b")" || rc=1
	lab_client_umount 1 "$m"
	return $rc
}
check a_context_knfsd_forgets_is_made_anew_and_the_write_goes_through context_lost

# kdc_down_at_start — the branch box boots while the KDC is out of reach
# (stopped): nache starts anyway, saying why; once the KDC is back, a
# write through nache reaches knfsd, with no restart of nache. (With the
# remote out of reach each call Ganesha makes while it starts waits
# Upstream_Timeout, as in resilience_test.sh's upstream_down_at_start:
# 5 s here, so that it serves within the lab's start timeout.)
kdc_down_at_start() {
	local m=/mnt/up-kdc rc=0
	lab_krb5_kdc_stop || return 1
	step "nache starts while the KDC is down" \
		upstream_nache krb5 "Upstream_Timeout = 5000;" &&
		step "the log says why" grep -q 'the KDC is out of reach' "$(lab_nache_log)" ||
		rc=1
	lab_krb5_kdc_start || return 1
	[ $rc = 0 ] || return 1
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$m" "vers=4.1,sec=sys" || return 1
	step "a write once the KDC is back" \
		on 1 "head -c 65536 /dev/urandom > /tmp/kdc-a && cp /tmp/kdc-a $m/k/kdc-a" &&
		expect_eq "kdc-a at knfsd" "$(lab_knfsd_run "md5sum < $K/k/kdc-a")" \
			"$(on 1 "md5sum < /tmp/kdc-a")" || rc=1
	lab_client_umount 1 "$m"
	return $rc
}
check nache_started_while_the_kdc_is_down_serves_once_it_is_back kdc_down_at_start

# ---------------------------------------------------------------- callbacks
# NFSv4.0 to a Kerberos remote: knfsd calls nache back under the flavour
# and principal of nache's SETCLIENTID (rpc.gssd in the knfsd guest makes
# the context as nfs/knfsd..., towards nache's principal), and nache's
# callback service accepts RPCSEC_GSS from knfsd's principal only. Under
# krb5i: the callback path comes up (knfsd's CB_NULL under the context:
# nache_callback_path_up 1, one context accepted, none refused); knfsd
# delegates to nache a file the client reads (and says the callback path
# is up); a write to it made at knfsd
# itself (a local open for writing breaks the delegation) recalls it
# through the GSS callback well before knfsd's lease-break timeout (45 s),
# and the client reads the new data through nache.

callback_up() { [ "$(metric nache_callback_path_up)" = 1 ]; }
# read_until_delegated FILE — reads FILE through nache, each time nache
# holds no upstream open (Open_Linger, 2 s, closed the last): a new
# upstream OPEN, which knfsd delegates once its grace periods end. True
# once nache holds a read delegation.
read_until_delegated() {
	if [ "$(metric nache_upstream_open_files)" = 0 ]; then
		on 1 "cat $1" >/dev/null || return 1
	fi
	[ "$(metric nache_delegations_held 'type="read"')" -ge 1 ]
}
# knfsd_callback_up — knfsd's own view: the NFSv4.0 client nache made says
# "callback state: UP" (its info file, Linux 6.1 and later).
knfsd_callback_up() {
	lab_knfsd_states | awk '/^# client/ { ours = 0; v0 = 0 }
		/name: "nache\// { ours = 1 } /minor version: 0$/ { v0 = 1 }
		ours && v0 && /callback state: UP/ { up = 1 } END { exit !up }'
}
gss_callbacks() {
	local m=/mnt/up-cb rc=0 rec0 t0 t1
	lab_knfsd_run "echo cb-old > $K/k/cb-file && chmod 644 $K/k/cb-file" || return 1
	UPSTREAM_MINOR=0 upstream_nache krb5i "Open_Linger = 2;" || return 1
	step "the callback path comes up" lab_wait_until 60 callback_up || return 1
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$m" "vers=4.1,sec=sys" || return 1
	step "knfsd delegates the file to nache" \
		lab_wait_until 90 read_until_delegated "$m/k/cb-file" &&
		step "knfsd sees nache's callback path up" knfsd_callback_up ||
		{ lab_knfsd_states >&2; rc=1; }
	if [ $rc = 0 ]; then
		rec0=$(metric nache_delegation_recalls_total)
		t0=$(date +%s)
		lab_knfsd_run "echo cb-new > $K/k/cb-file" || rc=1
		t1=$(date +%s)
		echo "the write at knfsd took $((t1 - t0)) s" >&2
		[ $rc = 0 ] &&
			at_least "recalls" "$(metric nache_delegation_recalls_total)" $((rec0 + 1)) &&
			step "recalled, not timed out" [ $((t1 - t0)) -lt 30 ] &&
			expect_eq "through nache after the recall" "$(on 1 "cat $m/k/cb-file")" cb-new ||
			rc=1
	fi
	lab_client_umount 1 "$m"
	echo "callback path up: $(metric nache_callback_path_up); GSS contexts accepted:" \
		"$(metric nache_callback_gss_contexts_total 'result="accepted"'), refused:" \
		"$(metric nache_callback_gss_contexts_total 'result="refused"')" >&2
	[ $rc = 0 ] &&
		at_least "callback contexts accepted" \
			"$(metric nache_callback_gss_contexts_total 'result="accepted"')" 1 &&
		expect_eq "callback contexts refused" \
			"$(metric nache_callback_gss_contexts_total 'result="refused"')" 0
}
check nfsv40_callbacks_come_under_rpcsec_gss_and_recall_a_delegation gss_callbacks

itest_finish
