/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The RPC server: the listener callback runs on the transport's progress
 * thread, which must wait neither for the network nor for the disk: it runs
 * the requests of microseconds itself (below) and queues the rest; worker
 * threads unpack those, validate every field, move the data with one-sided
 * RDMA and the disk with their own io_uring, and reply.
 *
 * Two lanes, each a queue and its threads: the data lane's `workers` own a
 * pool buffer and an io_uring each and run the chunk methods; the metadata
 * lane's `meta_workers` (only where the service runs; 0: the data lane runs
 * it too) run the metadata methods, which wait on LMDB and on group commit,
 * not on the disk's data or the NIC: with many of them, the write requests
 * of many clients commit together (meta/group.c) and data never queues
 * behind metadata.
 *
 * The requests that take microseconds skip the lanes: the thread that
 * received one, the transport's, runs it at once with the quick worker's
 * buffer and io_uring, as long as no other thread is running one (else it
 * queues as usual). Handing such a request to a worker cost more than running
 * it, and a client waiting for each answer paid that every time. They are:
 * - the quick metadata reads, and with metadata_sync = batch a client's
 *   changes: held until the end of the batch of requests they came in
 *   (batch_take(), server_batch_end(): libxprt's batch end, once this thread
 *   has delivered all it read at once), then run together, one group and one
 *   commit, when no group commits or waits (meta_may_run_inline()), else
 *   queued for the workers;
 * - a CHUNK_WRITE whose data came inside it and a CHUNK_READ whose answer
 *   fits inside the reply: no one-sided RDMA, which this thread would have
 *   to complete itself. Their reads never wait for the disk
 *   (store_io_nowait()). A chunk request that would need RDMA, an O_SYNC
 *   write (commit) or a read that would wait stops there before it changes
 *   anything (-EAGAIN, on_receipt()) and goes to a worker (handed_on), so a
 *   cold block never stalls the transport's thread. A write goes to the page
 *   cache as on a worker (creating a new chunk's file there).
 * - A read, or a write that must complete a partly covered block, refused
 *   only for a cold block is not handed on: this thread starts fetching its
 *   blocks into the page cache with the fetcher's io_uring
 *   (store_fetch_start(), whose descriptor the transport's progress thread
 *   watches: xprt_watch_add()) and answers nothing yet; when the fetch
 *   completes, fetch_done() runs the request again on receipt as above, and
 *   it finds its blocks in memory. So a cold block costs the disk and one
 *   wakeup of the progress thread, not a worker's two. At most FETCH_DEPTH
 *   wait so. One goes to a worker as before when the fetcher cannot take it
 *   (full, its chunk being written, a range past STORE_FETCH_MAX, a ring
 *   that failed), when its blocks are gone again from the page cache when
 *   it runs again (or it needs others: a write's pending blocks), or when
 *   another thread runs a request on receipt at that moment.
 *
 * Limits: one pool buffer per data worker bounds the RDMA in flight on the
 * whole daemon to `workers` operations of at most max_chunk_size bytes (the
 * quick worker's buffer carries no RDMA); each
 * lane's queue holds at most queue_depth requests, beyond which a request
 * gets -EBUSY at once (the transport's credits already bound each connection).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/statvfs.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_names.h"
#include "daemon_i.h"
#include "meta.h"

#define REPLY_MAX (64u << 10)
/* Fences a CHUNK_FENCE list answers at most (ChunkFenceReq.list): about 3 KiB. */
#define FENCE_LIST_MAX 128u
/* A CHUNK_READ reply's fields besides its inline data, at most. */
#define READ_REPLY_SLACK 64u
#define LIST_MAX	 1024u
#define SELECT_MAX	 65536u
/* Bad chunks a scrub remembers (bad_count counts them all). */
#define SCRUB_BAD_MAX 1024u
/* Chunks a scrub lists at once. */
#define SCRUB_PAGE 256u

/* Cold reads waiting for their fetch at once (fetch_later()). */
#define FETCH_DEPTH 64u
/* A handler's status for a request it keeps, to answer later (fetch_later()). */
#define ANSWER_LATER 1

#define BOUNDS	RDMAFS_LATENCY_BOUNDS
#define BUCKETS (BOUNDS + 1)

/* The methods counted one by one (SERVER_OPS in daemon_i.h); the rest as "other". */
enum op_slot {
	OP_WRITE,
	OP_READ,
	OP_COMMIT,
	OP_TRUNCATE,
	OP_REMOVE,
	OP_STAT,
	OP_LIST,
	OP_STATS,
	OP_SCRUB,
	OP_OTHER,
	OP_COUNT
};

static const uint32_t op_methods[OP_COUNT] = {
	RDMAFS__METHOD__METHOD_CHUNK_WRITE,  RDMAFS__METHOD__METHOD_CHUNK_READ,
	RDMAFS__METHOD__METHOD_CHUNK_COMMIT, RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE,
	RDMAFS__METHOD__METHOD_CHUNK_REMOVE, RDMAFS__METHOD__METHOD_CHUNK_STAT,
	RDMAFS__METHOD__METHOD_CHUNK_LIST,   RDMAFS__METHOD__METHOD_DAEMON_STATS,
	RDMAFS__METHOD__METHOD_SCRUB,	     RDMAFS__METHOD__METHOD_UNSPECIFIED,
};

_Static_assert(OP_COUNT == SERVER_OPS, "daemon_i.h's SERVER_OPS counts enum op_slot");

struct op_counters {
	uint64_t count, errors, bytes;
	struct rdmafs_latency latency;
};

struct queued {
	struct xprt_req *req;
	uint64_t start_ns;
	bool fetched; /* run again after its fetch: never fetched twice */
};

/*
 * A replicated write forwarded to this daemon (ChunkWriteReq.hop h > 0) runs
 * in lane LANE_HOP1 + h - 1: a worker forwarding at hop h waits only for
 * hop h + 1's workers, never for its own lane's, so chains that cross each
 * other never wait in a circle.
 */
enum { LANE_DATA, LANE_META, LANE_HOP1, LANES = LANE_HOP1 + RDMAFS_MAX_REPLICAS - 1 };

struct lane {
	pthread_cond_t cond; /* a request queued, or the server stops */
	struct queued *queue;
	unsigned cap, head, len;
	uint32_t in_flight;
	unsigned worker_count;
	struct worker *workers;
};

struct worker {
	struct server *srv;
	struct lane *lane;
	pthread_t thread;
	bool started;
	struct store_io *io;
	struct xprt_buf *buf;
	uint8_t *reply;
	bool keyed;		      /* the request being handled came with a client key */
	const struct queued *running; /* the request being handled */
	unsigned slot; /* a data worker's slot of the writes in flight (missed_inflight_begin()) */
};

struct scrub_bad {
	struct store_chunk_id id;
	uint32_t block;
	int32_t error;
};

/*
 * The background scrub: one at a time, its own thread and io_uring, one
 * chunk in flight. Guarded by its lock; the result stays until the next START.
 */
struct scrub_job {
	pthread_mutex_t lock;
	pthread_t thread;
	bool joinable;
	bool cancel;
	Rdmafs__JobState state;
	uint64_t total, checked, bytes, bad_count;
	struct scrub_bad bad[SCRUB_BAD_MAX];
	unsigned bad_kept;
	char error[128];
};

/*
 * The metadata changes that arrived in one batch of a receiving thread
 * (xprt_listen_batched()), served together at its end
 * (server_batch_end()): one group, one commit. The transport's lock guards
 * it: the daemon's one context calls server_request_cb() and
 * server_batch_end() with it held.
 */
#define BATCH_MAX 64u
struct batch {
	struct xprt_req *req[BATCH_MAX];
	struct meta_call call[BATCH_MAX];
	uint64_t start_ns[BATCH_MAX];
	unsigned n;
	bool serving;	  /* server_batch_end() is answering them: take no more meanwhile */
	uint8_t *replies; /* BATCH_MAX buffers of REPLY_MAX; NULL: no service, no batch */
};

struct server {
	struct xprt_ctx *ctx;
	struct meta *meta;
	struct store *store;
	struct keyring *keyring; /* NULL: no key is refused */
	uint8_t uuid[16];
	uint32_t max_chunk_size;
	struct xprt_pool *pool;
	struct chain *chain;   /* where replicated writes go on to; NULL: refused */
	struct dmap *dmap;     /* NULL: no degraded writes (server_params) */
	struct missed *missed; /* with dmap */
	struct resync *resync; /* with dmap */
	/* data_sync = batch: flushes the store within data_sync_ms of a close's commit */
	struct rdmafs_flusher *flusher;
	unsigned data_sync_ms;

	pthread_mutex_t lock; /* guards the lanes' queues and stopping */
	struct lane lanes[LANES];
	unsigned data_workers; /* so far: the next one's slot */
	bool stopping;
	/* what runs a quick metadata read on the receiving thread; its lock taken with trylock */
	pthread_mutex_t quick_lock;
	struct worker quick;
	struct batch batch; /* changes held for their receiving thread's batch end */
	/* cold blocks fetched on receipt: the requests waiting, by tag (a free one's req NULL) */
	struct store_fetch *fetch; /* NULL: handed on as any other */
	struct xprt_watch *fetch_watch;
	pthread_mutex_t fetch_lock;
	struct queued fetch_waits[FETCH_DEPTH];

	uint64_t start_ns;
	struct op_counters ops[OP_COUNT];
	uint64_t bytes_read, bytes_written, errors, checksum_errors, busy;
	uint64_t inline_writes, inline_reads;
	uint64_t run_on_receipt, handed_on; /* quick_run()'s and server_batch_end()'s */
	uint64_t fetched; /* of those, answered on receipt after their fetch (fetch_later()) */
	uint64_t batched; /* changes server_batch_end() served together */
	uint64_t rdma_bytes_in_flight;
	/* time spent in one-sided transfers and in the store, by direction */
	uint64_t rdma_read_ns, rdma_write_ns, disk_read_ns, disk_write_ns, disk_commit_ns;

	struct scrub_job scrub;
};

#define STAT_ADD(field, n) __atomic_add_fetch(&(field), (n), __ATOMIC_RELAXED)
#define STAT_GET(field)	   __atomic_load_n(&(field), __ATOMIC_RELAXED)

static enum op_slot op_slot_of(uint32_t method)
{
	for (unsigned i = 0; i < OP_OTHER; i++)
		if (op_methods[i] == method)
			return (enum op_slot)i;
	return OP_OTHER;
}

static void account(struct server *srv, uint32_t method, int status, uint64_t bytes,
		    uint64_t start_ns)
{
	struct op_counters *c = &srv->ops[op_slot_of(method)];

	STAT_ADD(c->count, 1);
	rdmafs_latency_record(&c->latency, rdmafs_now_ns() - start_ns);
	STAT_ADD(c->bytes, bytes);
	if (status) {
		STAT_ADD(c->errors, 1);
		STAT_ADD(srv->errors, 1);
	}
}

/* ---- validation helpers ---- */

static int chunk_id_from(const Rdmafs__ChunkId *c, struct store_chunk_id *id)
{
	if (!c)
		return -EINVAL;
	id->inode = c->inode;
	id->index = c->index;
	return 0;
}

static int selection_from(const Rdmafs__ChunkSelection *c, struct store_selection *sel)
{
	if (!c || (!c->range && c->n_indexes > SELECT_MAX) || (c->range && c->n_indexes))
		return -EINVAL;
	sel->inode = c->inode;
	sel->range = c->range;
	sel->indexes = c->indexes;
	sel->count = c->n_indexes;
	sel->first_index = c->first_index;
	return 0;
}

/* Packs @msg into the worker's reply buffer. */
static int pack_reply(struct worker *w, const ProtobufCMessage *msg, size_t *len)
{
	size_t need = protobuf_c_message_get_packed_size(msg);

	if (need > REPLY_MAX)
		return -EMSGSIZE;
	*len = protobuf_c_message_pack(msg, w->reply);
	return 0;
}

static void rdma_account(struct server *srv, int64_t delta)
{
	__atomic_add_fetch(&srv->rdma_bytes_in_flight, (uint64_t)delta, __ATOMIC_RELAXED);
}

/* ---- handlers: each returns a status and sets *reply_len ---- */

/*
 * store_fence_enter() for a chunk request of the worker's: the generation
 * no fence refuses (RFS_GENERATION_ADMIN, UINT64_MAX) is for the tools and
 * daemons that hold the cluster secret, which move chunks themselves: a
 * client key gets -EPERM for it, as for a forwarded write.
 */
static int fence_enter(struct worker *w, uint64_t inode, uint64_t generation)
{
	if (w->keyed && generation == UINT64_MAX)
		return -EPERM;
	return store_fence_enter(w->srv->store, inode, generation);
}

/*
 * Whether @w is the quick worker, which runs requests on the thread that
 * received them: one that needs one-sided RDMA (whose completion that thread
 * would have to deliver while it waits for it) or must wait for the disk
 * fails there with -EAGAIN before it changes anything, and a worker runs it.
 */
static bool on_receipt(const struct worker *w)
{
	return w == &w->srv->quick;
}

/* Whether @bytes of a read's answer go inside the reply: the client takes them, and they fit. */
static bool read_fits_inline(const Rdmafs__ChunkReadReq *m, struct xprt_req *req, uint32_t bytes)
{
	return bytes <= m->inline_max &&
	       bytes + READ_REPLY_SLACK <= xprt_conn_max_body(xprt_req_conn(req));
}

/*
 * The part of a replicated write or truncate that degraded chains add
 * (docs/replication.md, "Losing a daemon"): the checks against this daemon's
 * map, the daemons skipped, and the record of each daemon that missed it.
 */
struct repl {
	bool on;	/* the request named its members */
	bool skip_held; /* dmap_skip_enter() counted a skip: dmap_skip_leave() */
	uint64_t epoch;
	bool down[RDMAFS_MAX_REPLICAS];
	/* the daemons that missed it, as recorded and as sent on */
	uint8_t targets[RDMAFS_MAX_REPLICAS][RDMAFS_UUID_LEN];
	ProtobufCBinaryData target_list[RDMAFS_MAX_REPLICAS];
	unsigned n_targets;
	uint8_t members[RDMAFS_MAX_REPLICAS][RDMAFS_UUID_LEN];
	unsigned n_members;
};

static bool uuid_list_ok(const ProtobufCBinaryData *list, size_t n, size_t max)
{
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (list[i].len != RDMAFS_UUID_LEN)
			return false;
	return true;
}

/* Adds daemon @uuid to the daemons that missed the request, once. */
static void repl_target(struct repl *r, const uint8_t *uuid)
{
	for (unsigned i = 0; i < r->n_targets; i++)
		if (memcmp(r->targets[i], uuid, RDMAFS_UUID_LEN) == 0)
			return;
	if (r->n_targets == RDMAFS_MAX_REPLICAS)
		return; /* every member already: cannot happen for a chain of distinct daemons */
	memcpy(r->targets[r->n_targets], uuid, RDMAFS_UUID_LEN);
	r->target_list[r->n_targets] =
		(ProtobufCBinaryData){RDMAFS_UUID_LEN, r->targets[r->n_targets]};
	r->n_targets++;
}

/*
 * Checks a request naming @members against this daemon's map (dmap_skip_enter();
 * @head NULL for a truncate) and takes its @missed as daemons that missed it.
 * -EINVAL for malformed lists, -EOPNOTSUPP without a map, -EREMCHG.
 */
static int repl_enter(struct server *srv, struct repl *r, const ProtobufCBinaryData *head,
		      const ProtobufCBinaryData *members, size_t n_members,
		      const ProtobufCBinaryData *missed, size_t n_missed)
{
	int ret;

	memset(r, 0, sizeof(*r));
	if (!n_members)
		return n_missed || (head && head->len) ? -EINVAL : 0;
	if (!uuid_list_ok(members, n_members, RDMAFS_MAX_REPLICAS) ||
	    !uuid_list_ok(missed, n_missed, n_members) || (head && head->len != RDMAFS_UUID_LEN))
		return -EINVAL;
	if (!srv->dmap || !srv->missed)
		return -EOPNOTSUPP;
	ret = dmap_skip_enter(srv->dmap, head, members, n_members, missed, n_missed, r->down,
			      &r->epoch);
	if (ret < 0)
		return ret;
	r->on = true;
	r->skip_held = ret == 1;
	r->n_members = (unsigned)n_members;
	for (size_t i = 0; i < n_members; i++)
		memcpy(r->members[i], members[i].data, RDMAFS_UUID_LEN);
	for (size_t i = 0; i < n_missed; i++)
		repl_target(r, missed[i].data);
	return 0;
}

/* Which of @r's members @uuid is; -1 for none. */
static int repl_member(const struct repl *r, const ProtobufCBinaryData *uuid)
{
	for (unsigned i = 0; uuid->len == RDMAFS_UUID_LEN && i < r->n_members; i++)
		if (memcmp(r->members[i], uuid->data, RDMAFS_UUID_LEN) == 0)
			return (int)i;
	return -1;
}

/* Records, on disk, each daemon that missed chunk @id (see missed.c). */
static int repl_record(struct server *srv, const struct repl *r, struct store_chunk_id id)
{
	int ret;

	if (!r->on || !r->n_targets)
		return 0;
	ret = missed_add(srv->missed, id, (const uint8_t(*)[16])r->targets, r->n_targets,
			 (const uint8_t(*)[16])r->members, r->n_members);
	if (ret)
		rdmafs_log(RDMAFS_LOG_ERR,
			   "chunk %016" PRIx64 "/%016" PRIx64
			   ": cannot record the daemons that missed a write: %s",
			   id.inode, id.index, strerror(-ret));
	return ret;
}

static void repl_leave(struct server *srv, struct repl *r)
{
	if (r->skip_held)
		dmap_skip_leave(srv->dmap, r->epoch);
	r->skip_held = false;
}

/*
 * Whether a daemon that serves reads in our map is recorded as lacking a write
 * of chunk @id that this copy holds (a forward that failed, a write this
 * daemon headed when it was killed): CRAQ's dirty, until the resync's copy.
 * A daemon DOWN or SYNCING serves no read, so a copy that alone holds what
 * they missed serves as before.
 */
static bool ahead_of_a_copy(struct server *srv, struct store_chunk_id id)
{
	uint8_t targets[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	size_t n = 0;

	/* cannot tell (an error): the client reads another copy */
	return srv->missed &&
	       (missed_of_chunk_serving(srv->missed, srv->dmap, id, targets, &n) || n);
}

/*
 * The status of a read or write @w runs whose store call answered @status:
 * ANSWER_LATER when it ran on receipt and found a block of [@offset,
 * @offset + @len) of chunk @id out of the page cache (-EAGAIN, having
 * changed nothing), and is kept until a fetch of those blocks completes (see
 * the top of this file); else @status, and such a request is handed on as
 * before.
 */
static int fetch_later(struct worker *w, int status, struct store_chunk_id id, uint32_t offset,
		       uint32_t len)
{
	struct server *srv = w->srv;
	unsigned tag = 0;

	if (status != -EAGAIN || !on_receipt(w) || !srv->fetch || w->running->fetched ||
	    !store_io_can_fetch(w->io))
		return status;
	pthread_mutex_lock(&srv->fetch_lock);
	while (tag < FETCH_DEPTH && srv->fetch_waits[tag].req)
		tag++;
	if (tag < FETCH_DEPTH) {
		srv->fetch_waits[tag] = *w->running;
		srv->fetch_waits[tag].fetched = true;
	}
	pthread_mutex_unlock(&srv->fetch_lock);
	if (tag == FETCH_DEPTH)
		return status;
	if (store_fetch_start(srv->fetch, id, offset, len, tag)) {
		pthread_mutex_lock(&srv->fetch_lock);
		srv->fetch_waits[tag].req = NULL;
		pthread_mutex_unlock(&srv->fetch_lock);
		return status;
	}
	return ANSWER_LATER;
}

static int do_write(struct worker *w, struct xprt_req *req, const void *body, size_t len,
		    size_t *reply_len, uint64_t *moved)
{
	struct server *srv = w->srv;
	Rdmafs__ChunkWriteReq *m = rdmafs__chunk_write_req__unpack(NULL, len, body);
	Rdmafs__ChunkWriteResp resp = RDMAFS__CHUNK_WRITE_RESP__INIT;
	struct store_chunk_info info;
	struct store_chunk_id id;
	uint8_t *base = xprt_buf_data(w->buf), *payload;
	struct chain_call fwd = {.started = false};
	struct repl r = {.on = false};
	bool ordered = false, dirty, inflight;
	size_t skip = 0;
	uint64_t t;
	int ret, chain_ret = 0;

	if (!m)
		return -EBADMSG;
	ret = chunk_id_from(m->chunk, &id);
	/* the payload comes inline (exactly length bytes) or from buf */
	if (ret || (m->data.len ? m->data.len != m->length : !m->buf || m->buf->len < m->length) ||
	    m->chunk_size == 0 || m->chunk_size > srv->max_chunk_size ||
	    (uint64_t)m->offset + m->length > m->chunk_size || m->length == 0) {
		ret = -EINVAL;
		goto out_free;
	}
	/* a hop at most per replica after the head; the chain says where the write goes on */
	if (m->hop + m->n_chain >= RDMAFS_MAX_REPLICAS) {
		ret = -EINVAL;
		goto out_free;
	}
	/* only daemons forward (a forwarded write passes fences): not a client's key */
	if (m->hop > 0 && w->keyed) {
		ret = -EPERM;
		goto out_free;
	}
	if (m->n_chain && !srv->chain) {
		ret = -EOPNOTSUPP;
		goto out_free;
	}
	/* meant for another daemon (a client's stale map): nothing stored */
	if (m->to.len && (m->to.len != RDMAFS_UUID_LEN || memcmp(m->to.data, srv->uuid, 16))) {
		ret = -ESTALE;
		goto out_free;
	}
	/* RDMA, a wait for the disk (O_SYNC, a record) or the next daemon: not on this thread */
	if (on_receipt(w) && (!m->data.len || m->commit || m->n_chain || m->n_members)) {
		ret = -EAGAIN;
		goto out_free;
	}
	/* a replicated write: our map must agree with the sender's (else nothing is stored) */
	ret = repl_enter(srv, &r, &m->head, m->members, m->n_members, m->missed, m->n_missed);
	if (!ret && (!uuid_list_ok(m->lacking, m->n_lacking, RDMAFS_MAX_REPLICAS) ||
		     (m->n_lacking && !r.on)))
		ret = -EINVAL;
	if (ret)
		goto out_free;
	for (size_t i = 0; r.on && i < m->n_chain; i++) {
		if (repl_member(&r, &m->chain[i]->uuid) < 0) {
			ret = -EINVAL; /* a chain that is not of the members */
			goto out_free;
		}
	}
	/* the daemons next in the chain that our map shows DOWN are skipped, and recorded */
	for (; r.on && skip < m->n_chain; skip++) {
		int i = repl_member(&r, &m->chain[skip]->uuid);

		if (!r.down[i])
			break;
		repl_target(&r, r.members[i]);
	}
	payload = base + m->offset % STORE_BLOCK_SIZE;
	if (m->data.len) {
		memcpy(payload, m->data.data, m->length);
		if (!w->running->fetched) /* counted when it first ran */
			STAT_ADD(srv->inline_writes, 1);
	} else {
		rdma_account(srv, m->length);
		t = rdmafs_now_ns();
		ret = xprt_rdma_read(xprt_req_conn(req), payload, xprt_buf_mr(w->buf), m->buf->addr,
				     m->buf->rkey, m->length, 0);
		STAT_ADD(srv->rdma_read_ns, rdmafs_now_ns() - t);
		rdma_account(srv, -(int64_t)m->length);
		if (ret)
			goto out_free;
	}
	*moved = m->length;
	if (rdmafs_crc32c(payload, m->length) != m->crc32c) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "chunk %016" PRIx64 "/%016" PRIx64 ": write payload from %s fails"
			   " its checksum (%u bytes at %u)",
			   id.inode, id.index, xprt_conn_peer_name(xprt_req_conn(req)), m->length,
			   m->offset);
		STAT_ADD(srv->checksum_errors, 1);
		ret = -EIO;
		goto out_free;
	}
	/* the head orders a chunk's writes through its chain (chain_order_lock()) */
	ordered = m->n_chain && m->hop == 0;
	if (ordered)
		chain_order_lock(srv->chain, id.inode, id.index);
	/*
	 * After the RDMA READ: a fence never waits for a client's network. A write
	 * forwarded along its chain passes the fence (still counted in progress, so
	 * a fence waits for it): the head took it before its own fence, and a move
	 * fences every daemon of the layout before it copies (ctl_fence_layout()),
	 * so every copy gets each write a head took, or none does.
	 */
	ret = fence_enter(w, id.inode, m->hop > 0 ? UINT64_MAX : m->layout_generation);
	if (ret)
		goto out_free;
	/* the head: a kill before the misses are recorded leaves a note of the write (missed.c) */
	inflight = r.on && m->hop == 0;
	if (inflight)
		missed_inflight_begin(srv->missed, w->slot, id, (const uint8_t(*)[16])r.members,
				      r.n_members);
	/*
	 * The next daemon pulls and stores its copy while we store ours; until
	 * its answer our copy is dirty, and replicated reads go on down the chain.
	 */
	dirty = m->n_chain > skip;
	if (dirty) {
		chain_dirty_begin(srv->chain, id.inode, id.index);
		chain_ret = chain_forward_start(srv->chain, m, skip, r.target_list, r.n_targets,
						w->buf, payload, &fwd);
	}
	/* a replicated write is stored here even when the next daemon fails: the miss is recorded
	 */
	if (!chain_ret || r.on) {
		t = rdmafs_now_ns();
		ret = store_write(w->io, id, m->offset, m->length, base, m->commit,
				  m->zeros_as_hole, &info);
		STAT_ADD(srv->disk_write_ns, rdmafs_now_ns() - t);
	}
	/* the chain's answer is ours: every daemon after this one stored it too */
	if (fwd.started)
		chain_ret = chain_forward_end(&fwd);
	store_fence_leave(srv->store);
	/* a block to complete out of the page cache, on receipt: after its fetch, else handed on */
	ret = fetch_later(w, ret, id, m->offset, m->length);
	if (ret == -EBADMSG) {
		STAT_ADD(srv->checksum_errors, 1);
		ret = -EIO;
	}
	if (!ret && r.on) {
		/* who missed it after us, or may have (a chain that failed): the resync copies */
		for (unsigned i = 0; !chain_ret && i < fwd.n_missed; i++)
			repl_target(&r, fwd.missed[i]);
		/*
		 * ... but not a daemon that refused it for a newer layout (-ESTALE: a
		 * drain or rebalance fenced the file there): the client redoes the write
		 * through that layout, and a record would have the resync copy this
		 * chunk by the old chain after the move (onto a daemon that no longer
		 * holds it, or over a newer copy)
		 */
		for (size_t i = skip; chain_ret && chain_ret != -ESTALE && i < m->n_chain; i++)
			repl_target(&r, m->chain[i]->uuid.data);
		/* a resync's copy: the others that still lack the chunk are ours to record */
		for (size_t i = 0; i < m->n_lacking; i++)
			if (memcmp(m->lacking[i].data, srv->uuid, RDMAFS_UUID_LEN) != 0)
				repl_target(&r, m->lacking[i].data);
		if (repl_record(srv, &r, id)) {
			/*
			 * At the head nobody else knows who lacks what it stored (a
			 * daemon after it that fails records the rest): stop as a kill
			 * would, the write's note kept, so that the next start records
			 * it (missed_inflight_open()) before serving anything.
			 */
			if (inflight) {
				rdmafs_log(RDMAFS_LOG_ERR,
					   "chunk %016" PRIx64 "/%016" PRIx64
					   ": stopping: this daemon heads the chunk's chain and "
					   "cannot record which daemons lack its write; the next "
					   "start records it from meta/inflight",
					   id.inode, id.index);
				_exit(EXIT_FAILURE);
			}
			ret = -EIO;
		}
	}
	/* clean once the chain answered and who missed the write is on record (a dirty read) */
	if (dirty)
		chain_dirty_end(srv->chain, id.inode, id.index);
	if (inflight)
		missed_inflight_end(srv->missed, w->slot);
	if (!ret)
		ret = chain_ret;
	if (ret)
		goto out_free;
	STAT_ADD(srv->bytes_written, m->length);
	resp.chunk_length = info.length;
	resp.version = info.version;
	resp.missed = r.target_list;
	resp.n_missed = r.n_targets;
	ret = pack_reply(w, &resp.base, reply_len);
out_free:
	repl_leave(srv, &r);
	if (ordered)
		chain_order_unlock(srv->chain, id.inode, id.index);
	rdmafs__chunk_write_req__free_unpacked(m, NULL);
	return ret;
}

static int do_read(struct worker *w, struct xprt_req *req, const void *body, size_t len,
		   size_t *reply_len, uint64_t *moved)
{
	struct server *srv = w->srv;
	Rdmafs__ChunkReadReq *m = rdmafs__chunk_read_req__unpack(NULL, len, body);
	Rdmafs__ChunkReadResp resp = RDMAFS__CHUNK_READ_RESP__INIT;
	struct store_chunk_id id;
	uint8_t *base = xprt_buf_data(w->buf), *data;
	uint32_t bytes, chunk_length;
	uint64_t t;
	bool dirty_check;
	int ret;

	if (!m)
		return -EBADMSG;
	ret = chunk_id_from(m->chunk, &id);
	if (ret || !m->buf || (uint64_t)m->offset + m->length > srv->max_chunk_size ||
	    m->buf->len < m->length) {
		ret = -EINVAL;
		goto out_free;
	}
	/* an answer too long to go inline needs RDMA: not on the receiving thread */
	if (on_receipt(w) && !read_fits_inline(m, req, m->length)) {
		ret = -EAGAIN;
		goto out_free;
	}
	/* a copy that may lack writes (no lease, SYNCING) lets the client read another */
	if (m->replicated && srv->dmap && !dmap_may_serve(srv->dmap)) {
		ret = -EREMCHG;
		goto out_free;
	}
	/*
	 * A copy with a write on its way down the chain, or one a daemon serving
	 * reads is recorded as lacking: the client reads on toward the tail.
	 */
	dirty_check = m->replicated && srv->chain;
	if (dirty_check &&
	    (chain_dirty(srv->chain, id.inode, id.index) || ahead_of_a_copy(srv, id))) {
		ret = -EINPROGRESS;
		goto out_free;
	}
	data = base + m->offset % STORE_BLOCK_SIZE;
	/* a reader with a replaced layout would miss writes made through the new one */
	ret = fence_enter(w, id.inode, m->layout_generation);
	if (ret)
		goto out_free;
	t = rdmafs_now_ns();
	ret = store_read(w->io, id, m->offset, m->length, base, &bytes, &chunk_length);
	STAT_ADD(srv->disk_read_ns, rdmafs_now_ns() - t);
	store_fence_leave(srv->store);
	/* a cold block on receipt: answered once it is fetched, else handed on */
	ret = fetch_later(w, ret, id, m->offset, m->length);
	/*
	 * ... also one that began while we read and is still on its way, or that
	 * failed on its way and was recorded meanwhile: we may hold its bytes
	 */
	if (!ret && dirty_check &&
	    (chain_dirty(srv->chain, id.inode, id.index) || ahead_of_a_copy(srv, id)))
		ret = -EINPROGRESS;
	if (ret == -EBADMSG) {
		STAT_ADD(srv->checksum_errors, 1);
		ret = -EIO;
	}
	if (ret)
		goto out_free;
	if (bytes && read_fits_inline(m, req, bytes)) {
		resp.data.data = data;
		resp.data.len = bytes;
		STAT_ADD(srv->inline_reads, 1);
	} else if (bytes) {
		rdma_account(srv, bytes);
		t = rdmafs_now_ns();
		ret = xprt_rdma_write(xprt_req_conn(req), data, xprt_buf_mr(w->buf), m->buf->addr,
				      m->buf->rkey, bytes, 0);
		STAT_ADD(srv->rdma_write_ns, rdmafs_now_ns() - t);
		rdma_account(srv, -(int64_t)bytes);
		if (ret)
			goto out_free;
	}
	*moved = bytes;
	STAT_ADD(srv->bytes_read, bytes);
	resp.bytes = bytes;
	resp.crc32c = rdmafs_crc32c(data, bytes);
	resp.chunk_length = chunk_length;
	ret = pack_reply(w, &resp.base, reply_len);
out_free:
	rdmafs__chunk_read_req__free_unpacked(m, NULL);
	return ret;
}

/*
 * A close's commit with data_sync = batch (on_close, a flusher running) is
 * answered at once, on receipt too: the writes it covers were answered, so
 * they are in the page cache, and the flusher's next store_flush(), which
 * begins after the note and within data_sync_ms, takes them to the disk
 * (the answer's durable_within_ms). Any other commit runs on a worker: a
 * durable one flushes its chunks, and then every close's commit deferred
 * and not yet flushed (rdmafs_flusher_sync()), before its answer. So an
 * fsync that reaches this daemon, whatever chunks it names, leaves nothing
 * a close deferred here off the disk, and answers the flush's error if it
 * fails.
 */
static int do_commit(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	Rdmafs__ChunkCommitReq *m = rdmafs__chunk_commit_req__unpack(NULL, len, body);
	Rdmafs__ChunkCommitResp resp = RDMAFS__CHUNK_COMMIT_RESP__INIT;
	struct server *srv = w->srv;
	struct store_selection sel;
	bool later;
	int ret;

	if (!m)
		return -EBADMSG;
	later = m->on_close && !m->report_only && srv->flusher;
	if (on_receipt(w) && !later) {
		ret = -EAGAIN; /* a flush, or the index's checkpoint for a report, waits */
		goto out_free;
	}
	ret = selection_from(m->chunks, &sel);
	if (!ret)
		ret = fence_enter(w, sel.inode, m->layout_generation);
	if (!ret) {
		uint64_t t = rdmafs_now_ns();

		if (later) {
			rdmafs_flusher_note(srv->flusher);
			resp.durable_within_ms = srv->data_sync_ms;
		} else if (!m->report_only) {
			ret = store_commit(w->io, &sel);
			if (!ret && srv->flusher)
				ret = rdmafs_flusher_sync(srv->flusher);
		}
		STAT_ADD(srv->disk_commit_ns, rdmafs_now_ns() - t);
		/*
		 * The client reports it to the metadata service: st_blocks without a
		 * stat here. Inside the fence, so that a drained daemon answers -ESTALE
		 * rather than the bytes of chunks it is about to give up.
		 */
		if (!ret && store_allocated(srv->store, sel.inode, &resp.allocated_bytes) == 0)
			resp.allocated_known = true;
		store_fence_leave(srv->store);
	}
	if (!ret)
		ret = pack_reply(w, &resp.base, reply_len);
out_free:
	rdmafs__chunk_commit_req__free_unpacked(m, NULL);
	return ret;
}

static int do_truncate(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	Rdmafs__ChunkTruncateReq *m = rdmafs__chunk_truncate_req__unpack(NULL, len, body);
	Rdmafs__ChunkTruncateResp resp = RDMAFS__CHUNK_TRUNCATE_RESP__INIT;
	struct store_chunk_info info;
	struct store_chunk_id id;
	struct repl r;
	int ret;

	if (!m)
		return -EBADMSG;
	ret = chunk_id_from(m->chunk, &id);
	if (!ret && m->length > w->srv->max_chunk_size)
		ret = -EINVAL;
	/* the daemons the client skipped (DOWN) must be DOWN in our map too, and are recorded */
	if (!ret)
		ret = repl_enter(w->srv, &r, NULL, m->members, m->n_members, m->missed,
				 m->n_missed);
	else
		memset(&r, 0, sizeof(r));
	if (!ret)
		ret = fence_enter(w, id.inode, m->layout_generation);
	if (!ret) {
		ret = store_truncate(w->io, id, m->length, &info);
		store_fence_leave(w->srv->store);
	}
	if (!ret && repl_record(w->srv, &r, id))
		ret = -EIO;
	repl_leave(w->srv, &r);
	if (ret == -EBADMSG) {
		STAT_ADD(w->srv->checksum_errors, 1);
		ret = -EIO;
	}
	if (!ret) {
		resp.chunk_length = info.length;
		resp.version = info.version;
		ret = pack_reply(w, &resp.base, reply_len);
	}
	rdmafs__chunk_truncate_req__free_unpacked(m, NULL);
	return ret;
}

static int do_remove(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	Rdmafs__ChunkRemoveReq *m = rdmafs__chunk_remove_req__unpack(NULL, len, body);
	Rdmafs__ChunkRemoveResp resp = RDMAFS__CHUNK_REMOVE_RESP__INIT;
	struct store_selection sel;
	int ret;

	if (!m)
		return -EBADMSG;
	ret = selection_from(m->chunks, &sel);
	if (!ret)
		ret = fence_enter(w, sel.inode, m->layout_generation);
	if (!ret) {
		ret = store_remove(w->io, &sel, &resp.removed, &resp.bytes_freed);
		store_fence_leave(w->srv->store);
	}
	if (!ret)
		ret = pack_reply(w, &resp.base, reply_len);
	rdmafs__chunk_remove_req__free_unpacked(m, NULL);
	return ret;
}

/* CHUNK_FENCE: see rdmafs.proto; the store makes it durable and waits out requests. */
static int do_fence(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	Rdmafs__ChunkFenceReq *m = rdmafs__chunk_fence_req__unpack(NULL, len, body);
	Rdmafs__ChunkFenceResp resp = RDMAFS__CHUNK_FENCE_RESP__INIT;
	struct store_fence fences[FENCE_LIST_MAX];
	Rdmafs__FenceEntry entries[FENCE_LIST_MAX], *list[FENCE_LIST_MAX];
	size_t count = 0;
	int ret;

	if (!m)
		return -EBADMSG;
	if (m->list) {
		bool more = false;

		ret = store_fence_list(w->srv->store, m->inode, fences, FENCE_LIST_MAX, &count,
				       &more);
		resp.more = more;
		for (size_t i = 0; i < count; i++) {
			rdmafs__fence_entry__init(&entries[i]);
			entries[i].inode = fences[i].inode;
			entries[i].generation = fences[i].generation;
			list[i] = &entries[i];
		}
		resp.fences = list;
		resp.n_fences = count;
	} else {
		ret = store_fence_set(w->srv->store, m->inode, m->generation, m->lift, &resp.fence);
	}
	if (!ret)
		ret = pack_reply(w, &resp.base, reply_len);
	rdmafs__chunk_fence_req__free_unpacked(m, NULL);
	return ret;
}

/*
 * CHUNK_RESYNC (rdmafs.proto): a daemon killed heading a write of a chunk,
 * back while this daemon heads the chain, hands its copy over: the daemons
 * of targets are recorded here as lacking the chunk, and the resync copies it
 * to them (ask); later, whether those copies are done.
 */
static int do_resync(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	struct server *srv = w->srv;
	Rdmafs__ChunkResyncReq *m;
	Rdmafs__Empty resp = RDMAFS__EMPTY__INIT;
	uint8_t targets[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	uint8_t members[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	uint8_t lacking[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	struct store_chunk_id id;
	unsigned n_targets = 0;
	size_t n_lacking = 0;
	int h, ret;

	if (w->keyed)
		return -EPERM; /* a daemon's call, under the cluster secret */
	m = rdmafs__chunk_resync_req__unpack(NULL, len, body);
	if (!m)
		return -EBADMSG;
	ret = chunk_id_from(m->chunk, &id);
	if (!ret && (!m->n_members || !uuid_list_ok(m->members, m->n_members, MISSED_MEMBERS_MAX) ||
		     !uuid_list_ok(m->targets, m->n_targets, m->n_members)))
		ret = -EINVAL;
	if (!ret && (!srv->dmap || !srv->missed))
		ret = -EOPNOTSUPP;
	if (!ret) {
		/* only the head orders the chunk's writes: it alone may say which bytes stand */
		h = dmap_head(srv->dmap, m->members, m->n_members);
		if (!dmap_leased(srv->dmap) || h < 0 ||
		    memcmp(m->members[h].data, srv->uuid, RDMAFS_UUID_LEN) != 0)
			ret = -EREMCHG;
	}
	for (size_t i = 0; !ret && i < m->n_members; i++)
		memcpy(members[i], m->members[i].data, RDMAFS_UUID_LEN);
	for (size_t i = 0; !ret && i < m->n_targets; i++) {
		size_t j = 0;

		while (j < m->n_members && memcmp(members[j], m->targets[i].data, RDMAFS_UUID_LEN))
			j++;
		if (j == m->n_members)
			ret = -EINVAL; /* not of the chain */
		else if (memcmp(members[j], srv->uuid, RDMAFS_UUID_LEN) != 0)
			memcpy(targets[n_targets++], members[j], RDMAFS_UUID_LEN);
	}
	if (!ret && m->ask) {
		/* marked recovered: handed on if another daemon heads the chain before the copy */
		ret = missed_add_handed(srv->missed, id, (const uint8_t(*)[16])targets, n_targets,
					(const uint8_t(*)[16])members, (unsigned)m->n_members);
		if (!ret) {
			rdmafs_log(RDMAFS_LOG_INFO,
				   "chunk %016" PRIx64 "/%016" PRIx64
				   ": a copy killed heading a write of it was handed to this "
				   "daemon, the chain's head: copying ours to %u daemons",
				   id.inode, id.index, n_targets);
			resync_kick(srv->resync);
		}
	} else if (!ret) {
		ret = missed_of_chunk(srv->missed, id, lacking, MISSED_MEMBERS_MAX, &n_lacking);
		for (size_t i = 0; !ret && i < n_lacking; i++)
			for (unsigned j = 0; j < n_targets; j++)
				if (memcmp(lacking[i], targets[j], RDMAFS_UUID_LEN) == 0)
					ret = -EINPROGRESS; /* a copy still to go */
	}
	if (!ret)
		ret = pack_reply(w, &resp.base, reply_len);
	rdmafs__chunk_resync_req__free_unpacked(m, NULL);
	return ret;
}

static int do_stat(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	Rdmafs__ChunkStatReq *m = rdmafs__chunk_stat_req__unpack(NULL, len, body);
	Rdmafs__ChunkStatResp resp = RDMAFS__CHUNK_STAT_RESP__INIT;
	struct store_chunk_info info;
	struct store_chunk_id id;
	int ret;

	if (!m)
		return -EBADMSG;
	ret = chunk_id_from(m->chunk, &id);
	if (!ret)
		ret = store_stat(w->srv->store, id, &info);
	if (!ret) {
		resp.exists = info.exists;
		resp.length = info.length;
		resp.version = info.version;
		resp.block_size = STORE_BLOCK_SIZE;
		resp.block_count = info.block_count;
		ret = pack_reply(w, &resp.base, reply_len);
	}
	rdmafs__chunk_stat_req__free_unpacked(m, NULL);
	return ret;
}

static int do_list(struct worker *w, struct xprt_req *req, const void *body, size_t len,
		   size_t *reply_len)
{
	Rdmafs__ChunkListReq *m = rdmafs__chunk_list_req__unpack(NULL, len, body);
	Rdmafs__ChunkListResp resp = RDMAFS__CHUNK_LIST_RESP__INIT;
	/* An entry packs to at most 2 + (2 + 11 + 11) + 6 + 11 bytes. */
	size_t fit = xprt_conn_max_body(xprt_req_conn(req)) / 48, max, count = 0;
	struct store_list_entry *entries = NULL;
	Rdmafs__ChunkListEntry *msgs = NULL, **ptrs = NULL;
	Rdmafs__ChunkId *ids = NULL;
	struct store_chunk_id after;
	bool done;
	int ret;

	if (!m)
		return -EBADMSG;
	max = fit < LIST_MAX ? fit : LIST_MAX;
	if (m->limit && m->limit < max)
		max = m->limit;
	if (m->start_after) {
		after.inode = m->start_after->inode;
		after.index = m->start_after->index;
	}
	entries = calloc(max ? max : 1, sizeof(*entries));
	msgs = calloc(max ? max : 1, sizeof(*msgs));
	ptrs = calloc(max ? max : 1, sizeof(*ptrs));
	ids = calloc(max ? max : 1, sizeof(*ids));
	if (!entries || !msgs || !ptrs || !ids) {
		ret = -ENOMEM;
		goto out_free;
	}
	ret = store_list(w->srv->store, m->start_after ? &after : NULL, entries, max, &count,
			 &done);
	if (ret)
		goto out_free;
	for (size_t i = 0; i < count; i++) {
		rdmafs__chunk_list_entry__init(&msgs[i]);
		rdmafs__chunk_id__init(&ids[i]);
		ids[i].inode = entries[i].id.inode;
		ids[i].index = entries[i].id.index;
		msgs[i].chunk = &ids[i];
		msgs[i].length = entries[i].length;
		msgs[i].version = entries[i].version;
		ptrs[i] = &msgs[i];
	}
	resp.n_chunks = count;
	resp.chunks = ptrs;
	resp.done = done;
	ret = pack_reply(w, &resp.base, reply_len);
out_free:
	free(ids);
	free(ptrs);
	free(msgs);
	free(entries);
	rdmafs__chunk_list_req__free_unpacked(m, NULL);
	return ret;
}

void server_stats_get(struct server *srv, struct server_stats *out)
{
	struct xprt_ctx_stats conns;
	struct statvfs vfs;

	memset(out, 0, sizeof(*out));
	out->uptime_ns = rdmafs_now_ns() - srv->start_ns;
	for (unsigned i = 0; i < OP_COUNT; i++) {
		out->ops[i].method = op_methods[i];
		out->ops[i].count = STAT_GET(srv->ops[i].count);
		out->ops[i].errors = STAT_GET(srv->ops[i].errors);
		out->ops[i].bytes = STAT_GET(srv->ops[i].bytes);
		rdmafs_latency_read(&srv->ops[i].latency, &out->ops[i].latency);
	}
	out->bytes_read = STAT_GET(srv->bytes_read);
	out->bytes_written = STAT_GET(srv->bytes_written);
	out->errors = STAT_GET(srv->errors);
	out->checksum_errors = STAT_GET(srv->checksum_errors);
	out->rdma_bytes_in_flight = STAT_GET(srv->rdma_bytes_in_flight);
	out->inline_writes = STAT_GET(srv->inline_writes);
	out->inline_reads = STAT_GET(srv->inline_reads);
	resync_counts(srv->resync, &out->resync_pushed, &out->resync_failed);
	out->missed_records = srv->missed ? missed_count(srv->missed) : 0;
	out->map_epoch = srv->dmap ? dmap_epoch(srv->dmap) : 0;
	out->run_on_receipt = STAT_GET(srv->run_on_receipt);
	out->handed_on = STAT_GET(srv->handed_on);
	out->fetched = STAT_GET(srv->fetched);
	out->pending_reads = srv->store ? store_pending_reads(srv->store) : 0;
	if (srv->flusher) {
		struct rdmafs_flusher_counts fc;

		rdmafs_flusher_counts(srv->flusher, &fc);
		out->commits_deferred = fc.notes;
		out->data_flushes = fc.flushes;
		out->data_flush_errors = fc.errors;
	}
	out->batched = STAT_GET(srv->batched);
	out->rdma_read_ns = STAT_GET(srv->rdma_read_ns);
	out->rdma_write_ns = STAT_GET(srv->rdma_write_ns);
	out->disk_read_ns = STAT_GET(srv->disk_read_ns);
	out->disk_write_ns = STAT_GET(srv->disk_write_ns);
	out->disk_commit_ns = STAT_GET(srv->disk_commit_ns);
	pthread_mutex_lock(&srv->lock);
	for (unsigned l = 0; l < LANES; l++) {
		out->in_flight += srv->lanes[l].in_flight;
		out->queued += srv->lanes[l].len;
	}
	/* queue_depth and workers as configured: the data lane's */
	out->queue_capacity = srv->lanes[LANE_DATA].cap;
	out->workers = srv->lanes[LANE_DATA].worker_count;
	out->busy = srv->busy;
	pthread_mutex_unlock(&srv->lock);
	xprt_ctx_stats(srv->ctx, &conns);
	for (unsigned k = 0; k <= XPRT_KIND_TCP; k++)
		out->connections += conns.served[k];
	out->connections_verbs = conns.served[XPRT_KIND_VERBS];
	out->connections_tcp = conns.served[XPRT_KIND_TCP];
	out->connections_handshaking = conns.handshaking;
	if (fstatvfs(store_data_fd(srv->store), &vfs) == 0) {
		out->capacity_known = true;
		out->capacity_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
		out->free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	}
	out->chunks = store_chunk_count(srv->store);
}

static int do_stats(struct worker *w, const void *body, size_t len, size_t *reply_len)
{
	struct server *srv = w->srv;
	Rdmafs__DaemonStatsReq *m = rdmafs__daemon_stats_req__unpack(NULL, len, body);
	Rdmafs__DaemonStatsResp resp = RDMAFS__DAEMON_STATS_RESP__INIT;
	Rdmafs__OpStats ops[OP_COUNT], *op_ptrs[OP_COUNT];
	uint64_t bounds[BOUNDS];
	struct server_stats *st;
	int ret;

	if (!m)
		return -EBADMSG;
	rdmafs__daemon_stats_req__free_unpacked(m, NULL);
	st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	server_stats_get(srv, st);
	resp.uuid.data = srv->uuid;
	resp.uuid.len = sizeof(srv->uuid);
	resp.version = (char *)RDMAFS_VERSION;
	resp.uptime_sec = st->uptime_ns / 1000000000u;
	memcpy(bounds, rdmafs_latency_bounds_us, sizeof(bounds));
	resp.latency_bounds_us = bounds;
	resp.n_latency_bounds_us = BOUNDS;
	for (unsigned i = 0; i < OP_COUNT; i++) {
		rdmafs__op_stats__init(&ops[i]);
		ops[i].method = (Rdmafs__Method)st->ops[i].method;
		ops[i].count = st->ops[i].count;
		ops[i].errors = st->ops[i].errors;
		ops[i].bytes = st->ops[i].bytes;
		ops[i].latency_buckets = st->ops[i].latency.buckets;
		ops[i].n_latency_buckets = BUCKETS;
		op_ptrs[i] = &ops[i];
	}
	resp.ops = op_ptrs;
	resp.n_ops = OP_COUNT;
	resp.bytes_read = st->bytes_read;
	resp.bytes_written = st->bytes_written;
	resp.errors = st->errors;
	resp.checksum_errors = st->checksum_errors;
	resp.capacity_bytes = st->capacity_bytes;
	resp.free_bytes = st->free_bytes;
	resp.chunks = st->chunks;
	resp.connections = st->connections;
	resp.requests_in_flight = st->in_flight;
	resp.rdma_bytes_in_flight = st->rdma_bytes_in_flight;
	resp.inline_writes = st->inline_writes;
	resp.inline_reads = st->inline_reads;
	resp.run_on_receipt = st->run_on_receipt;
	resp.handed_on = st->handed_on;
	resp.fetched = st->fetched;
	resp.commits_deferred = st->commits_deferred;
	resp.data_flushes = st->data_flushes;
	resp.data_flush_errors = st->data_flush_errors;
	resp.pending_reads = st->pending_reads;
	ret = pack_reply(w, &resp.base, reply_len);
	free(st);
	return ret;
}

/* ---- scrub ---- */

static bool scrub_cancelled(struct server *srv)
{
	bool cancel;

	pthread_mutex_lock(&srv->scrub.lock);
	cancel = srv->scrub.cancel;
	pthread_mutex_unlock(&srv->scrub.lock);
	return cancel;
}

static void scrub_note_bad(struct server *srv, struct store_chunk_id id, uint32_t block, int err)
{
	struct scrub_job *j = &srv->scrub;

	if (err == -EBADMSG)
		STAT_ADD(srv->checksum_errors, 1);
	pthread_mutex_lock(&j->lock);
	j->bad_count++;
	if (j->bad_kept < SCRUB_BAD_MAX)
		j->bad[j->bad_kept++] = (struct scrub_bad){.id = id, .block = block, .error = err};
	pthread_mutex_unlock(&j->lock);
}

/* Walks the chunk index page by page and verifies every chunk. */
static void *scrub_main(void *arg)
{
	struct server *srv = arg;
	struct scrub_job *j = &srv->scrub;
	size_t buf_len =
		(srv->max_chunk_size + STORE_BLOCK_SIZE - 1) / STORE_BLOCK_SIZE * STORE_BLOCK_SIZE;
	struct store_list_entry *page = calloc(SCRUB_PAGE, sizeof(*page));
	uint8_t *buf = aligned_alloc(STORE_BLOCK_SIZE, buf_len);
	Rdmafs__JobState end = RDMAFS__JOB_STATE__JOB_STATE_DONE;
	struct store_chunk_id after = {0, 0};
	struct store_io *io = NULL;
	bool done = false, first = true;
	size_t count;
	int ret = -ENOMEM;

	if (!page || !buf)
		goto out_fail;
	ret = store_io_create(srv->store, NULL, &io);
	if (ret)
		goto out_fail;
	rdmafs_log(RDMAFS_LOG_INFO, "scrub started");
	while (!done) {
		ret = store_list(srv->store, first ? NULL : &after, page, SCRUB_PAGE, &count,
				 &done);
		if (ret)
			goto out_fail;
		first = false;
		for (size_t i = 0; i < count; i++) {
			uint32_t length, block;

			if (scrub_cancelled(srv)) {
				end = RDMAFS__JOB_STATE__JOB_STATE_CANCELLED;
				goto out_end;
			}
			ret = store_verify(io, page[i].id, buf, &length, &block);
			if (ret)
				scrub_note_bad(srv, page[i].id, block,
					       ret == -EBADMSG ? -EBADMSG : -EIO);
			pthread_mutex_lock(&j->lock);
			j->checked++;
			j->bytes += length;
			pthread_mutex_unlock(&j->lock);
			after = page[i].id;
		}
		if (count == 0)
			break;
	}
	goto out_end;

out_fail:
	end = RDMAFS__JOB_STATE__JOB_STATE_FAILED;
	pthread_mutex_lock(&j->lock);
	snprintf(j->error, sizeof(j->error), "%s", strerror(-ret));
	pthread_mutex_unlock(&j->lock);
out_end:
	store_io_destroy(io);
	free(buf);
	free(page);
	pthread_mutex_lock(&j->lock);
	j->state = end;
	rdmafs_log(end == RDMAFS__JOB_STATE__JOB_STATE_DONE ? RDMAFS_LOG_INFO : RDMAFS_LOG_WARN,
		   "scrub %s: %" PRIu64 " chunks, %" PRIu64 " bytes checked, %" PRIu64 " bad%s%s",
		   end == RDMAFS__JOB_STATE__JOB_STATE_DONE	   ? "done"
		   : end == RDMAFS__JOB_STATE__JOB_STATE_CANCELLED ? "cancelled"
								   : "failed",
		   j->checked, j->bytes, j->bad_count, j->error[0] ? ": " : "", j->error);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/* Starts a scrub; the caller holds the job's lock. -EBUSY while one runs. */
static int scrub_start_locked(struct server *srv)
{
	struct scrub_job *j = &srv->scrub;
	int ret;

	if (j->state == RDMAFS__JOB_STATE__JOB_STATE_RUNNING)
		return -EBUSY;
	if (j->joinable) {
		/* finished: its thread only has to be reaped */
		pthread_join(j->thread, NULL);
		j->joinable = false;
	}
	j->cancel = false;
	j->checked = j->bytes = j->bad_count = 0;
	j->bad_kept = 0;
	j->error[0] = '\0';
	j->total = store_chunk_count(srv->store);
	j->state = RDMAFS__JOB_STATE__JOB_STATE_RUNNING;
	ret = -pthread_create(&j->thread, NULL, scrub_main, srv);
	if (ret) {
		j->state = RDMAFS__JOB_STATE__JOB_STATE_FAILED;
		snprintf(j->error, sizeof(j->error), "cannot start a thread: %s", strerror(-ret));
		return ret;
	}
	j->joinable = true;
	return 0;
}

static int do_scrub(struct worker *w, struct xprt_req *req, const void *body, size_t len,
		    size_t *reply_len)
{
	struct server *srv = w->srv;
	struct scrub_job *j = &srv->scrub;
	Rdmafs__ScrubReq *m = rdmafs__scrub_req__unpack(NULL, len, body);
	Rdmafs__ScrubResp resp = RDMAFS__SCRUB_RESP__INIT;
	/* A BadChunk packs to at most 2 + (2 + 11 + 11) + 6 + 11 bytes. */
	size_t cap = xprt_conn_max_body(xprt_req_conn(req)), fit, n;
	Rdmafs__BadChunk *bad = NULL, **ptrs = NULL;
	Rdmafs__ChunkId *ids = NULL;
	char error[sizeof(j->error)];
	int ret = 0;

	if (!m)
		return -EBADMSG;
	fit = cap > REPLY_MAX ? REPLY_MAX : cap;
	fit = fit > 128 + 48 ? (fit - 128) / 48 : 0;
	bad = calloc(SCRUB_BAD_MAX, sizeof(*bad));
	ptrs = calloc(SCRUB_BAD_MAX, sizeof(*ptrs));
	ids = calloc(SCRUB_BAD_MAX, sizeof(*ids));
	if (!bad || !ptrs || !ids) {
		ret = -ENOMEM;
		goto out_free;
	}
	pthread_mutex_lock(&j->lock);
	switch (m->action) {
	case RDMAFS__JOB_ACTION__JOB_ACTION_STATUS:
		break;
	case RDMAFS__JOB_ACTION__JOB_ACTION_START:
		if (__atomic_load_n(&srv->stopping, __ATOMIC_RELAXED))
			ret = -ESHUTDOWN;
		else
			ret = scrub_start_locked(srv);
		break;
	case RDMAFS__JOB_ACTION__JOB_ACTION_CANCEL:
		j->cancel = true;
		break;
	default:
		ret = -EINVAL;
		break;
	}
	resp.state = j->state;
	resp.chunks_total = j->total;
	resp.chunks_checked = j->checked;
	resp.bytes_checked = j->bytes;
	resp.bad_count = j->bad_count;
	n = j->bad_kept < fit ? j->bad_kept : fit;
	for (size_t i = 0; i < n; i++) {
		rdmafs__bad_chunk__init(&bad[i]);
		rdmafs__chunk_id__init(&ids[i]);
		ids[i].inode = j->bad[i].id.inode;
		ids[i].index = j->bad[i].id.index;
		bad[i].chunk = &ids[i];
		bad[i].block = j->bad[i].block;
		bad[i].error = j->bad[i].error;
		ptrs[i] = &bad[i];
	}
	snprintf(error, sizeof(error), "%s", j->error);
	pthread_mutex_unlock(&j->lock);
	if (ret)
		goto out_free;
	resp.n_bad = n;
	resp.bad = ptrs;
	resp.error = error;
	ret = pack_reply(w, &resp.base, reply_len);
out_free:
	free(ids);
	free(ptrs);
	free(bad);
	rdmafs__scrub_req__free_unpacked(m, NULL);
	return ret;
}

/* Stops a running scrub and reaps its thread. */
static void scrub_stop(struct server *srv)
{
	struct scrub_job *j = &srv->scrub;
	bool joinable;

	pthread_mutex_lock(&j->lock);
	j->cancel = true;
	joinable = j->joinable;
	j->joinable = false;
	pthread_mutex_unlock(&j->lock);
	if (joinable)
		pthread_join(j->thread, NULL);
}

/* The largest reply the connection carries (a bigger one would become -EMSGSIZE). */
static size_t reply_cap(const struct xprt_req *req)
{
	size_t max = xprt_conn_max_body(xprt_req_conn(req));

	return max < REPLY_MAX ? max : REPLY_MAX;
}

/*
 * What a keyed connection may not do on the chunk store: -EKEYREVOKED once
 * its key is revoked, -EPERM for the administration methods, -EROFS for a
 * change from a read-only key; 0 otherwise. Metadata methods are the
 * service's to judge (meta_handle_as()).
 */
static int chunk_access(struct server *srv, const struct xprt_identity *id, uint32_t method)
{
	if (!id->keyed)
		return 0;
	if (srv->keyring && keyring_revoked(srv->keyring, id->serial))
		return -EKEYREVOKED;
	switch (method) {
	case RDMAFS__METHOD__METHOD_CHUNK_LIST:
	case RDMAFS__METHOD__METHOD_CHUNK_FENCE:
	case RDMAFS__METHOD__METHOD_SCRUB:
		return -EPERM;
	case RDMAFS__METHOD__METHOD_CHUNK_WRITE:
	case RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE:
	case RDMAFS__METHOD__METHOD_CHUNK_REMOVE:
		return id->flags & RDMAFS_KEY_READ_ONLY ? -EROFS : 0;
	default:
		return 0;
	}
}

/* Every refusal, expected ones too (ENOENT, EEXIST, ...): this is debug. */
static void log_refusal(struct xprt_req *req, int ret)
{
	char name[40];

	rdmafs_log(RDMAFS_LOG_DEBUG, "%s from %s: %s",
		   rdmafs_method_name(xprt_req_method(req), name, sizeof(name)),
		   xprt_conn_peer_name(xprt_req_conn(req)), strerror(-ret));
}

/*
 * Runs @q's request on @w and answers it. On a worker whose reads must not
 * wait (the quick one, store_io_nowait()), a chunk request that would wait
 * for the disk is not answered: false, and the caller hands it to a worker.
 * A cold read that it keeps to answer after its fetch (fetch_later()) is
 * done for the caller: true.
 */
static bool handle(struct worker *w, struct queued *q)
{
	struct xprt_req *req = q->req;
	uint32_t method = xprt_req_method(req);
	size_t len, reply_len = 0;
	const void *body = xprt_req_body(req, &len);
	struct xprt_identity id;
	struct meta_caller caller = {0};
	uint64_t moved = 0;
	int ret;

	/* requests come only after HELLO: the identity is there */
	if (xprt_conn_identity(xprt_req_conn(req), &id))
		memset(&id, 0, sizeof(id));
	caller.keyed = id.keyed;
	w->keyed = id.keyed;
	w->running = q;
	caller.serial = id.serial;
	caller.flags = id.flags;
	ret = chunk_access(w->srv, &id, method);
	/* a refused request runs nothing: the default case keeps its status */
	switch (ret ? RDMAFS__METHOD__METHOD_UNSPECIFIED : method) {
	case RDMAFS__METHOD__METHOD_CHUNK_WRITE:
		ret = do_write(w, req, body, len, &reply_len, &moved);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_READ:
		ret = do_read(w, req, body, len, &reply_len, &moved);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_COMMIT:
		ret = do_commit(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE:
		ret = do_truncate(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_REMOVE:
		ret = do_remove(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_STAT:
		ret = do_stat(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_LIST:
		ret = do_list(w, req, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_FENCE:
		ret = do_fence(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_CHUNK_RESYNC:
		ret = do_resync(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_DAEMON_STATS:
		ret = do_stats(w, body, len, &reply_len);
		break;
	case RDMAFS__METHOD__METHOD_SCRUB:
		ret = do_scrub(w, req, body, len, &reply_len);
		break;
	default:
		if (ret)
			break;
		if (w->srv->meta && meta_handles_method(method))
			ret = meta_handle_as(w->srv->meta, &caller, method, body, len, w->reply,
					     reply_cap(req), &reply_len);
		else
			ret = -EOPNOTSUPP; /* metadata on a daemon without the service */
		break;
	}
	if (ret == ANSWER_LATER && on_receipt(w))
		return true; /* kept: fetch_done() runs it again */
	if (ret == -EAGAIN && on_receipt(w) && !meta_handles_method(method))
		return false; /* changed nothing: a worker runs it again, and may wait */
	if (ret)
		log_refusal(req, ret);
	account(w->srv, method, ret, moved, q->start_ns);
	xprt_reply(req, ret, ret ? NULL : w->reply, ret ? 0 : reply_len);
	return true;
}

/*
 * Takes the next request of @lane into @q. With @wait it sleeps until one
 * comes and returns false only once the server stops with an empty queue;
 * without, it returns false at once when the queue is empty.
 */
static bool queue_take(struct server *srv, struct lane *lane, bool wait, struct queued *q)
{
	pthread_mutex_lock(&srv->lock);
	while (wait && !lane->len && !srv->stopping)
		pthread_cond_wait(&lane->cond, &srv->lock);
	if (!lane->len) {
		pthread_mutex_unlock(&srv->lock);
		return false;
	}
	*q = lane->queue[lane->head];
	lane->head = (lane->head + 1) % lane->cap;
	lane->len--;
	lane->in_flight++;
	pthread_mutex_unlock(&srv->lock);
	return true;
}

static void queue_done(struct server *srv, struct lane *lane)
{
	pthread_mutex_lock(&srv->lock);
	lane->in_flight--;
	pthread_mutex_unlock(&srv->lock);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct queued q;

	while (queue_take(w->srv, w->lane, true, &q)) {
		handle(w, &q);
		queue_done(w->srv, w->lane);
	}
	return NULL;
}

unsigned server_run_queued(struct server *srv)
{
	struct queued q;
	unsigned n = 0;

	for (unsigned l = 0; l < LANES; l++) {
		struct lane *lane = &srv->lanes[l];

		while (lane->worker_count && queue_take(srv, lane, false, &q)) {
			handle(&lane->workers[0], &q);
			queue_done(srv, lane);
			n++;
		}
	}
	return n;
}

/* Whether this thread may run @req itself: see the top of this file. */
static bool may_run_inline(struct server *srv, struct xprt_req *req)
{
	uint32_t method = xprt_req_method(req);

	if (srv->meta && meta_handles_method(method))
		return meta_may_run_inline(srv->meta, method);
	return srv->quick.io && (method == RDMAFS__METHOD__METHOD_CHUNK_WRITE ||
				 method == RDMAFS__METHOD__METHOD_CHUNK_READ ||
				 method == RDMAFS__METHOD__METHOD_CHUNK_COMMIT);
}

/*
 * Runs @q's request at once on this thread when it may (may_run_inline())
 * and no other thread is running one; false when it must queue. A request
 * run again after its fetch was counted as run on receipt when it came: it
 * counts as fetched if answered now, else as handed on, whatever stops it.
 */
static bool quick_run(struct server *srv, struct queued *q)
{
	bool ran = false, done = false;

	if (may_run_inline(srv, q->req) && !pthread_mutex_trylock(&srv->quick_lock)) {
		/* server_stop() takes the lock after setting stopping: none runs past it */
		ran = !__atomic_load_n(&srv->stopping, __ATOMIC_RELAXED);
		if (ran)
			done = handle(&srv->quick, q);
		pthread_mutex_unlock(&srv->quick_lock);
	}
	if (ran && !q->fetched)
		STAT_ADD(srv->run_on_receipt, 1);
	if (!done && (ran || q->fetched))
		STAT_ADD(srv->handed_on, 1);
	if (done && q->fetched)
		STAT_ADD(srv->fetched, 1);
	return done;
}

/*
 * The lane of @req: metadata to its own lane where one runs, a forwarded
 * write to its hop's, the rest to the data lane.
 */
static struct lane *lane_of(struct server *srv, struct xprt_req *req)
{
	struct lane *meta = &srv->lanes[LANE_META];
	uint32_t method = xprt_req_method(req);
	size_t len;
	const void *body;
	unsigned hop;

	if (meta->worker_count && meta_handles_method(method))
		return meta;
	if (method == RDMAFS__METHOD__METHOD_CHUNK_WRITE) {
		body = xprt_req_body(req, &len);
		hop = chain_write_hop(body, len);
		/* a hop past the last is refused by its worker (do_write()) */
		if (hop > 0 && hop < RDMAFS_MAX_REPLICAS)
			return &srv->lanes[LANE_HOP1 + hop - 1];
	}
	return &srv->lanes[LANE_DATA];
}

/*
 * Queues @req, received at @start_ns, in its lane for a worker; answers it at
 * once when it cannot.
 */
static void enqueue(struct server *srv, struct xprt_req *req, uint64_t start_ns)
{
	struct lane *lane = lane_of(srv, req);
	int status = 0;

	pthread_mutex_lock(&srv->lock);
	if (srv->stopping) {
		status = -ESHUTDOWN;
	} else if (lane->len == lane->cap) {
		status = -EBUSY;
		srv->busy++;
	} else {
		lane->queue[(lane->head + lane->len) % lane->cap] =
			(struct queued){.req = req, .start_ns = start_ns};
		lane->len++;
		pthread_cond_signal(&lane->cond);
	}
	pthread_mutex_unlock(&srv->lock);
	if (status)
		xprt_reply(req, status, NULL, 0);
}

/*
 * Holds @req for server_batch_end() when it is a metadata change that could
 * run on this thread (meta_may_batch()) from a caller the chunk store does not
 * refuse; false when it takes the usual way.
 */
static bool batch_take(struct server *srv, struct xprt_req *req)
{
	struct batch *b = &srv->batch;
	uint32_t method = xprt_req_method(req);
	struct xprt_identity id;
	struct meta_call *c;
	size_t len;

	if (!b->replies || b->serving || !meta_may_batch(srv->meta, method) ||
	    __atomic_load_n(&srv->stopping, __ATOMIC_RELAXED))
		return false;
	if (xprt_conn_identity(xprt_req_conn(req), &id))
		memset(&id, 0, sizeof(id));
	if (chunk_access(srv, &id, method) || !xprt_req_batched(req))
		return false;
	if (b->n == BATCH_MAX)
		server_batch_end(srv);
	if (b->n == BATCH_MAX || b->serving)
		return false;
	c = &b->call[b->n];
	*c = (struct meta_call){
		.caller = {.keyed = id.keyed, .serial = id.serial, .flags = id.flags},
		.method = method,
		.req = xprt_req_body(req, &len),
		.resp_buf = b->replies + (size_t)b->n * REPLY_MAX,
		.resp_cap = reply_cap(req),
	};
	c->req_len = len;
	b->req[b->n] = req;
	b->start_ns[b->n] = rdmafs_now_ns();
	b->n++;
	return true;
}

void server_batch_end(void *arg)
{
	struct server *srv = arg;
	struct batch *b = &srv->batch;
	unsigned n = b->n;
	bool run;

	if (!n || b->serving)
		return;
	b->serving = true;
	/*
	 * As quick_run(): not while a group runs or waits (it would wait for it),
	 * one receiving thread at a time, none past server_stop().
	 */
	run = meta_may_run_inline(srv->meta, b->call[0].method) &&
	      !pthread_mutex_trylock(&srv->quick_lock);

	if (run && __atomic_load_n(&srv->stopping, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&srv->quick_lock);
		run = false;
	}
	if (!run) {
		for (unsigned i = 0; i < n; i++)
			enqueue(srv, b->req[i], b->start_ns[i]);
	} else {
		meta_handle_many(srv->meta, b->call, n);
		pthread_mutex_unlock(&srv->quick_lock);
		STAT_ADD(srv->run_on_receipt, n);
		STAT_ADD(srv->batched, n);
		for (unsigned i = 0; i < n; i++) {
			struct meta_call *c = &b->call[i];

			if (c->ret)
				log_refusal(b->req[i], c->ret);
			account(srv, c->method, c->ret, 0, b->start_ns[i]);
			xprt_reply(b->req[i], c->ret, c->ret ? NULL : c->resp_buf,
				   c->ret ? 0 : c->resp_len);
		}
	}
	b->n = 0;
	b->serving = false;
}

void server_request_cb(struct xprt_req *req, void *arg)
{
	struct server *srv = arg;

	struct queued q = {.req = req, .start_ns = rdmafs_now_ns()};

	if (batch_take(srv, req) || quick_run(srv, &q))
		return;
	enqueue(srv, req, q.start_ns);
}

/*
 * The fetcher's ring has completions (the transport's progress thread, its
 * lock held): each read whose blocks were fetched runs again on receipt, or
 * goes to a worker when this thread cannot run it now.
 */
static void fetch_done(void *arg)
{
	struct server *srv = arg;
	uint64_t tag;

	while (store_fetch_reap(srv->fetch, false, &tag) == 0) {
		struct queued q;

		pthread_mutex_lock(&srv->fetch_lock);
		q = srv->fetch_waits[tag];
		srv->fetch_waits[tag].req = NULL;
		pthread_mutex_unlock(&srv->fetch_lock);
		if (!quick_run(srv, &q))
			enqueue(srv, q.req, q.start_ns);
	}
}

/* The queue and workers of @lane (@data: each with a pool buffer and an io_uring); threads too. */
static int lane_start(struct server *srv, struct lane *lane, unsigned workers, unsigned depth,
		      bool data, bool threads)
{
	int ret;

	lane->cap = depth;
	lane->queue = calloc(depth, sizeof(*lane->queue));
	lane->workers = calloc(workers, sizeof(*lane->workers));
	if (!lane->queue || !lane->workers)
		return -ENOMEM;
	lane->worker_count = workers;
	for (unsigned i = 0; i < workers; i++) {
		struct worker *w = &lane->workers[i];

		w->srv = srv;
		w->lane = lane;
		w->reply = malloc(REPLY_MAX);
		if (!w->reply)
			return -ENOMEM;
		if (data) {
			w->slot = srv->data_workers++;
			ret = xprt_pool_get(srv->pool, 0, &w->buf);
			if (ret)
				return ret;
			ret = store_io_create(srv->store, srv->pool, &w->io);
			if (ret)
				return ret;
		}
		if (!threads)
			continue;
		ret = -pthread_create(&w->thread, NULL, worker_main, w);
		if (ret)
			return ret;
		w->started = true;
	}
	return 0;
}

static int flush_store(void *arg)
{
	return store_flush(arg);
}

/*
 * data_sync = batch. What a daemon stopped by a kill (or a crash) had
 * deferred is flushed first: in the page cache still, but not yet on disk.
 * If that flush fails, the next durable commit makes it again
 * (rdmafs_flusher_sync()). A flusher that cannot start leaves
 * every commit to flush at once.
 */
static void flusher_start(struct server *srv, unsigned interval_ms)
{
	int ret = rdmafs_flusher_start(interval_ms, false, flush_store, srv->store, &srv->flusher);

	if (ret) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "no data flusher (%s): a close's commit flushes before its answer",
			   strerror(-ret));
		return;
	}
	srv->data_sync_ms = interval_ms;
	rdmafs_flusher_sync(srv->flusher);
}

int server_create(const struct server_params *p, struct server **out)
{
	struct server *srv = calloc(1, sizeof(*srv));
	unsigned meta_workers = p->meta ? p->meta_workers : 0, buffers;
	/* the data lane's and each hop's */
	unsigned data_workers = p->workers * (1 + LANES - LANE_HOP1);
	int ret;

	if (!srv)
		return -ENOMEM;
	srv->ctx = p->ctx;
	srv->meta = p->meta;
	srv->store = p->store;
	srv->keyring = p->keyring;
	memcpy(srv->uuid, p->uuid, sizeof(srv->uuid));
	srv->max_chunk_size = p->max_chunk_size;
	if (p->dmap && p->missed && !p->no_chain) {
		srv->dmap = p->dmap;
		srv->missed = p->missed;
	}
	srv->start_ns = rdmafs_now_ns();
	pthread_mutex_init(&srv->lock, NULL);
	pthread_mutex_init(&srv->quick_lock, NULL);
	pthread_mutex_init(&srv->fetch_lock, NULL);
	for (unsigned l = 0; l < LANES; l++)
		pthread_cond_init(&srv->lanes[l].cond, NULL);
	pthread_mutex_init(&srv->scrub.lock, NULL);
	srv->quick.srv = srv;
	srv->quick.reply = malloc(REPLY_MAX);
	/* the batch's replies: address space, touched as far as replies reach */
	if (p->meta)
		srv->batch.replies = malloc((size_t)BATCH_MAX * REPLY_MAX);
	if (!srv->quick.reply || (p->meta && !srv->batch.replies)) {
		ret = -ENOMEM;
		goto err_free;
	}
	/*
	 * A buffer per worker of the data lane and of each hop's lane, and one
	 * for the quick worker. Peers may read them (remote read, never write):
	 * a daemon forwarding a replicated write lends its buffer to the next
	 * daemon of the chain, which pulls the data from it (chain.c).
	 */
	buffers = data_workers + 1 + (srv->dmap != NULL);
	/* before any worker: a killed run's writes in flight become records first */
	if (srv->missed) {
		unsigned recovered = 0;

		ret = missed_inflight_open(srv->missed, srv->uuid, data_workers, &recovered);
		if (ret)
			goto err_free;
		if (recovered)
			rdmafs_log(RDMAFS_LOG_WARN,
				   "%u replicated writes were in flight at this daemon when it "
				   "stopped: their chunks are copied to the rest of their chains",
				   recovered);
	}
	ret = p->no_chain ? 0 : chain_create(p->ctx, &srv->chain);
	if (!ret)
		ret = xprt_pool_create(p->ctx, p->max_chunk_size, buffers, XPRT_ACCESS_REMOTE_READ,
				       &srv->pool);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot create the buffer pool (%u x %u bytes): %s",
			   buffers, p->max_chunk_size, xprt_strerror(ret));
		goto err_free;
	}
	ret = xprt_pool_get(srv->pool, 0, &srv->quick.buf);
	if (!ret)
		ret = store_io_create(srv->store, srv->pool, &srv->quick.io);
	if (ret)
		goto err_stop;
	store_io_nowait(srv->quick.io);
	/* cold blocks fetched on receipt: only where a progress thread watches the ring */
	if (!p->no_threads) {
		ret = store_fetch_create(srv->store, FETCH_DEPTH, &srv->fetch);
		if (!ret)
			ret = xprt_watch_add(p->ctx, store_fetch_fd(srv->fetch), fetch_done, srv,
					     &srv->fetch_watch);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_WARN,
				   "no fetcher (%s): requests that find a block out of the page"
				   " cache go to the workers",
				   strerror(-ret));
			store_fetch_destroy(srv->fetch);
			srv->fetch = NULL;
		}
	}
	if (!p->no_threads && p->data_sync_ms)
		flusher_start(srv, p->data_sync_ms);
	ret = lane_start(srv, &srv->lanes[LANE_DATA], p->workers, p->queue_depth, true,
			 !p->no_threads);
	if (!ret && meta_workers)
		ret = lane_start(srv, &srv->lanes[LANE_META], meta_workers, p->queue_depth, false,
				 !p->no_threads);
	for (unsigned l = LANE_HOP1; l < LANES && !ret; l++)
		ret = lane_start(srv, &srv->lanes[l], p->workers, p->queue_depth, true,
				 !p->no_threads);
	if (!ret && srv->dmap) {
		struct resync_params rp = {
			.store = srv->store,
			.missed = srv->missed,
			.dmap = srv->dmap,
			.chain = srv->chain,
			.pool = srv->pool,
			.uuid = srv->uuid,
		};

		ret = resync_start(&rp, &srv->resync);
	}
	if (ret)
		goto err_stop;
	*out = srv;
	return 0;

err_stop:
	server_stop(srv);
err_free:
	server_destroy(srv);
	return ret;
}

/*
 * No fetch starts past server_stop()'s quick_lock: the watch stops, each read
 * still waiting for its fetch gets -ESHUTDOWN once the fetch is done (the
 * kernel may write its scratch until then), and the fetcher goes.
 */
static void fetch_stop(struct server *srv)
{
	uint64_t tag;
	int ret;

	xprt_watch_close(srv->fetch_watch);
	srv->fetch_watch = NULL;
	if (!srv->fetch)
		return;
	while ((ret = store_fetch_reap(srv->fetch, true, &tag)) == 0) {
		xprt_reply(srv->fetch_waits[tag].req, -ESHUTDOWN, NULL, 0);
		srv->fetch_waits[tag].req = NULL;
	}
	if (ret == -ENOENT) {
		store_fetch_destroy(srv->fetch);
		srv->fetch = NULL;
		return;
	}
	/* the ring cannot be waited on: the kernel may still write the scratch, kept allocated */
	for (unsigned i = 0; i < FETCH_DEPTH; i++)
		if (srv->fetch_waits[i].req) {
			xprt_reply(srv->fetch_waits[i].req, -ESHUTDOWN, NULL, 0);
			srv->fetch_waits[i].req = NULL;
		}
}

void server_stop(struct server *srv)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	__atomic_store_n(&srv->stopping, true, __ATOMIC_RELAXED); /* do_scrub() reads it */
	for (unsigned l = 0; l < LANES; l++)
		pthread_cond_broadcast(&srv->lanes[l].cond);
	pthread_mutex_unlock(&srv->lock);
	/* waits for a request running on a receiving thread now (quick_run()) */
	pthread_mutex_lock(&srv->quick_lock);
	pthread_mutex_unlock(&srv->quick_lock);
	fetch_stop(srv);
	scrub_stop(srv);
	resync_stop(srv->resync);
	srv->resync = NULL;
	store_io_destroy(srv->quick.io);
	srv->quick.io = NULL;
	if (srv->quick.buf)
		xprt_pool_put(srv->quick.buf);
	srv->quick.buf = NULL;
	for (unsigned l = 0; l < LANES; l++) {
		struct lane *lane = &srv->lanes[l];

		for (unsigned i = 0; lane->workers && i < lane->worker_count; i++) {
			struct worker *w = &lane->workers[i];

			if (w->started)
				pthread_join(w->thread, NULL);
			w->started = false;
			store_io_destroy(w->io);
			w->io = NULL;
			if (w->buf)
				xprt_pool_put(w->buf);
			w->buf = NULL;
		}
	}
	/* no commit comes any more: the last flush of those deferred */
	rdmafs_flusher_stop(srv->flusher);
	srv->flusher = NULL;
	/* no worker forwards any more */
	chain_destroy(srv->chain);
	srv->chain = NULL;
	xprt_pool_destroy(srv->pool);
	srv->pool = NULL;
}

void server_destroy(struct server *srv)
{
	if (!srv)
		return;
	for (unsigned l = 0; l < LANES; l++) {
		struct lane *lane = &srv->lanes[l];

		for (unsigned i = 0; lane->workers && i < lane->worker_count; i++)
			free(lane->workers[i].reply);
		free(lane->workers);
		free(lane->queue);
		pthread_cond_destroy(&lane->cond);
	}
	free(srv->quick.reply);
	free(srv->batch.replies);
	chain_destroy(srv->chain); /* server_stop() did, unless server_create() failed first */
	pthread_mutex_destroy(&srv->quick_lock);
	pthread_mutex_destroy(&srv->fetch_lock);
	pthread_mutex_destroy(&srv->scrub.lock);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

void server_map_changed(void *arg)
{
	struct server *srv = arg;

	resync_kick(srv->resync);
}
