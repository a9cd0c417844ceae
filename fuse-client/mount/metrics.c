// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rdmafs-fuse: /metrics (mount_i.h). What the mount's operations counted
 * (stats.c) and what its client core counted (rfs_stats_get()), in
 * Prometheus' text format, served by librdmafs_prom (rdmafs_prom.h) from a
 * thread of libmicrohttpd's own. A scrape reads atomics and takes the
 * cluster map's read lock for a moment; no request waits for it.
 * docs/metrics.md lists every metric.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmafs_prom.h"
#include "mount_i.h"

struct mount_metrics {
	struct fs *fs;
	char *mountpoint, *meta_uri;
	uint64_t started_ns;
	struct rdmafs_prom *server;
};

static const char *const target_names[RFS_TARGETS] = {
	[RFS_TARGET_META] = "meta",
	[RFS_TARGET_STORAGE] = "storage",
};

static uint64_t load(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static void render_identity(const struct mount_metrics *m, FILE *f)
{
	rdmafs_prom_family(f, "rdmafs_client_info", "gauge",
			   "Always 1; the labels say the rdmafs version, the mount point and the "
			   "metadata service.");
	fprintf(f, "rdmafs_client_info{version=\"%s\",mountpoint=\"", RDMAFS_VERSION);
	rdmafs_prom_label_value(f, m->mountpoint);
	fputs("\",meta=\"", f);
	rdmafs_prom_label_value(f, m->meta_uri);
	fputs("\"} 1\n", f);
	fprintf(f,
		"# HELP rdmafs_client_uptime_seconds Seconds since the mount started serving.\n"
		"# TYPE rdmafs_client_uptime_seconds gauge\n"
		"rdmafs_client_uptime_seconds %.3f\n",
		(double)(rdmafs_now_ns() - m->started_ns) / 1e9);
}

static void render_fuse(const struct mount_stats *st, FILE *f)
{
	struct rdmafs_latency *lat = calloc(MOUNT_OPS, sizeof(*lat));
	char labels[128];

	if (!lat) {
		fputs("# the mount's counters: out of memory\n", f);
		return;
	}
	/* one copy, so that requests and the histogram's _count agree */
	for (unsigned op = 0; op < MOUNT_OPS; op++)
		rdmafs_latency_read(&st->ops[op].latency, &lat[op]);

	rdmafs_prom_family(f, "rdmafs_client_fuse_requests_total", "counter",
			   "FUSE requests the mount answered, by operation.");
	for (unsigned op = 0; op < MOUNT_OPS; op++) {
		snprintf(labels, sizeof(labels), "op=\"%s\"", mount_op_name(op));
		rdmafs_prom_sample(f, "rdmafs_client_fuse_requests_total", labels,
				   rdmafs_latency_count(&lat[op]));
	}
	rdmafs_prom_family(f, "rdmafs_client_fuse_errors_total", "counter",
			   "FUSE requests answered with an error, by operation and errno (only "
			   "those that occurred).");
	for (unsigned op = 0; op < MOUNT_OPS; op++) {
		for (unsigned e = 0; e < MOUNT_ERRNOS; e++) {
			uint64_t n = load(&st->ops[op].errors[e]);

			if (!n)
				continue;
			snprintf(labels, sizeof(labels), "op=\"%s\",errno=\"%s\"",
				 mount_op_name(op), mount_errno_name(e));
			rdmafs_prom_sample(f, "rdmafs_client_fuse_errors_total", labels, n);
		}
	}
	rdmafs_prom_family(f, "rdmafs_client_fuse_request_duration_seconds", "histogram",
			   "Time from a FUSE request's arrival in the mount to its reply, by "
			   "operation.");
	for (unsigned op = 0; op < MOUNT_OPS; op++) {
		snprintf(labels, sizeof(labels), "op=\"%s\"", mount_op_name(op));
		rdmafs_prom_histogram(f, "rdmafs_client_fuse_request_duration_seconds", labels,
				      &lat[op]);
	}
	free(lat);
	rdmafs_prom_gauge(f, "rdmafs_client_fuse_requests_in_flight",
			  "FUSE requests the mount is handling now.", load(&st->in_flight));
	rdmafs_prom_family(f, "rdmafs_client_fuse_bytes_total", "counter",
			   "File data answered to reads and taken from writes.");
	rdmafs_prom_sample(f, "rdmafs_client_fuse_bytes_total", "op=\"read\"",
			   load(&st->read_bytes));
	rdmafs_prom_sample(f, "rdmafs_client_fuse_bytes_total", "op=\"write\"",
			   load(&st->write_bytes));
	rdmafs_prom_counter(f, "rdmafs_client_dir_attr_hits_total",
			    "GETATTRs of a directory answered with the attributes this mount's "
			    "last change of its entries left, with no round trip.",
			    load(&st->dir_attr_hits));
	rdmafs_prom_counter(f, "rdmafs_client_background_unlinks_total",
			    "Unlinks answered at once and sent to the service in the background "
			    "(async_dirops).",
			    load(&st->bg_unlinks));
	rdmafs_prom_counter(f, "rdmafs_client_background_waits_total",
			    "Requests that waited for the background unlinks before they ran.",
			    load(&st->bg_waits));
	rdmafs_prom_counter(f, "rdmafs_client_background_errors_total",
			    "Background unlinks that failed (ENOENT included: another mount "
			    "removed the name first).",
			    load(&st->bg_errors));
}

typedef uint64_t (*method_value_fn)(const struct rfs_method_stats *ms);
typedef uint64_t (*target_value_fn)(const struct rfs_target_stats *ts);

static uint64_t method_requests(const struct rfs_method_stats *ms)
{
	return ms->requests;
}

static uint64_t method_errors(const struct rfs_method_stats *ms)
{
	return ms->errors;
}

static uint64_t method_timeouts(const struct rfs_method_stats *ms)
{
	return ms->timeouts;
}

static uint64_t target_retries(const struct rfs_target_stats *ts)
{
	return ts->retries;
}

static uint64_t target_connects(const struct rfs_target_stats *ts)
{
	return ts->connects;
}

static uint64_t target_reconnects(const struct rfs_target_stats *ts)
{
	return ts->reconnects;
}

static uint64_t target_connect_failures(const struct rfs_target_stats *ts)
{
	return ts->connect_failures;
}

/* target="meta",op="LOOKUP" */
static const char *method_labels(const struct rfs_method_stats *ms, char *out, size_t len)
{
	snprintf(out, len, "target=\"%s\",op=\"%s\"", target_names[ms->target], ms->name);
	return out;
}

/* A counter family with a sample per method of @rs, the value @value gives. */
static void per_method(FILE *f, const struct rfs_stats *rs, const char *name, const char *help,
		       method_value_fn value)
{
	char labels[96];

	rdmafs_prom_family(f, name, "counter", help);
	for (unsigned i = 0; i < rs->method_count; i++)
		rdmafs_prom_sample(f, name, method_labels(&rs->methods[i], labels, sizeof(labels)),
				   value(&rs->methods[i]));
}

/* A counter family with a sample per target of @rs, the value @value gives. */
static void per_target(FILE *f, const struct rfs_stats *rs, const char *name, const char *help,
		       target_value_fn value)
{
	char labels[32];

	rdmafs_prom_family(f, name, "counter", help);
	for (unsigned t = 0; t < RFS_TARGETS; t++) {
		snprintf(labels, sizeof(labels), "target=\"%s\"", target_names[t]);
		rdmafs_prom_sample(f, name, labels, value(&rs->targets[t]));
	}
}

static void render_core(const struct rfs_stats *rs, FILE *f)
{
	char labels[96];

	per_method(f, rs, "rdmafs_client_rpc_requests_total",
		   "RPCs the client core made, by target (meta: the metadata service, storage: "
		   "the storage daemons) and method; a retry counts again.",
		   method_requests);
	per_method(f, rs, "rdmafs_client_rpc_errors_total",
		   "RPCs that failed, by target and method: an error the peer answered (ENOENT "
		   "of a lookup too) or a transport error.",
		   method_errors);
	per_method(f, rs, "rdmafs_client_rpc_timeouts_total",
		   "RPCs that got no answer within the call timeout, by target and method.",
		   method_timeouts);
	rdmafs_prom_family(f, "rdmafs_client_rpc_duration_seconds", "histogram",
			   "Time from sending an RPC to its answer or failure, by target and "
			   "method.");
	for (unsigned i = 0; i < rs->method_count; i++)
		rdmafs_prom_histogram(f, "rdmafs_client_rpc_duration_seconds",
				      method_labels(&rs->methods[i], labels, sizeof(labels)),
				      &rs->methods[i].latency);
	per_target(f, rs, "rdmafs_client_rpc_retries_total",
		   "RPCs made again after their connection broke or the daemon was busy, by "
		   "target.",
		   target_retries);
	per_target(f, rs, "rdmafs_client_connects_total",
		   "Connections made, the first to each peer included, by target.",
		   target_connects);
	per_target(f, rs, "rdmafs_client_reconnects_total",
		   "Connections made to a peer the mount was connected to before, by target.",
		   target_reconnects);
	per_target(f, rs, "rdmafs_client_connect_failures_total",
		   "Connection attempts that failed, by target.", target_connect_failures);

	rdmafs_prom_gauge(f, "rdmafs_client_cluster_map_epoch",
			  "Epoch of the cluster map the mount holds.", rs->map_epoch);
	rdmafs_prom_counter(f, "rdmafs_client_cluster_map_fetches_total",
			    "Cluster maps fetched from the metadata service (polls included).",
			    rs->map_fetches);
	rdmafs_prom_counter(f, "rdmafs_client_cluster_map_changes_total",
			    "Cluster maps fetched that were newer than the one held.",
			    rs->map_changes);
	rdmafs_prom_counter(f, "rdmafs_client_layout_refetches_total",
			    "File layouts fetched again after a daemon refused the one used (a "
			    "drain moves the file).",
			    rs->layout_refetches);
	rdmafs_prom_family(f, "rdmafs_client_data_bytes_total", "counter",
			   "File data moved between the mount and the storage daemons.");
	rdmafs_prom_sample(f, "rdmafs_client_data_bytes_total", "direction=\"read\"",
			   rs->read_bytes);
	rdmafs_prom_sample(f, "rdmafs_client_data_bytes_total", "direction=\"write\"",
			   rs->write_bytes);
	rdmafs_prom_gauge(f, "rdmafs_client_buffers",
			  "Registered buffers of the pool data moves through.", rs->buffers);
	rdmafs_prom_counter(f, "rdmafs_client_buffer_waits_total",
			    "Data calls that waited for a free registered buffer.",
			    rs->buffer_waits);
	rdmafs_prom_family(f, "rdmafs_client_buffer_wait_seconds_total", "counter",
			   "Time data calls waited for a free registered buffer.");
	rdmafs_prom_sample_seconds(f, "rdmafs_client_buffer_wait_seconds_total", NULL,
				   rs->buffer_wait_ns);
	rdmafs_prom_counter(f, "rdmafs_client_buffer_timeouts_total",
			    "Waits for a buffer that ended without one (the call failed).",
			    rs->buffer_timeouts);
	rdmafs_prom_counter(f, "rdmafs_client_replica_moves_total",
			    "Chunk reads a copy failed, asked of the next copy of the chunk.",
			    rs->replica_moves);
	rdmafs_prom_counter(f, "rdmafs_client_replica_waits_total",
			    "Replicated reads and writes redone after waiting for their chain to "
			    "settle.",
			    rs->replica_waits);
}

static int render(void *arg, FILE *f)
{
	struct mount_metrics *m = arg;
	struct rfs_stats *rs = malloc(sizeof(*rs));

	if (!rs)
		return -ENOMEM;
	rfs_stats_get(m->fs->rfs, rs);
	render_identity(m, f);
	render_fuse(&m->fs->stats, f);
	render_core(rs, f);
	free(rs);
	return 0;
}

int mount_metrics_check(const char *listen, char *why, size_t why_len)
{
	char host[256];
	uint16_t port;

	if (rdmafs_prom_parse_listen(listen, host, sizeof(host), &port)) {
		snprintf(why, why_len,
			 "%s: must be HOST:PORT ([ADDR]:PORT for IPv6) with PORT 0..65535 (0: any "
			 "free port)",
			 listen);
		return -EINVAL;
	}
	return 0;
}

int mount_metrics_start(struct fs *fs, const struct mount_metrics_params *p,
			struct mount_metrics **out)
{
	struct mount_metrics *m = calloc(1, sizeof(*m));
	struct rdmafs_prom_options o = {
		.listen = p->listen,
		.port_file = p->port_file,
		.setting = "metrics=",
		.render = render,
	};
	int ret;

	if (!m)
		return -ENOMEM;
	m->fs = fs;
	m->started_ns = rdmafs_now_ns();
	m->mountpoint = strdup(p->mountpoint);
	m->meta_uri = strdup(p->meta_uri);
	if (!m->mountpoint || !m->meta_uri) {
		ret = -ENOMEM;
		goto err_free;
	}
	o.arg = m;
	ret = rdmafs_prom_start(&o, &m->server);
	if (ret)
		goto err_free;
	*out = m;
	return 0;

err_free:
	free(m->meta_uri);
	free(m->mountpoint);
	free(m);
	return ret;
}

void mount_metrics_stop(struct mount_metrics *m)
{
	if (!m)
		return;
	rdmafs_prom_stop(m->server);
	free(m->meta_uri);
	free(m->mountpoint);
	free(m);
}
