#!/usr/bin/env bash
# Installs what nache needs to build, test and run on Debian 12, and fetches
# Debian's nfs-ganesha 4.3 source (for the FSAL headers and the daemon build)
# and Debian's Linux 6.12 kernel from bookworm-backports (for the lab's
# knfsd under qemu). Idempotent, and silent when nothing is missing.
# For the lab, it also builds Filebench (make bench's personalities) from
# its source tarball in ../shared/third_party beside the repository
# (NACHE_THIRD_PARTY names another directory) into .deps/filebench.
#
# usage: deploy/install-deps.sh [--runtime-only]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
deps_dir="$top/.deps"
ganesha_tarball="nfs-ganesha_4.3.orig.tar.gz"
ganesha_sha256=d4efd020edf4dfe65abfd0f0f66eb4390613360f99dce4354467ab297e0e1c0f
# Filebench at upstream commit 22620e6 (github.com/filebench/filebench),
# not packaged by Debian 12: a tarball of its source, checked by SHA-256.
# Where: NACHE_THIRD_PARTY, else shared/third_party beside the repository,
# else beside the repository a clean clone was made from (its origin, when
# that is a directory here).
third_party_dir=${NACHE_THIRD_PARTY:-$(dirname "$top")/shared/third_party}
if [ -z "${NACHE_THIRD_PARTY:-}" ] && [ ! -d "$third_party_dir" ]; then
  origin=$(git -C "$top" remote get-url origin 2>/dev/null || true)
  if [ -n "$origin" ] && [ -d "$origin" ] &&
    [ -d "$(dirname "$(cd "$origin" && pwd)")/shared/third_party" ]; then
    third_party_dir="$(dirname "$(cd "$origin" && pwd)")/shared/third_party"
  fi
fi
filebench_tarball="filebench-22620e6.tar.gz"
filebench_sha256=4eba4a1bf43ef4927a49d70f242648c28596f55e73eece5d5b9a3ad4605e021c

runtime_pkgs=(
  libnfs13 librocksdb7.8 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libntirpc4.3 libtirpc3 liburcu8 libkrb5-3 libacl1 libcap2 libblkid1
  libuuid1 libsqlite3-0 libnfsidmap1
  # NFSv3 clients (config/README.md): rpcbind, and rpc.statd and
  # sm-notify (nfs-common) for their locks. The lab runs them too.
  rpcbind nfs-common
)
build_pkgs=(
  build-essential cmake ninja-build pkg-config bison flex dpkg-dev
  libnfs-dev libnfs-utils librocksdb-dev prometheus-cpp-dev libntirpc-dev
  libtirpc-dev liburcu-dev libkrb5-dev libacl1-dev libcap-dev libblkid-dev
  uuid-dev libsqlite3-dev libnfsidmap-dev googletest libgtest-dev
  # make test's sanitizer build and the fuzz targets (clang 14, libFuzzer).
  clang libclang-rt-14-dev
  # make lint: shellcheck on every script, clang-format on C and C++.
  shellcheck clang-format
  # promtool checks deploy/monitoring's alert rules (ctest unit.monitoring);
  # the package's own server is never started (policy-rc.d below).
  prometheus
  # make deb and its check (ctest package.deb): dpkg-buildpackage with
  # debhelper, lintian, systemd-analyze (the unit's sandbox score).
  debhelper lintian systemd
  # The unit under real systemd (ctest package.systemd): a Debian 12 root
  # made by debootstrap, booted by systemd-nspawn.
  systemd-container debootstrap
)
lab_pkgs=(
  user-mode-linux kmod nfs-kernel-server iproute2 procps psmisc
  python3 coreutils util-linux bc bsdextrautils e2fsprogs
  python3-matplotlib
  # setfacl/getfacl inside the knfsd guest (its root is the host's):
  # POSIX ACLs at the remote (access_identity_test.sh).
  acl
  # nfs4_setfacl in the clients (the host's binaries): NFSv4 ACLs with
  # DENY entries set through a direct mount (access_identity_test.sh).
  nfs4-acl-tools
  # setfattr/getfattr in the clients: user xattrs over NFSv4.2 (nfs42_test.sh).
  attr
  # Workloads inside the clients (data_integrity_test.sh: verified I/O).
  fio
  # The lab's knfsd 6.12 under qemu (LAB_KNFSD_KERNEL=6.12, lab/README.md).
  qemu-system-x86 busybox-static cpio xz-utils
  # The lab's Kerberos realm (lab_krb5_start): MIT's KDC and kdb5_util
  # (krb5-kdc), kadmin.local (krb5-admin-server), kinit and kdestroy in
  # the clients (krb5-user). Their debconf questions take their defaults
  # (noninteractive, below); the KDC and kadmind never run on the host
  # (policy-rc.d), only the lab's KDC in a lab namespace, with its own
  # configuration (the packages' /etc/krb5.conf is not used).
  krb5-kdc krb5-admin-server krb5-user
  # The realm in LDAP (LAB_KRB5_S4U=1: constrained delegation, which MIT's
  # KDC decides from LDAP only): MIT's LDAP module and kdb5_ldap_util
  # (krb5-kdc-ldap), the lab's own slapd (slapd; preseeded below to make
  # no configuration of its own on the host, and never started there),
  # ldapadd and ldapmodify (ldap-utils).
  krb5-kdc-ldap slapd ldap-utils
  # Captures on the lab's LAN link (krb5_test.sh: nothing in clear under
  # krb5p).
  tcpdump
  # Filebench's build from its source (below; bison and flex are above).
  autoconf automake libtool
)

want=("${runtime_pkgs[@]}")
if [ "${1:-}" != "--runtime-only" ]; then
  want+=("${build_pkgs[@]}" "${lab_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # nfs-kernel-server is used only inside the lab's user-mode-linux guests;
  # keep its services from starting on the host (policy-rc.d is honoured by
  # Debian's maintainer scripts).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  # slapd: no directory of its own on the host (the lab runs its own,
  # configured in the lab's directory).
  echo 'slapd slapd/no_configuration boolean true' | debconf-set-selections
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--runtime-only" ] && exit 0

# Debian's nfs-ganesha source, pinned by SHA-256. Only the orig tarball is
# needed (the .debian.tar.xz is not used).
have_sum=""
[ -f "$deps_dir/$ganesha_tarball" ] && have_sum=$(sha256sum "$deps_dir/$ganesha_tarball" | cut -d' ' -f1)
if [ "$have_sum" != "$ganesha_sha256" ]; then
  echo "install-deps: fetching Debian's nfs-ganesha 4.3 source"
  mkdir -p "$deps_dir"
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    cat > /etc/apt/sources.list.d/nache-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -q >/dev/null
  fi
  tmp=$(mktemp -d)
  # apt-get source fails as a whole when the .debian.tar.xz is missing on the
  # mirror, but the orig tarball it downloaded first is all we need.
  (cd "$tmp" && apt-get source --download-only nfs-ganesha=4.3-2 >/dev/null 2>&1 || true)
  if [ ! -f "$tmp/$ganesha_tarball" ]; then
    echo "install-deps: could not download $ganesha_tarball from Debian's source archive" >&2
    rm -rf "$tmp"; exit 1
  fi
  got=$(sha256sum "$tmp/$ganesha_tarball" | cut -d' ' -f1)
  if [ "$got" != "$ganesha_sha256" ]; then
    echo "install-deps: $ganesha_tarball has SHA-256 $got, expected $ganesha_sha256" >&2
    rm -rf "$tmp"; exit 1
  fi
  mv "$tmp/$ganesha_tarball" "$deps_dir/"
  rm -rf "$tmp"
fi

# Linux 6.12 for the lab's qemu knfsd guest (LAB_KNFSD_KERNEL=6.12): the
# kernel image and its modules from bookworm-backports' linux-image-amd64,
# extracted (not installed) into .deps/linux-6.12 and indexed with depmod
# there. Fetched once; a kernel already extracted there is kept.
kernel_dir="$deps_dir/linux-6.12"
if ! ls "$kernel_dir"/lib/modules/*/modules.dep >/dev/null 2>&1; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "install-deps: adding Debian's bookworm-backports suite to apt's sources (its packages are never installed by default)"
    cat > /etc/apt/sources.list.d/nache-backports.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -q >/dev/null
  fi
  # The metapackage names the current 6.12 image package.
  kernel_pkg=$(apt-cache depends linux-image-amd64/bookworm-backports 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-6\.12\./ { print $2; exit }')
  if [ -z "$kernel_pkg" ]; then
    echo "install-deps: bookworm-backports' linux-image-amd64 does not name a linux-image-6.12.* package" >&2
    exit 1
  fi
  echo "install-deps: fetching $kernel_pkg (bookworm-backports, ~100 MB) into $kernel_dir"
  tmp=$(mktemp -d)
  # (The download runs as root: apt's sandbox user cannot write to $tmp.)
  if ! (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$kernel_pkg/bookworm-backports" >/dev/null); then
    echo "install-deps: could not download $kernel_pkg" >&2
    rm -rf "$tmp"; exit 1
  fi
  rm -rf "$kernel_dir.new"
  dpkg-deb -x "$tmp"/*.deb "$kernel_dir.new"
  rm -rf "$tmp"
  version=$(basename "$(ls -d "$kernel_dir.new"/lib/modules/*)")
  # Only the kernel and its modules are used (no firmware, docs).
  rm -rf "$kernel_dir.new/usr" "$kernel_dir.new/etc"
  depmod -b "$kernel_dir.new" "$version"
  rm -rf "$kernel_dir"
  mv "$kernel_dir.new" "$kernel_dir"
  echo "install-deps: Linux $version ready in $kernel_dir"
fi

# A Debian 12 root with systemd and the package's run-time dependencies
# (debian/control, and what shlibs finds), for tests/package/systemd_test.sh:
# it boots under systemd-nspawn with systemd as PID 1 and installs the .deb
# offline. Made once into .deps/bookworm-systemd (about 250 MB); the test
# boots a copy.
sd_root="$deps_dir/bookworm-systemd"
sd_pkgs=systemd,systemd-sysv,dbus,iproute2,procps,netbase,rpcbind,nfs-common
sd_pkgs+=,libacl1,libblkid1,libcap2,libgssapi-krb5-2,libkrb5-3,libnfs13
sd_pkgs+=,libnfsidmap1,libntirpc4.3,libprometheus-cpp-core1.0
sd_pkgs+=,libprometheus-cpp-pull1.0,librocksdb7.8,liburcu8,libuuid1
if [ ! -x "$sd_root/lib/systemd/systemd" ]; then
  echo "install-deps: debootstrapping a Debian 12 root with systemd into $sd_root"
  rm -rf "$sd_root.new"
  if ! debootstrap --variant=minbase --include="$sd_pkgs" bookworm "$sd_root.new" \
    http://deb.debian.org/debian >"$deps_dir/debootstrap.log" 2>&1; then
    echo "install-deps: debootstrap failed, see $deps_dir/debootstrap.log" >&2
    rm -rf "$sd_root.new"; exit 1
  fi
  # No downloaded packages kept in the copy each test run makes. The
  # installer's /etc/hosts, which debootstrap does not write (without it
  # "localhost" does not resolve: rpcinfo and Ganesha's statd client fail).
  rm -rf "$sd_root.new"/var/cache/apt/archives/*.deb
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    >"$sd_root.new/etc/hosts"
  rm -rf "$sd_root"
  mv "$sd_root.new" "$sd_root"
fi

# Filebench, the engine of make bench's personalities (bench/README.md),
# for the lab only (the appliance and the package never run it): built
# with autotools into .deps/filebench, whose bin/filebench the lab's guests
# see (they boot the host's root).  Built once; the stamp holds the
# tarball's SHA-256.  Without the tarball everything else still works and
# make bench refuses the personalities.
filebench_dir="$deps_dir/filebench"
if [ "$(cat "$filebench_dir/.sha256" 2>/dev/null)" != "$filebench_sha256" ]; then
  if [ ! -f "$third_party_dir/$filebench_tarball" ]; then
    echo "install-deps: no $third_party_dir/$filebench_tarball: Filebench not built;" \
      "make bench's personalities need it (NACHE_THIRD_PARTY: the directory holding it)" >&2
  else
    got=$(sha256sum "$third_party_dir/$filebench_tarball" | cut -d' ' -f1)
    if [ "$got" != "$filebench_sha256" ]; then
      echo "install-deps: $third_party_dir/$filebench_tarball has SHA-256 $got, expected $filebench_sha256" >&2
      exit 1
    fi
    echo "install-deps: building Filebench into $filebench_dir (about a minute)"
    src="$deps_dir/filebench-src"
    rm -rf "$src" "$filebench_dir"
    mkdir -p "$src"
    tar -xzf "$third_party_dir/$filebench_tarball" -C "$src" --strip-components=1
    if ! (cd "$src" && libtoolize && aclocal && autoheader &&
      automake --add-missing && autoconf &&
      ./configure --prefix="$filebench_dir" && make -j "$(nproc)" && make install) \
      >"$deps_dir/filebench-build.log" 2>&1; then
      echo "install-deps: Filebench's build failed, see $deps_dir/filebench-build.log" >&2
      rm -rf "$filebench_dir"; exit 1
    fi
    rm -rf "$src"
    echo "$filebench_sha256" >"$filebench_dir/.sha256"
  fi
fi

# user-mode-linux's modprobe looks in /lib/modules/<uml version>.
for d in /usr/lib/uml/modules/*; do
  [ -d "$d" ] || continue
  v=$(basename "$d")
  [ -e "/lib/modules/$v" ] || { mkdir -p /lib/modules && ln -s "$d" "/lib/modules/$v"; }
done
