#!/usr/bin/env bash
# Owners as names, both ways (issue 16, item 3): nache in front of Linux
# knfsd with id mapping on (nfs4_disable_idmapping=N, rpc.idmapd), which
# sends owners as "alice@nache.lab" and refuses numeric owners from AUTH_SYS
# callers. The remote knows alice (1000), bob (2000), group devs (3000) and
# carol (4000); nache and the office's client know all but carol, through
# files of the test's own (lab: LAB_KNFSD_IDENTITY_DIR, LAB_IDENTITY_DIR;
# nache reads its idmapd.conf through Idmapd_Conf, never the host's /etc).
#  - ls -ln and ls -l through nache show the owners the remote has;
#  - root's chown, an owner's chgrp and a create by uid 1000 reach the
#    remote as the right names and ids (write-through, and a chown written
#    back);
#  - carol's file shows as nobody (65534), and nobody (uid 65534: an office
#    client's root, squashed) gets no owner rights on it: not a read of its
#    cached data without an open (Ganesha's owner shortcut), not a chmod
#    kept locally; the remote's own nobody keeps its rights on its file;
#  - Upstream_Owner_Format = numeric sends numbers, which this remote
#    refuses.
set -uo pipefail
export LAB_KNFSD_IDMAP=1
source "$(dirname "$0")/itest.sh"

DOMAIN=nache.lab
ATTR_TIMEOUT=3
FLUSH_BOUND=60                       # a write-back change reaches the remote
WT="Attr_Timeout = $ATTR_TIMEOUT;"
WB="$WT Write_Policy = \"write_back\"; Single_Writer = true; Flush_Age = 1;"
N=/mnt/n                             # client 1: nache's /export
NOBODY=65534
PROBE=$NACHE_BUILD_DIR/tests/tools/upstream_probe
[ -x "$PROBE" ] || { echo "no upstream_probe at $PROBE (build first)"; exit 1; }

lab_init && lab_net_up lan || { echo "lab did not start"; exit 1; }

# write_identities DIR NAME... — passwd, group and idmapd.conf in DIR: the
# host's users and groups (system accounts the daemons need) without any
# that clashes with the lab's, then the lab's NAMEs among alice, bob, carol
# (each with a group of its own name; alice and bob in devs).
write_identities() {
	local dir=$1 name uid
	shift
	local clash='$1 ~ /^(alice|bob|carol|devs)$/ || $3 ~ /^(1000|2000|3000|4000)$/'
	mkdir -p "$dir" &&
		awk -F: "!($clash)" /etc/passwd >"$dir/passwd" &&
		awk -F: "!($clash)" /etc/group >"$dir/group" || return 1
	for name in "$@"; do
		case $name in alice) uid=1000 ;; bob) uid=2000 ;; carol) uid=4000 ;; esac
		echo "$name:x:$uid:$uid::/nonexistent:/usr/sbin/nologin" >>"$dir/passwd"
		echo "$name:x:$uid:" >>"$dir/group"
	done
	echo "devs:x:3000:alice,bob" >>"$dir/group"
	cat >"$dir/idmapd.conf" <<-EOF
		[General]
		Domain = $DOMAIN
		[Mapping]
		Nobody-User = nobody
		Nobody-Group = nogroup
		[Translation]
		Method = nsswitch
	EOF
}
LAB_KNFSD_IDENTITY_DIR=$LAB_DIR/identities/remote
LAB_IDENTITY_DIR=$LAB_DIR/identities/office
export LAB_KNFSD_IDENTITY_DIR LAB_IDENTITY_DIR
write_identities "$LAB_KNFSD_IDENTITY_DIR" alice bob carol &&
	write_identities "$LAB_IDENTITY_DIR" alice bob ||
	{ echo "cannot write the identities"; exit 1; }
# nache's idmapd.conf, through its parameter, and Ganesha's (the one
# libnfsidmap of the process runs from it: they must be the same file).
export LAB_NACHE_GLOBAL="NACHE { Idmapd_Conf = \"$LAB_IDENTITY_DIR/idmapd.conf\"; }"
export LAB_NACHE_IDMAPCONF=$LAB_IDENTITY_DIR/idmapd.conf
export LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/

lab_remote_knfsd_start || { echo "knfsd did not start"; exit 1; }
K=$LAB_KNFSD_EXPORT_DIR

# Everything is made at the remote, by its own root, before nache looks.
# id/ for write-through, wb/ for write-back (each file used once).
lab_knfsd_run "set -e; cd $K; mkdir id wb
	own() { echo \$3 > \$1; chown \$2 \$1; chmod \$4 \$1; }
	own id/alice.txt alice:devs secret-alice 640
	own id/bob.txt bob:bob secret-bob 644
	own id/root.txt root:root secret-root 644
	own id/nobody.txt nobody:nogroup secret-nobody 600
	own id/carol.txt carol:carol secret-carol 600
	own id/chown.txt root:root chown-me 644
	own id/chgrp.txt alice:alice chgrp-me 644
	own id/numeric.txt root:root numeric 644
	own wb/chown.txt root:root chown-me 644
	own wb/carol.txt carol:carol secret-carol 600
	chmod 777 id" || { echo "cannot create files at the remote"; exit 1; }

lab_nache_start "$WT" && lab_clients_start 1 && mount_nache 1 $N vers=4.1 ||
	{ echo "lab did not start"; exit 1; }


# at_remote FORMAT PATH — stat -c FORMAT of PATH (in the export) at the
# remote, as its root sees it.
at_remote() { lab_knfsd_run "stat -c '$1' $K/$2"; }
# via_nache FORMAT PATH — the same through nache, in client 1.
via_nache() { on 1 "stat -c '$1' $N/$2"; }

# remote_becomes FORMAT PATH WANT — wait (FLUSH_BOUND) until at_remote
# FORMAT PATH is WANT (a write-back flush).
remote_is() { [ "$(at_remote "$1" "$2")" = "$3" ]; }
remote_becomes() {
	lab_wait_until $FLUSH_BOUND remote_is "$1" "$2" "$3" && return 0
	echo "$2 at the remote: '$(at_remote "$1" "$2")', expected '$3'" >&2
	grep -E 'NACHE_(IDMAP|WRITEBACK)' "$(lab_nache_log)" | tail -n 5 >&2
	return 1
}

# read_anon UID FILE — the probe's READ of id/FILE through nache with no
# open, as UID:UID (exit 0: read, 3: refused).
read_anon() {
	ip netns exec "$LAB_NS_LAN" timeout 60 "$PROBE" --server "$LAB_NACHE_ADDR" \
		--path /export/id --uid "$1" --gid "$1" read-anon "$2"
}

# ---------------------------------------------------------------- the lab

knfsd_maps_ids_to_names() {
	expect_eq "nfs4_disable_idmapping" \
		"$(lab_knfsd_run 'cat /sys/module/nfsd/parameters/nfs4_disable_idmapping')" N &&
		lab_knfsd_run 'pgrep -x rpc.idmapd >/dev/null' &&
		expect_eq "carol at the remote" "$(lab_knfsd_run 'id -u carol')" 4000 &&
		expect_eq "carol in the office" "$(on 1 'id -u carol 2>/dev/null || echo none')" none &&
		expect_eq "alice in the office" "$(on 1 'id -u alice')" 1000
}
# libnfsidmap starts at the first name from the remote, from Idmapd_Conf.
nache_maps_names_with_its_idmapd_conf() {
	on 1 "ls $N/id >/dev/null" &&
		grep -F "owner names are mapped by libnfsidmap from $LAB_IDENTITY_DIR/idmapd.conf, NFSv4 domain '$DOMAIN'" \
			"$(lab_nache_log)" >&2 ||
		{ echo "nache did not map names from its Idmapd_Conf" >&2; return 1; }
}
check lab_knfsd_maps_ids_to_names knfsd_maps_ids_to_names
check nache_maps_owner_names_with_its_idmapd_conf nache_maps_names_with_its_idmapd_conf

# ---------------------------------------------------------------- listings
# "NAME OWNER GROUP" of id/'s files but carol's, from ls -l (names) or
# ls -ln (numbers), through nache or at the remote.
listing() {
	awk 'NR > 1 && $9 != "carol.txt" { print $9, $3, $4 }' | sort
}
same_listing() {
	local opt=$1 remote nache
	remote=$(lab_knfsd_run "ls $opt $K/id" | listing) &&
		nache=$(on 1 "ls $opt $N/id" | listing) || return 1
	echo "ls $opt through nache:" >&2
	sed 's/^/  /' <<<"$nache" >&2
	[ "$(wc -l <<<"$nache")" -ge 4 ] && expect_eq "ls $opt" "$nache" "$remote"
}
check ls_ln_through_nache_shows_the_remotes_owner_ids same_listing -ln
check ls_l_through_nache_shows_the_remotes_owner_names same_listing -l

unmapped_is_nobody() {
	expect_eq "carol.txt at the remote" "$(at_remote '%u:%g %U:%G' id/carol.txt)" \
		"4000:4000 carol:carol" &&
		expect_eq "carol.txt through nache" "$(via_nache '%u:%g %U:%G' id/carol.txt)" \
			"$NOBODY:$NOBODY nobody:nogroup"
}
check an_owner_nache_cannot_map_shows_as_nobody unmapped_is_nobody

# ---------------------------------------------------------------- going out

root_chown_reaches_the_remote() {
	as root "chown bob:devs $N/id/chown.txt" &&
		expect_eq "chown.txt at the remote" \
			"$(at_remote '%U:%G %u:%g' id/chown.txt)" "bob:devs 2000:3000" &&
		expect_eq "chown.txt through nache" "$(via_nache '%u:%g' id/chown.txt)" 2000:3000
}
owner_chgrp_reaches_the_remote() {
	as 1000:1000:3000 "chgrp devs $N/id/chgrp.txt" &&
		expect_eq "chgrp.txt at the remote" \
			"$(at_remote '%U:%G %u:%g' id/chgrp.txt)" "alice:devs 1000:3000"
}
create_by_1000() {
	as 1000:1000 "echo made > $N/id/made-by-1000" &&
		expect_eq "made-by-1000 at the remote" \
			"$(at_remote '%u:%g %U:%G' id/made-by-1000)" "1000:1000 alice:alice" &&
		expect_eq "made-by-1000 through nache" "$(via_nache '%u:%g' id/made-by-1000)" 1000:1000
}
check root_chown_through_nache_reaches_the_remote_as_names root_chown_reaches_the_remote
check owner_chgrp_to_its_group_reaches_the_remote owner_chgrp_reaches_the_remote
check a_file_created_by_uid_1000_is_1000s_at_the_remote create_by_1000

# ---------------------------------------------------------------- nobody
# carol reads her file through nache (the remote lets uid 4000 read it):
# its data is cached. nobody's READ without an open (as NFSv3 reads, or an
# NFSv4 anonymous stateid) meets Ganesha's "the caller owns it" shortcut:
# nobody is not carol's stand-in there.

nobody_no_owner_read() {
	local out rc=0
	out=$(as 4000:4000 "cat $N/id/carol.txt") &&
		expect_eq "carol reading her file" "$out" secret-carol || return 1
	out=$(as $NOBODY:$NOBODY "cat $N/id/carol.txt" 2>&1) && rc=0 || rc=$?
	[[ $rc != 0 && $out == *"Permission denied"* ]] ||
		{ echo "nobody's cat: exit $rc: $out" >&2; return 1; }
	rc=0
	out=$(read_anon $NOBODY carol.txt 2>&1) || rc=$?
	echo "$out" | grep read-anon >&2
	expect_eq "nobody's READ without an open (exit)" "$rc" 3
}
nobody_keeps_its_own_rights() {
	local out rc=0
	out=$(read_anon $NOBODY nobody.txt 2>&1) || rc=$?
	echo "$out" | grep read-anon >&2
	expect_eq "nobody's READ of its own file (exit)" "$rc" 0 &&
		[[ $out == *secret-nobody* ]]
}
check nobody_gets_no_owner_read_of_an_unmapped_owners_cached_file nobody_no_owner_read
check the_remotes_nobody_keeps_the_rights_on_its_own_file nobody_keeps_its_own_rights

# ---------------------------------------------------------------- write-back

lab_nache_restart "$WB" || { echo "nache did not restart with write-back"; itest_finish; }

writeback_chown_reaches_the_remote() {
	as root "chown alice:devs $N/wb/chown.txt" &&
		expect_eq "wb/chown.txt through nache" "$(via_nache '%u:%g' wb/chown.txt)" 1000:3000 &&
		remote_becomes '%U:%G %u:%g' wb/chown.txt "alice:devs 1000:3000"
}
# nobody's chmod of carol's file is not kept here as its owner's would be:
# the remote judges, and refuses.
writeback_nobody_chmod_refused() {
	local out rc=0
	out=$(as $NOBODY:$NOBODY "chmod 666 $N/wb/carol.txt" 2>&1) || rc=$?
	[[ $rc != 0 && $out == *"Operation not permitted"* ]] ||
		{ echo "nobody's chmod: exit $rc: $out" >&2; return 1; }
	expect_eq "wb/carol.txt through nache" "$(via_nache '%a' wb/carol.txt)" 600 &&
		expect_eq "wb/carol.txt at the remote" "$(at_remote '%a %U' wb/carol.txt)" "600 carol"
}
check writeback_root_chown_reaches_the_remote_as_names writeback_chown_reaches_the_remote
check writeback_nobody_chmod_of_an_unmapped_owners_file_is_refused writeback_nobody_chmod_refused

# ---------------------------------------------------------------- numeric

lab_nache_restart "$WT Upstream_Owner_Format = numeric;" ||
	{ echo "nache did not restart with numeric owners"; itest_finish; }

numeric_refused() {
	local out rc=0
	out=$(as root "chown bob $N/id/numeric.txt" 2>&1) || rc=$?
	echo "chown with numeric owners: exit $rc: $out" >&2
	[ $rc != 0 ] &&
		expect_eq "numeric.txt at the remote" "$(at_remote '%U' id/numeric.txt)" root
}
check numeric_owners_are_refused_by_an_idmapping_knfsd numeric_refused

itest_finish
