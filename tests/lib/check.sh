# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Verdicts for shell tests, sourced by them: a check says what it saw.
#
#   . "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
#
# Exit statuses, as meson reads them:
#   0   pass
#   1   FAIL: the system under test did something wrong (wrong data, a read
#       of the mount that erred, a hang, a wrong error code)
#   77  SKIP: the test cannot run here (the reason printed)
#   99  ERROR: the test itself could not check (a tool missing, its own
#       scratch file unreadable, cmp or diff in trouble): no verdict on the
#       data either way
#
# check_same, check_diff and check_need give each outcome its own status,
# so "cmp exited 2" can never pass for "the data differs".

# check_fail MSG: the system under test did wrong.
check_fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# check_error MSG: the test could not do its job; says nothing of the data.
check_error() {
	echo "ERROR: $* (a failure of the test itself, not a verdict on the data)" >&2
	exit 99
}

# check_cluster NAME: a test that acts on its cluster (RDMAFS_CLUSTER_CTL kills
# and restarts daemons) skips with 77, saying so, outside tests/lib/cluster.sh.
check_cluster() {
	if [ -z "${RDMAFS_CLUSTER_CTL:-}" ] || [ -z "${RDMAFS_CLUSTER_DIR:-}" ]; then
		echo "SKIP: $1 needs an rdmafs cluster started by cluster.sh (not RDMAFS_FS_LOCAL)"
		exit 77
	fi
}

# check_need TOOL...: every tool is installed, else ERROR.
check_need() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || check_error "the tool '$tool' is not installed"
	done
}

# check_all_up RDMAFSCTL COUNT SECS WHAT OUT: waits up to SECS for `rdmafsctl
# status` to show all COUNT daemons UP (one that was hit has caught up: SYNCING
# -> UP) and no chunk under-replicated (a copy that missed a write, e.g. a
# forward refused while the daemons' maps settled at a start, copied to it:
# the heads report it within a heartbeat or two); the last status stays in
# OUT. FAIL, with that status, if they never are.
check_all_up() {
	local _
	for _ in $(seq "$3"); do
		"$1" status >"$5" 2>&1
		grep -q ": $2 daemons, $2 up$" "$5" && ! grep -q "under-replicated: " "$5" && return 0
		sleep 1
	done
	check_fail "$4: the daemons are not all up with every copy in place after $3 s: $(cat "$5")"
}

# check_until SECS CMD...: runs CMD once a second until it succeeds, for SECS
# seconds (SECS + 1 runs at most); its last status. For what the system does after it answers (a
# removed file's chunks go after the unlink's answer: rfs_free_data()).
check_until() {
	local n=$1 _
	shift
	for _ in $(seq "$n"); do
		"$@" && return 0
		sleep 1
	done
	"$@"
}

# check_metric NAME METRIC: the value (an integer) of METRIC in the metrics of
# the cluster's daemon or mount NAME (meta, storageN, fuseM: cluster.sh
# --metrics writes NAME.metrics-port); ERROR when it cannot be read.
check_metric() {
	local port url addr
	addr=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$addr")
	port=$(cat "$RDMAFS_CLUSTER_DIR/$1.metrics-port") || check_error "no metrics port for $1"
	case $addr in
	*:*) url="http://[$addr]:$port/metrics" ;;
	*) url="http://$addr:$port/metrics" ;;
	esac
	python3 - "$url" "$2" <<'PYEOF' || check_error "cannot read $2 in $1's metrics at $url"
import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(int(float(line.split()[1])))
        break
else:
    sys.exit(1)
PYEOF
}

# The killpoint daemon's gates (tests/daemon/killpoint.c): a daemon holds at
# gate GATE while the file GATE.PID exists, with GATE.PID.held there meanwhile.
# check_gate_held GATE PID...: the PIDs holding at GATE now, one a line.
check_gate_held() {
	local gate=$1 p
	shift
	for p in "$@"; do [ -e "$gate.$p.held" ] && echo "$p"; done
}

# check_gate_wait GATE NOT PID...: waits up to 30 s for exactly one of the
# PIDs, not NOT (whose mark goes a moment after its gate opens; "" for none),
# to hold at GATE. Status 1 if none does.
check_gate_wait() {
	local gate=$1 not=$2 _ h
	shift 2
	for _ in $(seq 3000); do
		h=$(check_gate_held "$gate" "$@")
		[ -n "$h" ] && [ "$(echo "$h" | wc -l)" = 1 ] && [ "$h" != "$not" ] && return 0
		sleep 0.01
	done
	return 1
}

# The data directories of the cluster's daemons by cluster.sh ctl name, asked of
# cluster.sh once each (a daemon keeps its directory for the cluster's life; a
# cluster.sh call is a second or more of the rdma-vm guest's time).
declare -gA check_datadirs=()
# check_datadirs_load NAME...: asks cluster.sh for each daemon NAME's data
# directory now, so that subshells ($(...)) find it in check_datadirs.
check_datadirs_load() {
	local i
	for i in "$@"; do
		[ -n "${check_datadirs[$i]:-}" ] && continue
		check_datadirs[$i]=$("$RDMAFS_CLUSTER_CTL" ctl datadir "$i") ||
			check_error "cluster.sh ctl datadir $i"
	done
}

# check_chunk_path NAME INO INDEX: sets check_path to where daemon NAME (cluster.sh
# ctl names: meta, 1, 2, ...) keeps chunk INDEX of inode INO.
check_path=
check_chunk_path() {
	check_datadirs_load "$1"
	printf -v check_path '%s/chunks/%016x/%016x' "${check_datadirs[$1]}" "$2" "$3"
}

# check_holders INO INDEX NAME...: which of the cluster's daemons NAME (cluster.sh
# ctl names: meta, 1, 2, ...) hold chunk INDEX of inode INO in their data
# directories, printed as "NAME NAME ... " in the order given.
check_holders() {
	local ino=$1 index=$2 i
	shift 2
	for i in "$@"; do
		check_chunk_path "$i" "$ino" "$index"
		[ -f "$check_path" ] && printf '%s ' "$i"
	done
}

# check_chunk_copies WHAT INO INDEX COPIES REF NAME...: chunk INDEX of inode INO is
# on exactly COPIES of the cluster's daemons NAME... (cluster.sh ctl names), each
# copy REF's bytes (REF "": the copies byte for byte the same as each other).
check_chunk_copies() {
	local what=$1 ino=$2 index=$3 copies=$4 first=$5 i f n=0
	shift 5
	for i in "$@"; do
		check_chunk_path "$i" "$ino" "$index"
		f=$check_path
		[ -f "$f" ] || continue
		n=$((n + 1))
		if [ -z "$first" ]; then
			first=$f
			continue
		fi
		check_cmp "$f" "$first"
		case $? in
		0) ;;
		1) check_fail "$what: chunk $index on daemon $i differs from $first ($check_said)" ;;
		*) check_error "$what: comparing the copies of chunk $index: $check_said" ;;
		esac
	done
	[ "$n" = "$copies" ] || check_fail "$what: chunk $index has $n copies, want $copies"
}

# check_fio WHAT RC ERR OUT: the verdict on a fio run that exited RC, its stderr in
# ERR and its --output in OUT: ERROR if fio did not take its options; FAIL on
# an I/O error or a verify failure it reports.
check_fio() {
	if grep -q "unrecognized option\|invalid option\|Bad option" "$3"; then
		check_error "$1: fio did not run: $(cat "$3")"
	fi
	if [ "$2" != 0 ] || grep -qi "verify.*fail\|bad magic\|io_u error" "$3" "$4"; then
		check_fail "$1: fio exited $2: $(tail -n 5 "$3"; grep -i "err\|verify" "$4" | head -n 5)"
	fi
	grep -q "err= 0" "$4" || check_fail "$1: fio reports errors: $(grep "err=" "$4")"
}

# check_readable FILE WHAT: a scratch file of the test itself can be read.
check_readable() {
	[ -r "$1" ] && [ ! -d "$1" ] || check_error "$2: the test's own file $1 is missing or unreadable"
	timeout 120 cat -- "$1" >/dev/null 2>&1 || check_error "$2: reading the test's own file $1 failed"
}

# check_cmp GOT WANT [SECS]: compares GOT (the file under test) with WANT (the
# test's reference copy) and returns a status, for loops that retry:
#   0 same; 1 different content; 2 reading GOT failed or hung (the message
#   is in $check_said). Test trouble (WANT unreadable, cmp in trouble with
#   WANT) exits 99 at once.
check_said=
check_cmp() {
	local got=$1 want=$2 secs=${3:-120} out rc
	# WANT read whole only when cmp is in trouble (below): once per compare
	# was a second read of every reference, a process or two each in the guest
	if [ ! -r "$want" ] || [ -d "$want" ]; then
		check_error "comparing $got: the test's own file $want is missing or unreadable"
	fi
	out=$(timeout "$secs" cmp -- "$got" "$want" 2>&1)
	rc=$?
	check_said=$out
	case $rc in
	0) return 0 ;;
	1) return 1 ;;
	124 | 137)
		check_said="reading $got hung for $secs s"
		return 2
		;;
	2)
		# cmp's trouble: with WANT readable (checked above) it was GOT.
		check_readable "$want" "comparing $got"
		[ -n "$out" ] || out="cmp exited 2"
		check_said="reading $got failed: $out"
		return 2
		;;
	*) check_error "cmp $got $want exited $rc: $out" ;;
	esac
}

# check_same GOT WANT WHAT [SECS]: GOT must hold exactly WANT's bytes.
check_same() {
	check_cmp "$1" "$2" "${4:-120}"
	case $? in
	0) return 0 ;;
	1) check_fail "$3: $1 differs from what was written ($check_said)" ;;
	*) check_fail "$3: $check_said (a read error, not different data)" ;;
	esac
}

# check_diff WANT GOT WHAT: two text files (manifests, listings) of the test
# must be equal; shows the difference (- expected, + got).
check_diff() {
	local out rc
	check_readable "$1" "$3"
	check_readable "$2" "$3"
	out=$(diff -u -- "$1" "$2" 2>&1)
	rc=$?
	case $rc in
	0) return 0 ;;
	1)
		echo "--- $3: differences (- expected, + got):" >&2
		printf '%s\n' "$out" | head -n 60 >&2
		check_fail "$3"
		;;
	*) check_error "$3: diff exited $rc: $out" ;;
	esac
}

# check_slice FILE OFFSET_MIB COUNT_MIB OUT: copies a range of the test's own
# FILE into OUT (a reference), or ERROR.
check_slice() {
	timeout 120 dd if="$1" of="$4" bs=1M skip="$2" count="$3" status=none 2>/dev/null ||
		check_error "cutting MiB $2+$3 out of the test's own file $1"
}

# For tests that run many checks and report them all before exiting:
#   check_run WHAT COMMAND...   COMMAND exits 0 (same), 1 (different) or
#                               anything else (it could not compare)
#   check_summary               exits 1 if any check failed, else 99 if any
#                               could not run, else returns
check_fails=0
check_errors=0
check_run() {
	local what=$1 rc
	shift
	"$@"
	rc=$?
	case $rc in
	0) echo "ok: $what" ;;
	1)
		echo "FAIL: $what" >&2
		check_fails=$((check_fails + 1))
		;;
	*)
		echo "ERROR: $what: $1 exited $rc: it could not check (no verdict)" >&2
		check_errors=$((check_errors + 1))
		;;
	esac
}
check_summary() {
	[ "$check_fails" -eq 0 ] || { echo "$check_fails checks failed" >&2; exit 1; }
	[ "$check_errors" -eq 0 ] || { echo "$check_errors checks could not run" >&2; exit 99; }
}

# check_merge STATUS RC: prints the status of a run of several tests once one
# more ended with RC. A failure outweighs an error (99), which outweighs a
# pass, which outweighs a skip (77: start a run there).
check_merge() {
	case $2 in
	0) [ "$1" -eq 77 ] && echo 0 || echo "$1" ;;
	77) echo "$1" ;;
	99) [ "$1" -ne 1 ] && echo 99 || echo 1 ;;
	*) echo 1 ;;
	esac
}
