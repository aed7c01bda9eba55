#!/usr/bin/env bash
# A bad FSAL NACHE block refuses to start the daemon, and the log line says
# which parameter is wrong. A good block starts.
set -uo pipefail
source "$(dirname "$0")/itest.sh"
# The blocks tested here carry no callback settings but their own.
export LAB_NACHE_CALLBACK=

lab_init && lab_net_up lan && lab_remote_vfs_start || { echo "lab did not start"; exit 1; }

# refuses EXTRA PARAM — nache must not start with EXTRA in its FSAL block,
# and its fatal log line must name PARAM.
refuses() {
	local extra=$1 param=$2 line
	if lab_nache_start "$extra" 2>/dev/null; then
		echo "nache started with: $extra" >&2
		lab_nache_stop
		return 1
	fi
	local pid
	pid=$(lab_nache_pid)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		echo "daemon still running" >&2
		return 1
	fi
	line=$(grep -h "NACHE: bad configuration" "$(lab_nache_log)")
	[[ $line == *"$param"* ]] || { echo "log does not name $param: $line" >&2; return 1; }
}

refuses_bad_server() { LAB_NACHE_UPSTREAM='"no such/host"' refuses "" Upstream_Server; }
refuses_relative_path() { LAB_NACHE_UPSTREAM_PATH=relative/path refuses "" Upstream_Path; }
starts_with_good_config() { lab_nache_start "Connections = 3; Upstream_Timeout = 5000;" && [ -n "$(lab_nache_pid)" ] && lab_nache_stop; }

check unknown_parameter_refused refuses "Bogus_Option = 12;" Bogus_Option
check port_out_of_range_refused refuses "Upstream_Port = 70000;" Upstream_Port
check zero_connections_refused refuses "Connections = 0;" Connections
check bad_max_io_size_refused refuses "Max_IO_Size = 5000;" Max_IO_Size
check callback_port_required_with_address refuses 'Callback_Address = "10.251.2.1";' Callback_Port
check bad_upstream_server_refused refuses_bad_server
check relative_upstream_path_refused refuses_relative_path
check good_config_starts starts_with_good_config
itest_finish
