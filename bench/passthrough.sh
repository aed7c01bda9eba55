#!/usr/bin/env bash
# Pass-through benchmark: a real kernel client through nache against one
# mounting the remote directly and one through stock Ganesha PROXY_V4, over
# the lab's lan and wan profiles.
#   untar   extract the generated 1,500-file / 300-directory tree (~16 MB)
#   ls-lR   list it recursively with attributes, from a cold client cache
#   read64  read a 64 MiB file sequentially, cold
# Prints CSV (profile,config,workload,seconds) and a table at the end.
# GEN_FILES / GEN_DIRS / GEN_BYTES shrink the tree (see gen_tree.py).
# usage: bench/passthrough.sh [PROFILES] [CONFIGS]
#        e.g. "lan wan" "direct proxyv4 nache"
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
: "${NACHE_SOURCE_DIR:=$(dirname "$BENCH_DIR")}"
: "${NACHE_BUILD_DIR:=$NACHE_SOURCE_DIR/build}"
export LAB_STAGE_DIR="$NACHE_BUILD_DIR/stage"
# Before lab.sh, which sets its own default (300 s) when sourced.
export LAB_CMD_TIMEOUT=${LAB_CMD_TIMEOUT:-3600}
source "$NACHE_SOURCE_DIR/lab/lab.sh"
PROFILES=${1:-lan wan}
CONFIGS=${2:-direct nache}

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_nache_start &&
	lab_clients_start 1 2 3 || { echo "lab did not start" >&2; exit 1; }
if [[ " $CONFIGS " == *" proxyv4 "* ]]; then
	lab_proxyv4_start || { echo "PROXY_V4 did not start" >&2; exit 1; }
fi
R=$LAB_REMOTE_EXPORT_DIR
TAR=$LAB_DIR/data/tree.tar
mkdir -p "$LAB_DIR/data"
python3 "$BENCH_DIR/gen_tree.py" --tar "$TAR"
head -c $((64 << 20)) /dev/urandom >"$R/read64.bin"
RESULTS=$LAB_DIR/results.csv
echo "profile,config,workload,seconds" >"$RESULTS"

client_of() {
	case $1 in direct) echo 2 ;; proxyv4) echo 3 ;; *) echo 1 ;; esac
}
server_of() {
	case $1 in
	direct) echo "$LAB_REMOTE_ADDR" ;;
	proxyv4) echo "$LAB_PROXYV4_ADDR" ;;
	*) echo "$LAB_NACHE_ADDR" ;;
	esac
}

# remount CONFIG — a fresh mount, so the client's caches are cold.
remount() {
	local n
	n=$(client_of "$1")
	lab_client_run "$n" "umount /mnt/b 2>/dev/null; echo 3 > /proc/sys/vm/drop_caches" >/dev/null 2>&1
	lab_client_mount "$n" "$(server_of "$1")" /export /mnt/b vers=4.1
}

# timed CONFIG COMMAND — seconds COMMAND takes in the config's client.
timed() {
	lab_client_run "$(client_of "$1")" "s=\$(date +%s.%N); $2 >/dev/null || exit 1; e=\$(date +%s.%N); echo \"\$e - \$s\" | bc -l"
}

record() {
	printf '%s,%s,%s,%.2f\n' "$1" "$2" "$3" "$4" | tee -a "$RESULTS"
}

for profile in $PROFILES; do
	lab_set_profile "$profile" || exit 1
	for cfg in $CONFIGS; do
		dir=/mnt/b/$profile-$cfg
		remount "$cfg" || exit 1
		lab_client_run "$(client_of "$cfg")" "mkdir -p $dir" || exit 1
		t=$(timed "$cfg" "tar -C $dir -xf $TAR") || { echo "untar failed" >&2; exit 1; }
		record "$profile" "$cfg" untar "$t"
		[ "$(find "$R/$profile-$cfg" -type f | wc -l)" = "${GEN_FILES:-1500}" ] || { echo "untar incomplete" >&2; exit 1; }
		remount "$cfg" || exit 1
		t=$(timed "$cfg" "ls -lR $dir") || exit 1
		record "$profile" "$cfg" ls-lR "$t"
		remount "$cfg" || exit 1
		t=$(timed "$cfg" "cat /mnt/b/read64.bin") || exit 1
		record "$profile" "$cfg" read64 "$t"
	done
done
echo
column -s, -t <"$RESULTS"
cp "$RESULTS" "${BENCH_OUT:-/tmp}/passthrough-$(date +%Y%m%d-%H%M%S).csv" 2>/dev/null || true
