// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The service's entry points, the top of its layers (meta_i.h): meta_open()
 * checks the store's format and makes a new store's counters and root
 * directory; meta_handle() unpacks a request, runs its operation in one
 * store transaction, packs the reply, and commits only when the reply fits,
 * so a caller that gets an error knows nothing changed. It also counts every
 * call per method (meta_method_stats()), for the daemon's /metrics.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "meta_i.h"

#define META_DEFAULT_MAP_SIZE	    (4ULL << 30)
#define META_DEFAULT_CHUNK_SIZE	    (1U << 20)
#define META_DEFAULT_STRIPE_WIDTH   4
#define META_DEFAULT_HB_TIMEOUT	    10
#define META_DEFAULT_HB_INTERVAL_MS 2000
#define META_DEFAULT_RECLAIM_GRACE  30

/*
 * Who may call a method. A caller that proved the cluster secret may call
 * every one; a keyed caller (struct meta_caller) never an ADMIN one (EPERM),
 * and with RDMAFS_KEY_READ_ONLY no CHANGE one (EROFS), nor OPEN for writing.
 */
enum meta_access {
	ACCESS_READ,	/* looks, changes nothing */
	ACCESS_CHANGE,	/* changes the filesystem */
	ACCESS_OPEN,	/* OPEN: a change only when it opens for writing */
	ACCESS_RECLAIM, /* RECLAIM: as OPEN, for each handle */
	ACCESS_ADMIN,	/* daemons and administration: the cluster secret only */
};

struct meta_method {
	uint32_t id;
	bool write;
	enum meta_access access;
	const ProtobufCMessageDescriptor *request;
	meta_op_fn fn;
};

#define METHOD(name, is_write, acc, req, op)                           \
	{                                                              \
		RDMAFS__METHOD__METHOD_##name, is_write, ACCESS_##acc, \
			&rdmafs__##req##__descriptor, meta_op_##op     \
	}

static const struct meta_method methods[] = {
	METHOD(LOOKUP, false, READ, lookup_req, lookup),
	METHOD(GETATTR, false, READ, getattr_req, getattr),
	METHOD(SETATTR, true, CHANGE, setattr_req, setattr),
	METHOD(CREATE, true, CHANGE, create_req, create),
	METHOD(MKNOD, true, CHANGE, mknod_req, mknod),
	METHOD(MKDIR, true, CHANGE, mkdir_req, mkdir),
	METHOD(SYMLINK, true, CHANGE, symlink_req, symlink),
	METHOD(UNLINK, true, CHANGE, unlink_req, unlink),
	METHOD(RMDIR, true, CHANGE, rmdir_req, rmdir),
	METHOD(RENAME, true, CHANGE, rename_req, rename),
	METHOD(LINK, true, CHANGE, link_req, link),
	METHOD(READLINK, false, READ, readlink_req, readlink),
	METHOD(READDIR, false, READ, readdir_req, readdir),
	METHOD(OPEN, true, OPEN, open_req, open),
	/* a handle's end: a read-only client must close what it opened */
	METHOD(RELEASE, true, READ, release_req, release),
	METHOD(STATFS, false, READ, statfs_req, statfs),
	METHOD(SETXATTR, true, CHANGE, setxattr_req, setxattr),
	METHOD(GETXATTR, false, READ, getxattr_req, getxattr),
	METHOD(LISTXATTR, false, READ, listxattr_req, listxattr),
	METHOD(REMOVEXATTR, true, CHANGE, removexattr_req, removexattr),
	METHOD(UPDATE_SIZE, true, CHANGE, update_size_req, update_size),
	/* in the group: a reclaim and the RELEASE of an orphan's last handle are ordered */
	METHOD(RECLAIM, true, RECLAIM, reclaim_req, reclaim),
	/* changes nothing: flushes what others changed, for any caller */
	METHOD(SYNC, false, READ, sync_req, sync),
	METHOD(REGISTER_DAEMON, true, ADMIN, register_daemon_req, register_daemon),
	METHOD(HEARTBEAT, true, ADMIN, heartbeat_req, heartbeat),
	/* every client needs the map to reach the daemons */
	METHOD(GET_CLUSTER_MAP, false, READ, get_cluster_map_req, get_cluster_map),
	METHOD(SET_DAEMON_STATE, true, ADMIN, set_daemon_state_req, set_daemon_state),
	METHOD(DRAIN_STATUS, false, ADMIN, drain_status_req, drain_status),
	METHOD(INODE_LIST, false, ADMIN, inode_list_req, inode_list),
	METHOD(SET_LAYOUT, true, ADMIN, set_layout_req, set_layout),
	METHOD(INODE_PATHS, false, ADMIN, inode_paths_req, inode_paths),
	METHOD(CLIENT_ADD, true, ADMIN, client_add_req, client_add),
	METHOD(CLIENT_LIST, false, ADMIN, client_list_req, client_list),
	METHOD(CLIENT_REVOKE, true, ADMIN, client_revoke_req, client_revoke),
};

#define METHOD_COUNT (sizeof(methods) / sizeof(methods[0]))
_Static_assert(METHOD_COUNT <= META_METHODS_MAX, "raise META_METHODS_MAX in meta.h");

/* One per entry of methods[], updated with atomics by every caller of meta_handle(). */
struct meta_method_counters {
	uint64_t errors, request_bytes, reply_bytes;
	struct rdmafs_latency latency;
};

static const struct meta_method *find_method(uint32_t id)
{
	for (size_t i = 0; i < METHOD_COUNT; i++)
		if (methods[i].id == id)
			return &methods[i];
	return NULL;
}

static void count_call(struct meta *m, const struct meta_method *mm, size_t req_len,
		       size_t resp_len, int ret, uint64_t start_ns)
{
	struct meta_method_counters *c = &m->method_counters[mm - methods];

	if (ret)
		__atomic_add_fetch(&c->errors, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->request_bytes, req_len, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->reply_bytes, resp_len, __ATOMIC_RELAXED);
	rdmafs_latency_record(&c->latency, rdmafs_now_ns() - start_ns);
}

size_t meta_method_stats(struct meta *m, struct meta_method_stats *out, size_t max)
{
	size_t n = 0;

	for (; n < METHOD_COUNT && n < max; n++) {
		const struct meta_method_counters *c = &m->method_counters[n];

		out[n].method = methods[n].id;
		out[n].errors = __atomic_load_n(&c->errors, __ATOMIC_RELAXED);
		out[n].request_bytes = __atomic_load_n(&c->request_bytes, __ATOMIC_RELAXED);
		out[n].reply_bytes = __atomic_load_n(&c->reply_bytes, __ATOMIC_RELAXED);
		rdmafs_latency_read(&c->latency, &out[n].latency);
	}
	return n;
}

static int count_daemon(struct meta_txn *t, struct daemon *d, void *arg)
{
	struct meta_store_stats *out = arg;

	if (d->r.state < sizeof(out->daemons) / sizeof(out->daemons[0]))
		out->daemons[d->r.state]++;
	return 0;
}

int meta_store_stats(struct meta *m, struct meta_store_stats *out)
{
	struct meta_txn t = {.m = m};
	int ret;

	memset(out, 0, sizeof(*out));
	meta_group_stats(m, &out->commit_groups, &out->grouped_requests);
	clock_gettime(CLOCK_REALTIME, &t.now);
	ret = meta_store_txn_begin(&t, false);
	if (ret)
		return ret;
	ret = meta_store_counter_get(&t, "inodes", &out->inodes);
	if (!ret)
		ret = meta_store_counter_get(&t, "epoch", &out->epoch);
	if (!ret)
		ret = meta_store_daemons_each(&t, count_daemon, out);
	meta_store_txn_abort(&t);
	meta_arena_free(t.arena);
	return ret;
}

bool meta_handles_method(uint32_t method)
{
	return find_method(method) != NULL;
}

bool meta_method_quick(uint32_t method)
{
	switch (method) {
	case RDMAFS__METHOD__METHOD_LOOKUP:
	case RDMAFS__METHOD__METHOD_GETATTR:
	case RDMAFS__METHOD__METHOD_READLINK:
	case RDMAFS__METHOD__METHOD_READDIR:
	case RDMAFS__METHOD__METHOD_GETXATTR:
	case RDMAFS__METHOD__METHOD_LISTXATTR:
	case RDMAFS__METHOD__METHOD_STATFS:
		return true;
	default:
		return false;
	}
}

bool meta_may_batch(struct meta *m, uint32_t method)
{
	const struct meta_method *mm = find_method(method);

	if (!mm || !mm->write || m->opts.sync_always)
		return false;
	return mm->access != ACCESS_ADMIN && mm->access != ACCESS_RECLAIM;
}

bool meta_may_run_inline(struct meta *m, uint32_t method)
{
	if (meta_method_quick(method))
		return true;
	return meta_may_batch(m, method) && meta_group_idle(m);
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

static bool opens_for_writing(uint32_t flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* Whether a keyed caller may call @mm with @msg: 0, -EPERM or -EROFS. */
static int check_access(const struct meta_caller *caller, const struct meta_method *mm,
			const ProtobufCMessage *msg)
{
	bool read_only = caller->flags & RDMAFS_KEY_READ_ONLY;

	switch (mm->access) {
	case ACCESS_ADMIN:
		return -EPERM;
	case ACCESS_CHANGE:
		return read_only ? -EROFS : 0;
	case ACCESS_OPEN: {
		const Rdmafs__OpenReq *open = (const void *)msg;

		return read_only && opens_for_writing(open->flags) ? -EROFS : 0;
	}
	case ACCESS_RECLAIM: {
		const Rdmafs__ReclaimReq *r = (const void *)msg;

		for (size_t i = 0; read_only && i < r->n_handles; i++)
			if (opens_for_writing(r->handles[i]->flags))
				return -EROFS;
		return 0;
	}
	default:
		return 0;
	}
}

/*
 * Root squash, as NFS does it: a keyed caller with RDMAFS_KEY_ROOT_SQUASH
 * that claims uid or gid 0 (an absent cred is uid 0 too) acts as 65534, and
 * so does a supplementary group 0.
 */
static int squash_root(struct meta_txn *t)
{
	struct meta_cred *c = &t->cred;
	uint32_t *groups;

	if (c->uid == 0)
		c->uid = RDMAFS_SQUASH_ID;
	if (c->gid == 0)
		c->gid = RDMAFS_SQUASH_ID;
	for (size_t i = 0; i < c->group_count; i++) {
		if (c->groups[i] != 0)
			continue;
		groups = meta_alloc(t, c->group_count * sizeof(*groups));
		if (!groups)
			return -ENOMEM;
		for (size_t j = 0; j < c->group_count; j++)
			groups[j] = c->groups[j] ? c->groups[j] : RDMAFS_SQUASH_ID;
		c->groups = groups;
		break;
	}
	return 0;
}

/*
 * The owner a root-squashed caller gives a new inode (CREATE, MKNOD, MKDIR,
 * SYMLINK carry uid and gid fields beside the cred): 0 becomes 65534 as in
 * the cred, and the uid is always the caller's own, so that a squashed
 * client cannot make root's files by naming root as the owner.
 */
static void squash_owner(struct meta_txn *t, const struct meta_method *mm, ProtobufCMessage *msg)
{
	const ProtobufCFieldDescriptor *f;
	uint32_t *id;

	switch (mm->id) {
	case RDMAFS__METHOD__METHOD_CREATE:
	case RDMAFS__METHOD__METHOD_MKNOD:
	case RDMAFS__METHOD__METHOD_MKDIR:
	case RDMAFS__METHOD__METHOD_SYMLINK:
		break;
	default:
		return;
	}
	f = protobuf_c_message_descriptor_get_field_by_name(mm->request, "uid");
	if (f && f->type == PROTOBUF_C_TYPE_UINT32) {
		id = (uint32_t *)((char *)msg + f->offset);
		*id = t->cred.uid;
	}
	f = protobuf_c_message_descriptor_get_field_by_name(mm->request, "gid");
	if (f && f->type == PROTOBUF_C_TYPE_UINT32) {
		id = (uint32_t *)((char *)msg + f->offset);
		if (*id == 0)
			*id = RDMAFS_SQUASH_ID;
	}
}

/* A keyed caller whose key was revoked since its HELLO gets nothing more. */
static int check_revoked(struct meta_txn *t, const struct meta_caller *caller)
{
	struct meta_client c;
	int ret = meta_store_client_get(t, caller->serial, &c);

	/* a key not in the record was made by a holder of the secret: valid */
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	return c.r.revoked ? -EKEYREVOKED : 0;
}

/* A request inside its transaction (run_body()'s @arg). */
struct body {
	const struct meta_caller *caller;
	const struct meta_method *mm;
	const ProtobufCMessage *msg;
	void *resp_buf;
	size_t *resp_len;
};

/* What a request does in its transaction: the revocation check, the method, the packed reply. */
static int run_body(struct meta_txn *t, void *arg)
{
	struct body *b = arg;
	ProtobufCMessage *resp = NULL;
	int ret;

	if (b->caller && b->caller->keyed) {
		ret = check_revoked(t, b->caller);
		if (ret)
			return ret;
	}
	ret = b->mm->fn(t, b->msg, &resp);
	if (ret)
		return ret;
	if (!resp)
		return -EIO;
	if (protobuf_c_message_get_packed_size(resp) > t->resp_cap)
		return -EMSGSIZE;
	*b->resp_len = protobuf_c_message_pack(resp, b->resp_buf);
	return 0;
}

/* A request between its unpacking and its end (handle(), meta_handle_many()). */
struct prepared {
	struct meta_txn t;
	struct body b;
	ProtobufCMessage *msg;
};

/*
 * Unpacks @req and runs the checks that come before its transaction into @p;
 * 0, or the request's error (then call_end() alone remains).
 */
static int call_begin(struct meta *m, const struct meta_caller *caller,
		      const struct meta_method *mm, const void *req, size_t req_len, void *resp_buf,
		      size_t resp_cap, size_t *resp_len, struct prepared *p)
{
	int ret = 0;

	*p = (struct prepared){
		.t = {.m = m, .resp_cap = resp_cap},
		.b = {.caller = caller, .mm = mm, .resp_buf = resp_buf, .resp_len = resp_len},
	};
	*resp_len = 0;
	if (!req && req_len)
		return -EINVAL;
	/* administration is refused before a byte of the request is looked at */
	if (caller && caller->keyed && mm->access == ACCESS_ADMIN)
		return -EPERM;
	p->msg = protobuf_c_message_unpack(mm->request, NULL, req_len, req);
	if (!p->msg)
		return -EBADMSG;
	p->b.msg = p->msg;
	read_cred(mm->request, p->msg, &p->t.cred);
	clock_gettime(CLOCK_REALTIME, &p->t.now);
	if (caller && caller->keyed) {
		ret = check_access(caller, mm, p->msg);
		if (!ret && (caller->flags & RDMAFS_KEY_ROOT_SQUASH)) {
			ret = squash_root(&p->t);
			squash_owner(&p->t, mm, p->msg);
		}
	}
	/* an operator's or a drain's next step relies on it: on disk before the answer */
	p->t.durable = mm->write && mm->access == ACCESS_ADMIN &&
		       mm->id != RDMAFS__METHOD__METHOD_HEARTBEAT;
	return ret;
}

/* Ends @p, whose request came to @ret: no reply on an error; frees what it holds. */
static int call_end(struct prepared *p, int ret)
{
	if (ret)
		*p->b.resp_len = 0;
	meta_arena_free(p->t.arena);
	if (p->msg)
		protobuf_c_message_free_unpacked(p->msg, NULL);
	return ret;
}

/* meta_handle_as() but for the counting. */
static int handle(struct meta *m, const struct meta_caller *caller, const struct meta_method *mm,
		  const void *req, size_t req_len, void *resp_buf, size_t resp_cap,
		  size_t *resp_len)
{
	struct prepared p;
	int ret;

	ret = call_begin(m, caller, mm, req, req_len, resp_buf, resp_cap, resp_len, &p);
	if (ret)
		return call_end(&p, ret);
	if (mm->write) {
		/* committed with the writes that arrive meanwhile, one flush for all */
		ret = meta_group_run(m, &p.t, run_body, &p.b);
	} else {
		ret = meta_store_txn_begin(&p.t, false);
		if (!ret) {
			ret = run_body(&p.t, &p.b);
			meta_store_txn_abort(&p.t);
		}
	}
	if (!ret && p.t.durable)
		ret = meta_store_sync(m);
	return call_end(&p, ret);
}

int meta_handle_as(struct meta *m, const struct meta_caller *caller, uint32_t method,
		   const void *req, size_t req_len, void *resp_buf, size_t resp_cap,
		   size_t *resp_len)
{
	const struct meta_method *mm = find_method(method);
	uint64_t start_ns = rdmafs_now_ns();
	int ret;

	*resp_len = 0;
	if (!mm)
		return -EOPNOTSUPP;
	ret = handle(m, caller, mm, req, req_len, resp_buf, resp_cap, resp_len);
	count_call(m, mm, req_len, *resp_len, ret, start_ns);
	return ret;
}

int meta_handle(struct meta *m, uint32_t method, const void *req, size_t req_len, void *resp_buf,
		size_t resp_cap, size_t *resp_len)
{
	return meta_handle_as(m, NULL, method, req, req_len, resp_buf, resp_cap, resp_len);
}

/* Where meta_handle_many() keeps its requests between their steps; @n of each. */
struct many {
	struct prepared *p;
	struct meta_txn **t;
	void **args;
	int *rets;
	size_t *which; /* the call of each request in the group */
};

static void handle_many(struct meta *m, struct meta_call *calls, size_t n, const struct many *w)
{
	uint64_t start_ns = rdmafs_now_ns();
	size_t grouped = 0;
	bool durable = false;

	for (size_t i = 0; i < n; i++) {
		struct meta_call *c = &calls[i];
		const struct meta_method *mm = find_method(c->method);

		c->resp_len = 0;
		/* changes only: a read needs no group */
		if (!mm || !mm->write) {
			w->p[i].b.mm = mm; /* counted below, if known */
			c->ret = -EOPNOTSUPP;
			continue;
		}
		c->ret = call_begin(m, &c->caller, mm, c->req, c->req_len, c->resp_buf, c->resp_cap,
				    &c->resp_len, &w->p[i]);
		if (!c->ret) {
			w->t[grouped] = &w->p[i].t;
			w->args[grouped] = &w->p[i].b;
			w->which[grouped++] = i;
		}
	}
	if (meta_group_run_many(m, w->t, run_body, w->args, w->rets, grouped))
		for (size_t g = 0; g < grouped; g++)
			w->rets[g] = -ENOMEM;
	for (size_t g = 0; g < grouped; g++) {
		calls[w->which[g]].ret = w->rets[g];
		durable |= !w->rets[g] && w->p[w->which[g]].t.durable;
	}
	/* one flush for every request that needs one */
	if (durable) {
		int ret = meta_store_sync(m);

		for (size_t g = 0; ret && g < grouped; g++)
			if (!calls[w->which[g]].ret && w->p[w->which[g]].t.durable)
				calls[w->which[g]].ret = ret;
	}
	for (size_t i = 0; i < n; i++) {
		const struct meta_method *mm = w->p[i].b.mm;

		if (!mm)
			continue;
		if (mm->write)
			calls[i].ret = call_end(&w->p[i], calls[i].ret);
		count_call(m, mm, calls[i].req_len, calls[i].resp_len, calls[i].ret, start_ns);
	}
}

void meta_handle_many(struct meta *m, struct meta_call *calls, size_t n)
{
	struct many w = {
		.p = calloc(n, sizeof(*w.p)),
		.t = calloc(n, sizeof(*w.t)),
		.args = calloc(n, sizeof(*w.args)),
		.rets = calloc(n, sizeof(*w.rets)),
		.which = calloc(n, sizeof(*w.which)),
	};

	if (w.p && w.t && w.args && w.rets && w.which) {
		handle_many(m, calls, n, &w);
	} else {
		for (size_t i = 0; i < n; i++) {
			calls[i].resp_len = 0;
			calls[i].ret = -ENOMEM;
		}
	}
	free(w.p);
	free(w.t);
	free(w.args);
	free(w.rets);
	free(w.which);
}

int meta_key_revoked(struct meta *m, uint64_t serial)
{
	struct meta_txn t = {.m = m};
	struct meta_client c;
	int ret;

	clock_gettime(CLOCK_REALTIME, &t.now);
	ret = meta_store_txn_begin(&t, false);
	if (ret)
		return ret;
	ret = meta_store_client_get(&t, serial, &c);
	meta_store_txn_abort(&t);
	meta_arena_free(t.arena);
	if (ret == -ENOENT)
		return 0;
	return ret ? ret : c.r.revoked != 0;
}

/* ---- open and close ---- */

/* A new store: counters and the root directory. */
static int format_store(struct meta_txn *t)
{
	uint64_t salt;
	int ret;

	if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt))
		salt = (uint64_t)t->now.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)t->now.tv_sec;
	ret = meta_store_counter_put(t, "format", META_FORMAT_VERSION);
	if (!ret)
		ret = meta_store_counter_put(t, "next_ino", META_ROOT_INO + 1);
	if (!ret)
		ret = meta_store_counter_put(t, "handles_at_close", 0);
	if (!ret)
		ret = meta_store_counter_put(t, "generation", 1);
	if (!ret)
		ret = meta_store_counter_put(t, "epoch", 1);
	if (!ret)
		ret = meta_store_counter_put(t, "inodes", 0);
	if (!ret)
		ret = meta_store_counter_put(t, "runs", 0);
	if (!ret)
		ret = meta_store_counter_put(t, "salt", salt);
	if (!ret)
		ret = meta_make_root(t);
	return ret;
}

/*
 * The cluster id: 16 random bytes made with the store (or at the first open
 * of a store older than cluster ids), kept as two counters. Daemons and
 * clients learn it from the service and hold it against the next service
 * they meet.
 */
static int load_cluster_id(struct meta *m, struct meta_txn *t)
{
	uint64_t half[2];
	int ret = meta_store_counter_get(t, "cluster_id.0", &half[0]);

	if (!ret)
		ret = meta_store_counter_get(t, "cluster_id.1", &half[1]);
	if (ret == -ENOENT) {
		uint8_t *b = (uint8_t *)half;

		if (getrandom(half, sizeof(half), 0) != sizeof(half))
			return -EIO;
		b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* a version 4 UUID */
		b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
		ret = meta_store_counter_put(t, "cluster_id.0", half[0]);
		if (!ret)
			ret = meta_store_counter_put(t, "cluster_id.1", half[1]);
	}
	if (ret)
		return ret;
	memcpy(m->cluster_id, half, sizeof(m->cluster_id));
	return 0;
}

/*
 * Handles live in memory: whether the last run may have left some open
 * decides the grace period. The counter "handles_at_close" holds the number
 * a clean meta_close() left, and HANDLES_UNKNOWN while a run goes on, so a
 * run that was killed, or a store of a build that kept handles in it, counts
 * as unknown.
 */
#define HANDLES_UNKNOWN UINT64_MAX

static int start_handles(struct meta *m, struct meta_txn *t)
{
	uint64_t left = HANDLES_UNKNOWN, stored;
	int ret = meta_store_counter_get(t, "handles_at_close", &left);

	if (ret && ret != -ENOENT)
		return ret;
	ret = meta_store_handles_clear(t, &stored);
	if (ret)
		return ret;
	if (stored)
		meta_log(m, META_LOG_INFO,
			 "dropped %llu open handle(s) an older build kept in the store: clients "
			 "reclaim theirs",
			 (unsigned long long)stored);
	meta_set_grace(m, left != 0);
	if (left == HANDLES_UNKNOWN)
		meta_log(m, META_LOG_INFO,
			 "the last run did not close cleanly: clients have %u s to reclaim their "
			 "open handles before unlinked files are freed",
			 m->opts.reclaim_grace_sec);
	else if (left)
		meta_log(m, META_LOG_INFO,
			 "the last run closed with %llu handle(s) open: clients have %u s to "
			 "reclaim them before unlinked files are freed",
			 (unsigned long long)left, m->opts.reclaim_grace_sec);
	return meta_store_counter_put(t, "handles_at_close", HANDLES_UNKNOWN);
}

/* Records at a clean close how many handles were open (start_handles()). */
static void close_handles(struct meta *m)
{
	struct meta_txn t = {.m = m};
	int ret;

	clock_gettime(CLOCK_REALTIME, &t.now);
	ret = meta_store_txn_begin(&t, true);
	if (!ret) {
		ret = meta_store_counter_put(&t, "handles_at_close", meta_handles_total(m));
		if (ret)
			meta_store_txn_abort(&t);
		else
			ret = meta_store_txn_commit(&t);
	}
	if (ret)
		meta_log(m, META_LOG_WARN,
			 "cannot record the open handles at close (%s): the next start gives "
			 "clients a grace period to reclaim them",
			 strerror(-ret));
	meta_arena_free(t.arena);
}

static int check_format(struct meta *m, struct meta_txn *t)
{
	uint64_t version;
	int ret = meta_store_counter_get(t, "format", &version);

	if (ret == -ENOENT) {
		meta_log(m, META_LOG_INFO, "new metadata store (format %d)", META_FORMAT_VERSION);
		ret = format_store(t);
		if (ret)
			return ret;
		version = META_FORMAT_VERSION;
	}
	if (ret)
		return ret;
	if (version > META_FORMAT_VERSION) {
		meta_log(m, META_LOG_ERR,
			 "metadata store has format %llu, newer than the %d this build knows: "
			 "refusing to use it",
			 (unsigned long long)version, META_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	ret = meta_store_counter_next(t, "runs", &m->run_id);
	if (!ret)
		ret = meta_store_counter_get(t, "salt", &m->salt);
	if (!ret)
		ret = load_cluster_id(m, t);
	m->run_id++;
	if (!ret)
		ret = start_handles(m, t);
	return ret;
}

/* metadata_sync = batch with sync_interval_ms: what the flusher runs every interval. */
static int flush_new(void *arg)
{
	meta_store_sync_new(arg);
	return 0;
}

int meta_open(const char *dir, const struct meta_options *opts, struct meta **out)
{
	struct meta_txn t = {0};
	struct meta *m;
	int ret;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->method_counters = calloc(METHOD_COUNT, sizeof(*m->method_counters));
	if (!m->method_counters || meta_group_create(m) || meta_handles_create(m)) {
		ret = -ENOMEM;
		goto err_free;
	}
	if (opts)
		m->opts = *opts;
	if (!m->opts.map_size)
		m->opts.map_size = META_DEFAULT_MAP_SIZE;
	if (!m->opts.chunk_size)
		m->opts.chunk_size = META_DEFAULT_CHUNK_SIZE;
	if (!m->opts.stripe_width)
		m->opts.stripe_width = META_DEFAULT_STRIPE_WIDTH;
	if (!m->opts.replicas || m->opts.replicas > RDMAFS_MAX_REPLICAS)
		m->opts.replicas = 1;
	if (m->opts.stripe_width > RDMAFS_MAX_STRIPE)
		m->opts.stripe_width = RDMAFS_MAX_STRIPE;
	if (!m->opts.heartbeat_timeout_sec)
		m->opts.heartbeat_timeout_sec = META_DEFAULT_HB_TIMEOUT;
	if (!m->opts.heartbeat_interval_ms)
		m->opts.heartbeat_interval_ms = META_DEFAULT_HB_INTERVAL_MS;
	if (!m->opts.reclaim_grace_sec)
		m->opts.reclaim_grace_sec = META_DEFAULT_RECLAIM_GRACE;

	ret = meta_store_open(m, dir);
	if (ret)
		goto err_free;
	/* one transaction: a store of a newer format is left as it was found */
	t.m = m;
	clock_gettime(CLOCK_REALTIME, &t.now);
	ret = meta_store_txn_begin(&t, true);
	if (ret)
		goto err_close_store;
	ret = meta_store_open_databases(&t);
	if (!ret)
		ret = check_format(m, &t);
	if (ret)
		goto err_abort;
	ret = meta_store_txn_commit(&t);
	meta_arena_free(t.arena);
	/* a new store's root and cluster id are on disk before anyone hears of them */
	if (!ret)
		ret = meta_store_sync(m);
	if (!ret && !m->opts.sync_always && m->opts.sync_interval_ms)
		ret = rdmafs_flusher_start(m->opts.sync_interval_ms, true, flush_new, m,
					   &m->flusher);
	if (ret)
		goto err_close_store;
	*out = m;
	return 0;

err_abort:
	meta_store_txn_abort(&t);
	meta_arena_free(t.arena);
err_close_store:
	meta_store_close(m);
err_free:
	meta_handles_destroy(m);
	meta_group_destroy(m);
	free(m->method_counters);
	free(m);
	return ret;
}

void meta_close(struct meta *m)
{
	if (!m)
		return;
	rdmafs_flusher_stop(m->flusher); /* meta_store_close() makes the last flush */
	m->flusher = NULL;		 /* nothing may kick it any more */
	close_handles(m);
	meta_store_close(m);
	meta_handles_destroy(m);
	meta_group_destroy(m);
	meta_cluster_free(m);
	free(m->method_counters);
	free(m);
}

int meta_tick(struct meta *m, uint64_t now_sec)
{
	int ret = meta_cluster_tick(m, now_sec);

	/* the clock is set: the grace period counts from the first tick */
	meta_orphans_sweep(m, now_sec);
	/* batch without a flusher: what was committed since the last flush */
	if (!m->flusher)
		meta_store_sync_new(m);
	return ret;
}

uint64_t meta_sync_count(struct meta *m)
{
	return __atomic_load_n(&m->syncs, __ATOMIC_RELAXED);
}

void meta_growth_stats(struct meta *m, uint64_t *kicks, uint64_t *flushes)
{
	*kicks = __atomic_load_n(&m->growth_kicks, __ATOMIC_RELAXED);
	*flushes = __atomic_load_n(&m->growth_flushes, __ATOMIC_RELAXED);
}
