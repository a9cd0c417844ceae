#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# roundtrip.sh COPY TREECMP: a tree with every kind of file goes local ->
# rdmafs -> local with rdmafs-copy and must come back identical in bytes and
# metadata (treecmp). A second run must skip everything. Runs inside
# tests/lib/cluster.sh --no-fuse (RDMAFS_META, RDMAFS_SECRET_FILE, RDMAFS_CLUSTER_DIR).
set -u
copy=$(readlink -f "$1") treecmp=$(readlink -f "$2")
work=$RDMAFS_CLUSTER_DIR/roundtrip
src=$work/src
. "$(dirname "$(readlink -f "$0")")/../../lib/check.sh"

# check WHAT COMMAND...: exit 0 ok, 1 FAIL, other: the check could not run
check() {
	check_run "$@"
}

mkdir -p "$src"
cd "$src" || exit 1
root=0
[ "$(id -u)" = 0 ] && root=1

# regular, empty, larger than several chunks (1 MiB), odd sizes
echo hello >regular
: >empty
head -c $((9 * 1024 * 1024 + 12345)) /dev/urandom >large
head -c 1048576 /dev/urandom >exactly-one-chunk
# sparse: data at the start, in the middle and at the end of 64 MiB of holes
truncate -s 64M sparse
printf 'start' | dd of=sparse conv=notrunc status=none
printf 'middle' | dd of=sparse bs=1 seek=$((20 * 1024 * 1024 + 7)) conv=notrunc status=none
printf 'end' | dd of=sparse bs=1 seek=$((64 * 1024 * 1024 - 3)) conv=notrunc status=none
# only a hole, and zeros written as data (copied as holes, read back as zeros)
truncate -s 5M all-hole
head -c $((3 * 1024 * 1024)) /dev/zero >written-zeros
# hard links: a group of three across directories, and a group of a large file
mkdir -p links/deeper
ln regular links/hard1
ln regular links/deeper/hard2
ln large links/large-link
# symlinks: absolute, relative, dangling, to a directory
ln -s /etc/hostname abs-link
ln -s ../regular links/rel-link
ln -s does/not/exist dangling
ln -s links dir-link
# odd names
echo space >"with space"
echo nl >$'new\nline'
echo uni >"ünïcödé-名前-🚀"
echo dash >-leading-dash
echo long >"$(printf 'n%.0s' $(seq 255))"
echo tab >$'tab\tname'
# xattrs on a file and a directory, binary values
setfattr -n user.text -v "some value" regular
setfattr -n user.binary -v 0x00ff10ee large
setfattr -n user.empty regular
setfattr -n user.dirattr -v d links
# mode bits
echo suid >setuid && chmod 4755 setuid
echo sgid >setgid && chmod 2750 setgid
echo private >private && chmod 0600 private
echo ro >readonly && chmod 0444 readonly
mkfifo fifo
mkdir -p sticky && chmod 1777 sticky
mkdir -p rodir && echo inside >rodir/file && chmod 0555 rodir
mkdir -p closed && echo secret >closed/file && chmod 0700 closed
mkdir -p empty-dir
if [ $root = 1 ]; then
	echo owned >owned && chown 1234:5678 owned
	chown -h 4321:8765 links/rel-link
	mkdir -p owned-dir && chown 2345:6789 owned-dir
	setfattr -n trusted.note -v root-only regular
	mknod chardev c 1 3
fi
# times with nanoseconds, set last (directories after their contents)
touch -h -d "2001-02-03 04:05:06.123456789" regular abs-link
touch -d "1999-12-31 23:59:59.5" large sparse
touch -h -d "2010-10-10 10:10:10.000000001" dangling
for d in links/deeper links rodir sticky empty-dir closed .; do
	touch -d "2005-05-05 05:05:05.555555555" "$d"
done
cd / || exit 1

owner_flag=
[ $root = 1 ] && owner_flag=--owner

check "copy local -> rdmafs" "$copy" -q "$src" rdmafs:/roundtrip
check "copy rdmafs -> local" "$copy" -q rdmafs:/roundtrip "$work/back"
check "the round trip is identical" "$treecmp" $owner_flag "$src" "$work/back"

# the sparse file is sparse on the way back (treecmp checks it too: say it here)
blocks=$(stat -c %b "$work/back/sparse")
check "sparse copy has few blocks ($blocks x 512 for 64 MiB)" test "$blocks" -lt 4096
blocks=$(stat -c %b "$work/back/written-zeros")
check "zeros written as data come back as holes ($blocks blocks)" test "$blocks" -lt 512
# and in rdmafs: the chunks hold about the 10 MiB of data, not the 72 MiB of holes and zeros
stored=$(du -sk "$RDMAFS_CLUSTER_DIR"/storage*/chunks "$RDMAFS_CLUSTER_DIR"/meta/chunks 2>/dev/null |
	awk '{s += $1} END {printf "%.0f\n", s}')
check "the daemons' chunks take ${stored} KiB for 86 MiB apparent" test "$stored" -lt 24576

# a second run of either direction copies nothing and skips everything
out=$("$copy" "$src" rdmafs:/roundtrip 2>&1)
echo "$out"
check "re-run local -> rdmafs copies nothing" grep -q " 0 files (0 B) copied.* 0 failed" <<<"$out"
out=$("$copy" rdmafs:/roundtrip "$work/back" 2>&1)
check "re-run rdmafs -> local copies nothing" grep -q " 0 files (0 B) copied.* 0 failed" <<<"$out"
check "still identical" "$treecmp" $owner_flag "$src" "$work/back"

# a single file, to an existing directory (goes inside) and by the inline form
hostport=${RDMAFS_META#*://}
mkdir -p "$work/emptydir"
check "an empty directory" "$copy" -q "$work/emptydir" rdmafs:/single
check "single file into a directory, rdmafs://HOST:PORT form" \
	env -u RDMAFS_META "$copy" -q "$src/large" "rdmafs://$hostport/single"
check "single file back out" "$copy" -q rdmafs:/single/large "$work/single"
check "single file identical" cmp "$src/large" "$work/single"

# a file that changed at the source is copied again on the next run
echo changed >>"$src/regular"
touch -d "2005-05-05 05:05:05.555555555" "$src"
out=$("$copy" "$src" rdmafs:/roundtrip 2>&1)
check "changed file copied again" grep -q " 1 files (.*) copied.* 0 failed" <<<"$out"
check "changed tree comes back" "$copy" -q rdmafs:/roundtrip "$work/back2"
check "changed tree identical" "$treecmp" $owner_flag "$src" "$work/back2"

# no temporaries anywhere
left=$(find "$work" -name '.rdmafs-copy.*' | wc -l)
check "no temporaries left locally ($left)" test "$left" -eq 0

check_summary
echo "roundtrip: all checks passed"
