/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libxprt: the rdmafs transport.
 *
 * It moves framed messages (RPC requests and responses) and performs one-sided
 * RDMA READ/WRITE against memory a peer has registered and advertised. Two
 * backends sit behind one API: "verbs" (rdma-core librdmacm + libibverbs RC
 * queue pairs) and "tcp" (the same bytes on a stream socket, with one-sided
 * operations emulated by the target, which checks keys and bounds as a NIC
 * would). Nothing here knows about protobuf or files.
 *
 * Threads: every context runs one progress thread. Request handlers and
 * asynchronous callbacks run on it, or on a thread blocked in a call of this
 * library that is polling for its own answer, and must not block; every other
 * function may be called from any thread except where a comment says otherwise.
 *
 * Errors: functions return 0 or a negative errno. Calls that cross the wire
 * return the peer's status (a negative errno the peer chose) or a transport
 * error: -ETIMEDOUT (no answer in time; the connection was reset before the
 * call returned, so no late one-sided operation can land in a buffer the call
 * advertised: the caller may reuse it at once), -ECONNRESET
 * (the connection died while the call was pending), -ENOTCONN (the connection
 * was already dead), -EACCES (a one-sided operation was refused by the target:
 * wrong key, access rights or bounds; the connection is dead afterwards).
 */
#ifndef RDMAFS_XPRT_H
#define RDMAFS_XPRT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct xprt_ctx;
struct xprt_conn;
struct xprt_listener;
struct xprt_req;
struct xprt_watch;
struct xprt_mr;
struct xprt_pool;
struct xprt_buf;

/* Size of the fixed frame header in front of every message body. */
#define XPRT_HDR_SIZE 32u

enum xprt_kind {
	XPRT_KIND_AUTO = 0, /* verbs if an RDMA device is present, tcp otherwise */
	XPRT_KIND_VERBS,
	XPRT_KIND_TCP,
};

/* Remote memory access rights of a registered region. */
enum xprt_access {
	XPRT_ACCESS_LOCAL = 0,
	XPRT_ACCESS_REMOTE_READ = 1u << 0,
	XPRT_ACCESS_REMOTE_WRITE = 1u << 1,
};

/*
 * A buffer descriptor as advertised to a peer inside a request: the peer may
 * read or write [addr, addr + len) with rkey, as the region's access allows.
 */
struct xprt_desc {
	uint64_t addr;
	uint32_t len;
	uint32_t rkey;
};

/* ---- client keys ------------------------------------------------------- */

#define XPRT_KEY_SIZE	  32u
#define XPRT_KEY_NAME_MAX 64u

/*
 * A client key: issued from the cluster secret for one named client, it
 * authenticates HELLO in place of the secret. Whoever holds the secret
 * recomputes it from (name, serial, flags) with xprt_key_derive(), so a
 * server needs no table of keys, and a key whose name, serial or flags were
 * altered proves nothing. The transport carries @flags without reading them
 * (rdmafs_common.h gives them their meaning).
 */
struct xprt_key {
	char name[XPRT_KEY_NAME_MAX + 1]; /* 1..64 printable ASCII characters, NUL-terminated */
	uint64_t serial;
	uint32_t flags;
	uint8_t key[XPRT_KEY_SIZE];
};

/*
 * HMAC-SHA256(secret, "rdmafs client key v1\0" | name length (1 byte) | name |
 * serial (8 bytes LE) | flags (4 bytes LE)) into @key. -EINVAL when @name is
 * not 1..XPRT_KEY_NAME_MAX printable ASCII characters (xprt_key_name_valid()).
 */
int xprt_key_derive(const void *secret, size_t secret_len, const char *name, uint64_t serial,
		    uint32_t flags, uint8_t key[XPRT_KEY_SIZE]);

/* True for 1..XPRT_KEY_NAME_MAX characters from 0x21..0x7e (no space: names go to logs). */
bool xprt_key_name_valid(const char *name);

/* Who the client of a served connection proved to be in HELLO. */
struct xprt_identity {
	bool keyed; /* false: it proved the cluster secret itself (full trust) */
	char name[XPRT_KEY_NAME_MAX + 1]; /* keyed: the key's client name; else "" */
	uint64_t serial;		  /* keyed: the key's serial */
	uint32_t flags;			  /* keyed: the key's flags */
};

/*
 * Runs on the progress thread during HELLO for a client that proved a key,
 * before it is accepted; must not block. Returns 0 to accept it, or the
 * negative errno the client then gets from xprt_connect() (-EKEYREVOKED for a
 * revoked key; -EACCES or -EKEYREJECTED otherwise).
 */
typedef int (*xprt_identity_cb)(const struct xprt_identity *id, void *arg);

struct xprt_options {
	uint32_t recv_credits; /* receive buffers posted per connection */
	uint32_t max_msg_size; /* largest message, header included */
	const void *secret;    /* cluster secret for HELLO; NULL: no secret */
	size_t secret_len;
	/*
	 * A client key: our own connections prove it instead of the secret
	 * (copied; NULL: they prove the secret). Listeners still need the secret.
	 */
	const struct xprt_key *key;
	/* Checks a keyed client before HELLO accepts it (NULL: every valid key passes). */
	xprt_identity_cb identity_check;
	void *identity_arg;
	uint32_t call_timeout_ms; /* default for calls and one-sided operations */
	uint32_t connect_timeout_ms;
	uint32_t ping_interval_ms;  /* idle connections are probed this often */
	uint32_t max_rdma_inflight; /* one-sided operations in flight per connection */
	const char *name;	    /* our name, sent in HELLO (for the peer's logs) */
	/*
	 * Poll this long without sleeping before sleeping, over both backends
	 * (a caller: its connection's CQ or socket; the progress thread: every
	 * CQ over verbs, its sockets over tcp), yielding the core to
	 * any other thread queued on it between polls: a caller waiting for its
	 * answer, and the progress thread after it delivered a request to a
	 * listener or handled completions, for the next (answers to this
	 * context's own calls do not make it spin: their callers spin). A sleeping thread's wake-up
	 * is most of a small RPC's round trip on a virtual machine. A connection whose last
	 * XPRT_SPIN_MISSES waits' spins each ended without their answer stops spinning: its waits
	 * sleep at once, all but every XPRT_SPIN_RETRY-th, which spins again, and the first spin
	 * that gets its answer starts spinning on every wait again (xprt_conn_stats.spins,
	 * .spin_hits); the progress thread's spins adapt the same way, counted
	 * per context (xprt_ctx_stats.progress_spins, .progress_spin_hits).
	 */
	uint32_t busy_poll_us;
};

#define XPRT_SPIN_MISSES 8
#define XPRT_SPIN_RETRY	 16

/* busy_poll_us at most (xprt_ctx_create() refuses more): a second of spinning is a mistake. */
#define XPRT_BUSY_POLL_MAX_US 100000u

/*
 * Fills @opts with the defaults: 64 credits of 16 KiB, 10 s calls, 2 s pings,
 * 100 us of busy polling (raise it for latency on a host with cores to spare).
 */
void xprt_options_init(struct xprt_options *opts);

/*
 * Creates a context: a progress thread, the RDMA devices (if any) and the
 * registered memory. @opts is copied, the secret too. Returns -EINVAL for
 * options out of range (fewer than 4 credits, messages outside 256 B..16 MiB,
 * busy_poll_us past XPRT_BUSY_POLL_MAX_US: nothing is made), -ENOMEM, or an
 * errno from thread or epoll creation.
 */
int xprt_ctx_create(const struct xprt_options *opts, struct xprt_ctx **out);

/*
 * Closes every connection and listener of @ctx (pending calls fail with
 * -ECONNRESET), stops the progress thread and frees the context. Memory
 * regions and pools must have been released before. NULL is a no-op.
 */
void xprt_ctx_destroy(struct xprt_ctx *ctx);

/* True when @ctx found at least one RDMA device. */
bool xprt_ctx_has_rdma(const struct xprt_ctx *ctx);

/*
 * Parses "rdma://host:port", "tcp://host:port" or "auto://host:port" (a bare
 * "host:port" means auto). IPv6 hosts are written in brackets. Returns
 * -EINVAL for anything else, including a port outside 0..65535.
 */
int xprt_uri_parse(const char *uri, enum xprt_kind *kind, char *host, size_t host_size,
		   uint16_t *port);

/* Which backend @kind resolves to in @ctx (AUTO becomes VERBS or TCP). */
enum xprt_kind xprt_ctx_resolve_kind(const struct xprt_ctx *ctx, enum xprt_kind kind);

const char *xprt_kind_name(enum xprt_kind kind);

/* ---- memory ---------------------------------------------------------- */

/*
 * Registers [addr, addr + len) with every backend of @ctx, once: use it for
 * long-lived buffers, never per I/O. The caller keeps owning the memory and
 * must keep it until xprt_mr_deregister(). -ENOMEM from the NIC usually means
 * the memlock limit (ulimit -l) is too low; the log then says so.
 */
int xprt_mr_register(struct xprt_ctx *ctx, void *addr, size_t len, unsigned access,
		     struct xprt_mr **out);

/*
 * Revokes every descriptor of @mr, then frees it. A peer's later access to it
 * is refused (and fatal to that connection). NULL is a no-op.
 */
void xprt_mr_deregister(struct xprt_mr *mr);

/*
 * Describes [addr, addr + len) inside @mr for the peer of @conn, which may
 * use a backend-specific key. -EINVAL if the range is not inside @mr.
 */
int xprt_mr_desc(struct xprt_conn *conn, struct xprt_mr *mr, const void *addr, size_t len,
		 struct xprt_desc *out);

/*
 * A pool of @count buffers of @buf_size bytes each (rounded up to 4 KiB, and
 * 4 KiB aligned so they suit O_DIRECT), registered once as one region.
 */
int xprt_pool_create(struct xprt_ctx *ctx, size_t buf_size, uint32_t count, unsigned access,
		     struct xprt_pool **out);

/* Frees the pool. Every buffer must have been put back. NULL is a no-op. */
void xprt_pool_destroy(struct xprt_pool *pool);

/*
 * Takes a buffer, waiting up to @timeout_ms (-1: forever, 0: not at all) for
 * one to be put back. -EAGAIN when none came in time.
 */
int xprt_pool_get(struct xprt_pool *pool, int timeout_ms, struct xprt_buf **out);

void xprt_pool_put(struct xprt_buf *buf);

void *xprt_buf_data(const struct xprt_buf *buf);
size_t xprt_buf_size(const struct xprt_buf *buf);
/* Index of the buffer in its pool: 0..count-1 (e.g. an io_uring fixed-buffer index). */
uint32_t xprt_buf_index(const struct xprt_buf *buf);
struct xprt_mr *xprt_buf_mr(const struct xprt_buf *buf);

/* The pool's whole region, for registering it elsewhere (io_uring fixed buffers). */
void xprt_pool_region(const struct xprt_pool *pool, void **addr, size_t *len);

/* ---- connections and calls ------------------------------------------- */

/*
 * Connects to @uri and runs HELLO (mutual proof of the cluster secret, or
 * of the context's client key). Blocks up to the connect timeout. Returns
 * -ECONNREFUSED, -ETIMEDOUT, -EACCES (secret or key refused, by either side),
 * -EKEYREVOKED (the server's identity check refused our key as revoked; any
 * other errno it chose comes back as it is), -ENODEV (rdma:// without an RDMA
 * device), -EPROTO (the peer speaks another protocol or version; a server
 * older than client keys refuses a keyed HELLO so).
 * The caller owns the connection and ends it with xprt_conn_close().
 */
int xprt_connect(struct xprt_ctx *ctx, const char *uri, struct xprt_conn **out);

/*
 * Closes @conn: waits (bounded, 1 s in all) for what was already sent to
 * leave, tells the peer (CLOSE) and waits until that left too, fails whatever
 * is still pending with -ECONNRESET, drops the caller's reference. The peer
 * then logs an orderly close at debug ("connection from NAME closed"), not a
 * death ("died: REASON", info or warning), which a peer that vanished without
 * CLOSE gets. NULL is a no-op.
 */
void xprt_conn_close(struct xprt_conn *conn);

/*
 * Kills @conn at once, as an error would (QP to error, socket shut down):
 * used when a buffer advertised on it must be reused although the peer may
 * still write into it. Pending calls fail with -ECONNRESET.
 */
void xprt_conn_reset(struct xprt_conn *conn);

/* False once the connection died; xprt_conn_error() then says why. */
bool xprt_conn_alive(const struct xprt_conn *conn);
int xprt_conn_error(const struct xprt_conn *conn);
enum xprt_kind xprt_conn_kind(const struct xprt_conn *conn);
/* The peer's name from HELLO ("" on a client's own connection). */
const char *xprt_conn_peer_name(const struct xprt_conn *conn);
/*
 * What the peer proved in HELLO, into @out: on a served connection the
 * client's key or the cluster secret; on our own connection what we proved.
 * -ENOTCONN before HELLO finished.
 */
int xprt_conn_identity(const struct xprt_conn *conn, struct xprt_identity *out);
/* Largest body a message on @conn can carry. */
size_t xprt_conn_max_body(const struct xprt_conn *conn);

/*
 * Takes and drops references (for server code keeping a connection). Take
 * one only while holding one (a request's, or the owner's). A connection
 * stays valid, though dead once closed, until its last reference is
 * dropped. Any thread; neither takes the context's lock.
 */
void xprt_conn_get(struct xprt_conn *conn);
void xprt_conn_put(struct xprt_conn *conn);

/*
 * Called once a call completed: @status is the peer's status or a transport
 * error; @body (valid only during the callback) holds @len bytes.
 */
typedef void (*xprt_reply_cb)(void *arg, int status, const void *body, size_t len);

/*
 * Sends a request and waits up to @timeout_ms (0: the context default) for the
 * response, whose body is copied into @resp (@resp_cap bytes; a larger body
 * gives -EMSGSIZE). Returns the peer's status, or a transport error. Many
 * threads may call at once; at most recv_credits - 1 requests are on the wire,
 * the rest wait for credits inside the timeout.
 */
int xprt_call(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len, void *resp,
	      size_t resp_cap, size_t *resp_len, int timeout_ms);

/*
 * The asynchronous form. @req is copied. One contract, for this and for the
 * one-sided _async calls below:
 *   - returns 0: the call was queued and @cb runs exactly once, bounded by the
 *     timeout: on the progress thread, or on the calling thread before this
 *     returns when the connection dies while sending;
 *   - returns a negative errno: nothing was queued and @cb never runs.
 *     -ENOTCONN (the connection is dead), -EAGAIN (HELLO has not finished),
 *     -EMSGSIZE (@req_len over xprt_conn_max_body()), -ENOMEM.
 * A caller that counts a call as pending must count it back on an error.
 */
int xprt_call_async(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
		    int timeout_ms, xprt_reply_cb cb, void *arg);

/*
 * xprt_call_async() whose caller waits for @cb: returns 0 once @cb has run
 * (on this thread, or on another that read the answer), or a negative errno
 * as xprt_call_async() does, and then @cb never runs. The caller reads the
 * connection itself while it waits (tcp: its socket; verbs: its completion
 * queue; each polled for up to busy_poll_us, then slept on), so the answer needs
 * no hand-off from the progress thread: with one caller on the connection,
 * an answer that comes while it waits runs @cb on the calling thread, over
 * tcp always and over verbs when busy_poll_us is 0 (while the caller
 * busy-polls, the progress thread may be polling too and find the answer
 * first). A timeout, or a failure another thread finds (a close, a reset,
 * the peer gone; over verbs that thread also handles the answers that came
 * before the peer went), runs @cb on that thread. With several callers, one
 * at a time reads and hands the others their answers; when its own call is
 * over, the next caller still waiting takes its place (until it has, the
 * progress thread reads).
 */
int xprt_call_wait(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
		   int timeout_ms, xprt_reply_cb cb, void *arg);

/* ---- serving ----------------------------------------------------------- */

/*
 * Runs for every request after HELLO succeeded, with the transport's lock
 * held, on the thread that read it: the progress thread, or a caller that
 * reads or polls while it waits for its own answer (xprt_call_wait(), a
 * synchronous one-sided op). The handler owns @req until it passes it to
 * xprt_reply(), from any thread.
 */
typedef void (*xprt_request_cb)(struct xprt_req *req, void *arg);

/*
 * Listens on @uri (port 0 picks a free port; see xprt_listener_port()).
 * Receives are posted before a connection is accepted.
 */
int xprt_listen(struct xprt_ctx *ctx, const char *uri, xprt_request_cb cb, void *arg,
		struct xprt_listener **out);

/*
 * The end of a batch of requests: runs with the transport's lock held, on the
 * thread that delivered them to the listener's callback, once it has
 * delivered every request it found at once (what one read of a socket
 * brought over tcp, the receives of one poll of the completion queues over
 * verbs), before it waits for more; never for a batch without a request. A
 * server may keep the requests its callback got meanwhile and serve them
 * together here, as long as it keeps none past it (xprt_req_batched() says
 * whether a request's batch end will come). A listener closed with requests
 * delivered runs its batch end first. A batch end must not close a listener.
 * @arg is the callback's. The replies a batch end makes are sent when it
 * returns, each connection's together: one write over tcp, one chain of
 * SENDs posted at once over verbs (see xprt_conn_stats()'s writes), as far
 * as the socket's room, 64 frames a write and the free send slots allow (the
 * rest follow as they always do). Over tcp a reply made while its own
 * connection is read goes out when that read ends, with the others it made.
 * A connection being closed sends at once.
 */
typedef void (*xprt_batch_end_cb)(void *arg);

/* xprt_listen() with a batch end (NULL: none, as xprt_listen()). */
int xprt_listen_batched(struct xprt_ctx *ctx, const char *uri, xprt_request_cb cb,
			xprt_batch_end_cb batch_end, void *arg, struct xprt_listener **out);

/* Stops accepting; established connections stay. NULL is a no-op. */
void xprt_listener_close(struct xprt_listener *listener);
uint16_t xprt_listener_port(const struct xprt_listener *listener);
enum xprt_kind xprt_listener_kind(const struct xprt_listener *listener);

uint32_t xprt_req_method(const struct xprt_req *req);
uint64_t xprt_req_id(const struct xprt_req *req);
const void *xprt_req_body(const struct xprt_req *req, size_t *len);
/*
 * Whether @req's batch end will run (its listener was made by
 * xprt_listen_batched() with one, and is open); called from the request
 * callback, under the transport's lock.
 */
bool xprt_req_batched(const struct xprt_req *req);
/* The connection the request came on; the request holds a reference. */
struct xprt_conn *xprt_req_conn(const struct xprt_req *req);

/*
 * Sends the response (status 0 or a negative errno, and a body) and frees
 * @req. A body larger than the connection allows is replaced by -EMSGSIZE,
 * and a status that is neither 0 nor an errno in [-4095, -1] by -EIO (a peer
 * refuses any other status as a protocol error). If the connection died
 * meanwhile the response is dropped. Returns 0 or the reason the response
 * could not be queued.
 */
int xprt_reply(struct xprt_req *req, int status, const void *body, size_t len);

/* ---- watched descriptors ------------------------------------------------- */

/*
 * Runs with the transport's lock held, on the progress thread, whenever the
 * watched descriptor is readable (level-triggered: again at the next wait
 * until the callback has taken what made it so). It may reply to requests
 * (xprt_reply()) and must not wait: what waits for the disk goes there as a
 * descriptor (an io_uring's) and comes back here done.
 */
typedef void (*xprt_watch_cb)(void *arg);

/*
 * Watches @fd (the caller's; it stays open, and must stay so until
 * xprt_watch_close()) for readability: @cb(@arg) as above. 0 or -errno.
 */
int xprt_watch_add(struct xprt_ctx *ctx, int fd, xprt_watch_cb cb, void *arg,
		   struct xprt_watch **out);

/*
 * Stops the watch: once it returns, its callback is not running and never
 * runs again (on the progress thread it may be called from the callback
 * itself). NULL is a no-op. xprt_ctx_destroy() frees the watches of its
 * context, closed or not: close each before.
 */
void xprt_watch_close(struct xprt_watch *watch);

/* ---- one-sided operations (the server initiates them) -------------------- */

typedef void (*xprt_rdma_cb)(void *arg, int status);

/*
 * Reads @len bytes at @remote_addr/@rkey of the peer of @conn into @local,
 * which lies in @local_mr. Blocks until done or the timeout (0: default).
 * Must not be called on the progress thread (use the _async form there).
 */
int xprt_rdma_read(struct xprt_conn *conn, void *local, struct xprt_mr *local_mr,
		   uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms);

/* Writes @len bytes from @local (in @local_mr) to the peer's memory. */
int xprt_rdma_write(struct xprt_conn *conn, const void *local, struct xprt_mr *local_mr,
		    uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms);

/*
 * The asynchronous forms, under xprt_call_async()'s contract: 0 and @cb runs
 * exactly once, or a negative errno (-EINVAL for @local outside @local_mr,
 * -ENOTCONN, -EAGAIN, -ENOMEM) and @cb never runs.
 */
int xprt_rdma_read_async(struct xprt_conn *conn, void *local, struct xprt_mr *local_mr,
			 uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms,
			 xprt_rdma_cb cb, void *arg);
int xprt_rdma_write_async(struct xprt_conn *conn, const void *local, struct xprt_mr *local_mr,
			  uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms,
			  xprt_rdma_cb cb, void *arg);

/* ---- statistics ----------------------------------------------------------- */

struct xprt_conn_stats {
	uint64_t msgs_sent, msgs_received;
	uint64_t bytes_sent, bytes_received; /* message bytes, header included */
	uint64_t rdma_reads, rdma_writes, rdma_bytes;
	/*
	 * Socket writes (tcp) or ibv_post_send() calls (verbs) that carried
	 * them, one-sided operations included (xprt_batch_end_cb).
	 */
	uint64_t writes;
	/* waits for an answer that spun first (busy_poll_us), and those whose answer came meanwhile
	 */
	uint64_t spins, spin_hits;
	/*
	 * Times a caller sleeping on this connection for an answer (the
	 * backend's wait: tcp its socket, verbs its completion channel) was
	 * woken by the connection, not by its timer. Over verbs only every few
	 * SENDs ask for a completion, so with one caller and no spinning a call
	 * costs about one wakeup, the answer's.
	 */
	uint64_t wait_wakeups;
	uint64_t credit_waits; /* times a send waited for credits */
	uint32_t send_credits; /* peer receive buffers we may still use */
	uint32_t recv_credits; /* our receive buffers the peer may still use */
	uint32_t calls_pending;
};

int xprt_conn_stats(struct xprt_conn *conn, struct xprt_conn_stats *out);

struct xprt_ctx_stats {
	/*
	 * Connections this context's listeners accepted that are alive and past
	 * HELLO (the peers it serves), by enum xprt_kind (VERBS, TCP; AUTO is 0).
	 */
	uint32_t served[XPRT_KIND_TCP + 1];
	uint32_t handshaking; /* accepted, HELLO not finished yet */
	uint32_t outgoing;    /* its own connections (xprt_connect()) that are alive */
	/*
	 * The progress thread's spins (busy_poll_us) since the context was
	 * made, and those that ended because something came.
	 */
	uint64_t progress_spins, progress_spin_hits;
};

/* Counts @ctx's live connections now, and its spins. Any thread; takes the context's lock. */
void xprt_ctx_stats(struct xprt_ctx *ctx, struct xprt_ctx_stats *out);

/* Logging: the library writes through this (default: stderr, level WARN). */
enum xprt_log_level { XPRT_LOG_ERR = 0, XPRT_LOG_WARN, XPRT_LOG_INFO, XPRT_LOG_DEBUG };
typedef void (*xprt_log_cb)(enum xprt_log_level level, const char *msg, void *arg);
void xprt_set_log(xprt_log_cb cb, void *arg, enum xprt_log_level max_level);

/* A short text for any errno this library returns (strerror plus our meaning). */
const char *xprt_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_XPRT_H */
