#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# mount_metrics_check.py work|restart URL MOUNT SNAPSHOT SIZE: scrapes the
# /metrics of an rdmafs-fuse mount (URL) and checks it with Prometheus' own
# parser (python3-prometheus-client), for tests/ops/mount-metrics.sh.
#
#   work     after file work on MOUNT (a file of SIZE bytes written, read
#            back, a missing name looked up): families and types, the
#            operations and RPCs done counted, bytes, connections, the map,
#            histograms; saves every counter in SNAPSHOT (JSON)
#   restart  after a storage daemon was killed, a read failed, and it came
#            back: the failures and the reconnection counted, and no counter
#            below its value in SNAPSHOT
#
# Prints one line per check; exit 0 pass, 1 FAIL, 99 the test's own trouble.
import json
import sys

from promcheck import check, check_histograms, finish, scrape, trouble
import promcheck

promcheck.subject = "the mount"

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("ERROR: python3-prometheus-client is not installed (a failure of the test itself)")
    sys.exit(99)







# Every family the mount serves, with its type. The parser names a counter's
# family without its _total.
FAMILIES = {
    "rdmafs_client_info": "gauge",
    "rdmafs_client_uptime_seconds": "gauge",
    "rdmafs_client_fuse_requests": "counter",
    "rdmafs_client_fuse_errors": "counter",
    "rdmafs_client_fuse_request_duration_seconds": "histogram",
    "rdmafs_client_fuse_requests_in_flight": "gauge",
    "rdmafs_client_dir_attr_hits": "counter",
    "rdmafs_client_fuse_bytes": "counter",
    "rdmafs_client_rpc_requests": "counter",
    "rdmafs_client_rpc_errors": "counter",
    "rdmafs_client_rpc_timeouts": "counter",
    "rdmafs_client_rpc_duration_seconds": "histogram",
    "rdmafs_client_rpc_retries": "counter",
    "rdmafs_client_connects": "counter",
    "rdmafs_client_reconnects": "counter",
    "rdmafs_client_connect_failures": "counter",
    "rdmafs_client_cluster_map_epoch": "gauge",
    "rdmafs_client_cluster_map_fetches": "counter",
    "rdmafs_client_cluster_map_changes": "counter",
    "rdmafs_client_layout_refetches": "counter",
    "rdmafs_client_data_bytes": "counter",
    "rdmafs_client_buffers": "gauge",
    "rdmafs_client_buffer_waits": "counter",
    "rdmafs_client_buffer_wait_seconds": "counter",
    "rdmafs_client_buffer_timeouts": "counter",
    "rdmafs_client_replica_moves": "counter",
}
# What mount-metrics.sh's work did for sure (readdir or readdirplus: the
# kernel picks, checked together).
FUSE_OPS_USED = ["lookup", "getattr", "mkdir", "create", "write", "flush", "release", "open",
                 "read", "rename", "unlink", "opendir", "releasedir"]
# SYNC: dd's fsync (a file's size and existence on the service's disk)
META_OPS_USED = ["LOOKUP", "MKDIR", "CREATE", "OPEN", "RELEASE", "RENAME", "UNLINK", "READDIR",
                 "GET_CLUSTER_MAP", "SYNC"]
STORAGE_OPS_USED = ["CHUNK_WRITE", "CHUNK_READ", "CHUNK_COMMIT"]




def samples(families, family, suffix="_total"):
    """{labels as a sorted tuple: value} of @family's samples named family + suffix."""
    f = families.get(family)
    if not f:
        return {}
    return {tuple(sorted(s.labels.items())): s.value for s in f.samples
            if s.name == family + suffix}


def value(families, family, suffix="_total", **labels):
    """The sum of @family's samples whose labels include @labels."""
    return sum(v for k, v in samples(families, family, suffix).items()
               if all(dict(k).get(n) == want for n, want in labels.items()))




def read_families(url):
    status, ctype, text = scrape(url)
    if status is None:
        check(False, f"GET {url} answers", text)
        sys.exit(1)
    check(status == 200 and ctype.startswith("text/plain; version=0.0.4"),
          f"GET {url}: 200, text format 0.0.4", f"{status} {ctype!r}")
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except Exception as e:  # the parser refuses the text: that is the verdict
        check(False, "Prometheus' parser reads the text", repr(e))
        sys.exit(1)
    check(True, f"Prometheus' parser reads {len(families)} families")
    wrong = [f"{fam} ({families[fam].type if fam in families else 'missing'}, want {t})"
             for fam, t in FAMILIES.items() if fam not in families or families[fam].type != t]
    check(not wrong, "every family there with its type", ", ".join(wrong))
    if wrong:
        sys.exit(1)
    for fam, t in FAMILIES.items():
        if t == "histogram":
            check_histograms(families, fam)
    return families


def counters(families):
    """Every counter sample (histograms' _count and _sum included), by name and labels."""
    out = {}
    for fam, t in FAMILIES.items():
        if t not in ("counter", "histogram"):
            continue
        for s in families[fam].samples:
            if t == "histogram" and s.name.endswith("_bucket"):
                continue
            out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value
    return out


def check_work(families, url, mount, size):
    status, _, _ = scrape(url.rsplit("/", 1)[0] + "/nothing")
    check(status == 404, "another path: 404", f"{status}")
    info = families["rdmafs_client_info"].samples[0].labels
    check(info.get("mountpoint") == mount and info.get("version") and info.get("meta"),
          f"client_info names the mount point, version and service: {info}")

    fuse = {dict(k)["op"]: v for k, v in samples(families, "rdmafs_client_fuse_requests").items()}
    unused = [op for op in FUSE_OPS_USED if fuse.get(op, 0) <= 0]
    check(not unused, f"FUSE operations done are counted ({', '.join(FUSE_OPS_USED)})",
          f"none for {unused}: {fuse}")
    check(fuse.get("readdir", 0) + fuse.get("readdirplus", 0) > 0,
          "a listing counted (readdir or readdirplus)", f"{fuse}")
    check(value(families, "rdmafs_client_fuse_errors", op="lookup", errno="ENOENT") > 0,
          "the lookup of a missing name counted as an ENOENT error")
    durations = {dict(k)["op"]: v for k, v in
                 samples(families, "rdmafs_client_fuse_request_duration_seconds",
                         "_count").items()}
    check(all(durations.get(op) == fuse.get(op) for op in fuse),
          "every operation's histogram counts its requests")
    check(value(families, "rdmafs_client_fuse_bytes", op="write") >= size and
          value(families, "rdmafs_client_fuse_bytes", op="read") >= size,
          f"FUSE bytes written and read >= {size}")

    for target, ops in (("meta", META_OPS_USED), ("storage", STORAGE_OPS_USED)):
        unused = [op for op in ops
                  if value(families, "rdmafs_client_rpc_requests", target=target, op=op) <= 0]
        check(not unused, f"RPCs to {target} made are counted ({', '.join(ops)})",
              f"none for {unused}")
        check(value(families, "rdmafs_client_connects", target=target) >= 1,
              f"connects{{target=\"{target}\"}} >= 1")
    check(value(families, "rdmafs_client_rpc_errors", target="meta", op="LOOKUP") > 0,
          "the LOOKUP of a missing name counted as an RPC error")
    check(value(families, "rdmafs_client_data_bytes", direction="write") >= size and
          value(families, "rdmafs_client_data_bytes", direction="read") >= size,
          f"data bytes to and from the daemons >= {size}")
    check(value(families, "rdmafs_client_cluster_map_epoch", "") > 0 and
          value(families, "rdmafs_client_cluster_map_fetches") >= 1,
          "cluster map epoch > 0, fetched at least once")
    check(value(families, "rdmafs_client_buffers", "") > 0, "buffers > 0")


def check_restart(families, before):
    now = counters(families)
    down = [f"{k}: {v} -> {now.get(k)}" for k, v in before.items()
            if now.get(k) is None or now[k] < v]
    check(not down, f"no counter of {len(before)} went down", "; ".join(down[:5]))

    def delta(family, suffix="_total", **labels):
        was = sum(v for k, v in before.items()
                  if k.startswith(family + suffix + "{") and
                  all(json.loads(k[len(family + suffix):]).get(n) == w
                      for n, w in labels.items()))
        return value(families, family, suffix, **labels) - was

    failed = (delta("rdmafs_client_connect_failures", target="storage") +
              delta("rdmafs_client_rpc_errors", target="storage"))
    check(failed > 0, "the dead daemon counted: failed connects or RPC errors to storage",
          f"{failed}")
    check(delta("rdmafs_client_reconnects", target="storage") > 0,
          "the daemon's return counted as a reconnect to storage")
    read_errors = sum(v for k, v in samples(families, "rdmafs_client_fuse_errors").items()
                      if dict(k)["op"] in ("read", "open"))
    check(read_errors > 0, "the failed read counted as a FUSE error of read (or open)",
          f"{samples(families, 'rdmafs_client_fuse_errors')}")


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in ("work", "restart"):
        trouble("usage: mount_metrics_check.py work|restart URL MOUNT SNAPSHOT SIZE")
    mode, url, mount, snapshot, size = sys.argv[1:6]
    families = read_families(url)
    if mode == "work":
        check_work(families, url, mount, int(size))
        try:
            with open(snapshot, "w") as f:
                json.dump(counters(families), f)
        except OSError as e:
            trouble(f"cannot write {snapshot}: {e}")
    else:
        try:
            with open(snapshot) as f:
                before = json.load(f)
        except (OSError, ValueError) as e:
            trouble(f"cannot read {snapshot}: {e}")
        check_restart(families, before)
    finish()


main()
