#!/bin/sh
# Prints the Debian packages of scripts/debian-packages.txt that this
# machine's architecture takes, one per line.  A line "PKG [ARCH ...]"
# (debian/control's notation) names a package only some architectures
# have (libisal-dev: amd64 and arm64); it is left out elsewhere, where
# configure falls back without it.
arch=${DEB_HOST_ARCH:-$(dpkg --print-architecture 2>/dev/null || echo unknown)}
while read -r pkg archs; do
	case $pkg in ''|'#'*) continue ;; esac
	if [ -n "$archs" ]; then
		case " $(echo "$archs" | tr -d '[]') " in
		*" $arch "*) ;;
		*) continue ;;
		esac
	fi
	echo "$pkg"
done <"$(dirname "$0")/debian-packages.txt"
