#!/usr/bin/env bash
# nache's per-user identity upstream (issue 20): Kerberos constrained
# delegation. The lab's realm lives in LDAP (LAB_KRB5_S4U=1: a slapd of
# the lab's own), where the KDC finds that nache's principal, and no
# other, may get tickets to the remotes' nfs/ principals as any user
# (S4U2Self, then S4U2Proxy):
#  - the realm: MIT's kvno, from nache's namespace with nache's keytab,
#    gets a ticket to knfsd's nfs/ principal for alice (S4U2Self +
#    S4U2Proxy); the same request from client 1's principal is refused,
#    and so is nache's to a principal it was not allowed (client 1's);
#  - through nache (Upstream_Sec = krb5, Upstream_Identity = user) to knfsd
#    exporting with Kerberos only, alice and bob (tickets in client 1,
#    mounted sec=krb5) each get knfsd's answer for themselves: a file of
#    alice's with mode 600 is hers to read, not bob's; a file of mode 644
#    whose ACL denies bob is readable by alice and refused to bob (with
#    nache's principal upstream, nache decides by the mode bits and bob
#    reads it); a file alice creates through nache is hers at knfsd, and
#    bob's is his (with nache's principal, root's). nache's log names
#    each user's context;
#  - a user the KDC does not know (daemon, uid 1, on a sec=sys mount of
#    nache) is refused (EACCES) and nache's log names daemon@NACHE.LAB;
#  - knfsd forgets every context mid-run: alice's next call through nache
#    is refused by knfsd (RPCSEC_GSS_CREDPROBLEM), not executed, and
#    nache makes her a new context on which her create goes through.
#  - writing back (nache restarted with Write_Policy = write_back on a
#    single-writer export, flushed only by nachectl): a file alice writes
#    reaches knfsd as hers (owner, mode 600, its bytes), bob's as his;
#    knfsd forgets every context in the middle of the flush of alice's 40
#    MiB over the shaped WAN: every byte arrives, no conflict copy; alice
#    leaves the realm while her data is dirty and nache restarts: her data
#    waits (still dirty), the refusal is counted
#    (nache_writeback_refused_total{op="write"}) and the log names her;
#    back in the realm, her data goes.
# S4U_TEST_IDENTITY=machine runs the same checks with nache's principal
# upstream: the per-user ones then fail (how the test was checked).
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# A command stuck in an upcall fails the check instead of the whole run.
export LAB_CMD_TIMEOUT=60
export LAB_KRB5_S4U=1 LAB_NACHE_KRB5=1
export LAB_KNFSD_EXPORT_OPTS="rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync,sec=krb5:krb5i:krb5p"

IDENTITY=${S4U_TEST_IDENTITY:-user}
ALICE=1000
BOB=2000

lab_init && lab_net_up lan && lab_krb5_start || { echo "lab did not start"; exit 1; }
lab_remote_knfsd_start && lab_clients_start 1 || { echo "lab did not start"; exit 1; }
K=$LAB_KNFSD_EXPORT_DIR

# ---------------------------------------------------------------- the realm

# s4u_as PRINCIPAL KEYTAB USER TARGET — in nache's namespace, PRINCIPAL's
# forwardable TGT from KEYTAB, then a ticket to TARGET for USER by
# S4U2Self + S4U2Proxy (kvno -U USER -P); prints klist's view of the cache.
s4u_as() {
	local cc
	cc=FILE:$LAB_DIR/s4u-$RANDOM.ccache
	_lab_ns "$LAB_NS_LAN" env KRB5_CONFIG="$LAB_KRB5_CONF" sh -c "
		kinit -f -k -t '$2' -c '$cc' '$1' &&
		kvno -c '$cc' -U '$3' -P '$4' && klist -c '$cc'" 2>&1
}

# The delegated ticket: to knfsd's principal, for alice.
nache_gets_alice_ticket() {
	local out
	out=$(s4u_as "$LAB_KRB5_NACHE_PRINCIPAL" "$LAB_KRB5_NACHE_KEYTAB" alice \
		"$LAB_KRB5_KNFSD_PRINCIPAL") || { echo "$out" >&2; return 1; }
	echo "$out" >&2
	echo "$out" | grep -A1 -F " $LAB_KRB5_KNFSD_PRINCIPAL" |
		grep -qF "for client alice@$LAB_KRB5_REALM"
}
check kdc_gives_nache_a_ticket_to_knfsd_as_alice nache_gets_alice_ticket

# refused_s4u PRINCIPAL KEYTAB TARGET — the KDC refuses PRINCIPAL a ticket
# to TARGET as alice, and says so in its log.
refused_s4u() {
	local out before
	before=$(grep -c 'S4U2PROXY\|CONSTRAINED-DELEGATION\|PROXY' "$LAB_DIR/logs/krb5kdc.log")
	if out=$(s4u_as "$1" "$2" alice "$3"); then
		echo "delegation granted: $out" >&2
		return 1
	fi
	echo "$out" >&2
	[[ $out == *"constrained delegation failed"* ]] &&
		[ "$(grep -c 'S4U2PROXY\|CONSTRAINED-DELEGATION\|PROXY' "$LAB_DIR/logs/krb5kdc.log")" -gt "$before" ]
}
C1_PRINCIPAL=nfs/c1.$LAB_KRB5_DOMAIN@$LAB_KRB5_REALM
check kdc_refuses_delegation_to_client_1s_principal \
	refused_s4u "$C1_PRINCIPAL" "$LAB_KRB5_DIR/c1.keytab" "$LAB_KRB5_KNFSD_PRINCIPAL"
check kdc_refuses_nache_delegation_to_a_service_not_allowed \
	refused_s4u "$LAB_KRB5_NACHE_PRINCIPAL" "$LAB_KRB5_NACHE_KEYTAB" "$C1_PRINCIPAL"

# ---------------------------------------------------------------- through nache

# knfsd's files, made there as its root: a directory everyone may write
# in; alice's secret (600); alice's shared file (644) whose ACL denies bob.
lab_knfsd_run "mkdir -m 1777 $K/k &&
	echo alice-secret > $K/k/secret && chown $ALICE:$ALICE $K/k/secret && chmod 600 $K/k/secret &&
	echo alice-shared > $K/k/acl && chown $ALICE:$ALICE $K/k/acl && chmod 644 $K/k/acl &&
	setfacl -m u:$BOB:--- $K/k/acl && getfacl -n $K/k/acl" >&2 ||
	{ echo "cannot make knfsd's files"; exit 1; }

LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
	LAB_NACHE_GLOBAL="NACHE { Idmapd_Conf = \"$LAB_KRB5_DIR/idmapd.conf\"; }
		LOG { COMPONENTS { FSAL = INFO; } }" \
	lab_nache_start "Upstream_Sec = krb5; Upstream_Keytab = \"$LAB_KRB5_NACHE_KEYTAB\";
		Upstream_Principal = \"$LAB_KRB5_KNFSD_PRINCIPAL\"; Upstream_Minor_Version = 1;
		Upstream_Identity = $IDENTITY;" ||
	{ echo "nache did not start"; exit 1; }
M=/mnt/n
lab_client_kinit 1 alice && lab_client_kinit 1 bob &&
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export $M vers=4.1,sec=krb5 ||
	{ echo "cannot mount nache"; exit 1; }

as_user() { lab_client_run_as 1 "$1" "$1" "$2"; }

# refused UID CMD — CMD as UID fails with "Permission denied".
refused() {
	local out rc=0
	out=$(as_user "$1" "$2" 2>&1) || rc=$?
	echo "as $1: exit $rc: $out" >&2
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *"Permission denied"* ]]
}

check alice_reads_her_600_file_through_nache \
	expect_eq "alice's read" "$(as_user $ALICE "cat $M/k/secret" 2>&1)" alice-secret
check bob_is_refused_alices_600_file refused $BOB "cat $M/k/secret"
check alice_reads_the_file_whose_acl_denies_bob \
	expect_eq "alice's read" "$(as_user $ALICE "cat $M/k/acl" 2>&1)" alice-shared
check bob_is_refused_by_knfsds_acl_through_nache refused $BOB "cat $M/k/acl"

# made_by UID NAME — UID creates k/NAME through nache; its owner at knfsd.
made_by() {
	as_user "$1" "echo by-$1 > $M/k/$2" || return 1
	lab_knfsd_run "stat -c %u $K/k/$2"
}
check a_file_alice_creates_through_nache_is_hers_at_knfsd \
	expect_eq "owner at knfsd" "$(made_by $ALICE alices-file)" $ALICE
check a_file_bob_creates_through_nache_is_his_at_knfsd \
	expect_eq "owner at knfsd" "$(made_by $BOB bobs-file)" $BOB

# Each user's context is named in nache's log.
contexts_logged() {
	local u
	for u in alice bob; do
		grep -q "RPCSEC_GSS context (krb5, window [0-9]*) for $u@$LAB_KRB5_REALM" \
			"$(lab_nache_log)" || { echo "no context for $u in nache's log" >&2; return 1; }
	done
}
check nache_logs_a_context_per_user contexts_logged

# unknown_user — daemon (uid 1, a name here, no principal in the realm)
# reads alice's 644 file through a sec=sys mount: refused, and the log
# says whom.
unknown_user() {
	local rc=0
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export /mnt/s vers=4.1,sec=sys || return 1
	refused 1 "cat /mnt/s/k/acl" || rc=1
	grep "no upstream identity for uid 1 (daemon@$LAB_KRB5_REALM)" "$(lab_nache_log)" >&2 ||
		{ echo "nache's log does not name daemon" >&2; rc=1; }
	lab_client_umount 1 /mnt/s
	return $rc
}
check a_user_the_kdc_does_not_know_is_refused_and_named unknown_user

# context_lost — knfsd flushes its contexts; alice's next create goes
# through on a new context of hers.
context_lost() {
	local before after
	before=$(grep -c "RPCSEC_GSS context (krb5, window [0-9]*) for alice@" "$(lab_nache_log)")
	lab_knfsd_run 'echo $(( $(date +%s) + 1 )) > /proc/net/rpc/auth.rpcsec.context/flush' ||
		return 1
	expect_eq "owner at knfsd" "$(made_by $ALICE after-flush)" $ALICE || return 1
	after=$(grep -c "RPCSEC_GSS context (krb5, window [0-9]*) for alice@" "$(lab_nache_log)")
	echo "alice's contexts: $before before the flush, $after after" >&2
	[ "$after" -gt "$before" ] &&
		grep -q "RPCSEC_GSS context for alice@$LAB_KRB5_REALM refused by the server" \
			"$(lab_nache_log)"
}
check a_users_context_knfsd_forgets_is_made_anew context_lost

# ---------------------------------------------------------------- write-back
# nache again, writing back (single writer, nothing flushed by age: only
# nachectl flushes): each user's dirty data goes to knfsd under that
# user's delegated credentials.

NACHECTL=$NACHE_BUILD_DIR/stage/bin/nachectl
ctl() { "$NACHECTL" --socket "$LAB_DIR/nache/nache.sock" "$@"; }
WB_CONF="Upstream_Sec = krb5; Upstream_Keytab = \"$LAB_KRB5_NACHE_KEYTAB\";
	Upstream_Principal = \"$LAB_KRB5_KNFSD_PRINCIPAL\"; Upstream_Minor_Version = 1;
	Upstream_Identity = $IDENTITY;
	Write_Policy = write_back; Single_Writer = true; Flush_Age = 3600;"
wb_nache_start() {
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		LAB_NACHE_GLOBAL="NACHE { Idmapd_Conf = \"$LAB_KRB5_DIR/idmapd.conf\"; }
			LOG { COMPONENTS { FSAL = INFO; } }" \
		lab_nache_start "$WB_CONF"
}
# A directory everyone may write in, made at knfsd before nache (a single
# writer from now on) starts.
lab_knfsd_run "mkdir -m 1777 $K/wb" >&2 && lab_nache_stop && wb_nache_start ||
	{ echo "nache did not restart writing back"; exit 1; }

knfsd_sha() { lab_knfsd_run "sha256sum $K/wb/$1" | cut -d' ' -f1; }
dirty() { metric nache_dirty_bytes; }
nothing_dirty() { [ "$(dirty)" = 0 ]; }
# (Polled: quiet when not yet.)
sent_at_least() { [ "$(metric nache_upstream_bytes_total 'direction="write"')" -ge "$1" ]; }
refused_writes_at_least() { [ "$(metric nache_writeback_refused_total 'op="write"')" -ge "$1" ]; }
knfsd_head_sha() { lab_knfsd_run "head -c 4096 $K/wb/$1 | sha256sum" | cut -d' ' -f1; }
refusals() { grep -c "RPCSEC_GSS context for alice@$LAB_KRB5_REALM refused by the server" "$(lab_nache_log)"; }
no_conflict_copy() {
	local out
	out=$(lab_knfsd_run "ls -a $K/wb") || return 1
	! grep -q 'nache-conflict' <<<"$out" || { echo "conflict copy at knfsd: $out" >&2; return 1; }
}

# written_back UID NAME — UID writes wb/NAME (mode 600: no one else could
# write its data at knfsd) through nache; it is not at knfsd until a flush,
# and after it knfsd has it, owned by UID, mode 600, with UID's bytes.
written_back() {
	local want
	head -c 65536 /dev/urandom >"$LAB_DIR/wb-$2" && chmod 644 "$LAB_DIR/wb-$2" &&
		want=$(sha256sum "$LAB_DIR/wb-$2" | cut -d' ' -f1) &&
		as_user "$1" "umask 077; cp $LAB_DIR/wb-$2 $M/wb/$2 && sync" || return 1
	step "not at knfsd before the flush" lab_knfsd_run "test ! -e $K/wb/$2" &&
		step "dirty before the flush" at_least "dirty bytes" "$(dirty)" 65536 &&
		ctl flush --wait --timeout 120 >&2 &&
		expect_eq "owner and mode at knfsd" \
			"$(lab_knfsd_run "stat -c '%u %a' $K/wb/$2")" "$1 600" &&
		expect_eq "bytes at knfsd" "$(knfsd_sha "$2")" "$want"
}
check alices_written_back_file_reaches_knfsd_as_hers written_back $ALICE alices
check bobs_written_back_file_reaches_knfsd_as_his written_back $BOB bobs

# context_lost_mid_flush — alice's 40 MiB go over the shaped WAN (about 8
# s); once some of it is at knfsd and the rest still dirty, knfsd forgets
# every context. The flush's calls on alice's lost context are refused,
# not executed; nache makes her a new one and every byte arrives, with no
# conflict copy.
context_lost_mid_flush() {
	local want rc=0 before sent0
	head -c $((40 << 20)) /dev/urandom >"$LAB_DIR/wb-big" && chmod 644 "$LAB_DIR/wb-big" &&
		want=$(sha256sum "$LAB_DIR/wb-big" | cut -d' ' -f1) &&
		as_user $ALICE "umask 077; cp $LAB_DIR/wb-big $M/wb/big && sync" || return 1
	before=$(refusals)
	sent0=$(metric nache_upstream_bytes_total 'direction="write"') || return 1
	lab_set_profile wan || return 1
	ctl flush >&2 || rc=1
	# Under way: 4 MiB at knfsd.
	step "the flush starts" lab_wait_until 60 sent_at_least $((sent0 + (4 << 20))) || rc=1
	lab_knfsd_run 'echo $(( $(date +%s) + 1 )) > /proc/net/rpc/auth.rpcsec.context/flush' || rc=1
	step "contexts dropped mid-flush (dirty left)" at_least "dirty bytes" "$(dirty)" 1 || rc=1
	ctl flush --wait --timeout 180 >&2 || rc=1
	lab_set_profile lan || rc=1
	[ $rc = 0 ] || return 1
	echo "alice's contexts refused: $before before the flush, $(refusals) after" >&2
	step "a context of alice's refused during the flush" test "$(refusals)" -gt "$before" &&
		expect_eq "bytes at knfsd" "$(knfsd_sha big)" "$want" &&
		expect_eq "owner at knfsd" "$(lab_knfsd_run "stat -c %u $K/wb/big")" $ALICE &&
		expect_eq "dirty after" "$(dirty)" 0 &&
		no_conflict_copy
}
check alices_context_lost_mid_flush_loses_nothing context_lost_mid_flush

# no_credentials_at_flush — alice's write is acknowledged; nache stops
# (kill -9: nothing flushed at shutdown) and alice leaves the realm; the
# restarted nache cannot have her credentials: her data stays dirty, the
# refusal is counted, the log names her. Back in the realm, her data goes.
no_credentials_at_flush() {
	local want rc=0
	head -c 4096 /dev/urandom >"$LAB_DIR/wb-later" && chmod 644 "$LAB_DIR/wb-later" &&
		want=$(sha256sum "$LAB_DIR/wb-later" | cut -d' ' -f1) &&
		as_user $ALICE "dd if=$LAB_DIR/wb-later of=$M/wb/alices conv=notrunc status=none && sync" ||
		return 1
	step "dirty before the flush" at_least "dirty bytes" "$(dirty)" 4096 &&
		lab_nache_kill &&
		_lab_krb5_admin kadmin.local -r "$LAB_KRB5_REALM" -q "delprinc -force alice" >&2 &&
		wb_nache_start || return 1
	ctl flush >&2 || rc=1
	step "the refusal is counted" lab_wait_until 60 refused_writes_at_least 1 || rc=1
	step "the log names alice" grep "no upstream identity for uid $ALICE (alice@$LAB_KRB5_REALM)" \
		"$(lab_nache_log)" >&2 || rc=1
	step "her data waits" at_least "dirty bytes" "$(dirty)" 4096 || rc=1
	step "not at knfsd" test "$(knfsd_head_sha alices)" != "$want" || rc=1
	# Back in the realm (with a new key: her keytab gets it too).
	_lab_krb5_keytab alice alice || return 1
	step "flushed once she is back" lab_wait_until 120 nothing_dirty || rc=1
	[ $rc = 0 ] && expect_eq "bytes at knfsd" "$(knfsd_head_sha alices)" "$want" &&
		no_conflict_copy
}
check alices_data_waits_while_her_credentials_cannot_be_had no_credentials_at_flush

itest_finish
