# shellcheck shell=bash
# Sourced by tests and benchmarks that watch knfsd's own NFSv4 state
# (after lab/helpers.sh): which client holds which open and delegation, as its
# /proc/fs/nfsd/clients/*/states files say, and clients holding files open
# until knfsd delegates them.

# states_count WHO PATTERN FILE — lines of knfsd's state files matching
# PATTERN (an awk regex) on FILE (its path in the export, "/f") for the
# clients whose info contains WHO (all clients: "").
states_count() {
	lab_knfsd_states | awk -v who="$1" -v pat="$2" -v file="filename: \"$3\"" '
		/^# client/ { ours = 0 }
		who == "" || index($0, who) { ours = 1 }
		ours && $0 ~ pat && index($0, file) { n++ }
		END { print n + 0 }'
}
write_delegs() { states_count "$1" 'type: deleg, access: w' "$2"; }
read_delegs() { states_count "$1" 'type: deleg, access: r' "$2"; }

# hold N MODE FILE TAG — client N opens FILE (MODE "<>": read-write, "<":
# read-only) and keeps it open (fd 3 of a shell in the background of the
# guest) until release N TAG; returns once the open succeeded.
hold() {
	on "$1" "exec 3$2$3 || exit 1; touch /tmp/$4; while [ -e /tmp/$4 ]; do sleep 0.2; done" \
		>/dev/null 2>&1 &
	lab_wait_until 30 on "$1" "test -e /tmp/$4"
}
release() { on "$1" "rm -f /tmp/$2"; }

# held_until_delegated N MODE FILE TAG COUNT [NAME] — hold FILE open in client N
# until COUNT (a function printing the delegations of interest) is >= 1.
# knfsd delegates nothing while its or lockd's grace period runs (and some
# time after a recall): then each new open asks again.  The file stays
# open on success.
held_until_delegated() {
	# (count and name are read by the eval'd conditions below.)
	# shellcheck disable=SC2034
	local n=$1 mode=$2 file=$3 tag=$4 count=$5
	# (knfsd names a file in the export's root "/f", one below "d/f".)
	# shellcheck disable=SC2034
	local name=${6:-/${file##*/}}
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		hold "$n" "$mode" "$file" "$tag" || return 1
		lab_wait_until 5 eval '[ "$($count)" -ge 1 ]' && return 0
		release "$n" "$tag"
		# The client's (or nache's lingering) upstream open must close
		# first, or the next open is no new OPEN at knfsd.
		lab_wait_until 15 eval '[ "$(states_count "" "type: open" "$name")" = 0 ]'
	done
	return 1
}

# knfsd_bench_ready PROFILE M D — for benchmarks against knfsd: waits out
# lockd's grace period (knfsd delegates nothing before its end), switches
# the link to PROFILE, measures the round trip to knfsd (into RTT), and
# mounts nache on client 1's M and knfsd directly on client 2's D.
knfsd_bench_ready() {
	local ready_at
	ready_at=$(($(cut -d. -f1 "$LAB_DIR/run/knfsd.started") + LAB_KNFSD_NLM_GRACE + 1))
	while [ "$(date +%s)" -lt "$ready_at" ]; do sleep 1; done # a deadline, not a condition
	lab_set_profile "$1" || return 1
	# (RTT is for the caller's report.)
	# shellcheck disable=SC2034
	RTT=$(lab_rtt "$LAB_NS_LAN" "$LAB_KNFSD_ADDR") || RTT='?'
	lab_client_mount 1 "$LAB_NACHE_ADDR" /export "$2" vers=4.1 &&
		lab_client_mount 2 "$LAB_KNFSD_ADDR" / "$3" vers=4.1
}
