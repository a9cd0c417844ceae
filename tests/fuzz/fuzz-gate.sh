#!/bin/sh
# The CI fuzz gate for one libFuzzer target: deterministic, so a run passes or
# fails on the code alone. It replays every input of the checked-in corpus
# (every crash ever found stays there), then fuzzes from that corpus with a
# fixed seed for a fixed number of runs. New inputs go to a temporary
# directory, never into the source tree. Free fuzzing is fuzz-long.sh.
#
#   fuzz-gate.sh TARGET CORPUS_DIR RUNS [SEED]
#
# Exit 0 (no crash), 1 (a crash, leak or timeout: the input is printed in
# base64 to add to the corpus), 2 (the test itself could not run).
target=${1:?usage: fuzz-gate.sh TARGET CORPUS_DIR RUNS [SEED]}
corpus=${2:?usage: fuzz-gate.sh TARGET CORPUS_DIR RUNS [SEED]}
runs=${3:?usage: fuzz-gate.sh TARGET CORPUS_DIR RUNS [SEED]}
seed=${4:-1}

[ -x "$target" ] || { echo "ERROR: fuzz target $target is not an executable"; exit 99; }
[ -d "$corpus" ] || { echo "ERROR: corpus $corpus is not a directory"; exit 99; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-gate.XXXXXX") || { echo "ERROR: mktemp failed"; exit 99; }
trap 'rm -rf "$work"' EXIT
mkdir "$work/new" "$work/artifacts" || exit 99

report() {
	echo "FAIL: $1"
	for a in "$work"/artifacts/*; do
		[ -f "$a" ] || continue
		echo "input $(basename "$a") (base64; add it to $corpus):"
		base64 -w0 "$a"
		echo
	done
	exit 1
}

n=$(find "$corpus" -type f | wc -l)
[ "$n" -gt 0 ] || { echo "ERROR: corpus $corpus is empty"; exit 99; }
echo "replaying $n corpus inputs"
# Given files rather than a directory, libFuzzer runs each once and stops.
find "$corpus" -type f -print0 | xargs -0 "$target" -rss_limit_mb=2048 -timeout=20 \
	-artifact_prefix="$work/artifacts/" >"$work/replay.log" 2>&1 ||
	{ tail -n 40 "$work/replay.log"; report "a corpus input crashed $(basename "$target")"; }

echo "fuzzing: seed $seed, $runs runs"
"$target" -seed="$seed" -runs="$runs" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" "$work/new" "$corpus" >"$work/fuzz.log" 2>&1 ||
	{ tail -n 40 "$work/fuzz.log"; report "seeded run crashed $(basename "$target")"; }
grep -E '^stat::number_of_executed_units|^Done' "$work/fuzz.log"
echo "PASS: $(basename "$target"): $n corpus inputs and $runs seeded runs, no crash"
exit 0
