/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bench-transport: RPC latency and rate, and daemon-initiated bulk READ/WRITE
 * bandwidth through libxprt, each beside its baseline measured in the same run:
 *
 *   tcp   (default): raw TCP socket ping-pong and stream on loopback
 *   verbs (--verbs): perftest (ib_send_lat, ib_read_bw, ib_write_bw) on the
 *                    same RDMA device; run it where one exists (the rdma-vm guest)
 *
 * Prints a table and writes JSON (--json FILE, default bench-transport.json).
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "xprt.h"

#define M_ECHO	    1
#define M_PUSH	    2 /* server RDMA WRITEs len bytes into the client's buffer */
#define M_PULL	    3 /* server RDMA READs len bytes from the client's buffer */
#define MAX_BULK    (1u << 20)
#define RATE_WINDOW 32

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct lat {
	double p50_us, p99_us;
};

static struct lat percentiles(uint64_t *samples, size_t n)
{
	struct lat l;

	qsort(samples, n, sizeof(*samples), cmp_u64);
	l.p50_us = samples[n / 2] / 1000.0;
	l.p99_us = samples[(n * 99) / 100] / 1000.0;
	return l;
}

/* ---- raw TCP baselines ---- */

static int tcp_pair(int *client, int *server)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		return -errno;
	*client = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*client, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	*server = accept(l, NULL, NULL);
	close(l);
	setsockopt(*client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return *server < 0 ? -errno : 0;
}

static int full_io(int fd, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wr ? write(fd, (char *)buf + done, len - done)
			       : read(fd, (char *)buf + done, len - done);
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

struct raw_echo {
	int fd;
	size_t msg;
};

static void *raw_echo_server(void *arg)
{
	struct raw_echo *e = arg;
	char buf[4096];

	while (full_io(e->fd, buf, e->msg, false) == 0)
		if (full_io(e->fd, buf, e->msg, true))
			break;
	return NULL;
}

static struct lat raw_pingpong(size_t msg, int iters, double *rate)
{
	int c, s;
	pthread_t t;
	struct raw_echo e;
	char buf[4096] = {0};
	uint64_t *samples = calloc((size_t)iters, sizeof(uint64_t)), t0;
	struct lat l;

	tcp_pair(&c, &s);
	e.fd = s;
	e.msg = msg;
	pthread_create(&t, NULL, raw_echo_server, &e);
	t0 = now_ns();
	for (int i = 0; i < iters; i++) {
		uint64_t a = now_ns();

		full_io(c, buf, msg, true);
		full_io(c, buf, msg, false);
		samples[i] = now_ns() - a;
	}
	*rate = iters / ((now_ns() - t0) / 1e9);
	shutdown(c, SHUT_RDWR);
	pthread_join(t, NULL);
	close(c);
	close(s);
	l = percentiles(samples, (size_t)iters);
	free(samples);
	return l;
}

struct raw_sink {
	int fd;
	size_t total;
	size_t chunk;
};

static void *raw_sink_thread(void *arg)
{
	struct raw_sink *s = arg;
	char *buf = malloc(s->chunk);

	for (size_t got = 0; got < s->total; got += s->chunk)
		if (full_io(s->fd, buf, s->chunk, false))
			break;
	free(buf);
	return NULL;
}

/* Stream bandwidth of a raw socket writing @chunk-sized pieces, in MB/s. */
static double raw_stream(size_t chunk, size_t total)
{
	int c, s;
	pthread_t t;
	struct raw_sink sink;
	char *buf = calloc(1, chunk);
	uint64_t t0;
	double mbps;

	tcp_pair(&c, &s);
	sink.fd = s;
	sink.total = total;
	sink.chunk = chunk;
	pthread_create(&t, NULL, raw_sink_thread, &sink);
	t0 = now_ns();
	for (size_t sent = 0; sent < total; sent += chunk)
		full_io(c, buf, chunk, true);
	pthread_join(t, NULL);
	mbps = total / ((now_ns() - t0) / 1e9) / 1e6;
	close(c);
	close(s);
	free(buf);
	return mbps;
}

/* ---- libxprt ---- */

static struct xprt_mr *srv_mr;
static uint8_t *srv_buf;

struct job {
	struct xprt_req *req;
};

static void job_done(void *arg, int status)
{
	struct job *j = arg;

	xprt_reply(j->req, status, NULL, 0);
	free(j);
}

struct bulk_req {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

static void serve(struct xprt_req *req, void *arg)
{
	size_t len;
	const void *body = xprt_req_body(req, &len);
	struct bulk_req br;
	struct job *j;
	int ret;

	if (xprt_req_method(req) == M_ECHO || len != sizeof(br)) {
		xprt_reply(req, 0, body, len);
		return;
	}
	memcpy(&br, body, sizeof(br));
	j = malloc(sizeof(*j));
	j->req = req;
	if (br.len > MAX_BULK)
		br.len = MAX_BULK;
	if (xprt_req_method(req) == M_PUSH)
		ret = xprt_rdma_write_async(xprt_req_conn(req), srv_buf, srv_mr, br.addr, br.rkey,
					    br.len, 0, job_done, j);
	else
		ret = xprt_rdma_read_async(xprt_req_conn(req), srv_buf, srv_mr, br.addr, br.rkey,
					   br.len, 0, job_done, j);
	if (ret)
		job_done(j, ret);
}

struct rate_state {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int outstanding;
};

static void rate_done(void *arg, int status, const void *body, size_t len)
{
	struct rate_state *r = arg;

	pthread_mutex_lock(&r->lock);
	r->outstanding--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static double xprt_rate(struct xprt_conn *c, const void *req, size_t len, uint32_t method,
			int iters)
{
	struct rate_state r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	uint64_t t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		pthread_mutex_lock(&r.lock);
		while (r.outstanding >= RATE_WINDOW)
			pthread_cond_wait(&r.cond, &r.lock);
		r.outstanding++;
		pthread_mutex_unlock(&r.lock);
		if (xprt_call_async(c, method, req, len, 0, rate_done, &r))
			rate_done(&r, 0, NULL, 0);
	}
	pthread_mutex_lock(&r.lock);
	while (r.outstanding)
		pthread_cond_wait(&r.cond, &r.lock);
	pthread_mutex_unlock(&r.lock);
	return iters / ((now_ns() - t0) / 1e9);
}

static struct lat xprt_pingpong(struct xprt_conn *c, size_t msg, int iters)
{
	uint64_t *samples = calloc((size_t)iters, sizeof(uint64_t));
	char buf[4096] = {0}, resp[4096];
	struct lat l;

	for (int i = 0; i < iters; i++) {
		uint64_t a = now_ns();

		xprt_call(c, M_ECHO, buf, msg, resp, sizeof(resp), NULL, 0);
		samples[i] = now_ns() - a;
	}
	l = percentiles(samples, (size_t)iters);
	free(samples);
	return l;
}

/* Bandwidth in MB/s of daemon-initiated transfers of @size bytes, RATE_WINDOW in flight. */
static double xprt_bulk(struct xprt_conn *c, struct xprt_mr *mr, uint8_t *buf, uint32_t method,
			size_t size, size_t total)
{
	struct xprt_desc d;
	struct bulk_req br;
	int iters = (int)(total / size);
	uint64_t t0;

	xprt_mr_desc(c, mr, buf, size, &d);
	br.addr = d.addr;
	br.rkey = d.rkey;
	br.len = (uint32_t)size;
	t0 = now_ns();
	xprt_rate(c, &br, sizeof(br), method, iters);
	return (double)iters * size / ((now_ns() - t0) / 1e9) / 1e6;
}

/* ---- perftest baselines (verbs) ---- */

static const char *perftest_dev = "rxe0";
static const char *perftest_addr = "127.0.0.1";

/*
 * Runs a perftest server/client pair on 127.0.0.1 and returns the column
 * @col (0-based) of the result line for @size bytes, or -1.
 */
static double perftest(const char *tool, size_t size, int col, const char *extra)
{
	char cmd[512], line[512];
	double value = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "(timeout 120 %s -d %s -F -R -s %zu %s -p 18515 >/dev/null 2>&1 &) ; sleep 1 ; "
		 "timeout 120 %s -d %s -F -R -s %zu %s -p 18515 %s 2>/dev/null",
		 tool, perftest_dev, size, extra, tool, perftest_dev, size, extra, perftest_addr);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		double v[9];
		int n = sscanf(line, " %lf %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
			       &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);

		if (n > col && (size_t)v[0] == size)
			value = v[col];
	}
	pclose(f);
	return value;
}

/* ---- output ---- */

struct row {
	const char *name;
	const char *unit;
	double ours, base;
	bool lower_is_better;
};

static void report(struct row *rows, int n, const char *backend, const char *baseline,
		   const char *json_path)
{
	/* "-" sends the JSON to stdout (e.g. from inside the rdma-vm guest). */
	FILE *j = strcmp(json_path, "-") == 0 ? stdout : fopen(json_path, "w");

	printf("\nbench-transport: %s backend vs %s (same run, same machine)\n", backend, baseline);
	printf("%-28s %14s %14s %8s\n", "metric", backend, "baseline", "ratio");
	if (j)
		fprintf(j, "{\n  \"backend\": \"%s\",\n  \"baseline\": \"%s\",\n  \"results\": [\n",
			backend, baseline);
	for (int i = 0; i < n; i++) {
		/* Ratio as "ours relative to baseline, higher is better" for every row. */
		double ratio = rows[i].base > 0 && rows[i].ours > 0
				       ? (rows[i].lower_is_better ? rows[i].base / rows[i].ours
								  : rows[i].ours / rows[i].base)
				       : 0;

		printf("%-28s %10.2f %-3s %10.2f %-3s %7.2f\n", rows[i].name, rows[i].ours,
		       rows[i].unit, rows[i].base, rows[i].unit, ratio);
		if (j)
			fprintf(j,
				"    {\"metric\": \"%s\", \"unit\": \"%s\", \"ours\": %.3f, "
				"\"baseline\": %.3f, \"ratio\": %.3f}%s\n",
				rows[i].name, rows[i].unit, rows[i].ours, rows[i].base, ratio,
				i + 1 < n ? "," : "");
	}
	if (j) {
		fprintf(j, "  ]\n}\n");
		if (j != stdout)
			fclose(j);
		printf("(ratio: ours/baseline for rates, baseline/ours for latencies; JSON in "
		       "%s)\n",
		       json_path);
	}
}

int main(int argc, char **argv)
{
	const char *json = "bench-transport.json";
	/* rdma_cm needs a routable address on the RDMA device (the guest sets RDMAFS_TEST_ADDR). */
	const char *addr = "127.0.0.1";
	bool verbs = false;
	long busy_poll_us = -1; /* -1: the library's default */
	int iters = 20000;
	struct xprt_options o;
	struct xprt_ctx *sctx, *cctx;
	struct xprt_listener *l;
	struct xprt_conn *c;
	struct xprt_mr *cmr;
	uint8_t *cbuf;
	char uri[128];
	struct row rows[16];
	int n = 0;
	const size_t sizes[] = {4096, 65536, MAX_BULK};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--verbs") == 0)
			verbs = true;
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else if (strcmp(argv[i], "--busy-poll-us") == 0 && i + 1 < argc) {
			char *end;

			errno = 0;
			busy_poll_us = strtol(argv[++i], &end, 10);
			if (errno || *end || end == argv[i] || busy_poll_us < 0 ||
			    busy_poll_us > (long)XPRT_BUSY_POLL_MAX_US) {
				fprintf(stderr,
					"bench-transport: --busy-poll-us %s: want 0 to %u\n",
					argv[i], XPRT_BUSY_POLL_MAX_US);
				return 2;
			}
		} else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			iters = (int)strtol(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: bench-transport [--verbs] [--json FILE|-] [--iters "
					"N] [--busy-poll-us N]\n");
			return 2;
		}
	}
	xprt_options_init(&o);
	o.secret = "bench";
	o.secret_len = 5;
	if (busy_poll_us >= 0)
		o.busy_poll_us = (uint32_t)busy_poll_us;
	if (xprt_ctx_create(&o, &sctx) || xprt_ctx_create(&o, &cctx))
		return 1;
	if (getenv("RDMAFS_TEST_ADDR"))
		addr = getenv("RDMAFS_TEST_ADDR");
	else if (getenv("RDMAFS_VM_RDMA_ADDR"))
		addr = getenv("RDMAFS_VM_RDMA_ADDR");
	if (getenv("RDMAFS_TEST_DEV"))
		perftest_dev = getenv("RDMAFS_TEST_DEV");
	else if (getenv("RDMAFS_VM_RDMA_DEV"))
		perftest_dev = getenv("RDMAFS_VM_RDMA_DEV");
	perftest_addr = addr;
	if (verbs && !xprt_ctx_has_rdma(cctx)) {
		fprintf(stderr, "bench-transport: --verbs needs an RDMA device\n");
		return 77;
	}
	srv_buf = aligned_alloc(4096, MAX_BULK);
	cbuf = aligned_alloc(4096, MAX_BULK);
	memset(srv_buf, 1, MAX_BULK);
	memset(cbuf, 2, MAX_BULK);
	if (xprt_mr_register(sctx, srv_buf, MAX_BULK, XPRT_ACCESS_LOCAL, &srv_mr) ||
	    xprt_mr_register(cctx, cbuf, MAX_BULK,
			     XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE, &cmr))
		return 1;
	snprintf(uri, sizeof(uri), "%s://%s:0", verbs ? "rdma" : "tcp", addr);
	if (xprt_listen(sctx, uri, serve, NULL, &l))
		return 1;
	snprintf(uri, sizeof(uri), "%s://%s:%u", verbs ? "rdma" : "tcp", addr,
		 xprt_listener_port(l));
	if (xprt_connect(cctx, uri, &c))
		return 1;

	if (!verbs) {
		double raw_rate, our_rate;
		struct lat raw = raw_pingpong(64, iters, &raw_rate);
		struct lat ours = xprt_pingpong(c, 64, iters);
		char payload[64] = {0};

		our_rate = xprt_rate(c, payload, sizeof(payload), M_ECHO, iters * 5);
		rows[n++] =
			(struct row){"rpc 64B round trip p50", "us", ours.p50_us, raw.p50_us, true};
		rows[n++] =
			(struct row){"rpc 64B round trip p99", "us", ours.p99_us, raw.p99_us, true};
		/* The raw rate is one-at-a-time ping-pong; ours pipelines 32 calls. */
		rows[n++] = (struct row){"rpc rate (32 in flight)", "k/s", our_rate / 1e3,
					 raw_rate / 1e3, false};
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t total = sizes[i] >= 65536 ? (512u << 20) : (64u << 20);
			double base = raw_stream(sizes[i], total);
			static char names[6][48];

			snprintf(names[2 * i], sizeof(names[0]), "bulk WRITE %zu KiB",
				 sizes[i] >> 10);
			snprintf(names[2 * i + 1], sizeof(names[0]), "bulk READ %zu KiB",
				 sizes[i] >> 10);
			rows[n++] = (struct row){names[2 * i], "MB/s",
						 xprt_bulk(c, cmr, cbuf, M_PUSH, sizes[i], total),
						 base, false};
			rows[n++] = (struct row){names[2 * i + 1], "MB/s",
						 xprt_bulk(c, cmr, cbuf, M_PULL, sizes[i], total),
						 base, false};
		}
		report(rows, n, "tcp", "raw TCP socket (ping-pong, stream)", json);
	} else {
		struct lat ours = xprt_pingpong(c, 64, iters / 4);
		/* ib_send_lat: column 4 is t_typical (median) in usec, 7 the 99th percentile. */
		double base_p50 = perftest("ib_send_lat", 64, 4, "-n 2000");
		double base_p99 = perftest("ib_send_lat", 64, 7, "-n 2000");

		rows[n++] = (struct row){"rpc 64B round trip p50", "us", ours.p50_us,
					 base_p50 > 0 ? base_p50 * 2 : -1, true};
		rows[n++] = (struct row){"rpc 64B round trip p99", "us", ours.p99_us,
					 base_p99 > 0 ? base_p99 * 2 : -1, true};
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t total = sizes[i] >= 65536 ? (64u << 20) : (8u << 20);
			static char names[6][48];
			/* ib_*_bw: column 3 is BW average in MB/sec. */
			double wbase = perftest("ib_write_bw", sizes[i], 3, "-n 500");
			double rbase = perftest("ib_read_bw", sizes[i], 3, "-n 500");

			snprintf(names[2 * i], sizeof(names[0]), "RDMA WRITE %zu KiB",
				 sizes[i] >> 10);
			snprintf(names[2 * i + 1], sizeof(names[0]), "RDMA READ %zu KiB",
				 sizes[i] >> 10);
			rows[n++] = (struct row){names[2 * i], "MB/s",
						 xprt_bulk(c, cmr, cbuf, M_PUSH, sizes[i], total),
						 wbase * 1.048576, false};
			rows[n++] = (struct row){names[2 * i + 1], "MB/s",
						 xprt_bulk(c, cmr, cbuf, M_PULL, sizes[i], total),
						 rbase * 1.048576, false};
		}
		report(rows, n, "verbs",
		       "perftest on the same rxe device (send_lat x2 = round trip)", json);
	}
	xprt_conn_close(c);
	xprt_mr_deregister(cmr);
	xprt_ctx_destroy(cctx);
	xprt_mr_deregister(srv_mr);
	xprt_ctx_destroy(sctx);
	return 0;
}
