#!/usr/bin/env bash
# bench-fs: the mounted filesystem beside a real peer, in one run. The same
# workloads (tests/bench/fs_workloads.py) run, one target after the other, on
#   rdmafs      four daemons, one also serving metadata (tests/lib/cluster.sh)
#   rdmafs-1    the single-node default: one daemon serving metadata and data
#   rdmafs-r3   as rdmafs, every file with 3 copies of each chunk (the mount's
#               root gets rdmafs.replicas = 3; not in the default list)
#   rdmafs-1a   as rdmafs-1, mounted with async_dirops (unlinks answered at
#               once, sent in the background; not in the default list)
#   glusterfs   GlusterFS, one brick on loopback (Debian's glusterfs-server),
#               started and stopped here
#   bindfs      a FUSE passthrough of a local directory
#   local       the local directory itself
# Workloads: sequential 1 MiB write (1 job, with the machine's CPU) and 4 jobs,
# cold 1 MiB read; 4 KiB random read and write with 4 psync jobs at QD1 and
# one io_uring job at QD32; create, stat, list, unlink of N files in one
# directory, and create/stat/unlink by 4 processes in 4 directories;
# unpacking a tarball of small files, a stat walk of that tree and its rm -rf.
# A benchmark, not a test: it prints a table and writes JSON with every
# figure and, for every rdmafs row, its ratio against glusterfs (the aim of
# the issue), bindfs and local.
# With BENCH_FS_ROUNDS=R the targets run R times, in turn, the order reversed
# every other round (A B C, C B A, A B C, ...), so that a machine that slows
# or speeds up during the run weighs on every target alike; each figure is
# then the median of its R runs (each run in the JSON, as TARGET_runs), and
# the ratios are of medians; a median of fewer runs (a round failed) is named
# under the table.
#
#   tests/bench/bench-fs.sh BUILD_DIR [OUT.json]
# Environment: BENCH_FS_SIZE_MB (per fio job, default 256), BENCH_FS_FILES
# (metadata files, default 10000), BENCH_FS_TREE_FILES (the tarball's files,
# default 20000), BENCH_FS_RUNTIME (seconds per random I/O run, default 10),
# BENCH_FS_ROUNDS (default 1),
# BENCH_FS_TRANSPORT (tcp|rdma, default tcp), BENCH_FS_ADDR (default
# 127.0.0.1; an RDMA interface address for rdma), BENCH_FS_TARGETS (a subset
# of the targets above, in order), BENCH_FS_ONLY (a comma list of workloads).
# Run as root (mounts); data in /var/tmp.
set -euo pipefail

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
build=$(realpath "${1:?usage: bench-fs.sh BUILD_DIR [OUT.json]}")
json_out=$(realpath -m "${2:-bench-fs.json}")
size_mb=${BENCH_FS_SIZE_MB:-256}
nfiles=${BENCH_FS_FILES:-10000}
tree_files=${BENCH_FS_TREE_FILES:-20000}
runtime=${BENCH_FS_RUNTIME:-10}
rounds=${BENCH_FS_ROUNDS:-1}
transport=${BENCH_FS_TRANSPORT:-tcp}
addr=${BENCH_FS_ADDR:-127.0.0.1}
read -r -a targets <<<"${BENCH_FS_TARGETS:-rdmafs rdmafs-1 glusterfs bindfs local}"
workloads=$top/tests/bench/fs_workloads.py

case $rounds in
'' | *[!0-9]* | 0*) echo "bench-fs: BENCH_FS_ROUNDS must be a number of rounds, 1 or more" >&2; exit 2 ;;
esac
for t in "${targets[@]}"; do
	case $t in rdmafs | rdmafs-1 | rdmafs-1a | rdmafs-r3 | glusterfs | bindfs | local) ;;
	*) echo "bench-fs: unknown target $t" >&2; exit 2 ;;
	esac
done
for tool in fio bindfs python3 fusermount3 tar; do
	command -v "$tool" >/dev/null || { echo "bench-fs: $tool is missing (scripts/install-deps.sh)" >&2; exit 77; }
done
for p in storage-daemon/rdmafs-daemon fuse-client/rdmafs-fuse fuse-client/ctl/rdmafsctl; do
	[ -x "$build/$p" ] || { echo "bench-fs: build rdmafs first ($build/$p)" >&2; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "bench-fs: run as root (it mounts filesystems)" >&2; exit 77; }

work=$(mktemp -d /var/tmp/rdmafs-bench-fs.XXXXXX) ||
	{ echo "bench-fs: cannot make a directory in /var/tmp" >&2; exit 1; }
gl_volume=rdmafs-bench-$$ gl_started=0 gl_mounted=0 gl_created=0
cleanup() {
	fusermount3 -u "$work/bindfs" 2>/dev/null || true
	gluster_down
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- GlusterFS: one brick on loopback, started and stopped here ----------------

gluster_up() {
	local m=$1
	if ! command -v glusterd >/dev/null || ! command -v gluster >/dev/null; then
		echo "bench-fs: glusterfs-server is not installed (scripts/install-deps.sh)" >&2
		return 1
	fi
	if ! pgrep -x glusterd >/dev/null; then
		glusterd --log-file="$work/glusterd.log" || return 1
		gl_started=1
		for _ in $(seq 50); do gluster --mode=script volume list >/dev/null 2>&1 && break; sleep 0.2; done
	fi
	# a brick directory keeps its old volume's marks: every round gets a new one
	rm -rf "$work/gl-brick"
	mkdir -p "$work/gl-brick" "$m"
	# force: the brick is on the root filesystem, which GlusterFS warns about
	gluster --mode=script volume create "$gl_volume" "$(hostname):$work/gl-brick" force >&2 || return 1
	gl_created=1
	gluster --mode=script volume start "$gl_volume" >&2 || return 1
	mount -t glusterfs "$(hostname):/$gl_volume" "$m" || return 1
	gl_mounted=1
}

gluster_running() {
	pgrep -x glusterd >/dev/null || pgrep -x glusterfsd >/dev/null
}

gluster_down() {
	[ "$gl_mounted" = 1 ] && { umount "$work/gluster" 2>/dev/null || umount -l "$work/gluster" || true; }
	if [ "$gl_created" = 1 ]; then
		gluster --mode=script volume stop "$gl_volume" force >/dev/null 2>&1 || true
		gluster --mode=script volume delete "$gl_volume" >/dev/null 2>&1 || true
	fi
	if [ "$gl_started" = 1 ]; then
		pkill -x glusterd || true
		pkill -x glusterfsd || true
		# gone before the next round's gluster_up looks for a glusterd
		for _ in $(seq 100); do
			gluster_running || break
			sleep 0.1
		done
		if gluster_running; then
			echo "bench-fs: glusterd did not stop in 10 s: killed" >&2
			pkill -9 -x glusterd || true
			pkill -9 -x glusterfsd || true
		fi
	fi
	gl_mounted=0 gl_created=0 gl_started=0
}

# --- the targets ------------------------------------------------------------------

# fs_workloads.py's options after DIR OUT.json, the same for every target
workload_opts=(--size-mb "$size_mb" --files "$nfiles" --runtime "$runtime"
	--tarball "$work/tree.tar" --tree-files "$tree_files" --only "${BENCH_FS_ONLY:-}")

run_workloads() { # DIR OUT.json
	python3 "$workloads" "$1" "$2" "${workload_opts[@]}"
}

run_rdmafs() { # TARGET STORAGE_DAEMONS OUT.json [REPLICAS [MOUNT_OPTIONS]]
	# the one test cluster harness; its data, like the workloads' files, on /var/tmp's disk
	# shellcheck disable=SC2016 # expanded by the command cluster.sh runs
	RDMAFS_FUSE_OPTS=${5:-} TMPDIR=/var/tmp "$top/tests/lib/cluster.sh" --build "$build" --transport "$transport" \
		--addr "$addr" --storage "$2" --timeout 7200 -- \
		bash -c 'setfattr -n rdmafs.replicas -v "$1" "$RDMAFS_MOUNT" && shift && exec "$@"' \
		replicas "${4:-1}" python3 "$workloads" %MOUNT% "$3" "${workload_opts[@]}" >&2
}

python3 "$workloads" --make-tarball "$work/tree.tar" "$tree_files"
# run_target TARGET OUT.json: one run of every workload on TARGET
run_target() {
	local rc=0
	case $1 in
	rdmafs) run_rdmafs rdmafs 3 "$2" ;;
	rdmafs-1) run_rdmafs rdmafs-1 0 "$2" ;;
	rdmafs-1a) run_rdmafs rdmafs-1a 0 "$2" 1 async_dirops ;;
	rdmafs-r3) run_rdmafs rdmafs-r3 3 "$2" 3 ;;
	glusterfs)
		if gluster_up "$work/gluster"; then
			run_workloads "$work/gluster" "$2" || rc=$?
		else
			echo "bench-fs: glusterfs could not be set up" >&2
			rc=1
		fi
		gluster_down
		return $rc
		;;
	bindfs)
		# (set -e does not hold in a function called left of ||: each step is checked)
		rm -rf "$work/bindfs-src" && mkdir -p "$work/bindfs-src" "$work/bindfs" || return 1
		bindfs "$work/bindfs-src" "$work/bindfs" || { echo "bench-fs: bindfs failed" >&2; return 1; }
		run_workloads "$work/bindfs" "$2" || rc=$?
		# the next round removes the source: never while it is still mounted
		fusermount3 -u "$work/bindfs" || { fusermount3 -uz "$work/bindfs"; rc=1; }
		return $rc
		;;
	local)
		rm -rf "$work/local" && mkdir -p "$work/local" || return 1
		run_workloads "$work/local" "$2"
		;;
	esac
}

# odd rounds in the given order, even ones reversed: a drift of the machine weighs on all alike
reversed=()
for t in "${targets[@]}"; do reversed=("$t" "${reversed[@]}"); done
for ((r = 1; r <= rounds; r++)); do
	if ((r % 2)); then order=("${targets[@]}"); else order=("${reversed[@]}"); fi
	for t in "${order[@]}"; do
		echo "bench-fs: round $r/$rounds: $t ($(date +%T))" >&2
		run_target "$t" "$work/$t.r$r.json" ||
			echo "bench-fs: $t failed in round $r; its figures of that round stay empty" >&2
	done
done

python3 - "$json_out" "$work" "$transport" "$rounds" "${targets[@]}" <<'PY'
import json, os, statistics, sys
out, work, transport, rounds, targets = (sys.argv[1], sys.argv[2], sys.argv[3],
                                         int(sys.argv[4]), sys.argv[5:])
variant_of = {"rdmafs-r3": ("rdmafs",), "rdmafs-1a": ("rdmafs-1",)}  # ratios against the plain one
runs = {}  # target -> [that round's {metric: {"value", "unit"}} or {} when it failed]
for t in targets:
    runs[t] = []
    for r in range(1, rounds + 1):
        p = os.path.join(work, f"{t}.r{r}.json")
        runs[t].append(json.load(open(p)) if os.path.exists(p) else {})
metrics = []
for t in targets:
    for res in runs[t]:
        for m in res:
            if m not in metrics:
                metrics.append(m)
rows = []
for m in metrics:
    unit = next(res[m]["unit"] for t in targets for res in runs[t] if m in res)
    row = {"metric": m, "unit": unit}
    for t in targets:
        vals = [res[m]["value"] for res in runs[t] if m in res and res[m]["value"] is not None]
        row[t] = statistics.median(vals) if vals else None
        if rounds > 1:
            row[t + "_runs"] = [res.get(m, {}).get("value") for res in runs[t]]
    for t in (x for x in targets if x.startswith("rdmafs")):
        for base in ("glusterfs", "bindfs", "local") + variant_of.get(t, ()):
            if base in targets and row[t] is not None and row.get(base):
                row[f"{t}_vs_{base}"] = round(row[t] / row[base], 3)
    rows.append(row)
json.dump({"transport": transport, "targets": targets, "rounds": rounds, "results": rows},
          open(out, "w"), indent=1)
w = 12
head = f"{'metric':28}" + "".join(f"{t:>{w}}" for t in targets)
ratios = [f"{t}/{b}" for t in targets if t.startswith("rdmafs") for b in ("glusterfs", "bindfs")
          if b in targets]
ratios += [f"{t}/{b}" for t, bs in variant_of.items() for b in bs if t in targets and b in targets]
head += "".join(f"{r:>{len(r) + 2}}" for r in ratios)
print(f"\nbench-fs ({transport}; rdmafs: 4 daemons, rdmafs-1: one, rdmafs-r3: 4 daemons and 3 copies,"
      " rdmafs-1a: rdmafs-1 with async_dirops;"
      " ratios are rdmafs/peer" + (f"; medians of {rounds} rounds)" if rounds > 1 else ")"))
print(head)
for row in rows:
    line = f"{row['metric'] + ' ' + row['unit']:28}"
    line += "".join(f"{row[t]:>{w}.1f}" if row[t] is not None else f"{'-':>{w}}" for t in targets)
    for r in ratios:
        t, b = r.split("/")
        v = row.get(f"{t}_vs_{b}")
        line += f"{v:>{len(r) + 2}.2f}" if v is not None else f"{'-':>{len(r) + 2}}"
    print(line)
short = [f"{t} {row['metric']} ({sum(v is not None for v in row[t + '_runs'])} of {rounds})"
         for row in rows for t in targets
         if rounds > 1 and row[t] is not None and None in row[t + "_runs"]]
if short:
    print("medians of fewer runs (a round failed): " + ", ".join(short))
print("JSON in", out)
PY
