#!/bin/sh
# Every program's --help against its man page, both ways, so that a new
# option without documentation (or documentation of an option that went)
# fails here.  msptictl is compared verb by verb: the options in
# `msptictl VERB --help` against those in the man page's COMMANDS items
# that name VERB, and `msptictl --help` against SYNOPSIS and OPTIONS.
# Each option --help names must also be one the parser knows.
. "$(dirname "$0")/lib.sh"

DOC="$top_srcdir/doc"
NOD="$T/none"	# a runtime dir with no daemon: nothing may connect

# mdoc_opts PAGE VERB|-global|-verbs: the options (-x, --long) a man
# page documents (Fl macros, bundles as in Fl fv split): for a verb those
# of the COMMANDS items that name it (.It Cm VERB, or Cm a | b in an Xo
# head), for -global those of SYNOPSIS and OPTIONS; -verbs: the verbs.
# An option of another program is written Ql, not Fl.
mdoc_opts() {
	python3 - "$@" <<'EOF'
import re, sys
page, what = sys.argv[1], sys.argv[2]
macro = re.compile(r'^[A-Z][a-z][a-z]?$')
def opts(line):
    toks = line.replace('\\&', '').split()
    out = set()
    for i, t in enumerate(toks):
        if t != 'Fl':
            continue
        # Fl's arguments run to the next macro (Fl o | \-output).
        for n in toks[i + 1:]:
            if macro.match(n):
                break
            n = n.replace('\\-', '-').rstrip(',.;:)')
            if not re.match(r'^-?[A-Za-z]', n):
                continue
            if n.startswith('-'):
                out.add('-' + n.split('=')[0])
            else:
                out.update('-' + c for c in n if c.isalnum())
    return out
sect, depth, item_verbs = None, 0, []
per_verb, glob = {}, set()
for raw in open(page):
    line = raw.rstrip('\n')
    if not line.startswith('.'):
        line = '.X ' + line
    toks = line[1:].split()
    if not toks:
        continue
    if toks[0] == 'Sh':
        sect, depth, item_verbs = ' '.join(toks[1:]), 0, []
        continue
    o = opts(line[1:])
    if sect in ('SYNOPSIS', 'OPTIONS'):
        glob |= o
    if sect != 'COMMANDS':
        continue
    if toks[0] == 'Bl':
        depth += 1
    elif toks[0] == 'El':
        depth -= 1
    elif toks[0] == 'It' and depth == 1:
        item_verbs = []
        for i, t in enumerate(toks):
            if t == 'Cm':
                for v in toks[i + 1:]:
                    if macro.match(v):
                        break
                    if v != '|':
                        item_verbs.append(v)
    for v in item_verbs:
        per_verb.setdefault(v, set()).update(o)
if what == '-global':
    res = glob
elif what == '-verbs':
    res = per_verb.keys()
else:
    res = per_verb.get(what, set())
for x in sorted(res):
    print(x)
EOF
}

# help_opts: the options named in a usage text on stdin (bundles split;
# "+a,-b" values and "--" are not options).
help_opts() {
	python3 -c '
import re, sys
out = set()
for m in re.finditer(r"(?:^|(?<=[\s\[|(]))(--?[A-Za-z][A-Za-z0-9-]*)(?=[\s\][|,)=:.;]|$)",
                     sys.stdin.read()):
    o = m.group(1)
    if o.startswith("--"):
        out.add(o)
    else:
        out.update("-" + c for c in o[1:])
for o in sorted(out):
    print(o)'
}

# compare WHAT HELPFILE MANFILE: both ways, with the difference named.
compare() {
	sort -u "$2" >"$2.s"; sort -u "$3" >"$3.s"
	missing=$(comm -23 "$2.s" "$3.s" | tr '\n' ' ')
	extra=$(comm -13 "$2.s" "$3.s" | tr '\n' ' ')
	[ -z "$missing" ] || fail "$1: in --help, not in the man page: $missing"
	[ -z "$extra" ] || fail "$1: in the man page, not in --help: $extra"
}

# help_ok CMD...: --help prints on stdout, nothing on stderr, exits 0.
help_ok() {
	"$@" >"$T/help.out" 2>"$T/help.err"; rc=$?
	[ $rc -eq 0 ] || fail "'$*' exits $rc: $(cat "$T/help.err")"
	[ -s "$T/help.out" ] || fail "'$*' printed nothing on stdout"
	[ ! -s "$T/help.err" ] || fail "'$*' wrote on stderr: $(cat "$T/help.err")"
	grep -q '^usage: ' "$T/help.out" || fail "'$*' has no usage line"
}

# The verbs: the command table of msptictl --help, and the man page's.
help_ok "$MSPTICTL" --help
cp "$T/help.out" "$T/global.help"
VERBS=$(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }' "$T/global.help")
[ -n "$VERBS" ] || fail "no command table in msptictl --help"
printf '%s\n' $VERBS >"$T/verbs.help"
mdoc_opts "$DOC/msptictl.1" -verbs >"$T/verbs.man"
sort -o "$T/verbs.help" "$T/verbs.help"
sort -o "$T/verbs.man" "$T/verbs.man"
cmp -s "$T/verbs.help" "$T/verbs.man" ||
	fail "verbs differ: --help: $(tr '\n' ' ' <"$T/verbs.help"); man: $(tr '\n' ' ' <"$T/verbs.man")"
ok "msptictl --help and msptictl(1) list the same verbs"

help_opts <"$T/global.help" >"$T/g.help"
mdoc_opts "$DOC/msptictl.1" -global >"$T/g.man"
compare "msptictl" "$T/g.help" "$T/g.man"
ok "global options: msptictl --help = msptictl(1) SYNOPSIS/OPTIONS"

for v in $(cat "$T/verbs.help"); do
	help_ok "$MSPTICTL" "$v" --help
	grep -q "^usage: msptictl $v " "$T/help.out" ||
		fail "$v --help: not its own usage: $(head -n 1 "$T/help.out")"
	cp "$T/help.out" "$T/$v.text"
	help_ok "$MSPTICTL" "$v" -h
	cmp -s "$T/help.out" "$T/$v.text" || fail "$v: -h differs from --help"
	help_ok "$MSPTICTL" help "$v"
	cmp -s "$T/help.out" "$T/$v.text" || fail "help $v differs from $v --help"
	# Whatever follows, --help wins and runs nothing.
	help_ok "$MSPTICTL" -r "$NOD" "$v" --help --no-such-option operand
	help_opts <"$T/$v.text" | grep -vxE -- '-h|--help' >"$T/$v.help"
	mdoc_opts "$DOC/msptictl.1" "$v" | grep -vxE -- '-h|--help' >"$T/$v.man"
	compare "msptictl $v" "$T/$v.help" "$T/$v.man"
	# An option the usage names is one the parser knows.
	for o in $(cat "$T/$v.help"); do
		"$MSPTICTL" -r "$NOD" "$v" "$o" </dev/null >/dev/null 2>"$T/o.err"
		! grep -q "unknown option" "$T/o.err" ||
			fail "$v: --help names $o, the parser does not know it"
	done
done
help_ok "$MSPTICTL" help
cmp -s "$T/help.out" "$T/global.help" || fail "msptictl help differs from --help"
ok "every verb: -h, --help and 'help VERB' print its usage; options = msptictl(1)'s"

# The other programs and their man pages.
for p in "daemon/msptid:msptid.8" "sim/npusim-train:npusim-train.1" \
    "sim/npusim-dist:npusim-dist.1"; do
	prog=$top_builddir/${p%%:*}; page=$DOC/${p#*:}
	[ -f "$page" ] || fail "no man page $page"
	help_ok "$prog" --help
	help_opts <"$T/help.out" >"$T/p.help"
	mdoc_opts "$page" -global >"$T/p.man"
	compare "${p%%:*}" "$T/p.help" "$T/p.man"
done
ok "msptid, npusim-train, npusim-dist: --help = their man pages"

# Installed: every man page of doc/ is in doc/Makefile.inc.
for page in "$DOC"/*.[1-8]; do
	grep -q "doc/$(basename "$page")" "$top_srcdir/doc/Makefile.inc" ||
		fail "$(basename "$page") is not installed (doc/Makefile.inc)"
done
ok "every man page is installed"
echo "cli-help: all passed"
