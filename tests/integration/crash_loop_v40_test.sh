#!/usr/bin/env bash
# crash_loop_test.sh with nache speaking NFSv4.0 to the remote
# (Upstream_Minor_Version = 0): NFSv4.1 is the default, and the NFSv4.0 path
# stays tested for remotes without it: the write-back crash loop (kills at
# random moments, nothing acknowledged lost).
export LAB_NACHE_MINOR=0
exec bash "$(dirname "$0")/crash_loop_test.sh"
