#!/usr/bin/env bash
# Round-trip audit: upstream COMPOUNDs nache sends for each client-level
# operation of a real kernel client (NFSv4.1 mount of nache), counted from
# nache's nache_upstream_compounds_total around each one. "cold" means
# nache has not seen the object yet, "warm" a repeat within the attribute
# window. Each operation runs twice: as root, in a tree root owns, and as
# uid 1000 in another tree of root's (mode 644 files in a 777 directory):
# a caller who owns nothing it reads, whose rights nache asks the remote
# for (ACCESS) rather than deciding from mode bits. Prints CSV
# caller,operation,compounds.
# usage: bench/roundtrips.sh [PROFILE]   (lan by default; wan, ...)
set -uo pipefail
source "$(dirname "$0")/../lab/helpers.sh"  # lab, metric, on

PROFILE=${1:-lan}
lab_up "$PROFILE" 1 || { echo "lab did not start" >&2; exit 1; }
M=/mnt/n
R=$LAB_REMOTE_EXPORT_DIR
mount_nache 1 $M vers=4.1 || exit 1
for t in root user; do
	mkdir -p "$R/$t/d" && for i in $(seq 1 80); do echo "$i" >"$R/$t/d/f$i"; done
	head -c 65536 /dev/urandom >"$R/$t/r.bin"
	chmod 777 "$R/$t"
done
echo "caller,operation,compounds"

# count WHO NAME CMD — compounds while client 1 runs CMD as WHO (root, or
# a uid), its caches dropped first unless NAME ends in "warm".
count() {
	local who=$1 name=$2 cmd=$3 c0 c1 rc=0
	[[ $name == *warm* ]] || on 1 "echo 3 > /proc/sys/vm/drop_caches" >/dev/null
	c0=$(metric nache_upstream_compounds_total)
	if [ "$who" = root ]; then
		on 1 "$cmd" >/dev/null || rc=1
	else
		lab_client_run_as 1 "$who" "$who" "$cmd" >/dev/null || rc=1
	fi
	[ $rc = 0 ] || { echo "$who: $name failed" >&2; return 1; }
	c1=$(metric nache_upstream_compounds_total)
	echo "$who,$name,$((c1 - c0))"
}

# audit WHO TREE — the operations, as WHO, in $M/TREE.
audit() {
	local who=$1 T=$M/$2
	count "$who" "stat cold" "stat $T/r.bin"
	count "$who" "stat warm" "stat $T/r.bin"
	count "$who" "open+read 64K+close cold" "cat $T/r.bin"
	count "$who" "open+read 64K+close again" "cat $T/r.bin"
	count "$who" "open+read 64K+close warm" "cat $T/r.bin"
	count "$who" "ls -l of 80 files cold" "ls -l $T/d"
	count "$who" "ls -l of 80 files warm" "ls -l $T/d"
	count "$who" "create+write 4K+close" "head -c 4096 /dev/urandom > $T/new.bin"
	count "$who" "touch (setattr times)" "touch $T/new.bin"
	count "$who" "mkdir" "mkdir $T/nd"
	count "$who" "rename" "mv $T/new.bin $T/nd/moved.bin"
	count "$who" "rm" "rm $T/nd/moved.bin"
	count "$who" "rmdir" "rmdir $T/nd"
}

audit root root
audit 1000 user
