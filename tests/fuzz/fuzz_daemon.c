/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target: the storage daemon's request handling after HELLO, as a
 * client drives it. Each record of the input (fuzz_common.h) becomes a
 * REQUEST frame on a server-side connection whose HELLO is taken as done; the
 * transport core hands it to server_request_cb(), the daemon's real queue,
 * and server_run_queued() runs the real handler (unpack, validation, store,
 * reply) on this thread. The store is a real chunk store (LMDB + chunk files
 * through io_uring) in a scratch directory, emptied after every input.
 *
 * One-sided RDMA cannot happen here, so the connection's backend is a fake
 * NIC: the client's registered memory is FAKE_LEN bytes at FAKE_ADDR under
 * FAKE_RKEY, whose content is a fixed function of the address. An RDMA READ
 * inside it gets those bytes, an RDMA WRITE inside it is taken (its source
 * bytes are read, so ASan checks them); any other access is refused as a NIC
 * would (-EACCES, the connection dies). The fake completes ops when the core
 * polls it, as a verbs CQ would.
 *
 * Selector: low 4 bits pick the method (table below; one entry damages a
 * chunk file instead, as a failing disk would); 0x40 leaves the request
 * queued so the following ones pile up behind it (pipelining, -EBUSY past the
 * queue depth); 0x80 on a CHUNK_WRITE sets its crc32c to that of the bytes the
 * fake READ will deliver, or of its inline payload, which a fuzzer could
 * hardly compute itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xprt_i.h"
#include "rdmafs.pb-c.h"
#include "daemon_i.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAKE_ADDR	0x7f0000100000ull
#define FAKE_LEN	(1u << 20)
#define FAKE_RKEY	0x5eedu
#define MAX_CHUNK	(64u << 10)
#define QUEUE_DEPTH	4
#define MAX_RECORDS	32
#define PEER_WINDOW	8
#define SEL_QUEUE_ONLY	0x40
#define SEL_FIX_CRC	0x80
#define MAX_PENDING_OPS 8
/* Not a request: the disk damages a chunk file (see damage_chunk()). */
#define METHOD_DAMAGE 0xffffffffu

static const uint32_t methods[16] = {
	RDMAFS__METHOD__METHOD_CHUNK_WRITE,
	RDMAFS__METHOD__METHOD_CHUNK_READ,
	RDMAFS__METHOD__METHOD_CHUNK_COMMIT,
	RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE,
	RDMAFS__METHOD__METHOD_CHUNK_REMOVE,
	RDMAFS__METHOD__METHOD_CHUNK_STAT,
	RDMAFS__METHOD__METHOD_CHUNK_LIST,
	RDMAFS__METHOD__METHOD_DAEMON_STATS,
	RDMAFS__METHOD__METHOD_SCRUB,
	RDMAFS__METHOD__METHOD_CHUNK_RESYNC,
	RDMAFS__METHOD__METHOD_CHUNK_FENCE,
	METHOD_DAMAGE,
	/* a daemon without the metadata service refuses these */
	RDMAFS__METHOD__METHOD_LOOKUP,
	RDMAFS__METHOD__METHOD_REGISTER_DAEMON,
	RDMAFS__METHOD__METHOD_PING,
	RDMAFS__METHOD__METHOD_UNSPECIFIED,
};

/* What each successful reply must unpack as (NULL: not checked). */
static const ProtobufCMessageDescriptor *reply_type(uint32_t method)
{
	switch (method) {
	case RDMAFS__METHOD__METHOD_CHUNK_WRITE:
		return &rdmafs__chunk_write_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_READ:
		return &rdmafs__chunk_read_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_COMMIT:
		return &rdmafs__empty__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE:
		return &rdmafs__chunk_truncate_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_REMOVE:
		return &rdmafs__chunk_remove_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_STAT:
		return &rdmafs__chunk_stat_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_LIST:
		return &rdmafs__chunk_list_resp__descriptor;
	case RDMAFS__METHOD__METHOD_DAEMON_STATS:
		return &rdmafs__daemon_stats_resp__descriptor;
	case RDMAFS__METHOD__METHOD_SCRUB:
		return &rdmafs__scrub_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_FENCE:
		return &rdmafs__chunk_fence_resp__descriptor;
	case RDMAFS__METHOD__METHOD_CHUNK_RESYNC:
		return &rdmafs__empty__descriptor;
	default:
		return NULL;
	}
}

static struct xprt_ctx *ctx;
static struct xprt_listener listener;
static struct store *store;
static struct store_io *reset_io;
static struct server *srv;

/* Per connection: what the server sent that used one of our credits, not yet granted back. */
struct peer {
	struct xprt_conn *conn;
	uint32_t owed;
	uint64_t next_id;
};

/* ctl_peer: polls the scrub; its connection lives as long as the process. */
static struct peer input_peer, ctl_peer;
static Rdmafs__JobState scrub_state;
static struct xprt_rdma_op *pending[MAX_PENDING_OPS];
static unsigned pending_count;
static uint8_t sink[FAKE_LEN];
static bool trace; /* FUZZ_TRACE=1: print every reply, to check what an input does */

static uint8_t fake_byte(uint64_t addr)
{
	return (uint8_t)((addr >> 3) * 167u + (addr >> 13) + FAKE_RKEY);
}

static bool fake_in_bounds(uint64_t addr, uint32_t rkey, uint64_t len)
{
	return rkey == FAKE_RKEY && addr >= FAKE_ADDR && len <= FAKE_LEN &&
	       addr - FAKE_ADDR <= FAKE_LEN - len;
}

static struct peer *peer_of(struct xprt_conn *c)
{
	if (c == ctl_peer.conn)
		return &ctl_peer;
	if (c == input_peer.conn)
		return &input_peer;
	return NULL;
}

/* Every reply the daemon sends comes here: checked, and its credit owed back. */
static int fake_send(struct xprt_conn *c, const uint8_t *hdr, const void *body, size_t len)
{
	const ProtobufCMessageDescriptor *type;
	struct peer *p = peer_of(c);
	ProtobufCMessage *msg;
	struct xprt_hdr h;
	uint8_t *frame;

	frame = malloc(XPRT_HDR_SIZE + len);
	if (!frame)
		abort();
	memcpy(frame, hdr, XPRT_HDR_SIZE);
	if (len)
		memcpy(frame + XPRT_HDR_SIZE, body, len);
	/* What the daemon sends must be a frame its peer accepts. */
	if (xprt_hdr_decode(frame, XPRT_HDR_SIZE + len, c->ctx->opts.max_msg_size, &h) ||
	    h.body_len != len)
		abort();
	free(frame);
	if (p && xprt_msg_uses_credit(h.type))
		p->owed++;
	if (trace)
		fprintf(stderr, "%s: type %u method %u status %d, %zu bytes\n",
			p == &ctl_peer ? "ctl" : "input", h.type, h.method, h.status, len);
	if (h.type != XPRT_MSG_RESPONSE || h.status)
		return 0;
	type = reply_type(h.method);
	if (!type)
		return 0;
	/* A successful reply that does not parse is a bug. */
	msg = protobuf_c_message_unpack(type, NULL, len, body);
	if (!msg)
		abort();
	if (h.method == RDMAFS__METHOD__METHOD_SCRUB)
		scrub_state = ((Rdmafs__ScrubResp *)msg)->state;
	protobuf_c_message_free_unpacked(msg, NULL);
	return 0;
}

static int fake_rdma(struct xprt_conn *c, struct xprt_rdma_op *op)
{
	if (pending_count == MAX_PENDING_OPS)
		return -EAGAIN;
	pending[pending_count++] = op;
	return 0;
}

/* The fake NIC's completion queue, polled by the core with ctx->lock held. */
static int fake_progress(struct xprt_ctx *x)
{
	int n = 0;

	while (pending_count) {
		struct xprt_rdma_op *op = pending[--pending_count];
		struct xprt_conn *c = op->conn;

		n++;
		if (!fake_in_bounds(op->remote_addr, op->rkey, op->len)) {
			xprt_core_rdma_done(op, -EACCES);
			xprt_core_conn_failed(c, -EACCES);
			continue;
		}
		if (op->is_write) {
			memcpy(sink, op->local, op->len);
		} else {
			for (size_t i = 0; i < op->len; i++)
				op->local[i] = fake_byte(op->remote_addr + i);
		}
		xprt_core_rdma_done(op, 0);
	}
	return n;
}

/* A dying connection flushes what it had posted, as a QP in error does. */
static void fake_shutdown(struct xprt_conn *c)
{
	for (unsigned i = 0; i < pending_count;) {
		struct xprt_rdma_op *op = pending[i];

		if (op->conn != c) {
			i++;
			continue;
		}
		pending[i] = pending[--pending_count];
		xprt_core_rdma_done(op, -ECONNRESET);
	}
}

static void fake_destroy(struct xprt_conn *c)
{
	c->backend = NULL;
}

static int fake_ctx_init(struct xprt_ctx *x)
{
	return 0;
}

static void fake_ctx_fini(struct xprt_ctx *x)
{
}

static int fake_mr_register(struct xprt_ctx *x, struct xprt_mr *mr)
{
	return 0;
}

static void fake_mr_deregister(struct xprt_ctx *x, struct xprt_mr *mr)
{
}

static uint32_t fake_rkey(struct xprt_conn *c, struct xprt_mr *mr)
{
	return 0;
}

static const struct xprt_backend_ops fake_ops = {
	.name = "fuzz",
	.kind = XPRT_KIND_TCP,
	.ctx_init = fake_ctx_init,
	.ctx_fini = fake_ctx_fini,
	.progress = fake_progress,
	.send = fake_send,
	.rdma = fake_rdma,
	.shutdown = fake_shutdown,
	.conn_destroy = fake_destroy,
	.mr_register = fake_mr_register,
	.mr_deregister = fake_mr_deregister,
	.mr_rkey = fake_rkey,
};

/* A server-side connection past HELLO; ctx->lock held. */
static struct xprt_conn *open_conn(struct peer *p)
{
	struct xprt_conn_params params = {XPRT_MAGIC, XPRT_VERSION, PEER_WINDOW, 16u << 10};
	struct xprt_conn *c = xprt_core_conn_new(&listener);

	if (!c)
		abort();
	c->backend = &listener; /* anything non-NULL: the fake keeps no state */
	c->refs++;		/* ours, so that p->conn is never reaped under us */
	xprt_core_conn_established(c, &params);
	c->state = XPRT_CONN_READY;
	p->conn = c;
	p->owed = 0;
	p->next_id = 1;
	return c;
}

/*
 * The connection of an input: the previous input's while it lives, with the
 * state of a fresh one (credits, request ids), else a new one. A connection
 * is only freed by the transport's progress thread some time after it died,
 * so one per input would make libFuzzer take every input for a leak and run
 * LeakSanitizer's slow scan after it. ctx->lock held.
 */
static struct xprt_conn *input_conn(void)
{
	struct xprt_conn *c = input_peer.conn;

	if (c && (c->state == XPRT_CONN_DEAD || c->closing)) {
		xprt_core_conn_failed(c, -ECONNRESET); /* a closing one dies now, not later */
		c->refs--;
		c = NULL;
	}
	if (!c)
		return open_conn(&input_peer);
	xprt_credits_init(&c->credits, ctx->opts.recv_credits, PEER_WINDOW);
	input_peer.owed = 0;
	input_peer.next_id = 1;
	return c;
}

/* Sends one request frame from @p's client; ctx->lock held. */
static void send_request(struct peer *p, uint32_t method, const void *body, size_t len)
{
	static uint8_t frame[16u << 10];
	struct xprt_conn *c = p->conn;
	struct xprt_hdr h = {
		.magic = XPRT_MAGIC,
		.version = XPRT_VERSION,
		.type = XPRT_MSG_REQUEST,
		.request_id = p->next_id++,
		.method = method,
		.credits = p->owed,
	};

	if (len > sizeof(frame) - XPRT_HDR_SIZE)
		len = sizeof(frame) - XPRT_HDR_SIZE;
	h.body_len = (uint32_t)len;
	p->owed = 0;
	xprt_hdr_encode(&h, frame);
	if (len)
		memcpy(frame + XPRT_HDR_SIZE, body, len);
	xprt_core_recv(c, frame, XPRT_HDR_SIZE + len);
	if (c->state != XPRT_CONN_DEAD && !c->closing)
		xprt_core_recv_reposted(c, 1);
	xprt_core_batch_end(ctx);
}

/* Runs what the daemon queued, as its worker would, without ctx->lock. */
static void run_queued(void)
{
	pthread_mutex_unlock(&ctx->lock);
	server_run_queued(srv);
	pthread_mutex_lock(&ctx->lock);
}

/* Waits until no scrub runs, polling on the control connection (ctx->lock held). */
static void wait_scrub(void)
{
	static const uint8_t status[] = {0x08, RDMAFS__JOB_ACTION__JOB_ACTION_STATUS};
	struct timespec pause = {0, 100000};

	for (;;) {
		scrub_state = RDMAFS__JOB_STATE__JOB_STATE_NEVER_RUN;
		send_request(&ctl_peer, RDMAFS__METHOD__METHOD_SCRUB, status, sizeof(status));
		run_queued();
		if (scrub_state != RDMAFS__JOB_STATE__JOB_STATE_RUNNING)
			break;
		pthread_mutex_unlock(&ctx->lock);
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&ctx->lock);
	}
}

/*
 * The last scrub's result stays for STATUS to report: after a scrub of an
 * input, one over the emptied store puts back what every input starts from
 * (DONE, nothing checked). ctx->lock held.
 */
static void reset_scrub(void)
{
	static const uint8_t start[] = {0x08, RDMAFS__JOB_ACTION__JOB_ACTION_START};

	wait_scrub();
	send_request(&ctl_peer, RDMAFS__METHOD__METHOD_SCRUB, start, sizeof(start));
	run_queued();
	wait_scrub();
}

/* Removes every chunk, so each input starts from an empty store. */
static void reset_store(void)
{
	struct store_list_entry entries[64];
	size_t count;
	bool done;

	do {
		if (store_list(store, NULL, entries, 64, &count, &done))
			abort();
		for (size_t i = 0; i < count; i++) {
			struct store_selection sel = {.inode = entries[i].id.inode, .range = true};
			uint64_t removed, freed;

			if (store_remove(reset_io, &sel, &removed, &freed))
				abort();
		}
	} while (count);
}

/* Inodes an input asked to fence, each with the highest generation asked. */
struct fenced {
	uint64_t inode, generation;
};

static void note_fence(struct fenced *f, size_t *count, const uint8_t *body, size_t len)
{
	Rdmafs__ChunkFenceReq *m = rdmafs__chunk_fence_req__unpack(NULL, len, body);
	size_t i;

	if (!m)
		return;
	for (i = 0; i < *count && f[i].inode != m->inode; i++)
		;
	if (i == *count && *count < MAX_RECORDS)
		f[(*count)++] = (struct fenced){.inode = m->inode};
	if (i < *count && m->generation > f[i].generation)
		f[i].generation = m->generation;
	rdmafs__chunk_fence_req__free_unpacked(m, NULL);
}

/*
 * Fences persist (drain): lift what an input raised, so every input starts
 * unfenced. A fence only rises, so what is in force is at most the highest
 * generation asked; a lift at the wrong one reports the fence in force.
 */
static void reset_fences(const struct fenced *f, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		uint64_t now = 0;

		if (!f[i].inode || !f[i].generation)
			continue;
		if (store_fence_set(store, f[i].inode, f[i].generation, true, &now))
			abort();
		if (now && (store_fence_set(store, f[i].inode, now, true, &now) || now))
			abort();
	}
}

static void setup_once(void)
{
	struct server_params sp = {0};
	struct xprt_options o;
	struct datadir dd;

	trace = getenv("FUZZ_TRACE") != NULL;
	rdmafs_log_set_level(trace ? RDMAFS_LOG_DEBUG : RDMAFS_LOG_ERR);
	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	xprt_options_init(&o);
	o.secret = "fuzz";
	o.secret_len = 4;
	/* No pings: a slow input must not see its connection probed and dropped. */
	o.ping_interval_ms = 0;
	/* One-sided ops complete when polled: a blocked worker polls at once. */
	o.busy_poll_us = XPRT_BUSY_POLL_MAX_US;
	if (xprt_ctx_create(&o, &ctx)) {
		fprintf(stderr, "fuzz-daemon: xprt_ctx_create refused the harness's options\n");
		abort();
	}
	/* The fake NIC takes the slot AUTO never uses, so the core polls it. */
	pthread_mutex_lock(&ctx->lock);
	ctx->backends[XPRT_KIND_AUTO] = &fake_ops;
	pthread_mutex_unlock(&ctx->lock);
	if (datadir_open(fuzz_scratch_dir("daemon"), &dd))
		abort();
	if (store_open(dd.dir_fd, MAX_CHUNK, 256u << 20, &store))
		abort();
	if (store_io_create(store, NULL, &reset_io))
		abort();
	sp.ctx = ctx;
	sp.store = store;
	sp.uuid = dd.uuid;
	sp.workers = 1;
	sp.queue_depth = QUEUE_DEPTH;
	sp.max_chunk_size = MAX_CHUNK;
	sp.no_threads = true;
	sp.no_chain = true;
	if (server_create(&sp, &srv))
		abort();
	listener.ctx = ctx;
	listener.ops = &fake_ops;
	listener.cb = server_request_cb;
	listener.batch_end = server_batch_end;
	listener.cb_arg = srv;
	pthread_mutex_lock(&ctx->lock);
	open_conn(&ctl_peer);
	reset_scrub();
	pthread_mutex_unlock(&ctx->lock);
}

/*
 * What a failing disk does to a chunk file, so that the checksum paths (a
 * read or a partial write finding bad stored data, the scrub, settling
 * pending CRCs) run too. Body: inode (u8), index (u8), offset (u16 LE), a
 * byte to XOR in; a zero byte instead cuts the file at the offset.
 */
static void damage_chunk(const uint8_t *body, size_t len)
{
	char path[128];
	uint32_t offset;
	uint8_t byte;
	int fd;

	if (len < 5)
		return;
	offset = (uint32_t)body[2] | ((uint32_t)body[3] << 8);
	snprintf(path, sizeof(path), "%s/chunks/%016x/%016x", fuzz_scratch_path, body[0], body[1]);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	if (body[4] == 0) {
		if (ftruncate(fd, offset))
			abort();
	} else if (pread(fd, &byte, 1, offset) == 1) {
		byte ^= body[4];
		if (pwrite(fd, &byte, 1, offset) != 1)
			abort();
	}
	close(fd);
}

/* Sets a write's crc32c to that of the bytes the fake READ will deliver. */
static size_t fix_crc(const uint8_t *body, size_t len, uint8_t *out, size_t cap)
{
	Rdmafs__ChunkWriteReq *m = rdmafs__chunk_write_req__unpack(NULL, len, body);
	size_t n = 0;

	if (!m)
		return 0;
	if (m->data.len) { /* inline: the payload is in the request */
		m->crc32c = rdmafs_crc32c(m->data.data, m->data.len);
		if (rdmafs__chunk_write_req__get_packed_size(m) <= cap)
			n = rdmafs__chunk_write_req__pack(m, out);
	} else if (m->buf && m->length <= MAX_CHUNK &&
		   fake_in_bounds(m->buf->addr, m->buf->rkey, m->length)) {
		uint8_t bytes[MAX_CHUNK];

		for (uint32_t i = 0; i < m->length; i++)
			bytes[i] = fake_byte(m->buf->addr + i);
		m->crc32c = rdmafs_crc32c(bytes, m->length);
		if (rdmafs__chunk_write_req__get_packed_size(m) <= cap)
			n = rdmafs__chunk_write_req__pack(m, out);
	}
	rdmafs__chunk_write_req__free_unpacked(m, NULL);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[16u << 10];
	struct fuzz_record r;
	struct xprt_conn *c;
	unsigned records = 0;
	bool scrubbed = false, stored = false;
	struct fenced fenced[MAX_RECORDS];
	size_t nfenced = 0;

	if (!ctx)
		setup_once();
	pthread_mutex_lock(&ctx->lock);
	c = input_conn();
	while (records++ < MAX_RECORDS && fuzz_next_record(&data, &size, &r) &&
	       c->state != XPRT_CONN_DEAD) {
		uint32_t method = methods[r.selector & 15];
		const uint8_t *body = r.body;
		size_t len = r.len;

		if (method == METHOD_DAMAGE) {
			damage_chunk(r.body, r.len);
			continue;
		}
		if ((r.selector & SEL_FIX_CRC) && method == RDMAFS__METHOD__METHOD_CHUNK_WRITE) {
			size_t n = fix_crc(body, len, fixed, sizeof(fixed));

			if (n) {
				body = fixed;
				len = n;
			}
		}
		/* Only these leave anything to wait for or to clean up. */
		scrubbed |= method == RDMAFS__METHOD__METHOD_SCRUB;
		stored |= method == RDMAFS__METHOD__METHOD_CHUNK_WRITE ||
			  method == RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE;
		if (method == RDMAFS__METHOD__METHOD_CHUNK_FENCE)
			note_fence(fenced, &nfenced, body, len);
		send_request(&input_peer, method, body, len);
		if (!(r.selector & SEL_QUEUE_ONLY))
			run_queued();
		/*
		 * A scrub runs on its own thread: its end is waited for before
		 * anything else runs, else what the next records see (and the
		 * coverage) would depend on the scheduler.
		 */
		if (method == RDMAFS__METHOD__METHOD_SCRUB)
			wait_scrub();
	}
	run_queued();
	/* A reply still waiting for a credit would go out during the next input. */
	if (!list_empty(&c->sendq))
		xprt_core_conn_failed(c, -ECONNRESET);
	if (scrubbed)
		wait_scrub();
	pthread_mutex_unlock(&ctx->lock);
	if (stored)
		reset_store();
	reset_fences(fenced, nfenced);
	if (scrubbed) {
		pthread_mutex_lock(&ctx->lock);
		reset_scrub();
		pthread_mutex_unlock(&ctx->lock);
	}
	return 0;
}
