# shellcheck shell=bash
# lab/helpers.sh — the lab as the integration tests and the benchmarks use
# it: lab.sh with nache's build staged (NACHE_BUILD_DIR, default build/),
# and short names for what they all do (bring the lab up, run in a client,
# mount, read a metric, cut the WAN). Tests source it through
# tests/integration/itest.sh, which adds checks and results; benchmarks
# source it directly.

: "${NACHE_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${NACHE_BUILD_DIR:=$NACHE_SOURCE_DIR/build}"
export NACHE_SOURCE_DIR NACHE_BUILD_DIR
export LAB_STAGE_DIR="$NACHE_BUILD_DIR/stage"
# The suites and benchmarks act as the office's administrator, as root on
# the clients, on a remote whose files root made: nache's export does not
# squash root here (the lab's default, as shipped, does). Identity tests
# set what they test (access_identity_test.sh).
: "${LAB_NACHE_SQUASH:=No_Root_Squash}"
export LAB_NACHE_SQUASH
# shellcheck source=lab.sh
source "$NACHE_SOURCE_DIR/lab/lab.sh"

# lab_up PROFILE NCLIENTS — the lab with the VFS remote, nache in front of
# it, and NCLIENTS booted clients.
lab_up() {
	local profile=$1 n=$2
	lab_init && lab_net_up "$profile" && lab_remote_vfs_start && lab_nache_start || return 1
	if [ "$n" -gt 0 ]; then lab_clients_start $(seq 1 "$n") || return 1; fi
}

# on N CMD — runs CMD in client N as root; its output goes to stdout.
on() { lab_client_run "$1" "$2"; }

# as WHO CMD — run CMD in client 1 as WHO: "root", or "UID:GID" (no
# supplementary groups), or "UID:GID:G1,G2" (with them).
as() {
	local uid gid groups
	if [ "$1" = root ]; then
		lab_client_run 1 "$2"
		return
	fi
	IFS=: read -r uid gid groups <<<"$1"
	lab_client_run_as_groups 1 "$uid" "$gid" "$groups" "$2"
}

# mount_nache N MNT OPTS — client N mounts nache's /export on MNT.
mount_nache() { lab_client_mount "$1" "$LAB_NACHE_ADDR" /export "$2" "$3"; }

# mount_direct N MNT OPTS — client N mounts the remote directly (across the
# WAN, for baselines and coherence checks).
mount_direct() { lab_client_mount "$1" "$LAB_REMOTE_ADDR" /export "$2" "$3"; }

# metric NAME [LABELS [ADDR [PORT]]] — sum of the series NAME whose labels
# include every LABELS pair ('op="WRITE",status="ok"'), scraped from
# http://ADDR:PORT/metrics (default nache's address, 9464); fails when the
# page cannot be fetched.
metric() {
	ip netns exec "$LAB_NS_LAN" python3 - "$1" "${2:-}" \
		"${3:-$LAB_NACHE_ADDR}" "${4:-9464}" <<'EOF'
import re, sys, urllib.request
name, want, addr, port = sys.argv[1:5]
want = set(re.findall(r'(\w+)="([^"]*)"', want))
page = urllib.request.urlopen(f"http://{addr}:{port}/metrics", timeout=10)
total = 0.0
for line in page.read().decode().splitlines():
    m = re.match(r'([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$', line)
    if m and m.group(1) == name:
        if want <= set(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")):
            total += float(m.group(3))
print(int(total) if total == int(total) else total)
EOF
}

# purpose P — nache's upstream COMPOUNDs sent for purpose P so far.
purpose() { metric nache_upstream_compounds_by_purpose_total "purpose=\"$1\""; }

# at_least WHAT GOT WANT — fails unless GOT >= WANT.
at_least() {
	python3 -c "import sys; sys.exit(0 if float('$2') >= float('$3') else 1)" ||
		{ echo "expected $1 >= $3, got $2" >&2; return 1; }
}

# cut_upstream ADDR / heal_upstream — drop everything between nache's WAN
# address and the remote at ADDR, both ways, as in a WAN outage (the TCP
# connection stays up; clients' paths to nache and direct mounts are not
# touched). The lab's teardown removes the rules with its namespaces.
cut_upstream() {
	ip -n "$LAB_NS_LAN" rule add from "$LAB_NACHE_WAN_ADDR" to "$1" blackhole pref 100 &&
		ip -n "$LAB_NS_REMOTE" rule add to "$LAB_NACHE_WAN_ADDR" blackhole pref 100
}
heal_upstream() {
	ip -n "$LAB_NS_LAN" rule del pref 100 2>/dev/null
	ip -n "$LAB_NS_REMOTE" rule del pref 100 2>/dev/null
	return 0
}
