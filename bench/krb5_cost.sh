#!/usr/bin/env bash
# The cost of Kerberos at nache (issue 20): the same two steps over `wan`
# with sec=sys, krb5i and krb5p on both sides, in one lab, in that order.
# The remote is knfsd 6.1 (UML) exporting sec=sys:krb5:krb5i:krb5p, with
# the lab's KDC (lab_krb5_start). For each flavour F: a fresh nache (cold
# cache, LAB_NACHE_KRB5=1: its export accepts sys, krb5, krb5i, krb5p)
# whose upstream is Upstream_Sec = F (sys: AUTH_SYS), and client 1 mounts
# it with sec=F, then
#   untar  root (UNTAR_AS) in client 1: tar -x of the smoke-size bench
#          tree (gen_tree.py --tar: 150 files, 30 directories, 1.6 MB),
#          then sync;
#   web    alice (uid 1000, with a ticket: lab_client_kinit) in client 1:
#          open + read + close of each of FILES small files (4 KiB,
#          written inside the knfsd guest beforehand) in one Python
#          process (no fork/exec per file): one cold round (nache has
#          never seen the files), then ROUNDS warm rounds.
# For each step: nache's CPU (utime + stime of its ganesha.nfsd from
# /proc/PID/stat), divided by the step's operations: for web, the loop's
# system calls (open, read, close); for both, the client's NFS RPCs
# (/proc/net/rpc/nfs in the guest). And the bytes on nache's WAN interface
# (wan0, both ways: RPC headers, GSS checksums and padding included) and
# nache's upstream file data (nache_upstream_bytes_total).
#
# Prints CSV flavour,step,metric,value on stdout and a markdown table on
# stderr. Steps: untar, web_cold, web_warm.
# usage: bench/krb5_cost.sh [ROUNDS] [FILES]   (default 50 100)
#   UNTAR_AS=root (default) or alice: who runs the untar. Under sec=krb5*
#   root's calls carry client 1's machine principal (rpc.gssd -k); with
#   Upstream_Sec = krb5* and the machine identity knfsd sees nache's
#   principal, not the office user, and alice's untar fails (bench/README.md)
#   FLAVOURS="sys krb5i krb5p" (default), any of sys krb5 krb5i krb5p
#   GEN_FILES GEN_DIRS GEN_BYTES: the untar tree (default the smoke size)
#   BENCH_OUT=DIR: keep the raw snapshots and nache's logs there
set -uo pipefail
export LAB_CMD_TIMEOUT=${LAB_CMD_TIMEOUT:-1800}
export LAB_NACHE_KRB5=1
export LAB_KNFSD_EXPORT_OPTS="rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync,sec=sys:krb5:krb5i:krb5p"
source "$(dirname "$0")/../lab/helpers.sh"
ROUNDS=${1:-50}
FILES=${2:-100}
FLAVOURS=${FLAVOURS:-sys krb5i krb5p}
UNTAR_AS=${UNTAR_AS:-root}
BENCH_OUT=${BENCH_OUT:-}
export GEN_FILES=${GEN_FILES:-150} GEN_DIRS=${GEN_DIRS:-30} GEN_BYTES=${GEN_BYTES:-1600000}
ALICE=1000
M=/mnt/k
STEPS=(untar web_cold web_warm)
declare -A RES=() # RES[flavour,step,metric]
FAILED=()

die() { echo "krb5_cost: $*" >&2; exit 1; }
log() { printf '[krb5_cost %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, got '$ROUNDS'"
[[ $FILES =~ ^[1-9][0-9]*$ ]] || die "FILES must be a positive integer, got '$FILES'"
case $UNTAR_AS in root | alice) ;; *) die "UNTAR_AS must be root or alice" ;; esac
for f in $FLAVOURS; do
	case $f in sys | krb5 | krb5i | krb5p) ;; *) die "unknown flavour '$f' (sys krb5 krb5i krb5p)" ;; esac
done
[ -x "$LAB_STAGE_DIR/bin/ganesha.nfsd" ] || die "no staged ganesha.nfsd: run 'make build'"

TICK=$(getconf CLK_TCK)
lab_init || die "lab_init failed"
RAW=$LAB_DIR/krb5_cost
mkdir -p "$RAW"
lab_net_up wan && lab_krb5_start && lab_remote_knfsd_start && lab_clients_start 1 ||
	die "lab did not start"
K=$LAB_KNFSD_EXPORT_DIR
log "creating $FILES files of 4 KiB inside the knfsd guest; the tarball here"
lab_knfsd_run "mkdir -p $K/web && for i in \$(seq 1 $FILES); do head -c 4096 /dev/urandom > $K/web/f\$i || exit 1; done &&
	chmod -R a+rX $K/web && for f in $FLAVOURS; do mkdir -p -m 1777 $K/u-\$f && chown $ALICE:$ALICE $K/u-\$f || exit 1; done; sync" ||
	die "cannot create the files at the remote"
python3 -B "$NACHE_SOURCE_DIR/bench/gen_tree.py" --tar "$RAW/tree.tar" >/dev/null ||
	die "cannot make the tarball"
chmod a+r "$RAW/tree.tar"
lab_client_kinit 1 alice || die "alice gets no ticket in client 1"
RTT=$(lab_rtt "$LAB_NS_LAN" "$LAB_KNFSD_ADDR") || RTT='?'
log "wan, RTT nache -> knfsd ${RTT} ms; flavours: $FLAVOURS"

# The read loop, run by alice in client 1: DIR FILES ROUNDS; prints its
# seconds and system calls (open, read, close of each file each round).
cat >"$RAW/web.py" <<'EOF'
import os, sys, time
d, files, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
paths = ["%s/f%d" % (d, i) for i in range(1, files + 1)]
t0, ops = time.monotonic(), 0
for r in range(rounds):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        if len(os.read(fd, 65536)) != 4096:
            sys.exit("short read of " + p)
        os.close(fd)
        ops += 3
print("%.6f %d" % (time.monotonic() - t0, ops))
EOF
chmod a+r "$RAW/web.py"

# ------------------------------------------------------------ probes

# cpu_ticks — nache's utime + stime, in clock ticks (all its threads).
cpu_ticks() {
	local pid
	pid=$(lab_nache_pid) && [ -n "$pid" ] || return 1
	# Fields after the command name: state is 3, utime 14, stime 15.
	sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }'
}
# wan_bytes — bytes sent + received on nache's WAN interface.
wan_bytes() {
	ip -n "$LAB_NS_LAN" -s -j link show dev wan0 | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats64"]
print(s["rx"]["bytes"] + s["tx"]["bytes"])'
}
# client_rpcs — NFS RPCs client 1 has sent.
client_rpcs() { on 1 "awk '\$1 == \"rpc\" { print \$2 }' /proc/net/rpc/nfs"; }
# snap NAME — the probes into RAW/F/NAME: ticks wan rpcs data_read data_written.
snap() {
	local t w r dr dw
	t=$(cpu_ticks) && w=$(wan_bytes) && r=$(client_rpcs) &&
		dr=$(metric nache_upstream_bytes_total 'direction="read"') &&
		dw=$(metric nache_upstream_bytes_total 'direction="write"') || return 1
	echo "$t $w $r $dr $dw" >"$DIR/$1"
}
# account F STEP BEFORE AFTER OPS SECONDS — RES for STEP from two snaps;
# OPS the step's system calls (empty: none counted).
account() {
	local f=$1 s=$2 t0 w0 r0 dr0 dw0 t1 w1 r1 dr1 dw1
	read -r t0 w0 r0 dr0 dw0 <"$DIR/$3"
	read -r t1 w1 r1 dr1 dw1 <"$DIR/$4"
	local cpu=$(((t1 - t0)))
	RES[$f,$s,seconds]=$6
	RES[$f,$s,nache_cpu_s]=$(awk -v c=$cpu -v t="$TICK" 'BEGIN { printf "%.2f", c / t }')
	RES[$f,$s,client_rpcs]=$((r1 - r0))
	RES[$f,$s,cpu_ms_per_rpc]=$(awk -v c=$cpu -v t="$TICK" -v n=$((r1 - r0)) \
		'BEGIN { if (n) printf "%.3f", 1000 * c / t / n; else print "-" }')
	if [ -n "$5" ]; then
		RES[$f,$s,ops]=$5
		RES[$f,$s,ops_per_s]=$(awk -v n="$5" -v s="$6" 'BEGIN { printf "%.1f", n / s }')
		RES[$f,$s,cpu_ms_per_op]=$(awk -v c=$cpu -v t="$TICK" -v n="$5" \
			'BEGIN { printf "%.3f", 1000 * c / t / n }')
	fi
	RES[$f,$s,wan_kib]=$(((w1 - w0) / 1024))
	RES[$f,$s,upstream_data_kib]=$(((dr1 - dr0 + dw1 - dw0) / 1024))
}

# ------------------------------------------------------------ one flavour

# nache_for F — a fresh nache (cold cache) to knfsd, Upstream_Sec = F.
nache_for() {
	local up="Upstream_Minor_Version = 1; Cache_Reset_On_Upstream_Change = true;"
	[ "$1" = sys ] || up+=" Upstream_Sec = $1; Upstream_Keytab = \"$LAB_KRB5_NACHE_KEYTAB\";
		Upstream_Principal = \"$LAB_KRB5_KNFSD_PRINCIPAL\";"
	lab_nache_stop
	rm -rf "$LAB_DIR/nache/cache"
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start "$up" || return 1
	[ "$1" = sys ] || grep -qF "upstream calls under RPCSEC_GSS ($1)" "$(lab_nache_log)" ||
		{ echo "nache's log does not say it calls upstream under $1" >&2; return 1; }
}

# alice CMD — CMD in client 1 as alice.
alice() { lab_client_run_as 1 $ALICE $ALICE "$1"; }
# untar_as CMD — CMD in client 1 as UNTAR_AS.
untar_as() { if [ "$UNTAR_AS" = alice ]; then alice "$1"; else on 1 "$1"; fi; }
# nache_page — nache's /metrics page.
nache_page() {
	ip netns exec "$LAB_NS_LAN" python3 -c '
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://%s:9464/metrics" % sys.argv[1], timeout=10).read().decode())' "$LAB_NACHE_ADDR"
}

run_flavour() {
	local f=$1 out t tall n rc
	DIR=$RAW/$f
	mkdir -p "$DIR"
	log "=== $f: fresh nache, Upstream_Sec = $f; client mounts with sec=$f"
	lab_knfsd_run "sync; echo 3 > /proc/sys/vm/drop_caches" &&
		on 1 "sync; echo 3 > /proc/sys/vm/drop_caches" || return 1
	nache_for "$f" || { echo "nache did not start" >&2; return 1; }
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export $M "vers=4.1,sec=$f" || return 1
	on 1 "grep -E ' $M nfs4 .*sec=$f(,|\$| )' /proc/mounts" >/dev/null ||
		{ echo "$M is not mounted with sec=$f" >&2; return 1; }

	log "$f: untar of $GEN_FILES files, then sync"
	snap untar.0 || return 1
	out=$(untar_as "t0=\$(date +%s%N); tar -x --no-same-owner -f $RAW/tree.tar -C $M/u-$f || exit 1
		t1=\$(date +%s%N); sync; t2=\$(date +%s%N); echo \$((t1 - t0)) \$((t2 - t0))" 2>"$DIR/untar.err")
	rc=$?
	snap untar.1 || return 1
	if [ $rc != 0 ]; then
		echo "$f: untar as $UNTAR_AS failed (exit $rc): $(grep -c 'Cannot close' "$DIR/untar.err") x 'Cannot close', $(grep -c 'Cannot utime' "$DIR/untar.err") x 'Cannot utime'; the last lines:" >&2
		tail -6 "$DIR/untar.err" >&2
		echo "$f: at knfsd:" >&2
		lab_knfsd_run "ls -ln $K/u-$f $K/u-$f/src | head -8" >&2
		echo "$f: upstream operations that failed, and nache's data written upstream:" >&2
		nache_page | grep -E 'status="(NFS4ERR|transport)|upstream_bytes_total' >&2
		cp "$(lab_nache_log)" "$DIR/nache.log" 2>/dev/null
		grep -E ":(CRIT|MAJ|WARN) :" "$DIR/nache.log" | tail -10 | sed 's/^/    nache: /' >&2
		return 1
	fi
	read -r t tall <<<"$out"
	RES[$f,untar,tar_s]=$(awk -v n="$t" 'BEGIN { printf "%.2f", n / 1e9 }')
	account "$f" untar untar.0 untar.1 "" "$(awk -v n="$tall" 'BEGIN { printf "%.2f", n / 1e9 }')"
	n=$(lab_knfsd_run "find $K/u-$f -type f | wc -l")
	[ "$n" = "$GEN_FILES" ] || { echo "$f: knfsd has $n of $GEN_FILES files after the sync" >&2; return 1; }

	log "$f: 1 cold + $ROUNDS warm rounds over $FILES files"
	snap web.0 || return 1
	# The cold round alone (nache's CPU is sampled around each run), then
	# ROUNDS warm ones.
	out=$(alice "python3 -B $RAW/web.py $M/web $FILES 1") || { echo "$f: cold round failed" >&2; return 1; }
	snap web.1 || return 1
	read -r t n <<<"$out"
	account "$f" web_cold web.0 web.1 "$n" "$(awk -v s="$t" 'BEGIN { printf "%.2f", s }')"
	out=$(alice "python3 -B $RAW/web.py $M/web $FILES $ROUNDS") || { echo "$f: warm rounds failed" >&2; return 1; }
	snap web.2 || return 1
	read -r t n <<<"$out"
	account "$f" web_warm web.1 web.2 "$n" "$(awk -v s="$t" 'BEGIN { printf "%.2f", s }')"
	lab_client_umount 1 $M
	cp "$(lab_nache_log)" "$DIR/nache.log" 2>/dev/null
	grep -E ":(CRIT|MAJ|WARN) :|RPCSEC_GSS context" "$DIR/nache.log" | tail -20 | sed 's/^/    nache: /' >&2
	return 0
}

# ------------------------------------------------------------ the run

echo "flavour,step,metric,value"
METRICS=(seconds tar_s ops ops_per_s nache_cpu_s cpu_ms_per_op client_rpcs cpu_ms_per_rpc
	wan_kib upstream_data_kib)
for f in $FLAVOURS; do
	if ! run_flavour "$f"; then
		echo "krb5_cost: flavour $f FAILED" >&2
		FAILED+=("$f")
		[ -f "$(lab_nache_log)" ] && tail -30 "$(lab_nache_log)" | sed 's/^/    nache: /' >&2
		lab_client_umount 1 $M >/dev/null 2>&1
		continue
	fi
	for s in "${STEPS[@]}"; do
		for m in "${METRICS[@]}"; do
			[ -z "${RES[$f,$s,$m]:-}" ] || echo "$f,$s,$m,${RES[$f,$s,$m]}"
		done
	done
done
lab_nache_stop
[ -z "$BENCH_OUT" ] || { mkdir -p "$BENCH_OUT" && cp -r "$RAW" "$BENCH_OUT/" &&
	log "raw snapshots in $BENCH_OUT/krb5_cost"; }

{
	echo
	echo "Kerberos cost at nache, wan (RTT ${RTT} ms), knfsd 6.1: untar of $GEN_FILES files; $FILES files x $ROUNDS rounds"
	echo
	line="| step | metric |" sep="|---|---|"
	for f in $FLAVOURS; do line+=" $f |" sep+="---:|"; done
	echo "$line"
	echo "$sep"
	for s in "${STEPS[@]}"; do
		for m in "${METRICS[@]}"; do
			line="| $s | $m |" any=
			for f in $FLAVOURS; do
				line+=" ${RES[$f,$s,$m]:--} |"
				[ -z "${RES[$f,$s,$m]:-}" ] || any=1
			done
			[ -z "$any" ] || echo "$line"
		done
	done
	echo
} >&2
[ ${#FAILED[@]} = 0 ] || die "failed flavours: ${FAILED[*]}"
