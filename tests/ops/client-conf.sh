#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# One set of defaults for the three client programs: rdmafsctl, rdmafs-copy
# and rdmafs-fuse read the metadata service, the secret file and the
# transport from client.conf (RDMAFS_CLIENT_CONF, or --config / -o config=);
# the environment wins over the file, flags over both; a bad line is an error
# naming FILE:LINE in all three; all three default to the same secret file.
# Runs under tests/lib/cluster.sh (tcp).
# Usage: client-conf.sh RDMAFSCTL RDMAFS_COPY RDMAFS_FUSE
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test could not check.
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
ctl=${1:?usage: client-conf.sh RDMAFSCTL RDMAFS_COPY RDMAFS_FUSE}
copy=${2:?usage: client-conf.sh RDMAFSCTL RDMAFS_COPY RDMAFS_FUSE}
fuse=${3:?usage: client-conf.sh RDMAFSCTL RDMAFS_COPY RDMAFS_FUSE}
if [ -z "${RDMAFS_CLUSTER_DIR:-}" ]; then
	echo "SKIP: client-conf.sh needs an rdmafs cluster started by cluster.sh"
	exit 77
fi
check_need awk grep cmp mountpoint umount timeout
meta=$(awk '$1 == "meta" { print $2 }' "$RDMAFS_CLUSTER_DIR/daemons")
[ -n "$meta" ] || check_error "no metadata service in $RDMAFS_CLUSTER_DIR/daemons"
secret=$RDMAFS_CLUSTER_DIR/secret
unset RDMAFS_META RDMAFS_SECRET_FILE RDMAFS_CLIENT_CONF
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-clientconf.XXXXXX") || check_error "mktemp"
mkdir "$work/src" "$work/mnt" "$work/back" || check_error "mkdir in $work"
cleanup() {
	mountpoint -q "$work/mnt" && umount "$work/mnt"
	rm -rf "$work"
}
trap cleanup EXIT
head -c 300000 /dev/urandom >"$work/src/data" || check_error "making the test file"
conf=$work/client.conf
printf '[client]\nmeta = %s\nsecret_file = %s\ntransport = tcp\n[rdmafsctl]\ntimeout = 20\n' \
	"$meta" "$secret" >"$conf" || check_error "writing $conf"

# 1. each program finds the cluster through the file alone
out=$(RDMAFS_CLIENT_CONF=$conf timeout 120 "$ctl" status 2>&1) ||
	check_fail "rdmafsctl with RDMAFS_CLIENT_CONF: exit $?: $out"
out=$(timeout 120 "$ctl" --config "$conf" daemons 2>&1) ||
	check_fail "rdmafsctl --config: exit $?: $out"
out=$(RDMAFS_CLIENT_CONF=$conf timeout 300 "$copy" -q "$work/src" rdmafs:/cc 2>&1) ||
	check_fail "rdmafs-copy with RDMAFS_CLIENT_CONF: exit $?: $out"
out=$(timeout 300 "$copy" -q --config "$conf" rdmafs:/cc "$work/back/cc" 2>&1) ||
	check_fail "rdmafs-copy --config: exit $?: $out"
check_same "$work/back/cc/data" "$work/src/data" "the file copied in and out with settings from the file"
out=$(RDMAFS_CLIENT_CONF=$conf timeout 120 "$fuse" "$work/mnt" 2>&1) ||
	check_fail "rdmafs-fuse with RDMAFS_CLIENT_CONF: exit $?: $out"
check_same "$work/mnt/cc/data" "$work/src/data" "the copied file through a mount set up by the file"
umount "$work/mnt" || check_error "umount $work/mnt"
out=$(timeout 120 "$fuse" -o "config=$conf" "$work/mnt" 2>&1) ||
	check_fail "rdmafs-fuse -o config=: exit $?: $out"
mountpoint -q "$work/mnt" || check_fail "rdmafs-fuse -o config= did not mount"
umount "$work/mnt" || check_error "umount $work/mnt"
echo "ok   rdmafsctl, rdmafs-copy and rdmafs-fuse take meta, secret_file and transport from client.conf"

# 2. the environment wins over the file, a flag over the environment
dead=tcp://127.0.0.1:1
out=$(RDMAFS_CLIENT_CONF=$conf RDMAFS_META=$dead timeout 120 "$ctl" status 2>&1)
rc=$?
[ $rc -eq 3 ] && grep -q 127.0.0.1:1 <<<"$out" ||
	check_fail "rdmafsctl: RDMAFS_META did not win over the file (exit $rc): $out"
out=$(RDMAFS_CLIENT_CONF=$conf RDMAFS_META=$dead timeout 120 "$copy" -q "$work/src" rdmafs:/cc2 2>&1)
rc=$?
[ $rc -eq 3 ] && grep -q 127.0.0.1:1 <<<"$out" ||
	check_fail "rdmafs-copy: RDMAFS_META did not win over the file (exit $rc): $out"
out=$(RDMAFS_CLIENT_CONF=$conf RDMAFS_META=$dead timeout 120 "$fuse" "$work/mnt" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q 127.0.0.1:1 <<<"$out" ||
	check_fail "rdmafs-fuse: RDMAFS_META did not win over the file (exit $rc): $out"
mountpoint -q "$work/mnt" && check_fail "rdmafs-fuse mounted with a dead RDMAFS_META"
out=$(RDMAFS_CLIENT_CONF=$conf RDMAFS_META=$dead timeout 120 "$ctl" -m "$meta" status 2>&1) ||
	check_fail "rdmafsctl: -m did not win over RDMAFS_META: $out"
out=$(RDMAFS_CLIENT_CONF=$conf RDMAFS_META=$dead timeout 120 "$fuse" -o "meta=$meta" "$work/mnt" 2>&1) ||
	check_fail "rdmafs-fuse: -o meta= did not win over RDMAFS_META: $out"
umount "$work/mnt" || check_error "umount $work/mnt"
echo "ok   the environment wins over the file, flags over the environment"

# 3. a bad line: FILE:LINE in all three
bad=$work/bad.conf
printf '[client]\nmeta = %s\ncolour = blue\n' "$meta" >"$bad" || check_error "writing $bad"
for prog in ctl copy fuse; do
	case $prog in
	ctl) out=$(timeout 60 "$ctl" --config "$bad" status 2>&1) ;;
	copy) out=$(timeout 60 "$copy" --config "$bad" "$work/src" rdmafs:/x 2>&1) ;;
	fuse) out=$(timeout 60 "$fuse" -o "config=$bad" "$work/mnt" 2>&1) ;;
	esac
	rc=$?
	[ $rc -ne 0 ] && grep -q "bad.conf:3: unknown key 'colour' in \[client\]" <<<"$out" ||
		check_fail "$prog with a bad client.conf (exit $rc): $out"
done
out=$(timeout 60 "$ctl" --config "$work/missing.conf" status 2>&1) &&
	check_fail "rdmafsctl --config with a missing file succeeded"
grep -q "missing.conf" <<<"$out" || check_fail "rdmafsctl names the missing file: $out"
echo "ok   a bad line is FILE:LINE in all three; a named file must exist"

# 4. one default secret file for all three
printf '[client]\nmeta = %s\n' "$meta" >"$work/nosecret.conf" || check_error "writing nosecret.conf"
default=$("$ctl" --help | awk '/--secret-file FILE/ { gsub(/[()]/, ""); print $NF }')
[ -n "$default" ] || check_error "rdmafsctl --help names no default secret file"
if [ -e "$default" ]; then
	echo "ok   (the default secret file $default exists here: its use is not checked)"
else
	for prog in ctl copy fuse; do
		case $prog in
		ctl) out=$(RDMAFS_CLIENT_CONF=$work/nosecret.conf timeout 60 "$ctl" status 2>&1) ;;
		copy) out=$(RDMAFS_CLIENT_CONF=$work/nosecret.conf timeout 60 "$copy" "$work/src" rdmafs:/x 2>&1) ;;
		fuse) out=$(RDMAFS_CLIENT_CONF=$work/nosecret.conf timeout 60 "$fuse" "$work/mnt" 2>&1) ;;
		esac
		grep -qF "$default" <<<"$out" || check_fail "$prog does not default to $default: $out"
	done
	echo "ok   all three default to the secret file $default"
fi
echo "pass"
