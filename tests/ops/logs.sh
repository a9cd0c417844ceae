#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# logs.sh RDMAFSCTL HOLD_CLIENT [RDMAFS_FUSE]: what an operator reads in the
# logs. Runs inside tests/lib/cluster.sh --no-fuse --log-level debug, whose
# daemons write RDMAFS_CLUSTER_DIR/NAME.log (stderr is a file there, not the
# journal). Checks, each saying what it saw:
#
#   format   every daemon line: local ISO-8601 time with milliseconds,
#            rdmafs-daemon[PID], the level by name
#   clean    rdmafsctl runs (status, stats: a connection to each daemon) end
#            as "connection from rdmafsctl closed", one per "accepted"; no
#            daemon log says "connection reset" or "rdmafsctl died"
#   debug    debug adds lines: each connection with the peer's name, a
#            refused request with its method named
#   killed   a client killed with SIGKILL (HOLD_CLIENT, named ops-hold) is
#            logged as "connection from ops-hold died" by every daemon
#   states   a daemon state change by name ("up -> draining"), never numbers
#   mount    rdmafs-fuse in the background keeps logging to log=FILE from
#            its forked process until its session ends (skipped, saying so,
#            without /dev/fuse, fusermount3, root or RDMAFS_FUSE)
#
# A wait on a daemon's log is bounded (WAIT s) to catch a hang; nothing is timed.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"

ctl=$(readlink -f "$1") hold=$(readlink -f "$2") fuse=${3:+$(readlink -f "$3")}
readonly WAIT=120
dir=${RDMAFS_CLUSTER_DIR:?run under tests/lib/cluster.sh}
work=$dir/logs-test
mkdir -p "$work" || check_error "cannot make $work"
hold_pid='' mnt=''
accepted=0 closed=0 died=0 resets=0 refused=0

cleanup() {
	[ -n "$hold_pid" ] && kill -KILL "$hold_pid" 2>/dev/null
	if [ -n "$mnt" ] && awk -v m="$mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		fusermount3 -uz "$mnt" 2>/dev/null
	fi
}
trap cleanup EXIT

# the daemons' names (meta, storage1, ...), from cluster.sh's state
mapfile -t names < <(awk '{ print $1 }' "$dir/daemons")
[ ${#names[@]} -ge 2 ] || check_error "cluster.sh lists ${#names[@]} daemons in $dir/daemons"

# count VAR FIXED_STRING LOG: VAR = how many lines of LOG hold it (test trouble if unreadable)
count() {
	local n
	n=$(grep -c -F -- "$2" "$3")
	[ $? -le 1 ] || check_error "cannot read $3"
	printf -v "$1" '%s' "$n"
}

# wait_for WHAT COMMAND...: until COMMAND succeeds; 1 after WAIT seconds
wait_for() {
	local what=$1
	shift
	for _ in $(seq $((WAIT * 5))); do
		"$@" && return 0
		sleep 0.2
	done
	echo "  (waited $WAIT s for $what)" >&2
	return 1
}

show_log() {
	echo "--- $1 (last 15 lines):" >&2
	tail -n 15 "$1" >&2
}

# --- format ----------------------------------------------------------------------
line_re='^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}[+-][0-9]{4} '
line_re+='rdmafs-daemon\[[0-9]+\]: (error|warning|info|debug): '
for name in "${names[@]}"; do
	log=$dir/$name.log
	check_readable "$log" "the log of $name"
	lines=$(wc -l <"$log")
	bad=$(grep -Ev -- "$line_re" "$log" | head -n 3)
	if [ -n "$bad" ]; then
		echo "FAIL: format: lines of $name.log without time, process and level:" >&2
		printf '  %s\n' "$bad" >&2
		check_fails=$((check_fails + 1))
	else
		echo "ok: format: $lines lines of $name.log, e.g. $(head -n 1 "$log" | cut -c1-90)"
	fi
done

# --- clean: rdmafsctl's connections end as closes ----------------------------------
for args in "status" "stats" "--json status"; do
	# shellcheck disable=SC2086
	out=$("$ctl" $args 2>&1) || check_fail "rdmafsctl $args exited $?: $out"
done
all_ended() {
	local log=$1 accepted closed died
	count accepted "connection from rdmafsctl accepted" "$log"
	count closed "connection from rdmafsctl closed" "$log"
	count died "connection from rdmafsctl died" "$log"
	[ $((closed + died)) -ge "$accepted" ]
}
for name in "${names[@]}"; do
	log=$dir/$name.log
	wait_for "every rdmafsctl connection of $name to end" all_ended "$log" ||
		{ show_log "$log"; check_fail "clean: $name.log does not end every rdmafsctl connection"; }
	count accepted "connection from rdmafsctl accepted" "$log"
	count closed "connection from rdmafsctl closed" "$log"
	count resets "connection reset" "$log"
	count died "connection from rdmafsctl died" "$log"
	if [ "$accepted" -ge 1 ] && [ "$closed" -eq "$accepted" ] && [ "$resets" -eq 0 ] &&
		[ "$died" -eq 0 ]; then
		echo "ok: clean: $name: $accepted rdmafsctl connections accepted, $closed closed, 0 died, no 'connection reset'"
	else
		grep -F -e "connection reset" -e "rdmafsctl died" "$log" | head -n 5 >&2
		echo "FAIL: clean: $name: $accepted rdmafsctl connections accepted, $closed closed, $died died, $resets lines say 'connection reset'" >&2
		check_fails=$((check_fails + 1))
	fi
done

# --- killed (and debug): a client that never closes -------------------------------
"$hold" >"$work/hold.out" 2>"$work/hold.err" &
hold_pid=$!
connected() {
	grep -qx connected "$work/hold.out" && return 0
	kill -0 "$hold_pid" 2>/dev/null || {
		wait "$hold_pid"
		check_error "ops-hold-client exited $? before it connected: $(cat "$work/hold.err")"
	}
	return 1
}
wait_for "ops-hold-client to connect" connected || check_error "ops-hold-client did not connect"
kill -KILL "$hold_pid"
wait "$hold_pid" 2>/dev/null
hold_pid=''
for name in "${names[@]}"; do
	log=$dir/$name.log
	count accepted "connection from ops-hold accepted (" "$log"
	count refused "chunk_truncate from ops-hold: Invalid argument" "$log"
	if [ "$accepted" -eq 1 ] && [ "$refused" -eq 1 ]; then
		echo "ok: debug: $name logged ops-hold's connection with its address and its refused chunk_truncate"
	else
		show_log "$log"
		echo "FAIL: debug: $name logged ops-hold accepted $accepted times, its refused chunk_truncate $refused times (want 1, 1)" >&2
		check_fails=$((check_fails + 1))
	fi
	if wait_for "$name to log the death of ops-hold" \
		grep -qF "connection from ops-hold died: " "$log"; then
		echo "ok: killed: $name: $(grep -F "connection from ops-hold died" "$log" | head -n 1 | cut -d' ' -f3-)"
	else
		show_log "$log"
		echo "FAIL: killed: $name never logged 'connection from ops-hold died' for a client killed with SIGKILL" >&2
		check_fails=$((check_fails + 1))
	fi
	count closed "connection from ops-hold closed" "$log"
	[ "$closed" -eq 0 ] || {
		echo "FAIL: killed: $name logged a client killed with SIGKILL as closed" >&2
		check_fails=$((check_fails + 1))
	}
done

# --- states: by name ---------------------------------------------------------------
target=$(awk 'NR == 2 { print $2 }' "$dir/daemons")
out=$("$ctl" drain "$target" 2>&1) || check_fail "rdmafsctl drain $target exited $?: $out"
meta_log=$dir/${names[0]}.log
if wait_for "the drain in ${names[0]}.log" grep -qF ": up -> draining" "$meta_log"; then
	echo "ok: states: $(grep -F ": up -> draining" "$meta_log" | head -n 1 | cut -d' ' -f3-)"
else
	show_log "$meta_log"
	echo "FAIL: states: no 'up -> draining' in ${names[0]}.log after rdmafsctl drain" >&2
	check_fails=$((check_fails + 1))
fi
numbers=$(grep -hE 'state [0-9]+ -> [0-9]+' "$dir"/*.log | head -n 3)
if [ -n "$numbers" ]; then
	echo "FAIL: states: logged as numbers: $numbers" >&2
	check_fails=$((check_fails + 1))
fi

# --- mount: the log goes on after the fork -----------------------------------------
skip_mount=''
if [ -z "$fuse" ] || [ ! -x "$fuse" ]; then
	skip_mount="rdmafs-fuse not built"
elif [ ! -c /dev/fuse ]; then
	skip_mount="no /dev/fuse"
elif ! command -v fusermount3 >/dev/null; then
	skip_mount="fusermount3 not installed"
elif [ "$(id -u)" != 0 ]; then
	skip_mount="not root"
fi
if [ -n "$skip_mount" ]; then
	echo "skip: mount: $skip_mount"
else
	mnt=$work/mnt
	mkdir -p "$mnt"
	# a relative log path: opened before the fork, which changes directory to /
	(cd "$work" && "$fuse" -o "meta=$RDMAFS_CLUSTER_META,secret=$RDMAFS_CLUSTER_SECRET,log=mount.log,log_level=debug" "$mnt") ||
		check_fail "mount: rdmafs-fuse exited $? (see $work/mount.log)"
	mount_log=$work/mount.log
	# the foreground process returns once mounted; the background one then connects, and says so
	wait_for "the 'mounted' line" grep -qF ": info: mounted $mnt " "$mount_log"
	launcher=$(grep -m1 -oE 'rdmafs-fuse\[[0-9]+\]' "$mount_log" | tr -dc 0-9)
	bg=$(grep -F ": info: mounted $mnt " "$mount_log" | grep -oE 'rdmafs-fuse\[[0-9]+\]' | tr -dc 0-9)
	if ! echo "data" >"$mnt/f" || [ "$(cat "$mnt/f")" != data ]; then
		check_fail "mount: writing and reading $mnt/f failed"
	fi
	timeout 30 fusermount3 -u "$mnt" || check_error "mount: fusermount3 -u $mnt failed"
	[ -n "$bg" ] && wait_for "rdmafs-fuse $bg to exit" bash -c "! kill -0 $bg 2>/dev/null"
	if [ -z "$bg" ] || [ "$bg" = "$launcher" ]; then
		show_log "$mount_log"
		echo "FAIL: mount: no 'mounted' line from the forked process (first pid $launcher, mounted by ${bg:-none})" >&2
		check_fails=$((check_fails + 1))
	elif ! grep -qE "rdmafs-fuse\[$bg\]: info: the FUSE session of $mnt ended" "$mount_log" ||
		! grep -qE "rdmafs-fuse\[$bg\]: debug: (xprt: )?.*connect" "$mount_log"; then
		show_log "$mount_log"
		echo "FAIL: mount: the background process $bg logged no end of its session or no debug line" >&2
		check_fails=$((check_fails + 1))
	else
		echo "ok: mount: the foreground process $launcher and the background one $bg both logged to log=mount.log, debug lines included, up to 'the FUSE session of ... ended'"
	fi
	mnt=''
fi

check_summary
echo "PASS: logs"
