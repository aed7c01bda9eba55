#!/usr/bin/env bash
# The crash loop (crash_loop_test.sh) against Linux 6.12 knfsd (under qemu)
# over NFSv4.1, with write-back only under the write delegations knfsd
# grants (no Single_Writer), and rewrites of acknowledged files (appends,
# truncates, O_TRUNC rewrites) among the kills: data kept under a
# delegation when nache is killed is reclaimed or flushed after the
# restart, and nothing acknowledged is lost.
export LAB_KNFSD_KERNEL=6.12
# knfsd grants no delegation while lockd is in grace (50 s by default).
export LAB_KNFSD_NLM_GRACE=10
CRASH_REMOTE=knfsd612 CRASH_MIX=1 exec bash "$(dirname "$0")/crash_loop_test.sh"
