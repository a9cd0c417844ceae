/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The rdmafs client core (see rdmafs_fs.h): metadata calls, the cluster map,
 * one connection per storage daemon and striped chunk I/O issued to the
 * daemons in parallel.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "rdmafs.pb-c.h"
#include "fs_client_i.h"
#include "fs_stats_i.h"
#include "chunk_msg_i.h"

#define SLOT_REQ_MAX	   (512u + CHUNK_INLINE_MAX) /* chunk requests, inline writes too */
#define SLOT_REPLY_MAX	   256u			     /* chunk replies are a few varints */
#define REMOVE_BATCH	   256u			     /* chunk indexes per CHUNK_REMOVE */
#define BACKOFF_MIN_MS	   100u
#define BACKOFF_MAX_MS	   5000u
#define REFRESH_MIN_GAP_MS 500u
#define FENCE_WAIT_MS	   30000u /* default fence_wait_ms */
#define FENCE_BACKOFF_MIN  20u
#define FENCE_BACKOFF_MAX  1000u
/*
 * How long a replicated write waits for its chain to settle (a daemon that
 * died is marked DOWN after the service's heartbeat timeout, 10 s by
 * default, and the daemons' maps follow within a heartbeat), and a read
 * for a copy that may serve, before the call fails with EIO.
 */
#define REPLICA_WAIT_MS 30000u
#define HELD_BUCKETS	1024u /* the open handles' table */
#define RECLAIM_BATCH	256u  /* handles per RECLAIM: well inside a 16 KiB message */

_Static_assert(RFS_UUID_LEN == RDMAFS_UUID_LEN, "UUID sizes differ");

/* An open handle the service gave us: reclaimed if it restarts. */
struct rfs_held {
	uint64_t handle, ino;
	uint32_t flags;
	struct rfs_held *next;
};

/*
 * Connections to one storage daemon over tcp: one per slot of the calling
 * threads (thread_slot()), as NFS's nconnect, so that a thread waiting for
 * its answer reads its own socket (xprt_call_wait()) instead of waking
 * another thread's. Over verbs, and to the metadata service, one.
 */
#define RFS_TCP_CONNS 8

/* A server we talk to: the metadata service or one storage daemon. */
struct rfs_peer {
	pthread_mutex_t lock; /* guards everything below but uuid and label */
	uint8_t uuid[RFS_UUID_LEN];
	char label[48]; /* for the log */
	char **uris;	/* addresses usable with our transport, in order */
	size_t uri_count;
	struct xprt_conn *conns[RFS_TCP_CONNS]; /* conn_count of them used */
	unsigned conn_count;
	uint64_t retry_at_ms; /* no connect attempt before this */
	uint32_t backoff_ms;
	int last_error;
	int state;	    /* DaemonState from the map */
	bool was_connected; /* a connection to it was made once */
	/*
	 * Since then one of its connections was found broken or closed for a new
	 * address, or a connect to it failed: the next connection, on any slot
	 * and whichever thread makes it, is a reconnect (the daemon came back).
	 */
	bool lost;
	enum rfs_target target;
};

struct rfs {
	struct xprt_ctx *ctx;
	struct xprt_pool *pool;
	uint32_t buf_size, buf_count;
	int timeout_ms;
	uint32_t fence_wait_ms;
	enum rfs_transport transport;
	bool have_rdma;
	uint8_t *zeros; /* buf_size zero bytes, for punching holes */

	struct rfs_peer meta;

	pthread_rwlock_t map_lock; /* guards epoch and the daemons array (not the peers) */
	uint64_t epoch;
	uint8_t cluster_id[RFS_UUID_LEN]; /* the cluster we belong to ... */
	bool cluster_known;		  /* ... once the first map (or the options) said */
	struct rfs_peer **daemons;
	size_t daemon_count, daemon_cap;
	pthread_mutex_t refresh_lock; /* one refresh at a time */
	uint64_t last_refresh_ms;

	pthread_t poller;
	bool poller_running;
	pthread_mutex_t poll_lock;
	pthread_cond_t poll_cond;
	bool stop, refresh_wanted;
	uint32_t poll_ms;

	struct rfs_counters counters; /* rfs_stats_get() */

	/*
	 * The handles we hold, and the service run that gave them: a new
	 * connection that finds another run reclaims them all first.
	 */
	pthread_mutex_t held_lock;
	struct rfs_held *held[HELD_BUCKETS];
	size_t held_count;
	uint64_t service_run; /* 0 until the first map; guarded by map_lock */

	unsigned write_behind; /* writes in flight per file (rfs_options) */
	uint32_t wb_buffers;   /* buffers write-behind holds (atomic) */
};

/* Errors after which the call was not (or may not have been) executed and a retry may help. */
static bool retryable(int ret)
{
	return ret == -ECONNRESET || ret == -ENOTCONN || ret == -EPIPE || ret == -EBUSY;
}

void rfs_options_init(struct rfs_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->name = "rdmafs-fuse";
	opts->call_timeout_ms = 5000;
	opts->connect_timeout_ms = 2000;
	opts->buf_size = 1u << 20;
	opts->buf_count = 32;
	opts->map_poll_ms = 5000;
	opts->fence_wait_ms = FENCE_WAIT_MS;
	opts->write_behind = 8;
	opts->busy_poll_us = -1;
}

/* ---- peers and connections --------------------------------------------------- */

static void peer_init(struct rfs_peer *p, const char *label, enum rfs_target target)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	snprintf(p->label, sizeof(p->label), "%s", label);
	p->target = target;
	p->conn_count = 1;
}

/* Moves @p's connections to @out (RFS_TCP_CONNS), for closing without its lock. */
static void peer_take_conns(struct rfs_peer *p, struct xprt_conn **out)
{
	memcpy(out, p->conns, sizeof(p->conns));
	memset(p->conns, 0, sizeof(p->conns));
}

static void conns_close(struct xprt_conn **conns)
{
	for (unsigned i = 0; i < RFS_TCP_CONNS; i++)
		xprt_conn_close(conns[i]);
}

static void free_uris(char **uris, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(uris[i]);
	free(uris);
}

/* Closes the connection and frees the peer's members (not @p itself). */
static void peer_fini(struct rfs_peer *p)
{
	conns_close(p->conns);
	free_uris(p->uris, p->uri_count);
	pthread_mutex_destroy(&p->lock);
}

static void request_refresh(struct rfs *fs)
{
	pthread_mutex_lock(&fs->poll_lock);
	fs->refresh_wanted = true;
	pthread_cond_signal(&fs->poll_cond);
	pthread_mutex_unlock(&fs->poll_lock);
}

static void uuid_text(const uint8_t *u, char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

/*
 * Whether the cluster id @id (of @len bytes) is ours; the first one met
 * becomes ours. -EXDEV (logged) for another cluster's.
 */
static int cluster_check(struct rfs *fs, const uint8_t *id, size_t len, const char *where)
{
	char ours[37], theirs[37];
	int ret = 0;

	if (len != RFS_UUID_LEN)
		return 0; /* a service older than cluster ids */
	pthread_rwlock_wrlock(&fs->map_lock);
	if (!fs->cluster_known) {
		memcpy(fs->cluster_id, id, RFS_UUID_LEN);
		fs->cluster_known = true;
	} else if (memcmp(fs->cluster_id, id, RFS_UUID_LEN) != 0) {
		uuid_text(fs->cluster_id, ours);
		uuid_text(id, theirs);
		rdmafs_log(RDMAFS_LOG_ERR,
			   "the metadata service at %s belongs to cluster %s, not %s: refusing it",
			   where, theirs, ours);
		ret = -EXDEV;
	}
	pthread_rwlock_unlock(&fs->map_lock);
	return ret;
}

/* ---- open handles, reclaimed after a restart of the service ---------------------- */

static struct rfs_held **held_slot(struct rfs *fs, uint64_t handle)
{
	struct rfs_held **p =
		&fs->held[(handle * 0x9e3779b97f4a7c15ULL) >> 54 & (HELD_BUCKETS - 1)];

	while (*p && (*p)->handle != handle)
		p = &(*p)->next;
	return p;
}

void rfs_held_add(struct rfs *fs, uint64_t handle, uint64_t ino, int flags)
{
	struct rfs_held *h = malloc(sizeof(*h)), **slot;

	if (!h) {
		/* the handle works; only a restart of the service would lose it */
		rdmafs_log(RDMAFS_LOG_WARN,
			   "out of memory: handle %llu on inode %llu will not be reclaimed if "
			   "the metadata service restarts",
			   (unsigned long long)handle, (unsigned long long)ino);
		return;
	}
	h->handle = handle;
	h->ino = ino;
	h->flags = (uint32_t)flags;
	pthread_mutex_lock(&fs->held_lock);
	slot = held_slot(fs, handle);
	h->next = *slot;
	*slot = h;
	fs->held_count++;
	pthread_mutex_unlock(&fs->held_lock);
}

void rfs_held_remove(struct rfs *fs, uint64_t handle)
{
	struct rfs_held **slot, *h;

	pthread_mutex_lock(&fs->held_lock);
	slot = held_slot(fs, handle);
	h = *slot;
	if (h) {
		*slot = h->next;
		fs->held_count--;
	}
	pthread_mutex_unlock(&fs->held_lock);
	free(h);
}

/* Sends one RECLAIM of @n handles on @conn; counts the files gone into *@gone. */
static int reclaim_batch(struct rfs *fs, struct xprt_conn *conn, Rdmafs__ReclaimHandle **list,
			 size_t n, uint8_t *body, size_t body_cap, uint8_t *reply, size_t cap,
			 size_t *gone)
{
	Rdmafs__ReclaimReq req = RDMAFS__RECLAIM_REQ__INIT;
	Rdmafs__ReclaimResp *resp;
	size_t len, reply_len = 0;
	int ret;

	req.handles = list;
	req.n_handles = n;
	len = protobuf_c_message_get_packed_size(&req.base);
	if (len > body_cap)
		return -EMSGSIZE;
	len = protobuf_c_message_pack(&req.base, body);
	ret = rdmafs_status_from_peer(xprt_call(conn, RDMAFS__METHOD__METHOD_RECLAIM, body, len,
						reply, cap, &reply_len, fs->timeout_ms));
	if (ret)
		return ret;
	resp = rdmafs__reclaim_resp__unpack(NULL, reply_len, reply);
	if (!resp)
		return -EBADMSG;
	if (resp->reclaimed + resp->n_gone != n)
		ret = -EPROTO;
	*gone += resp->n_gone;
	rdmafs__reclaim_resp__free_unpacked(resp, NULL);
	return ret;
}

uint64_t rfs_service_run(struct rfs *fs)
{
	uint64_t run;

	pthread_rwlock_rdlock(&fs->map_lock);
	run = fs->service_run;
	pthread_rwlock_unlock(&fs->map_lock);
	return run;
}

/*
 * The service on @conn restarted and forgot our handles: names them all to
 * it again (RECLAIM), in batches, before the connection serves any call.
 * Holds held_lock throughout, so no handle comes or goes meanwhile.
 */
static int reclaim_handles(struct rfs *fs, struct xprt_conn *conn)
{
	Rdmafs__ReclaimHandle items[RECLAIM_BATCH], *list[RECLAIM_BATCH];
	size_t n = 0, total = 0, gone = 0, cap = xprt_conn_max_body(conn);
	uint8_t *body = malloc(cap), *reply = malloc(cap);
	int ret = body && reply ? 0 : -ENOMEM;

	pthread_mutex_lock(&fs->held_lock);
	for (unsigned b = 0; b < HELD_BUCKETS && !ret; b++) {
		for (struct rfs_held *h = fs->held[b]; h && !ret; h = h->next) {
			rdmafs__reclaim_handle__init(&items[n]);
			items[n].handle = h->handle;
			items[n].ino = h->ino;
			items[n].flags = h->flags;
			list[n] = &items[n];
			if (++n == RECLAIM_BATCH) {
				ret = reclaim_batch(fs, conn, list, n, body, cap, reply, cap,
						    &gone);
				total += n;
				n = 0;
			}
		}
	}
	if (!ret && n) {
		ret = reclaim_batch(fs, conn, list, n, body, cap, reply, cap, &gone);
		total += n;
	}
	pthread_mutex_unlock(&fs->held_lock);
	free(body);
	free(reply);
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN, "%s: reclaiming our open handles: %s", fs->meta.label,
			   xprt_strerror(ret));
	else if (total)
		rdmafs_log(gone ? RDMAFS_LOG_WARN : RDMAFS_LOG_INFO,
			   "%s: the service restarted; reclaimed %zu open handle(s), %zu of them "
			   "on files that are gone",
			   fs->meta.label, total, gone);
	return ret;
}

/*
 * A new connection to the metadata service must lead to our cluster: the
 * address may now serve another one (a service rebuilt or moved). Asks for
 * the map (unchanged if it is ours, so the answer is short) and checks its id.
 * If the service restarted since we last met it, our handles are reclaimed
 * on the connection before anything else uses it.
 */
static int meta_conn_check(struct rfs *fs, struct xprt_conn *conn, const char *uri)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *resp;
	size_t len = protobuf_c_message_get_packed_size(&req.base), cap, reply_len = 0;
	uint64_t run = 0, known;
	uint8_t body[32], *reply;
	int ret;

	pthread_rwlock_rdlock(&fs->map_lock);
	req.known_epoch = fs->epoch;
	if (!fs->cluster_known) {
		pthread_rwlock_unlock(&fs->map_lock);
		return 0;
	}
	pthread_rwlock_unlock(&fs->map_lock);
	len = protobuf_c_message_pack(&req.base, body);
	cap = xprt_conn_max_body(conn);
	reply = malloc(cap);
	if (!reply)
		return -ENOMEM;
	ret = rdmafs_status_from_peer(xprt_call(conn, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, body,
						len, reply, cap, &reply_len, fs->timeout_ms));
	if (!ret) {
		resp = rdmafs__get_cluster_map_resp__unpack(NULL, reply_len, reply);
		if (!resp) {
			ret = -EBADMSG;
		} else {
			ret = cluster_check(fs, resp->cluster_id.data, resp->cluster_id.len, uri);
			run = resp->service_run;
			rdmafs__get_cluster_map_resp__free_unpacked(resp, NULL);
		}
	}
	free(reply);
	if (ret || !run)
		return ret;
	known = rfs_service_run(fs);
	if (known && known != run)
		ret = reclaim_handles(fs, conn);
	if (!ret) {
		pthread_rwlock_wrlock(&fs->map_lock);
		fs->service_run = run;
		pthread_rwlock_unlock(&fs->map_lock);
	}
	return ret;
}

/* This thread's slot among a peer's connections: numbered at its first call. */
static unsigned thread_slot(void)
{
	static unsigned next;
	static __thread unsigned slot; /* 0: not numbered yet */

	if (!slot)
		slot = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
	return slot - 1;
}

/*
 * A live connection to @p with a reference for the caller: the calling
 * thread's own (RFS_TCP_CONNS) where @p has several. A dead one is
 * replaced at once (the peer may just have restarted); a failed connect makes
 * the next attempts wait for a growing backoff, failing fast meanwhile.
 */
static int peer_conn_get(struct rfs *fs, struct rfs_peer *p, struct xprt_conn **out)
{
	unsigned slot = p->conn_count > 1 ? thread_slot() % p->conn_count : 0;
	struct xprt_conn *fresh = NULL;
	uint64_t now;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	if (p->conns[slot] && xprt_conn_alive(p->conns[slot]))
		goto out_ref;
	if (p->conns[slot])
		p->lost = true;
	now = rdmafs_now_ms();
	if (now < p->retry_at_ms) {
		ret = p->last_error ? p->last_error : -EIO;
		goto out_unlock;
	}
	ret = -EIO;
	for (i = 0; i < p->uri_count; i++) {
		ret = xprt_connect(fs->ctx, p->uris[i], &fresh);
		if (!ret && p == &fs->meta) {
			ret = meta_conn_check(fs, fresh, p->uris[i]);
			if (ret) {
				xprt_conn_close(fresh);
				fresh = NULL;
				continue;
			}
		}
		if (!ret)
			break;
		rdmafs_log(RDMAFS_LOG_WARN, "%s: cannot connect to %s: %s", p->label, p->uris[i],
			   xprt_strerror(ret));
	}
	if (ret) {
		if (p->uri_count == 0)
			rdmafs_log(RDMAFS_LOG_WARN, "%s: no address usable with this transport",
				   p->label);
		/*
		 * A refused secret is not a permission problem of the caller. A
		 * storage daemon that cannot be reached is -EHOSTUNREACH, which a
		 * replicated call waits out (the chain skips it once it is DOWN)
		 * and the application sees as -EIO (rdmafs_status_for_caller()).
		 */
		if (ret != -ETIMEDOUT)
			ret = p == &fs->meta ? -EIO : -EHOSTUNREACH;
		p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
		if (p->backoff_ms > BACKOFF_MAX_MS)
			p->backoff_ms = BACKOFF_MAX_MS;
		p->retry_at_ms = rdmafs_now_ms() + p->backoff_ms;
		p->last_error = ret;
		p->lost |= p->was_connected;
		rfs_count(&fs->counters.targets[p->target].connect_failures, 1);
		goto out_unlock;
	}
	rfs_count(&fs->counters.targets[p->target].connects, 1);
	if (p->lost)
		rfs_count(&fs->counters.targets[p->target].reconnects, 1);
	p->was_connected = true;
	p->lost = false;
	if (p->backoff_ms)
		rdmafs_log(RDMAFS_LOG_WARN, "%s: connected again", p->label);
	else
		rdmafs_log(RDMAFS_LOG_DEBUG, "%s: connected to %s over %s", p->label, p->uris[i],
			   xprt_kind_name(xprt_conn_kind(fresh)));
	xprt_conn_close(p->conns[slot]);
	p->conns[slot] = fresh;
	p->backoff_ms = 0;
	p->retry_at_ms = 0;
	p->last_error = 0;
out_ref:
	xprt_conn_get(p->conns[slot]);
	*out = p->conns[slot];
out_unlock:
	pthread_mutex_unlock(&p->lock);
	if (ret && p != &fs->meta)
		request_refresh(fs);
	return ret;
}

/* Keeps the addresses of @addrs that our transport can use, rewriting auto:// when forced. */
static int filter_uris(struct rfs *fs, char *const *addrs, size_t count, char ***out,
		       size_t *out_count)
{
	char **uris, host[256];
	enum xprt_kind kind;
	size_t n = 0;
	uint16_t port;
	int ret;

	uris = calloc(count ? count : 1, sizeof(*uris));
	if (!uris)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		const char *scheme = NULL;
		char uri[300];

		if (!addrs[i] || xprt_uri_parse(addrs[i], &kind, host, sizeof(host), &port))
			continue;
		switch (fs->transport) {
		case RFS_TRANSPORT_TCP:
			if (kind == XPRT_KIND_VERBS)
				continue;
			scheme = "tcp";
			break;
		case RFS_TRANSPORT_RDMA:
			if (kind == XPRT_KIND_TCP)
				continue;
			scheme = "rdma";
			break;
		case RFS_TRANSPORT_AUTO:
			if (kind == XPRT_KIND_VERBS && !fs->have_rdma)
				continue;
			break;
		}
		if (scheme) {
			bool v6 = strchr(host, ':') != NULL;

			ret = snprintf(uri, sizeof(uri), "%s://%s%s%s:%u", scheme, v6 ? "[" : "",
				       host, v6 ? "]" : "", (unsigned)port);
			if (ret < 0 || (size_t)ret >= sizeof(uri))
				continue;
			uris[n] = strdup(uri);
		} else {
			uris[n] = strdup(addrs[i]);
		}
		if (!uris[n]) {
			free_uris(uris, n);
			return -ENOMEM;
		}
		n++;
	}
	*out = uris;
	*out_count = n;
	return 0;
}

static bool same_uris(char *const *a, size_t an, char *const *b, size_t bn)
{
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

/* ---- metadata calls ------------------------------------------------------------ */

int rfs_meta_call(struct rfs *fs, uint32_t method, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, bool idempotent,
		  ProtobufCMessage **resp)
{
	size_t need = protobuf_c_message_get_packed_size(req), cap, resp_len = 0;
	uint8_t *body, *reply = NULL;
	struct xprt_conn *conn;
	int ret = 0;

	*resp = NULL;
	body = malloc(need ? need : 1);
	if (!body)
		return -ENOMEM;
	protobuf_c_message_pack(req, body);
	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t start_ns;

		if (attempt)
			rfs_count(&fs->counters.targets[RFS_TARGET_META].retries, 1);
		ret = peer_conn_get(fs, &fs->meta, &conn);
		if (ret)
			break;
		cap = xprt_conn_max_body(conn);
		if (!reply)
			reply = malloc(cap);
		if (!reply) {
			xprt_conn_put(conn);
			ret = -ENOMEM;
			break;
		}
		start_ns = rdmafs_now_ns();
		ret = rdmafs_status_from_peer(
			xprt_call(conn, method, body, need, reply, cap, &resp_len, fs->timeout_ms));
		rfs_count_call(&fs->counters, method, start_ns, ret);
		xprt_conn_put(conn);
		/* ENOTCONN: it never left; after a reset only an idempotent call may run twice */
		if (ret == -ENOTCONN || (idempotent && (ret == -ECONNRESET || ret == -EPIPE)))
			continue;
		break;
	}
	if (ret)
		goto out_free;
	*resp = protobuf_c_message_unpack(resp_desc, NULL, resp_len, reply);
	if (!*resp)
		ret = -EBADMSG;
out_free:
	free(reply);
	free(body);
	return ret;
}

void rfs_meta_free(ProtobufCMessage *resp)
{
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
}

/* ---- cluster map ------------------------------------------------------------------ */

static struct rfs_peer *find_daemon_locked(struct rfs *fs, const uint8_t *uuid)
{
	for (size_t i = 0; i < fs->daemon_count; i++)
		if (memcmp(fs->daemons[i]->uuid, uuid, RFS_UUID_LEN) == 0)
			return fs->daemons[i];
	return NULL;
}

static struct rfs_peer *find_daemon(struct rfs *fs, const uint8_t *uuid)
{
	struct rfs_peer *p;

	pthread_rwlock_rdlock(&fs->map_lock);
	p = find_daemon_locked(fs, uuid);
	pthread_rwlock_unlock(&fs->map_lock);
	return p;
}

/* Adds or updates the daemon of @info. */
static int apply_daemon(struct rfs *fs, const Rdmafs__DaemonInfo *info)
{
	struct xprt_conn *old[RFS_TCP_CONNS] = {NULL};
	struct rfs_peer *p;
	char **uris;
	size_t n;
	int ret;

	if (info->uuid.len != RFS_UUID_LEN) {
		rdmafs_log(RDMAFS_LOG_WARN, "cluster map: a daemon with a %zu-byte UUID, ignored",
			   info->uuid.len);
		return 0;
	}
	ret = filter_uris(fs, info->addresses, info->n_addresses, &uris, &n);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&fs->map_lock);
	p = find_daemon_locked(fs, info->uuid.data);
	if (!p) {
		char label[48];

		if (fs->daemon_count == fs->daemon_cap) {
			size_t cap = fs->daemon_cap ? fs->daemon_cap * 2 : 8;
			struct rfs_peer **d = realloc(fs->daemons, cap * sizeof(*d));

			if (!d) {
				ret = -ENOMEM;
				goto err_unlock;
			}
			fs->daemons = d;
			fs->daemon_cap = cap;
		}
		p = malloc(sizeof(*p));
		if (!p) {
			ret = -ENOMEM;
			goto err_unlock;
		}
		snprintf(label, sizeof(label), "daemon %02x%02x%02x%02x", info->uuid.data[0],
			 info->uuid.data[1], info->uuid.data[2], info->uuid.data[3]);
		peer_init(p, label, RFS_TARGET_STORAGE);
		if (fs->transport == RFS_TRANSPORT_TCP || !fs->have_rdma)
			p->conn_count = RFS_TCP_CONNS;
		memcpy(p->uuid, info->uuid.data, RFS_UUID_LEN);
		fs->daemons[fs->daemon_count++] = p;
	}
	pthread_rwlock_unlock(&fs->map_lock);

	pthread_mutex_lock(&p->lock);
	if (!same_uris(p->uris, p->uri_count, uris, n)) {
		free_uris(p->uris, p->uri_count);
		p->uris = uris;
		p->uri_count = n;
		uris = NULL;
		peer_take_conns(p, old);
		p->lost |= p->was_connected;
		p->retry_at_ms = 0;
	}
	/* back UP: try at once instead of waiting out the backoff */
	if (info->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP &&
	    p->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
		p->retry_at_ms = 0;
	p->state = info->state;
	pthread_mutex_unlock(&p->lock);
	conns_close(old);
	if (uris)
		free_uris(uris, n);
	return 0;

err_unlock:
	pthread_rwlock_unlock(&fs->map_lock);
	free_uris(uris, n);
	return ret;
}

int rfs_map_refresh(struct rfs *fs, bool force)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *resp;
	ProtobufCMessage *msg;
	int ret;

	pthread_mutex_lock(&fs->refresh_lock);
	pthread_rwlock_rdlock(&fs->map_lock);
	req.known_epoch = force ? 0 : fs->epoch;
	/* a layout naming a removed daemon is stale (layout_peer()): keep knowing them */
	req.include_removed = true;
	pthread_rwlock_unlock(&fs->map_lock);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req.base,
			    &rdmafs__get_cluster_map_resp__descriptor, true, &msg);
	fs->last_refresh_ms = rdmafs_now_ms();
	if (ret)
		goto out_unlock;
	resp = (Rdmafs__GetClusterMapResp *)msg;
	rfs_count(&fs->counters.map_fetches, 1);
	ret = cluster_check(fs, resp->cluster_id.data, resp->cluster_id.len,
			    fs->meta.uri_count ? fs->meta.uris[0] : "?");
	if (!ret) {
		/* the first map names the run; later runs are met by meta_conn_check() */
		pthread_rwlock_wrlock(&fs->map_lock);
		if (!fs->service_run)
			fs->service_run = resp->service_run;
		pthread_rwlock_unlock(&fs->map_lock);
	}
	if (!ret && !resp->unchanged) {
		for (size_t i = 0; i < resp->n_daemons && !ret; i++)
			ret = apply_daemon(fs, resp->daemons[i]);
		if (!ret) {
			pthread_rwlock_wrlock(&fs->map_lock);
			fs->epoch = resp->epoch;
			pthread_rwlock_unlock(&fs->map_lock);
			rfs_count(&fs->counters.map_changes, 1);
			rdmafs_log(RDMAFS_LOG_DEBUG, "cluster map: epoch %llu, %zu daemons",
				   (unsigned long long)resp->epoch, resp->n_daemons);
		}
	}
	rfs_meta_free(msg);
out_unlock:
	pthread_mutex_unlock(&fs->refresh_lock);
	return ret;
}

uint64_t rfs_map_epoch(struct rfs *fs)
{
	uint64_t epoch;

	pthread_rwlock_rdlock(&fs->map_lock);
	epoch = fs->epoch;
	pthread_rwlock_unlock(&fs->map_lock);
	return epoch;
}

void rfs_stats_get(struct rfs *fs, struct rfs_stats *out)
{
	memset(out, 0, sizeof(*out));
	rfs_counters_read(&fs->counters, out);
	out->map_epoch = rfs_map_epoch(fs);
	out->buffers = fs->buf_count;
}

/* Polls the map, and refetches it at once when a daemon could not be reached. */
static void *poller_main(void *arg)
{
	struct rfs *fs = arg;
	struct timespec deadline;

	pthread_mutex_lock(&fs->poll_lock);
	while (!fs->stop) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += fs->poll_ms / 1000;
		deadline.tv_nsec += (long)(fs->poll_ms % 1000) * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		while (!fs->stop && !fs->refresh_wanted &&
		       pthread_cond_timedwait(&fs->poll_cond, &fs->poll_lock, &deadline) == 0)
			;
		if (fs->stop)
			break;
		fs->refresh_wanted = false;
		pthread_mutex_unlock(&fs->poll_lock);
		if (rdmafs_now_ms() - fs->last_refresh_ms >= REFRESH_MIN_GAP_MS)
			rfs_map_refresh(fs, false);
		else
			usleep(REFRESH_MIN_GAP_MS * 1000u);
		pthread_mutex_lock(&fs->poll_lock);
	}
	pthread_mutex_unlock(&fs->poll_lock);
	return NULL;
}

/* ---- create / destroy --------------------------------------------------------------- */

int rfs_ctx_create(struct xprt_options *xo, const char *key_file, struct xprt_ctx **out)
{
	struct xprt_key key;
	int ret;

	if (!key_file)
		return xprt_ctx_create(xo, out);
	ret = rdmafs_key_read(key_file, &key);
	if (ret)
		return ret;
	xo->key = &key;
	ret = xprt_ctx_create(xo, out); /* it keeps a copy */
	xo->key = NULL;
	sodium_memzero(&key, sizeof(key));
	return ret;
}

int rfs_create(const struct rfs_options *opts, struct rfs **out)
{
	struct xprt_options xo;
	pthread_condattr_t ca;
	struct rfs *fs;
	int ret;

	if (!opts->meta_uri || (!opts->key_file && (!opts->secret || !opts->secret_len)) ||
	    opts->buf_size < 4096 || !opts->buf_count || opts->transport > RFS_TRANSPORT_TCP)
		return -EINVAL;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->buf_size = opts->buf_size;
	fs->buf_count = opts->buf_count;
	fs->timeout_ms = opts->call_timeout_ms ? (int)opts->call_timeout_ms : 5000;
	fs->transport = opts->transport;
	fs->poll_ms = opts->map_poll_ms ? opts->map_poll_ms : 5000;
	fs->fence_wait_ms = opts->fence_wait_ms ? opts->fence_wait_ms : FENCE_WAIT_MS;
	fs->write_behind = opts->write_behind;
	peer_init(&fs->meta, "metadata service", RFS_TARGET_META);
	pthread_rwlock_init(&fs->map_lock, NULL);
	pthread_mutex_init(&fs->refresh_lock, NULL);
	pthread_mutex_init(&fs->held_lock, NULL);
	pthread_mutex_init(&fs->poll_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->poll_cond, &ca);
	pthread_condattr_destroy(&ca);

	fs->meta.uris = calloc(1, sizeof(char *));
	if (fs->meta.uris)
		fs->meta.uris[0] = strdup(opts->meta_uri);
	fs->zeros = calloc(1, opts->buf_size);
	if (!fs->meta.uris || !fs->meta.uris[0] || !fs->zeros) {
		ret = -ENOMEM;
		goto err_free;
	}
	fs->meta.uri_count = 1;

	xprt_options_init(&xo);
	xo.secret = opts->secret;
	xo.secret_len = opts->secret_len;
	xo.name = opts->name;
	xo.call_timeout_ms = (uint32_t)fs->timeout_ms;
	xo.connect_timeout_ms = opts->connect_timeout_ms ? opts->connect_timeout_ms : 2000;
	if (opts->busy_poll_us >= 0)
		xo.busy_poll_us = (uint32_t)opts->busy_poll_us;
	ret = rfs_ctx_create(&xo, opts->key_file, &fs->ctx);
	if (ret)
		goto err_free;
	fs->have_rdma = xprt_ctx_has_rdma(fs->ctx);
	if (fs->transport == RFS_TRANSPORT_RDMA && !fs->have_rdma) {
		rdmafs_log(RDMAFS_LOG_WARN, "transport=rdma but this host has no RDMA device");
		ret = -ENODEV;
		goto err_destroy_ctx;
	}
	ret = xprt_pool_create(fs->ctx, opts->buf_size, opts->buf_count,
			       XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE, &fs->pool);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_WARN, "cannot register %u buffers of %u bytes: %s%s",
			   opts->buf_count, opts->buf_size, xprt_strerror(ret),
			   ret == -ENOMEM ? " (raise the memlock limit: ulimit -l)" : "");
		goto err_destroy_ctx;
	}
	/* the first connect reports the real reason (refused, secret, timeout) */
	ret = xprt_connect(fs->ctx, opts->meta_uri, &fs->meta.conns[0]);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_WARN, "cannot connect to the metadata service at %s: %s",
			   opts->meta_uri, xprt_strerror(ret));
		goto err_destroy_pool;
	}
	rdmafs_log(RDMAFS_LOG_DEBUG, "connected to the metadata service at %s", opts->meta_uri);
	fs->meta.was_connected = true;
	rfs_count(&fs->counters.targets[RFS_TARGET_META].connects, 1);
	ret = rfs_map_refresh(fs, true);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_WARN, "cannot fetch the cluster map: %s", xprt_strerror(ret));
		goto err_destroy_pool;
	}
	ret = -pthread_create(&fs->poller, NULL, poller_main, fs);
	if (ret)
		goto err_destroy_pool;
	fs->poller_running = true;
	*out = fs;
	return 0;

err_destroy_pool:
	xprt_conn_close(fs->meta.conns[0]);
	fs->meta.conns[0] = NULL;
	for (size_t i = 0; i < fs->daemon_count; i++) {
		peer_fini(fs->daemons[i]);
		free(fs->daemons[i]);
	}
	free(fs->daemons);
	xprt_pool_destroy(fs->pool);
err_destroy_ctx:
	xprt_ctx_destroy(fs->ctx);
err_free:
	free(fs->zeros);
	peer_fini(&fs->meta);
	pthread_cond_destroy(&fs->poll_cond);
	pthread_mutex_destroy(&fs->poll_lock);
	pthread_mutex_destroy(&fs->refresh_lock);
	pthread_mutex_destroy(&fs->held_lock);
	pthread_rwlock_destroy(&fs->map_lock);
	free(fs);
	return ret;
}

void rfs_destroy(struct rfs *fs)
{
	if (!fs)
		return;
	if (fs->poller_running) {
		pthread_mutex_lock(&fs->poll_lock);
		fs->stop = true;
		pthread_cond_signal(&fs->poll_cond);
		pthread_mutex_unlock(&fs->poll_lock);
		pthread_join(fs->poller, NULL);
	}
	for (size_t i = 0; i < fs->daemon_count; i++) {
		peer_fini(fs->daemons[i]);
		free(fs->daemons[i]);
	}
	free(fs->daemons);
	peer_fini(&fs->meta);
	xprt_pool_destroy(fs->pool);
	xprt_ctx_destroy(fs->ctx);
	free(fs->zeros);
	pthread_cond_destroy(&fs->poll_cond);
	pthread_mutex_destroy(&fs->poll_lock);
	pthread_mutex_destroy(&fs->refresh_lock);
	for (unsigned b = 0; b < HELD_BUCKETS; b++) {
		while (fs->held[b]) {
			struct rfs_held *h = fs->held[b];

			fs->held[b] = h->next;
			free(h);
		}
	}
	pthread_mutex_destroy(&fs->held_lock);
	pthread_rwlock_destroy(&fs->map_lock);
	free(fs);
}

/* ---- layouts -------------------------------------------------------------------------- */

int rfs_layout_parse(const Rdmafs__Layout *pb, struct rfs_layout *out)
{
	if (!pb || rdmafs_layout_check(pb->chunk_size, pb->n_daemons, pb->stripe_width) ||
	    rdmafs_domains_check(pb->domains, pb->n_domains, pb->n_daemons) ||
	    pb->placement != RDMAFS__PLACEMENT__PLACEMENT_RENDEZVOUS_V1)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < pb->n_daemons; i++) {
		if (pb->daemons[i].len != RFS_UUID_LEN)
			return -EPROTO;
		memcpy(out->daemons[i], pb->daemons[i].data, RFS_UUID_LEN);
	}
	out->chunk_size = pb->chunk_size;
	out->stripe_width = pb->stripe_width;
	out->seed = pb->placement_seed;
	out->generation = pb->generation;
	if (pb->replicas > RDMAFS_MAX_REPLICAS)
		return -EPROTO;
	out->replicas = pb->replicas ? pb->replicas : 1;
	out->n_domains = (uint32_t)pb->n_domains;
	if (pb->n_domains)
		memcpy(out->domains, pb->domains, pb->n_domains * sizeof(*out->domains));
	return 0;
}

int rfs_layout_fetch(struct rfs *fs, uint64_t ino, struct rfs_layout *out)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *resp;
	int ret;

	req.ino = ino;
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_GETATTR, &req.base,
			    &rdmafs__attr_resp__descriptor, true, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	/* a service that predates generations sends no layout here */
	ret = resp->layout ? rfs_layout_parse(resp->layout, out) : -EPROTO;
	rfs_meta_free(&resp->base);
	return ret;
}

/* Where a data call stands in waiting out a drain that fenced its layout. */
struct fence_wait {
	uint64_t deadline_ms; /* 0: not waited yet */
	uint32_t backoff_ms;
	bool changed; /* *layout was replaced */
};

/* Sleeps *@backoff_ms, at most @left ms, and doubles *@backoff_ms up to FENCE_BACKOFF_MAX. */
static void backoff_sleep(uint32_t *backoff_ms, uint64_t left)
{
	uint32_t ms = *backoff_ms > left ? (uint32_t)left : *backoff_ms;
	struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};

	nanosleep(&ts, NULL);
	*backoff_ms = *backoff_ms * 2 > FENCE_BACKOFF_MAX ? FENCE_BACKOFF_MAX : *backoff_ms * 2;
}

/*
 * After -ESTALE from a daemon: refetches @ino's layout into *@layout and
 * returns 0 for the caller to redo its operation. While the service still
 * has the generation we used (the drain fenced it and is copying), polls
 * with backoff until fence_wait_ms have passed since the first -ESTALE of
 * this call, then gives up with -ETIMEDOUT: a drain that died between its
 * fence and its layout switch is finished by running it again.
 */
static int fence_retry(struct rfs *fs, uint64_t ino, struct rfs_layout *layout,
		       struct fence_wait *fw)
{
	struct rfs_layout fresh;
	uint64_t now;
	int ret;

	if (!fw->deadline_ms) {
		fw->deadline_ms = rdmafs_now_ms() + fs->fence_wait_ms;
		fw->backoff_ms = FENCE_BACKOFF_MIN;
	}
	for (;;) {
		rfs_count(&fs->counters.layout_refetches, 1);
		ret = rfs_layout_fetch(fs, ino, &fresh);
		if (ret)
			return ret == -ENOENT ? -ESTALE : ret; /* the file is gone */
		if (fresh.generation != layout->generation) {
			*layout = fresh;
			fw->changed = true;
			return 0;
		}
		now = rdmafs_now_ms();
		if (now >= fw->deadline_ms) {
			rdmafs_log(
				RDMAFS_LOG_WARN,
				"inode %llu: a daemon refuses layout generation %llu (a drain or "
				"rebalance started moving the file) but the metadata service has "
				"no newer one after %u ms: run `rdmafsctl drain` or `rdmafsctl "
				"rebalance` again to finish",
				(unsigned long long)ino, (unsigned long long)layout->generation,
				fs->fence_wait_ms);
			return -ETIMEDOUT;
		}
		backoff_sleep(&fw->backoff_ms, fw->deadline_ms - now);
	}
}

_Static_assert(RFS_MAX_REPLICAS == RDMAFS_MAX_REPLICAS, "rdmafs_fs.h's copy of the limit");

int rfs_layout_chain(const struct rfs_layout *layout, uint64_t ino, uint64_t index, int *out)
{
	const uint8_t *uuids[RFS_MAX_STRIPE];

	if (layout->stripe_width == 0 || layout->stripe_width > RFS_MAX_STRIPE)
		return -EINVAL;
	for (uint32_t i = 0; i < layout->stripe_width; i++)
		uuids[i] = layout->daemons[i];
	return rdmafs_place_chain(uuids, layout->n_domains ? layout->domains : NULL,
				  layout->stripe_width, layout->seed, ino, index, layout->replicas,
				  out);
}

int rfs_layout_place(const struct rfs_layout *layout, uint64_t ino, uint64_t index)
{
	int chain[RFS_MAX_REPLICAS], ret = rfs_layout_chain(layout, ino, index, chain);

	return ret < 0 ? ret : chain[0];
}

/* The daemons of a chain (@n of @chain), as a mask of its layout's daemons[] indexes. */
static uint64_t chain_mask(const int *chain, int n)
{
	uint64_t mask = 0;

	for (int i = 0; i < n; i++)
		mask |= 1ull << chain[i];
	return mask;
}

/* The DaemonState of @p in the last map. */
static int peer_state(struct rfs_peer *p)
{
	int state;

	pthread_mutex_lock(&p->lock);
	state = p->state;
	pthread_mutex_unlock(&p->lock);
	return state;
}

static bool peer_removed(struct rfs_peer *p)
{
	return peer_state(p) == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED;
}

/*
 * The peer of daemon @d of @layout, refetching the map once for an unknown
 * UUID. -ESTALE for a REMOVED daemon: the service removes a daemon only once
 * no layout names it, so the file was drained and its layout is older.
 */
static int layout_peer(struct rfs *fs, const struct rfs_layout *layout, int d,
		       struct rfs_peer **out)
{
	struct rfs_peer *p = find_daemon(fs, layout->daemons[d]);

	if (!p) {
		rfs_map_refresh(fs, false);
		p = find_daemon(fs, layout->daemons[d]);
	}
	if (!p) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "a file's layout names a daemon missing from the cluster map");
		return -EIO;
	}
	if (peer_removed(p))
		return -ESTALE;
	*out = p;
	return 0;
}

/*
 * A call to @p failed with @err. A drained daemon may be stopped right after
 * its removal, before a client holding an old layout learns of it: when the
 * fresh map says @p is REMOVED, report -ESTALE so the caller refetches the
 * layout (as after a fence) instead of failing the application's call.
 */
static int stale_if_removed(struct rfs *fs, struct rfs_peer *p, int err)
{
	if (!err || err == -ESTALE || !p)
		return err;
	rfs_map_refresh(fs, false);
	return peer_removed(p) ? -ESTALE : err;
}

/* Every daemon of @layout, as a mask of its daemons[] indexes. */
static uint64_t all_daemons(const struct rfs_layout *layout)
{
	return layout->stripe_width >= 64 ? UINT64_MAX : (1ull << layout->stripe_width) - 1;
}

/*
 * The daemons of a replicated @layout our map shows DOWN, as a mask: calls
 * that carry no data (commit, truncate, remove) skip them, and the others
 * record what they missed where it matters. 0 for a file of one copy, whose
 * calls need every daemon.
 */
static uint64_t down_daemons(struct rfs *fs, const struct rfs_layout *layout)
{
	uint64_t mask = 0;

	for (uint32_t d = 0; layout->replicas > 1 && d < layout->stripe_width; d++) {
		struct rfs_peer *p = find_daemon(fs, layout->daemons[d]);

		if (p && peer_state(p) == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN)
			mask |= 1ull << d;
	}
	return mask;
}

/* ---- parallel calls ------------------------------------------------------------------------ */

/* Calls in flight together; the caller waits for all of them. */
struct fanout {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned pending;
};

struct slot {
	struct fanout *fo;
	struct rfs_peer *peer;
	struct xprt_conn *conn; /* referenced while the call runs */
	struct rfs_counters *counters;
	uint32_t method;
	uint64_t sent_ns;
	int status;
	/* a reply larger than reply[] (a read's inline data) goes here, if set */
	uint8_t *spill;
	size_t spill_cap;
	size_t reply_len;
	uint8_t reply[SLOT_REPLY_MAX];
};

/* The reply's body, wherever slot_done() put it. */
static const uint8_t *slot_reply(const struct slot *s)
{
	return s->reply_len > sizeof(s->reply) ? s->spill : s->reply;
}

static void fanout_init(struct fanout *fo)
{
	pthread_mutex_init(&fo->lock, NULL);
	pthread_cond_init(&fo->cond, NULL);
	fo->pending = 0;
}

static void fanout_fini(struct fanout *fo)
{
	pthread_cond_destroy(&fo->cond);
	pthread_mutex_destroy(&fo->lock);
}

/*
 * Every call counted in @fo ends in its callback, bounded by the call timeout
 * (xprt.h); one that failed to send was never counted.
 */
static void fanout_wait(struct fanout *fo)
{
	pthread_mutex_lock(&fo->lock);
	while (fo->pending)
		pthread_cond_wait(&fo->cond, &fo->lock);
	pthread_mutex_unlock(&fo->lock);
}

/* Runs on the transport's progress thread: copy, count down, never block. */
static void slot_done(void *arg, int status, const void *body, size_t len)
{
	struct slot *s = arg;
	struct fanout *fo = s->fo;

	s->status = rdmafs_status_from_peer(status);
	s->reply_len = 0;
	if (!s->status) {
		if (len > sizeof(s->reply) && (!s->spill || len > s->spill_cap))
			s->status = -EPROTO;
		else if (len)
			memcpy(len > sizeof(s->reply) ? s->spill : s->reply, body, len);
		s->reply_len = len;
	}
	rfs_count_call(s->counters, s->method, s->sent_ns, s->status);
	pthread_mutex_lock(&fo->lock);
	if (--fo->pending == 0)
		pthread_cond_broadcast(&fo->cond);
	pthread_mutex_unlock(&fo->lock);
}

/*
 * Packs @msg and sends it on s->conn; the result arrives in @s. @wait: the
 * only call of its fan-out, so this thread waits for it itself and reads the
 * answer off the connection (xprt_call_wait()), with no hand-off.
 */
static void slot_send(struct rfs *fs, struct fanout *fo, struct slot *s, uint32_t method,
		      const ProtobufCMessage *msg, bool wait)
{
	uint8_t body[SLOT_REQ_MAX];
	size_t len = protobuf_c_message_get_packed_size(msg);
	int ret;

	s->fo = fo;
	if (len > sizeof(body)) {
		s->status = -EMSGSIZE;
		return;
	}
	protobuf_c_message_pack(msg, body);
	s->counters = &fs->counters;
	s->method = method;
	s->sent_ns = rdmafs_now_ns();
	pthread_mutex_lock(&fo->lock);
	fo->pending++;
	pthread_mutex_unlock(&fo->lock);
	if (wait)
		ret = xprt_call_wait(s->conn, method, body, len, fs->timeout_ms, slot_done, s);
	else
		ret = xprt_call_async(s->conn, method, body, len, fs->timeout_ms, slot_done, s);
	if (ret) {
		/* Not sent, and slot_done() will never run (xprt.h): count it back. */
		s->status = ret;
		rfs_count_call(&fs->counters, method, s->sent_ns, ret);
		pthread_mutex_lock(&fo->lock);
		fo->pending--;
		pthread_mutex_unlock(&fo->lock);
	}
}

/*
 * Drops the slot's connection. A timed-out call needs nothing more: the
 * transport reset its connection before reporting -ETIMEDOUT, so no late RDMA
 * can land in the call's buffer once it goes back to the pool.
 */
static void slot_release(struct slot *s)
{
	if (!s->conn)
		return;
	xprt_conn_put(s->conn);
	s->conn = NULL;
}

/*
 * Sends method @method with @msgs[i] to the daemons @peers[i] (i < @count) in
 * parallel, retrying once those whose connection broke. Replies stay in
 * @slots. Returns the first error as the transport said it (the public
 * calls map it with rdmafs_status_for_caller()): a replicated call waits
 * out a daemon that cannot be reached.
 */
static int fan_call(struct rfs *fs, struct rfs_peer **peers, const ProtobufCMessage *const *msgs,
		    size_t count, uint32_t method, struct slot *slots)
{
	bool todo[RFS_MAX_STRIPE + 1];
	struct fanout fo;
	int ret = 0;

	if (count > RFS_MAX_STRIPE + 1)
		return -EINVAL;
	fanout_init(&fo);
	for (size_t i = 0; i < count; i++) {
		memset(&slots[i], 0, offsetof(struct slot, reply));
		slots[i].peer = peers[i];
		todo[i] = true;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		for (size_t i = 0; i < count; i++) {
			if (!todo[i])
				continue;
			if (attempt)
				rfs_count(&fs->counters.targets[RFS_TARGET_STORAGE].retries, 1);
			slots[i].status = peer_conn_get(fs, peers[i], &slots[i].conn);
			if (!slots[i].status)
				slot_send(fs, &fo, &slots[i], method, msgs[i], count == 1);
		}
		fanout_wait(&fo);
		for (size_t i = 0; i < count; i++) {
			if (!todo[i])
				continue;
			slot_release(&slots[i]);
			if (attempt == 0 && retryable(slots[i].status))
				continue;
			todo[i] = false;
		}
	}
	for (size_t i = 0; i < count && !ret; i++)
		ret = stale_if_removed(fs, peers[i], slots[i].status);
	fanout_fini(&fo);
	return ret;
}

/* ---- striped data ------------------------------------------------------------------------------
 */

/* One chunk's part of a read or write. */
struct piece {
	struct slot s;
	uint64_t index;
	uint32_t off, len;
	size_t pos; /* in the caller's buffer */
	int daemon; /* index in the layout: a write's head, the replica a read asks */
	int chain[RFS_MAX_REPLICAS]; /* the chunk's chain (rfs_layout_chain()) */
	int chain_len;
	int replica; /* a read: which of chain[] it asks now */
	struct xprt_buf *buf;
	int tries;
	bool done;
	bool dirty_seen; /* a read: a copy had a write on its way down the chain */
};

/* Whether a daemon in DaemonState @state serves reads of copies and heads chains. */
static bool state_serving(int state)
{
	return state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP ||
	       state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING;
}

/* The DaemonState of daemon @d of @layout in our map; 0 for one it does not have. */
static int layout_state(struct rfs *fs, const struct rfs_layout *layout, int d)
{
	struct rfs_peer *peer = find_daemon(fs, layout->daemons[d]);

	return peer ? peer_state(peer) : 0;
}

/*
 * Where a read of @p goes first: the first daemon of its chain the map shows
 * serving (UP or DRAINING), else the first not DOWN, else the head; the
 * only daemon of a chunk of one copy, with no map lookup.
 */
static int first_replica(struct rfs *fs, const struct rfs_layout *layout, struct piece *p)
{
	for (int pass = 0; p->chain_len > 1 && pass < 2; pass++) {
		for (p->replica = 0; p->replica < p->chain_len; p->replica++) {
			int state = layout_state(fs, layout, p->chain[p->replica]);

			if (pass ? state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN
				 : state_serving(state))
				return p->chain[p->replica];
		}
	}
	p->replica = 0;
	return p->chain[0];
}

/*
 * The head of @p's chain for a write: its first daemon the map shows serving
 * (the daemons check that their maps agree). -EREMCHG when none does: the
 * caller waits for the map to change (replica_retry()).
 */
static int write_head(struct rfs *fs, const struct rfs_layout *layout, const struct piece *p)
{
	if (p->chain_len == 1)
		return p->chain[0];
	for (int i = 0; i < p->chain_len; i++)
		if (state_serving(layout_state(fs, layout, p->chain[i])))
			return p->chain[i];
	return -EREMCHG;
}

/*
 * Whether a replicated write that failed with @err may succeed on a chain
 * that settled: a daemon of the chain died or is unreachable (it will be
 * DOWN and skipped), or the maps disagree (-EREMCHG).
 */
static bool chain_retryable(int err)
{
	return retryable(err) || err == -EREMCHG || err == -ETIMEDOUT || err == -ECONNREFUSED ||
	       err == -EHOSTUNREACH || err == -EHOSTDOWN || err == -ENETUNREACH ||
	       err == -ECONNABORTED || err == -ESHUTDOWN;
}

/* A wait of a replicated call for its chain to settle. */
struct replica_wait {
	uint64_t deadline_ms; /* 0: not started */
	uint32_t backoff_ms;
};

/*
 * After -EREMCHG from a replicated read or write: refetches the cluster map
 * after a backoff and returns 0 for the caller to redo its call, until
 * REPLICA_WAIT_MS have passed since the first; then -EIO (logged).
 */
static int replica_retry(struct rfs *fs, uint64_t ino, struct replica_wait *rw)
{
	uint64_t now = rdmafs_now_ms();

	if (!rw->deadline_ms) {
		rw->deadline_ms = now + REPLICA_WAIT_MS;
		rw->backoff_ms = FENCE_BACKOFF_MIN;
	}
	if (now >= rw->deadline_ms) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %llu: no copy of a chunk could be written or read for %u ms "
			   "(its daemons down or unreachable, or the cluster map unsettled): EIO",
			   (unsigned long long)ino, REPLICA_WAIT_MS);
		return -EIO;
	}
	backoff_sleep(&rw->backoff_ms, rw->deadline_ms - now);
	rfs_count(&fs->counters.replica_waits, 1);
	rfs_map_refresh(fs, true);
	return 0;
}

/*
 * A read of @p failed with @err on its replica: moves it to the next one of
 * its chain, if any is left, and says so. A fence (-ESTALE) is the file's,
 * not the replica's: it refetches the layout instead. A copy with a write
 * on its way down the chain (-EINPROGRESS, CRAQ's dirty copy) sends the read
 * on toward the tail, which stores last.
 */
static bool next_replica(struct piece *p, int err)
{
	if (err == -EINPROGRESS)
		p->dirty_seen = true;
	if (err == -ESTALE || p->replica + 1 >= p->chain_len)
		return false;
	p->replica++;
	p->daemon = p->chain[p->replica];
	return true;
}

/*
 * What a read of @p that no copy answered returns, the last one having
 * failed with @err: -EREMCHG (wait for the chain, then read again) where a
 * copy was dirty, its write still on its way to a later copy that did not
 * answer (a daemon that died and is not DOWN yet: the write's forward gives
 * up within seconds, and the dirty copy serves); EIO where the chunk has
 * copies and every one was dead, unreachable or timed out (the issue's
 * "every replica lost: EIO, never garbage"); else @err.
 */
static int no_copy_left(const struct piece *p, int err)
{
	if (p->dirty_seen)
		return -EREMCHG;
	return p->chain_len > 1 && err != -EREMCHG && chain_retryable(err) ? -EIO : err;
}

/*
 * Cuts [off, off + len) at chunk and buffer boundaries, each piece sent to
 * its chunk's head for a @write, to its first copy up for a read; *@out is
 * calloc()ed.
 */
static int split(struct rfs *fs, const struct rfs_layout *layout, uint64_t ino, uint64_t off,
		 size_t len, bool write, struct piece **out, size_t *count)
{
	uint32_t step = layout->chunk_size < fs->buf_size ? layout->chunk_size : fs->buf_size;
	size_t max = len / step + 2, n = 0, pos = 0;
	struct piece *pieces;

	if (off > UINT64_MAX - len)
		return -EFBIG;
	pieces = calloc(max, sizeof(*pieces));
	if (!pieces)
		return -ENOMEM;
	while (pos < len) {
		uint64_t at = off + pos;
		struct piece *p = &pieces[n];
		uint32_t coff = (uint32_t)(at % layout->chunk_size);
		size_t take = layout->chunk_size - coff;
		int d;

		if (take > fs->buf_size)
			take = fs->buf_size;
		if (take > len - pos)
			take = len - pos;
		p->index = at / layout->chunk_size;
		p->off = coff;
		p->len = (uint32_t)take;
		p->pos = pos;
		d = rfs_layout_chain(layout, ino, p->index, p->chain);
		if (d < 0) {
			free(pieces);
			return d;
		}
		p->chain_len = d;
		p->daemon = write ? write_head(fs, layout, p) : first_replica(fs, layout, p);
		if (p->daemon < 0) {
			d = p->daemon;
			free(pieces);
			return d;
		}
		pos += take;
		n++;
	}
	*out = pieces;
	*count = n;
	return 0;
}

/* Flags of a chunk write (run_pieces()), and of how a piece is sent. */
#define WRITE_SYNC 1u /* durable before the reply (O_SYNC) */
#define WRITE_HOLE 2u /* zeros of a punched hole: the daemon frees their blocks */
#define PIECE_WAIT 4u /* the only piece of its wave: slot_send() waits for it */

/*
 * A read's inline reply (CHUNK_INLINE_MAX bytes at most) lands in the piece's
 * own buffer past the bytes it reads, if there is room; else the read asks
 * for none and its data comes by RDMA.
 */
static void read_spill(struct piece *p, struct chunk_io *io)
{
	size_t at = (p->len + 63u) & ~(size_t)63u;

	io->inline_ok = at + CHUNK_READ_REPLY_MAX <= xprt_buf_size(p->buf);
	p->s.spill = io->inline_ok ? (uint8_t *)xprt_buf_data(p->buf) + at : NULL;
	p->s.spill_cap = io->inline_ok ? CHUNK_READ_REPLY_MAX : 0;
}

/*
 * A replicated write's chain as its CHUNK_WRITE names it: the daemons after
 * its head (ChainHop), and every daemon of the chain (members).
 */
struct chain_hops {
	Rdmafs__ChainHop hop[RFS_MAX_REPLICAS - 1];
	Rdmafs__ChainHop *list[RFS_MAX_REPLICAS - 1];
	char uri[RFS_MAX_REPLICAS - 1][256];
	ProtobufCBinaryData members[RFS_MAX_REPLICAS];
	size_t n;
};

/*
 * Fills @h with the daemons of @p's chain but its head (p->daemon), in chain
 * order, whatever their state (the daemons skip those DOWN in their maps):
 * each daemon's UUID and the address we would use for it (the head connects
 * with our transport too). -EIO for a daemon the map does not know, -ESTALE
 * for a removed one, as layout_peer().
 */
static int chain_hops_fill(struct rfs *fs, const struct rfs_layout *layout, const struct piece *p,
			   struct chain_hops *h)
{
	h->n = 0;
	for (int i = 0; i < p->chain_len; i++) {
		Rdmafs__ChainHop *hop = &h->hop[h->n];
		struct rfs_peer *peer;
		int ret;

		h->members[i].data = (uint8_t *)layout->daemons[p->chain[i]];
		h->members[i].len = RFS_UUID_LEN;
		if (p->chain[i] == p->daemon)
			continue;
		ret = layout_peer(fs, layout, p->chain[i], &peer);
		if (ret)
			return ret;
		pthread_mutex_lock(&peer->lock);
		ret = peer->uri_count ? 0 : -EHOSTUNREACH;
		if (!ret)
			snprintf(h->uri[h->n], sizeof(h->uri[h->n]), "%s", peer->uris[0]);
		pthread_mutex_unlock(&peer->lock);
		if (ret)
			return ret;
		rdmafs__chain_hop__init(hop);
		hop->uuid.data = (uint8_t *)layout->daemons[p->chain[i]];
		hop->uuid.len = RFS_UUID_LEN;
		hop->uri = h->uri[h->n];
		h->list[h->n++] = hop;
	}
	return 0;
}

/* Fills the request of piece @p (a chunk write or read) and sends it. */
static void piece_send(struct rfs *fs, struct fanout *fo, const struct rfs_layout *layout,
		       uint64_t ino, struct piece *p, bool write, const uint8_t *src,
		       unsigned flags)
{
	struct chunk_io io = {
		.ino = ino,
		.index = p->index,
		.generation = layout->generation,
		.offset = p->off,
		.len = p->len,
		.chunk_size = layout->chunk_size,
		.commit = (flags & WRITE_SYNC) != 0,
		.zeros_as_hole = (flags & WRITE_HOLE) != 0,
	};
	struct chunk_msg m;
	struct chain_hops hops;
	int ret;

	if (write) {
		if (src) /* NULL: the bytes are in the buffer already (write-behind) */
			memcpy(xprt_buf_data(p->buf), src + p->pos, p->len);
		p->s.spill = NULL;
		ret = chunk_msg_write(&m, p->s.conn, p->buf, &io);
		if (!ret && p->chain_len > 1) {
			/* the head stores it and sends it on: its answer is the whole chain's */
			ret = chain_hops_fill(fs, layout, p, &hops);
			m.write.chain = hops.list;
			m.write.n_chain = hops.n;
			m.write.to.data = (uint8_t *)layout->daemons[p->daemon];
			m.write.to.len = RFS_UUID_LEN;
			m.write.head = m.write.to;
			m.write.members = hops.members;
			m.write.n_members = (size_t)p->chain_len;
		}
		if (!ret)
			slot_send(fs, fo, &p->s, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &m.write.base,
				  (flags & PIECE_WAIT) != 0);
	} else {
		read_spill(p, &io);
		ret = chunk_msg_read(&m, p->s.conn, p->buf, &io);
		/* a daemon that may lack writes to it (SYNCING, no lease) refuses: another copy */
		m.read.replicated = p->chain_len > 1;
		if (!ret)
			slot_send(fs, fo, &p->s, RDMAFS__METHOD__METHOD_CHUNK_READ, &m.read.base,
				  (flags & PIECE_WAIT) != 0);
	}
	if (ret)
		p->s.status = ret;
}

/*
 * Finds the daemon of piece @p, takes a connection to it and sends the piece.
 * Returns layout_peer()'s error (nothing was tried); a connection's error is
 * the piece's status.
 */
static int piece_issue(struct rfs *fs, struct fanout *fo, const struct rfs_layout *layout,
		       uint64_t ino, struct piece *p, bool write, const uint8_t *src,
		       unsigned flags)
{
	struct rfs_peer *peer;
	int ret = layout_peer(fs, layout, p->daemon, &peer);

	if (ret)
		return ret;
	p->s.peer = peer;
	p->s.status = peer_conn_get(fs, peer, &p->s.conn);
	if (!p->s.status)
		piece_send(fs, fo, layout, ino, p, write, src, flags);
	return 0;
}

/* Checks the reply of a finished piece; a read's data goes to @dst. */
static int piece_finish(struct piece *p, uint64_t ino, bool write, uint8_t *dst)
{
	struct chunk_io io = {
		.ino = ino,
		.index = p->index,
		.offset = p->off,
		.len = p->len,
		.inline_ok = p->s.spill != NULL,
	};
	uint32_t bytes = 0;
	int ret;

	if (write)
		return chunk_write_reply(slot_reply(&p->s), p->s.reply_len, NULL, NULL);
	ret = chunk_read_reply(slot_reply(&p->s), p->s.reply_len, p->buf, &io, &bytes, NULL);
	if (ret)
		return ret;
	memcpy(dst + p->pos, xprt_buf_data(p->buf), bytes);
	memset(dst + p->pos + bytes, 0, p->len - bytes);
	return 0;
}

/*
 * A registered buffer for a piece. Only the first piece of a wave (@may_wait)
 * waits for one, up to the call timeout; the wait is counted. -EAGAIN when
 * none is free and @may_wait is false, -ETIMEDOUT when the wait was in vain.
 */
static int buffer_get(struct rfs *fs, bool may_wait, struct xprt_buf **out)
{
	uint64_t start_ns;
	int ret = xprt_pool_get(fs->pool, 0, out);

	if (ret != -EAGAIN || !may_wait)
		return ret;
	rfs_count(&fs->counters.buffer_waits, 1);
	start_ns = rdmafs_now_ns();
	ret = xprt_pool_get(fs->pool, fs->timeout_ms, out);
	rfs_count(&fs->counters.buffer_wait_ns, rdmafs_now_ns() - start_ns);
	if (ret == -EAGAIN) {
		rfs_count(&fs->counters.buffer_timeouts, 1);
		ret = -ETIMEDOUT;
	}
	return ret;
}

/*
 * Runs the pieces in waves: as many at once as buffers are free (the first of
 * a wave may wait for one), every daemon in parallel. A piece whose
 * connection broke is retried once on a new connection.
 */
static int run_pieces(struct rfs *fs, const struct rfs_layout *layout, uint64_t ino,
		      struct piece *pieces, size_t count, bool write, const uint8_t *src,
		      uint8_t *dst, unsigned flags, uint64_t *written)
{
	struct fanout fo;
	size_t left = count;
	int ret = 0;

	fanout_init(&fo);
	while (left && !ret) {
		size_t issued = 0;

		for (size_t i = 0; i < count && !ret; i++) {
			struct piece *p = &pieces[i];

			if (p->done)
				continue;
			ret = buffer_get(fs, !issued, &p->buf);
			if (ret == -EAGAIN && issued) {
				ret = 0;
				break;
			}
			if (ret)
				break;
			issued++;
			if (p->tries++)
				rfs_count(&fs->counters.targets[RFS_TARGET_STORAGE].retries, 1);
			ret = piece_issue(fs, &fo, layout, ino, p, write, src,
					  flags | (left == 1 ? PIECE_WAIT : 0));
		}
		fanout_wait(&fo);
		for (size_t i = 0; i < count; i++) {
			struct piece *p = &pieces[i];
			int st;

			if (!p->buf)
				continue;
			st = p->s.status;
			if (!st && !ret)
				st = piece_finish(p, ino, write, dst);
			slot_release(&p->s);
			xprt_pool_put(p->buf);
			p->buf = NULL;
			if (!st && !ret) {
				/* finished (its data copied out), not merely answered */
				p->done = true;
				left--;
				rfs_count(write ? &fs->counters.write_bytes
						: &fs->counters.read_bytes,
					  p->len);
				if (write && written) /* every copy holds it */
					*written |= chain_mask(p->chain, p->chain_len);
			} else if (!write && st && !ret && next_replica(p, st)) {
				/* another copy may answer: a dead daemon's, a bad block's */
				rfs_count(&fs->counters.replica_moves, 1);
				p->tries = 0;
			} else if (!(retryable(st) && p->tries < 2) && !ret) {
				ret = stale_if_removed(fs, p->s.peer, st);
				/* a chain that may settle: the caller waits for it
				 * (replica_retry()) */
				if (p->chain_len > 1 &&
				    (write ? chain_retryable(ret) : ret == -EREMCHG))
					ret = -EREMCHG;
				else if (!write)
					ret = no_copy_left(p, ret);
			}
		}
	}
	fanout_fini(&fo);
	return rdmafs_status_for_caller(ret);
}

/* One read or write of [@off, @off + @len) with @layout as it is; @flags: WRITE_*. */
static int data_once(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout, uint64_t off,
		     size_t len, bool write, const uint8_t *src, uint8_t *dst, unsigned flags,
		     uint64_t *written)
{
	struct piece *pieces;
	size_t count;
	int ret;

	ret = split(fs, layout, ino, off, len, write, &pieces, &count);
	if (ret)
		return ret;
	ret = run_pieces(fs, layout, ino, pieces, count, write, src, dst, flags, written);
	free(pieces);
	return ret;
}

/*
 * data_once() until it is not refused: after -EREMCHG it waits for the chain
 * to settle (replica_retry()), after -ESTALE for the new layout (fence_retry(),
 * through @fw, which says whether the layout changed).
 */
static int data_retry(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t off,
		      size_t len, bool write, const uint8_t *src, uint8_t *dst, unsigned flags,
		      uint64_t *written, struct fence_wait *fw)
{
	struct replica_wait rw = {0};
	int ret;

	for (;;) {
		ret = data_once(fs, ino, layout, off, len, write, src, dst, flags, written);
		if (ret == -EREMCHG)
			ret = replica_retry(fs, ino, &rw);
		else if (ret == -ESTALE)
			ret = fence_retry(fs, ino, layout, fw);
		else
			return ret;
		if (ret)
			return ret;
	}
}

int rfs_read(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t off, size_t len,
	     void *dst)
{
	struct fence_wait fw = {0};

	return len ? data_retry(fs, ino, layout, off, len, false, NULL, dst, 0, NULL, &fw) : 0;
}

/* rfs_write() with WRITE_* @flags: the zeros of a punched hole go through here too. */
static int write_flags(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t off,
		       size_t len, const void *src, unsigned flags, uint64_t *written)
{
	struct fence_wait fw = {0};
	int ret;

	if (len == 0)
		return 0;
	/* same bytes, same offset: redoing every piece is harmless */
	ret = data_retry(fs, ino, layout, off, len, true, src, NULL, flags, written, &fw);
	if (fw.changed && written)
		*written |= all_daemons(layout);
	return ret;
}

int rfs_write(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t off, size_t len,
	      const void *src, bool sync, uint64_t *written)
{
	return write_flags(fs, ino, layout, off, len, src, sync ? WRITE_SYNC : 0, written);
}

/* ---- write-behind ------------------------------------------------------------------------------
 */

struct rfs_wjob {
	struct rfs *fs;
	struct fanout fo;
	struct rfs_layout layout; /* as the pieces were sent; a redo may move it on */
	uint64_t ino, off;
	struct piece *pieces;
	size_t count;
};

unsigned rfs_write_behind(const struct rfs *fs)
{
	return fs ? fs->write_behind : 0;
}

/* Gives back what a job holds: its buffers, its share of the pool, itself. */
static void wjob_free(struct rfs_wjob *j)
{
	for (size_t i = 0; i < j->count; i++)
		if (j->pieces[i].buf)
			xprt_pool_put(j->pieces[i].buf);
	__atomic_sub_fetch(&j->fs->wb_buffers, j->count, __ATOMIC_RELAXED);
	free(j->pieces);
	free(j);
}

int rfs_write_start(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout, uint64_t off,
		    size_t len, const void *src, struct rfs_wjob **out)
{
	struct rfs_wjob *j;
	int ret;

	if (!len)
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fs = fs;
	j->layout = *layout;
	j->ino = ino;
	j->off = off;
	ret = split(fs, layout, ino, off, len, true, &j->pieces, &j->count);
	if (ret) {
		free(j);
		/* no head serving in our map: written and waited for (rfs_write()) */
		return ret == -EREMCHG ? -EAGAIN : ret;
	}
	/* half the pool at most: reads and waiting writes must still find buffers */
	ret = __atomic_add_fetch(&fs->wb_buffers, j->count, __ATOMIC_RELAXED) > fs->buf_count / 2
		      ? -EAGAIN
		      : 0;
	for (size_t i = 0; i < j->count && !ret; i++) {
		struct piece *p = &j->pieces[i];

		ret = buffer_get(fs, false, &p->buf);
		if (!ret)
			memcpy(xprt_buf_data(p->buf), (const uint8_t *)src + p->pos, p->len);
	}
	if (ret) {
		wjob_free(j);
		return ret;
	}
	/* every byte is in a buffer: from here on a failure is redone by rfs_write_finish() */
	fanout_init(&j->fo);
	for (size_t i = 0; i < j->count; i++) {
		struct piece *p = &j->pieces[i];
		int err = piece_issue(fs, &j->fo, &j->layout, ino, p, true, NULL, 0);

		p->tries = 1;
		if (err) /* a failure is redone by rfs_write_finish() */
			p->s.status = err;
	}
	*out = j;
	return 0;
}

int rfs_write_finish(struct rfs_wjob *j, struct rfs_layout *layout, uint64_t *written)
{
	struct rfs *fs = j->fs;
	int ret = 0;

	fanout_wait(&j->fo);
	for (size_t i = 0; i < j->count; i++) {
		struct piece *p = &j->pieces[i];
		int st = p->s.status;

		if (!st)
			st = piece_finish(p, j->ino, true, NULL);
		slot_release(&p->s);
		if (!st) {
			rfs_count(&fs->counters.write_bytes, p->len);
			*written |= chain_mask(p->chain, p->chain_len);
			continue;
		}
		st = stale_if_removed(fs, p->s.peer, st);
		if (!ret &&
		    (retryable(st) || st == -ESTALE || (p->chain_len > 1 && chain_retryable(st)))) {
			/* the bytes wait in the piece's buffer: send them again, and wait */
			if (retryable(st))
				rfs_count(&fs->counters.targets[RFS_TARGET_STORAGE].retries, 1);
			st = write_flags(fs, j->ino, &j->layout, j->off + p->pos, p->len,
					 xprt_buf_data(p->buf), 0, written);
		}
		if (!ret)
			ret = st;
	}
	fanout_fini(&j->fo);
	*layout = j->layout;
	wjob_free(j);
	return rdmafs_status_for_caller(ret);
}

/* ---- whole-file chunk operations ---------------------------------------------------------------
 */

/* Sends @msg as @method to the daemons of @layout in @mask, in parallel. */
static int broadcast(struct rfs *fs, const struct rfs_layout *layout, uint64_t mask,
		     uint32_t method, const ProtobufCMessage *msg)
{
	struct rfs_peer *peers[RFS_MAX_STRIPE];
	const ProtobufCMessage *msgs[RFS_MAX_STRIPE];
	struct slot *slots;
	size_t n = 0;
	int ret;

	for (uint32_t d = 0; d < layout->stripe_width; d++) {
		if (!(mask & (1ull << d)))
			continue;
		ret = layout_peer(fs, layout, (int)d, &peers[n]);
		if (ret)
			return ret;
		msgs[n++] = msg;
	}
	if (n == 0)
		return 0;
	slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	ret = fan_call(fs, peers, msgs, n, method, slots);
	free(slots);
	return ret;
}

int rfs_commit(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t daemon_mask,
	       uint64_t first_index)
{
	return rfs_commit_alloc(fs, ino, layout, daemon_mask, first_index, RFS_COMMIT_DURABLE,
				NULL);
}

/*
 * One CHUNK_COMMIT of @req to the daemons of @layout in @mask, with what they
 * answered about their allocations collected in @report (may be NULL).
 */
static int commit_once(struct rfs *fs, const struct rfs_layout *layout, uint64_t mask,
		       const Rdmafs__ChunkCommitReq *req, struct rfs_alloc_report *report)
{
	struct rfs_peer *peers[RFS_MAX_STRIPE];
	const ProtobufCMessage *msgs[RFS_MAX_STRIPE];
	uint32_t daemon_of[RFS_MAX_STRIPE];
	struct slot *slots;
	size_t n = 0;
	int ret;

	if (report) {
		report->known = 0;
		report->durable_within_ms = 0;
	}
	for (uint32_t d = 0; d < layout->stripe_width; d++) {
		if (!(mask & (1ull << d)))
			continue;
		ret = layout_peer(fs, layout, (int)d, &peers[n]);
		if (ret)
			return ret;
		daemon_of[n] = d;
		msgs[n++] = &req->base;
	}
	if (n == 0)
		return 0;
	slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	ret = fan_call(fs, peers, msgs, n, RDMAFS__METHOD__METHOD_CHUNK_COMMIT, slots);
	for (size_t i = 0; i < n && !ret && report; i++) {
		Rdmafs__ChunkCommitResp *resp =
			rdmafs__chunk_commit_resp__unpack(NULL, slots[i].reply_len, slots[i].reply);

		if (!resp) {
			ret = -EBADMSG;
			break;
		}
		/* an older daemon answers Empty: its part stays unreported */
		if (resp->allocated_known) {
			report->allocated[daemon_of[i]] = resp->allocated_bytes;
			report->known |= 1ull << daemon_of[i];
		}
		if (resp->durable_within_ms > report->durable_within_ms)
			report->durable_within_ms = resp->durable_within_ms;
		rdmafs__chunk_commit_resp__free_unpacked(resp, NULL);
	}
	free(slots);
	return ret;
}

int rfs_commit_alloc(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t daemon_mask,
		     uint64_t first_index, enum rfs_commit_kind kind,
		     struct rfs_alloc_report *report)
{
	Rdmafs__ChunkCommitReq req = RDMAFS__CHUNK_COMMIT_REQ__INIT;
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;
	struct fence_wait fw = {0};
	struct replica_wait rw = {0};
	int ret;

	sel.inode = ino;
	sel.range = true;
	sel.first_index = first_index;
	req.chunks = &sel;
	req.report_only = kind == RFS_COMMIT_REPORT;
	req.on_close = kind == RFS_COMMIT_CLOSE;
	for (;;) {
		/* a report is of the layout the call ended with: daemon_of indexes it */
		req.layout_generation = layout->generation;
		/* a copy DOWN has nothing to commit: what it missed comes back committed */
		ret = commit_once(fs, layout,
				  daemon_mask & all_daemons(layout) & ~down_daemons(fs, layout),
				  &req, report);
		if (layout->replicas > 1 && chain_retryable(ret)) {
			ret = replica_retry(fs, ino, &rw);
			if (ret)
				break;
			continue;
		}
		if (ret != -ESTALE)
			break;
		ret = fence_retry(fs, ino, layout, &fw);
		if (ret)
			break;
		/*
		 * The mask meant the old layout's daemons. The drain committed what it
		 * moved; what went to the others is committed by asking all of them.
		 */
		daemon_mask = UINT64_MAX;
	}
	return rdmafs_status_for_caller(ret);
}

static int remove_from(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
		       uint64_t first_index)
{
	Rdmafs__ChunkRemoveReq req = RDMAFS__CHUNK_REMOVE_REQ__INIT;
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;

	sel.inode = ino;
	sel.range = true;
	sel.first_index = first_index;
	req.chunks = &sel;
	req.layout_generation = layout->generation;
	/*
	 * A copy DOWN keeps its chunks: a removed file's are orphans (fsck), a
	 * truncated file's were each cut on the others first (truncate_once()).
	 */
	return broadcast(fs, layout, all_daemons(layout) & ~down_daemons(fs, layout),
			 RDMAFS__METHOD__METHOD_CHUNK_REMOVE, &req.base);
}

int rfs_remove_data(struct rfs *fs, uint64_t ino, struct rfs_layout *layout)
{
	int ret = remove_from(fs, ino, layout, 0);

	/*
	 * Fenced: a drain is moving the file, which is gone now (a freed inode
	 * cannot be looked up again). The daemons that answered removed their
	 * chunks; the drain removes the fenced daemon's when its layout switch
	 * finds the file gone, fsck otherwise.
	 */
	return ret == -ESTALE ? 0 : rdmafs_status_for_caller(ret);
}

/* CHUNK_TRUNCATE of one chunk to @length bytes. */
static int truncate_chunk(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
			  uint64_t index, uint32_t length)
{
	Rdmafs__ChunkTruncateReq req = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	ProtobufCBinaryData members[RFS_MAX_REPLICAS], missed[RFS_MAX_REPLICAS];
	int chain[RFS_MAX_REPLICAS], n = rfs_layout_chain(layout, ino, index, chain);
	uint64_t down = down_daemons(fs, layout);

	if (n < 0)
		return n;
	cid.inode = ino;
	cid.index = index;
	req.chunk = &cid;
	req.length = length;
	req.layout_generation = layout->generation;
	if (n > 1) {
		/* the copies DOWN are skipped; the others check that and record the miss */
		for (int i = 0; i < n; i++) {
			members[i] = (ProtobufCBinaryData){RFS_UUID_LEN,
							   (uint8_t *)layout->daemons[chain[i]]};
			if (down & (1ull << chain[i]))
				missed[req.n_missed++] = members[i];
		}
		req.members = members;
		req.n_members = (size_t)n;
		req.missed = missed;
	}
	return broadcast(fs, layout, chain_mask(chain, n) & ~down,
			 RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE, &req.base);
}

static int truncate_once(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
			 uint64_t new_size, uint64_t old_size)
{
	uint64_t index = new_size / layout->chunk_size;
	uint32_t tail = (uint32_t)(new_size % layout->chunk_size);
	int ret;

	if (tail) {
		ret = truncate_chunk(fs, ino, layout, index, tail);
		if (ret)
			return ret;
		index++;
	}
	/*
	 * A copy DOWN keeps the chunks past the end, which must read as zeros
	 * if the file grows again: each is cut to nothing on the others first,
	 * which record that it missed that (the removal that follows then
	 * reaches it as the removal of the chunk when it is back).
	 */
	bool degraded = down_daemons(fs, layout) != 0;

	for (uint64_t i = index; degraded && i * layout->chunk_size < old_size; i++) {
		ret = truncate_chunk(fs, ino, layout, i, 0);
		if (ret)
			return ret;
	}
	return remove_from(fs, ino, layout, index);
}

int rfs_truncate_data(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t new_size,
		      uint64_t old_size)
{
	struct fence_wait fw = {0};
	struct replica_wait rw = {0};
	int ret;

	for (;;) {
		/* the truncate and the removals are idempotent: redo both */
		ret = truncate_once(fs, ino, layout, new_size, old_size);
		if (layout->replicas > 1 && chain_retryable(ret))
			ret = replica_retry(fs, ino, &rw);
		else if (ret == -ESTALE)
			ret = fence_retry(fs, ino, layout, &fw);
		else
			break;
		if (ret)
			break;
	}
	return rdmafs_status_for_caller(ret);
}

/* Removes chunks [@first, @last] of @ino (@last < UINT64_MAX), batched per daemon. */
static int remove_chunks(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
			 uint64_t first, uint64_t last)
{
	uint64_t(*idx)[REMOVE_BATCH];
	int ret = 0;

	if (last == UINT64_MAX)
		return -EINVAL;
	idx = calloc(layout->stripe_width, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	while (first <= last && !ret) {
		size_t counts[RFS_MAX_STRIPE] = {0};
		Rdmafs__ChunkSelection sels[RFS_MAX_STRIPE];
		Rdmafs__ChunkRemoveReq reqs[RFS_MAX_STRIPE];
		const ProtobufCMessage *msgs[RFS_MAX_STRIPE];
		struct rfs_peer *peers[RFS_MAX_STRIPE];
		struct slot *slots = NULL;
		size_t n = 0;

		/* at most REMOVE_BATCH chunks, so no daemon's list overflows; every copy goes */
		for (size_t taken = 0; first <= last && taken < REMOVE_BATCH; first++, taken++) {
			int chain[RFS_MAX_REPLICAS],
				n_chain = rfs_layout_chain(layout, ino, first, chain);

			if (n_chain < 0) {
				ret = n_chain;
				break;
			}
			for (int c = 0; c < n_chain; c++)
				idx[chain[c]][counts[chain[c]]++] = first;
		}
		for (uint32_t d = 0; d < layout->stripe_width && !ret; d++) {
			if (!counts[d])
				continue;
			ret = layout_peer(fs, layout, (int)d, &peers[n]);
			rdmafs__chunk_selection__init(&sels[n]);
			sels[n].inode = ino;
			sels[n].n_indexes = counts[d];
			sels[n].indexes = idx[d];
			rdmafs__chunk_remove_req__init(&reqs[n]);
			reqs[n].chunks = &sels[n];
			reqs[n].layout_generation = layout->generation;
			msgs[n] = &reqs[n].base;
			n++;
		}
		if (!ret && n) {
			slots = calloc(n, sizeof(*slots));
			ret = slots ? fan_call(fs, peers, msgs, n,
					       RDMAFS__METHOD__METHOD_CHUNK_REMOVE, slots)
				    : -ENOMEM;
		}
		free(slots);
	}
	free(idx);
	return ret;
}

static int punch_once(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		      uint64_t off, uint64_t len)
{
	uint64_t cs = layout->chunk_size, end, first_full, end_full;
	int ret = 0;

	if (off >= size || len == 0)
		return 0;
	end = len > size - off ? size : off + len;
	/* chunks wholly inside [off, end), or whose part inside the file is */
	first_full = (off + cs - 1) / cs;
	end_full = end == size ? (end + cs - 1) / cs : end / cs;
	/* a copy DOWN would keep whole chunks removed: zeros go through the chains, recorded */
	if (down_daemons(fs, layout))
		first_full = end_full = 0;
	if (first_full < end_full) {
		ret = remove_chunks(fs, ino, layout, first_full, end_full - 1);
		if (ret)
			return ret;
	}
	/* the partial chunks at either end get zeros, whose whole blocks the daemon frees */
	for (uint64_t pos = off; pos < end && !ret;) {
		uint64_t index = pos / cs, stop;

		if (index >= first_full && index < end_full) {
			pos = end_full * cs;
			continue;
		}
		stop = (index + 1) * cs < end ? (index + 1) * cs : end;
		if (stop - pos > fs->buf_size)
			stop = pos + fs->buf_size;
		ret = data_once(fs, ino, layout, pos, stop - pos, true, fs->zeros, NULL, WRITE_HOLE,
				NULL);
		pos = stop;
	}
	return ret;
}

int rfs_punch_hole(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		   uint64_t off, uint64_t len)
{
	struct fence_wait fw = {0};
	struct replica_wait rw = {0};
	int ret;

	for (;;) {
		/* removals and zeros are idempotent: redo them all */
		ret = punch_once(fs, ino, layout, size, off, len);
		if (ret == -EREMCHG || (layout->replicas > 1 && chain_retryable(ret)))
			ret = replica_retry(fs, ino, &rw);
		else if (ret == -ESTALE)
			ret = fence_retry(fs, ino, layout, &fw);
		else
			break;
		if (ret)
			break;
	}
	return rdmafs_status_for_caller(ret);
}

/*
 * Copies [@src, @src + @len) to @dst (ranges of @ino that do not overlap in a
 * way the direction breaks: the caller walks so that no source byte is
 * overwritten before it is read). A block of RFS_BLOCK_SIZE that reads as
 * zeros is punched rather than written, so holes stay holes (and st_blocks
 * small) after a shift. @bound is the size the punch may not pass.
 */
static int move_piece(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t src,
		      uint64_t dst, size_t len, uint64_t bound, uint8_t *buf)
{
	int ret = rfs_read(fs, ino, layout, src, len, buf);

	for (size_t done = 0; !ret && done < len;) {
		size_t n = len - done < RFS_BLOCK_SIZE ? len - done : RFS_BLOCK_SIZE;

		if (buf[done] == 0 && memcmp(buf + done, buf + done + 1, n - 1) == 0)
			ret = rfs_punch_hole(fs, ino, layout, bound, dst + done, n);
		else
			ret = rfs_write(fs, ino, layout, dst + done, n, buf + done, false, NULL);
		done += n;
	}
	return ret;
}

/* Bytes moved per step of a shift: several chunks, so the daemons work in parallel. */
#define SHIFT_STEP (8u * RFS_BLOCK_SIZE)

int rfs_collapse_range(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		       uint64_t off, uint64_t len)
{
	uint8_t *buf;
	int ret = 0;

	if (len == 0 || off % RFS_BLOCK_SIZE || len % RFS_BLOCK_SIZE)
		return -EINVAL;
	/* fallocate(2): a collapse may not reach or pass the end of the file */
	if (off >= size || len >= size - off)
		return -EINVAL;
	buf = malloc(SHIFT_STEP);
	if (!buf)
		return -ENOMEM;
	/* forwards: each destination lies below its source, already read */
	for (uint64_t pos = off + len; pos < size && !ret;) {
		size_t n = size - pos < SHIFT_STEP ? (size_t)(size - pos) : SHIFT_STEP;

		ret = move_piece(fs, ino, layout, pos, pos - len, n, size, buf);
		pos += n;
	}
	free(buf);
	return ret;
}

int rfs_insert_range(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		     uint64_t off, uint64_t len)
{
	uint8_t *buf;
	int ret = 0;

	if (len == 0 || off % RFS_BLOCK_SIZE || len % RFS_BLOCK_SIZE)
		return -EINVAL;
	if (off >= size)
		return -EINVAL;
	if (len > RFS_MAX_FILE_SIZE - size)
		return -EFBIG;
	buf = malloc(SHIFT_STEP);
	if (!buf)
		return -ENOMEM;
	/* backwards: each destination lies above its source, so move the end first */
	for (uint64_t end = size; end > off && !ret;) {
		uint64_t start = end - off > SHIFT_STEP ? end - SHIFT_STEP : off;

		ret = move_piece(fs, ino, layout, start, start + len, (size_t)(end - start),
				 size + len, buf);
		end = start;
	}
	free(buf);
	/* the gap reads as zeros and holds nothing */
	if (!ret)
		ret = rfs_punch_hole(fs, ino, layout, size + len, off, len);
	return ret;
}

/* CHUNK_STAT of one chunk: of its first copy that answers. */
static int stat_chunk(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout, uint64_t index,
		      bool *exists, uint32_t *length)
{
	Rdmafs__ChunkStatReq req = RDMAFS__CHUNK_STAT_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkStatResp *resp;
	const ProtobufCMessage *msg = &req.base;
	struct rfs_peer *peer;
	struct slot slot;
	struct piece p = {0};
	int ret;

	p.chain_len = rfs_layout_chain(layout, ino, index, p.chain);
	if (p.chain_len < 0)
		return p.chain_len;
	p.daemon = first_replica(fs, layout, &p);
	cid.inode = ino;
	cid.index = index;
	req.chunk = &cid;
	do {
		ret = layout_peer(fs, layout, p.daemon, &peer);
		if (!ret)
			ret = fan_call(fs, &peer, &msg, 1, RDMAFS__METHOD__METHOD_CHUNK_STAT,
				       &slot);
	} while (ret && next_replica(&p, ret));
	if (ret)
		return rdmafs_status_for_caller(no_copy_left(&p, ret));
	resp = rdmafs__chunk_stat_resp__unpack(NULL, slot.reply_len, slot.reply);
	if (!resp)
		return -EBADMSG;
	*exists = resp->exists && resp->length > 0;
	*length = resp->length > layout->chunk_size ? layout->chunk_size : resp->length;
	rdmafs__chunk_stat_resp__free_unpacked(resp, NULL);
	return 0;
}

static int seek_once(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout, uint64_t size,
		     uint64_t off, int whence, uint64_t *out)
{
	uint64_t cs = layout->chunk_size;

	if (off >= size)
		return -ENXIO;
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	for (uint64_t index = off / cs; index * cs < size; index++) {
		uint64_t start = index * cs;
		uint32_t length = 0;
		bool exists = false;
		int ret = stat_chunk(fs, ino, layout, index, &exists, &length);

		if (ret)
			return ret;
		if (whence == SEEK_DATA) {
			if (exists && start + length > off) {
				*out = start > off ? start : off;
				return 0;
			}
		} else if (!exists || length < cs) {
			/* this chunk's hole is [start + length, start + cs) */
			uint64_t hole = start + length;

			if (start + cs > off) {
				*out = hole > off ? hole : off;
				if (*out > size)
					*out = size;
				return 0;
			}
		}
		if (start > UINT64_MAX - cs)
			break;
	}
	if (whence == SEEK_DATA)
		return -ENXIO;
	*out = size;
	return 0;
}

int rfs_seek(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size, uint64_t off,
	     int whence, uint64_t *out)
{
	struct fence_wait fw = {0};
	int ret;

	for (;;) {
		/* a layout naming a REMOVED daemon: the file moved (layout_peer()) */
		ret = seek_once(fs, ino, layout, size, off, whence, out);
		if (ret != -ESTALE)
			break;
		ret = fence_retry(fs, ino, layout, &fw);
		if (ret)
			break;
	}
	return ret;
}
