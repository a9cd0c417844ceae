#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# metrics.sh COPY HOLD_CLIENT CHECK: every daemon's Prometheus /metrics, read
# with Prometheus' own parser. Runs inside tests/lib/cluster.sh --metrics
# --no-fuse (each daemon serves /metrics, its port in NAME.metrics-port):
#
#  1. work the cluster: rdmafs-copy copies a tree in (MKDIR, CREATE, chunk
#     writes and commits) and back out (READDIR, chunk reads), and asks for
#     a name that is not there (a LOOKUP that fails);
#  2. HOLD_CLIENT connects to every daemon, asks each for DAEMON_STATS and
#     gets a CHUNK_TRUNCATE refused, and keeps its connections;
#  3. while it holds them, CHECK (metrics_check.py) scrapes each daemon and
#     checks the families and their types, the counters of what was done,
#     the metadata methods each by name, the small files' data inline, the
#     connection gauge >= 1, and that every histogram is cumulative and ends
#     in +Inf == _count.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"

copy=$(readlink -f "$1") hold=$(readlink -f "$2") checker=$(readlink -f "$3")
dir=${RDMAFS_CLUSTER_DIR:?run under tests/lib/cluster.sh --metrics}
transport=$(. "$dir/cluster.env" && echo "$transport")
work=$dir/metrics-test
hold_pid=''
cleanup() {
	[ -n "$hold_pid" ] && kill -KILL "$hold_pid" 2>/dev/null
}
trap cleanup EXIT

# Prometheus' parser, from Debian's python3-prometheus-client: the system's
# python3 has it even where another python3 comes first in PATH
python=''
for p in python3 /usr/bin/python3; do
	if "$p" -c 'import prometheus_client' 2>/dev/null; then
		python=$p
		break
	fi
done
[ -n "$python" ] || check_error "no python3 with prometheus_client (package python3-prometheus-client)"

mkdir -p "$work/src/sub" || check_error "cannot make $work/src"
head -c $((2 * 1024 * 1024 + 4321)) /dev/urandom >"$work/src/large" &&
	echo small >"$work/src/small" && echo deeper >"$work/src/sub/file" ||
	check_error "cannot write the source tree"

check_run "rdmafs-copy a tree in" timeout 120 "$copy" -q "$work/src" rdmafs:/metrics-tree
check_run "rdmafs-copy it back out" timeout 120 "$copy" -q rdmafs:/metrics-tree "$work/out"
check_run "the copy came back the same" cmp "$work/src/large" "$work/out/large"
missing() {
	! timeout 60 "$copy" -q rdmafs:/no-such-name "$work/none" 2>"$work/missing.err"
}
check_run "rdmafs-copy of a name that is not there fails" missing

"$hold" >"$work/hold.out" 2>"$work/hold.err" &
hold_pid=$!
for _ in $(seq 600); do
	grep -qx connected "$work/hold.out" && break
	kill -0 "$hold_pid" 2>/dev/null || break
	sleep 0.1
done
grep -qx connected "$work/hold.out" || {
	cat "$work/hold.err" >&2
	check_error "ops-hold-client did not connect to every daemon"
}

"$python" "$checker" "$dir" "$transport"
rc=$?
check_summary
[ $rc -eq 0 ] || exit $rc
echo "metrics: every daemon's /metrics parsed by Prometheus' parser, counters, names, connections, histograms ($transport)"
