#!/usr/bin/env bash
# knfsd_remote_test.sh with nache speaking NFSv4.0 to the remote
# (Upstream_Minor_Version = 0): NFSv4.1 is the default, and the NFSv4.0 path
# stays tested for remotes without it: forwarding against Linux knfsd.
export LAB_NACHE_MINOR=0
exec bash "$(dirname "$0")/knfsd_remote_test.sh"
