#!/usr/bin/env bash
# Prometheus metrics of a running nache, scraped over HTTP from inside its
# namespace: kernel-client I/O moves the upstream op, byte, RTT and local op
# series; the upstream shows connected; the top-level NACHE { } block turns
# metrics off, moves them, and refuses bad values naming the parameter.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_up lan 1 || { echo "lab did not start"; exit 1; }
M=/mnt/n
mount_nache 1 $M vers=4.1 || { echo "mount failed"; exit 1; }

# port_closed PORT — nothing listens on nache's address:PORT.
port_closed() {
	ip netns exec "$LAB_NS_LAN" python3 - "$LAB_NACHE_ADDR" "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.settimeout(5)
sys.exit(0 if s.connect_ex((sys.argv[1], int(sys.argv[2]))) != 0 else 1)
EOF
}

N=$((3 << 20))  # 3 MiB: several upstream WRITEs at any Max_IO_Size

upstream_connected() {
	lab_wait_until 20 test "$(metric nache_upstream_connected)" = 1 ||
		{ echo "nache_upstream_connected = $(metric nache_upstream_connected)" >&2; return 1; }
}

write_counts_write_ops_and_bytes() {
	local ops0 bytes0 rtt0 ops1 bytes1 rtt1
	ops0=$(metric nache_upstream_ops_total 'op="WRITE",status="ok"') &&
		bytes0=$(metric nache_upstream_bytes_total 'direction="write"') &&
		rtt0=$(metric nache_upstream_rtt_seconds_count) &&
		on 1 "head -c $N /dev/urandom > $M/w.bin && sync" &&
		expect_eq "server size" "$(stat -c %s "$LAB_REMOTE_EXPORT_DIR/w.bin")" $N &&
		ops1=$(metric nache_upstream_ops_total 'op="WRITE",status="ok"') &&
		bytes1=$(metric nache_upstream_bytes_total 'direction="write"') &&
		rtt1=$(metric nache_upstream_rtt_seconds_count) &&
		at_least "WRITE ops grown" $((ops1 - ops0)) 3 &&
		at_least "write bytes grown" $((bytes1 - bytes0)) $N &&
		at_least "RTT observations grown" $((rtt1 - rtt0)) $((ops1 - ops0))
}

# A file written at the remote: nache has none of it cached.
read_counts_read_ops_bytes_and_local_opens() {
	local ops0 bytes0 opens0 ops1 bytes1 opens1
	head -c $N /dev/urandom >"$LAB_REMOTE_EXPORT_DIR/r.bin" &&
	ops0=$(metric nache_upstream_ops_total 'op="READ",status="ok"') &&
		bytes0=$(metric nache_upstream_bytes_total 'direction="read"') &&
		opens0=$(metric nache_local_ops_total 'op="open"') &&
		on 1 "sync; echo 3 > /proc/sys/vm/drop_caches; cat $M/r.bin > /dev/null" &&
		ops1=$(metric nache_upstream_ops_total 'op="READ",status="ok"') &&
		bytes1=$(metric nache_upstream_bytes_total 'direction="read"') &&
		opens1=$(metric nache_local_ops_total 'op="open"') &&
		at_least "READ ops grown" $((ops1 - ops0)) 1 &&
		at_least "read bytes grown" $((bytes1 - bytes0)) $N &&
		at_least "local opens grown" $((opens1 - opens0)) 1
}

# A local operation's time in nache's core, and the upstream's part of it:
# an open of a file nache has not seen costs round trips, so both grow, the
# part no more than the whole.
local_time_split_into_upstream_and_own() {
	local t0 u0 t1 u1
	head -c 4096 /dev/urandom >"$LAB_REMOTE_EXPORT_DIR/t.bin" &&
		t0=$(metric nache_local_op_seconds_total 'op="open"') &&
		u0=$(metric nache_local_op_upstream_seconds_total 'op="open"') &&
		on 1 "cat $M/t.bin > /dev/null" &&
		t1=$(metric nache_local_op_seconds_total 'op="open"') &&
		u1=$(metric nache_local_op_upstream_seconds_total 'op="open"') || return 1
	echo "open: $t0 -> $t1 s in nache's core, $u0 -> $u1 s of it upstream" >&2
	python3 -c "import sys; t0, u0, t1, u1 = map(float, sys.argv[1:]); \
sys.exit(0 if t1 - t0 >= u1 - u0 > 0 else 1)" "$t0" "$u0" "$t1" "$u1"
}

# Read again with the client's cache dropped: nache's cache answers.
reread_counts_cache_hits_not_reads() {
	local ops0 hits0 hb0 ops1 hits1 hb1
	ops0=$(metric nache_upstream_ops_total 'op="READ",status="ok"') &&
		hits0=$(metric nache_cache_hits_total 'kind="data"') &&
		hb0=$(metric nache_cache_hit_bytes_total) &&
		on 1 "echo 3 > /proc/sys/vm/drop_caches; cat $M/r.bin > /dev/null" &&
		ops1=$(metric nache_upstream_ops_total 'op="READ",status="ok"') &&
		hits1=$(metric nache_cache_hits_total 'kind="data"') &&
		hb1=$(metric nache_cache_hit_bytes_total) &&
		expect_eq "READ ops during re-read" $((ops1 - ops0)) 0 &&
		at_least "data hits grown" $((hits1 - hits0)) 1 &&
		at_least "hit bytes grown" $((hb1 - hb0)) $N &&
		at_least "cache size" "$(metric nache_cache_size_bytes)" $N &&
		at_least "cache entries" "$(metric nache_cache_entries)" 1
}

failed_lookup_counted_by_status() {
	local n0 n1
	n0=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"') &&
		on 1 "! stat $M/no-such-file-$RANDOM 2>/dev/null" &&
		n1=$(metric nache_upstream_ops_total 'op="LOOKUP",status="NFS4ERR_NOENT"') &&
		at_least "NOENT lookups grown" $((n1 - n0)) 1
}

labelled_by_export_with_help() {
	# The callback path: over NFSv4.1 the session's back channel, up while
	# connected; over NFSv4.0 up only once the remote has called nache's
	# callback service, which Ganesha VFS never does (it delegates nothing).
	local cb=0
	[ "$(lab_nache_minor)" -ge 1 ] && cb=1
	ip netns exec "$LAB_NS_LAN" python3 -c "
import urllib.request
print(urllib.request.urlopen('http://$LAB_NACHE_ADDR:9464/metrics').read().decode())" \
		>"$LAB_DIR/metrics.txt" &&
		grep -q '^# HELP nache_upstream_rtt_seconds ' "$LAB_DIR/metrics.txt" &&
		grep -q '^# TYPE nache_upstream_ops_total counter' "$LAB_DIR/metrics.txt" &&
		grep -q '^nache_upstream_connected{export="1"} 1' "$LAB_DIR/metrics.txt" &&
		grep -q "^nache_callback_path_up{export=\"1\"} $cb" "$LAB_DIR/metrics.txt" &&
		grep -q '^nache_upstream_open_files{export="1"} ' "$LAB_DIR/metrics.txt"
}

# restart_with GLOBAL — nache restarted with GLOBAL as its top-level text.
restart_with() {
	lab_client_umount 1 $M
	LAB_NACHE_GLOBAL=$1 lab_nache_restart
}

metrics_false_closes_the_port() {
	restart_with 'NACHE { Metrics = false; }' && port_closed 9464 &&
		mount_nache 1 $M vers=4.1 && on 1 "test -s $M/w.bin"
}

address_and_port_configurable() {
	restart_with "NACHE { Metrics_Address = $LAB_NACHE_ADDR; Metrics_Port = 9465; }" &&
		port_closed 9464 &&
		lab_wait_until 20 test "$(metric nache_upstream_connected '' "$LAB_NACHE_ADDR" 9465)" = 1
}

# refuses GLOBAL PARAM — nache must not start with GLOBAL, and its fatal
# log line must name PARAM.
refuses() {
	local line
	lab_nache_stop
	if LAB_NACHE_GLOBAL=$1 lab_nache_start 2>/dev/null; then
		echo "nache started with: $1" >&2
		lab_nache_stop
		return 1
	fi
	line=$(grep -h "NACHE: bad configuration" "$(lab_nache_log)")
	[[ $line == *"$2"* ]] || { echo "log does not name $2: $line" >&2; return 1; }
}

# The daemon's own costs (CPU time, memory, threads) are served too, under
# Prometheus' usual process_* names: its CPU time grows with its work.
process_costs_served() {
	local cpu0 cpu1 threads rss
	cpu0=$(metric process_cpu_seconds_total) &&
		on 1 "head -c $N /dev/urandom > $M/cpu.bin && sync && cat $M/cpu.bin >/dev/null" &&
		cpu1=$(metric process_cpu_seconds_total) &&
		threads=$(metric process_threads) && rss=$(metric process_resident_memory_bytes) || return 1
	python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)" "$cpu0" "$cpu1" ||
		{ echo "CPU seconds did not grow: $cpu0 -> $cpu1" >&2; return 1; }
	at_least "threads (Ganesha's and nache's)" "$threads" 10 &&
		at_least "resident bytes" "${rss%.*}" $((16 << 20))
}

check nache_upstream_connected_is_1 upstream_connected
check process_cpu_memory_and_threads_are_served process_costs_served
check write_counts_WRITE_ops_bytes_and_rtt write_counts_write_ops_and_bytes
check read_counts_READ_ops_bytes_and_local_opens read_counts_read_ops_bytes_and_local_opens
check local_op_time_split_into_upstream_and_own local_time_split_into_upstream_and_own
check reread_counts_cache_hits_not_READs reread_counts_cache_hits_not_reads
check failed_lookup_counted_with_its_NFS4ERR failed_lookup_counted_by_status
check series_labelled_by_export_with_help labelled_by_export_with_help
check metrics_false_closes_the_port metrics_false_closes_the_port
check metrics_address_and_port_configurable address_and_port_configurable
check metrics_port_out_of_range_refused refuses 'NACHE { Metrics_Port = 70000; }' Metrics_Port
check metrics_port_in_use_refused refuses 'NACHE { Metrics_Address = 127.0.0.1; Metrics_Port = 111; }' Metrics_Port
check bad_metrics_address_refused refuses 'NACHE { Metrics_Address = "nache-box"; }' Metrics_Address
check metrics_address_not_on_this_host_refused refuses 'NACHE { Metrics_Address = 192.0.2.1; }' Metrics_Address
check unknown_NACHE_parameter_refused refuses 'NACHE { Metrics_Prot = 9464; }' Metrics_Prot
itest_finish
