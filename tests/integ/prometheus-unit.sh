#!/bin/sh
# The metrics drop-in (systemd/msptid-metrics.conf, doc/metrics.md) over
# the hardened msptid.service, as systemd reads the pair: the service it
# makes runs msptid with --metrics-listen, may open Internet sockets, is
# on the host's network and may talk to localhost (Prometheus on the
# node).  The base unit allows none of that (AF_UNIX only, a private
# network namespace, IPAddressDeny=any), so a drop-in that only changed
# ExecStart= gave a daemon whose listener failed or was unreachable.
# systemd-analyze security --offline --root reads the unit and its
# drop-in directory exactly as systemd does.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null 2>&1 || {
	echo "SKIP: systemd-analyze not installed (Debian: systemd)"
	exit 77
}
T=$(mktemp -d /tmp/mspti-promunit.XXXXXX)
trap 'rm -rf "$T"' EXIT
U="$T/root/etc/systemd/system"
mkdir -p "$U/msptid.service.d"
cp "$top_builddir/systemd/msptid.service" "$top_srcdir/systemd/msptid.socket" "$U/"

# sec ROOT: systemd's view of msptid.service under ROOT.
sec() {
	systemd-analyze security --offline=true --no-pager --root="$1" \
	    msptid.service >"$T/sec.out" 2>&1 ||
		{ cat "$T/sec.out"; fail "systemd-analyze security failed"; }
}
# has MARK SETTING: the line of SETTING is marked MARK (✓ restricted,
# ✗ allowed).
has() { grep -E "^$1 $2 " "$T/sec.out" >/dev/null; }

# Without the drop-in: no Internet sockets, no host network (what the
# test below must see change, or it proves nothing).
sec "$T/root"
has '✓' 'RestrictAddressFamilies=~AF_\(INET\|INET6\)' ||
	{ cat "$T/sec.out"; fail "the base unit already allows Internet sockets"; }
has '✓' 'PrivateNetwork=' ||
	{ cat "$T/sec.out"; fail "the base unit is already on the host network"; }
echo "ok - msptid.service alone: AF_UNIX only, private network"

cp "$top_builddir/systemd/msptid-metrics.conf" "$U/msptid.service.d/metrics.conf"
sec "$T/root"
has '✗' 'RestrictAddressFamilies=~AF_\(INET\|INET6\)' ||
	{ cat "$T/sec.out"; fail "with the drop-in msptid still cannot open an Internet socket"; }
has '✗' 'PrivateNetwork=' ||
	{ cat "$T/sec.out"; fail "with the drop-in msptid still has a private network namespace (Prometheus cannot reach it)"; }
grep -E '^✓ IPAddressDeny= .*blocks all' "$T/sec.out" >/dev/null &&
	{ cat "$T/sec.out"; fail "with the drop-in every IP address is still blocked"; }
# Everything else stays as hardened as before: AF_UNIX and the inet
# families only.
has '✓' 'RestrictAddressFamilies=~AF_PACKET' ||
	fail "the drop-in opened AF_PACKET"
has '✓' 'RestrictAddressFamilies=~AF_NETLINK' ||
	fail "the drop-in opened AF_NETLINK"
echo "ok - with msptid-metrics.conf: Internet sockets, host network, localhost allowed"

# The drop-in's command: the daemon with --metrics-listen, in foreground
# (Type=notify), and the options are ones msptid accepts.
cmd=$(sed -n 's/^ExecStart=\(..*\)$/\1/p' "$top_builddir/systemd/msptid-metrics.conf")
case $cmd in
*/msptid\ *--foreground*--metrics-listen\ *) ;;
*) fail "drop-in ExecStart= is '$cmd'";;
esac
base=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$top_builddir/systemd/msptid.service")
[ "${cmd%% *}" = "$base" ] ||
	fail "drop-in starts ${cmd%% *}, msptid.service $base: not this prefix's msptid"
args=${cmd#*/msptid }
# shellcheck disable=SC2086
"$top_builddir/daemon/msptid" $args --help >/dev/null 2>"$T/opt.err" ||
	fail "msptid refuses the drop-in's options: $(cat "$T/opt.err")"
echo "ok - ExecStart=$cmd"
echo "prometheus-unit: all passed"
