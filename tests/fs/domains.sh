#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Failure domains (issue 11, docs/replication.md) on cluster.sh's 4 daemons
# declared as two hosts, started with
#
#   cluster.sh --daemon-hosts "hostA hostA hostB hostB" -- domains.sh %MOUNT%
#
# (the metadata service's daemon and storage 1 on hostA, storage 2 and 3 on
# hostB):
# - a file in a directory of 3 copies gets 2, as many as there are hosts
#   (its own rdmafs.replicas says so), and each chunk has one copy on each
#   host;
# - `rdmafsctl status` shows each daemon's host, and --json has it;
# - a rebalance finds nothing to move (a file of one copy keeps no domains);
# - with both daemons of hostB killed (a host lost), every byte reads back;
# - a drain of storage 1 keeps a copy of each chunk on each host: then, with
#   hostB's daemons killed again, the metadata service's daemon alone holds
#   every chunk.
# Usage: domains.sh DIR
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test itself could not
# check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: domains.sh DIR}
check_cluster domains.sh
ctl=$RDMAFS_CLUSTER_CTL
MIB=$((1024 * 1024))
check_need setfattr getfattr stat head dd seq
rdmafsctl=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$rdmafsctl")
[ -x "$rdmafsctl" ] || check_error "no rdmafsctl in cluster.env"
declared=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "${daemon_hosts:-}")
[ "$declared" = "hostA hostA hostB hostB" ] ||
	check_error "domains.sh needs cluster.sh --daemon-hosts \"hostA hostA hostB hostB\" (got '$declared')"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/domains.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
trap 'rm -rf "$local_dir"' EXIT
size=$((12 * MIB + 5))
chunks=13

# every chunk of inode INO on one daemon of hostA (meta, 1) and one of hostB (2, 3)
check_spread() {
	local what=$1 ino=$2 index h
	for index in $(seq 0 $((chunks - 1))); do
		h=$(check_holders "$ino" "$index" meta 1 2 3)
		case $h in
		"meta 2 " | "meta 3 " | "1 2 " | "1 3 ") ;;
		*) check_fail "$what: chunk $index is on daemons '$h', want one on each host" ;;
		esac
	done
}

# 1. as many copies as hosts, one on each
mkdir "$mnt/r" || check_fail "mkdir r"
setfattr -n rdmafs.replicas -v 3 "$mnt/r" || check_fail "setfattr rdmafs.replicas 3"
head -c "$size" /dev/urandom >"$local_dir/f" || check_error "making f's reference"
dd if="$local_dir/f" of="$mnt/r/f" bs=1M conv=fsync status=none || check_fail "writing f"
dd if="$local_dir/f" of="$mnt/one" bs=1M conv=fsync status=none || check_fail "writing one (1 copy)"
got=$(getfattr --absolute-names --only-values -n rdmafs.replicas "$mnt/r/f" 2>&1)
[ "$got" = 2 ] || check_fail "f in a directory of 3 copies on 2 hosts has '$got' copies, want 2"
ino=$(stat -c %i "$mnt/r/f") || check_fail "stat f"
check_spread "f" "$ino"
echo "domains: a file of 3 copies asked on 2 hosts has 2, one on each host"

# 2. status shows the hosts
"$rdmafsctl" status >"$local_dir/status" 2>&1
[ "$(grep -c "(host hostA: copies of a chunk never share a host)" "$local_dir/status")" = 2 ] ||
	check_fail "status does not show hostA for 2 daemons: $(cat "$local_dir/status")"
[ "$(grep -c "(host hostB: copies of a chunk never share a host)" "$local_dir/status")" = 2 ] ||
	check_fail "status does not show hostB for 2 daemons: $(cat "$local_dir/status")"
"$rdmafsctl" status --json >"$local_dir/status.json" 2>&1
[ "$(grep -o '"host": *"hostB"' "$local_dir/status.json" | wc -l)" = 2 ] ||
	check_fail "status --json does not give hostB for 2 daemons: $(cat "$local_dir/status.json")"
echo "domains: status shows each daemon's host"
# a rebalance needs every copy in place: a forward refused while the daemons' maps
# settled at the start is copied within a heartbeat or two
check_all_up "$rdmafsctl" 4 90 "before the rebalance" "$local_dir/status"
"$rdmafsctl" rebalance >"$local_dir/rebalance" 2>&1 ||
	check_fail "rebalance exited $?: $(cat "$local_dir/rebalance")"
grep -q " 0 moved " "$local_dir/rebalance" ||
	check_fail "a rebalance of files where placement put them moved some: $(cat "$local_dir/rebalance")"
echo "domains: a rebalance finds nothing to move"

# hostB lost (storage 2 and 3 killed): f reads back whole from hostA (WHAT says when)
without_hostB() {
	local i
	for i in 2 3; do
		"$ctl" ctl kill "$i" || check_error "killing daemon $i"
	done
	"$ctl" ctl remount 1 || check_error "remounting (nothing cached)"
	check_same "$mnt/r/f" "$local_dir/f" "f, $1, with hostB's daemons killed"
	for i in 2 3; do
		"$ctl" ctl start "$i" || check_error "restarting daemon $i"
	done
}

# 3. hostB lost: every byte reads back from hostA
without_hostB "as written"
check_all_up "$rdmafsctl" 4 90 "hostB's daemons restarted" "$local_dir/status"
echo "domains: with a whole host lost, every byte read back"

# 4. a drain of storage 1 keeps a copy on each host: the metadata daemon then has every chunk
victim=$("$ctl" ctl uri 1) || check_error "cluster.sh ctl uri 1"
"$rdmafsctl" drain --wait "$victim" >"$local_dir/drain" 2>&1 ||
	check_fail "drain of storage 1: $(cat "$local_dir/drain")"
for index in $(seq 0 $((chunks - 1))); do
	h=$(check_holders "$ino" "$index" meta 2 3)
	case $h in
	"meta 2 " | "meta 3 ") ;;
	*) check_fail "after the drain chunk $index of f is on daemons '$h', want meta and one of hostB" ;;
	esac
done
without_hostB "drained off storage 1"
echo "domains: a drain kept a copy of every chunk on each host"
