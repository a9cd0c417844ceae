#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A head killed mid-write that finds another head when it is back
# (docs/replication.md, "A head killed mid-write"). cluster.sh runs the
# killpoint daemon (--daemon rdmafs-daemon-killpoint, --metrics, --mounts 2)
# with RDMAFS_TEST_PULL_GATE: each daemon holds its pulls of a write's
# payload while the test's gate file for it exists. The metadata daemon is
# drained while the file is made, so the file's 3 copies are on storage 1, 2
# and 3: a chain first, next, last, which a write held at the gates shows.
# The file's first 256 KiB hold A; then:
# - first is killed, and once the service marks it DOWN, next heads the chain;
# - a writer on mount 1 overwrites the file with B: next stores B while last's
#   pull of it waits at its gate; mount 1's rdmafs-fuse and then next are
#   killed (-9), and last's pull fails: next holds B, the others A;
# - once next is DOWN, first starts again and, with nothing to copy to it,
#   turns UP: it heads the chain again;
# - next starts again: it finds the write it was killed in (its
#   meta/inflight), but first heads the chain now, which holds what the
#   chain agreed on. next hands its copy to first (CHUNK_RESYNC), first
#   copies its own chunk to last and next, and next drops its records once
#   first says the copies are done;
# - every copy holds A, both mounts read A, no daemon keeps a record of a
#   missed write, and every daemon is UP.
# Before the hand-over, next dropped its records with a warning once it
# served again, and its copy kept B for good while the others held A.
# The steps between next's forward and its kill must fit in its forward
# timeout: the killpoint daemon's forwards wait RDMAFS_TEST_FORWARD_TIMEOUT_MS
# (30 s here) rather than the chain's 4 s; the test says so if they did not fit.
# Usage: headswap.sh DIR1 DIR2 (the same filesystem, two mounts)
# Exit: 0 pass, 1 fail, 77 not on such a cluster, 99 the test itself could
# not check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: headswap.sh DIR1 DIR2}
mnt2=${2:?usage: headswap.sh DIR1 DIR2}
check_cluster headswap.sh
gate=${RDMAFS_TEST_PULL_GATE:-}
dir=$RDMAFS_CLUSTER_DIR
ctl=$RDMAFS_CLUSTER_CTL
if [ -z "$gate" ] || [ ! -e "$dir/fuse2.pid" ] || [ ! -e "$dir/storage1.metrics-port" ]; then
	echo "SKIP: headswap.sh needs cluster.sh --daemon rdmafs-daemon-killpoint --metrics --mounts 2 and RDMAFS_TEST_PULL_GATE"
	exit 77
fi
check_need dd cmp setfattr stat head grep python3
rdmafsctl=$(. "$dir/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/headswap.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
# (scene.sh removes the gates and local_dir at exit)
. "$(dirname "$(readlink -f "$0")")/scene.sh"

scene_file

# 1. the chain's order
chain_order
echo "ok   the file's chain: daemon $first, then $next, then $last"

# 2. first killed: next heads the chain once the service marks first DOWN
"$ctl" ctl kill "$first" KILL || check_error "cannot kill daemon $first"
read_pids
wait_state "$first" down "daemon $first killed"
maps_current "daemon $first killed"

# 3. B stored by next, held at last's pull; the writer's client, then next, killed
declare -A log_lines
for n in 1 2 3; do
	log_lines[$n]=$(wc -l <"$dir/storage$n.log") || check_error "cannot read storage$n.log"
done
close_gates
gated_write "$local_dir/B"
wait_held || check_fail "the write of B never reached a head's pull (30 s)"
[ "$(held)" = "$next_pid" ] ||
	check_fail "daemon $(name_of "$(held)") heads the write of B, not daemon $next"
rm -f "$gate.$next_pid"
wait_held "$next_pid" || check_fail "B never reached the last daemon's pull (30 s)"
last_pid=$(held)
wait_holds "$next" "$local_dir/B" || check_fail "daemon $next never stored B (30 s)"
kill -KILL "$(cat "$dir/fuse1.pid")" || check_error "cannot kill mount 1's rdmafs-fuse"
"$ctl" ctl kill "$next" KILL || check_error "cannot kill daemon $next"
wait "$writer" && check_fail "writing B through a killed mount succeeded"
puller=$(name_of "$last_pid") || exit $?
[ "$puller" = "$last" ] || check_fail "daemon $puller pulled B from daemon $next, not daemon $last"
wait_let_go "$last_pid" || check_fail "daemon $last still pulls B from the dead daemon $next (30 s)"
open_gates
holds "$last" "$local_dir/A" || check_error "daemon $last's copy is not A after daemon $next died (the scene is not set)"
tail -n +$((log_lines[$next] + 1)) "$dir/storage$next.log" | grep -q "not stored by" &&
	check_error "daemon $next's forward gave up before it was killed (slower than its forward timeout, RDMAFS_TEST_FORWARD_TIMEOUT_MS): not the case this test is for"

# 4. first back, and UP: it heads the chain again
wait_state "$next" down "daemon $next killed"
"$ctl" ctl start "$first" || check_fail "restarting daemon $first"
read_pids
wait_state "$first" up "daemon $first back"
maps_current "daemon $first back"
holds "$first" "$local_dir/A" || check_fail "daemon $first's copy is not A once back"
echo "ok   daemon $next holds B, the write it was killed in; daemons $first and $last hold A; daemon $first heads the chain again"

# 5. next back: it hands its copy to first, which copies A over it
"$ctl" ctl start "$next" || check_fail "restarting daemon $next"
read_pids
grep -q "a write was in flight when this daemon stopped" "$dir/storage$next.log" ||
	check_fail "the restarted daemon $next does not say a write was in flight when it was killed"
check_all_up "$rdmafsctl" 4 90 "daemon $next back" "$local_dir/status"
no_records "daemon $next back"
for n in 1 2 3; do
	holds "$n" "$local_dir/A" || check_fail "daemon $n's copy is not A once daemon $next is back under daemon $first"
done
grep -q "handed this copy to it" "$dir/storage$next.log" ||
	check_fail "daemon $next does not say it handed its copy to the chain's head"
read_is "$mnt2" "$local_dir/A" "once the copies are equal"
"$ctl" ctl remount 1 || check_error "cannot mount the killed mount 1 again"
read_is "$mnt" "$local_dir/A" "(mounted again) once the copies are equal"
echo "ok   a head killed mid-write and back under another head leaves no copy different: the head's bytes reached every copy"
