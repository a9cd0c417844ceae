// SPDX-License-Identifier: GPL-2.0-or-later
/* One rdmafs daemon, spoken to directly (see rdmafs_fs.h, "One daemon, spoken to directly"). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_common.h"
#include "rdmafs_fs.h"
#include "chunk_msg_i.h"
#include "fs_client_i.h"

/* Replies without a payload (every chunk call but CHUNK_LIST) are small. */
#define SMALL_REPLY 4096u

/* The transport context and registered buffers, shared by handles. */
struct link {
	atomic_int refs;
	struct xprt_ctx *ctx;
	struct xprt_pool *pool;
	uint32_t buf_size;
	int timeout_ms;
};

struct rfs_daemon {
	struct link *link;
	char *uri;
	pthread_mutex_t lock; /* guards conn while it is replaced */
	struct xprt_conn *conn;
};

void rfs_daemon_options_init(struct rfs_daemon_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->name = "rdmafs-client";
	opts->call_timeout_ms = 5000;
	opts->connect_timeout_ms = 2000;
	opts->buf_size = 1u << 20;
	opts->buf_count = 8;
}

static void link_put(struct link *l)
{
	if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
		return;
	xprt_pool_destroy(l->pool);
	xprt_ctx_destroy(l->ctx);
	free(l);
}

static int link_create(const struct rfs_daemon_options *opts, struct link **out)
{
	struct xprt_options xo;
	struct link *l;
	int ret;

	if (!opts->buf_size || !opts->buf_count || !opts->call_timeout_ms ||
	    opts->call_timeout_ms > INT32_MAX)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	atomic_init(&l->refs, 1);
	l->buf_size = opts->buf_size;
	l->timeout_ms = (int)opts->call_timeout_ms;
	xprt_options_init(&xo);
	xo.secret = opts->secret;
	xo.secret_len = opts->secret_len;
	xo.name = opts->name;
	xo.call_timeout_ms = opts->call_timeout_ms;
	if (opts->connect_timeout_ms)
		xo.connect_timeout_ms = opts->connect_timeout_ms;
	ret = rfs_ctx_create(&xo, opts->key_file, &l->ctx);
	if (ret)
		goto err_free;
	ret = xprt_pool_create(l->ctx, opts->buf_size, opts->buf_count,
			       XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE, &l->pool);
	if (ret)
		goto err_destroy_ctx;
	*out = l;
	return 0;

err_destroy_ctx:
	xprt_ctx_destroy(l->ctx);
err_free:
	free(l);
	return ret;
}

int rfs_daemon_open(const struct rfs_daemon_options *opts, struct rfs_daemon **out)
{
	struct rfs_daemon *d;
	int ret;

	if (!opts->uri)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->uri = strdup(opts->uri);
	if (!d->uri) {
		ret = -ENOMEM;
		goto err_free;
	}
	if (opts->share) {
		d->link = opts->share->link;
		atomic_fetch_add(&d->link->refs, 1);
	} else {
		ret = link_create(opts, &d->link);
		if (ret)
			goto err_free_uri;
	}
	ret = xprt_connect(d->link->ctx, d->uri, &d->conn);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_DEBUG, "cannot connect to %s: %s", d->uri,
			   xprt_strerror(ret));
		goto err_put_link;
	}
	rdmafs_log(RDMAFS_LOG_DEBUG, "connected to %s", d->uri);
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;

err_put_link:
	link_put(d->link);
err_free_uri:
	free(d->uri);
err_free:
	free(d);
	return ret;
}

void rfs_daemon_close(struct rfs_daemon *d)
{
	if (!d)
		return;
	xprt_conn_close(d->conn);
	link_put(d->link);
	pthread_mutex_destroy(&d->lock);
	free(d->uri);
	free(d);
}

const char *rfs_daemon_uri(const struct rfs_daemon *d)
{
	return d->uri;
}

/* A live connection with a reference for the caller, made again if it died. */
static int conn_get(struct rfs_daemon *d, struct xprt_conn **out)
{
	struct xprt_conn *fresh;
	int ret = 0;

	pthread_mutex_lock(&d->lock);
	if (!xprt_conn_alive(d->conn)) {
		ret = xprt_connect(d->link->ctx, d->uri, &fresh);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_DEBUG, "cannot connect to %s again: %s", d->uri,
				   xprt_strerror(ret));
			goto out_unlock;
		}
		rdmafs_log(RDMAFS_LOG_DEBUG, "connected to %s again", d->uri);
		xprt_conn_close(d->conn);
		d->conn = fresh;
	}
	xprt_conn_get(d->conn);
	*out = d->conn;
out_unlock:
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Packs @msg and calls @method on @conn; the reply's body lands in @resp (@cap bytes). */
static int call_msg(struct rfs_daemon *d, struct xprt_conn *conn, uint32_t method,
		    const ProtobufCMessage *msg, uint8_t *resp, size_t cap, size_t *resp_len)
{
	size_t need = protobuf_c_message_get_packed_size(msg);
	uint8_t small[512], *req = need <= sizeof(small) ? small : malloc(need);
	int ret;

	*resp_len = 0;
	if (!req)
		return -ENOMEM;
	protobuf_c_message_pack(msg, req);
	ret = xprt_call(conn, method, req, need, resp, cap, resp_len, d->link->timeout_ms);
	if (req != small)
		free(req);
	return ret;
}

/* Calls @method with @req on @conn and unpacks the reply as @desc into *@resp, through @reply. */
static int call_unpack(struct rfs_daemon *d, struct xprt_conn *conn, uint32_t method,
		       const ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
		       ProtobufCMessage **resp, uint8_t *reply, size_t cap)
{
	size_t len;
	int ret = call_msg(d, conn, method, req, reply, cap, &len);

	*resp = NULL;
	if (ret)
		return ret;
	*resp = protobuf_c_message_unpack(desc, NULL, len, reply);
	return *resp ? 0 : -EBADMSG;
}

int rfs_daemon_call(struct rfs_daemon *d, uint32_t method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
	struct xprt_conn *conn;
	uint8_t *reply;
	int ret;

	*resp = NULL;
	ret = conn_get(d, &conn);
	if (ret)
		return ret;
	reply = malloc(xprt_conn_max_body(conn));
	ret = reply ? call_unpack(d, conn, method, req, resp_desc, resp, reply,
				  xprt_conn_max_body(conn))
		    : -ENOMEM;
	free(reply);
	xprt_conn_put(conn);
	return ret;
}

/* rfs_daemon_call() for the replies of chunk calls, which are small: no allocation. */
static int small_call(struct rfs_daemon *d, uint32_t method, const ProtobufCMessage *req,
		      const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
	uint8_t reply[SMALL_REPLY];
	struct xprt_conn *conn;
	int ret;

	*resp = NULL;
	ret = conn_get(d, &conn);
	if (ret)
		return ret;
	ret = call_unpack(d, conn, method, req, resp_desc, resp, reply, sizeof(reply));
	xprt_conn_put(conn);
	return ret;
}

/* One CHUNK_WRITE of the first @io->len bytes of @buf over @d's connection. */
static int write_buf(struct rfs_daemon *d, struct xprt_buf *buf, const struct chunk_io *io,
		     struct rfs_chunk_state *state)
{
	uint8_t reply[SMALL_REPLY];
	struct xprt_conn *conn;
	struct chunk_msg m;
	size_t reply_len;
	uint32_t length = 0;
	uint64_t version = 0;
	int ret = conn_get(d, &conn);

	if (ret)
		return ret;
	ret = chunk_msg_write(&m, conn, buf, io);
	if (!ret)
		ret = call_msg(d, conn, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &m.write.base, reply,
			       sizeof(reply), &reply_len);
	if (!ret)
		ret = chunk_write_reply(reply, reply_len, &length, &version);
	if (!ret && state) {
		memset(state, 0, sizeof(*state));
		state->exists = true;
		state->length = length;
		state->version = version;
	}
	xprt_conn_put(conn);
	return ret;
}

/* One CHUNK_READ of up to @io->len bytes into @buf over @d's connection. */
static int read_buf(struct rfs_daemon *d, struct xprt_buf *buf, const struct chunk_io *io,
		    uint32_t *bytes, uint32_t *chunk_length)
{
	uint8_t reply[CHUNK_READ_REPLY_MAX];
	struct chunk_io rio = *io;
	struct xprt_conn *conn;
	struct chunk_msg m;
	size_t reply_len;
	int ret = conn_get(d, &conn);

	*bytes = 0;
	if (ret)
		return ret;
	rio.inline_ok = true;
	ret = chunk_msg_read(&m, conn, buf, &rio);
	if (!ret)
		ret = call_msg(d, conn, RDMAFS__METHOD__METHOD_CHUNK_READ, &m.read.base, reply,
			       sizeof(reply), &reply_len);
	if (!ret)
		ret = chunk_read_reply(reply, reply_len, buf, &rio, bytes, chunk_length);
	xprt_conn_put(conn);
	return ret;
}

int rfs_chunk_write(struct rfs_daemon *d, struct rfs_chunk_id id, uint32_t chunk_size,
		    uint32_t offset, const void *data, uint32_t len, bool commit,
		    struct rfs_chunk_state *state)
{
	struct chunk_io io = {
		.ino = id.inode,
		.index = id.index,
		.generation = id.generation,
		.offset = offset,
		.len = len,
		.chunk_size = chunk_size,
		.commit = commit,
	};
	struct xprt_buf *buf;
	int ret;

	if (len == 0 || len > d->link->buf_size)
		return -EINVAL;
	ret = xprt_pool_get(d->link->pool, d->link->timeout_ms, &buf);
	if (ret)
		return ret;
	memcpy(xprt_buf_data(buf), data, len);
	ret = write_buf(d, buf, &io, state);
	xprt_pool_put(buf);
	return ret;
}

int rfs_chunk_read(struct rfs_daemon *d, struct rfs_chunk_id id, uint32_t offset, void *data,
		   uint32_t len, uint32_t *bytes, uint32_t *chunk_length)
{
	struct chunk_io io = {
		.ino = id.inode,
		.index = id.index,
		.generation = id.generation,
		.offset = offset,
		.len = len,
	};
	struct xprt_buf *buf;
	int ret;

	*bytes = 0;
	if (len > d->link->buf_size)
		return -EINVAL;
	ret = xprt_pool_get(d->link->pool, d->link->timeout_ms, &buf);
	if (ret)
		return ret;
	ret = read_buf(d, buf, &io, bytes, chunk_length);
	if (!ret)
		memcpy(data, xprt_buf_data(buf), *bytes);
	xprt_pool_put(buf);
	return ret;
}

int rfs_chunk_copy(struct rfs_daemon *src, struct rfs_daemon *dst, struct rfs_chunk_id id,
		   uint32_t length, uint32_t chunk_size)
{
	struct chunk_io io = {
		.ino = id.inode,
		.index = id.index,
		.generation = id.generation,
		.chunk_size = chunk_size,
	};
	struct rfs_chunk_state state = {.length = UINT32_MAX};
	struct link *l = src->link;
	struct xprt_buf *buf;
	int ret;

	if (dst->link != l || length > chunk_size)
		return -EINVAL;
	ret = xprt_pool_get(l->pool, l->timeout_ms, &buf);
	if (ret)
		return ret;
	while (io.offset < length) {
		uint32_t got;

		io.len = length - io.offset < l->buf_size ? length - io.offset : l->buf_size;
		ret = read_buf(src, buf, &io, &got, NULL);
		if (ret)
			goto out_put;
		if (got == 0)
			break; /* the chunk shrank meanwhile: copy what there is */
		io.len = got;
		ret = write_buf(dst, buf, &io, &state);
		if (ret)
			goto out_put;
		io.offset += got;
	}
	/* An older copy on the destination may be longer; a zero-length chunk still exists. */
	if (state.length != io.offset)
		ret = rfs_chunk_truncate(dst, id, io.offset, NULL);
out_put:
	xprt_pool_put(buf);
	return ret;
}

static void sel_to_pb(const struct rfs_chunk_sel *sel, Rdmafs__ChunkSelection *pb)
{
	rdmafs__chunk_selection__init(pb);
	pb->inode = sel->inode;
	pb->range = sel->range;
	pb->first_index = sel->first_index;
	if (!sel->range) {
		pb->n_indexes = sel->count;
		pb->indexes = (uint64_t *)sel->indexes;
	}
}

int rfs_chunk_commit(struct rfs_daemon *d, const struct rfs_chunk_sel *sel)
{
	Rdmafs__ChunkCommitReq req = RDMAFS__CHUNK_COMMIT_REQ__INIT;
	Rdmafs__ChunkSelection pb;
	ProtobufCMessage *resp;
	int ret;

	sel_to_pb(sel, &pb);
	req.chunks = &pb;
	req.layout_generation = sel->generation;
	ret = small_call(d, RDMAFS__METHOD__METHOD_CHUNK_COMMIT, &req.base,
			 &rdmafs__empty__descriptor, &resp);
	if (!ret)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

int rfs_chunk_truncate(struct rfs_daemon *d, struct rfs_chunk_id id, uint32_t length,
		       struct rfs_chunk_state *state)
{
	Rdmafs__ChunkTruncateReq req = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkTruncateResp *resp;
	int ret;

	cid.inode = id.inode;
	cid.index = id.index;
	req.chunk = &cid;
	req.length = length;
	req.layout_generation = id.generation;
	ret = small_call(d, RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE, &req.base,
			 &rdmafs__chunk_truncate_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (state)
		*state = (struct rfs_chunk_state){
			.exists = true,
			.length = resp->chunk_length,
			.version = resp->version,
		};
	rdmafs__chunk_truncate_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfs_chunk_remove(struct rfs_daemon *d, const struct rfs_chunk_sel *sel, uint64_t *removed,
		     uint64_t *bytes_freed)
{
	Rdmafs__ChunkRemoveReq req = RDMAFS__CHUNK_REMOVE_REQ__INIT;
	Rdmafs__ChunkRemoveResp *resp;
	Rdmafs__ChunkSelection pb;
	int ret;

	sel_to_pb(sel, &pb);
	req.chunks = &pb;
	req.layout_generation = sel->generation;
	ret = small_call(d, RDMAFS__METHOD__METHOD_CHUNK_REMOVE, &req.base,
			 &rdmafs__chunk_remove_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (removed)
		*removed = resp->removed;
	if (bytes_freed)
		*bytes_freed = resp->bytes_freed;
	rdmafs__chunk_remove_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfs_chunk_stat(struct rfs_daemon *d, struct rfs_chunk_id id, struct rfs_chunk_state *state)
{
	Rdmafs__ChunkStatReq req = RDMAFS__CHUNK_STAT_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkStatResp *resp;
	int ret;

	cid.inode = id.inode;
	cid.index = id.index;
	req.chunk = &cid;
	ret = small_call(d, RDMAFS__METHOD__METHOD_CHUNK_STAT, &req.base,
			 &rdmafs__chunk_stat_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	*state = (struct rfs_chunk_state){
		.exists = resp->exists,
		.length = resp->length,
		.version = resp->version,
		.block_size = resp->block_size,
		.block_count = resp->block_count,
	};
	rdmafs__chunk_stat_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfs_chunk_fence(struct rfs_daemon *d, uint64_t inode, uint64_t generation, bool lift,
		    uint64_t *now)
{
	Rdmafs__ChunkFenceReq req = RDMAFS__CHUNK_FENCE_REQ__INIT;
	Rdmafs__ChunkFenceResp *resp;
	int ret;

	req.inode = inode;
	req.generation = generation;
	req.lift = lift;
	ret = small_call(d, RDMAFS__METHOD__METHOD_CHUNK_FENCE, &req.base,
			 &rdmafs__chunk_fence_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (now)
		*now = resp->fence;
	rdmafs__chunk_fence_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfs_chunk_fence_list(struct rfs_daemon *d, uint64_t after, struct rfs_fence *out, size_t cap,
			 size_t *count, bool *more)
{
	Rdmafs__ChunkFenceReq req = RDMAFS__CHUNK_FENCE_REQ__INIT;
	Rdmafs__ChunkFenceResp *resp;
	int ret;

	*count = 0;
	*more = false;
	req.inode = after;
	req.list = true;
	ret = small_call(d, RDMAFS__METHOD__METHOD_CHUNK_FENCE, &req.base,
			 &rdmafs__chunk_fence_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	for (size_t i = 0; i < resp->n_fences && *count < cap; i++) {
		out[*count].inode = resp->fences[i]->inode;
		out[*count].generation = resp->fences[i]->generation;
		(*count)++;
	}
	/* a page longer than @cap: the rest comes after the last one taken */
	*more = resp->more || resp->n_fences > cap;
	rdmafs__chunk_fence_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfs_chunk_list(struct rfs_daemon *d, uint64_t after_inode, uint64_t after_index,
		   bool from_start, struct rfs_chunk_entry *out, size_t cap, size_t *count,
		   bool *done)
{
	Rdmafs__ChunkListReq req = RDMAFS__CHUNK_LIST_REQ__INIT;
	Rdmafs__ChunkId after = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkListResp *resp;
	int ret;

	*count = 0;
	*done = false;
	if (cap == 0 || cap > UINT32_MAX)
		return -EINVAL;
	if (!from_start) {
		after.inode = after_inode;
		after.index = after_index;
		req.start_after = &after;
	}
	req.limit = (uint32_t)cap;
	ret = rfs_daemon_call(d, RDMAFS__METHOD__METHOD_CHUNK_LIST, &req.base,
			      &rdmafs__chunk_list_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (resp->n_chunks > cap) {
		ret = -EBADMSG;
		goto out_free;
	}
	/* Entries must be present and strictly ascending past start_after. */
	for (size_t i = 0; i < resp->n_chunks; i++) {
		const Rdmafs__ChunkListEntry *e = resp->chunks[i];
		const Rdmafs__ChunkId *id = e ? e->chunk : NULL;
		bool ascending = id && (id->inode > after_inode ||
					(id->inode == after_inode && id->index > after_index));

		if (!id || (!ascending && (i > 0 || !from_start))) {
			ret = -EBADMSG;
			goto out_free;
		}
		out[i] = (struct rfs_chunk_entry){
			.inode = id->inode,
			.index = id->index,
			.length = e->length,
			.version = e->version,
		};
		after_inode = id->inode;
		after_index = id->index;
	}
	*count = resp->n_chunks;
	/* An empty page that is not the end would make a caller loop forever. */
	*done = resp->done || resp->n_chunks == 0;
out_free:
	rdmafs__chunk_list_resp__free_unpacked(resp, NULL);
	return ret;
}

int rfs_daemon_stats(struct rfs_daemon *d, struct rfs_daemon_stats *out)
{
	Rdmafs__DaemonStatsReq req = RDMAFS__DAEMON_STATS_REQ__INIT;
	Rdmafs__DaemonStatsResp *resp;
	int ret;

	ret = rfs_daemon_call(d, RDMAFS__METHOD__METHOD_DAEMON_STATS, &req.base,
			      &rdmafs__daemon_stats_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	memset(out, 0, sizeof(*out));
	if (resp->uuid.len == sizeof(out->uuid))
		memcpy(out->uuid, resp->uuid.data, sizeof(out->uuid));
	out->uptime_sec = resp->uptime_sec;
	out->bytes_read = resp->bytes_read;
	out->bytes_written = resp->bytes_written;
	out->errors = resp->errors;
	out->checksum_errors = resp->checksum_errors;
	out->capacity_bytes = resp->capacity_bytes;
	out->free_bytes = resp->free_bytes;
	out->chunks = resp->chunks;
	out->connections = resp->connections;
	out->requests_in_flight = resp->requests_in_flight;
	out->inline_writes = resp->inline_writes;
	out->inline_reads = resp->inline_reads;
	out->run_on_receipt = resp->run_on_receipt;
	out->handed_on = resp->handed_on;
	out->fetched = resp->fetched;
	out->commits_deferred = resp->commits_deferred;
	out->data_flushes = resp->data_flushes;
	out->data_flush_errors = resp->data_flush_errors;
	out->pending_reads = resp->pending_reads;
	for (size_t i = 0; i < resp->n_ops; i++)
		out->ops_total += resp->ops[i]->count;
	rdmafs__daemon_stats_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfs_daemon_call_raw(struct rfs_daemon *d, uint32_t method, const void *req, size_t req_len,
			void *resp, size_t resp_cap, size_t *resp_len)
{
	struct xprt_conn *conn;
	int ret = conn_get(d, &conn);

	*resp_len = 0;
	if (ret)
		return ret;
	ret = xprt_call(conn, method, req, req_len, resp, resp_cap, resp_len, d->link->timeout_ms);
	xprt_conn_put(conn);
	return ret;
}
