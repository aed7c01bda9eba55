#!/usr/bin/env bash
# Data integrity through nache (issue 15), from a real kernel client, in
# both write policies: write_through (the default) and write_back on a
# single-writer export with a short Flush_Age.
#
# In each policy, client 1 (through nache):
#   - fio writes and verifies (crc32c in every block): a random write job
#     with O_DIRECT (block sizes 4k..64k, then a verify pass), and a
#     buffered random read/write job verifying as it goes (verify_backlog);
#     fio must exit 0, and a later replay of the random write job
#     (verify_only, page cache dropped) reads it back through nache;
#   - tools/random_ops.py runs a seeded random sequence of writes (also
#     beyond EOF: holes), truncates (shrink, extend, to zero), appends,
#     O_TRUNC rewrites, mmap writes with msync, fsyncs and reopens over a
#     few files, comparing reads (some after dropping the page cache, some
#     O_DIRECT) with its model of each file after every few steps;
# client 2 reads all of it through nache; then, once nache has flushed
# (nache_dirty_bytes and nache_flush_lag_seconds at 0), the remote holds
# exactly those files with exactly that content: checked in the remote's
# own export directory and through a fresh direct mount of the remote from
# client 2 (sha256 of every file, and fio's replay verifying every block).
# Last, after a kill -9 and restart of nache, client 1 reads the same again.
#
# DI_REMOTE (vfs: Ganesha VFS on the host, the default; knfsd: Linux knfsd
# 6.1 in its guest) and DI_PROFILE (lan, wan) choose the remote and the link
# to it (data_integrity_knfsd_test.sh runs knfsd over lan). DI_SEED fixes
# random_ops.py's seed (printed in each run; the same seed repeats the same
# operations); DI_STEPS, DI_FIO_SIZE and DI_FIO_MIX_SIZE size the work.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

REMOTE=${DI_REMOTE:-vfs}
PROFILE=${DI_PROFILE:-lan}
SEED=${DI_SEED:-$((RANDOM * 32768 + RANDOM))}
STEPS=${DI_STEPS:-1500}
FIO_SIZE=${DI_FIO_SIZE:-64m}
FIO_MIX_SIZE=${DI_FIO_MIX_SIZE:-32m}
declare -A POLICY=(
	[write_through]=''
	[write_back]='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 1;'
)
# random_ops.py's seed in each policy.
declare -A SEEDS=([write_through]=$SEED [write_back]=$((SEED + 1)))
OPS="python3 -B $ITEST_DIR/tools/random_ops.py --files 5"
# fio's jobs and random_ops.py each take 5-30 s: a command still running
# after this long hangs (an NFS call retried for ever), and fails.
WORK_TIMEOUT=${DI_WORK_TIMEOUT:-180}

lab_init && lab_net_up "$PROFILE" || { echo "lab did not start"; exit 1; }
case $REMOTE in
vfs)
	lab_remote_vfs_start || { echo "remote did not start"; exit 1; }
	R=$LAB_REMOTE_EXPORT_DIR
	DIRECT=("$LAB_REMOTE_ADDR" /export)
	on_remote() { bash -c "$1"; }
	;;
knfsd)
	lab_remote_knfsd_start || { echo "remote did not start"; exit 1; }
	export LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/
	R=$LAB_KNFSD_EXPORT_DIR
	DIRECT=("$LAB_KNFSD_ADDR" /)
	on_remote() { lab_knfsd_run "$1"; }
	;;
*) echo "DI_REMOTE: vfs or knfsd, not '$REMOTE'"; exit 1 ;;
esac
lab_nache_start && lab_clients_start 1 2 || { echo "lab did not start"; exit 1; }
M=/mnt/n D=/mnt/d
mount_nache 1 $M vers=4.1 && mount_nache 2 $M vers=4.1 || { echo "mount failed"; exit 1; }
on_remote "mkdir -p $R/di && chmod 777 $R/di" || { echo "no di/ at the remote"; exit 1; }
echo "$ITEST_NAME: remote $REMOTE over $PROFILE, DI_SEED=$SEED (random_ops seeds: write_through $SEED, write_back $((SEED + 1)))" >&2

current_policy=write_through
# use_policy P — nache restarted with write policy P (the clients' mounts
# carry on).
use_policy() {
	[ "$current_policy" = "$1" ] && return 0
	lab_nache_stop && lab_nache_start "${POLICY[$1]}" && current_policy=$1
}

DROP='sync; echo 3 > /proc/sys/vm/drop_caches'
# The fio jobs. randwrite: O_DIRECT (each write and read a request to the
# server), block sizes 4k..64k, every block written once with a crc32c
# header, then all of them read back and verified. randrw: buffered,
# random reads and writes, each written block verified after 32 more
# (verify_backlog), an fsync every 16 writes. Both abort at the first bad
# block (verify_fatal). The seeds are fio's defaults (randrepeat), so
# --verify_only replays randwrite's writes and verifies every block at a
# later date (fio cannot replay a mixed job: randrw is checked by sha256).
FIO_COMMON="--thread --bsrange=4k-64k --verify=crc32c --verify_fatal=1 --verify_state_save=0"
fio_randwrite() { echo "fio $FIO_COMMON --name=randwrite --directory=$1 --rw=randwrite --size=$FIO_SIZE --direct=1 --do_verify=1 ${2:-}"; }
fio_randrw() { echo "fio $FIO_COMMON --name=randrw --directory=$1 --rw=randrw --size=$FIO_MIX_SIZE --verify_backlog=32 --fsync=16 ${2:-}"; }

# fio_verifies P — both fio jobs through nache exit 0 with no error, and a
# replay with the page cache dropped verifies every block again; the files'
# sha256 as client 1 reads them through nache go to $LAB_DIR/fio-P.sha256.
fio_verifies() {
	local p=$1 d=$M/di/$1/fio log=$LAB_DIR/fio-$1.log
	use_policy "$p" || return 1
	if ! LAB_CMD_TIMEOUT=$WORK_TIMEOUT on 1 "mkdir -p $d && cd /tmp && $(fio_randwrite $d) && $(fio_randrw $d) &&
		$DROP && $(fio_randwrite $d --verify_only)" >"$log" 2>&1; then
		grep -E 'verify|err=|bad|fio:' "$log" | head -30 >&2
		echo "fio failed ($p), full output in $log" >&2
		return 1
	fi
	grep -E '^(randwrite|randrw): \(groupid' "$log" >&2
	expect_eq "fio jobs with err=0 (2 runs, 1 replay)" "$(grep -Ec '^(randwrite|randrw): \(groupid=.*err= 0' "$log")" 3 &&
		on 1 "$DROP; cd $d && sha256sum *" >"$LAB_DIR/fio-$p.sha256" &&
		expect_eq "fio's files" "$(awk '{print $2}' "$LAB_DIR/fio-$p.sha256" | tr '\n' ' ')" "randrw.0.0 randwrite.0.0 "
}

# random_ops_match_the_model P — random_ops.py through nache: every read
# back matches the model; the model's final contents go to
# $LAB_DIR/ops-P.sha256.
random_ops_match_the_model() {
	local p=$1 out
	use_policy "$p" || return 1
	out=$(LAB_CMD_TIMEOUT=$WORK_TIMEOUT on 1 "$OPS --dir $M/di/$p/ops --seed ${SEEDS[$p]} --steps $STEPS --manifest $LAB_DIR/ops-$p.sha256 --log $LAB_DIR/ops-$p.log" 2>&1)
	local rc=$?
	echo "$out" >&2
	[ $rc = 0 ] || {
		echo "random_ops failed ($p policy, seed ${SEEDS[$p]}, DI_SEED=$SEED); its last steps:" >&2
		tail -n 8 "$LAB_DIR/ops-$p.log" >&2
		return 1
	}
}

# sums_match WHO DIR P — in DIR/di/P (where WHO runs: a client through nache
# or directly, or the remote), every file has the sha256 the model and fio
# had, and there is no other file.
sums_match() {
	local who=$1 dir=$2/di/$3 p=$3 list want
	want="fio/randrw.0.0 fio/randwrite.0.0 $(awk '{print "ops/" $2}' "$LAB_DIR/ops-$p.sha256" | tr '\n' ' ')"
	list="cd $dir && find . -type f | sed 's,^\./,,' | sort | tr '\n' ' '"
	local sums="cd $dir/ops && sha256sum -c --quiet $LAB_DIR/ops-$p.sha256 && cd $dir/fio && sha256sum -c --quiet $LAB_DIR/fio-$p.sha256"
	case $who in
	remote) on_remote "$sums" && expect_eq "files at the remote" "$(on_remote "$list")" "$want" ;;
	*) on "$who" "$DROP; $sums" && expect_eq "files client $who sees" "$(on "$who" "$list")" "$want" ;;
	esac
}

another_client_reads_the_same() { use_policy "$1" && sums_match 2 $M "$1"; }

flushed() { [ "$(metric nache_dirty_bytes)" = 0 ] && [ "$(metric nache_flush_lag_seconds)" = 0 ]; }

# the_remote_has_it_after_the_flush P — once nache reports nothing dirty,
# the remote's export holds exactly the files with the model's and fio's
# contents; so does a fresh direct mount of the remote from client 2, where
# fio's replay verifies every block it wrote.
the_remote_has_it_after_the_flush() {
	local p=$1 rc=0
	use_policy "$p" || return 1
	lab_wait_until 90 flushed ||
		{ echo "not flushed: dirty $(metric nache_dirty_bytes), lag $(metric nache_flush_lag_seconds)" >&2; return 1; }
	# Write-back was on: the files were created locally (logged), and sent.
	if [ "$p" = write_back ]; then
		at_least "creates kept local" "$(metric nache_writeback_creates_total 'outcome="logged"')" 6 &&
			at_least "creates sent" "$(metric nache_writeback_creates_total 'outcome="sent"')" 6 || return 1
	fi
	if ! sums_match remote "$R" "$p"; then
		# Wrong, or only late (nache said it had flushed when it had not)?
		if lab_wait_until 60 sums_match remote "$R" "$p" 2>/dev/null; then
			echo "the remote matched only later: the flush was not complete when reported" >&2
		else
			echo "the remote still differs 60 s later" >&2
		fi
		on_remote "ls -lR $R/di/$p" >&2
		return 1
	fi
	lab_client_mount 2 "${DIRECT[@]}" $D vers=4.1 || return 1
	sums_match 2 $D "$p" || rc=1
	if ! LAB_CMD_TIMEOUT=$WORK_TIMEOUT on 2 "cd /tmp && $(fio_randwrite $D/di/$p/fio --verify_only)" \
		>"$LAB_DIR/fio-$p-direct.log" 2>&1; then
		rc=1
		grep -E 'verify|err=|bad|fio:' "$LAB_DIR/fio-$p-direct.log" | head -20 >&2
	fi
	lab_client_umount 2 $D || rc=1
	return $rc
}

# After a kill -9 and a restart (write-back still on), nache serves every
# file of both policies with the same contents.
after_kill_9_nache_serves_the_same() {
	lab_nache_kill && lab_nache_start "${POLICY[write_back]}" || return 1
	current_policy=write_back
	sums_match 1 $M write_through && sums_match 1 $M write_back
}

for p in write_through write_back; do
	check "fio_verifies_through_nache_$p" fio_verifies $p
	check "random_operations_match_the_model_$p" random_ops_match_the_model $p
	check "another_client_reads_the_same_through_nache_$p" another_client_reads_the_same $p
	check "the_remote_has_it_after_the_flush_$p" the_remote_has_it_after_the_flush $p
done
check after_kill_9_nache_serves_the_same after_kill_9_nache_serves_the_same
itest_finish
