#!/usr/bin/env bash
# bench/run.sh — the benchmark runner behind `make bench` (bench/README.md).
#
# Boots one lab (lab/lab.sh): a remote server (knfsd by default, whose
# per-operation counters are readable), nache and stock Ganesha PROXY_V4 in
# front of it, and enough UML clients; then, for every profile, workload,
# client count and configuration (a "cell"), it prepares the data on the
# server, mounts cold, snapshots the server's op counters, runs the workload
# in all the cell's clients at once, snapshots again, and appends the cell's
# rows to bench/out/<run-id>/results.csv.  Ends with summary.md and plots.
#
# Parameters (environment; lists are comma-separated):
#   WORKLOAD  webserver webserver-zipf varmail fileserver webproxy untar
#             lslr build seqread seqwrite, or "all"     (default webserver)
#   PROFILE   lan wan lanrouter                         (default lan)
#   CLIENTS   client counts, e.g. 1,2,4                 (default 1)
#   CONFIGS   direct proxyv4 nache nache-wb             (default the first three)
#             nache-wb: nache with write-back on a single-writer export
#             (NACHE_WB_EXTRA added to NACHE_EXTRA; nache is restarted
#             between nache and nache-wb cells)
#   SCALE     smoke | full | filebench                  (default full)
#   REMOTE    knfsd | vfs                               (default knfsd)
#   DURATION  seconds of a personality run (default: the scale's, 10/60)
#   FILEBENCH the filebench binary that runs the personalities, visible in
#             the guests (default .deps/filebench/bin/filebench, built by
#             deploy/install-deps.sh)
#   SHARED    1: all clients of a cell work on one file set (workloads
#             that only read it: webserver, webserver-zipf, lslr, seqread)
#   FB_SET    personality overrides "nfiles=500,nthreads=8"
#   MOUNT_OPTS  client mount options                    (default vers=4.1)
#   USERS     1: client I runs its workload as uid and gid 1000+I (its
#             directory theirs), so that nache checks each caller's rights
#             with the remote; 0: every client as root    (default 0)
#   BUILD_JOBS  make -j for "build"                     (default 4)
#   CAPTURE   1: during each timed phase, capture the packet headers on
#             the office's side of the WAN link (wan0 of the LAN namespace:
#             the direct clients' and nache's traffic to the remote) into
#             raw/<cell>/wan.pcap, and on the office's LAN (the clients'
#             requests) into raw/<cell>/lan.pcap (bench/link_use.py)
#             (default 0)
#   PROBE     1: during each timed phase, sample every client's workload
#             threads' state and kernel wait channel (raw/<cell>/probe.I,
#             bench/driver/probe.py)                     (default 0)
#   NACHE_BUILD_DIR  build tree with stage/             (default ./build)
#   NACHE_EXTRA  extra lines for nache's FSAL block, e.g. write-back:
#             'Write_Policy = "write_back"; Single_Writer = true;'
#             (the run's params.txt records them)
#   NACHE_WB_EXTRA  what nache-wb adds (default
#             'Write_Policy = "write_back"; Single_Writer = true;')
#   BENCH_OUT  output base directory                    (default bench/out)
#   BENCH_SLACK  a personality cell's bound beyond DURATION, s (default 900)
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
: "${NACHE_SOURCE_DIR:=$(dirname "$BENCH_DIR")}"
: "${NACHE_BUILD_DIR:=$NACHE_SOURCE_DIR/build}"
export LAB_STAGE_DIR="$NACHE_BUILD_DIR/stage"
# knfsd grants delegations only while it has memory for them (about 4 per
# MiB free: ~940 in the lab's default 256 MiB guest), and PROXY_V4 keeps
# every one it gets; full-scale personalities use thousands of files. Set
# before lab.sh, which sets its defaults when sourced.
if [ "${SCALE:-full}" != smoke ]; then
	export LAB_KNFSD_MEM=${LAB_KNFSD_MEM:-2G}
fi
# Set before lab.sh, which sets its defaults when sourced.
# Room for every cell's data (a sparse image: the host's disk holds what is
# written, until teardown) and threads for N clients.  Cells' data is not
# deleted during the run: a local unlink on the server waits out
# lease-break-time (45 s) for every file whose delegation PROXY_V4 holds and
# cannot return (it has no working back channel).
export LAB_KNFSD_SIZE=${LAB_KNFSD_SIZE:-32G}
export LAB_KNFSD_THREADS=${LAB_KNFSD_THREADS:-16}
# knfsd grants no delegations while lockd's grace period runs (50 s after
# boot by default): shorten it, and start the first cell after it.
export LAB_KNFSD_NLM_GRACE=${LAB_KNFSD_NLM_GRACE:-10}
# nache as shipped (config/nache.conf): Ganesha passes nache's delegations
# on to its clients.
# (LAB_NACHE_DELEGATIONS= turns them off.)
export LAB_NACHE_DELEGATIONS=${LAB_NACHE_DELEGATIONS-readwrite}
# Clients run as root (USERS=0) on files root made at the remote, as on the
# direct mount and PROXY_V4's export: nache's export must not squash root
# (lab.sh's default is Root_Squash, as shipped; lab/helpers.sh, which the
# test suites use, sets the same).  Squashed, every write of a personality
# failed with EACCES.
export LAB_NACHE_SQUASH=${LAB_NACHE_SQUASH:-No_Root_Squash}
# shellcheck source=../lab/lab.sh
source "$NACHE_SOURCE_DIR/lab/lab.sh"
PY=$LAB_PYTHON                   # the system python3 (has matplotlib)
DRIVER=$BENCH_DIR/driver/fbdriver.py
PROBE=${PROBE:-0}
CAPTURE=${CAPTURE:-0}

WORKLOAD=${WORKLOAD:-webserver}
PROFILE=${PROFILE:-lan}
CLIENTS=${CLIENTS:-1}
CONFIGS=${CONFIGS:-direct,proxyv4,nache}
SCALE=${SCALE:-full}
REMOTE=${REMOTE:-knfsd}
DURATION=${DURATION:-}
FILEBENCH=${FILEBENCH:-$NACHE_SOURCE_DIR/.deps/filebench/bin/filebench}
SHARED=${SHARED:-0}
FB_SET=${FB_SET:-}
MOUNT_OPTS=${MOUNT_OPTS:-vers=4.1}
BUILD_JOBS=${BUILD_JOBS:-4}
BENCH_OUT=${BENCH_OUT:-$BENCH_DIR/out}
# Jobs on a wan profile run for many minutes (bench/README.md).
JOB_TIMEOUT=${BENCH_JOB_TIMEOUT:-7200}

ALL_WORKLOADS="webserver webserver-zipf varmail fileserver webproxy untar lslr build seqread seqwrite"
PERSONALITIES=" webserver webserver-zipf varmail fileserver webproxy "
# What SHARED=1 may share: workloads that only read the prepared data
# (webserver's log is each client's own).  The others write or delete in
# their set: Filebench keeps which files exist in each process, so clients
# sharing a set would delete files another still counts on (and untar and
# build would write over each other's files).
SHARED_WORKLOADS=" webserver webserver-zipf lslr seqread "

die() {
	echo "bench: $*" >&2
	exit 2
}

# ------------------------------------------------------------ parameters

list() { tr ',' ' ' <<<"$1"; }
in_list() { [[ " $(list "$2") " == *" $1 "* ]]; }

[ "$WORKLOAD" = all ] && WORKLOAD=$(tr ' ' ',' <<<"$ALL_WORKLOADS")
for w in $(list "$WORKLOAD"); do
	[[ " $ALL_WORKLOADS " == *" $w "* ]] ||
		die "unknown workload '$w' (one of: $ALL_WORKLOADS, all)"
done
for p in $(list "$PROFILE"); do
	case $p in lan | wan | lanrouter) ;; *) die "unknown profile '$p' (lan, wan, lanrouter)" ;; esac
done
MAXC=0
for n in $(list "$CLIENTS"); do
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] ||
		die "client count '$n' must be 1..16"
	[ "$n" -gt "$MAXC" ] && MAXC=$n
done
for c in $(list "$CONFIGS"); do
	case $c in direct | proxyv4 | nache | nache-wb) ;; *) die "unknown config '$c' (direct, proxyv4, nache, nache-wb)" ;; esac
done
case $SCALE in smoke | full | filebench) ;; *) die "unknown scale '$SCALE' (smoke, full, filebench)" ;; esac
case $REMOTE in knfsd | vfs) ;; *) die "unknown remote '$REMOTE' (knfsd, vfs)" ;; esac
case $SHARED in 0 | 1) ;; *) die "SHARED must be 0 or 1, not '$SHARED'" ;; esac
if [ "$SHARED" = 1 ]; then
	for w in $(list "$WORKLOAD"); do
		[[ $SHARED_WORKLOADS == *" $w "* ]] ||
			die "SHARED=1: '$w' writes or deletes files in its set, so clients sharing one would destroy each other's; SHARED=1 runs only:$SHARED_WORKLOADS"
	done
fi
# The personalities run under Filebench only (the Python imitation is gone).
[ "${ENGINE:-filebench}" = filebench ] ||
	die "ENGINE=$ENGINE: the personalities run under Filebench only (bench/README.md)"
HAVE_PERSONALITY=0
for w in $(list "$WORKLOAD"); do
	[[ $PERSONALITIES == *" $w "* ]] && HAVE_PERSONALITY=1
done
if [ "$HAVE_PERSONALITY" = 1 ] && [ ! -x "$FILEBENCH" ]; then
	die "no filebench at $FILEBENCH: deploy/install-deps.sh (make deps) builds it from ../shared/third_party/filebench-22620e6.tar.gz (bench/README.md), or set FILEBENCH"
fi
[ -x "$LAB_STAGE_DIR/bin/ganesha.nfsd" ] ||
	die "no staged ganesha.nfsd in $LAB_STAGE_DIR: run 'make build' (or set NACHE_BUILD_DIR)"

# Sizes of the fixed-work workloads per scale (GEN_* / SEQREAD_SIZE /
# SEQWRITE_SIZE win).
if [ "$SCALE" = smoke ]; then
	export GEN_FILES=${GEN_FILES:-150} GEN_DIRS=${GEN_DIRS:-30} GEN_BYTES=${GEN_BYTES:-1600000}
	SEQREAD_SIZE=${SEQREAD_SIZE:-32m}
	BUILD_SOURCES=${BUILD_SOURCES:-20} BUILD_HEADERS=${BUILD_HEADERS:-4}
else
	SEQREAD_SIZE=${SEQREAD_SIZE:-256m}
	BUILD_SOURCES=${BUILD_SOURCES:-200} BUILD_HEADERS=${BUILD_HEADERS:-19}
fi
SEQWRITE_SIZE=${SEQWRITE_SIZE:-$SEQREAD_SIZE}

# ------------------------------------------------------------ output

mkdir -p "$BENCH_OUT" || die "cannot create $BENCH_OUT"
RUN_ID=$(date +%Y%m%d-%H%M%S)
[ ! -e "$BENCH_OUT/$RUN_ID" ] || RUN_ID=$RUN_ID-$$
RUN=$BENCH_OUT/$RUN_ID
mkdir -p "$RUN/raw"
RESULTS=$RUN/results.csv
echo "workload,profile,clients,config,metric,value,unit" >"$RESULTS"
ln -sfn "$RUN_ID" "$BENCH_OUT/latest"
exec > >(tee -a "$RUN/bench.log") 2>&1
{
	echo "run_id=$RUN_ID"
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit=$(git -C "$NACHE_SOURCE_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$NACHE_SOURCE_DIR" diff --quiet HEAD 2>/dev/null || echo +dirty)"
	echo "workloads=$WORKLOAD"
	echo "profiles=$PROFILE"
	echo "clients=$CLIENTS"
	echo "configs=$CONFIGS"
	echo "scale=$SCALE"
	echo "remote=$REMOTE"
	echo "duration=${DURATION:-scale default}"
	echo "mount_opts=$MOUNT_OPTS"
	[ -z "$FB_SET" ] || echo "fb_set=$FB_SET"
	echo "users=${USERS:-0}"
	echo "shared=$SHARED"
} >"$RUN/params.txt"

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ------------------------------------------------------------ the lab

lab_cleanup_stale
lab_init || die "lab_init failed"
lab_net_up lan || die "network did not come up"
if [ "$REMOTE" = knfsd ]; then
	lab_remote_knfsd_start || die "knfsd did not start"
	UP_ADDR=$LAB_KNFSD_ADDR UP_PATH=/ DIRECT_EXPORT=/
	SERVER_ROOT=$LAB_KNFSD_EXPORT_DIR          # path inside the knfsd guest
	SRV_PY=python3                             # the guest's PATH: /usr/bin
	# Its largest READ/WRITE (LAB_KNFSD_MAX_BLOCK, else the kernel's default).
	echo "knfsd_max_block=$(lab_knfsd_run 'cat /proc/fs/nfsd/max_block_size')" >>"$RUN/params.txt"
else
	lab_remote_vfs_start || die "VFS remote did not start"
	UP_ADDR=$LAB_REMOTE_ADDR UP_PATH=/export DIRECT_EXPORT=/export
	SERVER_ROOT=$LAB_REMOTE_EXPORT_DIR         # host path
	SRV_PY=$PY
fi
NACHE_EXTRA=${NACHE_EXTRA:-}
NACHE_WB_EXTRA=${NACHE_WB_EXTRA:-'Write_Policy = "write_back"; Single_Writer = true;'}
echo "nache_extra=$NACHE_EXTRA" >>"$RUN/params.txt"
in_list nache-wb "$CONFIGS" && echo "nache_wb_extra=$NACHE_WB_EXTRA" >>"$RUN/params.txt"
# nache_extra_of CONFIG — nache's FSAL lines for a nache configuration.
nache_extra_of() {
	if [ "$1" = nache-wb ]; then echo "$NACHE_EXTRA $NACHE_WB_EXTRA"; else echo "$NACHE_EXTRA"; fi
}
NACHE_RUNNING_AS=
# nache_as CONFIG — nache running with CONFIG's lines (restarted when it
# runs with the other's, or is not running).
nache_as() {
	if [ "$NACHE_RUNNING_AS" = "$1" ] && _lab_alive "$(lab_nache_pid)"; then
		return 0
	fi
	if [ -n "$NACHE_RUNNING_AS" ]; then
		_lab_alive "$(lab_nache_pid)" || log "nache is not running (crashed?): restarting it"
		lab_nache_stop >/dev/null 2>&1
	fi
	LAB_NACHE_UPSTREAM=$UP_ADDR LAB_NACHE_UPSTREAM_PATH=$UP_PATH \
		lab_nache_start "$(nache_extra_of "$1")" && NACHE_RUNNING_AS=$1
}
for c in nache nache-wb; do
	if in_list "$c" "$CONFIGS"; then
		nache_as "$c" || die "nache did not start"
		break
	fi
done
if in_list proxyv4 "$CONFIGS"; then
	LAB_PROXYV4_UPSTREAM=$UP_ADDR LAB_PROXYV4_UPSTREAM_PATH=$UP_PATH lab_proxyv4_start ||
		die "PROXY_V4 did not start"
fi
# shellcheck disable=SC2046
lab_clients_start $(seq 1 "$MAXC") || die "clients did not boot"

if [ "$HAVE_PERSONALITY" = 1 ]; then
	lab_client_run 1 "test -x '$FILEBENCH'" >/dev/null 2>&1 ||
		die "filebench at $FILEBENCH is not visible in the guests"
	echo "engine=filebench (personalities)" >>"$RUN/params.txt"
	echo "filebench=$FILEBENCH" >>"$RUN/params.txt"
fi

if [ "$REMOTE" = knfsd ]; then
	ready_at=$(($(cut -d. -f1 "$LAB_DIR/run/knfsd.started") + LAB_KNFSD_NLM_GRACE + 1))
	if [ "$(date +%s)" -lt "$ready_at" ]; then
		log "waiting $((ready_at - $(date +%s))) s for the end of knfsd's lockd grace period (no delegations before)"
		sleep $((ready_at - $(date +%s)))
	fi
fi

WORK=$LAB_DIR/bench                # shared with every guest (hostfs)
mkdir -p "$WORK"
if [[ " $(list "$WORKLOAD") " == *" untar "* ]] || [[ " $(list "$WORKLOAD") " == *" lslr "* ]]; then
	"$PY" "$BENCH_DIR/gen_tree.py" --tar "$WORK/tree.tar" || die "gen_tree.py failed"
	TREE_ENTRIES=$(tar -tf "$WORK/tree.tar" | wc -l)
	echo "tree=$TREE_ENTRIES entries, $(stat -c %s "$WORK/tree.tar") bytes of tar" >>"$RUN/params.txt"
fi

# server_run CMD — run CMD where the exported file system is writable: in
# the knfsd guest, or on the host for the VFS remote.
server_run() {
	if [ "$REMOTE" = knfsd ]; then
		LAB_CMD_TIMEOUT=$JOB_TIMEOUT lab_knfsd_run "$1"
	else
		bash -c "$1"
	fi
}

# server_snapshot CELLDIR WHEN CONFIG — counters into CELLDIR/*.WHEN.
server_snapshot() {
	local dir=$1 when=$2 config=$3
	if [ "$REMOTE" = knfsd ]; then
		lab_knfsd_stats >"$dir/knfsd.$when" || return 1
	fi
	if [[ $config == nache* ]]; then
		ip netns exec "$LAB_NS_LAN" "$PY" -c '
import sys, urllib.request
page = urllib.request.urlopen("http://%s:9464/metrics" % sys.argv[1], timeout=10)
sys.stdout.write(page.read().decode())' "$LAB_NACHE_ADDR" >"$dir/nache.$when" ||
			{ [ "$REMOTE" = knfsd ] || return 1; }
	fi
	return 0
}

server_of() {
	case $1 in
	direct) echo "$UP_ADDR $DIRECT_EXPORT" ;;
	proxyv4) echo "$LAB_PROXYV4_ADDR /export" ;;
	nache | nache-wb) echo "$LAB_NACHE_ADDR /export" ;;
	esac
}

# probe_seconds W — how long PROBE samples a cell of workload W: a
# personality's run, else a fixed-work job's (which may end sooner).
probe_seconds() {
	if [[ $PERSONALITIES == *" $1 "* ]]; then
		[ -n "${DURATION:-}" ] && { echo "$DURATION"; return; }
		"$PY" "$DRIVER" params "$1" --scale "$SCALE" |
			"$PY" -c 'import json, sys; print(json.load(sys.stdin)["duration"])'
	else
		echo 30
	fi
}

# client_stats RAW WHEN N — each client's NFS per-operation statistics
# (/proc/self/mountstats in its guest) into RAW/mountstats.I.WHEN: what
# each client sent and how long it waited, per operation (RPC counts,
# queue, round-trip and execution times), to diff after against before.
client_stats() {
	local raw=$1 when=$2 n=$3 i
	for i in $(seq 1 "$n"); do
		lab_client_run "$i" "cat /proc/self/mountstats" \
			>"$raw/mountstats.$i.$when" 2>&1 ||
			log "client $i: mountstats not read ($raw/mountstats.$i.$when)"
	done
}

# data_dir I — the directory (relative to the cell's) of client I's data:
# its own c<i>, or with SHARED=1 the one set all share.
data_dir() { if [ "$SHARED" = 1 ]; then echo shared; else echo "c$1"; fi; }

# prepare WORKLOAD SRVDIR N SYNCDIR — the cell's data on the server, one
# subdirectory c<i> per client, or one "shared" for all with SHARED=1 (not
# timed, not counted).  Filebench's file sets leave their listing in
# SYNCDIR/list.<dir> for the clients.
prepare() {
	# (Two locals: a local's arguments are expanded before any is set, so
	# cmd must not use srv in the same one.)
	local w=$1 srv=$2 n=$3 sync=$4 i
	local cmd="set -e; mkdir -p '$srv'" sets
	sets=$(for i in $(seq 1 "$n"); do data_dir "$i"; done | sort -u)
	for i in $sets; do
		local d=$srv/$i
		case $w in
		untar | seqwrite) cmd+="; mkdir -p '$d'" ;;
		lslr) cmd+="; mkdir -p '$d'; tar -xf '$WORK/tree.tar' -C '$d'" ;;
		build) cmd+="; $SRV_PY -B '$DRIVER' genproject --dir '$d' --sources $BUILD_SOURCES --headers $BUILD_HEADERS >/dev/null" ;;
		seqread) cmd+="; $SRV_PY -B '$DRIVER' mkfile --path '$d/seq.bin' --size $SEQREAD_SIZE >/dev/null" ;;
		*)
			cmd+="; $SRV_PY -B '$DRIVER' prealloc $w --filebench '$FILEBENCH' --scale $SCALE $(fb_sets) --dir '$d' --list '$sync/list.$i' >/dev/null"
			;;
		esac
	done
	# Sharing a webserver set: each client appends to a log of its own.
	if [ "$SHARED" = 1 ] && [[ $w == webserver* ]]; then
		for i in $(seq 1 "$n"); do
			cmd+="; mkdir -p '$srv/c$i'; cp -a '$srv/shared/logfiles' '$srv/c$i/'"
		done
	fi
	# One user per client: its directory is its own (USERS=1).
	if [ "${USERS:-0}" = 1 ] && [ "$SHARED" = 1 ]; then
		cmd+="; chmod -R a+rX '$srv/shared'"
		for i in $(seq 1 "$n"); do
			[[ $w == webserver* ]] && cmd+="; chown -R $(client_uid "$i"):$(client_uid "$i") '$srv/c$i'"
		done
	elif [ "${USERS:-0}" = 1 ]; then
		for i in $(seq 1 "$n"); do
			cmd+="; chown -R $(client_uid "$i"):$(client_uid "$i") '$srv/c$i'"
		done
	fi
	cmd+="; sync"
	[ "$REMOTE" = knfsd ] && cmd+="; echo 3 >/proc/sys/vm/drop_caches"
	server_run "$cmd"
}

# client_uid I — the uid (and gid) client I runs its workload as: 1000+I
# with USERS=1, else empty (root, as lab_client_run).
client_uid() { [ "${USERS:-0}" != 1 ] || echo $((1000 + $1)); }

fb_sets() {
	local kv out=
	for kv in $(list "$FB_SET"); do out+=" --set $kv"; done
	echo "$out"
}

# client_cmd WORKLOAD CELLDIR I SYNCDIR — the driver command for client I
# (CELLDIR: the cell's directory on the client's mount).
client_cmd() {
	local w=$1 cell=$2 i=$3 sync=$4
	local d barrier="--ready '$sync/ready.$i' --go '$sync/go'"
	d=$cell/$(data_dir "$i")
	case $w in
	untar) echo "python3 -B '$DRIVER' untar --tar '$WORK/tree.tar' --dir '$d' $barrier" ;;
	lslr) echo "python3 -B '$DRIVER' lslr --dir '$d' $barrier" ;;
	build) echo "python3 -B '$DRIVER' build --dir '$d' --jobs $BUILD_JOBS $barrier" ;;
	seqread) echo "python3 -B '$DRIVER' seqread --path '$d/seq.bin' $barrier" ;;
	seqwrite) echo "python3 -B '$DRIVER' seqwrite --path '$d/seq.bin' --size $SEQWRITE_SIZE $barrier" ;;
	*)
		# Webserver's opens draw from a generator seeded per client: each
		# client reads its own sequence of files (webserver.f).
		local seed=
		[[ $w == webserver* ]] && seed="--set seed=$i"
		echo "python3 -B '$DRIVER' run $w --filebench '$FILEBENCH' --list '$sync/list.$(data_dir "$i")' --scale $SCALE $(fb_sets) $seed --dir '$d' --logdir '$cell/c$i' ${DURATION:+--duration $DURATION} $barrier"
		;;
	esac
}

# wait_ready SYNCDIR N PIDS... — until all N ready files exist; fails when
# a driver exits first.
wait_ready() {
	local sync=$1 n=$2 i pid ready
	shift 2
	while :; do
		ready=0
		for i in $(seq 1 "$n"); do
			[ -e "$sync/ready.$i" ] && ready=$((ready + 1))
		done
		[ "$ready" = "$n" ] && return 0
		for pid in "$@"; do
			kill -0 "$pid" 2>/dev/null || return 1
		done
		sleep 0.1
	done
}

# nache_dirty — nache's unflushed write-back bytes, or "lag" when only
# metadata is unflushed (files created or attributes set, no data); 0 when
# the remote has everything; empty if unreadable.
nache_dirty() {
	ip netns exec "$LAB_NS_LAN" "$PY" -c '
import re, sys, urllib.request
page = urllib.request.urlopen("http://%s:9464/metrics" % sys.argv[1], timeout=10)
dirty = lag = None
for line in page.read().decode().splitlines():
    m = re.match(r"(nache_dirty_bytes|nache_flush_lag_seconds)(?:\{[^}]*\})? (\S+)$", line)
    if m and m.group(1) == "nache_dirty_bytes":
        dirty = int(float(m.group(2)))
    elif m:
        lag = float(m.group(2))
if dirty is not None:
    print(dirty if dirty or not lag else "lag")' "$LAB_NACHE_ADDR" 2>/dev/null
}

# wait_flushed CELLDIR — once the clients finished, has nache send
# everything now (`nachectl flush --wait`, rather than at Flush_Age) and
# writes the seconds from that flush's start until the remote holds it all
# to CELLDIR/flush_s; nothing when nothing was dirty.
wait_flushed() {
	local t0 d
	d=$(nache_dirty)
	[ -n "$d" ] && [ "$d" != 0 ] || return 0
	log "flushing nache's $d unflushed bytes now"
	t0=$(date +%s.%N)
	"$LAB_STAGE_DIR/bin/nachectl" --socket "$LAB_DIR/nache/nache.sock" \
		flush --wait --timeout "$JOB_TIMEOUT" >"$1/flush.out" 2>&1 ||
		log "nache still has unflushed data: $(tail -n 1 "$1/flush.out")"
	echo "$(date +%s.%N) - $t0" | bc -l >"$1/flush_s"
}

FAILED=0

# run_cell WORKLOAD PROFILE N CONFIG
# capture_start CELL DIR — tcpdump of the NFS traffic, headers only
# (enough for bench/link_use.py), on the office's side of the WAN link
# (wan0) into DIR/wan.pcap and on the office's LAN (br0: the clients' own
# requests, to nache or to the remote) into DIR/lan.pcap; capture_stop
# CELL ends both (SIGINT: the files are complete).
capture_start() {
	local side dev
	for side in wan lan; do
		dev=wan0
		[ $side = lan ] && dev=br0
		lab_helper_start "tcpdump-$1-$side" "$LAB_NS_LAN" tcpdump -i $dev -n -U \
			-s 128 -Z root -w "$2/$side.pcap" 'tcp port 2049' &&
			lab_wait_until 20 grep -q "listening on $dev" "$LAB_DIR/logs/tcpdump-$1-$side.log" ||
			log "cell $1: tcpdump did not start (its log: $LAB_DIR/logs/tcpdump-$1-$side.log)"
	done
}
capture_stop() {
	local side pid
	for side in wan lan; do
		pid=$(lab_helper_pid "tcpdump-$1-$side")
		[ -n "$pid" ] && kill -INT "$pid" 2>/dev/null &&
			lab_wait_until 10 eval "! kill -0 $pid 2>/dev/null"
		lab_helper_stop "tcpdump-$1-$side"
	done
}

run_cell() {
	local w=$1 p=$2 n=$3 c=$4 i
	local cell=$w-$p-c$n-$c
	local rel=bench-$RUN_ID/$cell
	local srv=$SERVER_ROOT/$rel cli=/mnt/b/$rel
	local raw=$RUN/raw/$cell sync=$WORK/sync/$cell
	local addr export_path
	read -r addr export_path <<<"$(server_of "$c")"
	mkdir -p "$raw" "$sync"
	log "cell $cell: preparing"
	if [[ $c == nache* ]]; then
		nache_as "$c" || { log "cell $cell: nache did not (re)start"; return 1; }
	fi
	prepare "$w" "$srv" "$n" "$sync" >"$raw/prepare.log" 2>&1 ||
		{ log "cell $cell: preparation failed (raw/$cell/prepare.log)"; return 1; }
	# Cold clients: fresh mounts, empty page and dentry caches.
	local pids=() rc=0
	for i in $(seq 1 "$n"); do
		{ lab_client_run "$i" "umount /mnt/b 2>/dev/null; sync; echo 3 >/proc/sys/vm/drop_caches" &&
			lab_client_mount "$i" "$addr" "$export_path" /mnt/b "$MOUNT_OPTS"; } \
			>"$raw/mount.$i.log" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc = 0 ] || { log "cell $cell: mount failed (raw/$cell/mount.*.log)"; return 1; }
	# The timed phase: drivers prepare (no file system access), signal
	# ready; counters; go.
	pids=()
	local timeout=$JOB_TIMEOUT
	[[ $PERSONALITIES == *" $w "* ]] && timeout=$((${DURATION:-60} + ${BENCH_SLACK:-900}))
	chmod 777 "$sync"  # (drivers running as a user write their ready files)
	for i in $(seq 1 "$n"); do
		local uid
		uid=$(client_uid "$i")
		LAB_CMD_TIMEOUT=$timeout lab_client_run_as "$i" "$uid" "$uid" \
			"$(client_cmd "$w" "$cli" "$i" "$sync")" \
			>"$raw/client$i.json" 2>"$raw/client$i.err" &
		pids+=($!)
	done
	if ! wait_ready "$sync" "$n" "${pids[@]}"; then
		log "cell $cell: a driver exited before starting (raw/$cell/client*.err)"
		touch "$sync/go"
		for i in "${pids[@]}"; do wait "$i"; done
		rc=1
	else
		server_snapshot "$raw" before "$c" || log "cell $cell: counter snapshot failed"
		client_stats "$raw" before "$n"
		log "cell $cell: running $n client(s)"
		local probes=()
		if [ "$PROBE" = 1 ]; then
			for i in $(seq 1 "$n"); do
				lab_client_run "$i" "python3 -B '$BENCH_DIR/driver/probe.py' $(probe_seconds "$w")" \
					>"$raw/probe.$i" 2>&1 &
				probes+=($!)
			done
		fi
		[ "$CAPTURE" = 1 ] && capture_start "$cell" "$raw"
		touch "$sync/go"
		for i in "${pids[@]}"; do wait "$i" || rc=1; done
		for i in "${probes[@]}"; do wait "$i" || log "cell $cell: a probe failed (raw/$cell/probe.*)"; done
		client_stats "$raw" after "$n"
		# Write-back: the remote has everything only once nache has
		# flushed; its operations until then belong to the cell.
		[[ $c == nache* ]] && wait_flushed "$raw"
		[ "$CAPTURE" = 1 ] && capture_stop "$cell"
		server_snapshot "$raw" after "$c" || log "cell $cell: counter snapshot failed"
	fi
	pids=()
	for i in $(seq 1 "$n"); do
		[ -s "$raw/client$i.json" ] || rm -f "$raw/client$i.json"
		lab_client_umount "$i" /mnt/b >/dev/null 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	local server=knfsd
	if [ "$REMOTE" = vfs ]; then
		[[ $c == nache* ]] && server=nache || server=none
	fi
	"$PY" "$BENCH_DIR/report.py" cell --csv "$RESULTS" --workload "$w" \
		--profile "$p" --clients "$n" --config "$c" --dir "$raw" \
		--server "$server" || rc=1
	if [ $rc != 0 ]; then
		log "cell $cell: FAILED (see raw/$cell/client*.err)"
		tail -n 5 "$raw"/client*.err >&2 2>/dev/null
		return 1
	fi
	log "cell $cell: done: $(awk -F, -v c="$c" -v w="$w" -v p="$p" -v n="$n" '$1 == w && $2 == p && $3 == n && $4 == c &&
		($5 == "duration_s" || $5 == "ops_per_s" || $5 == "latency_mean_ms" || $5 == "server_ops_total") { printf "%s=%s ", $5, $6 }' "$RESULTS")"
}

for p in $(list "$PROFILE"); do
	lab_set_profile "$p" || die "profile $p"
	rtt=$(lab_rtt "$LAB_NS_LAN" "$UP_ADDR" 10 2>/dev/null) || rtt='?'
	echo "rtt_${p}_ms=$rtt (nache namespace -> remote, median of 10)" >>"$RUN/params.txt"
	log "profile $p: RTT nache -> remote $rtt ms"
	for w in $(list "$WORKLOAD"); do
		for n in $(list "$CLIENTS"); do
			for c in $(list "$CONFIGS"); do
				run_cell "$w" "$p" "$n" "$c" || FAILED=$((FAILED + 1))
			done
		done
	done
done

"$PY" "$BENCH_DIR/report.py" summarize "$RUN" || FAILED=$((FAILED + 1))
echo
cat "$RUN/summary.md"
echo
log "results: $RUN (results.csv, summary.md$([ -d "$RUN/plots" ] && echo ", plots/"))"
[ "$FAILED" = 0 ] || log "$FAILED cell(s) failed"
[ "$FAILED" = 0 ]
