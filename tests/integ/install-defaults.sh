#!/bin/sh
# A plain ./configure build runs where its units say: the runtime dir built
# into msptid, msptictl and the agent is the one msptid.socket listens in
# and tmpfiles.d creates, and `msptid --foreground` (the unit's ExecStart,
# no --runtime-dir) starts there and takes registrations.  As root, the
# daemon runs in private mount and pid namespaces with a tmpfs over /run:
# the host's /run is never touched, and the mount and every process in
# there go with the namespace, even if this test is killed.
. "$(dirname "$0")/lib.sh"
unset MSPTID_RUNTIME_DIR

unit="$top_srcdir/systemd/msptid.socket"
tmpf="$top_srcdir/systemd/tmpfiles.d/msptid.conf"
rundir=$(sed -n 's|^ListenStream=\(.*\)/ctl\.sock$|\1|p' "$unit")
[ -n "$rundir" ] || fail "no ctl.sock in $unit"
sed -n 's|^ListenStream=\(.*\)/agent\.sock$|\1|p' "$unit" | grep -qx "$rundir" ||
	fail "agent.sock and ctl.sock in different dirs in $unit"
awk '$1 == "d" { print $2 }' "$tmpf" | grep -qx "$rundir" ||
	fail "tmpfiles.d does not create $rundir"
for m in msptid.8 msptictl.1 libmspti.3; do
	grep -q "$rundir" "$top_srcdir/doc/$m" || fail "doc/$m does not name $rundir"
done
ok "socket unit, tmpfiles.d and man pages agree on $rundir"

# msptictl names the socket it tried (when no daemon answers there).
if ! out=$("$MSPTICTL" status 2>&1); then
	tried=$(printf '%s\n' "$out" | grep -o '/[^ ()]*/ctl\.sock' | head -n 1)
	[ "$tried" = "$rundir/ctl.sock" ] ||
		fail "msptictl's default is not $rundir: $out"
fi
ok "msptictl's compiled-in runtime dir is $rundir"

if [ "$(id -u)" -ne 0 ] || ! unshare -m -p -f --kill-child --mount-proc --propagation private true 2>/dev/null; then
	echo "skip: starting msptid on $rundir needs root and mount namespaces"
	exit 0
fi
runtop="/$(echo "$rundir" | cut -d/ -f2)"
# Inside: tmpfs over /run, then the daemon exactly as the unit starts it,
# then an agent with no MSPTID_RUNTIME_DIR.  Everything is killed by pid
# before the namespace's last process exits.
unshare -m -p -f --kill-child --mount-proc --propagation private sh -s "$runtop" "$rundir" "$MSPTID" \
    "$MSPTICTL" "${AGENT_PRELOAD:-$AGENT}" "$APP" "$T" <<'EOF' >"$T/ns.out" 2>&1
runtop=$1 rundir=$2 msptid=$3 msptictl=$4 agent=$5 app=$6 t=$7
d="" a=""
trap 'for p in $a $d; do kill -9 $p 2>/dev/null; done; wait' EXIT
mount -t tmpfs -o mode=0755 mspti-test "$runtop" || exit 3
"$msptid" --foreground -v >"$t/daemon.log" 2>&1 &
d=$!
n=0
until [ -S "$rundir/ctl.sock" ] && "$msptictl" status >/dev/null 2>&1; do
	kill -0 $d 2>/dev/null || { echo "msptid exited at start"; exit 1; }
	n=$((n + 1)); [ $n -lt 400 ] || { echo "msptid did not come up"; exit 1; }
	sleep 0.05
done
echo "daemon up on $rundir"
MSPTI_JOB_ID=defaults LD_PRELOAD="$agent" "$app" --until "$t/go" >/dev/null 2>&1 &
a=$!
n=0
until "$msptictl" --json list 2>/dev/null | grep -q "\"pid\":$a,"; do
	n=$((n + 1)); [ $n -lt 400 ] || { echo "agent $a did not register"; exit 1; }
	sleep 0.05
done
echo "agent $a registered"
touch "$t/go"
wait $a || { echo "agent app failed"; exit 1; }
a=""
kill -TERM $d; wait $d; rc=$?; d=""
[ $rc -eq 0 ] || { echo "msptid exit $rc on SIGTERM"; exit 1; }
EOF
rc=$?
sed 's/^/  ns: /' "$T/ns.out"
[ $rc -eq 0 ] || fail "msptid with its default runtime dir (rc $rc)"
ok "msptid --foreground starts on $rundir and an agent registers there"
