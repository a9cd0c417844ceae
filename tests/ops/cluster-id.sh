#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The cluster id keeps two clusters apart: a storage daemon of this cluster
# (cluster.sh's) pointed at another cluster's metadata service, with the same
# secret, is refused: it says why and keeps asking, the other cluster's map
# never lists it, and its data directory is unchanged; back with its own
# service it registers as before. rdmafsctl status shows the cluster id. A mount whose
# metadata service's address comes to serve another cluster refuses it
# (EIO, never the other cluster's files) and works again when its own is back.
# Runs under tests/lib/cluster.sh (a metadata daemon, storage daemons, a mount).
# Usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL MOUNT
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test could not check.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
daemon=${1:?usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL}
ctl=${2:?usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL MOUNT}
mnt=${3:?usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL MOUNT}
if [ -z "${RDMAFS_CLUSTER_DIR:-}" ] || [ -z "${RDMAFS_CLUSTER_CTL:-}" ]; then
	echo "SKIP: cluster-id.sh needs an rdmafs cluster started by cluster.sh"
	exit 77
fi
check_need awk grep timeout find sort sha256sum
dir=$RDMAFS_CLUSTER_DIR
secret=$dir/secret
meta=$(awk '$1 == "meta" { print $2 }' "$dir/daemons")
read -r victim _ victim_dir < <(awk '$1 == "storage1"' "$dir/daemons")
[ -n "$meta" ] && [ -n "${victim_dir:-}" ] || check_error "cannot read $dir/daemons"
transport=${meta%%://*}
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-clusterid.XXXXXX") || check_error "mktemp"
other_pid=
cleanup() {
	[ -n "$other_pid" ] && kill "$other_pid" 2>/dev/null && wait "$other_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
# start_meta NAME DATA_DIR LISTEN: a metadata service of its own; sets other_pid and started_uri
start_meta() {
	local name=$1 data=$2 listen=$3
	rm -f "$work/$name.port"
	"$daemon" --data-dir "$data" --listen "$listen" --secret-file "$secret" \
		--port-file "$work/$name.port" --name "$name" --foreground --metadata yes \
		</dev/null >"$work/$name.log" 2>&1 &
	other_pid=$!
	for _ in $(seq 600); do
		[ -s "$work/$name.port" ] && break
		kill -0 "$other_pid" 2>/dev/null ||
			check_error "metadata service $name exited: $(cat "$work/$name.log")"
		sleep 0.1
	done
	[ -s "$work/$name.port" ] || check_error "metadata service $name did not start in 60 s"
	started_uri=$transport://127.0.0.1:$(cat "$work/$name.port")
}
ctl_json() { # URI ARGS...
	local uri=$1
	shift
	timeout 60 "$ctl" -m "$uri" -s "$secret" --json "$@"
}
cluster_of() { # URI -> the cluster id status prints
	ctl_json "$1" status | awk -F'"' '/"cluster_id":/ { print $4; exit }'
}
# a digest of the data directory: names, sizes and contents; not what every
# start rewrites, LMDB's lock.mdb and the index guard's flushed.snapshot (it
# records that the store is open on this boot, storage-daemon/meta/lmdb_guard.h)
digest() {
	(cd "$1" && find . -type f ! -name 'lock.mdb' ! -name 'flushed.snapshot' -print0 | sort -z |
		xargs -0 sha256sum) | sha256sum
}

ours=$(cluster_of "$meta")
[[ $ours =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] ||
	check_fail "status --json shows no cluster id: '$ours'"
grep -qx "cluster $ours" "$victim_dir/cluster-id" ||
	check_fail "$victim's data directory did not record cluster $ours: $(cat "$victim_dir/cluster-id" 2>&1)"
echo "ok   this cluster is $ours, and $victim's data directory says so"

# another cluster: its own metadata service, the same secret
start_meta other "$work/other" "$transport://127.0.0.1:0"
other_uri=$started_uri
theirs=$(cluster_of "$other_uri")
[ -n "$theirs" ] && [ "$theirs" != "$ours" ] ||
	check_fail "two clusters, one id: '$ours' and '$theirs'"
echo "ok   another cluster is $theirs"

# the victim, stopped, then pointed at the other cluster
"$RDMAFS_CLUSTER_CTL" ctl kill "${victim#storage}" TERM || check_error "stopping $victim"
before=$(digest "$victim_dir") || check_error "reading $victim_dir"
"$daemon" --data-dir "$victim_dir" --listen "$transport://127.0.0.1:0" \
	--secret-file "$secret" --name "$victim" --foreground --metadata no \
	--metadata-uri "$other_uri" </dev/null >"$work/victim.log" 2>&1 &
victim_pid=$!
for _ in $(seq 1200); do
	grep -q "refused this daemon" "$work/victim.log" && break
	kill -0 "$victim_pid" 2>/dev/null || break
	sleep 0.1
done
grep -q "belongs to another cluster ($ours)" "$work/victim.log" ||
	check_fail "$victim pointed at another cluster did not say it was refused: $(tail -n 5 "$work/victim.log")"
kill -0 "$victim_pid" 2>/dev/null ||
	check_fail "$victim exited when refused (it must keep asking): $(tail -n 5 "$work/victim.log")"
ctl_json "$other_uri" status | grep -q "\"name\": \"$victim\"" &&
	check_fail "the other cluster lists $victim: $(ctl_json "$other_uri" status)"
kill "$victim_pid" && wait "$victim_pid" 2>/dev/null
[ "$(digest "$victim_dir")" = "$before" ] || check_fail "$victim_dir changed while refused"
echo "ok   refused by the other cluster, still running: $(grep -m 1 'refused this daemon' "$work/victim.log" | cut -c1-160)"

# back with its own service
"$RDMAFS_CLUSTER_CTL" ctl start "${victim#storage}" || check_fail "$victim does not register with its own cluster again"
echo "ok   $victim is back in its own cluster"

# the mount: its metadata service's address comes to serve the other cluster
printf 'ours\n' >"$mnt/cluster-id-probe" || check_fail "writing through $mnt"
kill "$other_pid" && wait "$other_pid" 2>/dev/null
other_pid=
"$RDMAFS_CLUSTER_CTL" ctl kill meta TERM || check_error "stopping the metadata daemon"
start_meta intruder "$work/other" "$meta"
out=$(timeout 120 ls "$mnt" 2>&1)
rc=$?
[ $rc -ne 124 ] || check_fail "ls hung with another cluster's service at $meta"
[ $rc -ne 0 ] || check_fail "the mount listed another cluster's root: $out"
grep -q "Input/output error" <<<"$out" || check_fail "ls: expected EIO, got: $out"
grep -q "belongs to cluster $theirs, not $ours: refusing it" "$RDMAFS_CLUSTER_DIR"/fuse*.log ||
	check_fail "the mount did not log why: $(tail -n 5 "$RDMAFS_CLUSTER_DIR"/fuse*.log 2>&1)"
echo "ok   the mount refuses another cluster's service at its address: $out"
kill "$other_pid" && wait "$other_pid" 2>/dev/null
other_pid=
"$RDMAFS_CLUSTER_CTL" ctl start meta || check_fail "restarting our metadata daemon"
for _ in $(seq 120); do
	grep -qx ours "$mnt/cluster-id-probe" 2>/dev/null && break
	sleep 1
done
grep -qx ours "$mnt/cluster-id-probe" || check_fail "the mount did not come back to its own cluster in 120 s"
echo "ok   the mount works again with its own service"
echo "pass"
