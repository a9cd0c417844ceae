#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Negative entries: a LOOKUP that finds no name answers the kernel with an
# entry it may keep for negative_timeout, so a name that does not exist is
# not asked for again and again. Two mounts (tests/lib/cluster.sh --mounts 2),
# mount 1 with negative_timeout=600 and mount 2 with negative_timeout=0:
#   negative.sh MOUNT1 MOUNT2
# - mount 1 looks up a missing N; mount 2 creates N: mount 1 still says
#   ENOENT (its kernel kept the entry), until its dentries are dropped;
# - a name mount 1 looked up in vain and then creates itself is there at
#   once (the kernel drops its own negative entry);
# - mount 2 (no negative entries) sees a name mount 1 creates at once, after
#   looking it up in vain.
# The 600 s only need to outlast this test; a run slower than that is
# reported as the test's own trouble, never as a verdict.
# Exit: 0 pass, 1 a check failed, 99 the test could not run.
m1=${1:?usage: negative.sh MOUNT1 MOUNT2}
m2=${2:?usage: negative.sh MOUNT1 MOUNT2}
here=$(dirname "$(readlink -f "$0")")
. "$here/../lib/check.sh"
: "${RDMAFS_CLUSTER_DIR:?run under tests/lib/cluster.sh}"
[ "$(id -u)" = 0 ] || check_error "dropping the dentry cache needs root"
start=$(date +%s)

w=$(mktemp -d "$m1/negative.XXXXXX") || check_fail "mktemp -d in $m1"
w2=$m2/$(basename "$w")
t() { timeout 60 "$@"; }
in_time() {
	[ $(($(date +%s) - start)) -lt 500 ] ||
		check_error "the run took over 500 s: mount 1's negative entries may have expired"
}

# mount 2 must know the directory before it looks in it
t ls "$w2" >/dev/null || check_fail "mount 2 cannot list $w2"

t stat "$w/n" >/dev/null 2>&1 && check_fail "stat of a missing name on mount 1 succeeded"
t sh -c 'echo created >"$1"' sh "$w2/n" || check_fail "create $w2/n on mount 2"
t stat "$w2/n" >/dev/null || check_fail "mount 2 cannot stat the file it created"
if t stat "$w/n" >/dev/null 2>&1; then
	in_time
	check_fail "mount 1 asked again for a name it had found missing a moment before: no negative entry"
fi
in_time
echo "ok   mount 1 keeps a negative entry (another mount's new file is not seen yet)"
sync
echo 2 >/proc/sys/vm/drop_caches || check_error "cannot drop the dentry cache"
t stat "$w/n" >/dev/null || check_fail "mount 1 still does not see N after its dentries were dropped"
echo "ok   with its dentries dropped, mount 1 sees the file"

t stat "$w/own" >/dev/null 2>&1 && check_fail "stat of a missing name on mount 1 succeeded"
t sh -c 'echo mine >"$1"' sh "$w/own" || check_fail "create $w/own on mount 1"
[ "$(t cat "$w/own")" = mine ] || check_fail "mount 1 does not see the file it just created"
echo "ok   a name a mount creates itself is there at once, negative entry or not"

t stat "$w2/late" >/dev/null 2>&1 && check_fail "stat of a missing name on mount 2 succeeded"
t sh -c 'echo late >"$1"' sh "$w/late" || check_fail "create $w/late on mount 1"
[ "$(t cat "$w2/late")" = late ] ||
	check_fail "mount 2 (negative_timeout=0) does not see a file mount 1 created after its lookup"
echo "ok   with negative_timeout=0 a missing name is asked for every time"
t rm -rf "$w"
echo "negative: the kernel keeps negative entries for negative_timeout, and only then"
