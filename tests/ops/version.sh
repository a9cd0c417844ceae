#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# version.sh VERSION PROGRAM... : every program answers --version (and -V)
# with exactly one line, "NAME VERSION" (NAME its file name, VERSION meson's
# project version), on stdout, nothing on stderr, and exit status 0. An empty
# PROGRAM argument is a program this build does not make (rdmafs-fuse
# without libfuse3): it is said and left out. The mount helper in the build
# tree is not executable (meson sets its mode at install): sh runs it.
set -u
version=$1
shift
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"

# answers PROGRAM FLAG: exit 0 when PROGRAM FLAG prints "NAME VERSION" alone
answers() {
	local prog=$1 flag=$2 name out err rc run=()
	name=$(basename "$prog")
	[ -x "$prog" ] || run=(sh)
	err=$(mktemp) || return 2
	out=$(timeout 30 "${run[@]}" "$prog" "$flag" 2>"$err")
	rc=$?
	if [ "$rc" -ne 0 ] || [ "$out" != "$name $version" ] || [ -s "$err" ]; then
		echo "$name $flag: exit $rc, stdout '$out' (wanted '$name $version'), stderr '$(cat "$err")'" >&2
		rm -f "$err"
		return 1
	fi
	rm -f "$err"
	return 0
}

[ -n "$version" ] || check_error "no version given"
count=0
for prog in "$@"; do
	if [ -z "$prog" ]; then
		echo "a program is not built here: left out"
		continue
	fi
	[ -x "$prog" ] || head -n 1 "$prog" 2>/dev/null | grep -q '^#!/bin/sh' ||
		check_error "$prog is neither an executable nor a shell script"
	count=$((count + 1))
	for flag in --version -V; do
		check_run "$(basename "$prog") $flag" answers "$prog" "$flag"
	done
	check_run "$(basename "$prog") --help mentions --version" \
		bash -c 'if [ -x "$1" ]; then "$1" --help; else sh "$1" --help; fi 2>&1 |
			grep -q -- --version' _ "$prog"
done
[ "$count" -gt 0 ] || check_error "no program to check"
check_summary
echo "version: all checks passed"
