#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A storage daemon killed (-9) and restarted while the mount is in use:
# - reading a file with chunks on it fails with EIO or ETIMEDOUT within a
#   bounded time, never hangs; the mount itself keeps answering;
# - a writer doing 1 MiB writes + fsync sees errors, not a hang;
# - after the restart, the file and every write fsynced before the kill are
#   intact, and new writes work.
# Runs under tests/lib/cluster.sh (needs RDMAFS_CLUSTER_CTL to kill and restart).
# Usage: restart.sh DIR
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test itself could not
# check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: restart.sh DIR}
check_cluster restart.sh
ctl=$RDMAFS_CLUSTER_CTL
# The client's per-RPC timeout is 5 s; allow retries and reconnects on top.
ERROR_BOUND=${RDMAFS_FS_ERROR_BOUND:-60}
RECOVER_BOUND=${RDMAFS_FS_RECOVER_BOUND:-90}
MIB=$((1024 * 1024))
SLOTS=24

fail() {
	[ -f "${local_dir:-}/writer.log" ] && { echo "--- writer log" >&2; cat "$local_dir/writer.log" >&2; }
	check_fail "$@"
}
error() {
	check_error "$@"
}
now_ms() {
	date +%s%3N
}
# an error a dead daemon may give: EIO or ETIMEDOUT (as strerror prints them)
is_daemon_error() {
	grep -qE 'Input/output error|Connection timed out' "$1"
}

check_need cmp dd head timeout awk ls stat
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/restart.XXXXXX") || error "mktemp"
work=$(mktemp -d "$mnt/restart.XXXXXX") || fail "mktemp in $mnt"
writer_pid=
cleanup() {
	[ -n "$writer_pid" ] && kill "$writer_pid" 2>/dev/null && wait "$writer_pid" 2>/dev/null
	rm -rf "$local_dir"
}
trap cleanup EXIT

# 1. a file striped over the daemons, fsynced
head -c $((8 * MIB + 4321)) /dev/urandom >"$local_dir/A" || error "making A's reference"
timeout 120 dd if="$local_dir/A" of="$work/A" bs=1M conv=fsync status=none || fail "writing A"
check_same "$work/A" "$local_dir/A" "A before any kill"

# 2. a writer: 1 MiB + fsync into slot k of B, forever; logs "k rc ms error"
head -c $((SLOTS * MIB)) /dev/urandom >"$local_dir/B" || error "making B's reference"
writer() {
	local k=0 start rc
	while [ ! -f "$local_dir/stop" ]; do
		start=$(now_ms)
		timeout 120 dd if="$local_dir/B" of="$work/B" bs=1M seek=$k skip=$k count=1 \
			conv=notrunc,fsync status=none 2>"$local_dir/writer.err"
		rc=$?
		echo "$k $rc $(($(now_ms) - start)) $(head -c 200 "$local_dir/writer.err" | tr '\n' ' ')" \
			>>"$local_dir/writer.log"
		k=$(((k + 1) % SLOTS))
		sleep 0.05
	done
}
: >"$local_dir/writer.log"
writer &
writer_pid=$!
# No clock on the writer's speed (a loaded TCG guest takes seconds per write):
# only a writer that stops making progress is a failure.
lines=0
deadline=$(($(now_ms) + 150000))
until [ "$(awk '$2 == 0' "$local_dir/writer.log" | wc -l)" -ge "$SLOTS" ]; do
	now=$(wc -l <"$local_dir/writer.log")
	if [ "$now" -ne "$lines" ]; then
		lines=$now
		deadline=$(($(now_ms) + 150000))
	fi
	[ "$(now_ms)" -lt "$deadline" ] || fail "the writer made no progress for 150 s (each write is bounded at 120 s)"
	# the poll spawns processes: in a TCG guest, polling faster slows the writer
	sleep 1
done

# the victim: a storage daemon that holds chunks of both A and B (every slot
# of B has been written), so that reading A and writing B must meet it
ino_a=$(stat -c %i "$work/A") || fail "stat A"
ino_b=$(stat -c %i "$work/B") || fail "stat B"
holders_a=" $("$ctl" ctl holders "$ino_a" | tr '\n' ' ')" || fail "cluster.sh ctl holders $ino_a"
holders_b=$("$ctl" ctl holders "$ino_b") || fail "cluster.sh ctl holders $ino_b"
victim=
for i in $holders_b; do
	case $holders_a in *" $i "*) victim=$i && break ;; esac
done
[ -n "$victim" ] || fail "no storage daemon holds chunks of both an 8 MiB and a 24 MiB file: is data striped?"
echo "storage daemon $victim holds chunks of A and B"

# 3. kill -9; every slot fsynced before this point must survive
cp "$local_dir/writer.log" "$local_dir/before-kill.log"
"$ctl" ctl kill "$victim" KILL || fail "kill -9 storage daemon $victim"
echo "killed storage daemon $victim"

# 4. reading A fails, with the right error, in bounded time
start=$(now_ms)
timeout $((ERROR_BOUND * 2)) cat "$work/A" >/dev/null 2>"$local_dir/read.err"
rc=$?
elapsed=$(($(now_ms) - start))
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "reading A hung for $((ERROR_BOUND * 2)) s with a daemon down"
[ $rc -ne 0 ] || fail "reading A succeeded with the daemon holding some of its chunks dead"
is_daemon_error "$local_dir/read.err" ||
	fail "reading A: expected EIO or ETIMEDOUT, got: $(cat "$local_dir/read.err")"
[ "$elapsed" -le $((ERROR_BOUND * 1000)) ] ||
	fail "reading A took $elapsed ms to fail (bound $ERROR_BOUND s)"
echo "ok   read with the daemon down fails in $elapsed ms: $(head -n 1 "$local_dir/read.err")"
# the mount itself stays usable
timeout 20 ls "$work" >/dev/null || fail "listing the mount with a daemon down hung or failed"
timeout 20 stat "$work/A" >/dev/null || fail "stat with a daemon down hung or failed"
echo "ok   the mount answers metadata calls with a daemon down"

# 5. the writer meets the dead daemon: errors, no hang. It writes the slots
# in turn, so of the writes after the kill, the first SLOTS + 1 (the one in
# flight at the kill may have gone to a live daemon) cover every slot, and
# those on the victim must fail. Counted in writes, not seconds: a loaded
# guest may take long for each; only a writer that stops is a hang.
lines=$(wc -l <"$local_dir/before-kill.log")
seen=$lines
deadline=$(($(now_ms) + 150000))
until tail -n +"$((lines + 1))" "$local_dir/writer.log" | awk '$2 != 0 { found = 1 } END { exit !found }'; do
	now=$(wc -l <"$local_dir/writer.log")
	[ "$((now - lines))" -le $((SLOTS + 1)) ] ||
		fail "$((now - lines)) writes after the kill, every slot of B written, none failed with a daemon holding some of them down"
	if [ "$now" -ne "$seen" ]; then
		seen=$now
		deadline=$(($(now_ms) + 150000))
	fi
	[ "$(now_ms)" -lt "$deadline" ] || fail "the writer made no progress for 150 s after the kill (each write is bounded at 120 s)"
	sleep 1
done
bad=$(tail -n +"$((lines + 1))" "$local_dir/writer.log" | awk '$2 != 0' | head -n 1)
case $bad in
*"Input/output error"* | *"Connection timed out"*) ;;
*) fail "writer error: expected EIO or ETIMEDOUT, got: $bad" ;;
esac
slow=$(tail -n +"$((lines + 1))" "$local_dir/writer.log" | awk -v b=$((ERROR_BOUND * 1000)) '$3 > b' | head -n 1)
[ -z "$slow" ] || fail "a write took longer than $ERROR_BOUND s: $slow"
echo "ok   the writer gets errors: $bad"
touch "$local_dir/stop"
wait "$writer_pid"
writer_pid=

# 6. restart; the mount recovers in bounded time
"$ctl" ctl start "$victim" || fail "restarting storage daemon $victim"
echo "restarted storage daemon $victim"
start=$(now_ms)
# While the daemon comes back a read may still err; different data never.
until check_cmp "$work/A" "$local_dir/A" 60; rc=$?; [ $rc -eq 0 ]; do
	[ $rc -eq 1 ] && fail "A differs from what was written and fsynced before the kill ($check_said)"
	[ "$(now_ms)" -lt $((start + RECOVER_BOUND * 1000)) ] ||
		fail "A still unreadable $RECOVER_BOUND s after the restart: $check_said"
	sleep 1
done
echo "ok   A intact $(($(now_ms) - start)) ms after the restart"

# 7. every slot of B whose write+fsync succeeded before the kill is intact
# (the last successful write of each slot wrote the same bytes)
checked=0
for k in $(awk '$2 == 0 { print $1 }' "$local_dir/before-kill.log" | sort -un); do
	# a slot rewritten after the kill may have failed half-way: skip those
	if tail -n +"$(($(wc -l <"$local_dir/before-kill.log") + 1))" "$local_dir/writer.log" |
		awk -v k="$k" '$1 == k && $2 != 0 { f = 1 } END { exit !f }'; then
		continue
	fi
	timeout 60 dd if="$work/B" of="$local_dir/slot" bs=1M skip="$k" count=1 status=none \
		2>"$local_dir/slot.err" ||
		fail "B slot $k (written and fsynced before the kill) unreadable after the restart: $(cat "$local_dir/slot.err")"
	check_slice "$local_dir/B" "$k" 1 "$local_dir/want"
	check_same "$local_dir/slot" "$local_dir/want" "B slot $k (written and fsynced before the kill)"
	checked=$((checked + 1))
done
[ "$checked" -ge 1 ] || fail "no fsynced slot of B left to check"
echo "ok   $checked fsynced 1 MiB slots of B intact"

# 8. new writes work, on every daemon
head -c $((8 * MIB)) /dev/urandom >"$local_dir/C" || error "making C's reference"
timeout 120 dd if="$local_dir/C" of="$work/C" bs=1M conv=fsync status=none || fail "writing C after the restart"
check_same "$work/C" "$local_dir/C" "C after the restart"
timeout 120 dd if="$local_dir/C" of="$work/A" bs=1M count=2 seek=3 conv=notrunc,fsync status=none ||
	fail "overwriting A after the restart"
dd if="$local_dir/C" of="$local_dir/A" bs=1M count=2 seek=3 conv=notrunc status=none ||
	error "updating A's reference"
check_same "$work/A" "$local_dir/A" "A overwritten after the restart"
echo "ok   new writes and overwrites after the restart"

timeout 60 rm -rf "$work" || fail "removing $work"
echo "pass"
