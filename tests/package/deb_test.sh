#!/usr/bin/env bash
# The Debian package (make deb, debian/): it builds from this tree with the
# version of CMakeLists.txt; it holds the files debian/rules installs and
# nothing of the lab; lintian reports no error or warning; its unit keeps
# systemd-analyze's exposure low. Then it is installed with apt on a
# copy-on-write view of this machine (an overlay over /, in a mount
# namespace of its own: the machine itself is not changed) and the
# installed nache is run as its unit would run it: the command line of
# ExecStart=, only CAP_NET_BIND_SERVICE and no new privileges, a read-only
# root but for the unit's state, cache, log and run directories. It must
# serve nachectl there; a reinstall keeps the admin's configuration; a
# purge removes what the package made.
#
# Run by ctest as package.deb (label package), as root.
# usage: tests/package/deb_test.sh   (NACHE_BUILD_DIR: the build tree)
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${NACHE_BUILD_DIR:-$top/build}" && pwd)
name=$(basename "$0" .sh)
version=$(sed -n 's/^project(nache VERSION \([0-9.]*\) .*/\1/p' "$top/CMakeLists.txt")
deb=$build/nache_${version}_amd64.deb
changes=$build/nache_${version}_amd64.changes

pass=0
fail=0
results=()
# check NAME CMD... — runs CMD, records NAME as passed when it exits 0.
check() {
	local what=$1 rc=0
	shift
	echo "=== $name: $what" >&2
	"$@" || rc=$?
	if [ $rc = 0 ]; then
		pass=$((pass + 1))
		results+=("PASS $what")
	else
		fail=$((fail + 1))
		results+=("FAIL $what (exit $rc)")
		echo "--- $name: $what FAILED (exit $rc)" >&2
	fi
}
# expect_eq WHAT GOT WANT
expect_eq() {
	[ "$2" = "$3" ] && return 0
	echo "$1: got '$2', expected '$3'" >&2
	return 1
}

[ "$(id -u)" = 0 ] || { echo "$name: needs root (mount namespaces)" >&2; exit 1; }
[ -n "$version" ] || { echo "$name: no project(nache VERSION ...) in CMakeLists.txt" >&2; exit 1; }

scratch=$(mktemp -d /tmp/nache-deb-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# ---------------------------------------------------------------- the build

make_deb_builds_the_package() {
	rm -f "$deb" "$changes"
	# Not the jobserver of a make that runs ctest.
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		make -C "$top" deb BUILD="$build" >"$scratch/make-deb.log" 2>&1 ||
		{ tail -n 40 "$scratch/make-deb.log" >&2; return 1; }
	[ -f "$deb" ] || { echo "no $deb" >&2; return 1; }
	expect_eq "Package" "$(dpkg-deb -f "$deb" Package)" nache &&
		expect_eq "Version" "$(dpkg-deb -f "$deb" Version)" "$version"
}

# Every file the package ships, and nothing else (the stage's VFS and
# PROXY_V4 plugins stay out).
it_holds_the_expected_files() {
	local want got
	want=$(sort <<-'EOF'
		./etc/logrotate.d/nache
		./etc/nache/ganesha.conf
		./lib/systemd/system/nache.service
		./usr/lib/nache/bin/ganesha.nfsd
		./usr/lib/nache/bin/nache-nsm
		./usr/lib/nache/bin/nachectl
		./usr/lib/nache/ganesha/libfsalnache.so
		./usr/lib/nache/lib/libganesha_nfsd.so.4.3
		./usr/sbin/nachectl -> ../lib/nache/bin/nachectl
		./usr/share/doc/nache/README.md
		./usr/share/doc/nache/changelog.gz
		./usr/share/doc/nache/configuration.md
		./usr/share/doc/nache/copyright
		./usr/share/doc/nache/nache-alerts.yml
		./usr/share/doc/nache/nache-dashboard.json
		./usr/share/lintian/overrides/nache
		./usr/share/man/man5/nache.conf.5.gz
		./usr/share/man/man8/nachectl.8.gz
	EOF
	)
	got=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }' | sort)
	[ "$got" = "$want" ] && return 0
	diff <(echo "$want") <(echo "$got") >&2
	return 1
}

its_control_fields_name_what_it_needs() {
	local depends conffiles
	depends=$(dpkg-deb -f "$deb" Depends)
	conffiles=$(dpkg-deb -I "$deb" conffiles | sort | tr '\n' ' ')
	expect_eq "conffiles" "$conffiles" "/etc/logrotate.d/nache /etc/nache/ganesha.conf " || return 1
	# The libraries the daemon and the plugin link (shlibs), and none of
	# Debian's Ganesha (ours is inside); rpcbind and nfs-common for NFSv3
	# (registration, NLM's statd).
	local lib
	for lib in libnfs13 librocksdb7.8 libntirpc4.3 libnfsidmap1 libprometheus-cpp-pull1.0 rpcbind nfs-common; do
		grep -q "\b$lib\b" <<<"$depends" || { echo "Depends lacks $lib: $depends" >&2; return 1; }
	done
	! grep -Eq "nfs-ganesha" <<<"$depends" ||
		{ echo "Depends names Debian's Ganesha: $depends" >&2; return 1; }
}

lintian_reports_no_error_or_warning() {
	lintian --fail-on error,warning "$changes" 2>&1 | grep -v "running with root privileges" >&2
	[ "${PIPESTATUS[0]}" = 0 ]
}

# deploy/nache.service measured 9.6 before its sandbox, 1.9 with it.
the_unit_keeps_its_sandbox() {
	dpkg-deb -x "$deb" "$scratch/x" || return 1
	systemd-analyze security --offline=yes --threshold=25 \
		"$scratch/x/lib/systemd/system/nache.service" >"$scratch/security.txt" 2>&1 ||
		{ tail -n 3 "$scratch/security.txt" >&2; return 1; }
	tail -n 1 "$scratch/security.txt" >&2
}

# The daemon loads the package's own library, wherever it is unpacked.
the_daemon_finds_its_library_beside_it() {
	local runpath
	runpath=$(readelf -d "$scratch/x/usr/lib/nache/bin/ganesha.nfsd" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
	# shellcheck disable=SC2016 # the literal $ORIGIN
	expect_eq "RUNPATH" "$runpath" '$ORIGIN/../lib' || return 1
	local libs
	libs=$(env -u LD_LIBRARY_PATH ldd "$scratch/x/usr/lib/nache/bin/ganesha.nfsd")
	grep -q "libganesha_nfsd.so.4.3 => $scratch/x/usr/lib/nache/bin/../lib/" <<<"$libs" ||
		{ echo "$libs" >&2; return 1; }
	"$scratch/x/usr/lib/nache/bin/ganesha.nfsd" -v | grep -q "NFS-Ganesha Release = V4.3"
}

the_man_pages_render_without_warnings() {
	local page out
	for page in man5/nache.conf.5.gz man8/nachectl.8.gz; do
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z \
			"$scratch/x/usr/share/man/$page" 2>&1 >/dev/null)
		[ -z "$out" ] || { echo "$page: $out" >&2; return 1; }
	done
}

check make_deb_builds_the_package make_deb_builds_the_package
if [ -f "$deb" ]; then
	check it_holds_the_expected_files it_holds_the_expected_files
	check its_control_fields_name_what_it_needs its_control_fields_name_what_it_needs
	check lintian_reports_no_error_or_warning lintian_reports_no_error_or_warning
	check the_unit_keeps_its_sandbox the_unit_keeps_its_sandbox
	check the_daemon_finds_its_library_beside_it the_daemon_finds_its_library_beside_it
	check the_man_pages_render_without_warnings the_man_pages_render_without_warnings
fi

# ------------------------------------------------- installed, in an overlay

# The script run in the mount namespace: $1 the scratch directory, $2 the
# package. Prints "CHECK <name> <ok|failed>" per check, details on stderr.
# shellcheck disable=SC2016
in_overlay='
set -u
s=$1 deb=$2 labtool=$3
r=$s/root
mkdir -p "$s/ov" && mount -t tmpfs tmpfs "$s/ov" &&
	mkdir "$s/ov/upper" "$s/ov/work" "$r" &&
	mount -t overlay overlay -o "lowerdir=/,upperdir=$s/ov/upper,workdir=$s/ov/work" "$r" &&
	mount --rbind /dev "$r/dev" && mount -t proc proc "$r/proc" &&
	mount -t tmpfs tmpfs "$r/run" && mount -t tmpfs tmpfs "$r/tmp" || exit 1
cp "$deb" "$r/tmp/"
in_root() { chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }
result() { if [ "$2" = 0 ]; then echo "CHECK $1 ok"; else echo "CHECK $1 failed"; fi; }

# What this machine may have of nache (deploy/install.sh, the package) is
# gone from the copy first, so that apt installs it afresh.
in_root sh -c "dpkg --purge nache >/dev/null 2>&1; rm -rf /etc/nache /usr/lib/nache /usr/sbin/nachectl /var/lib/nache /var/cache/nache /var/log/nache /etc/systemd/system/nache.service"
in_root apt-get install -y -q "/tmp/$(basename "$deb")" >"$s/apt.log" 2>&1
rc=$?; [ $rc = 0 ] || tail -n 20 "$s/apt.log" >&2
result apt_installs_it $rc

modes=$(in_root stat -c "%n %a %U" /var/lib/nache /var/lib/nache/recovery /var/cache/nache /var/log/nache | tr "\n" ";")
want="/var/lib/nache 700 root;/var/lib/nache/recovery 700 root;/var/cache/nache 700 root;/var/log/nache 750 root;"
[ "$modes" = "$want" ] || echo "modes: $modes, expected $want" >&2
result postinst_makes_the_state_directories_private "$([ "$modes" = "$want" ]; echo $?)"

rc=0; [ ! -e "$r/etc/systemd/system/multi-user.target.wants/nache.service" ] || rc=1
result it_is_not_enabled_at_install $rc

rc=0; in_root systemd-analyze verify /lib/systemd/system/nache.service >"$s/verify.log" 2>&1 || rc=$?
[ -s "$s/verify.log" ] && { cat "$s/verify.log" >&2; rc=1; }
result systemd_analyze_verifies_the_installed_unit $rc

rc=0; in_root /usr/sbin/nachectl status >/dev/null 2>"$s/nachectl.err" || rc=$?
ok=1; [ $rc = 3 ] && grep -q "/run/nache/nache.sock" "$s/nachectl.err" && ok=0
[ $ok = 0 ] || { echo "nachectl exit $rc: $(cat "$s/nachectl.err")" >&2; }
result nachectl_without_a_daemon_exits_3_naming_the_socket $ok

# The shipped configuration, pointed at an upstream that does not answer
# (port 9 of the loopback of a network namespace of its own), with no
# wait for it at start and calls to it given up after a second (Ganesha
# asks for the root of the export before it serves, and handles signals only
# once it serves).
sed -i -e "s/Upstream_Server = .*;/Upstream_Server = 127.0.0.1;/" \
	-e "s/Upstream_Port = .*;/Upstream_Port = 9;/" \
	-e "s/Connections = 4;/Connections = 4; Startup_Wait = 0; Upstream_Timeout = 1000;/" \
	"$r/etc/nache/ganesha.conf"
exec_start=$(sed -n "s/^ExecStart=//p" "$r/lib/systemd/system/nache.service")
caps=$(sed -n "s/^CapabilityBoundingSet=//p" "$r/lib/systemd/system/nache.service" |
	tr "[:upper:]" "[:lower:]" | sed "s/cap_//g; s/ /,+/g")
mkdir -p "$r/run/nache"
# As the unit runs it, in mount and network namespaces of its own: the
# root read-only but for the directories the unit makes writable
# (ProtectSystem=strict), the capability bound and no new privileges.
unshare -m --propagation private -n sh -c "
	for d in /var/lib/nache /var/cache/nache /var/log/nache /run/nache; do
		mount --bind $r\$d $r\$d || exit 1
	done
	mount -o remount,bind,ro $r && mount -o remount,bind,ro $r/run &&
		ip link set lo up || exit 1
	# The box runs rpcbind (the package depends on it): Ganesha registers
	# NFS, MOUNT and NLM there and will not serve NFSv3 without it. Here a
	# stub that accepts registrations, on the loopback of this namespace.
	python3 $labtool rpcbind-stub & echo \$! >$s/rpcbind.pid
	python3 $labtool wait-rpc 127.0.0.1 --port 111 --prog 100000 --vers 2 \
		--timeout 20 || exit 1
	exec chroot $r setpriv --bounding-set=-all,+$caps --no-new-privs $exec_start
" >"$s/daemon.out" 2>&1 &
daemon=$!
# Until its export is up (the admin socket comes a moment before it).
rc=1
for _ in $(seq 1 300); do
	kill -0 $daemon 2>/dev/null || break
	if [ -S "$r/run/nache/nache.sock" ] &&
		in_root /usr/sbin/nachectl status --json >"$s/status.json" 2>"$s/status.err" &&
		grep -q "\"export_id\": 1" "$s/status.json"; then
		rc=0
		break
	fi
	sleep 0.1
done
if [ $rc = 0 ]; then
	python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))
e = s[\"exports\"][0]
assert e[\"upstream\"][\"server\"] == \"127.0.0.1\" and e[\"upstream\"][\"port\"] == 9, e
assert e[\"upstream\"][\"connected\"] is False, e
" "$s/status.json" || rc=1
fi
if [ $rc != 0 ]; then
	cat "$s/status.json" "$s/status.err" "$s/daemon.out" >&2
	tail -n 30 "$r/var/log/nache/ganesha.log" >&2
fi
result the_installed_daemon_serves_nachectl_in_the_units_sandbox $rc
rc=1
for _ in $(seq 1 300); do
	grep -q "NFS SERVER INITIALIZED" "$r/var/log/nache/ganesha.log" && { rc=0; break; }
	kill -0 $daemon 2>/dev/null || break
	sleep 0.1
done
[ $rc = 0 ] || tail -n 20 "$r/var/log/nache/ganesha.log" >&2
result it_serves_nfs_in_the_units_sandbox $rc
grep -q "currently set capabilities are: cap_net_bind_service=ep" "$r/var/log/nache/ganesha.log"
rc=$?; [ $rc = 0 ] || grep -i "capabilit" "$r/var/log/nache/ganesha.log" >&2
result it_runs_with_cap_net_bind_service_only $rc
kill -TERM $daemon 2>/dev/null
for _ in $(seq 1 300); do kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
rc=0; kill -0 $daemon 2>/dev/null && { kill -KILL $daemon; rc=1; }
wait $daemon 2>/dev/null
[ $rc = 0 ] || { echo "still running 30 s after SIGTERM" >&2; tail -n 20 "$r/var/log/nache/ganesha.log" >&2; }
result it_stops_on_sigterm_within_30_s $rc
kill "$(cat $s/rpcbind.pid)" 2>/dev/null

# An admin edit of the configuration survives a reinstall.
echo "# edited by the admin" >>"$r/etc/nache/ganesha.conf"
in_root apt-get install -y -q --reinstall "/tmp/$(basename "$deb")" >"$s/apt2.log" 2>&1
rc=$?; [ $rc = 0 ] || tail -n 20 "$s/apt2.log" >&2
tail -n 1 "$r/etc/nache/ganesha.conf" | grep -q "edited by the admin" || rc=1
result a_reinstall_keeps_the_edited_configuration $rc

in_root dpkg --purge nache >"$s/purge.log" 2>&1
rc=$?; [ $rc = 0 ] || cat "$s/purge.log" >&2
left=$(cd "$r" && ls -d etc/nache usr/lib/nache usr/sbin/nachectl var/lib/nache var/cache/nache var/log/nache lib/systemd/system/nache.service 2>/dev/null)
[ -z "$left" ] || { echo "left after purge: $left" >&2; rc=1; }
result purge_removes_what_the_package_made $rc
'

if [ -f "$deb" ]; then
	unshare -m --propagation private bash -c "$in_overlay" overlay "$scratch" "$deb" \
		"$top/lab/labtool.py" \
		>"$scratch/overlay.out" 2>"$scratch/overlay.err"
	# Each CHECK line is a check of this test; none at all is a failure.
	grep -q "^CHECK " "$scratch/overlay.out" || { cat "$scratch/overlay.err" >&2; fail=$((fail + 1)); results+=("FAIL the overlay install ran no check"); }
	while read -r _ what outcome; do
		if [ "$outcome" = ok ]; then
			pass=$((pass + 1))
			results+=("PASS $what")
		else
			fail=$((fail + 1))
			results+=("FAIL $what")
		fi
	done < <(grep "^CHECK " "$scratch/overlay.out")
	[ $fail = 0 ] || cat "$scratch/overlay.err" >&2
fi

echo >&2
for r in "${results[@]}"; do echo "$name: $r"; done
echo "$name: $pass passed, $fail failed"
[ $fail = 0 ] && [ $pass -gt 0 ]
