// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * meta_handle(): unpack the request, run its operation in one LMDB
 * transaction, pack the reply, and commit only when the reply fits, so a
 * caller that gets an error knows nothing changed.
 */
#include <errno.h>
#include <string.h>

#include "lmdb_errno.h"
#include "meta_i.h"

struct meta_method {
	uint32_t id;
	bool write;
	const ProtobufCMessageDescriptor *request;
	meta_op_fn fn;
};

#define METHOD(name, is_write, req, op)                                                \
	{                                                                              \
		RDMAFS__METHOD__METHOD_##name, is_write, &rdmafs__##req##__descriptor, \
			meta_op_##op                                                   \
	}

static const struct meta_method methods[] = {
	METHOD(LOOKUP, false, lookup_req, lookup),
	METHOD(GETATTR, false, getattr_req, getattr),
	METHOD(SETATTR, true, setattr_req, setattr),
	METHOD(CREATE, true, create_req, create),
	METHOD(MKNOD, true, mknod_req, mknod),
	METHOD(MKDIR, true, mkdir_req, mkdir),
	METHOD(SYMLINK, true, symlink_req, symlink),
	METHOD(UNLINK, true, unlink_req, unlink),
	METHOD(RMDIR, true, rmdir_req, rmdir),
	METHOD(RENAME, true, rename_req, rename),
	METHOD(LINK, true, link_req, link),
	METHOD(READLINK, false, readlink_req, readlink),
	METHOD(READDIR, false, readdir_req, readdir),
	METHOD(OPEN, true, open_req, open),
	METHOD(RELEASE, true, release_req, release),
	METHOD(STATFS, false, statfs_req, statfs),
	METHOD(SETXATTR, true, setxattr_req, setxattr),
	METHOD(GETXATTR, false, getxattr_req, getxattr),
	METHOD(LISTXATTR, false, listxattr_req, listxattr),
	METHOD(REMOVEXATTR, true, removexattr_req, removexattr),
	METHOD(UPDATE_SIZE, true, update_size_req, update_size),
	METHOD(REGISTER_DAEMON, true, register_daemon_req, register_daemon),
	METHOD(HEARTBEAT, true, heartbeat_req, heartbeat),
	METHOD(GET_CLUSTER_MAP, false, get_cluster_map_req, get_cluster_map),
	METHOD(SET_DAEMON_STATE, true, set_daemon_state_req, set_daemon_state),
	METHOD(DRAIN_STATUS, false, drain_status_req, drain_status),
	METHOD(INODE_LIST, false, inode_list_req, inode_list),
	METHOD(SET_LAYOUT, true, set_layout_req, set_layout),
};

static const struct meta_method *find_method(uint32_t id)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (methods[i].id == id)
			return &methods[i];
	return NULL;
}

bool meta_handles_method(uint32_t method)
{
	return find_method(method) != NULL;
}

/* The request's Cred field, if its message has one; absent means uid 0. */
static void read_cred(const ProtobufCMessageDescriptor *desc, const ProtobufCMessage *msg,
		      struct meta_cred *cred)
{
	const ProtobufCFieldDescriptor *f;
	const Rdmafs__Cred *c;

	memset(cred, 0, sizeof(*cred));
	f = protobuf_c_message_descriptor_get_field_by_name(desc, "cred");
	if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor != &rdmafs__cred__descriptor)
		return;
	memcpy(&c, (const char *)msg + f->offset, sizeof(c));
	if (!c)
		return;
	cred->uid = c->uid;
	cred->gid = c->gid;
	cred->group_count = c->n_groups;
	cred->groups = c->groups;
}

int meta_handle(struct meta *m, uint32_t method, const void *req, size_t req_len, void *resp_buf,
		size_t resp_cap, size_t *resp_len)
{
	const struct meta_method *mm = find_method(method);
	struct meta_txn t = {.m = m, .resp_cap = resp_cap};
	ProtobufCMessage *msg, *resp = NULL;
	size_t size;
	int rc, ret;

	*resp_len = 0;
	if (!mm)
		return -EOPNOTSUPP;
	if (!req && req_len)
		return -EINVAL;
	msg = protobuf_c_message_unpack(mm->request, NULL, req_len, req);
	if (!msg)
		return -EBADMSG;
	read_cred(mm->request, msg, &t.cred);
	clock_gettime(CLOCK_REALTIME, &t.now);

	rc = mdb_txn_begin(m->env, NULL, mm->write ? 0 : MDB_RDONLY, &t.txn);
	if (rc) {
		meta_log(m, META_LOG_ERR, "cannot begin a transaction: %s", mdb_strerror(rc));
		ret = lmdb_errno(rc);
		goto out_free_msg;
	}
	ret = mm->fn(&t, msg, &resp);
	if (ret)
		goto out_abort;
	if (!resp) {
		ret = -EIO;
		goto out_abort;
	}
	size = protobuf_c_message_get_packed_size(resp);
	if (size > resp_cap) {
		ret = -EMSGSIZE;
		goto out_abort;
	}
	*resp_len = protobuf_c_message_pack(resp, resp_buf);
	if (mm->write) {
		rc = mdb_txn_commit(t.txn);
		if (rc) {
			meta_log(m, META_LOG_ERR, "cannot commit: %s", mdb_strerror(rc));
			*resp_len = 0;
			ret = lmdb_errno(rc);
		}
		goto out_free_arena;
	}
out_abort:
	/* also the normal end of a read-only transaction */
	mdb_txn_abort(t.txn);
out_free_arena:
	meta_arena_free(t.arena);
out_free_msg:
	protobuf_c_message_free_unpacked(msg, NULL);
	return ret;
}
