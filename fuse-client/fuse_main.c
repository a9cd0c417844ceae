/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-fuse: mounts an rdmafs cluster with the libfuse3 low-level API.
 *
 *   rdmafs-fuse [-f] [-o meta=tcp://host:port,secret=/etc/rdmafs/secret] MOUNTPOINT
 *   rdmafs-fuse SOURCE MOUNTPOINT [-o ...]     (the form mount.fuse3 uses)
 *
 * FUSE inode numbers are the metadata service's inode numbers. Every
 * operation is one metadata RPC (with the caller's credentials, which the
 * service checks) plus, for file data, chunk RPCs to the storage daemons
 * through the client core (rdmafs_fs.h).
 *
 * File size: writes grow the size locally; the metadata service learns it
 * (UPDATE_SIZE) when a write extends the file and a second passed since the
 * last update, at flush (every close), fsync and release, so another client
 * sees the right size after close. fsync and close also CHUNK_COMMIT the
 * daemons that received writes. OPEN returns fresh attributes and the layout:
 * close-to-open consistency, as NFS gives.
 *
 * Errors: functions here use 0 / negative errno; only the fuse_reply_err()
 * calls turn them positive, through reply_error().
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

#define NODE_BUCKETS	   4096u
#define CRED_GROUPS	   64
#define NAME_MAX_LEN	   255
#define SIZE_UPDATE_GAP_MS 1000u
#define IO_SIZE		   (1u << 20)
#define DEFAULT_SECRET	   "/etc/rdmafs/secret"

/* What we know of an inode the kernel holds (lookup count) or has open. */
struct node {
	struct node *next; /* hash chain, under fs.table_lock */
	uint64_t ino;
	uint64_t nlookup; /* under fs.table_lock */
	uint32_t opens;	  /* under fs.table_lock */

	pthread_mutex_t lock; /* guards everything below */
	bool has_layout;
	struct rfs_layout layout;
	uint64_t size;	      /* the size as we know it, our writes included */
	bool size_dirty;      /* size is larger than what the service has from us */
	bool mtime_dirty;     /* written since the last UPDATE_SIZE */
	uint64_t size_seq;    /* bumped whenever we change the size the service will have */
	uint64_t dirty_mask;  /* layout daemons holding uncommitted writes */
	uint64_t dirty_first; /* lowest chunk index written since the last commit */
	uint64_t alloc_seq;   /* bumped whenever our calls change chunks */
	uint64_t alloc_told;  /* the alloc_seq the service has allocations for */
	uint64_t size_sent_ms;
	bool seen; /* seen_* hold the service's last attributes */
	uint64_t seen_size;
	int64_t seen_mtime_sec;
	uint32_t seen_mtime_nsec;
	uint64_t nocaps_until_ms; /* security.capability known absent until then */
};

struct handle {
	uint64_t server; /* the metadata service's handle */
	struct node *node;
	int flags;
};

struct fs {
	struct rfs *rfs;
	struct fuse_session *se;
	double attr_timeout, entry_timeout;
	bool kernel_acl;       /* the kernel enforces POSIX ACLs (with default_permissions) */
	char bdi[32];	       /* "major:minor" of our mount, for its read-ahead */
	unsigned readahead_kb; /* 0: leave the kernel's */
	int readahead_done;    /* atomic */
	pthread_mutex_t table_lock;
	struct node *buckets[NODE_BUCKETS];
};

/* The caller's credentials, as every metadata request carries them. */
struct cred {
	Rdmafs__Cred pb;
	uint32_t groups[CRED_GROUPS];
};

static struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * The errno an application sees: transport trouble becomes EIO (ETIMEDOUT
 * stays, it says what happened), anything that is not an errno too.
 */
static int fs_errno(int ret)
{
	int e = -ret;

	switch (e) {
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case ENOTCONN:
	case EPIPE:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case EPROTO:
	case EBADMSG:
	case ESHUTDOWN:
	case ENODEV:
	case EMSGSIZE:
		return EIO;
	default:
		return e > 0 && e < 4096 ? e : EIO;
	}
}

static void reply_error(fuse_req_t req, int ret)
{
	fuse_reply_err(req, ret ? fs_errno(ret) : 0);
}

static void cred_fill(fuse_req_t req, struct cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[CRED_GROUPS];
	int n = 0;

	rdmafs__cred__init(&c->pb);
	c->pb.uid = ctx->uid;
	c->pb.gid = ctx->gid;
	/* root passes every check the groups could matter for: skip reading /proc */
	if (ctx->uid != 0) {
		n = fuse_req_getgroups(req, CRED_GROUPS, groups);
		if (n < 0)
			n = 0;
		if (n > CRED_GROUPS)
			n = CRED_GROUPS;
	}
	for (int i = 0; i < n; i++)
		c->groups[i] = groups[i];
	c->pb.groups = c->groups;
	c->pb.n_groups = (size_t)n;
}

/* A name from the kernel as protobuf bytes; the service validates it. */
static ProtobufCBinaryData name_bytes(const char *name)
{
	ProtobufCBinaryData b = {.len = strlen(name), .data = (uint8_t *)name};

	return b;
}

/* Copies a name off the wire into @out (NAME_MAX_LEN + 1 bytes), checking it. */
static int name_from_wire(const ProtobufCBinaryData *b, char *out)
{
	if (b->len == 0 || b->len > NAME_MAX_LEN || memchr(b->data, '/', b->len) ||
	    memchr(b->data, '\0', b->len))
		return -EPROTO;
	memcpy(out, b->data, b->len);
	out[b->len] = '\0';
	if (strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
		return -EPROTO;
	return 0;
}

static int attr_to_stat(const Rdmafs__Attr *a, struct stat *st)
{
	if (!a || a->ino == 0 || a->ino > INT64_MAX || !(a->mode & S_IFMT))
		return -EPROTO;
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = a->size > INT64_MAX ? INT64_MAX : (off_t)a->size;
	st->st_blocks = (blkcnt_t)(a->blocks > INT64_MAX ? INT64_MAX : a->blocks);
	st->st_blksize = RFS_BLOCK_SIZE; /* the unit of COLLAPSE_RANGE and INSERT_RANGE */
	st->st_rdev = a->rdev;
	if (a->atime) {
		st->st_atim.tv_sec = a->atime->sec;
		st->st_atim.tv_nsec = a->atime->nsec < 1000000000u ? a->atime->nsec : 0;
	}
	if (a->mtime) {
		st->st_mtim.tv_sec = a->mtime->sec;
		st->st_mtim.tv_nsec = a->mtime->nsec < 1000000000u ? a->mtime->nsec : 0;
	}
	if (a->ctime) {
		st->st_ctim.tv_sec = a->ctime->sec;
		st->st_ctim.tv_nsec = a->ctime->nsec < 1000000000u ? a->ctime->nsec : 0;
	}
	return 0;
}

/* ---- the node table ------------------------------------------------------------- */

static struct node **bucket(struct fs *fs, uint64_t ino)
{
	return &fs->buckets[(ino * 0x9e3779b97f4a7c15ULL) >> 52 & (NODE_BUCKETS - 1)];
}

static struct node *node_lookup_locked(struct fs *fs, uint64_t ino)
{
	for (struct node *n = *bucket(fs, ino); n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

/* The node of @ino, created if needed, with @lookups and @opens added. */
static struct node *node_ref(struct fs *fs, uint64_t ino, uint64_t lookups, uint32_t opens)
{
	struct node *n;

	pthread_mutex_lock(&fs->table_lock);
	n = node_lookup_locked(fs, ino);
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n)
			goto out_unlock;
		n->ino = ino;
		n->dirty_first = UINT64_MAX;
		pthread_mutex_init(&n->lock, NULL);
		n->next = *bucket(fs, ino);
		*bucket(fs, ino) = n;
	}
	n->nlookup += lookups;
	n->opens += opens;
out_unlock:
	pthread_mutex_unlock(&fs->table_lock);
	return n;
}

/* The node of @ino if the kernel holds it; the kernel keeps it while it calls us. */
static struct node *node_find(struct fs *fs, uint64_t ino)
{
	struct node *n;

	pthread_mutex_lock(&fs->table_lock);
	n = node_lookup_locked(fs, ino);
	pthread_mutex_unlock(&fs->table_lock);
	return n;
}

/* Drops @lookups and @opens; frees the node when nothing holds it (never the root). */
static void node_unref(struct fs *fs, struct node *n, uint64_t lookups, uint32_t opens)
{
	struct node **pp;

	pthread_mutex_lock(&fs->table_lock);
	n->nlookup = lookups > n->nlookup ? 0 : n->nlookup - lookups;
	n->opens = opens > n->opens ? 0 : n->opens - opens;
	if (n->nlookup || n->opens || n->ino == FUSE_ROOT_ID)
		goto out_unlock;
	for (pp = bucket(fs, n->ino); *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			break;
		}
	}
	pthread_mutex_destroy(&n->lock);
	free(n);
out_unlock:
	pthread_mutex_unlock(&fs->table_lock);
}

/*
 * Takes the service's attributes into @n (layout too, when given) and
 * returns in @st what the kernel should see: our size while we hold writes
 * the service does not know of yet. Tells *@changed whether size or mtime
 * moved since we last looked (someone else wrote).
 */
/*
 * Takes a layout from the service or from a data call that refetched it (a
 * drain moved the file: rdmafs_fs.h). n->lock is held. dirty_mask bits are
 * indexes into the layout's daemons, so after a change of generation they
 * mean other daemons: every daemon of the new layout is then dirty.
 */
static void node_keep_layout_locked(struct node *n, const struct rfs_layout *l)
{
	if (n->has_layout && l->generation < n->layout.generation)
		return; /* an older reply than what a data call found */
	if (n->has_layout && l->generation != n->layout.generation && n->dirty_mask)
		n->dirty_mask = ~0ull;
	n->layout = *l;
	n->has_layout = true;
}

/*
 * Records that daemons @written of @l (the layout a data call ended with)
 * hold uncommitted writes. n->lock is held.
 */
static void node_note_written_locked(struct node *n, const struct rfs_layout *l, uint64_t written)
{
	node_keep_layout_locked(n, l);
	/* another call moved the node to a newer layout: our bits meant the old one */
	if (written && l->generation != n->layout.generation)
		written = ~0ull;
	n->dirty_mask |= written;
}

/* node_update_seq()'s @seq for a reply that cannot predate our own size updates. */
#define SIZE_SEQ_FRESH UINT64_MAX

/*
 * Like node_update(), for a reply to a call made when n->size_seq was @seq:
 * if we changed the size since (an UPDATE_SIZE finished meanwhile), the
 * service may have answered before it saw our change, so a smaller size in
 * the reply is stale and must not shrink ours.
 */
static int node_update_seq(struct node *n, const Rdmafs__Attr *a, const Rdmafs__Layout *layout,
			   struct stat *st, bool *changed, uint64_t seq)
{
	struct rfs_layout l;
	int64_t msec = a && a->mtime ? a->mtime->sec : 0;
	uint32_t mnsec = a && a->mtime ? a->mtime->nsec : 0;
	bool stale;
	int ret;

	ret = attr_to_stat(a, st);
	if (ret)
		return ret;
	if (layout && S_ISREG(a->mode)) {
		ret = rfs_layout_parse(layout, &l);
		if (ret)
			return ret;
	}
	if (!n)
		return 0;
	pthread_mutex_lock(&n->lock);
	if (layout && S_ISREG(a->mode))
		node_keep_layout_locked(n, &l);
	if (changed)
		*changed = n->seen && (n->seen_size != a->size || n->seen_mtime_sec != msec ||
				       n->seen_mtime_nsec != mnsec);
	n->seen = true;
	n->seen_size = a->size;
	n->seen_mtime_sec = msec;
	n->seen_mtime_nsec = mnsec;
	stale = seq != SIZE_SEQ_FRESH && seq != n->size_seq && a->size < n->size;
	if ((!n->size_dirty && !stale) || a->size > n->size)
		n->size = a->size;
	if ((n->size_dirty || stale) && S_ISREG(a->mode))
		st->st_size = (off_t)n->size;
	pthread_mutex_unlock(&n->lock);
	return 0;
}

static int node_update(struct node *n, const Rdmafs__Attr *a, const Rdmafs__Layout *layout,
		       struct stat *st, bool *changed)
{
	return node_update_seq(n, a, layout, st, changed, SIZE_SEQ_FRESH);
}

/* The size sequence of @n now, for node_update_seq() after a call. */
static uint64_t node_size_seq(struct node *n)
{
	uint64_t seq;

	if (!n)
		return SIZE_SEQ_FRESH;
	pthread_mutex_lock(&n->lock);
	seq = n->size_seq;
	pthread_mutex_unlock(&n->lock);
	return seq;
}

/* ---- metadata calls ---------------------------------------------------------------- */

static int meta_call(struct fs *fs, Rdmafs__Method method, const ProtobufCMessage *req,
		     const ProtobufCMessageDescriptor *desc, bool idempotent,
		     ProtobufCMessage **resp)
{
	return rfs_meta_call(fs->rfs, method, req, desc, idempotent, resp);
}

/* Replies to a call that returned an EntryResp, counting the kernel's new lookup. */
static void reply_entry_resp(fuse_req_t req, struct fs *fs, int ret, ProtobufCMessage *msg)
{
	struct fuse_entry_param e;
	Rdmafs__EntryResp *resp = (Rdmafs__EntryResp *)msg;
	struct node *n;

	if (ret)
		goto out_error;
	memset(&e, 0, sizeof(e));
	ret = attr_to_stat(resp->attr, &e.attr);
	if (ret)
		goto out_error;
	n = node_ref(fs, resp->attr->ino, 1, 0);
	if (!n) {
		ret = -ENOMEM;
		goto out_error;
	}
	ret = node_update(n, resp->attr, resp->layout, &e.attr, NULL);
	if (ret) {
		node_unref(fs, n, 1, 0);
		goto out_error;
	}
	e.ino = resp->attr->ino;
	e.generation = resp->attr->generation;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	rfs_meta_free(msg);
	if (fuse_reply_entry(req, &e))
		node_unref(fs, n, 1, 0);
	return;

out_error:
	rfs_meta_free(msg);
	reply_error(req, ret);
}

/* Removes the chunks of an inode the service just freed (its last link and handle are gone). */
static void free_data(struct fs *fs, const Rdmafs__FreedInode *freed)
{
	struct rfs_layout l;
	int ret;

	if (!freed || !freed->layout)
		return;
	ret = rfs_layout_parse(freed->layout, &l);
	if (!ret)
		ret = rfs_remove_data(fs->rfs, freed->ino, &l);
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %" PRIu64 ": chunks not removed (%s); fsck will find them",
			   freed->ino, strerror(fs_errno(ret)));
}

/* The layout of a regular file, fetched with an OPEN/RELEASE pair if we never saw it. */
static int node_layout(struct fs *fs, struct node *n, const struct cred *c, struct rfs_layout *out)
{
	Rdmafs__OpenReq oreq = RDMAFS__OPEN_REQ__INIT;
	Rdmafs__ReleaseReq rreq = RDMAFS__RELEASE_REQ__INIT;
	Rdmafs__OpenResp *oresp;
	ProtobufCMessage *msg;
	struct stat st;
	int ret;

	pthread_mutex_lock(&n->lock);
	if (n->has_layout) {
		*out = n->layout;
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	pthread_mutex_unlock(&n->lock);
	oreq.ino = n->ino;
	oreq.flags = O_WRONLY;
	oreq.cred = (Rdmafs__Cred *)&c->pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_OPEN, &oreq.base, &rdmafs__open_resp__descriptor,
			false, &msg);
	if (ret)
		return ret;
	oresp = (Rdmafs__OpenResp *)msg;
	ret = node_update(n, oresp->attr, oresp->layout, &st, NULL);
	rreq.handle = oresp->handle;
	rreq.ino = n->ino;
	rreq.cred = (Rdmafs__Cred *)&c->pb;
	rfs_meta_free(msg);
	if (meta_call(fs, RDMAFS__METHOD__METHOD_RELEASE, &rreq.base,
		      &rdmafs__release_resp__descriptor, false, &msg) == 0) {
		free_data(fs, ((Rdmafs__ReleaseResp *)msg)->freed);
		rfs_meta_free(msg);
	}
	if (ret)
		return ret;
	pthread_mutex_lock(&n->lock);
	ret = n->has_layout ? 0 : -EIO;
	if (!ret)
		*out = n->layout;
	pthread_mutex_unlock(&n->lock);
	return ret;
}

/*
 * Whether @report answers for every daemon that a commit of @mask asked: all
 * of the layout's when the commit found it newer than @generation (a drain
 * moved the file, and the commit then asks every daemon). Only then does the
 * service have all of the file's allocations.
 */
static bool report_complete(const struct rfs_alloc_report *report, const struct rfs_layout *l,
			    uint64_t generation, uint64_t mask)
{
	uint64_t all = l->stripe_width >= 64 ? UINT64_MAX : (1ull << l->stripe_width) - 1;

	if (l->generation != generation)
		mask = UINT64_MAX;
	return (report->known & all) == (mask & all);
}

/* The service has the allocations of every chunk change up to @alloc_seq. */
static void node_alloc_told(struct node *n, uint64_t alloc_seq)
{
	pthread_mutex_lock(&n->lock);
	if (alloc_seq > n->alloc_told)
		n->alloc_told = alloc_seq;
	pthread_mutex_unlock(&n->lock);
}

/*
 * GETATTR of a file whose chunks changed since the last commit (writes,
 * truncate, punch): the daemons concerned report what they now hold, without
 * syncing anything (the commit stays due for fsync and close), and
 * UPDATE_SIZE stores it and answers the attributes, so st_blocks follows at
 * once, as on a local filesystem. -EAGAIN when there is nothing to report.
 */
static int node_report(struct fs *fs, struct node *n, const struct cred *c, struct stat *st)
{
	Rdmafs__UpdateSizeReq req = RDMAFS__UPDATE_SIZE_REQ__INIT;
	struct rfs_alloc_report report;
	uint64_t mask, seq, alloc_seq, generation;
	struct rfs_layout layout;
	ProtobufCMessage *msg;
	int ret;

	pthread_mutex_lock(&n->lock);
	/* a stat after a stat asks the daemons again only if chunks changed since */
	mask = n->has_layout && n->alloc_seq != n->alloc_told ? n->dirty_mask : 0;
	alloc_seq = n->alloc_seq;
	layout = n->layout;
	seq = n->size_seq;
	req.size = n->size_dirty ? n->size : 0;
	pthread_mutex_unlock(&n->lock);
	if (!mask)
		return -EAGAIN;
	generation = layout.generation;
	ret = rfs_commit_alloc(fs->rfs, n->ino, &layout, mask, 0, false, &report);
	pthread_mutex_lock(&n->lock);
	node_keep_layout_locked(n, &layout);
	pthread_mutex_unlock(&n->lock);
	if (ret)
		return ret;
	req.ino = n->ino;
	req.cred = (Rdmafs__Cred *)&c->pb;
	rfs_alloc_report_attach(&report, &layout, &req);
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_UPDATE_SIZE, &req.base,
			&rdmafs__attr_resp__descriptor, true, &msg);
	if (ret)
		return ret;
	ret = node_update_seq(n, ((Rdmafs__AttrResp *)msg)->attr, NULL, st, NULL, seq);
	rfs_meta_free(msg);
	if (!ret && report_complete(&report, &layout, generation, mask))
		node_alloc_told(n, alloc_seq);
	return ret;
}

/*
 * Makes our writes to @n durable and its size known: with @commit (flush,
 * fsync, release) CHUNK_COMMIT on the daemons that got writes and UPDATE_SIZE
 * with the new mtime; without it only the size. What fails stays dirty for
 * the next attempt. The commit's replies also tell the service what the
 * daemons hold (st_blocks).
 */
static int node_sync(struct fs *fs, struct node *n, const struct cred *c, bool commit)
{
	Rdmafs__UpdateSizeReq req = RDMAFS__UPDATE_SIZE_REQ__INIT;
	Rdmafs__Timespec mtime = RDMAFS__TIMESPEC__INIT;
	struct rfs_alloc_report report = {.known = 0};
	struct rfs_layout layout;
	uint64_t mask = 0, first = UINT64_MAX, size, alloc_seq, generation = 0;
	bool size_dirty, mtime_dirty;
	ProtobufCMessage *msg;
	struct timespec now;
	int ret = 0;

	pthread_mutex_lock(&n->lock);
	alloc_seq = n->alloc_seq;
	if (commit && n->dirty_mask && n->has_layout) {
		mask = n->dirty_mask;
		first = n->dirty_first;
		layout = n->layout;
		generation = layout.generation;
		n->dirty_mask = 0;
		n->dirty_first = UINT64_MAX;
	}
	size = n->size;
	size_dirty = n->size_dirty;
	/*
	 * The mtime our writes earned goes with flush, fsync and release only.
	 * The batched size update of a growing file runs after the write was
	 * answered, so it could land after the caller's own utimensat and undo it.
	 */
	mtime_dirty = commit && n->mtime_dirty;
	if (commit)
		n->mtime_dirty = false;
	pthread_mutex_unlock(&n->lock);

	if (mask) {
		ret = rfs_commit_alloc(fs->rfs, n->ino, &layout, mask, first, true, &report);
		pthread_mutex_lock(&n->lock);
		node_keep_layout_locked(n, &layout);
		pthread_mutex_unlock(&n->lock);
		if (ret)
			goto err_redirty;
	}
	if (!size_dirty && !mtime_dirty && !report.known)
		return 0;
	req.ino = n->ino;
	req.size = size;
	/* what the committed daemons now hold: the service's st_blocks */
	if (report.known)
		rfs_alloc_report_attach(&report, &layout, &req);
	if (mtime_dirty) {
		clock_gettime(CLOCK_REALTIME, &now);
		mtime.sec = now.tv_sec;
		mtime.nsec = (uint32_t)now.tv_nsec;
		req.mtime = &mtime;
	}
	req.cred = (Rdmafs__Cred *)&c->pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_UPDATE_SIZE, &req.base,
			&rdmafs__attr_resp__descriptor, true, &msg);
	if (ret)
		goto err_redirty;
	pthread_mutex_lock(&n->lock);
	if (n->size == size)
		n->size_dirty = false;
	n->size_seq++;
	n->size_sent_ms = rdmafs_now_ms();
	pthread_mutex_unlock(&n->lock);
	{
		struct stat st;

		node_update(n, ((Rdmafs__AttrResp *)msg)->attr, NULL, &st, NULL);
	}
	rfs_meta_free(msg);
	if (mask && report_complete(&report, &layout, generation, mask))
		node_alloc_told(n, alloc_seq);
	return 0;

err_redirty:
	pthread_mutex_lock(&n->lock);
	if (mask) /* layout is set only with a mask */
		node_note_written_locked(n, &layout, mask);
	if (first < n->dirty_first)
		n->dirty_first = first;
	n->mtime_dirty |= mtime_dirty;
	pthread_mutex_unlock(&n->lock);
	return ret;
}

/*
 * After a truncate, punch or range shift, which change chunks on daemons we
 * may not have written to: every daemon of @n's layout is due a commit from
 * chunk @first on (at fsync or close) and reports what it holds now, so
 * st_blocks follows at once. The attributes go to @st (may be NULL).
 */
static int node_chunks_changed(struct fs *fs, struct node *n, const struct cred *c, uint64_t first,
			       struct stat *st)
{
	struct stat ignored;
	int ret;

	pthread_mutex_lock(&n->lock);
	if (n->has_layout) {
		n->dirty_mask |= n->layout.stripe_width >= 64
					 ? UINT64_MAX
					 : (1ull << n->layout.stripe_width) - 1;
		if (first < n->dirty_first)
			n->dirty_first = first;
		n->alloc_seq++;
	}
	pthread_mutex_unlock(&n->lock);
	ret = node_report(fs, n, c, st ? st : &ignored);
	return ret == -EAGAIN ? 0 : ret;
}

/*
 * The kernel reads ahead 128 KiB on a FUSE mount and INIT cannot raise it;
 * the bdi's sysfs knob can (root only). Its name is our mount's device
 * number, found in mountinfo without a FUSE request (we are not serving yet).
 */
static void find_bdi(struct fs *fs, const char *mountpoint)
{
	char line[4096], *real = realpath(mountpoint, NULL);
	FILE *f;

	if (!real)
		return;
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		char mnt[PATH_MAX], *dash;

		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE ..." (spaces in names are \040)
		 */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) != 3)
			continue;
		dash = strstr(line, " - ");
		if (!dash || strncmp(dash + 3, "fuse", 4) != 0 || strcmp(mnt, real) != 0)
			continue;
		snprintf(fs->bdi, sizeof(fs->bdi), "%u:%u", maj, min);
	}
	if (f)
		fclose(f);
	free(real);
}

/* Runs once, at the first request: the kernel has applied INIT by then. */
static void tune_readahead(struct fs *fs)
{
	char path[96], value[16];
	int fd, len;

	if (__atomic_exchange_n(&fs->readahead_done, 1, __ATOMIC_ACQ_REL))
		return;
	if (!fs->readahead_kb || !fs->bdi[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", fs->bdi);
	len = snprintf(value, sizeof(value), "%u", fs->readahead_kb);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, value, (size_t)len) != len)
		rdmafs_log(RDMAFS_LOG_WARN, "read-ahead left as it was (%s: %s)", path,
			   strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* ---- operations ------------------------------------------------------------------------ */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	conn->max_write = IO_SIZE;
	if (conn->max_readahead > IO_SIZE)
		conn->max_readahead = IO_SIZE;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/*
	 * The kernel clears setuid/setgid on write and truncate with a SETATTR
	 * of the mode in the writer's name, and the service accepts that one
	 * change from a non-owner who may write (ops.c, setattr_kill_privs_ok()).
	 * libfuse 3.14 has no HANDLE_KILLPRIV_V2, and with HANDLE_KILLPRIV the
	 * kernel would leave the clearing to us on every write.
	 */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
	/* the size must come from the service, never from a cached write-back page */
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * POSIX ACLs: the kernel checks them (default_permissions), keeps the
	 * mode bits and the system.posix_acl_* xattrs in step, and applies
	 * default ACLs at create; the service just stores the xattrs. Without
	 * this, setting an access ACL (as cp -a and tar do to set the final
	 * mode) would leave the mode bits untouched.
	 */
	if (fs->kernel_acl && (conn->capable & FUSE_CAP_POSIX_ACL))
		conn->want |= FUSE_CAP_POSIX_ACL;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	Rdmafs__LookupReq r = RDMAFS__LOOKUP_REQ__INIT;
	struct fs *fs = req_fs(req);
	ProtobufCMessage *msg = NULL;
	struct cred c;
	int ret;

	tune_readahead(fs);
	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.cred = &c.pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_LOOKUP, &r.base, &rdmafs__entry_resp__descriptor,
			true, &msg);
	reply_entry_resp(req, fs, ret, msg);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = req_fs(req);
	struct node *n = node_find(fs, ino);

	if (n)
		node_unref(fs, n, nlookup, 0);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++) {
		struct node *n = node_find(fs, forgets[i].ino);

		if (n)
			node_unref(fs, n, forgets[i].nlookup, 0);
	}
	fuse_reply_none(req);
}

/* GETATTR of @ino into @st, merged with what we know locally. */
static int do_getattr(struct fs *fs, const struct cred *c, uint64_t ino, struct stat *st)
{
	Rdmafs__GetattrReq r = RDMAFS__GETATTR_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	struct node *n = node_find(fs, ino);
	uint64_t seq = node_size_seq(n);

	/* on failure the plain GETATTR below still answers, with older blocks */
	if (n && node_report(fs, n, c, st) == 0)
		return 0;
	r.ino = ino;
	r.cred = (Rdmafs__Cred *)&c->pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_GETATTR, &r.base, &rdmafs__attr_resp__descriptor,
			true, &msg);
	if (ret)
		return ret;
	ret = node_update_seq(n, ((Rdmafs__AttrResp *)msg)->attr, NULL, st, NULL, seq);
	rfs_meta_free(msg);
	return ret;
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct stat st;
	struct cred c;
	int ret;

	tune_readahead(fs);
	cred_fill(req, &c);
	ret = do_getattr(fs, &c, ino, &st);
	if (ret)
		reply_error(req, ret);
	else
		fuse_reply_attr(req, &st, fs->attr_timeout);
}

#define SETATTR_SENT                                                                       \
	(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE | \
	 FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |             \
	 FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	Rdmafs__SetattrReq r = RDMAFS__SETATTR_REQ__INIT;
	Rdmafs__Timespec at = RDMAFS__TIMESPEC__INIT, mt = RDMAFS__TIMESPEC__INIT,
			 ct = RDMAFS__TIMESPEC__INIT;
	struct fs *fs = req_fs(req);
	struct node *n = node_find(fs, ino);
	struct rfs_layout layout;
	ProtobufCMessage *msg;
	uint64_t old_size = UINT64_MAX;
	bool mtime_was_dirty = false;
	struct stat st;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.valid = (uint32_t)to_set & SETATTR_SENT;
	r.mode = attr->st_mode & 07777;
	r.uid = attr->st_uid;
	r.gid = attr->st_gid;
	r.cred = &c.pb;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0) {
			ret = -EINVAL;
			goto out_reply;
		}
		r.size = (uint64_t)attr->st_size;
		/* ftruncate: open(2) checked the permission, the service checks the handle */
		if (fi && fi->fh)
			r.handle = ((struct handle *)(uintptr_t)fi->fh)->server;
		if (n) {
			pthread_mutex_lock(&n->lock);
			old_size = n->seen ? (n->size > n->seen_size ? n->size : n->seen_size)
					   : UINT64_MAX;
			pthread_mutex_unlock(&n->lock);
		}
	}
	if ((to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW)) {
		at.sec = attr->st_atim.tv_sec;
		at.nsec = (uint32_t)attr->st_atim.tv_nsec;
		r.atime = &at;
	}
	if ((to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW)) {
		mt.sec = attr->st_mtim.tv_sec;
		mt.nsec = (uint32_t)attr->st_mtim.tv_nsec;
		r.mtime = &mt;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		ct.sec = attr->st_ctim.tv_sec;
		ct.nsec = (uint32_t)attr->st_ctim.tv_nsec;
		r.ctime = &ct;
	}
	/*
	 * An explicit mtime (tar, cp -a, rsync after writing) supersedes the one
	 * our earlier writes would stamp at the next sync: drop that, or restore
	 * it if the call fails.
	 */
	if (n && (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))) {
		pthread_mutex_lock(&n->lock);
		mtime_was_dirty = n->mtime_dirty;
		n->mtime_dirty = false;
		pthread_mutex_unlock(&n->lock);
	}
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_SETATTR, &r.base, &rdmafs__attr_resp__descriptor,
			true, &msg);
	if (ret && mtime_was_dirty) {
		pthread_mutex_lock(&n->lock);
		n->mtime_dirty = true;
		pthread_mutex_unlock(&n->lock);
	}
	if (ret)
		goto out_reply;
	if ((to_set & FUSE_SET_ATTR_SIZE) && n) {
		/* the size is now the service's: a pending larger one must not grow it back */
		pthread_mutex_lock(&n->lock);
		n->size = r.size;
		n->size_dirty = false;
		n->size_seq++;
		pthread_mutex_unlock(&n->lock);
	}
	ret = node_update(n, ((Rdmafs__AttrResp *)msg)->attr, NULL, &st, NULL);
	rfs_meta_free(msg);
	if (ret)
		goto out_reply;
	/* a shrink: the bytes past the new end must read as zeros if the file grows again */
	if ((to_set & FUSE_SET_ATTR_SIZE) && S_ISREG(st.st_mode) && r.size < old_size) {
		if (n)
			ret = node_layout(fs, n, &c, &layout);
		else
			ret = -EIO;
		if (!ret) {
			ret = rfs_truncate_data(fs->rfs, ino, &layout, r.size);
			pthread_mutex_lock(&n->lock);
			node_keep_layout_locked(n, &layout);
			pthread_mutex_unlock(&n->lock);
		}
		if (!ret)
			ret = node_chunks_changed(fs, n, &c, r.size / layout.chunk_size, &st);
		if (ret)
			goto out_reply;
	}
	fuse_reply_attr(req, &st, fs->attr_timeout);
	return;

out_reply:
	reply_error(req, ret);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	Rdmafs__ReadlinkReq r = RDMAFS__READLINK_REQ__INIT;
	Rdmafs__ReadlinkResp *resp;
	ProtobufCMessage *msg;
	char target[PATH_MAX];
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_READLINK, &r.base,
			&rdmafs__readlink_resp__descriptor, true, &msg);
	if (ret)
		goto out_reply;
	resp = (Rdmafs__ReadlinkResp *)msg;
	if (resp->target.len == 0 || resp->target.len >= sizeof(target) ||
	    memchr(resp->target.data, '\0', resp->target.len)) {
		ret = -EPROTO;
	} else {
		memcpy(target, resp->target.data, resp->target.len);
		target[resp->target.len] = '\0';
	}
	rfs_meta_free(msg);
	if (!ret) {
		fuse_reply_readlink(req, target);
		return;
	}
out_reply:
	reply_error(req, ret);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	Rdmafs__MknodReq r = RDMAFS__MKNOD_REQ__INIT;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	ProtobufCMessage *msg = NULL;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.mode = mode;
	r.uid = ctx->uid;
	r.gid = ctx->gid;
	r.rdev = rdev;
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_MKNOD, &r.base,
			&rdmafs__entry_resp__descriptor, false, &msg);
	reply_entry_resp(req, req_fs(req), ret, msg);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	Rdmafs__MkdirReq r = RDMAFS__MKDIR_REQ__INIT;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	ProtobufCMessage *msg = NULL;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.mode = mode & 07777;
	r.uid = ctx->uid;
	r.gid = ctx->gid;
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_MKDIR, &r.base,
			&rdmafs__entry_resp__descriptor, false, &msg);
	reply_entry_resp(req, req_fs(req), ret, msg);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	Rdmafs__SymlinkReq r = RDMAFS__SYMLINK_REQ__INIT;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	ProtobufCMessage *msg = NULL;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.target = name_bytes(link);
	r.uid = ctx->uid;
	r.gid = ctx->gid;
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_SYMLINK, &r.base,
			&rdmafs__entry_resp__descriptor, false, &msg);
	reply_entry_resp(req, req_fs(req), ret, msg);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	Rdmafs__LinkReq r = RDMAFS__LINK_REQ__INIT;
	ProtobufCMessage *msg = NULL;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.new_parent = newparent;
	r.new_name = name_bytes(newname);
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_LINK, &r.base,
			&rdmafs__entry_resp__descriptor, false, &msg);
	reply_entry_resp(req, req_fs(req), ret, msg);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	Rdmafs__UnlinkReq r = RDMAFS__UNLINK_REQ__INIT;
	struct fs *fs = req_fs(req);
	ProtobufCMessage *msg;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.cred = &c.pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_UNLINK, &r.base,
			&rdmafs__unlink_resp__descriptor, false, &msg);
	reply_error(req, ret);
	if (ret)
		return;
	/* inode numbers are never reused, so the chunks may go after the reply */
	free_data(fs, ((Rdmafs__UnlinkResp *)msg)->freed);
	rfs_meta_free(msg);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	Rdmafs__RmdirReq r = RDMAFS__RMDIR_REQ__INIT;
	ProtobufCMessage *msg;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_RMDIR, &r.base,
			&rdmafs__empty__descriptor, false, &msg);
	if (!ret)
		rfs_meta_free(msg);
	reply_error(req, ret);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	Rdmafs__RenameReq r = RDMAFS__RENAME_REQ__INIT;
	struct fs *fs = req_fs(req);
	ProtobufCMessage *msg;
	struct cred c;
	int ret;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		reply_error(req, -EINVAL);
		return;
	}
	cred_fill(req, &c);
	r.old_parent = parent;
	r.old_name = name_bytes(name);
	r.new_parent = newparent;
	r.new_name = name_bytes(newname);
	r.flags = flags;
	r.cred = &c.pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_RENAME, &r.base,
			&rdmafs__rename_resp__descriptor, false, &msg);
	reply_error(req, ret);
	if (ret)
		return;
	free_data(fs, ((Rdmafs__RenameResp *)msg)->freed);
	rfs_meta_free(msg);
}

/* Sets up a handle after OPEN or CREATE took one on the service. */
static struct handle *handle_new(struct fs *fs, struct node *n, uint64_t server, int flags)
{
	struct handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->server = server;
	h->node = n;
	h->flags = flags;
	return h;
}

/* RELEASE of a service handle; frees the data of an inode it was the last hold of. */
static int release_server(struct fs *fs, const struct cred *c, uint64_t ino, uint64_t handle)
{
	Rdmafs__ReleaseReq r = RDMAFS__RELEASE_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.handle = handle;
	r.ino = ino;
	r.cred = (Rdmafs__Cred *)&c->pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_RELEASE, &r.base,
			&rdmafs__release_resp__descriptor, false, &msg);
	if (ret)
		return ret;
	free_data(fs, ((Rdmafs__ReleaseResp *)msg)->freed);
	rfs_meta_free(msg);
	return 0;
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	Rdmafs__OpenReq r = RDMAFS__OPEN_REQ__INIT;
	struct fs *fs = req_fs(req);
	Rdmafs__OpenResp *resp;
	ProtobufCMessage *msg;
	struct handle *h;
	struct node *n;
	bool changed = false;
	struct stat st;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.flags = (uint32_t)fi->flags;
	r.cred = &c.pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_OPEN, &r.base, &rdmafs__open_resp__descriptor,
			false, &msg);
	if (ret)
		goto out_reply;
	resp = (Rdmafs__OpenResp *)msg;
	n = node_ref(fs, ino, 0, 1);
	if (!n) {
		ret = -ENOMEM;
		goto err_release;
	}
	ret = node_update(n, resp->attr, resp->layout, &st, &changed);
	if (!ret && S_ISREG(st.st_mode) && !n->has_layout)
		ret = -EPROTO;
	if (ret)
		goto err_unref;
	h = handle_new(fs, n, resp->handle, fi->flags);
	if (!h) {
		ret = -ENOMEM;
		goto err_unref;
	}
	rfs_meta_free(msg);
	/* close-to-open: drop cached pages and attributes when another client changed the file */
	if (changed)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
	fi->fh = (uintptr_t)h;
	fi->keep_cache = 0;
	fi->direct_io = (fi->flags & O_DIRECT) ? 1 : 0;
	if (fuse_reply_open(req, fi)) {
		release_server(fs, &c, ino, h->server);
		node_unref(fs, n, 0, 1);
		free(h);
	}
	return;

err_unref:
	node_unref(fs, n, 0, 1);
err_release:
	release_server(fs, &c, ino, resp->handle);
	rfs_meta_free(msg);
out_reply:
	reply_error(req, ret);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	Rdmafs__CreateReq r = RDMAFS__CREATE_REQ__INIT;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs *fs = req_fs(req);
	struct fuse_entry_param e;
	Rdmafs__CreateResp *resp;
	ProtobufCMessage *msg;
	struct handle *h;
	struct node *n;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.parent = parent;
	r.name = name_bytes(name);
	r.mode = S_IFREG | (mode & 07777);
	r.uid = ctx->uid;
	r.gid = ctx->gid;
	r.exclusive = (fi->flags & O_EXCL) != 0;
	r.open_flags = (uint32_t)fi->flags;
	r.cred = &c.pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_CREATE, &r.base,
			&rdmafs__create_resp__descriptor, false, &msg);
	if (ret)
		goto out_reply;
	resp = (Rdmafs__CreateResp *)msg;
	memset(&e, 0, sizeof(e));
	ret = attr_to_stat(resp->attr, &e.attr);
	if (ret)
		goto err_release;
	n = node_ref(fs, resp->attr->ino, 1, 1);
	if (!n) {
		ret = -ENOMEM;
		goto err_release;
	}
	ret = node_update(n, resp->attr, resp->layout, &e.attr, NULL);
	if (!ret && !n->has_layout)
		ret = -EPROTO;
	if (ret)
		goto err_unref;
	h = handle_new(fs, n, resp->handle, fi->flags);
	if (!h) {
		ret = -ENOMEM;
		goto err_unref;
	}
	e.ino = resp->attr->ino;
	e.generation = resp->attr->generation;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	rfs_meta_free(msg);
	fi->fh = (uintptr_t)h;
	fi->keep_cache = 0;
	fi->direct_io = (fi->flags & O_DIRECT) ? 1 : 0;
	if (fuse_reply_create(req, &e, fi)) {
		release_server(fs, &c, n->ino, h->server);
		node_unref(fs, n, 1, 1);
		free(h);
	}
	return;

err_unref:
	node_unref(fs, n, 1, 1);
err_release:
	release_server(fs, &c, resp->attr ? resp->attr->ino : 0, resp->handle);
	rfs_meta_free(msg);
out_reply:
	reply_error(req, ret);
}

/* The layout and size of an open regular file; -EIO if the service gave none. */
static int node_io_state(struct node *n, struct rfs_layout *layout, uint64_t *size)
{
	int ret = 0;

	pthread_mutex_lock(&n->lock);
	if (n->has_layout && n->layout.chunk_size) {
		*layout = n->layout;
		*size = n->size;
	} else {
		ret = -EIO;
	}
	pthread_mutex_unlock(&n->lock);
	return ret;
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	struct rfs_layout layout;
	uint64_t file_size;
	char *buf;
	int ret;

	if (off < 0) {
		reply_error(req, -EINVAL);
		return;
	}
	ret = node_io_state(n, &layout, &file_size);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	if ((uint64_t)off >= file_size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > file_size - (uint64_t)off)
		size = (size_t)(file_size - (uint64_t)off);
	buf = malloc(size);
	if (!buf) {
		reply_error(req, -ENOMEM);
		return;
	}
	ret = rfs_read(fs->rfs, ino, &layout, (uint64_t)off, size, buf);
	pthread_mutex_lock(&n->lock);
	node_keep_layout_locked(n, &layout);
	pthread_mutex_unlock(&n->lock);
	if (ret)
		reply_error(req, ret);
	else
		fuse_reply_buf(req, buf, size);
	free(buf);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	struct rfs_layout layout;
	uint64_t written = 0, end, file_size;
	bool send_size = false;
	struct cred c;
	int ret;

	if (off < 0 || (uint64_t)off > UINT64_MAX - size) {
		reply_error(req, -EFBIG);
		return;
	}
	end = (uint64_t)off + size;
	ret = node_io_state(n, &layout, &file_size);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	ret = rfs_write(fs->rfs, ino, &layout, (uint64_t)off, size, buf,
			(h->flags & (O_SYNC | O_DSYNC)) != 0, &written);
	pthread_mutex_lock(&n->lock);
	node_note_written_locked(n, &layout, written);
	if (written)
		n->alloc_seq++;
	if (written && (uint64_t)off / layout.chunk_size < n->dirty_first)
		n->dirty_first = (uint64_t)off / layout.chunk_size;
	if (!ret) {
		n->mtime_dirty = true;
		if (end > n->size) {
			n->size = end;
			n->size_dirty = true;
			n->size_seq++;
		}
		/* batched: a growing file tells the service at most once a second */
		send_size =
			n->size_dirty && rdmafs_now_ms() - n->size_sent_ms >= SIZE_UPDATE_GAP_MS;
		if (send_size)
			n->size_sent_ms = rdmafs_now_ms();
	}
	pthread_mutex_unlock(&n->lock);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	/* req is gone once replied to: take the caller's credentials first */
	if (send_size)
		cred_fill(req, &c);
	fuse_reply_write(req, size);
	if (send_size)
		node_sync(fs, n, &c, false);
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct cred c;

	cred_fill(req, &c);
	reply_error(req, node_sync(req_fs(req), h->node, &c, true));
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct cred c;

	cred_fill(req, &c);
	reply_error(req, node_sync(req_fs(req), h->node, &c, true));
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	/* normally flush did it; writes through a still-mapped file may remain */
	ret = node_sync(fs, h->node, &c, true);
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN, "inode %" PRIu64 ": size or commit lost at release: %s",
			   (uint64_t)ino, strerror(fs_errno(ret)));
	ret = release_server(fs, &c, ino, h->server);
	node_unref(fs, h->node, 0, 1);
	free(h);
	reply_error(req, ret);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	Rdmafs__OpenReq r = RDMAFS__OPEN_REQ__INIT;
	struct fs *fs = req_fs(req);
	ProtobufCMessage *msg;
	struct handle *h;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.flags = O_RDONLY | O_DIRECTORY;
	r.cred = &c.pb;
	/* an OPEN checks read permission now, as opendir(3) expects */
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_OPEN, &r.base, &rdmafs__open_resp__descriptor,
			false, &msg);
	if (ret)
		goto out_reply;
	h = handle_new(fs, NULL, ((Rdmafs__OpenResp *)msg)->handle, fi->flags);
	rfs_meta_free(msg);
	if (!h) {
		ret = -ENOMEM;
		goto out_reply;
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi)) {
		release_server(fs, &c, ino, h->server);
		free(h);
	}
	return;

out_reply:
	reply_error(req, ret);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	ret = release_server(req_fs(req), &c, ino, h->server);
	free(h);
	reply_error(req, ret);
}

/*
 * FUSE directory offsets: 0 starts, 1 follows ".", 2 follows ".." (the
 * service's cookie 0), and cookie + 2 follows the service entry with that
 * cookie. Cookies stay valid while the directory changes, so offsets do too.
 */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	Rdmafs__ReaddirReq r = RDMAFS__READDIR_REQ__INIT;
	struct fs *fs = req_fs(req);
	uint64_t cookie = off >= 2 ? (uint64_t)off - 2 : 0;
	size_t used = 0, need;
	bool eof = false, full = false;
	char *buf, name[NAME_MAX_LEN + 1];
	struct cred c;
	int ret = 0;

	if (off < 0) {
		reply_error(req, -EINVAL);
		return;
	}
	buf = calloc(1, size);
	if (!buf) {
		reply_error(req, -ENOMEM);
		return;
	}
	for (off_t dot = off; dot < 2 && !full; dot++) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = dot == 0 ? ino : FUSE_ROOT_ID;
		e.attr.st_mode = S_IFDIR;
		need = plus ? fuse_add_direntry_plus(req, buf + used, size - used,
						     dot == 0 ? "." : "..", &e, dot + 1)
			    : fuse_add_direntry(req, buf + used, size - used, dot == 0 ? "." : "..",
						&e.attr, dot + 1);
		if (need > size - used)
			full = true;
		else
			used += need;
	}
	cred_fill(req, &c);
	while (!full && !eof) {
		Rdmafs__ReaddirResp *resp;
		ProtobufCMessage *msg;

		r.ino = ino;
		r.cookie = cookie;
		r.max_entries = (uint32_t)(size / (plus ? 160 : 32) + 1);
		r.with_attrs = plus;
		r.cred = &c.pb;
		ret = meta_call(fs, RDMAFS__METHOD__METHOD_READDIR, &r.base,
				&rdmafs__readdir_resp__descriptor, true, &msg);
		if (ret)
			break;
		resp = (Rdmafs__ReaddirResp *)msg;
		eof = resp->eof;
		for (size_t i = 0; i < resp->n_entries && !full && !ret; i++) {
			const Rdmafs__DirEntry *d = resp->entries[i];
			struct fuse_entry_param e;

			if (d->cookie >= UINT64_MAX - 2 || d->cookie > INT64_MAX - 2 ||
			    d->ino == 0 || name_from_wire(&d->name, name)) {
				ret = -EPROTO;
				break;
			}
			memset(&e, 0, sizeof(e));
			if (plus) {
				struct node *n;

				ret = attr_to_stat(d->attr, &e.attr);
				if (ret)
					break;
				need = fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0);
				if (need > size - used) {
					full = true;
					break;
				}
				/* only an entry that made it into the reply counts a lookup */
				n = node_ref(fs, d->ino, 1, 0);
				if (n)
					node_update(n, d->attr, NULL, &e.attr, NULL);
				e.ino = d->ino;
				e.generation = d->attr->generation;
				e.attr_timeout = fs->attr_timeout;
				e.entry_timeout = fs->entry_timeout;
				fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
						       (off_t)d->cookie + 2);
			} else {
				e.attr.st_ino = d->ino;
				e.attr.st_mode = d->mode & S_IFMT;
				need = fuse_add_direntry(req, buf + used, size - used, name,
							 &e.attr, (off_t)d->cookie + 2);
				if (need > size - used) {
					full = true;
					break;
				}
			}
			used += need;
			cookie = d->cookie;
		}
		if (!eof && resp->n_entries == 0 && !full)
			ret = -EPROTO; /* no progress: do not spin */
		rfs_meta_free(msg);
	}
	if (ret && used == 0)
		reply_error(req, ret);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true);
}

static void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	/* every metadata change is one committed LMDB transaction already */
	fuse_reply_err(req, 0);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	Rdmafs__StatfsReq r = RDMAFS__STATFS_REQ__INIT;
	Rdmafs__StatfsResp *resp;
	ProtobufCMessage *msg;
	struct statvfs sv;
	int ret;

	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_STATFS, &r.base,
			&rdmafs__statfs_resp__descriptor, true, &msg);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	resp = (Rdmafs__StatfsResp *)msg;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = resp->bsize ? resp->bsize : 4096;
	sv.f_frsize = resp->frsize ? resp->frsize : sv.f_bsize;
	sv.f_blocks = resp->blocks;
	sv.f_bfree = resp->bfree;
	sv.f_bavail = resp->bavail;
	sv.f_files = resp->files;
	sv.f_ffree = resp->ffree;
	sv.f_favail = resp->ffree;
	sv.f_namemax = resp->namemax ? resp->namemax : NAME_MAX_LEN;
	rfs_meta_free(msg);
	fuse_reply_statfs(req, &sv);
}

static bool is_caps_name(const char *name)
{
	return strcmp(name, "security.capability") == 0;
}

static void forget_nocaps(struct fs *fs, fuse_ino_t ino)
{
	struct node *n = node_find(fs, ino);

	if (n) {
		pthread_mutex_lock(&n->lock);
		n->nocaps_until_ms = 0;
		pthread_mutex_unlock(&n->lock);
	}
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	Rdmafs__SetxattrReq r = RDMAFS__SETXATTR_REQ__INIT;
	ProtobufCMessage *msg;
	struct cred c;
	int ret;

	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		reply_error(req, -EINVAL);
		return;
	}
	cred_fill(req, &c);
	r.ino = ino;
	r.name = name_bytes(name);
	r.value.data = (uint8_t *)value;
	r.value.len = size;
	r.flags = (uint32_t)flags;
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_SETXATTR, &r.base,
			&rdmafs__empty__descriptor, true, &msg);
	if (!ret)
		rfs_meta_free(msg);
	if (is_caps_name(name))
		forget_nocaps(req_fs(req), ino);
	reply_error(req, ret);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	Rdmafs__GetxattrReq r = RDMAFS__GETXATTR_REQ__INIT;
	struct fs *fs = req_fs(req);
	Rdmafs__GetxattrResp *resp;
	struct node *n = node_find(fs, ino);
	ProtobufCMessage *msg;
	struct cred c;
	int ret;

	/* the kernel asks for security.capability before every write: remember "none" */
	if (n && is_caps_name(name)) {
		bool known_absent;

		pthread_mutex_lock(&n->lock);
		known_absent = rdmafs_now_ms() < n->nocaps_until_ms;
		pthread_mutex_unlock(&n->lock);
		if (known_absent) {
			reply_error(req, -ENODATA);
			return;
		}
	}
	cred_fill(req, &c);
	r.ino = ino;
	r.name = name_bytes(name);
	r.cred = &c.pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_GETXATTR, &r.base,
			&rdmafs__getxattr_resp__descriptor, true, &msg);
	if (ret) {
		if (ret == -ENODATA && n && is_caps_name(name)) {
			pthread_mutex_lock(&n->lock);
			n->nocaps_until_ms = rdmafs_now_ms() + (uint64_t)(fs->attr_timeout * 1000);
			pthread_mutex_unlock(&n->lock);
		}
		reply_error(req, ret);
		return;
	}
	resp = (Rdmafs__GetxattrResp *)msg;
	if (size == 0)
		fuse_reply_xattr(req, resp->value.len);
	else if (resp->value.len > size)
		reply_error(req, -ERANGE);
	else
		fuse_reply_buf(req, (const char *)resp->value.data, resp->value.len);
	rfs_meta_free(msg);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	Rdmafs__ListxattrReq r = RDMAFS__LISTXATTR_REQ__INIT;
	Rdmafs__ListxattrResp *resp;
	ProtobufCMessage *msg;
	size_t total = 0, pos = 0;
	char *list = NULL;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_LISTXATTR, &r.base,
			&rdmafs__listxattr_resp__descriptor, true, &msg);
	if (ret)
		goto out_reply;
	resp = (Rdmafs__ListxattrResp *)msg;
	for (size_t i = 0; i < resp->n_names && !ret; i++) {
		if (resp->names[i].len == 0 || resp->names[i].len > XATTR_NAME_MAX ||
		    memchr(resp->names[i].data, '\0', resp->names[i].len))
			ret = -EPROTO;
		total += resp->names[i].len + 1;
	}
	if (!ret && size == 0) {
		fuse_reply_xattr(req, total);
		rfs_meta_free(msg);
		return;
	}
	if (!ret && total > size)
		ret = -ERANGE;
	if (!ret) {
		list = malloc(total ? total : 1);
		if (!list)
			ret = -ENOMEM;
	}
	if (!ret) {
		for (size_t i = 0; i < resp->n_names; i++) {
			memcpy(list + pos, resp->names[i].data, resp->names[i].len);
			pos += resp->names[i].len;
			list[pos++] = '\0';
		}
		fuse_reply_buf(req, list, total);
	}
	free(list);
	rfs_meta_free(msg);
	if (!ret)
		return;
out_reply:
	reply_error(req, ret);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	Rdmafs__RemovexattrReq r = RDMAFS__REMOVEXATTR_REQ__INIT;
	ProtobufCMessage *msg;
	struct cred c;
	int ret;

	cred_fill(req, &c);
	r.ino = ino;
	r.name = name_bytes(name);
	r.cred = &c.pb;
	ret = meta_call(req_fs(req), RDMAFS__METHOD__METHOD_REMOVEXATTR, &r.base,
			&rdmafs__empty__descriptor, true, &msg);
	if (!ret)
		rfs_meta_free(msg);
	reply_error(req, ret);
}

/* access(2): the permission bits against the caller, as the service checks them. */
static void fs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat st;
	struct cred c;
	unsigned bits;
	int ret;

	cred_fill(req, &c);
	ret = do_getattr(req_fs(req), &c, ino, &st);
	if (ret || mask == F_OK)
		goto out_reply;
	if (ctx->uid == 0) {
		if ((mask & X_OK) && !S_ISDIR(st.st_mode) && !(st.st_mode & 0111))
			ret = -EACCES;
		goto out_reply;
	}
	if (ctx->uid == st.st_uid) {
		bits = (st.st_mode >> 6) & 7;
	} else {
		bool member = ctx->gid == st.st_gid;

		for (size_t i = 0; i < c.pb.n_groups && !member; i++)
			member = c.groups[i] == st.st_gid;
		bits = member ? (st.st_mode >> 3) & 7 : st.st_mode & 7;
	}
	if (((unsigned)mask & 7) & ~bits)
		ret = -EACCES;
out_reply:
	reply_error(req, ret);
}

/* Grows what we know of @n's size to @end and tells the service. */
static int node_extend(struct fs *fs, struct node *n, const struct cred *c, uint64_t end)
{
	pthread_mutex_lock(&n->lock);
	if (end > n->size) {
		n->size = end;
		n->size_dirty = true;
		n->size_seq++;
	}
	pthread_mutex_unlock(&n->lock);
	return node_sync(fs, n, c, false);
}

/* Sets @n's size to @size at the service (a shrink), through the open handle @h. */
static int node_shrink(struct fs *fs, struct node *n, const struct cred *c, const struct handle *h,
		       uint64_t size)
{
	Rdmafs__SetattrReq r = RDMAFS__SETATTR_REQ__INIT;
	ProtobufCMessage *msg;
	struct stat st;
	int ret;

	r.ino = n->ino;
	r.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
	r.size = size;
	r.handle = h->server;
	r.cred = (Rdmafs__Cred *)&c->pb;
	ret = meta_call(fs, RDMAFS__METHOD__METHOD_SETATTR, &r.base, &rdmafs__attr_resp__descriptor,
			true, &msg);
	if (ret)
		return ret;
	pthread_mutex_lock(&n->lock);
	n->size = size;
	n->size_dirty = false;
	n->size_seq++;
	pthread_mutex_unlock(&n->lock);
	ret = node_update(n, ((Rdmafs__AttrResp *)msg)->attr, NULL, &st, NULL);
	rfs_meta_free(msg);
	return ret;
}

/*
 * fallocate. Chunks are allocated when written, so reserving space (mode 0,
 * KEEP_SIZE) only moves the size. Punching and zeroing remove whole chunks
 * and write zeros into partial ones. COLLAPSE_RANGE and INSERT_RANGE shift the
 * file's tail through the striped I/O (rfs_collapse_range()), in blocks of
 * RFS_BLOCK_SIZE, our st_blksize; note that Linux's FUSE refuses both modes
 * itself (EOPNOTSUPP, fs/fuse/file.c) up to at least 6.18, so on a mount they
 * arrive only from a kernel that passes them on. Everything that changes
 * chunks ends with a commit of every daemon, which reports st_blocks.
 */
static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	struct rfs_layout layout;
	uint64_t size, end, first;
	struct cred c;
	int ret = 0;

	if (off < 0 || len <= 0 || (uint64_t)off > UINT64_MAX - (uint64_t)len) {
		reply_error(req, -EINVAL);
		return;
	}
	end = (uint64_t)off + (uint64_t)len;
	cred_fill(req, &c);
	ret = node_io_state(n, &layout, &size);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	if (end > RFS_MAX_FILE_SIZE && !(mode & FALLOC_FL_KEEP_SIZE)) {
		reply_error(req, -EFBIG);
		return;
	}
	first = (uint64_t)off / layout.chunk_size;
	switch (mode) {
	case 0:
		if (end > size)
			ret = node_extend(fs, n, &c, end);
		break;
	case FALLOC_FL_KEEP_SIZE:
		break;
	case FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE:
	case FALLOC_FL_ZERO_RANGE:
	case FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE:
		/* a hole reads as zeros: zeroing is punching, plus the size unless KEEP_SIZE */
		ret = rfs_punch_hole(fs->rfs, ino, &layout, size, (uint64_t)off, (uint64_t)len);
		pthread_mutex_lock(&n->lock);
		node_keep_layout_locked(n, &layout);
		n->mtime_dirty = true;
		pthread_mutex_unlock(&n->lock);
		if (!ret && !(mode & FALLOC_FL_KEEP_SIZE) && end > size)
			ret = node_extend(fs, n, &c, end);
		/* chunks went away on daemons we may never have written to: report them all */
		if (!ret)
			ret = node_chunks_changed(fs, n, &c, first, NULL);
		break;
	case FALLOC_FL_COLLAPSE_RANGE:
		ret = rfs_collapse_range(fs->rfs, ino, &layout, size, (uint64_t)off, (uint64_t)len);
		if (!ret)
			ret = node_shrink(fs, n, &c, h, size - (uint64_t)len);
		if (!ret)
			ret = rfs_truncate_data(fs->rfs, ino, &layout, size - (uint64_t)len);
		pthread_mutex_lock(&n->lock);
		node_keep_layout_locked(n, &layout);
		n->mtime_dirty = true;
		pthread_mutex_unlock(&n->lock);
		if (!ret)
			ret = node_chunks_changed(fs, n, &c, first, NULL);
		break;
	case FALLOC_FL_INSERT_RANGE:
		ret = rfs_insert_range(fs->rfs, ino, &layout, size, (uint64_t)off, (uint64_t)len);
		pthread_mutex_lock(&n->lock);
		node_keep_layout_locked(n, &layout);
		n->mtime_dirty = true;
		if (!ret && size + (uint64_t)len > n->size) {
			n->size = size + (uint64_t)len;
			n->size_dirty = true;
			n->size_seq++;
		}
		pthread_mutex_unlock(&n->lock);
		if (!ret)
			ret = node_chunks_changed(fs, n, &c, first, NULL);
		break;
	default:
		ret = -EOPNOTSUPP;
	}
	reply_error(req, ret);
}

static void fs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	struct rfs_layout layout;
	uint64_t size, pos;
	int ret;

	if (off < 0) {
		reply_error(req, -ENXIO);
		return;
	}
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		reply_error(req, -EINVAL);
		return;
	}
	ret = node_io_state(n, &layout, &size);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	ret = rfs_seek(fs->rfs, ino, &layout, size, (uint64_t)off, whence, &pos);
	pthread_mutex_lock(&n->lock);
	node_keep_layout_locked(n, &layout);
	pthread_mutex_unlock(&n->lock);
	if (ret)
		reply_error(req, ret);
	else
		fuse_reply_lseek(req, (off_t)pos);
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.readlink = fs_readlink,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.fsyncdir = fs_fsyncdir,
	.statfs = fs_statfs,
	.setxattr = fs_setxattr,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.removexattr = fs_removexattr,
	.access = fs_access,
	.create = fs_create,
	.fallocate = fs_fallocate,
	.lseek = fs_lseek,
};

/* ---- command line ------------------------------------------------------------------------ */

struct mount_opts {
	char *meta;
	char *secret;
	char *transport;
	char *timeout;
	unsigned readahead_kb;
	int server_permissions;
	double attr_timeout, entry_timeout;
	char *nonopt[2]; /* [SOURCE] MOUNTPOINT */
	int nonopt_count;
	int help;
};

enum { KEY_HELP, KEY_DISCARD };

#define MOPT(t, p)                                   \
	{                                            \
		t, offsetof(struct mount_opts, p), 1 \
	}
static const struct fuse_opt mount_spec[] = {
	MOPT("meta=%s", meta), MOPT("secret=%s", secret), MOPT("transport=%s", transport),
	MOPT("timeout=%s", timeout), MOPT("readahead=%u", readahead_kb),
	MOPT("server_permissions", server_permissions), MOPT("attr_timeout=%lf", attr_timeout),
	MOPT("entry_timeout=%lf", entry_timeout), FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	/* fstab options meant for mount(8) and systemd, not for the kernel */
	FUSE_OPT_KEY("_netdev", KEY_DISCARD), FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD), FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_DISCARD), FUSE_OPT_KEY("users", KEY_DISCARD),
	FUSE_OPT_KEY("nouser", KEY_DISCARD), FUSE_OPT_KEY("defaults", KEY_DISCARD), FUSE_OPT_END};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct mount_opts *mo = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (mo->nonopt_count >= 2) {
			fprintf(stderr, "rdmafs-fuse: too many arguments: %s\n", arg);
			return -1;
		}
		mo->nonopt[mo->nonopt_count] = strdup(arg);
		if (!mo->nonopt[mo->nonopt_count])
			return -1;
		mo->nonopt_count++;
		return 0;
	case KEY_HELP:
		mo->help = 1;
		return 1; /* libfuse prints its part too */
	case KEY_DISCARD:
		return 0;
	default:
		return 1;
	}
}

static void usage(const char *prog)
{
	printf("usage: %s [options] [SOURCE] MOUNTPOINT\n"
	       "\n"
	       "rdmafs options (-o):\n"
	       "    meta=URI               metadata service: tcp://host:port, rdma://host:port\n"
	       "                           (or give it as SOURCE)\n"
	       "    secret=FILE            cluster secret file [" DEFAULT_SECRET "]\n"
	       "    transport=auto|rdma|tcp  how to reach the storage daemons [auto]\n"
	       "    timeout=MS             per-RPC timeout [5000]\n"
	       "    readahead=KB           kernel read-ahead, set as root; 0: leave it [1024]\n"
	       "    attr_timeout=SEC       kernel attribute cache [1.0]\n"
	       "    entry_timeout=SEC      kernel name cache [1.0]\n"
	       "    server_permissions     no default_permissions: only the service checks\n"
	       "                           (names the kernel has cached are then not checked)\n"
	       "    ro                     read-only mount\n"
	       "\n",
	       prog);
}

/*
 * A SOURCE from mount(8) names the metadata service when it is a URI
 * ("tcp://h:p", "rdmafs#tcp://h:p"); anything else ("rdmafs") is a label.
 */
static const char *source_uri(const char *source)
{
	const char *hash = strchr(source, '#');

	if (hash)
		source = hash + 1;
	return strstr(source, "://") ? source : NULL;
}

static int parse_transport(const char *s, enum rfs_transport *out)
{
	if (!s || strcmp(s, "auto") == 0)
		*out = RFS_TRANSPORT_AUTO;
	else if (strcmp(s, "rdma") == 0)
		*out = RFS_TRANSPORT_RDMA;
	else if (strcmp(s, "tcp") == 0)
		*out = RFS_TRANSPORT_TCP;
	else
		return -EINVAL;
	return 0;
}

static int parse_ms(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!s)
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 100 || v > 600000)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct mount_opts mo = {.attr_timeout = 1.0, .entry_timeout = 1.0, .readahead_kb = 1024};
	struct fuse_cmdline_opts cmd = {0};
	struct fuse_loop_config *loop_cfg = NULL;
	struct rfs_options ro;
	struct fs *fs = NULL;
	struct rfs *probe;
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	const char *meta_uri = NULL;
	int ret = 1, err;

	rfs_options_init(&ro);
	if (fuse_opt_parse(&args, &mo, mount_spec, opt_proc) == -1)
		goto out_free_args;
	if (mo.help) {
		usage(argv[0]);
		fuse_cmdline_help();
		fuse_lowlevel_help();
		ret = 0;
		goto out_free_args;
	}
	/* the mount point goes back for fuse_parse_cmdline(); a first argument is the source */
	if (mo.nonopt_count == 2) {
		meta_uri = source_uri(mo.nonopt[0]);
		/* show the source in /proc/mounts and df, as other filesystems do */
		if (!strchr(mo.nonopt[0], ',') && strlen(mo.nonopt[0]) < 512) {
			char opt[600];

			snprintf(opt, sizeof(opt), "-ofsname=%s", mo.nonopt[0]);
			if (fuse_opt_add_arg(&args, opt) == -1)
				goto out_free_args;
		}
	}
	if (mo.nonopt_count >= 1 && fuse_opt_add_arg(&args, mo.nonopt[mo.nonopt_count - 1]) == -1)
		goto out_free_args;
	if (mo.meta)
		meta_uri = mo.meta;
	/*
	 * The service checks every request, but a path walk through names the
	 * kernel has cached asks nobody: without default_permissions a user could
	 * stat through a directory it may not search. The kernel checks with the
	 * cached attributes, the service again on every request it gets.
	 */
	if (!mo.server_permissions && fuse_opt_add_arg(&args, "-odefault_permissions") == -1)
		goto out_free_args;
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out_free_args;
	if (cmd.show_version) {
		printf("rdmafs-fuse %s, FUSE library %s\n", RDMAFS_VERSION, fuse_pkgversion());
		ret = 0;
		goto out_free_cmd;
	}
	if (!cmd.mountpoint || !meta_uri) {
		usage(argv[0]);
		fprintf(stderr, "rdmafs-fuse: %s\n",
			!cmd.mountpoint ? "no mount point" : "no metadata service: -o meta=URI");
		goto out_free_cmd;
	}
	if (parse_transport(mo.transport, &ro.transport) ||
	    parse_ms(mo.timeout, &ro.call_timeout_ms) || mo.attr_timeout < 0 ||
	    mo.entry_timeout < 0) {
		fprintf(stderr,
			"rdmafs-fuse: bad option value (transport, timeout or *_timeout)\n");
		goto out_free_cmd;
	}
	err = rdmafs_read_secret(mo.secret ? mo.secret : DEFAULT_SECRET, &secret, &secret_len);
	if (err) {
		fprintf(stderr, "rdmafs-fuse: cannot read the secret file %s: %s\n",
			mo.secret ? mo.secret : DEFAULT_SECRET,
			err == -EINVAL ? "must hold 1 to 4095 bytes" : strerror(-err));
		goto out_free_cmd;
	}
	ro.meta_uri = meta_uri;
	ro.secret = secret;
	ro.secret_len = secret_len;

	/* connect once before mounting, so a wrong address or secret fails here, not later */
	err = rfs_create(&ro, &probe);
	if (err) {
		fprintf(stderr, "rdmafs-fuse: cannot reach the cluster at %s: %s\n", meta_uri,
			strerror(-err));
		goto out_free_secret;
	}
	rfs_destroy(probe);

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		goto out_free_secret;
	fs->attr_timeout = mo.attr_timeout;
	fs->kernel_acl = !mo.server_permissions;
	fs->entry_timeout = mo.entry_timeout;
	fs->readahead_kb = mo.readahead_kb;
	pthread_mutex_init(&fs->table_lock, NULL);
	if (!node_ref(fs, FUSE_ROOT_ID, 1, 0))
		goto out_free_fs;

	fs->se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	if (!fs->se)
		goto out_free_fs;
	if (fuse_set_signal_handlers(fs->se) != 0)
		goto out_destroy_session;
	if (fuse_session_mount(fs->se, cmd.mountpoint) != 0)
		goto out_remove_handlers;
	find_bdi(fs, cmd.mountpoint);
	/* fork before the transport starts threads and registers memory */
	fuse_daemonize(cmd.foreground);
	err = rfs_create(&ro, &fs->rfs);
	if (err) {
		rdmafs_log(RDMAFS_LOG_WARN, "cannot reach the cluster at %s: %s", meta_uri,
			   strerror(-err));
		goto out_unmount;
	}
	if (cmd.singlethread) {
		ret = fuse_session_loop(fs->se);
	} else {
		loop_cfg = fuse_loop_cfg_create();
		if (!loop_cfg)
			goto out_destroy_rfs;
		fuse_loop_cfg_set_clone_fd(loop_cfg, cmd.clone_fd);
		if (cmd.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(loop_cfg, cmd.max_idle_threads);
		fuse_loop_cfg_set_max_threads(loop_cfg, cmd.max_threads);
		ret = fuse_session_loop_mt(fs->se, loop_cfg);
		fuse_loop_cfg_destroy(loop_cfg);
	}
	ret = ret ? 1 : 0;
out_destroy_rfs:
	rfs_destroy(fs->rfs);
out_unmount:
	fuse_session_unmount(fs->se);
out_remove_handlers:
	fuse_remove_signal_handlers(fs->se);
out_destroy_session:
	fuse_session_destroy(fs->se);
out_free_fs:
	for (unsigned b = 0; b < NODE_BUCKETS; b++) {
		while (fs->buckets[b]) {
			struct node *n = fs->buckets[b];

			fs->buckets[b] = n->next;
			pthread_mutex_destroy(&n->lock);
			free(n);
		}
	}
	pthread_mutex_destroy(&fs->table_lock);
	free(fs);
out_free_secret:
	if (secret)
		memset(secret, 0, secret_len);
	free(secret);
out_free_cmd:
	free(cmd.mountpoint);
out_free_args:
	for (int i = 0; i < mo.nonopt_count; i++)
		free(mo.nonopt[i]);
	free(mo.meta);
	free(mo.secret);
	free(mo.transport);
	free(mo.timeout);
	fuse_opt_free_args(&args);
	return ret;
}
