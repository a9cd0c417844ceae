/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy: the rdmafs side, on the client core (rdmafs_fs.h). The calls
 * are the ones rdmafs-fuse makes for the same operations, with the same
 * semantics: CREATE/OPEN take a handle that RELEASE gives back, writes go to
 * the daemons and the size follows with UPDATE_SIZE after a CHUNK_COMMIT of
 * the daemons written to (fuse's flush), and a FreedInode in the reply of
 * UNLINK, RENAME or RELEASE has its chunks removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "copy_i.h"

#define ROOT_INO 1

static ProtobufCBinaryData bytes_of(const char *s)
{
	ProtobufCBinaryData b = {.len = strlen(s), .data = (uint8_t *)s};

	return b;
}

static int attr_from_pb(const Rdmafs__Attr *pb, struct cp_attr *a)
{
	if (!pb || pb->ino == 0 || !(pb->mode & S_IFMT))
		return -EPROTO;
	memset(a, 0, sizeof(*a));
	a->mode = pb->mode;
	a->uid = pb->uid;
	a->gid = pb->gid;
	a->nlink = pb->nlink;
	a->size = pb->size;
	a->blocks = pb->blocks;
	a->ino = pb->ino;
	a->rdev = pb->rdev;
	if (pb->atime) {
		a->atime.tv_sec = pb->atime->sec;
		a->atime.tv_nsec = pb->atime->nsec < 1000000000u ? pb->atime->nsec : 0;
	}
	if (pb->mtime) {
		a->mtime.tv_sec = pb->mtime->sec;
		a->mtime.tv_nsec = pb->mtime->nsec < 1000000000u ? pb->mtime->nsec : 0;
	}
	return 0;
}

/* A name off the wire, checked as rdmafs-fuse checks it; malloc()ed. */
static int name_from_pb(const ProtobufCBinaryData *b, char **out)
{
	char *n;

	if (b->len == 0 || b->len > CP_NAME_MAX || memchr(b->data, '/', b->len) ||
	    memchr(b->data, '\0', b->len))
		return -EPROTO;
	n = malloc(b->len + 1);
	if (!n)
		return -ENOMEM;
	memcpy(n, b->data, b->len);
	n[b->len] = '\0';
	if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) {
		free(n);
		return -EPROTO;
	}
	*out = n;
	return 0;
}

static int call(struct cp_side *s, Rdmafs__Method m, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, bool idempotent, ProtobufCMessage **resp)
{
	return rfs_meta_call(s->rfs, m, req, desc, idempotent, resp);
}

/* Removes the chunks of an inode the service just freed. */
static void free_data(struct cp_side *s, const Rdmafs__FreedInode *freed)
{
	struct rfs_layout l;
	int ret;

	if (!freed || !freed->layout)
		return;
	ret = rfs_layout_parse(freed->layout, &l);
	if (!ret)
		ret = rfs_remove_data(s->rfs, freed->ino, &l);
	if (ret)
		cp_msg("inode %llu: chunks not removed (%s); fsck will find them",
		       (unsigned long long)freed->ino, cp_strerror(ret));
}

static int lookup(struct cp_side *s, uint64_t parent, const char *name, struct cp_attr *a)
{
	Rdmafs__LookupReq r = RDMAFS__LOOKUP_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.parent = parent;
	r.name = bytes_of(name);
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_LOOKUP, &r.base, &rdmafs__entry_resp__descriptor, true,
		   &msg);
	if (ret)
		return ret;
	ret = attr_from_pb(((Rdmafs__EntryResp *)msg)->attr, a);
	rfs_meta_free(msg);
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
	Rdmafs__GetattrReq r = RDMAFS__GETATTR_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	if (!loc->ino)
		return cp_rdmafs_resolve(s, loc, a);
	r.ino = loc->ino;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_GETATTR, &r.base, &rdmafs__attr_resp__descriptor, true,
		   &msg);
	if (ret)
		return ret;
	ret = attr_from_pb(((Rdmafs__AttrResp *)msg)->attr, a);
	rfs_meta_free(msg);
	return ret;
}

static int rdmafs_list(struct cp_side *s, const struct cp_loc *dir, struct cp_dir *out)
{
	Rdmafs__ReaddirReq r = RDMAFS__READDIR_REQ__INIT;
	struct cp_dir d = {0};
	uint64_t cookie = 0;
	size_t cap = 0;
	bool eof = false;
	int ret = 0;

	while (!eof && !ret) {
		Rdmafs__ReaddirResp *resp;
		ProtobufCMessage *msg;

		r.ino = dir->ino;
		r.cookie = cookie;
		r.max_entries = 0;
		r.with_attrs = true;
		r.cred = &s->cred;
		ret = call(s, RDMAFS__METHOD__METHOD_READDIR, &r.base,
			   &rdmafs__readdir_resp__descriptor, true, &msg);
		if (ret)
			break;
		resp = (Rdmafs__ReaddirResp *)msg;
		eof = resp->eof;
		if (!eof && resp->n_entries == 0)
			ret = -EPROTO; /* no progress: do not spin */
		for (size_t i = 0; i < resp->n_entries && !ret; i++) {
			const Rdmafs__DirEntry *e = resp->entries[i];
			struct cp_dirent *de;

			if (d.count == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct cp_dirent *n = realloc(d.ents, ncap * sizeof(*n));

				if (!n) {
					ret = -ENOMEM;
					break;
				}
				d.ents = n;
				cap = ncap;
			}
			de = &d.ents[d.count];
			ret = attr_from_pb(e->attr, &de->attr);
			if (!ret && e->ino != de->attr.ino)
				ret = -EPROTO;
			if (!ret)
				ret = name_from_pb(&e->name, &de->name);
			if (!ret)
				d.count++;
			cookie = e->cookie;
		}
		rfs_meta_free(msg);
	}
	if (ret) {
		cp_dir_free(&d);
		return ret;
	}
	cp_dir_sort(&d);
	*out = d;
	return 0;
}

static void release_handle(struct cp_side *s, uint64_t ino, uint64_t handle)
{
	Rdmafs__ReleaseReq r = RDMAFS__RELEASE_REQ__INIT;
	ProtobufCMessage *msg;

	r.handle = handle;
	r.ino = ino;
	r.cred = &s->cred;
	if (call(s, RDMAFS__METHOD__METHOD_RELEASE, &r.base, &rdmafs__release_resp__descriptor,
		 false, &msg) == 0) {
		free_data(s, ((Rdmafs__ReleaseResp *)msg)->freed);
		rfs_meta_free(msg);
	}
}

static int rdmafs_open_read(struct cp_side *s, const struct cp_loc *loc, struct cp_file *f)
{
	Rdmafs__OpenReq r = RDMAFS__OPEN_REQ__INIT;
	Rdmafs__OpenResp *resp;
	ProtobufCMessage *msg;
	int ret;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	r.ino = loc->ino;
	r.flags = O_RDONLY;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_OPEN, &r.base, &rdmafs__open_resp__descriptor, false,
		   &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__OpenResp *)msg;
	f->ino = loc->ino;
	f->handle = resp->handle;
	ret = resp->layout ? rfs_layout_parse(resp->layout, &f->layout) : -EPROTO;
	rfs_meta_free(msg);
	if (ret) {
		release_handle(s, f->ino, f->handle);
		return ret;
	}
	f->has_layout = true;
	return 0;
}

/* A copy of @f's layout for one data call (several threads share a file). */
static struct rfs_layout layout_get(struct cp_side *s, struct cp_file *f)
{
	struct rfs_layout l;

	pthread_mutex_lock(&s->layout_lock);
	l = f->layout;
	pthread_mutex_unlock(&s->layout_lock);
	return l;
}

/*
 * Keeps the layout a data call ended with (it refetched one a drain
 * installed) and records the daemons it wrote to. dirty_mask bits are
 * indexes into the layout: after a change of generation every daemon of the
 * new layout counts as written.
 */
static void layout_put(struct cp_side *s, struct cp_file *f, const struct rfs_layout *l,
		       uint64_t written)
{
	pthread_mutex_lock(&s->layout_lock);
	if (l->generation > f->layout.generation) {
		f->layout = *l;
		if (f->dirty_mask)
			f->dirty_mask = ~0ull;
	}
	if (written && l->generation != f->layout.generation)
		written = ~0ull;
	f->dirty_mask |= written;
	pthread_mutex_unlock(&s->layout_lock);
}

static int rdmafs_read(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len, void *buf)
{
	struct rfs_layout l = layout_get(s, f);
	int ret = rfs_read(s->rfs, f->ino, &l, off, len, buf);

	layout_put(s, f, &l, 0);
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
	Rdmafs__CreateReq r = RDMAFS__CREATE_REQ__INIT;
	Rdmafs__CreateResp *resp;
	ProtobufCMessage *msg;
	int ret;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	r.parent = dir->ino;
	r.name = bytes_of(name);
	/* the final mode comes with set_attr, after the data */
	r.mode = S_IFREG | 0600;
	r.uid = s->owner ? a->uid : s->cred.uid;
	r.gid = s->owner ? a->gid : s->cred.gid;
	r.exclusive = true;
	r.open_flags = O_WRONLY | O_CREAT | O_EXCL;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_CREATE, &r.base, &rdmafs__create_resp__descriptor,
		   false, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__CreateResp *)msg;
	if (!resp->attr || !resp->attr->ino) {
		rfs_meta_free(msg);
		return -EPROTO;
	}
	f->ino = resp->attr->ino;
	f->handle = resp->handle;
	ret = resp->layout ? rfs_layout_parse(resp->layout, &f->layout) : -EPROTO;
	rfs_meta_free(msg);
	if (ret) {
		release_handle(s, f->ino, f->handle);
		return ret;
	}
	f->has_layout = true;
	*ino = f->ino;
	return 0;
}

static int rdmafs_write(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len,
			const void *buf)
{
	struct rfs_layout l = layout_get(s, f);
	uint64_t written = 0;
	int ret = rfs_write(s->rfs, f->ino, &l, off, len, buf, false, &written);

	layout_put(s, f, &l, written);
	return ret;
}

static int rdmafs_finish(struct cp_side *s, struct cp_file *f, uint64_t size)
{
	Rdmafs__UpdateSizeReq r = RDMAFS__UPDATE_SIZE_REQ__INIT;
	struct rfs_alloc_report report = {.known = 0};
	struct rfs_layout l = layout_get(s, f);
	ProtobufCMessage *msg;
	uint64_t mask;
	int ret;

	pthread_mutex_lock(&s->layout_lock);
	mask = f->dirty_mask;
	pthread_mutex_unlock(&s->layout_lock);
	/* fuse's flush: commit the daemons written to, then tell the size and st_blocks */
	if (mask) {
		ret = rfs_commit_alloc(s->rfs, f->ino, &l, mask, 0, true, &report);
		layout_put(s, f, &l, 0);
		if (ret)
			return ret;
	}
	if (!size && !report.known)
		return 0;
	/* the report indexes the layout the commit ended with */
	if (report.known)
		rfs_alloc_report_attach(&report, &l, &r);
	r.ino = f->ino;
	r.size = size;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_UPDATE_SIZE, &r.base, &rdmafs__attr_resp__descriptor,
		   true, &msg);
	if (ret)
		return ret;
	rfs_meta_free(msg);
	return 0;
}

static void rdmafs_close(struct cp_side *s, struct cp_file *f)
{
	if (f->ino)
		release_handle(s, f->ino, f->handle);
	f->handle = 0;
	f->ino = 0;
}

static int rdmafs_readlink(struct cp_side *s, const struct cp_loc *loc, char *buf, size_t size)
{
	Rdmafs__ReadlinkReq r = RDMAFS__READLINK_REQ__INIT;
	Rdmafs__ReadlinkResp *resp;
	ProtobufCMessage *msg;
	int ret;

	r.ino = loc->ino;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_READLINK, &r.base, &rdmafs__readlink_resp__descriptor,
		   true, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__ReadlinkResp *)msg;
	if (resp->target.len == 0 || memchr(resp->target.data, '\0', resp->target.len)) {
		ret = -EPROTO;
	} else if (resp->target.len >= size) {
		ret = -ENAMETOOLONG;
	} else {
		memcpy(buf, resp->target.data, resp->target.len);
		buf[resp->target.len] = '\0';
	}
	rfs_meta_free(msg);
	return ret;
}

static int rdmafs_listxattr(struct cp_side *s, const struct cp_loc *loc, char **names, size_t *len)
{
	Rdmafs__ListxattrReq r = RDMAFS__LISTXATTR_REQ__INIT;
	Rdmafs__ListxattrResp *resp;
	ProtobufCMessage *msg;
	size_t total = 0, pos = 0;
	char *list;
	int ret;

	*names = NULL;
	*len = 0;
	r.ino = loc->ino;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_LISTXATTR, &r.base,
		   &rdmafs__listxattr_resp__descriptor, true, &msg);
	if (ret)
		return ret == -EOPNOTSUPP ? 0 : ret;
	resp = (Rdmafs__ListxattrResp *)msg;
	for (size_t i = 0; i < resp->n_names; i++) {
		if (resp->names[i].len == 0 || resp->names[i].len > XATTR_NAME_MAX ||
		    memchr(resp->names[i].data, '\0', resp->names[i].len)) {
			rfs_meta_free(msg);
			return -EPROTO;
		}
		total += resp->names[i].len + 1;
	}
	if (!total) {
		rfs_meta_free(msg);
		return 0;
	}
	list = malloc(total);
	if (!list) {
		rfs_meta_free(msg);
		return -ENOMEM;
	}
	for (size_t i = 0; i < resp->n_names; i++) {
		memcpy(list + pos, resp->names[i].data, resp->names[i].len);
		pos += resp->names[i].len;
		list[pos++] = '\0';
	}
	rfs_meta_free(msg);
	*names = list;
	*len = total;
	return 0;
}

static int rdmafs_getxattr(struct cp_side *s, const struct cp_loc *loc, const char *name,
			   void **value, size_t *len)
{
	Rdmafs__GetxattrReq r = RDMAFS__GETXATTR_REQ__INIT;
	Rdmafs__GetxattrResp *resp;
	ProtobufCMessage *msg;
	void *v;
	int ret;

	r.ino = loc->ino;
	r.name = bytes_of(name);
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_GETXATTR, &r.base, &rdmafs__getxattr_resp__descriptor,
		   true, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__GetxattrResp *)msg;
	v = malloc(resp->value.len ? resp->value.len : 1);
	if (!v) {
		rfs_meta_free(msg);
		return -ENOMEM;
	}
	if (resp->value.len)
		memcpy(v, resp->value.data, resp->value.len);
	*value = v;
	*len = resp->value.len;
	rfs_meta_free(msg);
	return 0;
}

static int rdmafs_setxattr(struct cp_side *s, const struct cp_loc *loc, const char *name,
			   const void *value, size_t len)
{
	Rdmafs__SetxattrReq r = RDMAFS__SETXATTR_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.ino = loc->ino;
	r.name = bytes_of(name);
	r.value.data = (uint8_t *)value;
	r.value.len = len;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_SETXATTR, &r.base, &rdmafs__empty__descriptor, true,
		   &msg);
	if (!ret)
		rfs_meta_free(msg);
	return ret;
}

/* The inode of an EntryResp, then frees it. */
static int entry_ino(ProtobufCMessage *msg, uint64_t *ino)
{
	Rdmafs__EntryResp *e = (Rdmafs__EntryResp *)msg;
	int ret = e->attr && e->attr->ino ? 0 : -EPROTO;

	if (!ret)
		*ino = e->attr->ino;
	rfs_meta_free(msg);
	return ret;
}

static int rdmafs_mkdir(struct cp_side *s, const struct cp_loc *dir, const char *name,
			const struct cp_attr *a, uint64_t *ino)
{
	Rdmafs__MkdirReq r = RDMAFS__MKDIR_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.parent = dir->ino;
	r.name = bytes_of(name);
	r.mode = 0700; /* writable by us until the final pass sets the real mode */
	r.uid = s->owner ? a->uid : s->cred.uid;
	r.gid = s->owner ? a->gid : s->cred.gid;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_MKDIR, &r.base, &rdmafs__entry_resp__descriptor, false,
		   &msg);
	return ret ? ret : entry_ino(msg, ino);
}

static int rdmafs_symlink(struct cp_side *s, const struct cp_loc *dir, const char *name,
			  const char *target, const struct cp_attr *a, uint64_t *ino)
{
	Rdmafs__SymlinkReq r = RDMAFS__SYMLINK_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.parent = dir->ino;
	r.name = bytes_of(name);
	r.target = bytes_of(target);
	r.uid = s->owner ? a->uid : s->cred.uid;
	r.gid = s->owner ? a->gid : s->cred.gid;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_SYMLINK, &r.base, &rdmafs__entry_resp__descriptor,
		   false, &msg);
	return ret ? ret : entry_ino(msg, ino);
}

static int rdmafs_mknod(struct cp_side *s, const struct cp_loc *dir, const char *name,
			const struct cp_attr *a, uint64_t *ino)
{
	Rdmafs__MknodReq r = RDMAFS__MKNOD_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.parent = dir->ino;
	r.name = bytes_of(name);
	r.mode = (a->mode & S_IFMT) | 0600;
	r.uid = s->owner ? a->uid : s->cred.uid;
	r.gid = s->owner ? a->gid : s->cred.gid;
	r.rdev = a->rdev;
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_MKNOD, &r.base, &rdmafs__entry_resp__descriptor, false,
		   &msg);
	return ret ? ret : entry_ino(msg, ino);
}

static int rdmafs_link(struct cp_side *s, const struct cp_loc *target, const struct cp_loc *dir,
		       const char *name)
{
	Rdmafs__LinkReq r = RDMAFS__LINK_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.ino = target->ino;
	r.new_parent = dir->ino;
	r.new_name = bytes_of(name);
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_LINK, &r.base, &rdmafs__entry_resp__descriptor, false,
		   &msg);
	if (!ret)
		rfs_meta_free(msg);
	return ret;
}

static int rdmafs_rename(struct cp_side *s, const struct cp_loc *dir, const char *from,
			 const char *to)
{
	Rdmafs__RenameReq r = RDMAFS__RENAME_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.old_parent = dir->ino;
	r.old_name = bytes_of(from);
	r.new_parent = dir->ino;
	r.new_name = bytes_of(to);
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_RENAME, &r.base, &rdmafs__rename_resp__descriptor,
		   false, &msg);
	if (ret)
		return ret;
	free_data(s, ((Rdmafs__RenameResp *)msg)->freed);
	rfs_meta_free(msg);
	return 0;
}

static int rdmafs_unlink(struct cp_side *s, const struct cp_loc *dir, const char *name)
{
	Rdmafs__UnlinkReq r = RDMAFS__UNLINK_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.parent = dir->ino;
	r.name = bytes_of(name);
	r.cred = &s->cred;
	ret = call(s, RDMAFS__METHOD__METHOD_UNLINK, &r.base, &rdmafs__unlink_resp__descriptor,
		   false, &msg);
	if (ret)
		return ret;
	free_data(s, ((Rdmafs__UnlinkResp *)msg)->freed);
	rfs_meta_free(msg);
	return 0;
}

static int rdmafs_set_attr(struct cp_side *s, const struct cp_loc *loc, const struct cp_attr *a,
			   bool owner)
{
	Rdmafs__SetattrReq r = RDMAFS__SETATTR_REQ__INIT;
	Rdmafs__Timespec at = RDMAFS__TIMESPEC__INIT, mt = RDMAFS__TIMESPEC__INIT;
	ProtobufCMessage *msg;
	int ret;

	r.ino = loc->ino;
	r.cred = &s->cred;
	if (owner) {
		r.valid |= RDMAFS__SETATTR_VALID__SETATTR_VALID_UID |
			   RDMAFS__SETATTR_VALID__SETATTR_VALID_GID;
		r.uid = a->uid;
		r.gid = a->gid;
	}
	/* a chown clears setuid/setgid, as chown(2) does: the mode must come after it */
	if (owner && (a->mode & 06000) && !S_ISLNK(a->mode)) {
		ret = call(s, RDMAFS__METHOD__METHOD_SETATTR, &r.base,
			   &rdmafs__attr_resp__descriptor, true, &msg);
		if (ret)
			return ret;
		rfs_meta_free(msg);
		r.valid = 0;
	}
	at.sec = a->atime.tv_sec;
	at.nsec = (uint32_t)a->atime.tv_nsec;
	mt.sec = a->mtime.tv_sec;
	mt.nsec = (uint32_t)a->mtime.tv_nsec;
	r.atime = &at;
	r.mtime = &mt;
	r.valid |= RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME |
		   RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME;
	if (!S_ISLNK(a->mode)) {
		r.valid |= RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
		r.mode = a->mode & 07777;
	}
	ret = call(s, RDMAFS__METHOD__METHOD_SETATTR, &r.base, &rdmafs__attr_resp__descriptor, true,
		   &msg);
	if (!ret)
		rfs_meta_free(msg);
	return ret;
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
	gid_t groups[64];
	int n = 0;

	memset(s, 0, sizeof(*s));
	s->ops = &rdmafs_ops;
	s->rfs = fs;
	s->is_rdmafs = true;
	pthread_mutex_init(&s->layout_lock, NULL);
	rdmafs__cred__init(&s->cred);
	s->cred.uid = geteuid();
	s->cred.gid = getegid();
	/* root passes every check the groups could matter for */
	if (s->cred.uid != 0) {
		n = getgroups(64, groups);
		if (n < 0)
			n = 0;
	}
	for (int i = 0; i < n; i++)
		s->groups[i] = groups[i];
	s->cred.groups = s->groups;
	s->cred.n_groups = (size_t)n;
}
