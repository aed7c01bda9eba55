#!/usr/bin/env bash
# The cache with real kernel clients: a re-read and a read after a write
# cost no upstream READ; a restart keeps the cache (0 upstream READs on
# re-read, counted); close-to-open sees a change made at the remote; the
# Cache_Size bound holds under a working set three times its size; `ls -l`
# of a directory costs a few COMPOUNDs, not one per file; after a
# two-client open/read/close workload every upstream OPEN has its CLOSE
# once the linger expires; an exclusive create (tar's) asks the remote
# once, not twice, whether its name exists; an open of a file whose cached
# attributes have aged is one round trip, the OPEN.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# No callback service: every upstream OPEN is then a new open (with one,
# an OPEN_CONFIRM's COMPOUND repeats its OPEN to get a delegation; the
# delegations suite counts those).
export LAB_NACHE_CALLBACK=
EXTRA='Cache_Size = "16M"; Open_Linger = 2;'
lab_init && lab_net_up lan && lab_remote_vfs_start &&
	lab_nache_start "$EXTRA" && lab_clients_start 1 2 ||
	{ echo "lab did not start"; exit 1; }
M=/mnt/n
R=$LAB_REMOTE_EXPORT_DIR
mount_nache 1 $M vers=4.1 && mount_nache 2 $M vers=4.1 ||
	{ echo "mount failed"; exit 1; }

reads() { metric nache_upstream_ops_total 'op="READ",status="ok"'; }
sha_remote() { sha256sum "$R/$1" | cut -d' ' -f1; }
# sha_client N FILE — the file's SHA-256 read by client N, its page cache
# dropped first.
sha_client() {
	on "$1" "echo 3 > /proc/sys/vm/drop_caches; sha256sum $M/$2" | cut -d' ' -f1
}

reread_costs_no_read() {
	local r0 r1
	head -c $((6 << 20)) /dev/urandom >"$R/a.bin" &&
		expect_eq "first read" "$(sha_client 1 a.bin)" "$(sha_remote a.bin)" &&
		r0=$(reads) && at_least "READs of a cold file" "$r0" 1 &&
		expect_eq "re-read, client 2" "$(sha_client 2 a.bin)" "$(sha_remote a.bin)" &&
		r1=$(reads) && expect_eq "upstream READs during re-read" $((r1 - r0)) 0
}

read_after_write_is_a_hit() {
	local r0 r1
	on 1 "head -c $((4 << 20)) /dev/urandom > $M/w.bin && sync" &&
		r0=$(reads) &&
		expect_eq "read-back" "$(sha_client 2 w.bin)" "$(sha_remote w.bin)" &&
		r1=$(reads) && expect_eq "upstream READs of written data" $((r1 - r0)) 0
}

restart_keeps_the_cache() {
	lab_nache_restart "$EXTRA" &&
		expect_eq "after restart" "$(sha_client 1 a.bin)" "$(sha_remote a.bin)" &&
		expect_eq "upstream READs since restart" "$(reads)" 0 &&
		at_least "revalidations since restart" \
			"$(metric nache_upstream_ops_total 'op="GETATTR",status="ok"')" 1
}

sees_a_change_made_at_the_remote() {
	sha_client 1 a.bin >/dev/null &&
		head -c $((6 << 20)) /dev/urandom >"$R/a.bin.new" &&
		mv "$R/a.bin.new" "$R/a.bin" &&
		expect_eq "replaced file" "$(sha_client 1 a.bin)" "$(sha_remote a.bin)" &&
		dd if=/dev/urandom of="$R/a.bin" bs=4096 count=1 seek=10 conv=notrunc status=none &&
		expect_eq "overwritten in place" "$(sha_client 2 a.bin)" "$(sha_remote a.bin)"
}

bound_holds_under_three_times_the_working_set() {
	local i
	for i in 1 2 3; do head -c $((16 << 20)) /dev/urandom >"$R/big$i.bin" || return 1; done
	for i in 1 2 3 1; do
		expect_eq "big$i" "$(sha_client 1 big$i.bin)" "$(sha_remote big$i.bin)" || return 1
	done
	local size
	size=$(metric nache_cache_size_bytes)
	[ "$size" -le $((16 << 20)) ] || { echo "cache holds $size bytes > 16M" >&2; return 1; }
	at_least "evictions" "$(metric nache_cache_evictions_total)" 1
}

ls_l_costs_a_few_compounds() {
	local c0 c1 i
	mkdir -p "$R/many" && for i in $(seq 1 200); do echo "$i" >"$R/many/f$i"; done
	c0=$(metric nache_upstream_compounds_total) &&
		expect_eq "entries listed" "$(on 1 "ls -l $M/many | grep -c ' f'")" 200 &&
		c1=$(metric nache_upstream_compounds_total) &&
		echo "ls -l of 200 files: $((c1 - c0)) upstream COMPOUNDs" &&
		[ $((c1 - c0)) -le 10 ] ||
		{ echo "ls -l of 200 files took $((c1 - c0)) COMPOUNDs" >&2; return 1; }
}

no_upstream_opens() { [ "$(metric nache_upstream_open_files)" = 0 ]; }

# Every upstream open ends in a CLOSE once its linger is over. An OPEN by
# name of a file nache holds open already (its attributes too old to answer
# the name here, as under CI load) is merged by the remote into that open,
# which one CLOSE ends: nache counts those (nache_upstream_open_joins_total).
every_open_gets_its_close() {
	local i o0 opens closes joins local_opens
	mkdir -p "$R/oc" && for i in $(seq 1 20); do echo "$i" >"$R/oc/f$i"; done
	o0=$(metric nache_local_ops_total 'op="open"')
	for n in 1 2; do
		on $n "for r in 1 2 3 4; do for i in \$(seq 1 20); do cat $M/oc/f\$i >/dev/null; done; done; echo x > $M/oc/new$n" || return 1
	done
	lab_wait_until 30 no_upstream_opens ||
		{ echo "upstream opens left: $(metric nache_upstream_open_files)" >&2; return 1; }
	opens=$(metric nache_upstream_ops_total 'op="OPEN",status="ok"')
	closes=$(metric nache_upstream_ops_total 'op="CLOSE",status="ok"')
	joins=$(metric nache_upstream_open_joins_total)
	local_opens=$(($(metric nache_local_ops_total 'op="open"') - o0))
	echo "local opens $local_opens, upstream OPEN $opens (of which joined an open held: $joins), CLOSE $closes"
	at_least "upstream OPENs" "$opens" 1 &&
		expect_eq "upstream CLOSE count" "$closes" $((opens - joins)) &&
		[ "$opens" -lt "$local_opens" ] ||
		{ echo "no open was reused ($opens upstream for $local_opens local)" >&2; return 1; }
}

# An exclusive create (tar's O_CREAT|O_EXCL) is the remote's OPEN alone,
# as from a kernel client mounting the remote: Ganesha looks nothing up
# before it (cmake/ganesha_patch_create.cmake; it looked each new name up
# twice, and nache asked the remote once). The remote still decides: a
# name taken, here or only at the remote, is refused.
exclusive_create_asks_nothing_first() {
	local l0 l1 i
	mkdir -p "$R/excl" || return 1
	on 1 "ls $M/excl && rm -rf /tmp/excl && mkdir /tmp/excl && cd /tmp/excl &&
		for i in \$(seq 1 10); do echo \$i > f\$i; done && tar -cf /tmp/excl.tar f*" >/dev/null || return 1
	l0=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"')
	# tar creates each file with O_CREAT|O_EXCL, and asks nothing first.
	on 1 "tar -C $M/excl -xf /tmp/excl.tar" || return 1
	l1=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"')
	echo "tar x of 10 files: $((l1 - l0)) upstream LOOKUPs of absent names"
	for i in 1 5 10; do
		expect_eq "f$i at the remote" "$(cat "$R/excl/f$i")" "$i" || return 1
	done
	expect_eq "upstream LOOKUPs of absent names for tar x of 10 files" $((l1 - l0)) 0 ||
		return 1
	# The name exists now: an exclusive create of it (bash's noclobber
	# opens with O_EXCL) is refused.
	if on 1 "set -C; echo again > $M/excl/f1" 2>/dev/null; then
		echo "an exclusive create of an existing name succeeded" >&2
		return 1
	fi
	# So is one of a name made at the remote since nache listed the
	# directory: nache does not know it, the remote does.
	echo theirs >"$R/excl/g" || return 1
	if on 1 "set -C; echo ours > $M/excl/g" 2>/dev/null; then
		echo "an exclusive create of a name taken at the remote succeeded" >&2
		return 1
	fi
	expect_eq "f1 kept" "$(cat "$R/excl/f1")" 1 &&
		expect_eq "theirs kept" "$(cat "$R/excl/g")" theirs
}

# So is a create without O_EXCL that truncates nothing (an UNCHECKED
# OPEN, as most programs' O_CREAT sends; Filebench's file creates): Ganesha
# gives it to nache by name with no lookup first (ganesha_patch_open.cmake),
# where each new name cost a LOOKUP answered NFS4ERR_NOENT. An existing
# name is opened, its data kept.
create_without_excl_asks_nothing_first() {
	local l0 l1
	mkdir -p "$R/unchk" && echo kept >"$R/unchk/old" &&
		on 1 "ls $M/unchk" >/dev/null || return 1
	l0=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"')
	on 1 "cd $M/unchk && for f in n1 n2 n3 n4 n5 old; do
		python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' \$f || exit 1
	done" || return 1
	l1=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"')
	expect_eq "upstream LOOKUPs of absent names for 5 creates" $((l1 - l0)) 0 &&
		expect_eq "names at the remote" "$(cd "$R/unchk" && echo *)" "n1 n2 n3 n4 n5 old" &&
		expect_eq "the existing file's data" "$(cat "$R/unchk/old")" kept
}

# A client's open of a file it has looked up (an NFSv4.1 OPEN by handle)
# is one round trip to the remote, nache's OPEN, as on a direct mount,
# also once nache's attributes of the file are older than Attr_Timeout:
# Ganesha neither reads them first for the reply's change_info4 nor
# checks the caller's rights with them (ganesha_patch_open.cmake).
open_of_an_aged_file_is_one_round_trip() {
	local o0 g0 a0 o1 g1 a1
	echo aged >"$R/aged" && chmod 666 "$R/aged" &&
		on 1 "cat $M/aged" >/dev/null || return 1
	# The read open's upstream open is closed once its linger is over (an
	# open still upstream would make this one an upgrade, checked against
	# the caller's ACCESS answer); then the attribute window (Attr_Timeout,
	# 3 s) passes: time is the input here, not a stand-in for an event.
	lab_wait_until 30 no_upstream_opens ||
		{ echo "upstream opens left: $(metric nache_upstream_open_files)" >&2; return 1; }
	sleep 4
	o0=$(purpose open_fh) g0=$(purpose getattr) a0=$(purpose access)
	on 1 "python3 -c 'import os; os.close(os.open(\"$M/aged\", os.O_RDWR))'" ||
		return 1
	o1=$(purpose open_fh) g1=$(purpose getattr) a1=$(purpose access)
	expect_eq "upstream OPENs" $((o1 - o0)) 1 &&
		expect_eq "upstream GETATTR and ACCESS COMPOUNDs besides" \
			$((g1 - g0 + a1 - a0)) 0
}

# A client's open of a name it has not seen (an OPEN by name, CLAIM_NULL:
# what Filebench's opens by path send for files made since) of a file made
# at the remote is one round trip too, nache's OPEN by name: Ganesha gives
# it to nache by name instead of looking the name up first, and checks the
# caller's search right to the directory after the open, with the answer
# that came back in the OPEN's COMPOUND (ganesha_patch_open.cmake). Before,
# a LOOKUP went first, and an ACCESS of the directory once its attributes
# were older than Attr_Timeout. (The client may revalidate the directory
# itself with a GETATTR, as on a direct mount: not counted.)
open_by_name_of_a_new_file_is_one_round_trip() {
	local n0 o0 l0 a0 n1 o1 l1 a1
	on 1 "ls $M" >/dev/null || return 1
	# The attribute window (Attr_Timeout, 3 s) of the export's root passes:
	# time is the input here, not a stand-in for an event.
	sleep 4
	echo named >"$R/named" && chmod 666 "$R/named" || return 1
	n0=$(purpose open_name) o0=$(purpose open_fh) l0=$(purpose lookup)
	a0=$(purpose access)
	on 1 "python3 -c 'import os; os.close(os.open(\"$M/named\", os.O_RDWR))'" ||
		return 1
	n1=$(purpose open_name) o1=$(purpose open_fh) l1=$(purpose lookup)
	a1=$(purpose access)
	expect_eq "upstream OPENs (by name, by handle)" \
		"$((n1 - n0)),$((o1 - o0))" "1,0" &&
		expect_eq "upstream LOOKUP and ACCESS COMPOUNDs besides" \
			$((l1 - l0 + a1 - a0)) 0
}

check reread_costs_no_upstream_READ reread_costs_no_read
check read_after_write_is_a_hit read_after_write_is_a_hit
check restart_keeps_the_cache restart_keeps_the_cache
check close_to_open_sees_remote_changes sees_a_change_made_at_the_remote
check cache_bound_holds_under_3x_working_set bound_holds_under_three_times_the_working_set
check ls_l_of_200_files_costs_few_compounds ls_l_costs_a_few_compounds
check upstream_CLOSEs_equal_OPENs_after_linger every_open_gets_its_close
check exclusive_create_asks_nothing_first exclusive_create_asks_nothing_first
check create_without_excl_asks_nothing_first create_without_excl_asks_nothing_first
check open_of_a_file_with_aged_attributes_is_one_round_trip open_of_an_aged_file_is_one_round_trip
check open_by_name_of_a_new_file_is_one_round_trip open_by_name_of_a_new_file_is_one_round_trip
itest_finish
