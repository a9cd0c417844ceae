#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Builds the rdmafs .debs (rdmafs-daemon, rdmafs-client) from this source
# tree and puts them in OUTDIR (default: ./deb-out).
#
#   packaging/build-deb.sh [OUTDIR]
#
# dpkg-buildpackage wants debian/ at the top of the tree, and the tree keeps
# it in packaging/debian: so the sources (the files git knows, committed or
# not, plus new files that are not ignored; build directories stay out) are
# copied to a temporary directory, packaging/debian becomes debian/ there,
# and `dpkg-buildpackage -us -uc -b` builds the binary packages. The source
# tree is not written to. Needs the build dependencies of
# packaging/debian/control (scripts/install-deps.sh installs them); root is
# not needed. KEEP_BUILD_DIR=1 keeps the temporary tree for debugging.
set -euo pipefail

die() {
	echo "build-deb: $*" >&2
	exit 1
}

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
outdir=${1:-deb-out}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

for tool in dpkg-buildpackage dpkg-parsechangelog dh; do
	command -v "$tool" >/dev/null || die "$tool not found: run scripts/install-deps.sh"
done

# The package version comes from debian/changelog; say so when it lags
# behind the project version in meson.build.
deb_version=$(dpkg-parsechangelog -l "$srcdir/packaging/debian/changelog" -S Version)
meson_version=$(sed -n "s/^[[:space:]]*version:[[:space:]]*'\([^']*\)'.*/\1/p" \
	"$srcdir/meson.build" | head -n 1)
if [ -n "$meson_version" ] && [ "$deb_version" != "$meson_version" ]; then
	echo "build-deb: warning: debian/changelog says $deb_version, meson.build says" \
		"$meson_version (add a changelog entry: dch -v $meson_version)" >&2
fi

workdir=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-deb.XXXXXX")
cleanup() {
	if [ "${KEEP_BUILD_DIR:-0}" = 1 ]; then
		echo "build-deb: kept $workdir" >&2
	else
		rm -rf "$workdir"
	fi
}
trap cleanup EXIT

tree="$workdir/rdmafs-$deb_version"
mkdir -p "$tree"
if git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Files deleted in the work tree but still in the index are skipped.
	git -C "$srcdir" ls-files -z --cached --others --exclude-standard |
		(cd "$srcdir" && while IFS= read -r -d '' f; do
			[ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"
		done) |
		tar -C "$srcdir" --null -T - -cf - | tar -C "$tree" -xf -
else
	# A release tarball: everything but build directories.
	tar -C "$srcdir" --exclude='./build*' --exclude='./.git' -cf - . | tar -C "$tree" -xf -
fi
[ -d "$tree/packaging/debian" ] || die "no packaging/debian in $srcdir"
rm -rf "$tree/debian"
cp -a "$tree/packaging/debian" "$tree/debian"

jobs=$(nproc 2>/dev/null || echo 1)
echo "build-deb: building rdmafs $deb_version in $tree" >&2
(cd "$tree" && DEB_BUILD_OPTIONS="parallel=$jobs ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -us -uc -b) ||
	die "dpkg-buildpackage failed (KEEP_BUILD_DIR=1 keeps $workdir to look at)"

shopt -s nullglob
debs=("$workdir"/*.deb)
[ ${#debs[@]} -gt 0 ] || die "dpkg-buildpackage made no .deb"
cp "${debs[@]}" "$workdir"/*.buildinfo "$workdir"/*.changes "$outdir"/
for deb in "${debs[@]}"; do
	echo "$outdir/$(basename "$deb")"
done
