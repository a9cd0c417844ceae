#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# mount-metrics.sh MOUNT FUSE CHECK: the mount's own Prometheus /metrics,
# read with Prometheus' parser. Runs inside tests/lib/cluster.sh --metrics
# (the mount serves metrics=ADDR:0, its port in fuse1.metrics-port):
#
#  1. a malformed metrics= is refused before anything is mounted;
#  2. file work on the mount (mkdir, create, 4 MiB written and fsynced,
#     read back, a listing, a name that is not there, rename, unlink), then
#     CHECK (mount_metrics_check.py) scrapes: every family with its type,
#     the FUSE operations and RPCs done counted, ENOENT of the lookup, bytes,
#     connections, the cluster map, histograms cumulative with +Inf == _count;
#  3. a storage daemon holding chunks of a file is killed (-9): reading the
#     file fails; it is restarted and the file reads again; CHECK scrapes
#     again: the failures (failed connects or RPC errors to storage, the read's
#     error) and the reconnection are counted, and no counter went down.
# No timing is asserted: a loaded machine only makes it slower.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"

mnt=${1:?usage: mount-metrics.sh MOUNT FUSE CHECK}
fuse=$(readlink -f "$2") checker=$(readlink -f "$3")
dir=${RDMAFS_CLUSTER_DIR:?run under tests/lib/cluster.sh --metrics}
ctl=${RDMAFS_CLUSTER_CTL:?run under tests/lib/cluster.sh --metrics}
addr=$(. "$dir/cluster.env" && echo "$addr")
transport=$(. "$dir/cluster.env" && echo "$transport")
MIB=$((1024 * 1024))

python=''
for p in python3 /usr/bin/python3; do
	if "$p" -c 'import prometheus_client' 2>/dev/null; then
		python=$p
		break
	fi
done
[ -n "$python" ] || check_error "no python3 with prometheus_client (package python3-prometheus-client)"
check_need cmp head stat timeout

port=$(cat "$dir/fuse1.metrics-port" 2>/dev/null) ||
	check_fail "the mount wrote no metrics port file (metrics_port_file=$dir/fuse1.metrics-port)"
case $addr in
*:*) url="http://[$addr]:$port/metrics" ;;
*) url="http://$addr:$port/metrics" ;;
esac
grep -q "info: metrics at $url\$" "$dir/fuse1.log" ||
	check_fail "the mount's log does not say 'metrics at $url'"
echo "ok: the mount logs metrics at $url"
work=$(mktemp -d "$dir/mount-metrics.XXXXXX") || check_error "mktemp in $dir"

# 1. a malformed address is refused before mounting, saying what it wants
bad() {
	mkdir -p "$work/badmnt" || return 99
	! timeout 60 "$fuse" -f -o "meta=$RDMAFS_CLUSTER_META,secret=$RDMAFS_CLUSTER_SECRET,metrics=nonsense" \
		"$work/badmnt" 2>"$work/bad.err" && grep -q "metrics=nonsense: must be HOST:PORT" "$work/bad.err"
}
check_run "metrics=nonsense is refused before mounting" bad

# 2. file work
head -c $((4 * MIB + 4321)) /dev/urandom >"$work/A" || check_error "making A's reference"
d=$mnt/mount-metrics
work_on_mount() {
	mkdir "$d" &&
		timeout 120 dd if="$work/A" of="$d/A" bs=1M conv=fsync status=none &&
		cmp "$d/A" "$work/A" &&
		ls -l "$d" >/dev/null &&
		! stat "$d/no-such-name" 2>/dev/null &&
		echo x >"$d/B" && mv "$d/B" "$d/C" && rm "$d/C" &&
		dir_copies
}
# The directory's attributes right after a create and an unlink of this
# mount's, in one process, answered from the copies those replies left (for
# attr_timeout, 1 s): checked where each stat came within 0.5 s of its change.
dir_copies() {
	"$python" - "$d" "$url" <<'PY'
import os, re, sys, time, urllib.request
d, url = sys.argv[1], sys.argv[2]
def hits():
    text = urllib.request.urlopen(url, timeout=60).read().decode()
    m = re.search(r"^rdmafs_client_dir_attr_hits_total (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1
before = hits()
t = time.monotonic(); open(d + "/D", "w").close(); os.stat(d); gap1 = time.monotonic() - t
t = time.monotonic(); os.unlink(d + "/D"); os.stat(d); gap2 = time.monotonic() - t
got = hits() - before
if max(gap1, gap2) >= 0.5:
    print(f"directory copies not checked: a change and its stat took {max(gap1, gap2):.2f} s")
    sys.exit(0)
print(f"directory GETATTRs answered from the copies after a create and an unlink: {got:.0f}")
sys.exit(0 if got >= 2 else 1)
PY
}
check_run "file work on the mount" work_on_mount
"$python" "$checker" work "$url" "$mnt" "$work/work.json" "$((4 * MIB + 4321))"
rc=$?
[ $rc -eq 0 ] || { check_summary; exit $rc; }

# 3. a storage daemon holding chunks of A dies and comes back
ino=$(stat -c %i "$d/A") || check_fail "stat A"
# A storage daemon (not the metadata service's own) that holds a chunk of A.
find_victim() {
	"$ctl" ctl holders "$ino" | head -n 1
}
# Placement hashes this run's random uuids: A's five chunks may all fall on
# the metadata service's daemon. A grows a chunk at a time until one does not.
victim=$(find_victim)
for _ in $(seq 32); do
	[ -n "$victim" ] && break
	{ head -c "$MIB" /dev/urandom >"$work/more" && cat "$work/more" >>"$work/A"; } ||
		check_error "growing A's reference by a chunk"
	timeout 120 dd if="$work/more" of="$d/A" bs=1M oflag=append conv=notrunc,fsync status=none ||
		check_fail "appending a chunk to A on the mount"
	victim=$(find_victim)
done
[ -n "$victim" ] || check_fail "no storage daemon holds any of 37 chunks of A: is data striped?"
"$ctl" ctl kill "$victim" KILL || check_error "cannot kill storage daemon $victim"
echo "killed storage daemon $victim, which holds chunks of A"
read_fails() {
	! timeout 300 cat "$d/A" >/dev/null 2>"$work/read.err"
}
check_run "reading A with storage daemon $victim down fails" read_fails
"$ctl" ctl start "$victim" || check_error "cannot restart storage daemon $victim"
echo "restarted storage daemon $victim"
# the mount retries after a backoff: wait for a read that works, bounded only
# against a hang
reads_again() {
	local _
	for _ in $(seq 120); do
		check_cmp "$d/A" "$work/A" 120 && return 0
		[ $? -eq 1 ] && return 1
		sleep 1
	done
	return 1
}
check_run "A reads again once storage daemon $victim is back" reads_again
"$python" "$checker" restart "$url" "$mnt" "$work/work.json" "$((4 * MIB + 4321))"
rc=$?
timeout 60 rm -rf "$d"
check_summary
[ $rc -eq 0 ] || exit $rc
echo "mount-metrics: the mount's /metrics parsed by Prometheus' parser, operations, RPCs, failures and reconnects counted ($transport)"
