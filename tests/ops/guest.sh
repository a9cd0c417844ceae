#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The ops suite's cluster tests over one transport, for the rdma-vm guest:
# rdmafsctl (cli, drain's chunk copies between daemons, scrub, fsck, health,
# undrain, a rebalance lifting an interrupted move's fences, a removed
# daemon, a daemon down), rdmafs-copy (round trip, resume,
# errors), the logs, every daemon's /metrics and the mount's (where the guest
# has FUSE), client keys and CHUNK_RESYNC's contract, each on
# a cluster of tests/lib/cluster.sh, as meson runs them on the host.
#   tests/ops/guest.sh BUILD_DIR [rdma|tcp]
# Exit: 0 pass, 1 a test failed, 99 a test could not run, 77 all skipped.
build=${1:?usage: guest.sh BUILD_DIR [rdma|tcp]}
kind=${2:-rdma}
here=$(dirname "$(readlink -f "$0")")
. "$here/../lib/check.sh"
cluster=("$here/../lib/cluster.sh" --transport "$kind" --build "$build" --no-fuse)
ctl=$build/fuse-client/ctl/rdmafsctl
status=77
# run NAME TIMEOUT COMMAND...: one test on a fresh cluster (and cluster.sh's
# options in the array run_opts)
run_opts=()
run() {
	local name=$1 limit=$2 rc start=$SECONDS
	shift 2
	echo "--- ops-$name over $kind"
	"${cluster[@]}" "${run_opts[@]}" --timeout "$limit" -- "$@"
	rc=$?
	echo "--- ops-$name over $kind: exit $rc ($((SECONDS - start)) s)"
	status=$(check_merge "$status" "$rc")
}
# The guest runs under TCG, about 10x slower than the host: ten times the host's limits.
for name in cli drain scrub fsck health undrain rebalance removed down; do
	run "$name" 3000 "$build/tests/ops/ops-test" "$ctl" "$name" \
		"$build/storage-daemon/rdmafs-daemon"
done
# rdmafs-copy: the round trip; resume after SIGKILL on a smaller tree, with
# 30 s calls; the errors, their hang bounds ten times the host's
run copy-roundtrip 4000 "$here/copy/roundtrip.sh" "$build/fuse-client/rdmafs-copy" \
	"$build/tests/ops/copy/copy-treecmp"
export RDMAFS_COPY_BIG_MIB=8 RDMAFS_COPY_DIRS=4 RDMAFS_COPY_TIMEOUT_MS=30000 RDMAFS_TEST_SLOW=10
for name in resume errors; do
	run "copy-$name" 4000 "$here/copy/$name.sh" "$build/fuse-client/rdmafs-copy" \
		"$build/tests/ops/copy/copy-treecmp"
done
unset RDMAFS_COPY_BIG_MIB RDMAFS_COPY_DIRS RDMAFS_COPY_TIMEOUT_MS RDMAFS_TEST_SLOW
# the logs (the daemons at debug): over verbs an orderly close must still
# be one (the CLOSE reaches the daemon before the QP goes to ERR, and the
# daemon takes it from its CQ before the DISCONNECTED event kills the
# connection); the mount's log after the fork, where the guest has FUSE
fuse=$build/fuse-client/rdmafs-fuse
[ -x "$fuse" ] || fuse=''
run_opts=(--storage 2 --log-level debug)
run logs 3000 "$here/logs.sh" "$ctl" "$build/tests/ops/ops-hold-client" ${fuse:+"$fuse"}
# /metrics with connections{transport="rdma"} counted over verbs
run_opts=(--storage 2 --metrics)
run metrics 3000 "$here/metrics.sh" "$build/fuse-client/rdmafs-copy" \
	"$build/tests/ops/ops-hold-client" "$here/metrics_check.py"
# client keys over verbs: the keyed HELLO, its refusals and EROFS on chunk writes
run_opts=(--storage 2)
run client-keys 4000 "$here/client-keys.sh" "$ctl" "$build/fuse-client/rdmafs-copy" \
	"$build/tests/ops/ops-key-chunks"
# CHUNK_RESYNC's contract over verbs: only the chain's head takes a copy handed over
run_opts=()
run chunk-resync 3000 "$build/tests/ops/ops-chunk-resync"
# the mount's own /metrics, its RPCs and a storage daemon's death and return
# counted over verbs, where the guest has FUSE
if [ -n "$fuse" ]; then
	run_opts=(--storage 2 --metrics --mounts 1)
	run mount-metrics 4000 "$here/mount-metrics.sh" %MOUNT% "$fuse" \
		"$here/mount_metrics_check.py"
fi
run_opts=()
exit "$status"
