#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Open files outlive a restart of the metadata service, which keeps open
# handles in memory only: the mount reclaims them (RECLAIM) on its first new
# connection. Run by tests/lib/cluster.sh with a short --reclaim-grace:
#   reclaim.sh MOUNT
# A process of uid 65534 creates F with mode 0 (only its open handle lets it
# write; the service checks that handle, not the mode, for ftruncate) and G,
# writes both, unlinks F and keeps both open. The metadata daemon is killed
# with SIGKILL and started again. Then, through the same descriptors,
# ftruncate of F must work (it does only if the handle was reclaimed), and
# every byte of F and G must read back; both are closed. Once the grace
# period is over, the service frees F (its last handle went in the grace
# period, when nothing unlinked is freed), and fsck --repair removes F's
# chunks, which the service cannot: fsck is clean again.
# Exit: 0 pass, 1 a check failed, 99 the test could not run.
mnt=${1:?usage: reclaim.sh MOUNT}
here=$(dirname "$(readlink -f "$0")")
. "$here/../lib/check.sh"
ctl=${RDMAFS_CLUSTER_CTL:?run under tests/lib/cluster.sh}
dir=${RDMAFS_CLUSTER_DIR:?run under tests/lib/cluster.sh}
rdmafsctl=$(. "$dir/cluster.env" && echo "$rdmafsctl")
grace=$(. "$dir/cluster.env" && echo "$reclaim_grace")
[ -n "$grace" ] || check_error "cluster.sh ran without --reclaim-grace"
command -v python3 >/dev/null || check_error "python3 is missing"

local_dir=$(mktemp -d "${TMPDIR:-/tmp}/reclaim.XXXXXX") || check_error "mktemp"
work=$(mktemp -d "$mnt/reclaim.XXXXXX") || check_fail "mktemp -d in the mount $mnt"
holder=
cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null
	rm -rf "$local_dir"
}
trap cleanup EXIT
chmod 1777 "$work" || check_fail "chmod 1777 $work"
# uid 65534 looks for GO in it
chmod 0711 "$local_dir" || check_error "chmod $local_dir"

# The holder: prints "ready" once F and G are written and F is unlinked,
# waits for the file GO, then checks through its open descriptors.
cat >"$local_dir/holder.py" <<'EOF'
import os, sys, time

work, status, go = sys.argv[1:4]
MIB = 1 << 20

def pattern(seed, n):
    return bytes((seed * 31 + i * 7 + (i >> 12)) & 0xff for i in range(n))

out = open(status, "a", buffering=1)  # opened before the uid changes
def say(line):
    out.write(line + "\n")

os.setgid(65534)
os.setuid(65534)
f_data = pattern(1, 3 * MIB + 777)
g_data = pattern(2, MIB + 5)
f = os.open(os.path.join(work, "F"), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0)
g = os.open(os.path.join(work, "G"), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
os.write(f, f_data)
os.write(g, g_data)
os.fsync(f)
os.fsync(g)
os.unlink(os.path.join(work, "F"))
say("ready")
deadline = time.monotonic() + 600
while not os.path.exists(go):
    if time.monotonic() > deadline:
        say("TROUBLE: no go in 600 s")
        sys.exit(99)
    time.sleep(0.1)
failed = False
def check(ok, what):
    global failed
    say(("ok   " if ok else "FAIL ") + what)
    failed |= not ok
try:
    os.ftruncate(f, 2 * MIB + 3)
    check(True, "ftruncate of the unlinked mode-0 file through its reclaimed handle")
    f_data = f_data[:2 * MIB + 3]
except OSError as e:
    check(False, "ftruncate of the unlinked mode-0 file after the restart: " + e.strerror)
check(os.fstat(f).st_size == len(f_data), "F's size is %d" % len(f_data))
check(os.pread(f, len(f_data) + 10, 0) == f_data, "every byte of F reads back")
more = pattern(3, 4096)
os.pwrite(f, more, 3 * MIB)
os.fsync(f)
check(os.pread(f, 4096, 3 * MIB) == more, "a write to F after the restart reads back")
check(os.pread(g, len(g_data) + 10, 0) == g_data, "every byte of G reads back")
os.ftruncate(g, 10)
check(os.fstat(g).st_size == 10, "ftruncate of G")
os.close(f)
os.close(g)
sys.exit(1 if failed else 0)
EOF

python3 "$local_dir/holder.py" "$work" "$local_dir/status" "$local_dir/go" \
	2>"$local_dir/holder.err" &
holder=$!
for _ in $(seq 1200); do
	grep -qx ready "$local_dir/status" 2>/dev/null && break
	kill -0 "$holder" 2>/dev/null || break
	sleep 0.1
done
if ! grep -qx ready "$local_dir/status" 2>/dev/null; then
	cat "$local_dir/holder.err" >&2
	check_fail "the holder did not write and unlink its files"
fi
echo "ok   uid 65534 holds F (mode 0, unlinked) and G open"

"$ctl" ctl kill meta KILL || check_error "cannot kill the metadata daemon"
"$ctl" ctl start meta || check_fail "the metadata daemon did not come back after a kill -9"
echo "ok   the metadata daemon was killed and started again"
touch "$local_dir/go" || check_error "touch $local_dir/go"
wait "$holder"
rc=$?
holder=
cat "$local_dir/status"
case $rc in
0) ;;
1) check_fail "the open files did not outlive the restart" ;;
*)
	cat "$local_dir/holder.err" >&2
	check_error "the holder failed (exit $rc)"
	;;
esac
grep -q "reclaimed 2 open handle" "$dir/fuse1.log" ||
	check_fail "the mount did not log reclaiming its 2 handles: $(tail -n 5 "$dir/fuse1.log")"
echo "ok   the mount reclaimed its 2 open handles"

# After the grace period F is freed; its chunks are fsck's to remove.
freed=0
for _ in $(seq $((grace * 4 + 120))); do
	"$rdmafsctl" fsck >"$local_dir/fsck.out" 2>&1
	rc=$?
	[ $rc -eq 2 ] && check_error "rdmafsctl fsck: $(cat "$local_dir/fsck.out")"
	if [ $rc -eq 1 ] && grep -q "no such inode" "$local_dir/fsck.out"; then
		freed=1
		break
	fi
	sleep 0.5
done
[ $freed = 1 ] || check_fail "F was not freed after the grace period: $(cat "$local_dir/fsck.out")"
echo "ok   after the grace period F is freed and fsck finds its chunks"
"$rdmafsctl" fsck --repair >"$local_dir/repair.out" 2>&1 ||
	check_fail "fsck --repair: $(cat "$local_dir/repair.out")"
"$rdmafsctl" fsck >"$local_dir/fsck.out" 2>&1 ||
	check_fail "fsck after the repair: $(cat "$local_dir/fsck.out")"
echo "ok   fsck --repair removed them: fsck is clean"
rm -rf "$work"
echo "reclaim: open files outlive a restart of the metadata service"
