#!/bin/sh
# Usage errors of msptictl, every verb: exit 2, nothing on stdout, and on
# stderr exactly one line "msptictl VERB: WHAT (see msptictl VERB --help)"
# (bad flag, missing value, missing operand, bad number, cluster-only
# option); at the top level "msptictl: WHAT (see msptictl --help)".
# No daemon runs: a usage error is found before anything connects.
. "$(dirname "$0")/lib.sh"

NOD="$T/none"

# usage_err VERB CMD-ARGS...: msptictl -r NOD CMD-ARGS... is a usage
# error of VERB ("" for the top level); its message is left in $msg.
usage_err() {
	verb=$1; shift
	"$MSPTICTL" -r "$NOD" "$@" </dev/null >"$T/e.out" 2>"$T/e.err"; rc=$?
	[ $rc -eq 2 ] || fail "'$*' exits $rc, not 2: $(cat "$T/e.err")"
	[ ! -s "$T/e.out" ] || fail "'$*' wrote on stdout: $(cat "$T/e.out")"
	[ "$(wc -l <"$T/e.err")" -eq 1 ] ||
		fail "'$*': want one line on stderr, got: $(cat "$T/e.err")"
	if [ -n "$verb" ]; then
		pre="msptictl $verb: " see=" (see msptictl $verb --help)"
	else
		pre="msptictl: " see=" (see msptictl --help)"
	fi
	line=$(cat "$T/e.err")
	case $line in
	"$pre"*"$see") ;;
	*) fail "'$*': not '$pre... $see': $line";;
	esac
	msg=${line#"$pre"}
	msg=${msg%"$see"}
	[ -n "$msg" ] || fail "'$*': empty message"
}

# want MSG: the last message was exactly MSG.
want() {
	[ "$msg" = "$1" ] || fail "want '$1', got '$msg'"
}

VERBS=$("$MSPTICTL" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
[ -n "$VERBS" ] || fail "no verbs in msptictl --help"
for v in $VERBS; do
	usage_err "$v" "$v" --no-such-option
	want "unknown option '--no-such-option'"
	usage_err "$v" "$v" -Z
	want "unknown option '-Z'"
done
ok "every verb: a bad flag is one line, msptictl VERB: ..., exit 2"

usage_err "" --no-such-option
want "unknown option '--no-such-option'"
usage_err "" no-such-verb
want "unknown command 'no-such-verb'"
usage_err ""
want "no command given"
usage_err help help no-such-verb
want "unknown command 'no-such-verb'"
ok "top level: bad flag, unknown verb, no verb"

# A value missing, for an option of each verb that takes one.
for a in "start --pid 1 --duration" "stop --pid" "retarget 1 --kinds" \
    "snapshot 1 --output" "metrics --device" "report x.mspti --top" \
    "export x.mspti -o out --format" "run --kinds" "sessions --hosts"; do
	set -- $a
	eval o=\${$#}
	usage_err "$1" $a
	case $o in
	--*) want "option '$o' needs a value";;
	esac
done
ok "a missing value names the option"

# Missing operands and targets.
usage_err stop stop
usage_err wait wait
usage_err snapshot snapshot
usage_err retarget retarget --kinds +api
usage_err report report
want "no trace file"
usage_err export export -o out
want "no trace file"
usage_err run run
want "no command to run"
usage_err start start --kinds api
usage_err list list extra
want "unexpected argument 'extra'"
ok "missing operands and targets"

# Bad numbers, sizes, durations and choices.
usage_err metrics metrics --device x
want "bad device 'x'"
usage_err metrics metrics --last 5parsecs
usage_err report report --top x x.mspti
want "bad --top 'x'"
usage_err report report --world-size -3 x.mspti
want "bad --world-size '-3'"
usage_err report report --align sometimes x.mspti
usage_err report report --section nosuch x.mspti
usage_err export export --world-size 2x -o out x.mspti
want "bad --world-size '2x'"
usage_err export export --format svg -o out x.mspti
usage_err start start --pid 1 --steps x
usage_err start start --pid 1 --buffer lots
usage_err start start --pid 0
usage_err start start --pid 1 --mode tape
usage_err stop stop --pid x
usage_err wait wait x
want "bad session id 'x'"
usage_err wait wait 1 2
usage_err retarget retarget 1 --add-pid x
usage_err snapshot snapshot --file-mode 999 1
usage_err run run --duration forever -- true
# getopt takes the separator as --output's value: refused, no file "--".
(cd "$T" && usage_err run run --output -- true) || exit 1
[ ! -e "$T/--" ] || fail "run --output -- wrote a file named '--'"
ok "bad numbers and choices"

# Options of a cluster capture, without --cluster or --hosts.
usage_err start start --pid 1 --output-dir "$T/d"
usage_err wait wait --output-dir "$T/d" 1
usage_err stop stop --allow-partial 1
usage_err start start --cluster pbs --job 1
want "--cluster takes 'slurm'"
usage_err start start --cluster slurm
usage_err stop stop --hosts "$T/hosts" --cluster slurm --job 1
ok "cluster options: one line too"
# Usage errors only the daemon can find (a kind name it does not know)
# look the same: one line, msptictl VERB: ..., see VERB --help, exit 2.
start_daemon
NOD=$RT
usage_err start start --all --kinds kernel,bogus --output "$T/k.mspti"
case $msg in
"unknown kind 'bogus' (kinds: "*) ;;
*) fail "start --kinds bogus: '$msg'";;
esac
[ ! -e "$T/k.mspti" ] || fail "a refused start left its output file"
usage_err start start --all --kinds op,shapes,nokind --output "$T/k.mspti"
# run sends a StartSession too: the error is run's, not start's.
usage_err run run --kinds bogus --output "$T/r.mspti" -- true
case $msg in
"unknown kind 'bogus' (kinds: "*) ;;
*) fail "run --kinds bogus: '$msg'";;
esac
ok "daemon-side usage errors: one line, msptictl VERB: ..., exit 2"
echo "cli-errors: all passed"
