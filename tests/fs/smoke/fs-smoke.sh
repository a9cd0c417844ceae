#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# fs-smoke: a real cluster on loopback (a metadata daemon and two more storage
# daemons registering with it), mounted with rdmafs-fuse, exercised with the
# shell tools people use. Exit 0 pass, 1 fail, 77 skip (no FUSE here).
#
#   fs-smoke.sh RDMAFS_DAEMON RDMAFS_FUSE
set -u

daemon=$1
fuse=$2
addr=${RDMAFS_TEST_ADDR:-127.0.0.1}

skip() { echo "SKIP: $*"; exit 77; }
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fusermount3 >/dev/null 2>&1 || skip "no fusermount3"

work=$(mktemp -d /tmp/rdmafs-smoke.XXXXXX) || exit 1
mnt=$work/mnt
pids=""
status=1

cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	fi
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	if [ "$status" -ne 0 ]; then
		for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*"; exit 1; }

wait_file() {
	i=0
	while [ ! -s "$1" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "timed out waiting for $1"
		sleep 0.1
	done
}

echo "smoke-test-secret" > "$work/secret"
mkdir -p "$mnt"
"$daemon" --data-dir "$work/d1" --listen "tcp://$addr:0" --port-file "$work/port1" \
	--secret-file "$work/secret" 2>"$work/d1.log" &
pids="$pids $!"
wait_file "$work/port1"
meta="tcp://$addr:$(cat "$work/port1")"
for i in 2 3; do
	"$daemon" --data-dir "$work/d$i" --listen "tcp://$addr:0" --port-file "$work/port$i" \
		--secret-file "$work/secret" --metadata no --metadata-uri "$meta" \
		2>"$work/d$i.log" &
	pids="$pids $!"
	wait_file "$work/port$i"
done
sleep 1 # the registrations

"$fuse" -f -o "meta=$meta,secret=$work/secret" "$mnt" 2>"$work/fuse.log" &
pids="$pids $!"
i=0
until mountpoint -q "$mnt"; do
	i=$((i + 1))
	[ $i -gt 100 ] && { grep -q "fuse: device not found\|Operation not permitted" \
		"$work/fuse.log" && skip "cannot mount FUSE here"; fail "no mount"; }
	sleep 0.1
done

cd "$mnt" || fail "cd"
echo hello > a || fail "echo > a"
[ "$(cat a)" = hello ] || fail "cat a"
mkdir d || fail mkdir
mv a d/b || fail mv
[ ! -e a ] && [ "$(cat d/b)" = hello ] || fail "after mv"
ln d/b hard || fail ln
[ "$(stat -c %h d/b)" = 2 ] || fail "link count"
ln -s d/b soft || fail "ln -s"
[ "$(readlink soft)" = d/b ] && [ "$(cat soft)" = hello ] || fail symlink
ls -la >/dev/null || fail "ls -la"
dd if=/dev/urandom of="$work/ref" bs=1M count=10 status=none
dd if="$work/ref" of=big bs=1M status=none || fail "dd 10 MiB"
[ "$(stat -c %s big)" = 10485760 ] || fail "size of big"
cmp big "$work/ref" || fail "cmp big"
setfattr -n user.k -v v1 big || fail setfattr
[ "$(getfattr --only-values -n user.k big)" = v1 ] || fail getfattr
setfattr -x user.k big || fail "setfattr -x"
getfattr -n user.k big 2>/dev/null && fail "xattr still there"
truncate -s 1500000 big || fail truncate
truncate -s 3000000 big || fail "truncate up"
cmp -n 1500000 big "$work/ref" || fail "data kept by truncate"
[ "$(tail -c 1500000 big | tr -d '\000' | wc -c)" = 0 ] || fail "zeros after shrink+grow"
rm hard soft || fail rm
rm -r d || fail "rm -r"
[ -z "$(ls)" ] || [ "$(ls)" = big ] || fail "listing after rm"
rm big
df "$mnt" >/dev/null || fail df
cd /
status=0
echo "PASS"
