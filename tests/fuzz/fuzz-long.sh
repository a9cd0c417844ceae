#!/bin/sh
# Free fuzzing, outside the CI gate (no suite runs it): every libFuzzer target
# of a -Dfuzz=true build runs for SECONDS from its checked-in corpus, one
# worker per core, worker W with seed SEED+W. SEED is $FUZZ_SEED, or drawn
# at random and printed, so a run that found something can be run again. A crash is saved under tests/fuzz/crashes/TARGET/ and its base64 is
# printed: minimise it (TARGET -minimize_crash=1 FILE), fix the bug, and add it
# to tests/fuzz/corpus/TARGET/ so the gate replays it for ever.
#
#   tests/fuzz/fuzz-long.sh SECONDS [BUILD_DIR]     (BUILD_DIR: build-asan)
set -u
secs=${1:?usage: fuzz-long.sh SECONDS [BUILD_DIR]}
top=$(cd -- "$(dirname -- "$0")/../.." && pwd -P)
build=${2:-$top/build-asan}
jobs=$(nproc)
seed=${FUZZ_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
case $seed in '' | *[!0-9]*) echo "ERROR: FUZZ_SEED must be a number"; exit 2 ;; esac
echo "seed $seed (replay: FUZZ_SEED=$seed $0 $secs ${2:-})"
status=0
found=0
for corpus in "$top"/tests/fuzz/corpus/*/; do
	name=$(basename "$corpus")
	target="$build/tests/fuzz/fuzz-$name"
	if [ ! -x "$target" ]; then
		echo "ERROR: $target not built (configure CC=clang with -Dfuzz=true)"
		status=2
		continue
	fi
	found=$((found + 1))
	crashes="$top/tests/fuzz/crashes/$name"
	work=$(mktemp -d) || exit 2
	mkdir -p "$crashes" "$work/new"
	echo "== $name: $secs s on $jobs workers, seeds $((seed + 1))..$((seed + jobs))"
	for w in $(seq "$jobs"); do
		"$target" -seed=$((seed + w)) -max_total_time="$secs" -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix="$crashes/" \
			"$work/new" "$corpus" >"$work/fuzz-$w.log" 2>&1 &
	done
	wait
	grep -h '^stat::number_of_executed_units' "$work"/*.log |
		awk -v n="$name" '{s += $2} END {printf "%s: %.0f executions\n", n, s}'
	for a in "$crashes"/*; do
		[ -f "$a" ] || continue
		echo "$name: crash $a: $(base64 -w0 "$a")"
		status=1
	done
	rm -rf "$work"
done
[ "$found" -gt 0 ] || { echo "ERROR: no fuzz targets"; exit 2; }
exit $status
