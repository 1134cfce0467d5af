#!/bin/sh
# bash completion for msptictl: sourced into a real bash, asked for the
# completions of a few command lines (COMP_WORDS/COMP_CWORD, as readline
# sets them), against a real msptid with a real agent and a live session:
# verbs, a verb's options, choices of an option, pids from `list`, jobs,
# session ids from `sessions`, and the runtime dir taken from -r.
. "$(dirname "$0")/lib.sh"
command -v bash >/dev/null || { echo "skip: no bash"; exit 77; }
COMP="$top_srcdir/contrib/bash-completion/msptictl"

start_daemon
MSPTI_JOB_ID=compjob $WITH_AGENT "$APP" --until "$T/go" >/dev/null 2>&1 &
AP=$!
PIDS="$PIDS $AP"
wait_until 10 sh -c "'$MSPTICTL' -r '$RT' --json list | grep -q '\"pid\":$AP,'" ||
	fail "agent did not register"
"$MSPTICTL" -r "$RT" --json start --pid "$AP" --duration 10m \
    --output "$T/c.mspti" >"$T/start.json" || fail "start failed"
SID=$(grep -oE '"session":[0-9]+' "$T/start.json" | head -n 1 | cut -d: -f2)
[ -n "$SID" ] || fail "no session id in $(cat "$T/start.json")"

# complete WORD...: the completions bash offers for the last word.
complete_line() {
	bash -c '
. "$1" || exit 1
shift
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
_msptictl
printf "%s\n" "${COMPREPLY[@]}"' bash "$COMP" "$@" 2>"$T/comp.err"
}
# has WANT WORD...: the completions of WORD... include WANT.
has() {
	want=$1; shift
	complete_line "$@" >"$T/comp.out" || fail "completion failed: $(cat "$T/comp.err")"
	grep -qx -- "$want" "$T/comp.out" ||
		fail "'$*' does not offer $want: $(tr '\n' ' ' <"$T/comp.out")"
}
hasnt() {
	nope=$1; shift
	complete_line "$@" >"$T/comp.out" || fail "completion failed"
	! grep -qx -- "$nope" "$T/comp.out" ||
		fail "'$*' offers $nope: $(tr '\n' ' ' <"$T/comp.out")"
}

has start "$MSPTICTL" st
has status "$MSPTICTL" st
has stop "$MSPTICTL" st
hasnt list "$MSPTICTL" st
has sessions "$MSPTICTL" -r "$RT" se
has export "$MSPTICTL" ""
ok "verbs, after the global options too"

has --runtime-dir "$MSPTICTL" --r
has --duration "$MSPTICTL" start --d
has --steps "$MSPTICTL" start --st
has --world-size "$MSPTICTL" report --w
hasnt --duration "$MSPTICTL" list --d
ok "options of msptictl and of each verb"

has perfetto "$MSPTICTL" export x.mspti --format ""
has ring "$MSPTICTL" start --mode r
hasnt stream "$MSPTICTL" start --mode r
ok "choices of an option"

has help "$MSPTICTL" he
has report "$MSPTICTL" help rep
has snapshot "$MSPTICTL" -r "$RT" help sn
has --json "$MSPTICTL" export x.mspti --js
has --strict "$MSPTICTL" export x.mspti --st
has --align "$MSPTICTL" report --al
has always "$MSPTICTL" report --align al
has --output-dir "$MSPTICTL" start --output-d
has --allow-partial "$MSPTICTL" stop --al
has slurm "$MSPTICTL" start --cluster ""
mkdir "$T/hd" && touch "$T/hd/hosts.txt"
has "$T/hd/hosts.txt" "$MSPTICTL" wait --hosts "$T/hd/"
has "$T/hd" "$MSPTICTL" stop --output-dir "$T/h"
hasnt "$T/hd/hosts.txt" "$MSPTICTL" stop --output-dir "$T/hd/"
ok "help COMMAND, every verb's options, cluster options and their values"

has "$AP" "$MSPTICTL" -r "$RT" start --pid ""
has "$AP" "$MSPTICTL" --runtime-dir "$RT" retarget "$SID" --remove-pid ""
has compjob "$MSPTICTL" -r "$RT" start --job c
MSPTID_RUNTIME_DIR="$RT" complete_line "$MSPTICTL" stop --pid "" >"$T/env.out"
grep -qx "$AP" "$T/env.out" || fail "MSPTID_RUNTIME_DIR not used: $(cat "$T/env.out")"
ok "pids and jobs from msptictl list (-r, --runtime-dir, \$MSPTID_RUNTIME_DIR)"

has "$SID" "$MSPTICTL" -r "$RT" stop ""
has "$SID" "$MSPTICTL" -r "$RT" wait ""
hasnt "$SID" "$MSPTICTL" -r "$T/nodaemon" stop ""
ok "session ids from msptictl sessions"

touch "$T/a.mspti" "$T/b.txt"
has "$T/a.mspti" "$MSPTICTL" report "$T/"
hasnt "$T/b.txt" "$MSPTICTL" report "$T/"
ok "report takes .mspti files"

"$MSPTICTL" -r "$RT" stop "$SID" >/dev/null || fail "stop failed"
touch "$T/go"
wait "$AP"
