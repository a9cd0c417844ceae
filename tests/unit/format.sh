#!/bin/sh
# Every C file of the tree follows the checked-in .clang-format (kernel
# style). Usage: format.sh SOURCE_ROOT. Exit 0, 1 (the files that differ are
# named, with how to fix them), 77 if clang-format is not installed.
top=${1:?usage: format.sh SOURCE_ROOT}
cd "$top" || exit 1
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed"; exit 77; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files '*.c' '*.h')
else
	files=$(find . -path ./build\* -prune -o \( -name '*.c' -o -name '*.h' \) -print)
fi
bad=0
for f in $files; do
	if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f"
		bad=1
	fi
done
[ $bad -eq 0 ] || echo "fix with: clang-format -i FILE (the tree's .clang-format)"
exit $bad
