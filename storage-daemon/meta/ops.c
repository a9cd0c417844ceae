// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Filesystem operations of the metadata service. Each runs inside the one
 * LMDB transaction dispatch.c opened for the request, so a failure half-way
 * leaves nothing behind: dispatch.c aborts the transaction on any error.
 *
 * Permission checks follow Linux (fs/namei.c, fs/attr.c, fs/xattr.c): search
 * permission on the parent for lookups, write and search on a directory to
 * change its entries, the sticky bit, owner-only chmod/chown/explicit times,
 * uid 0 bypassing read/write checks and execute when any x bit is set.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "meta_i.h"

#define MAY_EXEC  1
#define MAY_WRITE 2
#define MAY_READ  4

/* ---- helpers ---- */

static int check_name(const ProtobufCBinaryData *name)
{
	if (name->len == 0)
		return -EINVAL;
	if (name->len > META_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name->data, '/', name->len) || memchr(name->data, '\0', name->len))
		return -EINVAL;
	if ((name->len == 1 && name->data[0] == '.') ||
	    (name->len == 2 && name->data[0] == '.' && name->data[1] == '.'))
		return -EINVAL;
	return 0;
}

static bool in_group(const struct meta_cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return true;
	for (size_t i = 0; i < c->group_count; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

static bool is_owner(const struct meta_txn *t, const struct inode *in)
{
	return t->cred.uid == 0 || t->cred.uid == in->r.uid;
}

/* generic_permission(): -EACCES unless @mask (MAY_*) is granted on @in */
static int may(const struct meta_txn *t, const struct inode *in, unsigned mask)
{
	uint32_t mode = in->r.mode, bits;

	if (t->cred.uid == 0) {
		if (!(mask & MAY_EXEC) || S_ISDIR(mode) || (mode & 0111))
			return 0;
		return -EACCES;
	}
	if (t->cred.uid == in->r.uid)
		bits = mode >> 6;
	else if (in_group(&t->cred, in->r.gid))
		bits = mode >> 3;
	else
		bits = mode;
	return (bits & mask & 7) == (mask & 7) ? 0 : -EACCES;
}

/* The sticky bit: only the owner of the file or of the directory may remove it. */
static int check_sticky(const struct meta_txn *t, const struct inode *dir,
			const struct inode *victim)
{
	if (!(dir->r.mode & S_ISVTX) || t->cred.uid == 0 || t->cred.uid == victim->r.uid ||
	    t->cred.uid == dir->r.uid)
		return 0;
	return -EPERM;
}

static int get_dir(struct meta_txn *t, uint64_t ino, struct inode *dir)
{
	int ret = meta_store_inode_get(t, ino, dir);

	if (ret)
		return ret;
	return S_ISDIR(dir->r.mode) ? 0 : -ENOTDIR;
}

static void set_ts(int64_t *sec, uint32_t *nsec, const struct timespec *ts)
{
	*sec = ts->tv_sec;
	*nsec = (uint32_t)ts->tv_nsec;
}

static void touch_ctime(struct meta_txn *t, struct inode *in)
{
	set_ts(&in->r.ctime_sec, &in->r.ctime_nsec, &t->now);
}

/* A directory whose entries changed. */
static void touch_dir(struct meta_txn *t, struct inode *dir)
{
	set_ts(&dir->r.mtime_sec, &dir->r.mtime_nsec, &t->now);
	touch_ctime(t, dir);
}

static Rdmafs__Timespec *ts_out(struct meta_txn *t, int64_t sec, uint32_t nsec)
{
	Rdmafs__Timespec *ts = meta_alloc(t, sizeof(*ts));

	if (ts) {
		rdmafs__timespec__init(ts);
		ts->sec = sec;
		ts->nsec = nsec;
	}
	return ts;
}

/*
 * st_blocks in 512-byte units: for regular files what the daemons reported
 * at the clients' commits (meta_store_alloc_sum()), so a sparse file shows what it
 * holds and stat costs no daemon round trip; a file with copies on several
 * daemons shows one copy's share, as du on one host would. Files from before
 * the reports existed, until one report covers them, and a failed read: the size.
 */
static uint64_t attr_blocks(struct meta_txn *t, const struct inode *in)
{
	uint64_t bytes;
	int known = S_ISREG(in->r.mode) ? meta_store_alloc_known(t, in->ino) : 0;

	if (known == 1 && meta_store_alloc_sum(t, in, &bytes) == 0) {
		if (in->replicas > 1)
			bytes /= in->replicas;
		return bytes / 512 + (bytes % 512 != 0);
	}
	if (known != 0)
		meta_log(t->m, META_LOG_WARN, "inode %llu: allocation records unreadable",
			 (unsigned long long)in->ino);
	return in->r.size / 512 + (in->r.size % 512 != 0);
}

static Rdmafs__Attr *attr_out(struct meta_txn *t, const struct inode *in)
{
	Rdmafs__Attr *a = meta_alloc(t, sizeof(*a));

	if (!a)
		return NULL;
	rdmafs__attr__init(a);
	a->ino = in->ino;
	a->mode = in->r.mode;
	a->nlink = in->r.nlink;
	a->uid = in->r.uid;
	a->gid = in->r.gid;
	a->size = in->r.size;
	a->blocks = attr_blocks(t, in);
	a->rdev = in->r.rdev;
	a->generation = in->r.generation;
	a->atime = ts_out(t, in->r.atime_sec, in->r.atime_nsec);
	a->mtime = ts_out(t, in->r.mtime_sec, in->r.mtime_nsec);
	a->ctime = ts_out(t, in->r.ctime_sec, in->r.ctime_nsec);
	if (!a->atime || !a->mtime || !a->ctime)
		return NULL;
	return a;
}

int meta_layout_out(struct meta_txn *t, const struct inode *in, Rdmafs__Layout **out)
{
	Rdmafs__Layout *l;

	*out = NULL;
	if (!S_ISREG(in->r.mode) || in->r.stripe_width == 0)
		return 0;
	l = meta_alloc(t, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rdmafs__layout__init(l);
	l->chunk_size = in->r.chunk_size;
	l->stripe_width = in->r.stripe_width;
	l->placement_seed = in->r.placement_seed;
	l->placement = in->r.placement;
	l->generation = in->r.layout_generation;
	l->replicas = in->replicas > 1 ? in->replicas : 0;
	if (in->replicas > 1 && in->n_domains == in->r.stripe_width) {
		l->domains = meta_dup(t, in->domains, in->n_domains * sizeof(*l->domains));
		if (!l->domains)
			return -ENOMEM;
		l->n_domains = in->n_domains;
	}
	l->daemons = meta_alloc(t, in->r.stripe_width * sizeof(*l->daemons));
	if (!l->daemons)
		return -ENOMEM;
	for (uint32_t i = 0; i < in->r.stripe_width; i++) {
		l->daemons[i].data = meta_dup(t, in->daemons[i], RDMAFS_UUID_LEN);
		if (!l->daemons[i].data)
			return -ENOMEM;
		l->daemons[i].len = RDMAFS_UUID_LEN;
	}
	l->n_daemons = in->r.stripe_width;
	*out = l;
	return 0;
}

/* An EntryResp of @in; @dir (NULL: none) the directory a new entry went into. */
static int entry_resp(struct meta_txn *t, const struct inode *in, const struct inode *dir,
		      ProtobufCMessage **resp)
{
	Rdmafs__EntryResp *out = meta_alloc(t, sizeof(*out));
	int ret;

	if (!out)
		return -ENOMEM;
	rdmafs__entry_resp__init(out);
	out->attr = attr_out(t, in);
	if (!out->attr || (dir && !(out->parent = attr_out(t, dir))))
		return -ENOMEM;
	ret = meta_layout_out(t, in, &out->layout);
	*resp = &out->base;
	return ret;
}

static int attr_resp(struct meta_txn *t, const struct inode *in, ProtobufCMessage **resp)
{
	Rdmafs__AttrResp *out = meta_alloc(t, sizeof(*out));

	if (!out)
		return -ENOMEM;
	rdmafs__attr_resp__init(out);
	out->attr = attr_out(t, in);
	*resp = &out->base;
	return out->attr ? 0 : -ENOMEM;
}

static int empty_resp(struct meta_txn *t, ProtobufCMessage **resp)
{
	Rdmafs__Empty *out = meta_alloc(t, sizeof(*out));

	if (!out)
		return -ENOMEM;
	rdmafs__empty__init(out);
	*resp = &out->base;
	return 0;
}

/*
 * A new inode numbered from the counter, owned by @uid:@gid, in directory
 * @dir (for the setgid inheritance) or NULL for the root. Counted, not stored.
 */
/* A META_XATTR_REPLICAS value: "1" to RDMAFS_MAX_REPLICAS; 0 for anything else. */
static uint32_t replicas_parse(const void *value, size_t len)
{
	const char *c = value;

	return len == 1 && *c >= '1' && *c <= '0' + RDMAFS_MAX_REPLICAS ? (uint32_t)(*c - '0') : 0;
}

/*
 * What a new inode under @dir inherits of META_XATTR_REPLICAS: a directory
 * the xattr itself, a regular file its count (else the service's default).
 */
static int replicas_inherit(struct meta_txn *t, struct inode *in, const struct inode *dir)
{
	static const char name[] = META_XATTR_REPLICAS;
	const void *value = NULL;
	size_t len = 0;
	uint32_t count;
	int ret = -ENOENT;

	in->replicas = t->m->opts.replicas;
	if (dir)
		ret = meta_store_xattr_get(t, dir->ino, (const uint8_t *)name, strlen(name), &value,
					   &len);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	if (S_ISDIR(in->r.mode))
		return meta_store_xattr_put(t, in->ino, (const uint8_t *)name, strlen(name), value,
					    len);
	/* setxattr checked it: a bad value is from a store edited by hand, and ignored */
	count = replicas_parse(value, len);
	if (count)
		in->replicas = count;
	return 0;
}

static int new_inode(struct meta_txn *t, struct inode *in, const struct inode *dir, uint32_t mode,
		     uint32_t uid, uint32_t gid)
{
	int ret;

	memset(in, 0, sizeof(*in));
	ret = meta_store_counter_next(t, "next_ino", &in->ino);
	if (!ret)
		ret = meta_store_counter_next(t, "generation", &in->r.generation);
	if (!ret)
		ret = meta_store_counter_add(t, "inodes", 1);
	if (ret)
		return ret;
	if (dir && (dir->r.mode & S_ISGID)) {
		gid = dir->r.gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	in->r.mode = mode;
	in->r.uid = uid;
	in->r.gid = gid;
	in->r.nlink = S_ISDIR(mode) ? 2 : 1;
	if (S_ISREG(mode)) {
		ret = meta_store_alloc_mark(t, in->ino); /* nothing allocated yet, and known */
		if (ret)
			return ret;
	}
	in->r.parent = dir ? dir->ino : in->ino;
	set_ts(&in->r.atime_sec, &in->r.atime_nsec, &t->now);
	in->r.mtime_sec = in->r.ctime_sec = in->r.atime_sec;
	in->r.mtime_nsec = in->r.ctime_nsec = in->r.atime_nsec;
	return S_ISREG(mode) || S_ISDIR(mode) ? replicas_inherit(t, in, dir) : 0;
}

int meta_make_root(struct meta_txn *t)
{
	struct inode root;
	uint64_t ino;
	int ret;

	/* the counter starts at 2: give the root its fixed number by hand */
	memset(&root, 0, sizeof(root));
	ret = meta_store_counter_get(t, "next_ino", &ino);
	if (ret)
		return ret;
	ret = meta_store_counter_put(t, "next_ino", META_ROOT_INO);
	if (!ret)
		ret = new_inode(t, &root, NULL, S_IFDIR | 0755, 0, 0);
	if (!ret)
		ret = meta_store_counter_put(t, "next_ino", ino);
	if (!ret)
		ret = meta_store_inode_put(t, &root);
	return ret;
}

/* Removes an inode with no links and no handles; regular files go to *@freed. */
static int free_inode(struct meta_txn *t, const struct inode *in, Rdmafs__FreedInode **freed)
{
	Rdmafs__FreedInode *f;
	int ret;

	if (S_ISREG(in->r.mode) && freed) {
		/* the caller removes its chunks next: the file must not come back after a power
		 * loss. Unless it flushes first itself (SYNC, FreedInode), the answer waits. */
		if (in->r.size && !t->caller_flushes)
			t->durable = true;
		f = meta_alloc(t, sizeof(*f));
		if (!f)
			return -ENOMEM;
		rdmafs__freed_inode__init(f);
		f->ino = in->ino;
		f->size = in->r.size;
		ret = meta_layout_out(t, in, &f->layout);
		if (ret)
			return ret;
		*freed = f;
	}
	return meta_store_inode_delete(t, in->ino);
}

/*
 * Whether an inode without links may go: no handle holds it, and no client
 * can still reclaim one (meta_in_grace()); else it stays, an orphan, for
 * its last RELEASE or meta_orphans_sweep().
 */
static bool may_free(struct meta *m, uint64_t ino)
{
	return !meta_in_grace(m) && meta_handle_opens(m, ino) == 0;
}

/* Drops one link of a non-directory: stores it, or frees it if nothing holds it. */
static int drop_link(struct meta_txn *t, struct inode *in, Rdmafs__FreedInode **freed)
{
	if (in->r.nlink > 0)
		in->r.nlink--;
	touch_ctime(t, in);
	if (in->r.nlink == 0 && may_free(t->m, in->ino))
		return free_inode(t, in, freed);
	return meta_store_inode_put(t, in);
}

static int open_access(uint32_t flags)
{
	unsigned mask;

	switch (flags & O_ACCMODE) {
	case O_RDONLY:
		mask = MAY_READ;
		break;
	case O_WRONLY:
		mask = MAY_WRITE;
		break;
	case O_RDWR:
		mask = MAY_READ | MAY_WRITE;
		break;
	default:
		return -EINVAL;
	}
	if (flags & O_TRUNC)
		mask |= MAY_WRITE;
	return (int)mask;
}

/* Checks @flags against @in and opens a handle on it. */
static int open_handle(struct meta_txn *t, struct inode *in, uint32_t flags, uint64_t *handle)
{
	int mask = open_access(flags), ret;

	if (mask < 0)
		return mask;
	if (S_ISDIR(in->r.mode) && (mask & MAY_WRITE))
		return -EISDIR;
	if (S_ISLNK(in->r.mode))
		return -ELOOP;
	ret = may(t, in, (unsigned)mask);
	if (ret)
		return ret;
	*handle = 0;
	return meta_handle_add(t, in->ino, flags, handle);
}

/*
 * The checks every entry-creating call makes: @parent is a directory the
 * caller may write and search, @name is valid and not taken.
 */
static int prepare_create(struct meta_txn *t, uint64_t parent, const ProtobufCBinaryData *name,
			  struct inode *dir)
{
	struct dirent_val dv;
	int ret;

	ret = check_name(name);
	if (!ret)
		ret = get_dir(t, parent, dir);
	if (!ret)
		ret = may(t, dir, MAY_WRITE | MAY_EXEC);
	if (ret)
		return ret;
	if (dir->r.nlink == 0)
		return -ENOENT; /* removed while someone had it open */
	ret = meta_store_dirent_get(t, parent, name->data, name->len, &dv);
	if (ret == 0)
		return -EEXIST;
	return ret == -ENOENT ? 0 : ret;
}

/* Links the new inode @in into @dir under @name and stores both. */
static int link_new(struct meta_txn *t, struct inode *dir, const ProtobufCBinaryData *name,
		    struct inode *in)
{
	int ret =
		meta_store_dirent_add(t, dir, name->data, name->len, in->ino, in->r.mode & S_IFMT);

	if (ret)
		return ret;
	if (S_ISDIR(in->r.mode))
		dir->r.nlink++;
	touch_dir(t, dir);
	ret = meta_store_inode_put(t, dir);
	if (!ret)
		ret = meta_store_inode_put(t, in);
	return ret;
}

static int check_timespec(const Rdmafs__Timespec *ts)
{
	return ts && ts->nsec >= 1000000000u ? -EINVAL : 0;
}

/* ---- operations ---- */

int meta_op_lookup(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__LookupReq *req = (const void *)msg;
	struct inode dir, in;
	struct dirent_val dv;
	uint64_t ino;
	int ret;

	/* "." and ".." resolve here (NFS export asks for ".."); nothing else special */
	if (req->name.len == 0)
		return -EINVAL;
	if (req->name.len > META_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(req->name.data, '/', req->name.len) || memchr(req->name.data, 0, req->name.len))
		return -EINVAL;
	ret = get_dir(t, req->parent, &dir);
	if (!ret)
		ret = may(t, &dir, MAY_EXEC);
	if (ret)
		return ret;
	if (req->name.len == 1 && req->name.data[0] == '.') {
		ino = dir.ino;
	} else if (req->name.len == 2 && req->name.data[0] == '.' && req->name.data[1] == '.') {
		ino = dir.r.parent;
	} else {
		ret = meta_store_dirent_get(t, req->parent, req->name.data, req->name.len, &dv);
		if (ret)
			return ret;
		ino = dv.ino;
	}
	ret = meta_store_inode_get(t, ino, &in);
	if (ret)
		return ret == -ENOENT ? -EIO : ret; /* an entry without its inode */
	return entry_resp(t, &in, NULL, resp);
}

int meta_op_getattr(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__GetattrReq *req = (const void *)msg;
	Rdmafs__AttrResp *out;
	struct inode in;
	int ret = meta_store_inode_get(t, req->ino, &in);

	if (ret)
		return ret;
	ret = attr_resp(t, &in, resp);
	if (ret)
		return ret;
	/* the layout too: a client fenced off by a daemon refetches it here */
	out = (Rdmafs__AttrResp *)*resp;
	return meta_layout_out(t, &in, &out->layout);
}

#define SETATTR_KNOWN                                                                              \
	(RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE | RDMAFS__SETATTR_VALID__SETATTR_VALID_UID |    \
	 RDMAFS__SETATTR_VALID__SETATTR_VALID_GID | RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE |    \
	 RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME | RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME | \
	 RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME_NOW |                                          \
	 RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME_NOW |                                          \
	 RDMAFS__SETATTR_VALID__SETATTR_VALID_CTIME)

static int setattr_check_times(struct meta_txn *t, const Rdmafs__SetattrReq *req,
			       const struct inode *in)
{
	uint32_t v = req->valid;
	bool atime = v & RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME;
	bool mtime = v & RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME;
	bool atime_now = v & RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME_NOW;
	bool mtime_now = v & RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME_NOW;
	bool ctime = v & RDMAFS__SETATTR_VALID__SETATTR_VALID_CTIME;

	if ((atime && !atime_now && (!req->atime || check_timespec(req->atime))) ||
	    (mtime && !mtime_now && (!req->mtime || check_timespec(req->mtime))) ||
	    (ctime && (!req->ctime || check_timespec(req->ctime))))
		return -EINVAL;
	/* explicit times need the owner; "now" also the right to write (utimensat(2)) */
	if ((atime && !atime_now) || (mtime && !mtime_now) || ctime)
		return is_owner(t, in) ? 0 : -EPERM;
	if (atime_now || mtime_now) {
		if (is_owner(t, in))
			return 0;
		return may(t, in, MAY_WRITE);
	}
	return 0;
}

/* 0 if @handle is a handle of @in open for writing, else -EBADF. */
static int handle_writable(struct meta_txn *t, const struct inode *in, uint64_t handle)
{
	struct meta_handle_info h;

	if (!handle || meta_handle_find(t->m, handle, &h))
		return -EBADF;
	if (h.ino != in->ino || (h.flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	return 0;
}

/*
 * Write permission for a size change: a handle open for writing already
 * proved it at open (ftruncate after open(O_CREAT | O_RDWR, 0) works, as
 * do_sys_ftruncate() checks only the file's mode), else may(MAY_WRITE).
 */
static int may_write_or_handle(struct meta_txn *t, const struct inode *in, uint64_t handle)
{
	int ret = handle_writable(t, in, handle);

	if (ret != -EBADF)
		return ret;
	return may(t, in, MAY_WRITE);
}

/*
 * A mode change by a non-owner: refused (-EPERM) unless it only clears
 * set-user-ID, and set-group-ID on a group-executable file, of a file the
 * caller may write. That is the change a local filesystem makes itself on a
 * write or truncate by a non-owner (file_remove_privs(), should_remove_suid());
 * FUSE without FUSE_CAP_HANDLE_KILLPRIV sends it as a SETATTR of the mode in
 * the writer's name, and libfuse 3.14 cannot tell us about the kernel's
 * FUSE_WRITE_KILL_SUIDGID (no HANDLE_KILLPRIV_V2), so the service accepts
 * exactly that change and nothing more.
 */
static int setattr_kill_privs_ok(struct meta_txn *t, const Rdmafs__SetattrReq *req,
				 const struct inode *in)
{
	uint32_t old = in->r.mode & 07777, killable = S_ISUID;
	int ret;

	if (S_ISDIR(in->r.mode))
		return -EPERM;
	if (in->r.mode & S_IXGRP)
		killable |= S_ISGID;
	/* only bits in @killable may go, none may appear, and something must go */
	if ((req->mode & ~old) || ((old & ~req->mode) & ~killable) || req->mode == old)
		return -EPERM;
	ret = may_write_or_handle(t, in, req->handle);
	return ret ? -EPERM : 0;
}

int meta_op_setattr(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__SetattrReq *req = (const void *)msg;
	uint32_t v = req->valid;
	struct inode in;
	bool changed = false;
	int ret;

	if (v & ~(uint32_t)SETATTR_KNOWN)
		return -EINVAL;
	ret = meta_store_inode_get(t, req->ino, &in);
	if (ret)
		return ret;

	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE) {
		if (req->mode & ~07777u)
			return -EINVAL;
		if (!is_owner(t, &in)) {
			ret = setattr_kill_privs_ok(t, req, &in);
			if (ret)
				return ret;
		}
	}
	if (v &
	    (RDMAFS__SETATTR_VALID__SETATTR_VALID_UID | RDMAFS__SETATTR_VALID__SETATTR_VALID_GID)) {
		bool uid_change =
			(v & RDMAFS__SETATTR_VALID__SETATTR_VALID_UID) && req->uid != in.r.uid;
		bool gid_change =
			(v & RDMAFS__SETATTR_VALID__SETATTR_VALID_GID) && req->gid != in.r.gid;

		/* chown_ok()/chgrp_ok(): root, or the owner giving the file to a group of theirs */
		if (t->cred.uid != 0) {
			if (uid_change)
				return -EPERM;
			if (gid_change &&
			    (t->cred.uid != in.r.uid || !in_group(&t->cred, req->gid)))
				return -EPERM;
			if (!uid_change && !gid_change && t->cred.uid != in.r.uid)
				return -EPERM;
		}
	}
	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE) {
		if (S_ISDIR(in.r.mode))
			return -EISDIR;
		if (!S_ISREG(in.r.mode))
			return -EINVAL;
		ret = may_write_or_handle(t, &in, req->handle);
		if (ret)
			return ret;
	}
	ret = setattr_check_times(t, req, &in);
	if (ret)
		return ret;

	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE) {
		uint32_t mode = req->mode;

		/* a non-root owner outside the file's group cannot set setgid */
		if (t->cred.uid != 0 && !in_group(&t->cred, in.r.gid))
			mode &= ~(uint32_t)S_ISGID;
		in.r.mode = (in.r.mode & S_IFMT) | mode;
		changed = true;
	}
	if (v &
	    (RDMAFS__SETATTR_VALID__SETATTR_VALID_UID | RDMAFS__SETATTR_VALID__SETATTR_VALID_GID)) {
		if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_UID)
			in.r.uid = req->uid;
		if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_GID)
			in.r.gid = req->gid;
		/* chown drops setuid, and setgid when it means "execute as group" */
		if (!S_ISDIR(in.r.mode)) {
			in.r.mode &= ~(uint32_t)S_ISUID;
			if (in.r.mode & S_IXGRP)
				in.r.mode &= ~(uint32_t)S_ISGID;
		}
		changed = true;
	}
	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE) {
		/* the caller cuts the chunks next: the old size must not come back after a power
		 * loss */
		if (req->size < in.r.size)
			t->durable = true;
		in.r.size = req->size;
		set_ts(&in.r.mtime_sec, &in.r.mtime_nsec, &t->now);
		/* truncate by a non-owner clears setuid/setgid, as a write does */
		if (t->cred.uid != 0)
			in.r.mode &= ~(uint32_t)(S_ISUID | ((in.r.mode & S_IXGRP) ? S_ISGID : 0));
		changed = true;
	}
	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME_NOW) {
		set_ts(&in.r.atime_sec, &in.r.atime_nsec, &t->now);
		changed = true;
	} else if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME) {
		in.r.atime_sec = req->atime->sec;
		in.r.atime_nsec = req->atime->nsec;
		changed = true;
	}
	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME_NOW) {
		set_ts(&in.r.mtime_sec, &in.r.mtime_nsec, &t->now);
		changed = true;
	} else if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME) {
		in.r.mtime_sec = req->mtime->sec;
		in.r.mtime_nsec = req->mtime->nsec;
		changed = true;
	}
	if (changed)
		touch_ctime(t, &in);
	if (v & RDMAFS__SETATTR_VALID__SETATTR_VALID_CTIME) {
		in.r.ctime_sec = req->ctime->sec;
		in.r.ctime_nsec = req->ctime->nsec;
		changed = true;
	}
	if (changed) {
		ret = meta_store_inode_put(t, &in);
		if (ret)
			return ret;
	}
	return attr_resp(t, &in, resp);
}

int meta_op_create(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__CreateReq *req = (const void *)msg;
	Rdmafs__CreateResp *out;
	struct inode dir, in;
	struct dirent_val dv;
	uint32_t type = req->mode & S_IFMT;
	int ret;

	if (type != 0 && type != S_IFREG)
		return -EINVAL;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__create_resp__init(out);

	ret = prepare_create(t, req->parent, &req->name, &dir);
	if (ret == -EEXIST && !req->exclusive) {
		/* open(O_CREAT) of an existing file opens it */
		ret = meta_store_dirent_get(t, req->parent, req->name.data, req->name.len, &dv);
		if (!ret)
			ret = meta_store_inode_get(t, dv.ino, &in);
		if (ret)
			return ret;
		if (S_ISDIR(in.r.mode))
			return -EISDIR;
		ret = open_handle(t, &in, req->open_flags, &out->handle);
	} else if (ret) {
		return ret;
	} else {
		ret = new_inode(t, &in, &dir, S_IFREG | (req->mode & 07777), req->uid, req->gid);
		if (!ret)
			ret = meta_choose_layout(t, &in);
		if (!ret)
			ret = open_access(req->open_flags) < 0 ? -EINVAL : 0;
		if (ret)
			return ret;
		/* the creator may open what it just made, whatever the mode says */
		out->handle = 0;
		ret = meta_handle_add(t, in.ino, req->open_flags, &out->handle);
		if (!ret)
			ret = link_new(t, &dir, &req->name, &in);
		out->created = true;
		if (!ret && !(out->parent = attr_out(t, &dir)))
			ret = -ENOMEM;
	}
	if (ret)
		return ret;
	out->attr = attr_out(t, &in);
	if (!out->attr)
		return -ENOMEM;
	ret = meta_layout_out(t, &in, &out->layout);
	*resp = &out->base;
	return ret;
}

int meta_op_mknod(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__MknodReq *req = (const void *)msg;
	uint32_t type = req->mode & S_IFMT;
	struct inode dir, in;
	int ret;

	switch (type) {
	case 0:
		type = S_IFREG;
		break;
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	case S_IFCHR:
	case S_IFBLK:
		if (t->cred.uid != 0)
			return -EPERM;
		break;
	case S_IFDIR:
		return -EPERM;
	default:
		return -EINVAL;
	}
	ret = prepare_create(t, req->parent, &req->name, &dir);
	if (!ret)
		ret = new_inode(t, &in, &dir, type | (req->mode & 07777), req->uid, req->gid);
	if (ret)
		return ret;
	if (type == S_IFREG)
		ret = meta_choose_layout(t, &in);
	else if (type == S_IFCHR || type == S_IFBLK)
		in.r.rdev = req->rdev;
	if (!ret)
		ret = link_new(t, &dir, &req->name, &in);
	if (ret)
		return ret;
	return entry_resp(t, &in, &dir, resp);
}

int meta_op_mkdir(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__MkdirReq *req = (const void *)msg;
	struct inode dir, in;
	int ret;

	ret = prepare_create(t, req->parent, &req->name, &dir);
	if (!ret && dir.r.nlink >= UINT32_MAX - 1)
		ret = -EMLINK;
	if (!ret)
		ret = new_inode(t, &in, &dir, S_IFDIR | (req->mode & 07777), req->uid, req->gid);
	if (!ret)
		ret = link_new(t, &dir, &req->name, &in);
	if (ret)
		return ret;
	return entry_resp(t, &in, &dir, resp);
}

int meta_op_symlink(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__SymlinkReq *req = (const void *)msg;
	struct inode dir, in;
	int ret;

	if (req->target.len == 0)
		return -ENOENT;
	if (req->target.len > META_SYMLINK_MAX)
		return -ENAMETOOLONG;
	if (memchr(req->target.data, '\0', req->target.len))
		return -EINVAL;
	ret = prepare_create(t, req->parent, &req->name, &dir);
	if (!ret)
		ret = new_inode(t, &in, &dir, S_IFLNK | 0777, req->uid, req->gid);
	if (ret)
		return ret;
	in.r.size = req->target.len;
	ret = meta_store_symlink_put(t, in.ino, req->target.data, req->target.len);
	if (!ret)
		ret = link_new(t, &dir, &req->name, &in);
	if (ret)
		return ret;
	return entry_resp(t, &in, &dir, resp);
}

/*
 * The checks of removing @name from @parent: a writable, searchable
 * directory, the entry exists, the sticky bit allows it. Fills @dir, @dv, @in.
 */
static int prepare_remove(struct meta_txn *t, uint64_t parent, const ProtobufCBinaryData *name,
			  struct inode *dir, struct dirent_val *dv, struct inode *in)
{
	int ret;

	ret = get_dir(t, parent, dir);
	if (!ret)
		ret = may(t, dir, MAY_WRITE | MAY_EXEC);
	if (!ret)
		ret = meta_store_dirent_get(t, parent, name->data, name->len, dv);
	if (!ret)
		ret = meta_store_inode_get(t, dv->ino, in);
	if (!ret)
		ret = check_sticky(t, dir, in);
	return ret;
}

int meta_op_unlink(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__UnlinkReq *req = (const void *)msg;
	Rdmafs__UnlinkResp *out;
	struct inode dir, in;
	struct dirent_val dv;
	int ret;

	ret = check_name(&req->name);
	if (!ret)
		ret = prepare_remove(t, req->parent, &req->name, &dir, &dv, &in);
	if (ret)
		return ret;
	if (S_ISDIR(in.r.mode))
		return -EISDIR;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__unlink_resp__init(out);
	t->caller_flushes = req->flush_before_free;
	ret = meta_store_dirent_delete(t, dir.ino, req->name.data, req->name.len);
	if (!ret)
		ret = drop_link(t, &in, &out->freed);
	if (ret)
		return ret;
	touch_dir(t, &dir);
	ret = meta_store_inode_put(t, &dir);
	if (!ret && !(out->parent = attr_out(t, &dir)))
		ret = -ENOMEM;
	*resp = &out->base;
	return ret;
}

int meta_op_rmdir(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__RmdirReq *req = (const void *)msg;
	struct inode dir, in;
	struct dirent_val dv;
	int ret;

	/* rmdir(2): "." is EINVAL, ".." is not empty */
	if (req->name.len == 2 && req->name.data[0] == '.' && req->name.data[1] == '.')
		return -ENOTEMPTY;
	ret = check_name(&req->name);
	if (!ret)
		ret = prepare_remove(t, req->parent, &req->name, &dir, &dv, &in);
	if (ret)
		return ret;
	if (!S_ISDIR(in.r.mode))
		return -ENOTDIR;
	ret = meta_store_dir_empty(t, in.ino);
	if (ret < 0)
		return ret;
	if (ret == 0)
		return -ENOTEMPTY;
	ret = meta_store_dirent_delete(t, dir.ino, req->name.data, req->name.len);
	if (!ret)
		ret = meta_store_inode_delete(t, in.ino);
	if (ret)
		return ret;
	dir.r.nlink--;
	touch_dir(t, &dir);
	ret = meta_store_inode_put(t, &dir);
	if (ret)
		return ret;
	return empty_resp(t, resp);
}

/* -EINVAL when directory @ino is @ancestor or lies below it. */
static int check_not_below(struct meta_txn *t, uint64_t ino, uint64_t ancestor)
{
	struct inode cur;
	int ret;

	for (unsigned depth = 0; depth < 1u << 20; depth++) {
		if (ino == ancestor)
			return -EINVAL;
		if (ino == META_ROOT_INO)
			return 0;
		ret = meta_store_inode_get(t, ino, &cur);
		if (ret)
			return ret == -ENOENT ? -EIO : ret;
		ino = cur.r.parent;
	}
	meta_log(t->m, META_LOG_ERR, "directory %llu: parent chain does not reach the root",
		 (unsigned long long)ino);
	return -EIO;
}

#define RENAME_KNOWN \
	(RDMAFS__RENAME_FLAG__RENAME_FLAG_NOREPLACE | RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE)

struct rename_state {
	struct inode old_dir, new_dir_storage, src, dst;
	struct inode *new_dir; /* &old_dir when both parents are the same directory */
	struct dirent_val src_dv, dst_dv;
	bool dst_exists;
};

static int rename_exchange(struct meta_txn *t, const Rdmafs__RenameReq *req, struct rename_state *s)
{
	bool src_dir = S_ISDIR(s->src.r.mode), dst_dir = S_ISDIR(s->dst.r.mode);
	bool moved = s->new_dir != &s->old_dir;
	int ret;

	if (moved && src_dir) {
		ret = may(t, &s->src, MAY_WRITE);
		if (ret)
			return ret;
	}
	if (moved && dst_dir) {
		ret = check_not_below(t, s->old_dir.ino, s->dst.ino);
		if (!ret)
			ret = may(t, &s->dst, MAY_WRITE);
		if (ret)
			return ret;
	}
	ret = meta_store_dirent_repoint(t, s->old_dir.ino, req->old_name.data, req->old_name.len,
					s->dst.ino, s->dst.r.mode & S_IFMT);
	if (!ret)
		ret = meta_store_dirent_repoint(t, s->new_dir->ino, req->new_name.data,
						req->new_name.len, s->src.ino,
						s->src.r.mode & S_IFMT);
	if (ret)
		return ret;
	if (moved && src_dir) {
		s->src.r.parent = s->new_dir->ino;
		s->old_dir.r.nlink--;
		s->new_dir->r.nlink++;
	}
	if (moved && dst_dir) {
		s->dst.r.parent = s->old_dir.ino;
		s->new_dir->r.nlink--;
		s->old_dir.r.nlink++;
	}
	touch_ctime(t, &s->src);
	touch_ctime(t, &s->dst);
	ret = meta_store_inode_put(t, &s->src);
	if (!ret)
		ret = meta_store_inode_put(t, &s->dst);
	return ret;
}

static int rename_move(struct meta_txn *t, const Rdmafs__RenameReq *req, struct rename_state *s,
		       Rdmafs__FreedInode **freed)
{
	bool src_dir = S_ISDIR(s->src.r.mode);
	bool moved = s->new_dir != &s->old_dir;
	int ret;

	if (moved && src_dir) {
		ret = may(t, &s->src, MAY_WRITE);
		if (ret)
			return ret;
	}
	if (s->dst_exists) {
		bool dst_dir = S_ISDIR(s->dst.r.mode);

		if (src_dir && !dst_dir)
			return -ENOTDIR;
		if (!src_dir && dst_dir)
			return -EISDIR;
		if (dst_dir) {
			ret = meta_store_dir_empty(t, s->dst.ino);
			if (ret < 0)
				return ret;
			if (ret == 0)
				return -ENOTEMPTY;
		}
	}

	ret = meta_store_dirent_delete(t, s->old_dir.ino, req->old_name.data, req->old_name.len);
	if (ret)
		return ret;
	if (s->dst_exists) {
		ret = meta_store_dirent_delete(t, s->new_dir->ino, req->new_name.data,
					       req->new_name.len);
		if (ret)
			return ret;
		if (S_ISDIR(s->dst.r.mode)) {
			s->new_dir->r.nlink--;
			ret = meta_store_inode_delete(t, s->dst.ino);
		} else {
			ret = drop_link(t, &s->dst, freed);
		}
		if (ret)
			return ret;
	}
	ret = meta_store_dirent_add(t, s->new_dir, req->new_name.data, req->new_name.len,
				    s->src.ino, s->src.r.mode & S_IFMT);
	if (ret)
		return ret;
	if (moved && src_dir) {
		s->src.r.parent = s->new_dir->ino;
		s->old_dir.r.nlink--;
		s->new_dir->r.nlink++;
	}
	touch_ctime(t, &s->src);
	return meta_store_inode_put(t, &s->src);
}

int meta_op_rename(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__RenameReq *req = (const void *)msg;
	bool exchange = req->flags & RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE;
	Rdmafs__RenameResp *out;
	struct rename_state *s;
	int ret;

	if ((req->flags & ~(uint32_t)RENAME_KNOWN) || req->flags == RENAME_KNOWN)
		return -EINVAL;
	ret = check_name(&req->old_name);
	if (!ret)
		ret = check_name(&req->new_name);
	if (ret)
		return ret;
	s = meta_alloc(t, sizeof(*s));
	out = meta_alloc(t, sizeof(*out));
	if (!s || !out)
		return -ENOMEM;
	rdmafs__rename_resp__init(out);
	*resp = &out->base;
	t->caller_flushes = req->flush_before_free;

	ret = get_dir(t, req->old_parent, &s->old_dir);
	if (ret)
		return ret;
	s->new_dir = &s->old_dir;
	if (req->new_parent != req->old_parent) {
		s->new_dir = &s->new_dir_storage;
		ret = get_dir(t, req->new_parent, s->new_dir);
		if (ret)
			return ret;
	}
	ret = may(t, &s->old_dir, MAY_WRITE | MAY_EXEC);
	if (!ret)
		ret = may(t, s->new_dir, MAY_WRITE | MAY_EXEC);
	if (!ret)
		ret = meta_store_dirent_get(t, s->old_dir.ino, req->old_name.data,
					    req->old_name.len, &s->src_dv);
	if (!ret)
		ret = meta_store_inode_get(t, s->src_dv.ino, &s->src);
	if (ret)
		return ret;
	if (s->new_dir->r.nlink == 0)
		return -ENOENT;
	ret = meta_store_dirent_get(t, s->new_dir->ino, req->new_name.data, req->new_name.len,
				    &s->dst_dv);
	if (ret && ret != -ENOENT)
		return ret;
	s->dst_exists = ret == 0;
	if (exchange && !s->dst_exists)
		return -ENOENT;
	if ((req->flags & RDMAFS__RENAME_FLAG__RENAME_FLAG_NOREPLACE) && s->dst_exists)
		return -EEXIST;
	if (s->dst_exists) {
		ret = meta_store_inode_get(t, s->dst_dv.ino, &s->dst);
		if (ret)
			return ret;
	}
	/* a directory cannot move below itself */
	if (S_ISDIR(s->src.r.mode) && s->new_dir != &s->old_dir) {
		ret = check_not_below(t, s->new_dir->ino, s->src.ino);
		if (ret)
			return ret;
	}
	ret = check_sticky(t, &s->old_dir, &s->src);
	if (!ret && s->dst_exists)
		ret = check_sticky(t, s->new_dir, &s->dst);
	if (ret)
		return ret;
	/* two links to one inode: rename(2) does nothing and succeeds */
	if (s->dst_exists && s->dst.ino == s->src.ino)
		return 0;

	if (exchange)
		ret = rename_exchange(t, req, s);
	else
		ret = rename_move(t, req, s, &out->freed);
	if (ret)
		return ret;
	touch_dir(t, &s->old_dir);
	ret = meta_store_inode_put(t, &s->old_dir);
	if (!ret && s->new_dir != &s->old_dir) {
		touch_dir(t, s->new_dir);
		ret = meta_store_inode_put(t, s->new_dir);
	}
	return ret;
}

int meta_op_link(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__LinkReq *req = (const void *)msg;
	struct inode dir, in;
	int ret;

	ret = meta_store_inode_get(t, req->ino, &in);
	if (ret)
		return ret;
	if (S_ISDIR(in.r.mode))
		return -EPERM;
	ret = prepare_create(t, req->new_parent, &req->new_name, &dir);
	if (ret)
		return ret;
	if (in.r.nlink == 0)
		return -ENOENT; /* linkat(2) of an unlinked file */
	if (in.r.nlink >= META_LINK_MAX)
		return -EMLINK;
	in.r.nlink++;
	touch_ctime(t, &in);
	ret = link_new(t, &dir, &req->new_name, &in);
	if (ret)
		return ret;
	return entry_resp(t, &in, &dir, resp);
}

int meta_op_readlink(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ReadlinkReq *req = (const void *)msg;
	Rdmafs__ReadlinkResp *out;
	struct inode in;
	const void *target;
	size_t len;
	int ret;

	ret = meta_store_inode_get(t, req->ino, &in);
	if (ret)
		return ret;
	if (!S_ISLNK(in.r.mode))
		return -EINVAL;
	ret = meta_store_symlink_get(t, req->ino, &target, &len);
	if (ret)
		return ret == -ENOENT ? -EIO : ret;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__readlink_resp__init(out);
	out->target.data = meta_dup(t, target, len);
	out->target.len = len;
	*resp = &out->base;
	return out->target.data ? 0 : -ENOMEM;
}

/* Bytes a length-delimited field of @len bytes adds to a message (tag < 16). */
static size_t field_size(size_t len)
{
	size_t n = 1 + 1;

	for (size_t v = len; v >= 0x80; v >>= 7)
		n++;
	return n + len;
}

struct readdir_walk {
	const Rdmafs__ReaddirReq *req;
	Rdmafs__ReaddirResp *out;
	size_t max, used, room;
};

static int readdir_add(struct meta_txn *t, const struct meta_store_dirent *d, void *arg)
{
	struct readdir_walk *w = arg;
	Rdmafs__DirEntry *e;
	struct inode in;
	size_t size;
	int ret;

	if (w->out->n_entries == w->max)
		return 1;
	e = meta_alloc(t, sizeof(*e));
	if (!e)
		return -ENOMEM;
	rdmafs__dir_entry__init(e);
	e->name.data = meta_dup(t, d->name, d->name_len);
	e->name.len = d->name_len;
	e->ino = d->ino;
	e->mode = d->type;
	e->cookie = d->id;
	if (!e->name.data)
		return -ENOMEM;
	if (w->req->with_attrs) {
		ret = meta_store_inode_get(t, d->ino, &in);
		if (ret)
			return ret;
		e->attr = attr_out(t, &in);
		if (!e->attr)
			return -ENOMEM;
	}
	size = field_size(rdmafs__dir_entry__get_packed_size(e));
	if (w->used + size > w->room)
		return 1;
	w->used += size;
	w->out->entries[w->out->n_entries++] = e;
	return 0;
}

int meta_op_readdir(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ReaddirReq *req = (const void *)msg;
	struct readdir_walk w = {.req = req};
	struct inode dir;
	int ret;

	ret = get_dir(t, req->ino, &dir);
	if (!ret)
		ret = may(t, &dir, MAY_READ);
	if (ret)
		return ret;
	w.out = meta_alloc(t, sizeof(*w.out));
	if (!w.out)
		return -ENOMEM;
	rdmafs__readdir_resp__init(w.out);
	*resp = &w.out->base;
	if (req->cookie == UINT64_MAX) {
		w.out->eof = true;
		return 0;
	}
	/* room for eof; an entry is at least 6 bytes, which bounds the array */
	w.room = t->resp_cap > 2 ? t->resp_cap - 2 : 0;
	w.max = w.room / 6 + 1;
	if (req->max_entries && req->max_entries < w.max)
		w.max = req->max_entries;
	w.out->entries = meta_alloc(t, w.max * sizeof(*w.out->entries));
	if (!w.out->entries)
		return -ENOMEM;
	ret = meta_store_dirents_from(t, req->ino, req->cookie, readdir_add, &w);
	if (ret < 0)
		return ret;
	/* 0: the entries ran out; 1: the reply is full */
	w.out->eof = ret == 0;
	if (w.out->n_entries == 0 && !w.out->eof)
		return -EMSGSIZE;
	return 0;
}

int meta_op_open(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__OpenReq *req = (const void *)msg;
	Rdmafs__OpenResp *out;
	struct inode in;
	int ret;

	ret = meta_store_inode_get(t, req->ino, &in);
	if (ret)
		return ret;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__open_resp__init(out);
	ret = open_handle(t, &in, req->flags, &out->handle);
	if (ret)
		return ret;
	out->attr = attr_out(t, &in);
	if (!out->attr)
		return -ENOMEM;
	*resp = &out->base;
	return meta_layout_out(t, &in, &out->layout);
}

int meta_op_release(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ReleaseReq *req = (const void *)msg;
	Rdmafs__ReleaseResp *out;
	struct meta_handle_info h;
	struct inode in;
	int ret;

	if (meta_handle_find(t->m, req->handle, &h))
		return -EBADF;
	if (req->ino && req->ino != h.ino)
		return -EINVAL;
	ret = meta_handle_remove(t, req->handle, &h);
	if (ret)
		return ret == -ENOENT ? -EBADF : ret;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__release_resp__init(out);
	*resp = &out->base;

	ret = meta_store_inode_get(t, h.ino, &in);
	if (ret == -ENOENT)
		return 0; /* a directory removed while open */
	if (ret)
		return ret;
	/* an unlinked file's last handle frees it; anything else writes nothing */
	t->caller_flushes = req->flush_before_free;
	if (in.r.nlink == 0 && may_free(t->m, h.ino))
		return free_inode(t, &in, &out->freed);
	return 0;
}

/* fsync: the dispatcher flushes the store before answering (t->durable). */
int meta_op_sync(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	Rdmafs__SyncResp *out = meta_alloc(t, sizeof(*out));

	(void)msg;
	if (!out)
		return -ENOMEM;
	rdmafs__sync_resp__init(out);
	t->durable = true;
	*resp = &out->base;
	return 0;
}

/*
 * Handles a client held before the service restarted, taken back under
 * their numbers. An inode that is gone is reported, not an error: the
 * client's file is stale, and its calls will say so.
 */
int meta_op_reclaim(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ReclaimReq *req = (const void *)msg;
	Rdmafs__ReclaimResp *out;
	struct inode in;
	int ret;

	if (req->n_handles > META_RECLAIM_MAX)
		return -E2BIG;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__reclaim_resp__init(out);
	out->gone = meta_alloc(t, (req->n_handles + 1) * sizeof(*out->gone));
	if (!out->gone)
		return -ENOMEM;
	for (size_t i = 0; i < req->n_handles; i++) {
		const Rdmafs__ReclaimHandle *rh = req->handles[i];
		uint64_t number = rh->handle;

		if (!number || open_access(rh->flags) < 0)
			return -EINVAL;
		ret = meta_store_inode_get(t, rh->ino, &in);
		if (ret == -ENOENT) {
			out->gone[out->n_gone++] = number;
			continue;
		}
		if (!ret)
			ret = meta_handle_add(t, rh->ino, rh->flags, &number);
		if (ret == -EEXIST) {
			/* a retry of a reclaim that went through: the same handle is no error */
			struct meta_handle_info held;

			if (!meta_handle_find(t->m, number, &held) && held.ino == rh->ino)
				ret = 0;
			else
				ret = -EINVAL;
		}
		if (ret)
			return ret;
		out->reclaimed++;
	}
	*resp = &out->base;
	return 0;
}

/* ---- orphans after a restart ---- */

struct orphan_walk {
	uint64_t *inos;
	size_t n, max;
};

static int orphan_found(struct meta_txn *t, const struct inode *in, void *arg)
{
	struct orphan_walk *w = arg;
	uint64_t *grown;

	if (in->r.nlink != 0 || meta_handle_opens(t->m, in->ino))
		return 0;
	if (w->n == w->max) {
		w->max = w->max ? 2 * w->max : 64;
		grown = realloc(w->inos, w->max * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		w->inos = grown;
	}
	w->inos[w->n++] = in->ino;
	return 0;
}

int meta_orphans_sweep(struct meta *m, uint64_t now_sec)
{
	uint64_t first = __atomic_load_n(&m->first_tick, __ATOMIC_RELAXED);
	struct meta_txn t = {.m = m};
	struct orphan_walk w = {0};
	struct inode in;
	int ret;

	if (!meta_in_grace(m) || !first || now_sec < first + m->opts.reclaim_grace_sec)
		return 0;
	clock_gettime(CLOCK_REALTIME, &t.now);
	ret = meta_store_txn_begin(&t, true);
	if (ret)
		goto out;
	ret = meta_store_inodes_from(&t, META_ROOT_INO, orphan_found, &w);
	for (size_t i = 0; i < w.n && !ret; i++) {
		ret = meta_store_inode_get(&t, w.inos[i], &in);
		if (!ret)
			ret = free_inode(&t, &in, NULL);
	}
	if (ret) {
		meta_store_txn_abort(&t);
		goto out;
	}
	ret = meta_store_txn_commit(&t);
	if (ret)
		goto out;
	meta_set_grace(m, false);
	if (w.n)
		meta_log(m, META_LOG_WARN,
			 "reclaim grace over: freed %zu unlinked file(s) no client reclaimed a "
			 "handle for; their chunks are left for rdmafsctl fsck --repair",
			 w.n);
	else
		meta_log(m, META_LOG_INFO, "reclaim grace over: every unlinked file is held");
out:
	if (ret)
		meta_log(m, META_LOG_WARN, "freeing unlinked files after the grace period: %s",
			 strerror(-ret));
	free(w.inos);
	meta_arena_free(t.arena);
	return ret;
}

/* ---- xattrs ---- */

static bool has_prefix(const ProtobufCBinaryData *name, const char *prefix)
{
	size_t len = strlen(prefix);

	return name->len >= len && memcmp(name->data, prefix, len) == 0;
}

static bool is_replicas(const ProtobufCBinaryData *name)
{
	return name->len == strlen(META_XATTR_REPLICAS) &&
	       memcmp(name->data, META_XATTR_REPLICAS, name->len) == 0;
}

static int check_xattr_name(const ProtobufCBinaryData *name)
{
	if (name->len == 0 || name->len > META_XATTR_NAME_MAX)
		return -ERANGE;
	if (memchr(name->data, '\0', name->len))
		return -EINVAL;
	return 0;
}

/* xattr_permission() of fs/xattr.c, without capabilities beyond uid 0. */
static int xattr_may(struct meta_txn *t, const struct inode *in, const ProtobufCBinaryData *name,
		     bool write)
{
	if (has_prefix(name, "trusted."))
		return t->cred.uid == 0 ? 0 : -EPERM;
	if (has_prefix(name, "user.")) {
		if (!S_ISREG(in->r.mode) && !S_ISDIR(in->r.mode))
			return write ? -EPERM : -ENODATA;
		if (write && S_ISDIR(in->r.mode) && (in->r.mode & S_ISVTX) && !is_owner(t, in))
			return -EPERM;
		return may(t, in, write ? MAY_WRITE : MAY_READ);
	}
	/* security.*, system.* and the rest: the owner writes, anyone reads */
	if (write && !is_owner(t, in))
		return -EPERM;
	return 0;
}

#define XATTR_KNOWN (RDMAFS__XATTR_FLAG__XATTR_FLAG_CREATE | RDMAFS__XATTR_FLAG__XATTR_FLAG_REPLACE)

/*
 * POSIX access ACLs, as Linux passes them in system.posix_acl_access
 * (linux/posix_acl_xattr.h): a little-endian u32 version (2), then entries
 * of u16 tag, u16 perm, u32 id. The mode's permission bits are part of the
 * ACL (owner, group class = the mask if there is one, other), so setting it
 * sets them, as every Linux filesystem does; cp -a and tar rely on it.
 */
#define ACL_XATTR_ACCESS  "system.posix_acl_access"
#define ACL_XATTR_VERSION 2u
#define ACL_ENTRY_SIZE	  8u
#define ACL_USER_OBJ	  0x01u
#define ACL_USER	  0x02u
#define ACL_GROUP_OBJ	  0x04u
#define ACL_GROUP	  0x08u
#define ACL_MASK	  0x10u
#define ACL_OTHER	  0x20u

static bool is_access_acl(const ProtobufCBinaryData *name)
{
	return name->len == sizeof(ACL_XATTR_ACCESS) - 1 &&
	       memcmp(name->data, ACL_XATTR_ACCESS, name->len) == 0;
}

/*
 * Takes the permission bits of the access ACL @v into *@mode. Returns 1 when
 * the ACL says no more than the mode (it need not be stored), 0 when it has
 * named users or groups (store it), -EINVAL when it is malformed.
 */
static int acl_to_mode(const ProtobufCBinaryData *v, uint32_t *mode)
{
	uint32_t user = 0, group = 0, mask = 0, other = 0, seen = 0;
	size_t n;

	if (v->len < 4 || (v->len - 4) % ACL_ENTRY_SIZE ||
	    (uint32_t)(v->data[0] | v->data[1] << 8 | v->data[2] << 16 |
		       (uint32_t)v->data[3] << 24) != ACL_XATTR_VERSION)
		return -EINVAL;
	n = (v->len - 4) / ACL_ENTRY_SIZE;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = v->data + 4 + i * ACL_ENTRY_SIZE;
		uint32_t tag = (uint32_t)(e[0] | e[1] << 8), perm = (uint32_t)(e[2] | e[3] << 8);

		if (perm & ~7u)
			return -EINVAL;
		switch (tag) {
		case ACL_USER_OBJ:
			user = perm;
			break;
		case ACL_GROUP_OBJ:
			group = perm;
			break;
		case ACL_MASK:
			mask = perm;
			break;
		case ACL_OTHER:
			other = perm;
			break;
		case ACL_USER:
		case ACL_GROUP:
			break;
		default:
			return -EINVAL;
		}
		/* each of the three required entries and the mask at most once */
		if ((tag & (ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_MASK | ACL_OTHER)) && (seen & tag))
			return -EINVAL;
		seen |= tag;
	}
	if ((seen & (ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_OTHER)) !=
	    (ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_OTHER))
		return -EINVAL;
	if ((seen & (ACL_USER | ACL_GROUP)) && !(seen & ACL_MASK))
		return -EINVAL;
	*mode = (*mode & ~0777u) | user << 6 | ((seen & ACL_MASK) ? mask : group) << 3 | other;
	return (seen & (ACL_USER | ACL_GROUP | ACL_MASK)) ? 0 : 1;
}

int meta_op_setxattr(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__SetxattrReq *req = (const void *)msg;
	const void *old;
	size_t old_len;
	struct inode in;
	int ret;

	if ((req->flags & ~(uint32_t)XATTR_KNOWN) || req->flags == XATTR_KNOWN)
		return -EINVAL;
	ret = check_xattr_name(&req->name);
	if (ret)
		return ret;
	if (req->value.len > META_XATTR_SIZE_MAX)
		return -E2BIG;
	ret = meta_store_inode_get(t, req->ino, &in);
	if (!ret)
		ret = xattr_may(t, &in, &req->name, true);
	if (!ret && is_replicas(&req->name)) {
		/* a file's copies are fixed at create: a directory's say what its new files get */
		if (!S_ISDIR(in.r.mode))
			ret = -EPERM;
		else if (!replicas_parse(req->value.data, req->value.len))
			ret = -EINVAL;
	}
	if (ret)
		return ret;
	ret = meta_store_xattr_get(t, req->ino, req->name.data, req->name.len, &old, &old_len);
	if (ret && ret != -ENOENT)
		return ret;
	if (ret == 0 && (req->flags & RDMAFS__XATTR_FLAG__XATTR_FLAG_CREATE))
		return -EEXIST;
	if (ret == -ENOENT && (req->flags & RDMAFS__XATTR_FLAG__XATTR_FLAG_REPLACE))
		return -ENODATA;
	if (is_access_acl(&req->name)) {
		ret = acl_to_mode(&req->value, &in.r.mode);
		if (ret < 0)
			return ret;
		/* An ACL the mode says in full is not kept, as on Linux filesystems. */
		if (ret == 1) {
			ret = meta_store_xattr_delete(t, req->ino, req->name.data, req->name.len);
			if (ret && ret != -ENOENT)
				return ret;
			goto out_touch;
		}
	}
	ret = meta_store_xattr_put(t, req->ino, req->name.data, req->name.len, req->value.data,
				   req->value.len);
	if (ret)
		return ret;
out_touch:
	touch_ctime(t, &in);
	ret = meta_store_inode_put(t, &in);
	if (ret)
		return ret;
	return empty_resp(t, resp);
}

int meta_op_getxattr(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__GetxattrReq *req = (const void *)msg;
	Rdmafs__GetxattrResp *out;
	const void *value;
	size_t len;
	char digit;
	struct inode in;
	int ret;

	ret = check_xattr_name(&req->name);
	if (!ret)
		ret = meta_store_inode_get(t, req->ino, &in);
	if (!ret)
		ret = xattr_may(t, &in, &req->name, false);
	if (ret)
		return ret;
	if (is_replicas(&req->name) && S_ISREG(in.r.mode)) {
		/* a file's count is in its layout: what the directory said when it was made */
		digit = (char)('0' + (in.replicas > 1 ? in.replicas : 1));
		value = &digit;
		len = 1;
	} else {
		ret = meta_store_xattr_get(t, req->ino, req->name.data, req->name.len, &value,
					   &len);
		if (ret)
			return ret == -ENOENT ? -ENODATA : ret;
	}
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	rdmafs__getxattr_resp__init(out);
	out->value.data = meta_dup(t, value, len);
	out->value.len = len;
	*resp = &out->base;
	return out->value.data ? 0 : -ENOMEM;
}

struct listxattr_walk {
	Rdmafs__ListxattrResp *out;
	size_t max;
};

static int listxattr_add(struct meta_txn *t, const uint8_t *data, size_t len, void *arg)
{
	struct listxattr_walk *w = arg;
	ProtobufCBinaryData name = {.len = len, .data = (uint8_t *)data};
	ProtobufCBinaryData *slot;

	/* listxattr(2) hides trusted.* from the unprivileged */
	if (has_prefix(&name, "trusted.") && t->cred.uid != 0)
		return 0;
	if (w->out->n_names == w->max)
		return -EMSGSIZE;
	slot = &w->out->names[w->out->n_names];
	slot->data = meta_dup(t, data, len);
	slot->len = len;
	if (!slot->data)
		return -ENOMEM;
	w->out->n_names++;
	return 0;
}

int meta_op_listxattr(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ListxattrReq *req = (const void *)msg;
	struct listxattr_walk w;
	struct inode in;
	int ret;

	ret = meta_store_inode_get(t, req->ino, &in);
	if (ret)
		return ret;
	w.out = meta_alloc(t, sizeof(*w.out));
	/* each name costs at least 3 bytes of the reply */
	w.max = t->resp_cap / 3 + 1;
	if (!w.out)
		return -ENOMEM;
	rdmafs__listxattr_resp__init(w.out);
	w.out->names = meta_alloc(t, w.max * sizeof(*w.out->names));
	if (!w.out->names)
		return -ENOMEM;
	*resp = &w.out->base;
	return meta_store_xattrs_each(t, req->ino, listxattr_add, &w);
}

int meta_op_removexattr(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__RemovexattrReq *req = (const void *)msg;
	struct inode in;
	int ret;

	ret = check_xattr_name(&req->name);
	if (!ret)
		ret = meta_store_inode_get(t, req->ino, &in);
	if (!ret)
		ret = xattr_may(t, &in, &req->name, true);
	if (ret)
		return ret;
	ret = meta_store_xattr_delete(t, req->ino, req->name.data, req->name.len);
	if (ret)
		return ret == -ENOENT ? -ENODATA : ret;
	touch_ctime(t, &in);
	ret = meta_store_inode_put(t, &in);
	if (ret)
		return ret;
	return empty_resp(t, resp);
}

/*
 * Stores the daemons' allocation reports of an UPDATE_SIZE. Absolute values,
 * so a retry or a late duplicate only restates a recent truth. A daemon not
 * in the layout (it was drained meanwhile) is skipped. An older file learns
 * its allocation once a report covers its whole layout.
 */
static int update_allocations(struct meta_txn *t, const Rdmafs__UpdateSizeReq *req,
			      const struct inode *in)
{
	uint64_t seen = 0;
	int ret;

	for (size_t i = 0; i < req->n_allocations; i++) {
		const Rdmafs__DaemonAllocation *a = req->allocations[i];
		uint32_t d;

		if (!a || a->uuid.len != RDMAFS_UUID_LEN)
			return -EINVAL;
		for (d = 0; d < in->r.stripe_width; d++)
			if (memcmp(in->daemons[d], a->uuid.data, RDMAFS_UUID_LEN) == 0)
				break;
		if (d == in->r.stripe_width)
			continue;
		ret = meta_store_alloc_put(t, in->ino, a->uuid.data, a->bytes);
		if (ret)
			return ret;
		seen |= 1ull << d;
	}
	/* setting the mark again is harmless: no need to read it first */
	if (in->r.stripe_width &&
	    seen == (in->r.stripe_width == 64 ? UINT64_MAX : (1ull << in->r.stripe_width) - 1))
		return meta_store_alloc_mark(t, in->ino);
	return 0;
}

int meta_op_update_size(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__UpdateSizeReq *req = (const void *)msg;
	struct inode in;
	bool changed = false;
	int ret;

	if (check_timespec(req->mtime))
		return -EINVAL;
	ret = meta_store_inode_get(t, req->ino, &in);
	if (ret)
		return ret;
	if (S_ISDIR(in.r.mode))
		return -EISDIR;
	if (!S_ISREG(in.r.mode))
		return -EINVAL;
	ret = update_allocations(t, req, &in);
	if (ret)
		return ret;
	/* only grows: a late update must not undo another client's extension */
	if (req->size > in.r.size) {
		in.r.size = req->size;
		changed = true;
	}
	if (req->mtime) {
		in.r.mtime_sec = req->mtime->sec;
		in.r.mtime_nsec = req->mtime->nsec;
		touch_ctime(t, &in);
		changed = true;
	}
	if (changed) {
		ret = meta_store_inode_put(t, &in);
		if (ret)
			return ret;
	}
	return attr_resp(t, &in, resp);
}
