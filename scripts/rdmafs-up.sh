#!/usr/bin/env bash
# The one-command start: on a fresh Debian 12 machine, as root, installs every
# dependency, builds rdmafs, starts a single-node filesystem (one rdmafs-daemon
# serving metadata and data on loopback, data under a local directory) and
# mounts it. No configuration is needed.
#
#   scripts/rdmafs-up.sh            # install, build, start, mount
#   scripts/rdmafs-up.sh status     # is it running, where is it mounted
#   scripts/rdmafs-up.sh down       # unmount and stop (the data stays)
#
# Environment: RDMAFS_HOME (default /var/lib/rdmafs-local: data, secret, logs),
# RDMAFS_MOUNT (default /mnt/rdmafs), RDMAFS_PORT (default 7471),
# RDMAFS_METRICS_PORT (default 9471: Prometheus metrics at
# http://127.0.0.1:PORT/metrics, docs/metrics.md),
# RDMAFS_BUILD (default ./build), RDMAFS_SKIP_DEPS=1 to skip the package
# installation.
#
# The daemon and the mount are started, checked and stopped by
# tests/lib/cluster.sh, the harness every test suite uses: the daemon is up
# once the metadata service lists it registered and it answers, the mount
# once the kernel lists it and its statfs answers.
set -euo pipefail

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
home=${RDMAFS_HOME:-/var/lib/rdmafs-local}
mnt=${RDMAFS_MOUNT:-/mnt/rdmafs}
port=${RDMAFS_PORT:-7471}
metrics_port=${RDMAFS_METRICS_PORT:-9471}
build=${RDMAFS_BUILD:-$top/build}
cluster=$top/tests/lib/cluster.sh

say() { printf 'rdmafs-up: %s\n' "$*"; }
die() { printf 'rdmafs-up: error: %s\n' "$*" >&2; exit 1; }

# rdmafs-up.sh before the harness kept its daemon's pid in daemon.pid: stop
# that daemon (the one running on $home/data), once.
stop_old_daemon() {
	local pid
	pid=$(cat "$home/daemon.pid" 2>/dev/null) || return 0
	if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$home/data"; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
		kill -TERM "$pid"
		while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
		say "stopped the daemon an earlier rdmafs-up.sh started (pid $pid)"
	fi
	rm -f "$home/daemon.pid"
}

down() {
	stop_old_daemon
	if [ -f "$home/cluster.env" ]; then
		"$cluster" down --dir "$home" | sed 's/^cluster.sh: /rdmafs-up: /'
		say "stopped (data kept in $home/data)"
	else
		say "nothing to stop in $home"
	fi
}

status() {
	if [ ! -f "$home/cluster.env" ]; then
		say "not set up in $home: start it with $0"
		return 0
	fi
	"$cluster" status --dir "$home" | sed 's/^/rdmafs-up: /' || true
	if grep -qs " $mnt fuse" /proc/mounts; then
		df -h "$mnt" | tail -n 1
	fi
}

up() {
	[ "$(id -u)" -eq 0 ] || die "run as root (packages, /dev/fuse, memlock for RDMA)"
	if [ "${RDMAFS_SKIP_DEPS:-0}" != 1 ]; then
		say "installing dependencies"
		"$top/scripts/install-deps.sh"
	fi
	say "building in $build"
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" -Dbuildtype=release >/dev/null
	fi
	ninja -C "$build" >/dev/null
	mkdir -p "$home" "$mnt"
	chmod 0700 "$home"
	stop_old_daemon
	say "starting rdmafs-daemon (metadata + storage) on tcp://127.0.0.1:$port"
	# the cluster secret (every client and daemon proves it knows it) is made
	# once, in $home/secret; the data lives in $home/data
	"$cluster" up --build "$build" --dir "$home" --transport tcp --addr 127.0.0.1 \
		--port "$port" --metrics-port "$metrics_port" --storage 0 --meta-data "$home/data" --mount "$mnt" |
		sed 's/^cluster.sh: /rdmafs-up: /' ||
		die "the filesystem did not come up (logs in $home)"
	status
	say "stop with: $0 down"
}

case "${1:-up}" in
up) up ;;
down | stop) down ;;
status) status ;;
*) die "usage: $0 [up|status|down]" ;;
esac
