// SPDX-License-Identifier: GPL-2.0-or-later
/* Prometheus' text format and /metrics over libmicrohttpd; see rdmafs_prom.h. */
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

#include "xprt.h"
#include "rdmafs_common.h"
#include "rdmafs_prom.h"

#define METRICS_PATH "/metrics"
/* Prometheus scrapes one at a time; a few more for people with curl. */
#define METRICS_CONNECTION_LIMIT 16
#define METRICS_TIMEOUT_SEC	 10
#define CONTENT_TYPE		 "text/plain; version=0.0.4; charset=utf-8"

struct rdmafs_prom {
	struct MHD_Daemon *httpd;
	rdmafs_prom_render_cb render;
	void *arg;
	uint16_t port;
};

/* ---- the text format ---- */

void rdmafs_prom_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rdmafs_prom_label_value(FILE *f, const char *value)
{
	for (const char *v = value; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* "{labels}", or nothing for no labels. */
static void labels_text(FILE *f, const char *labels)
{
	if (labels && *labels)
		fprintf(f, "{%s}", labels);
}

void rdmafs_prom_sample(FILE *f, const char *name, const char *labels, uint64_t value)
{
	fputs(name, f);
	labels_text(f, labels);
	fprintf(f, " %" PRIu64 "\n", value);
}

void rdmafs_prom_sample_seconds(FILE *f, const char *name, const char *labels, uint64_t ns)
{
	fputs(name, f);
	labels_text(f, labels);
	fprintf(f, " %.9f\n", (double)ns / 1e9);
}

void rdmafs_prom_counter(FILE *f, const char *name, const char *help, uint64_t value)
{
	rdmafs_prom_family(f, name, "counter", help);
	rdmafs_prom_sample(f, name, NULL, value);
}

void rdmafs_prom_gauge(FILE *f, const char *name, const char *help, uint64_t value)
{
	rdmafs_prom_family(f, name, "gauge", help);
	rdmafs_prom_sample(f, name, NULL, value);
}

const char *rdmafs_prom_seconds_text(uint64_t us, char *out, size_t len)
{
	size_t n =
		(size_t)snprintf(out, len, "%" PRIu64 ".%06" PRIu64, us / 1000000u, us % 1000000u);

	while (n > 1 && out[n - 1] == '0')
		out[--n] = '\0';
	if (n && out[n - 1] == '.')
		out[--n] = '\0';
	return out;
}

void rdmafs_prom_histogram(FILE *f, const char *name, const char *labels,
			   const struct rdmafs_latency *h)
{
	const char *comma = labels && *labels ? "," : "";
	uint64_t cumulative = 0;
	char le[32];

	if (!labels)
		labels = "";
	for (unsigned b = 0; b < RDMAFS_LATENCY_BOUNDS; b++) {
		cumulative += h->buckets[b];
		fprintf(f, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, labels, comma,
			rdmafs_prom_seconds_text(rdmafs_latency_bounds_us[b], le, sizeof(le)),
			cumulative);
	}
	cumulative += h->buckets[RDMAFS_LATENCY_BOUNDS];
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, comma, cumulative);
	fprintf(f, "%s_sum", name);
	labels_text(f, labels);
	fprintf(f, " %.9f\n", (double)h->sum_ns / 1e9);
	fprintf(f, "%s_count", name);
	labels_text(f, labels);
	fprintf(f, " %" PRIu64 "\n", cumulative);
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
	struct rdmafs_prom *p = cls;
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
	ret = p->render(p->arg, f);
	if (!ret && (fflush(f) || ferror(f)))
		ret = -EIO;
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

int rdmafs_prom_parse_listen(const char *listen, char *host, size_t host_size, uint16_t *port)
{
	enum xprt_kind kind;

	/* the transport's parser reads a bare HOST:PORT, brackets for IPv6 included */
	if (strstr(listen, "://") || xprt_uri_parse(listen, &kind, host, host_size, port))
		return -EINVAL;
	return 0;
}

/* Why bind() failed, in an operator's words, into @buf. */
static const char *bind_hint(int err, const char *setting, char *buf, size_t len)
{
	switch (err) {
	case EADDRINUSE:
		snprintf(buf, len, " (another program listens there: choose another %s port)",
			 setting);
		break;
	case EADDRNOTAVAIL:
		snprintf(buf, len, " (no interface of this host has that address)");
		break;
	case EACCES:
		snprintf(buf, len, " (a port below 1024 needs CAP_NET_BIND_SERVICE)");
		break;
	default:
		buf[0] = '\0';
		break;
	}
	return buf;
}

/* A listening socket on @host:@port; the bound port in *@bound. */
static int bind_socket(const struct rdmafs_prom_options *o, const char *host, uint16_t port,
		       int *out, uint16_t *bound)
{
	const struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				       .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct sockaddr_storage ss;
	socklen_t ss_len = sizeof(ss);
	struct addrinfo *res;
	char service[8], hint[128];
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
		rdmafs_log(RDMAFS_LOG_ERR, "metrics: cannot listen on %s: %s%s", o->listen,
			   strerror(-ret), bind_hint(-ret, o->setting, hint, sizeof(hint)));
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

int rdmafs_prom_start(const struct rdmafs_prom_options *o, struct rdmafs_prom **out)
{
	struct rdmafs_prom *p;
	char host[256];
	uint16_t port;
	int fd = -1, ret;

	if (rdmafs_prom_parse_listen(o->listen, host, sizeof(host), &port)) {
		rdmafs_log(RDMAFS_LOG_ERR,
			   "%s %s: must be HOST:PORT ([ADDR]:PORT for IPv6) with PORT 0..65535 "
			   "(0: any free port)",
			   o->setting, o->listen);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->render = o->render;
	p->arg = o->arg;
	ret = bind_socket(o, host, port, &fd, &p->port);
	if (ret)
		goto err_free;
	p->httpd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		answer, p,
		/* first, so that no message goes to stderr around the log */
		MHD_OPTION_EXTERNAL_LOGGER, httpd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)METRICS_CONNECTION_LIMIT,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_TIMEOUT_SEC, MHD_OPTION_END);
	if (!p->httpd) {
		rdmafs_log(RDMAFS_LOG_ERR, "metrics: cannot start the HTTP server on %s",
			   o->listen);
		ret = -EIO;
		goto err_close;
	}
	fd = -1; /* libmicrohttpd's now: it closes it when it stops */
	if (o->port_file) {
		ret = write_port_file(o->port_file, p->port);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR, "cannot write metrics port file %s: %s",
				   o->port_file, strerror(-ret));
			goto err_stop;
		}
	}
	rdmafs_log(RDMAFS_LOG_INFO,
		   strchr(host, ':') ? "metrics at http://[%s]:%u" METRICS_PATH
				     : "metrics at http://%s:%u" METRICS_PATH,
		   host, p->port);
	*out = p;
	return 0;

err_stop:
	MHD_stop_daemon(p->httpd);
err_close:
	if (fd >= 0)
		close(fd);
err_free:
	free(p);
	return ret;
}

uint16_t rdmafs_prom_port(const struct rdmafs_prom *p)
{
	return p->port;
}

void rdmafs_prom_stop(struct rdmafs_prom *p)
{
	if (!p)
		return;
	MHD_stop_daemon(p->httpd);
	free(p);
}
