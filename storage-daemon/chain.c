// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Chain replication's daemon-to-daemon half (docs/replication.md, "A
 * write"): a CHUNK_WRITE stored here goes on to the next daemon of its chain,
 * which pulls the data from this daemon's registered buffer with one-sided
 * RDMA READ as this daemon pulled it from its predecessor, checks its crc32c
 * and stores it; the answer comes back up. See daemon_i.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "daemon_i.h"

/* A ChunkWriteResp, with room to spare. */
#define CHAIN_REPLY_MAX 256u
/* Locks that order a head's writes per chunk (a chunk hashes to one). */
#define CHAIN_ORDER_LOCKS 256u
/* Dirty chunks (chain_dirty_begin()): buckets by hash, each of so many chunks at once. */
#define CHAIN_DIRTY_BUCKETS 1024u
#define CHAIN_DIRTY_WAYS    8u
/* CHAIN_FORWARD_TIMEOUT_MS (daemon_i.h) less this at each later hop. */
#define CHAIN_HOP_STEP_MS 1000

struct chain_peer {
	char *uri;
	struct xprt_conn *conn; /* NULL while none is made */
};

struct chain {
	struct xprt_ctx *ctx;
	pthread_mutex_t lock;	  /* guards peers (not the calls on their connections) */
	struct chain_peer *peers; /* every peer forwarded to since the start */
	unsigned count, cap;
	pthread_mutex_t order[CHAIN_ORDER_LOCKS]; /* chain_order_lock() */
	struct dirty_bucket *dirty;		  /* CHAIN_DIRTY_BUCKETS of them */
};

/* A chunk with writes stored here and on their way down the chain. */
struct dirty_entry {
	uint64_t inode, index;
	unsigned n; /* such writes; 0: a free way */
};

struct dirty_bucket {
	pthread_mutex_t lock;
	pthread_cond_t freed; /* a way became free */
	struct dirty_entry e[CHAIN_DIRTY_WAYS];
};

int chain_create(struct xprt_ctx *ctx, struct chain **out)
{
	struct chain *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->dirty = calloc(CHAIN_DIRTY_BUCKETS, sizeof(*c->dirty));
	if (!c->dirty) {
		free(c);
		return -ENOMEM;
	}
	c->ctx = ctx;
	pthread_mutex_init(&c->lock, NULL);
	for (unsigned i = 0; i < CHAIN_ORDER_LOCKS; i++)
		pthread_mutex_init(&c->order[i], NULL);
	for (unsigned i = 0; i < CHAIN_DIRTY_BUCKETS; i++) {
		pthread_mutex_init(&c->dirty[i].lock, NULL);
		pthread_cond_init(&c->dirty[i].freed, NULL);
	}
	*out = c;
	return 0;
}

void chain_destroy(struct chain *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->count; i++) {
		xprt_conn_close(c->peers[i].conn);
		free(c->peers[i].uri);
	}
	free(c->peers);
	pthread_mutex_destroy(&c->lock);
	for (unsigned i = 0; i < CHAIN_ORDER_LOCKS; i++)
		pthread_mutex_destroy(&c->order[i]);
	for (unsigned i = 0; i < CHAIN_DIRTY_BUCKETS; i++) {
		pthread_mutex_destroy(&c->dirty[i].lock);
		pthread_cond_destroy(&c->dirty[i].freed);
	}
	free(c->dirty);
	free(c);
}

static uint32_t chunk_hash(uint64_t inode, uint64_t index)
{
	return (uint32_t)(((inode * 0x9e3779b97f4a7c15ULL) ^ (index * 0xc2b2ae3d27d4eb4fULL)) >>
			  32);
}

static pthread_mutex_t *order_of(struct chain *c, uint64_t inode, uint64_t index)
{
	return &c->order[chunk_hash(inode, index) % CHAIN_ORDER_LOCKS];
}

void chain_order_lock(struct chain *c, uint64_t inode, uint64_t index)
{
	pthread_mutex_lock(order_of(c, inode, index));
}

void chain_order_unlock(struct chain *c, uint64_t inode, uint64_t index)
{
	pthread_mutex_unlock(order_of(c, inode, index));
}

/* The entry of chunk (@inode, @index) in @b, or NULL. Under b->lock. */
static struct dirty_entry *dirty_find(struct dirty_bucket *b, uint64_t inode, uint64_t index)
{
	for (unsigned i = 0; i < CHAIN_DIRTY_WAYS; i++)
		if (b->e[i].n && b->e[i].inode == inode && b->e[i].index == index)
			return &b->e[i];
	return NULL;
}

static struct dirty_bucket *dirty_bucket_of(struct chain *c, uint64_t inode, uint64_t index)
{
	return &c->dirty[chunk_hash(inode, index) % CHAIN_DIRTY_BUCKETS];
}

void chain_dirty_begin(struct chain *c, uint64_t inode, uint64_t index)
{
	struct dirty_bucket *b = dirty_bucket_of(c, inode, index);
	struct dirty_entry *e;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		e = dirty_find(b, inode, index);
		if (e)
			break;
		for (unsigned i = 0; !e && i < CHAIN_DIRTY_WAYS; i++)
			if (!b->e[i].n)
				e = &b->e[i];
		if (e) {
			e->inode = inode;
			e->index = index;
			break;
		}
		/* every way taken: one of those forwards ends within its timeout */
		pthread_cond_wait(&b->freed, &b->lock);
	}
	e->n++;
	pthread_mutex_unlock(&b->lock);
}

void chain_dirty_end(struct chain *c, uint64_t inode, uint64_t index)
{
	struct dirty_bucket *b = dirty_bucket_of(c, inode, index);
	struct dirty_entry *e;

	pthread_mutex_lock(&b->lock);
	e = dirty_find(b, inode, index);
	if (e && --e->n == 0)
		pthread_cond_broadcast(&b->freed);
	pthread_mutex_unlock(&b->lock);
}

bool chain_dirty(struct chain *c, uint64_t inode, uint64_t index)
{
	struct dirty_bucket *b = dirty_bucket_of(c, inode, index);
	bool dirty;

	pthread_mutex_lock(&b->lock);
	dirty = dirty_find(b, inode, index) != NULL;
	pthread_mutex_unlock(&b->lock);
	return dirty;
}

/* Reads a protobuf varint at *@p (below @end); false when it runs past @end or 10 bytes. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *p < end && shift < 70; shift += 7) {
		uint8_t b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

unsigned chain_write_hop(const void *body, size_t len)
{
	const uint8_t *p = body, *end;
	uint64_t tag, v;
	/* top-level fields only; the last hop field wins, as protobuf says */
	unsigned hop = 0;

	if (!body)
		return 0; /* an empty request's body may be NULL: no arithmetic on it */
	end = p + len;
	while (p < end && varint(&p, end, &tag)) {
		switch (tag & 7) {
		case 0: /* varint */
			if (!varint(&p, end, &v))
				return 0;
			if (tag >> 3 == 12) /* ChunkWriteReq.hop */
				hop = v > UINT32_MAX ? UINT32_MAX : (unsigned)v;
			continue;
		case 1: /* 64-bit */
			v = 8;
			break;
		case 2: /* length-delimited */
			if (!varint(&p, end, &v))
				return 0;
			break;
		case 5: /* 32-bit */
			v = 4;
			break;
		default:
			return 0;
		}
		/* the fields skipped: @v bytes */
		if (v > (uint64_t)(end - p))
			return 0;
		p += v;
	}
	return hop;
}

/* The peer at @uri; NULL if none. Called with the lock held. */
static struct chain_peer *peer_find(struct chain *c, const char *uri)
{
	for (unsigned i = 0; i < c->count; i++)
		if (strcmp(c->peers[i].uri, uri) == 0)
			return &c->peers[i];
	return NULL;
}

/* A new peer at @uri, with no connection yet; NULL when out of memory. Lock held. */
static struct chain_peer *peer_add(struct chain *c, const char *uri)
{
	struct chain_peer *p;

	if (c->count == c->cap) {
		unsigned cap = c->cap ? 2 * c->cap : 8;

		p = realloc(c->peers, cap * sizeof(*p));
		if (!p)
			return NULL;
		c->peers = p;
		c->cap = cap;
	}
	p = &c->peers[c->count];
	p->uri = strdup(uri);
	p->conn = NULL;
	if (!p->uri)
		return NULL;
	c->count++;
	return p;
}

/*
 * A reference (xprt_conn_put() it) to the connection kept for @uri, made
 * first if there is none or it died: outside the lock, so a peer that does
 * not answer delays only the writes that go to it.
 */
static int peer_get(struct chain *c, const char *uri, struct xprt_conn **out)
{
	struct xprt_conn *conn = NULL, *spare = NULL;
	struct chain_peer *p;
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	p = peer_find(c, uri);
	if (p && p->conn && xprt_conn_alive(p->conn))
		conn = p->conn;
	if (conn)
		xprt_conn_get(conn);
	pthread_mutex_unlock(&c->lock);
	if (conn) {
		*out = conn;
		return 0;
	}
	ret = xprt_connect(c->ctx, uri, &conn);
	if (ret)
		return ret;
	pthread_mutex_lock(&c->lock);
	p = peer_find(c, uri);
	if (!p)
		p = peer_add(c, uri);
	if (!p) {
		ret = -ENOMEM;
		spare = conn;
	} else if (p->conn && xprt_conn_alive(p->conn)) {
		/* another thread made one meanwhile: use it, ours goes */
		spare = conn;
		conn = p->conn;
	} else {
		spare = p->conn; /* a dead one, or none */
		p->conn = conn;
	}
	if (!ret) {
		xprt_conn_get(conn);
		*out = conn;
	}
	pthread_mutex_unlock(&c->lock);
	xprt_conn_close(spare);
	return ret;
}

/* The answer to a forwarded write, on the progress thread (or the caller's). */
static void forward_done(void *arg, int status, const void *body, size_t len)
{
	struct chain_call *call = arg;
	Rdmafs__ChunkWriteResp *resp;

	if (!status) {
		resp = rdmafs__chunk_write_resp__unpack(NULL, len, body);
		if (!resp)
			status = -EBADMSG;
		/* the daemons after the next one that did not store it: ours to record too */
		for (size_t i = 0; resp && i < resp->n_missed; i++) {
			if (resp->missed[i].len != RDMAFS_UUID_LEN ||
			    call->n_missed == RDMAFS_MAX_REPLICAS) {
				status = -EBADMSG;
				break;
			}
			memcpy(call->missed[call->n_missed++], resp->missed[i].data,
			       RDMAFS_UUID_LEN);
		}
		rdmafs__chunk_write_resp__free_unpacked(resp, NULL);
	}
	pthread_mutex_lock(&call->lock);
	call->status = status;
	call->done = true;
	pthread_cond_signal(&call->cond);
	pthread_mutex_unlock(&call->lock);
}

int chain_forward_start(struct chain *c, const struct Rdmafs__ChunkWriteReq *m, size_t skip,
			const ProtobufCBinaryData *missed, size_t n_missed, struct xprt_buf *buf,
			const void *payload, struct chain_call *call)
{
	Rdmafs__ChunkWriteReq fwd = *m;
	Rdmafs__BufferDesc desc = RDMAFS__BUFFER_DESC__INIT;
	const Rdmafs__ChainHop *next = m->chain[skip];
	struct xprt_desc d;
	uint8_t *req;
	int ret;

	memset(call, 0, sizeof(*call));
	if (!next->uri || !*next->uri || next->uuid.len != RDMAFS_UUID_LEN)
		return -EINVAL;
	call->uri = next->uri;
	call->inode = m->chunk->inode;
	call->index = m->chunk->index;
	ret = peer_get(c, next->uri, &call->conn);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_WARN, "chain: cannot reach %s: %s", next->uri,
			   xprt_strerror(ret));
		return ret;
	}
	ret = xprt_mr_desc(call->conn, xprt_buf_mr(buf), payload, m->length, &d);
	if (ret)
		goto err;
	desc.addr = d.addr;
	desc.rkey = d.rkey;
	desc.len = m->length;
	fwd.buf = &desc;
	fwd.chain = m->chain + skip + 1;
	fwd.n_chain = m->n_chain - skip - 1;
	fwd.hop = m->hop + 1;
	fwd.to = next->uuid;
	fwd.missed = (ProtobufCBinaryData *)missed;
	fwd.n_missed = n_missed;
	req = malloc(rdmafs__chunk_write_req__get_packed_size(&fwd));
	if (!req) {
		ret = -ENOMEM;
		goto err;
	}
	pthread_mutex_init(&call->lock, NULL);
	pthread_cond_init(&call->cond, NULL);
	ret = xprt_call_async(call->conn, RDMAFS__METHOD__METHOD_CHUNK_WRITE, req,
			      rdmafs__chunk_write_req__pack(&fwd, req),
			      CHAIN_FORWARD_TIMEOUT_MS - CHAIN_HOP_STEP_MS * (int)m->hop,
			      forward_done, call);
	free(req);
	if (ret) {
		pthread_cond_destroy(&call->cond);
		pthread_mutex_destroy(&call->lock);
		goto err;
	}
	call->started = true;
	return 0;
err:
	rdmafs_log(RDMAFS_LOG_WARN,
		   "chain: cannot send chunk %016" PRIx64 "/%016" PRIx64 " to %s: %s", call->inode,
		   call->index, call->uri, xprt_strerror(ret));
	xprt_conn_put(call->conn);
	call->conn = NULL;
	return ret;
}

int chain_forward_end(struct chain_call *call)
{
	int ret;

	pthread_mutex_lock(&call->lock);
	while (!call->done)
		pthread_cond_wait(&call->cond, &call->lock);
	ret = call->status;
	pthread_mutex_unlock(&call->lock);
	pthread_cond_destroy(&call->cond);
	pthread_mutex_destroy(&call->lock);
	if (ret == -ETIMEDOUT) {
		/* the peer may still read our buffer, which the next request reuses */
		xprt_conn_reset(call->conn);
	}
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "chain: chunk %016" PRIx64 "/%016" PRIx64 " not stored by %s: %s",
			   call->inode, call->index, call->uri, xprt_strerror(ret));
	xprt_conn_put(call->conn);
	call->conn = NULL;
	call->started = false;
	return ret;
}

/*
 * A call to the daemon at @uri on its kept connection, the reply dropped:
 * @req packed, and for a CHUNK_WRITE (@buf set) the descriptor of the
 * @length bytes at @payload in @buf filled in first, for the peer to pull.
 */
static int peer_call(struct chain *c, const char *uri, uint32_t method, ProtobufCMessage *req,
		     Rdmafs__BufferDesc *desc, struct xprt_buf *buf, const void *payload,
		     uint32_t length)
{
	uint8_t reply[CHAIN_REPLY_MAX], *body;
	struct xprt_conn *conn;
	struct xprt_desc d;
	size_t reply_len;
	int ret = peer_get(c, uri, &conn);

	if (ret)
		return ret;
	if (buf) {
		ret = xprt_mr_desc(conn, xprt_buf_mr(buf), payload, length, &d);
		if (ret)
			goto out_put;
		desc->addr = d.addr;
		desc->rkey = d.rkey;
		desc->len = length;
	}
	body = malloc(protobuf_c_message_get_packed_size(req) + 1);
	if (!body) {
		ret = -ENOMEM;
		goto out_put;
	}
	/* the resync holds the chunk's order lock meanwhile: as short as a forward */
	ret = xprt_call(conn, method, body, protobuf_c_message_pack(req, body), reply,
			sizeof(reply), &reply_len, CHAIN_FORWARD_TIMEOUT_MS);
	free(body);
	/* the peer may still read our buffer, which the caller reuses */
	if (ret == -ETIMEDOUT && buf)
		xprt_conn_reset(conn);
out_put:
	xprt_conn_put(conn);
	return ret;
}

int chain_push(struct chain *c, const char *uri, Rdmafs__ChunkWriteReq *m, struct xprt_buf *buf,
	       const void *payload)
{
	Rdmafs__BufferDesc desc = RDMAFS__BUFFER_DESC__INIT;

	m->buf = &desc;
	return peer_call(c, uri, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &m->base, &desc, buf, payload,
			 m->length);
}

int chain_peer_call(struct chain *c, const char *uri, uint32_t method, ProtobufCMessage *req)
{
	return peer_call(c, uri, method, req, NULL, NULL, NULL, 0);
}
