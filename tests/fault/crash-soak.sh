#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Crash soak: nothing acknowledged by a successful fsync is ever lost when a
# daemon dies.
#
#   tests/fault/crash-soak.sh --build DIR [--trials N] [--transport tcp|rdma]
#                             [--seed S] [--writers W] [--storage N]
#
# Each trial starts a cluster (tests/lib/cluster.sh: a metadata daemon, N
# storage daemons, two mounts), runs W writers on the first mount (random
# sizes at random offsets, fsync after every few writes, each logging locally
# what every successful fsync covered: tests/fault/soak.c), kills one daemon
# with SIGKILL at a random moment (a storage daemon, or the metadata daemon
# in one trial of four), restarts it after a random pause, lets the writers
# go on, stops them, and verifies through the second mount, which never
# cached the files, every byte a successful fsync covered.
#
# The randomness comes from --seed (default: a fresh one, printed): the same
# seed draws the same victims, moments and writes, so a failing trial can be
# replayed. The CI gate passes fixed seeds; only the moment the kill lands in
# the daemons' work varies, and the verdict must not depend on it.
#
# Last line: "N trials, B bytes verified, L bytes lost". Exit 0 when nothing
# was lost; 1 when bytes were lost, a trial hung or a daemon or mount failed;
# 77 when this host cannot run it (no /dev/fuse, no RDMA device); 99 when the
# test itself could not check (tests/lib/check.sh).
set -u
here=$(dirname "$(readlink -f "$0")")
. "$here/../lib/check.sh"

usage() {
	echo "usage: crash-soak.sh --build DIR [--trials N] [--transport tcp|rdma] [--seed S] [--writers W] [--storage N]" >&2
	exit 99
}

# --- one trial, run by cluster.sh on a mounted cluster -------------------------

sleep_ms() {
	sleep "$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)))"
}

if [ "${1:-}" = --trial ]; then
	soak=$2 seed=$3 writers=$4 storage=$5 m1=$6 m2=$7
	ctl=${RDMAFS_CLUSTER_CTL:?the trial runs under cluster.sh}
	RANDOM=$seed
	if [ $((RANDOM % 4)) -eq 0 ]; then
		victim=meta
	else
		victim=$((1 + RANDOM % storage))
	fi
	kill_ms=$((300 + RANDOM % 2500))
	down_ms=$((RANDOM % 1500))
	after_ms=$((1500 + RANDOM % 1500))
	local_dir=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX") || check_error "mktemp"
	trap 'rm -rf "$local_dir"' EXIT
	work=$(mktemp -d "$m1/soak.XXXXXX") || check_fail "mktemp in the mount $m1"
	pids=()
	for w in $(seq "$writers"); do
		"$soak" write "$work/f$w" "$local_dir/log$w" $((seed * 100 + w)) "$local_dir/stop" 120000 &
		pids+=($!)
	done
	echo "trial seed $seed: kill daemon $victim after $kill_ms ms, restart $down_ms ms later"
	sleep_ms "$kill_ms"
	"$ctl" ctl kill "$victim" KILL || check_error "cannot kill daemon $victim"
	sleep_ms "$down_ms"
	"$ctl" ctl start "$victim" || check_fail "daemon $victim did not come back after a kill -9"
	sleep_ms "$after_ms"
	touch "$local_dir/stop"
	# Writers end within one call's bounded wait; one still running is a hang.
	deadline=$(($(date +%s) + 90))
	for pid in "${pids[@]}"; do
		while kill -0 "$pid" 2>/dev/null; do
			if [ "$(date +%s)" -gt "$deadline" ]; then
				check_fail "a writer hung (no return from the mount in 90 s)"
			fi
			sleep 0.1
		done
		wait "$pid" || check_error "a writer could not run (exit $?)"
	done
	status=0
	for w in $(seq "$writers"); do
		name=${work##*/}/f$w
		"$soak" verify "$m2/$name" "$local_dir/log$w" $((seed * 100 + w))
		rc=$?
		case $rc in
		0) ;;
		1)
			status=1
			echo "--- writer $w's log: $(grep -c '^W' "$local_dir/log$w") writes," \
				"errors: $(grep -v '^[WS]' "$local_dir/log$w" | sort | uniq -c | head -n 10 | tr '\n' ' ')" >&2
			ls -la "$m1/${work##*/}" "$m2/${work##*/}" >&2
			;;
		*) check_error "verifying $name: soak exited $rc" ;;
		esac
	done
	exit $status
fi

# --- the soak: trials, each on a fresh cluster -----------------------------------

build= trials=10 kind=tcp seed= writers=3 storage=3
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--trials) trials=$2; shift 2 ;;
	--transport) kind=$2; shift 2 ;;
	--seed) seed=$2; shift 2 ;;
	--writers) writers=$2; shift 2 ;;
	--storage) storage=$2; shift 2 ;;
	*) usage ;;
	esac
done
[ -n "$build" ] || usage
case $kind in tcp | rdma) ;; *) usage ;; esac
[ -n "$seed" ] || seed=$(od -An -N3 -tu4 /dev/urandom | tr -d ' ')
soak=$(readlink -f "$build/tests/fault/soak")
daemon=$(readlink -f "$build/storage-daemon/rdmafs-daemon")
fuse=$(readlink -f "$build/fuse-client/rdmafs-fuse")
for p in "$soak" "$daemon" "$fuse"; do
	[ -x "$p" ] || check_error "$p is not built"
done
echo "crash-soak: $trials trials over $kind, seed $seed (--seed $seed replays them)"

verified=0 lost=0 failed=0 skipped=0 errors=0
out=$(mktemp "${TMPDIR:-/tmp}/crash-soak.XXXXXX") || check_error "mktemp"
trap 'rm -f "$out"' EXIT
for t in $(seq "$trials"); do
	tseed=$((seed + t - 1))
	"$here/../lib/cluster.sh" --transport "$kind" --build "$build" \
		--storage "$storage" --mounts 2 --timeout 600 -- \
		"$(readlink -f "$0")" --trial "$soak" "$tseed" "$writers" "$storage" %MOUNT% %MOUNT2% \
		>"$out" 2>&1
	rc=$?
	v=$(awk '/bytes verified/ { s += $(NF - 5) } END { printf "%.0f\n", s }' "$out")
	l=$(awk '/bytes verified/ { s += $(NF - 2) } END { printf "%.0f\n", s }' "$out")
	verified=$((verified + v))
	lost=$((lost + l))
	case $rc in
	0)
		[ "$v" -gt 0 ] || {
			echo "trial $t: no byte was covered by a successful fsync: nothing checked" >&2
			errors=$((errors + 1))
		}
		echo "trial $t (seed $tseed): $v bytes verified, $l lost: $(grep '^trial seed' "$out" | cut -d: -f2-)"
		;;
	77)
		skipped=$((skipped + 1))
		grep -m1 SKIP "$out"
		;;
	99)
		errors=$((errors + 1))
		echo "trial $t (seed $tseed): ERROR (the test could not check):" >&2
		tail -n 30 "$out" >&2
		;;
	*)
		failed=$((failed + 1))
		echo "trial $t (seed $tseed): FAILED (exit $rc; replay with --seed $tseed --trials 1):" >&2
		tail -n 60 "$out" >&2
		;;
	esac
done
echo "$trials trials, $verified bytes verified, $lost bytes lost"
[ "$skipped" -eq "$trials" ] && exit 77
[ "$lost" -eq 0 ] && [ "$failed" -eq 0 ] || exit 1
[ "$errors" -eq 0 ] || exit 99
exit 0
