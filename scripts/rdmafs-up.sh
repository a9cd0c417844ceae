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
# RDMAFS_BUILD (default ./build), RDMAFS_SKIP_DEPS=1 to skip the package
# installation.
set -euo pipefail

top=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
home=${RDMAFS_HOME:-/var/lib/rdmafs-local}
mnt=${RDMAFS_MOUNT:-/mnt/rdmafs}
port=${RDMAFS_PORT:-7471}
build=${RDMAFS_BUILD:-$top/build}
daemon=$build/storage-daemon/rdmafs-daemon
fuse=$build/fuse-client/rdmafs-fuse
pidfile=$home/daemon.pid
meta_uri=tcp://127.0.0.1:$port
# How long the daemon gets to come up and register itself before we give up.
readonly START_TIMEOUT=30

say() { printf 'rdmafs-up: %s\n' "$*"; }
die() { printf 'rdmafs-up: error: %s\n' "$*" >&2; exit 1; }

running() {
	[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

mounted() {
	grep -qs " $mnt fuse" /proc/mounts
}

down() {
	if mounted; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
		say "unmounted $mnt"
	fi
	if running; then
		local pid
		pid=$(cat "$pidfile")
		kill -TERM "$pid"
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
		say "daemon stopped (data kept in $home/data)"
	fi
	rm -f "$pidfile"
}

status() {
	if running; then
		say "daemon running (pid $(cat "$pidfile")), metadata at $meta_uri"
	else
		say "daemon not running"
	fi
	if mounted; then
		say "mounted on $mnt"
		df -h "$mnt" | tail -n 1
	else
		say "not mounted"
	fi
}

registered() {
	tail -c "+$log_from" "$home/daemon.log" | grep -qs "registered with the metadata service"
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
	[ -x "$daemon" ] && [ -x "$fuse" ] || die "the build did not produce $daemon and $fuse"

	mkdir -p "$home/data" "$mnt"
	chmod 0700 "$home"
	if [ ! -s "$home/secret" ]; then
		# The cluster secret: every client and daemon proves it knows it (HELLO).
		head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$home/secret"
		chmod 0600 "$home/secret"
	fi
	touch "$home/daemon.log"
	# Only what this start writes counts: the log keeps earlier runs too.
	log_from=$(($(stat -c %s "$home/daemon.log") + 1))
	if running; then
		say "daemon already running (pid $(cat "$pidfile"))"
		log_from=1
	else
		say "starting rdmafs-daemon (metadata + storage) on $meta_uri"
		ulimit -l unlimited 2>/dev/null || true
		"$daemon" --data-dir "$home/data" --listen "$meta_uri" \
			--secret-file "$home/secret" --name "$(hostname)-local" \
			>>"$home/daemon.log" 2>&1 &
		echo $! >"$pidfile"
	fi
	# Ready once the storage daemon has registered with the metadata service.
	for _ in $(seq 1 $((START_TIMEOUT * 10))); do
		running || die "the daemon exited; see $home/daemon.log"
		registered && break
		sleep 0.1
	done
	registered || die "the daemon did not come up in ${START_TIMEOUT}s; see $home/daemon.log"
	if mounted; then
		say "already mounted on $mnt"
	else
		"$fuse" -o "meta=$meta_uri,secret=$home/secret,allow_other" "$mnt" ||
			die "mount failed"
		say "mounted on $mnt"
	fi
	status
	say "stop with: $0 down"
}

case "${1:-up}" in
up) up ;;
down | stop) down ;;
status) status ;;
*) die "usage: $0 [up|status|down]" ;;
esac
