#!/usr/bin/env bash
# Write-back on a single-writer export (Write_Policy = write_back;
# Single_Writer = true), real kernel clients, Ganesha's VFS as the remote:
# an acknowledged write, create, mkdir or rename is served to other clients
# at once but reaches the remote only when flushed; kill -9 of nache loses
# none of it (the restart flushes it, creates first); files created and
# removed before their flush are never sent; a truncate drops unflushed
# data; an extracted tree reaches the remote with its modes and times; the
# dirty bound holds a writer back without losing anything; removes of what
# the remote has are logged too, and sent before a name is reused there; a
# file rewritten with the bytes it had sends no data; an editor's save
# (a temporary file renamed over the remote's file) is logged whole; so is
# rm -r of a tree the remote has, directories included; so are renames
# of files and of directories the remote has; eight stable writers at once
# share the flushes of nache's disk and lose nothing to kill -9.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

# Flush_Age 3600: nothing is flushed by age while a step checks that the
# remote does not have the data yet.
HOLD='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 3600;'
SOON='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 1;'
lab_init && lab_net_up lan && lab_remote_vfs_start &&
	lab_nache_start "$HOLD" && lab_clients_start 1 2 ||
	{ echo "lab did not start"; exit 1; }
M=/mnt/n
R=$LAB_REMOTE_EXPORT_DIR
mount_nache 1 $M vers=4.1 && mount_nache 2 $M vers=4.1 ||
	{ echo "mount failed"; exit 1; }
mkdir -p "$R/wb" && chmod 777 "$R/wb"

dirty() { metric nache_dirty_bytes; }
written_upstream() { metric nache_upstream_bytes_total 'direction="write"'; }
sha_remote() { sha256sum "$R/$1" 2>/dev/null | cut -d' ' -f1; }
sha_client() {
	on "$1" "echo 3 > /proc/sys/vm/drop_caches; sha256sum $M/$2" | cut -d' ' -f1
}
# restart_with EXTRA [kill] — restart nache (SIGKILL with "kill"), the
# clients' mounts carry on.
restart_with() {
	if [ "${2:-}" = kill ]; then lab_nache_kill; else lab_nache_stop; fi &&
		lab_nache_start "$1"
}
remote_has() { [ "$(sha_remote "$1")" = "$2" ]; }
# remote_quiet — write-back has sent everything, directories' times
# included (nache_flush_lag_seconds back to 0). A check may change the
# remote directly only then: on a single-writer export nache answers for
# what it has not flushed, so a directory with a change of ours still to
# send keeps the listing it has, and a name made at the remote meanwhile
# is not seen (nothing but nache may write there). (rm -r of a tree made
# in wb/ right after a check that left wb/'s mtime unsent found no tree:
# 1 run in 23.)
remote_quiet() {
	lab_wait_until 60 eval '[ "$(metric nache_flush_lag_seconds)" = 0 ]' ||
		{ echo "write-back did not drain (flush lag $(metric nache_flush_lag_seconds) s)" >&2; return 1; }
}
creates() { metric nache_writeback_creates_total "outcome=\"$1\""; }
up_ops() { metric nache_upstream_ops_total "op=\"$1\""; }

acknowledged_writes_stay_local_until_flushed() {
	local w0 want
	w0=$(written_upstream)
	want=$(on 1 "head -c $((4 << 20)) /dev/urandom > /tmp/a && cp /tmp/a $M/wb/a && sync && sha256sum < /tmp/a" | cut -d' ' -f1) &&
		expect_eq "client 2 reads it through nache" "$(sha_client 2 wb/a)" "$want" &&
		expect_eq "bytes sent upstream" $(($(written_upstream) - w0)) 0 &&
		expect_eq "at the remote before the flush" "$(ls "$R/wb")" "" &&
		at_least "dirty bytes" "$(dirty)" $((4 << 20)) &&
		echo "$want" >"$LAB_DIR/a.sha"
}

kill_9_loses_no_acknowledged_write() {
	local want
	want=$(cat "$LAB_DIR/a.sha") &&
		# More acknowledged data just before the crash.
		on 2 "printf tail-data >> $M/wb/a && sync" &&
		want=$(on 2 "sha256sum < $M/wb/a" | cut -d' ' -f1) &&
		restart_with "$SOON" kill &&
		lab_wait_until 60 remote_has wb/a "$want" ||
		{ echo "remote: $(sha_remote wb/a), acknowledged: $want" >&2; return 1; }
	lab_wait_until 10 eval '[ "$(dirty)" = 0 ]' &&
		expect_eq "client 1 after the restart" "$(sha_client 1 wb/a)" "$want"
}

# The issue's log optimisation: 1,000 temp files created, written and
# removed within the flush age send nothing upstream, data or create.
removed_before_flush_sends_no_data() {
	local w0 o0 c0 k0
	restart_with "$HOLD" || return 1
	w0=$(written_upstream) o0=$(up_ops OPEN) c0=$(up_ops CREATE) k0=$(creates cancelled)
	on 1 "cd $M/wb && for i in \$(seq 1 1000); do head -c 4096 /dev/urandom > t\$i; done && sync && rm -f t*" &&
		expect_eq "bytes sent upstream" $(($(written_upstream) - w0)) 0 &&
		expect_eq "upstream OPENs" $(($(up_ops OPEN) - o0)) 0 &&
		expect_eq "upstream CREATEs" $(($(up_ops CREATE) - c0)) 0 &&
		expect_eq "creates cancelled" $(($(creates cancelled) - k0)) 1000 &&
		lab_wait_until 10 eval '[ "$(dirty)" = 0 ]' ||
		{ echo "dirty bytes left: $(dirty)" >&2; return 1; }
	[ -z "$(ls "$R/wb" | grep '^t')" ] || { echo "temp files at the remote" >&2; return 1; }
}

truncate_drops_unflushed_data() {
	on 1 "head -c 100000 /dev/urandom > $M/wb/b && sync && : > $M/wb/b && printf small > $M/wb/b && sync" &&
		expect_eq "through nache" "$(on 2 "cat $M/wb/b")" small &&
		restart_with "$SOON" &&
		lab_wait_until 60 eval '[ "$(cat "$R/wb/b")" = small ]' ||
		{ echo "remote: $(head -c 20 "$R/wb/b" | od -c | head -2)" >&2; return 1; }
}

# What tar does: write, then set mode and times. Locally at once; at the
# remote after the data, when flushed.
attributes_follow_the_data() {
	restart_with "$HOLD" &&
		on 1 "printf tarred > $M/wb/d && chmod 640 $M/wb/d && touch -m -d @1000000000 $M/wb/d" &&
		expect_eq "through nache" "$(on 2 "stat -c '%a %Y %s' $M/wb/d")" "640 1000000000 6" &&
		expect_eq "at the remote before the flush" "$(ls "$R/wb" | grep -c '^d$')" 0 &&
		restart_with "$SOON" &&
		lab_wait_until 60 eval '[ "$(stat -c "%a %Y %s" "$R/wb/d")" = "640 1000000000 6" ]' ||
		{ echo "remote: $(stat -c '%a %Y %s' "$R/wb/d")" >&2; return 1; }
}

# Single writer: a name missing from a fresh listing is missing, so the
# lookup before each create costs nothing upstream.
creates_in_a_new_directory_need_no_lookup() {
	local l0
	restart_with "$HOLD" && on 1 "mkdir $M/wb/new" || return 1
	l0=$(metric nache_upstream_ops_total 'op="LOOKUP"')
	on 1 "cd $M/wb/new && for i in \$(seq 1 20); do echo \$i > f\$i; done" &&
		expect_eq "upstream LOOKUPs for 20 creates" \
			$(($(metric nache_upstream_ops_total 'op="LOOKUP"') - l0)) 0 &&
		expect_eq "listing" "$(on 2 "ls $M/wb/new | wc -l")" 20 &&
		expect_eq "at the remote" "$(ls "$R/wb" | grep -c '^new$')" 0
}

# Local renames and removes rewrite the log: only the final state is sent.
local_renames_and_removes() {
	local o0 k0
	restart_with "$HOLD" || return 1
	o0=$(up_ops OPEN) k0=$(creates cancelled)
	on 1 "cd $M/wb && mkdir rn && echo one > rn/a && mv rn/a rn/b && echo two > rn/c && mv rn/c rn/b && mkdir rn/gone && rmdir rn/gone && ln -s b rn/l && mkdir rn/sub && mv rn/b rn/sub/b" &&
		expect_eq "through nache" "$(on 2 "cd $M/wb/rn && echo \$(ls -R . && cat sub/b && readlink l)")" \
			'.: l sub ./sub: b two b' &&
		expect_eq "upstream OPENs" $(($(up_ops OPEN) - o0)) 0 &&
		expect_eq "creates cancelled (a replaced b, gone)" $(($(creates cancelled) - k0)) 2 &&
		restart_with "$SOON" &&
		lab_wait_until 60 eval '[ "$(cat "$R/wb/rn/sub/b" 2>/dev/null)" = two ]' ||
		{ echo "remote: $(ls -R "$R/wb/rn" 2>&1 | tr '\n' ' ')" >&2; return 1; }
	lab_wait_until 20 eval '[ "$(dirty)" = 0 ]' &&
		expect_eq "remote tree" "$(cd "$R/wb/rn" && { ls -R . && cat sub/b && readlink l; } | xargs)" \
			'.: l sub ./sub: b two b'
}

# A tree's description: files with mode, size, mtime and content;
# directories with mode and mtime; symlinks with their target (not their
# mtime: Ganesha's VFS, the remote here, does not set a symlink's times).
TREE="{ find . -type f -printf '%p %m %s %T@\\n'; find . -type d -printf '%p %m %T@\\n'; find . -type l -printf '%p %l\\n'; } | sort; find . -type f | sort | xargs cat | sha256sum"

# What the issue's untar benchmark does, checked: a tree extracted through
# nache is served at once, sent nowhere until flushed, and then the remote
# has it all: contents, modes, mtimes (directories' too), symlinks.
extracted_tree_reaches_the_remote() {
	local src='/tmp/src'
	restart_with "$HOLD" || return 1
	on 1 "rm -rf $src && mkdir -p $src && cd $src &&
		for d in \$(seq 1 4); do mkdir -p d\$d/e\$d; for f in \$(seq 1 6); do head -c \$((f * 3000)) /dev/urandom > d\$d/f\$f; echo \$d\$f > d\$d/e\$d/g\$f; done; ln -s f1 d\$d/link; chmod 750 d\$d/e\$d; chmod 600 d\$d/f2; done &&
		find . -exec touch -h -d @1200000000 {} + && tar cf /tmp/src.tar . &&
		mkdir $M/wb/x && tar xf /tmp/src.tar -C $M/wb/x" || return 1
	local want
	want=$(on 1 "cd $src && $TREE") &&
		expect_eq "client 2 sees the tree" "$(on 2 "cd $M/wb/x && $TREE")" "$want" &&
		expect_eq "at the remote before the flush" "$(ls "$R/wb" | grep -c '^x$')" 0 &&
		restart_with "$SOON" &&
		lab_wait_until 120 eval '[ "$(dirty)" = 0 ]' ||
		{ echo "dirty left: $(dirty)" >&2; return 1; }
	expect_eq "the remote's tree" "$(cd "$R/wb/x" && eval "$TREE")" "$want"
}

dirty_bound_holds_a_fast_writer() {
	local want rc=0 sampler seen=$LAB_DIR/dirty.max
	restart_with 'Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 3600; Dirty_Max = "4M";' || return 1
	# Over the WAN (80 ms, 50 Mbit/s) the client writes faster than nache
	# can flush: the bound makes it wait. The dirty bytes are sampled
	# meanwhile; one client WRITE (1 MiB) may land past the bound.
	lab_set_profile wan || return 1
	rm -f "$seen" "$seen.stop"
	(
		max=0
		until [ -e "$seen.stop" ]; do
			d=$(dirty) && [ "${d%.*}" -gt "$max" ] && max=${d%.*}
			echo "$max" >"$seen"
		done
	) &
	sampler=$!
	want=$(on 1 "head -c $((24 << 20)) /dev/urandom > /tmp/c && cp /tmp/c $M/wb/c && sync && sha256sum < /tmp/c" | cut -d' ' -f1) || rc=1
	touch "$seen.stop"
	wait "$sampler"
	lab_set_profile lan || rc=1
	[ $rc = 0 ] &&
		at_least "bytes the bound forced upstream" "$(written_upstream)" $((16 << 20)) &&
		at_least "dirty bound (4 MiB) plus one WRITE, against the most seen" $(((5 << 20))) "$(cat "$seen")" &&
		expect_eq "through nache" "$(sha_client 2 wb/c)" "$want" &&
		restart_with "$SOON" &&
		lab_wait_until 60 remote_has wb/c "$want" ||
		{ echo "remote: $(sha_remote wb/c), acknowledged: $want" >&2; return 1; }
}

# A file rewritten in place with the bytes it had (rsync --inplace, a
# tool saving what it loaded): nothing of it is sent; the flush only
# moves the remote's mtime, as the clients saw it move.
rewritten_unchanged_sends_no_data() {
	local w0 u0 m0 want
	remote_quiet || return 1
	head -c $((2 << 20)) /dev/urandom >"$R/wb/same" && chmod 666 "$R/wb/same" &&
		want=$(sha_remote wb/same) && m0=$(stat -c %y "$R/wb/same") &&
		restart_with "$SOON" &&
		expect_eq "read through nache" "$(sha_client 1 wb/same)" "$want" || return 1
	w0=$(written_upstream) u0=$(metric nache_writeback_unchanged_bytes_total)
	on 1 "cp $M/wb/same /tmp/same && dd if=/tmp/same of=$M/wb/same bs=64k conv=notrunc,fsync status=none" &&
		lab_wait_until 30 eval '[ "$(dirty)" = 0 ] && [ "$(metric nache_flush_lag_seconds)" = 0 ]' &&
		expect_eq "bytes sent upstream" $(($(written_upstream) - w0)) 0 &&
		at_least "bytes found unchanged" $(($(metric nache_writeback_unchanged_bytes_total) - u0)) $((2 << 20)) &&
		expect_eq "the remote's data" "$(sha_remote wb/same)" "$want" &&
		lab_wait_until 10 eval '[ "$(stat -c %y "$R/wb/same")" != "$m0" ]' ||
		{ echo "the remote's mtime did not move ($m0)" >&2; return 1; }
}

# An editor's save: the new version written to a temporary file, renamed
# over the remote's file. Logged as the remove of the old file and the
# create of the new one under its final name: nothing goes upstream
# meanwhile, a kill -9 loses nothing, and the temporary name never
# reaches the remote.
save_over_a_remote_file_is_logged() {
	local r0 m0 o0
	remote_quiet || return 1
	echo v1 >"$R/wb/doc" && chmod 666 "$R/wb/doc" &&
		restart_with "$HOLD" &&
		expect_eq "read through nache" "$(on 1 "cat $M/wb/doc")" v1 || return 1
	r0=$(up_ops REMOVE) m0=$(up_ops RENAME) o0=$(up_ops OPEN)
	on 1 "echo v2 > $M/wb/.doc.swp && mv $M/wb/.doc.swp $M/wb/doc && sync" &&
		expect_eq "REMOVE, RENAME, OPEN sent" \
			"$(($(up_ops REMOVE) - r0)) $(($(up_ops RENAME) - m0)) $(($(up_ops OPEN) - o0))" "0 0 0" &&
		expect_eq "client 2 reads the new version" "$(on 2 "cat $M/wb/doc")" v2 &&
		expect_eq "client 2 lists" "$(on 2 "ls -a $M/wb | grep doc")" doc &&
		expect_eq "the remote before the flush" "$(cat "$R/wb/doc")" v1 &&
		restart_with "$SOON" kill &&
		lab_wait_until 60 eval '[ "$(cat "$R/wb/doc" 2>/dev/null)" = v2 ]' ||
		{ echo "remote: $(cat "$R/wb/doc")" >&2; return 1; }
	expect_eq "the temporary name at the remote" "$(ls -a "$R/wb" | grep -c 'doc.swp')" 0 &&
		expect_eq "conflict copies" "$(ls "$R/wb" | grep -c 'doc.nache-conflict')" 0 &&
		expect_eq "client 1 after the restart" "$(on 1 "cat $M/wb/doc")" v2
}

# Renames of files the remote has: a log rotation (log -> log.1, a new
# log), a move into a subdirectory, a rename over another remote file,
# and a rename followed by a remove (the remote only ever hears of the
# remove). Nothing reaches the remote until the flush; a kill -9 before it
# loses none of it; then the remote has exactly the final names.
renames_of_remote_files_are_logged() {
	local m0 r0
	remote_quiet || return 1
	mkdir -p "$R/wb/mv/sub" && echo L >"$R/wb/mv/log" && echo A >"$R/wb/mv/a" &&
		echo B >"$R/wb/mv/b" && echo C >"$R/wb/mv/c" && echo D >"$R/wb/mv/d" &&
		chmod -R a+rwX "$R/wb/mv" && restart_with "$HOLD" || return 1
	m0=$(up_ops RENAME) r0=$(up_ops REMOVE)
	on 1 "cd $M/wb/mv && ls -l >/dev/null && mv log log.1 && echo L2 > log && mv a sub/a && mv b c && mv d d2 && rm d2 && sync" &&
		expect_eq "RENAMEs, REMOVEs sent" "$(($(up_ops RENAME) - m0)) $(($(up_ops REMOVE) - r0))" "0 0" &&
		expect_eq "client 2 lists" "$(on 2 "cd $M/wb/mv && ls | tr '\n' ' '; ls sub | tr '\n' ' '")" "c log log.1 sub a " &&
		expect_eq "client 2 reads" "$(on 2 "cd $M/wb/mv && cat log.1 log c sub/a | tr '\n' ' '")" "L L2 B A " &&
		expect_eq "the remote before the flush" "$(cd "$R/wb/mv" && find . -mindepth 1 | sort | sed 's,^\./,,' | tr '\n' ' ')" "a b c d log sub " &&
		restart_with "$SOON" kill &&
		lab_wait_until 60 eval '[ "$(cd "$R/wb/mv" && find . -mindepth 1 | sort | sed "s,^\./,," | tr "\n" " ")" = "c log log.1 sub sub/a " ]' ||
		{ echo "remote: $(cd "$R/wb/mv" && find . | tr '\n' ' ')" >&2; return 1; }
	expect_eq "the remote's contents" "$(cd "$R/wb/mv" && cat log.1 log c sub/a | tr '\n' ' ')" "L L2 B A "
}

removes_of_remote_files_are_logged() {
	local i r0
	remote_quiet || return 1
	mkdir -p "$R/wb/rm" && chmod 777 "$R/wb/rm" &&
		for i in $(seq 1 50); do echo "v$i" >"$R/wb/rm/f$i"; done
	restart_with "$HOLD" || return 1
	r0=$(up_ops REMOVE)
	on 1 "rm $M/wb/rm/f* && echo fresh > $M/wb/rm/f7 && sync" &&
		expect_eq "REMOVEs sent" $(($(up_ops REMOVE) - r0)) 0 &&
		expect_eq "removes logged" "$(metric nache_writeback_removes_total 'outcome="logged"')" 50 &&
		expect_eq "the remote still has them" "$(ls "$R/wb/rm" | wc -l)" 50 &&
		expect_eq "client 2 lists" "$(on 2 "ls $M/wb/rm")" f7 &&
		expect_eq "client 2 reads the new f7" "$(on 2 "cat $M/wb/rm/f7")" fresh &&
		expect_eq "an old name is gone" "$(on 2 "cat $M/wb/rm/f8 2>&1 >/dev/null | grep -c 'No such file'")" 1 ||
		return 1
	# Flushed: the remote loses the 50 names, then gets the new f7.
	restart_with "$SOON" &&
		lab_wait_until 60 eval '[ "$(ls "$R/wb/rm")" = f7 ] && [ "$(cat "$R/wb/rm/f7" 2>/dev/null)" = fresh ]' ||
		{ echo "remote: $(ls "$R/wb/rm" | tr '\n' ' ')" >&2; return 1; }
}

# rm -r of a tree the remote has (5 directories of 10 files): every
# remove is logged, directories included (each is empty here once its
# files are), and the flush sends the files' REMOVEs before their
# directory's.
tree_removed_as_one_log() {
	local d i r0
	remote_quiet || return 1
	for d in 1 2 3 4 5; do
		mkdir -p "$R/wb/tree/d$d" && for i in $(seq 1 10); do echo "$d-$i" >"$R/wb/tree/d$d/f$i"; done
	done
	chmod -R a+rwX "$R/wb/tree"
	restart_with "$HOLD" || return 1
	r0=$(up_ops REMOVE)
	on 1 "rm -r $M/wb/tree/d1 $M/wb/tree/d2 $M/wb/tree/d3 $M/wb/tree/d4 $M/wb/tree/d5 && sync" &&
		expect_eq "REMOVEs sent" $(($(up_ops REMOVE) - r0)) 0 &&
		expect_eq "client 2 lists" "$(on 2 "ls -A $M/wb/tree")" "" &&
		expect_eq "the remote still has them" "$(find "$R/wb/tree" -type f | wc -l)" 50 &&
		expect_eq "rmdir of a directory with entries here" \
			"$(on 2 "mkdir $M/wb/tree/n && touch $M/wb/tree/n/x && rmdir $M/wb/tree/n 2>&1 | grep -c 'not empty'")" 1 ||
		return 1
	restart_with "$SOON" &&
		lab_wait_until 60 eval '[ "$(ls -A "$R/wb/tree" 2>/dev/null)" = n ]' ||
		{ echo "remote: $(find "$R/wb/tree" | head -5 | tr '\n' ' ')" >&2; return 1; }
	# (The stopping nache flushed it: the directories left the remote, so
	# their files went first, or the remote would have refused.)
	expect_eq "directories left at the remote" "$(find "$R/wb/tree" -mindepth 1 -type d | tr '\n' ' ')" "$R/wb/tree/n "
}

# Renames of directories the remote has: a directory renamed in place,
# one moved under another, a directory moved out of a moved one, a file
# moved out of that into the first, the emptied directory removed, and
# a renamed empty directory removed (the remote hears only of its
# remove). Creates go into the moved directories at once. Nothing is sent
# until the flush; after a kill -9 the remote ends with exactly the tree
# the clients saw.
renames_of_remote_directories_are_logged() {
	local want m0
	remote_quiet || return 1
	mkdir -p "$R/wb/dm/a" "$R/wb/dm/b/c" "$R/wb/dm/p" "$R/wb/dm/e" &&
		echo X >"$R/wb/dm/a/x" && echo Y >"$R/wb/dm/a/y" && echo Z >"$R/wb/dm/b/c/z" &&
		chmod -R a+rwX "$R/wb/dm" && restart_with "$HOLD" || return 1
	m0=$(up_ops RENAME)
	want="a2 a2/new a2/sub a2/sub/s a2/x a2/y a2/z p p/b "
	on 1 "cd $M/wb/dm && ls -lR >/dev/null && mv a a2 && mv b p/b && echo N > a2/new && mv p/b/c c && mkdir a2/sub && echo S > a2/sub/s && mv c/z a2/z && rmdir c && mv e e2 && rmdir e2 && sync" &&
		expect_eq "RENAMEs sent" $(($(up_ops RENAME) - m0)) 0 &&
		expect_eq "renames logged" "$(metric nache_writeback_renames_total 'outcome="logged"')" 5 &&
		expect_eq "client 2 sees" "$(on 2 "cd $M/wb/dm && find . -mindepth 1 | sort | sed 's,^\./,,' | tr '\n' ' '")" "$want" &&
		expect_eq "client 2 reads" "$(on 2 "cd $M/wb/dm && cat a2/x a2/z a2/new a2/sub/s | tr '\n' ' '")" "X Z N S " &&
		expect_eq "the remote before the flush" "$(cd "$R/wb/dm" && find . -mindepth 1 | sort | sed 's,^\./,,' | tr '\n' ' ')" "a a/x a/y b b/c b/c/z e p " &&
		restart_with "$SOON" kill &&
		lab_wait_until 60 eval '[ "$(cd "$R/wb/dm" && find . -mindepth 1 | sort | sed "s,^\./,," | tr "\n" " ")" = "$want" ]' ||
		{ echo "remote: $(cd "$R/wb/dm" && find . | sort | tr '\n' ' ')" >&2; return 1; }
	expect_eq "the remote's contents" "$(cd "$R/wb/dm" && cat a2/x a2/y a2/z a2/new a2/sub/s | tr '\n' ' ')" "X Y Z N S " &&
		expect_eq "conflict copies" "$(find "$R/wb/dm" -name '*nache-conflict*' | wc -l)" 0
}

# Eight writers at once, each WRITE stable (O_DSYNC): every one is on
# nache's disk before it is answered, the calls writing while a flush of
# the store's log is under way share the next one (fewer flushes than
# durable writes: Store::Sync), and kill -9 right after loses none.
concurrent_writers_share_the_disks_flushes() {
	local d0 s0 d s i want got
	d0=$(metric nache_cache_store_durable_writes_total) &&
		s0=$(metric nache_cache_store_syncs_total) || return 1
	on 1 "mkdir -p $M/wb/par && for i in 1 2 3 4 5 6 7 8; do head -c 1048576 /dev/urandom > /tmp/par\$i; done; \
		pids=''; for i in 1 2 3 4 5 6 7 8; do dd if=/tmp/par\$i of=$M/wb/par/f\$i bs=4k oflag=dsync status=none & pids=\"\$pids \$!\"; done; \
		for p in \$pids; do wait \$p || exit 1; done" || { echo "a writer failed" >&2; return 1; }
	want=$(on 1 "cd /tmp && sha256sum par1 par2 par3 par4 par5 par6 par7 par8 | cut -d' ' -f1 | tr '\n' ' '")
	d=$(($(metric nache_cache_store_durable_writes_total) - d0))
	s=$(($(metric nache_cache_store_syncs_total) - s0))
	echo "durable writes $d, flushes of the log $s"
	at_least "durable writes (8 x 256 stable WRITEs)" "$d" 2048 &&
		at_least "writes per flush saved" $((d - s)) 1 &&
		restart_with "$SOON" kill || return 1
	for i in 1 2 3 4 5 6 7 8; do
		got+="$(lab_wait_until 60 eval '[ -s "$R/wb/par/f'$i'" ] && [ "$(stat -c %s "$R/wb/par/f'$i'")" = 1048576 ]' && sha_remote wb/par/f$i) "
	done
	expect_eq "the remote has every acknowledged byte" "$got" "$want"
}

check acknowledged_writes_stay_local_until_flushed acknowledged_writes_stay_local_until_flushed
check kill_9_loses_no_acknowledged_write kill_9_loses_no_acknowledged_write
check files_removed_before_their_flush_send_no_data removed_before_flush_sends_no_data
check truncate_drops_unflushed_data truncate_drops_unflushed_data
check attributes_set_after_writing_reach_the_remote_after_the_data attributes_follow_the_data
check creates_in_a_new_directory_need_no_lookup creates_in_a_new_directory_need_no_lookup
check local_renames_and_removes_send_only_the_final_state local_renames_and_removes
check an_extracted_tree_reaches_the_remote_with_modes_and_times extracted_tree_reaches_the_remote
check dirty_bound_holds_a_fast_writer dirty_bound_holds_a_fast_writer
check removes_of_remote_files_are_logged_and_sent_later removes_of_remote_files_are_logged
check a_file_rewritten_with_the_same_bytes_sends_no_data rewritten_unchanged_sends_no_data
check a_save_over_a_remote_file_is_logged_and_survives_kill_9 save_over_a_remote_file_is_logged
check rm_r_of_a_remote_tree_is_logged_directories_included tree_removed_as_one_log
check renames_of_remote_files_are_logged_and_survive_kill_9 renames_of_remote_files_are_logged
check renames_of_remote_directories_are_logged_and_survive_kill_9 renames_of_remote_directories_are_logged
check concurrent_writers_share_the_disks_flushes_and_survive_kill_9 concurrent_writers_share_the_disks_flushes
itest_finish
