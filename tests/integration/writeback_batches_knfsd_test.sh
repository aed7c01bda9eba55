#!/usr/bin/env bash
# Write-back's batched sends against Linux knfsd 6.1 over NFSv4.1 (the
# default upstream version), single-writer export, nothing flushed by age:
# `nachectl flush --wait` sends everything, and the checks read knfsd's
# own export directory.
#  - A directory's new files go out with their data, mtime and CLOSE in
#    the COMPOUND of their create, but never two WRITEs in one COMPOUND
#    (knfsd 6.1 writes the wrong bytes for the second): one COMPOUND for
#    each file with data, none of its own for a CLOSE or an mtime.
#  - Small files of random data reach knfsd with their own bytes.
#  - Many removes of one directory (an rm of 40 files knfsd has) reach
#    knfsd in COMPOUNDs no longer than the session takes: knfsd refuses a
#    longer one whole (NFS4ERR_TOO_MANY_OPS), and batches of 32 REMOVEs
#    were never sent over the 16-operation session nache asked for.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

NACHECTL=$NACHE_BUILD_DIR/stage/bin/nachectl
[ -x "$NACHECTL" ] || { echo "no $NACHECTL: build first"; exit 1; }

HOLD='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 3600;'
lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
		lab_nache_start "$HOLD" && lab_clients_start 1 ||
	{ echo "lab did not start"; exit 1; }
M=/mnt/n
K=$LAB_KNFSD_EXPORT_DIR
mount_nache 1 $M vers=4.1 || { echo "mount failed"; exit 1; }
lab_knfsd_run "mkdir -p $K/wb && chmod 777 $K/wb" || { echo "no wb/ at knfsd"; exit 1; }
ctl() { "$NACHECTL" --socket "$LAB_DIR/nache/nache.sock" "$@"; }
up_ops() { metric nache_upstream_ops_total "op=\"$1\""; }
compounds() { metric nache_upstream_compounds_total; }
# flush — everything nache holds sent now; fails when it is not all at
# knfsd within a minute.
flush() {
	ctl flush --wait --timeout 60 >"$LAB_DIR/flush.out" 2>&1 ||
		{ tail -n 3 "$LAB_DIR/flush.out" >&2; return 1; }
}

new_files_of_a_directory_go_with_their_data() {
	local n=40 c0 o0 k0 got
	# As tar writes them: the data, then the mtime.
	on 1 "mkdir $M/wb/t && for i in \$(seq 1 $n); do echo data-\$i > $M/wb/t/f\$i &&
		touch -m -d @1700000000 $M/wb/t/f\$i; done" || return 1
	expect_eq "files at knfsd before the flush" \
		"$(lab_knfsd_run "ls $K/wb/t 2>/dev/null | wc -l")" 0 || return 1
	c0=$(compounds) o0=$(up_ops OPEN) k0=$(up_ops CLOSE)
	flush || return 1
	got=$(lab_knfsd_run "cd $K/wb/t && cat \$(seq -f f%g 1 $n) | md5sum")
	expect_eq "the files' data at knfsd" "$got" \
		"$(for i in $(seq 1 $n); do echo "data-$i"; done | md5sum)" &&
		expect_eq "an mtime at knfsd" "$(lab_knfsd_run "stat -c %Y $K/wb/t/f17")" 1700000000 &&
		expect_eq "OPENs sent" $(($(up_ops OPEN) - o0)) $n &&
		expect_eq "CLOSEs sent" $(($(up_ops CLOSE) - k0)) $n || return 1
	# One per file with data ($((2 * n)) with the CLOSEs apart, $((3 * n))
	# with the mtimes too), and the directory's own.
	local sent=$(($(compounds) - c0))
	echo "the flush of $n files took $sent COMPOUNDs" >&2
	[ "$sent" -le $((n + 4)) ] ||
		{ echo "expected at most $((n + 4)) COMPOUNDs, got $sent" >&2; return 1; }
}

many_removes_of_one_directory_reach_knfsd() {
	local n=40 r0
	lab_knfsd_run "mkdir $K/wb/r && for i in \$(seq 1 $n); do echo x > $K/wb/r/g\$i; done &&
		chmod -R a+rwX $K/wb/r" || return 1
	r0=$(up_ops REMOVE)
	on 1 "rm $M/wb/r/g*" &&
		expect_eq "REMOVEs sent before the flush" $(($(up_ops REMOVE) - r0)) 0 &&
		expect_eq "what client 1 lists" "$(on 1 "ls -A $M/wb/r")" "" || return 1
	flush || return 1
	expect_eq "files left at knfsd" "$(lab_knfsd_run "ls -A $K/wb/r | wc -l")" 0 &&
		expect_eq "REMOVEs sent" $(($(up_ops REMOVE) - r0)) $n &&
		expect_eq "COMPOUNDs knfsd refused as too long" \
			"$(metric nache_upstream_compounds_total 'status="NFS4ERR_TOO_MANY_OPS"')" 0
}

# Small files of random data, several with their data in one COMPOUND:
# each must reach knfsd with its own bytes. Sizes that are not multiples
# of a page put the WRITEs after the first at odd places in the request.
# (The crash loop saw a 4 KiB file that followed a 14 KiB one in a
# COMPOUND hold other bytes at knfsd, same size.)
small_files_in_one_compound_keep_their_bytes() {
	local sizes="14336 4096 1000 5000 20000 4096 3 8192" i=0 s want got
	on 1 "mkdir $M/wb/s" || return 1
	for s in $sizes; do
		i=$((i + 1))
		on 1 "head -c $s /dev/urandom > $M/wb/s/f$i" || return 1
	done
	want=$(on 1 "cd $M/wb/s && for i in \$(seq 1 $i); do md5sum < f\$i; done")
	flush || return 1
	got=$(lab_knfsd_run "cd $K/wb/s && for i in \$(seq 1 $i); do md5sum < f\$i; done")
	expect_eq "the files' bytes at knfsd" "$got" "$want"
}

check new_files_of_a_directory_go_with_their_data new_files_of_a_directory_go_with_their_data
check small_files_in_one_compound_keep_their_bytes small_files_in_one_compound_keep_their_bytes
check many_removes_of_one_directory_reach_knfsd many_removes_of_one_directory_reach_knfsd
itest_finish
