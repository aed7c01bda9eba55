#!/usr/bin/env bash
# nachectl against a running nache: the admin socket is reachable from the
# host (a Unix socket in the lab's directory, whatever namespace nache runs
# in); status --json parses and shows the upstream connected; flush --wait
# sends write-back data the remote did not have yet, and flush PATH only
# that subtree's; drain makes the next write reach the remote at once (and
# undrain ends it); warm --data --wait fetches a tree so that a client
# reads it with no READ upstream, and evict makes reading it cost READs
# again; a pin outlives a restart of the daemon; against a stopped daemon
# nachectl fails, naming the socket it tried.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

NACHECTL=$NACHE_BUILD_DIR/stage/bin/nachectl
[ -x "$NACHECTL" ] || { echo "no $NACHECTL: build first"; exit 1; }

# Write-back on a single-writer export, nothing flushed by age during the
# test: only nachectl (or a drain) sends data.
lab_init && lab_net_up lan && lab_remote_vfs_start &&
	lab_nache_start 'Write_Policy = write_back; Single_Writer = true; Flush_Age = 3600;' &&
	lab_clients_start 1 || { echo "lab did not start"; exit 1; }
M=/mnt/n
mount_nache 1 $M vers=4.1 || { echo "mount failed"; exit 1; }
# The default: nache.sock beside Ganesha's pid file (lab.sh: -p
# $LAB_DIR/nache/ganesha.pid).
SOCK=$LAB_DIR/nache/nache.sock

ctl() { "$NACHECTL" --socket "$SOCK" "$@"; }

# json_get EXPR — evaluates the Python expression EXPR over the parsed
# `nachectl status --json` (as s); prints the result, fails when the
# output does not parse.
json_get() {
	ctl status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$1"
}

# data NAME SIZE — random bytes in $LAB_DIR (the guests see it too).
data() { head -c "$2" /dev/urandom >"$LAB_DIR/$1"; }

socket_is_roots_and_private() {
	expect_eq "socket mode and owner" "$(stat -c '%F %a %u' "$SOCK")" "socket 600 0"
}

status_json_parses_and_shows_the_upstream_connected() {
	local got text
	lab_wait_until 20 test "$(json_get 's["exports"][0]["upstream"]["connected"]')" = True ||
		{ echo "status: $(ctl status --json)" >&2; return 1; }
	got=$(json_get '"%s:%d%s v4.%d" % tuple(s["exports"][0]["upstream"][k] for k in ("server", "port", "path", "minor_version"))') &&
		expect_eq "upstream" "$got" "$LAB_REMOTE_ADDR:2049/export v4.$(lab_nache_minor)" &&
		expect_eq "client id set" "$(json_get 'int(s["exports"][0]["upstream"]["client_id"], 16) != 0')" True &&
		expect_eq "lease renewed lately" \
			"$(json_get '0 <= s["exports"][0]["upstream"]["lease_age_s"] <= s["exports"][0]["upstream"]["lease_time_s"]')" True &&
		expect_eq "write-back" "$(json_get 's["exports"][0]["writeback"]["enabled"]')" True &&
		text=$(ctl status) &&
		# (Not `ctl status | grep -q`: grep leaving at its first match
		# would fail the pipeline with nachectl's SIGPIPE.)
		grep -q "^  upstream .*$LAB_REMOTE_ADDR:2049/export, NFSv4.$(lab_nache_minor), connected$" <<<"$text" ||
		{ echo "status: ${text:-}" >&2; return 1; }
	echo "$text" >&2  # (for the log)
}

stats_shows_the_metrics_counters() {
	local out
	on 1 "ls -l $M >/dev/null; ls -l $M >/dev/null" &&
		out=$(ctl stats) &&
		grep -q '^export 1$' <<<"$out" &&
		grep -q 'nache_local_ops_total{op=getattr}' <<<"$out" &&
		grep -q 'nache_upstream_connected  1' <<<"$out" &&
		grep -Eq 'answered here without a round trip: [1-9][0-9]* of' <<<"$out" ||
		{ echo "$out" >&2; return 1; }
}

flush_wait_sends_what_was_dirty() {
	local out
	data wb1 $((2 << 20)) &&
		on 1 "cp $LAB_DIR/wb1 $M/wb1 && sync" &&
		step "not at the remote before the flush" test ! -e "$LAB_REMOTE_EXPORT_DIR/wb1" &&
		step "dirty before the flush" test "$(json_get 's["exports"][0]["writeback"]["dirty_bytes"]')" -ge $((2 << 20)) &&
		out=$(ctl flush --wait --timeout 120) &&
		step "progress shown" grep -q 'dirty in [1-9][0-9]* objects' <<<"$out" &&
		step "ends with nothing dirty" grep -q 'nothing dirty' <<<"$out" &&
		step "the remote has it" cmp "$LAB_DIR/wb1" "$LAB_REMOTE_EXPORT_DIR/wb1" &&
		expect_eq "dirty after" "$(json_get 's["exports"][0]["writeback"]["dirty_bytes"]')" 0 &&
		expect_eq "dirty files after" "$(json_get 's["exports"][0]["writeback"]["dirty_files"]')" 0 ||
		{ echo "flush said: ${out:-}" >&2; return 1; }
}

drain_makes_the_next_write_reach_the_remote_at_once() {
	data d1 $((1 << 20)) && data d2 $((1 << 20)) && data d3 4096 &&
		on 1 "cp $LAB_DIR/d1 $M/d1 && sync" &&
		step "written back before the drain" test ! -e "$LAB_REMOTE_EXPORT_DIR/d1" &&
		ctl drain --timeout 120 &&
		step "the drain flushed it" cmp "$LAB_DIR/d1" "$LAB_REMOTE_EXPORT_DIR/d1" &&
		expect_eq "draining" "$(json_get 's["draining"] and s["exports"][0]["writeback"]["draining"]')" True &&
		on 1 "cp $LAB_DIR/d2 $M/d2 && sync" &&
		step "written through while draining" cmp "$LAB_DIR/d2" "$LAB_REMOTE_EXPORT_DIR/d2" &&
		expect_eq "nothing dirty while draining" "$(json_get 's["exports"][0]["writeback"]["dirty_bytes"]')" 0 &&
		ctl undrain &&
		expect_eq "undrained" "$(json_get 's["draining"]')" False &&
		on 1 "cp $LAB_DIR/d3 $M/d3 && sync" &&
		step "written back again after undrain" test ! -e "$LAB_REMOTE_EXPORT_DIR/d3"
}

flush_path_sends_only_that_subtree() {
	local out
	data fp1 $((1 << 20)) && data fp2 $((1 << 20)) &&
		on 1 "mkdir -p $M/fp1 $M/fp2 && cp $LAB_DIR/fp1 $M/fp1/x && cp $LAB_DIR/fp2 $M/fp2/y && sync" &&
		step "neither at the remote before" test ! -e "$LAB_REMOTE_EXPORT_DIR/fp1/x" -a ! -e "$LAB_REMOTE_EXPORT_DIR/fp2/y" &&
		out=$(ctl flush /fp1 --wait --timeout 120) &&
		step "ends with the subtree at the remote" grep -q 'nothing dirty at or below /fp1' <<<"$out" &&
		step "fp1/x at the remote" cmp "$LAB_DIR/fp1" "$LAB_REMOTE_EXPORT_DIR/fp1/x" &&
		step "fp2/y not flushed with it" test ! -e "$LAB_REMOTE_EXPORT_DIR/fp2/y" &&
		ctl flush --wait --timeout 120 >/dev/null &&
		step "fp2/y at the remote after a flush of everything" cmp "$LAB_DIR/fp2" "$LAB_REMOTE_EXPORT_DIR/fp2/y" ||
		{ echo "flush said: ${out:-}" >&2; return 1; }
}

# A tree at the remote, made there (nache has seen none of it): a/ is read
# after the warm, b/ after the evict (the client's own page cache never
# holds what a check reads).
WT=$LAB_REMOTE_EXPORT_DIR/wt
mkdir -p "$WT/a/sub" "$WT/b/sub" && for part in a b; do
	for i in 1 2; do head -c $((4 << 20)) /dev/urandom >"$WT/$part/big$i"; done
	for i in $(seq 1 20); do head -c $((16 << 10)) /dev/urandom >"$WT/$part/sub/small$i"; done
done
reads() { metric nache_upstream_ops_total 'op="READ"'; }
# same_on_client PART — client 1 reads every file of wt/PART through nache;
# the same bytes as the remote's.
same_on_client() {
	local want got
	want=$(cd "$WT/$1" && find . -type f | sort | xargs sha256sum | sha256sum)
	got=$(on 1 "cd $M/wt/$1 && find . -type f | sort | xargs sha256sum | sha256sum")
	expect_eq "wt/$1 read through nache" "$got" "$want"
}

warm_data_wait_then_reading_the_tree_costs_no_read() {
	local out before
	out=$(ctl warm /wt --data --wait) &&
		step "ends with the summary" grep -q '^warm of /wt done in .*: 5 directories, 44 files, 16.6 MiB fetched, 0 B already cached, 0 skipped$' <<<"$out" &&
		step "status shows the last warm" grep -q '^  warm         /wt: done in ' <<<"$(ctl status)" &&
		before=$(reads) &&
		same_on_client a &&
		expect_eq "READs upstream while the client read wt/a" "$(reads)" "$before" ||
		{ echo "warm said: ${out:-}" >&2; return 1; }
	echo "$out" | tail -n 1 >&2  # (the numbers, for the log)
}

warm_in_the_background_shows_in_status_and_cancel_says_when_none_runs() {
	local out rc=0 err
	out=$(ctl warm wt/a) &&
		step "returns at once" grep -q '^warm of /wt/a started (job [0-9]*)' <<<"$out" &&
		lab_wait_until 60 eval 'json_get "s[\"exports\"][0][\"warm\"][\"outcome\"]" | grep -qx done' &&
		expect_eq "its files" "$(json_get 's["exports"][0]["warm"]["files"]')" 22 &&
		{ err=$(ctl warm --cancel 2>&1) || rc=$?; } &&
		expect_eq "cancel exit status" $rc 1 &&
		step "says none runs" grep -q 'no warm is running' <<<"$err" ||
		{ echo "warm said: ${out:-} ${err:-}" >&2; return 1; }
}

evict_then_reading_costs_reads_again() {
	local out before
	out=$(ctl evict /wt) &&
		step "summary" grep -Eq '^evicted /wt: [0-9]+ objects, 16.6 MiB of data$' <<<"$out" &&
		before=$(reads) &&
		same_on_client b &&
		at_least "READs upstream while the client read wt/b" "$(reads)" $((before + 2)) ||
		{ echo "evict said: ${out:-}" >&2; return 1; }
}

pin_survives_a_restart() {
	local out
	out=$(ctl pin /wt/a) &&
		step "pinned" grep -q '^pinned /wt/a: 24 objects' <<<"$out" &&
		expect_eq "pins" "$(json_get 's["exports"][0]["pins"]["count"]')" 1 &&
		lab_nache_restart &&
		lab_wait_until 30 "$NACHECTL" --socket "$SOCK" status >/dev/null &&
		expect_eq "pins after the restart" "$(json_get '[p["path"] for p in s["exports"][0]["pins"]["list"]]')" "['/wt/a']" &&
		expect_eq "objects pinned" "$(json_get 's["exports"][0]["pins"]["objects"]')" 24 &&
		out=$(ctl unpin /wt/a) &&
		step "unpinned" grep -q '^unpinned /wt/a (24 objects)' <<<"$out" &&
		expect_eq "pins after unpin" "$(json_get 's["exports"][0]["pins"]["count"]')" 0 ||
		{ echo "nachectl said: ${out:-}" >&2; return 1; }
}

errors_exit_non_zero() {
	local rc=0 err
	err=$(ctl reboot 2>&1) || rc=$?
	expect_eq "usage exit status" $rc 2 && grep -q "unknown command reboot" <<<"$err" ||
		{ echo "$err" >&2; return 1; }
}

nachectl_against_a_stopped_daemon_fails_naming_the_socket() {
	local rc=0 err pid
	pid=$(lab_nache_pid)
	lab_nache_stop &&
		# A clean stop, the admin server's included (its static owner
		# was once destroyed twice at exit: a segfault at every stop,
		# which the kernel logs).
		step "dmesg readable" dmesg >/dev/null &&
		step "no segfault of ganesha.nfsd[$pid] at its stop" \
			eval '[ "$(dmesg | grep -c "ganesha.nfsd\[$pid\]: segfault")" = 0 ]' &&
		{ err=$(ctl status 2>&1) || rc=$?; } &&
		expect_eq "exit status" $rc 3 &&
		grep -q "no nache daemon" <<<"$err" && grep -qF "$SOCK" <<<"$err" ||
		{ echo "nachectl said: $err" >&2; return 1; }
}

check socket_is_roots_and_private socket_is_roots_and_private
check status_json_parses_and_shows_the_upstream_connected status_json_parses_and_shows_the_upstream_connected
check stats_shows_the_metrics_counters stats_shows_the_metrics_counters
check flush_wait_sends_what_was_dirty flush_wait_sends_what_was_dirty
check drain_makes_the_next_write_reach_the_remote_at_once drain_makes_the_next_write_reach_the_remote_at_once
check flush_path_sends_only_that_subtree flush_path_sends_only_that_subtree
check warm_data_wait_then_reading_the_tree_costs_no_read warm_data_wait_then_reading_the_tree_costs_no_read
check warm_in_the_background_shows_in_status_and_cancel_says_when_none_runs warm_in_the_background_shows_in_status_and_cancel_says_when_none_runs
check evict_then_reading_costs_reads_again evict_then_reading_costs_reads_again
check pin_survives_a_restart pin_survives_a_restart
check errors_exit_non_zero errors_exit_non_zero
# Last: it stops the daemon.
check nachectl_against_a_stopped_daemon_fails_naming_the_socket nachectl_against_a_stopped_daemon_fails_naming_the_socket
itest_finish
