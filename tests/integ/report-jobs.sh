#!/bin/sh
# `msptictl report --jobs N` reads with N threads and must print exactly
# what the serial reader prints (text and --json, stdout and stderr): on a
# real multi-rank capture by msptid (one file, 4 ranks), on per-rank files
# of an in-process capture (several files: the next one is read ahead),
# and on damaged copies (a chunk with a bad checksum in the middle, a
# truncated file), where the readers' workers hand the chunk back to the
# serial path.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
cd "$T" || fail "cd"
$CTL run --output "$T/dist.mspti" -- "$DIST" --ranks 4 --steps 400 \
    >"$T/dist.out" 2>"$T/dist.err" || fail "run dist: $(cat "$T/dist.err")"
"$top_builddir/tests/integ/capture-inproc" -n 3 -s 40 -o "$T/inp" \
    >"$T/inp.out" 2>&1 || fail "capture-inproc: $(cat "$T/inp.out")"

# Damaged copies: the CRC of the second chunk's data broken (the reader
# skips that chunk), and a file cut in the middle of its last chunk.
python3 - "$T/dist.mspti" "$T/bad.mspti" "$T/cut.mspti" <<'PY' ||
import sys
b = bytearray(open(sys.argv[1], "rb").read())
at = [i for i in range(len(b)) if b[i:i + 4] == b"CHNK"]
print(len(at), "chunks")
assert len(at) >= 3, "want a capture of several chunks: %d" % len(at)
bad = bytearray(b)
bad[at[1] + 64] ^= 0xff
open(sys.argv[2], "wb").write(bad)
open(sys.argv[3], "wb").write(b[:at[-1] + 100])
PY
	fail "damaged copies"

n=0
for set in "dist.mspti" "inp.rank0.trace inp.rank1.trace inp.rank2.trace" \
    "bad.mspti" "cut.mspti" "inp.rank0.trace bad.mspti cut.mspti"; do
	n=$((n + 1))
	for j in 1 2 4; do
		for fmt in text json; do
			opt=; [ $fmt = json ] && opt=--json
			# shellcheck disable=SC2086
			$MSPTICTL report $opt --jobs $j $set \
			    >"$T/r$n.$fmt.$j" 2>"$T/e$n.$fmt.$j"
			echo $? >>"$T/r$n.$fmt.$j"
		done
	done
	for fmt in text json; do
		[ -s "$T/r$n.$fmt.1" ] || fail "no report for $set"
		for j in 2 4; do
			cmp -s "$T/r$n.$fmt.1" "$T/r$n.$fmt.$j" || fail \
			    "$set: $fmt report differs with --jobs $j: $(diff \
			    "$T/r$n.$fmt.1" "$T/r$n.$fmt.$j" | head -5)"
			cmp -s "$T/e$n.$fmt.1" "$T/e$n.$fmt.$j" || fail \
			    "$set: stderr differs with --jobs $j: $(diff \
			    "$T/e$n.$fmt.1" "$T/e$n.$fmt.$j" | head -5)"
		done
	done
done
grep -q "chunk skipped" "$T/e3.text.1" || fail "bad chunk not reported"
grep -q "INCOMPLETE INPUT" "$T/e4.text.1" || fail "cut file not reported"
ok "report: --jobs 1, 2 and 4 print the same for $n inputs"

# --jobs is checked.
$MSPTICTL report --jobs 0 "$T/dist.mspti" >/dev/null 2>"$T/j0.err" &&
	fail "--jobs 0 accepted"
grep -q "bad --jobs" "$T/j0.err" || fail "--jobs 0: $(cat "$T/j0.err")"
ok "report: --jobs 0 is a usage error"
