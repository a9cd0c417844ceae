// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Resync (docs/replication.md, "Losing a daemon"): copies each chunk whose
 * write another daemon missed (a record of missed.c) to that daemon once it
 * is back, whole, under the chunk's order lock, so that no write of the
 * chunk falls between the copy and the daemon's return. Only the chain's
 * head (the first serving daemon of its members, which orders the chunk's
 * writes) copies; the others keep their record until the daemon is UP again,
 * for the case the head dies first. A record this daemon made of a write it
 * headed and was killed in (recovered: missed_inflight_open()) is copied by
 * this daemon if it heads the chain again; if another daemon heads it, that
 * head holds what the chain answered, and this copy, which the reads skip
 * while the record lasts (server.c), is the one that may differ: it is handed
 * to that head (hand_over()), which copies its own chunk over it and the
 * others. See daemon_i.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "daemon_i.h"

#define RESYNC_TICK_MS 1000u
#define RESYNC_PAGE    64u
/*
 * Chunks handed over at once, at most: a restart makes recovered records of
 * one chunk per data worker, far fewer. Past it one is forgotten, and its
 * head asked again, which is harmless.
 */
#define HANDED_MAX 256u

/* A chunk whose copy was handed to its chain's head (hand_over()), and that head. */
struct handed {
	struct store_chunk_id id;
	uint8_t head[RDMAFS_UUID_LEN];
};

struct resync {
	struct resync_params p;
	struct store_io *io;
	struct xprt_buf *buf;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stopping, kicked;
	bool again; /* a copy waited for one later in its chain: pass again (the thread's) */
	uint64_t pushed, failed; /* chunks, atomically */
	/* the resync thread's alone: the heads asked since this daemon started */
	struct handed handed[HANDED_MAX];
	unsigned n_handed;
};

/* The chunk of @r as this daemon has it, to @r's target; @uri is the target's. */
static int push(struct resync *rs, const struct missed_rec *r, const char *uri,
		ProtobufCBinaryData *members)
{
	Rdmafs__ChunkId chunk = RDMAFS__CHUNK_ID__INIT;
	struct store_chunk_info info;
	uint8_t *base = xprt_buf_data(rs->buf);
	uint32_t bytes = 0, length = 0;
	int ret;

	chunk.inode = r->id.inode;
	chunk.index = r->id.index;
	ret = store_stat(rs->p.store, r->id, &info);
	if (ret)
		return ret;
	if (!info.exists) {
		/* gone here (removed, or never written): gone there too */
		Rdmafs__ChunkRemoveReq rm = RDMAFS__CHUNK_REMOVE_REQ__INIT;
		Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;
		uint64_t index = r->id.index;

		sel.inode = r->id.inode;
		sel.indexes = &index;
		sel.n_indexes = 1;
		rm.chunks = &sel;
		rm.layout_generation = UINT64_MAX; /* past any fence: a copy, not a client's */
		return chain_peer_call(rs->p.chain, uri, RDMAFS__METHOD__METHOD_CHUNK_REMOVE,
				       &rm.base);
	}
	if (info.length) {
		Rdmafs__ChunkWriteReq w = RDMAFS__CHUNK_WRITE_REQ__INIT;
		uint8_t others[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
		ProtobufCBinaryData lacking[MISSED_MEMBERS_MAX];
		size_t n_others = 0;

		ret = store_read(rs->io, r->id, 0, info.length, base, &bytes, &length);
		if (!ret)
			ret = missed_of_chunk(rs->p.missed, r->id, others, MISSED_MEMBERS_MAX,
					      &n_others);
		if (ret)
			return ret;
		/* the others that lack the chunk: the daemon records them too (rdmafs.proto) */
		for (size_t i = 0; i < n_others; i++)
			if (memcmp(others[i], r->target, RDMAFS_UUID_LEN) != 0)
				lacking[w.n_lacking++] =
					(ProtobufCBinaryData){RDMAFS_UUID_LEN, others[i]};
		w.lacking = lacking;
		w.chunk = &chunk;
		w.length = bytes;
		w.crc32c = rdmafs_crc32c(base, bytes);
		w.chunk_size = bytes;
		w.commit = true; /* as durable as the writes it stands for may have been */
		w.layout_generation = UINT64_MAX;
		w.zeros_as_hole = true; /* the copy keeps the chunk's holes */
		w.hop = 1;		/* a lane for forwarded writes: never behind a client's */
		w.to.data = (uint8_t *)r->target;
		w.to.len = RDMAFS_UUID_LEN;
		w.head.data = (uint8_t *)rs->p.uuid;
		w.head.len = RDMAFS_UUID_LEN;
		w.members = members;
		w.n_members = r->n_members;
		if (bytes) {
			ret = chain_push(rs->p.chain, uri, &w, rs->buf, base);
			if (ret)
				return ret;
		}
	}
	/* a longer copy there is cut to ours */
	{
		Rdmafs__ChunkTruncateReq t = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;

		t.chunk = &chunk;
		t.length = bytes;
		t.layout_generation = UINT64_MAX;
		t.members = members;
		t.n_members = r->n_members;
		return chain_peer_call(rs->p.chain, uri, RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE,
				       &t.base);
	}
}

/* The chunk @id handed over, or NULL. */
static struct handed *handed_find(struct resync *rs, struct store_chunk_id id)
{
	for (unsigned i = 0; i < rs->n_handed; i++)
		if (rs->handed[i].id.inode == id.inode && rs->handed[i].id.index == id.index)
			return &rs->handed[i];
	return NULL;
}

/* Chunk @id was handed to daemon @head (the last head asked is the one that counts). */
static void handed_note(struct resync *rs, struct store_chunk_id id, const uint8_t *head)
{
	struct handed *e = handed_find(rs, id);

	if (!e) {
		if (rs->n_handed == HANDED_MAX)
			rs->handed[0] = rs->handed[--rs->n_handed]; /* one goes: asked again */
		e = &rs->handed[rs->n_handed++];
		e->id = id;
	}
	memcpy(e->head, head, RDMAFS_UUID_LEN);
}

/* Whether record @r is still kept (a pass's page may hold one deleted since). */
static bool still_kept(struct resync *rs, const struct missed_rec *r)
{
	uint8_t targets[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	size_t n = 0;

	if (missed_of_chunk(rs->p.missed, r->id, targets, MISSED_MEMBERS_MAX, &n))
		return true; /* cannot tell: as if kept */
	for (size_t i = 0; i < n; i++)
		if (memcmp(targets[i], r->target, RDMAFS_UUID_LEN) == 0)
			return true;
	return false;
}

/* The copy of @r's chunk is the chain's: every record of it goes, and its note. */
static void handed_done(struct resync *rs, const struct missed_rec *r)
{
	struct handed *e = handed_find(rs, r->id);
	struct missed_rec each = *r;

	/* one record per member named (missed_inflight_open()): none left to ask again */
	for (unsigned i = 0; i < r->n_members; i++) {
		memcpy(each.target, r->members[i], RDMAFS_UUID_LEN);
		missed_del(rs->p.missed, &each);
	}
	if (e)
		*e = rs->handed[--rs->n_handed];
}

/*
 * Recovered record @r, of a write this daemon headed when it was killed (or
 * of copies handed to it as head, missed_add_handed(), which it no longer
 * heads), while another daemon, @r's member @h, heads the chain: that head ordered
 * the chunk's writes since and resynced the daemons that missed them, and
 * this copy may hold bytes of that write, never acknowledged, which the
 * others lack. Which bytes stand is the head's to say, so the copy is handed
 * over (CHUNK_RESYNC, rdmafs.proto): the head records every member but itself,
 * this daemon included, as lacking the chunk, and its resync copies its chunk
 * to them. The records stay until the head says those copies are done, so
 * reads here go on to other copies meanwhile (server.c ahead_of_a_copy()); a
 * head other than the one asked last is asked anew. A head too old to take
 * the copy (-EOPNOTSUPP) leaves the records to be dropped as before this
 * existed, with a warning, once this daemon serves.
 */
static void hand_over(struct resync *rs, const struct missed_rec *r, unsigned h,
		      ProtobufCBinaryData *members, bool *logged)
{
	Rdmafs__ChunkResyncReq q = RDMAFS__CHUNK_RESYNC_REQ__INIT;
	Rdmafs__ChunkId chunk = RDMAFS__CHUNK_ID__INIT;
	ProtobufCBinaryData targets[MISSED_MEMBERS_MAX];
	const struct handed *e = handed_find(rs, r->id);
	char uri[DMAP_URI_MAX] = "", text[37];
	int ret;

	if (!still_kept(rs, r))
		return; /* handed_done() took it with the chunk's first record */
	for (unsigned i = 0; i < r->n_members; i++)
		if (i != h)
			targets[q.n_targets++] = members[i];
	chunk.inode = r->id.inode;
	chunk.index = r->id.index;
	q.chunk = &chunk;
	q.members = members;
	q.n_members = r->n_members;
	q.targets = targets;
	q.ask = !e || memcmp(e->head, r->members[h], RDMAFS_UUID_LEN) != 0;
	ret = dmap_uri(rs->p.dmap, r->members[h], uri);
	if (!ret)
		ret = chain_peer_call(rs->p.chain, uri, RDMAFS__METHOD__METHOD_CHUNK_RESYNC,
				      &q.base);
	datadir_uuid_format(r->members[h], text);
	if (!ret && q.ask) {
		rdmafs_log(
			RDMAFS_LOG_INFO,
			"resync: chunk %016" PRIx64 "/%016" PRIx64
			": this copy may differ from the chain's (a write this daemon headed when "
			"killed, or copies handed to it), and daemon %s heads the chain now: "
			"handed this copy to it, which copies its own to the chain",
			r->id.inode, r->id.index, text);
		handed_note(rs, r->id, r->members[h]);
		return;
	}
	if (!ret) {
		handed_done(rs, r); /* the head's copies are done: ours is the chain's */
		return;
	}
	if (ret == -EOPNOTSUPP) {
		if (dmap_may_serve(rs->p.dmap)) {
			rdmafs_log(RDMAFS_LOG_WARN,
				   "resync: chunk %016" PRIx64 "/%016" PRIx64
				   ": this daemon was killed heading a write of it, and daemon %s, "
				   "which heads its chain now, is too old to take this copy over: "
				   "it may differ from the others in that write's bytes",
				   r->id.inode, r->id.index, text);
			missed_del(rs->p.missed, r);
		}
		return;
	}
	if (ret != -EINPROGRESS && !*logged) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "resync: chunk %016" PRIx64 "/%016" PRIx64
			   ": cannot hand this copy to the chain's head, daemon %s (%s): %s "
			   "(retrying)",
			   r->id.inode, r->id.index, text, uri, xprt_strerror(ret));
		*logged = true;
	}
}

/*
 * Whether a daemon after @r's target in its chain, one that serves reads, also
 * lacks the chunk: that one is copied first, as a write goes down a chain from
 * its end's side. A copy that got the chunk before the copies after it would
 * serve bytes a later copy may never get if this copy fails; copied the other
 * way round, every copy that lacks the chunk is ahead of the ones that have it,
 * and those are dirty until then (server.c ahead_of_a_copy()).
 */
static bool later_lacks(struct resync *rs, const struct missed_rec *r)
{
	uint8_t others[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	size_t n = 0;
	unsigned at = 0;

	while (at < r->n_members && memcmp(r->members[at], r->target, RDMAFS_UUID_LEN) != 0)
		at++;
	if (missed_of_chunk_serving(rs->p.missed, rs->p.dmap, r->id, others, &n))
		return false;
	for (size_t i = 0; i < n; i++)
		for (unsigned j = at + 1; j < r->n_members; j++)
			if (memcmp(others[i], r->members[j], RDMAFS_UUID_LEN) == 0)
				return true;
	return false;
}

/* What to do with record @r now: drop it, copy its chunk, or wait. */
static void settle(struct resync *rs, const struct missed_rec *r, bool *logged)
{
	uint32_t state = dmap_state(rs->p.dmap, r->target);
	ProtobufCBinaryData members[MISSED_MEMBERS_MAX];
	char uri[DMAP_URI_MAX], text[37];
	int h, ret;

	for (unsigned i = 0; i < r->n_members; i++)
		members[i] = (ProtobufCBinaryData){RDMAFS_UUID_LEN, (uint8_t *)r->members[i]};
	if (state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		/* it left the cluster: its chunks left every layout with it */
		missed_del(rs->p.missed, r);
		return;
	}
	if (state == 0 || state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
	    !dmap_leased(rs->p.dmap))
		return;
	h = dmap_head(rs->p.dmap, members, r->n_members);
	if (h < 0)
		return;
	if (memcmp(r->members[h], rs->p.uuid, RDMAFS_UUID_LEN) != 0) {
		/* the head copies; once the daemon is UP, it has */
		if (r->recovered)
			hand_over(rs, r, (unsigned)h, members, logged);
		else if (dmap_state_serves(state))
			missed_del(rs->p.missed, r);
		return;
	}
	if (later_lacks(rs, r)) {
		rs->again = true;
		return;
	}
	ret = dmap_uri(rs->p.dmap, r->target, uri);
	if (ret)
		return;
	chain_order_lock(rs->p.chain, r->id.inode, r->id.index);
	ret = push(rs, r, uri, members);
	if (!ret)
		ret = missed_del(rs->p.missed, r);
	chain_order_unlock(rs->p.chain, r->id.inode, r->id.index);
	if (!ret) {
		__atomic_add_fetch(&rs->pushed, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_add_fetch(&rs->failed, 1, __ATOMIC_RELAXED);
	if (!*logged) {
		datadir_uuid_format(r->target, text);
		rdmafs_log(RDMAFS_LOG_WARN,
			   "resync: chunk %016" PRIx64 "/%016" PRIx64
			   " not copied to daemon %s (%s): %s (retrying)",
			   r->id.inode, r->id.index, text, uri, xprt_strerror(ret));
		*logged = true;
	}
}

/* One pass over every record. */
static void pass(struct resync *rs)
{
	struct missed_rec page[RESYNC_PAGE], after;
	bool have_after = false, logged = false;
	size_t count;

	do {
		if (missed_list(rs->p.missed, have_after ? &after : NULL, page, RESYNC_PAGE,
				&count))
			return;
		for (size_t i = 0; i < count; i++) {
			if (__atomic_load_n(&rs->stopping, __ATOMIC_RELAXED))
				return;
			settle(rs, &page[i], &logged);
		}
		if (count) {
			after = page[count - 1];
			have_after = true;
		}
	} while (count == RESYNC_PAGE);
}

static void *resync_main(void *arg)
{
	struct resync *rs = arg;

	pthread_mutex_lock(&rs->lock);
	while (!rs->stopping) {
		struct timespec until;

		rs->kicked = false;
		pthread_mutex_unlock(&rs->lock);
		/* nothing is known of the cluster before the first map */
		if (dmap_epoch(rs->p.dmap)) {
			uint64_t pushed;

			/* again at once while copies wait for later ones that were copied */
			do {
				rs->again = false;
				pushed = __atomic_load_n(&rs->pushed, __ATOMIC_RELAXED);
				pass(rs);
			} while (rs->again &&
				 pushed != __atomic_load_n(&rs->pushed, __ATOMIC_RELAXED) &&
				 !__atomic_load_n(&rs->stopping, __ATOMIC_RELAXED));
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += RESYNC_TICK_MS / 1000u;
		pthread_mutex_lock(&rs->lock);
		if (!rs->stopping && !rs->kicked)
			pthread_cond_timedwait(&rs->cond, &rs->lock, &until);
	}
	pthread_mutex_unlock(&rs->lock);
	return NULL;
}

int resync_start(const struct resync_params *p, struct resync **out)
{
	struct resync *rs = calloc(1, sizeof(*rs));
	int ret;

	if (!rs)
		return -ENOMEM;
	rs->p = *p;
	pthread_mutex_init(&rs->lock, NULL);
	pthread_cond_init(&rs->cond, NULL);
	ret = xprt_pool_get(p->pool, 0, &rs->buf);
	if (!ret)
		ret = store_io_create(p->store, p->pool, &rs->io);
	if (!ret)
		ret = -pthread_create(&rs->thread, NULL, resync_main, rs);
	if (ret) {
		resync_stop(rs);
		return ret;
	}
	rs->started = true;
	*out = rs;
	return 0;
}

void resync_kick(struct resync *rs)
{
	if (!rs)
		return;
	pthread_mutex_lock(&rs->lock);
	rs->kicked = true;
	pthread_cond_signal(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
}

void resync_counts(struct resync *rs, uint64_t *pushed, uint64_t *failed)
{
	*pushed = rs ? __atomic_load_n(&rs->pushed, __ATOMIC_RELAXED) : 0;
	*failed = rs ? __atomic_load_n(&rs->failed, __ATOMIC_RELAXED) : 0;
}

void resync_stop(struct resync *rs)
{
	if (!rs)
		return;
	pthread_mutex_lock(&rs->lock);
	__atomic_store_n(&rs->stopping, true, __ATOMIC_RELAXED);
	pthread_cond_signal(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
	if (rs->started)
		pthread_join(rs->thread, NULL);
	store_io_destroy(rs->io);
	if (rs->buf)
		xprt_pool_put(rs->buf);
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}
