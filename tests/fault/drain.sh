#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# drain.sh: `rdmafsctl drain` and `remove` of a storage daemon under writers
# that keep their files open (issue 8, "the drain race"). Runs under
# tests/lib/cluster.sh with --mounts 2:
#
#   cluster.sh ... --mounts 2 -- drain.sh %MOUNT% %MOUNT2% FAULT_WRITER RDMAFSCTL
#
# WRITERS writers append and fsync through the first mount without pause,
# each logging what every successful fsync covered. Storage daemon 1 is
# drained while they write; they write on, it is removed and killed (its data
# is gone), they write on; then every fsynced byte is read back through the
# second mount, which opens the files for the first time (their current
# layout, without the removed daemon).
#
# Phases wait for the writers' progress in fsyncs, never for a time, and
# every wait has a timeout. Exit: 0 every fsynced byte is there; 1 FAIL:
# wrong or missing data, or a writer got an error from the mount (no admin
# command may show through to an application); 99 ERROR: the test itself
# could not run (a tool missing, a command that failed, writers that made no
# progress, a read that failed). Nothing else.
set -u

m1=${1:?usage: drain.sh MOUNT MOUNT2 FAULT_WRITER RDMAFSCTL}
m2=${2:?usage: drain.sh MOUNT MOUNT2 FAULT_WRITER RDMAFSCTL}
writer=${3:?usage: drain.sh MOUNT MOUNT2 FAULT_WRITER RDMAFSCTL}
ctl=${4:?usage: drain.sh MOUNT MOUNT2 FAULT_WRITER RDMAFSCTL}
writers=${RDMAFS_FAULT_WRITERS:-4}
block=${RDMAFS_FAULT_BLOCK:-65536}
# fsyncs each writer makes in each phase; the guest (TCG) sets fewer
steps=${RDMAFS_FAULT_STEPS:-24}
wait_s=${RDMAFS_FAULT_WAIT:-240}

error() {
	echo "ERROR: drain.sh: $*"
	exit 99
}

[ -x "$writer" ] || error "fault-writer not found or not executable: $writer"
[ -x "$ctl" ] || error "rdmafsctl not found or not executable: $ctl"
meta_uri=${RDMAFS_CLUSTER_META:-} secret=${RDMAFS_CLUSTER_SECRET:-}
[ -n "$meta_uri" ] && [ -n "$secret" ] && [ -n "$m2" ] ||
	error "run under tests/lib/cluster.sh --mounts 2"
command -v timeout >/dev/null || error "timeout(1) missing"
victim_dir=$("$RDMAFS_CLUSTER_CTL" ctl datadir 1) || error "no storage daemon 1"
uuid=$(awk '$1 == "uuid" { print $2 }' "$victim_dir/rdmafs-format" 2>/dev/null)
[ -n "$uuid" ] || error "no uuid in $victim_dir/rdmafs-format"

work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-drain.XXXXXX") || error "mktemp failed"
pids=()
cleanup() {
	local p
	touch "$work/stop" 2>/dev/null
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

rctl() {
	timeout 300 "$ctl" -m "$meta_uri" -s "$secret" "$@"
}

covered_lines() {
	local n
	n=$(grep -c '^covered ' "$work/w$1.log" 2>/dev/null)
	echo "${n:-0}"
}

# wait_steps N: until every writer logged N more fsyncs than at the call,
# or stopped (its log then says why). 1 on timeout.
wait_steps() {
	local n=$1 k deadline base=() left
	for k in $(seq "$writers"); do base[k]=$(covered_lines "$k"); done
	deadline=$(($(date +%s) + wait_s))
	while :; do
		left=0
		for k in $(seq "$writers"); do
			kill -0 "${pids[k - 1]}" 2>/dev/null || continue
			[ "$(covered_lines "$k")" -ge $((base[k] + n)) ] || left=$((left + 1))
		done
		[ "$left" -eq 0 ] && return 0
		[ "$(date +%s)" -ge "$deadline" ] && return 1
		sleep 0.2
	done
}

for k in $(seq "$writers"); do
	"$writer" write "$m1/drain-w$k" "$work/w$k.log" "$work/stop" "$block" "$k" \
		2>>"$work/writers.err" &
	pids+=($!)
done
echo "drain.sh: $writers writers, $block-byte blocks; daemon 1 is $uuid"

wait_steps "$steps" || error "the writers made no progress in $wait_s s before the drain"
echo "drain.sh: draining $uuid"
rctl drain "$uuid" >"$work/drain.out" 2>&1 ||
	error "rdmafsctl drain failed (exit $?): $(cat "$work/drain.out")"
cat "$work/drain.out"
wait_steps "$steps" || error "the writers made no progress in $wait_s s after the drain"
echo "drain.sh: removing $uuid"
rctl remove "$uuid" >"$work/remove.out" 2>&1 ||
	error "rdmafsctl remove failed (exit $?): $(cat "$work/remove.out")"
cat "$work/remove.out"
# a removed daemon is switched off: whatever only it held is gone now. It
# stops by itself at its next heartbeat (refused as removed); kill it now if
# it has not yet.
"$RDMAFS_CLUSTER_CTL" ctl kill 1 KILL 2>/dev/null ||
	"$RDMAFS_CLUSTER_CTL" status | grep -q '^storage1: not running' ||
	error "cannot stop storage daemon 1"
wait_steps "$steps" || error "the writers made no progress in $wait_s s after the remove"
touch "$work/stop"

status=0
for k in $(seq "$writers"); do
	# bounded: a writer is at most one write and one fsync from its stop check
	deadline=$(($(date +%s) + wait_s))
	while kill -0 "${pids[k - 1]}" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
		sleep 0.2
	done
	kill -0 "${pids[k - 1]}" 2>/dev/null && error "writer $k did not stop in $wait_s s"
	wait "${pids[k - 1]}"
	rc=$?
	case $rc in
	0) ;;
	3)
		echo "FAIL: writer $k got an error from the mount: $(grep '^error' "$work/w$k.log")"
		status=1
		;;
	*) error "writer $k failed on its own (exit $rc): $(cat "$work/writers.err")" ;;
	esac
done
pids=()
[ -s "$work/writers.err" ] && cat "$work/writers.err"

trouble=0
for k in $(seq "$writers"); do
	"$writer" verify "$m2/drain-w$k" "$work/w$k.log" "$k"
	case $? in
	0) ;;
	1) status=1 ;;
	*) trouble=1 ;;
	esac
done
if [ "$status" -ne 0 ]; then
	echo "FAIL: drain and remove under writers lost or refused fsynced data"
	exit 1
fi
[ "$trouble" -eq 0 ] || error "could not read back every file (above)"
echo "PASS: every fsynced byte of $writers writers survived drain and remove"
exit 0
