/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * librdmafs_client: chunk RPCs to one storage daemon (see rdmafs_client.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_client.h"
#include "rdmafs_common.h"
#include "chunk_msg_i.h"

#define RESP_MAX 4096u

struct rfc_client {
	struct xprt_ctx *ctx;
	struct xprt_pool *pool;
	char *uri;
	uint32_t buf_size;
	int timeout_ms;
	pthread_mutex_t lock; /* guards conn while it is replaced */
	struct xprt_conn *conn;
};

void rfc_options_init(struct rfc_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->name = "rdmafs-client";
	opts->buf_size = 1u << 20;
	opts->buf_count = 8;
	opts->timeout_ms = 10000;
}

/* A live connection with a reference for the caller, reconnecting if it died. */
static int conn_get(struct rfc_client *c, struct xprt_conn **out)
{
	struct xprt_conn *fresh;
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	if (!c->conn || !xprt_conn_alive(c->conn)) {
		ret = xprt_connect(c->ctx, c->uri, &fresh);
		if (ret)
			goto out_unlock;
		xprt_conn_close(c->conn);
		c->conn = fresh;
	}
	xprt_conn_get(c->conn);
	*out = c->conn;
out_unlock:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

int rfc_client_create(const struct rfc_options *opts, struct rfc_client **out)
{
	struct xprt_options xo;
	struct rfc_client *c;
	int ret;

	if (!opts->uri || !opts->buf_size || !opts->buf_count)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->uri = strdup(opts->uri);
	if (!c->uri) {
		ret = -ENOMEM;
		goto err_free;
	}
	c->buf_size = opts->buf_size;
	c->timeout_ms = opts->timeout_ms ? (int)opts->timeout_ms : 10000;
	pthread_mutex_init(&c->lock, NULL);
	xprt_options_init(&xo);
	xo.secret = opts->secret;
	xo.secret_len = opts->secret_len;
	xo.name = opts->name;
	xo.call_timeout_ms = (uint32_t)c->timeout_ms;
	ret = xprt_ctx_create(&xo, &c->ctx);
	if (ret)
		goto err_free_uri;
	ret = xprt_pool_create(c->ctx, opts->buf_size, opts->buf_count,
			       XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE, &c->pool);
	if (ret)
		goto err_destroy_ctx;
	ret = xprt_connect(c->ctx, c->uri, &c->conn);
	if (ret)
		goto err_destroy_pool;
	*out = c;
	return 0;

err_destroy_pool:
	xprt_pool_destroy(c->pool);
err_destroy_ctx:
	xprt_ctx_destroy(c->ctx);
err_free_uri:
	pthread_mutex_destroy(&c->lock);
	free(c->uri);
err_free:
	free(c);
	return ret;
}

void rfc_client_destroy(struct rfc_client *c)
{
	if (!c)
		return;
	xprt_conn_close(c->conn);
	xprt_pool_destroy(c->pool);
	xprt_ctx_destroy(c->ctx);
	pthread_mutex_destroy(&c->lock);
	free(c->uri);
	free(c);
}

/* Packs @msg and calls; the reply body lands in @resp. */
static int call_msg(struct rfc_client *c, struct xprt_conn *conn, uint32_t method,
		    const ProtobufCMessage *msg, uint8_t *resp, size_t *resp_len)
{
	size_t need = protobuf_c_message_get_packed_size(msg);
	uint8_t small[512], *req = need <= sizeof(small) ? small : malloc(need);
	int ret;

	if (!req)
		return -ENOMEM;
	protobuf_c_message_pack(msg, req);
	ret = xprt_call(conn, method, req, need, resp, RESP_MAX, resp_len, c->timeout_ms);
	if (req != small)
		free(req);
	return ret;
}

int rfc_chunk_write(struct rfc_client *c, struct rfc_chunk id, uint32_t chunk_size, uint32_t offset,
		    const void *data, uint32_t len, bool commit, struct rfc_chunk_state *state)
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
	uint8_t reply[RESP_MAX];
	struct xprt_conn *conn;
	struct chunk_msg m;
	struct xprt_buf *buf;
	size_t reply_len = 0;
	uint32_t length = 0;
	uint64_t version = 0;
	int ret;

	if (len == 0 || len > c->buf_size)
		return -EINVAL;
	ret = conn_get(c, &conn);
	if (ret)
		return ret;
	ret = xprt_pool_get(c->pool, c->timeout_ms, &buf);
	if (ret)
		goto out_put_conn;
	memcpy(xprt_buf_data(buf), data, len);
	ret = chunk_msg_write(&m, conn, buf, &io);
	if (!ret)
		ret = call_msg(c, conn, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &m.write.base, reply,
			       &reply_len);
	if (!ret)
		ret = chunk_write_reply(reply, reply_len, &length, &version);
	if (!ret && state) {
		memset(state, 0, sizeof(*state));
		state->exists = true;
		state->length = length;
		state->version = version;
	}
	xprt_pool_put(buf);
out_put_conn:
	xprt_conn_put(conn);
	return ret;
}

int rfc_chunk_read(struct rfc_client *c, struct rfc_chunk id, uint32_t offset, void *data,
		   uint32_t len, uint32_t *bytes, uint32_t *chunk_length)
{
	struct chunk_io io = {
		.ino = id.inode,
		.index = id.index,
		.generation = id.generation,
		.offset = offset,
		.len = len,
	};
	uint8_t reply[RESP_MAX];
	struct xprt_conn *conn;
	struct chunk_msg m;
	struct xprt_buf *buf;
	size_t reply_len = 0;
	int ret;

	*bytes = 0;
	if (len > c->buf_size)
		return -EINVAL;
	ret = conn_get(c, &conn);
	if (ret)
		return ret;
	ret = xprt_pool_get(c->pool, c->timeout_ms, &buf);
	if (ret)
		goto out_put_conn;
	ret = chunk_msg_read(&m, conn, buf, &io);
	if (!ret)
		ret = call_msg(c, conn, RDMAFS__METHOD__METHOD_CHUNK_READ, &m.read.base, reply,
			       &reply_len);
	if (!ret)
		ret = chunk_read_reply(reply, reply_len, buf, &io, bytes, chunk_length);
	if (!ret)
		memcpy(data, xprt_buf_data(buf), *bytes);
	xprt_pool_put(buf);
out_put_conn:
	xprt_conn_put(conn);
	return ret;
}

/* Calls @method with @msg and no payload; the reply is left in @reply. */
static int simple_call(struct rfc_client *c, uint32_t method, const ProtobufCMessage *msg,
		       uint8_t *reply, size_t *reply_len)
{
	struct xprt_conn *conn;
	int ret = conn_get(c, &conn);

	if (ret)
		return ret;
	ret = call_msg(c, conn, method, msg, reply, reply_len);
	xprt_conn_put(conn);
	return ret;
}

static int commit_sel(struct rfc_client *c, Rdmafs__ChunkSelection *sel)
{
	Rdmafs__ChunkCommitReq req = RDMAFS__CHUNK_COMMIT_REQ__INIT;
	uint8_t reply[RESP_MAX];
	size_t reply_len = 0;

	req.chunks = sel;
	return simple_call(c, RDMAFS__METHOD__METHOD_CHUNK_COMMIT, &req.base, reply, &reply_len);
}

int rfc_chunk_commit(struct rfc_client *c, uint64_t inode, const uint64_t *indexes, size_t count)
{
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;

	sel.inode = inode;
	sel.n_indexes = count;
	sel.indexes = (uint64_t *)indexes;
	return commit_sel(c, &sel);
}

int rfc_chunk_commit_range(struct rfc_client *c, uint64_t inode, uint64_t first_index)
{
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;

	sel.inode = inode;
	sel.range = true;
	sel.first_index = first_index;
	return commit_sel(c, &sel);
}

int rfc_chunk_truncate(struct rfc_client *c, struct rfc_chunk id, uint32_t length,
		       struct rfc_chunk_state *state)
{
	Rdmafs__ChunkTruncateReq req = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkTruncateResp *resp;
	uint8_t reply[RESP_MAX];
	size_t reply_len = 0;
	int ret;

	cid.inode = id.inode;
	cid.index = id.index;
	req.chunk = &cid;
	req.length = length;
	req.layout_generation = id.generation;
	ret = simple_call(c, RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE, &req.base, reply, &reply_len);
	if (ret)
		return ret;
	resp = rdmafs__chunk_truncate_resp__unpack(NULL, reply_len, reply);
	if (!resp)
		return -EBADMSG;
	if (state) {
		memset(state, 0, sizeof(*state));
		state->exists = true;
		state->length = resp->chunk_length;
		state->version = resp->version;
	}
	rdmafs__chunk_truncate_resp__free_unpacked(resp, NULL);
	return 0;
}

static int remove_sel(struct rfc_client *c, Rdmafs__ChunkSelection *sel, uint64_t *removed,
		      uint64_t *bytes_freed)
{
	Rdmafs__ChunkRemoveReq req = RDMAFS__CHUNK_REMOVE_REQ__INIT;
	Rdmafs__ChunkRemoveResp *resp;
	uint8_t reply[RESP_MAX];
	size_t reply_len = 0;
	int ret;

	req.chunks = sel;
	ret = simple_call(c, RDMAFS__METHOD__METHOD_CHUNK_REMOVE, &req.base, reply, &reply_len);
	if (ret)
		return ret;
	resp = rdmafs__chunk_remove_resp__unpack(NULL, reply_len, reply);
	if (!resp)
		return -EBADMSG;
	if (removed)
		*removed = resp->removed;
	if (bytes_freed)
		*bytes_freed = resp->bytes_freed;
	rdmafs__chunk_remove_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfc_chunk_remove(struct rfc_client *c, uint64_t inode, const uint64_t *indexes, size_t count,
		     uint64_t *removed, uint64_t *bytes_freed)
{
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;

	sel.inode = inode;
	sel.n_indexes = count;
	sel.indexes = (uint64_t *)indexes;
	return remove_sel(c, &sel, removed, bytes_freed);
}

int rfc_chunk_remove_range(struct rfc_client *c, uint64_t inode, uint64_t first_index,
			   uint64_t *removed, uint64_t *bytes_freed)
{
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;

	sel.inode = inode;
	sel.range = true;
	sel.first_index = first_index;
	return remove_sel(c, &sel, removed, bytes_freed);
}

int rfc_chunk_stat(struct rfc_client *c, struct rfc_chunk id, struct rfc_chunk_state *state)
{
	Rdmafs__ChunkStatReq req = RDMAFS__CHUNK_STAT_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkStatResp *resp;
	uint8_t reply[RESP_MAX];
	size_t reply_len = 0;
	int ret;

	cid.inode = id.inode;
	cid.index = id.index;
	req.chunk = &cid;
	ret = simple_call(c, RDMAFS__METHOD__METHOD_CHUNK_STAT, &req.base, reply, &reply_len);
	if (ret)
		return ret;
	resp = rdmafs__chunk_stat_resp__unpack(NULL, reply_len, reply);
	if (!resp)
		return -EBADMSG;
	state->exists = resp->exists;
	state->length = resp->length;
	state->version = resp->version;
	state->block_size = resp->block_size;
	state->block_count = resp->block_count;
	rdmafs__chunk_stat_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfc_daemon_stats(struct rfc_client *c, struct rfc_daemon_stats *out)
{
	Rdmafs__DaemonStatsReq req = RDMAFS__DAEMON_STATS_REQ__INIT;
	Rdmafs__DaemonStatsResp *resp;
	uint8_t reply[RESP_MAX];
	size_t reply_len = 0;
	int ret;

	ret = simple_call(c, RDMAFS__METHOD__METHOD_DAEMON_STATS, &req.base, reply, &reply_len);
	if (ret)
		return ret;
	resp = rdmafs__daemon_stats_resp__unpack(NULL, reply_len, reply);
	if (!resp)
		return -EBADMSG;
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
	out->requests_in_flight = resp->requests_in_flight;
	for (size_t i = 0; i < resp->n_ops; i++)
		out->ops_total += resp->ops[i]->count;
	rdmafs__daemon_stats_resp__free_unpacked(resp, NULL);
	return 0;
}

int rfc_call_raw(struct rfc_client *c, uint32_t method, const void *req, size_t req_len, void *resp,
		 size_t resp_cap, size_t *resp_len)
{
	struct xprt_conn *conn;
	int ret = conn_get(c, &conn);

	if (ret)
		return ret;
	ret = xprt_call(conn, method, req, req_len, resp, resp_cap, resp_len, c->timeout_ms);
	xprt_conn_put(conn);
	return ret;
}
