#!/bin/sh
# Runs one test (make check's LOG_COMPILER) in a private simulator
# namespace, and removes the shared memory the test left under it.
# Tests that pick their own prefix derive it from this one.
prefix="mspti-t$$"
NPUSIM_SHM_PREFIX=$prefix
export NPUSIM_SHM_PREFIX
"$@"
rc=$?
rm -f /dev/shm/"$prefix"* 2>/dev/null
exit $rc
