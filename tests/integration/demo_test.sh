#!/usr/bin/env bash
# make demo cannot rot silently: lab/demo.sh, at DEMO_SCALE=small (about two
# minutes), exits 0 and each of its five scenes prints what it measured in
# that run: (a) cold and (b) warm times through nache and direct (and the
# LAN run for scale), (c) the untar times and the remote holding every file
# after nachectl flush --wait, (d) the recall and the office reading the
# new data, (e) nachectl status and the three /metrics figures. No stale
# text ("pass-through", "come next").
set -uo pipefail
source "$(dirname "$0")/itest.sh"

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
rc=0
# (As shipped: not the suites' No_Root_Squash that itest.sh exports.)
DEMO_SCALE=small env -u LAB_NACHE_SQUASH bash "$NACHE_SOURCE_DIR/lab/demo.sh" >"$OUT" 2>&1 || rc=$?
cat "$OUT" >&2

# scene X — the demo's output from its "== (X)" headings to the next
# heading of another scene (or the teardown).
scene() {
	awk -v s="== ($1)" 'index($0, "== ") == 1 { on = index($0, s) == 1 }
		on' "$OUT"
}
# lines X REGEX N — scene X has at least N lines matching REGEX.
lines() {
	local got
	got=$(scene "$1" | grep -Ec -- "$2")
	[ "$got" -ge "$3" ] ||
		{ echo "scene ($1): $got lines match '$2', want $3" >&2; return 1; }
}
SEC='[0-9]+\.[0-9]{2} s'

demo_exits_0() { expect_eq "demo exit status" "$rc" 0; }
a_cold_times_both_sides() { lines a "^   [a-zA-Z].* $SEC +$SEC\$" 3; }
b_warm_times_both_sides_and_the_lan() {
	lines b "^   [a-zA-Z].* $SEC +$SEC\$" 3 &&
		lines b "direct on a LAN .* [0-9.]+ s, [0-9.]+ s, [0-9.]+ s\$" 1
}
c_untar_times_and_the_remote_has_it_all() {
	lines c "tar -x +$SEC\$" 2 &&
		lines c "files at the remote +([0-9]+) of \\1\$" 1 &&
		lines c "remote had it all.* $SEC\$" 1
}
d_recall_and_the_new_data_at_once() {
	lines d "writes plan.txt .* $SEC\$" 1 &&
		lines d "recalls nache answered +[1-9][0-9]*\$" 1 &&
		lines d "reads plan.txt: +plan v2: ship on Monday \\($SEC\\)\$" 1
}
e_status_and_three_metrics() {
	lines e "upstream .*, connected\$" 1 &&
		lines e "ops saved .* [0-9]+ of [1-9][0-9]*\$" 1 &&
		lines e "cache hit ratio +[0-9.]+ % \\([0-9]+ of [1-9][0-9]* lookups\\)\$" 1 &&
		lines e "WAN bytes saved .* [0-9]+\\.[0-9] MiB\$" 1
}
no_stale_text() {
	! grep -Ein 'pass-through|come next' "$OUT" ||
		{ echo "stale text above" >&2; return 1; }
}

check demo_exits_0 demo_exits_0
check a_cold_times_both_sides a_cold_times_both_sides
check b_warm_times_both_sides_and_the_lan b_warm_times_both_sides_and_the_lan
check c_untar_times_and_the_remote_has_it_all c_untar_times_and_the_remote_has_it_all
check d_recall_and_the_new_data_at_once d_recall_and_the_new_data_at_once
check e_status_and_three_metrics e_status_and_three_metrics
check no_stale_text no_stale_text
itest_finish
