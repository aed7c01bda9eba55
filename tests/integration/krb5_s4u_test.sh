#!/usr/bin/env bash
# nache's per-user identity upstream (issue 20): Kerberos constrained
# delegation. The lab's realm lives in LDAP (LAB_KRB5_S4U=1: a slapd of
# the lab's own), where the KDC finds that nache's principal, and no
# other, may get tickets to the remotes' nfs/ principals as any user
# (S4U2Self, then S4U2Proxy):
#  - the realm: MIT's kvno, from nache's namespace with nache's keytab,
#    gets a ticket to knfsd's nfs/ principal for alice (S4U2Self +
#    S4U2Proxy); the same request from client 1's principal is refused,
#    and so is nache's to a principal it was not allowed (client 1's).
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# A command stuck in an upcall fails the check instead of the whole run.
export LAB_CMD_TIMEOUT=60
export LAB_KRB5_S4U=1 LAB_NACHE_KRB5=1
export LAB_KNFSD_EXPORT_OPTS="rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync,sec=krb5:krb5i:krb5p"

lab_init && lab_net_up lan && lab_krb5_start || { echo "lab did not start"; exit 1; }
lab_clients_start 1 || { echo "lab did not start"; exit 1; }

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

itest_finish
