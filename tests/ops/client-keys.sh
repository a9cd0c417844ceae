#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Per-client keys (rdmafsctl client add|list|revoke): a read-only key reads
# but cannot write (EROFS); a root-squash key's uid 0 owns nothing but 65534;
# a key cannot administer; an altered key, another cluster's key and a key
# file others can read are refused; a revoked key is refused at its next
# connection, saying so, and every storage daemon learns of it; the cluster
# secret keeps working for daemons and administration throughout.
# Runs under tests/lib/cluster.sh (tcp or rdma), as root (owners are checked).
# With OPS_KEY_CHUNKS (tests/ops/key_chunks.c), the storage daemons' side:
# a read-only key's chunk writes, truncates and removes are EROFS there too.
# Usage: client-keys.sh RDMAFSCTL RDMAFS_COPY [OPS_KEY_CHUNKS]
# Exit: 0 pass, 1 fail, 77 not on a cluster or not root, 99 the test could not check.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
ctl=${1:?usage: client-keys.sh RDMAFSCTL RDMAFS_COPY}
copy=${2:?usage: client-keys.sh RDMAFSCTL RDMAFS_COPY [OPS_KEY_CHUNKS]}
key_chunks=${3:-}
if [ -z "${RDMAFS_CLUSTER_DIR:-}" ]; then
	echo "SKIP: client-keys.sh needs an rdmafs cluster started by cluster.sh"
	exit 77
fi
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: client-keys.sh checks file owners: run it as root"
	exit 77
fi
check_need awk grep stat sed head od tr timeout
# the secret comes from RDMAFS_SECRET_FILE (cluster.sh sets it): full trust
unset RDMAFS_KEY_FILE RDMAFS_CLIENT_CONF
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-keys.XXXXXX") || check_error "mktemp"
trap 'rm -rf "$work"' EXIT
mkdir "$work/src" "$work/pub" || check_error "mkdir in $work"
chmod 1777 "$work/pub" || check_error "chmod $work/pub"
head -c 200000 /dev/urandom >"$work/src/data" || check_error "making the test file"

# run [ARGS...]: rdmafsctl with a generous bound; its output in $out, status in $rc
run() {
	out=$(timeout 120 "$ctl" "$@" 2>&1)
	rc=$?
}
# cp_as KEYFILE ARGS...: rdmafs-copy with that key (- for the secret)
cp_as() {
	local key=$1
	shift
	if [ "$key" = - ]; then
		out=$(timeout 300 "$copy" -q "$@" 2>&1)
	else
		out=$(timeout 300 "$copy" -q --key-file "$key" "$@" 2>&1)
	fi
	rc=$?
}

# 1. issuing keys: mode 0600, never over a file, one live key per name
run client add --read-only --out "$work/ro.key" ro
[ $rc -eq 0 ] || check_fail "client add ro: exit $rc: $out"
[ "$(stat -c %a "$work/ro.key")" = 600 ] || check_fail "ro.key is not mode 0600"
grep -q '^flags = read-only$' "$work/ro.key" || check_fail "ro.key does not say read-only"
run client add --out "$work/ro.key" ro2
[ $rc -ne 0 ] && grep -q "exists already" <<<"$out" ||
	check_fail "client add over an existing file: exit $rc: $out"
run client add --out "$work/ro-again.key" ro
[ $rc -ne 0 ] && grep -q "has a key already" <<<"$out" ||
	check_fail "a second live key for one name: exit $rc: $out"
run client add --root-squash --out "$work/sq.key" sq
[ $rc -eq 0 ] || check_fail "client add sq: exit $rc: $out"
run client add --out "$work/rw.key" rw
[ $rc -eq 0 ] || check_fail "client add rw: exit $rc: $out"
run --json client list
[ $rc -eq 0 ] || check_fail "client list: exit $rc: $out"
for name in ro sq rw; do
	grep -q "\"name\": \"$name\"" <<<"$out" || check_fail "client list lacks $name: $out"
done
run client list
grep -Eq '^sq +[0-9]+ +root-squash +valid' <<<"$out" || check_fail "client list table: $out"
echo "ok   client add writes 0600 key files, refuses to overwrite, lists every key"

# 2. a full key writes; a read-only key reads but cannot write
cp_as "$work/rw.key" "$work/src" rdmafs:/rw
[ $rc -eq 0 ] || check_fail "rdmafs-copy in with the rw key: exit $rc: $out"
cp_as "$work/ro.key" rdmafs:/rw "$work/back-ro"
[ $rc -eq 0 ] || check_fail "rdmafs-copy out with the read-only key: exit $rc: $out"
check_same "$work/back-ro/data" "$work/src/data" "a file read with the read-only key"
cp_as "$work/ro.key" "$work/src" rdmafs:/ro
[ $rc -ne 0 ] && grep -qi "read-only file system" <<<"$out" ||
	check_fail "rdmafs-copy in with the read-only key: exit $rc: $out"
run -k "$work/ro.key" status
[ $rc -le 1 ] || check_fail "rdmafsctl status with a key: exit $rc: $out"
echo "ok   a read-only key reads, its writes fail with EROFS; status works with a key"
if [ -n "$key_chunks" ]; then
	for k in ro rw; do
		out=$("$key_chunks" "$work/$k.key" "$k" 2>&1)
		rc=$?
		[ $rc -ne 99 ] || check_error "ops-key-chunks with the $k key could not run: $out"
		[ $rc -eq 0 ] || check_fail "the storage daemons and a $k key's chunk calls: $out"
	done
	echo "ok   storage daemons: a read-only key's chunk changes are EROFS, listing is EPERM"
fi

# 3. root squash: uid 0 through a root-squash key owns nothing but 65534
cp_as - "$work/pub" rdmafs:/pub
[ $rc -eq 0 ] || check_fail "rdmafs-copy of a 1777 directory with the secret: exit $rc: $out"
cp_as "$work/sq.key" --no-owner "$work/src" rdmafs:/pub/sq
[ $rc -eq 0 ] || check_fail "rdmafs-copy in with the root-squash key: exit $rc: $out"
cp_as - rdmafs:/pub/sq "$work/back-sq"
[ $rc -eq 0 ] || check_fail "rdmafs-copy out with the secret: exit $rc: $out"
owner=$(stat -c %u:%g "$work/back-sq/data") || check_error "stat $work/back-sq/data"
[ "$owner" = 65534:65534 ] || check_fail "a file root made through a root-squash key is owned by $owner"
cp_as "$work/sq.key" --no-owner "$work/src" rdmafs:/sq-in-root
[ $rc -ne 0 ] || check_fail "a squashed root created a directory in the root directory (0755 root)"
echo "ok   root squash: files root creates are owned by 65534:65534"

# 4. a key cannot administer; the secret can
for cmd in "client list" "client add x" "fsck"; do
	# shellcheck disable=SC2086
	run -k "$work/rw.key" $cmd
	[ $rc -ne 0 ] && grep -q "administration needs the cluster secret\|needs the cluster secret\|derives the key from the cluster secret" <<<"$out" ||
		check_fail "rdmafsctl -k KEY $cmd: exit $rc: $out"
done
run fsck
[ $rc -eq 0 ] || check_fail "rdmafsctl fsck with the secret: exit $rc: $out"
echo "ok   a key holder cannot run administration commands; the secret can"

# 5. altered flags, another cluster's key, a readable key file: refused
sed 's/^flags = read-only$/flags = none/' "$work/ro.key" >"$work/tampered.key"
chmod 600 "$work/tampered.key"
run -k "$work/tampered.key" status
[ $rc -ne 0 ] && grep -q "refused the key for client ro" <<<"$out" ||
	check_fail "a key with altered flags: exit $rc: $out"
other=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
sed "s/^key = .*/key = $other/" "$work/rw.key" >"$work/other.key"
chmod 600 "$work/other.key"
cp_as "$work/other.key" rdmafs:/rw "$work/back-other"
[ $rc -ne 0 ] && grep -q "key for client rw was refused" <<<"$out" ||
	check_fail "a key of another cluster secret: exit $rc: $out"
cp "$work/rw.key" "$work/open.key" && chmod 644 "$work/open.key"
run -k "$work/open.key" status
[ $rc -ne 0 ] && grep -q "chmod 600" <<<"$out" ||
	check_fail "a key file others can read: exit $rc: $out"
echo "ok   altered flags, another secret's key and a readable key file are refused"

# 6. revocation: the next connection is refused, saying so; daemons learn it
run client revoke rw
[ $rc -eq 0 ] || check_fail "client revoke rw: exit $rc: $out"
run -k "$work/rw.key" status
[ $rc -ne 0 ] && grep -q "key for client rw was revoked" <<<"$out" ||
	check_fail "rdmafsctl with a revoked key: exit $rc: $out"
cp_as "$work/rw.key" rdmafs:/rw "$work/back-revoked"
[ $rc -ne 0 ] && grep -q "key for client rw was revoked" <<<"$out" ||
	check_fail "rdmafs-copy with a revoked key: exit $rc: $out"
run --json client list
grep -A8 '"name": "rw"' <<<"$out" | grep -q '"revoked": true' ||
	check_fail "client list does not show rw revoked: $out"
# every storage daemon fetches the revoked serials at a heartbeat (every 2 s)
for log in "$RDMAFS_CLUSTER_DIR"/storage*.log; do
	[ -e "$log" ] || continue
	for _ in $(seq 1 120); do
		grep -q "client keys: 1 revoked" "$log" && break
		sleep 0.5
	done
	grep -q "client keys: 1 revoked" "$log" ||
		check_fail "$(basename "$log" .log) never learned of the revocation"
done
echo "ok   a revoked key is refused at its next connection, with its name; daemons learn it"

# 7. the secret still works for everything
run status
[ $rc -le 1 ] || check_fail "rdmafsctl status with the secret: exit $rc: $out"
cp_as - rdmafs:/rw "$work/back-secret"
[ $rc -eq 0 ] || check_fail "rdmafs-copy with the secret: exit $rc: $out"
echo "ok   the cluster secret keeps working for daemons and administration"
exit 0
