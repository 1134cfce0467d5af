#!/bin/sh
# A child that sets environment variables right after fork, while the
# agent's registration thread (restarted in the child) reads the rank and
# its settings from the environment: no child may crash (glibc's setenv
# frees the array an unguarded getenv is reading).
. "$(dirname "$0")/lib.sh"

start_daemon
$WITH_AGENT "$top_builddir/tests/integ/fork-env" 200 200 >"$T/out" 2>"$T/err" ||
	fail "$(cat "$T/out" "$T/err" | head -5)"
ok "200 children churning their environment beside the agent: $(cat "$T/out")"
