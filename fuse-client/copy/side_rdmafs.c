/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy: the rdmafs side, on the client core's filesystem calls
 * (rdmafs_fs.h), the ones rdmafs-fuse makes for the same operations, with the
 * same semantics: rfs_create_file() and rfs_open() take a handle that
 * rfs_release() gives back, writes go to the daemons and the size follows
 * with rfs_update_size() after a commit of the daemons written to (fuse's
 * flush), and the client core frees the data of a file a call removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "copy_i.h"

#define ROOT_INO 1

static void attr_from_stat(const struct stat *st, struct cp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->mode = st->st_mode;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->nlink = (uint32_t)st->st_nlink;
	a->size = (uint64_t)st->st_size;
	a->blocks = (uint64_t)st->st_blocks;
	a->ino = st->st_ino;
	a->rdev = st->st_rdev;
	a->atime = st->st_atim;
	a->mtime = st->st_mtim;
}

static int lookup(struct cp_side *s, uint64_t parent, const char *name, struct cp_attr *a)
{
	struct rfs_entry e;
	int ret = rfs_lookup(s->rfs, &s->cred, parent, name, &e);

	if (!ret)
		attr_from_stat(&e.attr, a);
	return ret;
}

int cp_rdmafs_resolve(struct cp_side *s, struct cp_loc *loc, struct cp_attr *a)
{
	const char *p = loc->path;
	uint64_t ino = ROOT_INO;
	char name[CP_NAME_MAX + 1];
	int ret = 0;

	memset(a, 0, sizeof(*a));
	if (p[0] != '/')
		return -EINVAL;
	for (;;) {
		const char *end;
		size_t n;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchr(p, '/');
		n = end ? (size_t)(end - p) : strlen(p);
		if (n > CP_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0)
			return -EINVAL; /* not resolved: say so rather than guess */
		if (ino != ROOT_INO && !S_ISDIR(a->mode))
			return -ENOTDIR;
		ret = lookup(s, ino, name, a);
		if (ret)
			return ret;
		ino = a->ino;
	}
	if (ino == ROOT_INO) {
		loc->ino = ROOT_INO;
		return s->ops->stat(s, loc, a);
	}
	loc->ino = ino;
	return 0;
}

static int rdmafs_stat(struct cp_side *s, struct cp_loc *loc, struct cp_attr *a)
{
	struct rfs_entry e;
	int ret;

	if (!loc->ino)
		return cp_rdmafs_resolve(s, loc, a);
	ret = rfs_getattr(s->rfs, &s->cred, loc->ino, &e);
	if (!ret)
		attr_from_stat(&e.attr, a);
	return ret;
}

/* Collects rfs_readdir()'s entries into a cp_dir. */
struct list_fill {
	struct cp_dir d;
	size_t cap;
	uint64_t cookie;
	int err;
};

static int list_one(void *arg, const struct rfs_dirent *e)
{
	struct list_fill *f = arg;
	struct cp_dirent *de;

	if (f->d.count == f->cap) {
		size_t ncap = f->cap ? f->cap * 2 : 64;
		struct cp_dirent *n = realloc(f->d.ents, ncap * sizeof(*n));

		if (!n)
			goto err_nomem;
		f->d.ents = n;
		f->cap = ncap;
	}
	de = &f->d.ents[f->d.count];
	attr_from_stat(&e->attr, &de->attr);
	de->name = strdup(e->name);
	if (!de->name)
		goto err_nomem;
	f->d.count++;
	f->cookie = e->cookie;
	return 0;

err_nomem:
	f->err = -ENOMEM;
	return 1;
}

static int rdmafs_list(struct cp_side *s, const struct cp_loc *dir, struct cp_dir *out)
{
	struct list_fill f = {.d = {0}};
	bool eof = false;
	int ret = 0;

	while (!eof && !ret) {
		ret = rfs_readdir(s->rfs, &s->cred, dir->ino, f.cookie, 0, true, list_one, &f,
				  &eof);
		if (!ret)
			ret = f.err;
	}
	if (ret) {
		cp_dir_free(&f.d);
		return ret;
	}
	cp_dir_sort(&f.d);
	*out = f.d;
	return 0;
}

static void release_handle(struct cp_side *s, uint64_t ino, uint64_t handle)
{
	rfs_release(s->rfs, &s->cred, ino, handle, NULL);
}

/* The client core's file object for @f, which @e (from OPEN or CREATE) describes. */
static int file_attach(struct cp_side *s, struct cp_file *f, const struct rfs_entry *e)
{
	struct stat st;
	int ret;

	if (!e->has_layout)
		return -EPROTO;
	ret = rfs_file_create(s->rfs, f->ino, &f->file);
	if (ret)
		return ret;
	rfs_file_merge(f->file, e, &st, NULL, RFS_SEQ_NOW);
	return 0;
}

static int rdmafs_open_read(struct cp_side *s, const struct cp_loc *loc, struct cp_file *f)
{
	struct rfs_entry e;
	int ret;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	ret = rfs_open(s->rfs, &s->cred, loc->ino, O_RDONLY, &f->handle, &e);
	if (ret)
		return ret;
	f->ino = loc->ino;
	ret = file_attach(s, f, &e);
	if (ret) {
		release_handle(s, f->ino, f->handle);
		f->ino = 0;
	}
	return ret;
}

static int rdmafs_read(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len, void *buf)
{
	size_t got = 0;
	int ret = rfs_file_read(f->file, off, len, buf, &got);

	/* past the end the file reads as zeros, as a hole does */
	if (!ret && got < len)
		memset((char *)buf + got, 0, len - got);
	return ret;
}

static int rdmafs_data_extent(struct cp_side *s, struct cp_file *f, uint64_t off, uint64_t size,
			      uint64_t *start, uint64_t *end)
{
	/*
	 * SEEK_DATA here stats chunks one by one: slower than reading, and
	 * reading a missing chunk moves no data. The engine skips zero blocks.
	 */
	if (off >= size)
		return -ENXIO;
	*start = off;
	*end = size;
	return 0;
}

static int rdmafs_create(struct cp_side *s, const struct cp_loc *dir, const char *name,
			 const struct cp_attr *a, struct cp_file *f, uint64_t *ino)
{
	struct rfs_entry e;
	int ret;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	/* the final mode comes with set_attr, after the data */
	ret = rfs_create_file(s->rfs, &s->cred, dir->ino, name, 0600,
			      s->owner ? a->uid : s->cred.uid, s->owner ? a->gid : s->cred.gid,
			      O_WRONLY | O_CREAT | O_EXCL, &f->handle, NULL, &e);
	if (ret)
		return ret;
	f->ino = e.attr.st_ino;
	ret = file_attach(s, f, &e);
	if (!ret)
		rfs_file_made(f->file); /* O_EXCL: ours */
	if (ret) {
		release_handle(s, f->ino, f->handle);
		f->ino = 0;
		return ret;
	}
	*ino = f->ino;
	return 0;
}

static int rdmafs_write(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len,
			const void *buf)
{
	bool size_due;

	/* the size goes to the service once, at finish */
	return rfs_file_write(f->file, off, len, buf, false, &size_due);
}

static int rdmafs_finish(struct cp_side *s, struct cp_file *f, uint64_t size)
{
	int ret = 0;

	/* a tail of zeros was skipped, not written: the size still covers it */
	if (size)
		ret = rfs_file_fallocate(f->file, &s->cred, f->handle, 0, 0, size);
	/* as fsync (a copy is durable when it ends): commit, then the size and st_blocks */
	if (!ret)
		ret = rfs_file_sync(f->file, &s->cred, RFS_SYNC_FSYNC);
	return ret;
}

static int rdmafs_sync(struct cp_side *s, const struct cp_loc *root)
{
	/* every file's data was committed at its finish: what is left is the service's */
	(void)root;
	return rfs_meta_sync(s->rfs);
}

static void rdmafs_close(struct cp_side *s, struct cp_file *f)
{
	if (f->ino)
		release_handle(s, f->ino, f->handle);
	rfs_file_destroy(f->file);
	f->file = NULL;
	f->handle = 0;
	f->ino = 0;
}

static int rdmafs_readlink(struct cp_side *s, const struct cp_loc *loc, char *buf, size_t size)
{
	return rfs_readlink(s->rfs, &s->cred, loc->ino, buf, size);
}

static int rdmafs_listxattr(struct cp_side *s, const struct cp_loc *loc, char **names, size_t *len)
{
	/* room for the longest list Linux allows: one call */
	char *list = malloc(XATTR_LIST_MAX);
	ssize_t got;

	*names = NULL;
	*len = 0;
	if (!list)
		return -ENOMEM;
	got = rfs_listxattr(s->rfs, &s->cred, loc->ino, list, XATTR_LIST_MAX);
	if (got <= 0) {
		free(list);
		return got == -EOPNOTSUPP ? 0 : (int)got;
	}
	*names = realloc(list, (size_t)got) ?: list;
	*len = (size_t)got;
	return 0;
}

static int rdmafs_getxattr(struct cp_side *s, const struct cp_loc *loc, const char *name,
			   void **value, size_t *len)
{
	/* room for the largest value Linux allows: one call */
	void *v = malloc(XATTR_SIZE_MAX);
	ssize_t got;

	if (!v)
		return -ENOMEM;
	got = rfs_getxattr(s->rfs, &s->cred, loc->ino, name, v, XATTR_SIZE_MAX);
	if (got < 0) {
		free(v);
		return (int)got;
	}
	/* keep only what the value needs (realloc may keep the block: still valid) */
	*value = realloc(v, got ? (size_t)got : 1) ?: v;
	*len = (size_t)got;
	return 0;
}

static int rdmafs_setxattr(struct cp_side *s, const struct cp_loc *loc, const char *name,
			   const void *value, size_t len)
{
	return rfs_setxattr(s->rfs, &s->cred, loc->ino, name, value, len, 0);
}

static int rdmafs_mkdir(struct cp_side *s, const struct cp_loc *dir, const char *name,
			const struct cp_attr *a, uint64_t *ino)
{
	struct rfs_entry e;
	int ret;

	/* writable by us until the final pass sets the real mode */
	ret = rfs_mkdir(s->rfs, &s->cred, dir->ino, name, 0700, s->owner ? a->uid : s->cred.uid,
			s->owner ? a->gid : s->cred.gid, &e);
	if (!ret)
		*ino = e.attr.st_ino;
	return ret;
}

static int rdmafs_symlink(struct cp_side *s, const struct cp_loc *dir, const char *name,
			  const char *target, const struct cp_attr *a, uint64_t *ino)
{
	struct rfs_entry e;
	int ret;

	ret = rfs_symlink(s->rfs, &s->cred, dir->ino, name, target, s->owner ? a->uid : s->cred.uid,
			  s->owner ? a->gid : s->cred.gid, &e);
	if (!ret)
		*ino = e.attr.st_ino;
	return ret;
}

static int rdmafs_mknod(struct cp_side *s, const struct cp_loc *dir, const char *name,
			const struct cp_attr *a, uint64_t *ino)
{
	struct rfs_entry e;
	int ret;

	ret = rfs_mknod(s->rfs, &s->cred, dir->ino, name, (a->mode & S_IFMT) | 0600,
			s->owner ? a->uid : s->cred.uid, s->owner ? a->gid : s->cred.gid, a->rdev,
			&e);
	if (!ret)
		*ino = e.attr.st_ino;
	return ret;
}

static int rdmafs_link(struct cp_side *s, const struct cp_loc *target, const struct cp_loc *dir,
		       const char *name)
{
	struct rfs_entry e;

	return rfs_link(s->rfs, &s->cred, target->ino, dir->ino, name, &e);
}

static int rdmafs_rename(struct cp_side *s, const struct cp_loc *dir, const char *from,
			 const char *to)
{
	return rfs_rename(s->rfs, &s->cred, dir->ino, from, dir->ino, to, 0, NULL);
}

static int rdmafs_unlink(struct cp_side *s, const struct cp_loc *dir, const char *name)
{
	return rfs_unlink(s->rfs, &s->cred, dir->ino, name, NULL, NULL);
}

static int rdmafs_set_attr(struct cp_side *s, const struct cp_loc *loc, const struct cp_attr *a,
			   bool owner)
{
	struct rfs_setattr set = {.valid = 0};
	struct rfs_entry e;
	int ret;

	if (owner) {
		set.valid |= RFS_SET_UID | RFS_SET_GID;
		set.uid = a->uid;
		set.gid = a->gid;
	}
	/* a chown clears setuid/setgid, as chown(2) does: the mode must come after it */
	if (owner && (a->mode & 06000) && !S_ISLNK(a->mode)) {
		ret = rfs_setattr(s->rfs, &s->cred, loc->ino, &set, &e);
		if (ret)
			return ret;
		set.valid = 0;
	}
	set.atime = a->atime;
	set.mtime = a->mtime;
	set.valid |= RFS_SET_ATIME | RFS_SET_MTIME;
	if (!S_ISLNK(a->mode)) {
		set.valid |= RFS_SET_MODE;
		set.mode = a->mode & 07777;
	}
	return rfs_setattr(s->rfs, &s->cred, loc->ino, &set, &e);
}

static const struct cp_side_ops rdmafs_ops = {
	.stat = rdmafs_stat,
	.list = rdmafs_list,
	.open_read = rdmafs_open_read,
	.read = rdmafs_read,
	.data_extent = rdmafs_data_extent,
	.create = rdmafs_create,
	.write = rdmafs_write,
	.finish = rdmafs_finish,
	.sync = rdmafs_sync,
	.close = rdmafs_close,
	.readlink = rdmafs_readlink,
	.listxattr = rdmafs_listxattr,
	.getxattr = rdmafs_getxattr,
	.setxattr = rdmafs_setxattr,
	.mkdir = rdmafs_mkdir,
	.symlink = rdmafs_symlink,
	.mknod = rdmafs_mknod,
	.link = rdmafs_link,
	.rename = rdmafs_rename,
	.unlink = rdmafs_unlink,
	.set_attr = rdmafs_set_attr,
};

void cp_side_rdmafs_init(struct cp_side *s, struct rfs *fs)
{
	gid_t groups[RFS_GROUPS_MAX];
	int n = 0;

	memset(s, 0, sizeof(*s));
	s->ops = &rdmafs_ops;
	s->rfs = fs;
	s->is_rdmafs = true;
	s->cred.uid = geteuid();
	s->cred.gid = getegid();
	/* root passes every check the groups could matter for */
	if (s->cred.uid != 0) {
		n = getgroups(RFS_GROUPS_MAX, groups);
		if (n < 0)
			n = 0;
	}
	for (int i = 0; i < n; i++)
		s->cred.groups[i] = groups[i];
	s->cred.n_groups = (uint32_t)n;
}
