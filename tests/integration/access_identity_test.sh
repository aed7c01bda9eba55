#!/usr/bin/env bash
# Access decided by the remote (issue 16): nache in front of Linux knfsd
# exporting with root_squash, one client mounting nache (/mnt/n) and the
# remote directly (/mnt/k). Each check asks the same question both ways:
# the direct mount shows the remote's answer, nache must give the same one.
#  - a POSIX ACL entry (user:2000:---) on a world-readable file denies
#    uid 2000, before and after uid 1000 read the file through the cache;
#  - root, squashed by the remote, cannot read uid 1000's mode-600 file,
#    before or after its owner read it;
#  - a group-only file is read through a supplementary group (uid 2000 in
#    group 3000) and by nobody outside the group, also once it is cached;
#  - a chmod or an ACL set at the remote revokes a reader within a bound of
#    a few attribute timeouts;
#  - root's creates: refused in uid 1000's 755 directory, owned by the
#    squashed uid (65534) in a 777 one;
#  - write-back (Single_Writer): a create through a supplementary group is
#    accepted, refused without it, and reaches the remote owned by its
#    creator; two users' files are flushed as themselves; root's creates
#    behave as above once flushed.
set -uo pipefail
# root_squash, and the rest of the lab's default export options.
export LAB_KNFSD_EXPORT_OPTS=rw,fsid=0,root_squash,insecure,no_subtree_check,sync
# knfsd grants no delegations while lockd's grace period runs (50 s by
# default): shorten it, so that nache and the direct client may hold read
# delegations in most checks, as against a long-running server.
export LAB_KNFSD_NLM_GRACE=10
# The remote trusts the groups in the AUTH_SYS credential, as Ganesha does
# (Debian's nfs.conf would have rpc.mountd look them up in the server's
# group database instead, where uid 2000 has none).
export LAB_KNFSD_MANAGE_GIDS=n
source "$(dirname "$0")/itest.sh"
source "$(dirname "$0")/knfsd_states.sh"

ATTR_TIMEOUT=3                       # nache's Attr_Timeout (and Ganesha's)
REVOKE_BOUND=$((5 * ATTR_TIMEOUT))   # a revoked reader is denied within it
FLUSH_BOUND=60                       # a write-back create reaches the remote
WT="Attr_Timeout = $ATTR_TIMEOUT;"
WB="Attr_Timeout = $ATTR_TIMEOUT; Write_Policy = \"write_back\"; Single_Writer = true; Flush_Age = 1;"
N=/mnt/n                             # client 1: nache's /export
D=/mnt/k                             # client 1: knfsd's / (direct)
SQUASHED=65534                       # knfsd's anonuid

lab_init && lab_net_up lan && lab_remote_knfsd_start ||
	{ echo "lab did not start"; exit 1; }
K=$LAB_KNFSD_EXPORT_DIR

# Everything the checks use is made at the remote, as the server's own root,
# before nache first looks: nothing is cached when the checks begin. Files
# come in pairs where a check changes them (NAME-direct, NAME-nache); wb/ is
# nache's write-back tree, wbd/ the direct mount's copy of it (the
# write-back export is single-writer: nothing else writes into wb/).
setup_remote() {
	lab_knfsd_run "set -e; cd $K
		mkdir id wb wbd
		for f in acl acl-warm acl-deleg; do
			echo secret-\$f > id/\$f.txt
			chown 1000:1000 id/\$f.txt; chmod 644 id/\$f.txt
			setfacl -m u:2000:--- id/\$f.txt
		done
		echo secret-own > id/own.txt
		chown 1000:1000 id/own.txt; chmod 600 id/own.txt
		echo secret-grp > id/grp.txt
		chown 1000:3000 id/grp.txt; chmod 640 id/grp.txt
		for f in rev-chmod rev-acl; do for via in direct nache; do
			echo \$f > id/\$f-\$via.txt
			chown 1000:1000 id/\$f-\$via.txt; chmod 644 id/\$f-\$via.txt
		done; done
		for t in id wb wbd; do
			mkdir \$t/own1000 \$t/open
			chown 1000:1000 \$t/own1000; chmod 755 \$t/own1000
			chmod 777 \$t/open
		done
		for t in wb wbd; do
			mkdir \$t/grp \$t/shared
			chown 0:3000 \$t/grp; chmod 770 \$t/grp
			chmod 777 \$t/shared
		done"
}
setup_remote || { echo "cannot create files at the remote"; exit 1; }
LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start "$WT" &&
	lab_clients_start 1 || { echo "lab did not start"; exit 1; }
mount_nache 1 $N vers=4.1 && lab_client_mount 1 "$LAB_KNFSD_ADDR" / $D vers=4.1 ||
	{ echo "mounts failed"; exit 1; }

# mnt_of direct|nache — the mount point of that path in client 1.
mnt_of() { if [ "$1" = direct ]; then echo $D; else echo $N; fi; }

# as WHO CMD — run CMD in client 1 as WHO: "root", or "UID:GID" (no
# supplementary groups), or "UID:GID:G1,G2" (with them).
as() {
	local uid gid groups
	if [ "$1" = root ]; then
		lab_client_run 1 "$2"
		return
	fi
	IFS=: read -r uid gid groups <<<"$1"
	lab_client_run_as_groups 1 "$uid" "$gid" "$groups" "$2"
}

# reads WHO PATH WANT — WHO reads PATH and gets WANT.
reads() {
	local out rc=0
	out=$(as "$1" "cat $2" 2>&1) || rc=$?
	[ $rc = 0 ] && [ "$out" = "$3" ] && return 0
	echo "$1 reading $2: expected '$3', got exit $rc: $out" >&2
	return 1
}

# denied WHO PATH — WHO's read of PATH fails with "Permission denied".
denied() {
	local out rc=0
	out=$(as "$1" "cat $2" 2>&1) || rc=$?
	[ $rc != 0 ] && [[ $out == *"Permission denied"* ]] && return 0
	echo "$1 reading $2: expected Permission denied, got exit $rc: $out" >&2
	return 1
}
denied_quietly() { denied "$@" 2>/dev/null; }

# create_denied WHO PATH — WHO's create of PATH fails with "Permission
# denied", and PATH (relative to the export) is not at the remote.
create_denied() {
	local out rc=0
	out=$(as "$1" "echo x > $2" 2>&1) || rc=$?
	[ $rc != 0 ] && [[ $out == *"Permission denied"* ]] ||
		{ echo "$1 creating $2: expected Permission denied, got exit $rc: $out" >&2; return 1; }
	remote_absent "${2#/mnt/?/}"
}

# remote_owner PATH — "uid:gid content" of PATH (relative to the export) at
# the remote, seen by the server's own root.
remote_owner() { lab_knfsd_run "stat -c %u:%g $K/$1 && cat $K/$1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }
remote_absent() {
	lab_knfsd_run "! test -e $K/$1" || { echo "$1 exists at the remote" >&2; return 1; }
}

remote_is() { [ "$(remote_owner "$1")" = "$2" ]; }

# at_remote PATH WANT — wait (FLUSH_BOUND) until remote_owner PATH is WANT.
at_remote() {
	local t0=$SECONDS
	if lab_wait_until $FLUSH_BOUND remote_is "$1" "$2"; then
		echo "$1 at the remote as '$2' after $((SECONDS - t0)) s" >&2
		return 0
	fi
	echo "$1 at the remote: '$(remote_owner "$1")' after ${FLUSH_BOUND} s, expected '$2'" >&2
	echo "  write-back creates: logged $(metric nache_writeback_creates_total 'outcome="logged"')," \
		"sent $(metric nache_writeback_creates_total 'outcome="sent"'); dirty bytes $(metric nache_dirty_bytes);" \
		"upstream ops refused: NFS4ERR_ACCESS $(metric nache_upstream_ops_total 'status="NFS4ERR_ACCESS"')," \
		"NFS4ERR_PERM $(metric nache_upstream_ops_total 'status="NFS4ERR_PERM"')" >&2
	grep -E 'NACHE_WRITEBACK.*(refus|fail|error)|:(WARN|CRIT|MAJ) :.*NACHE' "$(lab_nache_log)" | tail -n 5 >&2
	return 1
}

# ---------------------------------------------------------------- the lab

# The export's file system has POSIX ACLs, and knfsd serves them as NFSv4
# ACLs: the direct mount's system.nfs4_acl holds a DENY entry for "2000"
# that includes READ_DATA.
cat >"$LAB_DIR/nfs4acl.py" <<'EOF'
import os, struct, sys
v = os.getxattr(sys.argv[1], "system.nfs4_acl")
(n,), off = struct.unpack_from(">I", v, 0), 4
for _ in range(n):
    kind, flag, mask, size = struct.unpack_from(">IIII", v, off)
    off += 16
    who = v[off:off + size].decode()
    off += (size + 3) & ~3
    print({0: "ALLOW", 1: "DENY"}.get(kind, kind), hex(flag), hex(mask), who)
EOF
remote_has_posix_acls() {
	local mnt acl
	mnt=$(lab_knfsd_run "grep ' $K ' /proc/mounts") && echo "knfsd's export: $mnt" >&2 &&
		acl=$(lab_knfsd_run "getfacl -cn $K/id/acl.txt") &&
		[[ $acl == *user:2000:---* ]] ||
		{ echo "no ACL entry for 2000 at the remote: $acl" >&2; return 1; }
	lab_knfsd_run "exportfs -v" | grep -qE '[(,]root_squash[,)]' ||
		{ echo "export options: $(lab_knfsd_run 'exportfs -v')" >&2; return 1; }
}
knfsd_serves_the_acl_as_an_nfsv4_acl() {
	local aces line kind mask who
	aces=$(on 1 "python3 -B $LAB_DIR/nfs4acl.py $D/id/acl.txt") || return 1
	while read -r line; do echo "  direct ACE: $line"; done <<<"$aces" >&2
	# ACE4_READ_DATA is 0x1.
	while read -r kind _ mask who; do
		[ "$kind" = DENY ] && [ "$who" = 2000 ] && ((mask & 1)) && return 0
	done <<<"$aces"
	echo "no DENY entry with READ_DATA for 2000" >&2
	return 1
}
# (Not a check: nache serves no ACLs, README "Known limits".)
nache_acl_note() {
	local out
	out=$(on 1 "python3 -B $LAB_DIR/nfs4acl.py $N/id/acl.txt" 2>&1 | tail -n 1)
	echo "note: system.nfs4_acl through nache: $out" >&2
}
supplementary_groups_reach_the_client() {
	expect_eq "id in client 1" "$(as 2000:2000:3000,3001 'id -u; id -g; id -G')" \
		"$(printf '2000\n2000\n2000 3000 3001')" &&
		expect_eq "id without groups" "$(as 2000:2000 'id -G')" 2000
}

check lab_remote_has_posix_acls_and_root_squash remote_has_posix_acls
check lab_knfsd_serves_the_acl_as_an_nfsv4_acl knfsd_serves_the_acl_as_an_nfsv4_acl
check lab_supplementary_groups_in_the_client supplementary_groups_reach_the_client
nache_acl_note

# ---------------------------------------------------------------- the table
# Each function takes the mount point: $D (direct) or $N (nache).

# Row 1: nothing cached; the ACL denies uid 2000.
acl_denies_uncached() { denied 2000:2000 "$1/id/acl.txt"; }

# Row 2: uid 1000 (the owner) reads first, then uid 2000 is still denied.
acl_denies_after_owner_read() {
	reads 1000:1000 "$1/id/acl-warm.txt" secret-acl-warm &&
		denied 2000:2000 "$1/id/acl-warm.txt"
}

# Row 3: root, squashed to 65534 at the remote, cannot read uid 1000's
# mode-600 file: not before, and not after its owner read it.
root_denied_uncached() { denied root "$1/id/own.txt"; }
root_denied_after_owner_read() {
	reads 1000:1000 "$1/id/own.txt" secret-own && denied root "$1/id/own.txt"
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	check "acl_denies_uid_2000_nothing_cached__$via" acl_denies_uncached "$mnt"
	check "acl_denies_uid_2000_after_uid_1000_read__$via" acl_denies_after_owner_read "$mnt"
	check "root_squash_denies_root_nothing_cached__$via" root_denied_uncached "$mnt"
	check "root_squash_denies_root_after_owner_read__$via" root_denied_after_owner_read "$mnt"
done

# Row 2 while nache holds knfsd's read delegation on the file (a local open
# keeps it; nache then uses its cached attributes and ACCESS answers without
# asking the remote): uid 2000 is still denied. (The direct answer is row
# 2's.)
nache_read_delegs() {
	lab_knfsd_states | awk '/^# client/ { ours = 0 } /name: "nache\// { ours = 1 }
		ours && /type: deleg, access: r/ && /acl-deleg\.txt/ { n++ } END { print n + 0 }'
}
acl_denies_under_delegation() {
	reads 1000:1000 "$N/id/acl-deleg.txt" secret-acl-deleg &&
		held_until_delegated 1 "<" "$N/id/acl-deleg.txt" deleg nache_read_delegs id/acl-deleg.txt ||
		{ echo "nache got no read delegation on id/acl-deleg.txt (lab)" >&2; lab_knfsd_states >&2; return 1; }
	local rc=0
	echo "nache holds knfsd's read delegation on id/acl-deleg.txt" >&2
	denied 2000:2000 "$N/id/acl-deleg.txt" || rc=1
	release 1 deleg
	return $rc
}
check acl_denies_uid_2000_under_nache_read_delegation__nache acl_denies_under_delegation

# ---------------------------------------------------------------- groups
# id/grp.txt: mode 640, owner 1000, group 3000.

group_member_reads() {
	denied 2001:2001 "$1/id/grp.txt" && reads 2000:2000:3000 "$1/id/grp.txt" secret-grp
}
non_members_denied_after_member_read() {
	reads 2000:2000:3000 "$1/id/grp.txt" secret-grp &&
		denied 2001:2001 "$1/id/grp.txt" &&
		denied 2000:2000 "$1/id/grp.txt"
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	check "supplementary_group_member_reads_group_file__$via" group_member_reads "$mnt"
	check "non_members_denied_after_member_read__$via" non_members_denied_after_member_read "$mnt"
done

# ---------------------------------------------------------------- revocation

# revoked MNT FILE CHANGE — uid 2000 reads id/FILE, CHANGE runs at the
# remote (in id/), then uid 2000 is denied within REVOKE_BOUND seconds.
revoked() {
	local mnt=$1 f=$2 change=$3 t0
	reads 2000:2000 "$mnt/id/$f" "${f%-*}" &&
		lab_knfsd_run "cd $K/id && $change" || return 1
	t0=$(date +%s%N)
	if lab_wait_until $REVOKE_BOUND denied_quietly 2000:2000 "$mnt/id/$f"; then
		echo "uid 2000 denied $((($(date +%s%N) - t0) / 1000000)) ms after: $change" >&2
		return 0
	fi
	echo "uid 2000 still reads $mnt/id/$f ${REVOKE_BOUND} s after: $change" >&2
	denied 2000:2000 "$mnt/id/$f"
	return 1
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	check "chmod_600_at_remote_revokes_reader__$via" revoked "$mnt" "rev-chmod-$via.txt" "chmod 600 rev-chmod-$via.txt"
	check "acl_set_at_remote_revokes_reader__$via" revoked "$mnt" "rev-acl-$via.txt" "setfacl -m u:2000:--- rev-acl-$via.txt"
done

# ---------------------------------------------------------------- root's creates
# root_create_refused MNT TREE TAG / root_create_squashed MNT TREE TAG:
# root creates TREE/own1000/root-TAG (refused), TREE/open/root-TAG (owned
# by the squashed uid at the remote).

root_create_refused() { create_denied root "$1/$2/own1000/root-$3"; }
root_create_squashed() {
	as root "echo by-root > $1/$2/open/root-$3" || return 1
	at_remote "$2/open/root-$3" "$SQUASHED:$SQUASHED by-root"
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	check "root_squash_refuses_root_create_in_1000s_755_dir__$via" root_create_refused "$mnt" id $via
	check "root_squash_owns_root_create_in_777_dir_as_65534__$via" root_create_squashed "$mnt" id $via
done

# ---------------------------------------------------------------- write-back
# nache restarted with write-back on a single-writer export; the direct
# mount does the same in wbd/ (its own tree).

lab_nache_stop && LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start "$WB" ||
	{ echo "nache did not restart with write-back"; itest_finish; }

tree_of() { if [ "$1" = "$D" ]; then echo wbd; else echo wb; fi; }

# written_back K CMD... — CMD, during which nache logged at least K creates
# for write-back: what reaches the remote came from nache's flush, not from
# a write-through create.
written_back() {
	local k=$1 c0 rc=0
	shift
	c0=$(metric nache_writeback_creates_total 'outcome="logged"') || return 1
	"$@" || rc=$?
	at_least "creates logged for write-back" \
		$(($(metric nache_writeback_creates_total 'outcome="logged"') - c0)) "$k" || rc=1
	return $rc
}

# A member of group 3000 (supplementary) creates in root:3000 770; the file
# is served at once and reaches the remote as 2000:2000 (no setgid dir).
create_through_group() {
	local t
	t=$(tree_of "$1")
	as 2000:2000:3000 "echo by-2000 > $1/$t/grp/f2000" &&
		reads 2000:2000:3000 "$1/$t/grp/f2000" by-2000 &&
		at_remote "$t/grp/f2000" "2000:2000 by-2000"
}
create_without_group_refused() {
	create_denied 2001:2001 "$1/$(tree_of "$1")/grp/f2001"
}
two_writers_as_themselves() {
	local t
	t=$(tree_of "$1")
	as 1000:1000 "echo by-1000 > $1/$t/shared/f1000" &&
		as 2000:2000 "echo by-2000 > $1/$t/shared/f2000" &&
		at_remote "$t/shared/f1000" "1000:1000 by-1000" &&
		at_remote "$t/shared/f2000" "2000:2000 by-2000"
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	wb1=() wb2=()
	[ $via = direct ] || wb1=(written_back 1) wb2=(written_back 2)
	check "writeback_create_through_supplementary_group_owned_by_creator__$via" \
		"${wb1[@]}" create_through_group "$mnt"
	check "writeback_create_without_the_group_refused__$via" create_without_group_refused "$mnt"
	check "writeback_two_writers_flushed_as_themselves__$via" \
		"${wb2[@]}" two_writers_as_themselves "$mnt"
	check "writeback_root_squash_refuses_root_create_in_1000s_755_dir__$via" \
		root_create_refused "$mnt" "$(tree_of "$mnt")" $via
	check "writeback_root_create_in_777_dir_owned_by_65534__$via" \
		"${wb1[@]}" root_create_squashed "$mnt" "$(tree_of "$mnt")" $via
done

itest_finish
