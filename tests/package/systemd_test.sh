#!/usr/bin/env bash
# nache.service under real systemd: a Debian 12 root (debootstrap-ed by
# deploy/install-deps.sh into .deps/bookworm-systemd, with the package's
# dependencies) boots with systemd as PID 1 under systemd-nspawn, in a
# network namespace of the lab bridged to its LAN. The test installs the
# .deb (make deb), points /etc/nache/ganesha.conf at the lab's remote,
# enables and starts the unit, mounts nache from a lab client (a real
# Linux NFS client under UML) and reads and writes through it; restarts
# the unit (the client's mount reads on); kills the daemon with SIGSEGV
# and then SIGKILL (Restart=on-failure brings it back each time, a new
# main pid serving again); gives it a bad configuration (the unit ends
# failed after one start: no restart loop); and reports
# `systemd-analyze security nache.service`'s exposure score.
#
# Run by ctest as package.systemd (labels package, RESOURCE_LOCK lab), as
# root. Everything (the container, its copy of the root under $LAB_DIR,
# the namespaces, the guests) goes with the lab's teardown, also on
# failure or interruption.
# usage: tests/package/systemd_test.sh   (NACHE_BUILD_DIR: the build tree)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../integration/itest.sh
source "$top/tests/integration/itest.sh"

version=$(sed -n 's/^project(nache VERSION \([0-9.]*\) .*/\1/p' "$top/CMakeLists.txt")
deb=$NACHE_BUILD_DIR/nache_${version}_amd64.deb
base=${NACHE_SYSTEMD_ROOT:-$top/.deps/bookworm-systemd}
[ -x "$base/lib/systemd/systemd" ] ||
	{ echo "no systemd root in $base: run deploy/install-deps.sh"; exit 1; }
command -v systemd-nspawn >/dev/null ||
	{ echo "no systemd-nspawn: run deploy/install-deps.sh"; exit 1; }
if [ ! -f "$deb" ]; then
	make -C "$top" deb BUILD="$NACHE_BUILD_DIR" >/dev/null 2>&1 ||
		{ echo "make deb failed"; exit 1; }
fi
[ -f "$deb" ] || { echo "no $deb"; exit 1; }

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_clients_start 1 ||
	{ echo "lab did not start"; exit 1; }
# nache's export squashes root, as shipped: the client's root writes as
# nobody, so the top of the remote's export is writable by all (sticky).
chmod 1777 "$LAB_REMOTE_EXPORT_DIR"

# The container's network: namespace nl-<id>-sd (the lab's teardown kills
# what runs in it and deletes it), a veth into the LAN's bridge, an
# address on the LAN, the nache namespace as its router (it forwards to
# the remote, as for the clients).
ADDR=10.251.1.3
NS=nl-$LAB_ID-sd
ip netns add "$NS" &&
	ip link add sd0 netns "$NS" type veth peer name sdl0 netns "$LAB_NS_LAN" &&
	ip -n "$LAB_NS_LAN" link set sdl0 master br0 up &&
	ip -n "$NS" addr add "$ADDR/24" dev sd0 &&
	ip -n "$NS" link set sd0 up && ip -n "$NS" link set lo up &&
	ip -n "$NS" route add default via "$LAB_NACHE_ADDR" ||
	{ echo "cannot set up the container's network"; exit 1; }

# The root: a copy of the cached one under $LAB_DIR (removed at teardown),
# with the .deb in /root.
ROOT=$LAB_DIR/sd/root
mkdir -p "$LAB_DIR/sd" && cp -a "$base" "$ROOT" && cp "$deb" "$ROOT/root/" &&
	echo nache-sd >"$ROOT/etc/hostname" ||
	{ echo "cannot copy the root"; exit 1; }
# The host's PID 1 need not be systemd: no machined to register with
# (--register=no), no transient scope to ask the host's systemd for
# (--keep-unit). The lab's registry of processes gets nspawn's pid, so the
# teardown kills it (and with it the container) too.
systemd-nspawn --boot --directory="$ROOT" --machine="nl-$LAB_ID-sd" \
	--register=no --keep-unit --network-namespace-path="/run/netns/$NS" \
	--console=pipe --private-users=no \
	>"$LAB_DIR/logs/nspawn.log" 2>&1 </dev/null &
echo $! >"$LAB_DIR/run/nspawn.pid"
NSPAWN=$!
# (The teardown kills it: no "Killed" notice from this shell.)
disown

# leader — pid (on the host) of the container's PID 1, systemd.
leader() { pgrep -P "$NSPAWN" | head -n 1; }
# inside CMD — runs CMD (bash -c) inside the container, in all its namespaces.
inside() {
	local l
	l=$(leader) && [ -n "$l" ] || { echo "no container" >&2; return 1; }
	nsenter -t "$l" -m -u -i -n -p -C -- /bin/bash -c "$1"
}
booted() {
	local s
	s=$(inside 'systemctl is-system-running' 2>/dev/null)
	[ "$s" = running ] || [ "$s" = degraded ]
}
prop() { inside "systemctl show -P $1 nache.service"; }
# serving — nache answers on its NFS port (an NFS NULL call) from the
# LAN's namespace.
serving() {
	ip netns exec "$LAB_NS_LAN" python3 -B "$top/lab/labtool.py" rpcping "$ADDR" >/dev/null 2>&1
}

boots_with_systemd_as_pid_1() {
	lab_wait_until 60 booted ||
		{ tail -n 30 "$LAB_DIR/logs/nspawn.log" >&2; inside 'systemctl --failed' >&2; return 1; }
	expect_eq "PID 1" "$(inside 'cat /proc/1/comm')" systemd
	inside 'systemctl is-system-running; systemctl --failed --no-legend' >&2
}

deb_installs_and_the_unit_starts() {
	inside "dpkg -i /root/$(basename "$deb")" >"$LAB_DIR/logs/dpkg.log" 2>&1 ||
		{ cat "$LAB_DIR/logs/dpkg.log" >&2; return 1; }
	expect_eq "unit file state" "$(inside 'systemctl is-enabled nache.service')" disabled &&
		inside "sed -i -e 's/^\\(\\s*Upstream_Server = \\).*;/\\1$LAB_REMOTE_ADDR;/' /etc/nache/ganesha.conf" &&
		inside "grep -q 'Upstream_Server = $LAB_REMOTE_ADDR;' /etc/nache/ganesha.conf" &&
		# A 10 s grace period after each start (90 s by default): the
		# client's opens wait for its end after every restart below.
		inside "sed -i 's/^\\(\\s*RecoveryBackend = fs;\\)\$/\\1 Grace_Period = 10; Lease_Lifetime = 10;/' /etc/nache/ganesha.conf" &&
		inside "grep -q 'Grace_Period = 10; Lease_Lifetime = 10;' /etc/nache/ganesha.conf" &&
		inside 'systemctl enable --now nache.service' &&
		lab_wait_until 60 serving ||
		{ inside 'systemctl status --no-pager nache.service rpcbind.socket; rpcinfo -p 127.0.0.1
			grep -v -e TIRPC -e destroy_fsals -e do_shutdown /var/log/nache/ganesha.log | head -n 60' >&2; return 1; }
	expect_eq "active" "$(prop ActiveState)" active
}

a_client_mounts_reads_and_writes() {
	lab_client_mount 1 "$ADDR" /export /mnt/n vers=4.1 &&
		on 1 "echo through-systemd >/mnt/n/sd-file" &&
		expect_eq "at the remote" "$(cat "$LAB_REMOTE_EXPORT_DIR/sd-file")" through-systemd
}

# back_after WHAT OLD_PID — the unit is active again with a main pid
# other than OLD_PID, and serves.
new_main_pid() {
	local p
	p=$(prop MainPID)
	[ "$(prop ActiveState)" = active ] && [ "$p" != 0 ] && [ "$p" != "$1" ]
}
back_after() {
	lab_wait_until 60 new_main_pid "$2" && lab_wait_until 60 serving ||
		{ inside 'systemctl status --no-pager nache.service' >&2; echo "not back after $1" >&2; return 1; }
}

restart_keeps_the_mount_working() {
	local pid
	pid=$(prop MainPID)
	inside 'systemctl restart nache.service' && back_after restart "$pid" &&
		expect_eq "read after restart" "$(on 1 'cat /mnt/n/sd-file')" through-systemd
}

crash_restarts() {  # crash_restarts SIGNAL
	local pid n0
	pid=$(prop MainPID) n0=$(prop NRestarts)
	inside "kill -$1 $pid" && back_after "SIG$1" "$pid" &&
		expect_eq "NRestarts" "$(prop NRestarts)" $((n0 + 1)) &&
		expect_eq "read after SIG$1" "$(on 1 'cat /mnt/n/sd-file')" through-systemd
}
segv_restarts() { crash_restarts SEGV; }
kill_restarts() { crash_restarts KILL; }

failed_for_good() { [ "$(prop ActiveState)" = failed ]; }
# restarted — the unit left the failed state or was restarted by systemd.
restarted() { [ "$(prop ActiveState)" != failed ] || [ "$(prop NRestarts)" -gt 0 ]; }
bad_config_fails_without_a_restart_loop() {
	local t0
	# A config nache refuses at start (config_refusal_test.sh).
	inside "sed -i 's/Upstream_Port = 2049;/Upstream_Port = 70000;/' /etc/nache/ganesha.conf" &&
		inside "grep -q '^\\s*Upstream_Port = 70000;' /etc/nache/ganesha.conf" || return 1
	# (systemctl restart fails, and sets NRestarts back to 0.)
	t0=$SECONDS
	inside 'systemctl restart nache.service'
	lab_wait_until 60 failed_for_good ||
		{ inside 'systemctl status --no-pager nache.service' >&2; return 1; }
	echo "failed $((SECONDS - t0)) s after systemctl restart" >&2
	# It stays failed: a restart would come RestartSec (5 s) after the
	# exit; watch for twice that.
	if lab_wait_until 10 restarted; then
		inside 'systemctl status --no-pager nache.service' >&2
		echo "it restarted" >&2
		return 1
	fi
	echo "NRestarts $(prop NRestarts); result $(prop Result); exit status $(prop ExecMainStatus)" >&2
	expect_eq "failed" "$(prop ActiveState)" failed &&
		expect_eq "restarts by systemd" "$(prop NRestarts)" 0 &&
		expect_eq "exit status" "$(prop ExecMainStatus)" 2 &&
		# Not held in "activating" until TimeoutStartSec (90 s).
		at_least "seconds to spare before TimeoutStartSec" $((90 - (SECONDS - t0))) 30
}

security_score() {
	local out
	out=$(inside 'systemd-analyze security --no-pager nache.service' 2>&1)
	grep -E 'Overall exposure level' <<<"$out" | tee "$LAB_DIR/score" >&2
	grep -Eq 'Overall exposure level for nache.service: [0-9.]+' <<<"$out"
}

check boots_with_systemd_as_pid_1 boots_with_systemd_as_pid_1
check deb_installs_and_the_unit_starts deb_installs_and_the_unit_starts
# Nothing below can pass without a running unit.
[ "$_itest_fail" = 0 ] || itest_finish
check a_client_mounts_reads_and_writes a_client_mounts_reads_and_writes
check restart_keeps_the_mount_working restart_keeps_the_mount_working
check segv_restarts segv_restarts
check kill_restarts kill_restarts
check bad_config_fails_without_a_restart_loop bad_config_fails_without_a_restart_loop
check security_score security_score
[ -s "$LAB_DIR/score" ] && sed 's/^/systemd_test: /' "$LAB_DIR/score"
itest_finish
