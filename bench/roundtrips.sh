#!/usr/bin/env bash
# Round-trip audit: upstream COMPOUNDs nache sends for each client-level
# operation of a real kernel client (NFSv4.1 mount of nache), counted from
# nache's nache_upstream_compounds_total around each one. "cold" means
# nache has not seen the object yet, "warm" a repeat within the attribute
# window. Each operation runs twice: as root, in a tree root owns, and as
# uid 1000 in another tree of root's (mode 644 files in a 777 directory):
# a caller who owns nothing it reads, whose rights nache asks the remote
# for (ACCESS) rather than deciding from mode bits.
#
# With REMOTE=knfsd the remote is the knfsd guest, and each operation also
# runs on a direct NFSv4.1 mount of it (the same client, its own tree):
# the "direct" column counts the COMPOUNDs knfsd served for it
# (/proc/net/rpc/nfsd), what the Linux client itself sends. Prints CSV
# caller,operation,compounds[,direct].
# usage: [REMOTE=vfs|knfsd] bench/roundtrips.sh [PROFILE]   (lan by default)
set -uo pipefail
source "$(dirname "$0")/../lab/helpers.sh"  # lab, metric, on

PROFILE=${1:-lan}
REMOTE=${REMOTE:-vfs}
M=/mnt/n D=/mnt/d
case $REMOTE in
vfs)
	lab_up "$PROFILE" 1 || { echo "lab did not start" >&2; exit 1; }
	R=$LAB_REMOTE_EXPORT_DIR
	on_remote() { bash -c "$1"; }
	;;
knfsd)
	{ lab_init && lab_net_up "$PROFILE" && lab_remote_knfsd_start &&
		LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start && lab_clients_start 1 &&
		lab_client_mount 1 "$LAB_KNFSD_ADDR" / $D vers=4.1; } ||
		{ echo "lab did not start" >&2; exit 1; }
	R=$LAB_KNFSD_EXPORT_DIR
	on_remote() { lab_knfsd_run "$1"; }
	;;
*) echo "unknown remote '$REMOTE' (vfs, knfsd)" >&2; exit 2 ;;
esac
mount_nache 1 $M vers=4.1 || exit 1
# Trees: nache's clients use root/ and user/, the direct mount droot/ and
# duser/ (so that neither finds the other's work in its caches).
for t in root user droot duser; do
	on_remote "mkdir -p $R/$t/d && for i in \$(seq 1 80); do echo \$i >$R/$t/d/f\$i; done &&
		head -c 65536 /dev/urandom >$R/$t/r.bin && chmod 777 $R/$t" || exit 1
done
# A tar archive of 2 directories holding 10 files each, made in the
# client: what `tar x` does per entry is the untar benchmark's unit of work.
on 1 "rm -rf /tmp/rt && mkdir -p /tmp/rt/t/a /tmp/rt/t/b && for i in \$(seq 1 10); do
	head -c 6000 /dev/urandom >/tmp/rt/t/a/e\$i; head -c 9000 /dev/urandom >/tmp/rt/t/b/e\$i; done &&
	chmod 640 /tmp/rt/t/*/e* && tar -C /tmp/rt -cf /tmp/rt.tar t" >/dev/null || exit 1
if [ "$REMOTE" = knfsd ]; then echo "caller,operation,compounds,direct"; else echo "caller,operation,compounds"; fi

# knfsd_compounds — COMPOUNDs knfsd has served since it started.
knfsd_compounds() { lab_knfsd_stats | awk '$1 == "proc4" { print $4 }'; }

# run_as WHO CMD — CMD in client 1 as root or as uid WHO.
run_as() {
	if [ "$1" = root ]; then on 1 "$2"; else lab_client_run_as 1 "$1" "$1" "$2"; fi >/dev/null
}

# count WHO NAME CMD — compounds while client 1 runs CMD (with @ standing
# for the tree) as WHO (root, or a uid), its caches dropped first unless
# NAME ends in "warm"; with knfsd, again on the direct mount.
count() {
	local who=$1 name=$2 cmd=$3 tree c0 c1 k0 k1 row
	tree=$([ "$who" = root ] && echo root || echo user)
	[[ $name == *warm* ]] || on 1 "echo 3 > /proc/sys/vm/drop_caches" >/dev/null
	c0=$(metric nache_upstream_compounds_total)
	run_as "$who" "${cmd//@/$M/$tree}" || { echo "$who: $name failed" >&2; return 1; }
	c1=$(metric nache_upstream_compounds_total)
	row="$who,$name,$((c1 - c0))"
	if [ "$REMOTE" = knfsd ]; then
		[[ $name == *warm* ]] || on 1 "echo 3 > /proc/sys/vm/drop_caches" >/dev/null
		# (less nache's own, e.g. lease renewals, meanwhile)
		c0=$(metric nache_upstream_compounds_total) k0=$(knfsd_compounds)
		run_as "$who" "${cmd//@/$D/d$tree}" || { echo "$who: $name failed direct" >&2; return 1; }
		k1=$(knfsd_compounds) c1=$(metric nache_upstream_compounds_total)
		row+=",$((k1 - k0 - (c1 - c0)))"
	fi
	echo "$row"
}

# audit WHO — the operations, as WHO, in its tree.
audit() {
	local who=$1
	count "$who" "stat cold" "stat @/r.bin"
	count "$who" "stat warm" "stat @/r.bin"
	count "$who" "open+read 64K+close cold" "cat @/r.bin"
	count "$who" "open+read 64K+close again" "cat @/r.bin"
	count "$who" "open+read 64K+close warm" "cat @/r.bin"
	# An open once nache's attributes have aged and its upstream open is
	# closed (Attr_Timeout 3 s, Open_Linger 5 s): the kernel client opens
	# by handle, and nache's OPEN is the one round trip.
	sleep 6
	count "$who" "open+close 6 s later warm" \
		"python3 -c 'import os; os.close(os.open(\"@/r.bin\", os.O_RDONLY))'"
	# The same once they have aged again, by a path the client holds no
	# name of (its caches dropped): an OPEN by name (CLAIM_NULL).
	sleep 6
	count "$who" "open+close 6 s later, by path" \
		"python3 -c 'import os; os.close(os.open(\"@/r.bin\", os.O_RDONLY))'"
	count "$who" "ls -l of 80 files cold" "ls -l @/d"
	count "$who" "ls -l of 80 files warm" "ls -l @/d"
	count "$who" "create+write 4K+close" "head -c 4096 /dev/urandom > @/new.bin"
	count "$who" "touch (setattr times)" "touch @/new.bin"
	count "$who" "mkdir" "mkdir @/nd"
	count "$who" "rename" "mv @/new.bin @/nd/moved.bin"
	count "$who" "rm" "rm @/nd/moved.bin"
	count "$who" "rmdir" "rmdir @/nd"
	count "$who" "tar x of 3 directories and 20 files" "tar -C @ -xpf /tmp/rt.tar"
	count "$who" "tar x of the same again warm" "tar -C @ -xpf /tmp/rt.tar"
}

audit root
audit 1000
