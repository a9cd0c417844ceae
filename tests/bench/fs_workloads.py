#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The workloads of bench-fs.sh, run on one mounted directory.

    fs_workloads.py DIR OUT.json [--size-mb N] [--files N] [--runtime S]
                    [--tarball TREE.tar --tree-files N] [--only NAME,...]
    fs_workloads.py --make-tarball TREE.tar N    (N small files, 100 a directory)

Writes {"metric": {"value": V, "unit": U}, ...} to OUT.json. Every figure is
measured here, the same way for every filesystem bench-fs.sh compares, so
only the ratios between them mean something: the machine, its load and its
page cache are shared. A workload that fails is reported on stderr and left
out of the JSON (the table shows it as missing), never counted as zero.
"""
import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from multiprocessing import Barrier, Process, Queue

TAR_FILE_BYTES = 2048  # the unpacked tree's files: small, as a source tree's


def drop_caches():
    """Reads measure the filesystem, not the page cache."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError as e:
        print(f"fs_workloads: cannot drop caches ({e}); cold reads may be warm", file=sys.stderr)


def cpu_ticks():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v) - idle, sum(v)


def fio(directory, name, rw, bs, jobs, size_mb, engine, depth, runtime=None, fsync_end=True):
    """One fio run; returns its job group's JSON (reads and writes)."""
    cmd = ["fio", f"--name={name}", f"--directory={directory}", f"--rw={rw}", f"--bs={bs}",
           f"--numjobs={jobs}", f"--size={size_mb}M", f"--ioengine={engine}",
           f"--iodepth={depth}", "--direct=0", "--group_reporting", "--output-format=json"]
    if fsync_end:
        cmd.append("--end_fsync=1")
    if runtime:
        cmd += [f"--runtime={runtime}", "--time_based"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"fio {name}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    job = json.loads(out.stdout)["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio {name}: error {job['error']}")
    return job


def seq_write(d, args, jobs):
    job = fio(d, f"seq{jobs}", "write", "1M", jobs, args.size_mb, "psync", 1)
    return job["write"]["bw_bytes"] / 2**20, "MiB/s"


def rand_io(d, args, rw, jobs, engine, depth):
    # the files are laid out (written) first, then the cache dropped; the
    # random read then measures the filesystem
    name = f"rand{jobs}x{depth}"
    if rw == "randread":
        fio(d, name, "write", "1M", jobs, args.size_mb, "psync", 1)
        drop_caches()
    job = fio(d, name, rw, "4k", jobs, args.size_mb, engine, depth, runtime=args.runtime,
              fsync_end=(rw == "randwrite"))
    side = "read" if rw == "randread" else "write"
    return job[side]["iops"], "IOPS"


def meta_loop(d, n, what, start=None, q=None):
    """Creates, stats or unlinks f0..f{n-1} in @d; files per second."""
    if start:
        start.wait()
    t = time.monotonic()
    for i in range(n):
        p = f"{d}/f{i}"
        if what == "create":
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
        elif what == "stat":
            os.stat(p)
        else:
            os.unlink(p)
    elapsed = time.monotonic() - t
    if q:
        q.put(elapsed)
    return n / elapsed


def meta_parallel(d, n, what, procs):
    """@procs processes, each on its own directory of n / procs files, let go
    together; all their files over the slowest one's time."""
    q, start, ps, each = Queue(), Barrier(procs), [], n // procs
    for k in range(procs):
        p = Process(target=meta_loop, args=(f"{d}/p{k}", each, what, start, q))
        p.start()
        ps.append(p)
    for p in ps:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"{what} in parallel: a process exited {p.exitcode}")
    return each * procs / max(q.get() for _ in ps)


def make_tarball(path, files):
    """A tree of @files small files, 100 to a directory, as a tarball."""
    blob = os.urandom(TAR_FILE_BYTES)
    with tarfile.open(path, "w") as tar:
        for i in range(files):
            info = tarfile.TarInfo(f"tree/d{i // 100}/f{i}")
            info.size = TAR_FILE_BYTES
            info.mtime = 1700000000
            tar.addfile(info, fileobj=io.BytesIO(blob))


def walk_stat(top):
    n = 0
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            os.lstat(os.path.join(root, name))
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--tree-files", type=int, default=20000)
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--tarball", help="the tree's tarball (made once by bench-fs.sh)")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    base = os.path.join(args.dir, "bench")
    only = set(filter(None, args.only.split(",")))
    results = {}

    def fresh():
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        return base

    def run(metric, fn):
        if only and metric not in only:
            return
        try:
            value, unit = fn()
        except Exception as e:  # a failed workload is said, not scored
            print(f"fs_workloads: {metric} on {args.dir}: {e}", file=sys.stderr)
            return
        results[metric] = {"value": round(value, 1), "unit": unit}
        print(f"  {metric:28} {value:12.1f} {unit}", file=sys.stderr, flush=True)

    def seq_write_1job():
        d = fresh()
        b0 = cpu_ticks()
        value = seq_write(d, args, 1)[0]
        b1 = cpu_ticks()
        busy = (b1[0] - b0[0]) / max(1, b1[1] - b0[1]) * 100 * os.cpu_count()
        results["cpu-seq-write-1M-1job"] = {"value": round(busy, 1), "unit": "% CPU"}
        return value

    def seq_read_cold():
        d = fresh()
        fio(d, "seq1", "write", "1M", 1, args.size_mb, "psync", 1)
        drop_caches()
        job = fio(d, "seq1", "read", "1M", 1, args.size_mb, "psync", 1, fsync_end=False)
        return job["read"]["bw_bytes"] / 2**20, "MiB/s"

    run("seq-write-1M-1job", lambda: (seq_write_1job(), "MiB/s"))
    run("seq-read-1M-1job-cold", seq_read_cold)
    run("seq-write-1M-4jobs", lambda: seq_write(fresh(), args, 4))
    run("rand-read-4K-4jobs-qd1", lambda: rand_io(fresh(), args, "randread", 4, "psync", 1))
    run("rand-write-4K-4jobs-qd1", lambda: rand_io(fresh(), args, "randwrite", 4, "psync", 1))
    run("rand-read-4K-qd32", lambda: rand_io(fresh(), args, "randread", 1, "io_uring", 32))
    run("rand-write-4K-qd32", lambda: rand_io(fresh(), args, "randwrite", 1, "io_uring", 32))

    # metadata: one directory of N files, one process; then 4 processes in 4 directories
    # stat runs on a cold cache: the kernel's names and attributes dropped,
    # so every stat asks the filesystem
    def meta_one(what):
        d = os.path.join(base, "meta")
        if what == "create":
            fresh()
            os.makedirs(d)
        elif what == "stat":
            drop_caches()
        return meta_loop(d, args.files, what), "files/s"

    def meta_four(what):
        d = os.path.join(base, "meta4")
        if what == "create":
            fresh()
            for k in range(4):
                os.makedirs(f"{d}/p{k}")
        elif what == "stat":
            drop_caches()
        return meta_parallel(d, args.files, what, 4), "files/s"

    def listing():
        d = os.path.join(base, "meta")
        t = time.monotonic()
        n = len(os.listdir(d))
        return n / (time.monotonic() - t), "entries/s"

    for what in ("create", "stat"):
        run(f"{what}", lambda what=what: meta_one(what))
    run("list", listing)
    run("unlink", lambda: meta_one("unlink"))
    for what in ("create", "stat", "unlink"):
        run(f"{what}-4procs", lambda what=what: meta_four(what))

    def untar():
        d = fresh()
        t = time.monotonic()
        # GNU tar, as a user would unpack; sync: the files must be on the filesystem
        subprocess.run(["tar", "-xf", args.tarball, "-C", d], check=True)
        os.sync()
        return args.tree_files / (time.monotonic() - t), "files/s"

    def stat_walk():
        top = os.path.join(base, "tree")
        drop_caches()
        t = time.monotonic()
        n = walk_stat(top)
        if n < args.tree_files:
            raise RuntimeError(f"the walk found {n} entries, not {args.tree_files}")
        return n / (time.monotonic() - t), "entries/s"

    def rm_tree():
        top = os.path.join(base, "tree")
        if not os.path.isdir(top):
            raise RuntimeError("no tree to remove: rm-tree runs after untar")
        t = time.monotonic()
        # as a user would remove it; sync: the removals must be on the filesystem.
        # On rdmafs a removed file's chunks go after the unlink's answer (a SYNC
        # of the service, then CHUNK_REMOVE): that work is not in this time
        subprocess.run(["rm", "-rf", top], check=True)
        os.sync()
        if os.path.exists(top):
            raise RuntimeError(f"{top} is still there after rm -rf")
        return args.tree_files / (time.monotonic() - t), "files/s"

    if args.tarball:
        run("untar", untar)
        run("stat-walk", stat_walk)
        run("rm-tree", rm_tree)
    shutil.rmtree(base, ignore_errors=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--make-tarball":
        make_tarball(sys.argv[2], int(sys.argv[3]))
    else:
        main()
