/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * /metrics: the daemon's counters in Prometheus' text exposition format
 * (version 0.0.4), served over HTTP by libmicrohttpd from a thread of its
 * own. A scrape reads what the workers count (atomics, the server's lock for
 * a moment, a read transaction of each LMDB store) and never waits for a
 * request; docs/metrics.md lists every metric.
 *
 * The socket is bound here, not by libmicrohttpd, so that a port in use is
 * reported with its errno and the port chosen for port 0 is known before
 * the first scrape.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "rdmafs.pb-c.h"
#include "rdmafs_names.h"
#include "daemon_i.h"
#include "meta.h"

#define METRICS_PATH "/metrics"
/* Prometheus scrapes one at a time; a few more for people with curl. */
#define METRICS_CONNECTION_LIMIT 16
#define METRICS_TIMEOUT_SEC	 10
#define CONTENT_TYPE		 "text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct metrics_params p; /* the strings are copies this owns */
	char *listen, *name, *uuid_text;
	struct MHD_Daemon *httpd;
	uint16_t port;
};

/* ---- the text format ---- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newline escaped, as the format wants. */
static void label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

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

/* Microseconds as seconds in decimal, exactly: 50 -> "0.00005", 1000000 -> "1". */
static const char *seconds_text(uint64_t us, char *out, size_t len)
{
	size_t n =
		(size_t)snprintf(out, len, "%" PRIu64 ".%06" PRIu64, us / 1000000u, us % 1000000u);

	while (n > 1 && out[n - 1] == '0')
		out[--n] = '\0';
	if (n && out[n - 1] == '.')
		out[--n] = '\0';
	return out;
}

/* One histogram of a family, under label op="@op": cumulative buckets, +Inf, sum, count. */
static void histogram(FILE *f, const char *name, const char *op, const struct rdmafs_latency *h)
{
	uint64_t cumulative = 0;
	char le[32];

	for (unsigned b = 0; b < RDMAFS_LATENCY_BOUNDS; b++) {
		cumulative += h->buckets[b];
		fprintf(f, "%s_bucket{op=\"%s\",le=\"%s\"} %" PRIu64 "\n", name, op,
			seconds_text(rdmafs_latency_bounds_us[b], le, sizeof(le)), cumulative);
	}
	cumulative += h->buckets[RDMAFS_LATENCY_BOUNDS];
	fprintf(f, "%s_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, op, cumulative);
	fprintf(f, "%s_sum{op=\"%s\"} %.9f\n", name, op, (double)h->sum_ns / 1e9);
	fprintf(f, "%s_count{op=\"%s\"} %" PRIu64 "\n", name, op, cumulative);
}

static void gauge(FILE *f, const char *name, const char *help, uint64_t value)
{
	family(f, name, "gauge", help);
	fprintf(f, "%s %" PRIu64 "\n", name, value);
}

static void counter(FILE *f, const char *name, const char *help, uint64_t value)
{
	family(f, name, "counter", help);
	fprintf(f, "%s %" PRIu64 "\n", name, value);
}

static void seconds_counter(FILE *f, const char *name, const char *label, const char *value,
			    uint64_t ns)
{
	fprintf(f, "%s{%s=\"%s\"} %.9f\n", name, label, value, (double)ns / 1e9);
}

/* ---- what is rendered ---- */

static void render_identity(const struct metrics_params *p, const struct server_stats *st, FILE *f)
{
	static const uint32_t states[] = {
		RDMAFS__DAEMON_STATE__DAEMON_STATE_UP,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED,
		RDMAFS__DAEMON_STATE__DAEMON_STATE_UNSPECIFIED,
	};
	uint32_t state = 0;
	bool registered = false;

	family(f, "rdmafs_build_info", "gauge", "Always 1; the label says the rdmafs version.");
	fprintf(f, "rdmafs_build_info{version=\"%s\"} 1\n", RDMAFS_VERSION);
	family(f, "rdmafs_daemon_info", "gauge",
	       "Always 1; the labels name this daemon and say whether it hosts the metadata "
	       "service.");
	fputs("rdmafs_daemon_info{name=\"", f);
	label_value(f, p->name ? p->name : "");
	fputs("\",uuid=\"", f);
	label_value(f, p->uuid_text ? p->uuid_text : "");
	fprintf(f, "\",metadata_service=\"%s\"} 1\n", p->meta ? "yes" : "no");
	fprintf(f,
		"# HELP rdmafs_uptime_seconds Seconds since the daemon started serving.\n"
		"# TYPE rdmafs_uptime_seconds gauge\n"
		"rdmafs_uptime_seconds %.3f\n",
		(double)st->uptime_ns / 1e9);

	if (p->agent)
		agent_state(p->agent, &state, &registered);
	family(f, "rdmafs_daemon_state", "gauge",
	       "1 for this daemon's state in the cluster map as the metadata service last "
	       "answered (unknown: not answered yet), 0 for the others.");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		fprintf(f, "rdmafs_daemon_state{state=\"%s\"} %d\n",
			rdmafs_daemon_state_name(states[i]), states[i] == state);
	gauge(f, "rdmafs_daemon_registered",
	      "1 while this daemon is registered with the metadata service and heartbeating.",
	      registered);
}

static void render_server(const struct server_stats *st, FILE *f)
{
	char op[40];

	family(f, "rdmafs_requests_total", "counter",
	       "Requests the daemon served, by method (OTHER: every method not named, the "
	       "metadata service's included; see rdmafs_meta_requests_total).");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		fprintf(f, "rdmafs_requests_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(st->ops[i].method, op, sizeof(op)), st->ops[i].count);
	family(f, "rdmafs_request_errors_total", "counter",
	       "Requests answered with an error, by method.");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		fprintf(f, "rdmafs_request_errors_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(st->ops[i].method, op, sizeof(op)), st->ops[i].errors);
	family(f, "rdmafs_request_bytes_total", "counter",
	       "Payload bytes moved by one-sided RDMA (READ for writes, WRITE for reads), by "
	       "method.");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		fprintf(f, "rdmafs_request_bytes_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(st->ops[i].method, op, sizeof(op)), st->ops[i].bytes);
	family(f, "rdmafs_request_duration_seconds", "histogram",
	       "Time from a request's arrival to its reply, queueing included, by method.");
	for (unsigned i = 0; i < SERVER_OPS; i++)
		histogram(f, "rdmafs_request_duration_seconds",
			  op_name(st->ops[i].method, op, sizeof(op)), &st->ops[i].latency);

	counter(f, "rdmafs_requests_busy_total",
		"Requests refused with EBUSY because the queue was full.", st->busy);
	counter(f, "rdmafs_checksum_errors_total",
		"Client payloads that failed their crc32c and stored blocks found bad.",
		st->checksum_errors);
	gauge(f, "rdmafs_requests_in_flight", "Requests a worker is handling now.", st->in_flight);
	gauge(f, "rdmafs_request_queue_length", "Requests waiting for a worker.", st->queued);
	gauge(f, "rdmafs_request_queue_capacity",
	      "Requests the queue holds before it refuses with EBUSY (queue_depth).",
	      st->queue_capacity);
	gauge(f, "rdmafs_workers", "Worker threads, each with its own io_uring.", st->workers);
	gauge(f, "rdmafs_rdma_bytes_in_flight", "Bytes of one-sided transfers under way.",
	      st->rdma_bytes_in_flight);

	family(f, "rdmafs_rdma_seconds_total", "counter",
	       "Time workers spent in one-sided transfers: read pulls a client's write, "
	       "write pushes a read's data.");
	seconds_counter(f, "rdmafs_rdma_seconds_total", "direction", "read", st->rdma_read_ns);
	seconds_counter(f, "rdmafs_rdma_seconds_total", "direction", "write", st->rdma_write_ns);
	family(f, "rdmafs_disk_seconds_total", "counter",
	       "Time workers spent in the chunk store: reads, writes and commits (fdatasync).");
	seconds_counter(f, "rdmafs_disk_seconds_total", "op", "read", st->disk_read_ns);
	seconds_counter(f, "rdmafs_disk_seconds_total", "op", "write", st->disk_write_ns);
	seconds_counter(f, "rdmafs_disk_seconds_total", "op", "commit", st->disk_commit_ns);

	family(f, "rdmafs_connections", "gauge",
	       "Connections the daemon serves now (accepted, past HELLO), by transport.");
	fprintf(f, "rdmafs_connections{transport=\"rdma\"} %" PRIu32 "\n", st->connections_verbs);
	fprintf(f, "rdmafs_connections{transport=\"tcp\"} %" PRIu32 "\n", st->connections_tcp);
	gauge(f, "rdmafs_connections_handshaking", "Connections accepted whose HELLO runs.",
	      st->connections_handshaking);

	gauge(f, "rdmafs_chunks", "Chunks in this daemon's store.", st->chunks);
	if (st->capacity_known) {
		gauge(f, "rdmafs_capacity_bytes", "Size of the data directory's file system.",
		      st->capacity_bytes);
		gauge(f, "rdmafs_free_bytes",
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
	family(f, "rdmafs_meta_requests_total", "counter",
	       "Calls of the metadata service, by method (the daemon's own registration and "
	       "heartbeats included).");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_requests_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)),
			rdmafs_latency_count(&ms[i].latency));
	family(f, "rdmafs_meta_request_errors_total", "counter",
	       "Calls of the metadata service answered with an error (ENOENT, EEXIST and the "
	       "like included), by method.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_request_errors_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)), ms[i].errors);
	family(f, "rdmafs_meta_request_bytes_total", "counter",
	       "Bytes of the metadata service's request bodies, by method.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_request_bytes_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)), ms[i].request_bytes);
	family(f, "rdmafs_meta_reply_bytes_total", "counter",
	       "Bytes of the metadata service's reply bodies, by method.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmafs_meta_reply_bytes_total{op=\"%s\"} %" PRIu64 "\n",
			op_name(ms[i].method, op, sizeof(op)), ms[i].reply_bytes);
	family(f, "rdmafs_meta_request_duration_seconds", "histogram",
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
	gauge(f, "rdmafs_meta_inodes", "Inodes the metadata service holds.", ss.inodes);
	gauge(f, "rdmafs_cluster_epoch", "Epoch of the cluster map.", ss.epoch);
	family(f, "rdmafs_cluster_daemons", "gauge",
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

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, char *text,
				  size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, mode);
	enum MHD_Result ret;

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **req_cls)
{
	static char not_found[] = "not found: the metrics are at " METRICS_PATH "\n";
	static char not_allowed[] = "only GET and HEAD\n";
	struct metrics *mx = cls;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
				  sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, METRICS_PATH) != 0)
		return reply_text(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1,
				  MHD_RESPMEM_PERSISTENT);
	f = open_memstream(&text, &len);
	if (!f)
		return MHD_NO;
	ret = metrics_render(&mx->p, f);
	if (fclose(f) || ret) {
		free(text);
		return MHD_NO;
	}
	return reply_text(conn, MHD_HTTP_OK, text, len, MHD_RESPMEM_MUST_FREE);
}

__attribute__((format(printf, 2, 0))) static void httpd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	rdmafs_log(RDMAFS_LOG_WARN, "metrics: %s", line);
}

/* Why bind() failed, in an operator's words. */
static const char *bind_hint(int err)
{
	switch (err) {
	case EADDRINUSE:
		return " (another program listens there: choose another metrics_listen port)";
	case EADDRNOTAVAIL:
		return " (no interface of this host has that address)";
	case EACCES:
		return " (a port below 1024 needs CAP_NET_BIND_SERVICE)";
	default:
		return "";
	}
}

/* A listening socket on @host:@port; the bound port in *@bound. */
static int bind_socket(const char *listen_text, const char *host, uint16_t port, int *out,
		       uint16_t *bound)
{
	const struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				       .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct sockaddr_storage ss;
	socklen_t ss_len = sizeof(ss);
	struct addrinfo *res;
	char service[8];
	int fd, one = 1, ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = getaddrinfo(strcmp(host, "*") == 0 ? NULL : host, service, &hints, &res);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "metrics: cannot resolve %s: %s", host,
			   ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&ss, &ss_len)) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "metrics: cannot listen on %s: %s%s", listen_text,
			   strerror(-ret), bind_hint(-ret));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return ret;
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						: ((struct sockaddr_in *)&ss)->sin_port);
	freeaddrinfo(res);
	*out = fd;
	return 0;
}

/* Writes @port to @path atomically (tmp + rename), for scripts and tests. */
static int write_port_file(const char *path, unsigned port)
{
	char tmp[4096];
	FILE *f;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "%u\n", port);
	if (fclose(f)) {
		unlink(tmp);
		return -EIO;
	}
	if (rename(tmp, path)) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

int metrics_start(const struct metrics_params *p, struct metrics **out)
{
	struct metrics *mx = calloc(1, sizeof(*mx));
	char host[256], why[160];
	uint16_t port;
	int fd = -1, ret;

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
	ret = config_split_host_port(p->listen, host, sizeof(host), &port, why, sizeof(why));
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "metrics_listen %s: %s", p->listen, why);
		goto err_free;
	}
	ret = bind_socket(p->listen, host, port, &fd, &mx->port);
	if (ret)
		goto err_free;
	mx->httpd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		answer, mx,
		/* first, so that no message goes to stderr around the log */
		MHD_OPTION_EXTERNAL_LOGGER, httpd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)METRICS_CONNECTION_LIMIT,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_TIMEOUT_SEC, MHD_OPTION_END);
	if (!mx->httpd) {
		rdmafs_log(RDMAFS_LOG_ERR, "metrics: cannot start the HTTP server on %s",
			   p->listen);
		ret = -EIO;
		goto err_close;
	}
	fd = -1; /* libmicrohttpd's now: it closes it when it stops */
	if (p->port_file) {
		ret = write_port_file(p->port_file, mx->port);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR, "cannot write metrics port file %s: %s",
				   p->port_file, strerror(-ret));
			goto err_stop;
		}
	}
	rdmafs_log(RDMAFS_LOG_INFO,
		   strchr(host, ':') ? "metrics at http://[%s]:%u" METRICS_PATH
				     : "metrics at http://%s:%u" METRICS_PATH,
		   host, mx->port);
	*out = mx;
	return 0;

err_stop:
	MHD_stop_daemon(mx->httpd);
err_close:
	if (fd >= 0)
		close(fd);
err_free:
	free(mx->uuid_text);
	free(mx->name);
	free(mx->listen);
	free(mx);
	return ret;
}

uint16_t metrics_port(const struct metrics *mx)
{
	return mx->port;
}

void metrics_stop(struct metrics *mx)
{
	if (!mx)
		return;
	MHD_stop_daemon(mx->httpd);
	free(mx->uuid_text);
	free(mx->name);
	free(mx->listen);
	free(mx);
}
