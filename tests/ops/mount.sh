#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Mounting, as an operator does it: the mount helper (mount.fuse.rdmafs, what
# `mount -t fuse.rdmafs` and fstab run) and a direct rdmafs-fuse mount both
# show as fstype fuse.rdmafs with nosuid,nodev (`-o suid,dev` given to the
# helper wins); a second rdmafs mount on a mount point that has one is
# refused with a message, and the first keeps working; an option value out
# of range (busy_poll_us) is refused with a message.
# Runs under tests/lib/cluster.sh, which mounted MOUNT with rdmafs-fuse.
# Usage: mount.sh MOUNT RDMAFS_FUSE HELPER
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test could not check.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: mount.sh MOUNT RDMAFS_FUSE HELPER}
fuse=${2:?usage: mount.sh MOUNT RDMAFS_FUSE HELPER}
helper=${3:?usage: mount.sh MOUNT RDMAFS_FUSE HELPER}
if [ -z "${RDMAFS_CLUSTER_DIR:-}" ]; then
	echo "SKIP: mount.sh needs an rdmafs cluster started by cluster.sh"
	exit 77
fi
[ -x /sbin/mount.fuse3 ] || command -v mount.fuse3 >/dev/null ||
	check_error "mount.fuse3 is missing (Debian's fuse3 package): the helper cannot run"
check_need awk grep umount mountpoint
meta=$(awk '$1 == "meta" { print $2 }' "$RDMAFS_CLUSTER_DIR/daemons")
[ -n "$meta" ] || check_error "no metadata service in $RDMAFS_CLUSTER_DIR/daemons"
secret=$RDMAFS_CLUSTER_DIR/secret
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-mount.XXXXXX") || check_error "mktemp"
mkdir "$work/m2" "$work/m3" || check_error "mkdir in $work"
cleanup() {
	for m in "$work/m2" "$work/m3"; do
		mountpoint -q "$m" && umount "$m"
	done
	rm -rf "$work"
}
trap cleanup EXIT

# mount_line DIR: the mountinfo lines of the mounts on DIR, as
# "FSTYPE SOURCE MOUNT_OPTIONS" (the options before and after the separator)
mount_lines() {
	awk -v d="$1" '$5 == d {
		for (i = 7; $i != "-"; i++) ;
		print $(i + 1), $(i + 2), $6 "," $(i + 3) }' /proc/self/mountinfo
}
# has_opt LIST OPT: the comma-separated LIST holds OPT
has_opt() {
	case ",$1," in *",$2,"*) return 0 ;; esac
	return 1
}
expect_rdmafs() {
	local dir=$1 what=$2 lines type
	lines=$(mount_lines "$dir")
	[ "$(wc -l <<<"$lines")" -eq 1 ] && [ -n "$lines" ] ||
		check_fail "$what: expected one mount on $dir, mountinfo has: ${lines:-none}"
	read -r type _ opts <<<"$lines"
	[ "$type" = fuse.rdmafs ] || check_fail "$what: fstype $type, not fuse.rdmafs"
}

# the direct mount cluster.sh made
expect_rdmafs "$mnt" "the direct mount"
has_opt "$opts" nosuid && has_opt "$opts" nodev ||
	check_fail "the direct mount lacks nosuid,nodev: $opts"
echo "ok   a direct mount is fuse.rdmafs, nosuid,nodev"

# the helper
out=$(RDMAFS_FUSE=$fuse timeout 120 sh "$helper" cluster-a "$work/m2" \
	-o "meta=$meta,secret=$secret" 2>&1) || check_fail "the helper failed: $out"
expect_rdmafs "$work/m2" "the helper's mount"
has_opt "$opts" nosuid && has_opt "$opts" nodev ||
	check_fail "the helper's mount lacks nosuid,nodev: $opts"
[ "$(mount_lines "$work/m2" | awk '{ print $2 }')" = cluster-a ] ||
	check_fail "the helper's mount does not show its source: $(mount_lines "$work/m2")"
echo "ok   the helper mounts fuse.rdmafs, nosuid,nodev, source shown"

# a value out of range is refused with a message, and mounts nothing
for v in 100001 -1; do
	out=$(timeout 120 "$fuse" "$meta" "$work/m3" -o "secret=$secret,busy_poll_us=$v" 2>&1)
	rc=$?
	[ $rc -ne 124 ] || check_fail "a mount with busy_poll_us=$v hung"
	[ $rc -ne 0 ] || check_fail "a mount with busy_poll_us=$v succeeded: $(mount_lines "$work/m3")"
	grep -q "bad option value.*busy_poll_us 0 to 100000" <<<"$out" ||
		check_fail "a mount with busy_poll_us=$v: no message saying why: $out"
	[ -z "$(mount_lines "$work/m3")" ] || check_fail "a refused mount left a mount on $work/m3"
	echo "ok   busy_poll_us=$v is refused: $(head -n 1 <<<"$out")"
done

# the caller's options win (busy_poll_us taken in range)
out=$(RDMAFS_FUSE=$fuse timeout 120 sh "$helper" cluster-a "$work/m3" \
	-o "meta=$meta,secret=$secret,suid,dev,busy_poll_us=500" 2>&1) || check_fail "the helper with suid,dev failed: $out"
expect_rdmafs "$work/m3" "the helper's mount with suid,dev"
! has_opt "$opts" nosuid && ! has_opt "$opts" nodev ||
	check_fail "-o suid,dev did not win over the defaults: $opts"
umount "$work/m3" || check_fail "umount $work/m3"
echo "ok   -o suid,dev wins"

# a second mount on either is refused, and changes nothing
for pair in "helper:$work/m2" "direct:$mnt"; do
	how=${pair%%:*}
	dir=${pair#*:}
	if [ "$how" = helper ]; then
		out=$(RDMAFS_FUSE=$fuse timeout 120 sh "$helper" cluster-b "$dir" \
			-o "meta=$meta,secret=$secret" 2>&1)
	else
		out=$(timeout 120 "$fuse" "$meta" "$dir" -o "secret=$secret" 2>&1)
	fi
	rc=$?
	[ $rc -ne 124 ] || check_fail "a second $how mount on $dir hung"
	[ $rc -ne 0 ] || check_fail "a second $how mount on $dir succeeded: $(mount_lines "$dir")"
	grep -q "already an rdmafs mount" <<<"$out" ||
		check_fail "a second $how mount on $dir: no message saying why: $out"
	[ "$(mount_lines "$dir" | wc -l)" -eq 1 ] ||
		check_fail "a refused $how mount left mounts on $dir: $(mount_lines "$dir")"
	echo "ok   a second $how mount is refused: $(head -n 1 <<<"$out")"
done

# both mounts still serve the one filesystem
printf 'through the helper\n' >"$work/m2/written-by-helper" || check_fail "write through $work/m2"
grep -qx 'through the helper' "$mnt/written-by-helper" ||
	check_fail "the direct mount does not see what the helper's mount wrote"
rm -f "$mnt/written-by-helper" || check_fail "rm through $mnt"
echo "pass"
