#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# copy-cluster.sh: runs a command against a live rdmafs cluster without any
# mount: a metadata daemon (rdmafs-daemon --metadata yes, which stores chunks
# too) and N storage daemons (--metadata no) on loopback tcp. It waits until
# every daemon has registered, runs the command with
#
#   RDMAFS_META         the metadata service URI (tcp://127.0.0.1:PORT)
#   RDMAFS_SECRET_FILE  the cluster secret
#   RDMAFS_CLUSTER_DIR  a scratch directory (logs, data, and room for the test)
#   RDMAFS_CLUSTER_CTL  this script, for
#       "$RDMAFS_CLUSTER_CTL" ctl kill I [SIG]   stop storage daemon I (1..N)
#       "$RDMAFS_CLUSTER_CTL" ctl start I        restart it, wait until registered
#
# and then stops everything, on every exit path.
#
#   copy-cluster.sh --daemon PATH [--storage N] [--timeout SECS] -- COMMAND [ARG...]
#
# Exit: the command's status; 1 when the cluster does not come up (its logs
# are printed). RDMAFS_TEST_KEEP=1 keeps the scratch directory.

set -u

self=$(readlink -f "$0")

die() {
	echo "copy-cluster.sh: $*" >&2
	exit 1
}

now_ms() {
	date +%s%3N
}

# start_daemon NAME PORT [EXTRA...]: starts rdmafs-daemon, waits for its port file.
start_daemon() {
	local name=$1 port=$2 pid deadline
	shift 2
	rm -f "$dir/$name.port"
	"$daemon" --data-dir "$dir/$name" --listen "tcp://127.0.0.1:$port" \
		--secret-file "$dir/secret" --port-file "$dir/$name.port" \
		--name "$name" --foreground "$@" </dev/null >>"$dir/$name.log" 2>&1 &
	pid=$!
	disown "$pid" 2>/dev/null
	echo "$pid" >"$dir/$name.pid"
	deadline=$(($(now_ms) + 20000))
	while [ ! -s "$dir/$name.port" ]; do
		kill -0 "$pid" 2>/dev/null || {
			echo "copy-cluster.sh: $name exited during start-up" >&2
			return 1
		}
		[ "$(now_ms)" -gt "$deadline" ] && {
			echo "copy-cluster.sh: $name did not write its port file in 20 s" >&2
			return 1
		}
		sleep 0.05
	done
}

# wait_registered NAME SINCE_LINE
wait_registered() {
	local name=$1 since=$2 deadline
	deadline=$(($(now_ms) + 30000))
	until tail -n +"$((since + 1))" "$dir/$name.log" |
		grep -q "registered with the metadata service"; do
		[ "$(now_ms)" -gt "$deadline" ] && {
			echo "copy-cluster.sh: $name did not register in 30 s" >&2
			return 1
		}
		sleep 0.1
	done
}

log_lines() {
	if [ -f "$dir/$1.log" ]; then wc -l <"$dir/$1.log"; else echo 0; fi
}

start_storage() {
	local i=$1 port=${2:-0} since
	since=$(log_lines "storage$i")
	start_daemon "storage$i" "$port" --metadata no --metadata-uri "$meta_uri" &&
		wait_registered "storage$i" "$since"
}

stop_pid() {
	local pid=$1 sig=${2:-TERM} i
	kill -"$sig" "$pid" 2>/dev/null || return 0
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
}

if [ "${1:-}" = ctl ]; then
	dir=${RDMAFS_CLUSTER_DIR:?ctl needs RDMAFS_CLUSTER_DIR}
	# shellcheck source=/dev/null
	. "$dir/cluster.env"
	i=${3:?usage: ctl kill|start I}
	[ -f "$dir/storage$i.pid" ] || die "no storage daemon $i"
	case $2 in
	kill)
		kill -"${4:-KILL}" "$(cat "$dir/storage$i.pid")" || exit 1
		while kill -0 "$(cat "$dir/storage$i.pid")" 2>/dev/null; do sleep 0.05; done
		;;
	start)
		start_storage "$i" "$(cat "$dir/storage$i.port")" || {
			tail -n 20 "$dir/storage$i.log" >&2
			exit 1
		}
		;;
	*) die "unknown ctl command $2" ;;
	esac
	exit 0
fi

daemon= storage=3 timeout=600
while [ $# -gt 0 ]; do
	case $1 in
	--daemon) daemon=$2; shift 2 ;;
	--storage) storage=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--) shift; break ;;
	*) die "unknown argument $1 (see the header of $0)" ;;
	esac
done
[ $# -gt 0 ] || die "no command given"
[ -n "$daemon" ] && [ -x "$daemon" ] || die "--daemon PATH: rdmafs-daemon not found ($daemon)"

dir=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-copy.XXXXXX") || exit 1
chmod 755 "$dir"
cmd_pid=
status=1

cleanup() {
	local f
	trap - EXIT INT TERM HUP
	[ -n "$cmd_pid" ] && stop_pid "$cmd_pid" TERM
	for f in "$dir"/*.pid; do
		[ -f "$f" ] && stop_pid "$(cat "$f")" TERM
	done
	if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
		for f in "$dir"/*.log; do
			[ -f "$f" ] || continue
			echo "--- $f (last 30 lines)" >&2
			tail -n 30 "$f" >&2
		done
	fi
	if [ -n "${RDMAFS_TEST_KEEP:-}" ]; then
		echo "copy-cluster.sh: kept $dir"
	else
		rm -rf "$dir"
	fi
}
trap 'cleanup' EXIT
trap 'echo "copy-cluster.sh: interrupted" >&2; status=1; exit 1' INT TERM HUP

echo "rdmafs-copy-test-secret" >"$dir/secret"
chmod 600 "$dir/secret"
start_daemon meta 0 --metadata yes || exit 1
meta_uri="tcp://127.0.0.1:$(cat "$dir/meta.port")"
wait_registered meta 0 || exit 1
cat >"$dir/cluster.env" <<ENV
daemon='$daemon'
meta_uri='$meta_uri'
ENV
for i in $(seq "$storage"); do
	start_storage "$i" 0 || exit 1
done
echo "copy-cluster.sh: metadata service at $meta_uri, $storage storage daemons registered"

export RDMAFS_META="$meta_uri" RDMAFS_SECRET_FILE="$dir/secret"
export RDMAFS_CLUSTER_DIR="$dir" RDMAFS_CLUSTER_CTL="$self"
timeout -k 10 "$timeout" "$@" &
cmd_pid=$!
wait "$cmd_pid"
status=$?
cmd_pid=
if [ $status -eq 124 ] || [ $status -eq 137 ]; then
	echo "copy-cluster.sh: the command did not finish in $timeout s (hang?)" >&2
	status=1
fi
exit $status
