#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# cluster.sh: runs a command against a real rdmafs mount. It starts a
# metadata daemon (rdmafs-daemon --metadata yes, which also stores chunks) and
# N storage daemons (--metadata no) on loopback, waits until every one has
# registered, mounts rdmafs-fuse (once, or twice with --mounts 2), runs the
# command, then unmounts and stops everything, on every exit path.
#
#   cluster.sh --daemon PATH (--fuse PATH | --no-fuse) [--storage N]
#              [--mounts 1|2] [--transport tcp|rdma] [--timeout SECS]
#              -- COMMAND [ARG...]
#
# In ARGs, %MOUNT% and %MOUNT2% become the mount paths (also exported as
# RDMAFS_MOUNT and RDMAFS_MOUNT2). The command also gets RDMAFS_CLUSTER_DIR
# and RDMAFS_CLUSTER_CTL (this script), for
#
#   "$RDMAFS_CLUSTER_CTL" ctl kill I [SIG]  stop storage daemon I (1..N), or
#                                           the metadata daemon (I = meta)
#   "$RDMAFS_CLUSTER_CTL" ctl start I       restart it on its port and data
#                                           directory, wait until registered
#   "$RDMAFS_CLUSTER_CTL" ctl datadir I     print its data directory
#   "$RDMAFS_CLUSTER_CTL" ctl remount N     unmount mount N (1 or 2) and mount
#                                           it again (nothing may be open on it)
#
# and RDMAFS_CLUSTER_META, RDMAFS_CLUSTER_SECRET (the metadata service's URI
# and the secret file) for checks that also use the client core.
#
# RDMAFS_FS_LOCAL=DIR: no cluster at all; the command runs on a fresh
# directory inside DIR (both %MOUNT% and %MOUNT2%), to validate the checks
# on a local file system. RDMAFS_TEST_ADDR (or RDMAFS_VM_RDMA_ADDR) sets the
# address to listen on (rdma_cm cannot route 127.0.0.1 over soft-RoCE).
# RDMAFS_FUSE_OPTS adds mount options. RDMAFS_TEST_KEEP=1 keeps the logs.
#
# Exit: the command's status; 77 (with the reason) when this host cannot
# run it; 1 when the cluster does not come up (its logs are printed).

set -u

ctl_self=$(readlink -f "$0")

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

# --- daemons: NAME -> $dir/NAME.{pid,port,log}, data in $dir/NAME/ ---------

# start_daemon NAME PORT [EXTRA...]: starts rdmafs-daemon, waits for its
# port file. Returns 1 if it exits or does not serve within 20 s.
start_daemon() {
	local name=$1 port=$2 pid deadline
	shift 2
	rm -f "$dir/$name.port"
	"$daemon" --data-dir "$dir/$name" --listen "$kind://$addr:$port" \
		--secret-file "$dir/secret" --port-file "$dir/$name.port" \
		--name "$name" --foreground "$@" </dev/null >>"$dir/$name.log" 2>&1 &
	pid=$!
	# not a job of ours: no "Killed" notice when a test kills it on purpose
	disown "$pid" 2>/dev/null
	echo "$pid" >"$dir/$name.pid"
	deadline=$(($(now_ms) + 20000))
	while [ ! -s "$dir/$name.port" ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "cluster.sh: $name exited during start-up" >&2
			return 1
		fi
		if [ "$(now_ms)" -gt "$deadline" ]; then
			echo "cluster.sh: $name did not write its port file in 20 s" >&2
			return 1
		fi
		sleep 0.05
	done
	return 0
}

# wait_registered NAME SINCE_LINE: waits until NAME's log shows a successful
# registration after line SINCE_LINE.
wait_registered() {
	local name=$1 since=$2 deadline
	deadline=$(($(now_ms) + 30000))
	until tail -n +"$((since + 1))" "$dir/$name.log" |
		grep -q "registered with the metadata service"; do
		if [ "$(now_ms)" -gt "$deadline" ]; then
			echo "cluster.sh: $name did not register with the metadata service in 30 s" >&2
			return 1
		fi
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

# Looks in the mount table only: stat() of a hung FUSE mount would block.
is_mounted() {
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts
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

# mount_one N: mounts rdmafs-fuse on $dir/mntN, waits for the mount.
mount_one() {
	local n=$1 m="$dir/mnt$1" pid deadline opts
	mkdir -p "$m"
	opts="meta=$meta_uri,secret=$dir/secret,allow_other${RDMAFS_FUSE_OPTS:+,$RDMAFS_FUSE_OPTS}"
	"$fuse" -f -o "$opts" "$m" </dev/null >>"$dir/fuse$n.log" 2>&1 &
	pid=$!
	# in a file: ctl remount replaces the process
	echo "$pid" >"$dir/fuse$n.pid"
	mount_points+=("$m")
	deadline=$(($(now_ms) + 30000))
	until is_mounted "$m"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "cluster.sh: rdmafs-fuse exited before mounting $m" >&2
			return 1
		fi
		if [ "$(now_ms)" -gt "$deadline" ]; then
			echo "cluster.sh: $m not mounted after 30 s" >&2
			return 1
		fi
		sleep 0.05
	done
	# the mount answers, and statfs sees the daemons' capacity
	if ! timeout 30 stat -f -c '%b' "$m" | grep -qv '^0$'; then
		echo "cluster.sh: statfs of $m failed or shows no capacity" >&2
		return 1
	fi
}

# --- the control commands the test command uses ---------------------------

if [ "${1:-}" = ctl ]; then
	dir=${RDMAFS_CLUSTER_DIR:?ctl needs RDMAFS_CLUSTER_DIR}
	# shellcheck source=/dev/null
	. "$dir/cluster.env"
	i=${3:?usage: ctl kill|start|datadir|remount I (I: a storage daemon, or meta)}
	if [ "$2" = remount ]; then
		# unmount mount I (the kernel forgets every inode and page), then mount again
		m="$dir/mnt$i"
		[ -f "$dir/fuse$i.pid" ] || die "no mount $i"
		pid=$(cat "$dir/fuse$i.pid")
		timeout 20 fusermount3 -u "$m" || die "cannot unmount $m (busy?)"
		while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
		mount_points=()
		mount_one "$i" || exit 1
		exit 0
	fi
	name=storage$i
	[ "$i" = meta ] && name=meta
	[ -f "$dir/$name.pid" ] || die "no daemon $i"
	case $2 in
	kill)
		kill -"${4:-KILL}" "$(cat "$dir/$name.pid")" || exit 1
		# reap-free wait: the daemon is not our child
		while kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null; do sleep 0.05; done
		;;
	start)
		port=$(cat "$dir/$name.port")
		if [ "$name" = meta ]; then
			since=$(log_lines meta)
			start_daemon meta "$port" --metadata yes && wait_registered meta "$since"
		else
			start_storage "$i" "$port"
		fi || {
			tail -n 20 "$dir/$name.log" >&2
			exit 1
		}
		;;
	datadir) echo "$dir/$name" ;;
	*) die "unknown ctl command $2" ;;
	esac
	exit 0
fi

# --- arguments --------------------------------------------------------------

daemon= fuse= no_fuse=0 storage=3 mounts=1 kind=tcp timeout=600
while [ $# -gt 0 ]; do
	case $1 in
	--daemon) daemon=$2; shift 2 ;;
	--fuse) fuse=$2; shift 2 ;;
	--no-fuse) no_fuse=1; shift ;;
	--storage) storage=$2; shift 2 ;;
	--mounts) mounts=$2; shift 2 ;;
	--transport) kind=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--) shift; break ;;
	*) die "unknown argument $1 (see the header of $0)" ;;
	esac
done
[ $# -gt 0 ] || die "no command given"
case $mounts in 1 | 2) ;; *) die "--mounts takes 1 or 2" ;; esac
case $kind in tcp | rdma) ;; *) die "--transport takes tcp or rdma" ;; esac

substitute() {
	local a
	cmd=()
	for a in "$@"; do
		a=${a//%MOUNT2%/$RDMAFS_MOUNT2}
		cmd+=("${a//%MOUNT%/$RDMAFS_MOUNT}")
	done
}

# --- local mode: validate the checks on a local directory -------------------

if [ -n "${RDMAFS_FS_LOCAL:-}" ]; then
	[ -d "$RDMAFS_FS_LOCAL" ] || die "RDMAFS_FS_LOCAL=$RDMAFS_FS_LOCAL is not a directory"
	dir=$(mktemp -d "$RDMAFS_FS_LOCAL/fs-local.XXXXXX") || exit 1
	chmod 755 "$dir"
	trap 'rm -rf "$dir"' EXIT
	export RDMAFS_MOUNT=$dir RDMAFS_MOUNT2=$dir RDMAFS_CLUSTER_DIR= RDMAFS_CLUSTER_CTL=
	echo "cluster.sh: local mode, running on $dir (no rdmafs)"
	substitute "$@"
	timeout -k 10 "$timeout" "${cmd[@]}"
	rc=$?
	[ $rc -eq 124 ] && echo "cluster.sh: the command timed out after $timeout s" >&2
	exit $rc
fi

# --- what this host must have -------------------------------------------------

[ "$no_fuse" = 1 ] && skip "rdmafs-fuse not built yet"
[ -n "$fuse" ] || die "--fuse PATH or --no-fuse is required"
[ -x "$fuse" ] || skip "rdmafs-fuse not built yet ($fuse missing)"
[ -n "$daemon" ] && [ -x "$daemon" ] || die "--daemon PATH: rdmafs-daemon not found ($daemon)"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
command -v fusermount3 >/dev/null || skip "fusermount3 not installed (package fuse3)"
[ "$(id -u)" = 0 ] || skip "the fs suite mounts with allow_other and checks as other users: run as root"
addr=${RDMAFS_TEST_ADDR:-${RDMAFS_VM_RDMA_ADDR:-127.0.0.1}}
if [ "$kind" = rdma ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	skip "no RDMA device (the rdma-vm suite runs this over soft-RoCE)"
fi

# --- set up, with a trap that always tears down --------------------------------

dir=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-fs.XXXXXX") || exit 1
chmod 755 "$dir"
mount_points=()
cmd_pid=
status=1

print_logs() {
	local f
	for f in "$dir"/*.log; do
		[ -f "$f" ] || continue
		echo "--- $f (last 30 lines)" >&2
		tail -n 30 "$f" >&2
	done
}

cleanup() {
	local m pid f
	trap - EXIT INT TERM HUP
	[ -n "$cmd_pid" ] && stop_pid "$cmd_pid" TERM
	for m in "${mount_points[@]}"; do
		if is_mounted "$m"; then
			timeout 20 fusermount3 -u "$m" 2>/dev/null ||
				timeout 20 fusermount3 -uz "$m" 2>/dev/null ||
				umount -l "$m" 2>/dev/null
		fi
	done
	for f in "$dir"/*.pid; do
		[ -f "$f" ] && stop_pid "$(cat "$f")" TERM
	done
	if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
		print_logs
	fi
	if [ -n "${RDMAFS_TEST_KEEP:-}" ]; then
		echo "cluster.sh: kept $dir"
	else
		for m in "${mount_points[@]}"; do
			is_mounted "$m" && {
				echo "cluster.sh: $m is still mounted; leaving $dir" >&2
				return
			}
		done
		rm -rf "$dir"
	fi
}
trap 'cleanup' EXIT
trap 'echo "cluster.sh: interrupted" >&2; status=1; exit 1' INT TERM HUP

printf '%s\n' "${RDMAFS_TEST_SECRET:-rdmafs-fs-test-secret}" >"$dir/secret"
chmod 600 "$dir/secret"

start_daemon meta 0 --metadata yes || exit 1
meta_uri="$kind://$addr:$(cat "$dir/meta.port")"
wait_registered meta 0 || exit 1
# absolute: ctl runs from the test's working directory
cat >"$dir/cluster.env" <<EOF
daemon='$(readlink -f "$daemon")'
fuse='$(readlink -f "$fuse")'
kind='$kind'
addr='$addr'
meta_uri='$meta_uri'
EOF
for i in $(seq "$storage"); do
	start_storage "$i" 0 || exit 1
done
echo "cluster.sh: metadata service at $meta_uri, $storage storage daemons registered"

mount_one 1 || exit 1
export RDMAFS_MOUNT="$dir/mnt1" RDMAFS_MOUNT2=
if [ "$mounts" = 2 ]; then
	mount_one 2 || exit 1
	RDMAFS_MOUNT2="$dir/mnt2"
fi
export RDMAFS_CLUSTER_DIR="$dir" RDMAFS_CLUSTER_CTL="$ctl_self"
# for checks that also use the client core (fs-sparse)
export RDMAFS_CLUSTER_META="$meta_uri" RDMAFS_CLUSTER_SECRET="$dir/secret"
echo "cluster.sh: mounted on $RDMAFS_MOUNT${RDMAFS_MOUNT2:+ and $RDMAFS_MOUNT2}"

substitute "$@"
# In the background: bash runs a trap (meson's SIGTERM) only between
# commands, and `wait` returns at once on a signal.
timeout -k 10 "$timeout" "${cmd[@]}" &
cmd_pid=$!
wait "$cmd_pid"
status=$?
cmd_pid=
if [ $status -eq 124 ] || [ $status -eq 137 ]; then
	echo "cluster.sh: the command did not finish in $timeout s (hang?)" >&2
	status=1
fi
# the mount must have survived the command (its process: ctl remount may have replaced it)
for f in "$dir"/fuse*.pid; do
	pid=$(cat "$f")
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "cluster.sh: rdmafs-fuse (pid $pid) died during the test" >&2
		status=1
	fi
done
exit $status
