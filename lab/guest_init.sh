#!/bin/bash
# PID 1 of every nache lab guest (client, router, knfsd server): UML guests,
# and the qemu knfsd guest (LAB_KNFSD_KERNEL=6.12), which reaches this
# script through lab/qemu_initramfs.sh.
#
# Owns: the guest's mounts, network and role setup, then the command agent.
# The guest's root is the HOST's root, mounted read-only (UML: hostfs with
# kernel argument "ro"; qemu: 9p); everything the guest writes goes to tmpfs,
# except the lab directory, which is remounted read-write from the host on
# purpose.  It must never write host files outside $LAB_DIR.
#
# The kernel passes "lab_env=FILE" from the command line as an environment
# variable; FILE (written by lab.sh) sets LAB_GUEST_* variables:
#   LAB_DIR, LAB_SRC_DIR, LAB_GUEST_NAME, LAB_GUEST_ROLE (client|router|knfsd)
#   LAB_GUEST_PLATFORM uml | qemu (how host directories and modules are seen)
#   LAB_GUEST_IFS      "eth0=ADDR/LEN eth1=ADDR/LEN"
#   LAB_GUEST_ROUTES   "PREFIX via GW;..." (default route: "default via GW")
#   LAB_GUEST_AGENT    "ADDR PORT"
#   LAB_GUEST_IDENTITY_DIR  (optional) passwd, group, idmapd.conf for the guest
#   LAB_GUEST_NLM      1: a client runs rpcbind and rpc.statd (NFSv3 locks)
#   LAB_GUEST_KRB5_DIR (optional) the lab's realm (lab.sh, lab_krb5_start):
#                      hosts, krb5.conf; LAB_GUEST_KRB5_KEYTAB the guest's
#                      keys (rpc.gssd's machine credentials, knfsd's service)
#   role extras: LAB_GUEST_NETEM (router), LAB_KNFSD_* (knfsd)

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PYTHONDONTWRITEBYTECODE=1

log() { echo "guest_init[$LAB_GUEST_NAME]: $*"; }

# Never return: PID 1 exiting panics the guest.  Keep reaping orphans.
idle_forever() {
	while :; do
		wait
		sleep 5
	done
}

fail() {
	log "FATAL: $*"
	idle_forever
}

# 9p mount options of the qemu guests' host shares (see lab.sh,
# _lab_qemu_guest_boot, for the shares and their tags).
NINEP_OPTS=trans=virtio,version=9p2000.L,msize=262144

# mount_host_dir DIR TAG [ro] — show the host's directory DIR at the same
# path in the guest: hostfs under UML, the qemu 9p share tagged TAG under
# qemu (uncached: the host reads and writes these files meanwhile).
mount_host_dir() {
	local dir=$1 tag=$2 ro=${3:+ro,}
	if [ "$LAB_GUEST_PLATFORM" = qemu ]; then
		mount -t 9p -o "$ro$NINEP_OPTS" "$tag" "$dir"
	else
		mount -t hostfs -o "$ro$dir" none "$dir"
	fi
}

# qemu_platform_setup — what a qemu guest needs before the common setup:
# its kernel's modules (not the host's: the share "modules" replaces
# /lib/modules), and the drivers of its virtio NIC and disk, which nothing
# else loads (no udev).  UML guests get both from the host (lab.sh links
# /lib/modules/<uml version>; their drivers are built in).
qemu_platform_setup() {
	mount -t 9p -o "ro,cache=loose,$NINEP_OPTS" modules /lib/modules ||
		fail "9p share 'modules' on /lib/modules"
	modprobe -a virtio_net virtio_blk || fail "modprobe virtio_net virtio_blk"
}

# knfsd_no_manage_gids — make rpc.mountd trust the groups a client sends in
# AUTH_SYS, whatever the host's /etc/nfs.conf says (Debian's sets
# "manage-gids=y": knfsd then replaces those groups with the server's own
# group database, where the lab's numeric users have none).  The guest gets
# a copy of the host's file without the setting, bind-mounted over it in the
# guest only.  (LAB_KNFSD_MANAGE_GIDS=y passes --manage-gids instead.)
knfsd_no_manage_gids() {
	local conf=/run/lab-nfs.conf f
	for f in /etc/nfs.conf.d/*.conf; do
		! grep -qs '^[[:space:]]*manage-gids' "$f" ||
			fail "$f sets manage-gids: cannot turn it off"
	done
	grep -qs '^[[:space:]]*manage-gids' /etc/nfs.conf || return 0
	sed '/^[[:space:]]*manage-gids[[:space:]]*=/d' /etc/nfs.conf >"$conf" &&
		mount --bind "$conf" /etc/nfs.conf ||
		fail "cannot turn manage-gids off for rpc.mountd"
}

# use_identities DIR — the guest's users, groups and NFSv4 id-mapping
# domain from DIR (those of passwd, group and idmapd.conf it holds),
# bind-mounted over /etc in the guest only.
use_identities() {
	local dir=$1 f
	for f in passwd group idmapd.conf; do
		[ -e "$dir/$f" ] || continue
		mount --bind "$dir/$f" "/etc/$f" ||
			fail "identities: $dir/$f over /etc/$f"
	done
}

# knfsd_idmap — NFSv4 owners as names ("alice@domain") at knfsd, as a
# server with id mapping on sends and wants them (nfs4_disable_idmapping
# is read when nfsd serves a request: set before rpc.nfsd starts it).
# rpc.idmapd (server side only, -S) answers nfsd's name<->id upcalls
# (/proc/net/rpc/nfs4.nametoid/channel, nfs4.idtoname) from
# /etc/idmapd.conf; it returns once it has opened them.
knfsd_idmap() {
	echo N >/sys/module/nfsd/parameters/nfs4_disable_idmapping ||
		fail "cannot turn nfsd's id mapping on"
	rpc.idmapd -S || fail "rpc.idmapd"
}

# krb5_setup — a lab with a Kerberos realm: the lab's names in /etc/hosts
# (bind-mounted in the guest only), its krb5.conf for every process started
# from here on (KRB5_CONFIG: the agent's commands, kinit, the GSS daemons;
# never the host's /etc/krb5.conf) and the kernel's RPCSEC_GSS modules.
krb5_setup() {
	mount --bind "$LAB_GUEST_KRB5_DIR/hosts" /etc/hosts ||
		fail "krb5: hosts over /etc/hosts"
	export KRB5_CONFIG="$LAB_GUEST_KRB5_DIR/krb5.conf"
	modprobe -a auth_rpcgss rpcsec_gss_krb5 || fail "modprobe rpcsec_gss_krb5"
	# The ciphers krb5's aes-sha1 enctypes use (the kernel would ask for
	# them at the first context; loaded here, a missing one shows now).
	modprobe -a cts cbc hmac || log "krb5: some ciphers did not load"
}

# wait_for_fd PID PATTERN — wait (10 s at most) until process PID has a
# file descriptor whose target matches PATTERN: a daemon has opened the
# upcall channel it serves.
wait_for_fd() {
	local pid=$1 pattern=$2 i
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || return 1
		ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -- "$pattern" && return 0
		sleep 0.05
	done
	return 1
}

# gssd — rpc.gssd for the kernel's RPCSEC_GSS upcalls (pipefs in
# /run/rpc_pipefs, nfs.conf's pipefs-directory): on a client, users'
# tickets from /tmp/krb5cc_<uid>, root's and the lease's from the guest's
# keytab; on the knfsd server, the callback client's (knfsd calls an
# NFSv4.0 client back under the flavour of its SETCLIENTID, as its own
# nfs/ principal from the keytab). Returns once it watches pipefs
# (inotify), before anything mounts.
gssd() {
	mkdir -p /run/rpc_pipefs
	mountpoint -q /run/rpc_pipefs ||
		mount -t rpc_pipefs sunrpc /run/rpc_pipefs || fail "rpc_pipefs"
	rpc.gssd -f -v -k "$LAB_GUEST_KRB5_KEYTAB" \
		>"$LAB_DIR/logs/$LAB_GUEST_NAME.gssd.log" 2>&1 &
	wait_for_fd $! inotify || fail "rpc.gssd did not start"
}

# knfsd_svcgssd — rpc.svcgssd accepting RPCSEC_GSS contexts for knfsd
# (nfs/<this host's full name> from the guest's keytab, KRB5_KTNAME), and
# rpc.idmapd (server side) for the owner names knfsd sends krb5 callers.
# Returns once svcgssd has opened the kernel's init channel.
knfsd_svcgssd() {
	KRB5_KTNAME="FILE:$LAB_GUEST_KRB5_KEYTAB" rpc.svcgssd -f -v \
		>"$LAB_DIR/logs/$LAB_GUEST_NAME.svcgssd.log" 2>&1 &
	wait_for_fd $! auth.rpcsec.init || fail "rpc.svcgssd did not start"
	[ "${LAB_KNFSD_IDMAP:-}" = 1 ] || rpc.idmapd -S || fail "rpc.idmapd"
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
grep -q ' /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm

[ -n "$lab_env" ] && [ -r "$lab_env" ] || fail "no lab_env file ($lab_env)"
# shellcheck disable=SC1090
. "$lab_env"

# Writable scratch space.  /tmp may hide the lab dir, so remount it below.
for dir in /tmp /run /var/tmp /var/lib/nfs /mnt /media /srv; do
	mount -t tmpfs -o mode=1777 tmpfs "$dir" || fail "tmpfs on $dir"
done
chmod 755 /run /var/lib/nfs /mnt /media /srv
mkdir -p "$LAB_DIR" /run/lock
mount_host_dir "$LAB_DIR" labdir || fail "host dir $LAB_DIR"
# The source tree (this script, the agent, test tools) may live under one of
# those directories too (a CI clone in /tmp): show it again, read-only.
repo_dir=$(dirname "$LAB_SRC_DIR")
if [ ! -e "$LAB_SRC_DIR/guest_agent.py" ]; then
	mkdir -p "$repo_dir"
	mount_host_dir "$repo_dir" repo ro || fail "host dir $repo_dir"
fi
[ "$LAB_GUEST_PLATFORM" != qemu ] || qemu_platform_setup
[ -z "${LAB_GUEST_IDENTITY_DIR:-}" ] || use_identities "$LAB_GUEST_IDENTITY_DIR"
[ -z "${LAB_GUEST_KRB5_DIR:-}" ] || krb5_setup

hostname "lab-$LAB_GUEST_NAME"

# Network.
ip link set lo up
for spec in $LAB_GUEST_IFS; do
	ifname=${spec%%=*}
	ip addr add "${spec#*=}" dev "$ifname" || fail "addr $spec"
	ip link set "$ifname" up || fail "up $ifname"
done
IFS=';' read -r -a routes <<<"$LAB_GUEST_ROUTES"
for route in "${routes[@]}"; do
	[ -n "$route" ] || continue
	# shellcheck disable=SC2086
	ip route add $route || fail "route $route"
done

case "$LAB_GUEST_ROLE" in
client)
	# Distinct NFSv4 client identities even if two guests share a name
	# pattern: the server must see every guest as its own client.
	modprobe sunrpc
	modprobe nfs nfs4_unique_id="nl-$LAB_GUEST_NAME-$RANDOM$RANDOM"
	modprobe nfsv4
	modprobe nfsv3
	# NFSv3 locks (LAB_NLM): the kernel's lockd registers with the
	# guest's rpcbind (where the server finds it to grant a blocked lock)
	# and has statd watch the server (mount.nfs insists on a statd).
	# Their state lives in the guest's tmpfs /run and /var/lib/nfs.
	if [ "${LAB_GUEST_NLM:-}" = 1 ]; then
		mkdir -p /run/rpcbind /var/lib/nfs/sm /var/lib/nfs/sm.bak
		! id _rpc >/dev/null 2>&1 || chown _rpc: /run/rpcbind
		rpcbind -w || fail "rpcbind"
		rpc.statd --no-notify || fail "rpc.statd"
	fi
	[ -z "${LAB_GUEST_KRB5_DIR:-}" ] || gssd
	;;
router)
	sysctl -qw net.ipv4.ip_forward=1
	for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 >"$f"; done
	modprobe sch_netem || fail "modprobe sch_netem"
	for ifname in eth0 eth1; do
		if [ -n "$LAB_GUEST_NETEM" ]; then
			# shellcheck disable=SC2086
			tc qdisc replace dev "$ifname" root netem $LAB_GUEST_NETEM ||
				fail "netem on $ifname"
		fi
	done
	;;
knfsd)
	mkdir -p "$LAB_KNFSD_EXPORT_DIR"
	mount -t ext4 "$LAB_KNFSD_DISK" "$LAB_KNFSD_EXPORT_DIR" ||
		fail "mount $LAB_KNFSD_DISK"
	rmdir "$LAB_KNFSD_EXPORT_DIR/lost+found" 2>/dev/null
	modprobe nfsd || fail "modprobe nfsd"
	mount -t nfsd nfsd /proc/fs/nfsd || fail "mount nfsd fs"
	[ "${LAB_KNFSD_IDMAP:-}" != 1 ] || knfsd_idmap
	mkdir -p /var/lib/nfs/v4recovery /run/rpc_pipefs /run/rpcbind
	: >/var/lib/nfs/etab
	: >/var/lib/nfs/rmtab
	# Short grace and lease: a fresh lab server has nothing to reclaim.
	echo "$LAB_KNFSD_GRACE" >/proc/fs/nfsd/nfsv4gracetime
	echo "$LAB_KNFSD_LEASE" >/proc/fs/nfsd/nfsv4leasetime
	# Only while no nfsd thread runs: before rpc.nfsd.
	if [ -n "${LAB_KNFSD_MAX_BLOCK:-}" ]; then
		echo "$LAB_KNFSD_MAX_BLOCK" >/proc/fs/nfsd/max_block_size ||
			fail "max_block_size $LAB_KNFSD_MAX_BLOCK"
	fi
	# nfsdcld tracks clients in the lab dir, so it survives a restart of
	# this guest: the first boot has no clients to reclaim and knfsd skips
	# its grace period; a restart runs a real one (LAB_KNFSD_GRACE s).
	# knfsd waits only a second for nfsdcld to open the pipe it creates at
	# start, then tracks clients otherwise (UMH, legacy), where our
	# records are not: every reclaim is refused.  nfsdcld daemonizes
	# before it opens its database and watches for that pipe, so it runs
	# in the foreground here and rpc.nfsd waits for its watch (inotify).
	mkdir -p "$LAB_KNFSD_CLD_DIR"
	mount -t rpc_pipefs sunrpc /run/rpc_pipefs || fail "mount rpc_pipefs"
	nfsdcld -F -s "$LAB_KNFSD_CLD_DIR" \
		>"$LAB_DIR/logs/$LAB_GUEST_NAME.nfsdcld.log" 2>&1 &
	wait_for_fd $! inotify || fail "nfsdcld did not start"
	[ -z "${LAB_GUEST_KRB5_DIR:-}" ] || { knfsd_svcgssd && gssd; }
	rpcbind -w || log "rpcbind failed (continuing)"
	# LAB_KNFSD_MANAGE_GIDS: empty keeps the host's nfs.conf; y or n.
	mountd_opts=()
	case ${LAB_KNFSD_MANAGE_GIDS:-} in
	y) mountd_opts=(--manage-gids) ;;
	n) knfsd_no_manage_gids ;;
	esac
	exportfs -o "${LAB_KNFSD_EXPORT_OPTS:-rw,fsid=0,no_root_squash,insecure,no_subtree_check,sync}" \
		"*:$LAB_KNFSD_EXPORT_DIR" || fail "exportfs"
	rpc.mountd --port 20048 "${mountd_opts[@]}" || fail "rpc.mountd"
	# lockd starts with rpc.nfsd, in its own grace period (5 x nlm_timeout
	# = 50 s by default, rounded up to nlm_timeout), and while any grace
	# period runs knfsd grants no NFSv4 delegations.  LAB_KNFSD_NLM_GRACE
	# shortens it (the benchmarks use 10).
	if [ -n "${LAB_KNFSD_NLM_GRACE:-}" ]; then
		echo "$LAB_KNFSD_NLM_GRACE" >/proc/sys/fs/nfs/nlm_grace_period ||
			log "cannot set nlm_grace_period"
	fi
	rpc.nfsd --port 2049 "$LAB_KNFSD_THREADS" || fail "rpc.nfsd"
	dmesg | grep -q "NFSD: Using nfsdcld client tracking operations" ||
		fail "knfsd does not track clients with nfsdcld: $(dmesg | grep 'client tracking')"
	date +%s.%N >"$LAB_DIR/run/knfsd.started"
	;;
esac

read -r agent_addr agent_port <<<"$LAB_GUEST_AGENT"
/usr/bin/python3 -B "$LAB_SRC_DIR/guest_agent.py" "$agent_addr" "$agent_port" \
	>"$LAB_DIR/logs/$LAB_GUEST_NAME.agent.log" 2>&1 &
log "ready: agent on $agent_addr:$agent_port"
idle_forever
