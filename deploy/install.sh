#!/usr/bin/env bash
# Installs a built nache on this machine as a systemd service:
#   /usr/lib/nache/{bin,lib,ganesha}   the daemon, nachectl, nache-nsm
#                                      (NFSv3 lock reclaim), the library,
#                                      the FSALs (/usr/sbin/nachectl links
#                                      to nachectl)
#   /etc/nache/ganesha.conf            configuration (kept if present)
#   /var/cache/nache/                  persistent caches (Cache_Dir)
#   /var/lib/nache/recovery            NFSv4 client recovery records
#   /var/log/nache/                    ganesha.log (rotated by logrotate)
#   nache.service                      the unit
#   nache.conf(5), nachectl(8)         the man pages
# The same files and places as the Debian package (make deb), which is the
# other way to install (README).
# usage: make build && deploy/install.sh   (then edit the config and
#        systemctl enable --now nache)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
stage="${NACHE_STAGE:-$top/build/stage}"
prefix="${NACHE_PREFIX:-/usr/lib/nache}"

[ -x "$stage/bin/ganesha.nfsd" ] || { echo "install: $stage has no ganesha.nfsd; run make build first" >&2; exit 1; }
[ -f "$stage/lib/ganesha/libfsalnache.so" ] || { echo "install: libfsalnache.so not built" >&2; exit 1; }
[ -x "$stage/bin/nachectl" ] || { echo "install: nachectl not built" >&2; exit 1; }

bash "$top/deploy/install-deps.sh" --runtime-only
install -d "$prefix/bin" "$prefix/lib" "$prefix/ganesha"
install -m 0755 "$stage/bin/ganesha.nfsd" "$prefix/bin/ganesha.nfsd"
install -m 0755 "$stage/bin/nachectl" "$prefix/bin/nachectl"
install -m 0755 "$top/deploy/nache-nsm" "$prefix/bin/nache-nsm"
ln -sfn "$prefix/bin/nachectl" /usr/sbin/nachectl
cp -a "$stage"/lib/libganesha_nfsd.so* "$prefix/lib/"
install -m 0644 "$stage"/lib/ganesha/libfsal*.so "$prefix/ganesha/"
install -d /etc/nache
# The modes nache.service gives these (StateDirectoryMode= and the like):
# cached file data, client records and logs are root's only.
install -d -m 0700 /var/cache/nache /var/lib/nache /var/lib/nache/recovery
install -d -m 0750 /var/log/nache
if [ ! -e /etc/nache/ganesha.conf ]; then
  sed "s|Plugins_Dir = .*;|Plugins_Dir = $prefix/ganesha;|" \
    "$top/config/nache.conf" > /etc/nache/ganesha.conf
  echo "install: wrote /etc/nache/ganesha.conf: set Upstream_Server and Upstream_Path"
fi
install -d /usr/share/doc/nache /usr/share/man/man5 /usr/share/man/man8
install -m 0644 "$top/README.md" /usr/share/doc/nache/README.md
install -m 0644 "$top/config/README.md" /usr/share/doc/nache/configuration.md
install -m 0644 "$top/doc/man/nache.conf.5" /usr/share/man/man5/nache.conf.5
install -m 0644 "$top/doc/man/nachectl.8" /usr/share/man/man8/nachectl.8
install -D -m 0644 "$top/deploy/nache.logrotate" /etc/logrotate.d/nache
# The Grafana dashboard and the Prometheus alert rules (README, "Metrics").
install -m 0644 "$top/deploy/monitoring/nache-dashboard.json" \
	"$top/deploy/monitoring/nache-alerts.yml" /usr/share/doc/nache/
install -m 0644 "$top/deploy/nache.service" /etc/systemd/system/nache.service
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "install: done; start with: systemctl enable --now nache"
else
  echo "install: done (no systemd running here; unit installed for later)"
fi
