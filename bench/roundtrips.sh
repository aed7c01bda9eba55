#!/usr/bin/env bash
# Round-trip audit: upstream COMPOUNDs nache sends for each client-level
# operation of a real kernel client (NFSv4.1 mount of nache, lan profile),
# counted from nache's nache_upstream_compounds_total around each one.
# "cold" means nache has not seen the object yet, "warm" a repeat within
# the attribute window. Prints CSV operation,compounds.
# usage: bench/roundtrips.sh
set -uo pipefail
source "$(dirname "$0")/../tests/integration/itest.sh"  # lab, metric, on

itest_up lan 1 || { echo "lab did not start" >&2; exit 1; }
M=/mnt/n
R=$LAB_REMOTE_EXPORT_DIR
mount_nache 1 $M vers=4.1 || exit 1
mkdir -p "$R/d" && for i in $(seq 1 80); do echo "$i" >"$R/d/f$i"; done
head -c 65536 /dev/urandom >"$R/r.bin"
echo "operation,compounds"

# count NAME CMD — compounds while client 1 runs CMD (its caches dropped
# first unless NAME ends in "warm").
count() {
	local c0 c1 drop="echo 3 > /proc/sys/vm/drop_caches;"
	[[ $1 == *warm* ]] && drop=
	c0=$(metric nache_upstream_compounds_total)
	on 1 "$drop $2" >/dev/null || { echo "$1 failed" >&2; return 1; }
	c1=$(metric nache_upstream_compounds_total)
	echo "$1,$((c1 - c0))"
}

count "stat cold" "stat $M/r.bin"
count "stat warm" "stat $M/r.bin"
count "open+read 64K+close cold" "cat $M/r.bin"
count "open+read 64K+close again" "cat $M/r.bin"
count "open+read 64K+close warm" "cat $M/r.bin"
count "ls -l of 80 files cold" "ls -l $M/d"
count "ls -l of 80 files warm" "ls -l $M/d"
count "create+write 4K+close" "head -c 4096 /dev/urandom > $M/new.bin"
count "touch (setattr times)" "touch $M/new.bin"
count "mkdir" "mkdir $M/nd"
count "rename" "mv $M/new.bin $M/nd/moved.bin"
count "rm" "rm $M/nd/moved.bin"
count "rmdir" "rmdir $M/nd"
