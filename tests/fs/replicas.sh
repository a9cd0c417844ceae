#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Replicated files (issue 11, docs/replication.md) on cluster.sh's cluster,
# whose 4 daemons hold data (the metadata service's daemon and storage 1..3):
# - a directory's rdmafs.replicas is what its new files get (read back as
#   the file's own rdmafs.replicas) and what its new directories inherit; a
#   file's count is fixed (EPERM), a bad count refused (EINVAL);
# - a file written there with 3 copies has each chunk on 3 daemons once
#   written (the head forwards each write along the chunk's chain before it
#   answers);
# - with any two of the storage daemons killed, every byte still reads back
#   (from a fresh mount, so nothing comes from the kernel's cache): reads move
#   to a copy that answers;
# - truncating and removing the file reaches every copy (the removal within
#   30 s of its answer);
# - a flipped byte in two of a chunk's three copies: reads return the good
#   bytes, scrub finds both, `rdmafsctl scrub --repair` rewrites them from the
#   third (a bad source is skipped), and a scrub after it finds nothing;
# - a drain keeps every copy;
# - a daemon killed blocks no write, and gets what it missed when it is back (7).
# Runs under tests/lib/cluster.sh (RDMAFS_CLUSTER_CTL kills and restarts).
# Usage: replicas.sh DIR
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test itself could not
# check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: replicas.sh DIR}
check_cluster replicas.sh
ctl=$RDMAFS_CLUSTER_CTL
MIB=$((1024 * 1024))

check_need setfattr getfattr stat cmp head truncate seq od dd
rdmafsctl=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/replicas.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
trap 'rm -rf "$local_dir"' EXIT

# getfattr's value of NAME on FILE, or the error it printed
xattr() {
	getfattr --absolute-names --only-values -n "$2" "$1" 2>&1
}
DAEMONS="meta 1 2 3"
# shellcheck disable=SC2086 # the daemons' names, one word each
check_datadirs_load $DAEMONS
# the chunk file of chunk INDEX of inode INO on daemon I, if it holds one
chunk_file() {
	check_chunk_path "$@"
	echo "$check_path"
}
# how many daemons hold chunk INDEX of inode INO (their data directories' layout)
copies_of() {
	local held
	# shellcheck disable=SC2086 # the daemons' names, one word each
	read -r -a held <<<"$(check_holders "$1" "$2" $DAEMONS)"
	echo "${#held[@]}"
}
# the chunk files of inode INO on every daemon together
chunk_files() {
	local i n=0 dir
	for i in $DAEMONS; do
		dir=$(printf '%s/chunks/%016x' "${check_datadirs[$i]}" "$1")
		[ -d "$dir" ] && n=$((n + $(find "$dir" -mindepth 1 -maxdepth 1 | wc -l)))
	done
	echo "$n"
}

# 1. the count: set on a directory, inherited, fixed on files
mkdir "$mnt/r" || check_fail "mkdir r"
setfattr -n rdmafs.replicas -v 5 "$mnt/r" 2>"$local_dir/err" &&
	check_fail "rdmafs.replicas = 5 was accepted"
grep -q "Invalid argument" "$local_dir/err" ||
	check_fail "rdmafs.replicas = 5: want EINVAL, got: $(cat "$local_dir/err")"
setfattr -n rdmafs.replicas -v 3 "$mnt/r" || check_fail "setfattr rdmafs.replicas 3"
[ "$(xattr "$mnt/r" rdmafs.replicas)" = 3 ] || check_fail "r says $(xattr "$mnt/r" rdmafs.replicas)"
mkdir "$mnt/r/sub" || check_fail "mkdir r/sub"
[ "$(xattr "$mnt/r/sub" rdmafs.replicas)" = 3 ] ||
	check_fail "r/sub inherited $(xattr "$mnt/r/sub" rdmafs.replicas), want 3"
: >"$mnt/one" || check_fail "creating one"
[ "$(xattr "$mnt/one" rdmafs.replicas)" = 1 ] ||
	check_fail "a file outside r has $(xattr "$mnt/one" rdmafs.replicas) copies, want 1"

# 2. files of one chunk, inline and by RDMA, and of several chunks
sizes="3000 300000 $((5 * MIB + 17))"
for s in $sizes; do
	head -c "$s" /dev/urandom >"$local_dir/$s" || check_error "making the $s-byte reference"
	dd if="$local_dir/$s" of="$mnt/r/sub/f$s" bs=1M conv=fsync status=none ||
		check_fail "writing r/sub/f$s"
	[ "$(xattr "$mnt/r/sub/f$s" rdmafs.replicas)" = 3 ] ||
		check_fail "f$s has $(xattr "$mnt/r/sub/f$s" rdmafs.replicas) copies, want 3"
	setfattr -n rdmafs.replicas -v 2 "$mnt/r/sub/f$s" 2>/dev/null &&
		check_fail "a file's rdmafs.replicas was changed"
	ino=$(stat -c %i "$mnt/r/sub/f$s") || check_fail "stat f$s"
	for index in $(seq 0 $(((s - 1) / MIB))); do
		got=$(copies_of "$ino" "$index")
		[ "$got" = 3 ] || check_fail "f$s: chunk $index is on $got daemons, want 3"
	done
	got=$(chunk_files "$ino")
	[ "$got" = $((3 * ((s + MIB - 1) / MIB))) ] || check_fail "f$s: $got chunk files in all"
done
echo "replicas: every chunk of 3 files on 3 daemons"

# 3. any two storage daemons gone (the metadata service's must stay): every byte reads back
for alive in 1 2 3; do
	for i in 1 2 3; do
		[ "$i" = "$alive" ] || "$ctl" ctl kill "$i" || check_error "killing daemon $i"
	done
	"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
	for s in $sizes; do
		check_same "$mnt/r/sub/f$s" "$local_dir/$s" "f$s with only daemon $alive up"
	done
	for i in 1 2 3; do
		[ "$i" = "$alive" ] || "$ctl" ctl start "$i" || check_error "restarting daemon $i"
	done
done
echo "replicas: every file read back whole with any two storage daemons killed"

# 3b. every copy of a chunk gone: the read fails with EIO, in bounded time, never garbage.
# With storage 1..3 killed only the metadata service's daemon is left; a 16-chunk file
# almost surely has a chunk none of whose copies is there (each chunk is on 3 of 4 daemons).
head -c $((16 * MIB)) /dev/urandom >"$local_dir/h" || check_error "making h's reference"
dd if="$local_dir/h" of="$mnt/r/h" bs=1M conv=fsync status=none || check_fail "writing h"
for i in 1 2 3; do
	"$ctl" ctl kill "$i" || check_error "killing daemon $i"
done
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
check_cmp "$mnt/r/h" "$local_dir/h" 60
case $? in
0) echo "replicas: every chunk of h had a copy left (placement); read whole" ;;
1) check_fail "h with 3 daemons down read back different bytes ($check_said)" ;;
*) case $check_said in
	*"Input/output error"*) echo "replicas: a chunk with every copy down fails with EIO" ;;
	*) check_fail "h with every copy of a chunk down: $check_said (want EIO)" ;;
	esac ;;
esac
for i in 1 2 3; do
	"$ctl" ctl start "$i" || check_error "restarting daemon $i"
done
check_same "$mnt/r/h" "$local_dir/h" "h once the daemons are back"
rm "$mnt/r/h" || check_fail "rm h"

# 4. a truncate and a removal reach every copy
s=$((5 * MIB + 17))
ino=$(stat -c %i "$mnt/r/sub/f$s") || check_fail "stat f$s"
truncate -s $((MIB + 5)) "$mnt/r/sub/f$s" || check_fail "truncating f$s"
for index in 0 1; do
	got=$(copies_of "$ino" "$index")
	[ "$got" = 3 ] || check_fail "after the truncate chunk $index is on $got daemons, want 3"
done
got=$(chunk_files "$ino")
[ "$got" = 6 ] || check_fail "after the truncate: $got chunk files, want 6"
head -c $((MIB + 5)) "$local_dir/$s" >"$local_dir/cut" || check_error "cutting the reference"
check_same "$mnt/r/sub/f$s" "$local_dir/cut" "f$s after the truncate"
rm "$mnt/r/sub/f$s" || check_fail "rm f$s"
# the chunks go after the unlink's answer (rfs_free_data())
no_chunk_files() { [ "$(chunk_files "$1")" = 0 ]; }
check_until 30 no_chunk_files "$ino" ||
	check_fail "30 s after the removal: $(chunk_files "$ino") chunk files, want 0"
echo "replicas: a truncate and a removal reached all 3 copies"

# 5. a flipped byte in two of the three copies of a chunk
s=$((2 * MIB + 100))
head -c "$s" /dev/urandom >"$local_dir/g" || check_error "making g's reference"
dd if="$local_dir/g" of="$mnt/r/g" bs=1M conv=fsync status=none || check_fail "writing g"
ino=$(stat -c %i "$mnt/r/g") || check_fail "stat g"
flipped=0
for i in $DAEMONS; do
	f=$(chunk_file "$i" "$ino" 1)
	if [ ! -f "$f" ] || [ $flipped -ge 2 ]; then
		continue
	fi
	at=$((4096 * (flipped + 3) + 7))
	old=$(od -An -tu1 -j "$at" -N1 "$f" | tr -d ' ') || check_error "reading byte $at of $f"
	# shellcheck disable=SC2059 # the format is the byte, as an octal escape
	printf "\\$(printf '%03o' $(((old + 1) % 256)))" |
		dd of="$f" bs=1 seek="$at" conv=notrunc status=none || check_error "flipping $f"
	flipped=$((flipped + 1))
done
[ $flipped = 2 ] || check_error "g's chunk 1 was on fewer than 2 daemons"
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
check_same "$mnt/r/g" "$local_dir/g" "g with two of its chunk's copies flipped"
"$rdmafsctl" scrub >"$local_dir/scrub1" 2>&1
rc=$?
[ $rc = 1 ] || check_fail "scrub of the flipped copies exited $rc, want 1: $(cat "$local_dir/scrub1")"
[ "$(grep -c "^[0-9a-f-]\{36\} .* $ino .* 1 " "$local_dir/scrub1")" = 2 ] ||
	check_fail "scrub did not list chunk 1 of g on 2 daemons: $(cat "$local_dir/scrub1")"
"$rdmafsctl" scrub --status --repair >"$local_dir/repair" 2>&1 ||
	check_fail "scrub --repair exited $?: $(cat "$local_dir/repair")"
[ "$(grep -c "inode $ino chunk 1 on .*: repaired from" "$local_dir/repair")" = 2 ] ||
	check_fail "scrub --repair did not repair both copies: $(cat "$local_dir/repair")"
"$rdmafsctl" scrub >"$local_dir/scrub2" 2>&1 ||
	check_fail "a scrub after the repair exited $?: $(cat "$local_dir/scrub2")"
for i in $DAEMONS; do
	f=$(chunk_file "$i" "$ino" 1)
	[ -f "$f" ] || continue
	dd if="$local_dir/g" of="$local_dir/g1" bs=1M skip=1 count=1 status=none ||
		check_error "cutting g's chunk 1"
	check_same "$f" "$local_dir/g1" "chunk 1 of g on daemon $i after the repair"
done
check_same "$mnt/r/g" "$local_dir/g" "g after the repair"
echo "replicas: two flipped copies read around, found by scrub, repaired from the third"

# 6. a drain keeps every copy: a file of 4 copies on 4 daemons cannot leave one (the drain
# fails for it and remove refuses); files of 3 copies move, each chunk's copy to the daemon
# that takes the drained one's place in its chain, so with the other two storage daemons
# killed the metadata service's daemon alone still holds every chunk.
mkdir "$mnt/r4" || check_fail "mkdir r4"
setfattr -n rdmafs.replicas -v 4 "$mnt/r4" || check_fail "setfattr r4"
# 16 more chunks of 3 copies: some chunk almost surely has none on the metadata daemon yet
head -c $((16 * MIB)) /dev/urandom >"$local_dir/many" || check_error "making many's reference"
dd if="$local_dir/many" of="$mnt/r/many" bs=1M conv=fsync status=none || check_fail "writing many"
head -c $((3 * MIB)) /dev/urandom >"$local_dir/four" || check_error "making four's reference"
dd if="$local_dir/four" of="$mnt/r4/four" bs=1M conv=fsync status=none || check_fail "writing four"
[ "$(xattr "$mnt/r4/four" rdmafs.replicas)" = 4 ] || check_fail "four has $(xattr "$mnt/r4/four" rdmafs.replicas) copies"
victim=$("$ctl" ctl uri 1) || check_error "cluster.sh ctl uri 1"
# a drain refuses a daemon that lacks a write it missed (a forward refused while the maps
# settled after the restarts above is copied within a heartbeat or two)
check_all_up "$rdmafsctl" 4 90 "before the drain" "$local_dir/status"
"$rdmafsctl" drain --wait "$victim" >"$local_dir/drain" 2>&1
rc=$?
[ $rc != 0 ] || check_fail "a drain that would drop a copy of four succeeded: $(cat "$local_dir/drain")"
grep -q "keeps 4 copies of each chunk" "$local_dir/drain" ||
	check_fail "the drain did not say why four stayed: $(cat "$local_dir/drain")"
"$rdmafsctl" remove "$victim" >"$local_dir/remove" 2>&1 &&
	check_fail "remove of a daemon four still needs succeeded"
"$rdmafsctl" undrain "$victim" >"$local_dir/undrain" 2>&1 ||
	check_fail "undrain: $(cat "$local_dir/undrain")"
for i in 2 3; do
	"$ctl" ctl kill "$i" || check_error "killing daemon $i"
done
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
check_same "$mnt/r/g" "$local_dir/g" "g, drained off daemon 1, with daemons 2 and 3 down"
check_same "$mnt/r/many" "$local_dir/many" "many, drained off daemon 1, with daemons 2 and 3 down"
for s in 3000 300000; do
	check_same "$mnt/r/sub/f$s" "$local_dir/$s" "f$s, drained off daemon 1, with daemons 2 and 3 down"
done
for i in 2 3; do
	"$ctl" ctl start "$i" || check_error "restarting daemon $i"
done
check_same "$mnt/r4/four" "$local_dir/four" "four after the refused drain"
echo "replicas: a drain moved files of 3 copies whole and refused to drop a copy of a file of 4"

# 7. a daemon lost blocks no write. With storage 2 killed, a new file, an overwrite and a
# truncate of files of 3 copies succeed: the writes wait until the service marks it DOWN
# (the daemons' chains then skip it and record what it missed). Started again it is SYNCING
# until the head of each chain has copied it the chunks it missed, then UP; then every copy
# of every chunk holds the reference's bytes, and the files read back whole from the
# metadata daemon and it alone.
# cluster.sh's daemons all UP in `rdmafsctl status` (the syncing one caught up), within 90 s
wait_all_up() {
	check_all_up "$rdmafsctl" 4 90 "daemon 2 killed, then restarted" "$local_dir/status"
}
# every chunk of FILE (inode INO, SIZE bytes) on 3 daemons, each copy the reference's bytes
check_copies() {
	local name=$1 ino=$2 ref=$3 size=$4 index chunks
	chunks=$(((size + MIB - 1) / MIB))
	for index in $(seq 0 $((chunks - 1))); do
		dd if="$ref" of="$local_dir/slice" bs=1M skip="$index" count=1 status=none ||
			check_error "cutting chunk $index of $name's reference"
		# shellcheck disable=SC2086 # the daemons' names, one word each
		check_chunk_copies "$name" "$ino" "$index" 3 "$local_dir/slice" $DAEMONS
	done
	got=$(chunk_files "$ino")
	[ "$got" = $((3 * chunks)) ] || check_fail "$name: $got chunk files, want $((3 * chunks))"
}
wait_all_up
"$ctl" ctl kill 2 || check_error "killing daemon 2"
head -c $((8 * MIB + 3)) /dev/urandom >"$local_dir/d1" || check_error "making d1's reference"
dd if="$local_dir/d1" of="$mnt/r/d1" bs=1M conv=fsync status=none ||
	check_fail "writing d1 with daemon 2 down"
head -c 100000 /dev/urandom >"$local_dir/patch" || check_error "making the patch"
for f in "$mnt/r/g" "$local_dir/g"; do
	dd if="$local_dir/patch" of="$f" bs=100000 seek=$((MIB - 5000)) oflag=seek_bytes \
		conv=notrunc,fsync status=none ||
		check_fail "overwriting $f with daemon 2 down"
done
truncate -s $((5 * MIB + 9)) "$mnt/r/many" || check_fail "truncating many with daemon 2 down"
truncate -s $((5 * MIB + 9)) "$local_dir/many" || check_error "truncating many's reference"
"$rdmafsctl" status >"$local_dir/status" 2>&1
grep -q "1 of 4 daemons down" "$local_dir/status" ||
	check_fail "status does not say daemon 2 is down: $(cat "$local_dir/status")"
# the heads count what storage2 missed in their heartbeats (every 2 s): status says so
for n in $(seq 30); do
	"$rdmafsctl" status >"$local_dir/status" 2>&1
	grep -q "under-replicated: [1-9][0-9]* chunks lack a copy that missed writes (storage2 [1-9]" \
		"$local_dir/status" && break
	[ "$n" = 30 ] && check_fail "status does not say what storage2 missed: $(cat "$local_dir/status")"
	sleep 1
done
for f in d1 g many; do
	check_same "$mnt/r/$f" "$local_dir/$f" "$f with daemon 2 down"
done
"$ctl" ctl start 2 || check_error "restarting daemon 2"
wait_all_up
grep -q "under-replicated: .*storage2 [1-9]" "$local_dir/status" &&
	check_fail "storage2 is up, and status still says it lacks copies: $(cat "$local_dir/status")"
for f in d1 g many; do
	ino=$(stat -c %i "$mnt/r/$f") || check_fail "stat $f"
	check_copies "$f" "$ino" "$local_dir/$f" "$(stat -c %s "$local_dir/$f")"
done
for i in 1 3; do
	"$ctl" ctl kill "$i" || check_error "killing daemon $i"
done
"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
for f in d1 g many; do
	check_same "$mnt/r/$f" "$local_dir/$f" "$f with daemons 1 and 3 down"
done
for i in 1 3; do
	"$ctl" ctl start "$i" || check_error "restarting daemon $i"
done
echo "replicas: writes, an overwrite and a truncate went on with a daemon down; back, it got every chunk it missed"
