#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# bench-copy: rdmafs-copy into rdmafs beside `cp -a` and `rsync -a` into an
# rdmafs-fuse mount of the same filesystem, in one run, on a loopback cluster
# (a metadata daemon and 3 storage daemons over tcp, started by
# tests/lib/cluster.sh). Two workloads: one large file and many small files.
# Prints a table (seconds, MB/s, files/s, speed relative to cp -a) and writes
# the same as JSON. A benchmark, not a test: it asserts nothing but that
# every copy succeeded.
#
#   tests/bench/bench-copy.sh [BUILD_DIR]        (default: ./build)
#
# Environment:
#   BENCH_COPY_LARGE_MB   size of the large file in MiB [1024]
#   BENCH_COPY_FILES      number of small files [20000]
#   BENCH_COPY_FILE_KB    size of each small file in KiB [4]
#   BENCH_COPY_JSON       where the JSON goes [bench-copy.json]
#   BENCH_COPY_ARGS       extra rdmafs-copy options (e.g. "-j 8")
#
# Needs root and /dev/fuse (for the cp and rsync baselines through the mount).
set -u

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)

if [ "${1:-}" != --inner ]; then
	build=$(readlink -f "${1:-$top/build}")
	for p in storage-daemon/rdmafs-daemon fuse-client/rdmafs-fuse fuse-client/rdmafs-copy; do
		[ -x "$build/$p" ] || { echo "bench-copy: $build/$p not built" >&2; exit 1; }
	done
	command -v rsync >/dev/null || { echo "bench-copy: rsync not installed" >&2; exit 1; }
	exec "$top/tests/lib/cluster.sh" --build "$build" --timeout 7200 -- \
		"$0" --inner "$build/fuse-client/rdmafs-copy" "$(readlink -f "${BENCH_COPY_JSON:-bench-copy.json}")"
fi

# --- inside the cluster -------------------------------------------------------
copy=$2 json=$3
mnt=$RDMAFS_MOUNT dir=$RDMAFS_CLUSTER_DIR
large_mb=${BENCH_COPY_LARGE_MB:-1024}
nfiles=${BENCH_COPY_FILES:-20000}
file_kb=${BENCH_COPY_FILE_KB:-4}
# shellcheck disable=SC2206
copy_args=(${BENCH_COPY_ARGS:-})
src=$dir/bench-src
results=()

echo "bench-copy: making the sources (${large_mb} MiB file; $nfiles files of $file_kb KiB)"
mkdir -p "$src/large" "$src/small"
head -c $((large_mb * 1024 * 1024)) /dev/urandom >"$src/large/file.bin"
head -c $((nfiles * file_kb * 1024)) /dev/urandom >"$dir/small.pool"
(
	cd "$src/small" || exit 1
	# 100 files a directory, as real trees have
	split -a 6 -d -b $((file_kb * 1024)) "$dir/small.pool" f
	i=0
	for f in f*; do
		d=d$((i / 100))
		[ $((i % 100)) -eq 0 ] && mkdir -p "$d"
		mv "$f" "$d/"
		i=$((i + 1))
	done
)
rm -f "$dir/small.pool"
mkdir -p "$mnt/bench"

now() { date +%s.%N; }

# run WORKLOAD TOOL BYTES FILES COMMAND...: times one copy (the source read
# once first, so every tool starts from the page cache)
run() {
	local workload=$1 tool=$2 bytes=$3 files=$4 t0 t1 rc
	shift 4
	cat "$src/$workload"/* "$src/$workload"/*/* >/dev/null 2>&1
	sync
	t0=$(now)
	"$@" >"$dir/bench.out" 2>&1
	rc=$?
	t1=$(now)
	if [ $rc -ne 0 ]; then
		echo "bench-copy: $tool on $workload failed (exit $rc):" >&2
		tail -n 20 "$dir/bench.out" >&2
		exit 1
	fi
	results+=("$workload|$tool|$(echo "$t1 - $t0" | bc -l)|$bytes|$files")
	echo "  $workload / $tool: $(printf '%.2f' "$(echo "$t1 - $t0" | bc -l)") s"
}

large_bytes=$((large_mb * 1024 * 1024))
small_bytes=$((nfiles * file_kb * 1024))
for w in large small; do
	if [ $w = large ]; then b=$large_bytes n=1; else b=$small_bytes n=$nfiles; fi
	echo "bench-copy: $w"
	run $w "rdmafs-copy" $b $n "$copy" -q "${copy_args[@]}" "$src/$w" "rdmafs:/bench/copy-$w"
	run $w "rdmafs-copy --no-verify" $b $n \
		"$copy" -q --no-verify "${copy_args[@]}" "$src/$w" "rdmafs:/bench/copynv-$w"
	run $w "cp -a (fuse)" $b $n cp -a "$src/$w" "$mnt/bench/cp-$w"
	run $w "rsync -a (fuse)" $b $n rsync -a "$src/$w/" "$mnt/bench/rsync-$w/"
done

# the copies are the same files
for w in large small; do
	diff -r "$src/$w" "$mnt/bench/copy-$w" >/dev/null ||
		{ echo "bench-copy: rdmafs-copy's $w copy differs from the source" >&2; exit 1; }
done

# --- table and JSON ----------------------------------------------------------
printf '\n%-8s %-26s %10s %10s %10s %12s\n' workload tool seconds "MB/s" "files/s" "vs cp -a"
{
	printf '{\n  "benchmark": "bench-copy",\n  "large_mib": %s,\n  "small_files": %s,\n' \
		"$large_mb" "$nfiles"
	printf '  "small_file_kib": %s,\n  "cluster": "1 metadata + 3 storage daemons, tcp loopback",\n' \
		"$file_kb"
	printf '  "results": [\n'
} >"$json"
first=1
for r in "${results[@]}"; do
	IFS='|' read -r w tool secs bytes files <<<"$r"
	cp_secs=$(printf '%s\n' "${results[@]}" | awk -F'|' -v w="$w" '$1 == w && $2 ~ /^cp -a/ {print $3}')
	mbs=$(echo "$bytes / $secs / 1000000" | bc -l)
	fps=$(echo "$files / $secs" | bc -l)
	ratio=$(echo "$cp_secs / $secs" | bc -l)
	printf '%-8s %-26s %10.2f %10.1f %10.1f %11.2fx\n' "$w" "$tool" "$secs" "$mbs" "$fps" "$ratio"
	[ $first = 1 ] || printf ',\n' >>"$json"
	first=0
	printf '    {"workload": "%s", "tool": "%s", "seconds": %.3f, "mb_per_s": %.2f, "files_per_s": %.2f, "speed_vs_cp_a": %.3f}' \
		"$w" "$tool" "$secs" "$mbs" "$fps" "$ratio" >>"$json"
done
printf '\n  ]\n}\n' >>"$json"
echo
echo "bench-copy: MB/s is 10^6 bytes a second; 'vs cp -a' is cp -a's time divided by the tool's"
echo "bench-copy: JSON in $json"
