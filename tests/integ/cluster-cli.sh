#!/bin/sh
# The fan-out's own logic without root: two "hosts" are two real msptid
# on their own runtime dirs, reached through MSPTI_SSH set to a local
# stand-in for ssh (it runs the remote command with the host's runtime
# dir); real agents, the real msptictl.  Also bad input: one clear line,
# exit 2 or 3, nothing written.
. "$(dirname "$0")/lib.sh"

cat >"$T/fakessh" <<EOS
#!/bin/sh
# ssh [-o X]... HOST COMMAND: HOST's runtime dir is $T/HOST.
while [ "\$1" = -o ]; do shift 2; done
host=\$1; shift
[ -d "$T/\$host" ] || { echo "ssh: Could not resolve hostname \$host" >&2; exit 255; }
MSPTID_RUNTIME_DIR="$T/\$host" exec sh -c "\$*"
EOS
chmod +x "$T/fakessh"
export MSPTI_SSH="$T/fakessh"
for h in hA hB; do
	mkdir -p "$T/$h"
	"$MSPTID" --foreground --runtime-dir "$T/$h" >>"$T/daemon.log" 2>&1 &
	PIDS="$PIDS $!"
done
for h in hA hB; do
	wait_until 10 "$MSPTICTL" -r "$T/$h" status >/dev/null 2>&1 || fail "msptid $h did not start"
	for r in 0 1; do
		MSPTID_RUNTIME_DIR="$T/$h" MSPTI_JOB_ID=cj RANK=$r LD_PRELOAD="$AGENT" \
		    "$APP" --until "$T/go" >>"$T/apps.out" 2>&1 &
		PIDS="$PIDS $!"
	done
	wait_until 10 sh -c "[ \"\$('$MSPTICTL' -r '$T/$h' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
		fail "$h: agents did not register"
done
printf 'hA\nhB\n' >"$T/hosts"
cd "$T" || exit 1

"$MSPTICTL" start --hosts hosts --job cj --output-dir cap >start.out 2>&1 || fail "start: $(cat start.out)"
grep -q '^2 of 2 nodes, 4 of 4 ranks capturing$' start.out || fail "start reply: $(cat start.out)"
[ -f "$T/cap/manifest.json" ] || fail "no manifest in $T/cap"
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
for n in m["nodes"]:
    c = n["clock"]
    # Same machine, same clock: the true offset 0 lies inside the bracket.
    assert c["offset_min_ns"] <= 0 <= c["offset_max_ns"], n
    assert c["launch_ns"] <= c["reply_ns"], n
' "$T/cap/manifest.json" || fail "manifest clock data: $(cat "$T/cap/manifest.json")"
ok "start --hosts: 2 of 2 nodes, 4 of 4 ranks capturing; the manifest brackets each host's clock offset"
"$MSPTICTL" --json stop --hosts hosts --output-dir cap >stop.json 2>&1 || fail "stop: $(cat stop.json)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["nodes_ok"] == 2 and [n["reply"]["state"] for n in d["nodes"]] == ["finalized"]*2, d' stop.json ||
	fail "stop --json: $(cat stop.json)"
for h in hA hB; do [ -s "cap/$h.mspti" ] || fail "no cap/$h.mspti"; done
ok "stop --hosts --json finalizes both; one trace per host"

# hB's daemon is gone, and a host that does not resolve.
kill -TERM "$(echo $PIDS | cut -d' ' -f2)"
wait_until 10 sh -c "! [ -S '$T/hB/ctl.sock' ]" || fail "msptid hB still up"
printf 'hA\nhB\nhZ\n' >"$T/hosts3"
"$MSPTICTL" start --hosts hosts3 --job cj --output-dir cap2 >p.out 2>&1 && fail "partial start exited 0"
grep -q '^1 of 3 nodes, 2 of 2 ranks capturing$' p.out || fail "partial reply: $(cat p.out)"
grep -q '^  hB: FAILED: msptid is not running' p.out || fail "hB not named: $(cat p.out)"
grep -q '^  hZ: FAILED: ssh: Could not resolve hostname hZ' p.out || fail "hZ not named: $(cat p.out)"
ok "a host without msptid and one that does not resolve are named with the reason; exit 1"
"$MSPTICTL" stop --hosts hosts3 --output-dir cap2 >ps.out 2>&1 || fail "stop of the partial capture: $(cat ps.out)"
"$MSPTICTL" start --hosts hosts3 --job cj --output-dir cap3 --allow-partial >p2.out 2>&1 ||
	fail "--allow-partial exited nonzero: $(cat p2.out)"
ok "--allow-partial: exit 0"

bad() { # WANT_RC MESSAGE_PATTERN ARGS...
	want=$1 pat=$2; shift 2
	"$MSPTICTL" "$@" >bad.out 2>&1; rc=$?
	[ "$rc" = "$want" ] || fail "msptictl $*: exit $rc, want $want: $(cat bad.out)"
	[ "$(wc -l <bad.out)" = 1 ] && grep -q "$pat" bad.out || fail "msptictl $*: $(cat bad.out)"
}
bad 2 "takes 'slurm'" start --cluster pbs --job 1
bad 2 "needs --job ID" start --cluster slurm
bad 2 "give one of --cluster slurm or --hosts" start --cluster slurm --hosts hosts --job 1
bad 2 "cannot read hosts file" start --hosts nosuch --job cj
# Each --job=X becomes two words for the nodes (the sanitizer build saw
# them written past the end of the list).
bad 2 "cannot read hosts file" start --hosts nosuch --job=1 --job=2 --job=3 \
    --job=4 --job=5 --job=6 --job=7 --job=8 --job=9 --job=10 --job=11 \
    --job=12 --steps 3
: >empty
bad 2 "names no host" start --hosts empty --job cj
bad 2 "takes --output-dir DIR, not --output" start --hosts hosts --job cj --output x.mspti
bad 2 "give --output-dir DIR" stop --hosts hosts
bad 3 "cannot read" stop --hosts hosts --output-dir nosuchdir
mkdir -p junk && echo '{"nodes": [' >junk/manifest.json
bad 1 "is not a cluster manifest" stop --hosts hosts --output-dir junk
# A FIFO where the manifest should be: refused at once, not waited on.
mkdir -p fifo && mkfifo fifo/manifest.json
timeout 10 "$MSPTICTL" stop --hosts hosts --output-dir fifo >bad.out 2>&1
rc=$?
[ "$rc" = 3 ] && [ "$(wc -l <bad.out)" = 1 ] &&
    grep -q "not a regular file" bad.out ||
	fail "manifest FIFO: exit $rc: $(cat bad.out)"
# A FIFO as the hosts file, nobody writing: refused after a few seconds,
# not waited on for ever.
mkfifo hosts.fifo
timeout 60 "$MSPTICTL" sessions --hosts hosts.fifo >bad.out 2>&1
rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <bad.out)" = 1 ] &&
    grep -q "cannot read hosts file hosts.fifo: a FIFO that no writer" bad.out ||
	fail "hosts FIFO: exit $rc: $(cat bad.out)"
[ ! -e x.mspti ] || fail "a rejected command wrote a file"
ok "bad cluster input: one clear line, exit 2/3/1, nothing written"

# The manifest is JSON, read as JSON: a node name with a \u escape is
# that name (UTF-8), not one with a '?' in it.
mkdir -p uni && printf '{"nodes":[{"node":"h\\u00e9","session":7}]}\n' >uni/manifest.json
"$MSPTICTL" stop --hosts hosts --output-dir uni >uni.out 2>&1 &&
	fail "stop on an unknown host exited 0"
e_acute=$(printf '\303\251')
grep -q "^  h$e_acute: FAILED: ssh: Could not resolve hostname h$e_acute" uni.out ||
	fail "manifest node name: $(cat uni.out)"
ok "a manifest's \\u escapes are read as JSON"
touch "$T/go"
echo "cluster-cli: all passed"
