#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The fault tests over one transport, for the rdma-vm guest (TCG, about 10x
# slower: fewer fsyncs per phase, same checks; replication without the cases
# of a link, which need network namespaces soft-RoCE does not cross here):
#   tests/fault/guest.sh BUILD_DIR [rdma|tcp]
# Exit: 0 pass, 1 a test failed, 99 a test could not run, 77 all skipped.
# RDMAFS_SOAK_TRIALS and RDMAFS_SOAK_SEED size the crash soak (2 trials, seed 1000).
build=${1:?usage: guest.sh BUILD_DIR [rdma|tcp]}
kind=${2:-rdma}
here=$(dirname "$(readlink -f "$0")")
. "$here/../lib/check.sh"
export RDMAFS_FAULT_STEPS=${RDMAFS_FAULT_STEPS:-8}
export RDMAFS_FAULT_WAIT=${RDMAFS_FAULT_WAIT:-600}
cluster=("$here/../lib/cluster.sh" --transport "$kind" --build "$build" --timeout 1800)
status=77
echo "--- fault-drain over $kind"
start=$SECONDS
"${cluster[@]}" --mounts 2 -- "$here/drain.sh" %MOUNT% %MOUNT2% \
	"$build/tests/fault/fault-writer" "$build/fuse-client/ctl/rdmafsctl"
rc=$?
echo "--- fault-drain over $kind: exit $rc ($((SECONDS - start)) s)"
status=$(check_merge "$status" "$rc")
echo "--- fault-replication over $kind"
start=$SECONDS
"${cluster[@]}" --storage 3 -- "$here/replication.sh" %MOUNT%
rc=$?
echo "--- fault-replication over $kind: exit $rc ($((SECONDS - start)) s)"
status=$(check_merge "$status" "$rc")
echo "--- crash-soak over $kind"
start=$SECONDS
"$here/crash-soak.sh" --build "$build" --transport "$kind" --trials "${RDMAFS_SOAK_TRIALS:-2}" \
	--seed "${RDMAFS_SOAK_SEED:-1000}"
rc=$?
echo "--- crash-soak over $kind: exit $rc ($((SECONDS - start)) s)"
status=$(check_merge "$status" "$rc")
exit "$status"
