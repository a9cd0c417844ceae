#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# config.sh DAEMON CTL: config safety (issue 12, item 4).
#  - rdmafs-daemon --check-config FILE: "FILE: OK" and 0 for a good file,
#    creating nothing and binding nothing; every error, each with file:line
#    and the allowed range, and 1 for a bad one;
#  - a listen address that cannot be bound (port out of range, in use, not
#    this host's) stops the daemon before it creates its data directory;
#  - metadata = yes with metadata_uri is refused; metadata_uri alone registers
#    with that service and starts no second one;
#  - a secret file others may read is refused by the daemon and by a client
#    (rdmafsctl), as ssh refuses such a key; mode 0600 works;
#  - metrics_listen: a bad one named with file:line, a port in use refused at
#    start before the data directory, port 0 logged with the port bound.
# Starts its own single daemons on 127.0.0.1 (tcp), no mount.
set -u
daemon=$(readlink -f "$1") ctl=$(readlink -f "$2")
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
check_need python3 timeout

work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-config-test.XXXXXX") ||
	check_error "mktemp failed"
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	[ -n "${RDMAFS_TEST_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || check_error "cd $work"
(umask 077 && printf 'config-test-secret\n' >secret) || check_error "writing the secret"

# run NAME ARGS...: runs the daemon with a time limit; stdout in NAME.out,
# stderr in NAME.err, exit status in $got
run() {
	local name=$1
	shift
	timeout 60 "$daemon" "$@" >"$name.out" 2>"$name.err"
	got=$?
}

# said NAME: what the daemon printed, for the log of a failed check
said() {
	echo "  exit $got; stdout:" >&2
	sed 's/^/    /' "$1.out" >&2
	echo "  stderr:" >&2
	sed 's/^/    /' "$1.err" >&2
}

# expect_exit NAME STATUS: the last run exited STATUS
expect_exit() {
	[ "$got" -eq "$2" ] && return 0
	echo "  want exit $2" >&2
	said "$1"
	return 1
}

# expect_line NAME FIXED-STRING: stderr of NAME has that line (exactly)
expect_line() {
	grep -qxF -- "$2" "$1.err" && return 0
	echo "  stderr lacks the line: $2" >&2
	said "$1"
	return 1
}

# expect_log NAME "LEVEL: TEXT": stderr of NAME has that log line, after the
# time and "rdmafs-daemon[PID]: " every log line starts with
expect_log() {
	sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+[+-][0-9]{4} rdmafs-daemon\[[0-9]+\]: //' "$1.err" |
		grep -qxF -- "$2" && return 0
	echo "  stderr lacks the log line: TIME rdmafs-daemon[PID]: $2" >&2
	said "$1"
	return 1
}

# absent PATH: nothing was created there
absent() {
	[ ! -e "$1" ] && return 0
	echo "  $1 exists:" >&2
	ls -la "$1" >&2
	return 1
}

# start NAME ARGS...: a daemon on tcp://127.0.0.1 (any port) in data dir NAME,
# its port in $port once it serves; its log in NAME.log
start() {
	local name=$1 _
	shift
	"$daemon" --data-dir "$work/$name" --listen tcp://127.0.0.1:0 --port-file "$work/$name.port" \
		--name "$name" "$@" 2>"$work/$name.log" &
	pids+=($!)
	for _ in $(seq 600); do
		[ -s "$work/$name.port" ] && break
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.1
	done
	[ -s "$work/$name.port" ] || {
		cat "$work/$name.log" >&2
		return 1
	}
	port=$(cat "$work/$name.port")
}

# --- --check-config on a good file: OK, nothing created, nothing bound -------

cat >good.conf <<EOF || check_error "writing good.conf"
; a single-node daemon
[daemon]
data_dir = $work/good-data
listen = tcp://127.0.0.1:0
secret_file = $work/secret
workers = 2
host = server-7
rack = rack-2
EOF
good_ok() {
	run good --check-config good.conf
	expect_exit good 0 && grep -qxF "good.conf: OK" good.out && absent "$work/good-data"
}
check_run "--check-config good.conf: 'good.conf: OK', exit 0, no data directory made" good_ok
good_config_flag() {
	run good2 --config good.conf --workers 3 --check-config
	expect_exit good2 0 && grep -qxF "good.conf: OK" good2.out
}
check_run "--config good.conf --check-config (with a flag): OK" good_config_flag

# --- every error kind, each with file:line and what is allowed ---------------

long=$(printf 'x%.0s' $(seq 250))
cat >bad.conf <<EOF || check_error "writing bad.conf"
workers = 2
[daemon]
data_dir = $work/bad-data
listen = tcp://127.0.0.1:70000
secret_file = $work/secret
workers = 0
queue_depth = lots
max_chunk_size = 1000
lmdb_map_size = 5
log_level = loud
metadata = maybe
advertise = tcp://10.0.0.1:0
colour = blue
name =
name = $long
this line is not a setting
meta_workers = 300
reclaim_grace = 0
metadata_sync = sometimes
metadata_sync_ms = 5
replicas = 9
host = two words
rack =
[store]
path = /x
EOF
bad_lines=(
	"bad.conf:1: 'workers' comes before any section: put it under [daemon]"
	"bad.conf:4: listen = tcp://127.0.0.1:70000: must be rdma://, tcp:// or auto://HOST:PORT with PORT 0..65535 (0: any free port)"
	"bad.conf:6: workers = 0: must be 1..64"
	"bad.conf:7: queue_depth = lots: must be 1..65536"
	"bad.conf:8: max_chunk_size = 1000: must be a multiple of 4096 in 4096..67108864 (64 MiB)"
	"bad.conf:9: lmdb_map_size = 5: must be 1048576..1099511627776 (1 MiB..1 TiB)"
	"bad.conf:10: log_level = loud: must be debug, info, warning or error"
	"bad.conf:11: metadata = maybe: must be yes or no (true/false, on/off, 1/0)"
	"bad.conf:12: advertise = tcp://10.0.0.1:0: must be rdma://, tcp:// or auto://HOST:PORT with PORT 1..65535"
	"bad.conf:13: unknown key 'colour' in [daemon]"
	"bad.conf:14: name = : must not be empty"
	"bad.conf:15: line longer than 198 characters"
	"bad.conf:25: 'path' is in unknown section [store] (only [daemon] is known)"
	"bad.conf:16: syntax error: want key = value, [section] or a comment"
	"bad.conf:17: meta_workers = 300: must be 0..256"
	"bad.conf:18: reclaim_grace = 0: must be 1..3600"
	"bad.conf:19: metadata_sync = sometimes: must be always or batch"
	"bad.conf:20: metadata_sync_ms = 5: must be 10..60000"
	"bad.conf:21: replicas = 9: must be 1..4"
	"bad.conf:22: host = two words: must be 1..64 printable characters without spaces (daemons that give one host never hold two copies of a chunk)"
	"bad.conf:23: rack = : must not be empty"
	"rdmafs-daemon: --workers 65: must be 1..64"
	"rdmafs-daemon: nothing to listen on: set listen or --listen"
)
run bad --check-config bad.conf --workers 65
check_run "bad.conf: exit 1" expect_exit bad 1
for line in "${bad_lines[@]}"; do
	check_run "error line: $line" expect_line bad "$line"
done
every_error() {
	local n
	n=$(wc -l <bad.err)
	[ "$n" -eq ${#bad_lines[@]} ] && return 0
	echo "  $n lines on stderr, want ${#bad_lines[@]} (one per error)" >&2
	said bad
	return 1
}
check_run "one line per error, no more" every_error
check_run "bad.conf: no data directory made" absent "$work/bad-data"
missing() {
	run missing --check-config "$work/no-such.conf"
	expect_exit missing 1 && grep -qF "cannot open config file $work/no-such.conf" missing.err
}
check_run "a missing config file: exit 1, named" missing

# --- listen addresses are checked before the data directory is made ----------

# port out of range: refused at start too, nothing made
bad_port() {
	run badport --data-dir "$work/badport-data" --listen tcp://127.0.0.1:70000 \
		--secret-file "$work/secret"
	expect_exit badport 1 &&
		expect_line badport "rdmafs-daemon: --listen tcp://127.0.0.1:70000: must be rdma://, tcp:// or auto://HOST:PORT with PORT 0..65535 (0: any free port)" &&
		absent "$work/badport-data"
}
check_run "port 70000: exit 1, no data directory" bad_port
# an address this host does not have (TEST-NET-1)
not_here() {
	run nothere --data-dir "$work/nothere-data" --listen tcp://192.0.2.1:7471 \
		--secret-file "$work/secret"
	expect_exit nothere 1 && grep -qF "192.0.2.1:7471: cannot bind" nothere.err &&
		absent "$work/nothere-data"
}
check_run "listen on 192.0.2.1 (not this host's): exit 1, no data directory" not_here

# a daemon with mode 0600 secret serves; a second one on its port is refused
start meta --secret-file "$work/secret" ||
	check_fail "a daemon with a mode 0600 secret did not start (log above)"
meta_port=$port
echo "ok: a daemon with a mode 0600 secret file serves on tcp://127.0.0.1:$meta_port"
in_use() {
	run inuse --data-dir "$work/inuse-data" --listen "tcp://127.0.0.1:$meta_port" \
		--secret-file "$work/secret"
	expect_exit inuse 1 &&
		expect_line inuse "rdmafs-daemon: --listen tcp://127.0.0.1:$meta_port: cannot bind: Address already in use (another program, or another rdmafs-daemon, listens there)" &&
		absent "$work/inuse-data"
}
check_run "listen on a port in use: exit 1, no data directory" in_use
in_use_check() {
	run inusecheck --check-config --data-dir "$work/inuse-data" \
		--listen "tcp://127.0.0.1:$meta_port" --secret-file "$work/secret"
	expect_exit inusecheck 0 && grep -qxF "command line: OK" inusecheck.out
}
check_run "--check-config binds no port: the same address in use is OK" in_use_check

# --- metadata_uri never starts a second metadata service ----------------------

cat >conflict.conf <<EOF || check_error "writing conflict.conf"
[daemon]
data_dir = $work/conflict-data
listen = tcp://127.0.0.1:0
secret_file = $work/secret
metadata = yes
metadata_uri = tcp://127.0.0.1:$meta_port
EOF
conflict_line="conflict.conf:5: metadata = yes conflicts with metadata_uri = tcp://127.0.0.1:$meta_port (conflict.conf:6): a daemon that hosts the metadata service registers with its own; set metadata = no to register with tcp://127.0.0.1:$meta_port, or remove metadata_uri to host the service here"
conflict_check() {
	run conflict --check-config conflict.conf
	expect_exit conflict 1 && expect_line conflict "$conflict_line"
}
check_run "metadata = yes with metadata_uri: --check-config exit 1, both lines named" \
	conflict_check
conflict_start() {
	run conflict2 --config conflict.conf
	expect_exit conflict2 1 && expect_line conflict2 "$conflict_line" &&
		absent "$work/conflict-data"
}
check_run "metadata = yes with metadata_uri: the daemon refuses to start" conflict_start
conflict_flag() {
	run conflict3 --check-config --metadata yes --metadata-uri "tcp://127.0.0.1:$meta_port" \
		--data-dir "$work/conflict-data" --listen tcp://127.0.0.1:0 --secret-file "$work/secret"
	expect_exit conflict3 1 && grep -qF "rdmafs-daemon: --metadata yes conflicts with --metadata-uri" conflict3.err
}
check_run "--metadata yes --metadata-uri: refused too" conflict_flag
# metadata_uri alone: this daemon registers there and hosts no service
start storage --secret-file "$work/secret" --metadata-uri "tcp://127.0.0.1:$meta_port" ||
	check_fail "a daemon with only --metadata-uri did not start (log above)"
registered() {
	local _
	for _ in $(seq 300); do
		grep -qF "registered with the metadata service at tcp://127.0.0.1:$meta_port" \
			"$work/storage.log" && break
		sleep 0.1
	done
	grep -qF "registered with the metadata service at tcp://127.0.0.1:$meta_port" \
		"$work/storage.log" && absent "$work/storage/fsmeta" && return 0
	cat "$work/storage.log" >&2
	return 1
}
check_run "metadata_uri alone: registers there, no metadata store of its own" registered

# --- metrics_listen: checked as listen is -------------------------------------

cat >metrics-bad.conf <<EOF || check_error "writing metrics-bad.conf"
[daemon]
data_dir = $work/metrics-data
listen = tcp://127.0.0.1:0
secret_file = $work/secret
metrics_listen = 127.0.0.1:99999
metrics_listen = tcp://127.0.0.1:9100
EOF
metrics_why="must be HOST:PORT ([ADDR]:PORT for IPv6) with PORT 0..65535 (0: any free port), or empty for no metrics"
metrics_bad() {
	run metricsbad --check-config metrics-bad.conf
	expect_exit metricsbad 1 &&
		expect_line metricsbad "metrics-bad.conf:5: metrics_listen = 127.0.0.1:99999: $metrics_why" &&
		expect_line metricsbad "metrics-bad.conf:6: metrics_listen = tcp://127.0.0.1:9100: $metrics_why" &&
		absent "$work/metrics-data"
}
check_run "bad metrics_listen: --check-config names file:line and what is allowed" metrics_bad
metrics_off() {
	run metricsoff --check-config --data-dir "$work/metrics-data" \
		--listen tcp://127.0.0.1:0 --secret-file "$work/secret" --metrics-listen ""
	expect_exit metricsoff 0 && grep -qxF "command line: OK" metricsoff.out
}
check_run "--metrics-listen '' (off): OK" metrics_off
# a daemon serving metrics logs where; a second one on its metrics port is refused
start metrics --secret-file "$work/secret" --metadata-uri "tcp://127.0.0.1:$meta_port" \
	--metrics-listen 127.0.0.1:0 --metrics-port-file "$work/metrics.metrics-port" ||
	check_fail "a daemon with --metrics-listen 127.0.0.1:0 did not start (log above)"
metrics_port=$(cat "$work/metrics.metrics-port")
metrics_logged() {
	grep -qE "rdmafs-daemon\[[0-9]+\]: info: metrics at http://127\.0\.0\.1:$metrics_port/metrics$" \
		"$work/metrics.log" && return 0
	cat "$work/metrics.log" >&2
	return 1
}
check_run "port 0: 'metrics at http://127.0.0.1:PORT/metrics' with the port bound" metrics_logged
metrics_in_use() {
	run metricsinuse --data-dir "$work/metrics-data" --listen tcp://127.0.0.1:0 \
		--secret-file "$work/secret" --metrics-listen "127.0.0.1:$metrics_port"
	expect_exit metricsinuse 1 &&
		expect_line metricsinuse "rdmafs-daemon: --metrics-listen 127.0.0.1:$metrics_port: cannot bind: Address already in use (another program, or another rdmafs-daemon, listens there)" &&
		absent "$work/metrics-data"
}
check_run "metrics port in use: exit 1 at start, said, no data directory" metrics_in_use

# --- secret file permissions --------------------------------------------------

{ cp secret open-secret && chmod 644 open-secret; } || check_error "making open-secret"
open_daemon() {
	run opendaemon --data-dir "$work/open-data" --listen tcp://127.0.0.1:0 \
		--secret-file "$work/open-secret"
	expect_exit opendaemon 1 &&
		expect_log opendaemon "error: secret file $work/open-secret is accessible by others (mode 0644): chmod 600 $work/open-secret" &&
		absent "$work/open-data"
}
check_run "secret mode 0644: the daemon refuses it (as ssh), no data directory" open_daemon
open_check() {
	run opencheck --check-config --data-dir "$work/open-data" --listen tcp://127.0.0.1:0 \
		--secret-file "$work/open-secret"
	expect_exit opencheck 1 && grep -qF "accessible by others (mode 0644): chmod 600" opencheck.err
}
check_run "secret mode 0644: --check-config reports it" open_check
chmod 640 open-secret || check_error "chmod 640"
group_check() {
	run groupcheck --check-config --data-dir "$work/open-data" --listen tcp://127.0.0.1:0 \
		--secret-file "$work/open-secret"
	expect_exit groupcheck 1 &&
		grep -qF "accessible by its group (mode 0640): chmod 600" groupcheck.err
}
check_run "secret mode 0640: refused too" group_check
chmod 644 open-secret || check_error "chmod 644"
open_client() {
	timeout 60 "$ctl" -m "tcp://127.0.0.1:$meta_port" -s "$work/open-secret" daemons \
		>ctl-open.out 2>ctl-open.err
	got=$?
	expect_exit ctl-open 2 &&
		grep -qF "secret file $work/open-secret is accessible by others (mode 0644): chmod 600 $work/open-secret" ctl-open.err
}
check_run "secret mode 0644: rdmafsctl refuses it, exit 2" open_client
good_client() {
	timeout 60 "$ctl" -m "tcp://127.0.0.1:$meta_port" -s "$work/secret" daemons \
		>ctl-good.out 2>ctl-good.err
	got=$?
	expect_exit ctl-good 0 && cat ctl-good.out
}
check_run "secret mode 0600: rdmafsctl connects and lists the daemons" good_client

check_summary
echo "config: --check-config, file:line errors, listen checked before the data directory, metadata_uri, secret modes"
