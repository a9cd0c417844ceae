// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The client core's filesystem calls in plain C types (rdmafs_fs.h): each
 * builds its protobuf request, calls the metadata service through
 * rfs_meta_call() and checks and converts the answer. Protobuf stays here
 * and in fs_client.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "rdmafs.pb-c.h"
#include "fs_client_i.h"

/* A caller's credentials as the wire carries them; NULL stays NULL (uid 0). */
struct wire_cred {
	Rdmafs__Cred pb;
	uint32_t groups[RFS_GROUPS_MAX];
};

static Rdmafs__Cred *cred_to_wire(const struct rfs_cred *c, struct wire_cred *w)
{
	if (!c)
		return NULL;
	rdmafs__cred__init(&w->pb);
	w->pb.uid = c->uid;
	w->pb.gid = c->gid;
	w->pb.n_groups = c->n_groups < RFS_GROUPS_MAX ? c->n_groups : RFS_GROUPS_MAX;
	memcpy(w->groups, c->groups, w->pb.n_groups * sizeof(w->groups[0]));
	w->pb.groups = w->groups;
	return &w->pb;
}

/* A name or target from the caller, as protobuf bytes; the service validates it. */
static ProtobufCBinaryData bytes_of(const char *s)
{
	ProtobufCBinaryData b = {.len = strlen(s), .data = (uint8_t *)s};

	return b;
}

static void timespec_from_wire(const Rdmafs__Timespec *t, struct timespec *out)
{
	out->tv_sec = t ? t->sec : 0;
	out->tv_nsec = t && t->nsec < 1000000000u ? t->nsec : 0;
}

/* Checks an Attr off the wire and converts it. */
static int attr_from_wire(const Rdmafs__Attr *a, struct stat *st, uint64_t *generation)
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
	timespec_from_wire(a->atime, &st->st_atim);
	timespec_from_wire(a->mtime, &st->st_mtim);
	timespec_from_wire(a->ctime, &st->st_ctim);
	if (generation)
		*generation = a->generation;
	return 0;
}

/* A directory's attributes after a change of its entries, when the reply has them. */
static void dir_after_from_wire(const Rdmafs__Attr *a, struct rfs_dir_after *out)
{
	out->valid = a && attr_from_wire(a, &out->attr, NULL) == 0 && S_ISDIR(out->attr.st_mode);
}

/* An entry's attributes and, for a regular file, its layout. */
static int entry_from_wire(const Rdmafs__Attr *a, const Rdmafs__Layout *layout,
			   struct rfs_entry *out)
{
	int ret = attr_from_wire(a, &out->attr, &out->generation);

	if (ret)
		return ret;
	out->parent.valid = false;
	out->has_layout = false;
	if (layout && S_ISREG(a->mode)) {
		ret = rfs_layout_parse(layout, &out->layout);
		if (ret)
			return ret;
		out->has_layout = true;
	}
	return 0;
}

/* Copies a name off the wire into @out (RFS_NAME_MAX + 1 bytes), checking it. */
static int name_from_wire(const ProtobufCBinaryData *b, char *out)
{
	if (b->len == 0 || b->len > RFS_NAME_MAX || memchr(b->data, '/', b->len) ||
	    memchr(b->data, '\0', b->len))
		return -EPROTO;
	memcpy(out, b->data, b->len);
	out[b->len] = '\0';
	if (strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
		return -EPROTO;
	return 0;
}

/*
 * The data a removed file leaves on the daemons. An empty file leaves none:
 * a chunk at or past a file's size is no file's data (fsck's "past the end"
 * orphan), since truncates cut such chunks, and a file is freed only once
 * its last handle went, its writers' sizes told. So unlinking one of many
 * empty files asks no daemon for anything.
 */
static void freed_from_wire(const Rdmafs__FreedInode *f, struct rfs_freed *out)
{
	memset(out, 0, sizeof(*out));
	if (!f || !f->layout || f->ino == 0 || f->size == 0)
		return;
	if (rfs_layout_parse(f->layout, &out->layout)) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %" PRIu64 ": freed with a malformed layout; fsck will find its "
			   "chunks",
			   f->ino);
		return;
	}
	out->ino = f->ino;
	out->freed = true;
}

void rfs_free_data(struct rfs *fs, const struct rfs_freed *freed)
{
	struct rfs_layout layout;
	int ret;

	if (!freed || !freed->freed)
		return;
	/*
	 * The service answered without a flush (flush_before_free): the file must
	 * not come back over removed chunks after its power loss. Callers freeing at
	 * once share the flush (the service batches SYNCs).
	 */
	ret = rfs_meta_sync(fs);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %" PRIu64 ": chunks not removed: the metadata service did not "
			   "flush its removal (%s); fsck will find them",
			   freed->ino, xprt_strerror(ret));
		return;
	}
	if (freed->service_run && rfs_service_run(fs) != freed->service_run) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %" PRIu64 ": chunks not removed: the metadata service restarted "
			   "after freeing it, and may not have kept that; fsck will find them",
			   freed->ino);
		return;
	}
	layout = freed->layout;
	ret = rfs_remove_data(fs, freed->ino, &layout);
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %" PRIu64 ": chunks not removed (%s); fsck will find them",
			   freed->ino, xprt_strerror(ret));
}

/*
 * Hands @f to the caller, or frees the data now when the caller did not ask.
 * @run: the service's run as known before the call was sent; a call answered
 * by a later run then keeps the chunks (rfs_free_data()), never the reverse.
 */
static void freed_out(struct rfs *fs, const Rdmafs__FreedInode *f, uint64_t run,
		      struct rfs_freed *out)
{
	struct rfs_freed local, *o = out ? out : &local;

	freed_from_wire(f, o);
	/* 0: the call made the first connection, which learnt the run */
	o->service_run = run ? run : rfs_service_run(fs);
	if (!out)
		rfs_free_data(fs, &local);
}

/* A call whose reply is an EntryResp. */
static int entry_call(struct rfs *fs, uint32_t method, const ProtobufCMessage *req, bool idempotent,
		      struct rfs_entry *out)
{
	ProtobufCMessage *msg;
	Rdmafs__EntryResp *resp;
	int ret;

	ret = rfs_meta_call(fs, method, req, &rdmafs__entry_resp__descriptor, idempotent, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__EntryResp *)msg;
	ret = entry_from_wire(resp->attr, resp->layout, out);
	if (!ret)
		dir_after_from_wire(resp->parent, &out->parent);
	rfs_meta_free(msg);
	return ret;
}

/* A call whose reply is an AttrResp. */
static int attr_call(struct rfs *fs, uint32_t method, const ProtobufCMessage *req,
		     struct rfs_entry *out)
{
	ProtobufCMessage *msg;
	Rdmafs__AttrResp *resp;
	int ret;

	ret = rfs_meta_call(fs, method, req, &rdmafs__attr_resp__descriptor, true, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__AttrResp *)msg;
	ret = entry_from_wire(resp->attr, resp->layout, out);
	rfs_meta_free(msg);
	return ret;
}

/* A call whose reply carries nothing. */
static int empty_call(struct rfs *fs, uint32_t method, const ProtobufCMessage *req, bool idempotent)
{
	ProtobufCMessage *msg;
	int ret;

	ret = rfs_meta_call(fs, method, req, &rdmafs__empty__descriptor, idempotent, &msg);
	if (!ret)
		rfs_meta_free(msg);
	return ret;
}

int rfs_lookup(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	       struct rfs_entry *out)
{
	Rdmafs__LookupReq r = RDMAFS__LOOKUP_REQ__INIT;
	struct wire_cred w;

	r.parent = parent;
	r.name = bytes_of(name);
	r.cred = cred_to_wire(cred, &w);
	return entry_call(fs, RDMAFS__METHOD__METHOD_LOOKUP, &r.base, true, out);
}

int rfs_getattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, struct rfs_entry *out)
{
	Rdmafs__GetattrReq r = RDMAFS__GETATTR_REQ__INIT;
	struct wire_cred w;

	r.ino = ino;
	r.cred = cred_to_wire(cred, &w);
	return attr_call(fs, RDMAFS__METHOD__METHOD_GETATTR, &r.base, out);
}

#define SETATTR_KNOWN                                                                              \
	(RFS_SET_MODE | RFS_SET_UID | RFS_SET_GID | RFS_SET_SIZE | RFS_SET_ATIME | RFS_SET_MTIME | \
	 RFS_SET_ATIME_NOW | RFS_SET_MTIME_NOW | RFS_SET_CTIME)

int rfs_setattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino,
		const struct rfs_setattr *set, struct rfs_entry *out)
{
	Rdmafs__SetattrReq r = RDMAFS__SETATTR_REQ__INIT;
	Rdmafs__Timespec at = RDMAFS__TIMESPEC__INIT, mt = RDMAFS__TIMESPEC__INIT,
			 ct = RDMAFS__TIMESPEC__INIT;
	struct wire_cred w;

	r.ino = ino;
	r.valid = set->valid & SETATTR_KNOWN;
	r.mode = set->mode & 07777;
	r.uid = set->uid;
	r.gid = set->gid;
	r.size = set->size;
	r.handle = set->handle;
	if ((set->valid & RFS_SET_ATIME) && !(set->valid & RFS_SET_ATIME_NOW)) {
		at.sec = set->atime.tv_sec;
		at.nsec = (uint32_t)set->atime.tv_nsec;
		r.atime = &at;
	}
	if ((set->valid & RFS_SET_MTIME) && !(set->valid & RFS_SET_MTIME_NOW)) {
		mt.sec = set->mtime.tv_sec;
		mt.nsec = (uint32_t)set->mtime.tv_nsec;
		r.mtime = &mt;
	}
	if (set->valid & RFS_SET_CTIME) {
		ct.sec = set->ctime.tv_sec;
		ct.nsec = (uint32_t)set->ctime.tv_nsec;
		r.ctime = &ct;
	}
	r.cred = cred_to_wire(cred, &w);
	return attr_call(fs, RDMAFS__METHOD__METHOD_SETATTR, &r.base, out);
}

int rfs_mknod(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	      uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev, struct rfs_entry *out)
{
	Rdmafs__MknodReq r = RDMAFS__MKNOD_REQ__INIT;
	struct wire_cred w;

	r.parent = parent;
	r.name = bytes_of(name);
	r.mode = mode;
	r.uid = uid;
	r.gid = gid;
	r.rdev = rdev;
	r.cred = cred_to_wire(cred, &w);
	return entry_call(fs, RDMAFS__METHOD__METHOD_MKNOD, &r.base, false, out);
}

int rfs_mkdir(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	      uint32_t mode, uint32_t uid, uint32_t gid, struct rfs_entry *out)
{
	Rdmafs__MkdirReq r = RDMAFS__MKDIR_REQ__INIT;
	struct wire_cred w;

	r.parent = parent;
	r.name = bytes_of(name);
	r.mode = mode & 07777;
	r.uid = uid;
	r.gid = gid;
	r.cred = cred_to_wire(cred, &w);
	return entry_call(fs, RDMAFS__METHOD__METHOD_MKDIR, &r.base, false, out);
}

int rfs_symlink(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
		const char *target, uint32_t uid, uint32_t gid, struct rfs_entry *out)
{
	Rdmafs__SymlinkReq r = RDMAFS__SYMLINK_REQ__INIT;
	struct wire_cred w;

	r.parent = parent;
	r.name = bytes_of(name);
	r.target = bytes_of(target);
	r.uid = uid;
	r.gid = gid;
	r.cred = cred_to_wire(cred, &w);
	return entry_call(fs, RDMAFS__METHOD__METHOD_SYMLINK, &r.base, false, out);
}

int rfs_link(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t new_parent,
	     const char *new_name, struct rfs_entry *out)
{
	Rdmafs__LinkReq r = RDMAFS__LINK_REQ__INIT;
	struct wire_cred w;

	r.ino = ino;
	r.new_parent = new_parent;
	r.new_name = bytes_of(new_name);
	r.cred = cred_to_wire(cred, &w);
	return entry_call(fs, RDMAFS__METHOD__METHOD_LINK, &r.base, false, out);
}

int rfs_unlink(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	       struct rfs_freed *freed, struct rfs_dir_after *dir)
{
	Rdmafs__UnlinkReq r = RDMAFS__UNLINK_REQ__INIT;
	ProtobufCMessage *msg;
	struct wire_cred w;
	uint64_t run;
	int ret;

	r.parent = parent;
	r.name = bytes_of(name);
	r.cred = cred_to_wire(cred, &w);
	r.flush_before_free = true; /* rfs_free_data() */
	run = rfs_service_run(fs);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_UNLINK, &r.base,
			    &rdmafs__unlink_resp__descriptor, false, &msg);
	if (ret)
		return ret;
	freed_out(fs, ((Rdmafs__UnlinkResp *)msg)->freed, run, freed);
	if (dir)
		dir_after_from_wire(((Rdmafs__UnlinkResp *)msg)->parent, dir);
	rfs_meta_free(msg);
	return 0;
}

int rfs_rmdir(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name)
{
	Rdmafs__RmdirReq r = RDMAFS__RMDIR_REQ__INIT;
	struct wire_cred w;

	r.parent = parent;
	r.name = bytes_of(name);
	r.cred = cred_to_wire(cred, &w);
	return empty_call(fs, RDMAFS__METHOD__METHOD_RMDIR, &r.base, false);
}

int rfs_rename(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	       uint64_t new_parent, const char *new_name, unsigned flags, struct rfs_freed *freed)
{
	Rdmafs__RenameReq r = RDMAFS__RENAME_REQ__INIT;
	ProtobufCMessage *msg;
	struct wire_cred w;
	uint64_t run;
	int ret;

	if (flags & ~(RFS_RENAME_NOREPLACE | RFS_RENAME_EXCHANGE))
		return -EINVAL;
	r.old_parent = parent;
	r.old_name = bytes_of(name);
	r.new_parent = new_parent;
	r.new_name = bytes_of(new_name);
	r.flags = flags;
	r.cred = cred_to_wire(cred, &w);
	r.flush_before_free = true; /* rfs_free_data() */
	run = rfs_service_run(fs);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_RENAME, &r.base,
			    &rdmafs__rename_resp__descriptor, false, &msg);
	if (ret)
		return ret;
	freed_out(fs, ((Rdmafs__RenameResp *)msg)->freed, run, freed);
	rfs_meta_free(msg);
	return 0;
}

int rfs_open(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, int flags, uint64_t *handle,
	     struct rfs_entry *out)
{
	Rdmafs__OpenReq r = RDMAFS__OPEN_REQ__INIT;
	Rdmafs__OpenResp *resp;
	ProtobufCMessage *msg;
	struct wire_cred w;
	int ret;

	r.ino = ino;
	r.flags = (uint32_t)flags;
	r.cred = cred_to_wire(cred, &w);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_OPEN, &r.base,
			    &rdmafs__open_resp__descriptor, false, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__OpenResp *)msg;
	ret = entry_from_wire(resp->attr, resp->layout, out);
	if (!ret && S_ISREG(out->attr.st_mode) && !out->has_layout)
		ret = -EPROTO;
	if (ret) {
		rfs_release(fs, cred, ino, resp->handle, NULL);
	} else {
		*handle = resp->handle;
		rfs_held_add(fs, resp->handle, ino, flags);
	}
	rfs_meta_free(msg);
	return ret;
}

int rfs_create_file(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
		    uint32_t mode, uint32_t uid, uint32_t gid, int flags, uint64_t *handle,
		    bool *created, struct rfs_entry *out)
{
	Rdmafs__CreateReq r = RDMAFS__CREATE_REQ__INIT;
	Rdmafs__CreateResp *resp;
	ProtobufCMessage *msg;
	struct wire_cred w;
	int ret;

	r.parent = parent;
	r.name = bytes_of(name);
	r.mode = S_IFREG | (mode & 07777);
	r.uid = uid;
	r.gid = gid;
	r.exclusive = (flags & O_EXCL) != 0;
	r.open_flags = (uint32_t)flags;
	r.cred = cred_to_wire(cred, &w);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_CREATE, &r.base,
			    &rdmafs__create_resp__descriptor, false, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__CreateResp *)msg;
	ret = entry_from_wire(resp->attr, resp->layout, out);
	if (!ret && (!S_ISREG(out->attr.st_mode) || !out->has_layout))
		ret = -EPROTO;
	if (ret) {
		rfs_release(fs, cred, resp->attr ? resp->attr->ino : 0, resp->handle, NULL);
	} else {
		*handle = resp->handle;
		rfs_held_add(fs, resp->handle, out->attr.st_ino, flags);
		if (created)
			*created = resp->created;
		dir_after_from_wire(resp->parent, &out->parent);
	}
	rfs_meta_free(msg);
	return ret;
}

int rfs_release(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t handle,
		struct rfs_freed *freed)
{
	Rdmafs__ReleaseReq r = RDMAFS__RELEASE_REQ__INIT;
	ProtobufCMessage *msg;
	struct wire_cred w;
	uint64_t run;
	int ret;

	rfs_held_remove(fs, handle);
	r.handle = handle;
	r.ino = ino;
	r.cred = cred_to_wire(cred, &w);
	r.flush_before_free = true; /* rfs_free_data() */
	run = rfs_service_run(fs);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_RELEASE, &r.base,
			    &rdmafs__release_resp__descriptor, false, &msg);
	if (ret)
		return ret;
	freed_out(fs, ((Rdmafs__ReleaseResp *)msg)->freed, run, freed);
	rfs_meta_free(msg);
	return 0;
}

int rfs_readlink(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, char *buf, size_t size)
{
	Rdmafs__ReadlinkReq r = RDMAFS__READLINK_REQ__INIT;
	Rdmafs__ReadlinkResp *resp;
	ProtobufCMessage *msg;
	struct wire_cred w;
	int ret = 0;

	r.ino = ino;
	r.cred = cred_to_wire(cred, &w);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_READLINK, &r.base,
			    &rdmafs__readlink_resp__descriptor, true, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__ReadlinkResp *)msg;
	if (resp->target.len == 0 || resp->target.len >= PATH_MAX ||
	    memchr(resp->target.data, '\0', resp->target.len)) {
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

/* Checks one entry of a READDIR reply and converts it; @name has RFS_NAME_MAX + 1 bytes. */
static int dirent_from_wire(const Rdmafs__DirEntry *d, bool plus, char *name,
			    struct rfs_dirent *out)
{
	int ret;

	if (!d || d->cookie > INT64_MAX - 2 || d->ino == 0 || name_from_wire(&d->name, name))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->name = name;
	out->ino = d->ino;
	out->type = d->mode & S_IFMT;
	out->cookie = d->cookie;
	if (plus) {
		ret = attr_from_wire(d->attr, &out->attr, &out->generation);
		if (ret)
			return ret;
		if (out->attr.st_ino != d->ino)
			return -EPROTO;
		out->has_attr = true;
		out->type = out->attr.st_mode & S_IFMT;
	}
	return 0;
}

int rfs_readdir(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t cookie,
		uint32_t max_entries, bool plus, rfs_dirent_cb cb, void *arg, bool *eof)
{
	Rdmafs__ReaddirReq r = RDMAFS__READDIR_REQ__INIT;
	char name[RFS_NAME_MAX + 1];
	Rdmafs__ReaddirResp *resp;
	struct rfs_dirent entry;
	ProtobufCMessage *msg;
	struct wire_cred w;
	int ret;

	*eof = false;
	r.ino = ino;
	r.cookie = cookie;
	r.max_entries = max_entries;
	r.with_attrs = plus;
	r.cred = cred_to_wire(cred, &w);
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_READDIR, &r.base,
			    &rdmafs__readdir_resp__descriptor, true, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__ReaddirResp *)msg;
	/* a reply that neither ends the listing nor moves on would make callers spin */
	if (!resp->eof && resp->n_entries == 0)
		ret = -EPROTO;
	for (size_t i = 0; i < resp->n_entries && !ret; i++) {
		ret = dirent_from_wire(resp->entries[i], plus, name, &entry);
		if (ret)
			break;
		if (cb(arg, &entry))
			goto out_free; /* stopped by the caller: not the end */
	}
	if (!ret)
		*eof = resp->eof;
out_free:
	rfs_meta_free(msg);
	return ret;
}

int rfs_meta_sync(struct rfs *fs)
{
	Rdmafs__SyncReq r = RDMAFS__SYNC_REQ__INIT;
	ProtobufCMessage *msg;
	int ret;

	/* a repeated flush is harmless: retried like a read */
	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_SYNC, &r.base,
			    &rdmafs__sync_resp__descriptor, true, &msg);
	if (!ret)
		rfs_meta_free(msg);
	return ret;
}

int rfs_statfs(struct rfs *fs, struct statvfs *out)
{
	Rdmafs__StatfsReq r = RDMAFS__STATFS_REQ__INIT;
	Rdmafs__StatfsResp *resp;
	ProtobufCMessage *msg;
	int ret;

	ret = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_STATFS, &r.base,
			    &rdmafs__statfs_resp__descriptor, true, &msg);
	if (ret)
		return ret;
	resp = (Rdmafs__StatfsResp *)msg;
	memset(out, 0, sizeof(*out));
	out->f_bsize = resp->bsize ? resp->bsize : 4096;
	out->f_frsize = resp->frsize ? resp->frsize : out->f_bsize;
	out->f_blocks = resp->blocks;
	out->f_bfree = resp->bfree;
	out->f_bavail = resp->bavail;
	out->f_files = resp->files;
	out->f_ffree = resp->ffree;
	out->f_favail = resp->ffree;
	out->f_namemax = resp->namemax ? resp->namemax : RFS_NAME_MAX;
	rfs_meta_free(msg);
	return 0;
}

int rfs_setxattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, const char *name,
		 const void *value, size_t size, int flags)
{
	Rdmafs__SetxattrReq r = RDMAFS__SETXATTR_REQ__INIT;
	struct wire_cred w;

	if (flags & ~(RFS_XATTR_CREATE | RFS_XATTR_REPLACE))
		return -EINVAL;
	r.ino = ino;
	r.name = bytes_of(name);
	r.value.data = (uint8_t *)value;
	r.value.len = size;
	r.flags = (uint32_t)flags;
	r.cred = cred_to_wire(cred, &w);
	return empty_call(fs, RDMAFS__METHOD__METHOD_SETXATTR, &r.base, true);
}

ssize_t rfs_getxattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, const char *name,
		     void *buf, size_t size)
{
	Rdmafs__GetxattrReq r = RDMAFS__GETXATTR_REQ__INIT;
	Rdmafs__GetxattrResp *resp;
	ProtobufCMessage *msg;
	struct wire_cred w;
	ssize_t ret;
	int err;

	r.ino = ino;
	r.name = bytes_of(name);
	r.cred = cred_to_wire(cred, &w);
	err = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_GETXATTR, &r.base,
			    &rdmafs__getxattr_resp__descriptor, true, &msg);
	if (err)
		return err;
	resp = (Rdmafs__GetxattrResp *)msg;
	if (resp->value.len > SSIZE_MAX) {
		ret = -EPROTO;
	} else if (size == 0) {
		ret = (ssize_t)resp->value.len;
	} else if (resp->value.len > size) {
		ret = -ERANGE;
	} else {
		if (resp->value.len)
			memcpy(buf, resp->value.data, resp->value.len);
		ret = (ssize_t)resp->value.len;
	}
	rfs_meta_free(msg);
	return ret;
}

ssize_t rfs_listxattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, char *buf,
		      size_t size)
{
	Rdmafs__ListxattrReq r = RDMAFS__LISTXATTR_REQ__INIT;
	Rdmafs__ListxattrResp *resp;
	ProtobufCMessage *msg;
	size_t total = 0, pos = 0;
	struct wire_cred w;
	ssize_t ret = 0;
	int err;

	r.ino = ino;
	r.cred = cred_to_wire(cred, &w);
	err = rfs_meta_call(fs, RDMAFS__METHOD__METHOD_LISTXATTR, &r.base,
			    &rdmafs__listxattr_resp__descriptor, true, &msg);
	if (err)
		return err;
	resp = (Rdmafs__ListxattrResp *)msg;
	for (size_t i = 0; i < resp->n_names && !ret; i++) {
		if (resp->names[i].len == 0 || resp->names[i].len > RFS_XATTR_NAME_MAX ||
		    memchr(resp->names[i].data, '\0', resp->names[i].len))
			ret = -EPROTO;
		total += resp->names[i].len + 1;
	}
	if (!ret && size && total > size)
		ret = -ERANGE;
	if (!ret && size) {
		for (size_t i = 0; i < resp->n_names; i++) {
			memcpy(buf + pos, resp->names[i].data, resp->names[i].len);
			pos += resp->names[i].len;
			buf[pos++] = '\0';
		}
	}
	if (!ret)
		ret = (ssize_t)total;
	rfs_meta_free(msg);
	return ret;
}

int rfs_removexattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, const char *name)
{
	Rdmafs__RemovexattrReq r = RDMAFS__REMOVEXATTR_REQ__INIT;
	struct wire_cred w;

	r.ino = ino;
	r.name = bytes_of(name);
	r.cred = cred_to_wire(cred, &w);
	return empty_call(fs, RDMAFS__METHOD__METHOD_REMOVEXATTR, &r.base, true);
}

int rfs_update_size(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t size,
		    const struct timespec *mtime, const struct rfs_alloc_report *report,
		    const struct rfs_layout *layout, struct rfs_entry *out)
{
	Rdmafs__UpdateSizeReq r = RDMAFS__UPDATE_SIZE_REQ__INIT;
	Rdmafs__DaemonAllocation alloc[RFS_MAX_STRIPE];
	Rdmafs__DaemonAllocation *alloc_ptrs[RFS_MAX_STRIPE];
	Rdmafs__Timespec mt = RDMAFS__TIMESPEC__INIT;
	struct wire_cred w;

	r.ino = ino;
	r.size = size;
	if (mtime) {
		mt.sec = mtime->tv_sec;
		mt.nsec = (uint32_t)mtime->tv_nsec;
		r.mtime = &mt;
	}
	/* what the daemons answered they hold: the service's st_blocks */
	r.allocations = alloc_ptrs;
	for (uint32_t d = 0; report && layout && d < layout->stripe_width; d++) {
		Rdmafs__DaemonAllocation *a = &alloc[r.n_allocations];

		if (!(report->known & (1ull << d)))
			continue;
		rdmafs__daemon_allocation__init(a);
		a->uuid.data = (uint8_t *)layout->daemons[d];
		a->uuid.len = RFS_UUID_LEN;
		a->bytes = report->allocated[d];
		alloc_ptrs[r.n_allocations++] = a;
	}
	r.cred = cred_to_wire(cred, &w);
	return attr_call(fs, RDMAFS__METHOD__METHOD_UPDATE_SIZE, &r.base, out);
}
