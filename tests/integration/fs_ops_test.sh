#!/usr/bin/env bash
# Real Linux NFSv4.1 client -> nache -> Ganesha VFS remote: every kind of
# file system operation, checked both in the client and in the remote's
# exported directory (the bytes and metadata the server really holds).
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_up lan 1 || { echo "lab did not start"; exit 1; }
R=$LAB_REMOTE_EXPORT_DIR
M=/mnt/n
mount_nache 1 $M vers=4.1 || { echo "mount failed"; exit 1; }

create_write_read() {
	on 1 "mkdir -p $M/d && printf 'hello nache\n' > $M/d/f && cat $M/d/f" >"$LAB_DIR/out" &&
		expect_eq "client read" "$(cat "$LAB_DIR/out")" "hello nache" &&
		expect_eq "server bytes" "$(cat $R/d/f)" "hello nache"
}

append() {
	on 1 "printf 'more\n' >> $M/d/f" &&
		expect_eq "server bytes" "$(cat $R/d/f)" "$(printf 'hello nache\nmore')"
}

truncate_shrink_and_grow() {
	on 1 "truncate -s 5 $M/d/f" && expect_eq size "$(stat -c %s $R/d/f)" 5 &&
		expect_eq bytes "$(cat $R/d/f)" hello &&
		on 1 "truncate -s 100000 $M/d/f" && expect_eq size "$(stat -c %s $R/d/f)" 100000 &&
		expect_eq "client size" "$(on 1 "stat -c %s $M/d/f")" 100000
}

rename_within_and_across() {
	on 1 "mkdir -p $M/a $M/b && echo x > $M/a/one && mv $M/a/one $M/a/two && mv $M/a/two $M/b/three" &&
		[ ! -e $R/a/one ] && [ ! -e $R/a/two ] && expect_eq bytes "$(cat $R/b/three)" x &&
		expect_eq "client" "$(on 1 "cat $M/b/three; ls $M/a | wc -l")" "$(printf 'x\n0')"
}

rename_over_existing() {
	on 1 "echo new > $M/b/src && echo old > $M/b/dst && mv -f $M/b/src $M/b/dst && cat $M/b/dst" >"$LAB_DIR/out" &&
		expect_eq client "$(cat "$LAB_DIR/out")" new && expect_eq server "$(cat $R/b/dst)" new && [ ! -e $R/b/src ]
}

unlink_file() {
	on 1 "echo gone > $M/b/tmp && rm $M/b/tmp && ! test -e $M/b/tmp" && [ ! -e $R/b/tmp ]
}

mkdir_rmdir() {
	on 1 "mkdir -p $M/x/y/z && rmdir $M/x/y/z && test -d $M/x/y" && [ -d $R/x/y ] && [ ! -e $R/x/y/z ] &&
		on 1 "touch $M/x/y/f; ! rmdir $M/x/y 2>/dev/null" && [ -d $R/x/y ]
}

symlink_readlink() {
	on 1 "ln -s ../d/f $M/b/link && readlink $M/b/link" >"$LAB_DIR/out" &&
		expect_eq client "$(cat "$LAB_DIR/out")" ../d/f && expect_eq server "$(readlink $R/b/link)" ../d/f &&
		expect_eq "through link" "$(on 1 "head -c 5 $M/b/link")" hello
}

hard_links() {
	on 1 "echo linked > $M/d/h1 && ln $M/d/h1 $M/b/h2 && stat -c '%h %i' $M/d/h1 $M/b/h2" >"$LAB_DIR/out" &&
		expect_eq "client nlink/inode" "$(sort -u "$LAB_DIR/out" | wc -l)" 1 &&
		expect_eq "client nlink" "$(head -1 "$LAB_DIR/out" | cut -d' ' -f1)" 2 &&
		expect_eq "server nlink" "$(stat -c %h $R/d/h1)" 2 &&
		expect_eq "server same inode" "$(stat -c %i $R/d/h1)" "$(stat -c %i $R/b/h2)"
}

chmod_chown_utimes() {
	on 1 "echo m > $M/d/meta && chmod 640 $M/d/meta && chown 1234:5678 $M/d/meta && touch -m -d '2001-02-03 04:05:06 UTC' $M/d/meta" &&
		expect_eq mode "$(stat -c %a $R/d/meta)" 640 &&
		expect_eq owner "$(stat -c %u:%g $R/d/meta)" 1234:5678 &&
		expect_eq mtime "$(TZ=UTC stat -c %y $R/d/meta | cut -c1-19)" "2001-02-03 04:05:06" &&
		expect_eq "client view" "$(on 1 "stat -c '%a %u %g' $M/d/meta")" "640 1234 5678"
}

large_directory_listed_completely() {
	mkdir -p $R/big
	(cd $R/big && seq -f 'entry-%05g' 1 10000 | xargs touch)
	on 1 "ls -f $M/big | grep -c '^entry-'" >"$LAB_DIR/out" &&
		expect_eq entries "$(cat "$LAB_DIR/out")" 10000 &&
		expect_eq "same names" "$(on 1 "ls $M/big | md5sum")" "$(ls $R/big | md5sum)"
}

file_256mib_round_trip() {
	local src=$LAB_DIR/data/big.bin sum
	mkdir -p "$LAB_DIR/data"
	head -c $((256 << 20)) /dev/urandom >"$src"
	sum=$(sha256sum <"$src" | cut -d' ' -f1)
	on 1 "cp $src $M/big.bin && sync" &&
		expect_eq "server sha256" "$(sha256sum <$R/big.bin | cut -d' ' -f1)" "$sum" &&
		on 1 "umount $M && mount -t nfs4 -o vers=4.1 $LAB_NACHE_ADDR:/export $M" &&
		expect_eq "read-back sha256" "$(on 1 "sha256sum < $M/big.bin | cut -d' ' -f1")" "$sum"
}

check create_write_read create_write_read
check append append
check truncate_shrink_and_grow truncate_shrink_and_grow
check rename_within_and_across_directories rename_within_and_across
check rename_over_existing_file rename_over_existing
check unlink unlink_file
check mkdir_rmdir mkdir_rmdir
check symlink_readlink symlink_readlink
check hard_links hard_links
check chmod_chown_utimes chmod_chown_utimes
check directory_of_10000_entries_listed_completely large_directory_listed_completely
check file_of_256MiB_written_and_read_back file_256mib_round_trip
itest_finish
