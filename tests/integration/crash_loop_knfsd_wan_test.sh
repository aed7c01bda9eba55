#!/usr/bin/env bash
# The crash loop (crash_loop_test.sh) against Linux knfsd over the wan
# profile (80 ms, 50 Mbit/s): kills land in flushes that take round trips,
# and the remote is a kernel server with real change attributes (a flush
# cut off by a kill must not be taken for a conflict).
CRASH_REMOTE=knfsd CRASH_PROFILE=wan exec bash "$(dirname "$0")/crash_loop_test.sh"
