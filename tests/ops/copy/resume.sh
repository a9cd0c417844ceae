#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# resume.sh COPY TREECMP: rdmafs-copy is killed with SIGKILL in the middle of
# a large tree, in both directions; running it again finishes the copy, with
# the temporaries of the killed run removed and the result identical to the
# source. Runs inside tests/lib/cluster.sh --no-fuse.
# RDMAFS_COPY_BIG_MIB (48) and RDMAFS_COPY_DIRS (20) size the tree: the
# rdma-vm guest, about ten times slower, copies a smaller one;
# RDMAFS_COPY_TIMEOUT_MS gives its copies a longer per-call timeout.
set -u
copy=$(readlink -f "$1") treecmp=$(readlink -f "$2")
work=$RDMAFS_CLUSTER_DIR/resume
src=$work/src
big_mib=${RDMAFS_COPY_BIG_MIB:-48}
dirs=${RDMAFS_COPY_DIRS:-20}
if [ -n "${RDMAFS_COPY_TIMEOUT_MS:-}" ]; then
	copy_timeout=(--timeout "$RDMAFS_COPY_TIMEOUT_MS")
else
	copy_timeout=()
fi
. "$(dirname "$(readlink -f "$0")")/../../lib/check.sh"

# check WHAT COMMAND...: exit 0 ok, 1 FAIL, other: the check could not run
check() {
	check_run "$@"
}

# stopped PID: every thread of PID is stopped (SIGSTOP takes effect when a
# thread leaves its system call, not when kill returns)
stopped() {
	local t state
	for t in /proc/"$1"/task/*/stat; do
		state=$(sed 's/.*) //' "$t" 2>/dev/null | cut -d' ' -f1)
		[ "$state" = T ] || [ "$state" = t ] || [ -z "$state" ] || return 1
	done
	return 0
}

# kill_when TEST COPY-ARGS...: starts the copy and SIGKILLs it at a moment
# TEST (a shell function, polled) holds: the copy is stopped first and TEST
# asked again, so the state it saw is the state the kill leaves (a file the
# copy finished between the two would otherwise leave no temporary); fails if
# the copy ended first
kill_when() {
	local test=$1 pid deadline i
	shift
	"$copy" "${copy_timeout[@]}" -q "$@" &
	pid=$!
	deadline=$(($(date +%s) + 600)) # a hang guard: a slow copy is waited for
	while :; do
		if "$test" && kill -STOP "$pid" 2>/dev/null; then
			for i in $(seq 500); do
				stopped "$pid" && break
				sleep 0.01
			done
			"$test" && break
			kill -CONT "$pid"
		fi
		if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -gt "$deadline" ]; then
			echo "the copy ended before the moment to kill it: nothing was interrupted" >&2
			kill -KILL "$pid" 2>/dev/null
			wait "$pid"
			return 1
		fi
		sleep 0.02
	done
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	return 0
}

# chunk files the daemons hold (1 MiB each for the big files)
chunks() {
	find "$RDMAFS_CLUSTER_DIR"/meta/chunks "$RDMAFS_CLUSTER_DIR"/storage*/chunks -type f 2>/dev/null |
		wc -l
}

# local -> rdmafs: two of the six big files written, the third under way
two_big_files_in_rdmafs() {
	[ "$(chunks)" -ge $((2 * big_mib + 14)) ]
}

# rdmafs -> local: a big file complete and the next one under its temporary name
big_file_in_flight_locally() {
	[ -f "$work/back/big1" ] && ls "$work/back"/.rdmafs-copy.*.tmp >/dev/null 2>&1
}

# a large tree: big files (many pieces in flight when killed) and many small ones
mkdir -p "$src"
for i in 1 2 3 4 5 6; do
	head -c $((big_mib * 1024 * 1024 + i * 4099)) /dev/urandom >"$src/big$i"
done
for d in $(seq "$dirs"); do
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
check "killed midway (local -> rdmafs)" \
	kill_when two_big_files_in_rdmafs -j 1 --inflight 1 "$src" rdmafs:/resume
out=$("$copy" "${copy_timeout[@]}" -v "$src" rdmafs:/resume 2>&1)
rc=$?
echo "$out" | tail -n 3
check "resumed copy exits 0" test $rc -eq 0
check "resumed copy removed the killed run's temporaries" \
	grep -q "stale temporary of an interrupted copy removed" <<<"$out"
check "resumed copy skipped what was complete" grep -Eq " [1-9][0-9]* skipped" <<<"$out"
out=$("$copy" "${copy_timeout[@]}" -v "$src" rdmafs:/resume 2>&1)
check "a third run finds no temporaries" bash -c '! grep -q "stale temporary" <<<"$1"' _ "$out"
check "a third run copies nothing" grep -q " 0 files (0 B) copied.* 0 failed" <<<"$out"

# rdmafs -> local, killed midway too
check "killed midway (rdmafs -> local)" \
	kill_when big_file_in_flight_locally -j 1 --inflight 1 rdmafs:/resume "$work/back"
left=$(find "$work/back" -name '.rdmafs-copy.*.tmp' | wc -l)
check "the killed run left a temporary ($left)" test "$left" -ge 1
out=$("$copy" "${copy_timeout[@]}" -v rdmafs:/resume "$work/back" 2>&1)
rc=$?
check "resumed copy back exits 0 ($rc)" test $rc -eq 0
check "resumed copy back removed the temporaries" \
	grep -q "stale temporary of an interrupted copy removed" <<<"$out"
check "resumed copy back skipped what was complete" grep -Eq " [1-9][0-9]* skipped" <<<"$out"
left=$(find "$work/back" -name '.rdmafs-copy.*' | wc -l)
check "no temporaries left ($left)" test "$left" -eq 0
check "identical after both interruptions" "$treecmp" $owner_flag "$src" "$work/back"

# --verify-existing catches a complete-looking file whose bytes differ: one
# byte changed (to another value: writing a fixed one left the random file as
# it was one time in 256, and the check then failed by luck)
byte=$(od -An -tu1 -j1000 -N1 "$work/back/big3" | tr -d ' ')
[ -n "$byte" ] || check_error "cannot read byte 1000 of $work/back/big3"
# shellcheck disable=SC2059 # the format is the byte's octal escape
printf "\\$(printf %03o $(((byte + 1) % 256)))" |
	dd of="$work/back/big3" bs=1 seek=1000 conv=notrunc status=none ||
	check_error "cannot change byte 1000 of $work/back/big3"
cmp -s "$src/big3" "$work/back/big3" && check_error "changing byte 1000 of $work/back/big3 left it as it was"
touch -r "$src/big3" "$work/back/big3"
out=$("$copy" "${copy_timeout[@]}" --verify-existing rdmafs:/resume "$work/back" 2>&1)
check "--verify-existing copies the damaged file again" \
	grep -q " 1 files (.*) copied.* 0 failed" <<<"$out"
check "identical again" "$treecmp" $owner_flag "$src" "$work/back"

check_summary
echo "resume: all checks passed"
