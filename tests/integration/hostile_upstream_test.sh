#!/usr/bin/env bash
# A hostile upstream (issue 15): between nache and its remote sits a
# man-in-the-middle (tools/hostile_proxy.py) that corrupts what the remote
# sends back: short (truncated) replies, garbage in the results, a
# fragment length of 2 GiB or one a little too long (the stream out of
# step), duplicated, reordered and late replies, and the connection
# dropped before a call reaches the remote, after the remote executed it
# (its reply lost) and halfway through a reply. For each, in both write
# policies and both upstream minor versions, a kernel client runs a small
# workload through nache: create and write a 4 MiB file (fsync), create
# and rename a small one, rename a file the remote has and set its mode
# and mtime, remove another, mkdir, read a 2 MiB file of the remote's and
# the written one back. Each check proves that the mutation happened (the
# proxy's log) and reached nache (its upstream metrics count the failure
# it must have seen), that every step of the client succeeded, that nache
# is the process it was, and that once the proxy passes everything again
# and write-back has drained, the remote holds every byte, name and
# attribute the client was told it has (also when a step failed).
#
# The client's mount is hard: nache answers what it cannot get from the
# remote with NFS4ERR_DELAY, which the kernel retries (hard or soft), so
# every step must end in success; an error is a wrong answer, and nache
# not answering at all shows as the guest command's timeout (exit 124)
# rather than as a soft mount's EIO.#
# HOSTILE_CONFIGS (default "v41-wt v41-wb v40-wt v40-wb"): which upstream
# minor versions (v40, v41) and write policies (wt: write_through, wb:
# write_back on a single-writer export) run, in order. HOSTILE_TRACE=1:
# the proxy's log also has every call and reply (for post-mortems).
#
# Over NFSv4.0 a lost reply to an OPEN (or CLOSE, LOCK...) leaves the
# owner's seqid unknown; nache resends the request unchanged so that the
# remote's replay cache answers it (drop_reply_open; before, the next OPEN
# of the owner was taken for a retransmission and answered with another
# file's reply). v40-wb's drop_reply_write found the converse: a new
# owner's first OPEN, which the remote does not sequence, resent as a
# GUARDED create made a false conflict.
set -uo pipefail
: "${LAB_CMD_TIMEOUT:=90}"
export LAB_CMD_TIMEOUT LAB_NACHE_CONNECTIONS=1
source "$(dirname "$0")/itest.sh"

CONFIGS=${HOSTILE_CONFIGS:-"v41-wt v41-wb v40-wt v40-wb"}
PORT=12049
HOSTILE=("$LAB_PYTHON" -B "$ITEST_DIR/tools/hostile_proxy.py")
# nache reaches its remote through the proxy, on its WAN address.
export LAB_NACHE_UPSTREAM=$LAB_NACHE_WAN_ADDR LAB_NACHE_UPSTREAM_PORT=$PORT
# No NFSv4.0 callback service: the remote would call from an address that
# is not the upstream's (the proxy's), and this remote delegates nothing.
export LAB_NACHE_CALLBACK=
# INFO: nache's "upstream <reason>, client retries" lines, for post-mortems.
export LAB_NACHE_GLOBAL='LOG { COMPONENTS { FSAL = INFO; } }'
# A late reply must come after the call timed out: 2 s here, 3 s late.
BASE='Upstream_Timeout = 2000;'
WB='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 1;'

lab_init && lab_net_up lan && lab_remote_vfs_start || { echo "lab did not start"; exit 1; }
CTL=$LAB_DIR/hostile.sock
PLOG=$LAB_DIR/logs/hostile-mutations.log
lab_helper_start hostile "$LAB_NS_LAN" "${HOSTILE[@]}" serve \
	--listen "$LAB_NACHE_WAN_ADDR:$PORT" --upstream "$LAB_REMOTE_ADDR:2049" \
	--control "$CTL" --log "$PLOG" ${HOSTILE_TRACE:+--trace} &&
	lab_wait_until 10 test -S "$CTL" && lab_clients_start 1 ||
	{ echo "lab did not start"; exit 1; }
M=/mnt/n
R=$LAB_REMOTE_EXPORT_DIR

ctl() { "${HOSTILE[@]}" ctl "$CTL" "$@" >/dev/null; }
dirty() { metric nache_dirty_bytes; }
# transport_failures A[+B...] — compounds that failed upstream with
# transport_A (+ transport_B ...), summed.
transport_failures() {
	local s v n=0
	for s in ${1//+/ }; do
		v=$(metric nache_upstream_compounds_total "status=\"transport_$s\"") || return 1
		n=$((n + v))
	done
	echo $n
}

# counted_more A[+B...] N — nache counted more than N such failures.
counted_more() {
	local n
	n=$(transport_failures "$1") && [ "$n" -gt "$2" ]
}

# The cases: NAME, the proxy's rule, what its log says when the mutation
# happened (an ERE), and what nache must count for it
# (nache_upstream_compounds_total{status="transport_<it>"}, or the sum of
# several, A+B, when which one depends on timing; "-": nothing,
# the reply is a valid one: duplicates and reordered replies are matched
# by XID). Selectors: the replies to compounds with op=38 WRITE, 25 READ,
# 9 GETATTR, 18 OPEN, 29 RENAME, 28 REMOVE, 6 CREATE (mkdir), 34
# SETATTR; none: any reply.
# A reply can only be reordered behind another one on its connection:
# the 4 MiB file is written, and the 2 MiB one read, with several WRITEs
# or READs in flight at once (the kernel's, then nache's write-behind,
# flusher or readahead), on nache's one upstream connection (with two,
# concurrent READs could go one on each, and the reorder then never
# happened: seen once in v41-wt reorder_read).
CASES=(
	"truncate_write|mode=truncate op=38 count=2|cut [0-9]+ -> |decode_error"
	"truncate_read|mode=truncate op=25 count=2|cut [0-9]+ -> |decode_error"
	"garbage_count_getattr|mode=garbage op=9 count=2|result count at byte|decode_error"
	"garbage_op_rename|mode=garbage field=op op=29 count=1|op number at byte|decode_error"
	"garbage_status_setattr|mode=garbage field=status op=34 count=1|COMPOUND status at byte|decode_error"
	"oversize_write|mode=oversize op=38 count=1|claims 0x7ffffff0|disconnected"
	"oversize_desync_write|mode=oversize extra=4000 op=38 count=1|claims 0x[0-9a-f]+ bytes|timeout+disconnected+decode_error"
	"duplicate_any|mode=duplicate every=2 count=8|sent twice|-"
	"reorder_write|mode=reorder op=38 count=3|sent after the reply to xid|-"
	"reorder_read|mode=reorder op=25 count=3|sent after the reply to xid|-"
	"late_write|mode=late op=38 count=1 delay_ms=3000|held for 3000 ms|timeout"
	"late_read|mode=late op=25 count=1 delay_ms=3000|held for 3000 ms|timeout"
	"drop_request_write|mode=drop at=request op=38 count=1|before the call reached|disconnected"
	"drop_request_rename|mode=drop at=request op=29 count=1|before the call reached|disconnected"
	"drop_reply_write|mode=drop op=38 count=1|before its reply|disconnected"
	"drop_reply_open|mode=drop op=18 count=1|before its reply|disconnected"
	"drop_reply_rename|mode=drop op=29 count=1|before its reply|disconnected"
	"drop_reply_remove|mode=drop op=28 count=1|before its reply|disconnected"
	"drop_reply_mkdir|mode=drop op=6 count=1|before its reply|disconnected"
	"garbage_count_remove|mode=garbage op=28 count=1|result count at byte|decode_error"
	"late_remove|mode=late op=28 count=1 delay_ms=3000|held for 3000 ms|timeout"
	"drop_reply_setattr|mode=drop op=34 count=1|before its reply|disconnected"
	"drop_midreply_getattr|mode=drop at=midreply op=9 count=1|sent [0-9]+ of [0-9]+ bytes|disconnected"
)

# prepare DIR — what the remote holds in DIR before its case: "old" (to be
# renamed, its mode and mtime set), "gone" (to be removed), "big" (2 MiB
# to be read through nache: no cache has it yet). Made while nache is
# down (the export is nache's alone: Single_Writer).
prepare() {
	mkdir "$R/$1" && echo "old $1" >"$R/$1/old" && echo gone >"$R/$1/gone" &&
		head -c $((2 << 20)) /dev/urandom >"$R/$1/big" &&
		sha256sum <"$R/$1/big" | cut -c1-64 >"$LAB_DIR/$1.big"
}

# The client's workload in directory $1: runs every step, says which ones
# failed (exit 1 then), and prints sha=<sha256 of the data it wrote>.
workload() {
	on 1 "cd $M/$1 || exit 1
		failed=0
		run() { \"\$@\" || { echo \"step failed: \$*\"; failed=1; }; }
		head -c 4200000 /dev/urandom > /tmp/w.a
		run dd if=/tmp/w.a of=a bs=256k conv=fsync status=none
		run sh -c 'echo small > b'
		run mv b c
		run mv old new
		run chmod 640 new
		run touch -m -d @1000000000 new
		run rm gone
		run mkdir sub
		run sync
		run sh -c 'sha256sum < big > /tmp/big.sha'
		[ \"\$(cut -c1-64 /tmp/big.sha)\" = $(cat "$LAB_DIR/$1.big") ] ||
			{ echo 'big: read other bytes than the remote has'; failed=1; }
		echo 3 > /proc/sys/vm/drop_caches
		run cmp /tmp/w.a a
		echo sha=\$(sha256sum < /tmp/w.a | cut -c1-64)
		exit \$failed"
}

# remote_has DIR SHA — the remote's DIR is what the client was told.
remote_has() {
	local d=$R/$1
	[ "$(sha256sum <"$d/a" 2>/dev/null | cut -c1-64)" = "$2" ] &&
		[ "$(cat "$d/c" 2>/dev/null)" = small ] &&
		[ "$(cat "$d/new" 2>/dev/null)" = "old $1" ] &&
		[ "$(stat -c '%a %Y' "$d/new" 2>/dev/null)" = "640 1000000000" ] &&
		[ "$(sha256sum <"$d/big" | cut -c1-64)" = "$(cat "$LAB_DIR/$1.big")" ] &&
		[ -d "$d/sub" ] && [ "$(ls "$d" | tr '\n' ' ')" = "a big c new sub " ]
}

describe_remote() {
	local d=$R/$1
	echo "remote $1: $(cd "$d" && ls -l --time-style=+%s | tail -n +2 | tr -s ' ' | tr '\n' ';')" >&2
	echo "remote a: $(sha256sum <"$d/a" 2>/dev/null | cut -c1-64), acknowledged: $2; dirty bytes: $(dirty)" >&2
}

# fired LABEL ERE — the proxy logged a mutation of LABEL matching ERE.
fired() { grep -F "label=$1 " "$PLOG" | grep -qE "$2"; }

# hostile_case CFG DIR LABEL RULE SAYS COUNTS — one check (see above).
hostile_case() {
	local cfg=$1 dir=$2 label=$3 rule=$4 says=$5 counts=$6
	local pid sha out rc=0 ok=0 f0=0 log0
	pid=$(cat "$LAB_DIR/nache-pid.$cfg")
	log0=$(wc -l <"$(lab_nache_log)")
	[ "$counts" = - ] || f0=$(transport_failures "$counts") || return 1
	ctl set "$rule" "label=$label" || { echo "proxy refused the rule" >&2; return 1; }
	out=$(workload "$dir" 2>&1) || rc=$?
	sha=$(sed -n 's/^sha=//p' <<<"$out")
	# A write-back export sends its writes later: the mutation may come
	# with the flush.
	lab_wait_until 30 fired "$label" "$says" ||
		{ echo "the mutation never happened ($rule)" >&2; ok=1; }
	ctl pass || { echo "proxy: pass refused" >&2; ok=1; }
	if [ $rc != 0 ]; then
		echo "client workload failed (exit $rc): $out" >&2
		ok=1
	fi
	# What the client was told it has, even after a failed step (a failed
	# rm or mkdir leaves the remote as a successful one would).
	if [ -z "$sha" ]; then
		echo "the workload did not finish" >&2
		ok=1
	elif ! lab_wait_until 30 eval 'remote_has "$dir" "$sha" && [ "$(dirty)" = 0 ]'; then
		echo "acknowledged changes missing at the remote after the drain" >&2
		describe_remote "$dir" "$sha"
		ok=1
	fi
	if [ "$(lab_nache_pid)" != "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "nache (pid $pid) died" >&2
		ok=1
	elif [ "$counts" != - ] && ! lab_wait_until 15 counted_more "$counts" "$f0"; then
		# (A late reply's call may time out after the remote shows all.)
		echo "nache counted no transport_$counts failure" \
			"(before: $f0, now: $(transport_failures "$counts"))" >&2
		ok=1
	fi
	if [ $ok != 0 ]; then
		echo "--- proxy log of $label:" >&2
		grep -F "label=$label " "$PLOG" | head -20 >&2
		echo "--- nache log meanwhile (NACHE lines):" >&2
		tail -n +"$((log0 + 1))" "$(lab_nache_log)" | grep -E 'NACHE|ganesha.nfsd-' |
			sed -E 's/^.*nache_log_to_ganesha :FSAL :/ /' | tail -40 >&2
	fi
	return $ok
}

# config_up CFG — nache restarted with CFG's options, the directories of
# CFG's cases prepared at the remote meanwhile, the client's mount on.
config_up() {
	local cfg=$1 opts=$BASE c
	case $cfg in v41-*) opts+=' Upstream_Minor_Version = 1;' ;;
	v40-*) opts+=' Upstream_Minor_Version = 0;' ;; *)
		echo "unknown config $cfg" >&2; return 1 ;; esac
	case $cfg in *-wb) opts+=" $WB" ;; *-wt) ;; *)
		echo "unknown config $cfg" >&2; return 1 ;; esac
	ctl pass && lab_nache_stop || return 1
	for c in "${CASES[@]}"; do
		prepare "$cfg.${c%%|*}" || return 1
	done
	lab_nache_start "$opts" && lab_nache_pid >"$LAB_DIR/nache-pid.$cfg" || return 1
	on 1 "mountpoint -q $M" || mount_nache 1 $M vers=4.1
}

for cfg in $CONFIGS; do
	rm -f "$LAB_DIR/up"
	check "$cfg: nache up, case directories at the remote" eval 'config_up "$cfg" && touch "$LAB_DIR/up"'
	[ -e "$LAB_DIR/up" ] || continue
	for c in "${CASES[@]}"; do
		IFS='|' read -r name rule says counts <<<"$c"
		check "$cfg: $name" hostile_case "$cfg" "$cfg.$name" "$cfg/$name" "$rule" "$says" "$counts"
	done
done
echo "proxy: $("${HOSTILE[@]}" ctl "$CTL" status), $(grep -c 'conn=[0-9]* label=' "$PLOG") mutation lines" >&2
itest_finish
