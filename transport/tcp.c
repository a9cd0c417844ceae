/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The tcp backend: the same frames as verbs on a stream socket. One-sided
 * operations are emulated by the target, which checks key, access and bounds
 * as a NIC would and treats any violation as fatal to the connection.
 *
 * Receiving: small frames are parsed out of a staging buffer filled by large
 * recv() calls; the data of a one-sided operation is received straight into
 * its destination (the initiator's local buffer for a read, the target's
 * registered memory for a write), so bulk data is copied once, by the kernel.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "xprt_i.h"

/* Staging buffer beyond the largest message, so several small frames fit per recv(). */
#define TCP_STAGING_EXTRA (64u << 10)
/* A target queueing more READ responses than this is being flooded: cut the peer. */
#define TCP_MAX_TXQ	   4096u
#define TCP_LISTEN_BACKLOG 128
/*
 * Frames a connection keeps queued, while it is being read or while a batch
 * end answers, before one write sends them together; also the most frames
 * one write takes.
 */
#define TCP_TX_GATHER 64u

enum tcp_rx_state {
	RX_PREAMBLE, /* waiting for the peer's connection parameters */
	RX_FRAMES,   /* parsing frames out of the staging buffer */
	RX_DIRECT,   /* receiving one-sided data straight into its destination */
	RX_STOPPED,  /* after a protocol error: read nothing more */
};

struct tcp_tx {
	struct list_head link;
	uint8_t head[XPRT_HDR_SIZE + XPRT_RDMA_WIRE_SIZE];
	size_t head_len;
	const uint8_t *data; /* not owned: remote-readable memory or an op's local buffer */
	size_t data_len;
	size_t sent;	 /* bytes of head + data already written */
	uint8_t owned[]; /* a copied message body follows head when data == owned */
};

struct tcp_conn {
	struct xprt_poller poller;
	struct xprt_conn *conn;
	uint32_t events;
	bool connecting;
	enum tcp_rx_state rx_state;
	uint8_t *stage;
	size_t stage_size, stage_len;
	/* RX_DIRECT */
	uint8_t *direct_dst;
	size_t direct_len, direct_got;
	struct xprt_rdma_op *direct_op; /* a READ completing into op->local, or NULL */
	uint64_t direct_write_id;	/* a WRITE landing in our memory: its id, for the ack */
	struct list_head txq;
	uint32_t txq_len;
	bool reading;		    /* in rx_read(): what it queues goes out when the read ends */
	struct list_head held_link; /* on tcp_ctx.held, or empty */
};

/* The backend's state per context (ctx->tcp). */
struct tcp_ctx {
	/* connections with frames queued during a batch end, written when it returns */
	struct list_head held;
};

struct tcp_listener {
	struct xprt_poller poller;
	struct xprt_listener *l;
};

static int tcp_ctx_init(struct xprt_ctx *ctx)
{
	struct tcp_ctx *tx = calloc(1, sizeof(*tx));

	if (!tx)
		return -ENOMEM;
	list_init(&tx->held);
	ctx->tcp = tx;
	return 0;
}

static void tcp_ctx_fini(struct xprt_ctx *ctx)
{
	free(ctx->tcp);
	ctx->tcp = NULL;
}

static void set_events(struct tcp_conn *tc, uint32_t events)
{
	/* While a caller waits on the socket itself, the progress thread leaves reading to it. */
	if (tc->conn->waiting)
		events &= ~(uint32_t)EPOLLIN;
	if (tc->events == events)
		return;
	tc->events = events;
	xprt_core_poll_mod(tc->conn->ctx, &tc->poller, events);
}

/* ---- sending ---- */

/* Adds what is left of @tx to @iov at @n; returns the new count and adds its bytes to @len. */
static int tx_iov(const struct tcp_tx *tx, struct iovec *iov, int n, size_t *len)
{
	if (tx->sent < tx->head_len) {
		iov[n].iov_base = (void *)(tx->head + tx->sent);
		iov[n++].iov_len = tx->head_len - tx->sent;
	}
	if (tx->data_len) {
		size_t done = tx->sent > tx->head_len ? tx->sent - tx->head_len : 0;

		iov[n].iov_base = (void *)(tx->data + done);
		iov[n++].iov_len = tx->data_len - done;
	}
	*len += tx->head_len + tx->data_len - tx->sent;
	return n;
}

/*
 * Writes as much of the queue as the socket takes, up to TCP_TX_GATHER
 * frames a write; -errno on a dead socket.
 */
static int tx_flush(struct tcp_conn *tc)
{
	while (!list_empty(&tc->txq)) {
		struct iovec iov[2 * TCP_TX_GATHER];
		struct list_head *pos, *tmp;
		size_t want = 0, w;
		ssize_t r;
		int n = 0;

		list_for_each (pos, &tc->txq) {
			if ((size_t)n + 2 > sizeof(iov) / sizeof(iov[0])) /* a frame takes 1 or 2 */
				break;
			n = tx_iov(list_entry(pos, struct tcp_tx, link), iov, n, &want);
		}
		/* MSG_NOSIGNAL: a peer that went away is an error here, never a SIGPIPE. */
		r = sendmsg(tc->poller.fd,
			    &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n},
			    MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return -errno;
		}
		tc->conn->stats.writes++;
		w = (size_t)r;
		list_for_each_safe (pos, tmp, &tc->txq) {
			struct tcp_tx *tx = list_entry(pos, struct tcp_tx, link);
			size_t left = tx->head_len + tx->data_len - tx->sent;

			if (w < left) {
				tx->sent += w;
				break;
			}
			w -= left;
			list_del(&tx->link);
			tc->txq_len--;
			free(tx);
		}
		if ((size_t)r < want)
			break; /* the socket is full: EPOLLOUT says when it has room */
	}
	if (tc->rx_state != RX_STOPPED || !list_empty(&tc->txq))
		set_events(tc, (tc->rx_state == RX_STOPPED ? 0 : EPOLLIN) |
				       (list_empty(&tc->txq) ? 0 : EPOLLOUT));
	return 0;
}

/* Leaves @tc's queue for the batch end's return (tcp_flush_held()). */
static void hold(struct tcp_conn *tc)
{
	struct tcp_ctx *tx = tc->conn->ctx->tcp;

	if (list_empty(&tc->held_link))
		list_add_tail(&tc->held_link, &tx->held);
}

/* list_del() leaves the link empty, and does nothing to an empty one */
static void unhold(struct tcp_conn *tc)
{
	list_del(&tc->held_link);
}

/*
 * Queues a frame: @head (header, maybe a one-sided op body), then @data of
 * @data_len bytes; @copy_data says whether data must be copied (a message
 * body the caller keeps) or stays valid until sent (registered memory).
 */
static int tx_queue(struct tcp_conn *tc, const uint8_t *head, size_t head_len, const void *data,
		    size_t data_len, bool copy_data)
{
	struct tcp_tx *tx;

	if (tc->txq_len >= TCP_MAX_TXQ)
		return -ENOBUFS;
	tx = malloc(sizeof(*tx) + (copy_data ? data_len : 0));
	if (!tx)
		return -ENOMEM;
	memcpy(tx->head, head, head_len);
	tx->head_len = head_len;
	tx->sent = 0;
	tx->data_len = data_len;
	if (copy_data && data_len) {
		memcpy(tx->owned, data, data_len);
		tx->data = tx->owned;
	} else {
		tx->data = data;
	}
	list_add_tail(&tx->link, &tc->txq);
	tc->txq_len++;
	if (tc->connecting)
		return 0;
	/*
	 * Frames queued while the connection is read, or while a batch end
	 * answers, go together; a closing connection's CLOSE takes them at once.
	 */
	if (tc->txq_len < TCP_TX_GATHER && !tc->conn->local_close) {
		if (tc->reading)
			return 0;
		if (tc->conn->ctx->sends_held) {
			hold(tc);
			return 0;
		}
	}
	return tx_flush(tc);
}

/* Fails @tc's connection after @ret: a closing one dies of its own error, if it had one. */
static void conn_fail(struct tcp_conn *tc, int ret)
{
	struct xprt_conn *c = tc->conn;

	xprt_core_conn_failed(c, c->closing && c->error ? c->error : ret);
}

/* Writes what connections queued during a batch end (xprt_i.h, flush_held). */
static void tcp_flush_held(struct xprt_ctx *ctx)
{
	struct tcp_ctx *tx = ctx->tcp;

	while (!list_empty(&tx->held)) {
		struct tcp_conn *tc = list_first_entry(&tx->held, struct tcp_conn, held_link);
		struct xprt_conn *c = tc->conn;
		int ret;

		unhold(tc);
		if (c->state == XPRT_CONN_DEAD)
			continue;
		ret = tx_flush(tc);
		if (ret)
			conn_fail(tc, ret);
	}
}

static int tcp_send(struct xprt_conn *c, const uint8_t *hdr, const void *body, size_t len)
{
	struct tcp_conn *tc = c->backend;

	return tx_queue(tc, hdr, XPRT_HDR_SIZE, body, len, true);
}

static void encode_one_sided(uint8_t *out, uint8_t type, uint64_t id, int32_t status,
			     uint32_t body_len, const struct xprt_rdma_wire *w)
{
	struct xprt_hdr h = {
		.magic = XPRT_MAGIC,
		.version = XPRT_VERSION,
		.type = type,
		.request_id = id,
		.body_len = body_len,
		.status = status,
	};

	xprt_hdr_encode(&h, out);
	if (w)
		xprt_rdma_wire_encode(w, out + XPRT_HDR_SIZE);
}

static int tcp_rdma(struct xprt_conn *c, struct xprt_rdma_op *op)
{
	struct tcp_conn *tc = c->backend;
	struct xprt_rdma_wire w = {
		.addr = op->remote_addr, .rkey = op->rkey, .len = (uint32_t)op->len};
	uint8_t head[XPRT_HDR_SIZE + XPRT_RDMA_WIRE_SIZE];

	if (op->is_write) {
		encode_one_sided(head, XPRT_MSG_RDMA_WRITE, op->id, 0,
				 XPRT_RDMA_WIRE_SIZE + (uint32_t)op->len, &w);
		return tx_queue(tc, head, sizeof(head), op->local, op->len, false);
	}
	encode_one_sided(head, XPRT_MSG_RDMA_READ_REQ, op->id, 0, XPRT_RDMA_WIRE_SIZE, &w);
	return tx_queue(tc, head, sizeof(head), NULL, 0, false);
}

/* ---- receiving ---- */

static struct xprt_rdma_op *find_op(struct xprt_conn *c, uint64_t id)
{
	struct list_head *pos;

	list_for_each (pos, &c->rdma_posted) {
		struct xprt_rdma_op *op = list_entry(pos, struct xprt_rdma_op, link);

		if (op->id == id)
			return op;
	}
	return NULL;
}

/* Something the peer sent breaks the protocol: stop reading, tell it, let the core cut it. */
static void rx_protocol_error(struct tcp_conn *tc, int err, const char *what)
{
	struct xprt_conn *c = tc->conn;

	xprt_log(XPRT_LOG_WARN, "tcp peer %s: %s (%s)", c->peer_name, what, xprt_strerror(err));
	tc->rx_state = RX_STOPPED;
	xprt_core_protocol_error(c, err);
}

/*
 * Refuses a one-sided access as a NIC would: the initiator's op fails with
 * -EACCES and the connection dies on both sides.
 */
static void refuse_access(struct tcp_conn *tc, uint8_t reply_type, uint64_t id)
{
	uint8_t head[XPRT_HDR_SIZE];

	encode_one_sided(head, reply_type, id, -EACCES, 0, NULL);
	tx_queue(tc, head, XPRT_HDR_SIZE, NULL, 0, false);
	tc->rx_state = RX_STOPPED;
	xprt_core_protocol_error(tc->conn, -EACCES);
}

/* Handles the frame at the front of the staging buffer; returns bytes used, 0 if incomplete. */
static size_t rx_frame(struct tcp_conn *tc, const uint8_t *p, size_t avail)
{
	struct xprt_conn *c = tc->conn;
	struct xprt_rdma_wire w;
	struct xprt_rdma_op *op;
	struct xprt_mr *mr;
	struct xprt_hdr h;
	int ret;

	if (avail < XPRT_HDR_SIZE)
		return 0;
	ret = xprt_hdr_decode(p, avail, c->ctx->opts.max_msg_size, &h);
	if (ret) {
		rx_protocol_error(tc, ret, "bad frame header");
		return 0;
	}
	if (xprt_msg_uses_credit(h.type)) {
		size_t total = XPRT_HDR_SIZE + h.body_len;

		if (avail < total)
			return 0;
		xprt_core_recv(c, p, total);
		if (c->state != XPRT_CONN_DEAD && !c->closing)
			xprt_core_recv_reposted(c, 1);
		return total;
	}
	if (c->state != XPRT_CONN_READY) {
		rx_protocol_error(tc, -EACCES, "one-sided operation before HELLO");
		return 0;
	}
	switch (h.type) {
	case XPRT_MSG_RDMA_READ_REQ:
		if (avail < XPRT_HDR_SIZE + XPRT_RDMA_WIRE_SIZE)
			return 0;
		xprt_rdma_wire_decode(p + XPRT_HDR_SIZE, XPRT_RDMA_WIRE_SIZE, &w);
		mr = xprt_core_mr_by_tcp_key(c->ctx, w.rkey);
		if (h.body_len != XPRT_RDMA_WIRE_SIZE ||
		    xprt_mr_check_access(mr, w.addr, w.len, XPRT_ACCESS_REMOTE_READ)) {
			xprt_log(XPRT_LOG_WARN, "refused remote read: key %#x addr %#llx len %u",
				 w.rkey, (unsigned long long)w.addr, w.len);
			refuse_access(tc, XPRT_MSG_RDMA_READ_RESP, h.request_id);
			return 0;
		} else {
			uint8_t head[XPRT_HDR_SIZE];

			encode_one_sided(head, XPRT_MSG_RDMA_READ_RESP, h.request_id, 0, w.len,
					 NULL);
			ret = tx_queue(tc, head, XPRT_HDR_SIZE, (const void *)(uintptr_t)w.addr,
				       w.len, false);
			if (ret)
				rx_protocol_error(tc, ret, "cannot queue a read response");
		}
		return XPRT_HDR_SIZE + XPRT_RDMA_WIRE_SIZE;
	case XPRT_MSG_RDMA_WRITE:
		if (avail < XPRT_HDR_SIZE + XPRT_RDMA_WIRE_SIZE)
			return 0;
		xprt_rdma_wire_decode(p + XPRT_HDR_SIZE, XPRT_RDMA_WIRE_SIZE, &w);
		mr = xprt_core_mr_by_tcp_key(c->ctx, w.rkey);
		if ((uint64_t)h.body_len != (uint64_t)XPRT_RDMA_WIRE_SIZE + w.len ||
		    xprt_mr_check_access(mr, w.addr, w.len, XPRT_ACCESS_REMOTE_WRITE)) {
			xprt_log(XPRT_LOG_WARN, "refused remote write: key %#x addr %#llx len %u",
				 w.rkey, (unsigned long long)w.addr, w.len);
			refuse_access(tc, XPRT_MSG_RDMA_WRITE_ACK, h.request_id);
			return 0;
		}
		tc->rx_state = RX_DIRECT;
		tc->direct_dst = (uint8_t *)(uintptr_t)w.addr;
		tc->direct_len = w.len;
		tc->direct_got = 0;
		tc->direct_op = NULL;
		tc->direct_write_id = h.request_id;
		return XPRT_HDR_SIZE + XPRT_RDMA_WIRE_SIZE;
	case XPRT_MSG_RDMA_READ_RESP:
		op = find_op(c, h.request_id);
		if (!op || op->is_write || (h.status == 0 && h.body_len != op->len)) {
			rx_protocol_error(tc, -EPROTO, "read response matches no read");
			return 0;
		}
		if (h.status) {
			xprt_core_rdma_done(op, -EACCES);
			xprt_core_conn_failed(c, -EACCES);
			return 0;
		}
		tc->rx_state = RX_DIRECT;
		tc->direct_dst = op->local;
		tc->direct_len = op->len;
		tc->direct_got = 0;
		tc->direct_op = op;
		return XPRT_HDR_SIZE;
	case XPRT_MSG_RDMA_WRITE_ACK:
		op = find_op(c, h.request_id);
		if (!op || !op->is_write || h.body_len) {
			rx_protocol_error(tc, -EPROTO, "write ack matches no write");
			return 0;
		}
		if (h.status) {
			xprt_core_rdma_done(op, -EACCES);
			xprt_core_conn_failed(c, -EACCES);
			return 0;
		}
		xprt_core_rdma_done(op, 0);
		return XPRT_HDR_SIZE;
	}
	rx_protocol_error(tc, -EPROTO, "unexpected frame type");
	return 0;
}

/* Finishes a one-sided transfer whose data all arrived. */
static void rx_direct_done(struct tcp_conn *tc)
{
	uint8_t head[XPRT_HDR_SIZE];

	tc->rx_state = RX_FRAMES;
	if (tc->direct_op) {
		xprt_core_rdma_done(tc->direct_op, 0);
		tc->direct_op = NULL;
		return;
	}
	encode_one_sided(head, XPRT_MSG_RDMA_WRITE_ACK, tc->direct_write_id, 0, 0, NULL);
	if (tx_queue(tc, head, XPRT_HDR_SIZE, NULL, 0, false))
		rx_protocol_error(tc, -ENOBUFS, "cannot queue a write ack");
}

/* Moves staged bytes into the direct destination; returns bytes used. */
static size_t rx_direct_from_stage(struct tcp_conn *tc, const uint8_t *p, size_t avail)
{
	size_t n = tc->direct_len - tc->direct_got;

	if (n > avail)
		n = avail;
	memcpy(tc->direct_dst + tc->direct_got, p, n);
	tc->direct_got += n;
	if (tc->direct_got == tc->direct_len)
		rx_direct_done(tc);
	return n;
}

static void rx_preamble(struct tcp_conn *tc)
{
	struct xprt_conn_params peer;
	int ret;

	if (tc->stage_len < XPRT_PARAMS_SIZE)
		return;
	ret = xprt_params_decode(tc->stage, XPRT_PARAMS_SIZE, &peer);
	if (ret) {
		xprt_log(XPRT_LOG_WARN, "tcp peer is not an rdmafs peer of this version");
		tc->rx_state = RX_STOPPED;
		xprt_core_conn_failed(tc->conn, -EPROTO);
		return;
	}
	memmove(tc->stage, tc->stage + XPRT_PARAMS_SIZE, tc->stage_len - XPRT_PARAMS_SIZE);
	tc->stage_len -= XPRT_PARAMS_SIZE;
	tc->rx_state = RX_FRAMES;
	xprt_core_conn_established(tc->conn, &peer);
}

/* Parses everything staged; keeps a partial frame at the front. */
static void rx_parse(struct tcp_conn *tc)
{
	struct xprt_conn *c = tc->conn;
	size_t off = 0;

	if (tc->rx_state == RX_PREAMBLE)
		rx_preamble(tc);
	while (off < tc->stage_len && c->state != XPRT_CONN_DEAD) {
		size_t used;

		if (tc->rx_state == RX_DIRECT)
			used = rx_direct_from_stage(tc, tc->stage + off, tc->stage_len - off);
		else if (tc->rx_state == RX_FRAMES)
			used = rx_frame(tc, tc->stage + off, tc->stage_len - off);
		else
			break;
		if (used == 0)
			break;
		off += used;
	}
	if (off) {
		memmove(tc->stage, tc->stage + off, tc->stage_len - off);
		tc->stage_len -= off;
	}
}

/*
 * Reads what the socket holds and handles every whole frame. A short read
 * means the socket had no more: the next bytes raise another event (epoll
 * and poll are level-triggered), so no recv() is spent on EAGAIN.
 */
static int rx_read(struct tcp_conn *tc)
{
	struct xprt_conn *c = tc->conn;

	while (c->state != XPRT_CONN_DEAD && tc->rx_state != RX_STOPPED) {
		size_t want;
		ssize_t r;

		if (tc->rx_state == RX_DIRECT && tc->stage_len == 0) {
			want = tc->direct_len - tc->direct_got;
			r = recv(tc->poller.fd, tc->direct_dst + tc->direct_got, want, 0);
			if (r > 0) {
				tc->direct_got += (size_t)r;
				if (tc->direct_got == tc->direct_len)
					rx_direct_done(tc);
				if ((size_t)r < want)
					return 0;
				continue;
			}
		} else {
			if (tc->stage_len == tc->stage_size) {
				/* A frame longer than the staging buffer was already refused. */
				rx_protocol_error(tc, -EMSGSIZE, "frame does not fit");
				break;
			}
			want = tc->stage_size - tc->stage_len;
			r = recv(tc->poller.fd, tc->stage + tc->stage_len, want, 0);
			if (r > 0) {
				tc->stage_len += (size_t)r;
				rx_parse(tc);
				if ((size_t)r < want)
					return 0;
				continue;
			}
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		return -errno;
	}
	return 0;
}

static void conn_event(struct xprt_poller *p, uint32_t events)
{
	struct tcp_conn *tc = (struct tcp_conn *)p;
	struct xprt_conn *c = tc->conn;
	int ret = 0;

	if (c->state == XPRT_CONN_DEAD)
		return;
	if (tc->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
			xprt_core_conn_failed(c, err ? -err : -errno);
			return;
		}
		tc->connecting = false;
		set_events(tc, EPOLLIN);
	}
	if (events & EPOLLOUT)
		ret = tx_flush(tc);
	/* An event the progress thread took before a caller began waiting is the caller's now. */
	if (ret == 0 && !tc->conn->waiting && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		tc->reading = true;
		ret = rx_read(tc);
		tc->reading = false;
	}
	if (ret == 0 && c->state != XPRT_CONN_DEAD)
		ret = tx_flush(tc);
	if (ret && c->state != XPRT_CONN_DEAD)
		conn_fail(tc, ret);
}

/* Sets up the per-connection state on a connected (or connecting) socket. */
static int conn_setup(struct xprt_conn *c, int fd, bool connecting)
{
	struct xprt_ctx *ctx = c->ctx;
	struct xprt_conn_params ours;
	uint8_t preamble[XPRT_PARAMS_SIZE];
	struct tcp_conn *tc;
	int one = 1;
	int ret;

	tc = calloc(1, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	tc->stage_size = ctx->opts.max_msg_size + TCP_STAGING_EXTRA;
	tc->stage = malloc(tc->stage_size);
	if (!tc->stage) {
		ret = -ENOMEM;
		goto err_free;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	tc->poller.fd = fd;
	tc->poller.fn = conn_event;
	tc->conn = c;
	tc->connecting = connecting;
	tc->rx_state = RX_PREAMBLE;
	list_init(&tc->txq);
	list_init(&tc->held_link);
	tc->events = connecting ? EPOLLOUT : EPOLLIN;
	ret = xprt_core_poll_add(ctx, &tc->poller, tc->events);
	if (ret)
		goto err_stage;
	c->backend = tc;
	/* The tcp stand-in for rdma_cm private data: our parameters come first. */
	xprt_core_local_params(ctx, &ours);
	xprt_params_encode(&ours, preamble);
	ret = tx_queue(tc, preamble, sizeof(preamble), NULL, 0, false);
	if (ret) {
		c->backend = NULL;
		xprt_core_poll_del(ctx, &tc->poller);
		goto err_stage;
	}
	return 0;

err_stage:
	free(tc->stage);
err_free:
	free(tc);
	return ret;
}

static int resolve(const char *host, uint16_t port, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
	char service[8];
	int ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = getaddrinfo(strcmp(host, "*") == 0 ? NULL : host, service, &hints, res);
	if (ret) {
		xprt_log(XPRT_LOG_ERR, "cannot resolve %s: %s", host, gai_strerror(ret));
		return -EHOSTUNREACH;
	}
	return 0;
}

static int tcp_connect(struct xprt_conn *c, const char *host, uint16_t port)
{
	struct addrinfo *res;
	int fd, ret;

	ret = resolve(host, port, false, &res);
	if (ret)
		return ret;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		goto out_free;
	}
	if (connect(fd, res->ai_addr, res->ai_addrlen) && errno != EINPROGRESS) {
		ret = -errno;
		close(fd);
		goto out_free;
	}
	ret = conn_setup(c, fd, true);
	if (ret)
		close(fd);
out_free:
	freeaddrinfo(res);
	return ret;
}

/* Names the peer of @c in logs: "host:port" or "[v6 host]:port" of @ss. */
static void set_peer_addr(struct xprt_conn *c, const struct sockaddr_storage *ss, socklen_t len)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV], addr[NI_MAXHOST + NI_MAXSERV + 4];

	if (getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return;
	snprintf(addr, sizeof(addr), ss->ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
	xprt_core_set_peer_addr(c, addr);
}

static void accept_event(struct xprt_poller *p, uint32_t events)
{
	struct tcp_listener *tl = (struct tcp_listener *)p;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		struct xprt_conn *c;
		int fd = accept4(p->fd, (struct sockaddr *)&ss, &sslen,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				xprt_log(XPRT_LOG_WARN, "accept: %s", strerror(errno));
			return;
		}
		c = xprt_core_conn_new(tl->l);
		if (c)
			set_peer_addr(c, &ss, sslen);
		if (!c || conn_setup(c, fd, false)) {
			close(fd);
			if (c)
				xprt_core_conn_failed(c, -ENOMEM);
		}
	}
}

static int tcp_listen(struct xprt_listener *l, const char *host, uint16_t port)
{
	struct tcp_listener *tl;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct addrinfo *res;
	int one = 1, fd, ret;

	ret = resolve(host, port, true, &res);
	if (ret)
		return ret;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		goto err_free;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, TCP_LISTEN_BACKLOG) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sslen)) {
		ret = -errno;
		xprt_log(XPRT_LOG_ERR, "cannot listen on tcp://%s:%u: %s", host, port,
			 strerror(-ret));
		goto err_close;
	}
	tl = calloc(1, sizeof(*tl));
	if (!tl) {
		ret = -ENOMEM;
		goto err_close;
	}
	tl->poller.fd = fd;
	tl->poller.fn = accept_event;
	tl->l = l;
	ret = xprt_core_poll_add(l->ctx, &tl->poller, EPOLLIN);
	if (ret) {
		free(tl);
		goto err_close;
	}
	l->backend = tl;
	l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	freeaddrinfo(res);
	return 0;

err_close:
	close(fd);
err_free:
	freeaddrinfo(res);
	return ret;
}

static void tcp_listener_close(struct xprt_listener *l)
{
	struct tcp_listener *tl = l->backend;

	if (!tl)
		return;
	xprt_core_poll_del(l->ctx, &tl->poller);
	close(tl->poller.fd);
	free(tl);
	l->backend = NULL;
}

static void tcp_shutdown(struct xprt_conn *c)
{
	struct tcp_conn *tc = c->backend;
	struct list_head *pos, *tmp;

	/* Best effort: what the socket takes now still goes (a final ERROR or CLOSE). */
	unhold(tc);
	tx_flush(tc);
	shutdown(tc->poller.fd, SHUT_RDWR);
	xprt_core_poll_del(c->ctx, &tc->poller);
	tc->rx_state = RX_STOPPED;
	tc->direct_op = NULL;
	/* Posted ops flush, as they would from a QP in error. */
	list_for_each_safe (pos, tmp, &c->rdma_posted)
		xprt_core_rdma_done(list_entry(pos, struct xprt_rdma_op, link), -ECONNRESET);
}

/*
 * The caller's own wait and spin (xprt_i.h, tcp_wait() and tcp_spin()): the
 * progress thread stops watching the socket for input, the caller polls it,
 * sleeping up to @timeout_ms, or (@until_ns not 0) without sleeping until
 * xprt_now_ns() reaches @until_ns, handles what came as the progress thread
 * would, and gives the socket back. A reference keeps @c from being reaped
 * while the lock is down.
 */
static int wait_socket(struct xprt_conn *c, int timeout_ms, uint64_t until_ns)
{
	struct tcp_conn *tc = c->backend;
	struct pollfd pfd;
	uint32_t events = 0;
	int n;

	if (!tc || c->waiting || tc->connecting || tc->rx_state == RX_STOPPED ||
	    c->state == XPRT_CONN_DEAD)
		return -EBUSY;
	c->waiting = true;
	set_events(tc, EPOLLIN | (list_empty(&tc->txq) ? 0 : EPOLLOUT));
	pfd.fd = tc->poller.fd;
	pfd.events = POLLIN | (list_empty(&tc->txq) ? 0 : POLLOUT);
	conn_ref(c);
	pthread_mutex_unlock(&c->ctx->lock);
	if (until_ns) {
		while ((n = poll(&pfd, 1, 0)) == 0 && xprt_now_ns() < until_ns)
			sched_yield();
	} else {
		n = poll(&pfd, 1, timeout_ms);
	}
	pthread_mutex_lock(&c->ctx->lock);
	conn_unref(c);
	c->waiting = false;
	if (c->state == XPRT_CONN_DEAD || tc->rx_state == RX_STOPPED)
		return n > 0;
	if (n > 0) {
		events |= (pfd.revents & POLLIN) ? EPOLLIN : 0;
		events |= (pfd.revents & POLLOUT) ? EPOLLOUT : 0;
		events |= (pfd.revents & POLLERR) ? EPOLLERR : 0;
		events |= (pfd.revents & POLLHUP) ? EPOLLHUP : 0;
		conn_event(&tc->poller, events);
		xprt_core_batch_end(c->ctx);
	}
	if (c->state != XPRT_CONN_DEAD && tc->rx_state != RX_STOPPED)
		set_events(tc, EPOLLIN | (list_empty(&tc->txq) ? 0 : EPOLLOUT));
	return n > 0;
}

static int tcp_wait(struct xprt_conn *c, int timeout_ms)
{
	return wait_socket(c, timeout_ms, 0);
}

static int tcp_spin(struct xprt_conn *c, uint64_t until_ns, const bool *done)
{
	(void)done; /* the caller looks at it after each batch of the socket's events */
	return wait_socket(c, 0, until_ns);
}

static bool tcp_sends_pending(const struct xprt_conn *c)
{
	const struct tcp_conn *tc = c->backend;

	return tc && !list_empty(&tc->txq);
}

static void tcp_conn_destroy(struct xprt_conn *c)
{
	struct tcp_conn *tc = c->backend;
	struct list_head *pos, *tmp;

	if (!tc)
		return;
	unhold(tc);
	list_for_each_safe (pos, tmp, &tc->txq)
		free(list_entry(pos, struct tcp_tx, link));
	close(tc->poller.fd);
	free(tc->stage);
	free(tc);
	c->backend = NULL;
}

static int tcp_mr_register(struct xprt_ctx *ctx, struct xprt_mr *mr)
{
	return 0;
}

static void tcp_mr_deregister(struct xprt_ctx *ctx, struct xprt_mr *mr)
{
}

static uint32_t tcp_mr_rkey(struct xprt_conn *c, struct xprt_mr *mr)
{
	return mr->tcp_key;
}

const struct xprt_backend_ops xprt_tcp_ops = {
	.name = "tcp",
	.kind = XPRT_KIND_TCP,
	.ctx_init = tcp_ctx_init,
	.ctx_fini = tcp_ctx_fini,
	.listen = tcp_listen,
	.listener_close = tcp_listener_close,
	.connect = tcp_connect,
	.send = tcp_send,
	.flush_held = tcp_flush_held,
	.wait = tcp_wait,
	.spin = tcp_spin,
	.rdma = tcp_rdma,
	.shutdown = tcp_shutdown,
	.sends_pending = tcp_sends_pending,
	.conn_destroy = tcp_conn_destroy,
	.mr_register = tcp_mr_register,
	.mr_deregister = tcp_mr_deregister,
	.mr_rkey = tcp_mr_rkey,
};
