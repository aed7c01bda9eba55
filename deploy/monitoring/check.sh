#!/usr/bin/env bash
# Checks deploy/monitoring: the alert rules with promtool (Debian's
# prometheus package, deploy/install-deps.sh), the dashboard as JSON, and
# that both name only series nache serves (those proxy/metrics registers).
# Run by ctest as unit.monitoring. usage: deploy/monitoring/check.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

command -v promtool >/dev/null ||
	{ echo "check: promtool missing (deploy/install-deps.sh installs Debian's prometheus)" >&2; exit 1; }
promtool check rules "$here/nache-alerts.yml"

python3 - "$here/nache-dashboard.json" "$here/nache-alerts.yml" \
	"$top/proxy/metrics/metrics.cc" <<'PY'
import json, re, sys
dash_path, rules_path, metrics_cc = sys.argv[1:4]
dash = json.load(open(dash_path))
assert dash.get("panels"), "dashboard has no panels"
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
served = set(re.findall(r'\.Name\("(nache_[a-z_]+)"\)', open(metrics_cc).read()))
# Histograms are served as _bucket, _sum and _count series.
def known(name):
    return name in served or re.sub(r"_(bucket|sum|count)$", "", name) in served
used = set()
for text in exprs + [open(rules_path).read()]:
    used |= set(re.findall(r"\bnache_[a-z_]+", text))
# Words in prose (annotations) that are not series: the rule group's name.
used -= {"nache_"}
unknown = sorted(n for n in used if not known(n))
if unknown:
    sys.exit("series not served by nache: " + ", ".join(unknown))
print(f"dashboard: {len(dash['panels'])} panels, {len(exprs)} queries; "
      f"{len(used)} series names, all served")
PY
