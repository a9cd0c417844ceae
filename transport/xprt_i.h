/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libxprt internals: the wire format, credit accounting, the core's view of a
 * connection, and the ops table every backend (verbs, tcp) implements.
 *
 * Locking: one recursive mutex per context (ctx->lock) protects every
 * connection, call and operation of that context. The core calls backend ops
 * with it held, and backends call the xprt_core_* hooks with it held. The
 * progress thread holds it while it handles events, never across epoll_wait.
 */
#ifndef RDMAFS_XPRT_I_H
#define RDMAFS_XPRT_I_H

#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include "xprt.h"
#include "list_i.h"

/* ---- wire format ------------------------------------------------------- */

#define XPRT_MAGIC   0x53464452u /* "RDFS" as little-endian bytes */
#define XPRT_VERSION 1u
/* The largest errno a status may carry (as the kernel's MAX_ERRNO): decode refuses others. */
#define XPRT_MAX_ERRNO 4095

enum xprt_msg_type {
	XPRT_MSG_REQUEST = 1,
	XPRT_MSG_RESPONSE = 2,
	XPRT_MSG_CREDIT = 3, /* an explicit grant; body empty */
	XPRT_MSG_PING = 4,
	XPRT_MSG_PONG = 5,
	XPRT_MSG_CLOSE = 6, /* orderly close: the sender sends nothing more */
	XPRT_MSG_ERROR = 7, /* fatal protocol error: status says why, then close */
	XPRT_MSG_HELLO = 8, /* flags say which step (enum xprt_hello_step) */
	/* tcp only: one-sided operations, emulated by the target. They use no credits. */
	XPRT_MSG_RDMA_READ_REQ = 16,  /* body: struct xprt_rdma_wire */
	XPRT_MSG_RDMA_READ_RESP = 17, /* body: the data; status != 0: refused */
	XPRT_MSG_RDMA_WRITE = 18,     /* body: struct xprt_rdma_wire, then the data */
	XPRT_MSG_RDMA_WRITE_ACK = 19, /* body empty */
};

struct xprt_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint64_t request_id; /* echoed in the response */
	uint32_t method;
	uint32_t body_len;
	uint32_t credits; /* receive buffers the sender grants with this message */
	int32_t status;	  /* 0 or a negative errno */
};

/* Encodes @h little-endian into @out (XPRT_HDR_SIZE bytes). */
void xprt_hdr_encode(const struct xprt_hdr *h, uint8_t *out);
/*
 * Decodes and checks a header: -EBADMSG when @len < XPRT_HDR_SIZE, -EPROTO
 * for a bad magic, version or type, -EMSGSIZE when a credit-using message is
 * longer than @max_msg_size (header included).
 */
int xprt_hdr_decode(const uint8_t *in, size_t len, uint32_t max_msg_size, struct xprt_hdr *h);
/* True for the types that consume a receive buffer (a credit) at the peer. */
bool xprt_msg_uses_credit(uint8_t type);

/* Body of an emulated one-sided operation (tcp). */
#define XPRT_RDMA_WIRE_SIZE 16u
struct xprt_rdma_wire {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};
void xprt_rdma_wire_encode(const struct xprt_rdma_wire *w, uint8_t *out);
int xprt_rdma_wire_decode(const uint8_t *in, size_t len, struct xprt_rdma_wire *w);

/*
 * What each side tells the other when a connection is set up: rdma_cm private
 * data on verbs (at most 56 bytes), a preamble on tcp.
 */
#define XPRT_PARAMS_SIZE 16u
struct xprt_conn_params {
	uint32_t magic;
	uint8_t version;
	uint32_t credits;      /* receive buffers posted for the peer */
	uint32_t max_msg_size; /* size of each of them */
};
void xprt_params_encode(const struct xprt_conn_params *p, uint8_t *out);
/* -EBADMSG if short, -EPROTO for a bad magic/version or absurd values. */
int xprt_params_decode(const uint8_t *in, size_t len, struct xprt_conn_params *p);

/* ---- credits --------------------------------------------------------------- */

/*
 * Each side posts `window` receive buffers. A credit-using message consumes
 * one buffer at the peer; the receiver grants buffers back as it reposts them,
 * on any message it sends or with an explicit CREDIT message. The last credit
 * is kept for CREDIT (and ERROR/CLOSE) so grants can always flow.
 */
struct xprt_credits {
	uint32_t our_window;
	uint32_t send_avail;	/* peer buffers we may use */
	uint32_t to_grant;	/* our reposted buffers not granted yet */
	uint64_t received;	/* credit-using messages received */
	uint64_t granted_total; /* buffers granted to the peer, initial window included */
};

void xprt_credits_init(struct xprt_credits *c, uint32_t our_window, uint32_t peer_window);
/* @control: a CREDIT/ERROR/CLOSE message, which may use the reserved credit. */
bool xprt_credits_can_send(const struct xprt_credits *c, bool control);
/* Takes a credit for a message about to be sent; returns the grant it carries. */
uint32_t xprt_credits_take(struct xprt_credits *c);
/* Accounts a received credit-using message; -EPROTO if the peer overran us. */
int xprt_credits_on_receive(struct xprt_credits *c);
/* Adds a grant received from the peer; -EPROTO if it exceeds the window. */
int xprt_credits_on_grant(struct xprt_credits *c, uint32_t granted, uint32_t peer_window);
void xprt_credits_reposted(struct xprt_credits *c, uint32_t n);
/* True when enough buffers were reposted that an explicit grant is due. */
bool xprt_credits_grant_due(const struct xprt_credits *c);

/* ---- HELLO ------------------------------------------------------------------ */

#define XPRT_NONCE_SIZE 32u
#define XPRT_MAC_SIZE	32u
#define XPRT_NAME_MAX	64u
/* Room for "[IPv6 address]:port" and its NUL. */
#define XPRT_PEER_ADDR_MAX 64u

enum xprt_hello_step {
	XPRT_HELLO_CHALLENGE = 1, /* server -> client: server nonce */
	XPRT_HELLO_AUTH = 2,	  /* client -> server: client nonce, mac, name */
	XPRT_HELLO_ACCEPT = 3,	  /* server -> client: server mac (or status -EACCES) */
	/*
	 * client -> server, instead of AUTH from a client with a key: client
	 * nonce, mac, then struct xprt_key_wire, then its name. Both macs use the
	 * key the server derives from the identity instead of the secret.
	 */
	XPRT_HELLO_AUTH_KEY = 4,
};

/*
 * The identity a keyed client sends in HELLO AUTH_KEY after its nonce and
 * mac: serial (8 bytes LE), flags (4 bytes LE), key name length (1 byte,
 * 1..XPRT_KEY_NAME_MAX), the key name, then the client's own name for logs
 * (0..XPRT_NAME_MAX bytes, the rest of the body).
 */
#define XPRT_KEY_WIRE_FIXED 13u
/* Encodes @key's identity at @out (room for XPRT_KEY_WIRE_FIXED + name); returns the bytes. */
size_t xprt_key_wire_encode(const struct xprt_key *key, uint8_t *out);
/*
 * Decodes an identity from @in (@len bytes) into @id and says in *@used how
 * many bytes it took. -EPROTO for a short body or a name that is empty, too
 * long or not printable.
 */
int xprt_key_wire_decode(const uint8_t *in, size_t len, struct xprt_identity *id, size_t *used);

/* Fills @nonce with random bytes. */
void xprt_hello_nonce(uint8_t *nonce);
/*
 * The client's proof: HMAC-SHA256(secret, "rdmafs client" | server nonce |
 * client nonce); the server's proof swaps the label and the nonces.
 */
void xprt_hello_mac(const void *secret, size_t secret_len, bool from_server,
		    const uint8_t *server_nonce, const uint8_t *client_nonce, uint8_t *mac);
/* Constant-time check of a peer's proof: 0 or -EACCES. */
int xprt_hello_verify(const void *secret, size_t secret_len, bool from_server,
		      const uint8_t *server_nonce, const uint8_t *client_nonce, const uint8_t *mac);

/* ---- memory ----------------------------------------------------------------- */

struct xprt_mr {
	struct list_head link; /* ctx->mrs */
	struct xprt_ctx *ctx;
	uint8_t *addr;
	size_t len;
	unsigned access;
	uint32_t tcp_key;   /* the key of the tcp backend (never 0) */
	void *backend_data; /* verbs: its ibv_mr per device */
};

/*
 * The checks a NIC makes on a one-sided access: a known key, the right
 * access, and [addr, addr + len) inside the region without overflow.
 * Returns 0 or -EACCES.
 */
int xprt_mr_check_access(const struct xprt_mr *mr, uint64_t addr, uint64_t len, unsigned need);

/* Finds the region a tcp key names; NULL if none. */
struct xprt_mr *xprt_core_mr_by_tcp_key(struct xprt_ctx *ctx, uint32_t key);

/* ---- the core's objects ---------------------------------------------------------- */

enum xprt_conn_state {
	XPRT_CONN_CONNECTING = 0, /* transport-level setup */
	XPRT_CONN_HELLO,	  /* established, HELLO running */
	XPRT_CONN_READY,
	XPRT_CONN_DEAD,
};

/* A file descriptor the progress thread watches; events call @fn with ctx->lock held. */
struct xprt_poller {
	int fd;
	void (*fn)(struct xprt_poller *p, uint32_t events);
};

/* A one-sided operation this side initiates. */
struct xprt_rdma_op {
	struct list_head link; /* conn->rdma_wait, then conn->rdma_posted */
	struct xprt_conn *conn;
	bool is_write;
	uint8_t *local;
	size_t len;
	struct xprt_mr *local_mr;
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t id; /* tcp: request id of the emulated op */
	uint64_t deadline_ns;
	xprt_rdma_cb cb;
	void *arg;
	void *backend_data; /* for the backend's use while posted */
};

/* A message waiting for a credit or a send slot. */
struct xprt_out {
	struct list_head link;
	struct xprt_hdr hdr; /* credits filled in when it is sent */
	size_t len;
	uint8_t body[];
};

/* A call waiting for its response. */
struct xprt_call {
	struct list_head link; /* conn->calls */
	uint64_t id;
	uint64_t deadline_ns;
	xprt_reply_cb cb;
	void *arg;
};

struct xprt_req {
	struct xprt_conn *conn;
	uint64_t id;
	uint32_t method;
	size_t len;
	uint8_t body[];
};

struct xprt_backend_ops;

struct xprt_conn {
	struct list_head link; /* ctx->conns */
	struct xprt_ctx *ctx;
	const struct xprt_backend_ops *ops;
	void *backend;			/* the backend's own per-connection state */
	struct xprt_listener *listener; /* server side: where it came from; NULL on a client */
	int refs;			/* atomic: conn_ref(), conn_unref() */
	enum xprt_conn_state state;
	int error;	  /* why it died (negative errno) */
	bool closing;	  /* CLOSE sent or received */
	bool local_close; /* our owner closed it: not worth a warning */
	bool peer_close;  /* the peer sent CLOSE: an orderly end, not a failure */
	bool is_server;

	struct xprt_credits credits;
	uint32_t peer_window;
	uint32_t peer_max_msg;
	uint32_t max_msg; /* min(ours, peer's) */

	uint64_t next_id;
	struct list_head sendq;	    /* struct xprt_out waiting for credits/slots */
	struct list_head calls;	    /* struct xprt_call waiting for responses */
	struct list_head rdma_wait; /* ops waiting for an in-flight slot */
	struct list_head rdma_posted;
	uint32_t rdma_inflight;
	uint32_t calls_pending;

	uint64_t last_rx_ns;
	uint64_t ping_sent_ns; /* 0 when no ping is outstanding */

	/* busy_poll_us: waits in a row whose spin missed (to XPRT_SPIN_MISSES), skipped since */
	uint32_t spin_misses, spins_skipped;
	/*
	 * A caller sleeps on its events in ops->wait(), or spins on them in
	 * ops->spin(), which set and clear it: the progress thread leaves them
	 * to it, no other thread spins.
	 */
	bool waiting;
	struct list_head sync_waits; /* threads blocked on its calls and ops (core.c) */

	/* HELLO */
	uint8_t server_nonce[XPRT_NONCE_SIZE];
	uint8_t client_nonce[XPRT_NONCE_SIZE];
	char peer_name[XPRT_NAME_MAX + 1];
	struct xprt_identity identity;	    /* what the peer (server side) or we proved */
	char peer_addr[XPRT_PEER_ADDR_MAX]; /* "host:port" of an accepted peer, for logs */
	uint64_t connect_deadline_ns;
	pthread_cond_t state_cond; /* signalled on READY or DEAD */

	struct xprt_conn_stats stats;
};

/*
 * A connection's references are atomic, so taking and dropping one costs no
 * ctx->lock. Freeing still happens only under ctx->lock, on the progress
 * thread (reap_conns()), once the count is 0 and the connection dead (or
 * in xprt_ctx_destroy(), whatever the count): a
 * reference is only ever taken by someone who holds one already, or under
 * ctx->lock before the reaper could see 0.
 */
static inline void conn_ref(struct xprt_conn *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

static inline void conn_unref(struct xprt_conn *c)
{
	__atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELEASE);
}

struct xprt_listener {
	struct list_head link; /* ctx->listeners */
	struct xprt_ctx *ctx;
	const struct xprt_backend_ops *ops;
	void *backend;
	xprt_request_cb cb;
	void *cb_arg;
	xprt_batch_end_cb batch_end; /* xprt_listen_batched() */
	bool delivered;		     /* a request since its last batch end */
	uint16_t port;
	bool closed;
};

struct xprt_ctx {
	struct xprt_options opts;
	uint8_t *secret;
	struct xprt_key *key; /* our client key (opts.key copied), or NULL */
	pthread_mutex_t lock; /* recursive */
	int epoll_fd;
	int wake_fd; /* eventfd: wakes the progress thread */
	pthread_t thread;
	bool stopping;
	bool delivered;	 /* a listener got a request since the last batch end */
	bool sends_held; /* a batch end runs: backends may hold its sends (flush_held) */
	struct list_head conns;
	struct list_head listeners;
	struct list_head mrs;
	struct list_head watches; /* xprt_watch_add()'s, closed ones too until reap_watches() */
	const struct xprt_backend_ops *backends[3]; /* by enum xprt_kind; NULL when absent */
	void *verbs;				    /* the verbs backend's context state */
	void *tcp;				    /* the tcp backend's context state */
	uint64_t last_timer_ns;
	/* the progress thread's spins (busy_poll_us): in a row that found nothing, skipped since */
	uint32_t spin_misses, spins_skipped;
	uint64_t spins, spin_hits; /* xprt_ctx_stats */
	uint64_t requests;	   /* delivered to listeners: what makes the progress thread spin */
};

/* ---- the ops table of a backend ------------------------------------------------- */

/*
 * Every op is called with ctx->lock held. Completion of asynchronous work is
 * reported through the xprt_core_* hooks below, also with the lock held.
 */
struct xprt_backend_ops {
	const char *name;
	enum xprt_kind kind;

	/* Sets up the backend for @ctx; -ENODEV when it cannot run here (no device). */
	int (*ctx_init)(struct xprt_ctx *ctx);
	void (*ctx_fini)(struct xprt_ctx *ctx);
	/*
	 * Called by the progress thread before it sleeps and while it busy-polls:
	 * handles ready completions; returns how many it handled. May be NULL.
	 */
	int (*progress)(struct xprt_ctx *ctx);

	/* Binds and listens; sets l->port to the bound port. */
	int (*listen)(struct xprt_listener *l, const char *host, uint16_t port);
	void (*listener_close)(struct xprt_listener *l);

	/*
	 * Starts connecting @c (c->backend is NULL until then). Later it calls
	 * xprt_core_conn_established() or xprt_core_conn_failed().
	 */
	int (*connect)(struct xprt_conn *c, const char *host, uint16_t port);

	/*
	 * Sends one message: @hdr is the encoded header, @body/@len the body.
	 * The backend copies or sends both before returning (the caller's memory
	 * is not kept). Returns -EAGAIN when no send slot is free (the core keeps
	 * the message queued and retries after xprt_core_send_space()), or another
	 * negative errno that is fatal to the connection.
	 */
	int (*send)(struct xprt_conn *c, const uint8_t *hdr, const void *body, size_t len);

	/*
	 * While ctx->sends_held is set (a listener's batch end runs), send() may
	 * queue a message without sending it; the core calls this when the batch
	 * end returns, and it sends every message so held, each connection's
	 * together. A connection that fails then is failed here. May be NULL
	 * (the backend holds nothing).
	 */
	void (*flush_held)(struct xprt_ctx *ctx);

	/*
	 * Lets a thread blocked on one of @c's calls or ops take @c's events
	 * over from the progress thread and wait for them itself, up to
	 * @timeout_ms, with ctx->lock released while it sleeps (held exactly
	 * once by the caller): what arrives is then handled on that thread,
	 * which saves the progress thread's wake-up and the hand-off to the
	 * caller. Returns -EBUSY at once when another thread already waits on
	 * @c so, or when @c cannot be waited on (dead, stopped); after it
	 * waited, 1 when @c's events woke it, 0 when @timeout_ms did
	 * (xprt_conn_stats.wait_wakeups). c->waiting is set while it sleeps.
	 * May be NULL.
	 */
	int (*wait)(struct xprt_conn *c, int timeout_ms);

	/*
	 * As wait(), but polling @c's events without sleeping (yielding the
	 * core and the lock between polls) until xprt_now_ns() reaches
	 * @until_ns or, at the latest, *@done is set (tcp: its socket, until
	 * events come; verbs: its CQ, with the completion channel taken from
	 * the progress thread, which it would wake, until *@done or @c dies).
	 * Returns -EBUSY as wait(), without polling; else 1 when the polls
	 * found events (handled, unless @c died meanwhile), 0 when they found
	 * none (the time ran out, or the poll was interrupted). May be NULL.
	 */
	int (*spin)(struct xprt_conn *c, uint64_t until_ns, const bool *done);

	/* Posts a one-sided op; completion through xprt_core_rdma_done(). -EAGAIN: no slot. */
	int (*rdma)(struct xprt_conn *c, struct xprt_rdma_op *op);

	/*
	 * Stops all traffic of @c at once (verbs: QP to error; tcp: shutdown).
	 * Every op already posted still completes, through xprt_core_rdma_done()
	 * with a flush error, possibly from inside this call.
	 */
	void (*shutdown)(struct xprt_conn *c);

	/*
	 * Whether messages given to send() have not left for the peer yet (tcp:
	 * bytes the socket has not taken; verbs: signalled WRs not completed,
	 * which a QP moved to ERR would flush: a closing connection's SENDs are
	 * all signalled, and all before one are done when it is, but an
	 * unsignalled SEND is not seen). xprt_conn_close() waits, bounded, for
	 * its CLOSE to leave before shutdown(). May be NULL: nothing is waited for.
	 */
	bool (*sends_pending)(const struct xprt_conn *c);

	/* Frees c->backend after drain; nothing is outstanding any more. */
	void (*conn_destroy)(struct xprt_conn *c);

	int (*mr_register)(struct xprt_ctx *ctx, struct xprt_mr *mr);
	void (*mr_deregister)(struct xprt_ctx *ctx, struct xprt_mr *mr);
	/* The key a peer of @c uses for @mr. */
	uint32_t (*mr_rkey)(struct xprt_conn *c, struct xprt_mr *mr);
};

extern const struct xprt_backend_ops xprt_tcp_ops;
extern const struct xprt_backend_ops xprt_verbs_ops;

/* ---- hooks the backends call (ctx->lock held) ----------------------------------- */

/* Adds/removes a file descriptor to the progress thread's epoll set. */
int xprt_core_poll_add(struct xprt_ctx *ctx, struct xprt_poller *p, uint32_t events);
int xprt_core_poll_mod(struct xprt_ctx *ctx, struct xprt_poller *p, uint32_t events);
void xprt_core_poll_del(struct xprt_ctx *ctx, struct xprt_poller *p);

/*
 * A listener got a connection: the core creates the connection object (the
 * backend fills conn->backend right after). Returns NULL on -ENOMEM.
 */
struct xprt_conn *xprt_core_conn_new(struct xprt_listener *l);

/* Transport-level setup finished; @peer are the peer's parameters. Starts HELLO. */
void xprt_core_conn_established(struct xprt_conn *c, const struct xprt_conn_params *peer);
/* Names the peer's address in logs ("host:port"), cut to XPRT_PEER_ADDR_MAX - 1. */
void xprt_core_set_peer_addr(struct xprt_conn *c, const char *addr);

/* Setup failed or the connection died: @err is a negative errno. */
void xprt_core_conn_failed(struct xprt_conn *c, int err);

/*
 * Where a thread has delivered all it found at once (the end of a socket's
 * input, of a poll of the completion queues): runs the batch end of each
 * listener that got a request meanwhile (xprt_listen_batched()).
 */
void xprt_core_batch_end(struct xprt_ctx *ctx);

/*
 * A credit-using or control message arrived: @frame holds the header and the
 * body (@len bytes in all). The core has copied what it needs on return. The
 * backend then reposts the buffer and calls xprt_core_recv_reposted().
 */
void xprt_core_recv(struct xprt_conn *c, const uint8_t *frame, size_t len);
void xprt_core_recv_reposted(struct xprt_conn *c, uint32_t n);

/*
 * The peer broke the protocol (bad header, refused one-sided access...): the
 * core sends ERROR with @err and cuts the connection after a short grace, so
 * the peer can read why. The backend reads nothing more from it.
 */
void xprt_core_protocol_error(struct xprt_conn *c, int err);

/* A send slot became free: the core sends what it queued. */
void xprt_core_send_space(struct xprt_conn *c);

/* A one-sided op finished: 0, -EACCES (refused by the target), or a flush error. */
void xprt_core_rdma_done(struct xprt_rdma_op *op, int status);

/* The parameters we advertise on every connection. */
void xprt_core_local_params(struct xprt_ctx *ctx, struct xprt_conn_params *out);

/* ---- small helpers ------------------------------------------------------------------ */

void xprt_log(enum xprt_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline uint64_t xprt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t xprt_ms_to_ns(uint32_t ms)
{
	return (uint64_t)ms * 1000000ull;
}

/* Little-endian loads and stores for the wire formats. */
static inline void xprt_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void xprt_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void xprt_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t xprt_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t xprt_get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t xprt_get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Test hook: sends raw bytes as one message, bypassing every check. */
int xprt_conn_send_raw(struct xprt_conn *conn, const void *bytes, size_t len);

#endif /* RDMAFS_XPRT_I_H */
