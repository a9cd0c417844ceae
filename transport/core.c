/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The backend-independent part of libxprt: contexts and their progress thread,
 * connections (setup, HELLO, credits, death), calls, requests, one-sided
 * operation bookkeeping, timeouts and idle probes.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sodium.h>

#include "xprt_i.h"

#define DEFAULT_CREDITS		64u
#define DEFAULT_MAX_MSG		(16u << 10)
#define DEFAULT_CALL_TIMEOUT	10000u
#define DEFAULT_CONNECT_TIMEOUT 5000u
#define DEFAULT_PING_INTERVAL	2000u
#define DEFAULT_RDMA_INFLIGHT	16u
/* A peer that answers no ping for this many intervals is dead. */
#define PING_MISSES 3u
/* How often the progress thread checks deadlines; bounds how late a timeout fires. */
#define TIMER_PERIOD_MS 10
/* Poll this long before sleeping (xprt.h, busy_poll_us): a wake-up outlasts a VM's round trip. */
#define DEFAULT_BUSY_POLL_US 100u
/* How long a rejected or erring peer gets to read our last word before we cut it. */
#define DOOM_GRACE_MS 500u
#define EPOLL_BATCH   32

/* ---- logging ---- */

static xprt_log_cb log_cb;
static void *log_arg;
static enum xprt_log_level log_max = XPRT_LOG_WARN;

void xprt_set_log(xprt_log_cb cb, void *arg, enum xprt_log_level max_level)
{
	log_cb = cb;
	log_arg = arg;
	log_max = max_level;
}

void xprt_log(enum xprt_log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	char msg[512];
	va_list ap;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_cb)
		log_cb(level, msg, log_arg);
	else
		fprintf(stderr, "xprt %s: %s\n", names[level], msg);
}

const char *xprt_strerror(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return "timed out (no answer from the peer; the connection was reset)";
	case -ECONNRESET:
		return "connection reset (the peer died or closed while the call was pending)";
	case -ENOTCONN:
		return "not connected (the connection had already died)";
	case -EACCES:
		return "access refused (wrong cluster secret, or a one-sided access with a wrong "
		       "key or out of bounds)";
	case -EPROTO:
		return "protocol error (bad magic, version or message from the peer)";
	case -EMSGSIZE:
		return "message too long for the connection";
	case -ENODEV:
		return "no RDMA device (use tcp:// or auto://)";
	case -EKEYREVOKED:
		return "key revoked (the administrator revoked this client's key: ask for a new "
		       "one)";
	default:
		/* Never negate INT_MIN: out-of-range values are not errnos anyway. */
		if (err < -XPRT_MAX_ERRNO || err > XPRT_MAX_ERRNO)
			return "not an errno";
		return strerror(err < 0 ? -err : err);
	}
}

/* ---- options, URIs ---- */

void xprt_options_init(struct xprt_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->recv_credits = DEFAULT_CREDITS;
	opts->max_msg_size = DEFAULT_MAX_MSG;
	opts->call_timeout_ms = DEFAULT_CALL_TIMEOUT;
	opts->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT;
	opts->ping_interval_ms = DEFAULT_PING_INTERVAL;
	opts->max_rdma_inflight = DEFAULT_RDMA_INFLIGHT;
	opts->busy_poll_us = DEFAULT_BUSY_POLL_US;
	opts->name = "";
}

const char *xprt_kind_name(enum xprt_kind kind)
{
	switch (kind) {
	case XPRT_KIND_VERBS:
		return "rdma";
	case XPRT_KIND_TCP:
		return "tcp";
	default:
		return "auto";
	}
}

int xprt_uri_parse(const char *uri, enum xprt_kind *kind, char *host, size_t host_size,
		   uint16_t *port)
{
	const char *rest = uri, *colon, *host_start, *host_end;
	unsigned long value;
	char *end;
	size_t n;

	if (!uri)
		return -EINVAL;
	*kind = XPRT_KIND_AUTO;
	if (strncmp(uri, "rdma://", 7) == 0) {
		*kind = XPRT_KIND_VERBS;
		rest = uri + 7;
	} else if (strncmp(uri, "tcp://", 6) == 0) {
		*kind = XPRT_KIND_TCP;
		rest = uri + 6;
	} else if (strncmp(uri, "auto://", 7) == 0) {
		rest = uri + 7;
	} else if (strstr(uri, "://")) {
		return -EINVAL;
	}
	if (*rest == '[') {
		host_start = rest + 1;
		host_end = strchr(host_start, ']');
		if (!host_end || host_end[1] != ':')
			return -EINVAL;
		colon = host_end + 1;
	} else {
		host_start = rest;
		colon = strrchr(rest, ':');
		if (!colon)
			return -EINVAL;
		host_end = colon;
	}
	n = (size_t)(host_end - host_start);
	if (n == 0 || n >= host_size || memchr(host_start, '/', n))
		return -EINVAL;
	if (colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	errno = 0;
	value = strtoul(colon + 1, &end, 10);
	if (errno || *end != '\0' || value > 65535)
		return -EINVAL;
	memcpy(host, host_start, n);
	host[n] = '\0';
	*port = (uint16_t)value;
	return 0;
}

bool xprt_ctx_has_rdma(const struct xprt_ctx *ctx)
{
	return ctx->backends[XPRT_KIND_VERBS] != NULL;
}

enum xprt_kind xprt_ctx_resolve_kind(const struct xprt_ctx *ctx, enum xprt_kind kind)
{
	if (kind == XPRT_KIND_AUTO)
		return xprt_ctx_has_rdma(ctx) ? XPRT_KIND_VERBS : XPRT_KIND_TCP;
	return kind;
}

/* ---- polling ---- */

int xprt_core_poll_add(struct xprt_ctx *ctx, struct xprt_poller *p, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = p};

	return epoll_ctl(ctx->epoll_fd, EPOLL_CTL_ADD, p->fd, &ev) ? -errno : 0;
}

int xprt_core_poll_mod(struct xprt_ctx *ctx, struct xprt_poller *p, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = p};

	return epoll_ctl(ctx->epoll_fd, EPOLL_CTL_MOD, p->fd, &ev) ? -errno : 0;
}

void xprt_core_poll_del(struct xprt_ctx *ctx, struct xprt_poller *p)
{
	epoll_ctl(ctx->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
}

/* ---- watched descriptors ---- */

struct xprt_watch {
	struct xprt_poller poller; /* first: the epoll event's pointer */
	struct xprt_ctx *ctx;
	struct list_head link; /* ctx->watches */
	xprt_watch_cb cb;
	void *arg;
	bool closed;
};

static void watch_ready(struct xprt_poller *p, uint32_t events)
{
	struct xprt_watch *w = (struct xprt_watch *)p;

	(void)events;
	/* an event of this epoll batch may name a watch closed since */
	if (!w->closed)
		w->cb(w->arg);
}

int xprt_watch_add(struct xprt_ctx *ctx, int fd, xprt_watch_cb cb, void *arg,
		   struct xprt_watch **out)
{
	struct xprt_watch *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	*w = (struct xprt_watch){
		.poller = {.fd = fd, .fn = watch_ready}, .ctx = ctx, .cb = cb, .arg = arg};
	pthread_mutex_lock(&ctx->lock);
	ret = xprt_core_poll_add(ctx, &w->poller, EPOLLIN);
	if (!ret)
		list_add_tail(&w->link, &ctx->watches);
	pthread_mutex_unlock(&ctx->lock);
	if (ret) {
		free(w);
		return ret;
	}
	*out = w;
	return 0;
}

void xprt_watch_close(struct xprt_watch *watch)
{
	struct xprt_ctx *ctx;

	if (!watch)
		return;
	ctx = watch->ctx;
	/* callbacks run under the lock: none runs while this holds it, none after */
	pthread_mutex_lock(&ctx->lock);
	if (!watch->closed)
		xprt_core_poll_del(ctx, &watch->poller);
	watch->closed = true;
	pthread_mutex_unlock(&ctx->lock);
}

/*
 * Frees the closed watches; on the progress thread between two epoll
 * batches (as reap_conns()), so no event still names one, or with it gone
 * (@all: the open ones too).
 */
static void reap_watches(struct xprt_ctx *ctx, bool all)
{
	struct list_head *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->watches) {
		struct xprt_watch *w = list_entry(pos, struct xprt_watch, link);

		if (w->closed || all) {
			list_del(&w->link);
			free(w);
		}
	}
}

/* ---- connections: lifetime ---- */

static struct xprt_conn *conn_alloc(struct xprt_ctx *ctx, const struct xprt_backend_ops *ops)
{
	struct xprt_conn *c = calloc(1, sizeof(*c));
	pthread_condattr_t attr;

	if (!c)
		return NULL;
	c->ctx = ctx;
	c->ops = ops;
	c->refs = 1;
	c->next_id = 1;
	list_init(&c->sendq);
	list_init(&c->calls);
	list_init(&c->rdma_wait);
	list_init(&c->rdma_posted);
	list_init(&c->sync_waits);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->state_cond, &attr);
	pthread_condattr_destroy(&attr);
	c->connect_deadline_ns = xprt_now_ns() + xprt_ms_to_ns(ctx->opts.connect_timeout_ms);
	c->last_rx_ns = xprt_now_ns();
	list_add_tail(&c->link, &ctx->conns);
	return c;
}

/*
 * True once @c can be freed: nobody refers to it and the backend has nothing
 * outstanding. Freeing itself happens only in reap_conns(), on the progress
 * thread between two epoll batches, so no backend ever sees its connection
 * vanish in the middle of handling an event.
 */
static bool conn_reapable(const struct xprt_conn *c)
{
	return __atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) <= 0 && c->state == XPRT_CONN_DEAD &&
	       list_empty(&c->rdma_posted);
}

static void conn_free(struct xprt_conn *c)
{
	if (c->backend)
		c->ops->conn_destroy(c);
	list_del(&c->link);
	pthread_cond_destroy(&c->state_cond);
	free(c);
}

static void reap_conns(struct xprt_ctx *ctx)
{
	struct list_head *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->conns) {
		struct xprt_conn *c = list_entry(pos, struct xprt_conn, link);

		if (conn_reapable(c))
			conn_free(c);
	}
}

void xprt_conn_get(struct xprt_conn *conn)
{
	conn_ref(conn);
}

void xprt_conn_put(struct xprt_conn *conn)
{
	if (conn)
		conn_unref(conn);
}

struct xprt_conn *xprt_core_conn_new(struct xprt_listener *l)
{
	struct xprt_conn *c = conn_alloc(l->ctx, l->ops);

	if (!c)
		return NULL;
	/* The server side's reference is held until the connection dies. */
	c->listener = l;
	c->is_server = true;
	return c;
}

static void rdma_op_finish(struct xprt_rdma_op *op, int status)
{
	list_del(&op->link);
	op->cb(op->arg, status);
	free(op);
}

/*
 * Kills @c: the backend stops its traffic, every pending call and waiting op
 * fails. @err says why; pending calls get -ETIMEDOUT if that was the cause,
 * -ECONNRESET otherwise (the call itself did nothing wrong).
 */
static void conn_fail(struct xprt_conn *c, int err)
{
	struct list_head *pos, *tmp;
	int call_err = err == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	bool was_connecting = c->state == XPRT_CONN_CONNECTING || c->state == XPRT_CONN_HELLO;

	if (c->state == XPRT_CONN_DEAD)
		return;
	if (was_connecting && (err == -EACCES || err == -EPROTO || err == -ENODEV))
		call_err = err;
	c->state = XPRT_CONN_DEAD;
	c->error = err;
	if (c->local_close || (c->peer_close && c->is_server))
		/* an orderly end: every client run ends so, not worth more than debug */
		xprt_log(XPRT_LOG_DEBUG, "%s connection%s%s closed", c->ops->name,
			 c->peer_name[0] ? " from " : "", c->peer_name);
	else if (c->peer_close)
		/* the server went away in order (it stopped): the client reconnects */
		xprt_log(XPRT_LOG_INFO, "%s connection closed by the peer", c->ops->name);
	else
		xprt_log(c->is_server ? XPRT_LOG_INFO : XPRT_LOG_WARN, "%s connection%s%s died: %s",
			 c->ops->name, c->peer_name[0] ? " from " : "", c->peer_name,
			 xprt_strerror(err));
	if (c->backend)
		c->ops->shutdown(c);
	list_for_each_safe (pos, tmp, &c->sendq) {
		list_del(pos);
		free(list_entry(pos, struct xprt_out, link));
	}
	list_for_each_safe (pos, tmp, &c->rdma_wait)
		rdma_op_finish(list_entry(pos, struct xprt_rdma_op, link), call_err);
	list_for_each_safe (pos, tmp, &c->calls) {
		struct xprt_call *call = list_entry(pos, struct xprt_call, link);

		list_del(pos);
		c->calls_pending--;
		call->cb(call->arg, call_err, NULL, 0);
		free(call);
	}
	pthread_cond_broadcast(&c->state_cond);
	if (c->is_server)
		conn_unref(c); /* the server side's own reference */
}

void xprt_core_set_peer_addr(struct xprt_conn *c, const char *addr)
{
	size_t len = strnlen(addr, sizeof(c->peer_addr) - 1);

	memcpy(c->peer_addr, addr, len);
	c->peer_addr[len] = '\0';
}

void xprt_core_conn_failed(struct xprt_conn *c, int err)
{
	conn_fail(c, err);
}

/* ---- sending ---- */

/* Sends one message now. The caller checked credits. */
static int send_now(struct xprt_conn *c, struct xprt_hdr *h, const void *body, size_t len,
		    bool uses_credit)
{
	uint8_t raw[XPRT_HDR_SIZE];
	uint32_t grant = 0;
	int ret;

	if (uses_credit) {
		grant = c->credits.to_grant;
		h->credits = grant;
	} else {
		h->credits = 0;
	}
	h->magic = XPRT_MAGIC;
	h->version = XPRT_VERSION;
	h->body_len = (uint32_t)len;
	xprt_hdr_encode(h, raw);
	ret = c->ops->send(c, raw, body, len);
	if (ret)
		return ret;
	if (uses_credit)
		xprt_credits_take(&c->credits);
	c->stats.msgs_sent++;
	c->stats.bytes_sent += XPRT_HDR_SIZE + len;
	return 0;
}

/* A message type as logs say it. */
static const char *msg_type_name(uint8_t type)
{
	switch (type) {
	case XPRT_MSG_REQUEST:
		return "request";
	case XPRT_MSG_RESPONSE:
		return "response";
	case XPRT_MSG_CREDIT:
		return "credit";
	case XPRT_MSG_PING:
		return "ping";
	case XPRT_MSG_PONG:
		return "pong";
	case XPRT_MSG_CLOSE:
		return "close";
	case XPRT_MSG_ERROR:
		return "error";
	case XPRT_MSG_HELLO:
		return "hello";
	default:
		return "unknown";
	}
}

static bool is_control(uint8_t type)
{
	return type == XPRT_MSG_CREDIT || type == XPRT_MSG_ERROR || type == XPRT_MSG_CLOSE;
}

/* Sends what waits in the queue while credits and send slots allow. */
static void flush_sendq(struct xprt_conn *c)
{
	while (!list_empty(&c->sendq) && c->state != XPRT_CONN_DEAD) {
		struct xprt_out *o = list_first_entry(&c->sendq, struct xprt_out, link);
		int ret;

		if (!xprt_credits_can_send(&c->credits, is_control(o->hdr.type)))
			return;
		ret = send_now(c, &o->hdr, o->body, o->len, true);
		if (ret == -EAGAIN)
			return;
		if (ret) {
			conn_fail(c, ret);
			return;
		}
		list_del(&o->link);
		free(o);
	}
}

/*
 * Sends a credit-using message, or queues a copy of it when credits or send
 * slots are short. Order is kept: nothing overtakes what is queued.
 */
static int send_msg(struct xprt_conn *c, uint8_t type, uint16_t flags, uint64_t id, uint32_t method,
		    int32_t status, const void *body, size_t len)
{
	struct xprt_hdr h = {
		.type = type,
		.flags = flags,
		.request_id = id,
		.method = method,
		.status = status,
	};
	struct xprt_out *o;
	int ret;

	if (c->state == XPRT_CONN_DEAD)
		return c->error ? c->error : -ENOTCONN;
	if (XPRT_HDR_SIZE + len > c->max_msg && c->max_msg)
		return -EMSGSIZE;
	if (list_empty(&c->sendq) && xprt_credits_can_send(&c->credits, is_control(type))) {
		ret = send_now(c, &h, body, len, true);
		if (ret != -EAGAIN) {
			if (ret)
				conn_fail(c, ret);
			return ret;
		}
	}
	c->stats.credit_waits++;
	o = malloc(sizeof(*o) + len);
	if (!o)
		return -ENOMEM;
	o->hdr = h;
	o->len = len;
	if (len)
		memcpy(o->body, body, len);
	list_add_tail(&o->link, &c->sendq);
	return 0;
}

/* Sends our last word (ERROR or a refused HELLO) and cuts the connection soon after. */
static void conn_doom(struct xprt_conn *c, uint8_t type, uint16_t flags, int err)
{
	if (c->state == XPRT_CONN_DEAD)
		return;
	if (xprt_credits_can_send(&c->credits, true))
		send_msg(c, type, flags, 0, 0, err, NULL, 0);
	c->closing = true;
	c->error = err;
	/* Let the message reach the peer; the timer kills the connection after the grace. */
	c->connect_deadline_ns = xprt_now_ns() + xprt_ms_to_ns(DOOM_GRACE_MS);
}

void xprt_core_protocol_error(struct xprt_conn *c, int err)
{
	conn_doom(c, XPRT_MSG_ERROR, 0, err);
}

void xprt_core_send_space(struct xprt_conn *c)
{
	flush_sendq(c);
}

static void maybe_grant(struct xprt_conn *c)
{
	if (c->state == XPRT_CONN_DEAD || c->closing || !xprt_credits_grant_due(&c->credits))
		return;
	/* A queued message will carry the grant when it goes. */
	if (!list_empty(&c->sendq))
		return;
	send_msg(c, XPRT_MSG_CREDIT, 0, 0, 0, 0, NULL, 0);
}

void xprt_core_recv_reposted(struct xprt_conn *c, uint32_t n)
{
	xprt_credits_reposted(&c->credits, n);
	maybe_grant(c);
}

/* ---- HELLO ---- */

void xprt_core_local_params(struct xprt_ctx *ctx, struct xprt_conn_params *out)
{
	out->magic = XPRT_MAGIC;
	out->version = XPRT_VERSION;
	out->credits = ctx->opts.recv_credits;
	out->max_msg_size = ctx->opts.max_msg_size;
}

void xprt_core_conn_established(struct xprt_conn *c, const struct xprt_conn_params *peer)
{
	struct xprt_ctx *ctx = c->ctx;

	if (c->state != XPRT_CONN_CONNECTING)
		return;
	xprt_credits_init(&c->credits, ctx->opts.recv_credits, peer->credits);
	c->peer_window = peer->credits;
	c->peer_max_msg = peer->max_msg_size;
	c->max_msg = peer->max_msg_size < ctx->opts.max_msg_size ? peer->max_msg_size
								 : ctx->opts.max_msg_size;
	c->state = XPRT_CONN_HELLO;
	c->last_rx_ns = xprt_now_ns();
	/* The handshake must finish within the connect timeout, on both sides. */
	c->connect_deadline_ns = xprt_now_ns() + xprt_ms_to_ns(ctx->opts.connect_timeout_ms);
	if (c->is_server) {
		xprt_hello_nonce(c->server_nonce);
		send_msg(c, XPRT_MSG_HELLO, XPRT_HELLO_CHALLENGE, 0, 0, 0, c->server_nonce,
			 XPRT_NONCE_SIZE);
	}
}

static void hello_client_challenge(struct xprt_conn *c, const uint8_t *body, size_t len)
{
	struct xprt_ctx *ctx = c->ctx;
	uint8_t msg[XPRT_NONCE_SIZE + XPRT_MAC_SIZE + XPRT_KEY_WIRE_FIXED + XPRT_KEY_NAME_MAX +
		    XPRT_NAME_MAX];
	size_t name_len = strnlen(ctx->opts.name, XPRT_NAME_MAX), off = XPRT_NONCE_SIZE;

	if (len != XPRT_NONCE_SIZE) {
		conn_fail(c, -EPROTO);
		return;
	}
	memcpy(c->server_nonce, body, XPRT_NONCE_SIZE);
	xprt_hello_nonce(c->client_nonce);
	memcpy(msg, c->client_nonce, XPRT_NONCE_SIZE);
	if (ctx->key) {
		/* the same proof, with the key in place of the secret, then who we are */
		xprt_hello_mac(ctx->key->key, XPRT_KEY_SIZE, false, c->server_nonce,
			       c->client_nonce, msg + off);
		off += XPRT_MAC_SIZE;
		off += xprt_key_wire_encode(ctx->key, msg + off);
	} else {
		xprt_hello_mac(ctx->secret, ctx->opts.secret_len, false, c->server_nonce,
			       c->client_nonce, msg + off);
		off += XPRT_MAC_SIZE;
	}
	memcpy(msg + off, ctx->opts.name, name_len);
	send_msg(c, XPRT_MSG_HELLO, ctx->key ? XPRT_HELLO_AUTH_KEY : XPRT_HELLO_AUTH, 0, 0, 0, msg,
		 off + name_len);
}

/*
 * AUTH or AUTH_KEY: the client's proof, of the secret or of the key derived
 * from the identity it sends. Either way the answer proves the same thing
 * back, so a keyed client knows it reached a holder of the cluster secret.
 */
static void hello_server_auth(struct xprt_conn *c, const uint8_t *body, size_t len, bool keyed)
{
	struct xprt_ctx *ctx = c->ctx;
	struct xprt_identity id = {0};
	uint8_t mac[XPRT_MAC_SIZE], key[XPRT_KEY_SIZE];
	const uint8_t *proof_key = ctx->secret;
	size_t proof_len = ctx->opts.secret_len, used = 0, name_len;
	int ret;

	if (len < XPRT_NONCE_SIZE + XPRT_MAC_SIZE ||
	    (keyed && xprt_key_wire_decode(body + XPRT_NONCE_SIZE + XPRT_MAC_SIZE,
					   len - XPRT_NONCE_SIZE - XPRT_MAC_SIZE, &id, &used)) ||
	    len - XPRT_NONCE_SIZE - XPRT_MAC_SIZE - used > XPRT_NAME_MAX) {
		conn_doom(c, XPRT_MSG_HELLO, XPRT_HELLO_ACCEPT, -EPROTO);
		return;
	}
	memcpy(c->client_nonce, body, XPRT_NONCE_SIZE);
	name_len = len - XPRT_NONCE_SIZE - XPRT_MAC_SIZE - used;
	for (size_t i = 0; i < name_len; i++) {
		char ch = (char)body[XPRT_NONCE_SIZE + XPRT_MAC_SIZE + used + i];

		/* Names go to logs: keep them printable. */
		c->peer_name[i] = (ch >= 0x20 && ch < 0x7f) ? ch : '?';
	}
	c->peer_name[name_len] = '\0';
	if (keyed) {
		/* the name was checked by the decode, so the derivation cannot fail */
		xprt_key_derive(ctx->secret, ctx->opts.secret_len, id.name, id.serial, id.flags,
				key);
		proof_key = key;
		proof_len = sizeof(key);
	}
	if (xprt_hello_verify(proof_key, proof_len, false, c->server_nonce, c->client_nonce,
			      body + XPRT_NONCE_SIZE)) {
		if (keyed)
			xprt_log(XPRT_LOG_WARN,
				 "refused client '%s': its key for client %s (serial %llu, flags "
				 "%#x) was not made from the cluster secret, or was altered",
				 c->peer_name, id.name, (unsigned long long)id.serial, id.flags);
		else
			xprt_log(XPRT_LOG_WARN,
				 "refused client '%s': it does not know the cluster secret",
				 c->peer_name);
		ret = -EACCES;
		goto out_refuse;
	}
	if (keyed && ctx->opts.identity_check) {
		ret = ctx->opts.identity_check(&id, ctx->opts.identity_arg);
		if (ret) {
			/* the status must stay an errno the peer accepts */
			if (ret > 0 || ret < -XPRT_MAX_ERRNO)
				ret = -EACCES;
			xprt_log(XPRT_LOG_WARN,
				 "refused client '%s' with key for client %s "
				 "(serial %llu): %s",
				 c->peer_name, id.name, (unsigned long long)id.serial,
				 ret == -EKEYREVOKED ? "the key was revoked" : xprt_strerror(ret));
			goto out_refuse;
		}
	}
	c->identity = id;
	xprt_hello_mac(proof_key, proof_len, true, c->server_nonce, c->client_nonce, mac);
	sodium_memzero(key, sizeof(key));
	if (send_msg(c, XPRT_MSG_HELLO, XPRT_HELLO_ACCEPT, 0, 0, 0, mac, sizeof(mac)) == 0) {
		c->state = XPRT_CONN_READY;
		xprt_log(XPRT_LOG_DEBUG, "%s connection from %s accepted (%s%s%s)", c->ops->name,
			 c->peer_name[0] ? c->peer_name : "a nameless client",
			 c->peer_addr[0] ? c->peer_addr : "address unknown",
			 keyed ? ", key for client " : "", keyed ? id.name : "");
	}
	return;

out_refuse:
	sodium_memzero(key, sizeof(key));
	conn_doom(c, XPRT_MSG_HELLO, XPRT_HELLO_ACCEPT, ret);
}

static void hello_client_accept(struct xprt_conn *c, const struct xprt_hdr *h, const uint8_t *body,
				size_t len)
{
	struct xprt_ctx *ctx = c->ctx;
	const void *proof_key = ctx->key ? (const void *)ctx->key->key : ctx->secret;
	size_t proof_len = ctx->key ? XPRT_KEY_SIZE : ctx->opts.secret_len;

	if (h->status) {
		if (ctx->key && h->status == -EKEYREVOKED)
			xprt_log(XPRT_LOG_ERR, "key for client %s was revoked (serial %llu)",
				 ctx->key->name, (unsigned long long)ctx->key->serial);
		else if (ctx->key && h->status == -EACCES)
			xprt_log(XPRT_LOG_ERR,
				 "server refused the key for client %s: it was not made from "
				 "this cluster's secret, or was altered",
				 ctx->key->name);
		else
			xprt_log(XPRT_LOG_ERR, "server refused us at HELLO: %s",
				 xprt_strerror(h->status));
		/* the decode let only errnos through: the server's reason is the caller's */
		conn_fail(c, h->status);
		return;
	}
	if (len != XPRT_MAC_SIZE ||
	    xprt_hello_verify(proof_key, proof_len, true, c->server_nonce, c->client_nonce, body)) {
		xprt_log(XPRT_LOG_ERR, "server failed to prove it knows the cluster secret");
		conn_fail(c, -EACCES);
		return;
	}
	if (ctx->key) {
		c->identity.keyed = true;
		memcpy(c->identity.name, ctx->key->name, sizeof(c->identity.name));
		c->identity.serial = ctx->key->serial;
		c->identity.flags = ctx->key->flags;
	}
	c->state = XPRT_CONN_READY;
	pthread_cond_broadcast(&c->state_cond);
}

static void handle_hello(struct xprt_conn *c, const struct xprt_hdr *h, const uint8_t *body,
			 size_t len)
{
	if (c->state != XPRT_CONN_HELLO) {
		conn_doom(c, XPRT_MSG_ERROR, 0, -EPROTO);
		return;
	}
	if (c->is_server && (h->flags == XPRT_HELLO_AUTH || h->flags == XPRT_HELLO_AUTH_KEY))
		hello_server_auth(c, body, len, h->flags == XPRT_HELLO_AUTH_KEY);
	else if (!c->is_server && h->flags == XPRT_HELLO_CHALLENGE)
		hello_client_challenge(c, body, len);
	else if (!c->is_server && h->flags == XPRT_HELLO_ACCEPT)
		hello_client_accept(c, h, body, len);
	else
		conn_doom(c, XPRT_MSG_ERROR, 0, -EPROTO);
}

/* ---- receiving ---- */

static void handle_request(struct xprt_conn *c, const struct xprt_hdr *h, const uint8_t *body,
			   size_t len)
{
	struct xprt_listener *l = c->listener;
	struct xprt_req *req;

	if (!c->is_server || !l || l->closed) {
		send_msg(c, XPRT_MSG_RESPONSE, 0, h->request_id, h->method, -EOPNOTSUPP, NULL, 0);
		return;
	}
	req = malloc(sizeof(*req) + len);
	if (!req) {
		send_msg(c, XPRT_MSG_RESPONSE, 0, h->request_id, h->method, -ENOMEM, NULL, 0);
		return;
	}
	req->conn = c;
	req->id = h->request_id;
	req->method = h->method;
	req->len = len;
	if (len)
		memcpy(req->body, body, len);
	conn_ref(c);
	l->delivered = true;
	c->ctx->delivered = true;
	c->ctx->requests++;
	l->cb(req, l->cb_arg);
}

void xprt_core_batch_end(struct xprt_ctx *ctx)
{
	struct list_head *pos;

	if (!ctx->delivered)
		return;
	ctx->delivered = false;
	/* its replies go out together when it returns (flush_held), each connection's at once */
	ctx->sends_held = true;
	list_for_each (pos, &ctx->listeners) {
		struct xprt_listener *l = list_entry(pos, struct xprt_listener, link);

		if (!l->delivered)
			continue;
		l->delivered = false;
		if (l->batch_end)
			l->batch_end(l->cb_arg);
	}
	ctx->sends_held = false;
	for (int k = 0; k < 3; k++)
		if (ctx->backends[k] && ctx->backends[k]->flush_held)
			ctx->backends[k]->flush_held(ctx);
}

static void handle_response(struct xprt_conn *c, const struct xprt_hdr *h, const uint8_t *body,
			    size_t len)
{
	struct list_head *pos;

	list_for_each (pos, &c->calls) {
		struct xprt_call *call = list_entry(pos, struct xprt_call, link);

		if (call->id != h->request_id)
			continue;
		list_del(pos);
		c->calls_pending--;
		call->cb(call->arg, h->status, body, len);
		free(call);
		return;
	}
	/* A response to a call that timed out would have killed the connection, so none is late. */
	xprt_log(XPRT_LOG_WARN, "response to unknown request %llu: protocol error",
		 (unsigned long long)h->request_id);
	conn_doom(c, XPRT_MSG_ERROR, 0, -EPROTO);
}

void xprt_core_recv(struct xprt_conn *c, const uint8_t *frame, size_t len)
{
	struct xprt_hdr h;
	const uint8_t *body;
	int ret;

	if (c->state == XPRT_CONN_DEAD || c->closing)
		return;
	ret = xprt_hdr_decode(frame, len, c->ctx->opts.max_msg_size, &h);
	if (ret == 0 && !xprt_msg_uses_credit(h.type))
		ret = -EPROTO; /* one-sided types never come as messages here */
	if (ret == 0 && (size_t)h.body_len != len - XPRT_HDR_SIZE)
		ret = -EBADMSG;
	if (ret) {
		xprt_log(XPRT_LOG_WARN, "%s peer %s sent a bad message (%s): closing it",
			 c->ops->name, c->peer_name, xprt_strerror(ret));
		conn_doom(c, XPRT_MSG_ERROR, 0, ret);
		return;
	}
	c->stats.msgs_received++;
	c->stats.bytes_received += len;
	c->last_rx_ns = xprt_now_ns();
	c->ping_sent_ns = 0;
	if (xprt_credits_on_receive(&c->credits) ||
	    xprt_credits_on_grant(&c->credits, h.credits, c->peer_window)) {
		xprt_log(XPRT_LOG_WARN, "peer %s broke credit flow control", c->peer_name);
		conn_doom(c, XPRT_MSG_ERROR, 0, -EPROTO);
		return;
	}
	body = frame + XPRT_HDR_SIZE;
	len -= XPRT_HDR_SIZE;
	if (h.type != XPRT_MSG_HELLO && h.type != XPRT_MSG_ERROR && h.type != XPRT_MSG_CLOSE &&
	    c->state != XPRT_CONN_READY) {
		/* Until HELLO succeeds nothing else is served. */
		xprt_log(XPRT_LOG_WARN, "%s peer %s sent a %s message before HELLO: refused",
			 c->ops->name, c->peer_addr[0] ? c->peer_addr : "?", msg_type_name(h.type));
		conn_doom(c, XPRT_MSG_ERROR, 0, -EACCES);
		return;
	}
	switch (h.type) {
	case XPRT_MSG_REQUEST:
		handle_request(c, &h, body, len);
		break;
	case XPRT_MSG_RESPONSE:
		handle_response(c, &h, body, len);
		break;
	case XPRT_MSG_CREDIT:
	case XPRT_MSG_PONG:
		break;
	case XPRT_MSG_PING:
		send_msg(c, XPRT_MSG_PONG, 0, h.request_id, 0, 0, NULL, 0);
		break;
	case XPRT_MSG_CLOSE:
		c->peer_close = true;
		conn_fail(c, -ECONNRESET);
		return;
	case XPRT_MSG_ERROR:
		if (!c->is_server && c->state == XPRT_CONN_HELLO && c->ctx->key)
			xprt_log(XPRT_LOG_ERR,
				 "server refused our key's HELLO (%s): it may be "
				 "older than client keys",
				 xprt_strerror(h.status));
		else
			xprt_log(XPRT_LOG_WARN, "peer reported a fatal error: %s",
				 xprt_strerror(h.status));
		conn_fail(c, h.status < 0 ? h.status : -EPROTO);
		return;
	case XPRT_MSG_HELLO:
		handle_hello(c, &h, body, len);
		break;
	}
	flush_sendq(c);
}

/* ---- one-sided operations ---- */

static void rdma_start_waiting(struct xprt_conn *c)
{
	while (!list_empty(&c->rdma_wait) && c->state == XPRT_CONN_READY &&
	       c->rdma_inflight < c->ctx->opts.max_rdma_inflight) {
		struct xprt_rdma_op *op =
			list_first_entry(&c->rdma_wait, struct xprt_rdma_op, link);
		int ret;

		list_del(&op->link);
		list_add_tail(&op->link, &c->rdma_posted);
		ret = c->ops->rdma(c, op);
		if (ret == -EAGAIN) {
			list_del(&op->link);
			list_add_head(&op->link, &c->rdma_wait);
			return;
		}
		if (ret) {
			rdma_op_finish(op, ret);
			conn_fail(c, ret);
			return;
		}
		c->rdma_inflight++;
	}
}

void xprt_core_rdma_done(struct xprt_rdma_op *op, int status)
{
	struct xprt_conn *c = op->conn;

	c->rdma_inflight--;
	if (status == 0) {
		if (op->is_write)
			c->stats.rdma_writes++;
		else
			c->stats.rdma_reads++;
		c->stats.rdma_bytes += op->len;
	}
	rdma_op_finish(op, status);
	rdma_start_waiting(c);
}

static int rdma_submit(struct xprt_conn *c, bool is_write, void *local, struct xprt_mr *mr,
		       uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms,
		       xprt_rdma_cb cb, void *arg)
{
	struct xprt_ctx *ctx = c->ctx;
	struct xprt_rdma_op *op;
	int ret = 0;

	if (!mr || (len && ((uint8_t *)local < mr->addr ||
			    (size_t)((uint8_t *)local - mr->addr) > mr->len ||
			    len > mr->len - (size_t)((uint8_t *)local - mr->addr))))
		return -EINVAL;
	if (len > UINT32_MAX)
		return -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->conn = c;
	op->is_write = is_write;
	op->local = local;
	op->len = len;
	op->local_mr = mr;
	op->remote_addr = remote_addr;
	op->rkey = rkey;
	op->cb = cb;
	op->arg = arg;
	pthread_mutex_lock(&ctx->lock);
	if (c->state != XPRT_CONN_READY) {
		ret = c->state == XPRT_CONN_DEAD ? -ENOTCONN : -EAGAIN;
		free(op);
		goto out_unlock;
	}
	op->id = c->next_id++;
	op->deadline_ns = xprt_now_ns() + xprt_ms_to_ns(timeout_ms > 0 ? (uint32_t)timeout_ms
								       : ctx->opts.call_timeout_ms);
	list_add_tail(&op->link, &c->rdma_wait);
	rdma_start_waiting(c);
out_unlock:
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

int xprt_rdma_read_async(struct xprt_conn *conn, void *local, struct xprt_mr *local_mr,
			 uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms,
			 xprt_rdma_cb cb, void *arg)
{
	return rdma_submit(conn, false, local, local_mr, remote_addr, rkey, len, timeout_ms, cb,
			   arg);
}

int xprt_rdma_write_async(struct xprt_conn *conn, const void *local, struct xprt_mr *local_mr,
			  uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms,
			  xprt_rdma_cb cb, void *arg)
{
	return rdma_submit(conn, true, (void *)local, local_mr, remote_addr, rkey, len, timeout_ms,
			   cb, arg);
}

/* A blocking caller's wait for one call or op; the callback runs with ctx->lock held. */
struct sync_wait {
	pthread_cond_t cond;
	struct list_head link; /* conn->sync_waits, while in sync_wait_done() */
	bool done;
	int status;
	xprt_reply_cb cb; /* xprt_call_wait()'s callback */
	void *cb_arg;
};

static void sync_init(struct sync_wait *w)
{
	pthread_condattr_t attr;

	memset(w, 0, sizeof(*w));
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &attr);
	pthread_condattr_destroy(&attr);
}

static void sync_rdma_done(void *arg, int status)
{
	struct sync_wait *w = arg;

	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->cond);
}

static void sync_cb_done(void *arg, int status, const void *body, size_t len)
{
	struct sync_wait *w = arg;

	w->cb(w->cb_arg, status, body, len);
	w->done = true;
	pthread_cond_signal(&w->cond);
}

static int backends_progress(struct xprt_ctx *ctx);

/*
 * Whether a spin may start, by the spins before it (xprt.h, busy_poll_us):
 * after XPRT_SPIN_MISSES in a row that missed, only every XPRT_SPIN_RETRY-th.
 */
static bool spin_due(uint32_t misses, uint32_t *skipped)
{
	if (misses >= XPRT_SPIN_MISSES && ++*skipped < XPRT_SPIN_RETRY)
		return false;
	*skipped = 0;
	return true;
}

/* A spin ended, with what it waited for (@hit) or without: the misses in a row. */
static uint32_t spin_misses_after(uint32_t misses, bool hit)
{
	if (hit)
		return 0;
	return misses < XPRT_SPIN_MISSES ? misses + 1 : misses;
}

/*
 * How long a wait on @c spins first: busy_poll_us where the backend can
 * spin on @c's events (ops->spin), unless @c's recent spins missed their
 * answers.
 */
static uint64_t spin_budget_ns(struct xprt_conn *c)
{
	/* a thread in ops->wait() or ops->spin() has @c's events: a spin would not see them */
	if (!c->ops->spin || !c->ctx->opts.busy_poll_us || c->waiting)
		return 0;
	if (!spin_due(c->spin_misses, &c->spins_skipped))
		return 0;
	return (uint64_t)c->ctx->opts.busy_poll_us * 1000u;
}

/* A spin on @c ended, with its answer (@hit) or without. */
static void spin_account(struct xprt_conn *c, bool hit)
{
	c->stats.spins++;
	if (hit)
		c->stats.spin_hits++;
	c->spin_misses = spin_misses_after(c->spin_misses, hit);
}

/*
 * Waits for @w, a call or op on @c, under ctx->lock. First the caller polls
 * @c's events itself for up to busy_poll_us (ops->spin; tcp: its socket;
 * verbs: its CQ): an answer then completes on this thread with no sleep, and
 * wakes no progress thread, which saves the wake-ups (a futex, socket or
 * completion channel wake and a context switch, the bulk of a small RPC's
 * round trip). Then it sleeps on @c's own events where the backend lets it
 * (tcp: its socket; verbs: its completion channel), so what wakes it is
 * handled on this thread too, waking every TIMER_PERIOD_MS to see whether the progress thread's
 * timers ended the wait; else (another thread already waits so) on its
 * condition, and the progress thread enforces the deadline. Leaving, it
 * wakes the first thread still blocked on @c to wait on @c in its place.
 */
static void sync_wait_done(struct xprt_conn *c, struct sync_wait *w)
{
	struct xprt_ctx *ctx = c->ctx;
	uint64_t spin = spin_budget_ns(c);
	uint64_t until = xprt_now_ns() + spin;
	bool spun = false; /* a poll ran: the spin counts */

	while (c->ops->spin && !w->done && xprt_now_ns() < until &&
	       c->ops->spin(c, until, &w->done) >= 0)
		spun = true;
	if (spun)
		spin_account(c, w->done);
	list_add_tail(&w->link, &c->sync_waits);
	while (!w->done) {
		int ret = -EBUSY;

		if (c->ops->wait && !c->waiting)
			ret = c->ops->wait(c, TIMER_PERIOD_MS);
		if (ret > 0)
			c->stats.wait_wakeups++;
		if (ret == -EBUSY)
			pthread_cond_wait(&w->cond, &ctx->lock);
	}
	list_del(&w->link);
	/* the next thread blocked on @c waits on it itself now, rather than for a hand-off */
	if (c->ops->wait && !c->waiting && !list_empty(&c->sync_waits))
		pthread_cond_signal(
			&list_first_entry(&c->sync_waits, struct sync_wait, link)->cond);
}

static int rdma_sync(struct xprt_conn *c, bool is_write, void *local, struct xprt_mr *mr,
		     uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms)
{
	struct xprt_ctx *ctx = c->ctx;
	struct sync_wait w;
	int ret;

	sync_init(&w);
	pthread_mutex_lock(&ctx->lock);
	ret = rdma_submit(c, is_write, local, mr, remote_addr, rkey, len, timeout_ms,
			  sync_rdma_done, &w);
	if (ret == 0) {
		sync_wait_done(c, &w);
		ret = w.status;
	}
	pthread_mutex_unlock(&ctx->lock);
	pthread_cond_destroy(&w.cond);
	return ret;
}

int xprt_rdma_read(struct xprt_conn *conn, void *local, struct xprt_mr *local_mr,
		   uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms)
{
	return rdma_sync(conn, false, local, local_mr, remote_addr, rkey, len, timeout_ms);
}

int xprt_rdma_write(struct xprt_conn *conn, const void *local, struct xprt_mr *local_mr,
		    uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms)
{
	return rdma_sync(conn, true, (void *)local, local_mr, remote_addr, rkey, len, timeout_ms);
}

/* ---- calls ---- */

int xprt_call_async(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
		    int timeout_ms, xprt_reply_cb cb, void *arg)
{
	struct xprt_ctx *ctx = conn->ctx;
	struct xprt_call *call;
	int ret;

	call = malloc(sizeof(*call));
	if (!call)
		return -ENOMEM;
	pthread_mutex_lock(&ctx->lock);
	if (conn->state != XPRT_CONN_READY) {
		ret = conn->state == XPRT_CONN_DEAD ? -ENOTCONN : -EAGAIN;
		goto err_free;
	}
	if (XPRT_HDR_SIZE + req_len > conn->max_msg) {
		ret = -EMSGSIZE;
		goto err_free;
	}
	call->id = conn->next_id++;
	call->deadline_ns =
		xprt_now_ns() +
		xprt_ms_to_ns(timeout_ms > 0 ? (uint32_t)timeout_ms : ctx->opts.call_timeout_ms);
	call->cb = cb;
	call->arg = arg;
	/* Registered before sending: the response may come before send_msg returns. */
	list_add_tail(&call->link, &conn->calls);
	conn->calls_pending++;
	/*
	 * If sending fails the connection dies, which fails the call through its
	 * callback: either way the callback runs exactly once, so report success.
	 */
	send_msg(conn, XPRT_MSG_REQUEST, 0, call->id, method, 0, req, req_len);
	pthread_mutex_unlock(&ctx->lock);
	return 0;

err_free:
	pthread_mutex_unlock(&ctx->lock);
	free(call);
	return ret;
}

int xprt_call_wait(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
		   int timeout_ms, xprt_reply_cb cb, void *arg)
{
	struct xprt_ctx *ctx = conn->ctx;
	struct sync_wait w;
	int ret;

	sync_init(&w);
	w.cb = cb;
	w.cb_arg = arg;
	pthread_mutex_lock(&ctx->lock);
	ret = xprt_call_async(conn, method, req, req_len, timeout_ms, sync_cb_done, &w);
	if (ret == 0)
		sync_wait_done(conn, &w);
	pthread_mutex_unlock(&ctx->lock);
	pthread_cond_destroy(&w.cond);
	return ret;
}

/* xprt_call()'s answer: copied into the caller's buffer. */
struct call_copy {
	void *resp;
	size_t cap, len;
	int status;
};

static void call_copy_done(void *arg, int status, const void *body, size_t len)
{
	struct call_copy *cc = arg;

	cc->status = status;
	if (len > cc->cap) {
		/* never past the caller's buffer, an error's body included */
		if (status >= 0)
			cc->status = -EMSGSIZE;
		len = 0;
	}
	if (len)
		memcpy(cc->resp, body, len);
	cc->len = len;
}

int xprt_call(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len, void *resp,
	      size_t resp_cap, size_t *resp_len, int timeout_ms)
{
	struct call_copy cc = {.resp = resp, .cap = resp_cap};
	int ret = xprt_call_wait(conn, method, req, req_len, timeout_ms, call_copy_done, &cc);

	if (ret)
		return ret;
	if (resp_len)
		*resp_len = cc.len;
	return cc.status;
}

/* ---- serving ---- */

uint32_t xprt_req_method(const struct xprt_req *req)
{
	return req->method;
}

uint64_t xprt_req_id(const struct xprt_req *req)
{
	return req->id;
}

const void *xprt_req_body(const struct xprt_req *req, size_t *len)
{
	if (len)
		*len = req->len;
	return req->body;
}

bool xprt_req_batched(const struct xprt_req *req)
{
	const struct xprt_listener *l = req->conn->listener;

	return l && !l->closed && l->batch_end;
}

struct xprt_conn *xprt_req_conn(const struct xprt_req *req)
{
	return req->conn;
}

int xprt_reply(struct xprt_req *req, int status, const void *body, size_t len)
{
	struct xprt_conn *c = req->conn;
	struct xprt_ctx *ctx = c->ctx;
	int ret;

	if (status > 0 || status < -XPRT_MAX_ERRNO) {
		/* The peer would refuse the frame and drop the connection. */
		xprt_log(XPRT_LOG_ERR, "reply with status %d, not a negative errno: sent as EIO",
			 status);
		status = -EIO;
	}
	pthread_mutex_lock(&ctx->lock);
	if (c->max_msg && XPRT_HDR_SIZE + len > c->max_msg) {
		status = -EMSGSIZE;
		len = 0;
	}
	ret = send_msg(c, XPRT_MSG_RESPONSE, 0, req->id, req->method, status, len ? body : NULL,
		       len);
	conn_unref(c);
	pthread_mutex_unlock(&ctx->lock);
	free(req);
	return ret;
}

/* ---- connection API ---- */

static const struct xprt_backend_ops *backend_for(struct xprt_ctx *ctx, enum xprt_kind kind)
{
	return ctx->backends[xprt_ctx_resolve_kind(ctx, kind)];
}

int xprt_connect(struct xprt_ctx *ctx, const char *uri, struct xprt_conn **out)
{
	const struct xprt_backend_ops *ops;
	struct xprt_conn *c;
	enum xprt_kind kind;
	char host[256];
	uint16_t port;
	int ret;

	ret = xprt_uri_parse(uri, &kind, host, sizeof(host), &port);
	if (ret)
		return ret;
	ops = backend_for(ctx, kind);
	if (!ops)
		return -ENODEV;
	pthread_mutex_lock(&ctx->lock);
	c = conn_alloc(ctx, ops);
	if (!c) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	ret = ops->connect(c, host, port);
	if (ret) {
		c->state = XPRT_CONN_DEAD;
		c->error = ret;
		goto err_put;
	}
	while (c->state != XPRT_CONN_READY && c->state != XPRT_CONN_DEAD)
		pthread_cond_wait(&c->state_cond, &ctx->lock);
	if (c->state == XPRT_CONN_DEAD) {
		ret = c->error ? c->error : -ECONNREFUSED;
		goto err_put;
	}
	*out = c;
	goto out_unlock;

err_put:
	conn_unref(c);
out_unlock:
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

void xprt_conn_reset(struct xprt_conn *conn)
{
	pthread_mutex_lock(&conn->ctx->lock);
	conn_fail(conn, -ECONNRESET);
	pthread_mutex_unlock(&conn->ctx->lock);
}

/*
 * After our CLOSE: waits until the backend has let it go (bounded by
 * @until), so that shutdown() does not drop it (a verbs QP in ERR flushes
 * what it has not sent), and the peer logs an orderly close, not a death.
 * Drives the completions itself; the progress thread may run meanwhile.
 */
static void close_wait_sent(struct xprt_conn *c, const struct timespec *until)
{
	struct xprt_ctx *ctx = c->ctx;
	struct timespec pause = {0, 200000}, now;

	while (c->state == XPRT_CONN_READY && c->ops->sends_pending && c->ops->sends_pending(c)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until->tv_sec ||
		    (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec))
			break;
		backends_progress(ctx);
		pthread_mutex_unlock(&ctx->lock);
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&ctx->lock);
	}
}

void xprt_conn_close(struct xprt_conn *conn)
{
	struct xprt_ctx *ctx;
	struct timespec until;

	if (!conn)
		return;
	ctx = conn->ctx;
	pthread_mutex_lock(&ctx->lock);
	conn->local_close = true;
	if (conn->state == XPRT_CONN_READY && !conn->closing) {
		/* Let queued messages leave first (bounded: credits may never come). */
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += 1;
		while (!list_empty(&conn->sendq) && conn->state == XPRT_CONN_READY)
			if (pthread_cond_timedwait(&conn->state_cond, &ctx->lock, &until))
				break;
		if (conn->state == XPRT_CONN_READY && xprt_credits_can_send(&conn->credits, true) &&
		    send_msg(conn, XPRT_MSG_CLOSE, 0, 0, 0, 0, NULL, 0) == 0)
			close_wait_sent(conn, &until);
	}
	conn_fail(conn, -ECONNRESET);
	conn_unref(conn);
	pthread_mutex_unlock(&ctx->lock);
}

bool xprt_conn_alive(const struct xprt_conn *conn)
{
	return __atomic_load_n(&conn->state, __ATOMIC_ACQUIRE) != XPRT_CONN_DEAD;
}

int xprt_conn_error(const struct xprt_conn *conn)
{
	return conn->error;
}

enum xprt_kind xprt_conn_kind(const struct xprt_conn *conn)
{
	return conn->ops->kind;
}

const char *xprt_conn_peer_name(const struct xprt_conn *conn)
{
	return conn->peer_name;
}

int xprt_conn_identity(const struct xprt_conn *conn, struct xprt_identity *out)
{
	int ret = 0;

	pthread_mutex_lock(&conn->ctx->lock);
	/* set once HELLO accepted the peer, and never changed after */
	if (conn->state == XPRT_CONN_CONNECTING || conn->state == XPRT_CONN_HELLO)
		ret = -ENOTCONN;
	else
		*out = conn->identity;
	pthread_mutex_unlock(&conn->ctx->lock);
	return ret;
}

size_t xprt_conn_max_body(const struct xprt_conn *conn)
{
	return conn->max_msg - XPRT_HDR_SIZE;
}

int xprt_conn_stats(struct xprt_conn *conn, struct xprt_conn_stats *out)
{
	pthread_mutex_lock(&conn->ctx->lock);
	*out = conn->stats;
	out->send_credits = conn->credits.send_avail;
	out->recv_credits = (uint32_t)(conn->credits.granted_total - conn->credits.received);
	out->calls_pending = conn->calls_pending;
	pthread_mutex_unlock(&conn->ctx->lock);
	return 0;
}

void xprt_ctx_stats(struct xprt_ctx *ctx, struct xprt_ctx_stats *out)
{
	struct list_head *pos;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&ctx->lock);
	list_for_each (pos, &ctx->conns) {
		const struct xprt_conn *c = list_entry(pos, struct xprt_conn, link);

		if (c->state == XPRT_CONN_DEAD || c->closing)
			continue;
		if (!c->is_server)
			out->outgoing++;
		else if (c->state != XPRT_CONN_READY)
			out->handshaking++;
		else if (c->ops->kind <= XPRT_KIND_TCP)
			out->served[c->ops->kind]++;
	}
	out->progress_spins = ctx->spins;
	out->progress_spin_hits = ctx->spin_hits;
	pthread_mutex_unlock(&ctx->lock);
}

int xprt_conn_send_raw(struct xprt_conn *conn, const void *bytes, size_t len)
{
	int ret;

	if (len < XPRT_HDR_SIZE)
		return -EINVAL;
	pthread_mutex_lock(&conn->ctx->lock);
	ret = conn->ops->send(conn, bytes, (const uint8_t *)bytes + XPRT_HDR_SIZE,
			      len - XPRT_HDR_SIZE);
	pthread_mutex_unlock(&conn->ctx->lock);
	return ret;
}

/* ---- listeners ---- */

int xprt_listen(struct xprt_ctx *ctx, const char *uri, xprt_request_cb cb, void *arg,
		struct xprt_listener **out)
{
	return xprt_listen_batched(ctx, uri, cb, NULL, arg, out);
}

int xprt_listen_batched(struct xprt_ctx *ctx, const char *uri, xprt_request_cb cb,
			xprt_batch_end_cb batch_end, void *arg, struct xprt_listener **out)
{
	struct xprt_listener *l;
	enum xprt_kind kind;
	char host[256];
	uint16_t port;
	int ret;

	ret = xprt_uri_parse(uri, &kind, host, sizeof(host), &port);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->ctx = ctx;
	l->ops = backend_for(ctx, kind);
	l->cb = cb;
	l->batch_end = batch_end;
	l->cb_arg = arg;
	if (!l->ops) {
		free(l);
		return -ENODEV;
	}
	pthread_mutex_lock(&ctx->lock);
	ret = l->ops->listen(l, host, port);
	if (ret == 0)
		list_add_tail(&l->link, &ctx->listeners);
	pthread_mutex_unlock(&ctx->lock);
	if (ret) {
		free(l);
		return ret;
	}
	*out = l;
	return 0;
}

static void listener_free_locked(struct xprt_listener *l)
{
	struct list_head *pos;

	/* what it delivered gets its batch end while the listener is still there */
	if (l->delivered && l->batch_end) {
		l->delivered = false;
		l->batch_end(l->cb_arg);
	}
	l->ops->listener_close(l);
	list_del(&l->link);
	/* Connections it accepted stay, but no longer point at it. */
	list_for_each (pos, &l->ctx->conns) {
		struct xprt_conn *c = list_entry(pos, struct xprt_conn, link);

		if (c->listener == l)
			c->listener = NULL;
	}
	free(l);
}

void xprt_listener_close(struct xprt_listener *listener)
{
	struct xprt_ctx *ctx;

	if (!listener)
		return;
	ctx = listener->ctx;
	pthread_mutex_lock(&ctx->lock);
	listener_free_locked(listener);
	pthread_mutex_unlock(&ctx->lock);
}

uint16_t xprt_listener_port(const struct xprt_listener *listener)
{
	return listener->port;
}

enum xprt_kind xprt_listener_kind(const struct xprt_listener *listener)
{
	return listener->ops->kind;
}

/* ---- timers and the progress thread ---- */

static void conn_timers(struct xprt_conn *c, uint64_t now)
{
	uint64_t ping_ns = xprt_ms_to_ns(c->ctx->opts.ping_interval_ms);
	struct list_head *pos;

	if (c->state == XPRT_CONN_DEAD)
		return;
	if ((c->state != XPRT_CONN_READY || c->closing) && now > c->connect_deadline_ns) {
		conn_fail(c, c->closing ? c->error : -ETIMEDOUT);
		return;
	}
	list_for_each (pos, &c->calls) {
		if (list_entry(pos, struct xprt_call, link)->deadline_ns < now) {
			xprt_log(XPRT_LOG_WARN, "call timed out: resetting the connection");
			conn_fail(c, -ETIMEDOUT);
			return;
		}
	}
	list_for_each (pos, &c->rdma_posted) {
		if (list_entry(pos, struct xprt_rdma_op, link)->deadline_ns < now) {
			conn_fail(c, -ETIMEDOUT);
			return;
		}
	}
	list_for_each (pos, &c->rdma_wait) {
		if (list_entry(pos, struct xprt_rdma_op, link)->deadline_ns < now) {
			conn_fail(c, -ETIMEDOUT);
			return;
		}
	}
	if (c->state != XPRT_CONN_READY || c->closing || ping_ns == 0)
		return;
	if (c->ping_sent_ns && now - c->ping_sent_ns > PING_MISSES * ping_ns) {
		xprt_log(XPRT_LOG_WARN, "peer %s answers no ping: connection dead", c->peer_name);
		conn_fail(c, -ETIMEDOUT);
	} else if (!c->ping_sent_ns && now - c->last_rx_ns > ping_ns &&
		   xprt_credits_can_send(&c->credits, false) && list_empty(&c->sendq)) {
		c->ping_sent_ns = now;
		send_msg(c, XPRT_MSG_PING, 0, 0, 0, 0, NULL, 0);
	}
}

static void run_timers(struct xprt_ctx *ctx)
{
	struct list_head *pos, *tmp;
	uint64_t now = xprt_now_ns();

	if (now - ctx->last_timer_ns < xprt_ms_to_ns(TIMER_PERIOD_MS))
		return;
	ctx->last_timer_ns = now;
	list_for_each_safe (pos, tmp, &ctx->conns) {
		struct xprt_conn *c = list_entry(pos, struct xprt_conn, link);

		conn_timers(c, now);
	}
}

/* Polls the backends that can be polled; returns completions handled, -1 if none can. */
static int backends_progress(struct xprt_ctx *ctx)
{
	int n = -1;

	for (int k = 0; k < 3; k++)
		if (ctx->backends[k] && ctx->backends[k]->progress)
			n = 0;
	if (n < 0)
		return n;
	for (int k = 0; k < 3; k++)
		if (ctx->backends[k] && ctx->backends[k]->progress)
			n += ctx->backends[k]->progress(ctx);
	xprt_core_batch_end(ctx);
	return n;
}

/*
 * The progress thread delivered a request or handled completions
 * (@busy_until: 0, or while it spun, when that spin ends), under ctx->lock:
 * until when it now spins, polling without sleeping for the next event
 * (busy_poll_us; 0: it sleeps), since the next message of a conversation
 * tends to follow soon (a caller's next request, a peer's next completion).
 * As a caller's wait, it stops spinning but every XPRT_SPIN_RETRY-th time
 * after XPRT_SPIN_MISSES spins in a row found nothing (progress_spin_missed()).
 */
static uint64_t progress_spin(struct xprt_ctx *ctx, uint64_t busy_until)
{
	if (busy_until) {
		ctx->spin_hits++;
		ctx->spin_misses = spin_misses_after(ctx->spin_misses, true);
	}
	if (!ctx->opts.busy_poll_us || !spin_due(ctx->spin_misses, &ctx->spins_skipped))
		return 0;
	ctx->spins++;
	return xprt_now_ns() + (uint64_t)ctx->opts.busy_poll_us * 1000u;
}

/* The progress thread's spin ended with nothing: it sleeps now. */
static uint64_t progress_spin_missed(struct xprt_ctx *ctx)
{
	ctx->spin_misses = spin_misses_after(ctx->spin_misses, false);
	return 0;
}

static void *progress_thread(void *arg)
{
	struct xprt_ctx *ctx = arg;
	struct epoll_event events[EPOLL_BATCH];
	uint64_t busy_until = 0;

	for (;;) {
		int n, done;
		uint64_t requests;

		pthread_mutex_lock(&ctx->lock);
		if (ctx->stopping) {
			pthread_mutex_unlock(&ctx->lock);
			break;
		}
		done = backends_progress(ctx);
		run_timers(ctx);
		reap_conns(ctx);
		reap_watches(ctx, false);
		if (done > 0)
			busy_until = progress_spin(ctx, busy_until);
		else if (busy_until && xprt_now_ns() >= busy_until)
			busy_until = progress_spin_missed(ctx);
		pthread_mutex_unlock(&ctx->lock);
		n = epoll_wait(ctx->epoll_fd, events, EPOLL_BATCH,
			       busy_until ? 0 : TIMER_PERIOD_MS);
		if (n == 0 && busy_until)
			sched_yield();
		if (n <= 0)
			continue;
		pthread_mutex_lock(&ctx->lock);
		requests = ctx->requests;
		for (int i = 0; i < n; i++) {
			struct xprt_poller *p = events[i].data.ptr;

			if (!p) {
				uint64_t v;

				if (read(ctx->wake_fd, &v, sizeof(v)) < 0)
					continue;
				continue;
			}
			p->fn(p, events[i].events);
		}
		xprt_core_batch_end(ctx);
		/*
		 * A request delivered: the next of its conversation tends to follow.
		 * Answers to our own calls are no reason: their callers spin themselves.
		 */
		if (ctx->requests != requests)
			busy_until = progress_spin(ctx, busy_until);
		pthread_mutex_unlock(&ctx->lock);
	}
	return NULL;
}

/* ---- contexts ---- */

int xprt_ctx_create(const struct xprt_options *opts, struct xprt_ctx **out)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	pthread_mutexattr_t attr;
	struct xprt_ctx *ctx;
	int ret;

	if (opts->recv_credits < 4 || opts->max_msg_size < 256 ||
	    opts->max_msg_size > (16u << 20) || opts->busy_poll_us > XPRT_BUSY_POLL_MAX_US)
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->opts = *opts;
	if (!ctx->opts.name)
		ctx->opts.name = "";
	if (opts->secret_len) {
		ctx->secret = malloc(opts->secret_len);
		if (!ctx->secret) {
			ret = -ENOMEM;
			goto err_free;
		}
		memcpy(ctx->secret, opts->secret, opts->secret_len);
	}
	ctx->opts.secret = NULL; /* the copy is ctx->secret */
	if (opts->key) {
		if (!xprt_key_name_valid(opts->key->name)) {
			ret = -EINVAL;
			goto err_free_secret;
		}
		ctx->key = malloc(sizeof(*ctx->key));
		if (!ctx->key) {
			ret = -ENOMEM;
			goto err_free_secret;
		}
		*ctx->key = *opts->key;
	}
	ctx->opts.key = NULL; /* the copy is ctx->key */
	list_init(&ctx->conns);
	list_init(&ctx->listeners);
	list_init(&ctx->mrs);
	list_init(&ctx->watches);
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&ctx->lock, &attr);
	pthread_mutexattr_destroy(&attr);

	ctx->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->epoll_fd < 0) {
		ret = -errno;
		goto err_mutex;
	}
	ctx->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->wake_fd < 0) {
		ret = -errno;
		goto err_epoll;
	}
	if (epoll_ctl(ctx->epoll_fd, EPOLL_CTL_ADD, ctx->wake_fd, &ev)) {
		ret = -errno;
		goto err_wake;
	}
	if (xprt_tcp_ops.ctx_init(ctx) == 0)
		ctx->backends[XPRT_KIND_TCP] = &xprt_tcp_ops;
	if (xprt_verbs_ops.ctx_init(ctx) == 0)
		ctx->backends[XPRT_KIND_VERBS] = &xprt_verbs_ops;
	ret = -pthread_create(&ctx->thread, NULL, progress_thread, ctx);
	if (ret)
		goto err_backends;
	*out = ctx;
	return 0;

err_backends:
	for (int k = 0; k < 3; k++)
		if (ctx->backends[k])
			ctx->backends[k]->ctx_fini(ctx);
err_wake:
	close(ctx->wake_fd);
err_epoll:
	close(ctx->epoll_fd);
err_mutex:
	pthread_mutex_destroy(&ctx->lock);
	if (ctx->key)
		sodium_memzero(ctx->key, sizeof(*ctx->key));
	free(ctx->key);
err_free_secret:
	free(ctx->secret);
err_free:
	free(ctx);
	return ret;
}

void xprt_ctx_destroy(struct xprt_ctx *ctx)
{
	struct list_head *pos, *tmp;
	uint64_t one = 1;
	struct timespec pause = {0, 1000000};

	if (!ctx)
		return;
	pthread_mutex_lock(&ctx->lock);
	list_for_each_safe (pos, tmp, &ctx->listeners)
		listener_free_locked(list_entry(pos, struct xprt_listener, link));
	list_for_each_safe (pos, tmp, &ctx->conns) {
		struct xprt_conn *c = list_entry(pos, struct xprt_conn, link);

		conn_fail(c, -ECONNRESET);
	}
	pthread_mutex_unlock(&ctx->lock);
	/* Let flushed completions of posted ops arrive (bounded) before the thread stops. */
	for (int i = 0; i < 2000; i++) {
		bool busy = false;

		pthread_mutex_lock(&ctx->lock);
		list_for_each (pos, &ctx->conns)
			if (!list_empty(&list_entry(pos, struct xprt_conn, link)->rdma_posted))
				busy = true;
		pthread_mutex_unlock(&ctx->lock);
		if (!busy)
			break;
		nanosleep(&pause, NULL);
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->stopping = true;
	pthread_mutex_unlock(&ctx->lock);
	if (write(ctx->wake_fd, &one, sizeof(one)) < 0)
		xprt_log(XPRT_LOG_WARN, "cannot wake the progress thread: %s", strerror(errno));
	pthread_join(ctx->thread, NULL);
	/* Whatever is left (owners that never closed) goes now; the thread is gone. */
	list_for_each_safe (pos, tmp, &ctx->conns)
		conn_free(list_entry(pos, struct xprt_conn, link));
	reap_watches(ctx, true);
	for (int k = 0; k < 3; k++)
		if (ctx->backends[k])
			ctx->backends[k]->ctx_fini(ctx);
	close(ctx->wake_fd);
	close(ctx->epoll_fd);
	pthread_mutex_destroy(&ctx->lock);
	if (ctx->secret)
		sodium_memzero(ctx->secret, ctx->opts.secret_len);
	free(ctx->secret);
	if (ctx->key)
		sodium_memzero(ctx->key, sizeof(*ctx->key));
	free(ctx->key);
	free(ctx);
}
