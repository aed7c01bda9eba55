#!/usr/bin/env bash
# Data cache benchmark: a file of SIZE_MIB MiB (default 64) read
# sequentially by a real kernel client through nache with each Block_Size,
# against a direct mount of the remote, over one lab profile:
#   cold      first read (nache fetches from the remote, readahead on)
#   warm      re-read, client page cache dropped (nache's cache answers)
#   restart   re-read after a nache restart (revalidation only)
# Prints CSV profile,config,block_size,phase,seconds,upstream_reads (READ
# operations nache sent, from its metrics; empty for the direct mount).
# usage: bench/cache_read.sh [PROFILE] [BLOCK_SIZES] [SIZE_MIB]
#        e.g. wan "65536 262144 1048576"; wan 262144 256
set -uo pipefail
# Before lab.sh, which defaults it to 300 s: reads on wan take longer.
export LAB_CMD_TIMEOUT=${LAB_CMD_TIMEOUT:-3600}
# The lab (lab.sh, with NACHE_BUILD_DIR's stage) and the metric helper.
source "$(dirname "$0")/../lab/helpers.sh"
PROFILE=${1:-wan}
SIZES=${2:-65536 262144 1048576}
SIZE_MIB=${3:-64}
[[ $SIZE_MIB =~ ^[1-9][0-9]*$ ]] || { echo "SIZE_MIB must be a positive integer" >&2; exit 2; }
FILE=r$SIZE_MIB.bin

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_nache_start &&
	lab_clients_start 1 2 && lab_set_profile "$PROFILE" ||
	{ echo "lab did not start" >&2; exit 1; }
head -c $((SIZE_MIB << 20)) /dev/urandom >"$LAB_REMOTE_EXPORT_DIR/$FILE"
echo "profile,config,block_size,phase,seconds,upstream_reads"

# timed N — seconds client N takes to read the file, its page cache dropped.
timed() {
	lab_client_run "$1" "echo 3 > /proc/sys/vm/drop_caches; s=\$(date +%s.%N); cat /mnt/b/$FILE > /dev/null || exit 1; e=\$(date +%s.%N); echo \"\$e - \$s\" | bc -l"
}
reads() { metric nache_upstream_ops_total 'op="READ",status="ok"'; }
row() { printf '%s,%s,%s,%s,%.2f,%s\n' "$PROFILE" "$@"; }

lab_client_mount 2 "$LAB_REMOTE_ADDR" /export /mnt/b vers=4.1 || exit 1
row direct - cold "$(timed 2)" ""
for bs in $SIZES; do
	# An empty cache per block size (a new store: the client remounts).
	lab_client_umount 1 /mnt/b 2>/dev/null
	lab_nache_stop && rm -rf "$LAB_DIR/nache/cache" &&
		lab_nache_start "Block_Size = $bs;" &&
		lab_client_mount 1 "$LAB_NACHE_ADDR" /export /mnt/b vers=4.1 || exit 1
	r0=$(reads); t=$(timed 1) || exit 1; r1=$(reads)
	row nache "$bs" cold "$t" $((r1 - r0))
	t=$(timed 1) || exit 1; r2=$(reads)
	row nache "$bs" warm "$t" $((r2 - r1))
	lab_nache_restart || exit 1
	t=$(timed 1) || exit 1
	row nache "$bs" restart "$t" "$(reads)"
done
