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
#  - so does a chmod 700 of the file's directory at the remote (checked
#    with the client's own caches dropped: it keeps a directory's rights
#    as long as its attributes);
#  - root's creates: refused in uid 1000's 755 directory, owned by the
#    squashed uid (65534) in a 777 one;
#  - an NFSv4 ACL set through the direct mount (nfs4_setfacl) with DENY
#    entries: READ denied to uid 2000 and WRITE to uid 2001, both allowed
#    by the mode bits, before and after an allowed user (uid 3001) read and
#    wrote the file through the cache; each keeps the right not denied;
#  - a chmod or an ACL set at the remote while the reader's path holds
#    knfsd's read delegation: knfsd recalls it, and the reader (through
#    NFSv4, and through NFSv3 mounts of the same servers) is denied at once
#    (REVOKE_AT_ONCE), not at the end of an attribute or trust window;
#  - write-back (Single_Writer): a create through a supplementary group is
#    accepted, refused without it, and reaches the remote owned by its
#    creator; two users' files are flushed as themselves, also when nache
#    is killed (kill -9) before the flush and the restarted daemon sends
#    them; root's creates behave as above once flushed;
#  - all_squash at the remote (a second export, /sq, anonuid 4000): the
#    owner of a mode-600 file and root are denied it, anyone reads the
#    anonymous user's mode-600 file, creates are owned by the anonymous
#    user and allowed or refused as for it.
#  - write-back: everything acknowledged reaches the remote and nothing
#    sent is refused, also a directory's times, which a local create moves
#    here and which the remote refuses to set for root (squashed; setting
#    an explicit time needs ownership): given up, the remote's own stand.
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
source "$(dirname "$0")/../../lab/knfsd_states.sh"

ATTR_TIMEOUT=3                       # nache's Attr_Timeout (and Ganesha's)
REVOKE_BOUND=$((5 * ATTR_TIMEOUT))   # a revoked reader is denied within it
FLUSH_BOUND=60                       # a write-back create reaches the remote
WT="Attr_Timeout = $ATTR_TIMEOUT;"
WB="Attr_Timeout = $ATTR_TIMEOUT; Write_Policy = \"write_back\"; Single_Writer = true; Flush_Age = 1;"
# Write-back with nothing flushed by age (a kill comes before any flush).
WB_HOLD="Attr_Timeout = $ATTR_TIMEOUT; Write_Policy = \"write_back\"; Single_Writer = true; Flush_Age = 3600;"
N=/mnt/n                             # client 1: nache's /export
D=/mnt/k                             # client 1: knfsd's / (direct)
N3=/mnt/n3                           # the same two through NFSv3
D3=/mnt/k3
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
		for f in rev-chmod rev-acl rev-deleg-chmod rev-deleg-acl rev-deleg-chmod3 rev-deleg-acl3; do
			for via in direct nache; do
				echo \$f > id/\$f-\$via.txt
				chown 1000:1000 id/\$f-\$via.txt; chmod 644 id/\$f-\$via.txt
			done
		done
		for via in direct nache; do
			mkdir id/rdir-\$via; chmod 755 id/rdir-\$via
			echo rdir > id/rdir-\$via/f.txt; chmod 644 id/rdir-\$via/f.txt
		done
		for f in v4acl v4acl-warm-direct v4acl-warm-nache v4acl-wo-direct v4acl-wo-nache; do
			echo \$f > id/\$f.txt
			chown 1000:1000 id/\$f.txt; chmod 666 id/\$f.txt
		done
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
mount_nache 1 $N vers=4.1 && lab_client_mount 1 "$LAB_KNFSD_ADDR" / $D vers=4.1 &&
	mount_nache 1 $N3 vers=3 && lab_client_mount 1 "$LAB_KNFSD_ADDR" "$K" $D3 vers=3 ||
	{ echo "mounts failed"; exit 1; }

# mnt_of direct|nache — the mount point of that path in client 1.
mnt_of() { if [ "$1" = direct ]; then echo $D; else echo $N; fi; }
# v3_mnt_of direct|nache — the same through NFSv3.
v3_mnt_of() { if [ "$1" = direct ]; then echo $D3; else echo $N3; fi; }


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

# create_denied WHO PATH [DIR] — WHO's create of PATH fails with
# "Permission denied", and PATH is not at the remote (in the export, or in
# its directory DIR when the mount shows that directory).
create_denied() {
	local out rc=0
	out=$(as "$1" "echo x > $2" 2>&1) || rc=$?
	[ $rc != 0 ] && [[ $out == *"Permission denied"* ]] ||
		{ echo "$1 creating $2: expected Permission denied, got exit $rc: $out" >&2; return 1; }
	remote_absent "${3:+$3/}${2#/mnt/*/}"
}

# write_denied WHO PATH — WHO's append to PATH fails with "Permission
# denied", and PATH (relative to the export) is unchanged at the remote.
write_denied() {
	local out rc=0 before
	before=$(remote_owner "${2#/mnt/*/}")
	out=$(as "$1" "echo by-$1 >> $2" 2>&1) || rc=$?
	[ $rc != 0 ] && [[ $out == *"Permission denied"* ]] ||
		{ echo "$1 appending to $2: expected Permission denied, got exit $rc: $out" >&2; return 1; }
	[ "$(remote_owner "${2#/mnt/*/}")" = "$before" ] ||
		{ echo "$2 changed at the remote: '$(remote_owner "${2#/mnt/*/}")'" >&2; return 1; }
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

# NFSv4 ACLs with DENY entries, set as NFSv4 ACLs (SETATTR of the acl
# attribute) by the files' owner through the direct mount with
# nfs4_setfacl (nfs4-acl-tools; the guests run the host's binaries):
# READ_DATA denied to 2000, WRITE_DATA and APPEND_DATA to 2001, ahead of
# the ALLOW entries knfsd made from mode 666. knfsd keeps them as the
# POSIX ACL user:2000:-w-, user:2001:r-- and serves them back as DENY
# entries. Set before nache first looks at the files.
V4ACL_FILES="v4acl v4acl-warm-direct v4acl-warm-nache v4acl-wo-direct v4acl-wo-nache"
# deny_mask ACES WHO — the access mask the DENY entries for WHO hold in
# ACES (nfs4acl.py's lines).
deny_mask() {
	local kind mask who m=0
	while read -r kind _ mask who; do
		[ "$kind" = DENY ] && [ "$who" = "$2" ] && m=$((m | mask))
	done <<<"$1"
	echo $m
}
v4_acls_set_through_the_direct_mount() {
	local f aces m2000 m2001
	on 1 "command -v nfs4_setfacl" >/dev/null ||
		{ echo "no nfs4_setfacl in the client: install nfs4-acl-tools (deploy/install-deps.sh)" >&2; return 1; }
	for f in $V4ACL_FILES; do
		aces=$(as 1000:1000 "nfs4_setfacl -a D::2000:r $D/id/$f.txt &&
			nfs4_setfacl -a D::2001:wa $D/id/$f.txt &&
			python3 -B $LAB_DIR/nfs4acl.py $D/id/$f.txt") || return 1
		m2000=$(deny_mask "$aces" 2000) m2001=$(deny_mask "$aces" 2001)
		printf '  %s.txt: DENY masks 2000 %#x, 2001 %#x\n' $f $m2000 $m2001 >&2
		# READ_DATA is 0x1, WRITE_DATA 0x2, APPEND_DATA 0x4: each user is
		# denied one right and keeps the other.
		((m2000 & 1)) && ! ((m2000 & 6)) && (((m2001 & 6) == 6)) && ! ((m2001 & 1)) ||
			{ echo "  expected READ_DATA denied to 2000 only, WRITE_DATA to 2001 only" >&2; return 1; }
	done
	echo "  at the remote: $(lab_knfsd_run "cd $K/id && getfacl -cn v4acl.txt" 2>/dev/null |
		grep -E '^user:200[01]:' | tr '\n' ' ')" >&2
}

check lab_remote_has_posix_acls_and_root_squash remote_has_posix_acls
check lab_knfsd_serves_the_acl_as_an_nfsv4_acl knfsd_serves_the_acl_as_an_nfsv4_acl
check lab_supplementary_groups_in_the_client supplementary_groups_reach_the_client
check lab_v4acl_deny_entries_set_through_the_direct_mount v4_acls_set_through_the_direct_mount
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

# ---------------------------------------------------------------- NFSv4 ACLs
# id/v4acl*.txt: mode 666, owner 1000, DENY READ_DATA for 2000 and DENY
# WRITE_DATA|APPEND_DATA for 2001 (set as an NFSv4 ACL, see the lab
# checks); id/v4acl.txt is only refused, never changed, so both paths share
# it; each path has its own warm file.

v4acl_denies_read_uncached() { denied 2000:2000 "$1/id/v4acl.txt"; }
v4acl_denies_write_uncached() { write_denied 2001:2001 "$1/id/v4acl.txt"; }

# uid 3001 (no entry: the mode bits allow it everything) writes and reads
# the file first (through nache: its data, attributes and 3001's ACCESS
# answer cached), then 2000 still cannot read it and 2001 cannot write it.
v4acl_denies_after_allowed_user_cached() {
	local f=$1/id/v4acl-warm-$2.txt
	as 3001:3001 "echo by-3001 >> $f" &&
		reads 3001:3001 "$f" "$(printf 'v4acl-warm-%s\nby-3001' "$2")" &&
		denied 2000:2000 "$f" &&
		write_denied 2001:2001 "$f"
}
# 2001 is denied only the right its entry names: it still reads the file.
v4acl_write_denied_user_still_reads() {
	reads 2001:2001 "$1/id/v4acl-warm-$2.txt" "$(printf 'v4acl-warm-%s\nby-3001' "$2")"
}
# And 2000 still writes it: a write-only open (O_WRONLY, as `>>` makes) of
# a file it may write but not read; first a file nobody has open
# (id/v4acl-wo-VIA.txt: nache's upstream OPEN, write-only), then the warm
# one while uid 3001's upstream read open lingers (its upgrade asks for
# WRITE only, as 2000). nache used to ask for READ with every write open,
# and the remote refused both.
v4acl_read_denied_user_still_writes() {
	local f
	for f in v4acl-wo-$2 v4acl-warm-$2; do
		as 2000:2000 "echo by-2000 >> $1/id/$f.txt" || return 1
		echo "uid 2000 appended to id/$f.txt" >&2
	done
	reads 3001:3001 "$1/id/v4acl-warm-$2.txt" "$(printf 'v4acl-warm-%s\nby-3001\nby-2000' "$2")" &&
		denied 2000:2000 "$1/id/v4acl-warm-$2.txt"
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	check "v4acl_deny_read_denies_uid_2000_nothing_cached__$via" v4acl_denies_read_uncached "$mnt"
	check "v4acl_deny_write_denies_uid_2001_nothing_cached__$via" v4acl_denies_write_uncached "$mnt"
	check "v4acl_deny_entries_hold_after_uid_3001_cached_the_file__$via" \
		v4acl_denies_after_allowed_user_cached "$mnt" $via
	check "v4acl_write_denied_uid_2001_still_reads__$via" \
		v4acl_write_denied_user_still_reads "$mnt" $via
	check "v4acl_read_denied_uid_2000_still_writes__$via" \
		v4acl_read_denied_user_still_writes "$mnt" $via
done

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

# revoked MNT FILE CHANGE [TRY] — uid 2000 reads id/FILE, CHANGE runs at
# the remote (in id/), then uid 2000 is denied within REVOKE_BOUND seconds
# (TRY WHO PATH tells; denied_quietly by default).
revoked() {
	local mnt=$1 f=$2 change=$3 try=${4:-denied_quietly} t0
	reads 2000:2000 "$mnt/id/$f" "${f%-*}" &&
		lab_knfsd_run "cd $K/id && $change" || return 1
	t0=$(date +%s%N)
	if lab_wait_until $REVOKE_BOUND $try 2000:2000 "$mnt/id/$f"; then
		echo "uid 2000 denied $((($(date +%s%N) - t0) / 1000000)) ms after: $change" >&2
		return 0
	fi
	echo "uid 2000 still reads $mnt/id/$f ${REVOKE_BOUND} s after: $change" >&2
	denied 2000:2000 "$mnt/id/$f"
	return 1
}

# dropped_then_denied WHO PATH — client 1 drops its own caches (dentries,
# and the rights it keeps with them), then WHO's read of PATH is denied.
# For a right to a directory: the client keeps it as long as the
# directory's attributes (acdirmin, 30 s and more, past REVOKE_BOUND), and
# what is checked is the server's answer (nache's: Ganesha's and its own
# cached rights, each kept Attr_Timeout).
dropped_then_denied() {
	on 1 "echo 3 > /proc/sys/vm/drop_caches" && denied_quietly "$@"
}

for via in direct nache; do
	mnt=$(mnt_of $via)
	check "chmod_600_at_remote_revokes_reader__$via" revoked "$mnt" "rev-chmod-$via.txt" "chmod 600 rev-chmod-$via.txt"
	check "acl_set_at_remote_revokes_reader__$via" revoked "$mnt" "rev-acl-$via.txt" "setfacl -m u:2000:--- rev-acl-$via.txt"
	check "chmod_700_of_a_dir_at_remote_revokes_reader_within_attr_timeout__$via" \
		revoked "$mnt" "rdir-$via/f.txt" "chmod 700 rdir-$via" dropped_then_denied
done

# Revocation while the reader's path holds knfsd's read delegation: nache
# answers opens of a delegated file from its cache (attributes, ACCESS
# answers), and the direct client from its own. A chmod or an ACL set at
# the remote breaks the delegation first (Linux's notify_change and
# setxattr wait for its return), so the reader must be denied at once:
# within REVOKE_AT_ONCE, far below the attribute window (Attr_Timeout) and
# the 60 s trust bound of a cached ACCESS answer.
REVOKE_AT_ONCE=2
deleg_file=
file_read_delegs() { read_delegs "" "$deleg_file"; }

# revoked_under_delegation VIA FILE CHANGE [V3] — client 1 holds id/FILE
# open through VIA's NFSv4 mount until knfsd delegates it there; uid 2000
# reads it (through VIA's NFSv3 mount with V3 = v3); CHANGE runs at the
# remote (in id/); uid 2000 is then denied within REVOKE_AT_ONCE seconds.
revoked_under_delegation() {
	local via=$1 f=$2 change=$3 mnt rmnt t0 ms rc=0
	mnt=$(mnt_of "$via")
	rmnt=$mnt
	[ "${4:-}" = v3 ] && rmnt=$(v3_mnt_of "$via")
	deleg_file=id/$f
	held_until_delegated 1 "<" "$mnt/id/$f" "held-$f" file_read_delegs "id/$f" ||
		{ echo "the $via path got no read delegation on id/$f (lab)" >&2; lab_knfsd_states >&2; return 1; }
	echo "the $via path holds knfsd's read delegation on id/$f" >&2
	if reads 2000:2000 "$rmnt/id/$f" "${f%-*}" &&
		lab_knfsd_run "cd $K/id && $change"; then
		t0=$(date +%s%N)
		if lab_wait_until $REVOKE_AT_ONCE denied_quietly 2000:2000 "$rmnt/id/$f"; then
			ms=$((($(date +%s%N) - t0) / 1000000))
			echo "uid 2000 denied on $rmnt $ms ms after: $change (delegations left on id/$f: $(file_read_delegs))" >&2
		else
			echo "uid 2000 still reads $rmnt/id/$f ${REVOKE_AT_ONCE} s after: $change" \
				"(delegations left on id/$f: $(file_read_delegs))" >&2
			lab_wait_until 30 denied_quietly 2000:2000 "$rmnt/id/$f" &&
				echo "  denied $((($(date +%s%N) - t0) / 1000000)) ms after it" >&2
			rc=1
		fi
	else
		rc=1
	fi
	release 1 "held-$f"
	return $rc
}

for via in direct nache; do
	check "chmod_600_at_remote_under_read_delegation_revokes_reader_at_once__$via" \
		revoked_under_delegation $via "rev-deleg-chmod-$via.txt" "chmod 600 rev-deleg-chmod-$via.txt"
	check "acl_set_at_remote_under_read_delegation_revokes_reader_at_once__$via" \
		revoked_under_delegation $via "rev-deleg-acl-$via.txt" "setfacl -m u:2000:--- rev-deleg-acl-$via.txt"
	check "chmod_600_at_remote_under_read_delegation_revokes_nfsv3_reader_at_once__$via" \
		revoked_under_delegation $via "rev-deleg-chmod3-$via.txt" "chmod 600 rev-deleg-chmod3-$via.txt" v3
	check "acl_set_at_remote_under_read_delegation_revokes_nfsv3_reader_at_once__$via" \
		revoked_under_delegation $via "rev-deleg-acl3-$via.txt" "setfacl -m u:2000:--- rev-deleg-acl3-$via.txt" v3
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

# Everything acknowledged reaches the remote: nothing is left to flush
# (nache_flush_lag_seconds back to 0), and the remote refused nothing the
# flusher sent (the directories' times it refuses are given up).
flushed_nothing_refused() {
	local t0=$SECONDS
	lab_wait_until $FLUSH_BOUND eval '[ "$(metric nache_flush_lag_seconds)" = 0 ] ||
		[ "$(metric nache_writeback_refused_total)" != 0 ]'
	echo "after $((SECONDS - t0)) s: flush lag $(metric nache_flush_lag_seconds) s," \
		"refused: $(metric nache_writeback_refused_total 'op="setattr"') setattr," \
		"$(metric nache_writeback_refused_total) in all" >&2
	expect_eq "sends refused by the remote" "$(metric nache_writeback_refused_total)" 0 &&
		lab_wait_until $FLUSH_BOUND eval '[ "$(metric nache_flush_lag_seconds)" = 0 ]'
}
check writeback_everything_flushed_nothing_refused__nache flushed_nothing_refused

# ---------------------------------------------------------------- kill -9
# Two users each create and write a file of two cache blocks (Block_Size
# 256 KiB) in write-back mode; nache is killed (SIGKILL) before anything
# is flushed, restarted with a short Flush_Age, and the remote gets each
# file owned by its writer, its content intact. (The direct mount has no
# daemon to kill: its files simply reach the remote as their writers.)

# remote_sum PATH — "uid:gid sha256" of PATH (relative to the export) at the
# remote.
remote_sum() {
	lab_knfsd_run "stat -c %u:%g $K/$1 && sha256sum < $K/$1" 2>/dev/null |
		cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//'
}
remote_sum_is() { [ "$(remote_sum "$1")" = "$2" ]; }
# write_as WHO FILE — WHO writes 300,000 random bytes into FILE (made
# anew); prints their sha256.
write_as() {
	as "$1" "head -c 300000 /dev/urandom > /tmp/w.\$\$ && cp /tmp/w.\$\$ $2 &&
		sha256sum < /tmp/w.\$\$ && rm -f /tmp/w.\$\$" | cut -d' ' -f1
}
# through_mount_sum FILE — sha256 of FILE read by client 1 from its server
# (its own page cache dropped first).
through_mount_sum() {
	on 1 "echo 3 > /proc/sys/vm/drop_caches; sha256sum < $1" | cut -d' ' -f1
}

writers_across_kill() {
	local mnt=$1 via=$2 t s1 s2 dirty
	t=$(tree_of "$mnt")
	if [ $via = nache ]; then
		lab_nache_stop && LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start "$WB_HOLD" || return 1
	fi
	s1=$(write_as 1000:1000 "$mnt/$t/shared/k1000") && [ -n "$s1" ] &&
		s2=$(write_as 2000:2000 "$mnt/$t/shared/k2000") && [ -n "$s2" ] || return 1
	if [ $via = nache ]; then
		dirty=$(metric nache_dirty_bytes) &&
			echo "before the kill: $dirty dirty bytes; at the remote:" \
				"$(lab_knfsd_run "ls $K/$t/shared" | tr '\n' ' ')" >&2 &&
			at_least "dirty bytes before the kill" "$dirty" 600000 &&
			remote_absent "$t/shared/k1000" && remote_absent "$t/shared/k2000" || return 1
		lab_nache_kill && LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start "$WB" || return 1
	fi
	lab_wait_until $FLUSH_BOUND remote_sum_is "$t/shared/k1000" "1000:1000 $s1" &&
		lab_wait_until $FLUSH_BOUND remote_sum_is "$t/shared/k2000" "2000:2000 $s2" ||
		{ echo "at the remote: k1000 '$(remote_sum "$t/shared/k1000")', want '1000:1000 $s1';" \
			"k2000 '$(remote_sum "$t/shared/k2000")', want '2000:2000 $s2'" >&2; return 1; }
	echo "at the remote as their writers: k1000 and k2000" >&2
	expect_eq "k1000 through the mount" "$(through_mount_sum "$mnt/$t/shared/k1000")" "$s1" &&
		expect_eq "k2000 through the mount" "$(through_mount_sum "$mnt/$t/shared/k2000")" "$s2"
}

for via in direct nache; do
	check "writeback_two_writers_flushed_as_themselves_after_kill_9__$via" \
		writers_across_kill "$(mnt_of $via)" $via
done

# ---------------------------------------------------------------- all_squash
# A second export at the remote, /sq, with all_squash: knfsd maps every
# caller, root included, to anonuid/anongid SQ_ANON. It is its own file
# system (a tmpfs mounted in the first export, so NFSv4 crosses into it
# with its own options; fsid=1, since a tmpfs has no UUID), exported while
# knfsd runs. nache is restarted with /sq as its upstream path, write-
# through, with a cache of its own (the store records the upstream path it
# was made for), and mounted at NS; the direct mount is DS.
SQ_ANON=4000
NS=/mnt/ns
DS=/mnt/ks
SQ_OPTS=rw,fsid=1,all_squash,anonuid=$SQ_ANON,anongid=$SQ_ANON,insecure,no_subtree_check,sync
setup_all_squash() {
	lab_knfsd_run "set -e
		mkdir $K/sq
		mount -t tmpfs -o size=16m,mode=755 sq $K/sq
		cd $K/sq
		echo secret-sq-own > own.txt
		chown 1000:1000 own.txt; chmod 600 own.txt
		echo secret-anon > anon.txt
		chown $SQ_ANON:$SQ_ANON anon.txt; chmod 600 anon.txt
		mkdir own1000 anon open
		chown 1000:1000 own1000; chmod 755 own1000
		chown $SQ_ANON:$SQ_ANON anon; chmod 755 anon
		chmod 777 open
		exportfs -o $SQ_OPTS '*:$K/sq'" || { echo "cannot export $K/sq" >&2; return 1; }
	lab_client_umount 1 $N && lab_client_umount 1 $N3 &&
		lab_nache_stop && mv "$LAB_DIR/nache/cache" "$LAB_DIR/nache/cache.root" &&
		LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/sq lab_nache_start "$WT" &&
		mount_nache 1 $NS vers=4.1 &&
		lab_client_mount 1 "$LAB_KNFSD_ADDR" /sq $DS vers=4.1 || return 1
	expect_eq "options of $K/sq" \
		"$(lab_knfsd_run "exportfs -v" | tr -d ' \t\n' | grep -o "$K/sq[^)]*)" | grep -c all_squash)" 1 &&
		expect_eq "the direct mount's /sq" "$(on 1 "LC_ALL=C ls $DS | tr '\n' ' '")" "anon anon.txt open own.txt own1000 "
}
check lab_all_squash_export_mounted_both_ways setup_all_squash

sq_of() { if [ "$1" = direct ]; then echo $DS; else echo $NS; fi; }

# The owner of a mode-600 file is squashed like everyone: denied, as root
# is; the anonymous user's mode-600 file is read by anyone (the mode bits
# alone would deny uid 2000).
sq_owner_denied() { denied 1000:1000 "$1/own.txt"; }
sq_root_denied() { denied root "$1/own.txt"; }
sq_anyone_reads_anon_file() {
	reads 2000:2000 "$1/anon.txt" secret-anon && reads root "$1/anon.txt" secret-anon
}
# Creates: made by the anonymous user whoever asks; allowed in its 755
# directory even to uid 1000 (whom the mode bits would refuse), refused in
# uid 1000's own 755 directory.
sq_create_owned_by_anon() {
	as 1000:1000 "echo by-1000 > $1/anon/f1000-$2" &&
		as root "echo by-root > $1/open/root-$2" &&
		at_remote "sq/anon/f1000-$2" "$SQ_ANON:$SQ_ANON by-1000" &&
		at_remote "sq/open/root-$2" "$SQ_ANON:$SQ_ANON by-root"
}
sq_create_in_own_dir_refused() { create_denied 1000:1000 "$1/own1000/f1000-$2" sq; }

for via in direct nache; do
	mnt=$(sq_of $via)
	check "all_squash_denies_the_owner_of_a_600_file__$via" sq_owner_denied "$mnt"
	check "all_squash_denies_root_the_600_file__$via" sq_root_denied "$mnt"
	check "all_squash_anyone_reads_the_anonymous_users_600_file__$via" sq_anyone_reads_anon_file "$mnt"
	check "all_squash_creates_owned_by_the_anonymous_user__$via" sq_create_owned_by_anon "$mnt" $via
	check "all_squash_refuses_uid_1000_create_in_its_own_755_dir__$via" sq_create_in_own_dir_refused "$mnt" $via
done

itest_finish
