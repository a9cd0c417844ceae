#!/usr/bin/env bash
# bench-fs: the mounted filesystem, in one run, beside a FUSE passthrough
# (bindfs) of a local directory and the local directory itself:
#   - sequential 1 MiB write and read, 1 and 4 jobs (fio, io_uring engine)
#   - 4 KiB random read and write (fio)
#   - metadata: create, stat, unlink of N files, and listing (python)
# A benchmark, not a test: it prints a table and writes JSON, with every rdmafs
# figure as a ratio against the passthrough (the aim in the issue) and the
# local directory.
#
#   tests/bench/bench-fs.sh BUILD_DIR [OUT.json]
# Environment: BENCH_FS_SIZE_MB (per fio job, default 256), BENCH_FS_FILES
# (metadata files, default 10000), BENCH_FS_TRANSPORT (tcp|rdma, default tcp),
# BENCH_FS_ADDR (default 127.0.0.1; an RDMA interface address for rdma).
# The cluster comes from tests/lib/cluster.sh (as root: it mounts with
# allow_other), its data in /var/tmp.
set -euo pipefail

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
# Storage daemons besides the one that also hosts the metadata service.
readonly EXTRA_DAEMONS=3

if [ "${1:-}" != --inner ]; then
	build=${1:?usage: bench-fs.sh BUILD_DIR [OUT.json]}
	build=$(realpath "$build")
	json_out=$(realpath -m "${2:-bench-fs.json}")
	for tool in fio bindfs python3 fusermount3; do
		command -v "$tool" >/dev/null || { echo "bench-fs: $tool is missing (scripts/install-deps.sh)" >&2; exit 77; }
	done
	for p in storage-daemon/rdmafs-daemon fuse-client/rdmafs-fuse fuse-client/ctl/rdmafsctl; do
		[ -x "$build/$p" ] || { echo "bench-fs: build rdmafs first ($build/$p)" >&2; exit 77; }
	done
	# the one test cluster harness; its data, like fio's files, on /var/tmp's disk
	TMPDIR=/var/tmp exec "$top/tests/lib/cluster.sh" --build "$build" \
		--transport "${BENCH_FS_TRANSPORT:-tcp}" --addr "${BENCH_FS_ADDR:-127.0.0.1}" \
		--storage "$EXTRA_DAEMONS" --timeout 7200 -- "$0" --inner "$json_out"
fi

# --- inside the cluster (tests/lib/cluster.sh: RDMAFS_MOUNT, RDMAFS_CLUSTER_DIR) ---
json_out=$2
size_mb=${BENCH_FS_SIZE_MB:-256}
nfiles=${BENCH_FS_FILES:-10000}
transport=${BENCH_FS_TRANSPORT:-tcp}
work=$RDMAFS_CLUSTER_DIR/bench
cleanup() {
	fusermount3 -u "$work/bindfs" 2>/dev/null || umount -l "$work/bindfs" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/local" "$work/bindfs-src" "$work/bindfs"
bindfs "$work/bindfs-src" "$work/bindfs"

declare -A result
run_fio() { # target name rw bs jobs
	local dir=$1 name=$2 rw=$3 bs=$4 jobs=$5 out
	out=$(fio --name="$name" --directory="$dir" --rw="$rw" --bs="$bs" --numjobs="$jobs" \
		--size="${size_mb}M" --ioengine=io_uring --iodepth=4 --direct=0 \
		--end_fsync=1 --group_reporting --output-format=json 2>/dev/null)
	python3 -c '
import json, sys
j = json.loads(sys.stdin.read())["jobs"][0]
side = "write" if j["write"]["io_bytes"] > 0 else "read"
print("%.1f" % (j[side]["bw_bytes"] / 1e6))' <<<"$out"
}

metadata() { # dir -> "create stat unlink list" per second
	python3 - "$1" "$nfiles" <<'PY'
import os, sys, time
d, n = os.path.join(sys.argv[1], "meta"), int(sys.argv[2])
os.mkdir(d)
t = time.time()
for i in range(n):
    os.close(os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
create = n / (time.time() - t)
t = time.time()
for i in range(n):
    os.stat(f"{d}/f{i}")
stat = n / (time.time() - t)
t = time.time()
listed = len(os.listdir(d))
listing = listed / (time.time() - t)
t = time.time()
for i in range(n):
    os.unlink(f"{d}/f{i}")
unlink = n / (time.time() - t)
os.rmdir(d)
print(f"{create:.0f} {stat:.0f} {unlink:.0f} {listing:.0f}")
PY
}

targets=(rdmafs bindfs local)
declare -A dirs=([rdmafs]=$RDMAFS_MOUNT [bindfs]=$work/bindfs [local]=$work/local)
workloads=("seq-write-1M-1job write 1M 1" "seq-read-1M-1job read 1M 1"
	"seq-write-1M-4jobs write 1M 4" "seq-read-1M-4jobs read 1M 4"
	"rand-write-4K randwrite 4k 1" "rand-read-4K randread 4k 1")
for t in "${targets[@]}"; do
	for w in "${workloads[@]}"; do
		read -r name rw bs jobs <<<"$w"
		# Reads need the files the matching write left; drop them after.
		if [[ $rw == *write ]]; then
			rm -f "${dirs[$t]}/$name".* 2>/dev/null || true
		else
			# Reads measure the filesystem, not the page cache.
			sync
			echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
		fi
		result[$t,$name]=$(run_fio "${dirs[$t]}" "${name/read/write}" "$rw" "$bs" "$jobs")
	done
	rm -f "${dirs[$t]}"/seq-* "${dirs[$t]}"/rand-* 2>/dev/null || true
	read -r c s u l <<<"$(metadata "${dirs[$t]}")"
	result[$t,create]=$c
	result[$t,stat]=$s
	result[$t,unlink]=$u
	result[$t,list]=$l
done

metrics=(seq-write-1M-1job seq-read-1M-1job seq-write-1M-4jobs seq-read-1M-4jobs
	rand-write-4K rand-read-4K create stat unlink list)
{
	printf '\nbench-fs: rdmafs (%s, %d storage daemons, one also serving metadata) vs bindfs passthrough vs local\n' \
		"$transport" $((EXTRA_DAEMONS + 1))
	printf '%-20s %12s %12s %12s %9s %9s\n' metric rdmafs bindfs local vs-bindfs vs-local
	for m in "${metrics[@]}"; do
		unit="MB/s"
		case $m in create | stat | unlink | list) unit="ops/s" ;; esac
		python3 -c '
import sys
m, u, r, b, l = sys.argv[1:6]
r, b, l = float(r), float(b), float(l)
print("%-20s %8.1f %-3s %8.1f %-3s %8.1f %-3s %9.2f %9.2f" % (m, r, u[:3], b, u[:3], l, u[:3], r / b if b else 0, r / l if l else 0))' \
			"$m" "$unit" "${result[rdmafs,$m]}" "${result[bindfs,$m]}" "${result[local,$m]}"
	done
}
python3 - "$json_out" "$transport" <<PY
import json, sys
metrics = "${metrics[*]}".split()
vals = {$(for m in "${metrics[@]}"; do printf '"%s": [%s, %s, %s],' "$m" "${result[rdmafs,$m]}" "${result[bindfs,$m]}" "${result[local,$m]}"; done)}
out = {"transport": sys.argv[2], "baselines": ["bindfs passthrough", "local directory"], "results": [
    {"metric": m, "rdmafs": r, "bindfs": b, "local": l,
     "ratio_vs_bindfs": round(r / b, 3) if b else None, "ratio_vs_local": round(r / l, 3) if l else None}
    for m, (r, b, l) in vals.items()]}
json.dump(out, open(sys.argv[1], "w"), indent=2)
print("JSON in", sys.argv[1])
PY
