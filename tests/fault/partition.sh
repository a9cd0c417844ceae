#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# partition.sh MOUNT: the network faults of real hosts, against one storage
# daemon at a time, under tests/lib/cluster.sh --hosts (each daemon in its
# own network namespace, the mount in another):
#
#   cluster.sh --hosts --storage 3 -- partition.sh %MOUNT%
#
# Today every chunk has one copy, so what is promised is what a single copy
# can keep: while a daemon's link is cut (both ways, or one way: it hears but
# is not heard) or the daemon is paused (SIGSTOP), a read or an fsynced write
# of a file with its chunk there fails with an error (EIO or ETIMEDOUT)
# within a bound, never hangs and never returns other bytes; files on the
# other daemons read and write as usual meanwhile; once the fault is undone,
# every file reads back as it was acknowledged (a write that failed may or
# may not have landed: it was not acknowledged). First, on a lossy link
# (every Nth packet dropped each way, a fixed pattern) and a slow one,
# everything works. Last, the metadata service's own link is cut: lookups
# and creates fail with an error in bounded time, and work again once it is
# healed.
#
# Each file is one chunk (256 KiB: pulled by RDMA READ, not inline), so
# `cluster.sh ctl holders` names the one daemon a file depends on. Reads use
# O_DIRECT: the page cache must not answer for the daemon.
#
# Exit: 0 pass; 1 FAIL (a hang, wrong bytes, an error where none was due or
# none where one was); 99 ERROR (the test itself could not check).
set -u
mnt=${1:?usage: partition.sh MOUNT}
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
ctl=${RDMAFS_CLUSTER_CTL:?partition.sh runs under tests/lib/cluster.sh --hosts}
work=$RDMAFS_CLUSTER_DIR/partition
size=$((256 * 1024))
victim=2
# A call gives up after the call timeout (5 s), once retried on a fresh
# connection (connect 2 s): far less than this, which only catches a hang.
hang_s=${RDMAFS_FAULT_HANG_S:-90}
check_need dd cmp stat timeout
mkdir -p "$work" || check_error "cannot make $work"

# make_file N: /pN, its reference copy $work/pN, fsynced.
make_file() {
	head -c "$size" /dev/urandom >"$work/p$1" || check_error "cannot write $work/p$1"
	timeout "$hang_s" dd if="$work/p$1" of="$mnt/p$1" bs="$size" conv=fsync status=none ||
		check_fail "writing $mnt/p$1 with no fault in force failed"
}

# Files until at least two depend on the victim and two on other daemons
# (placement is by the daemons' UUIDs, new in every run).
held=() free=()
for n in $(seq 200); do
	[ ${#held[@]} -ge 2 ] && [ ${#free[@]} -ge 2 ] && break
	make_file "$n"
	ino=$(stat -c %i "$mnt/p$n") || check_fail "stat $mnt/p$n failed"
	holders=$("$ctl" ctl holders "$ino") || check_error "cluster.sh ctl holders $ino failed"
	if grep -qx "$victim" <<<"$holders"; then held+=("$n"); else free+=("$n"); fi
done
if [ ${#held[@]} -lt 2 ] || [ ${#free[@]} -lt 2 ]; then
	check_error "200 files and not two on storage$victim and two elsewhere (${#held[@]}, ${#free[@]})"
fi
echo "files on storage$victim: ${held[*]}; elsewhere: ${free[*]}"

# read_direct N OUT: reads /pN with O_DIRECT into OUT; the status of dd, or
# 124 if it hung; dd's message in $said.
said=
read_direct() {
	said=$(timeout "$hang_s" dd if="$mnt/p$1" of="$2" bs="$size" iflag=direct status=none 2>&1)
}

# expect_read_ok N WHAT: /pN reads back as its reference.
expect_read_ok() {
	read_direct "$1" "$work/got"
	case $? in
	0) ;;
	124) check_fail "$2: reading p$1 hung for $hang_s s" ;;
	*) check_fail "$2: reading p$1 failed: $said" ;;
	esac
	check_cmp "$work/got" "$work/p$1" || check_fail "$2: p$1 read back other bytes than were written"
}

# expect_read_error N WHAT: reading /pN fails with EIO or ETIMEDOUT, in time;
# should it succeed after all (a cached answer), its bytes must be right.
expect_read_error() {
	read_direct "$1" "$work/got"
	case $? in
	0)
		check_cmp "$work/got" "$work/p$1" || check_fail "$2: p$1 read other bytes than were written"
		check_fail "$2: reading p$1 succeeded although its only copy is unreachable"
		;;
	124) check_fail "$2: reading p$1 hung for $hang_s s instead of failing" ;;
	esac
	case $said in
	*"Input/output error"* | *"timed out"*) echo "ok: $2: p$1: $said" ;;
	*) check_fail "$2: reading p$1 failed with another error than EIO or ETIMEDOUT: $said" ;;
	esac
}

# overwrite N: the first 4 KiB of /pN with new bytes, fsynced; the new
# bytes in $work/pN.new. Returns dd's status (124: it hung), its message in $said.
overwrite() {
	cp "$work/p$1" "$work/p$1.new" || check_error "cannot copy $work/p$1"
	head -c 4096 /dev/urandom | dd of="$work/p$1.new" conv=notrunc status=none ||
		check_error "cannot write $work/p$1.new"
	said=$(head -c 4096 "$work/p$1.new" |
		timeout "$hang_s" dd of="$mnt/p$1" bs=4096 conv=notrunc,fsync status=none 2>&1)
}

# after_heal N WHAT: /pN reads back, within the bound of a reconnection's
# backoff, as its reference or (after a failed write) as the new bytes,
# which then become the reference.
after_heal() {
	local deadline=$((SECONDS + hang_s))
	until read_direct "$1" "$work/got"; do
		[ $SECONDS -lt "$deadline" ] || check_fail "$2: p$1 still unreadable $hang_s s after the fault ended: $said"
		sleep 1
	done
	if check_cmp "$work/got" "$work/p$1"; then
		return 0
	elif [ -f "$work/p$1.new" ] && check_cmp "$work/got" "$work/p$1.new"; then
		mv "$work/p$1.new" "$work/p$1" || check_error "cannot keep $work/p$1.new"
		return 0
	fi
	check_fail "$2: after the fault, p$1 holds neither what was acknowledged nor the write that failed"
}

# under_fault WHAT: with the fault in force, the files on the victim fail
# to read and to take an fsynced write, and the others work.
under_fault() {
	local n
	for n in "${held[@]}"; do expect_read_error "$n" "$1"; done
	for n in "${free[@]}"; do expect_read_ok "$n" "$1"; done
	overwrite "${held[0]}"
	case $? in
	0) check_fail "$1: an fsynced write to p${held[0]} succeeded although its only copy is unreachable" ;;
	124) check_fail "$1: an fsynced write to p${held[0]} hung for $hang_s s" ;;
	esac
	echo "ok: $1: the fsynced write to p${held[0]} failed: $said"
	overwrite "${free[0]}" || check_fail "$1: an fsynced write to p${free[0]} (not behind the fault) failed: $said"
	mv "$work/p${free[0]}.new" "$work/p${free[0]}" || check_error "cannot keep $work/p${free[0]}.new"
	expect_read_ok "${free[0]}" "$1, after the write"
}

# all_back WHAT: once the fault is undone, every file reads back.
all_back() {
	local n
	for n in "${held[@]}" "${free[@]}"; do after_heal "$n" "$1"; done
	rm -f "$work"/p*.new
	echo "ok: $1: every file reads back as acknowledged"
}

"$ctl" ctl loss $victim 10 || check_error "cluster.sh ctl loss $victim 10 failed"
for n in "${held[@]}" "${free[@]}"; do expect_read_ok "$n" "every 10th packet lost"; done
overwrite "${held[0]}" || check_fail "every 10th packet lost: an fsynced write to p${held[0]} failed: $said"
mv "$work/p${held[0]}.new" "$work/p${held[0]}" || check_error "cannot keep $work/p${held[0]}.new"
expect_read_ok "${held[0]}" "every 10th packet lost, after the write"
"$ctl" ctl heal $victim || check_error "cluster.sh ctl heal $victim failed"
all_back "lossy link, then healed"

"$ctl" ctl slow $victim 8mbit || check_error "cluster.sh ctl slow $victim 8mbit failed"
for n in "${held[@]}"; do expect_read_ok "$n" "a link of 8 Mbit/s"; done
"$ctl" ctl heal $victim || check_error "cluster.sh ctl heal $victim failed"
all_back "slow link, then healed"

"$ctl" ctl cut $victim both || check_error "cluster.sh ctl cut $victim both failed"
under_fault "link cut both ways"
"$ctl" ctl heal $victim || check_error "cluster.sh ctl heal $victim failed"
all_back "link cut both ways, then restored"

"$ctl" ctl cut $victim out || check_error "cluster.sh ctl cut $victim out failed"
under_fault "one-way partition (storage$victim hears, is not heard)"
"$ctl" ctl heal $victim || check_error "cluster.sh ctl heal $victim failed"
all_back "one-way partition, then restored"

"$ctl" ctl signal $victim STOP || check_error "cluster.sh ctl signal $victim STOP failed"
under_fault "storage$victim paused (SIGSTOP)"
"$ctl" ctl signal $victim CONT || check_error "cluster.sh ctl signal $victim CONT failed"
all_back "storage$victim paused, then resumed"

# The metadata service's link: a name never looked up (no cache can answer
# for it) fails to resolve and to be created, with an error and in bounded
# time, never "no such file"; once healed both work and every file is back.
"$ctl" ctl cut meta both || check_error "cluster.sh ctl cut meta both failed"
said=$(timeout "$hang_s" stat "$mnt/never-looked-up" 2>&1)
case $?:$said in
124:*) check_fail "metadata service cut off: a lookup hung for $hang_s s" ;;
0:*) check_fail "metadata service cut off: a lookup of a name that does not exist succeeded" ;;
*"No such file"*) check_fail "metadata service cut off: a lookup said ENOENT without asking the service: $said" ;;
*"Input/output error"* | *"timed out"*) echo "ok: metadata service cut off: lookup failed: $said" ;;
*) check_fail "metadata service cut off: a lookup failed with another error than EIO or ETIMEDOUT: $said" ;;
esac
said=$(timeout "$hang_s" touch "$mnt/created-while-cut" 2>&1)
case $? in
0) check_fail "metadata service cut off: a create succeeded" ;;
124) check_fail "metadata service cut off: a create hung for $hang_s s" ;;
esac
echo "ok: metadata service cut off: create failed: $said"
"$ctl" ctl heal meta || check_error "cluster.sh ctl heal meta failed"
deadline=$((SECONDS + hang_s))
until said=$(timeout "$hang_s" touch "$mnt/created-after" 2>&1); do
	[ $SECONDS -lt "$deadline" ] || check_fail "metadata service healed: still no create after $hang_s s: $said"
	sleep 1
done
all_back "metadata service cut off, then restored"
echo "partition: ${#held[@]} files on storage$victim and ${#free[@]} elsewhere through six faults: nothing hung, nothing acknowledged lost"
