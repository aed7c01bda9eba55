#!/usr/bin/env bash
# The benchmark runner (make bench, bench/run.sh) end to end at smoke scale:
# one workload, one client, the lan profile, the direct and nache
# configurations against the knfsd remote, the personality run by
# Filebench.  The runner owns its lab (its traps tear it down, also on
# failure); this test checks its outputs — results.csv with the header and
# real numbers for both configurations (timed duration, server ops counted
# by knfsd, Filebench's ops and p99 latency), summary.md, a plot when
# matplotlib is importable (the clear "no plots" notice otherwise), the
# latest symlink — and that nothing of the runner's lab is left behind.
# Before the lab, two refusals that need none: SHARED=1 with a workload
# that writes its set, and a missing filebench binary.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

OUT=$(mktemp -d "${TMPDIR:-/tmp}/bench-smoke.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
LOG=$OUT/run.log

# refused WHY PATTERN ENV... — bench/run.sh with ENV exits 2 at once,
# saying PATTERN, and starts no lab.
refused() {
	local why=$1 pattern=$2 out rc
	shift 2
	out=$(env "$@" BENCH_OUT="$OUT/refused" timeout 60 bash "$NACHE_SOURCE_DIR/bench/run.sh" 2>&1)
	rc=$?
	[ "$rc" = 2 ] || { echo "$why: exit $rc, expected 2: $out" >&2; return 1; }
	grep -q -- "$pattern" <<<"$out" || { echo "$why: no '$pattern' in: $out" >&2; return 1; }
	! grep -q '\] lab [0-9a-f]* in ' <<<"$out" || { echo "$why: a lab was started" >&2; return 1; }
}
check shared_refused_for_a_workload_that_writes \
	refused "SHARED=1 varmail" "SHARED=1: 'varmail' writes or deletes" \
	WORKLOAD=varmail SHARED=1
check missing_filebench_refused \
	refused "FILEBENCH missing" "no filebench at $OUT/none" \
	WORKLOAD=webserver FILEBENCH="$OUT/none"

echo "=== $ITEST_NAME: running bench/run.sh (output in $LOG)" >&2
t0=$SECONDS
WORKLOAD=webserver PROFILE=lan CLIENTS=1 CONFIGS=direct,nache SCALE=smoke \
	DURATION=${BENCH_SMOKE_DURATION:-5} BENCH_OUT=$OUT/out \
	bash "$NACHE_SOURCE_DIR/bench/run.sh" >"$LOG" 2>&1
RC=$?
echo "=== $ITEST_NAME: runner exited $RC after $((SECONDS - t0)) s" >&2
RUN=$OUT/out/latest
CSV=$RUN/results.csv

# value CONFIG METRIC — the metric's value in the config's row (empty if none).
value() {
	awk -F, -v c="$1" -v m="$2" '$1 == "webserver" && $2 == "lan" &&
		$3 == 1 && $4 == c && $5 == m { print $6; exit }' "$CSV"
}

# positive WHAT VALUE — fails unless VALUE is a number > 0.
positive() {
	"$LAB_PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' \
		"${2:-0}" 2>/dev/null || { echo "expected $1 > 0, got '${2:-}'" >&2; return 1; }
}

runner_succeeded() {
	[ "$RC" = 0 ] || { tail -n 40 "$LOG" >&2; return 1; }
}

csv_has_header() {
	[ -f "$CSV" ] || { echo "no $CSV" >&2; return 1; }
	expect_eq "header" "$(head -n 1 "$CSV")" "workload,profile,clients,config,metric,value,unit"
}

# config_measured CONFIG — a timed run and server ops for CONFIG.
config_measured() {
	positive "$1 duration_s" "$(value "$1" duration_s)" &&
		positive "$1 ops" "$(value "$1" ops)" &&
		positive "$1 latency_p99_ms" "$(value "$1" latency_p99_ms)" &&
		expect_eq "$1 errors" "$(value "$1" errors)" 0 &&
		positive "$1 server_ops_total" "$(value "$1" server_ops_total)" &&
		positive "$1 server_compounds" "$(value "$1" server_compounds)" &&
		positive "$1 server_ops_OPEN" "$(value "$1" server_ops_OPEN)"
}

# Filebench ran the personality: the run says so and each client's report
# is Filebench's.
filebench_ran() {
	grep -qx 'engine=filebench (personalities)' "$RUN/params.txt" ||
		{ echo "params.txt: $(grep engine "$RUN/params.txt")" >&2; return 1; }
	local f n=0
	for f in "$RUN"/raw/webserver-lan-c1-*/client1.json; do
		grep -q '"engine": "filebench"' "$f" || { echo "$f is not Filebench's" >&2; return 1; }
		grep -q 'IO Summary' "${f%.json}.err" || { echo "no IO Summary in ${f%.json}.err" >&2; return 1; }
		n=$((n + 1))
	done
	expect_eq "client reports" "$n" 2
}

summary_written() {
	[ -s "$RUN/summary.md" ] && grep -q '^## webserver — lan' "$RUN/summary.md" &&
		grep -q '^| \*\*server ops\*\* |' "$RUN/summary.md" ||
		{ echo "summary.md missing or incomplete" >&2; return 1; }
}

# With matplotlib a PNG per workload and profile; without, the runner must
# say so (never a silent pass).
plots_or_notice() {
	if "$LAB_PYTHON" -c 'import matplotlib' 2>/dev/null; then
		[ -s "$RUN/plots/webserver-lan.png" ] ||
			{ echo "matplotlib importable but no plots/webserver-lan.png" >&2; return 1; }
		[ "$(head -c 4 "$RUN/plots/webserver-lan.png" | od -An -c | tr -d ' ')" = '211PNG' ] ||
			{ echo "webserver-lan.png is not a PNG" >&2; return 1; }
	else
		grep -q 'matplotlib is not importable' "$LOG" &&
			grep -q 'No plots' "$RUN/summary.md" ||
			{ echo "no matplotlib, and no notice of it" >&2; return 1; }
	fi
}

latest_points_to_run() {
	[ -L "$OUT/out/latest" ] && [ -f "$OUT/out/$(readlink "$OUT/out/latest")/results.csv" ] ||
		{ echo "bench/out/latest is not a link to the run" >&2; return 1; }
}

lab_torn_down() {
	local id
	id=$(sed -n 's/.*\] lab \([0-9a-f]*\) in .*/\1/p' "$LOG" | head -n 1)
	[ -n "$id" ] || { echo "no lab id in the runner's output" >&2; return 1; }
	if ip netns list | grep -q "^nl-$id-" || [ -e "$LAB_REGISTRY/$id" ]; then
		echo "lab $id left behind: $(ip netns list | grep "^nl-$id-")" >&2
		return 1
	fi
}

check runner_exits_0 runner_succeeded
check results_csv_has_the_header csv_has_header
check direct_row_has_duration_and_server_ops config_measured direct
check nache_row_has_duration_and_server_ops config_measured nache
check filebench_ran_the_personality filebench_ran
check summary_md_has_the_tables summary_written
check png_plot_or_clear_notice plots_or_notice
check latest_symlink_points_to_the_run latest_points_to_run
check runner_lab_torn_down lab_torn_down
itest_finish
