#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# async_dirops (docs/metadata-leases.md): mount 1 answers an unlink once the
# kernel's checks pass and sends it in the background. On cluster.sh's
# cluster with two mounts, both with async_dirops (RDMAFS_FUSE_OPTS), mount 1
# keeping attributes and names 600 s and mount 2 1 s (RDMAFS_FUSE_OPTS2):
# 1. 300 files removed by one rm went through the background (the mount's
#    counter moved by 300) and are gone at once for mount 1 (readdir, stat)
#    and for mount 2 once mount 1's readdir returned; their chunks go (fsck
#    clean within 30 s);
# 2. a name unlinked and created again at once, 50 times: each time the new
#    file, with its own bytes; a file's other name, which mount 1 never
#    looked up, has 1 link after the unlink;
# 3. files unlinked, then their directory removed at once: the rmdir works;
# 4. a file open, written, unlinked: fstat says 0 links, it reads back, and
#    its chunks go after the close;
# 5. unlinks the service refuses in two directories (mount 2 made them
#    read-only; mount 1's kernel checked its cached attributes): rm succeeds,
#    each directory's next fsync returns EACCES (the one after it, nothing),
#    the files stay;
# 6. unlinks pending when mount 1 is unmounted (the service stopped) reach
#    the service;
# 7. rdmafs-fuse refuses async_dirops with server_permissions.
# Usage: asyncdirops.sh DIR1 DIR2
# Exit: 0 pass, 1 fail, 77 not on a cluster, 99 the test itself could not
# check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: asyncdirops.sh DIR1 DIR2}
mnt2=${2:?usage: asyncdirops.sh DIR1 DIR2}
check_cluster asyncdirops.sh
ctl=$RDMAFS_CLUSTER_CTL
check_need python3 seq cmp head setpriv
rdmafsctl=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$rdmafsctl")
fuse=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$fuse")
{ [ -x "$rdmafsctl" ] && [ -x "$fuse" ]; } || check_error "no rdmafsctl or rdmafs-fuse in cluster.env"
[ -e "$RDMAFS_CLUSTER_DIR/fuse1.metrics-port" ] || check_error "the cluster has no --metrics"
local_dir=$(mktemp -d "${TMPDIR:-/tmp}/asyncdirops.XXXXXX") ||
	check_error "cannot make a scratch directory in ${TMPDIR:-/tmp}"
trap 'rm -rf "$local_dir"' EXIT
w=$mnt/a
mkdir "$w" || check_fail "mkdir $w"

background_unlinks() {
	check_metric fuse1 rdmafs_client_background_unlinks_total
}
fsck_clean() {
	"$rdmafsctl" fsck >"$local_dir/fsck" 2>&1
}

# 1. many files removed by one rm
mkdir "$w/d1" || check_fail "mkdir d1"
for i in $(seq 300); do
	echo "file $i" >"$w/d1/f$i" || check_fail "create d1/f$i"
done
head -c $((3 * 1024 * 1024)) /dev/urandom >"$w/d1/f300" || check_fail "write d1/f300"
ls "$mnt2/a/d1" >/dev/null || check_fail "ls d1 on mount 2"
before=$(background_unlinks) || exit $?
(cd "$w/d1" && rm f*) || check_fail "rm d1/f*"
after=$(background_unlinks) || exit $?
[ $((after - before)) = 300 ] ||
	check_fail "300 unlinks: $((after - before)) went through the background (want 300)"
left=$(ls -A "$w/d1") || check_fail "ls d1"
[ -z "$left" ] || check_fail "d1 lists after its files were removed: $left"
for i in 1 150 300; do
	[ -e "$w/d1/f$i" ] && check_fail "d1/f$i is there after rm"
done
left=$(ls -A "$mnt2/a/d1") || check_fail "ls d1 on mount 2"
[ -z "$left" ] || check_fail "mount 2 lists d1 after mount 1 removed its files and listed it: $left"
check_until 30 fsck_clean || check_fail "30 s after the rm, fsck: $(cat "$local_dir/fsck")"
echo "ok   300 files removed in the background: gone for both mounts, their chunks too"

# 2. unlinked and created again at once
for i in $(seq 50); do
	rm "$w/again" 2>/dev/null
	echo "round $i" >"$w/again" || check_fail "round $i: creating again"
	[ "$(cat "$w/again")" = "round $i" ] || check_fail "round $i: again reads '$(cat "$w/again")'"
done
echo "ok   a name unlinked and created again 50 times: the new file each time"

# 2b. a link mount 1 never looked up: its LOOKUP after the other name's unlink
# (still on its way) sees one link
echo two >"$w/two" || check_fail "create two"
ln "$mnt2/a/two" "$mnt2/a/two-link" || check_fail "ln two two-link on mount 2"
rm "$w/two" || check_fail "rm two"
links=$(stat -c %h "$w/two-link") || check_fail "stat two-link"
[ "$links" = 1 ] || check_fail "two-link after its other name's unlink: $links links (want 1)"
echo "ok   a file's other name, looked up after an unlink: 1 link"

# 3. unlinked, then the directory removed
mkdir "$w/d3" || check_fail "mkdir d3"
for i in $(seq 20); do : >"$w/d3/e$i" || check_fail "create d3/e$i"; done
rm "$w"/d3/e* || check_fail "rm d3/e*"
rmdir "$w/d3" || check_fail "rmdir d3 right after its files were unlinked"
echo "ok   20 files unlinked, their directory removed at once"

# 4. open, written, unlinked
python3 - "$w/open" <<'PYEOF' || check_fail "a file unlinked while open"
import os, sys
path = sys.argv[1]
data = os.urandom(2 << 20)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, data)
os.unlink(path)
st = os.fstat(fd)
if st.st_nlink != 0:
    sys.exit("fstat after the unlink: %d links (want 0)" % st.st_nlink)
if os.pread(fd, len(data), 0) != data:
    sys.exit("the unlinked file read back other bytes")
if os.path.exists(path):
    sys.exit("the name is still there")
os.close(fd)
PYEOF
check_until 30 fsck_clean || check_fail "30 s after the close, fsck: $(cat "$local_dir/fsck")"
echo "ok   a file open, written and unlinked: 0 links, reads back, its chunks gone after the close"

# 5. unlinks the service refuses, in two directories: mount 1's kernel checks
# its cached attributes of each (its copy from the create, kept 600 s), which
# mount 2 then makes read-only
for d in d5a d5b; do
	mkdir -m 0777 "$w/$d" || check_fail "mkdir $d"
	setpriv --reuid=65534 --regid=65534 --clear-groups touch "$w/$d/v" ||
		check_fail "touch $d/v as uid 65534"
	stat "$w/$d" >/dev/null || check_fail "stat $d"
	chmod 0755 "$mnt2/a/$d" || check_fail "chmod $d on mount 2"
	setpriv --reuid=65534 --regid=65534 --clear-groups rm "$w/$d/v" 2>"$local_dir/rm.err" ||
		check_fail "rm $d/v as uid 65534 (mount 1's cached attributes allow it): $(cat "$local_dir/rm.err")"
done
# dir_fsync DIR: "fsync: ok" or "fsync: ERRNO" of DIR's fsync
dir_fsync() {
	python3 - "$1" <<'PYEOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
try:
    os.fsync(fd)
    print("fsync: ok")
except OSError as e:
    print("fsync:", errno.errorcode.get(e.errno, e.errno))
PYEOF
}
for d in d5b d5a; do
	got=$(dir_fsync "$w/$d" 2>&1)
	[ "$got" = "fsync: EACCES" ] ||
		check_fail "the refused unlink in $d: the directory's fsync said $got (want EACCES)"
	got=$(dir_fsync "$w/$d" 2>&1)
	[ "$got" = "fsync: ok" ] || check_fail "a second fsync of $d said $got (want ok: told once)"
	[ -e "$mnt2/a/$d/v" ] || check_fail "mount 2 does not see $d/v, whose unlink the service refused"
done
echo "ok   unlinks the service refused in 2 directories: rm answered, each directory's fsync returned EACCES once, the files stay"

# 6. unlinks pending at the unmount: with the metadata service stopped (SIGSTOP)
# 50 unlinks are answered (names and attributes cached: rm asks the service
# nothing) and cannot be done; mount 1 is unmounted while they wait, then the
# service goes on. Mount 1's calls wait 60 s (timeout=60000) before they fail.
mkdir "$w/d6" || check_fail "mkdir d6"
names=()
for i in $(seq 50); do
	: >"$w/d6/g$i" || check_fail "create d6/g$i"
	names+=("$w/d6/g$i")
done
resume_meta() {
	"$ctl" ctl signal meta CONT || check_error "cannot resume the metadata daemon"
}
fifty_answered() {
	[ $(($(background_unlinks) - before)) -ge 50 ]
}
unmounted() {
	! awk -v m="$mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}
before=$(background_unlinks) || exit $?
"$ctl" ctl signal meta STOP || check_error "cannot stop the metadata daemon"
rm "${names[@]}" 2>"$local_dir/rm6.err" &
rm_pid=$!
if ! check_until 30 fifty_answered; then
	resume_meta
	check_fail "50 unlinks with the service stopped: $(($(background_unlinks) - before)) answered in 30 s"
fi
wait "$rm_pid" || { resume_meta; check_fail "rm d6/g*: $(cat "$local_dir/rm6.err")"; }
"$ctl" ctl remount 1 >"$local_dir/remount" 2>&1 &
remount_pid=$!
if ! check_until 30 unmounted; then
	resume_meta
	check_error "mount 1 was not unmounted within 30 s: $(cat "$local_dir/remount")"
fi
resume_meta
wait "$remount_pid" || check_error "remounting mount 1: $(cat "$local_dir/remount")"
left=$(ls -A "$w/d6") || check_fail "ls d6 after the remount"
[ -z "$left" ] || check_fail "unlinks pending at the unmount were lost: $left"
left=$(ls -A "$mnt2/a/d6") || check_fail "ls d6 on mount 2"
[ -z "$left" ] || check_fail "mount 2 lists d6 after mount 1's unlinks: $left"
echo "ok   50 unlinks pending at the unmount (the service stopped) reached it"

# 7. not with server_permissions
mkdir "$local_dir/mp" || check_error "mkdir $local_dir/mp"
meta_uri=$(. "$RDMAFS_CLUSTER_DIR/cluster.env" && echo "$meta_uri")
timeout 30 "$fuse" -f -o "meta=$meta_uri,async_dirops,server_permissions" "$local_dir/mp" \
	>"$local_dir/refused" 2>&1
rc=$?
if [ $rc = 0 ] || [ $rc = 124 ]; then
	fusermount3 -u "$local_dir/mp" 2>/dev/null
	check_fail "rdmafs-fuse took async_dirops with server_permissions (exit $rc)"
fi
grep -q "async_dirops needs the kernel's permission checks" "$local_dir/refused" ||
	check_fail "async_dirops with server_permissions: $(cat "$local_dir/refused")"
echo "ok   async_dirops with server_permissions refused: $(head -1 "$local_dir/refused")"
