#!/usr/bin/env bash
# resilience_test.sh with nache speaking NFSv4.0 to the remote
# (Upstream_Minor_Version = 0): NFSv4.1 is the default, and the NFSv4.0
# path stays tested for remotes without it: restarts under open files,
# an upstream unreachable at start and in the middle of a run (SETCLIENTID
# and RENEW instead of a session).
export LAB_NACHE_MINOR=0
exec bash "$(dirname "$0")/resilience_test.sh"
