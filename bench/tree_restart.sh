#!/usr/bin/env bash
# Whole-tree re-read after a nache restart: a source-like tree (gen_tree.py:
# 1,500 files in 300 directories, about 100 MiB, sizes lognormal from a few
# hundred bytes to 2.4 MiB, median 32 KiB) at the VFS remote, read by a
# real kernel client (`find -type f -exec cat {} +`, page cache dropped
# first), over one lab profile:
#   direct  cold         client 2 reads the tree from the remote itself
#   nache   cold         client 1 reads it through nache, first time
#   nache   warm-restart nache restarted (cache kept), client 1 reads again:
#                        nache revalidates, its cache answers (no READ)
# Prints CSV profile,config,phase,seconds,upstream_reads,upstream_getattrs,
# upstream_compounds: nache's upstream READs (op="READ",status="ok"),
# GETATTRs (op="GETATTR", any status) and COMPOUNDs sent during the phase
# (its /metrics; empty for the direct mount). The warm-restart phase counts
# from the restarted nache's first scrape, before the client touches the
# mount again.
# usage: bench/tree_restart.sh [PROFILE]     (default wan; about 21 min)
# Tree size from GEN_FILES / GEN_DIRS / GEN_BYTES (default 1500 / 300 /
# 104857600); LAB_KEEP=1 keeps the lab directory (nache's log).
set -uo pipefail
# Before lab.sh, which defaults it to 300 s: reads on wan take longer.
export LAB_CMD_TIMEOUT=${LAB_CMD_TIMEOUT:-3600}
# The lab (lab.sh, with NACHE_BUILD_DIR's stage) and the metric helper.
source "$(dirname "$0")/../lab/helpers.sh"
PROFILE=${1:-wan}
export GEN_FILES=${GEN_FILES:-1500} GEN_DIRS=${GEN_DIRS:-300}
export GEN_BYTES=${GEN_BYTES:-104857600}

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_nache_start &&
	lab_clients_start 1 2 ||
	{ echo "lab did not start" >&2; exit 1; }
python3 -B "$(dirname "$0")/gen_tree.py" "$LAB_REMOTE_EXPORT_DIR/t" ||
	{ echo "gen_tree.py failed" >&2; exit 1; }
echo "tree: $(find "$LAB_REMOTE_EXPORT_DIR/t" -type f | wc -l) files," \
	"$(find "$LAB_REMOTE_EXPORT_DIR/t" -type d | wc -l) directories," \
	"$(du -sb "$LAB_REMOTE_EXPORT_DIR/t" | cut -f1) bytes" >&2
lab_set_profile "$PROFILE" || { echo "profile $PROFILE failed" >&2; exit 1; }
echo "profile,config,phase,seconds,upstream_reads,upstream_getattrs,upstream_compounds"

# timed N — seconds client N takes to read every file of /mnt/t, its page
# cache dropped.
timed() {
	lab_client_run "$1" "echo 3 > /proc/sys/vm/drop_caches; s=\$(date +%s.%N); find /mnt/t -type f -exec cat {} + > /dev/null || exit 1; e=\$(date +%s.%N); echo \"\$e - \$s\" | bc -l"
}
# counters — "READs GETATTRs COMPOUNDs" nache sent upstream so far.
counters() {
	echo "$(metric nache_upstream_ops_total 'op="READ",status="ok"')" \
		"$(metric nache_upstream_ops_total 'op="GETATTR"')" \
		"$(metric nache_upstream_compounds_total)"
}
# phase CONFIG PHASE N — time client N's read; nache's counter deltas.
phase() {
	local r0 g0 c0 r1 g1 c1 t
	[ "$1" = nache ] && read -r r0 g0 c0 <<<"$(counters)"
	t=$(timed "$3") || { echo "$1 $2: read failed" >&2; exit 1; }
	if [ "$1" = nache ]; then
		read -r r1 g1 c1 <<<"$(counters)"
		printf '%s,%s,%s,%.2f,%s,%s,%s\n' "$PROFILE" "$1" "$2" "$t" \
			$((r1 - r0)) $((g1 - g0)) $((c1 - c0))
	else
		printf '%s,%s,%s,%.2f,,,\n' "$PROFILE" "$1" "$2" "$t"
	fi
}

lab_client_mount 2 "$LAB_REMOTE_ADDR" /export/t /mnt/t vers=4.1 || exit 1
phase direct cold 2
lab_client_umount 2 /mnt/t
lab_client_mount 1 "$LAB_NACHE_ADDR" /export/t /mnt/t vers=4.1 || exit 1
phase nache cold 1
lab_nache_restart || exit 1
echo "nache restarted; upstream since its start (READ GETATTR COMPOUND):" \
	"$(counters)" >&2
phase nache warm-restart 1
