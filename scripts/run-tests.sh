#!/usr/bin/env bash
# Builds rdmafs and runs every test suite: the command the README gives and CI runs.
#
#   scripts/run-tests.sh            # all suites: style unit transport daemon fs ops fault fuzz rdma-vm
#   scripts/run-tests.sh unit fs    # only those suites
#
# It builds three trees: build/ (gcc, -Dwerror=true) runs every suite;
# build-asan/ (clang, ASan+UBSan, libFuzzer targets) runs unit and transport
# again under the sanitizers, and the fuzz gate (tests/fuzz/fuzz-gate.sh: the
# checked-in corpus replayed plus a fixed-seed run, so it is deterministic). It ends with one line
# "N passed, N failed[, N skipped]" over all of them, and exits non-zero if
# anything failed.
set -euo pipefail

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$top"
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(style unit transport daemon fs ops fault fuzz rdma-vm)
# Where the rdma-vm suite keeps the guest kernel between runs.
export RDMAFS_VM_CACHE=${RDMAFS_VM_CACHE:-/var/cache/rdmafs-vm}

configure() {
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
}

has_suite() {
	local want=$1 s
	for s in "${suites[@]}"; do
		[ "$s" = "$want" ] && return 0
	done
	return 1
}

# meson test exits non-zero when a test fails; we count from its log instead.
run_suites() {
	local dir=$1
	shift
	local args=() s
	for s in "$@"; do
		args+=(--suite "$s")
	done
	# A log left by an earlier run must not be counted as this one's.
	rm -f "$dir/meson-logs/testlog.json"
	meson test -C "$dir" --print-errorlogs --num-processes 2 "${args[@]}" || true
}

configure build -Dwerror=true -Dbuildtype=debugoptimized
ninja -C build
run_suites build "${suites[@]}"
logs=(build/meson-logs/testlog.json)

asan_suites=()
for s in unit transport fuzz; do
	has_suite "$s" && asan_suites+=("$s")
done
if [ ${#asan_suites[@]} -gt 0 ] && command -v clang >/dev/null; then
	CC=clang configure build-asan -Dwerror=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Dfuzz=true -Dbuildtype=debug
	ninja -C build-asan
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		run_suites build-asan "${asan_suites[@]}"
	logs+=(build-asan/meson-logs/testlog.json)
fi

python3 - "${logs[@]}" <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    tree = path.split("/")[0]
    for line in open(path):
        r = json.loads(line)
        res = r.get("result")
        if res in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif res == "SKIP":
            skipped += 1
            print(f"skipped: {tree}: {r['name']}")
        else:
            failed += 1
            print(f"FAILED: {tree}: {r['name']} ({res})")
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
PY
