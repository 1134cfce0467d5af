#!/bin/sh
# report and export with odd files where traces go in and out:
# - a FIFO as a trace with no writer: refused after a bounded wait (not
#   waited on for ever), exit 1; with a writer: read like the file;
# - a FIFO among a directory's *.mspti: skipped with a line, the rest read;
# - a pipe given to export, which reads its input twice: refused before
#   anything is written, and an existing output is kept as it was;
# - a FIFO as export's output with no reader: refused at once, one line,
#   still a FIFO; with a reader: the export goes through it; a FIFO where
#   a CSV table goes: refused at once;
# - a failed export: no partial output, no temporary file left.
set -eu
b=${top_builddir:-.}
t=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || :; done
	rm -rf "$t" /dev/shm/"$NPUSIM_SHM_PREFIX"*
}
trap cleanup EXIT
export NPUSIM_SHM_PREFIX="${NPUSIM_SHM_PREFIX:-mspti}-odd$$" \
    MSPTID_RUNTIME_DIR="$t"
ctl="$b/client/msptictl"
fail() { echo "FAIL: $*"; exit 1; }

"$b/tests/integ/capture-inproc" -n 1 -s 5 -o "$t/one" || fail capture
tr="$t/one.rank0.trace"
"$ctl" report --json "$tr" >"$t/ref.json" || fail "report of the file"

# same_ops A B: the two reports found the same op table and steps.
same_ops() {
	python3 - "$1" "$2" <<'PY' || fail "$3: not the file's report"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["ops"] and a["ops"] == b["ops"], (a["ops"], b["ops"])
assert a["steps"] == b["steps"]
PY
}

# refused WHAT PATTERN CMD...: CMD ends (not the 60 s timeout) with exit 1
# and one line on stderr that matches PATTERN.
refused() {
	what=$1 pat=$2
	shift 2
	rc=0
	timeout 60 "$@" >"$t/o" 2>"$t/e" || rc=$?
	[ $rc -ne 124 ] || fail "$what: waits for ever"
	[ $rc -eq 1 ] || fail "$what: exit $rc: $(cat "$t/e")"
	[ "$(wc -l <"$t/e")" -eq 1 ] || fail "$what: not one line: $(cat "$t/e")"
	grep -q "$pat" "$t/e" || fail "$what: $(cat "$t/e")"
}

# A FIFO nobody writes to.
mkfifo "$t/in.mspti"
rc=0
timeout 60 "$ctl" report "$t/in.mspti" >"$t/o" 2>"$t/e" || rc=$?
[ $rc -ne 124 ] || fail "report waits for ever on a FIFO with no writer"
[ $rc -eq 1 ] || fail "FIFO with no writer: exit $rc: $(cat "$t/e")"
grep -q "in.mspti: cannot read: .*FIFO" "$t/e" ||
	fail "FIFO with no writer: $(cat "$t/e")"
[ -p "$t/in.mspti" ] || fail "the FIFO was replaced"
echo "ok: a FIFO with no writer: refused, exit 1"

# The same FIFO with a writer: a stream, read like the file.
cat "$tr" >"$t/in.mspti" &
w=$!
pids="$pids $w"
timeout 60 "$ctl" report --json "$t/in.mspti" >"$t/fifo.json" ||
	fail "report of a FIFO with a writer"
wait "$w" || fail "the writer"
same_ops "$t/ref.json" "$t/fifo.json" "FIFO with a writer"
echo "ok: a FIFO with a writer: read as a stream"

# A directory's traces with a FIFO among them.
mkdir "$t/dir"
cp "$tr" "$t/dir/a.mspti"
mkfifo "$t/dir/b.mspti"
rc=0
timeout 60 "$ctl" report --json "$t/dir" >"$t/dir.json" 2>"$t/e" || rc=$?
[ $rc -eq 0 ] || fail "directory with a FIFO: exit $rc: $(cat "$t/e")"
grep -q "b.mspti: not a regular file, skipped" "$t/e" ||
	fail "the FIFO in the directory: $(cat "$t/e")"
same_ops "$t/ref.json" "$t/dir.json" "directory with a FIFO"
echo "ok: a FIFO among a directory's traces: skipped, the rest read"

# export reads its input twice: a pipe is refused before any output.
echo keep >"$t/old.json"
cat "$tr" >"$t/in.mspti" &
pids="$pids $!"
refused "export of a pipe" "^msptictl export: $t/in.mspti: not a regular file" \
    "$ctl" export "$t/in.mspti" --format chrome -o "$t/old.json"
[ "$(cat "$t/old.json")" = keep ] || fail "export of a pipe: the old output was overwritten"
echo "ok: export of a pipe: refused, one line, the old output kept"

# A FIFO as the output, no reader: refused at once, still a FIFO.
mkfifo "$t/out.fifo"
refused "output FIFO with no reader" "^msptictl export: $t/out.fifo: .*no reader" \
    "$ctl" export "$tr" --format chrome -o "$t/out.fifo"
[ -p "$t/out.fifo" ] || fail "the output FIFO was replaced"
# With a reader, the export goes through it.
cat "$t/out.fifo" >"$t/got.json" &
r=$!
pids="$pids $r"
# (Until cat has the FIFO open, export finds no reader: it tries again.)
i=0
until timeout 60 "$ctl" export "$tr" --format chrome -o "$t/out.fifo" \
    2>"$t/e"; do
	grep -q "no reader" "$t/e" ||
		fail "export into a FIFO with a reader: $(cat "$t/e")"
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the reader never opened the FIFO"
	sleep 0.1
done
wait "$r" || fail "the reader"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["traceEvents"]' \
    "$t/got.json" || fail "the JSON read from the FIFO"
echo "ok: an output FIFO: refused with no reader, written with one"

# A FIFO where a CSV table goes: refused at once, left as it is.
mkdir "$t/csv"
mkfifo "$t/csv/op_summary.csv"
refused "FIFO in the CSV directory" "^msptictl export: $t/csv: .*FIFO" \
    "$ctl" export "$tr" --format csv -o "$t/csv"
[ -p "$t/csv/op_summary.csv" ] || fail "the FIFO in the CSV directory was replaced"
echo "ok: a FIFO where a CSV table goes: refused, left as it is"

# A failed export (the file size limit, SIGXFSZ ignored: EFBIG) leaves
# the old output as it was and no temporary file.
refused "export past the size limit" "^msptictl export: $t/old.json: File too large" \
    sh -c 'trap "" XFSZ; ulimit -f 2; exec "$@"' sh \
    "$ctl" export "$tr" --format chrome -o "$t/old.json"
[ "$(cat "$t/old.json")" = keep ] ||
	fail "a failed export overwrote the old output"
[ "$(ls -A "$t" | grep -c '^\.')" -eq 0 ] ||
	fail "temporary files left: $(ls -A "$t")"
rc=0
"$ctl" export "$tr" --format perfetto -o /dev/full >"$t/o" 2>"$t/e" || rc=$?
[ $rc -eq 1 ] || fail "export to /dev/full: exit $rc"
[ "$(wc -l <"$t/e")" -eq 1 ] || fail "export to /dev/full: $(cat "$t/e")"
"$ctl" export "$tr" --format chrome -o "$t/old.json" || fail "export"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$t/old.json" ||
	fail "the export over the old output"
[ "$(ls -A "$t" | grep -c '^\.')" -eq 0 ] ||
	fail "temporary files left: $(ls -A "$t")"
# Through a link to a file: the file is replaced, the link stays.
echo keep >"$t/real.json"
ln -s real.json "$t/link.json"
"$ctl" export "$tr" --format chrome -o "$t/link.json" || fail "export via a link"
[ -L "$t/link.json" ] || fail "the link was replaced"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$t/real.json" ||
	fail "the file the link names"
echo "ok: a failed export keeps the old output and leaves no temporary"
echo "report-oddfiles: all passed"
