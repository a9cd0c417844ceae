// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Methods for rdmafsctl: INODE_LIST pages through every inode (fsck compares
 * it with the daemons' chunk lists, drain finds the files to move) and
 * SET_LAYOUT switches a file to another daemon list once drain has copied its
 * chunks, INODE_PATHS names files by path for fsck and scrub, and
 * CLIENT_ADD, CLIENT_LIST and CLIENT_REVOKE keep the record of client keys.
 * All trust nothing in the request: ids, lengths and counts are checked
 * before use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "meta_i.h"

/* Entries in one INODE_LIST reply at most, whatever fits. */
#define INODE_LIST_MAX 1024
/* Room kept in a reply for the `done` field and the message framing. */
#define INODE_LIST_SLACK 16

/* Bytes a length-delimited field of @len bytes adds to a message (tag < 16). */
static size_t field_size(size_t len)
{
	size_t n = 1 + 1;

	for (size_t v = len; v >= 0x80; v >>= 7)
		n++;
	return n + len;
}

struct inode_list_walk {
	Rdmafs__InodeListResp *out;
	size_t max, used, room;
};

static int inode_list_add(struct meta_txn *t, const struct inode *in, void *arg)
{
	struct inode_list_walk *w = arg;
	Rdmafs__InodeListEntry *e;
	size_t size;
	int ret;

	if (w->out->n_inodes == w->max)
		return 1;
	e = meta_alloc(t, sizeof(*e));
	if (!e)
		return -ENOMEM;
	rdmafs__inode_list_entry__init(e);
	e->ino = in->ino;
	e->mode = in->r.mode;
	e->size = in->r.size;
	e->nlink = in->r.nlink;
	e->open_count = meta_handle_opens(t->m, in->ino);
	/* in the grace period a client may hold a file it has not reclaimed yet */
	if (!e->open_count && S_ISREG(in->r.mode) && meta_in_grace(t->m))
		e->open_count = 1;
	ret = meta_layout_out(t, in, &e->layout);
	if (ret)
		return ret;
	size = field_size(protobuf_c_message_get_packed_size(&e->base));
	if (w->used + size > w->room)
		return w->out->n_inodes == 0 ? -EMSGSIZE : 1;
	w->used += size;
	w->out->inodes[w->out->n_inodes++] = e;
	return 0;
}

int meta_op_inode_list(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__InodeListReq *req = (const void *)msg;
	struct inode_list_walk w = {.max = INODE_LIST_MAX};
	int ret;

	w.out = meta_alloc(t, sizeof(*w.out));
	if (!w.out)
		return -ENOMEM;
	if (t->resp_cap <= INODE_LIST_SLACK)
		return -EMSGSIZE;
	w.room = t->resp_cap - INODE_LIST_SLACK;
	if (req->limit && req->limit < w.max)
		w.max = req->limit;
	rdmafs__inode_list_resp__init(w.out);
	w.out->inodes = meta_alloc(t, w.max * sizeof(*w.out->inodes));
	if (!w.out->inodes)
		return -ENOMEM;
	*resp = &w.out->base;
	if (req->start_after == UINT64_MAX) {
		w.out->done = true;
		return 0;
	}
	ret = meta_store_inodes_from(t, req->start_after + 1, inode_list_add, &w);
	if (ret < 0)
		return ret;
	/* 0: the inodes ran out; 1: the reply is full */
	w.out->done = ret == 0;
	return 0;
}

/* Checks a list of daemon UUIDs off the wire: 16 bytes each, no repeats. */
static int check_uuid_list(const ProtobufCBinaryData *list, size_t n)
{
	if (n > RDMAFS_MAX_STRIPE)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (list[i].len != RDMAFS_UUID_LEN || !list[i].data)
			return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (memcmp(list[i].data, list[j].data, RDMAFS_UUID_LEN) == 0)
				return -EINVAL;
	}
	return 0;
}

int meta_op_set_layout(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__SetLayoutReq *req = (const void *)msg;
	Rdmafs__SetLayoutResp *out;
	const uint8_t *was[RDMAFS_MAX_STRIPE], *now[RDMAFS_MAX_STRIPE];
	uint32_t domains[RDMAFS_MAX_STRIPE];
	struct inode *in;
	uint32_t state;
	bool shared;
	int ret;

	if (req->ino == 0 || req->n_daemons == 0 || check_uuid_list(req->daemons, req->n_daemons) ||
	    check_uuid_list(req->expected_daemons, req->n_expected_daemons))
		return -EINVAL;
	in = meta_alloc(t, sizeof(*in));
	out = meta_alloc(t, sizeof(*out));
	if (!in || !out)
		return -ENOMEM;
	ret = meta_store_inode_get(t, req->ino, in);
	if (ret)
		return ret;
	if (S_ISDIR(in->r.mode))
		return -EISDIR;
	if (!S_ISREG(in->r.mode) || in->r.stripe_width == 0)
		return -EINVAL;
	if (req->n_expected_daemons != in->r.stripe_width)
		return -ESTALE;
	for (uint32_t i = 0; i < in->r.stripe_width; i++)
		if (memcmp(req->expected_daemons[i].data, in->daemons[i], RDMAFS_UUID_LEN) != 0)
			return -ESTALE;
	for (size_t i = 0; i < req->n_daemons; i++) {
		bool kept = false;

		for (size_t j = 0; j < req->n_expected_daemons && !kept; j++)
			kept = memcmp(req->daemons[i].data, req->expected_daemons[j].data,
				      RDMAFS_UUID_LEN) == 0;
		ret = meta_daemon_state(t, req->daemons[i].data, &state);
		if (ret == -ENOENT)
			return -EINVAL;
		if (ret)
			return ret;
		/* a daemon added must be UP; one kept (maybe DOWN for now) must not be gone */
		if (state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED ||
		    (!kept && state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP))
			return -EHOSTDOWN;
	}
	if (in->r.layout_generation == UINT32_MAX)
		return -EOVERFLOW; /* 4 billion drains of one file: never in practice */
	/* each daemon kept keeps its failure domain; one added is a domain of its own (so the
	 * chains a drain copied to, by the same rule, are the new layout's) */
	for (size_t i = 0; i < req->n_expected_daemons; i++)
		was[i] = req->expected_daemons[i].data;
	for (size_t i = 0; i < req->n_daemons; i++)
		now[i] = req->daemons[i].data;
	if (req->n_domains) {
		/* the caller's, by which it copied the chunks (a rebalance) */
		if (rdmafs_domains_check(req->domains, req->n_domains, req->n_daemons))
			return -EINVAL;
		memcpy(domains, req->domains, req->n_domains * sizeof(*domains));
		shared = rdmafs_domain_count(domains, req->n_daemons) < req->n_daemons;
	} else {
		shared = rdmafs_domains_keep(was, in->n_domains ? in->domains : NULL,
					     in->r.stripe_width, now, req->n_daemons, domains);
	}
	in->n_domains = shared ? (uint32_t)req->n_daemons : 0;
	/* never more copies than failure domains: a drain refuses such a list before it */
	if (in->replicas > rdmafs_domain_count(shared ? domains : NULL, req->n_daemons))
		return -EINVAL;
	memcpy(in->domains, domains, req->n_daemons * sizeof(*domains));
	in->r.stripe_width = (uint32_t)req->n_daemons;
	for (size_t i = 0; i < req->n_daemons; i++)
		memcpy(in->daemons[i], req->daemons[i].data, RDMAFS_UUID_LEN);
	/* daemons fence requests that carry an older generation (CHUNK_FENCE) */
	in->r.layout_generation++;
	ret = meta_store_inode_put(t, in);
	if (ret)
		return ret;
	meta_log(t->m, META_LOG_INFO, "inode %llu: layout generation %u has %u daemons",
		 (unsigned long long)in->ino, in->r.layout_generation, in->r.stripe_width);
	rdmafs__set_layout_resp__init(out);
	ret = meta_layout_out(t, in, &out->layout);
	*resp = &out->base;
	return ret;
}

/* Inodes one INODE_PATHS request may ask for. */
#define INODE_PATHS_MAX 256
/* The longest path reported: PATH_MAX - 1 bytes. */
#define INODE_PATH_MAX 4095

struct wanted_path {
	uint64_t ino;
	Rdmafs__InodePath *out;
};

struct path_walk {
	struct wanted_path *wanted; /* sorted by ino; only those still unresolved */
	size_t count, pending;
	bool too_long; /* a subtree was skipped: its path would be too long */
	size_t len;
	char path[INODE_PATH_MAX + 1];
};

static int wanted_cmp(const void *a, const void *b)
{
	const struct wanted_path *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static struct wanted_path *wanted_find(struct path_walk *w, uint64_t ino)
{
	struct wanted_path key = {.ino = ino};

	return bsearch(&key, w->wanted, w->count, sizeof(key), wanted_cmp);
}

/*
 * One entry of the depth-first walk from the root: records the path of a
 * wanted inode, descends into directories. The tree has no cycles (RENAME
 * refuses to make one) and its depth is bounded by the path length.
 */
static int path_visit(struct meta_txn *t, const struct meta_store_dirent *e, void *arg)
{
	struct path_walk *w = arg;
	struct wanted_path *found;
	size_t saved = w->len;
	int ret = 0;

	if (w->len + 1 + e->name_len > INODE_PATH_MAX) {
		w->too_long = true;
		return 0;
	}
	w->path[w->len++] = '/';
	memcpy(w->path + w->len, e->name, e->name_len);
	w->len += e->name_len;
	found = wanted_find(w, e->ino);
	/* several asks of one inode sit side by side in the sorted array */
	while (found && found > w->wanted && found[-1].ino == e->ino)
		found--;
	for (; found && found < w->wanted + w->count && found->ino == e->ino; found++) {
		if (found->out->state != RDMAFS__PATH_STATE__PATH_STATE_UNSPECIFIED)
			continue;
		found->out->path.data = meta_dup(t, w->path, w->len);
		if (!found->out->path.data) {
			ret = -ENOMEM;
			goto out;
		}
		found->out->path.len = w->len;
		found->out->state = RDMAFS__PATH_STATE__PATH_STATE_FOUND;
		w->pending--;
	}
	if (w->pending == 0) {
		ret = 1;
		goto out;
	}
	if (S_ISDIR(e->type))
		ret = meta_store_dirents_from(t, e->ino, 0, path_visit, w);
out:
	w->len = saved;
	return ret;
}

int meta_op_inode_paths(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__InodePathsReq *req = (const void *)msg;
	Rdmafs__InodePathsResp *out;
	struct path_walk *w;
	struct inode *in;
	size_t used = 0;
	int ret;

	if (req->n_inos == 0 || req->n_inos > INODE_PATHS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < req->n_inos; i++)
		if (req->inos[i] == 0)
			return -EINVAL;
	out = meta_alloc(t, sizeof(*out));
	w = meta_alloc(t, sizeof(*w));
	in = meta_alloc(t, sizeof(*in));
	if (!out || !w || !in)
		return -ENOMEM;
	rdmafs__inode_paths_resp__init(out);
	out->paths = meta_alloc(t, req->n_inos * sizeof(*out->paths));
	w->wanted = meta_alloc(t, req->n_inos * sizeof(*w->wanted));
	if (!out->paths || !w->wanted)
		return -ENOMEM;
	for (size_t i = 0; i < req->n_inos; i++) {
		Rdmafs__InodePath *p = meta_alloc(t, sizeof(*p));

		if (!p)
			return -ENOMEM;
		rdmafs__inode_path__init(p);
		p->ino = req->inos[i];
		out->paths[i] = p;
		ret = meta_store_inode_get(t, p->ino, in);
		if (ret == -ENOENT)
			p->state = RDMAFS__PATH_STATE__PATH_STATE_NO_INODE;
		else if (ret)
			return ret;
		else if (p->ino == META_ROOT_INO)
			p->state = RDMAFS__PATH_STATE__PATH_STATE_FOUND;
		else if (in->r.nlink == 0)
			p->state = RDMAFS__PATH_STATE__PATH_STATE_UNLINKED;
		if (p->state == RDMAFS__PATH_STATE__PATH_STATE_FOUND) {
			p->path.data = (uint8_t *)"/";
			p->path.len = 1;
		}
		if (p->state != RDMAFS__PATH_STATE__PATH_STATE_UNSPECIFIED)
			continue;
		w->wanted[w->count].ino = p->ino;
		w->wanted[w->count++].out = p;
	}
	w->pending = w->count;
	if (w->pending) {
		qsort(w->wanted, w->count, sizeof(*w->wanted), wanted_cmp);
		ret = meta_store_dirents_from(t, META_ROOT_INO, 0, path_visit, w);
		if (ret < 0)
			return ret;
	}
	/* as many as fit, in the order asked */
	for (size_t i = 0; i < req->n_inos; i++) {
		Rdmafs__InodePath *p = out->paths[i];
		size_t size;

		if (p->state == RDMAFS__PATH_STATE__PATH_STATE_UNSPECIFIED)
			p->state = w->too_long ? RDMAFS__PATH_STATE__PATH_STATE_TOO_LONG
					       : RDMAFS__PATH_STATE__PATH_STATE_NOT_FOUND;
		size = field_size(protobuf_c_message_get_packed_size(&p->base));
		if (used + size + INODE_LIST_SLACK > t->resp_cap)
			break;
		used += size;
		out->n_paths++;
	}
	if (out->n_paths == 0)
		return -EMSGSIZE;
	*resp = &out->base;
	return 0;
}

/* ---- client keys ---- */

/* Entries in one CLIENT_LIST reply at most. */
#define CLIENT_LIST_MAX 256

static int client_out(struct meta_txn *t, const struct meta_client *c, Rdmafs__ClientInfo **out)
{
	Rdmafs__ClientInfo *ci = meta_alloc(t, sizeof(*ci));

	if (!ci)
		return -ENOMEM;
	rdmafs__client_info__init(ci);
	ci->name = meta_dup(t, c->name, strlen(c->name) + 1);
	if (!ci->name)
		return -ENOMEM;
	ci->serial = c->serial;
	ci->flags = c->r.flags;
	ci->revoked = c->r.revoked != 0;
	ci->created_unix_ms = c->r.created_unix_ms;
	ci->revoked_unix_ms = c->r.revoked_unix_ms;
	*out = ci;
	return 0;
}

/* Names as the transport takes them (xprt_key_name_valid(), which this layer cannot call). */
static bool client_name_ok(const char *name)
{
	size_t len = name ? strnlen(name, META_CLIENT_NAME_MAX + 1) : 0;

	if (len == 0 || len > META_CLIENT_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] <= 0x20 || name[i] >= 0x7f)
			return false;
	return true;
}

struct client_find {
	const char *name;
	struct meta_client found;
	bool any;
};

static int client_find_live(struct meta_txn *t, const struct meta_client *c, void *arg)
{
	struct client_find *f = arg;

	if (c->r.revoked || strcmp(c->name, f->name) != 0)
		return 0;
	f->found = *c;
	f->any = true;
	return 1;
}

static uint64_t unix_ms(const struct meta_txn *t)
{
	return (uint64_t)t->now.tv_sec * 1000u + (uint64_t)t->now.tv_nsec / 1000000u;
}

/* The next serial: counters of keys are created by the first key of a store older than them. */
static int next_serial(struct meta_txn *t, uint64_t *serial)
{
	int ret = meta_store_counter_next(t, "next_client_serial", serial);

	if (ret == -ENOENT) {
		*serial = 1;
		ret = meta_store_counter_put(t, "next_client_serial", 2);
	}
	return ret;
}

static int bump_keys_epoch(struct meta_txn *t)
{
	uint64_t epoch;
	int ret = meta_keys_epoch(t, &epoch);

	return ret ? ret : meta_store_counter_put(t, "keys_epoch", epoch + 1);
}

int meta_op_client_add(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ClientAddReq *req = (const void *)msg;
	struct client_find f = {.name = req->name};
	Rdmafs__ClientAddResp *out;
	struct meta_client c = {0};
	int ret;

	if (!client_name_ok(req->name) || (req->flags & ~RDMAFS_KEY_FLAGS_ALL))
		return -EINVAL;
	ret = meta_store_clients_from(t, 0, client_find_live, &f);
	if (ret < 0)
		return ret;
	if (f.any)
		return -EEXIST;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	ret = next_serial(t, &c.serial);
	if (!ret)
		ret = bump_keys_epoch(t);
	if (ret)
		return ret;
	snprintf(c.name, sizeof(c.name), "%s", req->name);
	c.r.flags = req->flags;
	c.r.created_unix_ms = unix_ms(t);
	ret = meta_store_client_put(t, &c);
	if (ret)
		return ret;
	meta_log(t->m, META_LOG_INFO, "client key issued: %s (serial %llu, flags %#x)", c.name,
		 (unsigned long long)c.serial, c.r.flags);
	rdmafs__client_add_resp__init(out);
	*resp = &out->base;
	return client_out(t, &c, &out->client);
}

struct client_list_walk {
	Rdmafs__ClientListResp *out;
	size_t used, room;
};

static int client_list_add(struct meta_txn *t, const struct meta_client *c, void *arg)
{
	struct client_list_walk *w = arg;
	Rdmafs__ClientInfo *ci;
	size_t size;
	int ret;

	if (w->out->n_clients == CLIENT_LIST_MAX)
		return 1;
	ret = client_out(t, c, &ci);
	if (ret)
		return ret;
	size = field_size(protobuf_c_message_get_packed_size(&ci->base));
	if (w->used + size > w->room)
		return w->out->n_clients == 0 ? -EMSGSIZE : 1;
	w->used += size;
	w->out->clients[w->out->n_clients++] = ci;
	return 0;
}

int meta_op_client_list(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ClientListReq *req = (const void *)msg;
	struct client_list_walk w = {0};
	int ret;

	/* the epoch, the done flag and the framing: 16 bytes are plenty */
	if (t->resp_cap <= INODE_LIST_SLACK + 16)
		return -EMSGSIZE;
	w.room = t->resp_cap - INODE_LIST_SLACK - 16;
	w.out = meta_alloc(t, sizeof(*w.out));
	if (!w.out)
		return -ENOMEM;
	rdmafs__client_list_resp__init(w.out);
	w.out->clients = meta_alloc(t, CLIENT_LIST_MAX * sizeof(*w.out->clients));
	if (!w.out->clients)
		return -ENOMEM;
	*resp = &w.out->base;
	ret = meta_keys_epoch(t, &w.out->keys_epoch);
	if (ret)
		return ret;
	ret = meta_store_clients_from(t, req->start_after, client_list_add, &w);
	if (ret < 0)
		return ret;
	w.out->done = ret == 0;
	return 0;
}

int meta_op_client_revoke(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__ClientRevokeReq *req = (const void *)msg;
	struct client_find f = {.name = req->name};
	Rdmafs__ClientRevokeResp *out;
	int ret;

	if (!client_name_ok(req->name))
		return -EINVAL;
	ret = meta_store_clients_from(t, 0, client_find_live, &f);
	if (ret < 0)
		return ret;
	if (!f.any)
		return -ENOENT;
	out = meta_alloc(t, sizeof(*out));
	if (!out)
		return -ENOMEM;
	f.found.r.revoked = 1;
	f.found.r.revoked_unix_ms = unix_ms(t);
	ret = meta_store_client_put(t, &f.found);
	if (!ret)
		ret = bump_keys_epoch(t);
	if (ret)
		return ret;
	meta_log(t->m, META_LOG_INFO, "client key revoked: %s (serial %llu)", f.found.name,
		 (unsigned long long)f.found.serial);
	rdmafs__client_revoke_resp__init(out);
	*resp = &out->base;
	return client_out(t, &f.found, &out->client);
}
