/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The transport conformance suite. The same tests run unchanged on each
 * backend: `conformance tcp` here, `conformance rdma` over soft-RoCE in the
 * rdma-vm suite. Both must give the same results and the same errors.
 *
 * Most tests talk to a server in this process (its own context); the tests
 * that kill or restart a peer spawn this program again as `--serve`.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "xprt_i.h"

#define SECRET	       "conformance-secret"
#define BIG	       (16u << 20)
#define M_ECHO	       1
#define M_PUSH	       2  /* server RDMA WRITEs a pattern into the client's buffer */
#define M_PULL	       3  /* server RDMA READs the client's buffer, replies its hash */
#define M_HOLD	       4  /* server never answers (timeouts) */
#define M_RESET_RDMA   5  /* server resets the connection, then tries one-sided ops on it */
#define M_IDENTITY     6  /* server replies the struct xprt_identity of the connection */
#define M_LATE	       7  /* server echoes from another thread after the body's first word in us */
#define REVOKED_SERIAL 99 /* the server's identity check refuses this key serial */
#define EXIT_SKIP      77

extern char **environ;

static const char *kind_name; /* "tcp" or "rdma" */
/* rdma_cm cannot route 127.0.0.1 over soft-RoCE: the rdma-vm guest sets RDMAFS_TEST_ADDR. */
static const char *test_addr = "127.0.0.1";
static struct xprt_ctx *srv_ctx, *cli_ctx;
static struct xprt_listener *srv_listener;
static struct xprt_mr *srv_mr, *cli_mr;
static uint8_t *srv_buf, *cli_buf;
static char srv_uri[128];
static int last_server_rdma_status;
static struct xprt_conn *last_server_conn;
static struct xprt_req *held_req;
/* What M_RESET_RDMA saw: the _async returns and how often their callbacks ran. */
static int reset_read_ret, reset_write_ret;
static int reset_cb_runs;
/* requests to the plain listener that xprt_req_batched() said a batch end would follow */
static unsigned plain_batched;
/* echoes answered, and those whose reply was written before serve() returned */
static unsigned echo_replies, echo_wrote;

/* The request body of M_PUSH / M_PULL. */
struct bulk_req {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
	uint64_t seed;
};

static uint64_t fnv1a(const uint8_t *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static uint64_t now_ms(void)
{
	return xprt_now_ns() / 1000000u;
}

/* ---- the in-process server ---- */

struct bulk_job {
	struct xprt_req *req;
	struct bulk_req br;
};

static void bulk_done(void *arg, int status)
{
	struct bulk_job *job = arg;
	uint64_t hash;

	last_server_rdma_status = status;
	if (status == 0 && xprt_req_method(job->req) == M_PULL) {
		hash = fnv1a(srv_buf, job->br.len);
		xprt_reply(job->req, 0, &hash, sizeof(hash));
	} else {
		xprt_reply(job->req, status, NULL, 0);
	}
	free(job);
}

static void *answer_late(void *arg)
{
	struct xprt_req *req = arg;
	size_t len;
	const void *body = xprt_req_body(req, &len);
	uint32_t delay_us = 0;

	memcpy(&delay_us, body, sizeof(delay_us));
	usleep(delay_us);
	xprt_reply(req, 0, body, len);
	return NULL;
}

static void count_rdma_cb(void *arg, int status)
{
	__atomic_fetch_add(&reset_cb_runs, 1, __ATOMIC_SEQ_CST);
}

static void serve(struct xprt_req *req, void *arg)
{
	size_t len;
	const void *body = xprt_req_body(req, &len);
	struct bulk_job *job;
	int ret;

	last_server_conn = xprt_req_conn(req);
	if (xprt_req_batched(req))
		plain_batched++;
	switch (xprt_req_method(req)) {
	case M_ECHO: {
		struct xprt_conn *c = xprt_req_conn(req); /* the reply frees req */
		struct xprt_conn_stats before, after;

		/* counted before the reply: over verbs it may reach the caller at once */
		echo_replies++;
		xprt_conn_stats(c, &before);
		xprt_reply(req, 0, body, len);
		xprt_conn_stats(c, &after);
		if (after.writes != before.writes)
			echo_wrote++;
		return;
	}
	case M_RESET_RDMA:
		/* The connection dies between taking the request and the one-sided op. */
		xprt_conn_reset(xprt_req_conn(req));
		reset_read_ret = xprt_rdma_read_async(xprt_req_conn(req), srv_buf, srv_mr, 0, 0, 8,
						      0, count_rdma_cb, NULL);
		reset_write_ret = xprt_rdma_write_async(xprt_req_conn(req), srv_buf, srv_mr, 0, 0,
							8, 0, count_rdma_cb, NULL);
		xprt_reply(req, 0, NULL, 0); /* dropped: the connection is dead */
		return;
	case M_LATE: {
		pthread_t t;

		if (len < sizeof(uint32_t) || pthread_create(&t, NULL, answer_late, req))
			break;
		pthread_detach(t);
		return;
	}
	case M_IDENTITY: {
		struct xprt_identity id;

		memset(&id, 0, sizeof(id));
		ret = xprt_conn_identity(xprt_req_conn(req), &id);
		xprt_reply(req, ret, &id, sizeof(id));
		return;
	}
	case M_HOLD:
		/* Keep it unanswered; the test frees it. */
		if (held_req)
			xprt_reply(held_req, -ECANCELED, NULL, 0);
		held_req = req;
		return;
	case M_PUSH:
	case M_PULL:
		if (len != sizeof(struct bulk_req))
			break;
		job = malloc(sizeof(*job));
		if (!job)
			break;
		job->req = req;
		memcpy(&job->br, body, sizeof(job->br));
		if (job->br.len > BIG) {
			free(job);
			break;
		}
		if (xprt_req_method(req) == M_PUSH) {
			fill_pattern(srv_buf, job->br.len, job->br.seed);
			ret = xprt_rdma_write_async(xprt_req_conn(req), srv_buf, srv_mr,
						    job->br.addr, job->br.rkey, job->br.len, 0,
						    bulk_done, job);
		} else {
			ret = xprt_rdma_read_async(xprt_req_conn(req), srv_buf, srv_mr,
						   job->br.addr, job->br.rkey, job->br.len, 0,
						   bulk_done, job);
		}
		if (ret) {
			free(job);
			xprt_reply(req, ret, NULL, 0);
		}
		return;
	}
	xprt_reply(req, -EINVAL, NULL, 0);
}

/* The server's identity check: one serial counts as revoked. */
static int check_identity(const struct xprt_identity *id, void *arg)
{
	return id->serial == REVOKED_SERIAL ? -EKEYREVOKED : 0;
}

/* A context; @busy_poll_us UINT32_MAX leaves the library's default. */
static struct xprt_ctx *make_ctx_poll(const char *secret, uint32_t max_msg,
				      const struct xprt_key *key, uint32_t busy_poll_us)
{
	struct xprt_options o;
	struct xprt_ctx *ctx;

	xprt_options_init(&o);
	if (busy_poll_us != UINT32_MAX)
		o.busy_poll_us = busy_poll_us;
	o.secret = secret;
	o.secret_len = secret ? strlen(secret) : 0;
	o.key = key;
	o.identity_check = check_identity;
	o.name = "conformance";
	o.call_timeout_ms = 20000;
	if (max_msg)
		o.max_msg_size = max_msg;
	if (xprt_ctx_create(&o, &ctx))
		return NULL;
	return ctx;
}

static struct xprt_ctx *make_ctx_key(const char *secret, uint32_t max_msg,
				     const struct xprt_key *key)
{
	return make_ctx_poll(secret, max_msg, key, UINT32_MAX);
}

static struct xprt_ctx *make_ctx(const char *secret, uint32_t max_msg)
{
	return make_ctx_key(secret, max_msg, NULL);
}

static struct xprt_conn *connect_ok(struct xprt_ctx *ctx, const char *uri)
{
	struct xprt_conn *c = NULL;
	int ret = xprt_connect(ctx, uri, &c);

	if (ret)
		fprintf(stderr, "connect %s: %s\n", uri, xprt_strerror(ret));
	assert_int_equal(ret, 0);
	return c;
}

static void echo_ok(struct xprt_conn *c, size_t len)
{
	static uint8_t req[BIG / 64], resp[BIG / 64];
	size_t got = 0;

	fill_pattern(req, len, len);
	assert_int_equal(xprt_call(c, M_ECHO, req, len, resp, sizeof(resp), &got, 0), 0);
	assert_int_equal(got, len);
	assert_memory_equal(req, resp, len);
}

/* ---- tests ---- */

static void test_echo_sizes(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	size_t max = xprt_conn_max_body(c);
	size_t sizes[] = {0, 1, 31, 32, 100, 1000, 4096, max - 1, max};
	unsigned replies, wrote;
	uint8_t big[1];

	assert_int_equal(xprt_conn_kind(c),
			 strcmp(kind_name, "tcp") ? XPRT_KIND_VERBS : XPRT_KIND_TCP);
	echo_replies = echo_wrote = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		echo_ok(c, sizes[i]);
	/* One byte over the maximum is refused locally and the connection survives. */
	assert_int_equal(xprt_call(c, M_ECHO, big, max + 1, NULL, 0, NULL, 0), -EMSGSIZE);
	echo_ok(c, 10);
	xprt_conn_close(c);
	/*
	 * Over tcp a reply made while its connection is being read is written
	 * when the read ends (each echo above came back, so it was), one at a
	 * time here: not during serve().
	 */
	pthread_mutex_lock(&srv_ctx->lock); /* serve() runs under it */
	replies = echo_replies;
	wrote = echo_wrote;
	pthread_mutex_unlock(&srv_ctx->lock);
	assert_int_equal(replies, sizeof(sizes) / sizeof(sizes[0]) + 1);
	if (!strcmp(kind_name, "tcp"))
		assert_int_equal(wrote, 0);
}

static void bulk(struct xprt_conn *c, uint32_t method, size_t off, size_t len, uint64_t seed,
		 int expect)
{
	struct xprt_desc d;
	struct bulk_req br;
	uint64_t hash = 0;
	size_t got = 0;
	int ret;

	assert_int_equal(xprt_mr_desc(c, cli_mr, cli_buf + off, len, &d), 0);
	br.addr = d.addr;
	br.rkey = d.rkey;
	br.len = (uint32_t)len;
	br.seed = seed;
	if (method == M_PULL)
		fill_pattern(cli_buf + off, len, seed);
	else
		memset(cli_buf + off, 0, len);
	ret = xprt_call(c, method, &br, sizeof(br), &hash, sizeof(hash), &got, 0);
	assert_int_equal(ret, expect);
	if (expect)
		return;
	assert_int_equal(last_server_rdma_status, 0);
	if (method == M_PULL) {
		assert_int_equal(got, sizeof(hash));
		assert_true(hash == fnv1a(cli_buf + off, len));
	} else {
		uint8_t *want = malloc(len ? len : 1);

		fill_pattern(want, len, seed);
		assert_memory_equal(want, cli_buf + off, len);
		free(want);
	}
}

static void test_bulk_read_write(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	size_t sizes[] = {1, 7, 4096, 4097, 65536, 1u << 20, 3u << 20, BIG};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		bulk(c, M_PUSH, 0, sizes[i], i + 1, 0);
		bulk(c, M_PULL, 0, sizes[i], i + 100, 0);
	}
	/* Unaligned offsets inside the region. */
	bulk(c, M_PUSH, 13, 70000, 7, 0);
	bulk(c, M_PULL, 4093, 12345, 8, 0);
	xprt_conn_close(c);
}

struct storm {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t outstanding, done, bad;
};

static void storm_reply(void *arg, int status, const void *body, size_t len)
{
	struct storm *s = arg;

	pthread_mutex_lock(&s->lock);
	if (status != 0 || len != sizeof(uint64_t))
		s->bad++;
	s->done++;
	s->outstanding--;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void test_many_rpcs(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	const char *env = getenv("RDMAFS_TEST_RPCS");
	uint32_t total = env ? (uint32_t)strtoul(env, NULL, 10) : 100000;
	/* Far more in flight than there are credits: the rest must wait, not fail. */
	const uint32_t window = 256;
	struct xprt_conn_stats cs, ss;
	struct storm s = {.outstanding = 0};

	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	for (uint64_t i = 0; i < total; i++) {
		pthread_mutex_lock(&s.lock);
		while (s.outstanding >= window)
			pthread_cond_wait(&s.cond, &s.lock);
		s.outstanding++;
		pthread_mutex_unlock(&s.lock);
		assert_int_equal(xprt_call_async(c, M_ECHO, &i, sizeof(i), 0, storm_reply, &s), 0);
	}
	pthread_mutex_lock(&s.lock);
	while (s.done < total)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	assert_int_equal(s.bad, 0);
	assert_true(xprt_conn_alive(c));
	/* Quiet now: every credit must be accounted for on both sides. */
	echo_ok(c, 8);
	usleep(100000);
	assert_int_equal(xprt_conn_stats(c, &cs), 0);
	assert_int_equal(xprt_conn_stats(last_server_conn, &ss), 0);
	assert_true(cs.msgs_sent >= total);
	assert_true(cs.credit_waits > 0);
	assert_int_equal(cs.send_credits, ss.recv_credits);
	assert_int_equal(ss.send_credits, cs.recv_credits);
	assert_int_equal(cs.calls_pending, 0);
	xprt_conn_close(c);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
}

/* What a batched listener's callbacks saw (test_batch_end()). */
#define BATCH_HELD_MAX 512
static struct {
	struct xprt_req *held[BATCH_HELD_MAX];
	unsigned n, ends, empty_ends, other_thread, most;
	unsigned unbatched; /* held requests xprt_req_batched() said no batch end would follow */
	pthread_t thread;   /* the thread that delivered the requests held */
	/* the serving connection's writes: made during a batch end, and between two */
	uint64_t wrote_inside, wrote_between, writes_after;
} batch;

/* Holds every request for the batch end; answers at once only past what it can hold. */
static void batch_hold(struct xprt_req *req, void *arg)
{
	if (batch.n == BATCH_HELD_MAX) {
		xprt_reply(req, -ENOSPC, NULL, 0);
		return;
	}
	if (!batch.n)
		batch.thread = pthread_self();
	if (!xprt_req_batched(req))
		batch.unbatched++;
	batch.held[batch.n++] = req;
}

/* Echoes every request held since the last batch end. */
static void batch_answer(void *arg)
{
	if (!batch.n)
		batch.empty_ends++;
	else if (!pthread_equal(batch.thread, pthread_self()))
		batch.other_thread++;
	if (batch.n > batch.most)
		batch.most = batch.n;
	if (batch.n) {
		struct xprt_conn *c = xprt_req_conn(batch.held[0]);
		struct xprt_conn_stats before, after;

		xprt_conn_stats(c, &before);
		if (batch.writes_after)
			batch.wrote_between += before.writes - batch.writes_after;
		for (unsigned i = 0; i < batch.n; i++) {
			size_t len;
			const void *body = xprt_req_body(batch.held[i], &len);

			xprt_reply(batch.held[i], 0, body, len);
		}
		xprt_conn_stats(c, &after);
		batch.wrote_inside += after.writes - before.writes;
		batch.writes_after = after.writes;
	}
	batch.n = 0;
	batch.ends++;
}

/*
 * xprt.h: a listener's batch end runs on the thread that delivered the
 * requests, after them, and never for a batch without a request;
 * xprt_req_batched() says so of its requests, and not of a plain listener's
 * (the earlier tests' echoes); a server
 * that answers only there answers every call (each would fail with
 * -ETIMEDOUT after 10 s were one left past its batch's end).
 */
static void test_batch_end(void **state)
{
	const uint32_t total = 4000, window = 64;
	struct storm s = {.outstanding = 0};
	struct xprt_listener *l;
	struct xprt_conn *c;
	uint64_t sent;
	char uri[128];

	snprintf(uri, sizeof(uri), "%s://%s:0", kind_name, test_addr);
	assert_int_equal(xprt_listen_batched(srv_ctx, uri, batch_hold, batch_answer, NULL, &l), 0);
	snprintf(uri, sizeof(uri), "%s://%s:%u", kind_name, test_addr, xprt_listener_port(l));
	c = connect_ok(cli_ctx, uri);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	/* stops at the first call that fails: one left past its batch's end fails them all */
	for (sent = 0; sent < total && !s.bad; sent++) {
		pthread_mutex_lock(&s.lock);
		while (s.outstanding >= window)
			pthread_cond_wait(&s.cond, &s.lock);
		s.outstanding++;
		pthread_mutex_unlock(&s.lock);
		assert_int_equal(
			xprt_call_async(c, M_ECHO, &sent, sizeof(sent), 10000, storm_reply, &s), 0);
	}
	pthread_mutex_lock(&s.lock);
	while (s.done < sent)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	xprt_conn_close(c);
	xprt_listener_close(l);
	printf("batch end: %" PRIu64 " requests in %u batches, at most %u in one; "
	       "%" PRIu64 " writes during them, %" PRIu64 " between them\n",
	       sent, batch.ends, batch.most, batch.wrote_inside, batch.wrote_between);
	assert_int_equal(s.bad, 0);
	assert_int_equal(sent, total);
	assert_int_equal(batch.empty_ends, 0);
	assert_int_equal(batch.unbatched, 0);
	assert_int_equal(plain_batched, 0);
	assert_int_equal(batch.other_thread, 0);
	assert_true(batch.ends >= 1 && batch.ends <= total);
	assert_int_equal(batch.n, 0);
	/* a batch end's replies are held and sent when it returns (a chain of SENDs over verbs) */
	assert_int_equal(batch.wrote_inside, 0);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
}

/*
 * xprt_watch_add(): a watched descriptor's callback runs on the progress
 * thread with the lock held and may answer requests held meanwhile (as the
 * daemon answers a read once its disk fetch completes); it runs again while
 * the descriptor stays readable, and never once the watch is closed.
 */
#define WATCH_HELD 8
static struct {
	struct xprt_req *req[WATCH_HELD];
	unsigned n, runs, answered;
	int fd;
	pthread_t served_on, watched_on;
	bool other_thread;
} watch;

static void watch_hold(struct xprt_req *req, void *arg)
{
	(void)arg;
	watch.served_on = pthread_self();
	assert_true(watch.n < WATCH_HELD);
	watch.req[watch.n++] = req;
}

static void watch_ready(void *arg)
{
	uint64_t v;

	(void)arg;
	watch.watched_on = pthread_self();
	watch.other_thread |= !pthread_equal(watch.served_on, watch.watched_on);
	/* the first run leaves the descriptor readable: level-triggered, it runs again */
	if (watch.runs++ == 0)
		return;
	if (read(watch.fd, &v, sizeof(v)) != sizeof(v))
		return;
	for (unsigned i = 0; i < watch.n; i++) {
		size_t len;
		const void *body = xprt_req_body(watch.req[i], &len);

		assert_int_equal(xprt_reply(watch.req[i], 0, body, len), 0);
		watch.answered++;
	}
	watch.n = 0;
}

static void test_watch(void **state)
{
	struct storm s = {.outstanding = 0};
	struct xprt_listener *l;
	struct xprt_watch *w;
	struct xprt_conn *c, *d;
	uint64_t one = 1;
	unsigned held, runs;
	char uri[128];

	watch.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(watch.fd >= 0);
	snprintf(uri, sizeof(uri), "%s://%s:0", kind_name, test_addr);
	assert_int_equal(xprt_listen(srv_ctx, uri, watch_hold, NULL, &l), 0);
	snprintf(uri, sizeof(uri), "%s://%s:%u", kind_name, test_addr, xprt_listener_port(l));
	c = connect_ok(cli_ctx, uri);
	assert_int_equal(xprt_watch_add(srv_ctx, watch.fd, watch_ready, NULL, &w), 0);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	for (uint64_t i = 0; i < WATCH_HELD; i++) {
		s.outstanding++;
		assert_int_equal(xprt_call_async(c, M_ECHO, &i, sizeof(i), 10000, storm_reply, &s),
				 0);
	}
	/* every request held, none answered: the watch has not run */
	do {
		pthread_mutex_lock(&srv_ctx->lock);
		held = watch.n;
		runs = watch.runs;
		pthread_mutex_unlock(&srv_ctx->lock);
	} while (held < WATCH_HELD && runs == 0);
	assert_int_equal(runs, 0);
	assert_int_equal(write(watch.fd, &one, sizeof(one)), sizeof(one));
	pthread_mutex_lock(&s.lock);
	while (s.done < WATCH_HELD)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	assert_int_equal(s.bad, 0);
	pthread_mutex_lock(&srv_ctx->lock);
	assert_int_equal(watch.runs, 2);
	assert_int_equal(watch.answered, WATCH_HELD);
	assert_false(watch.other_thread);
	pthread_mutex_unlock(&srv_ctx->lock);

	/* closed: readable again, and a round trip later (an epoll batch that saw it) no run */
	xprt_watch_close(w);
	assert_int_equal(write(watch.fd, &one, sizeof(one)), sizeof(one));
	d = connect_ok(cli_ctx, srv_uri);
	echo_ok(d, 8);
	xprt_conn_close(d);
	pthread_mutex_lock(&srv_ctx->lock);
	assert_int_equal(watch.runs, 2);
	pthread_mutex_unlock(&srv_ctx->lock);
	xprt_watch_close(NULL);
	xprt_conn_close(c);
	xprt_listener_close(l);
	close(watch.fd);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
}

#define SYNC_THREADS 8
#define SYNC_CALLS   100

struct sync_caller {
	struct xprt_conn *conn;
	uint32_t thread;
	int bad;
};

static void *sync_caller_main(void *arg)
{
	struct sync_caller *sc = arg;

	for (uint32_t i = 0; i < SYNC_CALLS; i++) {
		/* delay in us, then who asked: the answers come back out of order */
		uint32_t req[4] = {(sc->thread * 7919u + i * 104729u) % 3000u, sc->thread, i, ~i};
		uint32_t resp[4] = {0};
		size_t got = 0;
		int ret = xprt_call(sc->conn, M_LATE, req, sizeof(req), resp, sizeof(resp), &got,
				    5000);

		if (ret || got != sizeof(req) || memcmp(req, resp, sizeof(req))) {
			fprintf(stderr, "thread %u call %u: %s, %zu bytes\n", sc->thread, i,
				xprt_strerror(ret), got);
			sc->bad++;
		}
	}
	return NULL;
}

/*
 * Blocking calls from many threads on one connection, answered out of order:
 * whichever thread reads the connection (a caller waiting on it itself, or the
 * progress thread) hands every other caller its own answer, and none waits
 * past its answer (each call would fail with -ETIMEDOUT after 5 s).
 */
static void test_sync_callers(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	struct sync_caller sc[SYNC_THREADS];
	pthread_t t[SYNC_THREADS];
	struct xprt_conn_stats cs;

	for (uint32_t i = 0; i < SYNC_THREADS; i++) {
		sc[i] = (struct sync_caller){.conn = c, .thread = i};
		assert_int_equal(pthread_create(&t[i], NULL, sync_caller_main, &sc[i]), 0);
	}
	for (uint32_t i = 0; i < SYNC_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(sc[i].bad, 0);
	}
	assert_true(xprt_conn_alive(c));
	assert_int_equal(xprt_conn_stats(c, &cs), 0);
	assert_int_equal(cs.calls_pending, 0);
	/* and the connection still serves one-sided traffic and the progress thread's reads */
	bulk(c, M_PULL, 0, 65536, 9, 0);
	echo_ok(c, 1000);
	xprt_conn_close(c);
}

/* Takes and drops references to one connection, over and over, holding one of its own. */
static void *ref_churn_main(void *arg)
{
	struct xprt_conn *c = arg;

	for (uint32_t i = 0; i < 200000; i++) {
		xprt_conn_get(c);
		xprt_conn_put(c);
	}
	xprt_conn_put(c);
	return NULL;
}

static void ref_churn_start(struct xprt_conn *c, pthread_t *t, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		xprt_conn_get(c);
		assert_int_equal(pthread_create(&t[i], NULL, ref_churn_main, c), 0);
	}
}

/*
 * xprt.h, xprt_conn_get(): references taken and dropped on many threads
 * while calls run all count, and while the owner closes the connection and
 * the reaper looks at it; a reference keeps a closed connection valid (dead,
 * failing calls) past the reaper's passes, until it is dropped. A lost
 * count shows as a use after free under ASan (the asan build runs this
 * suite).
 */
static void test_conn_refs(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri), *other;
	pthread_t t[4];

	ref_churn_start(c, t, 4);
	for (uint32_t i = 0; i < 200; i++)
		echo_ok(c, 64);
	for (uint32_t i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* the owner closes while the others churn, then they drop theirs */
	other = connect_ok(cli_ctx, srv_uri);
	echo_ok(other, 64);
	ref_churn_start(other, t, 4);
	xprt_conn_close(other);
	for (uint32_t i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* the first, still counted right: held past its close and the reaper's passes */
	xprt_conn_get(c);
	xprt_conn_close(c);
	usleep(50000); /* five of the progress thread's passes, each a reap */
	assert_false(xprt_conn_alive(c));
	assert_int_not_equal(xprt_call(c, M_ECHO, "x", 1, NULL, 0, NULL, 1000), 0);
	xprt_conn_put(c);
}

/* What xprt_call_wait()'s callback saw, and on which thread (test_call_wait_caller()). */
struct wait_seen {
	int status;
	size_t len;
	pthread_t thread;
};

static void wait_seen_cb(void *arg, int status, const void *body, size_t len)
{
	struct wait_seen *ws = arg;

	ws->status = status;
	ws->len = len;
	ws->thread = pthread_self();
}

/*
 * xprt.h, xprt_call_wait(): the caller reads its connection itself while it
 * waits (tcp: the socket; verbs: the completion channel), so with one caller
 * and no busy polling each answer is handled on the calling thread, never
 * handed over by the progress thread; and it wakes about once per call
 * (xprt_conn_stats.wait_wakeups).
 */
static void test_call_wait_caller(void **state)
{
	struct xprt_ctx *ctx = make_ctx_poll(SECRET, 0, NULL, 0);
	struct xprt_conn_stats cs;
	struct xprt_conn *c;
	unsigned elsewhere = 0;

	assert_non_null(ctx);
	c = connect_ok(ctx, srv_uri);
	for (uint32_t i = 0; i < 500; i++) {
		struct wait_seen ws = {.status = 1};

		assert_int_equal(xprt_call_wait(c, M_ECHO, &i, sizeof(i), 0, wait_seen_cb, &ws), 0);
		assert_int_equal(ws.status, 0);
		assert_int_equal(ws.len, sizeof(i));
		if (!pthread_equal(ws.thread, pthread_self()))
			elsewhere++;
	}
	assert_int_equal(elsewhere, 0);
	/*
	 * One wakeup per call, the answer's, and a few more (tcp: the socket
	 * writable again; verbs: the completion of every (credits + 4) / 4-th SEND):
	 * never one for each request's SEND as well, which would make 1000.
	 */
	assert_int_equal(xprt_conn_stats(c, &cs), 0);
	print_message("%llu wakeups of the caller for 500 calls\n",
		      (unsigned long long)cs.wait_wakeups);
	assert_true(cs.wait_wakeups >= 1);
	assert_true(cs.wait_wakeups <= 500 + 500 / 4);
	xprt_conn_close(c);
	xprt_ctx_destroy(ctx);
}

/* A call to M_LATE, answered @delay_us after the server took it. */
static void late_ok(struct xprt_conn *c, uint32_t delay_us)
{
	uint32_t resp = 0;
	size_t got = 0;

	assert_int_equal(
		xprt_call(c, M_LATE, &delay_us, sizeof(delay_us), &resp, sizeof(resp), &got, 0), 0);
	assert_int_equal(got, sizeof(resp));
	assert_int_equal(resp, delay_us);
}

/*
 * xprt.h, busy_poll_us: waits whose spins keep missing their answers stop
 * spinning, all but every XPRT_SPIN_RETRY-th, and the first spin that gets
 * its answer makes every wait spin again, over either backend. The misses
 * are certain: the server answers 100 ms after it took the call, the client
 * spins 10 ms. The hit is looked for over 20 retries of an echo.
 */
static void test_spin_adapts(void **state)
{
	struct xprt_ctx *ctx = make_ctx_poll(SECRET, 0, NULL, 10000);
	struct xprt_conn_stats cs;
	struct xprt_conn *c;
	unsigned echoes;
	uint64_t spins;

	assert_non_null(ctx);
	c = connect_ok(ctx, srv_uri);
	for (unsigned i = 0; i < XPRT_SPIN_MISSES + XPRT_SPIN_RETRY; i++)
		late_ok(c, 100000);
	assert_int_equal(xprt_conn_stats(c, &cs), 0);
	/* XPRT_SPIN_MISSES spun and missed, XPRT_SPIN_RETRY - 1 slept at once, the last spun */
	assert_int_equal(cs.spins, XPRT_SPIN_MISSES + 1);
	assert_int_equal(cs.spin_hits, 0);
	for (echoes = 0; echoes < 20 * XPRT_SPIN_RETRY && !cs.spin_hits; echoes++) {
		echo_ok(c, 8);
		assert_int_equal(xprt_conn_stats(c, &cs), 0);
	}
	printf("spins: %u of %u late calls spun, all missed; an echo's spin got its answer "
	       "after %u echoes\n",
	       XPRT_SPIN_MISSES + 1, XPRT_SPIN_MISSES + XPRT_SPIN_RETRY, echoes);
	assert_int_equal(cs.spin_hits, 1);
	spins = cs.spins;
	for (unsigned i = 0; i < 4; i++)
		echo_ok(c, 8);
	assert_int_equal(xprt_conn_stats(c, &cs), 0);
	assert_int_equal(cs.spins, spins + 4);
	xprt_conn_close(c);
	xprt_ctx_destroy(ctx);
}

/* xprt.h, xprt_options_init(): the defaults it promises. */
static void test_option_defaults(void **state)
{
	struct xprt_options o;

	xprt_options_init(&o);
	assert_int_equal(o.recv_credits, 64);
	assert_int_equal(o.max_msg_size, 16 * 1024);
	assert_int_equal(o.call_timeout_ms, 10000);
	assert_int_equal(o.ping_interval_ms, 2000);
	assert_int_equal(o.busy_poll_us, 100);
}

/*
 * xprt.h, busy_poll_us: the progress thread spins after it delivered a
 * request, and adapts as a caller's wait does; with busy_poll_us 0 it
 * never spins. A server whose spins last XPRT_BUSY_POLL_MAX_US (100 ms),
 * and a client that does not spin: calls 300 ms apart find the server's
 * spins missing, so after XPRT_SPIN_MISSES in a row it spins once more in
 * the XPRT_SPIN_RETRY calls after them, not at each (over tcp, where a call
 * is the server's only event; over verbs a reply's completion is one too,
 * and can end a spin); calls back to back end the spin the one before
 * started (a hit), once a retried spin has hit: at least 12 of 16, which
 * leaves room for a caller stalled past 100 ms on a loaded machine.
 */
static void test_progress_spin_adapts(void **state)
{
	struct xprt_ctx *srv = make_ctx_poll(SECRET, 0, NULL, XPRT_BUSY_POLL_MAX_US);
	struct xprt_ctx *cli = make_ctx_poll(SECRET, 0, NULL, 0);
	struct xprt_ctx_stats a, b;
	struct xprt_listener *l;
	uint64_t spaced, hits;
	struct xprt_conn *c;
	char uri[128];

	assert_non_null(srv);
	assert_non_null(cli);
	snprintf(uri, sizeof(uri), "%s://%s:0", kind_name, test_addr);
	assert_int_equal(xprt_listen(srv, uri, serve, NULL, &l), 0);
	snprintf(uri, sizeof(uri), "%s://%s:%u", kind_name, test_addr, xprt_listener_port(l));
	c = connect_ok(cli, uri);
	echo_ok(c, 8);
	xprt_ctx_stats(srv, &a);
	for (unsigned i = 0; i < XPRT_SPIN_MISSES + XPRT_SPIN_RETRY; i++) {
		usleep(300000);
		echo_ok(c, 8);
	}
	xprt_ctx_stats(srv, &b);
	spaced = b.progress_spins - a.progress_spins;
	/* the server's spins, back to back: a retried one hits, then each does */
	for (unsigned i = 0; i <= XPRT_SPIN_RETRY; i++)
		echo_ok(c, 8);
	xprt_ctx_stats(srv, &a);
	for (unsigned i = 0; i < 16; i++)
		echo_ok(c, 8);
	xprt_ctx_stats(srv, &b);
	hits = b.progress_spin_hits - a.progress_spin_hits;
	printf("progress spins: %" PRIu64 " for %u calls 300 ms apart; %" PRIu64
	       " hits for 16 calls back to back\n",
	       spaced, XPRT_SPIN_MISSES + XPRT_SPIN_RETRY, hits);
	if (!strcmp(kind_name, "tcp"))
		assert_true(spaced <= XPRT_SPIN_MISSES + 2);
	else
		assert_true(spaced < XPRT_SPIN_MISSES + XPRT_SPIN_RETRY);
	assert_true(hits >= 12);
	xprt_ctx_stats(cli, &b);
	assert_int_equal(b.progress_spins, 0);
	xprt_conn_close(c);
	xprt_listener_close(l);
	xprt_ctx_destroy(cli);
	xprt_ctx_destroy(srv);
}

/* A bad one-sided access kills that connection (same error on both backends) and no other. */
static void bad_access(uint64_t addr_delta, int rkey_delta, uint32_t len, bool overflow_addr)
{
	struct xprt_conn *bystander = connect_ok(cli_ctx, srv_uri);
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	struct xprt_desc d;
	struct bulk_req br;
	uint64_t hash;
	int ret;

	assert_int_equal(xprt_mr_desc(c, cli_mr, cli_buf, 4096, &d), 0);
	br.addr = overflow_addr ? UINT64_MAX - 10 : d.addr + addr_delta;
	br.rkey = d.rkey + (uint32_t)rkey_delta;
	br.len = len;
	br.seed = 1;
	last_server_rdma_status = 0;
	ret = xprt_call(c, M_PULL, &br, sizeof(br), &hash, sizeof(hash), NULL, 0);
	assert_true(ret == -EACCES || ret == -ECONNRESET);
	assert_int_equal(last_server_rdma_status, -EACCES);
	/* The connection is dead on our side too, within a bounded time. */
	for (int i = 0; i < 300 && xprt_conn_alive(c); i++)
		usleep(10000);
	assert_false(xprt_conn_alive(c));
	assert_int_equal(xprt_call(c, M_ECHO, "x", 1, NULL, 0, NULL, 0), -ENOTCONN);
	echo_ok(bystander, 100);
	bulk(bystander, M_PULL, 0, 4096, 5, 0);
	xprt_conn_close(c);
	xprt_conn_close(bystander);
}

static void test_wrong_key(void **state)
{
	bad_access(0, 1, 4096, false);
}

static void test_out_of_bounds(void **state)
{
	/* Past the end of the region, and an address whose end wraps around. */
	bad_access(BIG - 100, 0, 4096, false);
	bad_access(0, 0, 4096, true);
}

static void test_wrong_secret(void **state)
{
	struct xprt_ctx *bad = make_ctx("not-the-secret", 0);
	struct xprt_conn *c = NULL;

	assert_non_null(bad);
	assert_int_equal(xprt_connect(bad, srv_uri, &c), -EACCES);
	assert_null(c);
	xprt_ctx_destroy(bad);
	/* The server is fine. */
	c = connect_ok(cli_ctx, srv_uri);
	echo_ok(c, 10);
	xprt_conn_close(c);
}

/* Options out of range are refused before anything is made; the limits themselves are taken. */
static void test_bad_options(void **state)
{
	struct xprt_options o;
	struct xprt_ctx *ctx = NULL;

	xprt_options_init(&o);
	o.secret = "s";
	o.secret_len = 1;
	o.busy_poll_us = XPRT_BUSY_POLL_MAX_US + 1;
	assert_int_equal(xprt_ctx_create(&o, &ctx), -EINVAL);
	assert_null(ctx);
	o.busy_poll_us = XPRT_BUSY_POLL_MAX_US;
	assert_int_equal(xprt_ctx_create(&o, &ctx), 0);
	xprt_ctx_destroy(ctx);
	ctx = NULL;
	o.busy_poll_us = 0;
	o.recv_credits = 3;
	assert_int_equal(xprt_ctx_create(&o, &ctx), -EINVAL);
	assert_null(ctx);
}

/* What the server says it authenticated on @c. */
static void identity_of(struct xprt_conn *c, struct xprt_identity *id)
{
	size_t got = 0;

	assert_int_equal(xprt_call(c, M_IDENTITY, NULL, 0, id, sizeof(*id), &got, 0), 0);
	assert_int_equal(got, sizeof(*id));
}

/* A client context holding a key for (@name, @serial, @flags) made from @secret. */
static struct xprt_ctx *key_ctx(const char *secret, const char *name, uint64_t serial,
				uint32_t flags, struct xprt_key *k)
{
	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->serial = serial;
	k->flags = flags;
	assert_int_equal(xprt_key_derive(secret, strlen(secret), name, serial, flags, k->key), 0);
	/* a key holder has no secret */
	return make_ctx_key(NULL, 0, k);
}

static void test_client_keys(void **state)
{
	struct xprt_identity id;
	struct xprt_key k;
	struct xprt_ctx *kc;
	struct xprt_conn *c = NULL;

	/* the cluster secret: full trust, no key identity */
	c = connect_ok(cli_ctx, srv_uri);
	identity_of(c, &id);
	assert_false(id.keyed);
	xprt_conn_close(c);

	/* a key made from the secret: the server knows who it is */
	kc = key_ctx(SECRET, "alice", 7, 3, &k);
	assert_non_null(kc);
	c = connect_ok(kc, srv_uri);
	echo_ok(c, 100);
	identity_of(c, &id);
	assert_true(id.keyed);
	assert_string_equal(id.name, "alice");
	assert_int_equal(id.serial, 7);
	assert_int_equal(id.flags, 3);
	memset(&id, 0, sizeof(id));
	assert_int_equal(xprt_conn_identity(c, &id), 0);
	assert_true(id.keyed);
	assert_string_equal(id.name, "alice");
	xprt_conn_close(c);
	c = NULL;
	xprt_ctx_destroy(kc);

	/* flags altered after the key was made: refused */
	kc = key_ctx(SECRET, "alice", 7, 3, &k);
	assert_non_null(kc);
	xprt_ctx_destroy(kc);
	k.flags = 0;
	kc = make_ctx_key(NULL, 0, &k);
	assert_non_null(kc);
	assert_int_equal(xprt_connect(kc, srv_uri, &c), -EACCES);
	assert_null(c);
	xprt_ctx_destroy(kc);

	/* a key of another cluster secret: refused */
	kc = key_ctx("another-secret", "alice", 7, 3, &k);
	assert_non_null(kc);
	assert_int_equal(xprt_connect(kc, srv_uri, &c), -EACCES);
	assert_null(c);
	xprt_ctx_destroy(kc);

	/* the server's identity check refuses a revoked serial, and says why */
	kc = key_ctx(SECRET, "mallory", REVOKED_SERIAL, 0, &k);
	assert_non_null(kc);
	assert_int_equal(xprt_connect(kc, srv_uri, &c), -EKEYREVOKED);
	assert_null(c);
	xprt_ctx_destroy(kc);

	/* a key with a bad name never makes a context */
	memset(&k, 0, sizeof(k));
	snprintf(k.name, sizeof(k.name), "a b");
	assert_null(make_ctx_key(NULL, 0, &k));

	/* the server is fine */
	c = connect_ok(cli_ctx, srv_uri);
	echo_ok(c, 10);
	xprt_conn_close(c);
}

static void test_call_timeout(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	uint64_t t0 = now_ms();

	assert_int_equal(xprt_call(c, M_HOLD, NULL, 0, NULL, 0, NULL, 300), -ETIMEDOUT);
	assert_true(now_ms() - t0 < 3000);
	/* The connection was reset so no late answer can land in a reused buffer. */
	assert_false(xprt_conn_alive(c));
	xprt_conn_close(c);
	c = connect_ok(cli_ctx, srv_uri);
	echo_ok(c, 10);
	xprt_conn_close(c);
}

static void count_reply(void *arg, int status, const void *body, size_t len)
{
	int *runs = arg;

	__atomic_fetch_add(runs, 1, __ATOMIC_SEQ_CST);
}

/*
 * xprt.h: an _async call returns 0 and its callback runs exactly once, or
 * returns an error and its callback never runs. A caller counting calls as
 * pending relies on it: a connection that dies between taking it and sending
 * must not leave a count that nothing will ever bring down.
 */
static void test_async_contract(void **state)
{
	struct xprt_conn *c = connect_ok(cli_ctx, srv_uri);
	size_t max = xprt_conn_max_body(c);
	uint8_t *big = calloc(1, max + 1);
	int runs = 0;

	assert_non_null(big);
	/* Too large: refused at once, no callback. */
	assert_int_equal(xprt_call_async(c, M_ECHO, big, max + 1, 0, count_reply, &runs),
			 -EMSGSIZE);
	assert_true(xprt_conn_alive(c));
	/* Queued: exactly one callback, even for a call that times out. */
	assert_int_equal(xprt_call_async(c, M_HOLD, NULL, 0, 300, count_reply, &runs), 0);
	for (int i = 0; i < 500 && __atomic_load_n(&runs, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(10000);
	usleep(200000);
	assert_int_equal(__atomic_load_n(&runs, __ATOMIC_SEQ_CST), 1);
	xprt_conn_close(c);

	/* Reset between get and send: -ENOTCONN, and the callback never runs. */
	c = connect_ok(cli_ctx, srv_uri);
	xprt_conn_reset(c);
	runs = 0;
	assert_int_equal(xprt_call_async(c, M_ECHO, big, 8, 0, count_reply, &runs), -ENOTCONN);
	usleep(200000);
	assert_int_equal(__atomic_load_n(&runs, __ATOMIC_SEQ_CST), 0);
	xprt_conn_close(c);

	/* The same for one-sided operations on the server's side. */
	c = connect_ok(cli_ctx, srv_uri);
	__atomic_store_n(&reset_read_ret, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&reset_write_ret, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&reset_cb_runs, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(xprt_call(c, M_RESET_RDMA, NULL, 0, NULL, 0, NULL, 0), -ECONNRESET);
	/* The handler may still be running when the reset reaches us. */
	for (int i = 0; i < 500 && __atomic_load_n(&reset_write_ret, __ATOMIC_SEQ_CST) == 1; i++)
		usleep(10000);
	usleep(200000);
	assert_int_equal(reset_read_ret, -ENOTCONN);
	assert_int_equal(reset_write_ret, -ENOTCONN);
	assert_int_equal(__atomic_load_n(&reset_cb_runs, __ATOMIC_SEQ_CST), 0);
	xprt_conn_close(c);
	free(big);
}

static void raw_message_rejected(uint32_t magic, uint8_t version, size_t body_len,
				 struct xprt_ctx *ctx)
{
	struct xprt_conn *c = connect_ok(ctx, srv_uri);
	struct xprt_hdr h = {.magic = magic,
			     .version = version,
			     .type = XPRT_MSG_REQUEST,
			     .request_id = 999,
			     .method = M_ECHO,
			     .body_len = (uint32_t)body_len,
			     .credits = 0};
	uint8_t *raw = calloc(1, XPRT_HDR_SIZE + body_len);

	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_conn_send_raw(c, raw, XPRT_HDR_SIZE + body_len), 0);
	for (int i = 0; i < 500 && xprt_conn_alive(c); i++)
		usleep(10000);
	assert_false(xprt_conn_alive(c));
	free(raw);
	xprt_conn_close(c);
	/* The server survived and serves others. */
	c = connect_ok(cli_ctx, srv_uri);
	echo_ok(c, 64);
	xprt_conn_close(c);
}

static void test_bad_messages(void **state)
{
	/* This client may send bigger messages than the server takes. */
	struct xprt_ctx *big = make_ctx(SECRET, 64u << 10);

	assert_non_null(big);
	raw_message_rejected(0xdeadbeef, XPRT_VERSION, 16, cli_ctx);
	raw_message_rejected(XPRT_MAGIC, XPRT_VERSION + 1, 16, cli_ctx);
	raw_message_rejected(XPRT_MAGIC, XPRT_VERSION, (32u << 10), big);
	xprt_ctx_destroy(big);
}

/* ---- tests with a server in another process ---- */

static pid_t spawn_server(uint16_t port, uint16_t *bound)
{
	char self[4096], port_s[16];
	char *argv[] = {self, "--serve", (char *)kind_name, port_s, NULL};
	posix_spawn_file_actions_t fa;
	int fds[2];
	pid_t pid;
	FILE *f;
	unsigned p = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	assert_true(n > 0);
	self[n] = '\0';
	snprintf(port_s, sizeof(port_s), "%u", port);
	assert_int_equal(pipe(fds), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	assert_int_equal(posix_spawn(&pid, self, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	f = fdopen(fds[0], "r");
	assert_int_equal(fscanf(f, "READY %u", &p), 1);
	fclose(f);
	*bound = (uint16_t)p;
	return pid;
}

static void kill_server(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

static void test_peer_killed(void **state)
{
	uint16_t port;
	pid_t pid = spawn_server(0, &port);
	char uri[128];
	struct xprt_conn *c;
	uint64_t t0;
	int ret;

	snprintf(uri, sizeof(uri), "%s://%s:%u", kind_name, test_addr, port);
	c = connect_ok(cli_ctx, uri);
	echo_ok(c, 100);
	/* The call would wait 20 s; the dead peer must end it much sooner. */
	kill(pid, SIGKILL);
	t0 = now_ms();
	ret = xprt_call(c, M_HOLD, NULL, 0, NULL, 0, NULL, 20000);
	assert_true(ret == -ECONNRESET || ret == -ETIMEDOUT || ret == -ENOTCONN);
	assert_true(now_ms() - t0 < 10000);
	assert_false(xprt_conn_alive(c));
	xprt_conn_close(c);
	waitpid(pid, NULL, 0);
}

static void *kill_later(void *arg)
{
	usleep(300000);
	kill(*(pid_t *)arg, SIGKILL);
	return NULL;
}

static void test_pending_call_fails_on_kill(void **state)
{
	pthread_t killer;
	uint16_t port;
	pid_t pid = spawn_server(0, &port);
	char uri[128];
	struct xprt_conn *c;
	uint64_t t0;
	int ret;

	snprintf(uri, sizeof(uri), "%s://%s:%u", kind_name, test_addr, port);
	c = connect_ok(cli_ctx, uri);
	/* The server holds the call; kill it from a thread while we wait (no fork after RDMA init).
	 */
	assert_int_equal(pthread_create(&killer, NULL, kill_later, &pid), 0);
	t0 = now_ms();
	ret = xprt_call(c, M_HOLD, NULL, 0, NULL, 0, NULL, 20000);
	assert_true(ret == -ECONNRESET || ret == -ETIMEDOUT);
	assert_true(now_ms() - t0 < 10000);
	pthread_join(killer, NULL);
	xprt_conn_close(c);
	waitpid(pid, NULL, 0);
}

static void test_reconnect_after_restart(void **state)
{
	uint16_t port, port2;
	pid_t pid = spawn_server(0, &port);
	char uri[128];
	struct xprt_conn *c;

	snprintf(uri, sizeof(uri), "%s://%s:%u", kind_name, test_addr, port);
	c = connect_ok(cli_ctx, uri);
	echo_ok(c, 100);
	kill_server(pid);
	for (int i = 0; i < 1000 && xprt_conn_alive(c); i++)
		usleep(10000);
	assert_false(xprt_conn_alive(c));
	xprt_conn_close(c);
	pid = spawn_server(port, &port2);
	assert_int_equal(port, port2);
	c = connect_ok(cli_ctx, uri);
	echo_ok(c, 1000);
	xprt_conn_close(c);
	kill_server(pid);
}

static int serve_forever(const char *kind, const char *port)
{
	struct xprt_ctx *ctx = make_ctx(SECRET, 0);
	struct xprt_listener *l;
	char uri[128];

	if (!ctx)
		return 1;
	snprintf(uri, sizeof(uri), "%s://%s:%s", kind, test_addr, port);
	if (xprt_listen(ctx, uri, serve, NULL, &l))
		return 1;
	printf("READY %u\n", xprt_listener_port(l));
	fflush(stdout);
	for (;;)
		pause();
}

/* ---- setup ---- */

static int setup(void **state)
{
	size_t len = BIG;

	srv_ctx = make_ctx(SECRET, 0);
	cli_ctx = make_ctx(SECRET, 0);
	if (!srv_ctx || !cli_ctx)
		return -1;
	srv_buf = aligned_alloc(4096, len);
	cli_buf = aligned_alloc(4096, len);
	if (!srv_buf || !cli_buf)
		return -1;
	if (xprt_mr_register(srv_ctx, srv_buf, len, XPRT_ACCESS_LOCAL, &srv_mr) ||
	    xprt_mr_register(cli_ctx, cli_buf, len,
			     XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE, &cli_mr))
		return -1;
	snprintf(srv_uri, sizeof(srv_uri), "%s://%s:0", kind_name, test_addr);
	if (xprt_listen(srv_ctx, srv_uri, serve, NULL, &srv_listener))
		return -1;
	snprintf(srv_uri, sizeof(srv_uri), "%s://%s:%u", kind_name, test_addr,
		 xprt_listener_port(srv_listener));
	return 0;
}

static int teardown(void **state)
{
	if (held_req)
		xprt_reply(held_req, -ECANCELED, NULL, 0);
	held_req = NULL;
	xprt_mr_deregister(cli_mr);
	xprt_ctx_destroy(cli_ctx);
	xprt_mr_deregister(srv_mr);
	xprt_ctx_destroy(srv_ctx);
	free(cli_buf);
	free(srv_buf);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo_sizes),
		cmocka_unit_test(test_bulk_read_write),
		cmocka_unit_test(test_many_rpcs),
		cmocka_unit_test(test_sync_callers),
		cmocka_unit_test(test_call_wait_caller),
		cmocka_unit_test(test_conn_refs),
		cmocka_unit_test(test_spin_adapts),
		cmocka_unit_test(test_progress_spin_adapts),
		cmocka_unit_test(test_option_defaults),
		cmocka_unit_test(test_batch_end),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_out_of_bounds),
		cmocka_unit_test(test_wrong_secret),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_client_keys),
		cmocka_unit_test(test_call_timeout),
		cmocka_unit_test(test_async_contract),
		cmocka_unit_test(test_bad_messages),
		cmocka_unit_test(test_peer_killed),
		cmocka_unit_test(test_pending_call_fails_on_kill),
		cmocka_unit_test(test_reconnect_after_restart),
	};
	struct xprt_ctx *probe;
	bool has_rdma;

	/*
	 * SIGPIPE is left at its default on purpose: the tests that kill a peer
	 * would die of it if the library ever wrote to a dead socket without
	 * MSG_NOSIGNAL.
	 */
	if (argc == 4 && strcmp(argv[1], "--serve") == 0)
		return serve_forever(argv[2], argv[3]);
	if (argc != 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "rdma"))) {
		fprintf(stderr, "usage: conformance tcp|rdma\n");
		return 2;
	}
	kind_name = argv[1];
	if (getenv("RDMAFS_TEST_ADDR"))
		test_addr = getenv("RDMAFS_TEST_ADDR");
	if (strcmp(kind_name, "rdma") == 0) {
		probe = make_ctx(SECRET, 0);
		has_rdma = probe && xprt_ctx_has_rdma(probe);
		xprt_ctx_destroy(probe);
		if (!has_rdma) {
			printf("SKIP: no RDMA device on this host (the rdma-vm suite runs this on "
			       "soft-RoCE)\n");
			return EXIT_SKIP;
		}
	}
	xprt_set_log(NULL, NULL, getenv("RDMAFS_DEBUG") ? XPRT_LOG_DEBUG : XPRT_LOG_ERR);
	return cmocka_run_group_tests_name(kind_name, tests, setup, teardown);
}
