/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verbs backend: rdma_cm (librdmacm) sets connections up, libibverbs RC
 * queue pairs carry them.
 *
 * One rdma_cm event channel per context carries the events of every listener
 * and connection; an id's context pointer says which (struct verbs_endpoint).
 * Each connection owns one CQ with its own completion channel, one registered
 * region of receive buffers (all posted before the connection is accepted or
 * connected) and one registered ring of send slots. The send queue is sized
 * for all send slots plus all one-sided slots, the CQ for that plus every
 * receive, so neither can overflow.
 *
 * One-sided WRs are always signalled. A SEND is signalled only every
 * signal_every-th (and a closing connection's): an RC send queue completes
 * in order, so any send-queue completion means every WR posted before it is
 * done too, and gives back the slots of the unsignalled SENDs before it
 * (verbs_send_reclaim()). A request then costs its sender no completion, and
 * a caller sleeping on the CQ mostly wakes once, for the answer.
 *
 * At most signal_every - 1 posted SENDs follow the last signalled WR. Those
 * may be done yet keep their slots, so a connection has that many slots more
 * than the peer's credits plus VERBS_CONTROL_SLOTS: the credits alone, never
 * the slots, bound the messages in flight. When every slot is taken, a
 * signalled WR with taken slots before it is still in flight, and its
 * completion frees them; SENDs held for a batch end (verbs_post_held()) may
 * take them all, but are posted when it returns, and at least one of them is
 * then signalled.
 *
 * wc.opcode is undefined on error completions, so a WR's wr_id names what it
 * was: the kind in the low bits, a buffer or slot index above. One-sided ops
 * are found through a slot table, never through a raw pointer in wr_id, so a
 * completion that arrives after its op was given back to the core (see
 * verbs_conn_destroy()) is harmless.
 *
 * Everything here runs with ctx->lock held: ops are called with it and the
 * pollers run with it, on the progress thread or, for a connection's CQ, on
 * a caller waiting for its answer (verbs_wait(), which drops the lock only
 * while it sleeps, and verbs_spin(), between polls).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "xprt_i.h"

/* Address and route resolution give up after this long (rdma_cm's own timer). */
#define VERBS_RESOLVE_TIMEOUT_MS 2000
#define VERBS_LISTEN_BACKLOG	 128
/*
 * Local ACK timeout 4.096 us * 2^14 = 67 ms and 7 retries: a dead peer gives
 * IBV_WC_RETRY_EXC_ERR after about 0.5 s (DESIGN, "Verbs details that bite").
 */
#define VERBS_ACK_TIMEOUT 14
#define VERBS_RETRY_COUNT 7
/* No RNR retries: a receiver without a posted buffer is a credit bug; show it. */
#define VERBS_RNR_RETRY_COUNT 0
/* Send slots beyond the peer's credits, for CREDIT, PING/PONG, CLOSE and ERROR. */
#define VERBS_CONTROL_SLOTS 4
/* One-sided slots when the options leave max_rdma_inflight at 0. */
#define VERBS_DEFAULT_RDMA_SLOTS 16
/* Of the credits plus control slots, every this many-th SEND is signalled (see the top). */
#define VERBS_SIGNAL_DIVISOR 4
/* Inline data we ask for; the provider may grant less (queried after creation). */
#define VERBS_INLINE_WANTED 256
/* Work completions taken per ibv_poll_cq() call. */
#define VERBS_POLL_BATCH 16
/* progress() takes at most this many completions per connection per call. */
#define VERBS_PROGRESS_BUDGET 64
/* CQ events are acknowledged in batches: the ack takes a lock in libibverbs. */
#define VERBS_CQ_ACK_BATCH 64
/* conn_destroy() waits this long for the flush of the send queue. */
#define VERBS_DRAIN_TIMEOUT_MS 1000
#define VERBS_DRAIN_SLEEP_NS   1000000L
/*
 * A flush we did not cause means the NIC put our QP in ERR, usually because
 * the peer broke a rule at our side (a bad rkey): the peer learns it from its
 * own completion and disconnects. We wait that long for its DISCONNECTED, so
 * the peer's side of the story (its op failing with -EACCES) comes first, as
 * on tcp; then the connection dies anyway.
 */
#define VERBS_PEER_ERROR_GRACE_MS 1000
/* Buffers are page aligned: cheaper to pin, and O_DIRECT-friendly. */
#define VERBS_BUF_ALIGN 4096
/* rdma_cm private data we copy out of an event (ours are 16 and 8 bytes). */
#define VERBS_PRIVATE_DATA_COPY 64
/* Reject private data: magic, then the negated errno saying why. */
#define VERBS_REJECT_DATA_SIZE 8
/* Errno values a peer may send us in a reject (anything else: ECONNREFUSED). */
#define VERBS_ERRNO_MAX 4095
/* Room for "[host]:port" and a terminator. */
#define VERBS_PEER_NAME_SIZE (NI_MAXHOST + NI_MAXSERV + 4)

/* What a work request was, in the low bits of its wr_id. */
enum verbs_wr_kind {
	VERBS_WR_RECV = 1,
	VERBS_WR_SEND = 2,
	VERBS_WR_RDMA = 3,
};

#define VERBS_WR_KIND_BITS 8
#define VERBS_WR_KIND_MASK ((1u << VERBS_WR_KIND_BITS) - 1)

static inline uint64_t verbs_wr_id(enum verbs_wr_kind kind, uint32_t idx)
{
	return ((uint64_t)idx << VERBS_WR_KIND_BITS) | kind;
}

/* The slot index verbs_wr_id() put in @wr_id. */
static inline uint32_t verbs_wr_slot(uint64_t wr_id)
{
	return (uint32_t)(wr_id >> VERBS_WR_KIND_BITS);
}

struct verbs_dev {
	struct ibv_context *verbs; /* owned by librdmacm */
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct xprt_poller async_poller; /* the device's async events */
	bool async_polled;
};

struct verbs_ctx {
	struct xprt_ctx *ctx;
	struct ibv_context **contexts; /* rdma_get_devices(); freed at fini */
	struct verbs_dev *devs;
	int ndevs;
	struct rdma_event_channel *channel;
	struct xprt_poller cm_poller;
	struct list_head conns; /* struct verbs_conn */
	struct list_head held;	/* connections with SENDs held for a batch end's return */
};

/* What an rdma_cm_id's context points at. */
enum verbs_endpoint_kind {
	VERBS_EP_LISTENER = 1,
	VERBS_EP_CONN,
};

struct verbs_endpoint {
	enum verbs_endpoint_kind kind;
};

struct verbs_listener {
	struct verbs_endpoint ep;
	struct xprt_listener *l;
	struct rdma_cm_id *id;
};

/* A one-sided slot: busy from post to completion; op is NULL once given back. */
struct verbs_rdma_slot {
	struct xprt_rdma_op *op;
	bool is_read;
	uint64_t send_mark; /* SENDs posted before it (verbs_conn.send_post_seq) */
};

struct verbs_conn {
	struct verbs_endpoint ep;
	struct list_head link; /* verbs_ctx.conns */
	struct xprt_conn *c;
	struct verbs_ctx *vctx;
	struct rdma_cm_id *id;
	int dev; /* index in vctx->devs; -1 until the address is known */
	char peer[VERBS_PEER_NAME_SIZE];
	struct xprt_conn_params peer_params;

	struct ibv_comp_channel *comp_channel;
	struct xprt_poller cq_poller;
	bool cq_polled; /* cq_poller is in the epoll set */
	unsigned int cq_events_unacked;
	struct ibv_cq *cq;
	struct ibv_qp *qp; /* id->qp, kept to know whether we created it */
	uint32_t max_inline;
	uint32_t max_reads;    /* the QP's max_rd_atomic */
	uint32_t sq_signalled; /* signalled WRs on the send queue: each will complete */

	uint32_t buf_size;

	uint32_t recv_count;
	uint8_t *recv_bufs;
	struct ibv_mr *recv_mr;
	uint32_t recv_posted;
	uint32_t *recv_len; /* byte_len of receives held until ESTABLISHED */
	uint32_t *early;    /* FIFO of those receives */
	uint32_t early_head, early_count;

	uint32_t send_slots;
	uint8_t *send_bufs;
	struct ibv_mr *send_mr;
	/*
	 * SENDs are numbered from 0 as they take their slots, the one numbered n
	 * taking slot n % send_slots: they are taken, posted (held ones in the
	 * order they were made) and given back in that order. Those below
	 * send_taken_seq took a slot, below send_post_seq were posted, below
	 * send_done_seq are back; send_signalled[slot] says what
	 * verbs_send_posting() made of a posted one.
	 */
	uint64_t send_taken_seq, send_post_seq, send_done_seq;
	bool *send_signalled;
	uint32_t send_unsignalled_run; /* SENDs posted unsignalled since the last signalled WR */
	uint32_t signal_every;	       /* see the top */
	bool send_blocked;	       /* send() said -EAGAIN: call xprt_core_send_space() */
	/*
	 * SENDs made during a batch end (ctx->sends_held), chained in order and
	 * posted together when it returns (verbs_post_held()); send_slots each.
	 */
	struct ibv_send_wr *held_wr;
	struct ibv_sge *held_sge;
	uint32_t held_count;
	struct list_head held_link; /* verbs_ctx.held, while held_count */

	uint32_t rdma_slots;
	struct verbs_rdma_slot *rdma;
	uint32_t *rdma_free;
	uint32_t rdma_free_count;
	uint32_t reads_inflight;

	uint64_t flush_deadline_ns; /* see VERBS_PEER_ERROR_GRACE_MS; 0: none */
	int peer_error;		    /* what an async event said the peer did wrong */

	bool established;
	bool qp_error; /* the QP is (or is going) to ERR: post nothing */
	bool failed;   /* xprt_core_conn_failed() was called */
	bool shut;     /* shutdown() ran */
	int in_poll;   /* nesting depth of verbs_conn_poll() */
};

/* A copy of an rdma_cm event, taken so the event can be acked at once. */
struct verbs_cm_event {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t private_data[VERBS_PRIVATE_DATA_COPY];
	size_t private_data_len;
};

static inline struct verbs_conn *verbs_conn_of(struct verbs_endpoint *ep)
{
	return (struct verbs_conn *)((char *)ep - offsetof(struct verbs_conn, ep));
}

static inline struct verbs_listener *verbs_listener_of(struct verbs_endpoint *ep)
{
	return (struct verbs_listener *)((char *)ep - offsetof(struct verbs_listener, ep));
}

static inline struct verbs_dev *verbs_conn_dev(const struct verbs_conn *vc)
{
	return &vc->vctx->devs[vc->dev];
}

static inline uint32_t verbs_min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/*
 * ibv_reg_mr() and ibv_create_cq() fail with ENOMEM when the locked-memory
 * limit is too low; "ENOMEM" alone sends people hunting for a leak.
 */
static void verbs_log_nomem(const char *what, const char *detail)
{
	struct rlimit rl;
	char limit[64];

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		snprintf(limit, sizeof(limit), "unknown");
	else if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(limit, sizeof(limit), "unlimited");
	else
		snprintf(limit, sizeof(limit), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);

	xprt_log(XPRT_LOG_ERR,
		 "verbs: %s (%s) failed: out of lockable memory. RDMA pins its buffers and the "
		 "locked-memory limit (RLIMIT_MEMLOCK, `ulimit -l`) is %s: raise it "
		 "(LimitMEMLOCK=infinity in the systemd unit, `ulimit -l unlimited` in a shell, "
		 "or memlock in /etc/security/limits.conf)",
		 what, detail, limit);
}

static void verbs_log_peer_addr(struct rdma_cm_id *id, char *out, size_t size)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	socklen_t len = sa && sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							: sizeof(struct sockaddr_in);

	if (!sa || getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
			       NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(out, size, "?");
		return;
	}
	if (sa->sa_family == AF_INET6)
		snprintf(out, size, "[%s]:%s", host, serv);
	else
		snprintf(out, size, "%s:%s", host, serv);
}

static int verbs_dev_index(const struct verbs_ctx *vctx, const struct ibv_context *verbs)
{
	for (int i = 0; i < vctx->ndevs; i++)
		if (vctx->devs[i].verbs == verbs)
			return i;
	return -1;
}

static struct ibv_mr *verbs_mr_of(const struct xprt_mr *mr, int dev)
{
	struct ibv_mr **mrs = mr->backend_data;

	if (!mrs || dev < 0)
		return NULL;
	return mrs[dev];
}

static int verbs_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Marks @vc dead in the core, once: later errors are consequences of the first. */
static void verbs_conn_fail(struct verbs_conn *vc, int err)
{
	if (vc->failed || vc->shut || vc->c->state == XPRT_CONN_DEAD) {
		vc->failed = true;
		return;
	}
	vc->failed = true;
	xprt_core_conn_failed(vc->c, err);
}

/* ---- context ---------------------------------------------------------------------- */

static void verbs_cm_poll(struct xprt_poller *p, uint32_t events);
static void verbs_async_poll(struct xprt_poller *p, uint32_t events);

static void verbs_devs_free(struct verbs_ctx *vctx)
{
	for (int i = 0; i < vctx->ndevs; i++) {
		int ret;

		if (vctx->devs[i].async_polled)
			xprt_core_poll_del(vctx->ctx, &vctx->devs[i].async_poller);
		ret = ibv_dealloc_pd(vctx->devs[i].pd);

		if (ret)
			xprt_log(XPRT_LOG_WARN, "verbs: ibv_dealloc_pd(%s): %s (still in use)",
				 ibv_get_device_name(vctx->devs[i].verbs->device), strerror(ret));
	}
	free(vctx->devs);
	vctx->devs = NULL;
	vctx->ndevs = 0;
}

/*
 * Finds the RDMA devices, allocates a PD on each and opens the rdma_cm event
 * channel. -ENODEV when there is no usable device or no rdma_cm (the tcp
 * backend still works), -ENOMEM, or an errno from epoll.
 */
static int verbs_ctx_init(struct xprt_ctx *ctx)
{
	struct verbs_ctx *vctx;
	int n = 0, err;

	vctx = calloc(1, sizeof(*vctx));
	if (!vctx)
		return -ENOMEM;
	vctx->ctx = ctx;
	list_init(&vctx->conns);
	list_init(&vctx->held);

	vctx->contexts = rdma_get_devices(&n);
	if (!vctx->contexts || n <= 0) {
		xprt_log(XPRT_LOG_INFO, "verbs: no RDMA device found; the verbs backend is off");
		err = -ENODEV;
		goto err_free_devices;
	}

	vctx->devs = calloc((size_t)n, sizeof(*vctx->devs));
	if (!vctx->devs) {
		err = -ENOMEM;
		goto err_free_devices;
	}
	for (int i = 0; i < n; i++) {
		struct verbs_dev *d = &vctx->devs[vctx->ndevs];
		const char *name = ibv_get_device_name(vctx->contexts[i]->device);

		d->verbs = vctx->contexts[i];
		err = ibv_query_device(d->verbs, &d->attr);
		if (err) {
			xprt_log(XPRT_LOG_WARN, "verbs: ibv_query_device(%s): %s; device skipped",
				 name, strerror(err));
			continue;
		}
		d->pd = ibv_alloc_pd(d->verbs);
		if (!d->pd) {
			xprt_log(XPRT_LOG_WARN, "verbs: ibv_alloc_pd(%s): %s; device skipped", name,
				 strerror(errno));
			continue;
		}
		vctx->ndevs++;
	}
	if (!vctx->ndevs) {
		err = -ENODEV;
		goto err_free_devs;
	}

	vctx->channel = rdma_create_event_channel();
	if (!vctx->channel) {
		xprt_log(XPRT_LOG_WARN,
			 "verbs: rdma_create_event_channel: %s (is rdma_ucm loaded?); "
			 "the verbs backend is off",
			 strerror(errno));
		err = -ENODEV;
		goto err_free_devs;
	}
	err = verbs_set_nonblock(vctx->channel->fd);
	if (err)
		goto err_destroy_channel;

	vctx->cm_poller.fd = vctx->channel->fd;
	vctx->cm_poller.fn = verbs_cm_poll;
	err = xprt_core_poll_add(ctx, &vctx->cm_poller, EPOLLIN);
	if (err)
		goto err_destroy_channel;

	/* Async events name what killed a QP; without them we only see flushes. */
	for (int i = 0; i < vctx->ndevs; i++) {
		struct verbs_dev *d = &vctx->devs[i];

		d->async_poller.fd = d->verbs->async_fd;
		d->async_poller.fn = verbs_async_poll;
		if (verbs_set_nonblock(d->verbs->async_fd) == 0 &&
		    xprt_core_poll_add(ctx, &d->async_poller, EPOLLIN) == 0)
			d->async_polled = true;
		else
			xprt_log(XPRT_LOG_WARN, "verbs: %s: async events not watched",
				 ibv_get_device_name(d->verbs->device));
	}

	ctx->verbs = vctx;
	return 0;

err_destroy_channel:
	rdma_destroy_event_channel(vctx->channel);
err_free_devs:
	verbs_devs_free(vctx);
err_free_devices:
	if (vctx->contexts)
		rdma_free_devices(vctx->contexts);
	free(vctx);
	return err;
}

static void verbs_ctx_fini(struct xprt_ctx *ctx)
{
	struct verbs_ctx *vctx = ctx->verbs;

	if (!vctx)
		return;
	if (!list_empty(&vctx->conns))
		xprt_log(XPRT_LOG_WARN, "verbs: context closed with connections left");
	xprt_core_poll_del(ctx, &vctx->cm_poller);
	rdma_destroy_event_channel(vctx->channel);
	verbs_devs_free(vctx);
	rdma_free_devices(vctx->contexts);
	free(vctx);
	ctx->verbs = NULL;
}

/* ---- memory ------------------------------------------------------------------------ */

static int verbs_mr_access(unsigned int access)
{
	int flags = IBV_ACCESS_LOCAL_WRITE;

	if (access & XPRT_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & XPRT_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	return flags;
}

/* Registers @mr with the PD of every device: mr->backend_data is an ibv_mr array. */
static int verbs_mr_register(struct xprt_ctx *ctx, struct xprt_mr *mr)
{
	struct verbs_ctx *vctx = ctx->verbs;
	struct ibv_mr **mrs;
	int i, err;

	mrs = calloc((size_t)vctx->ndevs, sizeof(*mrs));
	if (!mrs)
		return -ENOMEM;

	for (i = 0; i < vctx->ndevs; i++) {
		mrs[i] = ibv_reg_mr(vctx->devs[i].pd, mr->addr, mr->len,
				    verbs_mr_access(mr->access));
		if (!mrs[i]) {
			char detail[96];

			err = errno ? -errno : -ENOMEM;
			snprintf(detail, sizeof(detail), "%zu bytes on %s", mr->len,
				 ibv_get_device_name(vctx->devs[i].verbs->device));
			if (err == -ENOMEM || err == -EAGAIN)
				verbs_log_nomem("ibv_reg_mr", detail);
			else
				xprt_log(XPRT_LOG_ERR, "verbs: ibv_reg_mr(%s): %s", detail,
					 strerror(-err));
			goto err_dereg;
		}
	}
	mr->backend_data = mrs;
	return 0;

err_dereg:
	while (i-- > 0)
		ibv_dereg_mr(mrs[i]);
	free(mrs);
	return err;
}

static void verbs_mr_deregister(struct xprt_ctx *ctx, struct xprt_mr *mr)
{
	struct verbs_ctx *vctx = ctx->verbs;
	struct ibv_mr **mrs = mr->backend_data;

	if (!mrs)
		return;
	for (int i = 0; i < vctx->ndevs; i++) {
		int ret = ibv_dereg_mr(mrs[i]);

		if (ret)
			xprt_log(XPRT_LOG_WARN, "verbs: ibv_dereg_mr: %s", strerror(ret));
	}
	free(mrs);
	mr->backend_data = NULL;
}

static uint32_t verbs_mr_rkey(struct xprt_conn *c, struct xprt_mr *mr)
{
	struct verbs_conn *vc = c->backend;
	struct ibv_mr *ib_mr;

	if (!vc)
		return 0;
	ib_mr = verbs_mr_of(mr, vc->dev);
	return ib_mr ? ib_mr->rkey : 0;
}

/* ---- connection resources --------------------------------------------------------- */

static uint8_t *verbs_recv_buf(const struct verbs_conn *vc, uint32_t idx)
{
	return vc->recv_bufs + (size_t)idx * vc->buf_size;
}

static uint8_t *verbs_send_buf(const struct verbs_conn *vc, uint32_t idx)
{
	return vc->send_bufs + (size_t)idx * vc->buf_size;
}

static int verbs_post_recv(struct verbs_conn *vc, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)verbs_recv_buf(vc, idx),
		.length = vc->buf_size,
		.lkey = vc->recv_mr->lkey,
	};
	struct ibv_recv_wr wr =
				   {
					   .wr_id = verbs_wr_id(VERBS_WR_RECV, idx),
					   .sg_list = &sge,
					   .num_sge = 1,
				   },
			   *bad;
	int ret;

	if (vc->qp_error)
		return -ENOTCONN;
	ret = ibv_post_recv(vc->qp, &wr, &bad);
	if (ret) {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_post_recv: %s", vc->peer, strerror(ret));
		return -ret;
	}
	vc->recv_posted++;
	return 0;
}

/* Allocates and registers a region of @count buffers of vc->buf_size bytes. */
static int verbs_buffers_alloc(struct verbs_conn *vc, uint32_t count, int access, uint8_t **bufs,
			       struct ibv_mr **mr, const char *what)
{
	size_t len = (size_t)count * vc->buf_size;
	void *mem;
	int err;

	err = posix_memalign(&mem, VERBS_BUF_ALIGN, len);
	if (err)
		return -err;
	*mr = ibv_reg_mr(verbs_conn_dev(vc)->pd, mem, len, access);
	if (!*mr) {
		char detail[VERBS_PEER_NAME_SIZE + 64];

		err = errno ? -errno : -ENOMEM;
		snprintf(detail, sizeof(detail), "%zu bytes of %s buffers for %s", len, what,
			 vc->peer);
		if (err == -ENOMEM || err == -EAGAIN)
			verbs_log_nomem("ibv_reg_mr", detail);
		else
			xprt_log(XPRT_LOG_ERR, "verbs: ibv_reg_mr(%s): %s", detail, strerror(-err));
		free(mem);
		return err;
	}
	*bufs = mem;
	return 0;
}

/* Creates the QP, asking for inline data and falling back to none. */
static int verbs_qp_create(struct verbs_conn *vc, uint32_t sq_depth)
{
	struct ibv_qp_init_attr init = {
		.send_cq = vc->cq,
		.recv_cq = vc->cq,
		.cap =
			{
				.max_send_wr = sq_depth,
				.max_recv_wr = vc->recv_count,
				.max_send_sge = 1,
				.max_recv_sge = 1,
				.max_inline_data = VERBS_INLINE_WANTED,
			},
		.qp_context = vc, /* for async events */
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr queried;
	int err;

	if (rdma_create_qp(vc->id, verbs_conn_dev(vc)->pd, &init)) {
		init.cap.max_inline_data = 0;
		if (rdma_create_qp(vc->id, verbs_conn_dev(vc)->pd, &init)) {
			err = -errno;
			if (err == -ENOMEM)
				verbs_log_nomem("rdma_create_qp", vc->peer);
			else
				xprt_log(XPRT_LOG_ERR, "verbs: %s: rdma_create_qp: %s", vc->peer,
					 strerror(-err));
			return err;
		}
	}
	vc->qp = vc->id->qp;

	/* What the provider really granted; some report it only through a query. */
	vc->max_inline = init.cap.max_inline_data;
	if (ibv_query_qp(vc->qp, &attr, IBV_QP_CAP, &queried) == 0)
		vc->max_inline = verbs_min_u32(vc->max_inline, attr.cap.max_inline_data);
	return 0;
}

/*
 * Creates what a connection needs once its device is known: completion
 * channel, CQ, QP, receive buffers (all posted), send slots, one-sided slots.
 * On error whatever was made stays in @vc for verbs_conn_release().
 */
static int verbs_conn_setup(struct verbs_conn *vc)
{
	struct verbs_ctx *vctx = vc->vctx;
	struct xprt_ctx *ctx = vctx->ctx;
	const struct ibv_device_attr *attr;
	uint32_t sq_depth, cqe, i;
	int err;

	vc->dev = verbs_dev_index(vctx, vc->id->verbs);
	if (vc->dev < 0) {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: the route uses a device unknown at startup",
			 vc->peer);
		return -ENODEV;
	}
	attr = &verbs_conn_dev(vc)->attr;

	vc->buf_size = ctx->opts.max_msg_size;
	vc->recv_count = ctx->opts.recv_credits;
	vc->send_slots = ctx->opts.recv_credits + VERBS_CONTROL_SLOTS;
	vc->signal_every =
		vc->send_slots / VERBS_SIGNAL_DIVISOR ? vc->send_slots / VERBS_SIGNAL_DIVISOR : 1;
	vc->send_slots += vc->signal_every - 1; /* those a signalled WR's completion frees late */
	vc->rdma_slots = ctx->opts.max_rdma_inflight ? ctx->opts.max_rdma_inflight
						     : VERBS_DEFAULT_RDMA_SLOTS;
	sq_depth = vc->send_slots + vc->rdma_slots;
	cqe = sq_depth + vc->recv_count;
	if (!vc->buf_size || !vc->recv_count || sq_depth > (uint32_t)attr->max_qp_wr ||
	    vc->recv_count > (uint32_t)attr->max_qp_wr || cqe > (uint32_t)attr->max_cqe) {
		xprt_log(XPRT_LOG_ERR,
			 "verbs: %s: %u receives, %u sends and %u one-sided ops per connection "
			 "exceed the device (max_qp_wr %d, max_cqe %d)",
			 vc->peer, vc->recv_count, vc->send_slots, vc->rdma_slots, attr->max_qp_wr,
			 attr->max_cqe);
		return -EINVAL;
	}

	vc->comp_channel = ibv_create_comp_channel(vc->id->verbs);
	if (!vc->comp_channel) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_create_comp_channel: %s", vc->peer,
			 strerror(-err));
		return err;
	}
	err = verbs_set_nonblock(vc->comp_channel->fd);
	if (err)
		return err;
	vc->cq_poller.fd = vc->comp_channel->fd;

	vc->cq = ibv_create_cq(vc->id->verbs, (int)cqe, vc, vc->comp_channel, 0);
	if (!vc->cq) {
		err = -errno;
		if (err == -ENOMEM)
			verbs_log_nomem("ibv_create_cq", vc->peer);
		else
			xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_create_cq(%u): %s", vc->peer, cqe,
				 strerror(-err));
		return err;
	}
	err = ibv_req_notify_cq(vc->cq, 0);
	if (err) {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_req_notify_cq: %s", vc->peer, strerror(err));
		return -err;
	}
	err = xprt_core_poll_add(ctx, &vc->cq_poller, EPOLLIN);
	if (err)
		return err;
	vc->cq_polled = true;

	err = verbs_qp_create(vc, sq_depth);
	if (err)
		return err;

	vc->recv_len = calloc(vc->recv_count, sizeof(*vc->recv_len));
	vc->early = calloc(vc->recv_count, sizeof(*vc->early));
	vc->send_signalled = calloc(vc->send_slots, sizeof(*vc->send_signalled));
	vc->held_wr = calloc(vc->send_slots, sizeof(*vc->held_wr));
	vc->held_sge = calloc(vc->send_slots, sizeof(*vc->held_sge));
	vc->rdma = calloc(vc->rdma_slots, sizeof(*vc->rdma));
	vc->rdma_free = calloc(vc->rdma_slots, sizeof(*vc->rdma_free));
	if (!vc->recv_len || !vc->early || !vc->send_signalled || !vc->held_wr || !vc->held_sge ||
	    !vc->rdma || !vc->rdma_free)
		return -ENOMEM;

	err = verbs_buffers_alloc(vc, vc->recv_count, IBV_ACCESS_LOCAL_WRITE, &vc->recv_bufs,
				  &vc->recv_mr, "receive");
	if (err)
		return err;
	/* Send sources are only read by the NIC. */
	err = verbs_buffers_alloc(vc, vc->send_slots, 0, &vc->send_bufs, &vc->send_mr, "send");
	if (err)
		return err;

	/* Popped from the top: slot 0 first, for readable traces. */
	for (i = 0; i < vc->rdma_slots; i++)
		vc->rdma_free[i] = vc->rdma_slots - 1 - i;
	vc->rdma_free_count = vc->rdma_slots;

	/* Every receive is posted before the connection can carry a message. */
	for (i = 0; i < vc->recv_count; i++) {
		err = verbs_post_recv(vc, i);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Frees every resource of @vc in reverse order of creation. The QP goes
 * first: once it is destroyed the NIC touches none of the buffers.
 */
static void verbs_conn_release(struct verbs_conn *vc)
{
	struct xprt_ctx *ctx = vc->vctx->ctx;
	int ret;

	if (vc->qp) {
		rdma_destroy_qp(vc->id);
		vc->qp = NULL;
	}
	if (vc->send_mr)
		ibv_dereg_mr(vc->send_mr);
	free(vc->send_bufs);
	if (vc->recv_mr)
		ibv_dereg_mr(vc->recv_mr);
	free(vc->recv_bufs);
	free(vc->rdma_free);
	free(vc->rdma);
	free(vc->send_signalled);
	free(vc->held_sge);
	free(vc->held_wr);
	free(vc->early);
	free(vc->recv_len);
	vc->send_mr = vc->recv_mr = NULL;
	vc->send_bufs = vc->recv_bufs = NULL;

	if (vc->cq_polled) {
		xprt_core_poll_del(ctx, &vc->cq_poller);
		vc->cq_polled = false;
	}
	if (vc->cq) {
		/* ibv_destroy_cq() waits for every CQ event to be acked. */
		if (vc->cq_events_unacked)
			ibv_ack_cq_events(vc->cq, vc->cq_events_unacked);
		vc->cq_events_unacked = 0;
		ret = ibv_destroy_cq(vc->cq);
		if (ret)
			xprt_log(XPRT_LOG_WARN, "verbs: %s: ibv_destroy_cq: %s", vc->peer,
				 strerror(ret));
		vc->cq = NULL;
	}
	if (vc->comp_channel) {
		ibv_destroy_comp_channel(vc->comp_channel);
		vc->comp_channel = NULL;
	}
	if (vc->id) {
		rdma_destroy_id(vc->id);
		vc->id = NULL;
	}
}

static void verbs_cq_poll(struct xprt_poller *p, uint32_t events);

static struct verbs_conn *verbs_conn_alloc(struct verbs_ctx *vctx, struct xprt_conn *c)
{
	struct verbs_conn *vc = calloc(1, sizeof(*vc));

	if (!vc)
		return NULL;
	vc->ep.kind = VERBS_EP_CONN;
	vc->c = c;
	vc->vctx = vctx;
	vc->dev = -1;
	vc->cq_poller.fd = -1;
	vc->cq_poller.fn = verbs_cq_poll;
	list_add_tail(&vc->link, &vctx->conns);
	return vc;
}

static void verbs_conn_free(struct verbs_conn *vc)
{
	if (vc->held_count) {
		vc->held_count = 0;
		list_del(&vc->held_link);
	}
	verbs_conn_release(vc);
	list_del(&vc->link);
	free(vc);
}

/* ---- completions ------------------------------------------------------------------ */

/* The errno a failed work completion stands for (the connection dies with it). */
static int verbs_wc_errno(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -EPROTO;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	case IBV_WC_LOC_LEN_ERR:
		return -EMSGSIZE;
	default:
		return -EIO;
	}
}

static const char *verbs_wr_kind_name(unsigned int kind)
{
	switch (kind) {
	case VERBS_WR_RECV:
		return "receive";
	case VERBS_WR_SEND:
		return "send";
	case VERBS_WR_RDMA:
		return "one-sided";
	default:
		return "unknown";
	}
}

/*
 * A receive that failed because the message did not fit: LOC_LEN_ERR by the
 * spec; soft-RoCE (rdma_rxe) reports LOC_QP_OP_ERR instead, and a receive
 * WR has nothing else that could fail that way.
 */
static bool verbs_wc_too_long(const struct ibv_wc *wc, unsigned int kind)
{
	return kind == VERBS_WR_RECV &&
	       (wc->status == IBV_WC_LOC_LEN_ERR || wc->status == IBV_WC_LOC_QP_OP_ERR);
}

/* Logs a failed completion (flushes quietly: they follow the real error). */
static int verbs_wc_error(struct verbs_conn *vc, const struct ibv_wc *wc, unsigned int kind)
{
	int err = verbs_wc_errno(wc->status);

	vc->qp_error = true;
	if (wc->status == IBV_WC_WR_FLUSH_ERR || vc->failed || vc->shut) {
		xprt_log(XPRT_LOG_DEBUG, "verbs: %s: %s WR flushed: %s", vc->peer,
			 verbs_wr_kind_name(kind), ibv_wc_status_str(wc->status));
	} else if (verbs_wc_too_long(wc, kind)) {
		xprt_log(XPRT_LOG_ERR,
			 "verbs: %s: the peer sent a message longer than our receive buffers "
			 "(%u bytes): %s; closing the connection",
			 vc->peer, vc->buf_size, ibv_wc_status_str(wc->status));
		err = -EMSGSIZE;
	} else if (wc->status == IBV_WC_RNR_RETRY_EXC_ERR) {
		xprt_log(XPRT_LOG_ERR,
			 "verbs: %s: the peer had no receive buffer posted (credit accounting "
			 "bug); closing the connection",
			 vc->peer);
	} else {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: %s WR failed: %s (vendor error 0x%x)", vc->peer,
			 verbs_wr_kind_name(kind), ibv_wc_status_str(wc->status), wc->vendor_err);
	}
	return err;
}

/*
 * An error completion kills the connection, except a flush nobody asked for:
 * then the peer caused it and we give it VERBS_PEER_ERROR_GRACE_MS to say so
 * (see there). Until then posting answers -EAGAIN.
 */
static void verbs_conn_wc_fail(struct verbs_conn *vc, int err)
{
	if (err == -ECONNRESET && !vc->failed && !vc->shut) {
		if (!vc->flush_deadline_ns)
			vc->flush_deadline_ns =
				xprt_now_ns() + xprt_ms_to_ns(VERBS_PEER_ERROR_GRACE_MS);
		return;
	}
	verbs_conn_fail(vc, err);
}

/* Hands a receive to the core, then reposts its buffer. */
static void verbs_recv_deliver(struct verbs_conn *vc, uint32_t idx, uint32_t len)
{
	struct xprt_conn *c = vc->c;
	int err;

	xprt_core_recv(c, verbs_recv_buf(vc, idx), len);
	if (c->state == XPRT_CONN_DEAD || vc->qp_error || vc->shut)
		return;
	err = verbs_post_recv(vc, idx);
	if (err) {
		verbs_conn_fail(vc, err);
		return;
	}
	xprt_core_recv_reposted(c, 1);
}

/* Delivers the receives that completed before ESTABLISHED was handled, in order. */
static void verbs_deliver_early(struct verbs_conn *vc)
{
	while (vc->early_count && !vc->shut && vc->c->state != XPRT_CONN_DEAD) {
		uint32_t idx = vc->early[vc->early_head];

		vc->early_head = (vc->early_head + 1) % vc->recv_count;
		vc->early_count--;
		verbs_recv_deliver(vc, idx, vc->recv_len[idx]);
	}
}

static void verbs_recv_done(struct verbs_conn *vc, uint32_t idx, uint32_t len)
{
	if (idx >= vc->recv_count)
		return;
	if (vc->failed || vc->shut || vc->c->state == XPRT_CONN_DEAD)
		return;
	/*
	 * The peer may send as soon as its side is established, and the CQ can be
	 * polled before our ESTABLISHED event is read: hold such receives back.
	 */
	if (!vc->established) {
		vc->recv_len[idx] = len;
		vc->early[(vc->early_head + vc->early_count) % vc->recv_count] = idx;
		vc->early_count++;
		return;
	}
	verbs_recv_deliver(vc, idx, len);
}

/*
 * A send-queue completion says every SEND numbered below @end is done: their
 * slots come back (see the top), and a sender that found none is told.
 */
static void verbs_send_reclaim(struct verbs_conn *vc, uint64_t end)
{
	bool freed = false;

	while (vc->send_done_seq < end && vc->send_done_seq < vc->send_post_seq) {
		uint32_t slot = (uint32_t)(vc->send_done_seq++ % vc->send_slots);

		if (vc->send_signalled[slot]) {
			vc->send_signalled[slot] = false;
			vc->sq_signalled--;
		}
		freed = true;
	}
	if (freed && vc->send_blocked && !vc->shut && !vc->failed && !vc->qp_error &&
	    vc->c->state != XPRT_CONN_DEAD) {
		vc->send_blocked = false;
		xprt_core_send_space(vc->c);
	}
}

/* A SEND's completion (signalled, or an error): it and every SEND before it are done. */
static void verbs_send_done(struct verbs_conn *vc, uint32_t idx, int err)
{
	uint64_t seq;

	if (idx >= vc->send_slots)
		return;
	/* the SEND in slot @idx not yet given back: at most send_slots are out */
	seq = vc->send_done_seq +
	      (idx + vc->send_slots - vc->send_done_seq % vc->send_slots) % vc->send_slots;
	if (seq < vc->send_post_seq)
		verbs_send_reclaim(vc, seq + 1);
	if (err)
		verbs_conn_wc_fail(vc, err);
}

/*
 * Counts the next SEND taken (see the top; its slot: @wr's) as posted, and
 * signals it when its turn has come or its connection closes (its completion
 * then says the CLOSE and all before it went: sends_pending()).
 */
static void verbs_send_posting(struct verbs_conn *vc, struct ibv_send_wr *wr)
{
	uint32_t slot = (uint32_t)(vc->send_post_seq++ % vc->send_slots);
	bool signal = vc->c->local_close || vc->send_unsignalled_run + 1 >= vc->signal_every;

	vc->send_signalled[slot] = signal;
	if (signal) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		vc->sq_signalled++;
		vc->send_unsignalled_run = 0;
	} else {
		vc->send_unsignalled_run++;
	}
}

/*
 * Of the SENDs counted as posted from number @first on, when
 * send_unsignalled_run was @run, only @posted were: takes the others back,
 * and the run to what the posted ones made it; then gives back the slot of
 * every SEND taken but not posted (its connection is to fail).
 */
static void verbs_send_unposting(struct verbs_conn *vc, uint64_t first, uint32_t posted,
				 uint32_t run)
{
	for (uint64_t seq = first; seq < first + posted; seq++)
		run = vc->send_signalled[seq % vc->send_slots] ? 0 : run + 1;
	vc->send_unsignalled_run = run;
	while (vc->send_post_seq > first + posted) {
		uint32_t slot = (uint32_t)(--vc->send_post_seq % vc->send_slots);

		if (vc->send_signalled[slot]) {
			vc->send_signalled[slot] = false;
			vc->sq_signalled--;
		}
	}
	vc->send_taken_seq = vc->send_post_seq;
}

static void verbs_rdma_done(struct verbs_conn *vc, uint32_t idx, int err)
{
	struct verbs_rdma_slot *slot;
	struct xprt_rdma_op *op;

	if (idx >= vc->rdma_slots)
		return;
	slot = &vc->rdma[idx];
	op = slot->op;
	if (slot->is_read)
		vc->reads_inflight--;
	slot->op = NULL;
	slot->is_read = false;
	vc->rdma_free[vc->rdma_free_count++] = idx;
	/* the SENDs posted before it are done too; the slot is free first (send_space may post) */
	verbs_send_reclaim(vc, slot->send_mark);

	/*
	 * The op completes before the connection dies, so its owner learns why
	 * (-EACCES) before the peer can see the disconnect. Whatever the core
	 * sends or posts from inside this callback gets -EAGAIN and is then
	 * failed with the connection (see verbs_conn_check_post()).
	 */
	if (op) {
		op->backend_data = NULL;
		xprt_core_rdma_done(op, err);
	}
	if (err)
		verbs_conn_wc_fail(vc, err);
}

static void verbs_handle_wc(struct verbs_conn *vc, const struct ibv_wc *wc)
{
	unsigned int kind = (unsigned int)(wc->wr_id & VERBS_WR_KIND_MASK);
	uint32_t idx = verbs_wr_slot(wc->wr_id);
	int err = 0;

	if (wc->status != IBV_WC_SUCCESS)
		err = verbs_wc_error(vc, wc, kind);

	switch (kind) {
	case VERBS_WR_RECV:
		vc->recv_posted--;
		if (err)
			verbs_conn_wc_fail(vc, err);
		else
			verbs_recv_done(vc, idx, wc->byte_len);
		break;
	case VERBS_WR_SEND:
		verbs_send_done(vc, idx, err);
		break;
	case VERBS_WR_RDMA:
		vc->sq_signalled--;
		verbs_rdma_done(vc, idx, err);
		break;
	default:
		xprt_log(XPRT_LOG_ERR, "verbs: %s: completion with unknown wr_id 0x%llx", vc->peer,
			 (unsigned long long)wc->wr_id);
		break;
	}
}

/* Handles up to @budget completions of @vc without sleeping; returns how many. */
static int verbs_conn_poll(struct verbs_conn *vc, int budget)
{
	struct ibv_wc wc[VERBS_POLL_BATCH];
	int total = 0, n;

	if (!vc->cq)
		return 0;
	vc->in_poll++;
	while (total < budget) {
		int want = budget - total < VERBS_POLL_BATCH ? budget - total : VERBS_POLL_BATCH;

		n = ibv_poll_cq(vc->cq, want, wc);
		if (n < 0) {
			xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_poll_cq failed", vc->peer);
			vc->qp_error = true;
			verbs_conn_fail(vc, -EIO);
			break;
		}
		for (int i = 0; i < n; i++)
			verbs_handle_wc(vc, &wc[i]);
		total += n;
		if (n < want)
			break;
	}
	vc->in_poll--;
	return total;
}

/* The completion channel is readable: take its events, re-arm, poll to empty. */
static void verbs_cq_poll(struct xprt_poller *p, uint32_t events)
{
	struct verbs_conn *vc =
		(struct verbs_conn *)((char *)p - offsetof(struct verbs_conn, cq_poller));
	struct ibv_cq *cq;
	void *cq_context;
	int ret;

	/* An event the progress thread saw before a caller took the channel: the caller's. */
	if (vc->c->waiting)
		return;
	while (ibv_get_cq_event(vc->comp_channel, &cq, &cq_context) == 0)
		vc->cq_events_unacked++;
	if (vc->cq_events_unacked >= VERBS_CQ_ACK_BATCH) {
		ibv_ack_cq_events(vc->cq, vc->cq_events_unacked);
		vc->cq_events_unacked = 0;
	}

	verbs_conn_poll(vc, INT_MAX);
	/* Arm, then poll again: a completion that came before the arm raises no event. */
	ret = ibv_req_notify_cq(vc->cq, 0);
	if (ret) {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_req_notify_cq: %s", vc->peer, strerror(ret));
		verbs_conn_fail(vc, -ret);
	}
	verbs_conn_poll(vc, INT_MAX);
}

/*
 * The device reports an error of one of our QPs. The QP is alive until the
 * event is acked (ibv_destroy_qp() waits for that), so its context is too.
 */
static void verbs_async_poll(struct xprt_poller *p, uint32_t events)
{
	struct verbs_dev *d =
		(struct verbs_dev *)((char *)p - offsetof(struct verbs_dev, async_poller));
	struct ibv_async_event ev;

	while (ibv_get_async_event(d->verbs, &ev) == 0) {
		struct verbs_conn *vc = NULL;
		int err = 0;

		switch (ev.event_type) {
		case IBV_EVENT_QP_ACCESS_ERR:
			err = -EACCES;
			break;
		case IBV_EVENT_QP_REQ_ERR:
			err = -EPROTO;
			break;
		case IBV_EVENT_QP_FATAL:
			err = -EIO;
			break;
		default:
			break;
		}
		if (err && ev.element.qp)
			vc = ev.element.qp->qp_context;
		if (vc && !vc->failed && !vc->shut) {
			xprt_log(XPRT_LOG_ERR, "verbs: %s: %s%s", vc->peer,
				 ibv_event_type_str(ev.event_type),
				 err == -EACCES ? ": the peer made a one-sided access our memory "
						  "refuses (wrong key, rights or bounds)"
						: "");
			vc->peer_error = err;
		} else if (!err) {
			xprt_log(ev.event_type == IBV_EVENT_DEVICE_FATAL ? XPRT_LOG_ERR
									 : XPRT_LOG_INFO,
				 "verbs: %s: %s", ibv_get_device_name(d->verbs->device),
				 ibv_event_type_str(ev.event_type));
		}
		ibv_ack_async_event(&ev);
	}
}

static int verbs_progress(struct xprt_ctx *ctx)
{
	struct verbs_ctx *vctx = ctx->verbs;
	struct list_head *pos, *tmp;
	int total = 0;

	if (!vctx)
		return 0;
	list_for_each_safe (pos, tmp, &vctx->conns) {
		struct verbs_conn *vc = list_entry(pos, struct verbs_conn, link);

		/* a caller waiting on it handles its completions (verbs_wait, verbs_spin) */
		if (!vc->c->waiting)
			total += verbs_conn_poll(vc, VERBS_PROGRESS_BUDGET);
		if (vc->flush_deadline_ns && !vc->failed && xprt_now_ns() > vc->flush_deadline_ns)
			verbs_conn_fail(vc, vc->peer_error ? vc->peer_error : -ECONNRESET);
	}
	return total;
}

/* ---- data path --------------------------------------------------------------------- */

/*
 * 0 when @vc may post. An error completion is reported to the core only once
 * its handling is over: until then the QP is in ERR but the connection not yet
 * dead, and new work waits (-EAGAIN) to be failed with the connection, so the
 * connection dies of the real error rather than of a refused post.
 */
static int verbs_conn_check_post(const struct verbs_conn *vc)
{
	if (!vc || !vc->qp || !vc->established || vc->shut || vc->failed)
		return -ENOTCONN;
	if (vc->qp_error)
		return -EAGAIN;
	return 0;
}

/*
 * Posts the SENDs @vc holds, in one chain: 0, or the reason the post failed
 * (the SENDs not posted give their slots back; the connection is to fail).
 * On a connection that may not post (dying, verbs_conn_check_post()) they
 * are dropped with it.
 */
static int verbs_post_held(struct verbs_conn *vc)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t n, posted = 0, run;
	uint64_t first;
	int ret = 0;

	if (!vc || !vc->held_count)
		return 0;
	n = vc->held_count;
	vc->held_count = 0;
	list_del(&vc->held_link);
	vc->held_wr[n - 1].next = NULL;
	first = vc->send_post_seq;
	run = vc->send_unsignalled_run;
	if (verbs_conn_check_post(vc) == 0) {
		for (uint32_t i = 0; i < n; i++)
			verbs_send_posting(vc, &vc->held_wr[i]);
		ret = ibv_post_send(vc->qp, vc->held_wr, &bad);
		posted = ret == 0 ? n : bad ? (uint32_t)(bad - vc->held_wr) : 0;
		if (posted < n)
			verbs_send_unposting(vc, first, posted, run);
	} else {
		verbs_send_unposting(vc, first, 0, run);
	}
	if (posted)
		vc->c->stats.writes++;
	if (ret)
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_post_send(%u SENDs held): %s", vc->peer,
			 n - posted, strerror(ret));
	return -ret;
}

static int verbs_send(struct xprt_conn *c, const uint8_t *hdr, const void *body, size_t len)
{
	struct verbs_conn *vc = c->backend;
	size_t hdr_len = hdr ? XPRT_HDR_SIZE : 0;
	size_t total = hdr_len + len;
	struct ibv_send_wr one = {0}, *wr = &one, *bad;
	struct ibv_sge one_sge, *sge = &one_sge;
	/* a closing connection's CLOSE posts at once, after what was held */
	bool hold = c->ctx->sends_held && !c->local_close;
	uint64_t first;
	uint32_t slot, run;
	uint8_t *buf;
	int ret;

	ret = verbs_conn_check_post(vc);
	if (ret)
		return ret;
	if (total > vc->buf_size)
		return -EMSGSIZE;
	if (vc->send_taken_seq - vc->send_done_seq == vc->send_slots) {
		vc->send_blocked = true;
		return -EAGAIN;
	}

	slot = (uint32_t)(vc->send_taken_seq++ % vc->send_slots);
	buf = verbs_send_buf(vc, slot);
	if (hdr_len)
		memcpy(buf, hdr, hdr_len);
	if (len)
		memcpy(buf + hdr_len, body, len);

	if (hold) {
		/* a batch end runs: this SEND joins the connection's chain (verbs_flush_held()) */
		wr = &vc->held_wr[vc->held_count];
		sge = &vc->held_sge[vc->held_count];
		*wr = (struct ibv_send_wr){0};
	}
	sge->addr = (uintptr_t)buf;
	sge->length = (uint32_t)total;
	sge->lkey = vc->send_mr->lkey;
	wr->wr_id = verbs_wr_id(VERBS_WR_SEND, slot);
	wr->sg_list = sge;
	wr->num_sge = total ? 1 : 0;
	wr->opcode = IBV_WR_SEND;
	/* signalled or not: decided when posted (verbs_send_posting()) */
	wr->send_flags = 0;
	if (total && total <= vc->max_inline)
		wr->send_flags |= IBV_SEND_INLINE;

	if (hold) {
		if (vc->held_count)
			vc->held_wr[vc->held_count - 1].next = wr;
		else
			list_add_tail(&vc->held_link, &vc->vctx->held);
		vc->held_count++;
		return 0;
	}
	/* a CLOSE made during a batch end comes here: what was held goes first */
	ret = verbs_post_held(vc);
	if (ret) {
		vc->send_taken_seq = vc->send_post_seq; /* this one's slot too */
		return ret;
	}
	first = vc->send_post_seq;
	run = vc->send_unsignalled_run;
	verbs_send_posting(vc, wr);
	ret = -ibv_post_send(vc->qp, wr, &bad);
	if (ret) {
		verbs_send_unposting(vc, first, 0, run);
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_post_send(SEND, %zu bytes): %s", vc->peer,
			 total, strerror(-ret));
		return ret;
	}
	vc->c->stats.writes++;
	return 0;
}

/* Posts what connections held during a batch end (xprt_i.h, flush_held). */
static void verbs_flush_held(struct xprt_ctx *ctx)
{
	struct verbs_ctx *vctx = ctx->verbs;

	while (!list_empty(&vctx->held)) {
		struct verbs_conn *vc = list_first_entry(&vctx->held, struct verbs_conn, held_link);
		int ret = verbs_post_held(vc);

		if (ret && !vc->failed && vc->c->state != XPRT_CONN_DEAD)
			xprt_core_conn_failed(vc->c, ret);
	}
}

static int verbs_rdma(struct xprt_conn *c, struct xprt_rdma_op *op)
{
	struct verbs_conn *vc = c->backend;
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_sge sge = {0};
	struct ibv_mr *ib_mr = NULL;
	uint32_t idx;
	int ret;

	/* SENDs held before it go first, in the order they were made */
	ret = verbs_post_held(vc);
	if (ret)
		return ret;
	ret = verbs_conn_check_post(vc);
	if (ret)
		return ret;
	if (op->len > UINT32_MAX)
		return -EINVAL;
	if (op->len) {
		if (!op->local_mr || op->local < op->local_mr->addr ||
		    op->len > op->local_mr->len ||
		    (size_t)(op->local - op->local_mr->addr) > op->local_mr->len - op->len)
			return -EINVAL;
		ib_mr = verbs_mr_of(op->local_mr, vc->dev);
		if (!ib_mr)
			return -EINVAL;
	}
	if (!op->is_write) {
		if (!vc->max_reads) {
			xprt_log(XPRT_LOG_ERR,
				 "verbs: %s: RDMA READ impossible: the QP allows "
				 "no outstanding reads",
				 vc->peer);
			return -EOPNOTSUPP;
		}
		if (vc->reads_inflight >= vc->max_reads)
			return -EAGAIN;
	}
	if (!vc->rdma_free_count)
		return -EAGAIN;

	idx = vc->rdma_free[vc->rdma_free_count - 1];
	if (op->len) {
		sge.addr = (uintptr_t)op->local;
		sge.length = (uint32_t)op->len;
		sge.lkey = ib_mr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	wr.wr_id = verbs_wr_id(VERBS_WR_RDMA, idx);
	wr.opcode = op->is_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = op->remote_addr;
	wr.wr.rdma.rkey = op->rkey;

	ret = ibv_post_send(vc->qp, &wr, &bad);
	if (ret) {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: ibv_post_send(RDMA %s, %zu bytes): %s", vc->peer,
			 op->is_write ? "WRITE" : "READ", op->len, strerror(ret));
		return -ret;
	}
	vc->rdma_free_count--;
	vc->rdma[idx].op = op;
	vc->rdma[idx].is_read = !op->is_write;
	vc->rdma[idx].send_mark = vc->send_post_seq;
	vc->send_unsignalled_run = 0;
	vc->sq_signalled++;
	op->backend_data = &vc->rdma[idx];
	if (!op->is_write)
		vc->reads_inflight++;
	vc->c->stats.writes++;
	return 0;
}

/* ---- connection management ---------------------------------------------------------- */

static void verbs_set_ack_timeout(struct verbs_conn *vc)
{
	uint8_t timeout = VERBS_ACK_TIMEOUT;

	if (rdma_set_option(vc->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
			    sizeof(timeout)))
		xprt_log(XPRT_LOG_DEBUG, "verbs: %s: cannot set the ACK timeout: %s", vc->peer,
			 strerror(errno));
}

static uint8_t verbs_clamp_u8(int v)
{
	if (v < 0)
		return 0;
	return v > UINT8_MAX ? UINT8_MAX : (uint8_t)v;
}

/* ROUTE_RESOLVED: sends the connect request with our parameters. */
static int verbs_client_connect(struct verbs_conn *vc)
{
	const struct ibv_device_attr *attr = &verbs_conn_dev(vc)->attr;
	uint8_t private_data[XPRT_PARAMS_SIZE];
	struct xprt_conn_params ours;
	struct rdma_conn_param param = {
		.private_data = private_data,
		.private_data_len = sizeof(private_data),
		/* RDMA READ needs both: either side may read from the other. */
		.responder_resources = verbs_clamp_u8(attr->max_qp_rd_atom),
		.initiator_depth = verbs_clamp_u8(attr->max_qp_init_rd_atom),
		.retry_count = VERBS_RETRY_COUNT,
		.rnr_retry_count = VERBS_RNR_RETRY_COUNT,
	};

	xprt_core_local_params(vc->vctx->ctx, &ours);
	xprt_params_encode(&ours, private_data);
	if (rdma_connect(vc->id, &param)) {
		int err = -errno;

		xprt_log(XPRT_LOG_ERR, "verbs: %s: rdma_connect: %s", vc->peer, strerror(-err));
		return err;
	}
	return 0;
}

static int verbs_decode_private_data(const struct verbs_cm_event *ev, struct xprt_conn_params *p)
{
	return xprt_params_decode(ev->private_data, ev->private_data_len, p);
}

/* The QP is up: learn how many reads it may have in flight, then tell the core. */
static void verbs_conn_established(struct verbs_conn *vc, const struct verbs_cm_event *ev)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int err;

	if (!vc->c->is_server) {
		err = verbs_decode_private_data(ev, &vc->peer_params);
		if (err) {
			xprt_log(XPRT_LOG_ERR,
				 "verbs: %s: bad connection parameters from the "
				 "server: %s",
				 vc->peer, strerror(-err));
			verbs_conn_fail(vc, err);
			return;
		}
	}
	if (ibv_query_qp(vc->qp, &attr, IBV_QP_MAX_QP_RD_ATOMIC, &init) == 0)
		vc->max_reads = attr.max_rd_atomic;
	else
		vc->max_reads = ev->initiator_depth;

	vc->established = true;
	xprt_core_conn_established(vc->c, &vc->peer_params);
	verbs_deliver_early(vc);
}

/* Why the peer refused us: our own reject data carries an errno, else ECONNREFUSED. */
static int verbs_reject_reason(const struct verbs_cm_event *ev)
{
	if (ev->private_data_len >= VERBS_REJECT_DATA_SIZE &&
	    xprt_get_le32(ev->private_data) == XPRT_MAGIC) {
		uint32_t reason = xprt_get_le32(ev->private_data + 4);

		if (reason > 0 && reason <= VERBS_ERRNO_MAX)
			return -(int)reason;
	}
	return -ECONNREFUSED;
}

static void verbs_reject(struct rdma_cm_id *id, int err, const char *peer)
{
	uint8_t data[VERBS_REJECT_DATA_SIZE];

	xprt_put_le32(data, XPRT_MAGIC);
	xprt_put_le32(data + 4, (uint32_t)-err);
	if (rdma_reject(id, data, sizeof(data)))
		xprt_log(XPRT_LOG_WARN, "verbs: %s: rdma_reject: %s", peer, strerror(errno));
}

/* A CM event on a connection's id. */
static void verbs_conn_cm_event(struct verbs_conn *vc, const struct verbs_cm_event *ev)
{
	int err;

	if (vc->shut && ev->type != RDMA_CM_EVENT_DISCONNECTED &&
	    ev->type != RDMA_CM_EVENT_TIMEWAIT_EXIT)
		return;

	switch (ev->type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = verbs_conn_setup(vc);
		if (!err && rdma_resolve_route(vc->id, VERBS_RESOLVE_TIMEOUT_MS)) {
			err = -errno;
			xprt_log(XPRT_LOG_ERR, "verbs: %s: rdma_resolve_route: %s%s", vc->peer,
				 strerror(-err),
				 err == -ENODEV ? " (RoCE cannot reach a loopback address such as "
						  "127.0.0.1: use an address of the RDMA interface)"
						: "");
			/* -ENODEV would read as "no RDMA device at all" to the caller. */
			if (err == -ENODEV)
				err = -ENETUNREACH;
		}
		if (err)
			verbs_conn_fail(vc, err);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = verbs_client_connect(vc);
		if (err)
			verbs_conn_fail(vc, err);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		verbs_conn_established(vc, ev);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		xprt_log(XPRT_LOG_INFO, "verbs: %s: %s: %s", vc->peer, rdma_event_str(ev->type),
			 strerror(ev->status < 0 ? -ev->status : ev->status));
		verbs_conn_fail(vc, ev->status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		xprt_log(XPRT_LOG_INFO, "verbs: %s: unreachable (status %d)", vc->peer, ev->status);
		verbs_conn_fail(vc, ev->status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		err = verbs_reject_reason(ev);
		xprt_log(XPRT_LOG_INFO, "verbs: %s: connection rejected (reason %d): %s", vc->peer,
			 ev->status, strerror(-err));
		verbs_conn_fail(vc, err);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		xprt_log(XPRT_LOG_INFO, "verbs: %s: connect error (status %d)", vc->peer,
			 ev->status);
		verbs_conn_fail(vc, -ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/*
		 * The CM event can overtake the completion of the peer's last
		 * message, its CLOSE: take what the CQ holds first, so an orderly
		 * close ends as one (then the connection is already dead here).
		 */
		if (!vc->in_poll)
			verbs_conn_poll(vc, INT_MAX);
		verbs_conn_fail(vc, vc->peer_error ? vc->peer_error : -ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		xprt_log(XPRT_LOG_ERR, "verbs: %s: the RDMA device was removed", vc->peer);
		verbs_conn_fail(vc, -ENODEV);
		break;
	default:
		xprt_log(XPRT_LOG_DEBUG, "verbs: %s: %s ignored", vc->peer,
			 rdma_event_str(ev->type));
		break;
	}
}

/*
 * CONNECT_REQUEST: the core gets a connection, which gets a QP with every
 * receive posted, then we accept with our parameters. Anything wrong before
 * the core knows of it is rejected here.
 */
static void verbs_connect_request(struct verbs_ctx *vctx, const struct verbs_cm_event *ev)
{
	struct verbs_listener *vl = verbs_listener_of(ev->listen_id->context);
	struct rdma_cm_id *id = ev->id;
	const struct ibv_device_attr *attr;
	uint8_t private_data[XPRT_PARAMS_SIZE];
	struct xprt_conn_params peer, ours;
	struct rdma_conn_param param = {0};
	struct verbs_conn *vc;
	struct xprt_conn *c;
	char name[VERBS_PEER_NAME_SIZE];
	int err;

	verbs_log_peer_addr(id, name, sizeof(name));
	if (vl->l->closed) {
		err = -ECONNREFUSED;
		goto err_reject;
	}
	err = verbs_decode_private_data(ev, &peer);
	if (err) {
		xprt_log(XPRT_LOG_WARN, "verbs: %s: connection refused: bad parameters: %s", name,
			 strerror(-err));
		goto err_reject;
	}
	c = xprt_core_conn_new(vl->l);
	if (!c) {
		err = -ENOMEM;
		goto err_reject;
	}
	vc = verbs_conn_alloc(vctx, c);
	if (!vc) {
		err = -ENOMEM;
		verbs_reject(id, err, name);
		rdma_destroy_id(id);
		xprt_core_conn_failed(c, err);
		return;
	}
	/* From here on conn_destroy() frees the id with the rest. */
	c->backend = vc;
	vc->id = id;
	id->context = &vc->ep;
	vc->peer_params = peer;
	snprintf(vc->peer, sizeof(vc->peer), "%s", name);
	xprt_core_set_peer_addr(c, name);
	verbs_set_ack_timeout(vc);

	err = verbs_conn_setup(vc);
	if (err) {
		verbs_reject(id, err, name);
		verbs_conn_fail(vc, err);
		return;
	}

	attr = &verbs_conn_dev(vc)->attr;
	xprt_core_local_params(vctx->ctx, &ours);
	xprt_params_encode(&ours, private_data);
	param.private_data = private_data;
	param.private_data_len = sizeof(private_data);
	/* At this event the values are already from our side's point of view. */
	param.responder_resources = verbs_clamp_u8(ev->responder_resources < attr->max_qp_rd_atom
							   ? ev->responder_resources
							   : attr->max_qp_rd_atom);
	param.initiator_depth = verbs_clamp_u8(ev->initiator_depth < attr->max_qp_init_rd_atom
						       ? ev->initiator_depth
						       : attr->max_qp_init_rd_atom);
	param.retry_count = VERBS_RETRY_COUNT;
	param.rnr_retry_count = VERBS_RNR_RETRY_COUNT;
	if (rdma_accept(id, &param)) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: %s: rdma_accept: %s", name, strerror(-err));
		verbs_conn_fail(vc, err);
	}
	return;

err_reject:
	verbs_reject(id, err, name);
	rdma_destroy_id(id);
}

/* Copies what we need out of @event, so it can be acked before we act on it. */
static void verbs_cm_event_copy(const struct rdma_cm_event *event, struct verbs_cm_event *ev)
{
	const struct rdma_conn_param *conn = &event->param.conn;

	memset(ev, 0, sizeof(*ev));
	ev->type = event->event;
	ev->status = event->status;
	ev->id = event->id;
	ev->listen_id = event->listen_id;
	ev->responder_resources = conn->responder_resources;
	ev->initiator_depth = conn->initiator_depth;
	if (conn->private_data && conn->private_data_len) {
		ev->private_data_len = conn->private_data_len < sizeof(ev->private_data)
					       ? conn->private_data_len
					       : sizeof(ev->private_data);
		memcpy(ev->private_data, conn->private_data, ev->private_data_len);
	}
}

/*
 * The event channel is readable. Each event is copied and acked before it is
 * handled, so handling may destroy its id (rdma_destroy_id() waits for the
 * acks of an id's events).
 */
static void verbs_cm_poll(struct xprt_poller *p, uint32_t events)
{
	struct verbs_ctx *vctx =
		(struct verbs_ctx *)((char *)p - offsetof(struct verbs_ctx, cm_poller));
	struct rdma_cm_event *event;
	struct verbs_cm_event ev;

	while (rdma_get_cm_event(vctx->channel, &event) == 0) {
		struct verbs_endpoint *ep;

		verbs_cm_event_copy(event, &ev);
		rdma_ack_cm_event(event);

		if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			verbs_connect_request(vctx, &ev);
			continue;
		}
		ep = ev.id ? ev.id->context : NULL;
		if (!ep || ep->kind != VERBS_EP_CONN) {
			xprt_log(ev.type == RDMA_CM_EVENT_DEVICE_REMOVAL ? XPRT_LOG_ERR
									 : XPRT_LOG_DEBUG,
				 "verbs: listener: %s ignored", rdma_event_str(ev.type));
			continue;
		}
		verbs_conn_cm_event(verbs_conn_of(ep), &ev);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		xprt_log(XPRT_LOG_ERR, "verbs: rdma_get_cm_event: %s", strerror(errno));
}

/* Picks the address to use: IPv4 first (soft-RoCE setups often lack IPv6 GIDs). */
static const struct addrinfo *verbs_pick_addr(const struct addrinfo *res)
{
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET)
			return ai;
	return res;
}

static int verbs_getaddrinfo(const char *host, uint16_t port, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	char serv[8];
	int ret;

	if (host && (!host[0] || !strcmp(host, "*")))
		host = NULL;
	snprintf(serv, sizeof(serv), "%u", port);
	ret = getaddrinfo(host, serv, &hints, res);
	if (ret) {
		xprt_log(XPRT_LOG_ERR, "verbs: cannot resolve %s:%u: %s", host ? host : "*", port,
			 ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return passive ? -EADDRNOTAVAIL : -EHOSTUNREACH;
	}
	return 0;
}

/* Starts connecting: the rest happens in CM events (ADDR_RESOLVED onwards). */
static int verbs_connect(struct xprt_conn *c, const char *host, uint16_t port)
{
	struct verbs_ctx *vctx = c->ctx->verbs;
	struct addrinfo *res;
	struct verbs_conn *vc;
	int err;

	vc = verbs_conn_alloc(vctx, c);
	if (!vc)
		return -ENOMEM;
	snprintf(vc->peer, sizeof(vc->peer), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);

	err = verbs_getaddrinfo(host, port, false, &res);
	if (err)
		goto err_free_conn;

	if (rdma_create_id(vctx->channel, &vc->id, &vc->ep, RDMA_PS_TCP)) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: %s: rdma_create_id: %s", vc->peer, strerror(-err));
		goto err_free_addr;
	}
	verbs_set_ack_timeout(vc);
	if (rdma_resolve_addr(vc->id, NULL, verbs_pick_addr(res)->ai_addr,
			      VERBS_RESOLVE_TIMEOUT_MS)) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: %s: rdma_resolve_addr: %s", vc->peer,
			 strerror(-err));
		goto err_free_addr;
	}
	freeaddrinfo(res);
	c->backend = vc;
	return 0;

err_free_addr:
	freeaddrinfo(res);
err_free_conn:
	verbs_conn_free(vc); /* destroys the id too */
	return err;
}

/*
 * Stops all traffic: QP to ERR, disconnect. Posted one-sided ops complete
 * with a flush error as their completions come back (the comp channel stays
 * armed until conn_destroy()); those already there are handled now.
 */
static void verbs_shutdown(struct xprt_conn *c)
{
	struct verbs_conn *vc = c->backend;
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
	int ret;

	if (!vc || vc->shut)
		return;
	/*
	 * SENDs held for a batch end's return are posted before the QP goes to
	 * ERR, which flushes them (most unsent): their slots come back as any
	 * SEND's do.
	 */
	verbs_post_held(vc);
	vc->shut = true;
	vc->qp_error = true;
	if (vc->qp) {
		ret = ibv_modify_qp(vc->qp, &attr, IBV_QP_STATE);
		if (ret)
			xprt_log(XPRT_LOG_WARN, "verbs: %s: ibv_modify_qp(ERR): %s", vc->peer,
				 strerror(ret));
	}
	/* Fails harmlessly (EINVAL) on an id that never connected. */
	if (vc->qp)
		rdma_disconnect(vc->id);
	if (!vc->in_poll)
		verbs_conn_poll(vc, INT_MAX);
}

/*
 * A caller takes @c's completion channel from the progress thread
 * (verbs_wait(), verbs_spin()): the progress thread stops watching it and
 * polling @c's CQ (c->waiting), and a reference keeps @c from being reaped
 * while the caller drops the lock. -EBUSY where @c cannot be taken.
 */
static int verbs_take_channel(struct xprt_conn *c)
{
	struct verbs_conn *vc = c->backend;

	if (!vc || c->waiting || !vc->cq_polled || !vc->established || vc->shut || vc->failed ||
	    c->state == XPRT_CONN_DEAD)
		return -EBUSY;
	if (xprt_core_poll_mod(c->ctx, &vc->cq_poller, 0))
		return -EBUSY;
	c->waiting = true;
	conn_ref(c);
	return 0;
}

/*
 * Gives @c's channel back: first takes the events that came meanwhile,
 * arms the CQ again and polls it (verbs_cq_poll()), as the progress thread
 * would have, so no event left behind wakes it.
 */
static void verbs_give_channel(struct xprt_conn *c)
{
	struct verbs_conn *vc = c->backend;
	struct xprt_ctx *ctx = c->ctx;

	c->waiting = false;
	if (vc->cq) {
		verbs_cq_poll(&vc->cq_poller, EPOLLIN);
		xprt_core_batch_end(ctx);
	}
	if (vc->cq_polled && xprt_core_poll_mod(ctx, &vc->cq_poller, EPOLLIN)) {
		xprt_log(XPRT_LOG_ERR, "verbs: %s: cannot watch the completion channel again",
			 vc->peer);
		verbs_conn_fail(vc, -EIO);
	}
	conn_unref(c);
}

/*
 * The caller's own wait (xprt_i.h): it sleeps on @c's completion channel and
 * handles what completed as the progress thread would. The CQ is armed
 * whenever the channel is watched (verbs_cq_poll() ends so), so a completion
 * that comes while the caller sleeps wakes it.
 */
static int verbs_wait(struct xprt_conn *c, int timeout_ms)
{
	struct verbs_conn *vc = c->backend;
	struct pollfd pfd;
	int n;

	if (verbs_take_channel(c))
		return -EBUSY;
	pfd.fd = vc->comp_channel->fd;
	pfd.events = POLLIN;
	pthread_mutex_unlock(&c->ctx->lock);
	n = poll(&pfd, 1, timeout_ms);
	pthread_mutex_lock(&c->ctx->lock);
	verbs_give_channel(c);
	return n > 0;
}

/*
 * The caller's spin (xprt_i.h): it polls @c's CQ itself, yielding the core
 * (and the lock) between polls, with the channel taken, so the completion it
 * waits for wakes no progress thread (a wake-up costs more than the round
 * trip of a small RPC), and takes the channel's events before it gives it
 * back.
 */
static int verbs_spin(struct xprt_conn *c, uint64_t until_ns, const bool *done)
{
	struct verbs_conn *vc = c->backend;
	int n = 0;

	if (verbs_take_channel(c))
		return -EBUSY;
	/* other completions (a signalled SEND, another caller's answer) keep it spinning */
	for (;;) {
		n += verbs_conn_poll(vc, INT_MAX);
		if (*done || !vc->cq || vc->failed || vc->shut || c->state == XPRT_CONN_DEAD ||
		    xprt_now_ns() >= until_ns)
			break;
		pthread_mutex_unlock(&c->ctx->lock);
		sched_yield();
		pthread_mutex_lock(&c->ctx->lock);
	}
	verbs_give_channel(c);
	return n > 0;
}

/*
 * SENDs still on the send queue: a QP moved to ERR now would flush them
 * unsent. Only a signalled WR is known to be there: the last SEND of a
 * closing connection always is (verbs_send_posting()), and all before it
 * are done when it is.
 */
static bool verbs_sends_pending(const struct xprt_conn *c)
{
	const struct verbs_conn *vc = c->backend;

	return vc && vc->qp && !vc->qp_error && (vc->sq_signalled > 0 || vc->held_count > 0);
}

/*
 * Waits (bounded) for the send queue to flush, so every one-sided op gets its
 * completion, then frees everything. Ops whose flush never came are completed
 * with -ECONNRESET after the QP is destroyed (the NIC is done with their
 * memory then).
 */
static void verbs_conn_destroy(struct xprt_conn *c)
{
	struct verbs_conn *vc = c->backend;
	uint64_t deadline;

	if (!vc)
		return;
	verbs_shutdown(c);

	deadline = xprt_now_ns() + xprt_ms_to_ns(VERBS_DRAIN_TIMEOUT_MS);
	/*
	 * Every signalled WR completes (flushed); an unsignalled SEND that was
	 * done before the QP went to ERR never will, and needs no waiting for.
	 */
	while (vc->cq && vc->sq_signalled && xprt_now_ns() < deadline) {
		if (!verbs_conn_poll(vc, INT_MAX)) {
			struct timespec ts = {.tv_nsec = VERBS_DRAIN_SLEEP_NS};

			nanosleep(&ts, NULL);
		}
	}
	if (vc->sq_signalled)
		xprt_log(XPRT_LOG_WARN, "verbs: %s: %u WRs not flushed after %d ms", vc->peer,
			 vc->sq_signalled, VERBS_DRAIN_TIMEOUT_MS);

	if (vc->qp) {
		rdma_destroy_qp(vc->id);
		vc->qp = NULL;
	}
	for (uint32_t i = 0; i < vc->rdma_slots && vc->rdma; i++) {
		struct xprt_rdma_op *op = vc->rdma[i].op;

		if (op) {
			vc->rdma[i].op = NULL;
			op->backend_data = NULL;
			xprt_core_rdma_done(op, -ECONNRESET);
		}
	}
	verbs_conn_free(vc);
	c->backend = NULL;
}

/* ---- listeners ------------------------------------------------------------------------ */

static int verbs_listen(struct xprt_listener *l, const char *host, uint16_t port)
{
	struct verbs_ctx *vctx = l->ctx->verbs;
	struct verbs_listener *vl;
	struct addrinfo *res;
	int err;

	vl = calloc(1, sizeof(*vl));
	if (!vl)
		return -ENOMEM;
	vl->ep.kind = VERBS_EP_LISTENER;
	vl->l = l;

	err = verbs_getaddrinfo(host, port, true, &res);
	if (err)
		goto err_free_listener;
	if (rdma_create_id(vctx->channel, &vl->id, &vl->ep, RDMA_PS_TCP)) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: listen on %s:%u: rdma_create_id: %s",
			 host ? host : "*", port, strerror(-err));
		goto err_free_addr;
	}
	if (rdma_bind_addr(vl->id, verbs_pick_addr(res)->ai_addr)) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: listen on %s:%u: rdma_bind_addr: %s",
			 host ? host : "*", port, strerror(-err));
		goto err_destroy_id;
	}
	if (rdma_listen(vl->id, VERBS_LISTEN_BACKLOG)) {
		err = -errno;
		xprt_log(XPRT_LOG_ERR, "verbs: listen on %s:%u: rdma_listen: %s", host ? host : "*",
			 port, strerror(-err));
		goto err_destroy_id;
	}
	l->port = ntohs(rdma_get_src_port(vl->id));
	l->backend = vl;
	freeaddrinfo(res);
	return 0;

err_destroy_id:
	rdma_destroy_id(vl->id);
err_free_addr:
	freeaddrinfo(res);
err_free_listener:
	free(vl);
	return err;
}

static void verbs_listener_close(struct xprt_listener *l)
{
	struct verbs_listener *vl = l->backend;

	if (!vl)
		return;
	rdma_destroy_id(vl->id);
	free(vl);
	l->backend = NULL;
}

const struct xprt_backend_ops xprt_verbs_ops = {
	.name = "verbs",
	.kind = XPRT_KIND_VERBS,
	.ctx_init = verbs_ctx_init,
	.ctx_fini = verbs_ctx_fini,
	.progress = verbs_progress,
	.listen = verbs_listen,
	.listener_close = verbs_listener_close,
	.connect = verbs_connect,
	.send = verbs_send,
	.flush_held = verbs_flush_held,
	.wait = verbs_wait,
	.spin = verbs_spin,
	.rdma = verbs_rdma,
	.shutdown = verbs_shutdown,
	.sends_pending = verbs_sends_pending,
	.conn_destroy = verbs_conn_destroy,
	.mr_register = verbs_mr_register,
	.mr_deregister = verbs_mr_deregister,
	.mr_rkey = verbs_mr_rkey,
};
