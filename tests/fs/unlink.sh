#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# What a removed file leaves on the daemons (rfs_free_data(), issue 10), on
# cluster.sh's fresh cluster (nothing else writes there meanwhile):
# - empty files removed every way (unlink, rename over one, the last close of
#   an unlinked one) ask no daemon for anything: the daemons' CHUNK_REMOVE
#   counts do not move (an empty file has no chunks: one past a file's end is
#   fsck's orphan);
# - files with data removed every way (unlink, rename over one, the last
#   close of one unlinked while open and written after, a sparse file, one
#   truncated to nothing first) leave no chunk: the daemons hold 0 chunks
#   once the removals run (they run after the answer: waited for, 30 s at
#   most) and fsck finds nothing;
# - with cluster.sh --metrics, the mount flushes the metadata service (SYNC)
#   itself once per file with data before removing its chunks, and never
#   for an empty one (flush_before_free, rfs_free_data()): its SYNC count
#   moves by exactly that.
# - a file whose truncate failed with one of its daemons away (that daemon
#   keeps chunks past the new size) leaves none there once removed;
# - a removal through the client library whose SYNC a restarted metadata
#   service answers keeps the file's chunks (fs-free-keep), for fsck.
# Usage: unlink.sh DIR FS_FREE_KEEP (build/tests/fs/fs-free-keep)
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test itself could not
# check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: unlink.sh DIR FS_FREE_KEEP}
keeper=${2:-}
check_cluster unlink.sh
check_need python3 dd truncate mv
rdmafsctl=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
ctl=${RDMAFS_CLUSTER_CTL:?}
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/unlink.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
trap 'rm -rf "$local_dir"' EXIT
w=$mnt/unlink
mkdir "$w" || check_fail "mkdir $w"

# daemons' totals from `rdmafsctl stats --json`: "REMOVES CHUNKS" (CHUNK_REMOVE
# requests answered, chunks held)
totals() {
	"$rdmafsctl" stats --json >"$local_dir/stats" 2>&1 ||
		check_fail "rdmafsctl stats exited $?: $(cat "$local_dir/stats")"
	python3 - "$local_dir/stats" <<'PYEOF' || check_error "cannot read rdmafsctl stats --json"
import json, sys
daemons = json.load(open(sys.argv[1]))["daemons"]
removes = sum(op["count"] for d in daemons for op in d["ops"] if op["method"] == "chunk_remove")
print(removes, sum(d["chunks"] for d in daemons))
PYEOF
}

# mount_metric METRIC: the value of METRIC in the mount's metrics, or "none"
# without --metrics.
metrics_port=$RDMAFS_CLUSTER_DIR/fuse1.metrics-port
mount_metric() {
	if [ ! -e "$metrics_port" ]; then
		echo none
		return
	fi
	check_metric fuse1 "$1"
}
# The mount's SYNC calls so far, and its RELEASEs answered.
syncs() {
	mount_metric 'rdmafs_client_rpc_requests_total{target="meta",op="SYNC"}'
}
releases() {
	mount_metric 'rdmafs_client_fuse_requests_total{op="release"}'
}

# released_since BEFORE N: the mount answered N RELEASEs since BEFORE
released_since() {
	[ "$(releases)" -ge $(($1 + $2)) ]
}

# wait_released BEFORE N: waits (30 s at most) until released_since BEFORE N.
# The kernel sends a close's RELEASE after close(2) returned, and an unlink
# through another client does not free a file the mount still holds open.
# Without --metrics there is nothing to wait on.
wait_released() {
	[ "$1" = none ] && return 0
	check_until 30 released_since "$1" "$2" ||
		check_error "the mount answered $(($(releases) - $1)) RELEASEs in 30 s of $2 closes"
}

# check_syncs BEFORE AFTER WANT WHAT: the mount's SYNCs moved by WANT
check_syncs() {
	if [ "$1" = none ]; then
		echo "skip SYNC count of $4: the cluster has no --metrics"
		return
	fi
	[ $(($2 - $1)) = "$3" ] ||
		check_fail "$4: the mount sent $(($2 - $1)) SYNCs (want $3: one per file with data)"
	echo "ok   $4: $3 SYNCs from the mount"
}

# holder FILE: opens FILE, unlinks it, writes 3 MiB at 1 MiB and closes
# when told (a line on stdin); prints "ready" when unlinked and written
holder() {
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.unlink(sys.argv[1])
if int(sys.argv[2]):
    os.pwrite(fd, os.urandom(3 << 20), 1 << 20)
print("ready", flush=True)
sys.stdin.readline()
os.close(fd)
' "$@"
}

# unlinked_while_open FILE WRITE: FILE's last close after its unlink
unlinked_while_open() {
	local out=''
	coproc H { holder "$1" "$2"; }
	read -r out <&"${H[0]}"
	[ "$out" = ready ] ||
		check_fail "a file open, unlinked and written ($1): the holder said '$out'"
	echo >&"${H[1]}"
	wait "$H_PID" || check_fail "the holder of $1 exited $?"
}

# 1. empty files
read -r removes0 chunks0 <<<"$(totals)"
[ "$chunks0" = 0 ] || check_error "the fresh cluster holds $chunks0 chunks already"
syncs0=$(syncs)
for i in $(seq 20); do : >"$w/e$i" || check_fail "create $w/e$i"; done
for i in $(seq 10); do rm "$w/e$i" || check_fail "unlink $w/e$i"; done
for i in $(seq 11 15); do mv "$w/e$i" "$w/e$((i + 5))" || check_fail "rename over $w/e$((i + 5))"; done
for i in $(seq 16 20); do rm "$w/e$i" || check_fail "unlink $w/e$i"; done
unlinked_while_open "$w/e-open" 0
read -r removes1 _ <<<"$(totals)"
[ "$removes1" = "$removes0" ] ||
	check_fail "removing 21 empty files sent $((removes1 - removes0)) CHUNK_REMOVEs (want none)"
check_syncs "$syncs0" "$(syncs)" 0 "21 empty files removed"
echo "ok   21 empty files removed (unlink, rename over, last close): no daemon asked"

# 2. files with data
dd if=/dev/urandom of="$w/big" bs=1M count=3 status=none || check_fail "write $w/big"
dd if=/dev/urandom of="$w/target" bs=1M count=2 status=none || check_fail "write $w/target"
: >"$w/src" || check_fail "create $w/src"
dd if=/dev/urandom of="$w/sparse" bs=4k count=1 seek=1000 status=none || check_fail "write $w/sparse"
dd if=/dev/urandom of="$w/cut" bs=1M count=2 status=none || check_fail "write $w/cut"
truncate -s 0 "$w/cut" || check_fail "truncate $w/cut"
sync
read -r _ chunks1 <<<"$(totals)"
# big 3, target 2, sparse 1 (at least: one chunk each for its data)
[ "$chunks1" -ge 6 ] || check_fail "the daemons hold $chunks1 chunks after writing 6 (want at least 6)"
syncs1=$(syncs)
rm "$w/big" || check_fail "unlink $w/big"
mv "$w/src" "$w/target" || check_fail "rename over $w/target"
rm "$w/sparse" "$w/cut" "$w/target" || check_fail "unlink $w/sparse, $w/cut, $w/target"
unlinked_while_open "$w/open" 1
# the daemons hold no chunk (their count left in chunks)
no_chunks() {
	read -r _ chunks <<<"$(totals)"
	[ "$chunks" = 0 ]
}
check_until 30 no_chunks || check_fail "30 s after removing every file the daemons still hold $chunks chunks"
# big, target (renamed over), sparse and open have bytes; cut was truncated to nothing
check_syncs "$syncs1" "$(syncs)" 4 "4 files with data removed"
"$rdmafsctl" fsck >"$local_dir/fsck" 2>&1 || check_fail "fsck exited $?: $(cat "$local_dir/fsck")"
echo "ok   files with data removed (unlink, rename over, last close, sparse, truncated): $chunks1 chunks gone, fsck clean"

# 3. a file shrunk while one of its daemons was away: the truncate fails
# (EIO) after the service took the new size, and that daemon keeps chunks
# past it. Once it is back, removing the file takes those too: a freed
# file's size does not bound where its chunks are, so the removal asks
# every daemon of the layout. 32 chunks, so that a storage daemon other
# than chunk 0's holds one of chunks 1-31 (the chance that all 31 are on
# chunk 0's daemon or the metadata daemon's is at most 1 in 2^31).
dd if=/dev/urandom of="$w/shrunk" bs=1M count=32 status=none || check_fail "write $w/shrunk"
sync
ino=$(stat -c %i "$w/shrunk") || check_fail "stat $w/shrunk"
zero=" $(check_holders "$ino" 0 meta 1 2 3)"
away=''
for k in $(seq 31); do
	for d in $(check_holders "$ino" "$k" 1 2 3); do
		[[ $zero == *" $d "* ]] || away=$d
	done
done
[ -n "$away" ] || check_error "no storage daemon but chunk 0's (${zero# }) holds one of $w/shrunk's chunks 1-31"
# away_chunks: how many chunks of the file daemon $away holds
away_chunks() {
	check_datadirs_load "$away"
	find "${check_datadirs[$away]}/chunks/$(printf %016x "$ino")" -type f 2>/dev/null | wc -l
}
none_away() {
	[ "$(away_chunks)" = 0 ]
}
"$ctl" ctl kill "$away" KILL || check_error "cannot kill daemon $away"
truncate -s 1M "$w/shrunk" 2>"$local_dir/truncate.err"
truncated=$?
"$ctl" ctl start "$away" || check_error "daemon $away did not come back"
[ "$truncated" != 0 ] ||
	check_fail "truncate of $w/shrunk with daemon $away (holding its chunks) killed succeeded"
held=$(away_chunks)
[ "$held" -ge 1 ] || check_error "daemon $away holds none of $w/shrunk's chunks after the failed truncate"
rm "$w/shrunk" || check_fail "unlink $w/shrunk"
check_until 30 none_away ||
	check_fail "30 s after removing $w/shrunk (truncated to 1 MiB while daemon $away was away) it still holds $(away_chunks) of its chunks"
echo "ok   a file whose truncate failed with daemon $away away ($(cat "$local_dir/truncate.err")): its $held chunks there go with it"

# 4. a client's removal (fs-free-keep, its own client) whose SYNC a restarted
# metadata service answers keeps the file's chunks: that service's run may
# have lost the removal (a power loss). fsck finds them, --repair removes
# them. First the same removal with no restart between: its chunks go.
[ -x "$keeper" ] || check_error "no fs-free-keep at '$keeper'"
# remove_through_client NAME RESTART: fs-free-keep removes $w/NAME, the
# metadata daemon killed (-9) and started again between its unlink and its
# removal of the data when RESTART is 1
remove_through_client() {
	local out=''
	coproc K { "$keeper" "unlink/$1" 2>"$local_dir/keeper.err"; }
	read -r out <&"${K[0]}"
	[ "$out" = unlinked ] || check_error "fs-free-keep said '$out': $(cat "$local_dir/keeper.err")"
	if [ "$2" = 1 ]; then
		"$ctl" ctl kill meta KILL || check_error "cannot kill the metadata daemon"
		"$ctl" ctl start meta || check_error "the metadata daemon did not come back"
	fi
	echo >&"${K[1]}"
	read -r out <&"${K[0]}"
	[ "$out" = "done" ] || check_error "fs-free-keep said '$out': $(cat "$local_dir/keeper.err")"
	wait "$K_PID" || check_error "fs-free-keep exited $?: $(cat "$local_dir/keeper.err")"
}
releases0=$(releases)
for name in gone kept; do
	dd if=/dev/urandom of="$w/$name" bs=1M count=2 status=none || check_fail "write $w/$name"
done
sync
wait_released "$releases0" 2
read -r _ chunks2 <<<"$(totals)"
[ "$chunks2" -ge 2 ] || check_fail "the daemons hold $chunks2 chunks after writing 2 files (want at least 2)"
remove_through_client gone 0
read -r _ chunks3 <<<"$(totals)"
[ "$chunks3" -lt "$chunks2" ] ||
	check_fail "a client's removal with no restart left every chunk ($chunks3 of $chunks2)"
remove_through_client kept 1
read -r _ chunks4 <<<"$(totals)"
[ "$chunks4" = "$chunks3" ] ||
	check_fail "a removal whose SYNC a restarted service answered: $chunks4 chunks left of $chunks3 (want all kept)"
grep -q "metadata service restarted" "$local_dir/keeper.err" ||
	check_fail "fs-free-keep did not say why it kept the chunks: $(cat "$local_dir/keeper.err")"
"$rdmafsctl" fsck >"$local_dir/fsck" 2>&1
rc=$?
[ $rc = 1 ] || check_fail "fsck exited $rc with $chunks4 orphan chunks (want 1): $(cat "$local_dir/fsck")"
"$rdmafsctl" fsck --repair >"$local_dir/repair" 2>&1 ||
	check_fail "fsck --repair exited $?: $(cat "$local_dir/repair")"
read -r _ chunks5 <<<"$(totals)"
[ "$chunks5" = 0 ] || check_fail "fsck --repair left $chunks5 chunks (want 0)"
echo "ok   a removal answered by a restarted service keeps its $chunks4 chunks, fsck --repair removes them"
