#!/usr/bin/env bash
# Shared files (the Nache paper's delegation experiment): two kernel clients
# open, read and close the same FILES small files ROUNDS times, concurrently,
# and the remote (Linux knfsd 6.1, which grants read delegations) counts the
# NFSv4 operations it receives, for three configurations side by side in
# one lab, in this order, each with fresh mounts and cold caches:
#   direct   both clients mount knfsd (across the WAN); each holds its own
#            knfsd delegations
#   proxyv4  both clients mount stock Ganesha PROXY_V4 in front of knfsd
#   nache    both clients mount nache in front of knfsd; nache holds the
#            upstream delegations and shares them among its clients
# The files (4 KiB of random data each) are written inside the knfsd guest,
# so no NFS client's write stands in the way of a delegation.
#
# Prints CSV profile,config,metric,value on stdout, metrics:
#   elapsed_s_client1, elapsed_s_client2   each client's loop, seconds
#   elapsed_s_round1_client1, ..._client2  of which the first (cold) round
#   server_<OP>        knfsd's count of NFSv4 operation OP during the loop
#                      and until the configuration's opens were closed
#   server_compounds   NFSv4 COMPOUNDs (every 4.1 compound has a SEQUENCE;
#                      nache's upstream is NFSv4.0: no SEQUENCE)
#   server_ops_total   all NFSv4 operations
#   delegations_held   delegations knfsd shows for the configuration's
#                      client(s) before the clients unmount
# and, as config "local", the same loop on files in the clients' own tmpfs
# (no NFS): the floor set by UML's slow fork/exec of 2 x ROUNDS x FILES cats.
# then a markdown table (operations as rows, configurations as columns) on
# stderr. Raw counter snapshots go to $BENCH_OUT (default: none kept).
# usage: bench/shared_files.sh [PROFILE] [ROUNDS] [FILES]   (wan 8 100)
set -uo pipefail
# Per guest command (a client's whole loop): lab.sh's default is 300 s, and
# PROXY_V4 on wan needs more. Set before lab.sh is sourced.
export LAB_CMD_TIMEOUT=${LAB_CMD_TIMEOUT:-3600}
# The lab (lab.sh, with NACHE_BUILD_DIR's stage), `metric` and `on`.
source "$(dirname "$0")/../lab/helpers.sh"
PROFILE=${1:-wan}
ROUNDS=${2:-8}
FILES=${3:-100}
CONFIGS=${CONFIGS:-direct proxyv4 nache}
MOUNT_OPTS=${MOUNT_OPTS:-vers=4.1}
BENCH_OUT=${BENCH_OUT:-}
# knfsd grants no delegation while any lock manager is in grace, lockd's
# included (50 s after boot by default): shorten lockd's.
export LAB_KNFSD_NLM_GRACE=${LAB_KNFSD_NLM_GRACE:-10}
M=/mnt/s
# Operations reported, with their NFSv4 operation numbers.
OPS=(OPEN OPEN_CONFIRM CLOSE ACCESS GETATTR LOCK LOCKU READ DELEGRETURN
	PUTFH LOOKUP RENEW SEQUENCE)
declare -A OPNUM=([ACCESS]=3 [CLOSE]=4 [DELEGRETURN]=8 [GETATTR]=9 [LOCK]=12
	[LOCKU]=14 [LOOKUP]=15 [OPEN]=18 [OPEN_CONFIRM]=20 [PUTFH]=22 [READ]=25
	[RENEW]=30 [SEQUENCE]=53)
declare -A RES=()                  # RES[config,metric] = value
FAILED=()

die() { echo "shared_files: $*" >&2; exit 1; }
log() { printf '[shared_files %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, got '$ROUNDS'"
[[ $FILES =~ ^[1-9][0-9]*$ ]] || die "FILES must be a positive integer, got '$FILES'"
case $PROFILE in wan | lan | lanrouter) ;; *) die "unknown profile '$PROFILE' (wan|lan|lanrouter)" ;; esac
for c in $CONFIGS; do
	case $c in direct | proxyv4 | nache) ;; *) die "unknown config '$c' (direct proxyv4 nache)" ;; esac
done

lab_init || die "lab_init failed"
RAW=$LAB_DIR/shared_files
mkdir -p "$RAW"
lab_net_up lan && lab_remote_knfsd_start && lab_clients_start 1 2 ||
	die "lab did not start"
K=$LAB_KNFSD_EXPORT_DIR
log "creating $FILES files of 4 KiB inside the knfsd guest"
lab_knfsd_run "mkdir -p $K/d && for i in \$(seq 1 $FILES); do head -c 4096 /dev/urandom > $K/d/f\$i || exit 1; done; sync" ||
	die "cannot create the files at the remote"
# No delegations before lockd's grace period ends.
ready_at=$(($(cut -d. -f1 "$LAB_DIR/run/knfsd.started") + LAB_KNFSD_NLM_GRACE + 1))
if [ "$(date +%s)" -lt "$ready_at" ]; then
	log "waiting $((ready_at - $(date +%s))) s for the end of knfsd's lockd grace period"
	sleep $((ready_at - $(date +%s)))
fi
lab_set_profile "$PROFILE" || die "cannot switch to profile $PROFILE"
RTT=$(lab_rtt "$LAB_NS_LAN" "$LAB_KNFSD_ADDR") || RTT='?'
log "profile $PROFILE, RTT nache -> knfsd ${RTT} ms; $ROUNDS rounds x $FILES files x 2 clients"

# ------------------------------------------------------------ helpers

# snap FILE — knfsd's /proc/net/rpc/nfsd into FILE.
snap() { lab_knfsd_stats >"$1" && grep -q '^proc4ops ' "$1"; }

# op_of FILE OP — OP's count in snapshot FILE ("proc4ops COUNT v0 v1 ...":
# operation number i is field i+3); "total" sums all, "compounds" is the
# proc4 line's COMPOUND count.
op_of() {
	case $2 in
	total) awk '$1 == "proc4ops" { for (i = 3; i <= NF; i++) s += $i; print s + 0 }' "$1" ;;
	compounds) awk '$1 == "proc4" { print $4 + 0 }' "$1" ;;
	*) awk -v f=$((OPNUM[$2] + 3)) '$1 == "proc4ops" { print $f + 0 }' "$1" ;;
	esac
}

# knfsd_close — knfsd's CLOSE count now.
knfsd_close() {
	lab_knfsd_stats | awk -v f=$((OPNUM[CLOSE] + 3)) '$1 == "proc4ops" { print $f }'
}

# close_settled BOUND_S QUIET_S — wait until knfsd's CLOSE count has not
# moved for QUIET_S seconds (at most BOUND_S); fails on the bound.
close_settled() {
	local bound=$1 quiet=$2 last now still=0 t=0
	last=$(knfsd_close) || return 1
	while [ "$still" -lt "$quiet" ]; do
		[ "$t" -lt "$bound" ] || return 1
		sleep 1
		t=$((t + 1))
		now=$(knfsd_close) || return 1
		if [ "$now" = "$last" ]; then still=$((still + 1)); else still=0 last=$now; fi
	done
}

# client_dirs — knfsd's NFSv4 client directories (one per client id).
client_dirs() {
	lab_knfsd_run 'ls -d /proc/fs/nfsd/clients/*/ 2>/dev/null; true'
}

# delegs_of_new STATES BASELINE — read/write delegations in knfsd's states
# dump STATES held by clients whose directory is not in BASELINE (the
# clients the configuration created).
delegs_of_new() {
	awk -v before="$(cat "$2")" 'BEGIN { n = split(before, b); for (i = 1; i <= n; i++) old[b[i]] = 1; n = 0 }
		/^# client / { ours = !($3 in old) }
		ours && /type: deleg/ { n++ } END { print n + 0 }' "$1"
}

server_of() {
	case $1 in
	direct) echo "$LAB_KNFSD_ADDR /" ;;
	proxyv4) echo "$LAB_PROXYV4_ADDR /export" ;;
	nache) echo "$LAB_NACHE_ADDR /export" ;;
	esac
}

stop_daemons() { lab_proxyv4_stop; lab_nache_stop; }

callback_up() { [ "$(metric nache_callback_path_up 2>/dev/null)" = 1 ]; }
nache_opens_closed() { [ "$(metric nache_upstream_open_files 2>/dev/null)" = 0 ]; }

# nache_metrics FILE — nache's /metrics page into FILE.
nache_metrics() {
	ip netns exec "$LAB_NS_LAN" python3 -c '
import sys, urllib.request
page = urllib.request.urlopen("http://%s:9464/metrics" % sys.argv[1], timeout=10)
sys.stdout.write(page.read().decode())' "$LAB_NACHE_ADDR" >"$1"
}

# loop_in DIR — the loop each client runs over DIR/d/f1..FILES; prints the
# first round's and the whole loop's elapsed time in ms.
loop_in() {
	echo "t0=\$(date +%s%N); for r in \$(seq 1 $ROUNDS); do for i in \$(seq 1 $FILES); do cat $1/d/f\$i > /dev/null || { echo \"read of $1/d/f\$i failed\" >&2; exit 1; }; done; [ \$r != 1 ] || t1=\$(date +%s%N); done; e=\$(date +%s%N); echo \$(((t1 - t0) / 1000000)) \$(((e - t0) / 1000000))"
}

# both_clients DIR OUTDIR — the loop on both clients at once; their times
# into OUTDIR/elapsed.N, RES[<config>,elapsed_*] set by the caller.
both_clients() {
	local dir=$1 out=$2 p1 p2 rc1=0 rc2=0
	on 1 "$(loop_in "$dir")" >"$out/elapsed.1" 2>"$out/loop.1.err" &
	p1=$!
	on 2 "$(loop_in "$dir")" >"$out/elapsed.2" 2>"$out/loop.2.err" &
	p2=$!
	wait $p1 || rc1=$?
	wait $p2 || rc2=$?
	if [ $rc1 != 0 ] || [ $rc2 != 0 ]; then
		echo "client loops failed (client 1 exit $rc1, client 2 exit $rc2)" >&2
		cat "$out"/loop.*.err >&2
		return 1
	fi
}

# elapsed_res CONFIG OUTDIR — RES[CONFIG,elapsed_*] from OUTDIR/elapsed.N.
elapsed_res() {
	local n
	for n in 1 2; do
		RES[$1,elapsed_s_client$n]=$(awk '{ printf "%.2f", $2 / 1000 }' "$2/elapsed.$n")
		RES[$1,elapsed_s_round1_client$n]=$(awk '{ printf "%.2f", $1 / 1000 }' "$2/elapsed.$n")
	done
}

# run_config CONFIG — one configuration, results into RES.
run_config() {
	local cfg=$1 dir=$RAW/$1 srv exp n
	mkdir -p "$dir"
	log "=== $cfg"
	stop_daemons
	for n in 1 2; do
		on $n "sync; echo 3 > /proc/sys/vm/drop_caches" ||
			{ echo "cannot drop client $n's caches" >&2; return 1; }
	done
	client_dirs >"$dir/clients.before" || return 1
	case $cfg in
	proxyv4)
		LAB_PROXYV4_UPSTREAM=$LAB_KNFSD_ADDR LAB_PROXYV4_UPSTREAM_PATH=/ \
			lab_proxyv4_start || { echo "PROXY_V4 did not start" >&2; return 1; }
		;;
	nache)
		rm -rf "$LAB_DIR/nache/cache"
		LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start || { echo "nache did not start" >&2; return 1; }
		;;
	esac
	read -r srv exp <<<"$(server_of "$cfg")"
	for n in 1 2; do
		lab_client_mount $n "$srv" "$exp" $M "$MOUNT_OPTS" ||
			{ echo "client $n cannot mount $srv:$exp ($MOUNT_OPTS)" >&2; return 1; }
	done
	if [ "$cfg" = nache ]; then
		lab_wait_until 60 callback_up || {
			echo "nache's callback path is not up after 60 s (nache_callback_path_up = $(metric nache_callback_path_up)): knfsd would grant it no delegations" >&2
			return 1
		}
		nache_metrics "$dir/nache.before"
	fi
	snap "$dir/knfsd.before" || { echo "cannot read knfsd's counters" >&2; return 1; }
	log "$cfg: $ROUNDS rounds x $FILES files on both clients"
	both_clients $M "$dir" || return 1
	log "$cfg: loops done (first round / all, ms: client 1 $(cat "$dir/elapsed.1"), client 2 $(cat "$dir/elapsed.2")); waiting for the opens to close"
	if [ "$cfg" = nache ]; then
		lab_wait_until 60 nache_opens_closed ||
			echo "WARNING: nache still has $(metric nache_upstream_open_files) upstream opens after 60 s" >&2
	fi
	close_settled 90 6 || echo "WARNING: $cfg: knfsd's CLOSE count still moving after 90 s" >&2
	snap "$dir/knfsd.after" || { echo "cannot read knfsd's counters" >&2; return 1; }
	lab_knfsd_states >"$dir/states" || { echo "cannot read knfsd's states" >&2; return 1; }
	[ "$cfg" != nache ] || nache_metrics "$dir/nache.after"
	elapsed_res "$cfg" "$dir"
	local op a b
	for op in "${OPS[@]}" compounds total; do
		a=$(op_of "$dir/knfsd.before" "$op") b=$(op_of "$dir/knfsd.after" "$op")
		case $op in
		compounds) RES[$cfg,server_compounds]=$((b - a)) ;;
		total) RES[$cfg,server_ops_total]=$((b - a)) ;;
		*) RES[$cfg,server_$op]=$((b - a)) ;;
		esac
	done
	RES[$cfg,delegations_held]=$(delegs_of_new "$dir/states" "$dir/clients.before")
	{
		echo "$cfg: knfsd clients of this configuration:"
		awk -v before="$(cat "$dir/clients.before")" '
			BEGIN { n = split(before, b); for (i = 1; i <= n; i++) old[b[i]] = 1 }
			/^# client / { ours = !($3 in old) }
			ours && /^# client |^name:|^address:|^minor version:|type: deleg/ {
				if (/type: deleg/) d++; else print }
			END { print "delegations: " d + 0 }' "$dir/states" | sed 's/^/    /'
	} >&2
	if [ "$cfg" = nache ]; then
		echo "nache: upstream operations during the loop (nache_upstream_ops_total, by op):" >&2
		python3 - "$dir/nache.before" "$dir/nache.after" >&2 <<-'EOF'
			import re, sys
			def ops(path):
			    d = {}
			    for line in open(path):
			        m = re.match(r'nache_upstream_ops_total\{(.*)\} (\S+)$', line)
			        if m:
			            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
			            key = (labels.get("op", "?"), labels.get("status", ""))
			            d[key] = d.get(key, 0) + float(m.group(2))
			    return d
			a, b = ops(sys.argv[1]), ops(sys.argv[2])
			for k in sorted(b, key=lambda k: -(b[k] - a.get(k, 0))):
			    n = b[k] - a.get(k, 0)
			    if n:
			        print("    %-14s %-10s %d" % (k[0], k[1], n))
		EOF
		local m
		for m in nache_delegations_held nache_delegations_granted_total \
			nache_delegation_recalls_total nache_local_delegations_held \
			nache_upstream_open_files nache_upstream_compounds_total; do
			echo "    $m $(awk -v m="$m" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }' "$dir/nache.after")" >&2
		done
	fi
	for n in 1 2; do
		lab_client_umount $n $M || echo "WARNING: client $n: umount failed" >&2
	done
	stop_daemons
}

# ------------------------------------------------------------ the run

echo "profile,config,metric,value"
# The floor: the same loop on client-local files.
mkdir -p "$RAW/local"
for n in 1 2; do
	on $n "mkdir -p /mnt/local/d && for i in \$(seq 1 $FILES); do head -c 4096 /dev/urandom > /mnt/local/d/f\$i || exit 1; done" ||
		die "cannot create client $n's local files"
done
log "local (no NFS): $ROUNDS rounds x $FILES files on both clients"
both_clients /mnt/local "$RAW/local" || die "the local loop failed"
elapsed_res local "$RAW/local"
for m in elapsed_s_client1 elapsed_s_client2 elapsed_s_round1_client1 elapsed_s_round1_client2; do
	echo "$PROFILE,local,$m,${RES[local,$m]}"
done
METRICS=(elapsed_s_client1 elapsed_s_client2 elapsed_s_round1_client1 elapsed_s_round1_client2)
for op in "${OPS[@]}"; do METRICS+=("server_$op"); done
METRICS+=(server_compounds server_ops_total delegations_held)
for cfg in $CONFIGS; do
	if ! run_config "$cfg"; then
		echo "shared_files: configuration $cfg FAILED" >&2
		FAILED+=("$cfg")
		for n in 1 2; do lab_client_umount $n $M >/dev/null 2>&1; done
		stop_daemons
		continue
	fi
	for m in "${METRICS[@]}"; do
		echo "$PROFILE,$cfg,$m,${RES[$cfg,$m]}"
	done
done
[ -z "$BENCH_OUT" ] || { mkdir -p "$BENCH_OUT" && cp -r "$RAW" "$BENCH_OUT/" &&
	log "raw snapshots in $BENCH_OUT/shared_files"; }

# The table: operations as rows, configurations as columns.
{
	echo
	echo "Shared files, $PROFILE (RTT ${RTT} ms): 2 clients x $ROUNDS rounds x $FILES files, upstream operations at knfsd"
	echo
	line="| metric |" sep="|---|"
	for cfg in $CONFIGS; do line+=" $cfg |" sep+="---:|"; done
	echo "$line"
	echo "$sep"
	for m in "${METRICS[@]}"; do
		line="| ${m#server_} |"
		for cfg in $CONFIGS; do line+=" ${RES[$cfg,$m]:-failed} |"; done
		echo "$line"
	done
	echo
	echo "The same loop on client-local files (no NFS) takes ${RES[local,elapsed_s_client1]} / ${RES[local,elapsed_s_client2]} s (UML's fork/exec of each cat)."
	echo
} >&2
[ ${#FAILED[@]} = 0 ] || die "failed configurations: ${FAILED[*]}"
