#!/usr/bin/env bash
# Protocol conformance through nache: a client must not be able to tell,
# by any protocol behaviour, that nache sits between it and the files
# (issue 17). tests/tools/conformance sends the COMPOUNDs of each case
# (share reservations, an OPEN replay, UNCHECKED, EXCLUSIVE4 and (over
# NFSv4.1) EXCLUSIVE4_1 creates of an existing file, LOCKT of one's own
# lock, OPEN_DOWNGRADE with locks held, the change attribute across
# WRITEs, no read delegation while another client writes, an OPEN and an
# open's upgrade refused to a caller without rights; over NFSv4.2
# also ALLOCATE, DEALLOCATE, SEEK, COPY and extended attributes) to
# nache's front with two client ids, over NFSv4.0, 4.1 and 4.2, from
# nache's namespace. nache runs in turn in front of the Ganesha VFS remote
# and of Linux knfsd, with an NFSv4.0, 4.1 and 4.2 upstream (an NFSv4.2
# front only over a 4.2 upstream: the 4.2 operations need one): every
# front, remote and upstream version must give the answers a server itself
# gives. The same tool run against the VFS remote directly (stock Ganesha
# 4.3 FSAL_VFS) first proves the expectations are a server's, and the
# NFSv4.2 cases against knfsd too. (Not all against knfsd: knfsd lets a
# READ through a write-only open pass another open's DENY_READ, which
# Ganesha and RFC 7530 9.9 refuse.) Stock FSAL_VFS has no extended
# attributes and no COPY: in front of it, nache must refuse them as it
# does (--no-xattrs, --no-copy).
set -uo pipefail
# knfsd refuses locks (NFS4ERR_GRACE) while lockd's grace period runs, 50 s
# after boot by default: shorten it, and wait for its end (below).
export LAB_KNFSD_NLM_GRACE=10
source "$(dirname "$0")/itest.sh"

CONF=$NACHE_BUILD_DIR/tests/tools/conformance
[ -x "$CONF" ] || { echo "no conformance tool at $CONF (build first)"; exit 1; }

lab_init && lab_net_up lan && lab_remote_vfs_start && lab_remote_knfsd_start ||
	{ echo "lab did not start"; exit 1; }

# nache_for REMOTE UPSTREAM_MINOR — (re)starts nache in front of REMOTE
# (vfs or knfsd) speaking NFSv4.UPSTREAM_MINOR to it, on a fresh cache
# (a store records its upstream and refuses another).
nache_for() {
	local remote=$1 minor=$2
	[ -z "$(lab_nache_pid)" ] || lab_nache_stop || return 1
	rm -rf "$LAB_DIR/nache/cache"
	if [ "$remote" = knfsd ]; then
		LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ \
			lab_nache_start "Upstream_Minor_Version = $minor;"
	else
		lab_nache_start "Upstream_Minor_Version = $minor;"
	fi
}

# conformance SERVER PATH MINOR [ARGS] — the tool from nache's namespace
# against SERVER's PATH over NFSv4.MINOR; its lines go to the log.
conformance() {
	local server=$1 path=$2 minor=$3
	shift 3
	ip netns exec "$LAB_NS_LAN" "$CONF" --server "$server" --path "$path" \
		--minor "$minor" ${CONFORMANCE_ONLY:+--only "$CONFORMANCE_ONLY"} "$@" >&2
}

# conformance_over FRONT_MINOR [ARGS] — every case against nache's front.
conformance_over() { conformance "$LAB_NACHE_ADDR" /export "$@"; }

# knfsd_grants_locks — lockd's grace period is over: knfsd grants a lock.
knfsd_grants_locks() {
	ip netns exec "$LAB_NS_LAN" "$CONF" --server "$LAB_KNFSD_ADDR" --path / \
		--minor 0 --only lockt_own_lock >/dev/null 2>&1
}
lab_wait_until $((LAB_KNFSD_NLM_GRACE + 60)) knfsd_grants_locks ||
	{ echo "knfsd never granted a lock (lockd's grace period)"; exit 1; }

# (Stock Ganesha 4.3 upgrades an open for its owner without judging the
# caller, which nache must not inherit: --unchecked-upgrades for it.)
for front in 0 1; do
	check "reference_vfs_remote_front_v4${front}" \
		conformance "$LAB_REMOTE_ADDR" /export "$front" --unchecked-upgrades
done
check reference_vfs_remote_front_v42 \
	conformance "$LAB_REMOTE_ADDR" /export 2 --no-xattrs --no-copy \
	--unchecked-upgrades
check reference_knfsd_nfs42_cases conformance "$LAB_KNFSD_ADDR" / 2 --only nfs42

for remote in vfs knfsd; do
	for up in 0 1 2; do
		if ! nache_for "$remote" "$up"; then
			check "nache_starts_in_front_of_${remote}_upstream_v4${up}" false
			continue
		fi
		fronts="0 1"
		[ "$up" != 2 ] || fronts="0 1 2"
		for front in $fronts; do
			extra=()
			[ "$remote" != vfs ] || [ "$front" != 2 ] || extra=(--no-xattrs --no-copy)
			check "conformance_front_v4${front}_${remote}_upstream_v4${up}" \
				conformance_over "$front" "${extra[@]}"
		done
	done
done

# Delegations to nache's own clients (the delegation cases, NFSv4.1 front,
# where the tool's clients serve a back channel): nache's front delegates
# a file only under a delegation of its own from the remote, which knfsd
# grants over an NFSv4.1 upstream. With --delegations each case first
# checks that a delegation is granted where nothing stands in the way.
if LAB_NACHE_DELEGATIONS=readwrite nache_for knfsd 1; then
	check "delegations_front_v41_knfsd_upstream_v41" \
		conformance "$LAB_NACHE_ADDR" /export 1 --delegations \
		--only delegation
else
	check "nache_starts_with_delegations_in_front_of_knfsd" false
fi
itest_finish
