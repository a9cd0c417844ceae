#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# metrics_check.py CLUSTER_DIR TRANSPORT: scrapes /metrics of every daemon of
# the cluster in CLUSTER_DIR (tests/lib/cluster.sh --metrics: the daemons
# file, NAME.metrics-port) and checks it with Prometheus' own parser
# (python3-prometheus-client), after metrics.sh made metadata and chunk
# operations and while its client holds a connection to every daemon.
# Prints one line per check; exit 0 pass, 1 FAIL, 99 the test's own trouble.
import sys

from promcheck import check, check_histograms, finish, scrape, trouble
import promcheck

promcheck.subject = "the daemons"

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("ERROR: python3-prometheus-client is not installed (a failure of the test itself)")
    sys.exit(99)







# Every daemon serves these, with these types. The parser names a counter's
# family without its _total, as the format's families are named.
COMMON = {
    "rdmafs_build_info": "gauge",
    "rdmafs_daemon_info": "gauge",
    "rdmafs_uptime_seconds": "gauge",
    "rdmafs_daemon_state": "gauge",
    "rdmafs_daemon_registered": "gauge",
    "rdmafs_requests": "counter",
    "rdmafs_request_errors": "counter",
    "rdmafs_request_bytes": "counter",
    "rdmafs_request_duration_seconds": "histogram",
    "rdmafs_requests_busy": "counter",
    "rdmafs_checksum_errors": "counter",
    "rdmafs_resync_chunks": "counter",
    "rdmafs_resync_failures": "counter",
    "rdmafs_requests_in_flight": "gauge",
    "rdmafs_request_queue_length": "gauge",
    "rdmafs_request_queue_capacity": "gauge",
    "rdmafs_workers": "gauge",
    "rdmafs_rdma_bytes_in_flight": "gauge",
    "rdmafs_inline_writes": "counter",
    "rdmafs_inline_reads": "counter",
    "rdmafs_requests_run_on_receipt": "counter",
    "rdmafs_requests_handed_on": "counter",
    "rdmafs_requests_fetched": "counter",
    "rdmafs_pending_reads": "counter",
    "rdmafs_requests_batched": "counter",
    "rdmafs_commits_deferred": "counter",
    "rdmafs_data_flushes": "counter",
    "rdmafs_data_flush_errors": "counter",
    "rdmafs_rdma_seconds": "counter",
    "rdmafs_disk_seconds": "counter",
    "rdmafs_connections": "gauge",
    "rdmafs_connections_handshaking": "gauge",
    "rdmafs_chunks": "gauge",
    "rdmafs_capacity_bytes": "gauge",
    "rdmafs_free_bytes": "gauge",
}
# The daemon that hosts the metadata service adds these.
META = {
    "rdmafs_meta_requests": "counter",
    "rdmafs_meta_request_errors": "counter",
    "rdmafs_meta_request_bytes": "counter",
    "rdmafs_meta_reply_bytes": "counter",
    "rdmafs_meta_request_duration_seconds": "histogram",
    "rdmafs_meta_inodes": "gauge",
    "rdmafs_meta_commits": "counter",
    "rdmafs_meta_committed_requests": "counter",
    "rdmafs_cluster_epoch": "gauge",
    "rdmafs_cluster_daemons": "gauge",
}
# Metadata methods metrics.sh's work calls for sure (rdmafs-copy in and out,
# the daemons' registration before the cluster was ready; SYNC: the copy in
# flushes the service before it exits 0). Not HEARTBEAT: the first comes 2 s
# after registration, and the test may be faster.
META_OPS_USED = ["MKDIR", "CREATE", "SETATTR", "OPEN", "RELEASE", "LOOKUP", "READDIR",
                 "GET_CLUSTER_MAP", "REGISTER_DAEMON", "SYNC"]




def value(families, family, **labels):
    """The value of @family's sample whose labels include @labels (None: none)."""
    f = families.get(family)
    if not f:
        return None
    for s in f.samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def by_op(families, family, suffix=""):
    """{op: value} of @family's samples named family + suffix (e.g. _total)."""
    f = families.get(family)
    if not f:
        return {}
    return {s.labels["op"]: s.value for s in f.samples
            if s.name == family + suffix and "op" in s.labels}




def main():
    if len(sys.argv) != 3:
        trouble("usage: metrics_check.py CLUSTER_DIR TRANSPORT")
    cluster, transport = sys.argv[1], sys.argv[2]
    try:
        with open(f"{cluster}/daemons") as f:
            daemons = [line.split()[:2] for line in f if line.strip()]
    except OSError as e:
        trouble(f"cannot read {cluster}/daemons: {e}")

    totals = {"CHUNK_WRITE": 0, "CHUNK_READ": 0, "CHUNK_COMMIT": 0}
    write_bytes = read_bytes = disk_write = chunks = inline_writes = inline_reads = 0
    for name, uri in daemons:
        host = uri.split("://", 1)[1].rsplit(":", 1)[0]
        try:
            with open(f"{cluster}/{name}.metrics-port") as f:
                port = int(f.read())
        except (OSError, ValueError) as e:
            trouble(f"{name}: no metrics port file: {e}")
        url = f"http://{host}:{port}/metrics"
        status, ctype, text = scrape(url)
        check(status == 200 and ctype.startswith("text/plain; version=0.0.4"),
              f"{name}: GET {url}: 200, text format 0.0.4", f"{status} {ctype!r}")
        status, _, _ = scrape(f"http://{host}:{port}/nothing")
        check(status == 404, f"{name}: another path: 404", f"{status}")
        try:
            families = {f.name: f for f in text_string_to_metric_families(text)}
        except Exception as e:  # the parser refuses the text: that is the verdict
            check(False, f"{name}: Prometheus' parser reads the text", repr(e))
            continue
        check(True, f"{name}: Prometheus' parser reads {len(families)} families")

        want = dict(COMMON, **(META if name == "meta" else {}))
        wrong = [f"{fam} ({families[fam].type if fam in families else 'missing'}, want {t})"
                 for fam, t in want.items()
                 if fam not in families or families[fam].type != t]
        check(not wrong, f"{name}: every family there with its type", ", ".join(wrong))
        if name != "meta":
            extra = [fam for fam in META if fam in families]
            check(not extra, f"{name}: no metadata service families", ", ".join(extra))

        version = [s.labels.get("version") for s in families["rdmafs_build_info"].samples]
        check(version and version[0], f"{name}: build_info has the version {version}")
        check((value(families, "rdmafs_uptime_seconds") or 0) > 0, f"{name}: uptime > 0")
        check(value(families, "rdmafs_daemon_state", state="up") == 1 and
              value(families, "rdmafs_daemon_registered") == 1,
              f"{name}: daemon_state up, registered")
        label = "rdma" if transport == "rdma" else "tcp"
        conns = value(families, "rdmafs_connections", transport=label)
        check(conns is not None and conns >= 1,
              f"{name}: connections{{transport=\"{label}\"}} >= 1 while a client holds one",
              f"{conns}")
        requests = by_op(families, "rdmafs_requests", "_total")
        errors = by_op(families, "rdmafs_request_errors", "_total")
        check(requests.get("DAEMON_STATS", 0) > 0, f"{name}: DAEMON_STATS counted",
              f"{requests}")
        check(errors.get("CHUNK_TRUNCATE", 0) > 0,
              f"{name}: the refused CHUNK_TRUNCATE counted as an error", f"{errors}")
        check((value(families, "rdmafs_capacity_bytes") or 0) > 0,
              f"{name}: capacity_bytes > 0")
        check((value(families, "rdmafs_workers") or 0) > 0, f"{name}: workers > 0")
        for op in totals:
            totals[op] += requests.get(op, 0)
        moved = by_op(families, "rdmafs_request_bytes", "_total")
        write_bytes += moved.get("CHUNK_WRITE", 0)
        read_bytes += moved.get("CHUNK_READ", 0)
        disk_write += value(families, "rdmafs_disk_seconds", op="write") or 0
        chunks += value(families, "rdmafs_chunks") or 0
        inline_writes += value(families, "rdmafs_inline_writes") or 0
        inline_reads += value(families, "rdmafs_inline_reads") or 0
        check_histograms(families, "rdmafs_request_duration_seconds", name)

        if name != "meta":
            continue
        meta_ops = by_op(families, "rdmafs_meta_requests", "_total")
        check(len(meta_ops) >= 25 and "OTHER" not in meta_ops,
              f"{name}: {len(meta_ops)} metadata methods, each by name",
              ", ".join(sorted(meta_ops)))
        unused = [op for op in META_OPS_USED if meta_ops.get(op, 0) <= 0]
        check(not unused, f"{name}: the metadata calls made are counted ({', '.join(META_OPS_USED)})",
              f"none counted for {unused}: {meta_ops}")
        meta_errors = by_op(families, "rdmafs_meta_request_errors", "_total")
        check(meta_errors.get("LOOKUP", 0) > 0,
              f"{name}: a LOOKUP of a missing name counted as an error", f"{meta_errors}")
        replies = by_op(families, "rdmafs_meta_reply_bytes", "_total")
        check(replies.get("GET_CLUSTER_MAP", 0) > 0, f"{name}: reply bytes counted")
        check_histograms(families, "rdmafs_meta_request_duration_seconds", name)
        # the mount's creates and removals came to the service's receiving thread
        batched = value(families, "rdmafs_requests_batched") or 0
        on_receipt = value(families, "rdmafs_requests_run_on_receipt") or 0
        check(0 < batched <= on_receipt,
              f"{name}: 0 < metadata changes batched <= requests run on receipt",
              f"{batched} {on_receipt}")
        commits = value(families, "rdmafs_meta_commits") or 0
        committed = value(families, "rdmafs_meta_committed_requests") or 0
        check(0 < commits <= committed, f"{name}: 0 < meta commits <= requests committed",
              f"{commits} {committed}")
        inodes = value(families, "rdmafs_meta_inodes") or 0
        check(inodes >= 4, f"{name}: meta_inodes {inodes} >= the 4 made")
        up = value(families, "rdmafs_cluster_daemons", state="up")
        check(up == len(daemons), f"{name}: cluster_daemons up == {len(daemons)}", f"{up}")
        check((value(families, "rdmafs_cluster_epoch") or 0) > 0, f"{name}: cluster epoch > 0")

    for op, n in totals.items():
        check(n > 0, f"all daemons: {op} requests > 0", f"{n}")
    # the two small files went in and came back out inside the messages
    check(inline_writes >= 2 and inline_reads >= 2,
          "all daemons: inline writes and inline reads >= 2 (the small files)",
          f"{inline_writes} {inline_reads}")
    check(write_bytes > 0 and read_bytes > 0,
          "all daemons: bytes moved by CHUNK_WRITE and CHUNK_READ > 0",
          f"{write_bytes} {read_bytes}")
    check(disk_write > 0, "all daemons: disk_seconds_total{op=\"write\"} > 0", f"{disk_write}")
    check(chunks > 0, "all daemons: chunks > 0", f"{chunks}")
    finish()


main()
