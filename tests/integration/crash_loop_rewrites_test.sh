#!/usr/bin/env bash
# The crash loop (crash_loop_test.sh) with rewrites of acknowledged files
# among the kills: appends, truncates to a random size and to zero, and
# O_TRUNC rewrites, each checked at the remote against the copy the client
# keeps. A truncate racing a flush of the older data must lose nothing
# (the acknowledged write lost of issue 15) and make no conflict copy.
CRASH_MIX=1 exec bash "$(dirname "$0")/crash_loop_test.sh"
