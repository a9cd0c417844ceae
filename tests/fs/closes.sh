#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# What a close tells the metadata service (fuse-client/fs_file.c,
# rfs_file_sync()). A close commits the file's chunks and then sends
# UPDATE_SIZE only for what the service lacks: a size or an mtime it has not
# had, or allocations (st_blocks) after a chunk change of this client's since
# it last told them, or other than the ones it told. tar and cp -a write, set
# times, owner and mode, and close; the
# kernel's GETATTR before the chown has the daemons report the allocations
# and stores them with the size, so the close needs the commit alone.
# Mount 1 runs each sequence; mount 2, which never saw the file before,
# checks what the service holds after the close. Counts come from mount 1's
# rdmafs_client_rpc_requests_total:
# - tar's sequence (write, utime, chown, chmod, close): 2 CHUNK_COMMIT (the
#   chown's report, the close's), 1 UPDATE_SIZE; mount 2 sees the size, the
#   mtime tar set, the mode and st_blocks;
# - a write after the report that grows the file: the close sends the size;
# - no explicit mtime: the close sends the mtime the writes earned;
# - a write after the report into a hole, which changes st_blocks but neither
#   size nor mtime (set again after it): the close sends the allocations;
# - an overwrite after the report inside allocated blocks: told again (a
#   chunk change of ours), and the bytes are the new ones;
# - another mount truncates the file to 0 after the report, and mount 1
#   writes the same bytes again: the close tells the service again (what
#   the other mount stored is not left standing over this write).
# Usage: closes.sh DIR1 DIR2 (the same filesystem, two mounts)
# Exit: 0 pass, 1 fail, 77 not on such a cluster, 99 the test itself could
# not check (tests/lib/check.sh).
set -u
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
mnt=${1:?usage: closes.sh DIR1 DIR2}
mnt2=${2:?usage: closes.sh DIR1 DIR2}
check_cluster closes.sh
dir=$RDMAFS_CLUSTER_DIR
if [ ! -e "$dir/fuse1.metrics-port" ]; then
	echo "SKIP: closes.sh needs cluster.sh --metrics --mounts 2"
	exit 77
fi
check_need python3
addr=$(. "$dir/cluster.env" && echo "$addr")
port=$(cat "$dir/fuse1.metrics-port") || check_error "no metrics port for fuse1"
case $addr in
*:*) url="http://[$addr]:$port/metrics" ;;
*) url="http://$addr:$port/metrics" ;;
esac

python3 - "$mnt/closes" "$mnt2/closes" "$url" <<'PYEOF'
import os, sys, time, urllib.request

d1, d2, url = sys.argv[1:4]
failed = False


def error(what):
    print(f"ERROR: closes.sh: {what}")
    sys.exit(99)


def fail(what):
    global failed
    print(f"FAIL: {what}")
    failed = True


def counts():
    """Mount 1's calls so far: op -> count."""
    try:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    except OSError as e:
        error(f"cannot read mount 1's metrics at {url}: {e}")
    out = {}
    for line in text.splitlines():
        if line.startswith("rdmafs_client_rpc_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            op = labels.split('op="', 1)[1].split('"', 1)[0]
            out[op] = out.get(op, 0) + int(float(value))
    return out


def delta(before, after, op):
    return after.get(op, 0) - before.get(op, 0)


reported = {}


def sequence(name, steps, commits, updates):
    """Runs @steps, one of them report(), on a new file of mount 1 between its
    create and its close; checks the calls from the report on (a growing
    file's batched size update may come before the close or at it, never
    both) and returns mount 2's view of the file."""
    p1, p2 = os.path.join(d1, name), os.path.join(d2, name)
    try:
        fd = os.open(p1, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        before = counts()
        for step in steps:
            step(fd)
        mid = reported
        os.close(fd)
    except OSError as e:
        fail(f"{name}: {e}")
        return None
    after = counts()
    if delta(before, after, "CHUNK_COMMIT") != commits:
        fail(f"{name}: {delta(before, after, 'CHUNK_COMMIT')} CHUNK_COMMIT, "
             f"expected {commits}")
    if delta(mid, after, "UPDATE_SIZE") != updates:
        fail(f"{name}: {delta(mid, after, 'UPDATE_SIZE')} UPDATE_SIZE after the report, "
             f"expected {updates}")
    try:
        st = os.stat(p2)
        with open(p2, "rb") as f:
            data = f.read()
    except OSError as e:
        error(f"{name}: mount 2 cannot read the file: {e}")
    return st, data


def report(fd):
    """What tar's chown does to a written file: the kernel's GETATTR, whose
    report tells the service the allocations and the size."""
    global reported
    os.fchown(fd, os.getuid(), os.getgid())
    reported = counts()


def at(off, data):
    return lambda fd: os.pwrite(fd, data, off)


T = 1700000000
stamp = lambda fd: os.utime(fd, ns=(T * 10**9, T * 10**9))
try:
    os.mkdir(d1)
except OSError as e:
    error(f"cannot make {d1}: {e}")

# tar: write, utime, chown (the report), chmod, close
got = sequence("tar", [at(0, b"a" * 2048), stamp, report, lambda fd: os.fchmod(fd, 0o644)],
               2, 0)
if got:
    st, data = got
    if st.st_size != 2048 or data != b"a" * 2048:
        fail(f"tar: mount 2 reads {len(data)} bytes, size {st.st_size}, not tar's 2048")
    if st.st_mtime_ns != T * 10**9:
        fail(f"tar: mount 2's mtime is {st.st_mtime_ns} ns, not the {T} s tar set")
    if st.st_mode & 0o7777 != 0o644:
        fail(f"tar: mount 2's mode is {oct(st.st_mode & 0o7777)}, not 0o644")
    if st.st_blocks < 8:
        fail(f"tar: mount 2's st_blocks is {st.st_blocks} for 2 KiB of data")

# a write after the report grows the file: the close tells the size
got = sequence("grown", [at(0, b"b" * 2048), stamp, report, at(2048, b"c" * 6144), stamp],
               2, 1)
if got and (got[0].st_size != 8192 or got[1] != b"b" * 2048 + b"c" * 6144):
    fail(f"grown: mount 2 reads {len(got[1])} bytes, size {got[0].st_size}, not 8192")

# no explicit mtime: the close tells the mtime the writes earned
start = time.time_ns()
got = sequence("mtime", [at(0, b"d" * 2048), report], 2, 1)
if got and got[0].st_mtime_ns < start - 2 * 10**9:
    fail(f"mtime: mount 2's mtime {got[0].st_mtime_ns} ns predates the write ({start} ns)")

# a write into a hole after the report: st_blocks grows, size and mtime do not
got = sequence("hole", [at(0, b"e" * 4096), at(61440, b"f" * 4096), stamp, report,
                        at(32768, b"g" * 4096), stamp], 2, 1)
if got:
    st, data = got
    want = b"e" * 4096 + bytes(28672) + b"g" * 4096 + bytes(24576) + b"f" * 4096
    if st.st_size != 65536 or data != want:
        fail(f"hole: mount 2 reads {len(data)} bytes (size {st.st_size}) not as written")
    if st.st_blocks < 24:
        fail(f"hole: mount 2's st_blocks is {st.st_blocks}, under the 24 of the 12 KiB written")

# an overwrite after the report inside allocated blocks: a chunk change, told again
got = sequence("overwrite", [at(0, b"h" * 4096), stamp, report, at(0, b"i" * 4096), stamp],
               2, 1)
if got and (got[0].st_size != 4096 or got[1] != b"i" * 4096):
    fail(f"overwrite: mount 2 reads {len(got[1])} bytes, size {got[0].st_size}, not the overwrite")

# another mount truncates after the report; mount 1 writes the same bytes again
truncated = lambda fd: os.truncate(os.path.join(d2, "retold"), 0)
got = sequence("retold", [at(0, b"j" * 2048), stamp, report, truncated, at(0, b"j" * 2048),
                          stamp], 2, 1)

if failed:
    sys.exit(1)
print("PASS: closes.sh: after a report, a close sends UPDATE_SIZE only for what the "
      "service lacks (6 sequences)")
PYEOF
