/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl's session: one transport context, a connection to the metadata
 * service and one to each daemon it talks to (made on first use), the cluster
 * map, and the chunk copy that drain uses. Every field that comes off the
 * wire is checked before it is used.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "chunk_msg_i.h"
#include "ctl_i.h"

/* The largest piece of a chunk moved at once. */
#define COPY_PIECE (1u << 20)
#define COPY_BUFS  2u

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	fputs("rdmafsctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void transport_log(enum xprt_log_level level, const char *msg, void *arg)
{
	const struct ctl *c = arg;

	if (c->verbose)
		fprintf(stderr, "rdmafsctl: transport: %s\n", msg);
}

const char *ctl_strerror(int err)
{
	return xprt_strerror(err);
}

int ctl_exit_for(int err)
{
	switch (err) {
	case 0:
		return CTL_EXIT_OK;
	case -ECONNREFUSED:
	case -ETIMEDOUT:
	case -ECONNRESET:
	case -ENOTCONN:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
	case -ENODEV:
	case -EPROTO:
	case -ECONNABORTED:
		return CTL_EXIT_UNREACHABLE;
	case -EACCES:
		/* HELLO failed: our secret is not the cluster's, a configuration error */
		return CTL_EXIT_USAGE;
	default:
		return CTL_EXIT_FAILED;
	}
}

void ctl_uuid_format(const uint8_t *uuid, char out[37])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < RDMAFS_UUID_LEN; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[uuid[i] >> 4];
		out[o++] = hex[uuid[i] & 15];
	}
	out[o] = '\0';
}

const char *ctl_state_name(uint32_t state)
{
	switch (state) {
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_UP:
		return "up";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN:
		return "down";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING:
		return "draining";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED:
		return "removed";
	default:
		return "unknown";
	}
}

int ctl_session_open(struct ctl *c)
{
	struct xprt_options o;
	int ret;

	xprt_set_log(transport_log, c, XPRT_LOG_DEBUG);
	xprt_options_init(&o);
	o.secret = c->secret;
	o.secret_len = c->secret_len;
	o.name = "rdmafsctl";
	o.call_timeout_ms = c->timeout_ms;
	o.connect_timeout_ms = c->timeout_ms;
	ret = xprt_ctx_create(&o, &c->xctx);
	if (ret) {
		ctl_err("cannot start the transport: %s", xprt_strerror(ret));
		return CTL_EXIT_FAILED;
	}
	return CTL_EXIT_OK;
}

static void map_free(struct ctl_map *map)
{
	for (size_t i = 0; i < map->count; i++) {
		xprt_conn_close(map->daemons[i].conn);
		for (size_t a = 0; a < map->daemons[i].address_count; a++)
			free(map->daemons[i].addresses[a]);
	}
	free(map->daemons);
	memset(map, 0, sizeof(*map));
}

void ctl_session_close(struct ctl *c)
{
	map_free(&c->map);
	xprt_conn_close(c->meta);
	c->meta = NULL;
	xprt_pool_destroy(c->pool);
	c->pool = NULL;
	xprt_ctx_destroy(c->xctx);
	c->xctx = NULL;
	free(c->reply);
	c->reply = NULL;
}

/* The reply buffer, grown to what @conn can carry. */
static int reply_room(struct ctl *c, struct xprt_conn *conn)
{
	size_t need = xprt_conn_max_body(conn);
	uint8_t *p;

	if (need <= c->reply_cap)
		return 0;
	p = realloc(c->reply, need);
	if (!p)
		return -ENOMEM;
	c->reply = p;
	c->reply_cap = need;
	return 0;
}

/* Sends @req as @method on @conn; the reply's body is left in c->reply (@reply_len bytes). */
static int call_packed(struct ctl *c, struct xprt_conn *conn, uint32_t method,
		       const ProtobufCMessage *req, size_t *reply_len)
{
	size_t len = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);
	int ret;

	*reply_len = 0;
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(req, buf);
	ret = reply_room(c, conn);
	if (!ret)
		ret = xprt_call(conn, method, buf, len, c->reply, c->reply_cap, reply_len,
				(int)c->timeout_ms);
	free(buf);
	return ret;
}

int ctl_call(struct ctl *c, struct xprt_conn *conn, uint32_t method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
	size_t reply_len;
	int ret;

	*resp = NULL;
	ret = call_packed(c, conn, method, req, &reply_len);
	if (ret)
		return ret;
	*resp = protobuf_c_message_unpack(resp_desc, NULL, reply_len, c->reply);
	return *resp ? 0 : -EBADMSG;
}

int ctl_meta_conn(struct ctl *c, struct xprt_conn **out)
{
	int ret;

	if (c->meta && !xprt_conn_alive(c->meta)) {
		xprt_conn_close(c->meta);
		c->meta = NULL;
	}
	if (!c->meta) {
		ret = xprt_connect(c->xctx, c->meta_uri, &c->meta);
		if (ret) {
			c->meta = NULL;
			if (ret == -EACCES)
				ctl_err("the metadata service at %s refused our secret (or we "
					"refused its): check --secret-file",
					c->meta_uri);
			else
				ctl_err("cannot reach the metadata service at %s: %s", c->meta_uri,
					xprt_strerror(ret));
			return ret;
		}
	}
	*out = c->meta;
	return 0;
}

int ctl_meta_call(struct ctl *c, uint32_t method, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
	struct xprt_conn *conn;
	int ret = ctl_meta_conn(c, &conn);

	*resp = NULL;
	if (ret)
		return ret;
	ret = ctl_call(c, conn, method, req, resp_desc, resp);
	if (ret == -EOPNOTSUPP)
		ctl_err("%s does not serve method %u: is it the metadata service, and as new as "
			"this rdmafsctl?",
			c->meta_uri, method);
	else if (ctl_exit_for(ret) == CTL_EXIT_UNREACHABLE)
		ctl_err("the metadata service at %s: %s", c->meta_uri, xprt_strerror(ret));
	return ret;
}

/* Copies one DaemonInfo off the wire into @d, checking it. */
static int daemon_from(const Rdmafs__DaemonInfo *info, struct ctl_daemon *d)
{
	memset(d, 0, sizeof(*d));
	if (!info || info->uuid.len != RDMAFS_UUID_LEN || info->n_addresses > CTL_MAX_ADDRESSES)
		return -EBADMSG;
	memcpy(d->uuid, info->uuid.data, RDMAFS_UUID_LEN);
	ctl_uuid_format(d->uuid, d->uuid_text);
	for (size_t i = 0; i < info->n_addresses; i++) {
		if (!info->addresses[i] || !info->addresses[i][0] ||
		    strlen(info->addresses[i]) > 255)
			return -EBADMSG;
		d->addresses[i] = strdup(info->addresses[i]);
		if (!d->addresses[i])
			return -ENOMEM;
		d->address_count++;
	}
	d->capacity_bytes = info->capacity_bytes;
	d->used_bytes = info->used_bytes;
	d->state = (uint32_t)info->state;
	d->last_heartbeat_unix_ms = info->last_heartbeat_unix_ms;
	return 0;
}

int ctl_map_load(struct ctl *c, bool reload)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *resp;
	struct ctl_map map = {0};
	int ret;

	if (c->map_loaded && !reload)
		return 0;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req.base,
			    &rdmafs__get_cluster_map_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret) {
		/* a failed connect (no c->meta) was reported already */
		if (c->meta && ctl_exit_for(ret) != CTL_EXIT_UNREACHABLE)
			ctl_err("cannot read the cluster map from %s: %s", c->meta_uri,
				xprt_strerror(ret));
		return ret;
	}
	map.epoch = resp->epoch;
	map.daemons = calloc(resp->n_daemons + 1, sizeof(*map.daemons));
	if (!map.daemons) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < resp->n_daemons; i++) {
		ret = daemon_from(resp->daemons[i], &map.daemons[i]);
		map.count = i + 1;
		if (ret) {
			ctl_err("the cluster map from %s has a malformed daemon entry",
				c->meta_uri);
			goto out_free;
		}
	}
	/* Keep the connections we already have to daemons still in the map. */
	for (size_t i = 0; i < map.count; i++) {
		struct ctl_daemon *old = ctl_map_find(c, map.daemons[i].uuid);

		if (old && old->conn) {
			map.daemons[i].conn = old->conn;
			old->conn = NULL;
		}
	}
	map_free(&c->map);
	c->map = map;
	map.daemons = NULL;
	map.count = 0;
	c->map_loaded = true;
out_free:
	map_free(&map);
	rdmafs__get_cluster_map_resp__free_unpacked(resp, NULL);
	return ret;
}

struct ctl_daemon *ctl_map_find(struct ctl *c, const uint8_t *uuid)
{
	for (size_t i = 0; i < c->map.count; i++)
		if (memcmp(c->map.daemons[i].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return &c->map.daemons[i];
	return NULL;
}

/* @arg as lower-case hex without dashes into @out; false if it is not hex. */
static bool hex_key(const char *arg, char *out, size_t size)
{
	size_t n = 0;

	for (const char *p = arg; *p; p++) {
		if (*p == '-')
			continue;
		if (!isxdigit((unsigned char)*p) || n + 1 >= size)
			return false;
		out[n++] = (char)tolower((unsigned char)*p);
	}
	out[n] = '\0';
	return n > 0;
}

static bool address_matches(const char *address, const char *arg)
{
	const char *rest = strstr(address, "://");

	return strcmp(address, arg) == 0 || (rest && strcmp(rest + 3, arg) == 0);
}

int ctl_resolve(struct ctl *c, const char *arg, struct ctl_daemon **out)
{
	struct ctl_daemon *found = NULL;
	char key[40], hex[33];
	size_t matches = 0;
	bool is_hex;
	int ret = ctl_map_load(c, false);

	if (ret)
		return ret;
	is_hex = hex_key(arg, key, sizeof(key));
	for (size_t i = 0; is_hex && i < c->map.count; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];

		for (int b = 0; b < RDMAFS_UUID_LEN; b++)
			snprintf(hex + 2 * b, 3, "%02x", d->uuid[b]);
		if (strncmp(hex, key, strlen(key)) == 0) {
			found = d;
			matches++;
		}
	}
	for (size_t i = 0; matches == 0 && i < c->map.count; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];

		for (size_t a = 0; a < d->address_count; a++) {
			if (address_matches(d->addresses[a], arg)) {
				found = d;
				matches++;
				break;
			}
		}
	}
	if (matches == 1) {
		*out = found;
		return 0;
	}
	if (matches == 0) {
		ctl_err("no daemon in the cluster map matches \"%s\" (give a UUID, a unique UUID "
			"prefix or an address; `rdmafsctl daemons` lists them)",
			arg);
		return -ENOENT;
	}
	ctl_err("\"%s\" matches %zu daemons; give more of the UUID", arg, matches);
	return -EINVAL;
}

int ctl_daemon_conn(struct ctl *c, struct ctl_daemon *d, struct xprt_conn **out)
{
	int ret = -EHOSTUNREACH;

	if (d->conn && !xprt_conn_alive(d->conn)) {
		xprt_conn_close(d->conn);
		d->conn = NULL;
	}
	if (d->conn) {
		*out = d->conn;
		return 0;
	}
	d->conn_address = "(no address)";
	for (size_t a = 0; a < d->address_count; a++) {
		d->conn_address = d->addresses[a];
		ret = xprt_connect(c->xctx, d->addresses[a], &d->conn);
		if (ret == 0) {
			d->conn_error = 0;
			*out = d->conn;
			return 0;
		}
		d->conn = NULL;
	}
	d->conn_error = ret;
	return ret;
}

/* ---- chunk copies ---- */

static int pool_ready(struct ctl *c)
{
	int ret;

	if (c->pool)
		return 0;
	ret = xprt_pool_create(c->xctx, COPY_PIECE, COPY_BUFS,
			       XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE, &c->pool);
	if (ret) {
		ctl_err("cannot register the copy buffers (%u x %u bytes): %s%s", COPY_BUFS,
			COPY_PIECE, xprt_strerror(ret),
			ret == -ENOMEM ? " (raise the memlock limit: ulimit -l)" : "");
		return ret;
	}
	c->pool_buf_size = COPY_PIECE;
	return 0;
}

/* Reads @len bytes at @offset of a chunk into @buf; *@got may be less at its end. */
static int piece_read(struct ctl *c, struct xprt_conn *conn, struct xprt_buf *buf, uint64_t ino,
		      uint64_t index, uint32_t offset, uint32_t len, uint32_t *got)
{
	struct chunk_io io = {
		.ino = ino,
		.index = index,
		.generation = CTL_LAYOUT_GENERATION_ADMIN,
		.offset = offset,
		.len = len,
	};
	struct chunk_msg m;
	size_t reply_len;
	int ret;

	ret = chunk_msg_read(&m, conn, buf, &io);
	if (!ret)
		ret = call_packed(c, conn, RDMAFS__METHOD__METHOD_CHUNK_READ, &m.read.base,
				  &reply_len);
	if (!ret)
		ret = chunk_read_reply(c->reply, reply_len, buf, &io, got, NULL);
	return ret;
}

static int piece_write(struct ctl *c, struct xprt_conn *conn, struct xprt_buf *buf, uint64_t ino,
		       uint64_t index, uint32_t offset, uint32_t len, uint32_t chunk_size,
		       uint32_t *chunk_length)
{
	struct chunk_io io = {
		.ino = ino,
		.index = index,
		.generation = CTL_LAYOUT_GENERATION_ADMIN,
		.offset = offset,
		.len = len,
		.chunk_size = chunk_size,
	};
	struct chunk_msg m;
	size_t reply_len;
	int ret;

	ret = chunk_msg_write(&m, conn, buf, &io);
	if (!ret)
		ret = call_packed(c, conn, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &m.write.base,
				  &reply_len);
	if (!ret)
		ret = chunk_write_reply(c->reply, reply_len, chunk_length, NULL);
	return ret;
}

static int chunk_truncate(struct ctl *c, struct xprt_conn *conn, uint64_t ino, uint64_t index,
			  uint32_t length)
{
	Rdmafs__ChunkTruncateReq req = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;
	Rdmafs__ChunkId id = RDMAFS__CHUNK_ID__INIT;
	ProtobufCMessage *resp;
	int ret;

	id.inode = ino;
	id.index = index;
	req.chunk = &id;
	req.length = length;
	req.layout_generation = CTL_LAYOUT_GENERATION_ADMIN;
	ret = ctl_call(c, conn, RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE, &req.base,
		       &rdmafs__chunk_truncate_resp__descriptor, &resp);
	if (!ret)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

int ctl_chunk_copy(struct ctl *c, struct xprt_conn *src, struct xprt_conn *dst, uint64_t ino,
		   uint64_t index, uint32_t length, uint32_t chunk_size)
{
	uint32_t offset = 0, dst_length = UINT32_MAX;
	struct xprt_buf *buf;
	int ret;

	if (length > chunk_size)
		return -EINVAL;
	ret = pool_ready(c);
	if (ret)
		return ret;
	ret = xprt_pool_get(c->pool, (int)c->timeout_ms, &buf);
	if (ret)
		return ret;
	while (offset < length) {
		uint32_t want =
			length - offset < c->pool_buf_size ? length - offset : c->pool_buf_size;
		uint32_t got = 0;

		ret = piece_read(c, src, buf, ino, index, offset, want, &got);
		if (ret)
			goto out_put;
		if (got == 0)
			break; /* the chunk shrank meanwhile: copy what there is */
		ret = piece_write(c, dst, buf, ino, index, offset, got, chunk_size, &dst_length);
		if (ret)
			goto out_put;
		offset += got;
	}
	/* An older copy on the destination may be longer; a zero-length chunk still exists. */
	if (dst_length != offset)
		ret = chunk_truncate(c, dst, ino, index, offset);
out_put:
	xprt_pool_put(buf);
	return ret;
}

int ctl_chunk_commit_inode(struct ctl *c, struct xprt_conn *conn, uint64_t ino)
{
	Rdmafs__ChunkCommitReq req = RDMAFS__CHUNK_COMMIT_REQ__INIT;
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;
	ProtobufCMessage *resp;
	int ret;

	sel.inode = ino;
	sel.range = true;
	req.chunks = &sel;
	req.layout_generation = CTL_LAYOUT_GENERATION_ADMIN;
	ret = ctl_call(c, conn, RDMAFS__METHOD__METHOD_CHUNK_COMMIT, &req.base,
		       &rdmafs__empty__descriptor, &resp);
	if (!ret)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

int ctl_chunk_remove_inode(struct ctl *c, struct xprt_conn *conn, uint64_t ino)
{
	Rdmafs__ChunkRemoveReq req = RDMAFS__CHUNK_REMOVE_REQ__INIT;
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;
	ProtobufCMessage *resp;
	int ret;

	sel.inode = ino;
	sel.range = true;
	req.chunks = &sel;
	req.layout_generation = CTL_LAYOUT_GENERATION_ADMIN;
	ret = ctl_call(c, conn, RDMAFS__METHOD__METHOD_CHUNK_REMOVE, &req.base,
		       &rdmafs__chunk_remove_resp__descriptor, &resp);
	if (!ret)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

int ctl_chunk_fence(struct ctl *c, struct xprt_conn *conn, uint64_t ino, uint64_t generation,
		    bool lift, uint64_t *now)
{
	Rdmafs__ChunkFenceReq req = RDMAFS__CHUNK_FENCE_REQ__INIT;
	Rdmafs__ChunkFenceResp *resp;
	int ret;

	req.inode = ino;
	req.generation = generation;
	req.lift = lift;
	ret = ctl_call(c, conn, RDMAFS__METHOD__METHOD_CHUNK_FENCE, &req.base,
		       &rdmafs__chunk_fence_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (now)
		*now = resp->fence;
	rdmafs__chunk_fence_resp__free_unpacked(resp, NULL);
	return 0;
}

int ctl_chunk_list(struct ctl *c, struct xprt_conn *conn, uint64_t after_ino, uint64_t after_index,
		   bool from_start, Rdmafs__ChunkListResp **out)
{
	Rdmafs__ChunkListReq req = RDMAFS__CHUNK_LIST_REQ__INIT;
	Rdmafs__ChunkId after = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkListResp *resp;
	int ret;

	if (!from_start) {
		after.inode = after_ino;
		after.index = after_index;
		req.start_after = &after;
	}
	ret = ctl_call(c, conn, RDMAFS__METHOD__METHOD_CHUNK_LIST, &req.base,
		       &rdmafs__chunk_list_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	/* Entries must be present and strictly ascending past start_after. */
	for (size_t i = 0; i < resp->n_chunks; i++) {
		const Rdmafs__ChunkId *id = resp->chunks[i] ? resp->chunks[i]->chunk : NULL;
		bool ascending = id && (id->inode > after_ino ||
					(id->inode == after_ino && id->index > after_index));

		if (!id || (!ascending && (i > 0 || !from_start))) {
			rdmafs__chunk_list_resp__free_unpacked(resp, NULL);
			return -EBADMSG;
		}
		after_ino = id->inode;
		after_index = id->index;
	}
	/* An empty page that is not the end would make a caller loop forever. */
	if (resp->n_chunks == 0)
		resp->done = true;
	*out = resp;
	return 0;
}

int ctl_inode_list(struct ctl *c, uint64_t after, Rdmafs__InodeListResp **out)
{
	Rdmafs__InodeListReq req = RDMAFS__INODE_LIST_REQ__INIT;
	Rdmafs__InodeListResp *resp;
	int ret;

	req.start_after = after;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_INODE_LIST, &req.base,
			    &rdmafs__inode_list_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	for (size_t i = 0; i < resp->n_inodes; i++) {
		const Rdmafs__InodeListEntry *e = resp->inodes[i];
		const Rdmafs__Layout *l = e ? e->layout : NULL;
		bool ok = e && e->ino > after;

		if (ok && l) {
			ok = rdmafs_layout_check(l->chunk_size, l->n_daemons, l->stripe_width) == 0;
			for (size_t d = 0; ok && d < l->n_daemons; d++)
				ok = l->daemons[d].len == RDMAFS_UUID_LEN;
		}
		if (!ok) {
			ctl_err("the metadata service at %s sent a malformed inode list",
				c->meta_uri);
			rdmafs__inode_list_resp__free_unpacked(resp, NULL);
			return -EBADMSG;
		}
		after = e->ino;
	}
	if (resp->n_inodes == 0)
		resp->done = true;
	*out = resp;
	return 0;
}
