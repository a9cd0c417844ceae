#!/usr/bin/env bash
# The README's first command, for real: scripts/rdmafs-up.sh starts a
# single-node rdmafs and mounts it; files written there read back; `status`
# reports it; `down` unmounts and stops; a second `up` finds the data again.
# Packages are assumed installed (CI installs them first).
# Usage: quickstart.sh [BUILD_DIR]. Exit 0/1, 77 if /dev/fuse or root is
# missing, 99 if the test itself could not check.
set -uo pipefail
top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
. "$top/tests/lib/check.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (mount, memlock)"; exit 77; }
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
work=$(mktemp -d /tmp/rdmafs-quickstart.XXXXXX)
# The build under test (meson passes its build root), not a new one.
export RDMAFS_SKIP_DEPS=1 RDMAFS_HOME=$work/home RDMAFS_MOUNT=$work/mnt RDMAFS_BUILD=${1:-$top/build}
RDMAFS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export RDMAFS_PORT
up=$top/scripts/rdmafs-up.sh
fail() {
	echo "FAIL: $*" >&2
	[ -f "$work/home/meta.log" ] && tail -n 20 "$work/home/meta.log" >&2
	exit 1
}
trap '"$up" down >/dev/null 2>&1; rm -rf "$work"' EXIT

timeout 300 "$up" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; fail "rdmafs-up.sh failed"; }
grep -qs " $work/mnt fuse" /proc/mounts || fail "nothing mounted on $work/mnt"
head -c 3000000 /dev/urandom >"$work/data"
cp "$work/data" "$work/mnt/data" || fail "cp into the mount failed"
check_same "$work/mnt/data" "$work/data" "a file written to the mount"
grep -q "mounted on $work/mnt" <<<"$("$up" status)" || fail "status does not report the mount"
"$up" down >/dev/null || fail "down failed"
grep -qs " $work/mnt fuse" /proc/mounts && fail "still mounted after down"
timeout 300 "$up" >"$work/up2.log" 2>&1 || fail "second start failed"
check_same "$work/mnt/data" "$work/data" "the data after down and up"
echo "ok   rdmafs-up.sh starts, mounts, serves, stops, and keeps the data"
