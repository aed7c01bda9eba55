#!/usr/bin/env bash
# make demo: nache in front of an embedded default upstream, shown working.
#
# Starts the lab with the `wan` profile (80 ms RTT, 50 Mbit/s): a remote NFS
# server (Ganesha VFS) holding a generated sample tree, nache in the branch
# office in front of it, and real Linux kernel clients (user-mode-linux).
# One client mounts nache, another mounts the remote directly across the WAN
# for comparison; both run the same short workload. Everything is torn down
# at the end, also on Ctrl-C.
set -uo pipefail
DEMO_DIR=$(cd "$(dirname "$0")" && pwd)
: "${NACHE_SOURCE_DIR:=$(dirname "$DEMO_DIR")}"
: "${NACHE_BUILD_DIR:=$NACHE_SOURCE_DIR/build}"
export LAB_STAGE_DIR="$NACHE_BUILD_DIR/stage"
source "$DEMO_DIR/lab.sh"
PROFILE=${DEMO_PROFILE:-wan}

say() { printf '\n== %s\n' "$*"; }

say "starting the lab ($PROFILE profile): remote server, WAN, nache, two kernel clients"
lab_init && lab_net_up "$PROFILE" && lab_remote_vfs_start || exit 1
R=$LAB_REMOTE_EXPORT_DIR
# The embedded default upstream's content: a small generated source tree.
mkdir -p "$R/sample" &&
	GEN_DIRS=40 GEN_FILES=200 GEN_BYTES=2000000 python3 "$NACHE_SOURCE_DIR/bench/gen_tree.py" "$R/sample"
head -c $((16 << 20)) /dev/urandom >"$R/sample/blob.bin"
# nache's export squashes root, as shipped (config/nache.conf): the
# clients' root writes as nobody, so the top of the export is writable by
# all (sticky, like /tmp).
chmod 1777 "$R"
lab_nache_start && lab_clients_start 1 2 || exit 1
lab_client_mount 1 "$LAB_NACHE_ADDR" /export /mnt/nache vers=4.1 &&
	lab_client_mount 2 "$LAB_REMOTE_ADDR" /export /mnt/direct vers=4.1 || exit 1
say "client 1: mount -t nfs4 $LAB_NACHE_ADDR:/export /mnt/nache   (through nache)"
say "client 2: mount -t nfs4 $LAB_REMOTE_ADDR:/export /mnt/direct  (straight across the WAN)"
lab_rtt | sed 's/^/   WAN round trip: /'

workload() {  # workload CLIENT MNT
	lab_client_run "$1" "
		t() { l=\$1; shift; s=\$(date +%s%N); \"\$@\" >/dev/null 2>&1 || echo FAILED: \$l; e=\$(date +%s%N); printf '   %-40s %7.2f s\n' \"\$l\" \$(echo \"(\$e-\$s)/1000000000\" | bc -l); }
		t 'ls -lR of 200 files in 40 directories' ls -lR $2/sample
		t 'read a 16 MiB file' cat $2/sample/blob.bin
		t 'mkdir, create, read back, remove' sh -c 'mkdir -p $2/demo-\$\$ && echo hello > $2/demo-\$\$/hello.txt && cat $2/demo-\$\$/hello.txt && rm -r $2/demo-\$\$'
		t 'write 8 MiB with fsync' sh -c 'dd if=/dev/zero of=$2/write-test bs=1M count=8 conv=fsync && rm $2/write-test'
		echo \"   files seen: \$(find $2/sample -type f | wc -l)\""
}

say "workload through nache (client 1)"
workload 1 /mnt/nache
say "same workload on the direct WAN mount (client 2)"
workload 2 /mnt/direct
say "what the remote server holds (written by client 1 through nache):"
lab_client_run 1 "echo 'written through nache' > /mnt/nache/from-the-office.txt"
printf '   %s: %s\n' "from-the-office.txt" "$(cat "$R/from-the-office.txt")"
say "nache's log: $(grep -c NACHE "$(lab_nache_log)") NACHE lines; upstream connections:"
grep -E "NACHE_UPSTREAM: (connection|client id)" "$(lab_nache_log)" | sed 's/.*NACHE_UPSTREAM: /   /' | head -4
cat <<'NOTE'

nache keeps what it read in its persistent cache (RocksDB) and serves it
again without crossing the WAN while the remote's attributes or a
delegation vouch for it; it collapses opens per file, shares one set of
upstream delegations among its clients, and decides every access by the
remote's rules. With `Write_Policy = write_back` (README, "Semantics") it
also keeps acknowledged writes local until they are flushed.
NOTE
say "tearing down"
