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
	local pid state
	pid=$(lab_nache_pid)
	# (Its zombie, until this shell reaps it, is not running: kill -0
	# would say it is.)
	state=$(cat "/proc/$pid/stat" 2>/dev/null) && state=${state##*) } &&
		[ "${state%% *}" != Z ] &&
		{ echo "daemon still running" >&2; return 1; }
	line=$(grep -h "NACHE: bad configuration" "$(lab_nache_log)")
	[[ $line == *"$param"* ]] || { echo "log does not name $param: $line" >&2; return 1; }
}

refuses_bad_server() { LAB_NACHE_UPSTREAM='"no such/host"' refuses "" Upstream_Server; }
refuses_relative_path() { LAB_NACHE_UPSTREAM_PATH=relative/path refuses "" Upstream_Path; }
starts_with_good_config() { lab_nache_start "Connections = 3; Upstream_Timeout = 5000;" && [ -n "$(lab_nache_pid)" ] && lab_nache_stop; }
# A second export on the first one's Cache_Dir: refused by name, both
# exports named.
refuses_shared_cache_dir() {
	LAB_NACHE_GLOBAL="EXPORT { Export_Id = 2; Path = /second; Pseudo = /second;
		Access_Type = RW; Protocols = 4; Transports = TCP;
		FSAL { Name = NACHE; Upstream_Server = $LAB_REMOTE_ADDR;
			Upstream_Path = /export;
			Cache_Dir = \"$LAB_DIR/nache/cache\"; } }" \
		refuses "" Cache_Dir || return 1
	local line
	line=$(grep -h "NACHE: bad configuration" "$(lab_nache_log)")
	[[ $line == *"export 1"* && $line == *"export 2"* ]] ||
		{ echo "not both exports named: $line" >&2; return 1; }
}
# The store records its upstream: another Upstream_Path is refused, naming
# the parameter and both identities; the reset option moves the old store
# aside instead.
refuses_changed_upstream() {
	lab_nache_start && lab_nache_stop || return 1
	LAB_NACHE_UPSTREAM_PATH=/elsewhere refuses "" Upstream_Path || return 1
	local line
	line=$(grep -h "NACHE: bad configuration" "$(lab_nache_log)")
	[[ $line == *":2049/export"* && $line == *":2049/elsewhere"* ]] ||
		{ echo "not both identities named: $line" >&2; return 1; }
	ls -d "$LAB_DIR"/nache/cache.* 2>/dev/null && { echo "store moved" >&2; return 1; }
	LAB_NACHE_UPSTREAM_PATH=/elsewhere lab_nache_start \
		"Cache_Reset_On_Upstream_Change = true;" || return 1
	lab_nache_stop
	ls -d "$LAB_DIR"/nache/cache.upstream-changed-* >/dev/null ||
		{ echo "old store not kept aside" >&2; return 1; }
}

# The daemon-wide NACHE block: an idmapd.conf that cannot be read.
refuses_missing_idmapd_conf() {
	LAB_NACHE_GLOBAL="NACHE { Idmapd_Conf = \"$LAB_DIR/no-idmapd.conf\"; }" \
		refuses "" Idmapd_Conf
}

# ... and one that is not the file Ganesha started libnfsidmap from (the
# NFSv4 block's IdmapConf; libnfsidmap keeps that configuration): refused,
# naming both. The same file in both starts.
idmapd_conf_must_be_ganeshas() {
	local conf=$LAB_DIR/idmapd.conf
	printf '[General]\nDomain = nache.lab\n' >"$conf" || return 1
	LAB_NACHE_GLOBAL="NACHE { Idmapd_Conf = \"$conf\"; }" \
		refuses "" "Idmapd_Conf: $conf is not NFSv4's IdmapConf (/etc/idmapd.conf)" ||
		return 1
	LAB_NACHE_IDMAPCONF=$conf LAB_NACHE_GLOBAL="NACHE { Idmapd_Conf = \"$conf\"; }" \
		lab_nache_start && lab_nache_stop
}

check unknown_parameter_refused refuses "Bogus_Option = 12;" Bogus_Option
check bad_upstream_owner_format_refused refuses 'Upstream_Owner_Format = "name";' Upstream_Owner_Format
check unreadable_idmapd_conf_refused refuses_missing_idmapd_conf
check idmapd_conf_other_than_ganeshas_idmapconf_refused idmapd_conf_must_be_ganeshas
check port_out_of_range_refused refuses "Upstream_Port = 70000;" Upstream_Port
check zero_connections_refused refuses "Connections = 0;" Connections
check bad_max_io_size_refused refuses "Max_IO_Size = 5000;" Max_IO_Size
check callback_port_required_with_address refuses 'Callback_Address = "10.251.2.1";' Callback_Port
check bad_upstream_server_refused refuses_bad_server
check relative_upstream_path_refused refuses_relative_path
check good_config_starts starts_with_good_config
check two_exports_on_one_cache_dir_refused refuses_shared_cache_dir
check changed_upstream_refused_unless_reset_allowed refuses_changed_upstream
itest_finish
