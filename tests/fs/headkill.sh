#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A chain's head killed mid-write, with its client (docs/replication.md, "A
# head killed mid-write"). cluster.sh runs the killpoint daemon (--daemon
# rdmafs-daemon-killpoint, --metrics, --mounts 2) with RDMAFS_TEST_PULL_GATE: each daemon
# holds its pulls of a write's payload while the test's gate file for it
# exists. The metadata daemon is drained while the file is made, so the
# file's 3 copies are on storage 1, 2 and 3 and killing its head leaves the
# metadata service up. The file's first 256 KiB hold A (more than goes
# inline in a request: each daemon pulls its copy); then:
# - a writer on mount 1 overwrites it with B; the head pulls B, forwards it
#   and stores it, while the next daemon's pull of B waits at its gate;
# - mount 1's rdmafs-fuse and then the head are killed (-9): nobody will
#   redo the write, and the head holds B while the other two hold A;
# - the next daemon's pull fails (its source is gone) and stores nothing;
# - the head starts again: it finds the write it was killed in (its
#   meta/inflight), says so in its log, and copies its chunk down the chain,
#   to the tail first.
#   While that copy waits at the gates, mount 2 reads A with O_DIRECT (the
#   head knows the others lack its bytes and sends the read on), and
#   `rdmafsctl status` says a chunk is under-replicated;
# - once the gates open, every copy holds B, both mounts read B, and the
#   status is healthy again.
# Without the head's note of the write (meta/inflight) the copies stay
# different for good (the head B, the others A), and reads depend on which
# copy serves them.
# The steps between the head's forward and its kill must fit in the head's
# forward timeout: the killpoint daemon's forwards wait
# RDMAFS_TEST_FORWARD_TIMEOUT_MS (30 s here) rather than the chain's 4 s, so a
# slow machine (the rdma-vm guest) has the time; the test says so if they did not fit.
# Usage: headkill.sh DIR1 DIR2 (the same filesystem, two mounts)
# Exit: 0 pass, 1 fail, 77 not on such a cluster, 99 the test itself could
# not check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: headkill.sh DIR1 DIR2}
mnt2=${2:?usage: headkill.sh DIR1 DIR2}
check_cluster headkill.sh
gate=${RDMAFS_TEST_PULL_GATE:-}
dir=$RDMAFS_CLUSTER_DIR
ctl=$RDMAFS_CLUSTER_CTL
if [ -z "$gate" ] || [ ! -e "$dir/fuse2.pid" ] || [ ! -e "$dir/storage1.metrics-port" ]; then
	echo "SKIP: headkill.sh needs cluster.sh --daemon rdmafs-daemon-killpoint --metrics --mounts 2 and RDMAFS_TEST_PULL_GATE"
	exit 77
fi
check_need dd cmp setfattr stat head grep python3
rdmafsctl=$(. "$dir/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/headkill.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
# (scene.sh removes the gates and local_dir at exit)
. "$(dirname "$(readlink -f "$0")")/scene.sh"

scene_file
read_is "$mnt2" "$local_dir/A" "after writing A"

# 1. B on its way: stored at the head, held at the next daemon's pull
# (each storage daemon's log so far: what the scene adds is looked at below)
declare -A log_lines
for n in 1 2 3; do
	log_lines[$n]=$(wc -l <"$dir/storage$n.log") || check_error "cannot read storage$n.log"
done
close_gates
gated_write "$local_dir/B"
wait_held || check_fail "the write of B never reached a head's pull (30 s)"
head_pid=$(held)
head_name=$(name_of "$head_pid") || exit $?
[ "$head_name" != meta ] || check_error "the drained metadata daemon heads the file's chain"
rm -f "$gate.$head_pid"
wait_held "$head_pid" || check_fail "B never reached the next daemon's pull (30 s)"
next_pid=$(held)
next_name=$(name_of "$next_pid") || exit $?
wait_holds "$head_name" "$local_dir/B" || check_fail "the head (daemon $head_name) never stored B (30 s)"

# 2. the writer's client, then the head, killed
kill -KILL "$(cat "$dir/fuse1.pid")" || check_error "cannot kill mount 1's rdmafs-fuse"
"$ctl" ctl kill "$head_name" KILL || check_error "cannot kill daemon $head_name"
wait "$writer" && check_fail "writing B through a killed mount succeeded"
wait_let_go "$next_pid" || check_fail "daemon $next_name still pulls B from the dead head (30 s)"
: >"$gate.$next_pid" || check_error "cannot close the gate $gate.$next_pid"
for n in 1 2 3; do
	[ "$n" = "$head_name" ] && continue
	holds "$n" "$local_dir/A" ||
		check_error "daemon $n's copy is not A after the head died (the scene is not set)"
done
tail -n +$((log_lines[$head_name] + 1)) "$dir/storage$head_name.log" | grep -q "not stored by" &&
	check_error "the head's forward gave up before it was killed (slower than its forward timeout, RDMAFS_TEST_FORWARD_TIMEOUT_MS): not the case this test is for"

# 3. the head back: it copies its chunk down the chain, held at the gates meanwhile
# (the other two daemons' gates are closed: the next one's again, the last one's still)
"$ctl" ctl start "$head_name" || check_fail "restarting daemon $head_name"
read_pids
grep -q "a write was in flight when this daemon stopped" "$dir/storage$head_name.log" ||
	check_fail "the restarted head does not say a write was in flight when it was killed"
wait_held || check_fail "the restarted head never copied its chunk to the rest of the chain (30 s)"
[ "$(held)" != "$next_pid" ] ||
	check_fail "the restarted head copies its chunk to the middle of the chain before the tail"
read_is "$mnt2" "$local_dir/A" "while the head's copy goes down the chain"
got=$(records "storage$head_name") || exit $?
[ "$got" = 2 ] || check_fail "the restarted head keeps $got records of missed writes (want 2: the other two copies)"
for n in $(seq 30); do
	"$rdmafsctl" status >"$local_dir/status" 2>&1
	grep -q "under-replicated: [1-9][0-9]* chunks lack a copy" "$local_dir/status" && break
	[ "$n" = 30 ] && check_fail "status does not say a chunk lacks a copy: $(cat "$local_dir/status")"
	sleep 1
done
echo "ok   the restarted head names the write it was killed in; reads go to the copies it has not reached; status says a chunk is under-replicated"

# 4. the gates open: every copy holds B
open_gates
check_all_up "$rdmafsctl" 4 90 "once the head's copies went down" "$local_dir/status"
no_records "once the head's copies went down"
for n in 1 2 3; do
	holds "$n" "$local_dir/B" || check_fail "daemon $n's copy is not B once the head's copy went down the chain"
done
read_is "$mnt2" "$local_dir/B" "once the copies are equal"
"$ctl" ctl remount 1 || check_error "cannot mount the killed mount 1 again"
read_is "$mnt" "$local_dir/B" "(mounted again) once the copies are equal"
echo "ok   a head killed mid-write with its client leaves no copy different: its bytes reached every copy"
