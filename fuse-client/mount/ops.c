// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs-fuse: the FUSE low-level operations (mount_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "rdmafs_common.h"
#include "mount_i.h"

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

/* ---- counting ---------------------------------------------------------------------------- */

/*
 * The request this thread handles, from its arrival to its reply. libfuse
 * hands a request to one thread, which runs its handler to the end, and
 * every handler here answers before it returns: so the thread knows its
 * request, and reply_error() can note when and how it was answered without
 * a word from the handler.
 */
struct op_clock {
	struct mount_stats *stats;
	enum mount_op op;
	uint64_t start_ns, replied_ns;
	int err; /* the positive errno answered, 0 for success */
};

static __thread struct op_clock *op_current;

/*
 * The requests that wait for the background unlinks before they run
 * (async_dirops, mount_i.h): every one that could see a pending call's
 * directory or inode. LOOKUP waits for its name (and for all when what it
 * finds may show one), GETATTR when it asks the service (fs_lookup(),
 * fs_getattr()); UNLINK queues; FORGET, STATFS
 * and the data path (whose calls an unlinked file's open handle keeps
 * good) wait for nothing.
 */
static const bool op_waits[MOUNT_OPS] = {
	[MOUNT_OP_SETATTR] = true,     [MOUNT_OP_READLINK] = true,  [MOUNT_OP_MKNOD] = true,
	[MOUNT_OP_MKDIR] = true,       [MOUNT_OP_RMDIR] = true,	    [MOUNT_OP_SYMLINK] = true,
	[MOUNT_OP_RENAME] = true,      [MOUNT_OP_LINK] = true,	    [MOUNT_OP_OPEN] = true,
	[MOUNT_OP_FSYNC] = true,       [MOUNT_OP_OPENDIR] = true,   [MOUNT_OP_READDIR] = true,
	[MOUNT_OP_READDIRPLUS] = true, [MOUNT_OP_FSYNCDIR] = true,  [MOUNT_OP_SETXATTR] = true,
	[MOUNT_OP_GETXATTR] = true,    [MOUNT_OP_LISTXATTR] = true, [MOUNT_OP_REMOVEXATTR] = true,
	[MOUNT_OP_ACCESS] = true,      [MOUNT_OP_CREATE] = true,
};

static void op_begin(struct op_clock *clk, fuse_req_t req, enum mount_op op)
{
	struct fs *fs = req_fs(req);

	clk->stats = &fs->stats;
	clk->op = op;
	clk->start_ns = rdmafs_now_ns();
	clk->replied_ns = 0;
	clk->err = 0;
	mount_count(&clk->stats->in_flight, 1);
	op_current = clk;
	if (op_waits[op])
		bg_drain(fs);
}

/*
 * Notes that this thread's request was answered with @err, for a handler
 * that works on after its reply (a size update after a write, freeing data
 * after an unlink): that work is not the caller's wait.
 */
static void op_replied(int err)
{
	struct op_clock *clk = op_current;

	if (clk && !clk->replied_ns) {
		clk->replied_ns = rdmafs_now_ns();
		clk->err = err;
	}
}

static void op_end(struct op_clock *clk)
{
	uint64_t end_ns = clk->replied_ns ? clk->replied_ns : rdmafs_now_ns();

	op_current = NULL;
	mount_stats_record(clk->stats, clk->op, end_ns - clk->start_ns, clk->err);
	__atomic_sub_fetch(&clk->stats->in_flight, 1, __ATOMIC_RELAXED);
}

/* Every error reply goes through here (success replies are counted at the handler's end). */
static void reply_error(fuse_req_t req, int ret)
{
	int err = ret ? fs_errno(ret) : 0;

	op_replied(err);
	fuse_reply_err(req, err);
}

static void cred_fill(fuse_req_t req, struct rfs_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[RFS_GROUPS_MAX];
	int n = 0;

	c->uid = ctx->uid;
	c->gid = ctx->gid;
	/* root passes every check the groups could matter for: skip reading /proc */
	if (ctx->uid != 0) {
		n = fuse_req_getgroups(req, RFS_GROUPS_MAX, groups);
		if (n < 0)
			n = 0;
		if (n > RFS_GROUPS_MAX)
			n = RFS_GROUPS_MAX;
	}
	for (int i = 0; i < n; i++)
		c->groups[i] = groups[i];
	c->n_groups = (uint32_t)n;
}

/*
 * Directory attributes after this mount's own changes. The kernel drops a
 * directory's cached attributes at every change of its entries and asks for
 * them again (GETATTR) at the next permission check in it: a second round
 * trip per create or unlink. The service sends the directory as the change
 * left it; the mount answers that GETATTR with it for an attribute timeout,
 * as the kernel would have answered from its own cache (another client's
 * change shows after the timeout, as it does there). A change of a
 * directory's attributes that leaves no copy drops it before and after its
 * call: a setattr or an xattr of the directory its own (dir_gen); an rmdir
 * or a rename, which may move or remove a directory holding a copy, every
 * copy (fs.dir_epoch). A copy from a call begun before such a change is not
 * kept, nor one older (by ctime) than a copy kept, which then goes too, and
 * a LOOKUP or READDIRPLUS that brings the kernel the directory drops it.
 */
static struct dir_mark dir_watch(struct fs *fs, fuse_ino_t dir)
{
	struct node *n = node_find(fs, dir);
	struct dir_mark m = {.epoch = __atomic_load_n(&fs->dir_epoch, __ATOMIC_ACQUIRE)};

	if (n) {
		pthread_mutex_lock(&n->lock);
		m.gen = n->dir_gen;
		pthread_mutex_unlock(&n->lock);
	}
	return m;
}

/* Keeps @after, from a call begun at dir_watch()'s @m, unless a later copy is kept. */
static void dir_after(struct fs *fs, fuse_ino_t dir, struct dir_mark m,
		      const struct rfs_dir_after *after)
{
	uint64_t now = rdmafs_now_ms();
	struct node *n;
	bool older;

	if (!after->valid || (uint64_t)after->attr.st_ino != dir || !(n = node_find(fs, dir)))
		return;
	pthread_mutex_lock(&n->lock);
	older = n->dir_attr.st_ctim.tv_sec > after->attr.st_ctim.tv_sec ||
		(n->dir_attr.st_ctim.tv_sec == after->attr.st_ctim.tv_sec &&
		 n->dir_attr.st_ctim.tv_nsec > after->attr.st_ctim.tv_nsec);
	if (n->dir_gen != m.gen || __atomic_load_n(&fs->dir_epoch, __ATOMIC_ACQUIRE) != m.epoch) {
		/* a change that leaves no copy came meanwhile */
	} else if (n->dir_until_ms > now && n->dir_epoch == m.epoch && older && n->dir_touched) {
		/*
		 * Newer by dir_touch(): unlinks answered after this one's, not yet
		 * done. The service's copy, with their times, which are later.
		 */
		struct timespec mtime = n->dir_attr.st_mtim, ctime = n->dir_attr.st_ctim;

		n->dir_attr = after->attr;
		n->dir_attr.st_mtim = mtime;
		n->dir_attr.st_ctim = ctime;
		n->dir_until_ms = now + (uint64_t)(fs->attr_timeout * 1000);
	} else if (n->dir_until_ms > now && n->dir_epoch == m.epoch && older) {
		n->dir_until_ms = 0; /* which of the two is newer is not sure: neither */
	} else {
		n->dir_attr = after->attr;
		n->dir_epoch = m.epoch;
		n->dir_until_ms = now + (uint64_t)(fs->attr_timeout * 1000);
		n->dir_touched = false;
	}
	pthread_mutex_unlock(&n->lock);
}

/* Drops @ino's copy: its attributes change by a call that sends none back. */
static void dir_forget(struct fs *fs, fuse_ino_t ino)
{
	struct node *n = node_find(fs, ino);

	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->dir_gen++;
	n->dir_until_ms = 0;
	pthread_mutex_unlock(&n->lock);
}

/* Drops every directory's copy: an rmdir or a rename, before and after its call. */
static void dir_forget_all(struct fs *fs)
{
	__atomic_add_fetch(&fs->dir_epoch, 1, __ATOMIC_ACQ_REL);
}

/* @ino's copy while it is good, and the seconds it stays so; false: none. */
static bool dir_cached(struct fs *fs, fuse_ino_t ino, struct stat *st, double *timeout)
{
	struct node *n = node_find(fs, ino);
	uint64_t now = rdmafs_now_ms();
	bool hit = false;

	if (!n)
		return false;
	pthread_mutex_lock(&n->lock);
	if (n->dir_until_ms > now &&
	    n->dir_epoch == __atomic_load_n(&fs->dir_epoch, __ATOMIC_ACQUIRE)) {
		*st = n->dir_attr;
		*timeout = (double)(n->dir_until_ms - now) / 1000;
		hit = true;
	}
	pthread_mutex_unlock(&n->lock);
	return hit;
}

/* Replies to a call that returned an entry, counting the kernel's new lookup. */
static void reply_entry(fuse_req_t req, struct fs *fs, int ret, const struct rfs_entry *entry)
{
	struct fuse_entry_param e;
	struct node *n;

	if (ret)
		goto out_error;
	memset(&e, 0, sizeof(e));
	n = node_ref(fs, (uint64_t)entry->attr.st_ino, 1, 0);
	if (!n) {
		ret = -ENOMEM;
		goto out_error;
	}
	rfs_file_merge(n->file, entry, &e.attr, NULL, RFS_SEQ_NOW);
	if (S_ISDIR(entry->attr.st_mode)) /* the kernel gets its attributes: fresher */
		dir_forget(fs, (fuse_ino_t)entry->attr.st_ino);
	e.ino = entry->attr.st_ino;
	e.generation = entry->generation;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	if (fuse_reply_entry(req, &e))
		node_unref(fs, n, 1, 0);
	return;

out_error:
	reply_error(req, ret);
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
	/*
	 * The size must come from the service, never from a cached write-back
	 * page. Tried (issue 10): with the kernel's write-back cache, fs-posix,
	 * fs-twomounts, fs-sparse and fs-permissions fail: SEEK_DATA, st_blocks
	 * and a file grown by another mount are wrong while pages are dirty, and
	 * a non-owner's close fails with EPERM (the kernel sets the mtime then).
	 * The client's own write-behind (rfs_options.write_behind) gives the
	 * pipelining without that.
	 */
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
	struct fs *fs = req_fs(req);
	struct rfs_entry e;
	struct rfs_cred c;
	int ret;

	readahead_tune(fs);
	bg_wait_name(fs, parent, name);
	cred_fill(req, &c);
	ret = rfs_lookup(fs->rfs, &c, parent, name, &e);
	/*
	 * A directory (its times, its nlink) or a file of several links (the
	 * count) may show a pending unlink elsewhere: asked again after them.
	 */
	if (!ret && bg_busy(fs) && (S_ISDIR(e.attr.st_mode) || e.attr.st_nlink > 1)) {
		bg_drain(fs);
		ret = rfs_lookup(fs->rfs, &c, parent, name, &e);
	}
	if (ret == -ENOENT && fs->negative_timeout > 0) {
		/*
		 * A negative entry: the kernel answers ENOENT itself until the
		 * timeout, or until it creates the name through this mount. For
		 * the counters it is the ENOENT it stands for.
		 */
		struct fuse_entry_param neg = {.ino = 0, .entry_timeout = fs->negative_timeout};

		op_replied(ENOENT);
		fuse_reply_entry(req, &neg);
		return;
	}
	reply_entry(req, fs, ret, &e);
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
static int do_getattr(struct fs *fs, const struct rfs_cred *c, uint64_t ino, struct stat *st)
{
	struct node *n = node_find(fs, ino);

	return rfs_file_getattr(fs->rfs, n ? n->file : NULL, c, ino, st);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct stat st;
	double timeout = fs->attr_timeout;
	struct rfs_cred c;
	int ret;

	readahead_tune(fs);
	if (dir_cached(fs, ino, &st, &timeout)) {
		mount_count(&fs->stats.dir_attr_hits, 1);
		fuse_reply_attr(req, &st, timeout);
		return;
	}
	bg_drain(fs);
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
	struct fs *fs = req_fs(req);
	struct node *n = node_find(fs, ino);
	struct rfs_setattr set = {.valid = (uint32_t)to_set & SETATTR_SENT};
	struct stat st;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	set.mode = attr->st_mode & 07777;
	set.uid = attr->st_uid;
	set.gid = attr->st_gid;
	set.atime = attr->st_atim;
	set.mtime = attr->st_mtim;
	set.ctime = attr->st_ctim;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0) {
			reply_error(req, -EINVAL);
			return;
		}
		set.size = (uint64_t)attr->st_size;
		/* ftruncate: open(2) checked the permission, the service checks the handle */
		if (fi && fi->fh)
			set.handle = ((struct handle *)(uintptr_t)fi->fh)->server;
	}
	dir_forget(fs, ino);
	ret = rfs_file_setattr(fs->rfs, n ? n->file : NULL, &c, ino, &set, &st);
	dir_forget(fs, ino);
	if (ret)
		reply_error(req, ret);
	else
		fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[PATH_MAX];
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	ret = rfs_readlink(req_fs(req)->rfs, &c, ino, target, sizeof(target));
	if (ret)
		reply_error(req, ret);
	else
		fuse_reply_readlink(req, target);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs *fs = req_fs(req);
	struct dir_mark gen = dir_watch(fs, parent);
	struct rfs_entry e;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	ret = rfs_mknod(fs->rfs, &c, parent, name, mode, ctx->uid, ctx->gid, rdev, &e);
	if (!ret)
		dir_after(fs, parent, gen, &e.parent);
	reply_entry(req, fs, ret, &e);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs *fs = req_fs(req);
	struct dir_mark gen = dir_watch(fs, parent);
	struct rfs_entry e;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	ret = rfs_mkdir(fs->rfs, &c, parent, name, mode, ctx->uid, ctx->gid, &e);
	if (!ret)
		dir_after(fs, parent, gen, &e.parent);
	reply_entry(req, fs, ret, &e);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs *fs = req_fs(req);
	struct dir_mark gen = dir_watch(fs, parent);
	struct rfs_entry e;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	ret = rfs_symlink(fs->rfs, &c, parent, name, link, ctx->uid, ctx->gid, &e);
	if (!ret)
		dir_after(fs, parent, gen, &e.parent);
	reply_entry(req, fs, ret, &e);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs *fs = req_fs(req);
	struct dir_mark gen = dir_watch(fs, newparent);
	struct rfs_entry e;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	ret = rfs_link(fs->rfs, &c, ino, newparent, newname, &e);
	if (!ret)
		dir_after(fs, newparent, gen, &e.parent);
	reply_entry(req, fs, ret, &e);
}

/*
 * Advances the mtime and ctime of @dir's copy, if it has one, to now (or
 * past its own, by this clock or the service's): an unlink answered before
 * the service made it. The service's copy, once it answers, replaces it,
 * keeping these times while they are later and unlinks in @dir are still on
 * their way (dir_after()), the service's once none is.
 */
static void dir_touch(struct fs *fs, fuse_ino_t dir)
{
	struct node *n = node_find(fs, dir);
	struct timespec now, *t;

	if (!n)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&n->lock);
	t = &n->dir_attr.st_ctim;
	if (now.tv_sec < t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec <= t->tv_nsec)) {
		now = *t;
		if (++now.tv_nsec == 1000000000) {
			now.tv_sec++;
			now.tv_nsec = 0;
		}
	}
	n->dir_attr.st_mtim = now;
	n->dir_attr.st_ctim = now;
	n->dir_touched = true;
	pthread_mutex_unlock(&n->lock);
}

/* The service's copy of @dir wins again (dir_touch()). */
static void dir_untouch(struct fs *fs, fuse_ino_t dir)
{
	struct node *n = node_find(fs, dir);

	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->dir_touched = false;
	pthread_mutex_unlock(&n->lock);
}

/* async_dirops: the background UNLINK of @call (bg_run_fn), and what fs_unlink() does after */
static void unlink_run(struct fs *fs, struct bg_call *call)
{
	struct rfs_dir_after after;

	call->err =
		rfs_unlink(fs->rfs, &call->cred, call->parent, call->name, &call->freed, &after);
	if (call->err) {
		rdmafs_log(call->err == -ENOENT ? RDMAFS_LOG_INFO : RDMAFS_LOG_WARN,
			   "background unlink of '%s' in directory %" PRIu64 ": %s%s", call->name,
			   call->parent, strerror(-call->err),
			   call->err == -ENOENT ? " (removed by another mount first)"
						: "; the next fsync of the directory returns it");
		dir_forget(fs, call->parent); /* dir_touch() advanced it for nothing */
		return;
	}
	/* the last one in flight there: the service's times are the ones to keep */
	if (!bg_pending_in(fs, call->parent, call))
		dir_untouch(fs, call->parent);
	dir_after(fs, call->parent, call->mark, &after);
}

int ops_bg_start(struct fs *fs)
{
	return bg_start(fs, unlink_run);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	struct dir_mark gen = dir_watch(fs, parent);
	struct rfs_dir_after after;
	struct rfs_freed freed;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	if (fs->bg) {
		/* before the call is queued: its answer may come at once (dir_after()) */
		dir_touch(fs, parent);
		ret = bg_unlink(fs, parent, name, &c, gen);
		if (ret)
			dir_forget(fs, parent);
		reply_error(req, ret);
		return;
	}
	ret = rfs_unlink(fs->rfs, &c, parent, name, &freed, &after);
	if (!ret)
		dir_after(fs, parent, gen, &after);
	reply_error(req, ret);
	/* inode numbers are never reused, so the chunks may go after the reply */
	if (!ret)
		rfs_free_data(fs->rfs, &freed);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	dir_forget_all(fs);
	ret = rfs_rmdir(fs->rfs, &c, parent, name);
	dir_forget_all(fs);
	reply_error(req, ret);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fs *fs = req_fs(req);
	struct rfs_freed freed;
	struct rfs_cred c;
	int ret;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		reply_error(req, -EINVAL);
		return;
	}
	cred_fill(req, &c);
	/* RENAME_NOREPLACE and RENAME_EXCHANGE are RFS_RENAME_NOREPLACE and _EXCHANGE */
	dir_forget_all(fs);
	ret = rfs_rename(fs->rfs, &c, parent, name, newparent, newname, flags, &freed);
	dir_forget_all(fs);
	reply_error(req, ret);
	if (!ret)
		rfs_free_data(fs->rfs, &freed);
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
static int release_server(struct fs *fs, const struct rfs_cred *c, uint64_t ino, uint64_t handle)
{
	return rfs_release(fs->rfs, c, ino, handle, NULL);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	uint64_t server;
	struct rfs_entry e;
	struct handle *h;
	struct node *n;
	bool changed = false;
	struct stat st;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	ret = rfs_open(fs->rfs, &c, ino, fi->flags, &server, &e);
	if (ret)
		goto out_reply;
	n = node_ref(fs, ino, 0, 1);
	if (!n) {
		ret = -ENOMEM;
		goto err_release;
	}
	rfs_file_merge(n->file, &e, &st, &changed, RFS_SEQ_NOW);
	h = handle_new(fs, n, server, fi->flags);
	if (!h) {
		ret = -ENOMEM;
		goto err_unref;
	}
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
	release_server(fs, &c, ino, server);
out_reply:
	reply_error(req, ret);
}

/*
 * The kernel asks for security.capability before every write (to clear it):
 * remember for an attribute timeout that @n has none, as a GETXATTR found or
 * as a file this mount just created has.
 */
static void nocaps_known(struct fs *fs, struct node *n)
{
	pthread_mutex_lock(&n->lock);
	n->nocaps_until_ms = rdmafs_now_ms() + (uint64_t)(fs->attr_timeout * 1000);
	pthread_mutex_unlock(&n->lock);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs *fs = req_fs(req);
	struct fuse_entry_param e;
	struct rfs_entry entry;
	struct dir_mark gen;
	uint64_t server, ino;
	struct handle *h;
	struct node *n;
	struct rfs_cred c;
	bool created;
	int ret;

	gen = dir_watch(fs, parent);
	cred_fill(req, &c);
	ret = rfs_create_file(fs->rfs, &c, parent, name, mode, ctx->uid, ctx->gid, fi->flags,
			      &server, &created, &entry);
	if (ret)
		goto out_reply;
	dir_after(fs, parent, gen, &entry.parent);
	ino = (uint64_t)entry.attr.st_ino;
	memset(&e, 0, sizeof(e));
	n = node_ref(fs, ino, 1, 1);
	if (!n) {
		ret = -ENOMEM;
		goto err_release;
	}
	if (created)
		rfs_file_made(n->file);
	rfs_file_merge(n->file, &entry, &e.attr, NULL, RFS_SEQ_NOW);
	if (created)
		nocaps_known(fs, n);
	h = handle_new(fs, n, server, fi->flags);
	if (!h) {
		ret = -ENOMEM;
		goto err_unref;
	}
	e.ino = ino;
	e.generation = entry.generation;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
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
	release_server(fs, &c, ino, server);
out_reply:
	reply_error(req, ret);
}

/*
 * A FUSE thread's buffer for the bytes of its reads, kept from one read to
 * the next and grown to the largest (at most the kernel's max_read): no
 * allocation per read. Freed when the thread ends (libfuse starts and stops
 * its threads as the load asks).
 */
struct read_buf {
	char *data;
	size_t cap;
};

static pthread_key_t read_buf_key;
static pthread_once_t read_buf_once = PTHREAD_ONCE_INIT;

static void read_buf_free(void *arg)
{
	struct read_buf *b = arg;

	free(b->data);
	free(b);
}

static void read_buf_key_make(void)
{
	if (pthread_key_create(&read_buf_key, read_buf_free))
		abort(); /* only when the process is out of keys: nothing to read with */
}

/* This thread's buffer of at least @size bytes, or NULL (-ENOMEM). */
static char *read_buf_get(size_t size)
{
	struct read_buf *b;

	pthread_once(&read_buf_once, read_buf_key_make);
	b = pthread_getspecific(read_buf_key);
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b || pthread_setspecific(read_buf_key, b)) {
			free(b);
			return NULL;
		}
	}
	if (b->cap < size || !b->data) {
		char *grown = realloc(b->data, size ? size : 1);

		if (!grown)
			return NULL;
		b->data = grown;
		b->cap = size ? size : 1;
	}
	return b->data;
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	size_t got;
	char *buf;
	int ret;

	if (off < 0) {
		reply_error(req, -EINVAL);
		return;
	}
	buf = read_buf_get(size);
	if (!buf) {
		reply_error(req, -ENOMEM);
		return;
	}
	ret = rfs_file_read(h->node->file, (uint64_t)off, size, buf, &got);
	if (ret) {
		reply_error(req, ret);
	} else {
		mount_count(&req_fs(req)->stats.read_bytes, got);
		fuse_reply_buf(req, buf, got);
	}
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct rfs_file *f = h->node->file;
	bool size_due = false;
	struct rfs_cred c;
	int ret;

	if (off < 0) {
		reply_error(req, -EFBIG);
		return;
	}
	ret = rfs_file_write(f, (uint64_t)off, size, buf, (h->flags & (O_SYNC | O_DSYNC)) != 0,
			     &size_due);
	if (ret) {
		reply_error(req, ret);
		return;
	}
	/* req is gone once replied to: take the caller's credentials first */
	if (size_due)
		cred_fill(req, &c);
	mount_count(&req_fs(req)->stats.write_bytes, size);
	fuse_reply_write(req, size);
	op_replied(0);
	if (size_due)
		rfs_file_sync(f, &c, RFS_SYNC_SIZE);
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct rfs_cred c;

	cred_fill(req, &c);
	reply_error(req, rfs_file_sync(h->node->file, &c, RFS_SYNC_CLOSE));
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct rfs_cred c;

	cred_fill(req, &c);
	reply_error(req, rfs_file_fsync(h->node->file, &c));
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	/* normally flush did it; writes through a still-mapped file may remain */
	ret = rfs_file_sync(h->node->file, &c, RFS_SYNC_CLOSE);
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
	struct fs *fs = req_fs(req);
	uint64_t server;
	struct rfs_entry e;
	struct handle *h;
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	/* an OPEN checks read permission now, as opendir(3) expects */
	ret = rfs_open(fs->rfs, &c, ino, O_RDONLY | O_DIRECTORY, &server, &e);
	if (ret)
		goto out_reply;
	h = handle_new(fs, NULL, server, fi->flags);
	if (!h) {
		release_server(fs, &c, ino, server);
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
	struct rfs_cred c;
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
/* What do_readdir() fills: one reply buffer of the kernel's size. */
struct dir_fill {
	fuse_req_t req;
	struct fs *fs;
	bool plus;
	char *buf;
	size_t size, used;
	bool full;
	uint64_t cookie; /* of the last entry taken */
};

static int dir_fill_one(void *arg, const struct rfs_dirent *d)
{
	struct dir_fill *f = arg;
	struct fuse_entry_param e;
	size_t need;

	memset(&e, 0, sizeof(e));
	if (f->plus) {
		struct node *n;
		struct rfs_entry entry = {.attr = d->attr, .generation = d->generation};

		need = fuse_add_direntry_plus(f->req, NULL, 0, d->name, NULL, 0);
		if (need > f->size - f->used) {
			f->full = true;
			return 1;
		}
		e.attr = d->attr;
		/* only an entry that made it into the reply counts a lookup */
		n = node_ref(f->fs, d->ino, 1, 0);
		if (n)
			rfs_file_merge(n->file, &entry, &e.attr, NULL, RFS_SEQ_NOW);
		if (n && S_ISDIR(d->attr.st_mode)) /* as for a LOOKUP: the kernel's are fresher */
			dir_forget(f->fs, d->ino);
		e.ino = d->ino;
		e.generation = d->generation;
		e.attr_timeout = f->fs->attr_timeout;
		e.entry_timeout = f->fs->entry_timeout;
		fuse_add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, d->name, &e,
				       (off_t)d->cookie + 2);
	} else {
		e.attr.st_ino = d->ino;
		e.attr.st_mode = d->type;
		need = fuse_add_direntry(f->req, f->buf + f->used, f->size - f->used, d->name,
					 &e.attr, (off_t)d->cookie + 2);
		if (need > f->size - f->used) {
			f->full = true;
			return 1;
		}
	}
	f->used += need;
	f->cookie = d->cookie;
	return 0;
}

/*
 * FUSE directory offsets: 0 starts, 1 follows ".", 2 follows ".." (the
 * service's cookie 0), and cookie + 2 follows the service entry with that
 * cookie. Cookies stay valid while the directory changes, so offsets do too.
 */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct dir_fill f = {.req = req, .fs = req_fs(req), .plus = plus, .size = size};
	bool eof = false;
	struct rfs_cred c;
	int ret = 0;

	if (off < 0) {
		reply_error(req, -EINVAL);
		return;
	}
	f.cookie = off >= 2 ? (uint64_t)off - 2 : 0;
	f.buf = calloc(1, size);
	if (!f.buf) {
		reply_error(req, -ENOMEM);
		return;
	}
	for (off_t dot = off; dot < 2 && !f.full; dot++) {
		struct fuse_entry_param e;
		size_t need;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = dot == 0 ? ino : FUSE_ROOT_ID;
		e.attr.st_mode = S_IFDIR;
		need = plus ? fuse_add_direntry_plus(req, f.buf + f.used, size - f.used,
						     dot == 0 ? "." : "..", &e, dot + 1)
			    : fuse_add_direntry(req, f.buf + f.used, size - f.used,
						dot == 0 ? "." : "..", &e.attr, dot + 1);
		if (need > size - f.used)
			f.full = true;
		else
			f.used += need;
	}
	cred_fill(req, &c);
	while (!f.full && !eof && !ret)
		ret = rfs_readdir(f.fs->rfs, &c, ino, f.cookie,
				  (uint32_t)(size / (plus ? 160 : 32) + 1), plus, dir_fill_one, &f,
				  &eof);
	if (ret && f.used == 0)
		reply_error(req, ret);
	else
		fuse_reply_buf(req, f.buf, f.used);
	free(f.buf);
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
	struct fs *fs = req_fs(req);
	/* a background unlink's failure (op_begin() waited for them) */
	int ret = bg_take_error(fs, ino);

	/* the entries are committed already; on disk, with metadata_sync = batch, after this */
	reply_error(req, ret ? ret : rfs_meta_sync(fs->rfs));
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int ret;

	ret = rfs_statfs(req_fs(req)->rfs, &sv);
	if (ret)
		reply_error(req, ret);
	else
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
	struct rfs_cred c;
	int ret;

	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		reply_error(req, -EINVAL);
		return;
	}
	cred_fill(req, &c);
	/* a directory's ACL is its mode too */
	dir_forget(req_fs(req), ino);
	/* XATTR_CREATE and XATTR_REPLACE are RFS_XATTR_CREATE and _REPLACE */
	ret = rfs_setxattr(req_fs(req)->rfs, &c, ino, name, value, size, flags);
	dir_forget(req_fs(req), ino);
	if (is_caps_name(name))
		forget_nocaps(req_fs(req), ino);
	reply_error(req, ret);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fs *fs = req_fs(req);
	struct node *n = node_find(fs, ino);
	char *value = NULL;
	struct rfs_cred c;
	ssize_t ret;

	if (n && is_caps_name(name)) { /* nocaps_known() */
		bool known_absent;

		pthread_mutex_lock(&n->lock);
		known_absent = rdmafs_now_ms() < n->nocaps_until_ms;
		pthread_mutex_unlock(&n->lock);
		if (known_absent) {
			reply_error(req, -ENODATA);
			return;
		}
	}
	if (size) {
		value = malloc(size);
		if (!value) {
			reply_error(req, -ENOMEM);
			return;
		}
	}
	cred_fill(req, &c);
	ret = rfs_getxattr(fs->rfs, &c, ino, name, value, size);
	if (ret == -ENODATA && n && is_caps_name(name))
		nocaps_known(fs, n);
	if (ret < 0)
		reply_error(req, (int)ret);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)ret);
	else
		fuse_reply_buf(req, value, (size_t)ret);
	free(value);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *list = NULL;
	struct rfs_cred c;
	ssize_t ret;

	if (size) {
		list = malloc(size);
		if (!list) {
			reply_error(req, -ENOMEM);
			return;
		}
	}
	cred_fill(req, &c);
	ret = rfs_listxattr(req_fs(req)->rfs, &c, ino, list, size);
	if (ret < 0)
		reply_error(req, (int)ret);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)ret);
	else
		fuse_reply_buf(req, list, (size_t)ret);
	free(list);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = req_fs(req);
	struct rfs_cred c;
	int ret;

	cred_fill(req, &c);
	dir_forget(fs, ino);
	ret = rfs_removexattr(fs->rfs, &c, ino, name);
	dir_forget(fs, ino);
	reply_error(req, ret);
}

/* access(2): the permission bits against the caller, as the service checks them. */
static void fs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat st;
	struct rfs_cred c;
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

		for (uint32_t i = 0; i < c.n_groups && !member; i++)
			member = c.groups[i] == st.st_gid;
		bits = member ? (st.st_mode >> 3) & 7 : st.st_mode & 7;
	}
	if (((unsigned)mask & 7) & ~bits)
		ret = -EACCES;
out_reply:
	reply_error(req, ret);
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
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct rfs_cred c;

	if (off < 0 || len <= 0) {
		reply_error(req, -EINVAL);
		return;
	}
	cred_fill(req, &c);
	reply_error(req, rfs_file_fallocate(h->node->file, &c, h->server, mode, (uint64_t)off,
					    (uint64_t)len));
}

static void fs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	uint64_t pos;
	int ret;

	if (off < 0) {
		reply_error(req, -ENXIO);
		return;
	}
	ret = rfs_file_seek(h->node->file, (uint64_t)off, whence, &pos);
	if (ret)
		reply_error(req, ret);
	else
		fuse_reply_lseek(req, (off_t)pos);
}

/* ---- the operations, counted ---------------------------------------------------------- */

/*
 * timed_NAME() is what libfuse calls for operation NAME: fs_NAME() between
 * op_begin() and op_end(), which count the request in fs.stats. @params is
 * the handler's parameter list, @args its arguments.
 */
#define TIMED(name, op, params, args)    \
	static void timed_##name params  \
	{                                \
		struct op_clock clk;     \
                                         \
		op_begin(&clk, req, op); \
		fs_##name args;          \
		op_end(&clk);            \
	}

TIMED(lookup, MOUNT_OP_LOOKUP, (fuse_req_t req, fuse_ino_t parent, const char *name),
      (req, parent, name))
TIMED(forget, MOUNT_OP_FORGET, (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup),
      (req, ino, nlookup))
TIMED(forget_multi, MOUNT_OP_FORGET_MULTI,
      (fuse_req_t req, size_t count, struct fuse_forget_data *forgets), (req, count, forgets))
TIMED(getattr, MOUNT_OP_GETATTR, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      (req, ino, fi))
TIMED(setattr, MOUNT_OP_SETATTR,
      (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi),
      (req, ino, attr, to_set, fi))
TIMED(readlink, MOUNT_OP_READLINK, (fuse_req_t req, fuse_ino_t ino), (req, ino))
TIMED(mknod, MOUNT_OP_MKNOD,
      (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev),
      (req, parent, name, mode, rdev))
TIMED(mkdir, MOUNT_OP_MKDIR, (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode),
      (req, parent, name, mode))
TIMED(unlink, MOUNT_OP_UNLINK, (fuse_req_t req, fuse_ino_t parent, const char *name),
      (req, parent, name))
TIMED(rmdir, MOUNT_OP_RMDIR, (fuse_req_t req, fuse_ino_t parent, const char *name),
      (req, parent, name))
TIMED(symlink, MOUNT_OP_SYMLINK,
      (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name),
      (req, link, parent, name))
TIMED(rename, MOUNT_OP_RENAME,
      (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
       const char *newname, unsigned int flags),
      (req, parent, name, newparent, newname, flags))
TIMED(link, MOUNT_OP_LINK,
      (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname),
      (req, ino, newparent, newname))
TIMED(open, MOUNT_OP_OPEN, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      (req, ino, fi))
TIMED(read, MOUNT_OP_READ,
      (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
      (req, ino, size, off, fi))
TIMED(write, MOUNT_OP_WRITE,
      (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
       struct fuse_file_info *fi),
      (req, ino, buf, size, off, fi))
TIMED(flush, MOUNT_OP_FLUSH, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      (req, ino, fi))
TIMED(release, MOUNT_OP_RELEASE, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      (req, ino, fi))
TIMED(fsync, MOUNT_OP_FSYNC,
      (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
      (req, ino, datasync, fi))
TIMED(opendir, MOUNT_OP_OPENDIR, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      (req, ino, fi))
TIMED(readdir, MOUNT_OP_READDIR,
      (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
      (req, ino, size, off, fi))
TIMED(readdirplus, MOUNT_OP_READDIRPLUS,
      (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
      (req, ino, size, off, fi))
TIMED(releasedir, MOUNT_OP_RELEASEDIR, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      (req, ino, fi))
TIMED(fsyncdir, MOUNT_OP_FSYNCDIR,
      (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
      (req, ino, datasync, fi))
TIMED(statfs, MOUNT_OP_STATFS, (fuse_req_t req, fuse_ino_t ino), (req, ino))
TIMED(setxattr, MOUNT_OP_SETXATTR,
      (fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags),
      (req, ino, name, value, size, flags))
TIMED(getxattr, MOUNT_OP_GETXATTR, (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size),
      (req, ino, name, size))
TIMED(listxattr, MOUNT_OP_LISTXATTR, (fuse_req_t req, fuse_ino_t ino, size_t size),
      (req, ino, size))
TIMED(removexattr, MOUNT_OP_REMOVEXATTR, (fuse_req_t req, fuse_ino_t ino, const char *name),
      (req, ino, name))
TIMED(access, MOUNT_OP_ACCESS, (fuse_req_t req, fuse_ino_t ino, int mask), (req, ino, mask))
TIMED(create, MOUNT_OP_CREATE,
      (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi),
      (req, parent, name, mode, fi))
TIMED(fallocate, MOUNT_OP_FALLOCATE,
      (fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi),
      (req, ino, mode, off, len, fi))
TIMED(lseek, MOUNT_OP_LSEEK,
      (fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi),
      (req, ino, off, whence, fi))

const struct fuse_lowlevel_ops mount_ops = {
	.init = fs_init,
	.lookup = timed_lookup,
	.forget = timed_forget,
	.forget_multi = timed_forget_multi,
	.getattr = timed_getattr,
	.setattr = timed_setattr,
	.readlink = timed_readlink,
	.mknod = timed_mknod,
	.mkdir = timed_mkdir,
	.unlink = timed_unlink,
	.rmdir = timed_rmdir,
	.symlink = timed_symlink,
	.rename = timed_rename,
	.link = timed_link,
	.open = timed_open,
	.read = timed_read,
	.write = timed_write,
	.flush = timed_flush,
	.release = timed_release,
	.fsync = timed_fsync,
	.opendir = timed_opendir,
	.readdir = timed_readdir,
	.readdirplus = timed_readdirplus,
	.releasedir = timed_releasedir,
	.fsyncdir = timed_fsyncdir,
	.statfs = timed_statfs,
	.setxattr = timed_setxattr,
	.getxattr = timed_getxattr,
	.listxattr = timed_listxattr,
	.removexattr = timed_removexattr,
	.access = timed_access,
	.create = timed_create,
	.fallocate = timed_fallocate,
	.lseek = timed_lseek,
};
