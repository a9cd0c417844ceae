#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# rdmafsctl rebalance (issue 11, docs/replication.md) on cluster.sh's 4
# daemons. Storage 3 is drained first, so the files are made on the other 3
# (layouts of 3 daemons); then it is undrained, as a daemon added to the
# cluster, and holds nothing. A rebalance, while fio writes and verifies 4
# files of 3 copies, must:
# - move files onto storage 3 (their layouts now name the daemons placement
#   picks among all 4), with fio seeing no error and no bad block (each file's
#   writers wait only while it moves: the fence);
# - leave every chunk on exactly as many daemons as its file keeps copies,
#   each copy of a reference file its bytes, the copies of fio's files the
#   same, and nothing for fsck (no orphan, no misplaced chunk);
# - leave every file readable whole, the files of 3 copies from the metadata
#   daemon and storage 3 alone (storage 1 and 2 killed);
# - find nothing to move when run again, and no fence to lift (the moves'
#   fences are at their files' new layout generation: no move was cut short).
# Then storage 3 is removed by force (killed: its copies gone with it), and a
# rebalance gives the files of 3 copies their third copy back on the other
# three daemons (each chunk there, the right bytes), and leaves a file of one
# copy that had a chunk on storage 3 where it is, saying so (exit 1), rather
# than turn that lost chunk into a hole.
# Whether fio's files move at all is placement's choice (each about 3 times in
# 4); the line "fio's files moved" says how many did.
# Usage: rebalance.sh DIR
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test itself could not
# check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: rebalance.sh DIR}
check_cluster rebalance.sh
ctl=$RDMAFS_CLUSTER_CTL
MIB=$((1024 * 1024))
check_need fio setfattr stat head dd seq cmp
rdmafsctl=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/rebalance.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
trap 'rm -rf "$local_dir"' EXIT
DAEMONS="meta 1 2 3"
# shellcheck disable=SC2086 # the daemons' names, one word each
check_datadirs_load $DAEMONS
live="live1 live2 live3 live4"

# the inode number of FILE
inode_of() {
	stat -c %i "$1" || check_fail "stat $1"
}

# every chunk of FILE (CHUNKS of them) on COPIES daemons; with REF, each copy REF's
# bytes, else the copies the same as each other
check_chunks() {
	local file=$1 chunks=$2 copies=$3 ref=${4:-} ino index want
	ino=$(inode_of "$file")
	for index in $(seq 0 $((chunks - 1))); do
		want=''
		if [ -n "$ref" ]; then
			dd if="$ref" of="$local_dir/slice" bs=1M skip="$index" count=1 status=none ||
				check_error "cutting chunk $index of $ref"
			want=$local_dir/slice
		fi
		# shellcheck disable=SC2086 # the daemons' names, one word each
		check_chunk_copies "$file" "$ino" "$index" "$copies" "$want" $DAEMONS
	done
}

# 1. storage 3 drained (it holds nothing yet): the files are made on the other three
victim=$("$ctl" ctl uri 3) || check_error "cluster.sh ctl uri 3"
"$rdmafsctl" drain --wait "$victim" >"$local_dir/drain" 2>&1 ||
	check_fail "drain of an empty storage 3: $(cat "$local_dir/drain")"
mkdir "$mnt/r" || check_fail "mkdir r"
setfattr -n rdmafs.replicas -v 3 "$mnt/r" || check_fail "setfattr rdmafs.replicas 3"
for n in a b c d e f; do
	head -c $((5 * MIB + 3)) /dev/urandom >"$local_dir/$n" || check_error "making $n's reference"
	dd if="$local_dir/$n" of="$mnt/r/$n" bs=1M conv=fsync status=none || check_fail "writing r/$n"
	head -c $((3 * MIB)) /dev/urandom >"$local_dir/p$n" || check_error "making p$n's reference"
	dd if="$local_dir/p$n" of="$mnt/p$n" bs=1M conv=fsync status=none || check_fail "writing p$n"
done
for n in $live; do
	dd if=/dev/zero of="$mnt/r/$n" bs=1M count=4 conv=fsync status=none || check_fail "writing r/$n"
done
chunks3() {
	find "${check_datadirs[3]}/chunks" -type f | wc -l
}
[ "$(chunks3)" = 0 ] || check_fail "files were made on the drained storage 3"
"$rdmafsctl" undrain "$victim" >"$local_dir/undrain" 2>&1 ||
	check_fail "undrain of storage 3: $(cat "$local_dir/undrain")"
check_all_up "$rdmafsctl" 4 90 "storage 3 undrained" "$local_dir/status"
echo "rebalance: files made on 3 daemons; storage 3 is up and holds nothing"

# 2. a rebalance under fio
fio --name=live --directory="$mnt/r" --filename="$(echo "$live" | tr ' ' ':')" \
	--size=$((16 * MIB)) --rw=randwrite --bs=64k --direct=1 --ioengine=psync --fsync=8 \
	--randrepeat=1 --randseed=1107 --verify=crc32c --verify_backlog=16 --verify_fatal=1 \
	--do_verify=1 --verify_state_save=0 --time_based --runtime=12 \
	--output="$local_dir/live.fio" >"$local_dir/live.err" 2>&1 &
fio_pid=$!
sleep 3
for n in $live; do
	inode_of "$mnt/r/$n" >"$local_dir/$n.ino"
done
"$rdmafsctl" rebalance >"$local_dir/rebalance" 2>&1
rc=$?
[ $rc = 0 ] || check_fail "rebalance exited $rc: $(cat "$local_dir/rebalance")"
timeout 240 tail --pid="$fio_pid" -f /dev/null
[ $? = 124 ] && check_fail "fio still running 240 s after its time"
wait "$fio_pid"
check_fio "fio during the rebalance" $? "$local_dir/live.err" "$local_dir/live.fio"
moved=$(sed -n 's/.* \([0-9]*\) moved .*/\1/p' "$local_dir/rebalance")
[ "${moved:-0}" -gt 0 ] || check_fail "the rebalance moved no file: $(cat "$local_dir/rebalance")"
on3=0
for n in $live; do
	ino=$(cat "$local_dir/$n.ino")
	for index in 0 1 2 3; do
		if [ -n "$(check_holders "$ino" "$index" 3)" ]; then
			on3=$((on3 + 1))
			break
		fi
	done
done
echo "rebalance: $(cat "$local_dir/rebalance"); fio's files moved onto storage 3: $on3 of 4, fio saw no error"

# 3. copies where their chains are, the right bytes, nothing for fsck
for n in a b c d e f; do
	check_chunks "$mnt/r/$n" 6 3 "$local_dir/$n"
	check_chunks "$mnt/p$n" 3 1 "$local_dir/p$n"
done
for n in $live; do
	check_chunks "$mnt/r/$n" 4 3
done
got=$(chunks3)
[ "$got" -gt 0 ] || check_fail "storage 3 holds no chunk after the rebalance"
"$rdmafsctl" fsck >"$local_dir/fsck" 2>&1 ||
	check_fail "fsck after the rebalance exited $?: $(cat "$local_dir/fsck")"
echo "rebalance: every chunk on its chain's daemons (storage 3: $got chunk files), the right bytes; fsck clean"

# 4. readable whole; the files of 3 copies from the metadata daemon and storage 3 alone
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
for n in a b c d e f; do
	check_same "$mnt/r/$n" "$local_dir/$n" "r/$n after the rebalance"
	check_same "$mnt/p$n" "$local_dir/p$n" "p$n after the rebalance"
done
for i in 1 2; do
	"$ctl" ctl kill "$i" || check_error "killing daemon $i"
done
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
for n in a b c d e f; do
	check_same "$mnt/r/$n" "$local_dir/$n" "r/$n with storage 1 and 2 killed"
done
for i in 1 2; do
	"$ctl" ctl start "$i" || check_error "restarting daemon $i"
done
check_all_up "$rdmafsctl" 4 90 "storage 1 and 2 restarted" "$local_dir/status"
echo "rebalance: every file reads back; files of 3 copies with storage 1 and 2 killed"

# 5. nothing left to move
"$rdmafsctl" rebalance >"$local_dir/again" 2>&1 || check_fail "a second rebalance exited $?: $(cat "$local_dir/again")"
grep -q " 0 moved " "$local_dir/again" || check_fail "a second rebalance moved files: $(cat "$local_dir/again")"
# the moves' fences (at their files' new generation, on the old daemons) are no interrupted move's
grep -q "; 0 fences of interrupted moves lifted" "$local_dir/again" ||
	check_fail "a second rebalance lifted the fences of finished moves: $(cat "$local_dir/again")"
echo "rebalance: run again, it finds nothing to move and no fence to lift"

# 6. storage 3 removed by force: the files of 3 copies get their third copy back
for n in a b c d e f; do
	rm -f "$mnt/p$n" || check_fail "rm p$n"
done
head -c $((3 * MIB)) /dev/urandom >"$local_dir/q" || check_error "making q's reference"
for n in $(seq 20); do
	dd if="$local_dir/q" of="$mnt/q" bs=1M conv=fsync status=none || check_fail "writing q"
	qino=$(inode_of "$mnt/q")
	[ -n "$(check_holders "$qino" 0 3)$(check_holders "$qino" 1 3)$(check_holders "$qino" 2 3)" ] && break
	rm -f "$mnt/q" || check_fail "rm q"
	[ "$n" = 20 ] && check_error "20 files of one copy and none with a chunk on storage 3"
done
"$ctl" ctl kill 3 || check_error "killing storage 3"
"$rdmafsctl" remove --force "$victim" >"$local_dir/remove" 2>&1 ||
	check_fail "remove --force of storage 3: $(cat "$local_dir/remove")"
"$rdmafsctl" rebalance >"$local_dir/lost" 2>&1
rc=$?
[ $rc = 1 ] || check_fail "rebalance with a file of one copy lost on storage 3 exited $rc, want 1: $(cat "$local_dir/lost")"
grep -q "inode $qino: its layout names 1 removed daemon" "$local_dir/lost" ||
	check_fail "the rebalance did not name q (inode $qino) as lost: $(cat "$local_dir/lost")"
grep -q " 1 with copies lost" "$local_dir/lost" ||
	check_fail "the rebalance did not count q alone as lost: $(cat "$local_dir/lost")"
DAEMONS="meta 1 2"
for n in a b c d e f; do
	check_chunks "$mnt/r/$n" 6 3 "$local_dir/$n"
done
for n in $live; do
	check_chunks "$mnt/r/$n" 4 3
done
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
for n in a b c d e f; do
	check_same "$mnt/r/$n" "$local_dir/$n" "r/$n after storage 3 was removed and the rebalance"
done
echo "rebalance: storage 3 removed by force: every chunk of the files of 3 copies on the 3 daemons left, the right bytes; q, whose only copy of a chunk was there, left for fsck"
