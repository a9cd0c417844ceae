#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# CRAQ's dirty copies, seen from a mount (docs/replication.md, "Dirty copies,
# as built"). cluster.sh runs the killpoint daemon (--daemon
# rdmafs-daemon-killpoint, --metrics, --mounts 2) with
# RDMAFS_TEST_FORWARD_GATE: each daemon holds its forwards of replicated
# writes while the test's gate file for it exists. A 4 KiB block of a file of
# 3 copies holds A; the gates close, and a writer on mount 1 overwrites the
# block with B. Reads are O_DIRECT on mount 2 (mount 1 would, rightly, have
# its reader wait for its own writer):
# - while the head holds the write, a read returns A;
# - once the head stored B and forwarded it, the middle daemon holding it, a
#   read still returns A: the head and the middle are dirty, and the read goes
#   on to the tail, which has not got B yet (the copy that stores last);
# - once the gates open, the write succeeds and reads return B;
# - mount 2's rdmafs_client_replica_moves_total grew by 3 or more (one move
#   past the dirty head, then two past the head and the middle).
# The gates wait for the test, not for time; the steps between the head's
# gate and the middle's must fit in the head's forward timeout (4 s) and the
# writer's call timeout (5 s), and take milliseconds.
# Usage: dirty.sh DIR1 DIR2 (the same filesystem, two mounts)
# Exit: 0 pass, 1 fail, 77 not on such a cluster, 99 the test itself could
# not check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: dirty.sh DIR1 DIR2}
mnt2=${2:?usage: dirty.sh DIR1 DIR2}
check_cluster dirty.sh
gate=${RDMAFS_TEST_FORWARD_GATE:-}
dir=$RDMAFS_CLUSTER_DIR
if [ -z "$gate" ] || [ ! -e "$dir/fuse2.metrics-port" ]; then
	echo "SKIP: dirty.sh needs cluster.sh --daemon rdmafs-daemon-killpoint --metrics --mounts 2 and RDMAFS_TEST_FORWARD_GATE"
	exit 77
fi
check_need dd cmp setfattr python3 head
rdmafsctl=$(. "$dir/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/dirty.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do rm -f "$gate.$p"; done
	rm -rf "$local_dir"
}
trap cleanup EXIT

# mount 2's replica moves so far
moves() {
	check_metric fuse2 rdmafs_client_replica_moves_total
}

# held: the pids of the daemons holding a forward at their gates, one a line
held() {
	check_gate_held "$gate" "${pids[@]}"
}

# wait_held [PID]: waits up to 30 s for one daemon, not PID, to hold a forward
wait_held() {
	check_gate_wait "$gate" "${1:-}" "${pids[@]}"
}

# read_is FILE WHAT: the block read with O_DIRECT on mount 2 holds FILE's bytes
read_is() {
	dd if="$mnt2/dirty/f" of="$local_dir/got" bs=4096 count=1 iflag=direct status=none ||
		check_fail "reading the block ($2): dd exited $?"
	check_same "$local_dir/got" "$1" "the block read $2"
}

for n in meta storage1 storage2 storage3; do
	p=$(cat "$dir/$n.pid") || check_error "no pid file for $n"
	pids+=("$p")
done
# the daemons' maps settled: a forward refused meanwhile would be resynced under the test
check_all_up "$rdmafsctl" 4 60 "before the gates" "$local_dir/status"
w=$mnt/dirty
mkdir "$w" || check_fail "mkdir $w"
setfattr -n rdmafs.replicas -v 3 "$w" || check_fail "setfattr rdmafs.replicas 3"
for b in A B; do
	head -c 4096 /dev/urandom >"$local_dir/$b" || check_error "making the block $b"
done
dd if="$local_dir/A" of="$w/f" bs=4096 oflag=direct status=none || check_fail "writing A"
read_is "$local_dir/A" "after writing A"
check_all_up "$rdmafsctl" 4 60 "before the gates" "$local_dir/status"
moves0=$(moves)

for p in "${pids[@]}"; do : >"$gate.$p" || check_error "cannot close the gate $gate.$p"; done
dd if="$local_dir/B" of="$w/f" bs=4096 oflag=direct conv=notrunc status=none 2>"$local_dir/writer.err" &
writer=$!
wait_held || check_fail "the write of B never reached a head's forward (30 s)"
head_pid=$(held)
read_is "$local_dir/A" "while the head holds B"
rm -f "$gate.$head_pid"
wait_held "$head_pid" || check_fail "B never reached the middle daemon's forward (30 s)"
read_is "$local_dir/A" "while B is stored at the head and on its way down the chain"
for p in "${pids[@]}"; do rm -f "$gate.$p"; done
wait "$writer" || check_fail "writing B exited $?: $(cat "$local_dir/writer.err")"
read_is "$local_dir/B" "once the chain answered"
moves1=$(moves)
[ $((moves1 - moves0)) -ge 3 ] ||
	check_fail "the mount moved $((moves1 - moves0)) reads to another copy (want at least 3: past the dirty head, then the head and the middle)"
echo "ok   a block being written reads as before from the copies the write has not reached, until the chain answers ($((moves1 - moves0)) reads moved past dirty copies)"
