#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The cluster id keeps two clusters apart: a storage daemon of this cluster
# (cluster.sh's) pointed at another cluster's metadata service, with the same
# secret, is refused: it exits 1 saying why, the other cluster's map never
# lists it, and its data directory is unchanged; back with its own service it
# registers as before. rdmafsctl status shows the cluster id.
# Runs under tests/lib/cluster.sh --no-fuse (a metadata daemon and storage daemons).
# Usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test could not check.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
daemon=${1:?usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL}
ctl=${2:?usage: cluster-id.sh RDMAFS_DAEMON RDMAFSCTL}
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
ctl_json() { # URI ARGS...
	local uri=$1
	shift
	timeout 60 "$ctl" -m "$uri" -s "$secret" --json "$@"
}
cluster_of() { # URI -> the cluster id status prints
	ctl_json "$1" status | awk -F'"' '/"cluster_id":/ { print $4; exit }'
}
# a digest of the data directory: names, sizes and contents
digest() {
	(cd "$1" && find . -type f ! -name 'lock.mdb' -print0 | sort -z |
		xargs -0 sha256sum) | sha256sum
}

ours=$(cluster_of "$meta")
[[ $ours =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] ||
	check_fail "status --json shows no cluster id: '$ours'"
grep -qx "cluster $ours" "$victim_dir/cluster-id" ||
	check_fail "$victim's data directory did not record cluster $ours: $(cat "$victim_dir/cluster-id" 2>&1)"
echo "ok   this cluster is $ours, and $victim's data directory says so"

# another cluster: its own metadata service, the same secret
"$daemon" --data-dir "$work/other" --listen "$transport://127.0.0.1:0" --secret-file "$secret" \
	--port-file "$work/other.port" --name other-meta --foreground --metadata yes \
	</dev/null >"$work/other.log" 2>&1 &
other_pid=$!
for _ in $(seq 600); do
	[ -s "$work/other.port" ] && break
	kill -0 "$other_pid" 2>/dev/null || check_error "the second metadata service exited: $(cat "$work/other.log")"
	sleep 0.1
done
[ -s "$work/other.port" ] || check_error "the second metadata service did not start in 60 s"
other_uri=$transport://127.0.0.1:$(cat "$work/other.port")
theirs=$(cluster_of "$other_uri")
[ -n "$theirs" ] && [ "$theirs" != "$ours" ] ||
	check_fail "two clusters, one id: '$ours' and '$theirs'"
echo "ok   another cluster is $theirs"

# the victim, stopped, then pointed at the other cluster
"$RDMAFS_CLUSTER_CTL" ctl kill "${victim#storage}" TERM || check_error "stopping $victim"
before=$(digest "$victim_dir") || check_error "reading $victim_dir"
timeout 120 "$daemon" --data-dir "$victim_dir" --listen "$transport://127.0.0.1:0" \
	--secret-file "$secret" --name "$victim" --foreground --metadata no \
	--metadata-uri "$other_uri" </dev/null >"$work/victim.log" 2>&1
rc=$?
[ $rc -ne 124 ] || check_fail "$victim pointed at another cluster kept running for 120 s: $(tail -n 5 "$work/victim.log")"
[ $rc -eq 1 ] || check_fail "$victim pointed at another cluster exited $rc, not 1: $(tail -n 5 "$work/victim.log")"
grep -q "belongs to another cluster ($ours)" "$work/victim.log" ||
	check_fail "$victim did not say why it stopped: $(tail -n 5 "$work/victim.log")"
ctl_json "$other_uri" status | grep -q "\"name\": \"$victim\"" &&
	check_fail "the other cluster lists $victim: $(ctl_json "$other_uri" status)"
[ "$(digest "$victim_dir")" = "$before" ] || check_fail "$victim_dir changed while refused"
echo "ok   refused by the other cluster: $(grep -m 1 'refused this daemon' "$work/victim.log" | cut -c1-160)"

# back with its own service
"$RDMAFS_CLUSTER_CTL" ctl start "${victim#storage}" || check_fail "$victim does not register with its own cluster again"
echo "ok   $victim is back in its own cluster"
echo "pass"
