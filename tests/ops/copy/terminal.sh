#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# terminal.sh COPY TREECMP PTYRUN: rdmafs-copy at a terminal (ptyrun.py runs
# it on a pseudo-terminal). At 80 columns, then made 40 wide (SIGWINCH),
# then stopped with SIGINT: no line it draws is ever wider than the
# terminal, the narrower width is honoured, the stop prints a summary and
# the command that resumes the copy and exits 130, leaves no temporaries and
# only complete files; the printed command, run as it was printed, finishes
# the copy identical to the source. Then a whole copy at 40 columns. Runs
# inside tests/lib/cluster.sh --no-fuse (tcp).
#
# --bwlimit makes the interrupted copy last (24 MiB at 1 MiB/s: 24 s at
# least) whatever the machine's speed, so it is still running when the
# test gets to interrupt it; no step asserts a speed or a time.
set -u
copy=$(readlink -f "$1") treecmp=$(readlink -f "$2") ptyrun=$(readlink -f "$3")
work=$RDMAFS_CLUSTER_DIR/terminal
src=$work/src
. "$(dirname "$(readlink -f "$0")")/../../lib/check.sh"
check_need python3 cmp

mkdir -p "$src/sub"
for i in $(seq -w 1 24); do
	head -c $((1024 * 1024 + 10#$i * 17)) /dev/urandom >"$src/file$i"
done
echo small >"$src/sub/small"
ln -s file01 "$src/link"
"$copy" -q "$src" rdmafs:/term || check_error "the first copy into rdmafs failed"

# rdmafs -> local at 80 columns, narrowed to 40, then interrupted: one file at
# a time, so the local directory shows what is complete
check_run "80 columns, SIGWINCH to 40, SIGINT: lines fit, summary, exit 130" \
	python3 "$ptyrun" --cols 80 --resize 40 --interrupt --expect-status 130 \
	--when-files "$work/a:2" --log "$work/a.log" --resume-to "$work/a.resume" \
	-- "$copy" -j 1 --inflight 0 --piece-size 256K --bwlimit 1M rdmafs:/term "$work/a"
echo "--- what the terminal got (ANSI sequences as ^[):"
tr '\r' '\n' <"$work/a.log" | sed 's/\x1b/^[/g' | grep -v '^$' | tail -n 25
[ -s "$work/a.resume" ] || check_error "no resume command to run"
echo "--- the resume command:"
cat "$work/a.resume"

left=$(find "$work/a" -name '.rdmafs-copy.*' | wc -l)
check_run "the stopped copy left no temporaries ($left)" test "$left" -eq 0
# every file the stop left is complete
partial=0 done=0
for f in "$work/a"/file*; do
	[ -e "$f" ] || continue
	check_cmp "$f" "$src/$(basename "$f")"
	case $? in
	0) done=$((done + 1)) ;;
	*)
		echo "not complete: $f ($check_said)" >&2
		partial=$((partial + 1))
		;;
	esac
done
check_run "the files the stop left ($done) are complete" test "$partial" -eq 0
check_run "the stop left files to copy" test "$done" -lt 24

# the printed command, as printed (lines joined by backslash-newline), in
# another directory, with no RDMAFS_* in the environment
out=$(cd / && env -u RDMAFS_META -u RDMAFS_SECRET_FILE bash "$work/a.resume" 2>&1)
rc=$?
echo "$out" | tail -n 3
check_run "the resume command exits 0 ($rc)" test "$rc" -eq 0
check_run "the resume command skipped what was complete" \
	grep -Eq " $done skipped" <<<"$out"
for f in "$src"/file*; do
	check_same "$work/a/$(basename "$f")" "$f" "after the resume"
done
check_run "the resumed copy is identical to the source" "$treecmp" "$src" "$work/a"

# a whole copy at 40 columns, its summary included
check_run "40 columns: every line fits, exit 0" \
	python3 "$ptyrun" --cols 40 --log "$work/b.log" \
	-- "$copy" -j 1 --inflight 0 --bwlimit 8M rdmafs:/term "$work/b"
check_run "the copy at 40 columns is identical" "$treecmp" "$src" "$work/b"

check_summary
echo "terminal: all checks passed"
