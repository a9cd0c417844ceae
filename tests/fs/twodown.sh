#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Two daemons of a chain of 3 lost, a write made with one copy, and the
# head changing before the second is back (issue 11: "two daemons lost at
# replicas=3: still serving, still correct"; docs/replication.md, "Losing a
# daemon: as built", 5). cluster.sh runs the killpoint daemon (--daemon
# rdmafs-daemon-killpoint, --metrics, --mounts 2) with RDMAFS_TEST_PULL_GATE,
# only to learn the chain's order from a write held at the gates. The
# metadata daemon is drained while the file is made, so its 3 copies are on
# storage 1, 2 and 3: a chain first, next, last. The file's first 256 KiB
# hold A; then:
# - first and last are killed, and once the service marks both DOWN, next
#   heads the chain alone: mount 1 overwrites the file with B, which next
#   stores, recording that first and last missed it;
# - first starts again: next, the head, copies B to it, and first turns UP
#   and heads the chain again; next still keeps its record of last, a
#   daemon still DOWN;
# - last starts again. next no longer heads the chain, and keeps its record
#   only until last serves: the copy next made to first named last as
#   lacking the chunk (ChunkWriteReq.lacking), so first records it too and,
#   as the head, copies B to last before last turns UP;
# - every copy holds B, both mounts read B, no daemon keeps a record of a
#   missed write, and every daemon is UP.
# Without the lacking list on the copy, nothing copies B to last, which
# serves A, the bytes B overwrote.
# Usage: twodown.sh DIR1 DIR2 (the same filesystem, two mounts)
# Exit: 0 pass, 1 fail, 77 not on such a cluster, 99 the test itself could
# not check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: twodown.sh DIR1 DIR2}
mnt2=${2:?usage: twodown.sh DIR1 DIR2}
check_cluster twodown.sh
gate=${RDMAFS_TEST_PULL_GATE:-}
dir=$RDMAFS_CLUSTER_DIR
ctl=$RDMAFS_CLUSTER_CTL
if [ -z "$gate" ] || [ ! -e "$dir/fuse2.pid" ] || [ ! -e "$dir/storage1.metrics-port" ]; then
	echo "SKIP: twodown.sh needs cluster.sh --daemon rdmafs-daemon-killpoint --metrics --mounts 2 and RDMAFS_TEST_PULL_GATE"
	exit 77
fi
check_need dd cmp setfattr stat head grep awk python3
rdmafsctl=$(. "$dir/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/twodown.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
# (scene.sh removes the gates and local_dir at exit)
. "$(dirname "$(readlink -f "$0")")/scene.sh"

scene_file

# 1. the chain's order
chain_order
echo "ok   the file's chain: daemon $first, then $next, then $last"

# 2. first and last killed: next heads the chain alone and stores B
for n in "$first" "$last"; do
	"$ctl" ctl kill "$n" KILL || check_error "cannot kill daemon $n"
done
read_pids
wait_state "$first" down "daemon $first killed"
wait_state "$last" down "daemon $last killed"
maps_current "daemons $first and $last killed"
dd if="$local_dir/B" of="$mnt/h/f" bs=256K oflag=direct conv=notrunc status=none ||
	check_fail "writing B with daemons $first and $last down"
holds "$next" "$local_dir/B" || check_fail "daemon $next, the chain's head, does not hold B"
for n in "$first" "$last"; do
	holds "$n" "$local_dir/A" || check_error "daemon $n's copy is not A after it was killed (the scene is not set)"
done
records_are "$next" 2 "after B, written with daemons $first and $last down"
echo "ok   daemon $next alone stored B, and records that daemons $first and $last missed it"

# 3. first back: next copies B to it, and first heads the chain again
"$ctl" ctl start "$first" || check_fail "restarting daemon $first"
read_pids
wait_state "$first" up "daemon $first back"
maps_current "daemon $first back"
holds "$first" "$local_dir/B" || check_fail "daemon $first's copy is not B once it is back and UP"
records_are "$next" 1 "once daemon $first is UP (daemon $last's record left)"
# next's copy to first named last as lacking the chunk: first records it too
records_are "$first" 1 "once daemon $first is UP with next's copy (daemon $last's record)"
echo "ok   daemon $first is back with B and heads the chain; it and daemon $next record that daemon $last lacks B"

# 4. last back: first, which learnt from next's copy that last lacks B, copies it
"$ctl" ctl start "$last" || check_fail "restarting daemon $last"
read_pids
check_all_up "$rdmafsctl" 4 90 "daemon $last back" "$local_dir/status"
no_records "daemon $last back"
for n in 1 2 3; do
	holds "$n" "$local_dir/B" || check_fail "daemon $n's copy is not B once daemon $last is back and every daemon is UP"
done
read_is "$mnt2" "$local_dir/B" "once every daemon is back"
read_is "$mnt" "$local_dir/B" "once every daemon is back"
echo "ok   a write two daemons of its chain missed reaches both, the second after the chain's head changed"
