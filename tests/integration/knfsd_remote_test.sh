#!/usr/bin/env bash
# nache in front of Linux knfsd (a 6.1 kernel under user-mode-linux) instead
# of Ganesha: the same forwarding works against the kernel server, checked by
# a second client mounting knfsd directly and by knfsd's own op counters.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_init && lab_net_up lan && lab_remote_knfsd_start &&
	LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/ lab_nache_start &&
	lab_clients_start 1 2 || { echo "lab did not start"; exit 1; }
lab_client_mount 1 "$LAB_NACHE_ADDR" /export /mnt/n vers=4.1 &&
	lab_client_mount 2 "$LAB_KNFSD_ADDR" / /mnt/k vers=4.0 || { echo "mounts failed"; exit 1; }

# nfsd's op counters: the number after "proc4ops" counts, then per-op values.
knfsd_compounds() { lab_knfsd_stats | awk '$1 == "proc4" { print $4 }'; }

write_through_nache_read_direct() {
	local before after
	before=$(knfsd_compounds)
	on 1 "mkdir -p /mnt/n/k && head -c 3000000 /dev/urandom > /tmp/src && cp /tmp/src /mnt/n/k/data && sha256sum < /tmp/src" >"$LAB_DIR/sum" &&
		expect_eq "direct client reads nache's write" "$(on 2 "sha256sum < /mnt/k/k/data")" "$(cat "$LAB_DIR/sum")" &&
		after=$(knfsd_compounds) &&
		[ "$after" -gt "$before" ] || { echo "knfsd compounds: $before -> $after" >&2; return 1; }
}

write_direct_read_through_nache() {
	on 2 "echo from-knfsd-client > /mnt/k/k/other" &&
		expect_eq "nache client" "$(on 1 "cat /mnt/n/k/other")" from-knfsd-client
}

metadata_ops_on_knfsd() {
	on 1 "cd /mnt/n/k && mkdir d && ln -s data d/l && mv other d/o && ln d/o d/o2 && chmod 700 d && stat -c '%a %h' d d/o" >"$LAB_DIR/out" &&
		expect_eq "via nache" "$(cat "$LAB_DIR/out")" "$(printf '700 2\n644 2')" &&
		expect_eq "direct view" "$(on 2 "readlink /mnt/k/k/d/l; cat /mnt/k/k/d/o2")" "$(printf 'data\nfrom-knfsd-client')"
}

check write_through_nache_read_directly_from_knfsd write_through_nache_read_direct
check write_at_knfsd_read_through_nache write_direct_read_through_nache
check metadata_operations_against_knfsd metadata_ops_on_knfsd
itest_finish
