// SPDX-License-Identifier: GPL-2.0-or-later
/* Helpers of the metadata service unit tests; see test_meta_util.h. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_meta_util.h"
#include "check.h"

size_t tm_resp_cap = 1 << 20;

void tm_quiet_log(void *arg, enum meta_log_level level, const char *fmt, va_list ap)
{
	if (!getenv("TEST_META_VERBOSE"))
		return;
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

const Rdmafs__Cred *tm_user(struct tm_cred *tc, uint32_t uid, uint32_t gid)
{
	rdmafs__cred__init(&tc->c);
	tc->c.uid = uid;
	tc->c.gid = gid;
	tc->c.groups = tc->groups;
	return &tc->c;
}

void tm_uuid(uint8_t *uuid, unsigned n)
{
	memset(uuid, 0, 16);
	uuid[0] = (uint8_t)n;
	uuid[1] = (uint8_t)(n >> 8);
	uuid[15] = 0xee;
}

static void open_store(struct tm_env *e)
{
	assert_int_equal(meta_open(e->dir, &e->opts, &e->m), 0);
}

void tm_setup(struct tm_env *e, unsigned daemons)
{
	tm_setup_with(e, daemons, &(struct meta_options){.sync_interval_ms = 0});
}

void tm_setup_with(struct tm_env *e, unsigned daemons, const struct meta_options *o)
{
	e->opts = *o;
	e->opts.log = tm_quiet_log;
	assert_int_equal(check_tmp_template(e->dir, sizeof(e->dir), "test-meta"), 0);
	assert_non_null(mkdtemp(e->dir));
	open_store(e);
	for (unsigned i = 1; i <= daemons; i++)
		assert_int_equal(
			tm_register(e->m, i, "tcp://127.0.0.1:7471", 1ULL << 40, 1ULL << 30, NULL),
			0);
}

void tm_reopen(struct tm_env *e)
{
	meta_close(e->m);
	e->m = NULL;
	open_store(e);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

void tm_teardown(struct tm_env *e)
{
	meta_close(e->m);
	e->m = NULL;
	nftw(e->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

const struct meta_caller *tm_caller;

int tm_call(struct meta *m, uint32_t method, const void *req,
	    const ProtobufCMessageDescriptor *resp_desc, void **resp)
{
	const ProtobufCMessage *msg = req;
	size_t len = protobuf_c_message_get_packed_size(msg), resp_len = 0;
	uint8_t *buf = malloc(len + 1), *out = malloc(tm_resp_cap + 1);
	int ret;

	assert_non_null(buf);
	assert_non_null(out);
	assert_int_equal(protobuf_c_message_pack(msg, buf), len);
	ret = meta_handle_as(m, tm_caller, method, buf, len, out, tm_resp_cap, &resp_len);
	if (ret == 0) {
		assert_true(resp_len <= tm_resp_cap);
		if (resp) {
			*resp = protobuf_c_message_unpack(resp_desc, NULL, resp_len, out);
			assert_non_null(*resp);
		}
	} else {
		assert_true(ret < 0);
		assert_int_equal(resp_len, 0);
	}
	free(out);
	free(buf);
	return ret;
}

static void free_msg(void *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

static ProtobufCBinaryData bin(const char *s)
{
	ProtobufCBinaryData b = {strlen(s), (uint8_t *)s};

	return b;
}

static void copy_attr(struct tm_attr *a, const Rdmafs__Attr *src, const Rdmafs__Layout *l)
{
	if (!a)
		return;
	memset(a, 0, sizeof(*a));
	assert_non_null(src);
	a->ino = src->ino;
	a->mode = src->mode;
	a->nlink = src->nlink;
	a->uid = src->uid;
	a->gid = src->gid;
	a->size = src->size;
	a->blocks = src->blocks;
	a->generation = src->generation;
	assert_non_null(src->mtime);
	assert_non_null(src->ctime);
	assert_non_null(src->atime);
	a->mtime_sec = src->mtime->sec;
	a->mtime_nsec = src->mtime->nsec;
	a->ctime_sec = src->ctime->sec;
	a->ctime_nsec = src->ctime->nsec;
	a->atime_sec = src->atime->sec;
	a->atime_nsec = src->atime->nsec;
	if (l) {
		a->stripe_width = l->stripe_width;
		a->replicas = l->replicas;
		a->chunk_size = l->chunk_size;
		assert_int_equal(l->n_daemons, l->stripe_width);
	}
}

static int entry_call(struct meta *m, uint32_t method, const void *req, struct tm_attr *a)
{
	Rdmafs__EntryResp *r = NULL;
	int ret = tm_call(m, method, req, &rdmafs__entry_resp__descriptor, (void **)&r);

	if (!ret)
		copy_attr(a, r->attr, r->layout);
	free_msg(r);
	return ret;
}

int tm_getattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, struct tm_attr *a)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *r = NULL;
	int ret;

	req.ino = ino;
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_GETATTR, &req, &rdmafs__attr_resp__descriptor,
		      (void **)&r);
	if (!ret)
		copy_attr(a, r->attr, NULL);
	free_msg(r);
	return ret;
}

int tm_lookup(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	      struct tm_attr *a)
{
	Rdmafs__LookupReq req = RDMAFS__LOOKUP_REQ__INIT;

	req.parent = parent;
	req.name = bin(name);
	req.cred = (Rdmafs__Cred *)c;
	return entry_call(m, RDMAFS__METHOD__METHOD_LOOKUP, &req, a);
}

int tm_mkdir(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	     uint32_t mode, struct tm_attr *a)
{
	Rdmafs__MkdirReq req = RDMAFS__MKDIR_REQ__INIT;

	req.parent = parent;
	req.name = bin(name);
	req.mode = mode;
	req.uid = c ? c->uid : 0;
	req.gid = c ? c->gid : 0;
	req.cred = (Rdmafs__Cred *)c;
	return entry_call(m, RDMAFS__METHOD__METHOD_MKDIR, &req, a);
}

int tm_create(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	      uint32_t mode, bool excl, uint32_t flags, struct tm_attr *a, uint64_t *handle,
	      bool *created)
{
	Rdmafs__CreateReq req = RDMAFS__CREATE_REQ__INIT;
	Rdmafs__CreateResp *r = NULL;
	int ret;

	req.parent = parent;
	req.name = bin(name);
	req.mode = mode;
	req.uid = c ? c->uid : 0;
	req.gid = c ? c->gid : 0;
	req.exclusive = excl;
	req.open_flags = flags;
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_CREATE, &req, &rdmafs__create_resp__descriptor,
		      (void **)&r);
	if (!ret) {
		copy_attr(a, r->attr, r->layout);
		if (handle)
			*handle = r->handle;
		if (created)
			*created = r->created;
		assert_int_not_equal(r->handle, 0);
	}
	free_msg(r);
	return ret;
}

int64_t tm_mkfile(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
		  uint32_t mode)
{
	struct tm_attr a;
	uint64_t h, freed = 1;
	int ret = tm_create(m, c, parent, name, S_IFREG | mode, true, O_RDWR, &a, &h, NULL);

	if (ret)
		return ret;
	assert_int_equal(tm_release(m, h, a.ino, &freed), 0);
	assert_int_equal(freed, 0);
	return (int64_t)a.ino;
}

int tm_mknod(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	     uint32_t mode, uint64_t rdev, struct tm_attr *a)
{
	Rdmafs__MknodReq req = RDMAFS__MKNOD_REQ__INIT;

	req.parent = parent;
	req.name = bin(name);
	req.mode = mode;
	req.rdev = rdev;
	req.uid = c ? c->uid : 0;
	req.gid = c ? c->gid : 0;
	req.cred = (Rdmafs__Cred *)c;
	return entry_call(m, RDMAFS__METHOD__METHOD_MKNOD, &req, a);
}

int tm_symlink(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	       const char *target, struct tm_attr *a)
{
	Rdmafs__SymlinkReq req = RDMAFS__SYMLINK_REQ__INIT;

	req.parent = parent;
	req.name = bin(name);
	req.target = bin(target);
	req.uid = c ? c->uid : 0;
	req.gid = c ? c->gid : 0;
	req.cred = (Rdmafs__Cred *)c;
	return entry_call(m, RDMAFS__METHOD__METHOD_SYMLINK, &req, a);
}

int tm_readlink(struct meta *m, uint64_t ino, char *buf, size_t len)
{
	Rdmafs__ReadlinkReq req = RDMAFS__READLINK_REQ__INIT;
	Rdmafs__ReadlinkResp *r = NULL;
	int ret;

	req.ino = ino;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_READLINK, &req, &rdmafs__readlink_resp__descriptor,
		      (void **)&r);
	if (!ret) {
		assert_true(r->target.len < len);
		memcpy(buf, r->target.data, r->target.len);
		buf[r->target.len] = '\0';
	}
	free_msg(r);
	return ret;
}

static uint64_t freed_ino(const Rdmafs__FreedInode *f)
{
	if (!f)
		return 0;
	assert_non_null(f->layout);
	assert_true(f->layout->n_daemons > 0);
	return f->ino;
}

int tm_unlink(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	      uint64_t *freed)
{
	Rdmafs__UnlinkReq req = RDMAFS__UNLINK_REQ__INIT;
	Rdmafs__UnlinkResp *r = NULL;
	int ret;

	req.parent = parent;
	req.name = bin(name);
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_UNLINK, &req, &rdmafs__unlink_resp__descriptor,
		      (void **)&r);
	if (!ret && freed)
		*freed = freed_ino(r->freed);
	free_msg(r);
	return ret;
}

int tm_rmdir(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name)
{
	Rdmafs__RmdirReq req = RDMAFS__RMDIR_REQ__INIT;

	req.parent = parent;
	req.name = bin(name);
	req.cred = (Rdmafs__Cred *)c;
	return tm_call(m, RDMAFS__METHOD__METHOD_RMDIR, &req, NULL, NULL);
}

int tm_rename(struct meta *m, const Rdmafs__Cred *c, uint64_t op, const char *on, uint64_t np,
	      const char *nn, uint32_t flags, uint64_t *freed)
{
	Rdmafs__RenameReq req = RDMAFS__RENAME_REQ__INIT;
	Rdmafs__RenameResp *r = NULL;
	int ret;

	req.old_parent = op;
	req.old_name = bin(on);
	req.new_parent = np;
	req.new_name = bin(nn);
	req.flags = flags;
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_RENAME, &req, &rdmafs__rename_resp__descriptor,
		      (void **)&r);
	if (!ret && freed)
		*freed = freed_ino(r->freed);
	free_msg(r);
	return ret;
}

int tm_link(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, uint64_t np, const char *nn,
	    struct tm_attr *a)
{
	Rdmafs__LinkReq req = RDMAFS__LINK_REQ__INIT;

	req.ino = ino;
	req.new_parent = np;
	req.new_name = bin(nn);
	req.cred = (Rdmafs__Cred *)c;
	return entry_call(m, RDMAFS__METHOD__METHOD_LINK, &req, a);
}

int tm_open(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, uint32_t flags, uint64_t *handle)
{
	Rdmafs__OpenReq req = RDMAFS__OPEN_REQ__INIT;
	Rdmafs__OpenResp *r = NULL;
	int ret;

	req.ino = ino;
	req.flags = flags;
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_OPEN, &req, &rdmafs__open_resp__descriptor,
		      (void **)&r);
	if (!ret) {
		assert_non_null(r->attr);
		assert_int_equal(r->attr->ino, ino);
		if (handle)
			*handle = r->handle;
	}
	free_msg(r);
	return ret;
}

int tm_release(struct meta *m, uint64_t handle, uint64_t ino, uint64_t *freed)
{
	Rdmafs__ReleaseReq req = RDMAFS__RELEASE_REQ__INIT;
	Rdmafs__ReleaseResp *r = NULL;
	int ret;

	req.handle = handle;
	req.ino = ino;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_RELEASE, &req, &rdmafs__release_resp__descriptor,
		      (void **)&r);
	if (!ret && freed)
		*freed = freed_ino(r->freed);
	free_msg(r);
	return ret;
}

int tm_reclaim(struct meta *m, uint64_t handle, uint64_t ino, uint32_t flags, bool *gone)
{
	Rdmafs__ReclaimReq req = RDMAFS__RECLAIM_REQ__INIT;
	Rdmafs__ReclaimHandle h = RDMAFS__RECLAIM_HANDLE__INIT, *list[1] = {&h};
	Rdmafs__ReclaimResp *r = NULL;
	int ret;

	h.handle = handle;
	h.ino = ino;
	h.flags = flags;
	req.n_handles = 1;
	req.handles = list;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_RECLAIM, &req, &rdmafs__reclaim_resp__descriptor,
		      (void **)&r);
	if (!ret) {
		/* one handle: either taken back or reported gone */
		assert_int_equal(r->reclaimed + r->n_gone, 1);
		if (r->n_gone)
			assert_int_equal(r->gone[0], handle);
		if (gone)
			*gone = r->n_gone == 1;
	}
	free_msg(r);
	return ret;
}

int tm_setattr(struct meta *m, const Rdmafs__Cred *c, Rdmafs__SetattrReq *req, struct tm_attr *a)
{
	Rdmafs__AttrResp *r = NULL;
	int ret;

	req->cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_SETATTR, req, &rdmafs__attr_resp__descriptor,
		      (void **)&r);
	if (!ret)
		copy_attr(a, r->attr, NULL);
	free_msg(r);
	return ret;
}

int tm_update_size(struct meta *m, uint64_t ino, uint64_t size, const Rdmafs__Timespec *mtime,
		   struct tm_attr *a)
{
	Rdmafs__UpdateSizeReq req = RDMAFS__UPDATE_SIZE_REQ__INIT;
	Rdmafs__AttrResp *r = NULL;
	int ret;

	req.ino = ino;
	req.size = size;
	req.mtime = (Rdmafs__Timespec *)mtime;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_UPDATE_SIZE, &req, &rdmafs__attr_resp__descriptor,
		      (void **)&r);
	if (!ret)
		copy_attr(a, r->attr, NULL);
	free_msg(r);
	return ret;
}

int tm_setxattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, const char *name,
		const void *value, size_t len, uint32_t flags)
{
	Rdmafs__SetxattrReq req = RDMAFS__SETXATTR_REQ__INIT;

	req.ino = ino;
	req.name = bin(name);
	req.value.data = (uint8_t *)value;
	req.value.len = len;
	req.flags = flags;
	req.cred = (Rdmafs__Cred *)c;
	return tm_call(m, RDMAFS__METHOD__METHOD_SETXATTR, &req, NULL, NULL);
}

int tm_getxattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, const char *name, char *buf,
		size_t len)
{
	Rdmafs__GetxattrReq req = RDMAFS__GETXATTR_REQ__INIT;
	Rdmafs__GetxattrResp *r = NULL;
	int ret;

	req.ino = ino;
	req.name = bin(name);
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_GETXATTR, &req, &rdmafs__getxattr_resp__descriptor,
		      (void **)&r);
	if (!ret) {
		assert_true(r->value.len < len);
		if (r->value.len)
			memcpy(buf, r->value.data, r->value.len);
		buf[r->value.len] = '\0';
		ret = (int)r->value.len;
	}
	free_msg(r);
	return ret;
}

int tm_listxattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, char *buf, size_t len)
{
	Rdmafs__ListxattrReq req = RDMAFS__LISTXATTR_REQ__INIT;
	Rdmafs__ListxattrResp *r = NULL;
	size_t o = 0;
	int ret;

	req.ino = ino;
	req.cred = (Rdmafs__Cred *)c;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_LISTXATTR, &req,
		      &rdmafs__listxattr_resp__descriptor, (void **)&r);
	buf[0] = '\0';
	if (!ret) {
		for (size_t i = 0; i < r->n_names; i++) {
			assert_true(o + r->names[i].len + 2 < len);
			if (i)
				buf[o++] = ',';
			memcpy(buf + o, r->names[i].data, r->names[i].len);
			o += r->names[i].len;
			buf[o] = '\0';
		}
		ret = (int)r->n_names;
	}
	free_msg(r);
	return ret;
}

int tm_removexattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, const char *name)
{
	Rdmafs__RemovexattrReq req = RDMAFS__REMOVEXATTR_REQ__INIT;

	req.ino = ino;
	req.name = bin(name);
	req.cred = (Rdmafs__Cred *)c;
	return tm_call(m, RDMAFS__METHOD__METHOD_REMOVEXATTR, &req, NULL, NULL);
}

int tm_readdir(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, uint64_t cookie, uint32_t max,
	       bool attrs, Rdmafs__ReaddirResp **resp)
{
	Rdmafs__ReaddirReq req = RDMAFS__READDIR_REQ__INIT;

	req.ino = ino;
	req.cookie = cookie;
	req.max_entries = max;
	req.with_attrs = attrs;
	req.cred = (Rdmafs__Cred *)c;
	*resp = NULL;
	return tm_call(m, RDMAFS__METHOD__METHOD_READDIR, &req, &rdmafs__readdir_resp__descriptor,
		       (void **)resp);
}

int tm_statfs(struct meta *m, Rdmafs__StatfsResp **resp)
{
	Rdmafs__StatfsReq req = RDMAFS__STATFS_REQ__INIT;

	return tm_call(m, RDMAFS__METHOD__METHOD_STATFS, &req, &rdmafs__statfs_resp__descriptor,
		       (void **)resp);
}

int tm_register(struct meta *m, unsigned n, const char *address, uint64_t capacity, uint64_t used,
		Rdmafs__RegisterDaemonResp **resp)
{
	Rdmafs__RegisterDaemonReq req = RDMAFS__REGISTER_DAEMON_REQ__INIT;
	Rdmafs__RegisterDaemonResp *r = NULL;
	uint8_t uuid[16];
	char *addresses[1] = {(char *)address};
	int ret;

	tm_uuid(uuid, n);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	req.addresses = addresses;
	req.n_addresses = address ? 1 : 0;
	req.capacity_bytes = capacity;
	req.used_bytes = used;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req,
		      &rdmafs__register_daemon_resp__descriptor, (void **)&r);
	if (resp)
		*resp = r;
	else
		free_msg(r);
	return ret;
}

int tm_heartbeat(struct meta *m, unsigned n, uint64_t capacity, uint64_t used,
		 Rdmafs__HeartbeatResp **resp)
{
	Rdmafs__HeartbeatReq req = RDMAFS__HEARTBEAT_REQ__INIT;
	Rdmafs__HeartbeatResp *r = NULL;
	uint8_t uuid[16];
	int ret;

	tm_uuid(uuid, n);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	req.capacity_bytes = capacity;
	req.used_bytes = used;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_HEARTBEAT, &req,
		      &rdmafs__heartbeat_resp__descriptor, (void **)&r);
	if (resp)
		*resp = r;
	else
		free_msg(r);
	return ret;
}

int tm_cluster_map(struct meta *m, uint64_t known_epoch, Rdmafs__GetClusterMapResp **resp)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;

	req.known_epoch = known_epoch;
	return tm_call(m, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req,
		       &rdmafs__get_cluster_map_resp__descriptor, (void **)resp);
}

int tm_set_state(struct meta *m, unsigned n, Rdmafs__DaemonState state, bool force, uint64_t *epoch)
{
	Rdmafs__SetDaemonStateReq req = RDMAFS__SET_DAEMON_STATE_REQ__INIT;
	Rdmafs__SetDaemonStateResp *r = NULL;
	uint8_t uuid[16];
	int ret;

	tm_uuid(uuid, n);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	req.state = state;
	req.force = force;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_SET_DAEMON_STATE, &req,
		      &rdmafs__set_daemon_state_resp__descriptor, (void **)&r);
	if (!ret && epoch)
		*epoch = r->epoch;
	free_msg(r);
	return ret;
}

int tm_daemon_state(struct meta *m, unsigned n)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *r = NULL;
	uint8_t uuid[16];
	int state = -1;

	tm_uuid(uuid, n);
	/* removed daemons too: they leave the map only for those who do not ask */
	req.include_removed = true;
	assert_int_equal(tm_call(m, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req,
				 &rdmafs__get_cluster_map_resp__descriptor, (void **)&r),
			 0);
	for (size_t i = 0; i < r->n_daemons; i++)
		if (r->daemons[i]->uuid.len == 16 && !memcmp(r->daemons[i]->uuid.data, uuid, 16))
			state = (int)r->daemons[i]->state;
	free_msg(r);
	return state;
}
