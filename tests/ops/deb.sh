#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Builds the .debs with packaging/build-deb.sh and checks what they hold:
# the daemon, the systemd unit (Type=notify, LimitMEMLOCK=infinity), the
# example config and its man page in rdmafs-daemon; the three client
# programs (rdmafs-fuse, rdmafs-copy, rdmafsctl), the mount helper
# (executable) and their man pages in rdmafs-client. The extracted programs
# must run (--help).
#
#   tests/ops/deb.sh SRCDIR
#
# Exit 0 pass, 1 fail, 99 the test could not check (dpkg-buildpackage missing).
set -uo pipefail

srcdir=${1:?usage: deb.sh SRCDIR}
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# scripts/install-deps.sh installs dpkg-dev: without it the test cannot check.
. "$srcdir/tests/lib/check.sh"
check_need dpkg-buildpackage dpkg-deb

work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-deb-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! "$srcdir/packaging/build-deb.sh" "$work/out" >"$work/build.log" 2>&1; then
	tail -n 60 "$work/build.log" >&2
	fail "packaging/build-deb.sh failed (last lines above)"
fi

shopt -s nullglob
daemon_debs=("$work"/out/rdmafs-daemon_*.deb)
client_debs=("$work"/out/rdmafs-client_*.deb)
[ ${#daemon_debs[@]} -eq 1 ] || fail "expected one rdmafs-daemon_*.deb, got: ${daemon_debs[*]:-none}"
[ ${#client_debs[@]} -eq 1 ] || fail "expected one rdmafs-client_*.deb, got: ${client_debs[*]:-none}"

# Paths as dpkg-deb -c prints them (the sixth column).
contents() {
	dpkg-deb -c "$1" | awk '{ print $6 }'
}

expect() {
	local deb=$1 path=$2
	contents "$deb" | grep -qxF -- "$path" || fail "$(basename "$deb") lacks $path"
}

daemon_deb=${daemon_debs[0]}
client_deb=${client_debs[0]}
for path in ./usr/sbin/rdmafs-daemon \
	./lib/systemd/system/rdmafs-daemon@.service ./etc/rdmafs/daemon.conf.example \
	./usr/share/man/man8/rdmafs-daemon.8.gz; do
	expect "$daemon_deb" "$path"
done
for path in ./usr/bin/rdmafs-fuse ./usr/bin/rdmafs-copy ./usr/sbin/rdmafsctl \
	./usr/sbin/mount.fuse.rdmafs ./etc/rdmafs/client.conf.example \
	./usr/share/man/man8/rdmafs-fuse.8.gz \
	./usr/share/man/man8/mount.fuse.rdmafs.8.gz ./usr/share/man/man8/rdmafsctl.8.gz \
	./usr/share/man/man1/rdmafs-copy.1.gz; do
	expect "$client_deb" "$path"
done
for path in ./usr/sbin/rdmafsctl ./usr/bin/rdmafs-fuse; do
	! contents "$daemon_deb" | grep -qxF -- "$path" || fail "rdmafs-daemon holds $path too"
done
# mount(8) runs the helper: it must be executable
mode=$(dpkg-deb -c "$client_deb" | awk '$6 == "./usr/sbin/mount.fuse.rdmafs" { print $1 }')
[ "$mode" = "-rwxr-xr-x" ] || fail "the mount helper's mode is ${mode:-missing}, not -rwxr-xr-x"

root="$work/root"
dpkg-deb -x "$daemon_deb" "$root" || fail "dpkg-deb -x $daemon_deb"
dpkg-deb -x "$client_deb" "$root" || fail "dpkg-deb -x $client_deb"
"$root/usr/sbin/rdmafs-daemon" --help >"$work/help.out" 2>&1 ||
	fail "the packaged rdmafs-daemon --help exits $?: $(cat "$work/help.out")"
grep -q -- --data-dir "$work/help.out" || fail "rdmafs-daemon --help does not document --data-dir"
"$root/usr/sbin/rdmafsctl" --help >"$work/help.out" 2>&1 ||
	fail "the packaged rdmafsctl --help exits $?: $(cat "$work/help.out")"
grep -q drain "$work/help.out" || fail "rdmafsctl --help does not list drain"
for prog in usr/bin/rdmafs-fuse usr/bin/rdmafs-copy; do
	"$root/$prog" --help >"$work/help.out" 2>&1 ||
		fail "the packaged $prog --help exits $?: $(cat "$work/help.out")"
done

unit="$root/lib/systemd/system/rdmafs-daemon@.service"
grep -qx 'Type=notify' "$unit" || fail "the unit is not Type=notify: $(grep '^Type=' "$unit")"
grep -qx 'LimitMEMLOCK=infinity' "$unit" || fail "the unit lacks LimitMEMLOCK=infinity"

echo "PASS: $(basename "$daemon_deb") and $(basename "$client_deb")"
