#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# cluster.sh: the one way to start an rdmafs cluster, for every test suite,
# benchmark and scripts/rdmafs-up.sh, over tcp or rdma. It starts a metadata
# daemon (rdmafs-daemon --metadata yes, which stores chunks too) and N
# storage daemons (--metadata no) on one address, each found by the port
# file it writes once it serves. They are ready when the metadata service
# answers, lists each of them up at its address with a heartbeat since its
# start (so the process just started registered, not one before it), and
# each answers a DAEMON_STATS itself (rdmafsctl --json status, rdmafsctl
# stats). Then rdmafs-fuse mounts 0, 1 or 2 times; a mount is ready when
# /proc/self/mountinfo lists it as rdmafs-fuse's FUSE file system and its
# statfs answers with the cluster's capacity. No log line decides anything.
#
#   cluster.sh [OPTIONS] -- COMMAND [ARG...]
#       starts a cluster, runs COMMAND, then unmounts and stops everything on
#       every exit path; exits with COMMAND's status
#   cluster.sh up [OPTIONS]       starts what does not run yet and leaves it
#                                 all running, detached (setsid); says where
#                                 its state is when it made the directory
#   cluster.sh status --dir DIR   what runs, for people; 0 if everything does
#   cluster.sh down --dir DIR     unmounts and stops (DIR and the data stay,
#                                 unless up made DIR itself)
#   cluster.sh ctl CMD ...        acts on a running cluster (the command run
#                                 by cluster.sh finds it by RDMAFS_CLUSTER_DIR,
#                                 anyone else with --dir DIR before CMD):
#       ctl kill I [SIG]    stop daemon I (1..N for the storage daemons, or
#                           meta), SIGKILL by default, and wait until it exited
#       ctl start I         start it again on its port and data directory and
#                           wait until it is registered and answers
#       ctl datadir I       print its data directory
#       ctl holders INO     print the storage daemons (1..N, one a line) that
#                           hold chunks of inode INO
#       ctl uri I           print its address
#       ctl remount M       unmount mount M (1 or 2) and mount it again
#                           (nothing may be open on it)
#       ctl signal I SIG    send SIG to daemon I and return (STOP, CONT, ...)
#     with --hosts, faults of daemon I's link (all undone by ctl heal I):
#       ctl cut I [both|out|in]  both: its link down; out: it hears but is
#                           not heard (what it sends is dropped); in: it is
#                           heard but does not hear
#       ctl loss I N        every Nth packet it sends and every Nth it
#                           receives is dropped: a fixed pattern, not a
#                           random one, so a test passes or fails on the
#                           code alone
#       ctl slow I RATE     what it sends is limited to RATE (tc tbf, e.g. 1mbit)
#       ctl heal I          its link as it was: up, nothing dropped or slowed
#
# OPTIONS
#   --build DIR        the binaries of a build tree; else the installed ones
#   --daemon PATH, --fuse PATH, --ctl PATH
#                      rdmafs-daemon, rdmafs-fuse, rdmafsctl (overrides;
#                      an empty --fuse means not built: mounts then skip)
#   --transport KIND   tcp (default) or rdma (skips with 77 without a device)
#   --addr ADDR        where to listen: default RDMAFS_TEST_ADDR, else
#                      RDMAFS_VM_RDMA_ADDR, else 127.0.0.1 (rdma_cm cannot
#                      route 127.0.0.1 over soft-RoCE: the rdma-vm guest sets
#                      its RDMA interface's address)
#   --port PORT        the metadata daemon's port (default 0: any)
#   --hosts            every daemon a host of its own: its own network
#                      namespace and address (198.51.100.10 the metadata
#                      daemon, .10+I storage daemon I), a veth to a bridge in
#                      a namespace of its own, and the mounts, rdmafsctl and
#                      COMMAND in one more (198.51.100.2): traffic only
#                      inside them, links that ctl can cut, slow or make
#                      lossy (tcp only; replaces --addr; needs ip, nsenter, nft)
#   --storage N        storage daemons besides the metadata daemon (3)
#   --daemon-hosts LIST  the failure domain each daemon declares (rdmafs-daemon
#                      --host; two copies of a chunk are never on one host):
#                      space-separated, the metadata daemon's first, then
#                      storage 1..N ("-": none); default none
#   --mounts 0|1|2     mounts of rdmafs-fuse (1); --no-fuse is --mounts 0
#   --mount PATH       where mount 1 goes (default DIR/mnt1)
#   --meta-data PATH   the metadata daemon's data directory (DIR/meta)
#   --dir DIR          the state directory, kept by down; default a fresh
#                      one in TMPDIR, removed by down (RDMAFS_TEST_KEEP=1
#                      keeps it)
#   --timeout SECS     COMMAND's time limit (600); a command still running
#                      then is a hang, and fails
#   --log-level LEVEL  the daemons' --log-level and the mounts' log_level=
#                      (debug, info, warning, error; default: theirs, info)
#   --metrics          every daemon and every mount serves Prometheus
#                      metrics on ADDR (any free port, written to
#                      NAME.metrics-port, fuseM.metrics-port for mount M):
#                      http://ADDR:PORT/metrics
#   --metrics-port PORT  the metadata daemon's metrics port (implies
#                      --metrics; default 0: any)
#   --reclaim-grace SECS the metadata service's reclaim grace period
#                      (rdmafs-daemon --reclaim-grace; default: the daemon's)
#
# The state directory holds cluster.env (this script's settings, KEY='VALUE'
# lines a shell can source: meta_uri, transport, addr, ...), daemons (one
# line per daemon: NAME URI DATA_DIR, read by tests/lib/cluster.c), the
# secret, and per daemon NAME.pid, NAME.port, NAME.log (NAME.metrics-port with
# --metrics) and the data in NAME/ (meta, storage1, ...); per mount
# fuseM.pid, fuseM.log, mntM (and fuseM.metrics-port with --metrics).
#
# COMMAND's arguments %MOUNT% and %MOUNT2% become the mount paths. COMMAND
# gets the environment RDMAFS_MOUNT, RDMAFS_MOUNT2, RDMAFS_CLUSTER_DIR,
# RDMAFS_CLUSTER_CTL (this script), RDMAFS_CLUSTER_META and
# RDMAFS_CLUSTER_SECRET (the metadata service's URI and the secret file),
# and the same two as RDMAFS_META and RDMAFS_SECRET_FILE, which rdmafsctl
# and rdmafs-copy read.
#
# RDMAFS_FS_LOCAL=DIR: no cluster at all; COMMAND runs on a fresh directory
# inside DIR (both %MOUNT% and %MOUNT2%), to validate checks on a local file
# system. RDMAFS_FUSE_OPTS adds mount options (RDMAFS_FUSE_OPTS2 more, to
# mount 2 only, after them: the later of two values wins). RDMAFS_TEST_SECRET is the
# secret of a new cluster (default: 32 random bytes).
#
# Exit: COMMAND's status; 77 (with the reason) when this host cannot run it;
# 1 when the cluster does not come up (its logs are printed).

# cleanup() and print_logs() run from traps
# shellcheck disable=SC2317

set -u

self=$(readlink -f "$0")
# Bounds of each step, in seconds: long, since they only bound a failure, and
# the rdma-vm guest runs everything about ten times slower.
readonly PORT_WAIT=60 READY_WAIT=120 MOUNT_WAIT=60 STOP_WAIT=10

say() {
	echo "cluster.sh: $*"
}

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

skip() {
	echo "SKIP: $*"
	exit 77
}

now_ms() {
	date +%s%3N
}

# --- daemons: NAME is meta or storageI ---------------------------------------

# daemon_name I: meta, or storageI for I or storageI.
daemon_name() {
	case $1 in
	meta) echo meta ;;
	storage[0-9]*) echo "$1" ;;
	[0-9]*) echo "storage$1" ;;
	*) return 1 ;;
	esac
}

data_dir_of() {
	if [ "$1" = meta ]; then echo "$meta_data"; else echo "$dir/$1"; fi
}

uri_of() {
	echo "$transport://$(addr_of "$1"):$(cat "$dir/$1.port" 2>/dev/null)"
}

# --- hosts (--hosts): a network namespace a daemon, one for the clients --------

readonly HOSTS_NET=198.51.100

# addr_of NAME: where NAME (meta, storageI, client, fuseM) listens or calls from.
addr_of() {
	[ "${hosts:-0}" = 1 ] || {
		echo "$addr"
		return
	}
	case $1 in
	meta) echo "$HOSTS_NET.10" ;;
	storage*) echo "$HOSTS_NET.$((10 + ${1#storage}))" ;;
	*) echo "$HOSTS_NET.2" ;;
	esac
}

# ns_of NAME: the network namespace of host NAME (br: the bridge's).
ns_of() {
	case $1 in
	meta | storage* | br) echo "rdmafs-$net_id-$1" ;;
	*) echo "rdmafs-$net_id-client" ;;
	esac
}

# in_host NAME: sets the array `run_in` to the prefix that runs a command
# on host NAME (nothing without --hosts). nsenter enters the network
# namespace only, so a mount made there is everybody's, and it execs: a pid
# taken with $! is the program's.
in_host() {
	run_in=()
	[ "${hosts:-0}" = 1 ] && run_in=(nsenter "--net=/run/netns/$(ns_of "$1")" --)
	return 0
}

# host_up NAME: its namespace, and a veth from its eth0 to the bridge.
host_up() {
	local ns br
	ns=$(ns_of "$1") br=$(ns_of br)
	[ -e "/run/netns/$ns" ] && return 0
	ip netns add "$ns" &&
		ip -n "$ns" link set lo up &&
		ip -n "$br" link add "v-$1" type veth peer name eth0 netns "$ns" &&
		ip -n "$br" link set "v-$1" master br0 up &&
		ip -n "$ns" addr add "$(addr_of "$1")/24" dev eth0 &&
		ip -n "$ns" link set eth0 up
}

# net_up: the bridge, a host for the clients and one for each daemon.
net_up() {
	local name br
	br=$(ns_of br)
	if [ ! -e "/run/netns/$br" ]; then
		ip netns add "$br" && ip -n "$br" link add br0 type bridge &&
			ip -n "$br" link set br0 up || return 1
	fi
	for name in client "${names[@]}"; do
		host_up "$name" || {
			echo "cluster.sh: cannot make the network namespace of $name" >&2
			return 1
		}
	done
}

# net_down: every namespace net_up made (a process still in one keeps it alive).
net_down() {
	local name
	[ "${hosts:-0}" = 1 ] || return 0
	for name in client "${names[@]}" br; do
		ip netns del "$(ns_of "$name")" 2>/dev/null
	done
	return 0
}

# fault_rules NAME IN OUT: daemon NAME's nftables table, rule IN on what eth0
# receives and OUT on what it sends (empty: none); replaces what was there.
fault_rules() {
	local run_in
	in_host "$1"
	"${run_in[@]}" nft -f - <<EOF
table inet rdmafs_fault
delete table inet rdmafs_fault
table inet rdmafs_fault {
	chain input {
		type filter hook input priority 0; policy accept;
		${2:+iifname "eth0" $2}
	}
	chain output {
		type filter hook output priority 0; policy accept;
		${3:+oifname "eth0" $3}
	}
}
EOF
}

pid_alive() {
	[ -n "$1" ] && kill -0 "$1" 2>/dev/null
}

# pid_of FILE MARK: the pid in FILE if that process runs and its command line
# holds MARK (what this script started it with), so that a pid the system
# gave to another process since (a reboot, a kill) is never signalled.
pid_of() {
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1")
	pid_alive "$pid" || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$2" || return 1
	echo "$pid"
}

daemon_pid() {
	pid_of "$dir/$1.pid" "$dir/$1.port"
}

daemon_running() {
	daemon_pid "$1" >/dev/null
}

# rctl ARGS...: rdmafsctl against this cluster.
rctl() {
	local run_in
	in_host client
	timeout 60 "${run_in[@]}" "$rdmafsctl" -m "$meta_uri" -s "$dir/secret" --timeout 10 "$@"
}

# map_lines: the cluster map as the metadata service answers it, one line
# per daemon: STATE LAST_HEARTBEAT_UNIX_MS ADDRESS... (from the JSON of
# rdmafsctl --json status, one value per line once split at , { } [ ]).
map_lines() {
	local json rc
	# status exits 1 (DEGRADED) or 5 (ERROR) with the map printed all the same
	json=$(rctl --json status 2>/dev/null)
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 1 ] || [ $rc -eq 5 ] || return 1
	tr ',{}[]' '\n' <<<"$json" | awk '
		# hb stays the string of digits it came as: mawk prints a number this
		# large as "1.79545e+12", which would lose the milliseconds ready() compares.
		function flush() { if (state != "") print state, (hb ~ /^[0-9]+$/ ? hb : "0"), addrs; state = ""; hb = ""; addrs = "" }
		function value(line) { sub(/^[^:]*: */, "", line); gsub(/"/, "", line); return line }
		/"uuid":/ { flush(); state = "?"; addrs = "" }
		/"state":/ { state = value($0) }
		/"last_heartbeat_unix_ms":/ { hb = value($0); gsub(/[ \t\r]/, "", hb) }
		/^ *"[^"]*" *$/ { s = $0; gsub(/[ "]/, "", s); addrs = addrs " " s }
		END { flush() }'
}

# ready SINCE_MS NAME...: the metadata service answers; it lists every NAME
# up, at its address, with a heartbeat at or after SINCE_MS (so the process
# started then registered, not one before it); and every NAME answers a
# DAEMON_STATS itself (one rdmafsctl for all when NAME... is the cluster:
# each costs a connection, slow under the rdma-vm guest's emulation).
ready() {
	local since=$1 map name
	shift
	map=$(map_lines) || return 1
	for name in "$@"; do
		awk -v u="$(uri_of "$name")" -v t="$since" '$1 == "up" && $2 >= t {
			for (i = 3; i <= NF; i++) if ($i == u) found = 1 }
			END { exit !found }' <<<"$map" || return 1
	done
	if [ $# -eq "$(wc -l <<<"$map")" ]; then
		rctl stats >/dev/null 2>&1 || return 1
		return 0
	fi
	for name in "$@"; do
		rctl stats "$(uri_of "$name")" >/dev/null 2>&1 || return 1
	done
}

# wait_ready SINCE_MS NAME...: ready, within READY_WAIT seconds.
wait_ready() {
	local deadline name
	deadline=$(($(now_ms) + READY_WAIT * 1000))
	until ready "$@"; do
		for name in "${@:2}"; do
			daemon_running "$name" || {
				echo "cluster.sh: $name exited" >&2
				return 1
			}
		done
		if [ "$(now_ms)" -gt "$deadline" ]; then
			echo "cluster.sh: the metadata service at $meta_uri does not list ${*:2} as" \
				"up, registered since the start and answering, after $READY_WAIT s:" >&2
			rctl status >&2
			return 1
		fi
		sleep 0.2
	done
}

# host_port HOST PORT: HOST:PORT, [HOST]:PORT for an IPv6 address.
host_port() {
	case $1 in
	*:*) echo "[$1]:$2" ;;
	*) echo "$1:$2" ;;
	esac
}

# declared_host NAME: the host daemon NAME declares (--daemon-hosts), or nothing
declared_host() {
	local -a list
	local at=0 h
	read -r -a list <<<"${daemon_hosts:-}"
	[ "$1" = meta ] || at=${1#storage}
	h=${list[$at]:-}
	[ "$h" = - ] || echo "$h"
}

# start_daemon NAME PORT: starts rdmafs-daemon and waits for its port file
# (its first listener serves). Returns 1 if it exits or does not serve.
start_daemon() {
	local name=$1 port=$2 pid deadline role mport run_in declared
	role=(--metadata no --metadata-uri "$meta_uri")
	[ "$name" = meta ] && role=(--metadata yes)
	[ "$name" = meta ] && [ -n "${reclaim_grace:-}" ] && role+=(--reclaim-grace "$reclaim_grace")
	[ -n "${log_level:-}" ] && role+=(--log-level "$log_level")
	declared=$(declared_host "$name")
	[ -n "$declared" ] && role+=(--host "$declared")
	if [ "${metrics:-0}" = 1 ]; then
		# a restarted daemon keeps its metrics port, as it keeps its port
		mport=$(cat "$dir/$name.metrics-port" 2>/dev/null) ||
			mport=$([ "$name" = meta ] && echo "${metrics_port:-0}" || echo 0)
		role+=(--metrics-listen "$(host_port "$(addr_of "$name")" "$mport")"
			--metrics-port-file "$dir/$name.metrics-port")
	fi
	rm -f "$dir/$name.port"
	in_host "$name"
	"${detach[@]}" "${run_in[@]}" "$daemon" --data-dir "$(data_dir_of "$name")" \
		--listen "$transport://$(addr_of "$name"):$port" \
		--secret-file "$dir/secret" --port-file "$dir/$name.port" \
		--name "$name" --foreground "${role[@]}" </dev/null >>"$dir/$name.log" 2>&1 &
	pid=$!
	# not a job of ours: no "Killed" notice when a test kills it on purpose
	disown "$pid" 2>/dev/null
	echo "$pid" >"$dir/$name.pid"
	deadline=$(($(now_ms) + PORT_WAIT * 1000))
	while [ ! -s "$dir/$name.port" ]; do
		if ! pid_alive "$pid"; then
			echo "cluster.sh: $name exited during start-up" >&2
			return 1
		fi
		if [ "$(now_ms)" -gt "$deadline" ]; then
			echo "cluster.sh: $name did not write its port file in $PORT_WAIT s" >&2
			return 1
		fi
		sleep 0.05
	done
	[ "$name" = meta ] && meta_uri=$(uri_of meta)
	return 0
}

# stop_pid PID [SIG]: signals PID and waits until it is gone (SIGKILL after STOP_WAIT s).
stop_pid() {
	local pid=$1 sig=${2:-TERM} i
	kill -"$sig" "$pid" 2>/dev/null || return 0
	for i in $(seq $((STOP_WAIT * 20))); do
		pid_alive "$pid" || return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
	while pid_alive "$pid"; do sleep 0.05; done
}

# --- mounts ------------------------------------------------------------------

mount_point() {
	if [ "$1" = 1 ]; then echo "$mount1"; else echo "$dir/mnt$1"; fi
}

# Looks in the mount table only: stat() of a hung FUSE mount would block.
is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# mount_ready PATH: listed as a FUSE mount, and its statfs answers with the
# cluster's capacity (an rdmafs root, not the directory under it).
mount_ready() {
	local out
	awk -v m="$1" '$5 == m { for (i = 7; i < NF; i++) if ($i == "-") { t = $(i + 1); break }
		if (t ~ /^fuse\.rdmafs/) found = 1 } END { exit !found }' /proc/self/mountinfo || return 1
	out=$(timeout 30 stat -f -c '%T %b' "$1" 2>/dev/null) || return 1
	case $out in
	fuse*\ 0) return 1 ;;
	fuse*) return 0 ;;
	esac
	return 1
}

# mount_one M: mounts rdmafs-fuse on mount point M and waits until it is ready.
mount_one() {
	local n=$1 m pid deadline opts mport run_in
	m=$(mount_point "$n")
	mkdir -p "$m"
	opts="meta=$meta_uri,secret=$dir/secret,allow_other${log_level:+,log_level=$log_level}"
	if [ "${metrics:-0}" = 1 ]; then
		# a remounted mount keeps its metrics port, as a restarted daemon does
		mport=$(cat "$dir/fuse$n.metrics-port" 2>/dev/null) || mport=0
		opts="$opts,metrics=$(host_port "$(addr_of "fuse$n")" "$mport"),metrics_port_file=$dir/fuse$n.metrics-port"
	fi
	opts="$opts${RDMAFS_FUSE_OPTS:+,$RDMAFS_FUSE_OPTS}"
	[ "$n" = 2 ] && opts="$opts${RDMAFS_FUSE_OPTS2:+,$RDMAFS_FUSE_OPTS2}"
	in_host client
	"${detach[@]}" "${run_in[@]}" "$fuse" -f -o "$opts" "$m" </dev/null >>"$dir/fuse$n.log" 2>&1 &
	pid=$!
	disown "$pid" 2>/dev/null
	# in a file: ctl remount replaces the process
	echo "$pid" >"$dir/fuse$n.pid"
	deadline=$(($(now_ms) + MOUNT_WAIT * 1000))
	until mount_ready "$m"; do
		if ! pid_alive "$pid"; then
			echo "cluster.sh: rdmafs-fuse exited before mounting $m" >&2
			return 1
		fi
		if [ "$(now_ms)" -gt "$deadline" ]; then
			echo "cluster.sh: $m is not an answering rdmafs mount after $MOUNT_WAIT s" >&2
			return 1
		fi
		sleep 0.05
	done
}

fuse_pid() {
	pid_of "$dir/fuse$1.pid" "$(mount_point "$1")"
}

# unmount_one M: unmounts mount M and waits for its rdmafs-fuse to exit.
unmount_one() {
	local m pid
	m=$(mount_point "$1")
	pid=$(fuse_pid "$1")
	if is_mounted "$m"; then
		timeout 20 fusermount3 -u "$m" 2>/dev/null ||
			timeout 20 fusermount3 -uz "$m" 2>/dev/null ||
			umount -l "$m" 2>/dev/null
	fi
	[ -n "$pid" ] && stop_pid "$pid" TERM
	rm -f "$dir/fuse$1.pid"
	! is_mounted "$m"
}

# --- the state directory -------------------------------------------------------

load_state() {
	[ -f "$dir/cluster.env" ] || die "no cluster in $dir (no cluster.env)"
	# shellcheck source=/dev/null
	. "$dir/cluster.env"
}

save_state() {
	local name
	# absolute paths: ctl runs from the test's working directory
	cat >"$dir/cluster.env" <<EOF
daemon='$daemon'
fuse='$fuse'
rdmafsctl='$rdmafsctl'
transport='$transport'
addr='$addr'
meta_uri='$meta_uri'
storage='$storage'
mounts='$mounts'
mount1='$mount1'
meta_data='$meta_data'
temporary='$temporary'
log_level='$log_level'
metrics='$metrics'
metrics_port='$metrics_port'
reclaim_grace='$reclaim_grace'
hosts='$hosts'
net_id='$net_id'
daemon_hosts='$daemon_hosts'
EOF
	: >"$dir/daemons.new"
	for name in "${names[@]}"; do
		echo "$name $(uri_of "$name") $(data_dir_of "$name")" >>"$dir/daemons.new"
	done
	mv "$dir/daemons.new" "$dir/daemons"
}

names_of_cluster() {
	local i
	names=(meta)
	for i in $(seq "${storage:-0}"); do names+=("storage$i"); done
}

print_logs() {
	local f
	for f in "$dir"/*.log; do
		[ -f "$f" ] || continue
		echo "--- $f (last 30 lines)" >&2
		tail -n 30 "$f" >&2
	done
}

# metrics_url NAME: where NAME serves its metrics (empty when it does not).
metrics_url() {
	[ "${metrics:-0}" = 1 ] && [ -s "$dir/$1.metrics-port" ] || return 0
	echo "http://$(host_port "$(addr_of "$1")" "$(cat "$dir/$1.metrics-port")")/metrics"
}

# metrics_note NAME: ", metrics at URL" when NAME serves metrics.
metrics_note() {
	local url
	url=$(metrics_url "$1")
	[ -n "$url" ] && echo ", metrics at $url"
}

# status_lines: what runs, for people; returns 1 if anything does not.
status_lines() {
	local name n m pid all=0
	echo "metadata service at $meta_uri ($transport)"
	for name in "${names[@]}"; do
		if pid=$(daemon_pid "$name"); then
			echo "$name: running (pid $pid), data in $(data_dir_of "$name")$(metrics_note "$name")"
		else
			echo "$name: not running (data in $(data_dir_of "$name"))"
			all=1
		fi
	done
	for n in $(seq 1 "$mounts"); do
		m=$(mount_point "$n")
		if is_mounted "$m"; then
			echo "mounted on $m$(metrics_note "fuse$n")"
		else
			echo "not mounted on $m"
			all=1
		fi
	done
	return $all
}

# stop_all: unmounts, stops every daemon; removes a temporary directory.
stop_all() {
	local n name pid
	for n in 1 2; do
		[ -f "$dir/fuse$n.pid" ] || continue
		unmount_one "$n" && [ "$verb" = down ] && say "unmounted $(mount_point "$n")"
	done
	for name in "${names[@]}"; do
		if pid=$(daemon_pid "$name"); then
			stop_pid "$pid" TERM
			[ "$verb" = down ] && say "stopped $name (pid $pid)"
		fi
		rm -f "$dir/$name.pid"
	done
	net_down
	[ "${temporary:-0}" = 1 ] || return 0
	if [ -n "${RDMAFS_TEST_KEEP:-}" ]; then
		say "kept $dir"
		return 0
	fi
	for n in 1 2; do
		if is_mounted "$(mount_point "$n")"; then
			echo "cluster.sh: $(mount_point "$n") is still mounted; leaving $dir" >&2
			return 1
		fi
	done
	rm -rf "$dir"
}

# --- ctl, status, down: act on a running cluster --------------------------------

# What up starts outlives it, in a session of its own (setsid execs in place
# here: a background job is no process group leader). A command's cluster
# stays in the command's process group, so that a test runner that kills
# the group on a timeout kills it too.
detach=()
dir='' verb=''
if [ "${1:-}" = ctl ] || [ "${1:-}" = status ] || [ "${1:-}" = down ]; then
	verb=$1
	dir=${RDMAFS_CLUSTER_DIR:-}
	shift
	if [ "${1:-}" = --dir ]; then
		dir=${2:?--dir needs a directory}
		shift 2
	fi
	[ -n "$dir" ] || die "$verb: which cluster? (--dir DIR, or RDMAFS_CLUSTER_DIR)"
	if [ "$verb" = ctl ]; then
		verb=${1:?usage: ctl kill|start|signal|datadir|uri|remount|cut|loss|slow|heal ...}
		shift
	fi
	if [ "$verb" != down ] || [ -f "$dir/cluster.env" ]; then
		load_state
	fi
	dir=$(readlink -f "$dir")
	names_of_cluster
	case $verb in
	down)
		[ -f "$dir/cluster.env" ] || exit 0
		stop_all
		exit
		;;
	status)
		status_lines
		exit
		;;
	holders)
		# the storage daemons holding chunks of inode INO: DATA_DIR/chunks/INO/,
		# 16 hex digits (the metadata service's own daemon is never named)
		ino=${1:?usage: ctl holders INO}
		for i in $(seq "$storage"); do
			[ -n "$(ls -A "$(printf '%s/chunks/%016x' "$(data_dir_of "storage$i")" "$ino")" \
				2>/dev/null)" ] && echo "$i"
		done
		exit 0
		;;
	remount)
		n=${1:?usage: ctl remount M}
		[ -f "$dir/fuse$n.pid" ] || die "no mount $n"
		unmount_one "$n" || die "cannot unmount $(mount_point "$n") (busy?)"
		mount_one "$n" || exit 1
		exit 0
		;;
	esac
	i=${1:?usage: ctl kill|start|signal|datadir|uri|remount|cut|loss|slow|heal I (I: a storage daemon 1..N, or meta)}
	if ! name=$(daemon_name "$i") || [ ! -f "$dir/$name.port" ]; then
		die "no daemon $i"
	fi
	case $verb in
	kill)
		pid=$(daemon_pid "$name") || die "daemon $i is not running"
		kill -"${2:-KILL}" "$pid" || exit 1
		# reap-free wait: the daemon is not our child
		while pid_alive "$pid"; do sleep 0.05; done
		rm -f "$dir/$name.pid"
		;;
	start)
		daemon_running "$name" && die "daemon $i is running"
		since=$(now_ms)
		if ! start_daemon "$name" "$(cat "$dir/$name.port")" || ! wait_ready "$since" "$name"; then
			tail -n 20 "$dir/$name.log" >&2
			exit 1
		fi
		;;
	datadir) data_dir_of "$name" ;;
	uri) uri_of "$name" ;;
	signal)
		pid=$(daemon_pid "$name") || die "daemon $i is not running"
		kill -"${2:?usage: ctl signal I SIG}" "$pid" || exit 1
		;;
	cut | loss | slow | heal)
		[ "${hosts:-0}" = 1 ] || die "ctl $verb needs a cluster started with --hosts"
		case $verb/${2:-both} in
		cut/both) ip -n "$(ns_of br)" link set "v-$name" down ;;
		cut/out) fault_rules "$name" "" drop ;;
		cut/in) fault_rules "$name" drop "" ;;
		cut/*) die "ctl cut I [both|out|in]" ;;
		loss/*)
			case ${2:-} in '' | *[!0-9]* | 0 | 1) die "ctl loss I N: N a number from 2 up" ;; esac
			fault_rules "$name" "numgen inc mod $2 == 0 drop" "numgen inc mod $2 == 0 drop"
			;;
		slow/*)
			in_host "$name"
			"${run_in[@]}" tc qdisc replace dev eth0 root tbf rate "${2:?usage: ctl slow I RATE}" \
				burst 32kbit latency 400ms
			;;
		heal/*)
			in_host "$name"
			"${run_in[@]}" tc qdisc del dev eth0 root 2>/dev/null
			fault_rules "$name" "" "" && ip -n "$(ns_of br)" link set "v-$name" up
			;;
		esac || exit 1
		;;
	*) die "unknown ctl command $verb" ;;
	esac
	exit 0
fi

# --- up, or run a command --------------------------------------------------------

mode=run
if [ "${1:-}" = up ]; then
	mode=up
	detach=(setsid)
	shift
fi
build='' daemon='' fuse='' fuse_set=0 rdmafsctl='' transport=tcp addr='' port=0 storage=3
mounts=1 mount1='' meta_data='' timeout=600 log_level='' metrics=0 metrics_port=0 reclaim_grace='' hosts=0
daemon_hosts=''
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--daemon) daemon=$2; shift 2 ;;
	--fuse) fuse=$2; fuse_set=1; shift 2 ;;
	--ctl) rdmafsctl=$2; shift 2 ;;
	--transport) transport=$2; shift 2 ;;
	--addr) addr=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--storage) storage=$2; shift 2 ;;
	--mounts) mounts=$2; shift 2 ;;
	--no-fuse) mounts=0; shift ;;
	--mount) mount1=$2; shift 2 ;;
	--meta-data) meta_data=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--log-level) log_level=$2; shift 2 ;;
	--metrics) metrics=1; shift ;;
	--metrics-port) metrics=1; metrics_port=$2; shift 2 ;;
	--reclaim-grace) reclaim_grace=$2; shift 2 ;;
	--hosts) hosts=1; shift ;;
	--daemon-hosts) daemon_hosts=$2; shift 2 ;;
	--) shift; break ;;
	*) die "unknown argument $1 (see the header of $self)" ;;
	esac
done
if [ "$mode" = run ]; then
	[ $# -gt 0 ] || die "no command given (cluster.sh [OPTIONS] -- COMMAND, or cluster.sh up)"
fi
case $mounts in 0 | 1 | 2) ;; *) die "--mounts takes 0, 1 or 2" ;; esac
case $transport in tcp | rdma) ;; *) die "--transport takes tcp or rdma" ;; esac
case $storage in *[!0-9]* | '') die "--storage takes a number" ;; esac
case $metrics_port in *[!0-9]* | '') die "--metrics-port takes a number" ;; esac
case $reclaim_grace in *[!0-9]*) die "--reclaim-grace takes a number of seconds" ;; esac
case $log_level in '' | debug | info | warning | error) ;; *) die "--log-level takes debug, info, warning or error" ;; esac

substitute() {
	local a
	cmd=()
	for a in "$@"; do
		a=${a//%MOUNT2%/$RDMAFS_MOUNT2}
		cmd+=("${a//%MOUNT%/$RDMAFS_MOUNT}")
	done
}

# --- local mode: validate the checks on a local directory ------------------------

if [ "$mode" = run ] && [ -n "${RDMAFS_FS_LOCAL:-}" ]; then
	[ -d "$RDMAFS_FS_LOCAL" ] || die "RDMAFS_FS_LOCAL=$RDMAFS_FS_LOCAL is not a directory"
	dir=$(mktemp -d "$RDMAFS_FS_LOCAL/fs-local.XXXXXX") ||
		{ echo "cluster.sh: ERROR: cannot make a directory in $RDMAFS_FS_LOCAL" >&2; exit 99; }
	chmod 755 "$dir"
	trap 'rm -rf "$dir"' EXIT
	export RDMAFS_MOUNT=$dir RDMAFS_MOUNT2=$dir RDMAFS_CLUSTER_DIR='' RDMAFS_CLUSTER_CTL=''

	unset RDMAFS_CLUSTER_META RDMAFS_CLUSTER_SECRET
	say "local mode, running on $dir (no rdmafs)"
	substitute "$@"
	timeout -k 10 "$timeout" "${cmd[@]}"
	rc=$?
	[ $rc -eq 124 ] && echo "cluster.sh: the command timed out after $timeout s" >&2
	exit $rc
fi

# --- what this host must have ------------------------------------------------------

# binary VAR NAME BUILD_PATH: --VAR, else the build tree's, else the installed one.
binary() {
	local path=${!1}
	[ -z "$path" ] && [ -n "$build" ] && path=$build/$3
	[ -z "$path" ] && path=$(command -v "$2")
	[ -n "$path" ] && path=$(readlink -f "$path")
	printf -v "$1" '%s' "$path"
}
executable() {
	[ -n "$1" ] && [ -f "$1" ] && [ -x "$1" ]
}
binary daemon rdmafs-daemon storage-daemon/rdmafs-daemon
binary rdmafsctl rdmafsctl fuse-client/ctl/rdmafsctl
executable "$daemon" || die "rdmafs-daemon not found (${daemon:---daemon or --build})"
executable "$rdmafsctl" || die "rdmafsctl not found (${rdmafsctl:---ctl or --build})"
if [ "$mounts" -gt 0 ]; then
	if [ "$fuse_set" = 0 ]; then
		binary fuse rdmafs-fuse fuse-client/rdmafs-fuse
	elif [ -n "$fuse" ]; then
		fuse=$(readlink -f "$fuse")
	fi
	executable "$fuse" || skip "rdmafs-fuse not built${fuse:+ ($fuse missing)}"
	[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
	command -v fusermount3 >/dev/null || skip "fusermount3 not installed (package fuse3)"
	[ "$(id -u)" = 0 ] || skip "the mounts use allow_other, and the fs checks act as other users: run as root"
fi
if [ "$hosts" = 1 ]; then
	[ -z "$addr" ] || die "--hosts gives every daemon its own address: no --addr with it"
	# Tried in the rdma-vm guest (Debian 12's kernel, 6.1): rxe devices on the
	# hosts' veths are made and the daemons listen there, but every connect
	# ends RDMA_CM_EVENT_UNREACHABLE; as we read rxe, its UDP port (4791) is
	# opened in the first namespace only. In one namespace rxe hands traffic
	# for local addresses over inside itself, where no netfilter rule can
	# cut it: a link fault over verbs needs hosts that are really apart.
	[ "$transport" = tcp ] || skip "--hosts runs over tcp only: soft-RoCE in Debian 12's kernel does not work across network namespaces"
	[ "$(id -u)" = 0 ] || skip "--hosts makes network namespaces: run as root"
	for tool in ip nsenter nft tc; do
		command -v "$tool" >/dev/null || skip "--hosts needs $tool (packages iproute2, util-linux, nftables)"
	done
fi
[ -n "$addr" ] || addr=${RDMAFS_TEST_ADDR:-${RDMAFS_VM_RDMA_ADDR:-127.0.0.1}}
if [ "$transport" = rdma ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	skip "no RDMA device (the rdma-vm suite runs this over soft-RoCE)"
fi
# RDMA registers the daemons' and the client's buffers: memory they lock
ulimit -l unlimited 2>/dev/null

# --- set up, with a trap that tears down what a failure leaves --------------------

temporary=0
if [ -z "$dir" ]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-cluster.XXXXXX") ||
		{ echo "cluster.sh: ERROR: cannot make a directory in ${TMPDIR:-/tmp}" >&2; exit 99; }
	temporary=1
	# the fs checks run as other users below it
	chmod 755 "$dir"
elif [ "$mode" = up ] && [ -f "$dir/cluster.env" ]; then
	# up again: what this directory held keeps its temporariness
	# shellcheck source=/dev/null
	temporary=$(. "$dir/cluster.env" && echo "${temporary:-0}")
fi
mkdir -p "$dir" || exit 1
dir=$(readlink -f "$dir")
case $dir$mount1$meta_data in
*[[:space:]\']*) die "paths with blanks or quotes are not supported: $dir $mount1 $meta_data" ;;
esac
[ -n "$mount1" ] || mount1=$dir/mnt1
[ -n "$meta_data" ] || meta_data=$dir/meta
mount1=$(readlink -m "$mount1")
meta_data=$(readlink -m "$meta_data")
names_of_cluster
# the hosts' namespaces are named after the state directory, so that two
# clusters (two tests at once) never share one
net_id=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
cmd_pid=
status=1

cleanup() {
	trap - EXIT INT TERM HUP PIPE
	[ -n "$cmd_pid" ] && stop_pid "$cmd_pid" TERM
	if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
		print_logs
	fi
	if [ "$mode" = run ] || [ "$status" -ne 0 ]; then
		stop_all
	fi
}
trap 'cleanup' EXIT
# a reader of our output that went away (| head) would kill us without the EXIT trap
trap 'echo "cluster.sh: interrupted" >&2; status=1; exit 1' INT TERM HUP PIPE

if [ ! -s "$dir/secret" ]; then
	(
		umask 077
		if [ -n "${RDMAFS_TEST_SECRET:-}" ]; then
			printf '%s\n' "$RDMAFS_TEST_SECRET"
		else
			head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'
		fi >"$dir/secret"
	) || exit 1
fi

[ "$hosts" = 1 ] && { net_up || exit 1; }
since=$(now_ms)
meta_uri="$transport://$(addr_of meta):$port"
fresh=()
if pid=$(daemon_pid meta); then
	meta_uri=$(uri_of meta)
	say "metadata daemon already running (pid $pid)"
else
	# its clients know its port: keep the one it had, unless told another
	[ "$port" = 0 ] && [ -s "$dir/meta.port" ] && port=$(cat "$dir/meta.port")
	start_daemon meta "$port" || exit 1
	fresh+=(meta)
fi
for name in "${names[@]:1}"; do
	daemon_running "$name" && continue
	start_daemon "$name" "$(cat "$dir/$name.port" 2>/dev/null || echo 0)" || exit 1
	fresh+=("$name")
done
save_state
# the daemons this run started must have registered since, the others be up
wait_ready "$since" "${fresh[@]}" || exit 1
if [ ${#fresh[@]} -lt ${#names[@]} ]; then
	wait_ready 0 "${names[@]}" || exit 1
fi
[ "$metrics" = 1 ] && say "metadata daemon's metrics at $(metrics_url meta)"
if [ "$storage" = 0 ]; then
	say "metadata service at $meta_uri ($transport), its daemon registered and answering"
else
	say "metadata service at $meta_uri ($transport), it and $storage storage daemons registered and answering"
fi

for n in $(seq 1 "$mounts"); do
	mount_ready "$(mount_point "$n")" || mount_one "$n" || exit 1
done
export RDMAFS_MOUNT='' RDMAFS_MOUNT2=''

[ "$mounts" -ge 1 ] && RDMAFS_MOUNT=$(mount_point 1)
[ "$mounts" -ge 2 ] && RDMAFS_MOUNT2=$(mount_point 2)
[ "$mounts" -ge 1 ] && say "mounted on $RDMAFS_MOUNT${RDMAFS_MOUNT2:+ and $RDMAFS_MOUNT2}"

if [ "$mode" = up ]; then
	status=0
	[ "$temporary" = 1 ] && say "state in $dir (cluster.sh status|ctl|down --dir $dir)"
	exit 0
fi

export RDMAFS_CLUSTER_DIR="$dir" RDMAFS_CLUSTER_CTL="$self"
export RDMAFS_CLUSTER_META="$meta_uri" RDMAFS_CLUSTER_SECRET="$dir/secret"
export RDMAFS_META="$meta_uri" RDMAFS_SECRET_FILE="$dir/secret"
substitute "$@"
in_host client
# In the background: bash runs a trap (meson's SIGTERM) only between
# commands, and `wait` returns at once on a signal.
timeout -k 10 "$timeout" "${run_in[@]}" "${cmd[@]}" &
cmd_pid=$!
wait "$cmd_pid"
status=$?
cmd_pid=
if [ $status -eq 124 ] || [ $status -eq 137 ]; then
	echo "cluster.sh: the command did not finish in $timeout s (hang?)" >&2
	status=1
fi
# the mounts must have survived the command (their processes: ctl remount may replace them)
for n in $(seq 1 "$mounts"); do
	if ! fuse_pid "$n" >/dev/null; then
		echo "cluster.sh: rdmafs-fuse of $(mount_point "$n") died during the test" >&2
		status=1
	fi
done
exit $status
