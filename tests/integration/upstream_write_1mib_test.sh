#!/bin/bash
# upstream_write_1mib: nache's Upstream client sends a 1 MiB WRITE in ONE
# COMPOUND (PUTFH + WRITE + GETATTR) to a real Ganesha 4.3 server, and the
# file on the server's disk is exactly the 1 MiB pattern; it reads it back in
# one READ; and it survives a kill -9 and restart of the server (reconnect,
# then client id recovery on NFS4ERR_STALE_CLIENTID).
#
# Runs everything inside a network namespace of its own, torn down on exit.
# Env: NACHE_BUILD_DIR (default: the repo's build/) for upstream_probe;
#      NACHE_GANESHA_STAGE (default: $NACHE_BUILD_DIR/stage) for the daemon.
set -euo pipefail

SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${NACHE_BUILD_DIR:-$SRC_DIR/build}
STAGE=${NACHE_GANESHA_STAGE:-$BUILD_DIR/stage}
GANESHA=$STAGE/bin/ganesha.nfsd
PROBE=$BUILD_DIR/tests/tools/upstream_probe
NAME=upstream_write_1mib
NS=nache-up1m-$$
WORK=$(mktemp -d /tmp/nache-$NAME.XXXXXX)
EXPORT=$WORK/export
GANESHA_PID=
PROBE_PID=

log() { echo "[$NAME] $*"; }

fail() {
	log "FAIL: $*"
	for f in "$WORK"/ganesha*.log "$WORK"/probe-*.out; do
		[ -f "$f" ] || continue
		echo "----- tail of $f"
		tail -n 30 "$f"
	done
	exit 1
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "$PROBE_PID" ] && kill -9 "$PROBE_PID" 2>/dev/null || true
	[ -n "$GANESHA_PID" ] && kill -9 "$GANESHA_PID" 2>/dev/null || true
	[ -n "$GANESHA_PID" ] && wait "$GANESHA_PID" 2>/dev/null || true
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$WORK"
	if [ "$rc" -eq 0 ]; then log "PASS"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$GANESHA" ] || fail "no ganesha.nfsd at $GANESHA (build the stage first)"
[ -x "$PROBE" ] || fail "no upstream_probe at $PROBE"
[ "$(id -u)" -eq 0 ] || fail "needs root (network namespace)"

mkdir -p "$EXPORT/sub" "$WORK/recovery"
cat >"$WORK/ganesha.conf" <<CONF
NFS_CORE_PARAM {
	Protocols = 4;
	Bind_addr = 127.0.0.1;
	NFS_Port = 2049;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Plugins_Dir = "$STAGE/lib/ganesha";
}
NFSv4 {
	Graceless = true;
	RecoveryBackend = fs;
	RecoveryRoot = "$WORK/recovery";
	Allow_Numeric_Owners = true;
	Only_Numeric_Owners = true;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1;
	Path = "$EXPORT";
	Pseudo = /export;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	Protocols = 4;
	FSAL { Name = VFS; }
}
CONF

ip netns add "$NS"
ip -n "$NS" link set lo up
# Ganesha resolves Bind_addr with AI_ADDRCONFIG, which finds no IPv4 in a
# namespace holding only loopback: give it a configured address (a veth
# pair kept inside the namespace; there is no dummy driver here).
ip -n "$NS" link add nache0 type veth peer name nache1
ip -n "$NS" addr add 10.211.0.1/24 dev nache0
ip -n "$NS" link set nache1 up
ip -n "$NS" link set nache0 up

# Starts the daemon in the namespace; $1 names its log.
start_ganesha() {
	ip netns exec "$NS" "$GANESHA" -F -f "$WORK/ganesha.conf" \
		-L "$WORK/ganesha-$1.log" -p "$WORK/ganesha.pid" &
	GANESHA_PID=$!
	# Poll (bounded) until the NFS port accepts connections.
	local _
	for _ in $(seq 1 300); do
		kill -0 "$GANESHA_PID" 2>/dev/null || fail "ganesha exited at start"
		if ip netns exec "$NS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2049' \
			2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	fail "ganesha did not listen on 2049 within 30 s"
}

probe() {
	ip netns exec "$NS" "$PROBE" --server 127.0.0.1 --port 2049 \
		--path /export/sub --timeout-ms 15000 "$@"
}

start_ganesha first
log "ganesha up (pid $GANESHA_PID) in netns $NS"

# 1. One 1 MiB WRITE compound.
probe write1m probe.bin >"$WORK/probe-write.out" 2>&1 ||
	fail "upstream_probe write1m failed"
cat "$WORK/probe-write.out"
grep -q "write1m: count=1048576 committed=2 size=1048576" \
	"$WORK/probe-write.out" || fail "unexpected write1m result"

# The expected bytes, generated independently of the probe.
expected=$(python3 -c '
import hashlib
n = 1 << 20
data = bytes(((7 * i) + (i >> 12)) & 0xff for i in range(n))
print(hashlib.sha256(data).hexdigest())')
actual=$(sha256sum "$EXPORT/sub/probe.bin" | cut -d" " -f1)
size=$(stat -c %s "$EXPORT/sub/probe.bin")
log "server file: $size bytes, sha256 $actual"
[ "$size" -eq 1048576 ] || fail "file on the server is $size bytes"
[ "$actual" = "$expected" ] || fail "sha256 $actual, expected $expected"

# 2. One 1 MiB READ.
probe read probe.bin >"$WORK/probe-read.out" 2>&1 ||
	fail "upstream_probe read failed"
cat "$WORK/probe-read.out"

# 3. READDIR with filehandles.
probe ls >"$WORK/probe-ls.out" 2>&1 || fail "upstream_probe ls failed"
grep -q "1048576 .*probe.bin" "$WORK/probe-ls.out" || fail "ls lacks probe.bin"

# 4. Server killed and restarted under a running client.
probe reconnect 60 >"$WORK/probe-reconnect.out" 2>&1 &
PROBE_PID=$!
for _ in $(seq 1 300); do
	grep -q "first GETATTR ok" "$WORK/probe-reconnect.out" 2>/dev/null && break
	kill -0 "$PROBE_PID" 2>/dev/null || fail "probe reconnect exited early"
	sleep 0.1
done
grep -q "first GETATTR ok" "$WORK/probe-reconnect.out" ||
	fail "probe reconnect never got going"
log "killing ganesha (pid $GANESHA_PID) with SIGKILL"
kill -9 "$GANESHA_PID"
wait "$GANESHA_PID" 2>/dev/null || true
start_ganesha second
log "ganesha restarted (pid $GANESHA_PID)"
rc=0
wait "$PROBE_PID" || rc=$?
PROBE_PID=
cat "$WORK/probe-reconnect.out"
[ "$rc" -eq 0 ] || fail "upstream_probe reconnect exited $rc"
grep -q "epoch 0 -> 1" "$WORK/probe-reconnect.out" ||
	fail "the client id was not re-established after the restart"
