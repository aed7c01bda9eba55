#!/usr/bin/env bash
# Crash loop (issue: write-back): a client writes, removes and renames
# files, moves them into a directory and renames that directory, through nache with write-back on a single-writer export while nache is
# killed with SIGKILL at random moments and restarted, 20 times (more on a
# slow machine, until the client has 50 files acknowledged); flushes run
# meanwhile (Flush_Age 2 s), so kills land in local writes, in creates and
# in flushes. The client journals, on its own disk, every change it was told
# succeeded (fsync of each file; rm; mv). After the last restart, once
# everything is flushed, the remote holds every acknowledged file with the
# acknowledged content, none that an acknowledged rm or mv took away, and
# no conflict copy.
#
# CRASH_REMOTE (vfs: Ganesha VFS on the host, the default; knfsd: Linux
# knfsd 6.1 in its guest; knfsd612: Linux 6.12 knfsd under qemu, reached
# over NFSv4.1, write-back only under the write delegations it grants)
# and CRASH_PROFILE (lan, wan) choose the remote and the link to it
# (crash_loop_knfsd_wan_test.sh runs knfsd over wan). CRASH_MIX=1 also
# rewrites files the client was told it wrote: appends, truncates (to a
# random size, to zero) and O_TRUNC rewrites, each checked against a copy
# the client keeps on its own disk.
set -uo pipefail
# The client's workload runs for the whole loop as one command.
: "${LAB_CMD_TIMEOUT:=900}"
export LAB_CMD_TIMEOUT
source "$(dirname "$0")/itest.sh"

ROUNDS=${CRASH_ROUNDS:-20}
# The loop must have had at least this many files acknowledged to prove
# anything (kills in enough writes, creates and flushes).
MIN_FILES=50
REMOTE=${CRASH_REMOTE:-vfs}
PROFILE=${CRASH_PROFILE:-lan}
MIX=${CRASH_MIX:-}
# nache's INFO and DEBUG lines (what write-back sent; every local write
# and every WRITE of a flush) for the post-mortem below (CRASH_LOG=INFO
# for less).
export LAB_NACHE_GLOBAL="LOG { COMPONENTS { FSAL = ${CRASH_LOG:-DEBUG}; } }"
WB='Write_Policy = "write_back"; Single_Writer = true; Flush_Age = 2;'
[ "$REMOTE" = knfsd612 ] &&
	WB='Upstream_Minor_Version = 1; Write_Policy = "write_back"; Flush_Age = 2;'
lab_init && lab_net_up "$PROFILE" || { echo "lab did not start"; exit 1; }
case $REMOTE in
vfs)
	lab_remote_vfs_start || { echo "remote did not start"; exit 1; }
	R=$LAB_REMOTE_EXPORT_DIR
	on_remote() { bash -c "$1"; }
	;;
knfsd | knfsd612)
	lab_remote_knfsd_start || { echo "remote did not start"; exit 1; }
	export LAB_NACHE_UPSTREAM=$LAB_KNFSD_ADDR LAB_NACHE_UPSTREAM_PATH=/
	R=$LAB_KNFSD_EXPORT_DIR
	on_remote() { lab_knfsd_run "$1"; }
	;;
*) echo "CRASH_REMOTE: vfs or knfsd, not '$REMOTE'"; exit 1 ;;
esac
lab_nache_start "$WB" && lab_clients_start 1 || { echo "lab did not start"; exit 1; }
M=/mnt/n
mount_nache 1 $M vers=4.1 || { echo "mount failed"; exit 1; }
on_remote "mkdir -p $R/cl && chmod 777 $R/cl" || { echo "no cl/ at the remote"; exit 1; }

# The workload: file w<i> of a random size up to 1 MiB, acknowledged when
# dd's fsync and close succeed; every 5th step removes an earlier file,
# every 7th renames one, every 11th moves one into the directory $D, every
# 13th renames that directory (with what it holds) to d<i>. "try" lines
# mark a change whose outcome the client may not have heard (nache died
# meanwhile): either outcome is then right. (A failed directory rename is
# settled by looking, past the client's dentry cache: the directory has
# one name as the client sees it. A run once kept the old name from a
# cached dentry after nache had made the rename and died, and the files
# went on under a new directory of the old name.)
#
# With CRASH_MIX, files the client was told it wrote are changed again
# (only while the journal's last word on them is an acknowledgement):
# every 3rd step appends to one, every 4th truncates one to a random size
# (every 8th to zero), every 6th rewrites one with O_TRUNC; the client
# applies the same change to its own copy (/tmp/shadow) and journals that
# copy's digest.
WORKLOAD='cd '$M'/cl || exit 1
J=/tmp/journal; : > $J; i=0; D=d0; MIX='$MIX'
S=/tmp/shadow; rm -rf $S; mkdir -p $S
acked() { awk -v n="$1" "{ for (k = 1; k <= NF; k++) if (\$k == n) last = \$0 }
	END { exit !(index(last, n \" \") == 1) }" $J; }
journal() { echo "$1 $(sha256sum < $S/$1 | cut -c1-64) $(stat -c %s $S/$1)" >> $J; }
while [ ! -e /tmp/stop ]; do
	i=$((i + 1))
	head -c $(( (RANDOM % 1024 + 1) * 1024 )) /dev/urandom > /tmp/blob
	echo "try w$i" >> $J
	if dd if=/tmp/blob of=w$i bs=64k conv=fsync status=none 2>/dev/null; then
		cp /tmp/blob $S/w$i && journal w$i
	fi
	rm -f $S/w$((i - 6))
	j=$((i - 2))
	if [ -n "$MIX" ] && [ $((i % 3)) = 0 ] && acked w$j; then
		head -c $(( (RANDOM % 64 + 1) * 1024 )) /dev/urandom > /tmp/more
		echo "try w$j" >> $J
		if dd if=/tmp/more of=w$j bs=64k oflag=append conv=notrunc,fsync status=none 2>/dev/null; then
			cat /tmp/more >> $S/w$j && journal w$j
		fi
	fi
	j=$((i - 1))
	if [ -n "$MIX" ] && [ $((i % 4)) = 0 ] && acked w$j; then
		size=$(( RANDOM % 1200 * 1024 + RANDOM % 1024 ))
		[ $((i % 8)) = 0 ] && size=0
		echo "try w$j" >> $J
		if truncate -s $size w$j 2>/dev/null; then
			truncate -s $size $S/w$j && journal w$j
		fi
	fi
	j=$((i - 4))
	if [ -n "$MIX" ] && [ $((i % 6)) = 0 ] && acked w$j; then
		head -c $(( (RANDOM % 512 + 1) * 1024 )) /dev/urandom > /tmp/blob
		echo "try w$j" >> $J
		if dd if=/tmp/blob of=w$j bs=64k conv=fsync status=none 2>/dev/null; then
			cp /tmp/blob $S/w$j && journal w$j
		fi
	fi
	j=$((i - 3))
	if [ $((i % 5)) = 0 ] && grep -q "^w$j " $J; then
		echo "try rm w$j" >> $J
		rm w$j 2>/dev/null && echo "rm w$j" >> $J
	fi
	j=$((i - 1))
	if [ $((i % 7)) = 0 ] && grep -q "^w$j " $J; then
		echo "try mv w$j r$j" >> $J
		mv w$j r$j 2>/dev/null && echo "mv w$j r$j" >> $J
	fi
	j=$((i - 2))
	if [ $((i % 11)) = 0 ] && grep -q "^w$j " $J && mkdir -p $D; then
		echo "try mv w$j $D/w$j" >> $J
		mv w$j $D/w$j 2>/dev/null && echo "mv w$j $D/w$j" >> $J
	fi
	if [ $((i % 13)) = 0 ] && [ -d $D ]; then
		echo "try mv $D d$i" >> $J
		# (Looked at afresh: a rename nache made before it died is not
		# one the retry finds to make, and the kernel would go on
		# trusting its dentry of the old name.)
		if mv $D d$i 2>/dev/null ||
			{ echo 2 >/proc/sys/vm/drop_caches; [ -d d$i ] && [ ! -e $D ]; }; then
			echo "mv $D d$i" >> $J
			D=d$i
		fi
	fi
done
echo "steps $i"'

# verify JOURNAL — the remote's cl/ against the journal (run where the
# remote's files are: the host, or the knfsd guest, which sees the lab
# directory); prints what is wrong, fails when anything is.
VERIFY=$LAB_DIR/verify.py
cat >"$VERIFY" <<'EOF'
import hashlib, os, sys
root, journal = sys.argv[1], sys.argv[2]
want = {}       # name -> (sha, size) it must have
unsure = set()  # names whose last change's outcome the client did not hear
pending = None
for line in open(journal):
    f = line.split()
    if not f:
        continue
    if f[0] == "try":
        pending = f[1:]
        if f[1] == "rm":
            unsure.add(f[2])
        elif f[1] == "mv":
            unsure.update(f[2:4])
        else:
            unsure.add(f[1])
    elif f[0] == "rm":
        want.pop(f[1], None)
        unsure.discard(f[1])
    elif f[0] == "mv":
        # A file, or a directory with the files in it.
        for name in [n for n in want if n == f[1] or n.startswith(f[1] + "/")]:
            want[f[2] + name[len(f[1]):]] = want.pop(name)
        unsure.discard(f[1]); unsure.discard(f[2])
    else:
        want[f[0]] = (f[1], int(f[2]) if len(f) > 2 else -1)
        unsure.discard(f[0])
bad = []
def is_unsure(name):
    return any(name == u or name.startswith(u + "/") for u in unsure)
def origin(name, data):
    # Whose bytes these are: the first 64 of each 4 KiB page looked for in
    # the other files at the remote (random data: a match is the source).
    found = []
    for off in range(0, min(len(data), 64 << 10), 4096):
        probe = data[off:off + 64]
        if len(probe) < 64 or probe == bytes(64):
            continue
        for d, _, files in os.walk(root):
            for n in files:
                other = os.path.relpath(os.path.join(d, n), root)
                if other == name:
                    continue
                at = open(os.path.join(d, n), "rb").read().find(probe)
                if at >= 0:
                    found.append(f"page {off // 4096} is {other} at {at}")
    return "; ".join(found[:8]) or "its pages are in no other file"
def zero_pages(data):
    return sum(data[o:o + 4096] == bytes(len(data[o:o + 4096]))
               for o in range(0, len(data), 4096))
for name, (sha, size) in want.items():
    p = os.path.join(root, name)
    if is_unsure(name):
        continue
    if not os.path.exists(p):
        bad.append(f"{name}: acknowledged, missing at the remote")
        continue
    data = open(p, "rb").read()
    if hashlib.sha256(data).hexdigest() != sha:
        # A copy beside this script (in the lab's directory) for the
        # post-mortem.
        keep = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])),
                            "wrong", name)
        os.makedirs(os.path.dirname(keep), exist_ok=True)
        open(keep, "wb").write(data)
        # (What differs, for the post-mortem: the client's data is random,
        # so pages of zeros are bytes that never arrived.)
        bad.append(f"{name}: content differs from the acknowledged one "
                   f"({len(data)} bytes at the remote, {size} acknowledged; "
                   f"{zero_pages(data)} of its 4 KiB pages are zeros; "
                   f"{origin(name, data)})")
present = set()
for d, dirs, files in os.walk(root):
    for n in dirs + files:
        present.add(os.path.relpath(os.path.join(d, n), root))
gone = {l.split()[1] for l in open(journal) if l.startswith("rm ")}
gone |= {l.split()[1] for l in open(journal) if l.startswith("mv ")}
for name in sorted(n for n in (gone & present) - set(want) if not is_unsure(n)):
    bad.append(f"{name}: removed or renamed (acknowledged), still at the remote")
# Our own flush cut off by a kill is no conflict with ourselves.
for name in sorted(n for n in present if ".nache-conflict-" in n):
    bad.append(f"{name}: a conflict copy (nothing else wrote the remote)")
# Nor can a file have been lost at it.
lost_found = os.path.join(os.path.dirname(root.rstrip("/")), "nache-lost+found")
lost = [n for n in present if ".nache-lost-" in n]
if os.path.isdir(lost_found):
    lost += ["../nache-lost+found/" + n for n in os.listdir(lost_found)]
for name in sorted(lost):
    bad.append(f"{name}: saved as lost (nothing else removed anything)")
moved = sum("/" in n for n in want)
print(f"{len(want)} acknowledged files ({moved} in a renamed directory), "
      f"{len(bad)} wrong", file=sys.stderr)
for b in bad[:20]:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
verify() { on_remote "python3 $VERIFY $R/cl $1"; }

# acknowledged — files the client has been told it wrote so far.
acknowledged() { on 1 "grep -c '^w[0-9]* ' /tmp/journal 2>/dev/null || true"; }

crash_loop_loses_no_acknowledged_change() {
	local r=0 pid kills=0
	on 1 "rm -f /tmp/stop; $WORKLOAD" >"$LAB_DIR/workload.out" 2>&1 &
	pid=$!
	# ROUNDS kills, and more (up to three times as many) until the client
	# has had at least MIN_FILES files acknowledged: a busy machine makes
	# the workload slower, not the loop prove less.
	while [ "$r" -lt "$ROUNDS" ] ||
		{ [ "$r" -lt $((ROUNDS * 3)) ] && [ "$(acknowledged)" -lt "$MIN_FILES" ]; }; do
		r=$((r + 1))
		# A random moment: 0.5 to 3 s into the round.
		sleep "$((RANDOM % 6 + 1)).$((RANDOM % 10))" # the crash's timing, not a wait for a condition
		lab_nache_kill && kills=$((kills + 1)) || return 1
		cat "$(lab_nache_log)" >>"$LAB_DIR/nache-history.log"
		lab_nache_start "$WB" || { echo "restart $r failed" >&2; return 1; }
	done
	on 1 "touch /tmp/stop" && wait "$pid" ||
		{ echo "workload: $(cat "$LAB_DIR/workload.out")" >&2; return 1; }
	echo "$(cat "$LAB_DIR/workload.out"), $kills kills ($REMOTE remote, $PROFILE${MIX:+, with rewrites})" >&2
	on 1 "cat /tmp/journal" >"$LAB_DIR/journal" || return 1
	at_least "acknowledged files" "$(grep -c '^w[0-9]* ' "$LAB_DIR/journal")" "$MIN_FILES" &&
		lab_wait_until 180 verify "$LAB_DIR/journal" || {
		verify "$LAB_DIR/journal" 2>"$LAB_DIR/verify.out"
		cat "$LAB_DIR/verify.out" >&2
		# What nache said about write-back in every run, for the post-mortem.
		cat "$(lab_nache_log)" >>"$LAB_DIR/nache-history.log"
		local h="$LAB_DIR/nache-history.log.short"
		grep -E 'NACHE_|ganesha.nfsd-[0-9]+\[main\] nfs_start' \
			"$LAB_DIR/nache-history.log" | grep -vE 'I/O sizes|NACHE_UPSTREAM' |
			sed -E 's/^.*(ganesha.nfsd-[0-9]+).*nache_log_to_ganesha :FSAL :/\1 /' >"$h"
		grep -v ' DEBUG :' "$h" | tail -150 >&2
		# Everything said of each wrong file's key (its writes and flushes
		# at DEBUG): the names' keys from the creates and renames sent.
		local name key
		for name in $(sed -n 's/^\([^ :]*\): .*/\1/p' "$LAB_DIR/verify.out"); do
			for key in $(grep -oE " ${name##*/} (\(key [0-9]+\)|in [0-9]+ to [^ ]+ in [0-9]+ \(key [0-9]+\))" "$h" |
				grep -oE '[0-9]+\)$' | tr -d ')' | sort -u); do
				echo "--- what nache said of ${name##*/} (key $key):" >&2
				grep -wE "$key" "$h" | head -300 >&2
			done
		done
		echo "--- the client's journal (last 80 lines):" >&2
		tail -80 "$LAB_DIR/journal" >&2
		return 1
	}
}

check crash_loop_loses_no_acknowledged_change crash_loop_loses_no_acknowledged_change
itest_finish
