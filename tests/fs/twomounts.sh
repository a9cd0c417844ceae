#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Two mounts of one file system (two rdmafs-fuse processes): what one writes
# and closes, the other opens and reads, with the new content and size, both
# ways; growing, shrinking and overwriting a file the other mount has cached.
# Usage: twomounts.sh DIR1 DIR2 (the same file system, mounted twice)
# Exit: 0 pass, 1 fail, 99 the test itself could not check.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
m1=${1:?usage: twomounts.sh DIR1 DIR2}
m2=${2:?usage: twomounts.sh DIR1 DIR2}

fail() {
	check_fail "$@"
}
# every access is bounded: a hang is a failure, not a stuck suite
t() {
	timeout 60 "$@"
}

work=$(mktemp -d "$m1/twomounts.XXXXXX") || fail "mktemp in $m1"
w1=$work
w2=$m2/${work##*/}
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/twomounts.XXXXXX") || fail "mktemp"
trap 'rm -rf "$local_dir"' EXIT
t test -d "$w2" || fail "$w2: the directory made on mount 1 is not visible on mount 2"

# same_file MOUNT_PATH LOCAL_COPY WHAT: open+read on one mount equals the copy
same_file() {
	local got want
	want=$(stat -c %s "$2")
	# the size a reader sees is what it can read, not a cached st_size
	got=$(t cat "$1" | wc -c) || fail "$3: cannot read $1"
	[ "$got" = "$want" ] || fail "$3: $1 reads $got bytes, expected $want"
	check_same "$1" "$2" "$3: what the other mount wrote" 60
	got=$(t stat -c %s "$1")
	[ "$got" = "$want" ] || fail "$3: stat of $1 after open says $got bytes, expected $want"
}

# 1. a new file written and closed on mount 1, read on mount 2
head -c $((3 * 1024 * 1024 + 123)) /dev/urandom >"$local_dir/a"
t cp "$local_dir/a" "$w1/a" || fail "write $w1/a"
same_file "$w2/a" "$local_dir/a" "new file, 1 -> 2"
echo "ok   new file written on mount 1 reads the same on mount 2"

# 2. mount 2 has the file cached; mount 1 grows it across a chunk boundary
t stat "$w2/a" >/dev/null
t cat "$w2/a" >/dev/null
head -c $((1024 * 1024 + 7)) /dev/urandom >"$local_dir/more"
t sh -c 'cat "$1" >>"$2"' sh "$local_dir/more" "$w1/a" || fail "append on mount 1"
cat "$local_dir/more" >>"$local_dir/a"
same_file "$w2/a" "$local_dir/a" "grown on 1, cached on 2"
echo "ok   growth on mount 1 seen by mount 2 after close/open"

# 3. mount 1 shrinks it
t truncate -s 1000 "$w1/a" || fail "truncate on mount 1"
truncate -s 1000 "$local_dir/a"
same_file "$w2/a" "$local_dir/a" "shrunk on 1, cached on 2"
echo "ok   truncation on mount 1 seen by mount 2"

# 4. the other way: mount 2 overwrites in the middle and extends past 2 MiB
t cat "$w1/a" >/dev/null
head -c 300000 /dev/urandom >"$local_dir/patch"
t dd if="$local_dir/patch" of="$w2/a" bs=1000 seek=2000 conv=notrunc status=none ||
	fail "overwrite on mount 2"
dd if="$local_dir/patch" of="$local_dir/a" bs=1000 seek=2000 conv=notrunc status=none
same_file "$w1/a" "$local_dir/a" "written on 2, cached on 1"
echo "ok   write on mount 2 seen by mount 1"

# 5. a small file rewritten with other content of the same size
printf 'version one\n' >"$local_dir/small"
t cp "$local_dir/small" "$w1/small" || fail "write $w1/small"
same_file "$w2/small" "$local_dir/small" "small file"
printf 'version two\n' >"$local_dir/small"
t sh -c 'printf "version two\n" >"$1"' sh "$w1/small" || fail "rewrite $w1/small"
same_file "$w2/small" "$local_dir/small" "same-size rewrite"
echo "ok   same-size rewrite on mount 1 seen by mount 2"

# 6. a file created on mount 2 in a new directory, read on mount 1
t mkdir "$w2/sub" || fail "mkdir on mount 2"
head -c 5000 /dev/urandom >"$local_dir/new"
t cp "$local_dir/new" "$w2/sub/new" || fail "write on mount 2"
same_file "$w1/sub/new" "$local_dir/new" "new file in a new directory, 2 -> 1"
echo "ok   new directory and file on mount 2 seen by mount 1"

t rm -rf "$work" || fail "cleanup of $work"
echo "pass"
