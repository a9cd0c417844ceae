#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# resume.sh COPY TREECMP: rdmafs-copy is killed with SIGKILL in the middle of
# a large tree, in both directions; running it again finishes the copy, with
# the temporaries of the killed run removed and the result identical to the
# source. Runs inside copy-cluster.sh.
set -u
copy=$1 treecmp=$2
work=$RDMAFS_CLUSTER_DIR/resume
src=$work/src
fails=0

check() {
	local what=$1
	shift
	if "$@"; then
		echo "ok: $what"
	else
		echo "FAIL: $what" >&2
		fails=$((fails + 1))
	fi
}

# kill_midway SECONDS COPY-ARGS...: starts the copy, SIGKILLs it after
# SECONDS; fails if it was already done (the interruption proved nothing)
kill_midway() {
	local delay=$1 pid
	shift
	"$copy" -q "$@" &
	pid=$!
	sleep "$delay"
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "the copy finished in under $delay s: nothing was interrupted" >&2
		wait "$pid"
		return 1
	fi
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	return 0
}

# a large tree: big files (many pieces in flight when killed) and many small ones
mkdir -p "$src"
for i in 1 2 3 4 5 6; do
	head -c $((48 * 1024 * 1024 + i * 4099)) /dev/urandom >"$src/big$i"
done
for d in $(seq 20); do
	mkdir -p "$src/dir$d"
	for f in $(seq 60); do
		head -c $(((d * 60 + f) * 37 % 70000)) /dev/urandom >"$src/dir$d/file$f"
	done
	ln "$src/dir$d/file1" "$src/dir$d/link1"
	ln -s file2 "$src/dir$d/sym2"
done
owner_flag=
[ "$(id -u)" = 0 ] && owner_flag=--owner

# local -> rdmafs, one file at a time so that the kill lands midway
check "killed midway (local -> rdmafs)" kill_midway 1.5 -j 1 --inflight 1 "$src" rdmafs:/resume
out=$("$copy" -v "$src" rdmafs:/resume 2>&1)
rc=$?
echo "$out" | tail -n 3
check "resumed copy exits 0" test $rc -eq 0
check "resumed copy removed the killed run's temporaries" \
	grep -q "stale temporary of an interrupted copy removed" <<<"$out"
check "resumed copy skipped what was complete" grep -Eq " [1-9][0-9]* skipped" <<<"$out"
out=$("$copy" -v "$src" rdmafs:/resume 2>&1)
check "a third run finds no temporaries" bash -c '! grep -q "stale temporary" <<<"$1"' _ "$out"
check "a third run copies nothing" grep -q " 0 files (0 B) copied.* 0 failed" <<<"$out"

# rdmafs -> local, killed midway too
check "killed midway (rdmafs -> local)" kill_midway 1.5 -j 1 --inflight 1 rdmafs:/resume "$work/back"
left=$(find "$work/back" -name '.rdmafs-copy.*.tmp' | wc -l)
echo "info: the killed run left $left temporaries"
check "resumed copy back exits 0" "$copy" -q rdmafs:/resume "$work/back"
left=$(find "$work/back" -name '.rdmafs-copy.*' | wc -l)
check "no temporaries left ($left)" test "$left" -eq 0
check "identical after both interruptions" "$treecmp" $owner_flag "$src" "$work/back"

# --verify-existing catches a complete-looking file whose bytes differ
printf 'X' | dd of="$work/back/big3" bs=1 seek=1000 conv=notrunc status=none
touch -r "$src/big3" "$work/back/big3"
out=$("$copy" --verify-existing rdmafs:/resume "$work/back" 2>&1)
check "--verify-existing copies the damaged file again" \
	grep -q " 1 files (.*) copied.* 0 failed" <<<"$out"
check "identical again" "$treecmp" $owner_flag "$src" "$work/back"

[ $fails -eq 0 ] || { echo "$fails checks failed" >&2; exit 1; }
echo "resume: all checks passed"
