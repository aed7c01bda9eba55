#!/usr/bin/env bash
# delegations_test.sh with nache speaking NFSv4.0 to the remote
# (Upstream_Minor_Version = 0): NFSv4.1 is the default, and the NFSv4.0 path
# stays tested for remotes without it: upstream delegations, recalls, the
# NFSv4.0 callback service and reclaim after a remote restart.
export LAB_NACHE_MINOR=0
exec bash "$(dirname "$0")/delegations_test.sh"
