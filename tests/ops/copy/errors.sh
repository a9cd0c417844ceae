#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# errors.sh COPY TREECMP: bad input and failures give a clear message naming
# what failed and the documented exit status, never a hang: usage errors (2),
# an unreachable service (3), a missing source and an unreadable file (1), a
# storage daemon down in the middle of a copy (1, every failed file named),
# after which a re-run with the daemon back completes the copy. Runs inside
# tests/lib/cluster.sh --no-fuse.
# No clock on speed: each run is bounded only to catch a hang, and
# RDMAFS_TEST_SLOW (1; the rdma-vm guest's TCG, 10) scales those bounds.
set -u
copy=$(readlink -f "$1") treecmp=$(readlink -f "$2")
work=$RDMAFS_CLUSTER_DIR/errors
. "$(dirname "$(readlink -f "$0")")/../../lib/check.sh"

# check WHAT COMMAND...: exit 0 ok, 1 FAIL, other: the check could not run
check() {
	check_run "$@"
}

slow=${RDMAFS_TEST_SLOW:-1}
# RDMAFS_COPY_TIMEOUT_MS: a longer per-call timeout (the guest's)
copy_timeout=()
[ -n "${RDMAFS_COPY_TIMEOUT_MS:-}" ] && copy_timeout=(--timeout "$RDMAFS_COPY_TIMEOUT_MS")

# expect STATUS PATTERN HANG_SECONDS ARGS...: runs the copy, checks its exit
# status and that stderr matches PATTERN; a copy still running after
# HANG_SECONDS (times RDMAFS_TEST_SLOW) is a hang
expect() {
	local want=$1 pattern=$2 limit=$(($3 * slow)) rc start took
	shift 3
	start=$(date +%s)
	timeout "$limit" "$copy" "${copy_timeout[@]}" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	took=$(($(date +%s) - start))
	if [ $rc -eq 124 ]; then
		echo "  still running after ${limit}s: a hang; stderr:" >&2
		sed 's/^/    /' "$work/err" | head -20 >&2
		return 1
	fi
	if [ $rc -ne "$want" ] || ! grep -Eq -- "$pattern" "$work/err"; then
		echo "  exit $rc (want $want) after ${took}s, stderr:" >&2
		sed 's/^/    /' "$work/err" | head -20 >&2
		return 1
	fi
	return 0
}

mkdir -p "$work/src/sub"
for i in $(seq 30); do
	head -c $((3 * 1024 * 1024 + i)) /dev/urandom >"$work/src/sub/f$i"
done

check "no arguments: usage, exit 2" expect 2 "needs exactly two arguments" 60
check "two local paths: exit 2" expect 2 "exactly one of SRC and DST" 60 /tmp /tmp/x
check "bad option value: exit 2" expect 2 "jobs takes" 60 -j 0 "$work/src" rdmafs:/x
check "no secret file: exit 2" expect 2 "cannot read the secret file" 60 \
	-s "$work/no-such-secret" "$work/src" rdmafs:/x
check "unreachable service: exit 3" expect 3 "cannot reach the cluster" 120 \
	-m tcp://127.0.0.1:1 "$work/src" rdmafs:/x
check "missing local source: exit 1, named" expect 1 "$work/missing: source: No such file" 120 \
	"$work/missing" rdmafs:/x
check "missing rdmafs source: exit 1, named" expect 1 "/no/such/dir: source: No such file" 120 \
	rdmafs:/no/such/dir "$work/out-dir"
check "missing rdmafs destination parent: exit 1" expect 1 "/no/such: destination directory" 120 \
	"$work/src" rdmafs:/no/such/dir
check "--help documents every option" bash -c '
	help=$("$1" --help) || exit 1
	for o in --meta --secret-file --transport --timeout --jobs --inflight --piece-size \
		--no-verify --verify-existing --owner --no-owner --quiet --verbose --version --help; do
		grep -q -- "$o" <<<"$help" || { echo "--help lacks $o" >&2; exit 1; }
	done' _ "$copy"

# no permission: a file its reader may not open (as an unprivileged user)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	mkdir -p "$work/perm"
	echo readable >"$work/perm/ok"
	echo hidden >"$work/perm/no-access"
	chmod 000 "$work/perm/no-access"
	chmod -R a+rX "$work"
	chmod 000 "$work/perm/no-access"
	# the secret, readable by nobody alone (a secret others may read is refused)
	cp "$RDMAFS_SECRET_FILE" "$work/secret"
	chmod 600 "$work/secret" && chown 65534:65534 "$work/secret"
	# a directory of nobody's in rdmafs to copy into (root's copy keeps the owner)
	mkdir -p "$work/nobody-home" && chown 65534:65534 "$work/nobody-home"
	"$copy" -q --owner "$work/nobody-home" rdmafs:/nobody-home
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$copy" -q -s "$work/secret" "$work/perm" rdmafs:/nobody-home/perm 2>"$work/err"
	rc=$?
	cat "$work/err"
	check "unreadable file: exit 1 ($rc), named with the reason" \
		grep -q "no-access: cannot open: Permission denied" "$work/err"
	check "unreadable file: exit status 1" test $rc -eq 1
fi

# a storage daemon down: the files that need it fail (named) without a hang,
# the others are copied; with the daemon back, a re-run completes the copy
check "copy with every daemon up" "$copy" "${copy_timeout[@]}" -q "$work/src" rdmafs:/before
"$RDMAFS_CLUSTER_CTL" ctl kill 2 KILL
check "daemon down: exit 1, failures named, no hang" \
	expect 1 "sub/f[0-9]+: .*(timed out|connection refused|Input/output error)" 600 \
	"$work/src" rdmafs:/during
echo "  $(grep -c "sub/f" "$work/err") files failed; summary: $(cat "$work/out")"
head -n 3 "$work/err"
check "daemon down: reading a copy that needs it fails, named" \
	expect 1 "/before/sub/f[0-9]+: " 600 rdmafs:/before "$work/back-during"
"$RDMAFS_CLUSTER_CTL" ctl start 2
check "daemon back: the re-run completes the copy" "$copy" "${copy_timeout[@]}" -q "$work/src" rdmafs:/during
check "and it reads back identical" "$copy" "${copy_timeout[@]}" -q rdmafs:/during "$work/back"
check "identical" "$treecmp" "$work/src" "$work/back"

# a daemon killed in the middle of a running copy, which --bwlimit keeps
# running for 15 s at least (90 MiB at 6 MiB/s), however fast the machine
(sleep 0.3; "$RDMAFS_CLUSTER_CTL" ctl kill 3 KILL) &
killer=$!
check "daemon killed mid-copy: exit 1, failures named, no hang" \
	expect 1 "sub/f[0-9]+: " 600 -j 1 --inflight 0 --piece-size 256K --bwlimit 6M \
	"$work/src" rdmafs:/midway
wait $killer
"$RDMAFS_CLUSTER_CTL" ctl start 3
check "daemon back: the re-run completes it" "$copy" "${copy_timeout[@]}" -q "$work/src" rdmafs:/midway
rm -rf "$work/back"
check "and it reads back identical" "$copy" "${copy_timeout[@]}" -q rdmafs:/midway "$work/back"
check "identical" "$treecmp" "$work/src" "$work/back"

check_summary
echo "errors: all checks passed"
