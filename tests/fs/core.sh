#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The core fs checks over one transport, for the rdma-vm guest (TCG, about
# 10x slower: smaller defaults, same checks):
#   tests/fs/core.sh BUILD_DIR [rdma|tcp]
# RDMAFS_VM_RDMA_ADDR (set by vm-run.sh) or RDMAFS_TEST_ADDR is the address
# to listen on. Exit: 0 pass, 1 a check failed, 77 every check skipped,
# 99 a check could not run (its own trouble, not a verdict).
build=${1:?usage: core.sh BUILD_DIR [rdma|tcp]}
kind=${2:-rdma}
here=$(dirname "$(readlink -f "$0")")
. "$here/../lib/check.sh"
# fs-integrity: 12,000 of the host's 100,000 seeded operations (the same
# sequence's first ones; 20,000 took 347 s of the guest's bound on a slow host)
export RDMAFS_FS_OPS=${RDMAFS_FS_OPS:-12000}
export RDMAFS_FS_BIGDIR_ENTRIES=${RDMAFS_FS_BIGDIR_ENTRIES:-2000}
cluster=("$here/../lib/cluster.sh" --transport "$kind" --build "$build" --timeout 1200)
status=77
run() {
	local name=$1 rc start=$SECONDS
	shift
	echo "--- fs-$name over $kind"
	"${cluster[@]}" "$@"
	rc=$?
	# the seconds each check takes: what the guest's time bound is made of
	echo "--- fs-$name over $kind: exit $rc ($((SECONDS - start)) s)"
	status=$(check_merge "$status" "$rc")
}
run posix -- "$build/tests/fs/fs-posix" %MOUNT%
run permissions -- "$build/tests/fs/fs-permissions" %MOUNT%
run bigdir -- "$build/tests/fs/fs-bigdir" %MOUNT%
run integrity -- "$build/tests/fs/fs-integrity" %MOUNT%
run sparse -- "$build/tests/fs/fs-sparse" %MOUNT%
run twomounts --mounts 2 -- "$here/twomounts.sh" %MOUNT% %MOUNT2%
run restart -- "$here/restart.sh" %MOUNT%
run reclaim --reclaim-grace 20 -- "$here/reclaim.sh" %MOUNT%
run replicas -- "$here/replicas.sh" %MOUNT%
run domains --daemon-hosts "hostA hostA hostB hostB" -- "$here/domains.sh" %MOUNT%
run rebalance -- "$here/rebalance.sh" %MOUNT%
run unlink --metrics -- "$here/unlink.sh" %MOUNT% "$build/tests/fs/fs-free-keep"
run closes --metrics --mounts 2 -- "$here/closes.sh" %MOUNT% %MOUNT2%
# mount 1 answers unlinks at once and keeps attributes and names long, mount 2 not
export RDMAFS_FUSE_OPTS=async_dirops,attr_timeout=600,entry_timeout=600,timeout=60000
export RDMAFS_FUSE_OPTS2=attr_timeout=1,entry_timeout=1
run asyncdirops --metrics --mounts 2 -- "$here/asyncdirops.sh" %MOUNT% %MOUNT2%
unset RDMAFS_FUSE_OPTS2
export RDMAFS_FUSE_OPTS=async_dirops
run posix-async -- "$build/tests/fs/fs-posix" %MOUNT%
unset RDMAFS_FUSE_OPTS
# the killpoint daemon holds forwards at the test's gates (RDMAFS_TEST_FORWARD_GATE)
export RDMAFS_TEST_FORWARD_GATE=${TMPDIR:-/tmp}/rdmafs-dirty-gate
run dirty --daemon "$build/tests/daemon/rdmafs-daemon-killpoint" --metrics --mounts 2 -- \
	"$here/dirty.sh" %MOUNT% %MOUNT2%
unset RDMAFS_TEST_FORWARD_GATE
# ... and pulls (RDMAFS_TEST_PULL_GATE)
# (and their forwards wait 30 s for an answer: RDMAFS_TEST_FORWARD_TIMEOUT_MS)
export RDMAFS_TEST_PULL_GATE=${TMPDIR:-/tmp}/rdmafs-headkill-gate RDMAFS_TEST_FORWARD_TIMEOUT_MS=30000
run headkill --daemon "$build/tests/daemon/rdmafs-daemon-killpoint" --metrics --mounts 2 -- \
	"$here/headkill.sh" %MOUNT% %MOUNT2%
run headswap --daemon "$build/tests/daemon/rdmafs-daemon-killpoint" --metrics --mounts 2 -- \
	"$here/headswap.sh" %MOUNT% %MOUNT2%
run twodown --daemon "$build/tests/daemon/rdmafs-daemon-killpoint" --metrics --mounts 2 -- \
	"$here/twodown.sh" %MOUNT% %MOUNT2%
unset RDMAFS_TEST_PULL_GATE RDMAFS_TEST_FORWARD_TIMEOUT_MS
exit "$status"
