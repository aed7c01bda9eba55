#!/usr/bin/env bash
# NFSv4.2 through nache (issue 17): a Linux client mounting nache with
# vers=4.2, nache speaking NFSv4.2 to Linux knfsd (Upstream_Minor_Version
# = 2), a second client mounting knfsd directly to see what the remote
# really holds, and a third mounting nache. fallocate(1) sends ALLOCATE, fallocate -p DEALLOCATE,
# lseek(SEEK_DATA/SEEK_HOLE) SEEK, setfattr/getfattr the xattr operations
# of RFC 8276: each must do at the remote what it does on a direct mount,
# and the remote, not nache, decides who may change an xattr. nache reads
# what it does not hold with READ_PLUS; copy_file_range is a COPY at the
# remote.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		lab_nache_start 'Upstream_Minor_Version = 2;' &&
	lab_clients_start 1 2 3 || { echo "lab did not start"; exit 1; }
N=/mnt/n
K=/mnt/k
mount_nache 1 $N vers=4.2 && lab_client_mount 2 "$LAB_KNFSD_ADDR" / $K vers=4.2 &&
	mount_nache 3 $N vers=4.2 ||
	{ echo "mounts failed"; exit 1; }
on 1 "mkdir -p $N/t && chmod 1777 $N/t" || { echo "no test directory"; exit 1; }

allocate_reserves_at_the_remote() {
	on 1 "fallocate -l 1048576 $N/t/fa" &&
		expect_eq "size at the remote" "$(on 2 "stat -c %s $K/t/fa")" 1048576 &&
		expect_eq "allocated at the remote (KiB)" \
			"$(on 2 "du -k $K/t/fa | cut -f1")" 1024
}

# The hole reads as zeros at the remote and through nache (whose cache held
# the old bytes: the writer read them back first), to the writer and to a
# client that never saw them; the rest is untouched.
punch_hole_reads_zeros() {
	local want
	on 1 "head -c 65536 /dev/urandom > /tmp/ph && cp /tmp/ph $N/t/ph && cmp /tmp/ph $N/t/ph" &&
		on 1 "fallocate -p -o 8192 -l 16384 $N/t/ph" || return 1
	want=$(on 1 "head -c 8192 /tmp/ph; head -c 16384 /dev/zero; tail -c +24577 /tmp/ph" | sha256sum)
	expect_eq "remote bytes" "$(on 2 "cat $K/t/ph" | sha256sum)" "$want" &&
		expect_eq "bytes through nache, the writer" "$(on 1 "cat $N/t/ph" | sha256sum)" "$want" &&
		expect_eq "bytes through nache, another client" "$(on 3 "cat $N/t/ph" | sha256sum)" "$want"
}

# A file with data only at 512 KiB: SEEK_DATA from 0 finds it, SEEK_HOLE
# from there finds its end (a client without SEEK would say 0 and 1 MiB).
seek_finds_data_and_holes() {
	on 1 "truncate -s 1048576 $N/t/sp && dd if=/dev/urandom of=$N/t/sp bs=4096 count=1 seek=128 conv=notrunc status=none" &&
		expect_eq "SEEK_DATA, SEEK_HOLE" "$(on 1 "python3 -c '
import os
fd = os.open(\"$N/t/sp\", os.O_RDONLY)
d = os.lseek(fd, 0, os.SEEK_DATA)
print(d, os.lseek(fd, d, os.SEEK_HOLE))'")" "524288 528384"
}

# A sparse file made at the remote (8 MiB, 64 KiB of data at 4 MiB), read
# through nache for the first time: the bytes are the remote's, and they
# came with READ_PLUS, as data and holes that together cover the file
# (at least: an open's first READ fetches the file's start too). knfsd's
# READ_PLUS sends data segments only (Linux since 6.0 no longer sends
# holes), so the split between them is printed, not asserted.
sparse_file_reads_through_nache() {
	local want r0 h0 p0 r1 h1 p1
	on 2 "truncate -s 8388608 $K/t/sparse && dd if=/dev/urandom of=$K/t/sparse bs=65536 count=1 seek=64 conv=notrunc status=none" || return 1
	want=$(on 2 "cat $K/t/sparse" | sha256sum)
	r0=$(metric nache_upstream_bytes_total 'direction="read"')
	h0=$(metric nache_upstream_bytes_total 'direction="hole"')
	p0=$(metric nache_upstream_ops_total 'op="READ_PLUS",status="ok"')
	expect_eq "bytes through nache" "$(on 1 "cat $N/t/sparse" | sha256sum)" "$want" || return 1
	r1=$(metric nache_upstream_bytes_total 'direction="read"')
	h1=$(metric nache_upstream_bytes_total 'direction="hole"')
	p1=$(metric nache_upstream_ops_total 'op="READ_PLUS",status="ok"')
	echo "sparse 8 MiB file: $((r1 - r0)) bytes came as data, $((h1 - h0)) as holes, in $((p1 - p0)) READ_PLUS" >&2
	at_least "bytes fetched as data or holes" $((r1 - r0 + h1 - h0)) 8388608 &&
		at_least "READ_PLUS sent" $((p1 - p0)) 8
}

# copy_file_range(2) on a vers=4.2 mount of nache (what cp does) is a
# server-side COPY at the remote: the copy is there, byte for byte, and
# its 4 MiB never crossed the link (neither read nor written upstream).
# Counted from after both files are open: opening the source may bring
# its first block along (nache reads ahead in an OPEN of a file it holds
# no data of), which is the open's, not the copy's.
copy_file_range_is_a_copy_at_the_remote() {
	local want r0 w0 c0 r1 w1 c1
	on 1 "head -c 4194304 /dev/urandom > /tmp/cs && cp /tmp/cs $N/t/cs && sync" || return 1
	want=$(on 1 "sha256sum < /tmp/cs")
	on 1 "rm -f /tmp/cr.*; setsid python3 -c '
import os, time
src = os.open(\"$N/t/cs\", os.O_RDONLY)
dst = os.open(\"$N/t/cd\", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
open(\"/tmp/cr.opened\", \"w\").close()
while not os.path.exists(\"/tmp/cr.go\"):
    time.sleep(0.05)
left = os.fstat(src).st_size
while left:
    n = os.copy_file_range(src, dst, left)
    assert n > 0
    left -= n
os.close(dst)
open(\"/tmp/cr.done\", \"w\").write(\"ok\")' >/tmp/cr.out 2>&1 </dev/null &" &&
		lab_wait_until 30 on 1 "test -e /tmp/cr.opened" ||
		{ on 1 "cat /tmp/cr.out" >&2; return 1; }
	r0=$(metric nache_upstream_bytes_total 'direction="read"')
	w0=$(metric nache_upstream_bytes_total 'direction="write"')
	c0=$(metric nache_upstream_ops_total 'op="COPY",status="ok"')
	on 1 "touch /tmp/cr.go" &&
		lab_wait_until 60 on 1 "test -s /tmp/cr.done" ||
		{ on 1 "cat /tmp/cr.out" >&2; return 1; }
	r1=$(metric nache_upstream_bytes_total 'direction="read"')
	w1=$(metric nache_upstream_bytes_total 'direction="write"')
	c1=$(metric nache_upstream_ops_total 'op="COPY",status="ok"')
	echo "copy of 4 MiB: $((c1 - c0)) COPY, $((r1 - r0)) bytes read and $((w1 - w0)) written upstream" >&2
	expect_eq "the copy at the remote" "$(on 2 "sha256sum < $K/t/cd")" "$want" &&
		expect_eq "the copy through nache, another client" "$(on 3 "sha256sum < $N/t/cd")" "$want" &&
		at_least "COPY sent" $((c1 - c0)) 1 &&
		expect_eq "bytes read upstream for the copy" $((r1 - r0)) 0 &&
		expect_eq "bytes written upstream for the copy" $((w1 - w0)) 0
}

xattrs_round_trip() {
	local big
	on 1 "echo x > $N/t/xa && setfattr -n user.color -v blue $N/t/xa" &&
		expect_eq "read back through nache" "$(on 1 "getfattr --only-values -n user.color $N/t/xa")" blue &&
		expect_eq "at the remote" "$(on 2 "getfattr --only-values -n user.color $K/t/xa")" blue &&
		on 2 "setfattr -n user.shape -v round $K/t/xa" &&
		expect_eq "set at the remote, seen through nache" \
			"$(on 1 "getfattr --absolute-names -d $N/t/xa | grep ^user | sort")" \
			"$(printf 'user.color="blue"\nuser.shape="round"')" &&
		on 1 "setfattr -x user.color $N/t/xa" &&
		expect_eq "removed at the remote" "$(on 2 "getfattr --absolute-names -d $K/t/xa | grep ^user")" \
			'user.shape="round"' || return 1
	# A value larger than Ganesha's first buffer (1 KiB).
	big=$(head -c 3000 /dev/urandom | base64 -w0)
	on 1 "setfattr -n user.big -v '$big' $N/t/xa" &&
		expect_eq "a 4 KiB value" "$(on 2 "getfattr --only-values -n user.big $K/t/xa")" "$big"
}

# The file is root's, mode 0644: the remote refuses another user's
# SETXATTR (and nache must not grant it from anything it caches).
xattr_refused_to_another_user() {
	on 1 "echo y > $N/t/mine && chmod 644 $N/t/mine" &&
		! as 2000:2000 "setfattr -n user.evil -v 1 $N/t/mine" &&
		expect_eq "nothing set at the remote" \
			"$(on 2 "getfattr --absolute-names -d $K/t/mine 2>/dev/null | grep -c ^user.evil")" 0
}

check allocate_reserves_space_at_the_remote allocate_reserves_at_the_remote
check punch_hole_reads_zeros_at_the_remote_and_through_nache punch_hole_reads_zeros
check seek_data_and_seek_hole_find_the_remotes_holes seek_finds_data_and_holes
check sparse_file_read_through_nache_with_read_plus sparse_file_reads_through_nache
check copy_file_range_is_a_server_side_copy_at_the_remote copy_file_range_is_a_copy_at_the_remote
check xattrs_set_read_and_removed_through_nache xattrs_round_trip
check xattr_change_refused_to_another_user xattr_refused_to_another_user
itest_finish
