#!/usr/bin/env bash
# A full cache disk (issue 15): nache's cache directory is a small tmpfs,
# write-back on a single-writer export, Ganesha's VFS as the remote, a real
# kernel client. A writer fills the disk: its writes of a file created here
# get ENOSPC (nothing of them taken), and nache goes on: what it holds, and
# files it has never seen, are still read, a write to a file the remote has with nothing unflushed goes
# to the remote at once (write-through) instead of failing, and once space
# is freed writes are kept again without a restart. Nothing acknowledged
# is lost: after a restart that flushes, the remote has it all.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

HOLD='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 3600;'
SOON='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 1;'
# Room for RocksDB's own files and a reserve, freed later: RocksDB resumes
# only with room for what it holds in memory (here the writer's data, in
# its write-ahead log until it is flushed into a table file).
export LAB_NACHE_CACHE_TMPFS=256m
RESERVE_MB=100
lab_init && lab_net_up lan && lab_remote_vfs_start || { echo "lab did not start"; exit 1; }
R=$LAB_REMOTE_EXPORT_DIR
M=/mnt/n
C=$LAB_DIR/nache/cache
mkdir -p "$R/fd/sub" && chmod 777 "$R/fd" &&
	head -c $((1 << 20)) /dev/urandom >"$R/fd/clean.bin" && chmod 666 "$R/fd/clean.bin" &&
	head -c 100000 /dev/urandom >"$R/fd/sub/unseen.bin" ||
	{ echo "remote setup failed"; exit 1; }
lab_nache_start "$HOLD" && lab_clients_start 1 && mount_nache 1 $M vers=4.1 ||
	{ echo "nache or the client did not start"; exit 1; }
head -c $((RESERVE_MB << 20)) /dev/zero >"$C/reserve" || { echo "no reserve"; exit 1; }

sha_remote() { sha256sum <"$R/$1" | cut -d' ' -f1; }
sha_client() { on 1 "echo 3 > /proc/sys/vm/drop_caches; sha256sum < $M/$1" | cut -d' ' -f1; }

# A file made here is written until the disk is full: the client hears
# ENOSPC (at fsync), and nache says its store is full.
writer_gets_enospc() {
	local out
	out=$(on 1 "dd if=/dev/urandom of=$M/fd/big bs=1M count=256 conv=fsync 2>&1; echo rc=\$?")
	echo "$out" | tail -3 >&2
	expect_eq "dd failed for space" "$(echo "$out" | grep -c 'No space left on device')" 1 &&
		expect_eq "store full (metric)" "$(metric nache_cache_store_no_space)" 1 &&
		expect_eq "nache is the process it was" "$(lab_nache_pid)" "$NACHE_PID"
}

# What nache holds, and what the remote has, is still read: also a file
# in a directory nache has never looked into (fd/sub: its handles cannot
# be written to the full store, and are kept in memory; they were ESTALE).
reads_go_on() {
	expect_eq "clean.bin through nache" "$(sha_client fd/clean.bin)" "$(sha_remote fd/clean.bin)" &&
		expect_eq "a file never seen, through nache" "$(sha_client fd/sub/unseen.bin)" "$(sha_remote fd/sub/unseen.bin)" &&
		expect_eq "store full (metric)" "$(metric nache_cache_store_no_space)" 1
}

# A write to clean.bin (the remote has it, nothing of it is unflushed)
# cannot be kept: it goes to the remote at once.
clean_file_written_through() {
	local want w0
	w0=$(metric nache_writeback_full_disk_writes_total)
	want=$(on 1 "head -c 4096 /dev/urandom > /tmp/x && dd if=/tmp/x of=$M/fd/clean.bin bs=4096 count=1 conv=notrunc,fsync 2>/dev/null && sha256sum < /tmp/x" | cut -d' ' -f1) &&
		expect_eq "the remote's first 4 KiB" "$(head -c 4096 "$R/fd/clean.bin" | sha256sum | cut -d' ' -f1)" "$want" &&
		at_least "writes sent through (metric)" $(($(metric nache_writeback_full_disk_writes_total) - w0)) 1 &&
		expect_eq "read back through nache" "$(on 1 "echo 3 > /proc/sys/vm/drop_caches; head -c 4096 $M/fd/clean.bin | sha256sum" | cut -d' ' -f1)" "$want"
}

# Space freed: writes are kept locally again (nothing sent), no restart.
space_freed_writes_kept() {
	local w0
	rm -f "$C/reserve" || return 1
	w0=$(metric nache_upstream_bytes_total 'direction="write"')
	lab_wait_until 30 eval 'on 1 "echo after > $M/fd/after.txt && sync" 2>/dev/null' ||
		{
			echo "writes still refused after space was freed: $(on 1 "echo after > $M/fd/after.txt && sync" 2>&1); $(df -m "$C" | tail -1); $(ls -la "$C" | tr '\n' ' ')" >&2
			return 1
		}
	on 1 "rm $M/fd/big" || return 1
	expect_eq "store full (metric)" "$(metric nache_cache_store_no_space)" 0 &&
		expect_eq "bytes sent upstream meanwhile" $(($(metric nache_upstream_bytes_total 'direction="write"') - w0)) 0 &&
		expect_eq "not at the remote yet" "$(ls "$R/fd" | grep -c '^after.txt$')" 0 &&
		expect_eq "nache is the process it was" "$(lab_nache_pid)" "$NACHE_PID"
}

# A restart that flushes: the remote has what was acknowledged.
flushed_after_restart() {
	local want
	want=$(sha_remote fd/clean.bin)
	lab_nache_stop && lab_nache_start "$SOON" || return 1
	lab_wait_until 60 eval '[ "$(cat "$R/fd/after.txt" 2>/dev/null)" = after ]' ||
		{ echo "after.txt never reached the remote" >&2; return 1; }
	expect_eq "clean.bin at the remote" "$(sha_remote fd/clean.bin)" "$want" &&
		expect_eq "big (removed) at the remote" "$(ls "$R/fd" | grep -c '^big$')" 0
}

NACHE_PID=$(lab_nache_pid)
check a_writer_filling_the_cache_disk_gets_enospc writer_gets_enospc
check reads_go_on_with_the_disk_full reads_go_on
check a_write_to_a_clean_remote_file_goes_through clean_file_written_through
check writes_are_kept_again_once_space_is_freed space_freed_writes_kept
check nothing_acknowledged_is_lost flushed_after_restart
itest_finish
