/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * /metrics: the daemon's counters in Prometheus' text exposition format
 * (version 0.0.4), served over HTTP by libmicrohttpd from a thread of its
 * own. A scrape reads what the workers count (atomics, the server's lock for
 * a moment, a read transaction of each LMDB store) and never waits for a
 * request; docs/metrics.md lists every metric. The text format and the
 * HTTP server are common/'s (rdmafs_prom.h), shared with rdmafs-fuse.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmafs.pb-c.h"
#include "rdmafs_prom.h"
#include "rdmafs_names.h"
#include "daemon_i.h"
#include "meta.h"

struct metrics {
	struct metrics_params p; /* the strings are copies this owns */
	char *listen, *name, *uuid_text;
	struct rdmafs_prom *server;
};

/* ---- the text format ---- */

/* "CHUNK_WRITE" for METHOD_CHUNK_WRITE; "OTHER" for METHOD_UNSPECIFIED. */
static const char *op_name(uint32_t method, char *out, size_t len)
{
	if (method == RDMAFS__METHOD__METHOD_UNSPECIFIED) {
		snprintf(out, len, "OTHER");
		return out;
	}
	rdmafs_method_name(method, out, len);
	for (char *c = out; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	return out;
}

/* One histogram of a family, under label op="@op". */
static void histogram(FILE *f, const char *name, const char *op, const struct rdmafs_latency *h)
{
	char labels[64];

	snprintf(labels, sizeof(labels), "op=\"%s\"", op);
	rdmafs_prom_histogram(f, name, labels, h);
}

static void seconds_counter(FILE *f, const char *name, const char *label, const char *value,
			    uint64_t ns)
{
	char labels[64];

	snprintf(labels, sizeof(labels), "%s=\"%s\"", label, value);
	rdmafs_prom_sample_seconds(f, name, labels, ns);
}

/* ---- what is rendered ---- */

static void render_identity(const struct metrics_params *p, const struct server_stats *st, FILE *f)
{
	static const uint32_t states[] = {
		RDMAFS__DAEMON_STATE__DAEMON_STATE_UP,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_UNSPECIFIED,
	};
	uint32_t state = 0;
	bool registered = false;

	rdmafs_prom_family(f, "rdmafs_build_info", "gauge",
			   "Always 1; the label says the rdmafs version.");
	fprintf(f, "rdmafs_build_info{version=\"%s\"} 1\n", RDMAFS_VERSION);
	rdmafs_prom_family(
		f, "rdmafs_daemon_info", "gauge",
		"Always 1; the labels name this daemon and say whether it hosts the metadata "
		"service.");
	fputs("rdmafs_daemon_info{name=\"", f);
	rdmafs_prom_label_value(f, p->name ? p->name : "");
	fputs("\",uuid=\"", f);
	rdmafs_prom_label_value(f, p->uuid_text ? p->uuid_text : "");
	fprintf(f, "\",metadata_service=\"%s\"} 1\n", p->meta ? "yes" : "no");
	fprintf(f,
		"# HELP rdmafs_uptime_seconds Seconds since the daemon started serving.\n"
		"# TYPE rdmafs_uptime_seconds gauge\n"
		"rdmafs_uptime_seconds %.3f\n",
		(double)st->uptime_ns / 1e9);

	if (p->agent)
		agent_state(p->agent, &state, &registered);
	rdmafs_prom_family(
		f, "rdmafs_daemon_state", "gauge",
		"1 for this daemon's state in the cluster map as the metadata service last "
		"answered (unknown: not answered yet), 0 for the others.");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		fprintf(f, "rdmafs_daemon_state{state=\"%s\"} %d\n",
			rdmafs_daemon_state_name(states[i]), states[i] == state);
	rdmafs_prom_gauge(
		f, "rdmafs_daemon_registered",
		"1 while this daemon is registered with the metadata service and heartbeating.",
		registered);
}

static void render_server(const struct server_stats *st, FILE *f)
{
	char op[40];

	rdmafs_prom_family(
		f, "rdmafs_requests_total", "counter",
		"Requests the daemon served, by method (OTHER: every method not named, the "
		"metadata service's included; see rdmafs_meta_requests_total).");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		fprintf(f, "rdmafs_requests_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(st->ops[i].method, op, sizeof(op)), st->ops[i].count);
	rdmafs_prom_family(f, "rdmafs_request_errors_total", "counter",
			   "Requests answered with an error, by method.");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		fprintf(f, "rdmafs_request_errors_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(st->ops[i].method, op, sizeof(op)), st->ops[i].errors);
	rdmafs_prom_family(
		f, "rdmafs_request_bytes_total", "counter",
		"Payload bytes moved by one-sided RDMA (READ for writes, WRITE for reads), by "
		"method.");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		fprintf(f, "rdmafs_request_bytes_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(st->ops[i].method, op, sizeof(op)), st->ops[i].bytes);
	rdmafs_prom_family(
		f, "rdmafs_request_duration_seconds", "histogram",
		"Time from a request's arrival to its reply, queueing included, by method.");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		histogram(f, "rdmafs_request_duration_seconds",
			  op_name(st->ops[i].method, op, sizeof(op)), &st->ops[i].latency);

	rdmafs_prom_counter(f, "rdmafs_requests_busy_total",
			    "Requests refused with EBUSY because the queue was full.", st->busy);
	rdmafs_prom_counter(f, "rdmafs_checksum_errors_total",
			    "Client payloads that failed their crc32c and stored blocks found bad.",
			    st->checksum_errors);
	rdmafs_prom_counter(f, "rdmafs_resync_chunks_total",
			    "Chunks copied whole to a daemon of their chain that missed writes.",
			    st->resync_pushed);
	rdmafs_prom_counter(f, "rdmafs_resync_failures_total",
			    "Such copies that failed (each is tried again).", st->resync_failed);
	rdmafs_prom_gauge(
		f, "rdmafs_missed_records",
		"Writes stored here that a daemon of their chain lacks (one per chunk and "
		"daemon), kept until the resync has copied the chunk there.",
		st->missed_records);
	rdmafs_prom_gauge(f, "rdmafs_daemon_map_epoch",
			  "Epoch of the cluster map this daemon checks chains and skips against.",
			  st->map_epoch);
	rdmafs_prom_gauge(f, "rdmafs_requests_in_flight", "Requests a worker is handling now.",
			  st->in_flight);
	rdmafs_prom_gauge(f, "rdmafs_request_queue_length", "Requests waiting for a worker.",
			  st->queued);
	rdmafs_prom_gauge(f, "rdmafs_request_queue_capacity",
			  "Requests the queue holds before it refuses with EBUSY (queue_depth).",
			  st->queue_capacity);
	rdmafs_prom_gauge(f, "rdmafs_workers", "Worker threads, each with its own io_uring.",
			  st->workers);
	rdmafs_prom_gauge(f, "rdmafs_rdma_bytes_in_flight",
			  "Bytes of one-sided transfers under way.", st->rdma_bytes_in_flight);
	rdmafs_prom_counter(f, "rdmafs_inline_writes_total",
			    "Small writes whose payload came inside the request (no RDMA READ).",
			    st->inline_writes);
	rdmafs_prom_counter(f, "rdmafs_inline_reads_total",
			    "Small reads answered with the data inside the reply (no RDMA WRITE).",
			    st->inline_reads);
	rdmafs_prom_counter(f, "rdmafs_pending_reads_total",
			    "Blocks read back to settle the checksums a short overwrite left "
			    "pending (one written before a restart, through a file closed since, "
			    "settled by an O_DIRECT write or after a failed write).",
			    st->pending_reads);
	rdmafs_prom_counter(f, "rdmafs_requests_run_on_receipt_total",
			    "Requests run by the thread that received them, with no hand-off.",
			    st->run_on_receipt);
	rdmafs_prom_counter(
		f, "rdmafs_requests_handed_on_total",
		"Of those, chunk requests handed to a worker: RDMA, O_SYNC, a cold block "
		"the fetcher could not take.",
		st->handed_on);
	rdmafs_prom_counter(f, "rdmafs_requests_fetched_total",
			    "Of those, requests that found a block out of the page cache, "
			    "fetched by the receiving thread's own io_uring, not handed on.",
			    st->fetched);
	rdmafs_prom_counter(f, "rdmafs_requests_batched_total",
			    "Of those, metadata changes held to the end of their batch of "
			    "requests and committed together there.",
			    st->batched);
	rdmafs_prom_counter(f, "rdmafs_commits_deferred_total",
			    "Commits at a file's close answered before their flush "
			    "(data_sync = batch).",
			    st->commits_deferred);
	rdmafs_prom_counter(f, "rdmafs_data_flushes_total",
			    "Flushes of the data's file system that made deferred commits durable.",
			    st->data_flushes);
	rdmafs_prom_counter(f, "rdmafs_data_flush_errors_total",
			    "Of those, flushes that failed (logged): closed files' data may not be "
			    "on disk.",
			    st->data_flush_errors);

	rdmafs_prom_family(
		f, "rdmafs_rdma_seconds_total", "counter",
		"Time workers spent in one-sided transfers: read pulls a client's write, "
		"write pushes a read's data.");
	seconds_counter(f, "rdmafs_rdma_seconds_total", "direction", "read", st->rdma_read_ns);
	seconds_counter(f, "rdmafs_rdma_seconds_total", "direction", "write", st->rdma_write_ns);
	rdmafs_prom_family(
		f, "rdmafs_disk_seconds_total", "counter",
		"Time workers spent in the chunk store: reads, writes and commits (fdatasync).");
	seconds_counter(f, "rdmafs_disk_seconds_total", "op", "read", st->disk_read_ns);
	seconds_counter(f, "rdmafs_disk_seconds_total", "op", "write", st->disk_write_ns);
	seconds_counter(f, "rdmafs_disk_seconds_total", "op", "commit", st->disk_commit_ns);

	rdmafs_prom_family(
		f, "rdmafs_connections", "gauge",
		"Connections the daemon serves now (accepted, past HELLO), by transport.");
	fprintf(f, "rdmafs_connections{transport=\"rdma\"} %" PRIu32 "\n", st->connections_verbs);
	fprintf(f, "rdmafs_connections{transport=\"tcp\"} %" PRIu32 "\n", st->connections_tcp);
	rdmafs_prom_gauge(f, "rdmafs_connections_handshaking",
			  "Connections accepted whose HELLO runs.", st->connections_handshaking);

	rdmafs_prom_gauge(f, "rdmafs_chunks", "Chunks in this daemon's store.", st->chunks);
	if (st->capacity_known) {
		rdmafs_prom_gauge(f, "rdmafs_capacity_bytes",
				  "Size of the data directory's file system.", st->capacity_bytes);
		rdmafs_prom_gauge(
			f, "rdmafs_free_bytes",
			"Bytes of the data directory's file system available to the daemon.",
			st->free_bytes);
	}
}

static void render_meta(struct meta *m, FILE *f)
{
	static const uint32_t states[] = {
		RDMAFS__DAEMON_STATE__DAEMON_STATE_UP,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING,
	};
	struct meta_method_stats *ms = calloc(META_METHODS_MAX, sizeof(*ms));
	struct meta_store_stats ss;
	size_t n;
	char op[40];

	if (!ms) {
		fputs("# the metadata service's counters: out of memory\n", f);
		return;
	}
	n = meta_method_stats(m, ms, META_METHODS_MAX);
	rdmafs_prom_family(
		f, "rdmafs_meta_requests_total", "counter",
		"Calls of the metadata service, by method (the daemon's own registration and "
		"heartbeats included).");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_requests_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)),
			rdmafs_latency_count(&ms[i].latency));
	rdmafs_prom_family(
		f, "rdmafs_meta_request_errors_total", "counter",
		"Calls of the metadata service answered with an error (ENOENT, EEXIST and the "
		"like included), by method.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_request_errors_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)), ms[i].errors);
	rdmafs_prom_family(f, "rdmafs_meta_request_bytes_total", "counter",
			   "Bytes of the metadata service's request bodies, by method.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_request_bytes_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)), ms[i].request_bytes);
	rdmafs_prom_family(f, "rdmafs_meta_reply_bytes_total", "counter",
			   "Bytes of the metadata service's reply bodies, by method.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_reply_bytes_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)), ms[i].reply_bytes);
	rdmafs_prom_family(
		f, "rdmafs_meta_request_duration_seconds", "histogram",
		"Time the metadata service took for a call (its LMDB transaction included), "
		"by method.");
	for (size_t i = 0; i < n; i++)
		histogram(f, "rdmafs_meta_request_duration_seconds",
			  op_name(ms[i].method, op, sizeof(op)), &ms[i].latency);
	free(ms);

	if (meta_store_stats(m, &ss)) {
		fputs("# the metadata store could not be read\n", f);
		return;
	}
	rdmafs_prom_gauge(f, "rdmafs_meta_inodes", "Inodes the metadata service holds.", ss.inodes);
	rdmafs_prom_counter(f, "rdmafs_meta_commits_total",
			    "Commits (one flush each) of the metadata service's write requests.",
			    ss.commit_groups);
	rdmafs_prom_counter(f, "rdmafs_meta_committed_requests_total",
			    "Write requests committed; over rdmafs_meta_commits_total, the mean "
			    "group size.",
			    ss.grouped_requests);
	rdmafs_prom_gauge(f, "rdmafs_cluster_epoch", "Epoch of the cluster map.", ss.epoch);
	rdmafs_prom_family(f, "rdmafs_cluster_daemons", "gauge",
			   "Storage daemons in the cluster map, by state.");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		fprintf(f, "rdmafs_cluster_daemons{state=\"%s\"} %" PRIu32 "\n",
			rdmafs_daemon_state_name(states[i]), ss.daemons[states[i]]);
}

int metrics_render(const struct metrics_params *p, FILE *f)
{
	struct server_stats *st = malloc(sizeof(*st));

	if (!st)
		return -ENOMEM;
	server_stats_get(p->server, st);
	render_identity(p, st, f);
	render_server(st, f);
	free(st);
	if (p->meta)
		render_meta(p->meta, f);
	return fflush(f) || ferror(f) ? -EIO : 0;
}

/* ---- HTTP ---- */

static int render_cb(void *arg, FILE *f)
{
	struct metrics *mx = arg;

	return metrics_render(&mx->p, f);
}

int metrics_start(const struct metrics_params *p, struct metrics **out)
{
	struct metrics *mx = calloc(1, sizeof(*mx));
	struct rdmafs_prom_options o = {
		.listen = p->listen,
		.port_file = p->port_file,
		.setting = "metrics_listen",
		.render = render_cb,
	};
	int ret;

	if (!mx)
		return -ENOMEM;
	mx->p = *p;
	mx->listen = strdup(p->listen);
	mx->name = p->name ? strdup(p->name) : NULL;
	mx->uuid_text = p->uuid_text ? strdup(p->uuid_text) : NULL;
	if (!mx->listen || (p->name && !mx->name) || (p->uuid_text && !mx->uuid_text)) {
		ret = -ENOMEM;
		goto err_free;
	}
	mx->p.listen = mx->listen;
	mx->p.name = mx->name;
	mx->p.uuid_text = mx->uuid_text;
	mx->p.port_file = NULL;
	o.arg = mx;
	ret = rdmafs_prom_start(&o, &mx->server);
	if (ret)
		goto err_free;
	*out = mx;
	return 0;

err_free:
	free(mx->uuid_text);
	free(mx->name);
	free(mx->listen);
	free(mx);
	return ret;
}

void metrics_stop(struct metrics *mx)
{
	if (!mx)
		return;
	rdmafs_prom_stop(mx->server);
	free(mx->uuid_text);
	free(mx->name);
	free(mx->listen);
	free(mx);
}
