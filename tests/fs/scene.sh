# SPDX-License-Identifier: GPL-2.0-or-later
#
# The scene shared by headkill.sh, headswap.sh and twodown.sh, sourced after
# tests/lib/check.sh: a file of 3 copies on storage 1, 2 and 3 on a cluster of
# the killpoint daemon, whose pulls of a write's payload wait at the test's
# gates (RDMAFS_TEST_PULL_GATE), and the helpers that look at it. The script
# sets gate, dir (RDMAFS_CLUSTER_DIR), ctl (cluster.sh), rdmafsctl, local_dir
# and mnt first; scene_file sets ino.
# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034 # the variables above, and writer, are the sourcing script's

daemons=(meta storage1 storage2 storage3)
names=(meta 1 2 3) # cluster.sh ctl's, in the same order
pids=()

# at exit: every daemon's gate open, the scratch directory gone
scene_cleanup() {
	local p
	for p in "${pids[@]}"; do rm -f "$gate.$p"; done
	rm -rf "$local_dir"
}
trap scene_cleanup EXIT
check_datadirs_load "${names[@]}" # for copy_of in subshells

# the daemons' pids, in the order of names (a restarted one's is new; a
# killed one, whose pid file cluster.sh removed, is "killed")
read_pids() {
	local n p
	pids=()
	for n in "${daemons[@]}"; do
		p=killed
		[ -e "$dir/$n.pid" ] && { p=$(cat "$dir/$n.pid") || check_error "cannot read $n's pid file"; }
		pids+=("$p")
	done
}

# held: the pids of the daemons holding a pull at their gates, one a line
held() {
	check_gate_held "$gate" "${pids[@]}"
}

# wait_held [PID]: waits up to 30 s for one daemon, not PID, to hold a pull
wait_held() {
	check_gate_wait "$gate" "${1:-}" "${pids[@]}"
}

# records NAME: the records of missed writes daemon NAME (meta, storageN)
# keeps (in $(...), "|| exit $?" carries a metric that could not be read out)
records() {
	check_metric "$1" rdmafs_missed_records
}

# records_are N COUNT WHAT: daemon N (storageN) keeps COUNT records of missed writes
records_are() {
	local got
	got=$(records "storage$1") || exit $?
	[ "$got" = "$2" ] || check_fail "$3: daemon $1 keeps $got records of missed writes, not $2"
}

# no_records WHAT: waits up to 60 s for no daemon to keep a record of a missed write
no_records() {
	local _ n c total
	for _ in $(seq 60); do
		total=0
		for n in "${daemons[@]}"; do
			c=$(records "$n") || exit $?
			total=$((total + c))
		done
		[ "$total" = 0 ] && return 0
		sleep 1
	done
	check_fail "$1: the daemons still keep $total records of missed writes after 60 s"
}

# name_of PID: the cluster.sh ctl name of the daemon of PID
name_of() {
	local i
	for i in "${!pids[@]}"; do
		[ "${pids[$i]}" = "$1" ] && echo "${names[$i]}" && return 0
	done
	check_error "no daemon has pid $1"
}

# copy_of NAME: the path of NAME's copy of the file's first chunk
copy_of() {
	check_chunk_path "$1" "$ino" 0
	echo "$check_path"
}

# holds NAME FILE: NAME's copy holds FILE's bytes (and only those)
holds() {
	check_cmp "$(copy_of "$1")" "$2"
	case $? in
	0) return 0 ;;
	1) return 1 ;;
	*) check_error "comparing daemon $1's copy: $check_said" ;;
	esac
}

# read_is MOUNT FILE WHAT: the file's 256 KiB read with O_DIRECT on MOUNT holds FILE's bytes
read_is() {
	dd if="$1/h/f" of="$local_dir/got" bs=256K count=1 iflag=direct status=none ||
		check_fail "reading the file on $1 ($3): dd exited $?"
	check_same "$local_dir/got" "$2" "the file read on $1 $3"
}

# wait_holds NAME FILE: waits up to 30 s for NAME's copy to hold FILE's bytes
wait_holds() {
	local _
	for _ in $(seq 3000); do
		holds "$1" "$2" && return 0
		sleep 0.01
	done
	holds "$1" "$2"
}

# wait_let_go PID: opens PID's gate and waits up to 30 s for its pull to end
wait_let_go() {
	local _
	rm -f "$gate.$1"
	for _ in $(seq 3000); do
		[ -e "$gate.$1.held" ] || return 0
		sleep 0.01
	done
	return 1
}

# gated_write FILE: writes FILE's 256 KiB over h/f in the background (pid in
# writer, its errors in local_dir/writer.err), for the gates to hold
gated_write() {
	dd if="$1" of="$mnt/h/f" bs=256K oflag=direct conv=notrunc status=none \
		2>"$local_dir/writer.err" &
	writer=$!
}

# scene_file: h/f, a file of 3 copies whose first 256 KiB hold A (made in
# local_dir, with B beside it). The metadata daemon is drained meanwhile, so
# the copies are on storage 1, 2 and 3 and killing one leaves the service up;
# every copy holds A and no daemon keeps a record of a missed write after it.
scene_file() {
	local b n meta_uri
	read_pids
	check_all_up "$rdmafsctl" 4 60 "at the start" "$local_dir/status"
	meta_uri=$("$ctl" ctl uri meta) || check_error "cluster.sh ctl uri meta"
	"$rdmafsctl" drain --wait "$meta_uri" >"$local_dir/drain" 2>&1 ||
		check_fail "drain of the metadata daemon's empty store: $(cat "$local_dir/drain")"
	mkdir "$mnt/h" || check_fail "mkdir h"
	setfattr -n rdmafs.replicas -v 3 "$mnt/h" || check_fail "setfattr rdmafs.replicas 3"
	for b in A B; do
		head -c $((256 * 1024)) /dev/urandom >"$local_dir/$b" || check_error "making $b"
	done
	cmp -s "$local_dir/A" "$local_dir/B" && check_error "A and B came out the same"
	dd if="$local_dir/A" of="$mnt/h/f" bs=256K oflag=direct status=none || check_fail "writing A"
	ino=$(stat -c %i "$mnt/h/f") || check_fail "stat h/f"
	"$rdmafsctl" undrain "$meta_uri" >"$local_dir/undrain" 2>&1 ||
		check_fail "undrain of the metadata daemon: $(cat "$local_dir/undrain")"
	check_all_up "$rdmafsctl" 4 90 "before the gates" "$local_dir/status"
	# a forward refused while the maps changed (the drain) is copied by now: the scene starts clean
	no_records "before the gates"
	for n in 1 2 3; do
		holds "$n" "$local_dir/A" || check_fail "daemon $n does not hold A after the write of A"
	done
}

# closes every daemon's gate, or opens them all (open_gates)
close_gates() {
	local p
	for p in "${pids[@]}"; do
		[ "$p" = killed ] || : >"$gate.$p" || check_error "cannot close the gate $gate.$p"
	done
}
open_gates() {
	local p
	for p in "${pids[@]}"; do rm -f "$gate.$p"; done
}

# wait_state N STATE WHAT: waits up to 60 s for the map to show daemon N
# (storageN) in STATE (the service marks a daemon down a heartbeat timeout
# after it went quiet, and a returning one up once nothing is left to copy to it)
wait_state() {
	local _ got
	for _ in $(seq 60); do
		"$rdmafsctl" status >"$local_dir/status" 2>&1
		got=$(awk -v n="storage$1" '$1 == n { print $3 }' "$local_dir/status")
		[ "$got" = "$2" ] && return 0
		sleep 1
	done
	check_fail "$3: the map shows daemon $1 ${got:-nowhere}, not $2, after 60 s: $(cat "$local_dir/status")"
}

# maps_current WHAT: waits up to 60 s for every daemon running to hold the
# service's map (each checks chains against its own: one still on an older
# map would refuse a write the scene needs)
maps_current() {
	local _ i epoch has behind
	for _ in $(seq 60); do
		epoch=$(check_metric meta rdmafs_cluster_epoch) || exit $?
		behind=
		for i in "${!daemons[@]}"; do
			[ "${pids[$i]}" = killed ] && continue
			has=$(check_metric "${daemons[$i]}" rdmafs_daemon_map_epoch) || exit $?
			[ "$has" -ge "$epoch" ] || behind="$behind ${daemons[$i]}"
		done
		[ -z "$behind" ] && return 0
		sleep 1
	done
	check_fail "$1: daemons$behind still hold a map older than the service's epoch $epoch after 60 s"
}

# chain_order: the file's chain, from A written again with one daemon's pull
# let through at a time: sets first, next and last (ctl names) and first_pid
# and next_pid; every copy holds A after it
chain_order() {
	local n
	close_gates
	gated_write "$local_dir/A"
	wait_held || check_fail "the write of A never reached a head's pull (30 s)"
	first_pid=$(held)
	rm -f "$gate.$first_pid"
	wait_held "$first_pid" || check_fail "A never reached the next daemon's pull (30 s)"
	next_pid=$(held)
	first=$(name_of "$first_pid") || exit $?
	next=$(name_of "$next_pid") || exit $?
	if [ "$first" = meta ] || [ "$next" = meta ]; then
		check_error "the drained metadata daemon is in the file's chain"
	fi
	open_gates
	wait "$writer" || check_fail "writing A again: $(cat "$local_dir/writer.err")"
	last=$((6 - first - next))
	for n in 1 2 3; do
		holds "$n" "$local_dir/A" || check_fail "daemon $n does not hold A after the writes of A"
	done
}
