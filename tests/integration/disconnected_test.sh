#!/usr/bin/env bash
# Disconnected operation (issue: write-back): a write-back single-writer
# export with Serve_Stale_On_Disconnect, Ganesha's VFS as the remote (10 s
# lease), real kernel clients. The WAN to the remote is cut (blackhole
# routes both ways, the TCP connection stays up as in a real outage):
# nache notices when its lease cannot be renewed, then serves cached files
# (also to a client that never read them), accepts writes, creates and
# mkdirs into its log, and lists directories; once the WAN is back
# everything reaches the remote. A file changed at the remote during a cut
# while nache held writes of it is a conflict: the remote's version stays,
# nache's appears beside it as NAME.nache-conflict-<time>. (The lab's
# teardown removes the cut with its namespaces, also on failure.)
set -uo pipefail
source "$(dirname "$0")/itest.sh"

WB='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 1; Serve_Stale_On_Disconnect = true;'
LAB_LEASE_LIFETIME=10 lab_init && lab_net_up lan && LAB_LEASE_LIFETIME=10 lab_remote_vfs_start &&
	lab_nache_start "$WB" && lab_clients_start 1 2 ||
	{ echo "lab did not start"; exit 1; }
M=/mnt/n
R=$LAB_REMOTE_EXPORT_DIR
mount_nache 1 $M vers=4.1 && mount_nache 2 $M vers=4.1 ||
	{ echo "mount failed"; exit 1; }
mkdir -p "$R/dc/sub" && chmod -R 777 "$R/dc"
head -c $((3 << 20)) /dev/urandom >"$R/dc/a"
echo kept >"$R/dc/sub/s"
mkdir -p "$R/dc2" && chmod 777 "$R/dc2" && echo base >"$R/dc2/c"

connected() { metric nache_upstream_connected; }
sha_remote() { sha256sum "$R/$1" 2>/dev/null | cut -d' ' -f1; }

disconnected_serves_the_cache_and_takes_writes() {
	local want_a
	want_a=$(sha_remote dc/a)
	# Client 1 reads and lists the tree while connected: nache caches it.
	expect_eq "read while connected" "$(on 1 "cat $M/dc/sub/s >/dev/null && sha256sum < $M/dc/a" | cut -d' ' -f1)" "$want_a" &&
		expect_eq "listing while connected" "$(on 1 "echo \$(ls $M/dc $M/dc/sub)")" \
			"$M/dc: a sub $M/dc/sub: s" || return 1
	cut_upstream "$LAB_REMOTE_ADDR" || return 1
	lab_wait_until 60 eval '[ "$(connected)" = 0 ]' ||
		{ echo "nache did not notice the cut" >&2; return 1; }
	# Bounded: a client waiting on the remote would hang here instead.
	expect_eq "client 2 reads the cached file" \
		"$(on 2 "timeout 60 sha256sum < $M/dc/a" | cut -d' ' -f1)" "$want_a" &&
		expect_eq "client 2 reads the cached small file" "$(on 2 "timeout 60 cat $M/dc/sub/s")" kept &&
		on 1 "timeout 60 sh -c 'echo offline > $M/dc/b && mkdir $M/dc/new && echo inner > $M/dc/new/c && echo more >> $M/dc/sub/s && sync'" &&
		expect_eq "client 2 lists the new names" "$(on 2 "timeout 60 sh -c 'echo \$(ls $M/dc $M/dc/new)'")" \
			"$M/dc: a b new sub $M/dc/new: c" &&
		expect_eq "client 2 reads what client 1 wrote" "$(on 2 "timeout 60 cat $M/dc/new/c $M/dc/sub/s")" \
			"inner
kept
more" &&
		expect_eq "the remote has none of it yet" "$(ls "$R/dc")" "a
sub" || return 1
	heal_upstream
	lab_wait_until 60 eval '[ "$(connected)" = 1 ]' ||
		{ echo "nache did not reconnect" >&2; return 1; }
	lab_wait_until 60 eval '[ "$(cat "$R/dc/new/c" 2>/dev/null)" = inner ]' &&
		lab_wait_until 30 eval '[ "$(cat "$R/dc/b" 2>/dev/null)" = offline ]' &&
		lab_wait_until 30 eval '[ "$(cat "$R/dc/sub/s" 2>/dev/null | tr "\n" " ")" = "kept more " ]' ||
		{ echo "remote after the heal: $(ls -R "$R/dc" | tr '\n' ' ')" >&2; return 1; }
	expect_eq "a is untouched" "$(sha_remote dc/a)" "$want_a"
}

check disconnected_serves_the_cache_and_takes_writes disconnected_serves_the_cache_and_takes_writes

a_remote_change_during_the_cut_keeps_both_versions() {
	expect_eq "c read while connected" "$(on 1 "cat $M/dc2/c")" base || return 1
	cut_upstream "$LAB_REMOTE_ADDR" || return 1
	lab_wait_until 60 eval '[ "$(connected)" = 0 ]' ||
		{ echo "nache did not notice the cut" >&2; return 1; }
	# Ours: written over c in place (no truncation) while cut off; theirs:
	# written at the remote meanwhile, by someone nache cannot see.
	on 1 "timeout 60 sh -c 'printf ours | dd of=$M/dc2/c conv=notrunc status=none && sync'" &&
		expect_eq "client 2 sees our version during the cut" "$(on 2 "timeout 60 cat $M/dc2/c")" ours || return 1
	echo theirs >"$R/dc2/c"
	heal_upstream
	local copy=""
	lab_wait_until 90 eval 'copy=$(ls "$R"/dc2/c.nache-conflict-* 2>/dev/null); [ -n "$copy" ]' ||
		{ echo "no conflict copy; remote: $(ls "$R/dc2" | tr '\n' ' '), c: $(cat "$R/dc2/c")" >&2; return 1; }
	expect_eq "one conflict copy" "$(ls "$R"/dc2/c.nache-conflict-* | wc -l)" 1 &&
		expect_eq "the copy is our version" "$(cat "$copy")" ours &&
		expect_eq "the remote's version stays" "$(cat "$R/dc2/c")" theirs &&
		expect_eq "the conflict is counted" "$(metric nache_writeback_conflicts_total)" 1 &&
		lab_wait_until 30 eval '[ "$(on 2 "cat $M/dc2/c")" = theirs ]' ||
		{ echo "client 2 reads c as: $(on 2 "cat $M/dc2/c")" >&2; return 1; }
	# (The client's directory attribute cache may hold the old listing a
	# while.)
	lab_wait_until 90 eval '[ "$(on 2 "ls $M/dc2" | grep -c "^c.nache-conflict-")" = 1 ]' ||
		{ echo "client 2 lists: $(on 2 "ls $M/dc2" | tr '\n' ' ')" >&2; return 1; }
}

check a_remote_change_during_the_cut_keeps_both_versions a_remote_change_during_the_cut_keeps_both_versions
itest_finish
