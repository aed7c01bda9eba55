# shellcheck shell=bash
# lab/lab.sh — the nache test lab: namespaces, a tc-shaped WAN, servers,
# the proxy under test and real Linux NFS clients (user-mode-linux guests).
#
# Owns: everything a test starts (network namespaces nl-<id>-*, UML guests,
# the qemu knfsd guest, ganesha.nfsd instances, host helper processes) and
# its work dir $LAB_DIR.
# Sourced by integration tests, the demo and the benchmark runner; see
# lab/README.md for the topology and a usage example.
#
# Rules this file keeps:
#  - every process it starts runs inside one of the lab's namespaces, in its
#    own session (pgid == pid), with its pid recorded under $LAB_DIR/run;
#    teardown kills by process group, then sweeps each namespace.
#  - nothing outside $LAB_DIR, /run/nache-lab/<id> and the namespaces is
#    created; guests see the host root read-only.
#  - waits poll a condition with a bound; there are no fixed sleeps.
#  - functions return non-zero on failure and print why on stderr; they are
#    safe under "set -euo pipefail".
#
# Call lab_init from the test's top-level shell (not from a subshell): it
# installs the EXIT/INT/TERM traps that tear the lab down.

LAB_SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_REPO_DIR=$(dirname "$LAB_SRC_DIR")
: "${LAB_STAGE_DIR:=$LAB_REPO_DIR/build/stage}"
: "${LAB_UML:=/usr/bin/linux.uml}"
: "${LAB_PYTHON:=/usr/bin/python3}"
: "${LAB_CMD_TIMEOUT:=300}"       # per guest command, seconds (124 on expiry)
: "${LAB_BOOT_TIMEOUT:=90}"       # UML guest boot until its agent answers
: "${LAB_START_TIMEOUT:=60}"      # ganesha start until it serves
: "${LAB_STOP_TIMEOUT:=30}"       # ganesha SIGTERM until SIGKILL
: "${LAB_CLIENT_MEM:=512M}"
: "${LAB_KNFSD_KERNEL:=6.1}"      # knfsd's kernel: 6.1 (UML) | 6.12 (qemu, TCG)
: "${LAB_KNFSD_MEM:=}"            # empty: 256M under UML, 512M under qemu
: "${LAB_QEMU:=/usr/bin/qemu-system-x86_64}"
# Linux 6.12 for the qemu guest, as deploy/install-deps.sh extracts it from
# Debian's package: boot/vmlinuz-<version>, lib/modules/<version> (depmod'd).
: "${LAB_QEMU_KERNEL_DIR:=$LAB_REPO_DIR/.deps/linux-6.12}"
: "${LAB_KNFSD_SIZE:=512M}"       # ext4 image exported by knfsd
: "${LAB_KNFSD_LEASE:=30}"
: "${LAB_NACHE_CALLBACK_PORT:=40049}"
: "${LAB_KNFSD_GRACE:=10}"
: "${LAB_KNFSD_THREADS:=8}"
: "${LAB_KNFSD_NLM_GRACE:=}"      # lockd grace s (empty: kernel default, 50)
# knfsd's largest READ/WRITE in bytes (/proc/fs/nfsd/max_block_size). Empty:
# the kernel's default, which follows the guest's memory: 32 KiB for the
# 256M UML guest, where a server with 4 GiB or more takes 1 MiB.
: "${LAB_KNFSD_MAX_BLOCK:=}"
# exportfs options of the knfsd export (keep fsid=0: it is the NFSv4 root).
# Tests of identity squashing replace no_root_squash (root_squash,
# all_squash,anonuid=N,...).
: "${LAB_KNFSD_EXPORT_OPTS:=rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync}"
# rpc.mountd's manage-gids: empty keeps the host's /etc/nfs.conf (Debian's
# says y: the server looks the caller's groups up in its own group database
# instead of using those the client sent), y or n forces it.
: "${LAB_KNFSD_MANAGE_GIDS:=}"
# LAB_KNFSD_IDMAP=1: knfsd sends and wants NFSv4 owners as names
# (nfs4_disable_idmapping=N, rpc.idmapd in the guest); empty: numeric, as
# Linux does by default for AUTH_SYS.
: "${LAB_KNFSD_IDMAP:=}"
# Users, groups and the NFSv4 id-mapping domain the lab's machines see
# instead of the host's: a directory holding passwd, group and idmapd.conf
# (each optional), bind-mounted over /etc in the guest or the daemon only.
# LAB_KNFSD_IDENTITY_DIR: the knfsd guest (the remote side).
# LAB_IDENTITY_DIR: the client guests, and nache (its passwd and group
# only, in a mount namespace of its own: nache's idmapd.conf is its
# Idmapd_Conf parameter).
: "${LAB_KNFSD_IDENTITY_DIR:=}"
: "${LAB_IDENTITY_DIR:=}"
# LAB_NACHE_KRB5=1: nache's office side speaks Kerberos (RPCSEC_GSS with
# krb5, krb5i and krb5p beside AUTH_SYS), with the lab's realm
# (lab_krb5_start first); empty: AUTH_SYS only, as shipped.
: "${LAB_NACHE_KRB5:=}"
# LAB_REMOTE_KRB5=1: the VFS remote too (export sec=sys:krb5:krb5i:krb5p,
# principal nfs/$LAB_REMOTE_HOSTNAME), a Kerberos remote for nache's own
# RPCSEC_GSS client.
: "${LAB_REMOTE_KRB5:=}"
# LAB_KRB5_S4U=1: lab_krb5_start keeps the realm in LDAP (a slapd of the
# lab's own) instead of DB2, so that the KDC can decide constrained
# delegation: nache's principal may get tickets to the knfsd's and the VFS
# remote's nfs/ principals as any user (S4U2Self + S4U2Proxy), no other
# principal may (lab/README.md, "Kerberos").
: "${LAB_KRB5_S4U:=}"
: "${LAB_WAN_NETEM:=delay 40ms rate 50mbit limit 10000}"
# LAB_NLM=1: NFSv3 byte-range locks (NLM) through nache, as a box serving
# NFSv3 clients runs it (config/README.md, NFSv3). Set before lab_net_up
# and before the clients boot: nache's namespace runs Debian's rpcbind and
# rpc.statd instead of the rpcbind stub, nache runs with Enable_NLM, the
# clients run rpcbind and rpc.statd (their kernel's lockd needs both), and
# lab_client_mount mounts nache over NFSv3 through rpcbind, with locking.
# PROXY_V4 cannot start in such a lab (nache's registrations hold rpcbind).
: "${LAB_NLM:=}"
LAB_AGENT_PORT=7777
LAB_REGISTRY=/run/nache-lab      # <id> -> "LAB_DIR owner-pid owner-start"

# Addresses.  They exist only inside the lab's namespaces.
LAB_NACHE_ADDR=10.251.1.1        # nache's LAN address (bridge in nl-<id>-lan)
LAB_PROXYV4_ADDR=10.251.1.2      # stock PROXY_V4 instance, same namespace
LAB_NACHE_WAN_ADDR=10.251.2.1    # nache namespace, WAN side
LAB_ROUTER_LAN_ADDR=10.251.2.2   # router guest eth0
LAB_ROUTER_REMOTE_ADDR=10.251.3.2 # router guest eth1
LAB_REMOTE_WAN_ADDR=10.251.3.1   # remote namespace, WAN side
LAB_REMOTE_ADDR=10.251.4.1       # Ganesha VFS remote (bridge in nl-<id>-rem)
LAB_KNFSD_ADDR=10.251.4.2        # knfsd guest
_LAB_KNFSD_MAC=02:4c:00:04:00:02 # its NIC (tap tapk in nl-<id>-rem)
_LAB_BYPASS_LAN_ADDR=10.251.5.1  # direct veth used by the "lan" profile
_LAB_BYPASS_REMOTE_ADDR=10.251.5.2
export LAB_NACHE_ADDR LAB_PROXYV4_ADDR LAB_NACHE_WAN_ADDR LAB_REMOTE_ADDR \
	LAB_KNFSD_ADDR LAB_ROUTER_LAN_ADDR LAB_ROUTER_REMOTE_ADDR \
	LAB_REMOTE_WAN_ADDR

# Names, for Kerberos (service principals are nfs/<name>): they resolve in
# the guests and the daemons of a lab with a realm (lab_krb5_start), from
# its hosts file.  Client N is c<N>.$LAB_KRB5_DOMAIN.
LAB_KRB5_REALM=NACHE.LAB
LAB_KRB5_DOMAIN=nache.lab
LAB_NACHE_HOSTNAME=nache.$LAB_KRB5_DOMAIN
LAB_KNFSD_HOSTNAME=knfsd.$LAB_KRB5_DOMAIN
LAB_REMOTE_HOSTNAME=remote.$LAB_KRB5_DOMAIN   # the VFS remote and the KDC
export LAB_KRB5_REALM LAB_KRB5_DOMAIN LAB_NACHE_HOSTNAME LAB_KNFSD_HOSTNAME \
	LAB_REMOTE_HOSTNAME

_LAB_TOOL=("$LAB_PYTHON" -B "$LAB_SRC_DIR/labtool.py")
declare -gA _LAB_GUEST_NS=()     # guest name -> namespace that reaches its agent
declare -gA _LAB_GUEST_ADDR=()   # guest name -> agent address

# ------------------------------------------------------------------ helpers

# _lab_log MSG... — timestamped progress line on stderr.
_lab_log() {
	local now=${EPOCHREALTIME/./}
	local t0=${_LAB_T0:-$now}
	printf '[lab %6.1fs] %s\n' "$(((now - t0) / 100000))e-1" "$*" >&2
}

# _lab_err MSG... — error line on stderr; always returns 1.
_lab_err() {
	echo "lab: ERROR: $*" >&2
	return 1
}

# _lab_need_init — fail unless lab_init ran.
_lab_need_init() {
	[ -n "${LAB_ID:-}" ] && [ -d "${LAB_DIR:-}" ] ||
		_lab_err "lab_init has not been called"
}

# _lab_now_us — monotonic-enough wall clock in microseconds.
_lab_now_us() { echo "${EPOCHREALTIME/./}"; }

# _lab_proc_start PID — kernel start time of PID (guards against pid reuse).
_lab_proc_start() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	echo "${20}"
}

# _lab_ns CMD... — run CMD in namespace $1.
_lab_ns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

# _lab_spawn NAME NS CWD LOG CMD... — start CMD in namespace NS as a new
# session leader, output appended to LOG.  Sets _LAB_SPAWNED_PID and records
# it in $LAB_DIR/run/NAME.pid.
_lab_spawn() {
	local name=$1 ns=$2 cwd=$3 log=$4
	shift 4
	local pidfile=$LAB_DIR/run/$name.pid
	rm -f "$pidfile"
	# The wrapper writes its own pid, then execs (ip netns exec execs too),
	# so the recorded pid is the daemon itself and leads its process group.
	setsid bash -c 'cd "$1" || exit 1; echo $$ >"$0.tmp"; mv "$0.tmp" "$0"
		shift; exec "$@"' "$pidfile" "$cwd" ip netns exec "$ns" "$@" \
		</dev/null >>"$log" 2>&1 &
	# Tracked by pid file, not as a job: no "Killed" notices at teardown.
	disown $!
	local deadline=$(($(_lab_now_us) + 10000000))
	while [ ! -s "$pidfile" ]; do
		[ "$(_lab_now_us)" -lt "$deadline" ] ||
			_lab_err "spawn $name: no pid file" || return 1
		sleep 0.02
	done
	_LAB_SPAWNED_PID=$(cat "$pidfile")
}

# _lab_pid_of NAME — recorded pid of a spawned process (empty if none).
_lab_pid_of() {
	cat "$LAB_DIR/run/$1.pid" 2>/dev/null || true
}

# _lab_alive PID — true while PID runs (zombies count as dead).
_lab_alive() {
	local state
	[ -n "$1" ] || return 1
	state=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	state=${state##*) }
	[ "${state%% *}" != Z ]
}

# _lab_kill_spawned NAME [SIGNAL] — signal a spawned process group.
_lab_kill_spawned() {
	local pid
	pid=$(_lab_pid_of "$1")
	[ -n "$pid" ] || return 0
	kill -"${2:-KILL}" -- "-$pid" 2>/dev/null
	kill -"${2:-KILL}" "$pid" 2>/dev/null
	return 0
}

# _lab_wait_dead TIMEOUT_S PID... — wait until all PIDs are gone.
_lab_wait_dead() {
	local timeout=$1
	shift
	local deadline=$(($(_lab_now_us) + timeout * 1000000)) pid busy
	while :; do
		busy=
		for pid in "$@"; do
			_lab_alive "$pid" && busy=1
		done
		[ -n "$busy" ] || return 0
		[ "$(_lab_now_us)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# _lab_wait_gone TIMEOUT_S PID... — like _lab_wait_dead, zombies included.
_lab_wait_gone() {
	local timeout=$1
	shift
	local deadline=$(($(_lab_now_us) + timeout * 1000000)) pid busy
	while :; do
		busy=
		for pid in "$@"; do
			[ ! -e "/proc/$pid" ] || busy=1
		done
		[ -n "$busy" ] || return 0
		[ "$(_lab_now_us)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# ------------------------------------------------------------------ lifecycle

# lab_init — create a lab: id, work dir $LAB_DIR, registry entry, traps.
# Exports LAB_ID, LAB_DIR, LAB_NS_LAN (= LAB_NS_NACHE), LAB_NS_ROUTER,
# LAB_NS_REMOTE.  Teardown runs on EXIT, INT and TERM.
lab_init() {
	[ "$(id -u)" = 0 ] || _lab_err "the lab needs root" || return 1
	[ -z "${LAB_ID:-}" ] || _lab_err "lab_init: already initialised" ||
		return 1
	local tool
	for tool in "$LAB_UML" "$LAB_PYTHON" ip setsid mkfs.ext4; do
		command -v "$tool" >/dev/null ||
			_lab_err "missing tool: $tool" || return 1
	done
	_LAB_T0=$(_lab_now_us)
	LAB_ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
	LAB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nl-$LAB_ID.XXXX") || return 1
	chmod 755 "$LAB_DIR"
	mkdir -p "$LAB_DIR"/{logs,run,guests,uml}
	LAB_NS_LAN=nl-$LAB_ID-lan
	LAB_NS_NACHE=$LAB_NS_LAN
	LAB_NS_ROUTER=nl-$LAB_ID-rtr
	LAB_NS_REMOTE=nl-$LAB_ID-rem
	export LAB_ID LAB_DIR LAB_NS_LAN LAB_NS_NACHE LAB_NS_ROUTER LAB_NS_REMOTE
	mkdir -p "$LAB_REGISTRY"
	echo "$LAB_DIR $$ $(_lab_proc_start $$)" >"$LAB_REGISTRY/$LAB_ID"
	_LAB_TORN_DOWN=
	trap '_lab_on_exit' EXIT
	trap '_lab_on_signal INT 130' INT
	trap '_lab_on_signal TERM 143' TERM
	_lab_log "lab $LAB_ID in $LAB_DIR"
}

_lab_on_exit() {
	local rc=$?
	lab_teardown
	exit "$rc"
}

_lab_on_signal() {
	echo "lab: caught SIG$1, tearing down" >&2
	lab_teardown
	trap - EXIT
	exit "$2"
}

# lab_teardown — kill everything the lab started, delete its namespaces and
# its work dir (kept, with a KEEP marker, when LAB_KEEP=1).  Idempotent; runs
# from the traps, may also be called directly.
lab_teardown() {
	local -
	set +e +u +o pipefail
	[ -n "${LAB_ID:-}" ] || return 0
	[ -z "$_LAB_TORN_DOWN" ] || return 0
	_LAB_TORN_DOWN=1
	trap - INT TERM
	_lab_log "teardown of lab $LAB_ID"
	# Background jobs of the test shell (concurrent lab_client_run ...).
	local job
	for job in $(jobs -p); do
		kill -TERM "$job" 2>/dev/null
	done
	_lab_kill_lab "$LAB_ID" "$LAB_DIR"
	rm -f "$LAB_REGISTRY/$LAB_ID"
	if [ "${LAB_KEEP:-0}" = 1 ]; then
		touch "$LAB_DIR/KEEP"
		# Guest memory and disk images are large and useless afterwards.
		rm -f "$LAB_DIR"/knfsd/*.img
		echo "lab: kept $LAB_DIR (logs in $LAB_DIR/logs)" >&2
	else
		rm -rf "$LAB_DIR"
	fi
	_lab_log "teardown done"
}

# _lab_kill_lab ID DIR — kill every process of lab ID and delete its
# namespaces.  Used by teardown and by lab_cleanup_stale.
_lab_kill_lab() {
	local id=$1 dir=$2 pid pids all='' ns namespaces pidfile
	namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' |
		grep "^nl-$id-")
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		pids=
		for pidfile in "$dir"/run/*.pid; do
			[ -s "$pidfile" ] || continue
			pid=$(cat "$pidfile")
			_lab_alive "$pid" || continue
			kill -KILL -- "-$pid" 2>/dev/null
			kill -KILL "$pid" 2>/dev/null
			pids+=" $pid"
		done
		for ns in $namespaces; do
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				kill -KILL "$pid" 2>/dev/null
				pids+=" $pid"
			done
		done
		# Anything else naming the lab dir (a guest whose namespace went).
		for pid in $(pgrep -f -- "$dir/" 2>/dev/null); do
			[ "$pid" != $$ ] && [ "$pid" != "$BASHPID" ] || continue
			kill -KILL "$pid" 2>/dev/null
			pids+=" $pid"
		done
		[ -n "$pids" ] || break
		all+=$pids
		# shellcheck disable=SC2086
		_lab_wait_dead 2 $pids
	done
	# Killed guests leave zombies until their parents reap them; wait (a
	# little) so a check right after teardown sees no process at all.
	# shellcheck disable=SC2086
	_lab_wait_gone 5 $all
	# File systems mounted under the lab dir (a small tmpfs as nache's
	# cache disk): lazily, deepest first.
	local m
	for m in $(findmnt -rn -o TARGET 2>/dev/null | grep -F -- "$dir/" | sort -r); do
		umount -l "$m" 2>/dev/null || echo "lab: could not unmount $m" >&2
	done
	for ns in $namespaces; do
		ip netns delete "$ns" 2>/dev/null ||
			echo "lab: could not delete namespace $ns" >&2
	done
}

# lab_cleanup_stale — remove leftovers of crashed or killed earlier runs:
# namespaces named nl-*, their processes, registry entries and work dirs
# whose owner shell is gone.  Labs whose owner still runs are left alone.
lab_cleanup_stale() {
	local -
	set +e +u +o pipefail
	local entry id dir owner start ns
	declare -A live=()
	mkdir -p "$LAB_REGISTRY"
	for entry in "$LAB_REGISTRY"/*; do
		[ -f "$entry" ] || continue
		id=${entry##*/}
		read -r dir owner start <"$entry"
		if [ -n "$owner" ] && [ "$(_lab_proc_start "$owner")" = "$start" ]; then
			live[$id]=1
			continue
		fi
		echo "lab: cleaning stale lab $id ($dir)" >&2
		_lab_kill_lab "$id" "${dir:-/nonexistent}"
		if [ -n "$dir" ] && [ -d "$dir" ] && [ ! -e "$dir/KEEP" ]; then
			case $dir in */nl-"$id".*) rm -rf "$dir" ;; esac
		fi
		rm -f "$entry"
	done
	# Namespaces without a registry entry (registry lost, e.g. reboot of
	# /run is impossible, but a manual rm is not).
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^nl-'); do
		id=${ns#nl-}
		id=${id%%-*}
		[ -z "${live[$id]:-}" ] || continue
		echo "lab: deleting stale namespace $ns" >&2
		_lab_kill_lab "$id" "/nonexistent-nl-$id"
	done
	return 0
}

# lab_wait_until TIMEOUT_S CMD... — run CMD every LAB_WAIT_INTERVAL (0.1 s)
# until it succeeds; returns 1 after TIMEOUT_S seconds.
lab_wait_until() {
	local timeout=$1
	shift
	local deadline=$(($(_lab_now_us) + ${timeout%.*} * 1000000))
	until "$@"; do
		[ "$(_lab_now_us)" -lt "$deadline" ] || return 1
		sleep "${LAB_WAIT_INTERVAL:-0.1}"
	done
}

# ------------------------------------------------------------------ network

# lab_net_up PROFILE — build namespaces, bridges, the router guest and routes,
# then apply PROFILE (wan | lan | lanrouter).  See README for the picture.
lab_net_up() {
	_lab_need_init || return 1
	local profile=${1:-wan} ns
	for ns in "$LAB_NS_LAN" "$LAB_NS_ROUTER" "$LAB_NS_REMOTE"; do
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up
		_lab_ns "$ns" sysctl -qw net.ipv4.ip_forward=1 \
			net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	done
	local lan=(ip -n "$LAB_NS_LAN") rtr=(ip -n "$LAB_NS_ROUTER")
	local rem=(ip -n "$LAB_NS_REMOTE")
	# LAN bridge: nache's addresses; client taps attach here.
	"${lan[@]}" link add br0 type bridge stp_state 0 forward_delay 0
	"${lan[@]}" addr add "$LAB_NACHE_ADDR/24" dev br0
	"${lan[@]}" addr add "$LAB_PROXYV4_ADDR/24" dev br0
	"${lan[@]}" link set br0 up
	# Remote bridge: Ganesha VFS address; the knfsd guest's tap attaches.
	"${rem[@]}" link add br0 type bridge stp_state 0 forward_delay 0
	"${rem[@]}" addr add "$LAB_REMOTE_ADDR/24" dev br0
	"${rem[@]}" link set br0 up
	# Router namespace: one bridge per side joins a guest tap and a veth.
	local side peer_ns addr
	for side in a b; do
		if [ $side = a ]; then
			peer_ns=$LAB_NS_LAN addr=$LAB_NACHE_WAN_ADDR
		else
			peer_ns=$LAB_NS_REMOTE addr=$LAB_REMOTE_WAN_ADDR
		fi
		"${rtr[@]}" link add br$side type bridge stp_state 0 forward_delay 0
		"${rtr[@]}" tuntap add dev tap$side mode tap
		"${rtr[@]}" link set tap$side master br$side up
		"${rtr[@]}" link add w$side type veth peer name wan0 netns "$peer_ns"
		"${rtr[@]}" link set w$side master br$side up
		"${rtr[@]}" link set br$side up
		ip -n "$peer_ns" addr add "$addr/24" dev wan0
		ip -n "$peer_ns" link set wan0 up
	done
	# Direct veth between nache and remote, used by the "lan" profile.
	"${lan[@]}" link add byp0 type veth peer name byp0 netns "$LAB_NS_REMOTE"
	"${lan[@]}" addr add "$_LAB_BYPASS_LAN_ADDR/30" dev byp0
	"${rem[@]}" addr add "$_LAB_BYPASS_REMOTE_ADDR/30" dev byp0
	"${lan[@]}" link set byp0 up
	"${rem[@]}" link set byp0 up
	# Ganesha refuses to start NFSv3 unless rpcbind accepts its
	# registrations, so each Ganesha namespace gets a loopback stub, or
	# (LAB_NLM=1) nache's the real rpcbind and rpc.statd. Each namespace's
	# daemons see a /run of their own (_LAB_PRIVATE_MOUNTS_SH).
	mkdir -p "$(_lab_ns_run_dir "$LAB_NS_LAN")" \
		"$(_lab_ns_run_dir "$LAB_NS_REMOTE")"
	if [ "${LAB_NLM:-}" = 1 ]; then
		_lab_nsm_start || return 1
	else
		_lab_rpcbind_start lan "$LAB_NS_LAN" || return 1
	fi
	_lab_rpcbind_start rem "$LAB_NS_REMOTE" || return 1
	# The router guest.  Its agent is reached from the nache namespace.
	_lab_guest_start rtr router "$LAB_NS_ROUTER" "$LAB_NS_LAN" 160M \
		"$LAB_ROUTER_LAN_ADDR" \
		"eth0=$LAB_ROUTER_LAN_ADDR/24 eth1=$LAB_ROUTER_REMOTE_ADDR/24" \
		"10.251.1.0/24 via $LAB_NACHE_WAN_ADDR;10.251.4.0/24 via $LAB_REMOTE_WAN_ADDR" \
		"eth0=tuntap,tapa,02:4c:00:02:00:02 eth1=tuntap,tapb,02:4c:00:03:00:02" \
		"" || return 1
	lab_set_profile "$profile"
}

# _lab_rpcbind_start TAG NS — a stub rpcbind on 127.0.0.1:111 of namespace
# NS (labtool.py rpcbind-stub).  Ganesha refuses to start NFSv3 unless its
# rpcbind registrations succeed; the stub accepts them.  It is invisible to
# clients (loopback only), so their mount.nfs never gets "program not
# registered" answers and uses the explicit ports of lab_client_mount.
_lab_rpcbind_start() {
	local tag=$1 ns=$2 rc=0
	_lab_spawn "rpcbind-$tag" "$ns" "$LAB_DIR" "$LAB_DIR/logs/rpcbind-$tag.log" \
		"${_LAB_TOOL[@]}" rpcbind-stub || return 1
	_lab_ns "$ns" "${_LAB_TOOL[@]}" wait-rpc 127.0.0.1 --port 111 \
		--prog 100000 --vers 2 --pid "$_LAB_SPAWNED_PID" --timeout 20 &
	wait $! || rc=$?
	[ $rc = 0 ] || _lab_err "rpcbind stub in $ns not answering" || return 1
}

# _lab_ns_run_dir NS — the directory daemons of namespace NS see as /run.
_lab_ns_run_dir() { echo "$LAB_DIR/nsrun/${1##*-}"; }

# _lab_private RUN_DIR IDENTITY_DIR — prints, each ended by a NUL (read
# them with mapfile -d ''), the command words that run the rest of a
# command line under _LAB_PRIVATE_MOUNTS_SH (IDENTITY_DIR may be empty).
_lab_private() {
	printf '%s\0' unshare --mount --propagation private bash -c \
		"$_LAB_PRIVATE_MOUNTS_SH" "$1" "$2"
}

# The script (bash -c SCRIPT RUN_DIR IDENTITY_DIR CMD...) that runs CMD in
# a mount namespace of its own (unshare --mount --propagation private:
# nothing reaches the host) where RUN_DIR is /run (and so /var/run): the
# rpcbind socket, lock and pid files a daemon finds or makes there are its
# network namespace's, never the host's or another lab's (Ganesha registers
# with the rpcbind whose socket it finds in /run, and falls back to
# 127.0.0.1:111 of its namespace). With IDENTITY_DIR (may be empty), that
# directory's passwd and group are /etc/passwd and /etc/group. It execs,
# so CMD keeps the pid _lab_spawn records.
# shellcheck disable=SC2016
_LAB_PRIVATE_MOUNTS_SH='mount --bind "$0" /run || exit 1
if [ -n "$1" ]; then
	for f in passwd group; do
		mount --bind "$1/$f" "/etc/$f" || exit 1
	done
fi
shift
exec "$@"'

# _lab_nsm_start — LAB_NLM=1: Debian's rpcbind and rpc.statd in nache's
# namespace, as on an office box serving NFSv3 with locks: rpcbind on port
# 111 of every address there (clients ask it for NFS, MOUNT and NLM), and
# the status monitor Ganesha's NLM asks to watch each client that locks
# (SM_MON; without it every NLM lock is refused), its records in
# $LAB_DIR/nsm.  Both, and nache, see the namespace's run dir as /run.
# Returns once both answer.
_lab_nsm_start() {
	local run rc=0 private=()
	run=$(_lab_ns_run_dir "$LAB_NS_LAN")
	mapfile -d '' -t private < <(_lab_private "$run" "")
	mkdir -p "$run/rpcbind" "$LAB_DIR/nsm/sm" "$LAB_DIR/nsm/sm.bak"
	# rpcbind runs as _rpc once its sockets are bound (-w keeps its
	# registrations in /run/rpcbind across a restart of it).
	! id _rpc >/dev/null 2>&1 || chown _rpc: "$run/rpcbind"
	_lab_spawn rpcbind-lan "$LAB_NS_LAN" "$LAB_DIR" \
		"$LAB_DIR/logs/rpcbind-lan.log" "${private[@]}" rpcbind -f -w ||
		return 1
	_lab_ns "$LAB_NS_LAN" "${_LAB_TOOL[@]}" wait-rpc 127.0.0.1 --port 111 \
		--prog 100000 --vers 2 --pid "$_LAB_SPAWNED_PID" --timeout 20 &
	wait $! || rc=$?
	[ $rc = 0 ] || _lab_err "rpcbind in $LAB_NS_LAN not answering" || return 1
	# -L: a fresh lab has nobody to notify (lab_nsm_notify does, later).
	_lab_spawn statd "$LAB_NS_LAN" "$LAB_DIR" "$LAB_DIR/logs/statd.log" \
		"${private[@]}" rpc.statd -F -d -L -P "$LAB_DIR/nsm" || return 1
	lab_wait_until 20 _lab_ns "$LAB_NS_LAN" rpcinfo -T tcp 127.0.0.1 \
		status 1 >/dev/null 2>&1 ||
		_lab_err "rpc.statd in $LAB_NS_LAN not registered with rpcbind" ||
		return 1
}

# lab_nsm_retire / lab_nsm_notify — LAB_NLM=1: what the box does around a
# start of nache (deploy/nache-nsm, as nache.service runs it) so that the
# NFSv3 clients that held NLM locks reclaim them: before the start, statd's
# records of those clients are set aside for sm-notify (nache's start would
# make statd forget them); after it (lab_nache_start returned: nache
# serves), sm-notify tells each "nache's host restarted", and their lockd
# reclaims in nache's grace period (start nache with LAB_GRACE=1).
# lab_nsm_notify returns once nache answers NLM and sm-notify has sent its
# first notices (it retries unanswered ones in the background).
lab_nsm_retire() { _lab_nsm retire; }
lab_nsm_notify() { _lab_nsm notify -a "$LAB_NACHE_ADDR" -t 60; }
_lab_nsm() {
	_lab_need_init || return 1
	local private=() rc=0
	mapfile -d '' -t private < <(_lab_private "$(_lab_ns_run_dir "$LAB_NS_LAN")" "")
	_lab_ns "$LAB_NS_LAN" "${private[@]}" "$LAB_REPO_DIR/deploy/nache-nsm" \
		"$1" -P "$LAB_DIR/nsm" "${@:2}" >>"$LAB_DIR/logs/nache-nsm.log" 2>&1 &
	wait $! || rc=$?
	[ $rc = 0 ] || _lab_err "nache-nsm $1 failed ($rc): see $LAB_DIR/logs/nache-nsm.log"
}

# lab_set_profile PROFILE — switch WAN shaping at run time:
#   wan        via the router, netem "$LAB_WAN_NETEM" on both router
#              interfaces (default 40 ms each way = 80 ms RTT, 50 Mbit/s)
#   lanrouter  via the router, no shaping (measures the UML router itself)
#   lan        direct veth nache<->remote, bypassing the router (fastest)
# Exports LAB_PROFILE.
lab_set_profile() {
	_lab_need_init || return 1
	local profile=$1 netem path
	case $profile in
	wan) netem=$LAB_WAN_NETEM path=router ;;
	lanrouter) netem='' path=router ;;
	lan) netem='' path=bypass ;;
	*) _lab_err "unknown profile '$profile' (wan|lan|lanrouter)"; return 1 ;;
	esac
	lab_set_netem "$netem" || return 1
	local lan_gw=$LAB_ROUTER_LAN_ADDR rem_gw=$LAB_ROUTER_REMOTE_ADDR
	if [ $path = bypass ]; then
		lan_gw=$_LAB_BYPASS_REMOTE_ADDR rem_gw=$_LAB_BYPASS_LAN_ADDR
	fi
	# Source address pinned: nache's upstream connections always come from
	# LAB_NACHE_WAN_ADDR, whichever path is active.
	ip -n "$LAB_NS_LAN" route replace 10.251.3.0/24 \
		via "$LAB_ROUTER_LAN_ADDR" src "$LAB_NACHE_WAN_ADDR" || return 1
	ip -n "$LAB_NS_LAN" route replace 10.251.4.0/24 via "$lan_gw" \
		src "$LAB_NACHE_WAN_ADDR" || return 1
	ip -n "$LAB_NS_REMOTE" route replace 10.251.2.0/24 \
		via "$LAB_ROUTER_REMOTE_ADDR" || return 1
	local dst
	for dst in 10.251.1.0/24 "$LAB_NACHE_WAN_ADDR/32"; do
		ip -n "$LAB_NS_REMOTE" route replace "$dst" via "$rem_gw" || return 1
	done
	LAB_PROFILE=$profile
	export LAB_PROFILE
	_lab_log "profile $profile (path $path${netem:+, netem $netem})"
}

# lab_set_netem "NETEM ARGS" — set (or with "" remove) netem on both router
# interfaces, e.g. lab_set_netem "delay 50ms rate 20mbit".  Does not change
# the path; use it after lab_set_profile wan|lanrouter for custom shaping.
lab_set_netem() {
	local netem=$1 cmd
	if [ -n "$netem" ]; then
		cmd="tc qdisc replace dev eth0 root netem $netem &&
			tc qdisc replace dev eth1 root netem $netem"
	else
		cmd="tc qdisc del dev eth0 root 2>/dev/null;
			tc qdisc del dev eth1 root 2>/dev/null; true"
	fi
	lab_router_run "$cmd"
}

# lab_rtt [NS] [ADDR] [COUNT] — ICMP RTT from namespace NS (default nache's)
# to ADDR (default LAB_REMOTE_ADDR); prints the median in ms.
lab_rtt() {
	local ns=${1:-$LAB_NS_LAN} addr=${2:-$LAB_REMOTE_ADDR} count=${3:-10} out
	out=$(_lab_ns "$ns" "${_LAB_TOOL[@]}" ping -c "$count" -i 0.05 "$addr") ||
		{ echo "$out" >&2; return 1; }
	out=$(grep '^rtt' <<<"$out") || return 1
	out=${out#*= }
	out=${out%% ms*}
	echo "${out##*/}"
}

# lab_throughput [SECONDS] — TCP goodput from the nache namespace to the
# remote namespace (the WAN path nache's upstream uses); prints Mbit/s.
lab_throughput() {
	local seconds=${1:-3} port=$((20000 + RANDOM % 20000)) out sink
	_lab_ns "$LAB_NS_REMOTE" "${_LAB_TOOL[@]}" tput-sink "$LAB_REMOTE_ADDR" \
		--port "$port" --timeout $((seconds + 60)) &
	sink=$!
	out=$(_lab_ns "$LAB_NS_LAN" "${_LAB_TOOL[@]}" tput-send \
		"$LAB_REMOTE_ADDR" --port "$port" --seconds "$seconds") ||
		{ kill "$sink" 2>/dev/null; echo "$out" >&2; return 1; }
	wait "$sink"
	out=${out#throughput }
	echo "${out%% *}"
}

# ------------------------------------------------------------------ guests

# _lab_guest_boot NAME ROLE RUN_NS REACH_NS MEM AGENT_ADDR IFS ROUTES
#                 UML_ARGS EXTRA_ENV
# Start a UML guest in RUN_NS; its agent will listen on AGENT_ADDR, reachable
# from REACH_NS.  IFS/ROUTES as in guest_init.sh; UML_ARGS adds kernel
# arguments (NICs, disks); EXTRA_ENV adds lines to the guest's env file.
# Does not wait: see _lab_guest_wait.
_lab_guest_boot() {
	local name=$1 role=$2 run_ns=$3 reach_ns=$4 mem=$5 agent=$6 ifs=$7
	local routes=$8 uml_args=$9 extra_env=${10}
	_lab_guest_prepare "$name" "$role" "$agent" "$ifs" "$routes" \
		"LAB_GUEST_PLATFORM=uml
$extra_env" || return 1
	rm -rf "$LAB_DIR/uml/$name"
	# shellcheck disable=SC2086
	_lab_spawn "guest-$name" "$run_ns" "$LAB_DIR" \
		"$LAB_DIR/logs/$name.console" \
		env TMPDIR=/dev/shm "$LAB_UML" "mem=$mem" \
		root=/dev/root rootfstype=hostfs rootflags=/ ro \
		"init=$LAB_SRC_DIR/guest_init.sh" \
		"lab_env=$LAB_DIR/guests/$name.env" \
		"umid=$name" "uml_dir=$LAB_DIR/uml/" \
		con=null con0=null,fd:1 $uml_args || return 1
	_lab_guest_register "$name" "$reach_ns" "$agent"
}

# _lab_guest_prepare NAME ROLE AGENT_ADDR IFS ROUTES EXTRA_ENV — the part of
# a boot common to UML and qemu guests: refuse a running guest NAME, write
# its env file ($LAB_DIR/guests/NAME.env, read by guest_init.sh), start a
# fresh console log (the previous one appended to NAME.console.old) and
# stamp the boot's start.
_lab_guest_prepare() {
	local name=$1 role=$2 agent=$3 ifs=$4 routes=$5 extra_env=$6
	local console=$LAB_DIR/logs/$name.console old
	old=$(_lab_pid_of "guest-$name")
	if [ -n "$old" ] && _lab_alive "$old"; then
		_lab_err "guest $name already running"
		return 1
	fi
	cat >"$LAB_DIR/guests/$name.env" <<-EOF
		LAB_DIR='$LAB_DIR'
		LAB_SRC_DIR='$LAB_SRC_DIR'
		LAB_GUEST_NAME='$name'
		LAB_GUEST_ROLE='$role'
		LAB_GUEST_IFS='$ifs'
		LAB_GUEST_ROUTES='$routes'
		LAB_GUEST_AGENT='$agent $LAB_AGENT_PORT'
		$extra_env
	EOF
	[ ! -s "$console" ] || { cat "$console" >>"$console.old" && : >"$console"; }
	_lab_now_us >"$LAB_DIR/guests/$name.boot_start"
}

# _lab_guest_register NAME REACH_NS AGENT_ADDR — where guest NAME's agent
# answers (lab_guest_run and friends look it up).
_lab_guest_register() {
	_LAB_GUEST_NS[$1]=$2
	_LAB_GUEST_ADDR[$1]=$3
	echo "$2 $3" >"$LAB_DIR/guests/$1.agent"
}

# ------------------------------------------------------------------ qemu guests
# A guest running a Debian kernel under qemu with TCG (no KVM: nested
# virtualisation does not work on the lab's machines), for what UML's 6.1
# cannot do: knfsd >= 6.6 grants write delegations.  It is set up like a UML
# guest: the host's root read-only as its root (9p instead of hostfs), the
# same guest_init.sh as PID 1 and the same agent, taps in the lab's
# namespaces.  The kernel cannot mount a 9p root by itself (9p is modular in
# Debian's kernel): a small initramfs (busybox, the 9p modules and
# qemu_initramfs.sh) mounts it and switches to guest_init.sh.

# _lab_qemu_kernel — find the kernel in LAB_QEMU_KERNEL_DIR; sets
# _LAB_QEMU_VMLINUZ and _LAB_QEMU_KVER.
_lab_qemu_kernel() {
	local kdir=$LAB_QEMU_KERNEL_DIR vmlinuz
	vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -n 1)
	if [ -z "$vmlinuz" ] || [ ! -s "$kdir/lib/modules/${vmlinuz##*/vmlinuz-}/modules.dep" ]; then
		_lab_err "no Linux 6.12 kernel with modules in $kdir: run deploy/install-deps.sh"
		return 1
	fi
	_LAB_QEMU_VMLINUZ=$vmlinuz
	_LAB_QEMU_KVER=${vmlinuz##*/vmlinuz-}
}

# _lab_qemu_initramfs — build $LAB_DIR/qemu/initramfs.gz (once per lab):
# busybox-static, the modules that mounting the 9p root needs (uncompressed,
# in load order) and lab/qemu_initramfs.sh as /init.
_lab_qemu_initramfs() {
	local out=$LAB_DIR/qemu/initramfs.gz root=$LAB_DIR/qemu/initramfs
	local kdir=$LAB_QEMU_KERNEL_DIR applet line ko deps
	[ ! -s "$out" ] || return 0
	[ -x /bin/busybox ] || _lab_err "no /bin/busybox (busybox-static)" ||
		return 1
	rm -rf "$root"
	mkdir -p "$root"/{bin,dev,proc,newroot,modules}
	cp /bin/busybox "$root/bin/" || return 1
	for applet in sh mount umount insmod switch_root; do
		ln -s busybox "$root/bin/$applet"
	done
	cp "$LAB_SRC_DIR/qemu_initramfs.sh" "$root/init" && chmod 755 "$root/init" ||
		return 1
	# "insmod PATH" lines, dependencies first.
	deps=$(modprobe -d "$kdir" -S "$_LAB_QEMU_KVER" --show-depends -a \
		9pnet_virtio 9p) || _lab_err "modules of 9p not found in $kdir" ||
		return 1
	while read -r line; do
		[[ $line == insmod\ * ]] || continue
		ko=${line#insmod }
		ko=${ko%% *}
		[ ! -e "$root/modules/${ko##*/}" ] || continue
		case $ko in
		*.xz) xz -dc "$ko" ;;
		*.zst) zstd -qdc "$ko" ;;
		*) cat "$ko" ;;
		esac >"$root/modules/${ko##*/}" || _lab_err "cannot unpack $ko" ||
			return 1
		echo "${ko##*/}" >>"$root/modules.order"
	done <<<"$deps"
	(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp" &&
		mv "$out.tmp" "$out" && rm -rf "$root"
}

# _lab_qemu_share PATH TAG [ro] — qemu arguments exporting the host's PATH
# over 9p as TAG (guest_init.sh mounts the tags).  "none": files keep the
# host's owners (qemu runs as root); "remap": inode numbers stay unique
# across the host file systems a share spans (the root spans them all).
_lab_qemu_share() {
	local opts="local,path=${1//,/,,},mount_tag=$2,security_model=none,multidevs=remap"
	[ -z "${3:-}" ] || opts+=",readonly=on"
	echo "-virtfs"
	echo "$opts"
}

# _lab_qemu_guest_boot NAME ROLE RUN_NS REACH_NS MEM AGENT_ADDR IFS ROUTES
#                      EXTRA_ENV [QEMU_ARG...]
# Start a qemu guest (one CPU, TCG) in RUN_NS, like _lab_guest_boot: its
# agent will listen on AGENT_ADDR, reachable from REACH_NS.  QEMU_ARGs add
# devices (NICs, disks).  Its 9p shares: the host's root (read-only, the
# guest's root), $LAB_DIR (read-write), the source tree and the kernel's
# modules (read-only).  Console in $LAB_DIR/logs/NAME.console; the spawned
# process is qemu itself (killing it powers the guest off).
_lab_qemu_guest_boot() {
	local name=$1 role=$2 run_ns=$3 reach_ns=$4 mem=$5 agent=$6 ifs=$7
	local routes=$8 extra_env=$9
	shift 9
	command -v "$LAB_QEMU" >/dev/null ||
		_lab_err "no $LAB_QEMU (qemu-system-x86): run deploy/install-deps.sh" ||
		return 1
	_lab_qemu_kernel && _lab_qemu_initramfs || return 1
	_lab_guest_prepare "$name" "$role" "$agent" "$ifs" "$routes" \
		"LAB_GUEST_PLATFORM=qemu
$extra_env" || return 1
	local shares=()
	mapfile -t shares < <(_lab_qemu_share / hostroot ro
		_lab_qemu_share "$LAB_DIR" labdir
		_lab_qemu_share "$LAB_REPO_DIR" repo ro
		_lab_qemu_share "$LAB_QEMU_KERNEL_DIR/lib/modules" modules ro)
	# No default devices (NIC, VGA, CD-ROM), no display, the serial console
	# on stdout (the console log); "panic=-1" with -no-reboot ends qemu when
	# the guest panics (PID 1 failing early), so the boot wait sees it die.
	_lab_spawn "guest-$name" "$run_ns" "$LAB_DIR" \
		"$LAB_DIR/logs/$name.console" \
		"$LAB_QEMU" -name "lab-$name" -accel tcg -cpu max -smp 1 -m "$mem" \
		-nodefaults -no-user-config -display none -no-reboot \
		-serial stdio -kernel "$_LAB_QEMU_VMLINUZ" \
		-initrd "$LAB_DIR/qemu/initramfs.gz" \
		-append "console=ttyS0 panic=-1 lab_init=$LAB_SRC_DIR/guest_init.sh lab_env=$LAB_DIR/guests/$name.env" \
		"${shares[@]}" "$@" || return 1
	_lab_guest_register "$name" "$reach_ns" "$agent"
}

# _lab_guest_wait NAME... — wait (in parallel, bounded by LAB_BOOT_TIMEOUT)
# until each booting guest's agent answers.  A guest that dies or times out
# is killed and its console tail printed; returns 1 if any failed.
_lab_guest_wait() {
	local name ns addr pid failed='' t0 ms
	declare -A waiters=()
	for name in "$@"; do
		read -r ns addr <"$LAB_DIR/guests/$name.agent"
		pid=$(_lab_pid_of "guest-$name")
		_lab_ns "$ns" "${_LAB_TOOL[@]}" wait-agent "$addr" \
			--port "$LAB_AGENT_PORT" --pid "$pid" \
			--timeout "$LAB_BOOT_TIMEOUT" &
		waiters[$name]=$!
	done
	for name in "$@"; do
		local rc=0 console=$LAB_DIR/logs/$name.console
		wait "${waiters[$name]}" || rc=$?
		if [ $rc != 0 ]; then
			[ $rc = 2 ] && echo "lab: guest $name died while booting" >&2
			[ $rc = 1 ] &&
				echo "lab: guest $name not ready in ${LAB_BOOT_TIMEOUT}s" >&2
			echo "--- tail of $console" >&2
			tail -n 30 "$console" >&2
			_lab_kill_spawned "guest-$name"
			failed=1
			continue
		fi
		t0=$(cat "$LAB_DIR/guests/$name.boot_start")
		ms=$((($(_lab_now_us) - t0) / 1000))
		echo "$ms" >"$LAB_DIR/guests/$name.boot_ms"
		_lab_log "guest $name up in ${ms} ms"
	done
	[ -z "$failed" ]
}

# _lab_guest_start ARGS... — _lab_guest_boot ARGS, then wait for it.
_lab_guest_start() {
	_lab_guest_boot "$@" && _lab_guest_wait "$1"
}

# _lab_guest_stop NAME — kill a guest (it holds no state worth a clean halt).
_lab_guest_stop() {
	local pid
	pid=$(_lab_pid_of "guest-$1")
	[ -n "$pid" ] || return 0
	_lab_kill_spawned "guest-$1"
	_lab_wait_dead 10 "$pid" || _lab_err "guest $1 (pid $pid) did not die"
	rm -f "$LAB_DIR/run/guest-$1.pid"
}

# lab_guest_run NAME CMD — run CMD (bash -c) as root in guest NAME (c1, c2,
# rtr, knfsd).  Prints its stdout/stderr, returns its exit status; 124 when
# LAB_CMD_TIMEOUT expired (the command is killed), 255 when the channel
# failed.  Runs in the background and waits, so signals reach the traps
# promptly and many calls may run concurrently.
lab_guest_run() {
	_lab_guest_exec "$1" "" "" "$2"
}

# _lab_guest_exec NAME UID GID CMD [GROUPS] — common path of the run
# functions.  With UID, GROUPS (comma-separated gids) are the supplementary
# groups (none when empty).
_lab_guest_exec() {
	local name=$1 uid=$2 gid=$3 cmd=$4 groups=${5:-} ns addr rc=0
	ns=${_LAB_GUEST_NS[$name]:-}
	addr=${_LAB_GUEST_ADDR[$name]:-}
	if [ -z "$ns" ] && [ -r "${LAB_DIR:-}/guests/$name.agent" ]; then
		read -r ns addr <"$LAB_DIR/guests/$name.agent"
	fi
	[ -n "$ns" ] || _lab_err "no guest named '$name'" || return 255
	local extra=()
	[ -z "$uid" ] || extra=(--uid "$uid" --gid "$gid" --groups "$groups")
	_lab_ns "$ns" "${_LAB_TOOL[@]}" run "$addr" "$cmd" \
		--port "$LAB_AGENT_PORT" --timeout "$LAB_CMD_TIMEOUT" "${extra[@]}" &
	wait $! || rc=$?
	return $rc
}

# lab_client_start N [MEM] — boot LAN client N (1..99), address
# 10.251.1.(10+N), default route via nache's namespace, guest name "cN",
# memory MEM (default LAB_CLIENT_MEM).  Returns when its agent answers.
lab_client_start() {
	_lab_client_boot "$1" "${2:-$LAB_CLIENT_MEM}" && _lab_guest_wait "c$1"
}

# lab_clients_start N... — boot several clients in parallel (memory
# LAB_CLIENT_MEM each) and wait for all of them.
lab_clients_start() {
	local n names=()
	for n in "$@"; do
		_lab_client_boot "$n" "$LAB_CLIENT_MEM" || return 1
		names+=("c$n")
	done
	_lab_guest_wait "${names[@]}"
}

# _lab_client_boot N MEM — create client N's tap and start its guest.
_lab_client_boot() {
	_lab_need_init || return 1
	local n=$1 mem=$2
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 99 ] ||
		_lab_err "client number must be 1..99" || return 1
	local addr tap=tapc$n mac
	addr=$(lab_client_addr "$n")
	mac=$(printf '02:4c:00:01:00:%02x' "$n")
	if ! ip -n "$LAB_NS_LAN" link show "$tap" >/dev/null 2>&1; then
		ip -n "$LAB_NS_LAN" tuntap add dev "$tap" mode tap || return 1
		ip -n "$LAB_NS_LAN" link set "$tap" master br0 up || return 1
	fi
	_lab_krb5_client_keytab "$n" || return 1
	_lab_guest_boot "c$n" client "$LAB_NS_LAN" "$LAB_NS_LAN" "$mem" \
		"$addr" "eth0=$addr/24" "default via $LAB_NACHE_ADDR" \
		"eth0=tuntap,$tap,$mac" "LAB_GUEST_IDENTITY_DIR='${LAB_IDENTITY_DIR:-${LAB_KRB5_DIR:-}}'
LAB_GUEST_NLM='${LAB_NLM:-}'
$(_lab_krb5_guest_env "c$n")"
}

# lab_client_addr N — LAN address of client N.
lab_client_addr() { echo "10.251.1.$((10 + $1))"; }

# lab_client_stop N — power client N off (kill; mounts die with it).
lab_client_stop() { _lab_guest_stop "c$1"; }

# lab_client_run N CMD — run CMD as root in client N (see lab_guest_run).
lab_client_run() { _lab_guest_exec "c$1" "" "" "$2"; }

# lab_client_run_as N UID GID CMD — run CMD in client N as UID:GID, no
# supplementary groups (setpriv), HOME=/tmp.
lab_client_run_as() { _lab_guest_exec "c$1" "$2" "$3" "$4"; }

# lab_client_run_as_groups N UID GID GROUPS CMD — like lab_client_run_as,
# with the supplementary groups GROUPS (comma-separated gids, e.g.
# "3000,3001"; empty: none).  They travel in the AUTH_SYS credential of the
# client's NFS calls.
lab_client_run_as_groups() {
	[[ $4 =~ ^([0-9]+(,[0-9]+)*)?$ ]] ||
		_lab_err "lab_client_run_as_groups: GROUPS '$4' is not a comma-separated list of gids" ||
		return 2
	_lab_guest_exec "c$1" "$2" "$3" "$5" "$4"
}

# lab_router_run CMD — run CMD as root in the router guest.
lab_router_run() { _lab_guest_exec rtr "" "" "$1"; }

# lab_client_mount N SERVER_ADDR EXPORT MNT [OPTS] — mount SERVER:EXPORT on
# MNT (created; /mnt is a tmpfs in guests) in client N.  OPTS default
# "vers=4.1".  For vers=3 the options proto=tcp, port=2049, mountvers=3,
# mountproto=tcp, mountport=20048 and nolock are added unless given: the lab
# has no rpcbind that clients can reach.  With LAB_NLM=1, NFSv3 mounts of
# nache take OPTS as they are: mount.nfs asks nache's rpcbind for the
# ports, and locks go to nache's NLM.
lab_client_mount() {
	local n=$1 server=$2 export=$3 mnt=$4 opts=${5:-vers=4.1} o
	if [[ ,$opts, =~ ,(nfs)?vers=3, ]] &&
		! { [ "${LAB_NLM:-}" = 1 ] && [ "$server" = "$LAB_NACHE_ADDR" ]; }; then
		# mount.nfs skips its rpcbind probes only when version, protocol
		# and port are all given, for both NFS and MOUNT.
		for o in proto=tcp port=2049 mountvers=3 mountproto=tcp \
			mountport=20048 nolock; do
			[[ ,$opts, == *",${o%%=*}"[=,]* ]] || opts+=",$o"
		done
	fi
	lab_client_run "$n" "mkdir -p '$mnt' &&
		mount -t nfs -o '$opts' '$server:$export' '$mnt'"
}

# lab_client_umount N MNT — unmount (lazy fallback after 20 s).
lab_client_umount() {
	lab_client_run "$1" "timeout 20 umount '$2' || umount -l '$2'"
}

# ------------------------------------------------------------------ ganesha

# _lab_ganesha_start NAME NS ADDR EXPORT_BLOCK [IDENTITY_DIR] — start a
# staged ganesha.nfsd instance NAME (config, log, pid file and recovery dir
# in $LAB_DIR/NAME) bound to ADDR, seeing NS's run dir as /run (its
# rpcbind); with IDENTITY_DIR, it sees that directory's passwd and group
# (_LAB_PRIVATE_MOUNTS_SH).  Returns once it
# answers an NFS NULL call and logged "NFS SERVER INITIALIZED"; if it exits
# first, prints its log tail, fails.
_lab_ganesha_start() {
	local name=$1 ns=$2 addr=$3 export_block=$4 identities=${5:-}
	local dir=$LAB_DIR/$name log=$LAB_DIR/logs/$name.log
	local old
	old=$(_lab_pid_of "ganesha-$name")
	if [ -n "$old" ] && _lab_alive "$old"; then
		_lab_err "ganesha $name already running (pid $old)"
		return 1
	fi
	mkdir -p "$dir/recovery"
	cat >"$dir/ganesha.conf" <<-EOF
		# generated by lab/lab.sh for instance $name
		NFS_CORE_PARAM {
			Plugins_Dir = "$LAB_STAGE_DIR/lib/ganesha";
			Protocols = 3, 4;
			NFS_Port = 2049;
			MNT_Port = 20048;
			Bind_addr = $addr;
			# NFSv3 locks: nache with LAB_NLM=1 only. A blocked NLM
			# lock that the remote refused is asked again every 2 s
			# (Ganesha's default: 10 s).
			$([ "$name" = nache ] && [ "${LAB_NLM:-}" = 1 ] &&
				echo "Enable_NLM = true; Blocked_Lock_Poller_Interval = 2;" ||
				echo "Enable_NLM = false;")
			Enable_RQUOTA = false;
			# NFSv3 clients mount the pseudo path too (/export).
			Mount_Path_Pseudo = true;
		}
		$(_lab_ganesha_krb5_conf "$name" "$dir")
		NFSv4 {
			RecoveryBackend = fs;
			RecoveryRoot = "$dir/recovery";
			# LAB_GRACE=1 (restart tests): clients reclaim their
			# state in a short grace period after a restart.
			Graceless = $([ "${LAB_GRACE:-0}" = 1 ] && echo false || echo true);
			Lease_Lifetime = ${LAB_LEASE_LIFETIME:-60};
			Grace_Period = ${LAB_GRACE_PERIOD:-90};
			Allow_Numeric_Owners = true;
			Only_Numeric_Owners = true;
			$(_lab_ganesha_idmapconf "$name")
			# Delegations to this instance's clients (nache only,
			# with LAB_NACHE_DELEGATIONS).
			Delegations = $([ "$name" = nache ] && [ -n "${LAB_NACHE_DELEGATIONS:-}" ] && echo true || echo false);
		}
		$export_block
	EOF
	# One log per run: earlier runs move to NAME.log.old (appended).
	if [ -s "$log" ]; then
		cat "$log" >>"$log.old"
		: >"$log"
	fi
	local daemon=()
	# With Kerberos: the lab's krb5.conf, and the acceptor's replay cache
	# in the lab dir (MIT's default is /var/tmp).
	if _lab_ganesha_krb5 "$name"; then
		mkdir -p "$LAB_KRB5_DIR/rcache/$name"
		daemon=(env "KRB5_CONFIG=$LAB_KRB5_CONF"
			"KRB5RCACHEDIR=$LAB_KRB5_DIR/rcache/$name")
	fi
	mapfile -d '' -t -O "${#daemon[@]}" daemon < <(_lab_private "$(_lab_ns_run_dir "$ns")" "$identities")
	daemon+=("$LAB_STAGE_DIR/bin/ganesha.nfsd" -F -f "$dir/ganesha.conf"
		-L "$log" -p "$dir/ganesha.pid" -N NIV_EVENT)
	_lab_spawn "ganesha-$name" "$ns" "$dir" "$LAB_DIR/logs/$name.stdout" \
		"${daemon[@]}" || return 1
	local pid=$_LAB_SPAWNED_PID rc=0 t0
	t0=$(_lab_now_us)
	_lab_ns "$ns" "${_LAB_TOOL[@]}" wait-rpc "$addr" --pid "$pid" \
		--timeout "$LAB_START_TIMEOUT" --log "$log" \
		--log-contains "NFS SERVER INITIALIZED" &
	wait $! || rc=$?
	if [ $rc != 0 ]; then
		if [ $rc = 2 ]; then
			echo "lab: ganesha $name exited during start" >&2
		else
			echo "lab: ganesha $name not serving after ${LAB_START_TIMEOUT}s" >&2
		fi
		echo "--- tail of $log" >&2
		tail -n 40 "$log" >&2
		tail -n 10 "$LAB_DIR/logs/$name.stdout" >&2 2>/dev/null
		_lab_kill_spawned "ganesha-$name"
		return 1
	fi
	_lab_log "ganesha $name serving on $addr (pid $pid, $((($(_lab_now_us) - t0) / 1000)) ms)"
}

# _lab_ganesha_krb5 NAME — whether Ganesha instance NAME speaks Kerberos:
# nache with LAB_NACHE_KRB5=1, the VFS remote with LAB_REMOTE_KRB5=1.
_lab_ganesha_krb5() {
	case $1 in
	nache) [ "$LAB_NACHE_KRB5" = 1 ] ;;
	remote) [ "$LAB_REMOTE_KRB5" = 1 ] ;;
	*) return 1 ;;
	esac
}

# _lab_ganesha_sectype NAME — the SecType of instance NAME's export.
_lab_ganesha_sectype() {
	if _lab_ganesha_krb5 "$1"; then echo "sys, krb5, krb5i, krb5p"; else echo sys; fi
}

# _lab_ganesha_krb5_conf NAME DIR — the NFS_KRB5 block of Ganesha instance
# NAME (DIR its directory): off, but with Kerberos (_lab_ganesha_krb5) it
# accepts nfs/<its host name> from $LAB_KRB5_DIR/NAME.keytab ("nfs": any
# host part the keytab holds). Principals map to users through the NFSv4
# block's IdmapConf (_lab_ganesha_idmapconf; config/README.md, "Kerberos").
_lab_ganesha_krb5_conf() {
	if ! _lab_ganesha_krb5 "$1"; then
		echo "NFS_KRB5 { Active_krb5 = false; }"
		return
	fi
	mkdir -p "$2/ccache"
	cat <<-EOF
		NFS_KRB5 {
			Active_krb5 = true;
			PrincipalName = nfs;
			KeytabPath = "$LAB_KRB5_DIR/$1.keytab";
			CCacheDir = "$2/ccache";
		}
	EOF
}

# _lab_ganesha_krb5_identities NAME — the realm's identity directory when
# instance NAME speaks Kerberos (its principals map to the realm's users),
# else nothing.
_lab_ganesha_krb5_identities() {
	! _lab_ganesha_krb5 "$1" || echo "$LAB_KRB5_DIR"
}

# _lab_ganesha_idmapconf NAME — the NFSv4 block's IdmapConf line of
# instance NAME: for nache, LAB_NACHE_IDMAPCONF; else with Kerberos the
# realm's idmapd.conf; none (/etc/idmapd.conf) otherwise.
_lab_ganesha_idmapconf() {
	local conf=
	[ "$1" != nache ] || conf=${LAB_NACHE_IDMAPCONF:-}
	[ -n "$conf" ] || ! _lab_ganesha_krb5 "$1" || conf=$LAB_KRB5_DIR/idmapd.conf
	[ -z "$conf" ] || echo "IdmapConf = \"$conf\";"
}

# _lab_ganesha_stop NAME [SIGNAL [TIMEOUT_S]] — SIGTERM (or SIGNAL) and
# wait; SIGKILL after TIMEOUT_S (default LAB_STOP_TIMEOUT).
_lab_ganesha_stop() {
	local name=$1 sig=${2:-TERM} timeout=${3:-$LAB_STOP_TIMEOUT} pid
	pid=$(_lab_pid_of "ganesha-$name")
	[ -n "$pid" ] && _lab_alive "$pid" || return 0
	kill -"$sig" "$pid" 2>/dev/null
	if ! _lab_wait_dead "$timeout" "$pid"; then
		echo "lab: ganesha $name ignored SIG$sig, killing" >&2
		_lab_kill_spawned "ganesha-$name"
		_lab_wait_dead 10 "$pid"
	fi
	# Threads of a killed ganesha may linger a moment in its group.
	_lab_kill_spawned "ganesha-$name"
	# Its leader may be a zombie while other threads still exit, holding
	# the pid file's lock: a new ganesha would refuse to start ("already
	# started"). Wait until no thread but the leader is left.
	local deadline=$(($(_lab_now_us) + 10000000))
	while [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -gt 1 ] &&
		[ "$(_lab_now_us)" -lt "$deadline" ]; do
		sleep 0.05
	done
	rm -f "$LAB_DIR/run/ganesha-$name.pid"
}

# lab_remote_vfs_start — Ganesha FSAL_VFS in the remote namespace on
# LAB_REMOTE_ADDR, exporting LAB_REMOTE_EXPORT_DIR (host path, root-owned
# 0755) as /export, NFSv3 and NFSv4.  LAB_REMOTE_KRB5=1 (after
# lab_krb5_start): SecType sys, krb5, krb5i, krb5p, accepting
# LAB_KRB5_REMOTE_PRINCIPAL, principals mapped as nache maps them
# (lab_nache_start).
lab_remote_vfs_start() {
	_lab_need_init || return 1
	[ "$LAB_REMOTE_KRB5" != 1 ] || [ -n "${LAB_KRB5_DIR:-}" ] ||
		_lab_err "LAB_REMOTE_KRB5=1: call lab_krb5_start first" || return 1
	LAB_REMOTE_EXPORT_DIR=$LAB_DIR/remote/export
	export LAB_REMOTE_EXPORT_DIR
	mkdir -p "$LAB_REMOTE_EXPORT_DIR"
	_lab_ganesha_start remote "$LAB_NS_REMOTE" "$LAB_REMOTE_ADDR" "
EXPORT {
	Export_Id = 1;
	Path = \"$LAB_REMOTE_EXPORT_DIR\";
	Pseudo = /export;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = $(_lab_ganesha_sectype remote);
	Protocols = 3, 4;
	Transports = TCP;
	# Changes made in the exported directory on the host (tests do that)
	# show at once, as on a real server.
	Attr_Expiration_Time = 0;
	FSAL { Name = VFS; }
}" "$(_lab_ganesha_krb5_identities remote)"
}

# lab_remote_vfs_stop — stop the VFS remote (SIGTERM).
lab_remote_vfs_stop() { _lab_ganesha_stop remote; }

# lab_remote_vfs_restart — stop and start the VFS remote (same export dir).
lab_remote_vfs_restart() { lab_remote_vfs_stop && lab_remote_vfs_start; }

# lab_remote_log — path of the VFS remote's log.
lab_remote_log() { echo "$LAB_DIR/logs/remote.log"; }

# lab_nache_start [EXTRA_FSAL_LINES] — start nache (FSAL NACHE) on
# LAB_NACHE_ADDR.  Upstream: LAB_NACHE_UPSTREAM (default LAB_REMOTE_ADDR),
# LAB_NACHE_UPSTREAM_PORT (default 2049; a proxy in between listens on
# another), LAB_NACHE_UPSTREAM_PATH (default /export; "/" for knfsd).
# EXTRA lines go verbatim into the FSAL block.  The NFSv4 callback service (delegations)
# listens on LAB_NACHE_WAN_ADDR:LAB_NACHE_CALLBACK_PORT unless
# LAB_NACHE_CALLBACK is set (to other FSAL lines, or empty for none).
# LAB_NACHE_DELEGATIONS (read, readwrite; default none): Ganesha delegates
# to nache's clients.  Cache in $LAB_DIR/nache/cache, kept across
# restarts; LAB_NACHE_CONNECTIONS (default 2): its upstream connections;
# LAB_NACHE_CACHE_TMPFS (a size, e.g. 24m; default unset): the
# cache directory is a tmpfs of that size (a cache disk that fills up),
# unmounted at teardown.  LAB_NACHE_SQUASH (default Root_Squash, as config/nache.conf
# ships): the export's Squash; the test suites use No_Root_Squash (itest.sh).
# LAB_NACHE_GLOBAL (default empty): config text put verbatim at
# the top level of nache's ganesha.conf, e.g. 'NACHE { Metrics = false; }'.
# LAB_IDENTITY_DIR: nache sees its passwd and group (owner names).
# LAB_NACHE_IDMAPCONF: the NFSv4 block's IdmapConf, where Ganesha starts
# libnfsidmap (a NACHE { Idmapd_Conf } must name the same file).
# LAB_NACHE_KRB5=1 (after lab_krb5_start): the export's SecType is sys,
# krb5, krb5i, krb5p; Ganesha accepts RPCSEC_GSS with nache's keytab
# (LAB_KRB5_NACHE_KEYTAB), runs with KRB5_CONFIG=$LAB_KRB5_CONF, and maps
# user@$LAB_KRB5_REALM to the user of the passwd it sees (LAB_IDENTITY_DIR's,
# else the realm's: alice 1000, bob 2000).
# LAB_NACHE_MINOR (0, 1 or 2; default unset: nache's own default): the
# export's Upstream_Minor_Version, unless EXTRA sets it (to run a suite
# again over another minor version).
# Fails with the log tail if the daemon exits during start.
lab_nache_start() {
	_lab_need_init || return 1
	_LAB_NACHE_EXTRA=${1:-}
	local identities=$LAB_IDENTITY_DIR
	if [ "$LAB_NACHE_KRB5" = 1 ]; then
		[ -n "${LAB_KRB5_DIR:-}" ] ||
			_lab_err "LAB_NACHE_KRB5=1: call lab_krb5_start first" || return 1
		identities=${identities:-$LAB_KRB5_DIR}
	fi
	mkdir -p "$LAB_DIR/nache/cache"
	if [ -n "${LAB_NACHE_CACHE_TMPFS:-}" ] && ! mountpoint -q "$LAB_DIR/nache/cache"; then
		mount -t tmpfs -o "size=$LAB_NACHE_CACHE_TMPFS" "nl-$LAB_ID-cache" \
			"$LAB_DIR/nache/cache" ||
			_lab_err "lab_nache_start: cannot mount a $LAB_NACHE_CACHE_TMPFS tmpfs as the cache disk" ||
			return 1
	fi
	_lab_ganesha_start nache "$LAB_NS_LAN" "$LAB_NACHE_ADDR" "
${LAB_NACHE_GLOBAL:-}
EXPORT {
	Export_Id = 1;
	Path = /;
	Pseudo = /export;
	Access_Type = RW;
	Squash = ${LAB_NACHE_SQUASH:-Root_Squash};
	SecType = $(_lab_ganesha_sectype nache);
	Protocols = 3, 4;
	Transports = TCP;
	# As shipped in config/nache.conf; opens revalidate regardless.
	Attr_Expiration_Time = ${LAB_NACHE_ATTR_EXPIRATION:-3};
	Delegations = ${LAB_NACHE_DELEGATIONS:-None};
	FSAL {
		Name = NACHE;
		Upstream_Server = ${LAB_NACHE_UPSTREAM:-$LAB_REMOTE_ADDR};
		Upstream_Port = ${LAB_NACHE_UPSTREAM_PORT:-2049};
		Upstream_Path = \"${LAB_NACHE_UPSTREAM_PATH:-/export}\";
		Connections = ${LAB_NACHE_CONNECTIONS:-2};
		Cache_Dir = \"$LAB_DIR/nache/cache\";
		${LAB_NACHE_CALLBACK-Callback_Address = $LAB_NACHE_WAN_ADDR; Callback_Port = $LAB_NACHE_CALLBACK_PORT;}
		$(_lab_nache_minor)
		$_LAB_NACHE_EXTRA
	}
}" "$identities"
}

# nache's own default Upstream_Minor_Version, read where it is defined.
LAB_NACHE_DEFAULT_MINOR=$(awk '$2 == "NACHE_DEFAULT_MINOR_VERSION" { print $3 }' \
	"$LAB_REPO_DIR/proxy/include/nache/nache.h")

# lab_nache_minor — the minor version nache is started to speak: what
# LAB_NACHE_MINOR asks for, else nache's default (a remote that refuses it
# still gets an older one: the daemon's status tells).
lab_nache_minor() { echo "${LAB_NACHE_MINOR:-$LAB_NACHE_DEFAULT_MINOR}"; }

# The Upstream_Minor_Version line LAB_NACHE_MINOR asks for, when the
# start's EXTRA lines do not set it themselves.
_lab_nache_minor() {
	[ -n "${LAB_NACHE_MINOR:-}" ] || return 0
	[[ $_LAB_NACHE_EXTRA == *Upstream_Minor_Version* ]] && return 0
	echo "Upstream_Minor_Version = $LAB_NACHE_MINOR;"
}

# lab_nache_stop — SIGTERM nache and wait for it to exit.
lab_nache_stop() { _lab_ganesha_stop nache TERM; }

# lab_nache_kill — SIGKILL nache (crash simulation); cache dir is kept.
lab_nache_kill() { _lab_ganesha_stop nache KILL; }

# lab_nache_restart [EXTRA_FSAL_LINES] — stop, then start with EXTRA (or the
# previous start's EXTRA when none is given).
lab_nache_restart() {
	local lines=${1-${_LAB_NACHE_EXTRA:-}}
	lab_nache_stop && lab_nache_start "$lines"
}

# lab_nache_log — path of nache's current log.
lab_nache_log() { echo "$LAB_DIR/logs/nache.log"; }

# lab_nache_pid — pid of the running nache (empty if none).
lab_nache_pid() { _lab_pid_of ganesha-nache; }

# lab_helper_start NAME NS CMD... — run CMD, a test's helper (a fake or a
# hostile server, a proxy), in namespace NS (one of $LAB_NS_*) as a lab
# process: its own session, its pid in $LAB_DIR/run/helper-NAME.pid,
# stdout and stderr in $LAB_DIR/logs/NAME.log, killed at teardown.
lab_helper_start() {
	_lab_need_init || return 1
	local name=$1 ns=$2
	shift 2
	_lab_spawn "helper-$name" "$ns" "$LAB_DIR" "$LAB_DIR/logs/$name.log" "$@"
}

# lab_helper_pid NAME — pid of the helper NAME (empty if none was started).
lab_helper_pid() { _lab_pid_of "helper-$1"; }

# lab_helper_stop NAME — SIGKILL the helper NAME and its process group.
lab_helper_stop() {
	_lab_kill_spawned "helper-$1"
	rm -f "$LAB_DIR/run/helper-$1.pid"
}

# lab_proxyv4_start — stock FSAL PROXY_V4 on LAB_PROXYV4_ADDR (nache's
# namespace), upstream LAB_PROXYV4_UPSTREAM (default LAB_REMOTE_ADDR) path
# LAB_PROXYV4_UPSTREAM_PATH (default /export); NFSv4.1 upstream.
lab_proxyv4_start() {
	_lab_need_init || return 1
	_lab_ganesha_start proxyv4 "$LAB_NS_LAN" "$LAB_PROXYV4_ADDR" "
EXPORT {
	Export_Id = 1;
	Path = \"${LAB_PROXYV4_UPSTREAM_PATH:-/export}\";
	Pseudo = /export;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	Protocols = 3, 4;
	Transports = TCP;
	FSAL {
		Name = PROXY_V4;
		Srv_Addr = ${LAB_PROXYV4_UPSTREAM:-$LAB_REMOTE_ADDR};
		NFS_Port = 2049;
	}
}"
}

# lab_proxyv4_stop — SIGTERM the PROXY_V4 instance; SIGKILL after 5 s
# (Ganesha 4.3's PROXY_V4 hangs in "Removing all exports" on shutdown).
lab_proxyv4_stop() { _lab_ganesha_stop proxyv4 TERM 5; }

# lab_proxyv4_log — path of the PROXY_V4 instance's log.
lab_proxyv4_log() { echo "$LAB_DIR/logs/proxyv4.log"; }

# ------------------------------------------------------------------ knfsd

# lab_remote_knfsd_start — boot the knfsd guest in the remote namespace on
# LAB_KNFSD_ADDR, exporting a fresh ext4 image (LAB_KNFSD_SIZE) as the NFSv4
# root (fsid=0): clients mount LAB_KNFSD_ADDR:/ (v4) or
# LAB_KNFSD_ADDR:$LAB_KNFSD_EXPORT_DIR (v3).  Lease LAB_KNFSD_LEASE s.
# Returns once NFS answers.  A first boot skips the NFSv4 grace period; after
# lab_remote_knfsd_restart it runs: lab_knfsd_wait_grace waits it out.
# LAB_KNFSD_EXPORT_OPTS: the export's exportfs options (default
# rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync).
# LAB_KNFSD_MANAGE_GIDS: y or n sets rpc.mountd's manage-gids (empty: the
# host's /etc/nfs.conf decides; Debian's says y).
# LAB_KNFSD_KERNEL picks the server's kernel: 6.1 (default) boots a UML
# guest; 6.12 boots the same guest under qemu (TCG, slower; knfsd 6.12
# grants write delegations, 6.1 only read ones).  Every lab_knfsd_* function
# works the same on both.
lab_remote_knfsd_start() {
	_lab_need_init || return 1
	LAB_KNFSD_EXPORT_DIR=/srv/knfsd
	LAB_KNFSD_IMAGE=$LAB_DIR/knfsd/export.img
	export LAB_KNFSD_EXPORT_DIR LAB_KNFSD_IMAGE
	mkdir -p "$LAB_DIR/knfsd"
	if [ ! -e "$LAB_KNFSD_IMAGE" ]; then
		truncate -s "$LAB_KNFSD_SIZE" "$LAB_KNFSD_IMAGE"
		mkfs.ext4 -q -F -m 0 -E root_owner=0:0 "$LAB_KNFSD_IMAGE" ||
			return 1
	fi
	if ! ip -n "$LAB_NS_REMOTE" link show tapk >/dev/null 2>&1; then
		ip -n "$LAB_NS_REMOTE" tuntap add dev tapk mode tap || return 1
		ip -n "$LAB_NS_REMOTE" link set tapk master br0 up || return 1
	fi
	case $LAB_KNFSD_KERNEL in
	6.1)
		_lab_guest_boot knfsd knfsd "$LAB_NS_REMOTE" "$LAB_NS_REMOTE" \
			"${LAB_KNFSD_MEM:-256M}" "$LAB_KNFSD_ADDR" \
			"eth0=$LAB_KNFSD_ADDR/24" "default via $LAB_REMOTE_ADDR" \
			"ubd0=$LAB_KNFSD_IMAGE eth0=tuntap,tapk,$_LAB_KNFSD_MAC" \
			"$(_lab_knfsd_env /dev/ubda)" || return 1
		;;
	6.12) _lab_qemu_knfsd_boot || return 1 ;;
	*)
		_lab_err "LAB_KNFSD_KERNEL='$LAB_KNFSD_KERNEL': 6.1 (UML) or 6.12 (qemu)"
		return 1
		;;
	esac
	_lab_guest_wait knfsd || return 1
	local rc=0
	_lab_ns "$LAB_NS_REMOTE" "${_LAB_TOOL[@]}" wait-rpc "$LAB_KNFSD_ADDR" \
		--timeout "$LAB_START_TIMEOUT" &
	wait $! || rc=$?
	[ $rc = 0 ] || _lab_err "knfsd does not answer NFS NULL" || return 1
	_lab_log "knfsd serving on $LAB_KNFSD_ADDR ($(lab_knfsd_run 'echo "Linux $(uname -r),"; cat /proc/fs/nfsd/versions' | tr '\n' ' '), export $LAB_KNFSD_EXPORT_OPTS)"
}

# _lab_knfsd_env DISK — the knfsd guest's env lines (guest_init.sh), its
# export on the block device DISK.
_lab_knfsd_env() {
	cat <<-EOF
		LAB_KNFSD_DISK='$1'
		LAB_KNFSD_EXPORT_DIR='$LAB_KNFSD_EXPORT_DIR'
		LAB_KNFSD_LEASE='$LAB_KNFSD_LEASE'
		LAB_KNFSD_GRACE='$LAB_KNFSD_GRACE'
		LAB_KNFSD_THREADS='$LAB_KNFSD_THREADS'
		LAB_KNFSD_NLM_GRACE='$LAB_KNFSD_NLM_GRACE'
		LAB_KNFSD_MAX_BLOCK='$LAB_KNFSD_MAX_BLOCK'
		LAB_KNFSD_CLD_DIR='$LAB_DIR/knfsd/nfsdcld'
		LAB_KNFSD_EXPORT_OPTS='$LAB_KNFSD_EXPORT_OPTS'
		LAB_KNFSD_MANAGE_GIDS='$LAB_KNFSD_MANAGE_GIDS'
		LAB_KNFSD_IDMAP='$LAB_KNFSD_IDMAP'
		LAB_GUEST_IDENTITY_DIR='${LAB_KNFSD_IDENTITY_DIR:-${LAB_KRB5_DIR:-}}'
		$(_lab_krb5_guest_env knfsd)
	EOF
}

# _lab_qemu_knfsd_boot — boot the knfsd guest under qemu (Linux 6.12,
# LAB_KNFSD_KERNEL=6.12): the export image as a virtio disk, its NIC on the
# tap tapk that the UML knfsd would use.  Does not wait.
_lab_qemu_knfsd_boot() {
	# cache=unsafe: qemu skips the host fsync of the guest's flushes;
	# killing qemu (a server crash) loses nothing the guest wrote, only a
	# crash of the host would.
	_lab_qemu_guest_boot knfsd knfsd "$LAB_NS_REMOTE" "$LAB_NS_REMOTE" \
		"${LAB_KNFSD_MEM:-512M}" "$LAB_KNFSD_ADDR" \
		"eth0=$LAB_KNFSD_ADDR/24" "default via $LAB_REMOTE_ADDR" \
		"$(_lab_knfsd_env /dev/vda)" \
		-drive "file=${LAB_KNFSD_IMAGE//,/,,},format=raw,if=virtio,cache=unsafe" \
		-netdev tap,id=net0,ifname=tapk,script=no,downscript=no \
		-device "virtio-net-pci,netdev=net0,mac=$_LAB_KNFSD_MAC"
}

# lab_knfsd_wait_grace — wait until knfsd's NFSv4 grace period has ended
# (immediate on a first boot: nfsdcld has no clients to reclaim).
lab_knfsd_wait_grace() {
	lab_wait_until $((LAB_KNFSD_GRACE + 30)) _lab_knfsd_grace_over ||
		_lab_err "knfsd grace period did not end"
}

_lab_knfsd_grace_over() {
	[ "$(lab_knfsd_run 'cat /proc/fs/nfsd/v4_end_grace')" = Y ]
}

# lab_knfsd_end_grace — end knfsd's grace period now (reclaims then fail).
lab_knfsd_end_grace() { lab_knfsd_run 'echo Y >/proc/fs/nfsd/v4_end_grace'; }

# lab_remote_knfsd_stop — kill the knfsd guest (a server crash: the image
# and nfsdcld's client records are kept, so a restart runs a grace period).
lab_remote_knfsd_stop() { _lab_guest_stop knfsd; }

# lab_remote_knfsd_restart — crash and reboot the knfsd server.
lab_remote_knfsd_restart() { lab_remote_knfsd_stop && lab_remote_knfsd_start; }

# lab_knfsd_run CMD — run CMD as root in the knfsd guest (export mounted at
# $LAB_KNFSD_EXPORT_DIR there): the server's local root, never squashed, so
# it can create files, chown, chmod and setfacl (POSIX ACLs: ext4 mounted
# with acl, setfacl/getfacl from the host's acl package) at the remote.
lab_knfsd_run() { _lab_guest_exec knfsd "" "" "$1"; }

# lab_knfsd_stats — print knfsd's /proc/net/rpc/nfsd (per-op counters).
lab_knfsd_stats() { lab_knfsd_run 'cat /proc/net/rpc/nfsd'; }

# lab_knfsd_states — print, per NFSv4 client of knfsd, a "# client DIR"
# line, its info file and its states file (opens, locks, delegations such
# as "type: deleg, access: r").
lab_knfsd_states() {
	lab_knfsd_run 'for d in /proc/fs/nfsd/clients/*/; do
		[ -e "$d/states" ] || continue
		echo "# client $d"; cat "$d/info"; cat "$d/states"; done'
}

# ------------------------------------------------------------------ kerberos
# A realm of the lab's own ($LAB_KRB5_REALM): MIT's KDC in the remote
# namespace, its database, kdc.conf, krb5.conf, keytabs, a hosts file and
# the users' passwd and group under $LAB_DIR/krb5.  Nothing reads the
# host's /etc/krb5.conf: every lab process that uses Kerberos gets
# KRB5_CONFIG (and the KDC KRB5_KDC_PROFILE).  Guests booted after
# lab_krb5_start see the hosts file as /etc/hosts, run the kernel's
# rpcsec_gss modules and rpc.gssd (clients) or rpc.svcgssd (knfsd) with
# their keytab.

# The realm's users: name:uid (each with a group of its own name, gid =
# uid), as the other suites number them.
_LAB_KRB5_USERS="alice:1000 bob:2000"

# lab_krb5_start — make the realm and start its KDC (krb5kdc -n, in the
# remote namespace, on LAB_REMOTE_ADDR port 88, log logs/krb5kdc.log):
# service principals nfs/$LAB_NACHE_HOSTNAME (nache.keytab),
# nfs/$LAB_KNFSD_HOSTNAME (knfsd.keytab), nfs/$LAB_REMOTE_HOSTNAME for the
# VFS remote (remote.keytab), nfs/c<N>.$LAB_KRB5_DOMAIN for
# each client booted afterwards (c<N>.keytab), users alice and bob
# (alice.keytab and bob.keytab, owned by the user: kinit runs as them).
# Returns once the KDC hands out a ticket.  Call after lab_net_up and before
# booting the guests that use it.  Exports LAB_KRB5_DIR, LAB_KRB5_CONF,
# LAB_KRB5_KDC_PROFILE, LAB_KRB5_NACHE_KEYTAB, LAB_KRB5_KNFSD_KEYTAB,
# LAB_KRB5_NACHE_PRINCIPAL, LAB_KRB5_KNFSD_PRINCIPAL, LAB_KRB5_REMOTE_KEYTAB,
# LAB_KRB5_REMOTE_PRINCIPAL.  $LAB_KRB5_DIR also
# holds passwd, group (the host's minus clashes, plus the realm's users)
# and idmapd.conf (Domain $LAB_KRB5_DOMAIN, Local-Realms the realm): an
# identity directory as LAB_IDENTITY_DIR takes, which the guests and nache
# use when LAB_IDENTITY_DIR / LAB_KNFSD_IDENTITY_DIR are empty.
lab_krb5_start() {
	_lab_need_init || return 1
	local dir=$LAB_DIR/krb5 entry user uid
	local tools="krb5kdc kdb5_util kadmin.local"
	[ "$LAB_KRB5_S4U" != 1 ] || tools+=" kdb5_ldap_util slapd ldapmodify"
	for entry in $tools; do
		command -v "$entry" >/dev/null ||
			_lab_err "missing $entry: run deploy/install-deps.sh" || return 1
	done
	LAB_KRB5_DIR=$dir
	LAB_KRB5_CONF=$dir/krb5.conf
	LAB_KRB5_KDC_PROFILE=$dir/kdc.conf
	LAB_KRB5_NACHE_KEYTAB=$dir/nache.keytab
	LAB_KRB5_KNFSD_KEYTAB=$dir/knfsd.keytab
	LAB_KRB5_NACHE_PRINCIPAL=nfs/$LAB_NACHE_HOSTNAME@$LAB_KRB5_REALM
	LAB_KRB5_KNFSD_PRINCIPAL=nfs/$LAB_KNFSD_HOSTNAME@$LAB_KRB5_REALM
	LAB_KRB5_REMOTE_KEYTAB=$dir/remote.keytab
	LAB_KRB5_REMOTE_PRINCIPAL=nfs/$LAB_REMOTE_HOSTNAME@$LAB_KRB5_REALM
	export LAB_KRB5_DIR LAB_KRB5_CONF LAB_KRB5_KDC_PROFILE \
		LAB_KRB5_NACHE_KEYTAB LAB_KRB5_KNFSD_KEYTAB \
		LAB_KRB5_NACHE_PRINCIPAL LAB_KRB5_KNFSD_PRINCIPAL \
		LAB_KRB5_REMOTE_KEYTAB LAB_KRB5_REMOTE_PRINCIPAL
	rm -rf "$dir"
	mkdir -p "$dir/db" "$dir/rcache" && chmod 700 "$dir/db" || return 1
	_lab_krb5_write_conf && _lab_krb5_write_hosts &&
		_lab_krb5_write_identities || return 1
	if [ "$LAB_KRB5_S4U" = 1 ]; then
		_lab_krb5_ldap_start || return 1
		_lab_krb5_admin kdb5_ldap_util create -subtrees "$_LAB_LDAP_SUFFIX" \
			-r "$LAB_KRB5_REALM" -s \
			-P "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >/dev/null ||
			_lab_err "kdb5_ldap_util create failed" || return 1
	else
		_lab_krb5_admin kdb5_util create -s -r "$LAB_KRB5_REALM" \
			-P "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >/dev/null ||
			_lab_err "kdb5_util create failed" || return 1
	fi
	_lab_krb5_keytab nache "nfs/$LAB_NACHE_HOSTNAME" &&
		_lab_krb5_keytab knfsd "nfs/$LAB_KNFSD_HOSTNAME" &&
		_lab_krb5_keytab remote "nfs/$LAB_REMOTE_HOSTNAME" || return 1
	[ "$LAB_KRB5_S4U" != 1 ] || _lab_krb5_s4u_allow || return 1
	for entry in $_LAB_KRB5_USERS; do
		user=${entry%%:*} uid=${entry#*:}
		_lab_krb5_keytab "$user" "$user" &&
			chown "$uid:$uid" "$dir/$user.keytab" || return 1
	done
	lab_krb5_kdc_start
}

# lab_krb5_kdc_start — (re)start the realm's KDC made by lab_krb5_start;
# returns once it hands out a ticket.
lab_krb5_kdc_start() {
	_lab_spawn krb5kdc "$LAB_NS_REMOTE" "$LAB_KRB5_DIR" "$LAB_DIR/logs/krb5kdc.stdout" \
		env KRB5_CONFIG="$LAB_KRB5_CONF" KRB5_KDC_PROFILE="$LAB_KRB5_KDC_PROFILE" \
		krb5kdc -n || return 1
	# Ready: an AS exchange for nache's principal from its keytab, across
	# the lab's network (nache's namespace to the remote's).
	lab_wait_until 20 _lab_krb5_kdc_answers ||
		_lab_err "the KDC hands out no ticket (see $LAB_DIR/logs/krb5kdc.log)" ||
		return 1
	_lab_log "KDC of $LAB_KRB5_REALM serving on $LAB_REMOTE_ADDR:88${LAB_KRB5_S4U:+ (LDAP, S4U for nache)}"
}

# lab_krb5_kdc_stop — stop the realm's KDC (a KDC out of reach: its port
# closed); returns once it has exited.
lab_krb5_kdc_stop() {
	local pid
	pid=$(_lab_pid_of krb5kdc)
	_lab_kill_spawned krb5kdc TERM
	[ -z "$pid" ] || _lab_wait_dead 20 "$pid" ||
		_lab_err "the KDC (pid $pid) still runs after SIGTERM" || return 1
	rm -f "$LAB_DIR/run/krb5kdc.pid"
	_lab_log "KDC of $LAB_KRB5_REALM stopped"
}

# The LDAP directory of LAB_KRB5_S4U=1: its suffix, the realm's container
# in it, and slapd's socket (ldapi, a path in $LAB_KRB5_DIR/ldap; set by
# lab_krb5_start).
_LAB_LDAP_SUFFIX=dc=nache,dc=lab
_LAB_LDAP_KRB_CONTAINER=cn=krbcontainer,$_LAB_LDAP_SUFFIX
_LAB_LDAP_URI=

# _lab_krb5_ldap_start — LAB_KRB5_S4U=1: a slapd of the lab's own, in the
# remote namespace, listening on a Unix socket in $LAB_KRB5_DIR/ldap only
# (no port), its configuration (slapd.conf: core and cosine schemas, MIT's
# kerberos schema from krb5-kdc-ldap, one MDB database) and data there,
# nothing of the host's /etc/ldap touched.  Root over the socket (SASL
# EXTERNAL: the KDC, kdb5_ldap_util, kadmin.local and ldapmodify all run
# as root) is the directory's manager: no password anywhere.
_lab_krb5_ldap_start() {
	local d=$LAB_KRB5_DIR/ldap schema=/usr/share/doc/krb5-kdc-ldap/kerberos.schema.gz
	[ -r "$schema" ] || _lab_err "missing $schema: run deploy/install-deps.sh" || return 1
	mkdir -p "$d/data" && chmod 700 "$d" && zcat "$schema" >"$d/kerberos.schema" ||
		return 1
	_LAB_LDAP_URI=ldapi://$(printf '%s' "$d/ldapi" | sed 's,/,%2F,g')
	cat >"$d/slapd.conf" <<-EOF
		# generated by lab/lab.sh: the directory of the lab's realm
		include /etc/ldap/schema/core.schema
		include /etc/ldap/schema/cosine.schema
		include $d/kerberos.schema
		pidfile $d/slapd.pid
		argsfile $d/slapd.args
		modulepath /usr/lib/ldap
		moduleload back_mdb
		authz-regexp "gidNumber=0\\\\+uidNumber=0,cn=peercred,cn=external,cn=auth" "cn=manager,$_LAB_LDAP_SUFFIX"
		database mdb
		suffix "$_LAB_LDAP_SUFFIX"
		rootdn "cn=manager,$_LAB_LDAP_SUFFIX"
		directory $d/data
		maxsize 67108864
		index krbPrincipalName eq,sub
	EOF
	# -d 0: in the foreground (a lab process), logging to its log file.
	_lab_spawn slapd "$LAB_NS_REMOTE" "$d" "$LAB_DIR/logs/slapd.log" \
		slapd -f "$d/slapd.conf" -h "$_LAB_LDAP_URI" -d 0 || return 1
	lab_wait_until 20 _lab_ldap ldapwhoami ||
		_lab_err "slapd does not answer (see $LAB_DIR/logs/slapd.log)" || return 1
	printf 'dn: %s\nobjectClass: dcObject\nobjectClass: organization\no: nache lab\ndc: %s\n' \
		"$_LAB_LDAP_SUFFIX" "$(echo "$_LAB_LDAP_SUFFIX" | sed 's/^dc=//; s/,.*//')" |
		_lab_ldap ldapadd || _lab_err "cannot make $_LAB_LDAP_SUFFIX" || return 1
	cat >>"$LAB_KRB5_KDC_PROFILE" <<-EOF
		[dbmodules]
		 ldap = {
		  db_library = kldap
		  ldap_servers = $_LAB_LDAP_URI
		  ldap_kerberos_container_dn = $_LAB_LDAP_KRB_CONTAINER
		  ldap_kdc_sasl_mech = EXTERNAL
		  ldap_kadmind_sasl_mech = EXTERNAL
		 }
	EOF
	sed -i "s|^  database_name = .*|  database_module = ldap|" "$LAB_KRB5_KDC_PROFILE"
}

# _lab_ldap TOOL [ARGS...] — an OpenLDAP client tool on the lab's
# directory, as its manager (root over the socket), quiet.
_lab_ldap() {
	local tool=$1
	shift
	"$tool" -Q -Y EXTERNAL -H "$_LAB_LDAP_URI" "$@" >/dev/null 2>&1
}

# _lab_krb5_s4u_allow — what an administrator does for nache's per-user
# identity upstream (config/README.md): nache's principal gets
# ok_to_auth_as_delegate (its S4U2Self tickets are forwardable, which
# S4U2Proxy requires of the evidence ticket) and may delegate to the
# knfsd's and the VFS remote's nfs/ principals (krbAllowedToDelegateTo on
# its entry: MIT's KDC checks it for S4U2Proxy, in LDAP only).
_lab_krb5_s4u_allow() {
	local dn="krbPrincipalName=$LAB_KRB5_NACHE_PRINCIPAL,cn=$LAB_KRB5_REALM,$_LAB_LDAP_KRB_CONTAINER"
	_lab_krb5_admin kadmin.local -r "$LAB_KRB5_REALM" \
		-q "modprinc +ok_to_auth_as_delegate $LAB_KRB5_NACHE_PRINCIPAL" >/dev/null 2>&1 &&
		printf 'dn: %s\nchangetype: modify\nadd: krbAllowedToDelegateTo\nkrbAllowedToDelegateTo: %s\nkrbAllowedToDelegateTo: %s\n' \
			"$dn" "$LAB_KRB5_KNFSD_PRINCIPAL" "$LAB_KRB5_REMOTE_PRINCIPAL" |
		_lab_ldap ldapmodify ||
		_lab_err "cannot allow $LAB_KRB5_NACHE_PRINCIPAL constrained delegation"
}

_lab_krb5_kdc_answers() {
	_lab_ns "$LAB_NS_LAN" env KRB5_CONFIG="$LAB_KRB5_CONF" \
		kinit -k -t "$LAB_KRB5_NACHE_KEYTAB" -c "FILE:$LAB_KRB5_DIR/probe.ccache" \
		"$LAB_KRB5_NACHE_PRINCIPAL" >/dev/null 2>&1
}

# _lab_krb5_admin CMD... — run a database tool (kdb5_util, kadmin.local) of
# the lab's realm, on its files.
_lab_krb5_admin() {
	KRB5_CONFIG=$LAB_KRB5_CONF KRB5_KDC_PROFILE=$LAB_KRB5_KDC_PROFILE "$@"
}

# _lab_krb5_keytab NAME PRINCIPAL — add PRINCIPAL (random keys) to the
# realm and write its keys to $LAB_KRB5_DIR/NAME.keytab (mode 0600).
_lab_krb5_keytab() {
	local out
	out=$(printf 'addprinc -randkey %s\nktadd -k %s %s\n' "$2" \
		"$LAB_KRB5_DIR/$1.keytab" "$2" |
		_lab_krb5_admin kadmin.local -r "$LAB_KRB5_REALM" 2>&1) &&
		[ -s "$LAB_KRB5_DIR/$1.keytab" ] ||
		{ echo "$out" >&2; _lab_err "cannot make the keytab of $2"; return 1; }
	chmod 600 "$LAB_KRB5_DIR/$1.keytab"
}

# _lab_krb5_client_keytab N — the principal nfs/c<N>.$LAB_KRB5_DOMAIN and
# its keytab c<N>.keytab (once), for a client booting in a lab with a
# realm: rpc.gssd's machine credentials (root's NFS calls, the lease).
_lab_krb5_client_keytab() {
	[ -n "${LAB_KRB5_DIR:-}" ] || return 0
	[ -s "$LAB_KRB5_DIR/c$1.keytab" ] ||
		_lab_krb5_keytab "c$1" "nfs/c$1.$LAB_KRB5_DOMAIN"
}

# _lab_krb5_write_conf — krb5.conf (clients and daemons) and kdc.conf (the
# KDC), every path in $LAB_KRB5_DIR and the logs in $LAB_DIR/logs.  No DNS:
# names are taken as given (a client asks for nfs/<the name its hosts file
# gives the server's address>), aes-sha1 keys as Linux 6.1's rpcsec_gss_krb5
# takes them.
_lab_krb5_write_conf() {
	# LAB_KRB5_S4U=1: forwardable TGTs (nache's from its keytab), without
	# which the KDC makes S4U2Self tickets that S4U2Proxy refuses
	# (EVIDENCE_TKT_NOT_FORWARDABLE in the KDC's log).
	local forwardable=false
	[ "$LAB_KRB5_S4U" != 1 ] || forwardable=true
	cat >"$LAB_KRB5_CONF" <<-EOF
		# generated by lab/lab.sh: the lab's realm
		[libdefaults]
		 default_realm = $LAB_KRB5_REALM
		 dns_lookup_kdc = false
		 dns_lookup_realm = false
		 dns_canonicalize_hostname = false
		 rdns = false
		 default_ccache_name = FILE:/tmp/krb5cc_%{uid}
		 forwardable = $forwardable
		[realms]
		 $LAB_KRB5_REALM = {
		  kdc = $LAB_REMOTE_ADDR
		 }
		[domain_realm]
		 .$LAB_KRB5_DOMAIN = $LAB_KRB5_REALM
		 $LAB_KRB5_DOMAIN = $LAB_KRB5_REALM
	EOF
	cat >"$LAB_KRB5_KDC_PROFILE" <<-EOF
		# generated by lab/lab.sh: the lab's KDC
		[kdcdefaults]
		 kdc_ports = 88
		 kdc_tcp_ports = 88
		[realms]
		 $LAB_KRB5_REALM = {
		  database_name = $LAB_KRB5_DIR/db/principal
		  key_stash_file = $LAB_KRB5_DIR/db/stash
		  acl_file = $LAB_KRB5_DIR/db/kadm5.acl
		  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
		 }
		[logging]
		 kdc = FILE:$LAB_DIR/logs/krb5kdc.log
		 admin_server = FILE:$LAB_DIR/logs/kadmin.log
		 default = FILE:$LAB_DIR/logs/krb5lib.log
	EOF
}

# _lab_krb5_write_hosts — $LAB_KRB5_DIR/hosts: the lab's addresses and
# names (the guests' /etc/hosts).  A guest's own hostname (lab-<name>) is
# an alias of its full name, which rpc.gssd and rpc.svcgssd find as their
# host's canonical name.
_lab_krb5_write_hosts() {
	local d=$LAB_KRB5_DOMAIN n
	{
		printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n'
		printf '%s\t%s\n' "$LAB_NACHE_ADDR" "$LAB_NACHE_HOSTNAME"
		# nache's WAN side too (after its LAN side, which the name resolves
		# to): knfsd's rpc.gssd names the NFSv4.0 callback address it calls.
		printf '%s\t%s\n' "$LAB_NACHE_WAN_ADDR" "$LAB_NACHE_HOSTNAME"
		printf '%s\tproxyv4.%s\n' "$LAB_PROXYV4_ADDR" "$d"
		printf '%s\t%s kdc.%s\n' "$LAB_REMOTE_ADDR" "$LAB_REMOTE_HOSTNAME" "$d"
		printf '%s\t%s lab-knfsd\n' "$LAB_KNFSD_ADDR" "$LAB_KNFSD_HOSTNAME"
		printf '%s\trtr.%s lab-rtr\n' "$LAB_ROUTER_LAN_ADDR" "$d"
		for n in $(seq 1 99); do
			printf '%s\tc%s.%s lab-c%s\n' "$(lab_client_addr "$n")" "$n" "$d" "$n"
		done
	} >"$LAB_KRB5_DIR/hosts"
}

# _lab_krb5_write_identities — passwd and group (the host's entries minus
# any that clash with the realm's users, then those users) and idmapd.conf
# in $LAB_KRB5_DIR: a principal user@REALM is the local user "user".
_lab_krb5_write_identities() {
	local dir=$LAB_KRB5_DIR entry user uid user_re="" uid_re=""
	for entry in $_LAB_KRB5_USERS; do
		user_re+="${user_re:+|}${entry%%:*}" uid_re+="${uid_re:+|}${entry#*:}"
	done
	local clash="\$1 ~ /^($user_re)\$/ || \$3 ~ /^($uid_re)\$/"
	awk -F: "!($clash)" /etc/passwd >"$dir/passwd" &&
		awk -F: "!($clash)" /etc/group >"$dir/group" || return 1
	for entry in $_LAB_KRB5_USERS; do
		user=${entry%%:*} uid=${entry#*:}
		echo "$user:x:$uid:$uid::/tmp:/bin/sh" >>"$dir/passwd"
		echo "$user:x:$uid:" >>"$dir/group"
	done
	cat >"$dir/idmapd.conf" <<-EOF
		[General]
		Domain = $LAB_KRB5_DOMAIN
		Local-Realms = $LAB_KRB5_REALM
		[Mapping]
		Nobody-User = nobody
		Nobody-Group = nogroup
		[Translation]
		Method = nsswitch
	EOF
}

# _lab_krb5_user_uid USER — the uid of a realm user (fails for others, and
# without a realm).
_lab_krb5_user_uid() {
	local entry
	[ -n "${LAB_KRB5_DIR:-}" ] ||
		_lab_err "the lab has no realm: call lab_krb5_start first" || return 1
	for entry in $_LAB_KRB5_USERS; do
		[ "${entry%%:*}" != "$1" ] || { echo "${entry#*:}"; return 0; }
	done
	_lab_err "no user '$1' in the lab's realm (${_LAB_KRB5_USERS})"
}

# _lab_krb5_guest_env NAME — env lines of a guest NAME (c<N>, knfsd) in a
# lab with a realm (none without): where the realm's files are, the guest's
# keytab, and its identities (LAB_IDENTITY_DIR's or the realm's).
_lab_krb5_guest_env() {
	[ -n "${LAB_KRB5_DIR:-}" ] || return 0
	echo "LAB_GUEST_KRB5_DIR='$LAB_KRB5_DIR'"
	echo "LAB_GUEST_KRB5_KEYTAB='$LAB_KRB5_DIR/$1.keytab'"
}

# lab_client_kinit N USER — USER's ticket (from USER's keytab) in client N,
# got as USER's uid into /tmp/krb5cc_<uid>, where rpc.gssd finds it.
lab_client_kinit() {
	local uid
	uid=$(_lab_krb5_user_uid "$2") || return 1
	lab_client_run_as "$1" "$uid" "$uid" \
		"kinit -k -t '$LAB_KRB5_DIR/$2.keytab' -c FILE:/tmp/krb5cc_$uid '$2@$LAB_KRB5_REALM'"
}

# lab_client_kdestroy N USER — destroy USER's ticket cache in client N.  The
# kernel keeps the security contexts it made with it until they expire or
# the mount's RPC client goes (a umount of the server's last mount).
lab_client_kdestroy() {
	local uid
	uid=$(_lab_krb5_user_uid "$2") || return 1
	lab_client_run_as "$1" "$uid" "$uid" "kdestroy -q -c FILE:/tmp/krb5cc_$uid"
}
