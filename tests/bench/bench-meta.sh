#!/usr/bin/env bash
# bench-meta: starts a single-node cluster with no mount (tests/lib/cluster.sh)
# and runs build/tests/bench/bench-meta against its metadata service: creates,
# lookups, opens (open + close) and unlinks per second with 1, 16 and 64 requests in flight, beside a
# local directory on the same disk. A benchmark, not a test.
#
#   tests/bench/bench-meta.sh BUILD_DIR [OUT.json]
# Environment: BENCH_META_FILES (per run, default 10000), BENCH_FS_TRANSPORT
# (tcp|rdma, default tcp), BENCH_FS_ADDR (default 127.0.0.1).
set -euo pipefail

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
build=$(realpath "${1:?usage: bench-meta.sh BUILD_DIR [OUT.json]}")
json_out=$(realpath -m "${2:-bench-meta.json}")
[ -x "$build/tests/bench/bench-meta" ] || { echo "bench-meta: build rdmafs first ($build/tests/bench/bench-meta)" >&2; exit 77; }

local_dir=$(mktemp -d /var/tmp/rdmafs-bench-meta.XXXXXX) ||
	{ echo "bench-meta: cannot make a directory in /var/tmp" >&2; exit 1; }
trap 'rm -rf "$local_dir"' EXIT
# the service's data, like the local directory, on /var/tmp's disk; the
# single-quoted variables are expanded by that inner shell, inside the cluster
# shellcheck disable=SC2016
TMPDIR=/var/tmp "$top/tests/lib/cluster.sh" --build "$build" --transport "${BENCH_FS_TRANSPORT:-tcp}" \
	--addr "${BENCH_FS_ADDR:-127.0.0.1}" --storage 0 --mounts 0 --timeout 3600 -- \
	sh -c 'exec "$0" "$RDMAFS_CLUSTER_META" "$RDMAFS_CLUSTER_SECRET" "$1" "$2"' \
	"$build/tests/bench/bench-meta" "$local_dir" "$json_out"
echo "JSON in $json_out"
