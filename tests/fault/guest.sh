#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The fault tests over one transport, for the rdma-vm guest (TCG, about 10x
# slower: fewer fsyncs per phase, same checks):
#   tests/fault/guest.sh BUILD_DIR [rdma|tcp]
# Exit: 0 pass, 1 a test failed, 99 a test could not run, 77 all skipped.
build=${1:?usage: guest.sh BUILD_DIR [rdma|tcp]}
kind=${2:-rdma}
here=$(dirname "$(readlink -f "$0")")
export RDMAFS_FAULT_STEPS=${RDMAFS_FAULT_STEPS:-8}
export RDMAFS_FAULT_WAIT=${RDMAFS_FAULT_WAIT:-600}
cluster=("$here/../fs/cluster.sh" --transport "$kind" --daemon "$build/storage-daemon/rdmafs-daemon"
	--fuse "$build/fuse-client/rdmafs-fuse" --timeout 1800)
echo "--- fault-drain over $kind"
"${cluster[@]}" --mounts 2 -- "$here/drain.sh" %MOUNT% %MOUNT2% \
	"$build/tests/fault/fault-writer" "$build/storage-daemon/ctl/rdmafsctl"
rc=$?
echo "--- fault-drain over $kind: exit $rc"
exit $rc
