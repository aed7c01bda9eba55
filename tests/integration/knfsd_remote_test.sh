#!/usr/bin/env bash
# nache in front of Linux knfsd (a 6.1 kernel under user-mode-linux) instead
# of Ganesha: the same forwarding works against the kernel server, checked by
# a second client mounting knfsd directly and by knfsd's own op counters;
# what a client wrote through nache reads back from nache's cache; a
# client's own creates and removes keep what it cached of the directory;
# tar's exclusive create in a directory whose attributes aged is one round
# trip;
# nache's stop destroys its NFSv4.1 session (knfsd_remote_v40_test.sh: the
# same over NFSv4.0).
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start &&
	lab_clients_start 1 2 || { echo "lab did not start"; exit 1; }
lab_client_mount 1 "$LAB_NACHE_ADDR" /export /mnt/n vers=4.1 &&
	lab_client_mount 2 "$LAB_KNFSD_ADDR" / /mnt/k vers=4.0 || { echo "mounts failed"; exit 1; }

# nfsd's op counters: the number after "proc4ops" counts, then per-op values.
knfsd_compounds() { lab_knfsd_stats | awk '$1 == "proc4" { print $4 }'; }

write_through_nache_read_direct() {
	local before after
	before=$(knfsd_compounds)
	on 1 "mkdir -p /mnt/n/k && head -c 3000000 /dev/urandom > /tmp/src && cp /tmp/src /mnt/n/k/data && sha256sum < /tmp/src" >"$LAB_DIR/sum" &&
		expect_eq "direct client reads nache's write" "$(on 2 "sha256sum < /mnt/k/k/data")" "$(cat "$LAB_DIR/sum")" &&
		after=$(knfsd_compounds) &&
		[ "$after" -gt "$before" ] || { echo "knfsd compounds: $before -> $after" >&2; return 1; }
}

# What a client wrote through nache is read back from nache's cache: none
# of it comes back over the link. (A large write goes upstream in pieces
# sent side by side, whose replies come in any order: each block is built
# from the pieces once they all came.)
written_data_reads_back_from_the_cache() {
	local want r0 r1
	want=$(on 1 "mkdir -p /mnt/n/k && head -c 4194304 /dev/urandom > /tmp/wb && cp /tmp/wb /mnt/n/k/wb && sync && sha256sum < /tmp/wb") ||
		return 1
	r0=$(metric nache_upstream_bytes_total 'direction="read"')
	expect_eq "read back" "$(on 1 "echo 3 > /proc/sys/vm/drop_caches; sha256sum < /mnt/n/k/wb")" "$want" &&
		r1=$(metric nache_upstream_bytes_total 'direction="read"') &&
		expect_eq "bytes read upstream to read back 4 MiB just written" $((r1 - r0)) 0
}

# The same while every attribute the clients ask for goes to knfsd (no
# attribute window in nache or Ganesha): each client WRITE's GETATTR then
# crosses nache's own WRITEs in flight, and sees the file halfway through
# them. Those are nache's own changes, not someone else's: the data stays.
# (Before, such a GETATTR dropped the file's cached data; and a WRITE that
# knfsd held back while more than 64 others went through was taken for
# someone else's change when its reply came.)
written_data_reads_back_while_attributes_go_upstream() {
	local want r0 r1
	lab_nache_stop &&
		LAB_NACHE_ATTR_EXPIRATION=0 LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start 'Attr_Timeout = 0;' || return 1
	want=$(on 1 "mkdir -p /mnt/n/k && head -c 4194304 /dev/urandom > /tmp/wb0 && cp /tmp/wb0 /mnt/n/k/wb0 && sync && sha256sum < /tmp/wb0") ||
		return 1
	r0=$(metric nache_upstream_bytes_total 'direction="read"')
	expect_eq "read back" "$(on 1 "echo 3 > /proc/sys/vm/drop_caches; sha256sum < /mnt/n/k/wb0")" "$want" &&
		r1=$(metric nache_upstream_bytes_total 'direction="read"') &&
		expect_eq "bytes read upstream to read back 4 MiB just written" $((r1 - r0)) 0 &&
		lab_nache_stop && LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start
}

write_direct_read_through_nache() {
	on 2 "echo from-knfsd-client > /mnt/k/k/other" &&
		expect_eq "nache client" "$(on 1 "cat /mnt/n/k/other")" from-knfsd-client
}

metadata_ops_on_knfsd() {
	on 1 "cd /mnt/n/k && mkdir d && ln -s data d/l && mv other d/o && ln d/o d/o2 && chmod 700 d && stat -c '%a %h' d d/o" >"$LAB_DIR/out" &&
		expect_eq "via nache" "$(cat "$LAB_DIR/out")" "$(printf '700 2\n644 2')" &&
		expect_eq "direct view" "$(on 2 "readlink /mnt/k/k/d/l; cat /mnt/k/k/d/o2")" "$(printf 'data\nfrom-knfsd-client')"
}

# A client's own creates and removes in a directory leave it what it cached
# of the directory (names, absent ones too, and rights), as mounting knfsd
# directly: nache hands knfsd's atomic change_info4 on through Ganesha
# (cmake/ganesha_patch_cinfo.cmake). Before, Ganesha's reply said "not
# atomic", and the client looked every name up again after each create:
# here the name it knows is absent, once per create.
own_changes_keep_the_clients_names() {
	local n0 n1
	on 1 "mkdir -p /mnt/n/k/neg && ! stat /mnt/n/k/neg/absent" >/dev/null 2>&1 ||
		{ echo "absent exists" >&2; return 1; }
	n0=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"')
	# Exclusive creates by open(2), which look nothing up first (bash's
	# noclobber would stat each new name), each removed, then "absent".
	on 1 "cd /mnt/n/k/neg && python3 -c '
import os
for i in range(1, 6):
    fd = os.open(\"f%d\" % i, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.write(fd, b\"x\")
    os.close(fd)
    os.unlink(\"f%d\" % i)
    try:
        os.stat(\"absent\")
        raise SystemExit(\"absent exists\")
    except FileNotFoundError:
        pass
'" || { echo "creates and removes failed" >&2; return 1; }
	n1=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"')
	expect_eq "lookups of a name the client knows absent, across 5 of its creates and removes" \
		$((n1 - n0)) 0 &&
		expect_eq "nothing left at knfsd" "$(on 2 "ls /mnt/k/k/neg")" ""
}

# tar's create of a file (an exclusive create: O_CREAT|O_EXCL) in a
# directory last changed more than Attr_Timeout before is one round trip,
# nache's OPEN by name, as on a direct mount. Before, Ganesha first read
# the directory's change attribute for the reply's change_info4 (which
# nache reports from knfsd's OPEN anyway) and checked the caller's search
# right (which knfsd judges in that OPEN), and each went to knfsd once
# nache's attributes of the directory had aged: a GETATTR per such file
# (cmake/ganesha_patch_open.cmake). knfsd's change_info4 is atomic, so the
# client keeps its rights to the directory: it asks nothing either.
exclusive_create_in_an_aged_directory() {
	local n0 g0 a0 l0 n1 g1 a1 l1
	on 1 "mkdir -p /mnt/n/k/aged && echo a > /mnt/n/k/aged/a" || return 1
	# The attribute window (Attr_Timeout, 3 s) of the directory passes:
	# time is the input here, not a stand-in for an event.
	sleep 4
	n0=$(purpose open_name) g0=$(purpose getattr) a0=$(purpose access)
	l0=$(purpose lookup)
	on 1 "python3 -c 'import os; os.close(os.open(\"/mnt/n/k/aged/b\", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))'" ||
		return 1
	n1=$(purpose open_name) g1=$(purpose getattr) a1=$(purpose access)
	l1=$(purpose lookup)
	echo "besides the OPEN: GETATTR $((g1 - g0)), ACCESS $((a1 - a0)), LOOKUP $((l1 - l0))" >&2
	expect_eq "b at knfsd" "$(on 2 "stat -c %s /mnt/k/k/aged/b")" 0 &&
		expect_eq "upstream OPENs by name" $((n1 - n0)) 1 &&
		expect_eq "upstream GETATTR, ACCESS and LOOKUP COMPOUNDs besides" \
			$((g1 - g0 + a1 - a0 + l1 - l0)) 0
}

# After a restart nache knows the root's handle from its store: it must
# still learn knfsd's READ/WRITE limits (a small guest's knfsd drops the
# connection on a larger request, "RPC fragment too large") before it reads
# or writes. Write-back makes the flush after the restart send big writes.
io_limits_after_a_restart() {
	local want
	lab_nache_stop &&
		LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start \
			'Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 1;' || return 1
	want=$(on 1 "head -c 3000000 /dev/urandom > /tmp/big && cp /tmp/big /mnt/n/k/big && sha256sum < /tmp/big") &&
		lab_wait_until 60 eval '[ "$(on 2 "sha256sum < /mnt/k/k/big 2>/dev/null")" = "$want" ]' ||
		{ echo "knfsd has $(on 2 "sha256sum < /mnt/k/k/big"), wanted $want" >&2; return 1; }
	expect_eq "through nache after another restart" \
		"$(lab_nache_stop && LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start >/dev/null &&
			on 1 "echo 3 > /proc/sys/vm/drop_caches; sha256sum < /mnt/n/k/data")" "$(cat "$LAB_DIR/sum")"
}

# knfsd's count of NFSv4 operation number N ("proc4ops COUNT v0 v1 ...").
knfsd_op_number() { lab_knfsd_stats | awk -v f=$(($1 + 3)) '$1 == "proc4ops" { print $f }'; }

# At its stop nache destroys its NFSv4.1 session (DESTROY_SESSION, op 44),
# so that knfsd frees it now rather than when the lease ends; over NFSv4.0
# there is no session.
stop_destroys_the_session() {
	local d0 want=1
	[ "$(lab_nache_minor)" = 0 ] && want=0
	d0=$(knfsd_op_number 44) && lab_nache_stop &&
		expect_eq "DESTROY_SESSIONs at knfsd" $(($(knfsd_op_number 44) - d0)) $want &&
		LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start &&
		expect_eq "served again" "$(on 1 "sha256sum < /mnt/n/k/data")" "$(cat "$LAB_DIR/sum")"
}

check write_through_nache_read_directly_from_knfsd write_through_nache_read_direct
check data_written_through_nache_reads_back_from_its_cache written_data_reads_back_from_the_cache
check data_written_reads_back_while_every_getattr_goes_upstream written_data_reads_back_while_attributes_go_upstream
check write_at_knfsd_read_through_nache write_direct_read_through_nache
check metadata_operations_against_knfsd metadata_ops_on_knfsd
check own_changes_keep_the_clients_cached_names own_changes_keep_the_clients_names
check exclusive_create_in_an_aged_directory_is_one_round_trip exclusive_create_in_an_aged_directory
check io_limits_are_learnt_after_a_restart io_limits_after_a_restart
check stop_destroys_the_nfsv41_session stop_destroys_the_session
itest_finish
