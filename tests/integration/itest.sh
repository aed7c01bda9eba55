# shellcheck shell=bash
# tests/integration/itest.sh — helpers shared by the integration tests.
#
# A test sources this file (which sources lab/helpers.sh, and so lab.sh),
# brings the lab up (lab_up or lab.sh's own functions), runs named checks
# with `check NAME CMD...` (each one a behaviour it proves), and ends
# with itest_finish, which prints one line per check and the closing
# "N passed, N failed" line, and exits non-zero on any failure. The lab is
# torn down by lab.sh's traps, also on failure or interruption.

ITEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../lab/helpers.sh
source "$ITEST_DIR/../../lab/helpers.sh"

ITEST_NAME=$(basename "$0" .sh)
_itest_pass=0
_itest_fail=0
_itest_results=()

# check NAME CMD... — runs CMD; records NAME as passed when it exits 0.
# ITEST_ONLY (an extended regex, for runs by hand) runs only the checks
# whose name matches; unset, every check runs.
check() {
	local name=$1 rc=0
	shift
	if [ -n "${ITEST_ONLY:-}" ] && ! [[ $name =~ $ITEST_ONLY ]]; then
		echo "=== $ITEST_NAME: $name not run (ITEST_ONLY)" >&2
		return 0
	fi
	echo "=== $ITEST_NAME: $name" >&2
	"$@" || rc=$?
	if [ $rc = 0 ]; then
		_itest_pass=$((_itest_pass + 1))
		_itest_results+=("PASS $name")
	else
		_itest_fail=$((_itest_fail + 1))
		_itest_results+=("FAIL $name (exit $rc)")
		echo "--- $ITEST_NAME: $name FAILED (exit $rc)" >&2
	fi
}

# itest_finish — prints the results and exits (non-zero if anything failed
# or nothing ran).
itest_finish() {
	local r
	echo >&2
	for r in "${_itest_results[@]}"; do echo "$ITEST_NAME: $r"; done
	echo "$ITEST_NAME: $_itest_pass passed, $_itest_fail failed"
	if [ $_itest_fail != 0 ] && [ -n "${LAB_DIR:-}" ]; then
		echo "--- tail of nache log" >&2
		tail -n 60 "$(lab_nache_log)" >&2 2>/dev/null || true
	fi
	[ $_itest_fail = 0 ] && [ $_itest_pass -gt 0 ]
	exit $?
}

# expect_eq WHAT GOT WANT — fails with a message unless GOT == WANT.
expect_eq() {
	if [ "$2" != "$3" ]; then
		echo "expected $1 = '$3', got '$2'" >&2
		return 1
	fi
}

# step DESC CMD... — runs CMD; on failure says which step failed.
step() {
	local desc=$1 rc=0
	shift
	"$@" || rc=$?
	[ $rc = 0 ] || echo "step failed (exit $rc): $desc" >&2
	return $rc
}
