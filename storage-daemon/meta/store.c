// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The bottom layer of the metadata service (meta_store_i.h): the LMDB
 * environment, its transactions and named databases, the layout of every
 * key and record; the only code of the service that calls LMDB. Above it
 * only typed records and walks are seen. Also the log and reply memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmdb_errno.h"
#include "meta_store_lmdb_i.h"

struct meta_arena {
	struct meta_arena *next;
	max_align_t data[];
};

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void meta_log(struct meta *m, enum meta_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (m && m->opts.log) {
		m->opts.log(m->opts.log_arg, level, fmt, ap);
	} else {
		char line[512];

		vsnprintf(line, sizeof(line), fmt, ap);
		fprintf(stderr, "rdmafs-meta: %s: %s\n", level_names[level], line);
	}
	va_end(ap);
}

/* ---- reply memory ---- */

void *meta_alloc(struct meta_txn *t, size_t size)
{
	struct meta_arena *a;

	if (size > SIZE_MAX - sizeof(*a))
		return NULL;
	a = calloc(1, sizeof(*a) + size);
	if (!a)
		return NULL;
	a->next = t->arena;
	t->arena = a;
	return a->data;
}

void *meta_dup(struct meta_txn *t, const void *data, size_t len)
{
	void *p = meta_alloc(t, len ? len : 1);

	if (p && len)
		memcpy(p, data, len);
	return p;
}

void meta_arena_free(struct meta_arena *a)
{
	while (a) {
		struct meta_arena *next = a->next;

		free(a);
		a = next;
	}
}

/* ---- keys and handles ---- */

/*
 * The LMDB transaction of request @t. struct meta_store_txn is never
 * defined: outside this file it stands for an MDB_txn.
 */
static MDB_txn *txn_of(const struct meta_txn *t)
{
	return (MDB_txn *)t->txn;
}

/* The environment and databases of request @t. */
static struct meta_store *store_of(const struct meta_txn *t)
{
	return t->m->store;
}

/* ---- counters ---- */

int meta_store_counter_get(struct meta_txn *t, const char *name, uint64_t *value)
{
	MDB_val k = {strlen(name), (void *)name}, v;
	int rc = mdb_get(txn_of(t), store_of(t)->db_counters, &k, &v);

	if (rc)
		return lmdb_errno(rc);
	if (v.mv_size != sizeof(*value))
		return -EIO;
	memcpy(value, v.mv_data, sizeof(*value));
	return 0;
}

int meta_store_counter_put(struct meta_txn *t, const char *name, uint64_t value)
{
	MDB_val k = {strlen(name), (void *)name}, v = {sizeof(value), &value};

	return lmdb_errno(mdb_put(txn_of(t), store_of(t)->db_counters, &k, &v, 0));
}

int meta_store_counter_next(struct meta_txn *t, const char *name, uint64_t *value)
{
	int ret = meta_store_counter_get(t, name, value);

	if (ret)
		return ret;
	return meta_store_counter_put(t, name, *value + 1);
}

int meta_store_counter_add(struct meta_txn *t, const char *name, int64_t delta)
{
	uint64_t v;
	int ret = meta_store_counter_get(t, name, &v);

	if (ret)
		return ret;
	return meta_store_counter_put(t, name, v + (uint64_t)delta);
}

/* ---- inodes ---- */

/* Decodes the inodes record @v of inode @ino into @out; -EIO (logged) when corrupt. */
static int inode_decode(struct meta *m, uint64_t ino, const MDB_val *v, struct inode *out)
{
	size_t layout;

	if (v->mv_size < sizeof(out->r))
		goto corrupt;
	out->ino = ino;
	memcpy(&out->r, v->mv_data, sizeof(out->r));
	layout = sizeof(out->r) + (size_t)out->r.stripe_width * RDMAFS_UUID_LEN;
	if (out->r.stripe_width > RDMAFS_MAX_STRIPE ||
	    (v->mv_size != layout && v->mv_size != layout + sizeof(out->replicas) &&
	     v->mv_size != layout + sizeof(out->replicas) + out->r.stripe_width))
		goto corrupt;
	memcpy(out->daemons, (const uint8_t *)v->mv_data + sizeof(out->r),
	       (size_t)out->r.stripe_width * RDMAFS_UUID_LEN);
	/* records of files with one copy (and of every file older than replicas) end there */
	out->replicas = 1;
	out->n_domains = 0;
	if (v->mv_size > layout)
		memcpy(&out->replicas, (const uint8_t *)v->mv_data + layout, sizeof(out->replicas));
	if (out->replicas < 1 || out->replicas > RDMAFS_MAX_REPLICAS)
		goto corrupt;
	/* then, where two of its daemons share a failure domain, one byte a daemon */
	if (v->mv_size > layout + sizeof(out->replicas)) {
		const uint8_t *dom = (const uint8_t *)v->mv_data + layout + sizeof(out->replicas);

		out->n_domains = out->r.stripe_width;
		for (uint32_t i = 0; i < out->n_domains; i++)
			out->domains[i] = dom[i];
		if (rdmafs_domains_check(out->domains, out->n_domains, out->r.stripe_width))
			goto corrupt;
	}
	return 0;
corrupt:
	meta_log(m, META_LOG_ERR, "inode %llu: corrupt record of %zu bytes",
		 (unsigned long long)ino, v->mv_size);
	return -EIO;
}

/* mdb_get() of the record keyed by the big-endian @id in @db; LMDB's own return code. */
static int get_by_id(struct meta_txn *t, MDB_dbi db, uint64_t id, MDB_val *v)
{
	uint8_t key[8];
	MDB_val k = {sizeof(key), key};

	rdmafs_be64_put(key, id);
	return mdb_get(txn_of(t), db, &k, v);
}

int meta_store_inode_get(struct meta_txn *t, uint64_t ino, struct inode *out)
{
	MDB_val v;
	int rc;

	rc = get_by_id(t, store_of(t)->db_inodes, ino, &v);
	if (rc)
		return lmdb_errno(rc);
	return inode_decode(t->m, ino, &v, out);
}

int meta_store_inode_put(struct meta_txn *t, const struct inode *in)
{
	uint8_t key[8];
	size_t layout = (size_t)in->r.stripe_width * RDMAFS_UUID_LEN;
	bool copies = S_ISREG(in->r.mode) && in->replicas > 1;
	size_t domains = copies && in->n_domains == in->r.stripe_width ? in->n_domains : 0;
	MDB_val k = {sizeof(key), key},
		v = {sizeof(in->r) + layout + (copies ? sizeof(in->replicas) : 0) + domains, NULL};
	uint8_t *dom;
	int rc;

	rdmafs_be64_put(key, in->ino);
	rc = mdb_put(txn_of(t), store_of(t)->db_inodes, &k, &v, MDB_RESERVE);
	if (rc)
		return lmdb_errno(rc);
	memcpy(v.mv_data, &in->r, sizeof(in->r));
	memcpy((uint8_t *)v.mv_data + sizeof(in->r), in->daemons, layout);
	if (copies)
		memcpy((uint8_t *)v.mv_data + sizeof(in->r) + layout, &in->replicas,
		       sizeof(in->replicas));
	dom = (uint8_t *)v.mv_data + sizeof(in->r) + layout + sizeof(in->replicas);
	for (size_t i = 0; i < domains; i++)
		dom[i] = (uint8_t)in->domains[i];
	return 0;
}

/* Deletes every record of @dbi whose key starts with the 8 bytes of @ino. */
static int delete_prefix(struct meta_txn *t, MDB_dbi dbi, uint64_t ino)
{
	uint8_t prefix[8];
	MDB_cursor *c;
	MDB_val k = {sizeof(prefix), prefix}, v;
	int rc;

	rdmafs_be64_put(prefix, ino);
	rc = mdb_cursor_open(txn_of(t), dbi, &c);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= 8 && memcmp(k.mv_data, prefix, 8) == 0) {
		rc = mdb_cursor_del(c, 0);
		if (rc)
			break;
		/* seek again rather than trust the cursor position after a delete */
		k.mv_size = sizeof(prefix);
		k.mv_data = prefix;
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

int meta_store_inode_delete(struct meta_txn *t, uint64_t ino)
{
	uint8_t key[8];
	MDB_val k = {sizeof(key), key};
	int rc, ret;

	rdmafs_be64_put(key, ino);
	rc = mdb_del(txn_of(t), store_of(t)->db_inodes, &k, NULL);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_del(txn_of(t), store_of(t)->db_symlinks, &k, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return lmdb_errno(rc);
	ret = delete_prefix(t, store_of(t)->db_xattrs, ino);
	if (!ret)
		ret = delete_prefix(t, store_of(t)->db_allocs, ino);
	if (ret)
		return ret;
	return meta_store_counter_add(t, "inodes", -1);
}

int meta_store_inodes_from(struct meta_txn *t, uint64_t first, meta_store_inode_cb cb, void *arg)
{
	struct inode *in = meta_alloc(t, sizeof(*in));
	uint8_t key[8];
	MDB_cursor *c;
	MDB_val k = {sizeof(key), key}, v;
	int rc, ret = 0;

	if (!in)
		return -ENOMEM;
	rdmafs_be64_put(key, first);
	rc = mdb_cursor_open(txn_of(t), store_of(t)->db_inodes, &c);
	if (rc)
		return lmdb_errno(rc);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != sizeof(key))
			continue;
		ret = inode_decode(t->m, rdmafs_be64_get(k.mv_data), &v, in);
		if (!ret)
			ret = cb(t, in, arg);
		if (ret)
			break;
	}
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

/* ---- open handles of an older run ---- */

int meta_store_handles_clear(struct meta_txn *t, uint64_t *count)
{
	MDB_stat st;
	int rc = mdb_stat(txn_of(t), store_of(t)->db_handles, &st);

	if (rc)
		return lmdb_errno(rc);
	*count = st.ms_entries;
	if (!st.ms_entries)
		return 0;
	return lmdb_errno(mdb_drop(txn_of(t), store_of(t)->db_handles, 0));
}

/* ---- allocation reports ---- */

int meta_store_alloc_put(struct meta_txn *t, uint64_t ino, const uint8_t *uuid, uint64_t bytes)
{
	uint8_t key[8 + RDMAFS_UUID_LEN];
	MDB_val k = {sizeof(key), key}, v = {sizeof(bytes), &bytes};

	rdmafs_be64_put(key, ino);
	memcpy(key + 8, uuid, RDMAFS_UUID_LEN);
	return lmdb_errno(mdb_put(txn_of(t), store_of(t)->db_allocs, &k, &v, 0));
}

int meta_store_alloc_mark(struct meta_txn *t, uint64_t ino)
{
	uint8_t key[8];
	uint64_t zero = 0;
	MDB_val k = {sizeof(key), key}, v = {sizeof(zero), &zero};

	rdmafs_be64_put(key, ino);
	return lmdb_errno(mdb_put(txn_of(t), store_of(t)->db_allocs, &k, &v, 0));
}

int meta_store_alloc_known(struct meta_txn *t, uint64_t ino)
{
	MDB_val v;
	int rc;

	rc = get_by_id(t, store_of(t)->db_allocs, ino, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc ? lmdb_errno(rc) : 1;
}

int meta_store_alloc_sum(struct meta_txn *t, const struct inode *in, uint64_t *bytes)
{
	uint8_t key[8 + RDMAFS_UUID_LEN];
	MDB_val k = {sizeof(key), key}, v;
	uint64_t b;
	int rc;

	*bytes = 0;
	rdmafs_be64_put(key, in->ino);
	/* a point lookup per layout daemon: records of daemons a drain took away do not count */
	for (uint32_t d = 0; d < in->r.stripe_width; d++) {
		memcpy(key + 8, in->daemons[d], RDMAFS_UUID_LEN);
		k.mv_size = sizeof(key);
		k.mv_data = key;
		rc = mdb_get(txn_of(t), store_of(t)->db_allocs, &k, &v);
		if (rc == MDB_NOTFOUND)
			continue;
		if (rc)
			return lmdb_errno(rc);
		if (v.mv_size != sizeof(b))
			return -EIO;
		memcpy(&b, v.mv_data, sizeof(b));
		*bytes += b;
	}
	return 0;
}

/* ---- directory entries ---- */

static void dirent_key(uint8_t *key, uint64_t parent, const uint8_t *name, size_t len)
{
	rdmafs_be64_put(key, parent);
	memcpy(key + 8, name, len);
}

int meta_store_dirent_get(struct meta_txn *t, uint64_t parent, const uint8_t *name, size_t len,
			  struct dirent_val *out)
{
	uint8_t key[8 + META_NAME_MAX];
	MDB_val k = {8 + len, key}, v;
	int rc;

	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	dirent_key(key, parent, name, len);
	rc = mdb_get(txn_of(t), store_of(t)->db_dirents, &k, &v);
	if (rc)
		return lmdb_errno(rc);
	if (v.mv_size != sizeof(*out))
		return -EIO;
	memcpy(out, v.mv_data, sizeof(*out));
	return 0;
}

static int dirpos_put(struct meta_txn *t, uint64_t parent, uint64_t id, const uint8_t *name,
		      size_t len, uint64_t ino, uint32_t type)
{
	uint8_t key[16];
	struct dirpos_val pv = {.ino = ino, .type = type, .name_len = (uint32_t)len};
	MDB_val k = {sizeof(key), key}, v = {sizeof(pv) + len, NULL};
	int rc;

	rdmafs_be64_put(key, parent);
	rdmafs_be64_put(key + 8, id);
	rc = mdb_put(txn_of(t), store_of(t)->db_dirpos, &k, &v, MDB_RESERVE);
	if (rc)
		return lmdb_errno(rc);
	memcpy(v.mv_data, &pv, sizeof(pv));
	memcpy((uint8_t *)v.mv_data + sizeof(pv), name, len);
	return 0;
}

int meta_store_dirent_add(struct meta_txn *t, struct inode *dir, const uint8_t *name, size_t len,
			  uint64_t ino, uint32_t type)
{
	uint8_t key[8 + META_NAME_MAX];
	struct dirent_val dv = {.ino = ino, .type = type};
	MDB_val k = {8 + len, key}, v = {sizeof(dv), &dv};
	int rc;

	if (dir->r.next_dirent_id < META_DIRENT_FIRST_ID)
		dir->r.next_dirent_id = META_DIRENT_FIRST_ID;
	dv.id = dir->r.next_dirent_id++;
	dirent_key(key, dir->ino, name, len);
	rc = mdb_put(txn_of(t), store_of(t)->db_dirents, &k, &v, MDB_NOOVERWRITE);
	if (rc == MDB_KEYEXIST)
		return -EEXIST;
	if (rc)
		return lmdb_errno(rc);
	return dirpos_put(t, dir->ino, dv.id, name, len, ino, type);
}

int meta_store_dirent_repoint(struct meta_txn *t, uint64_t parent, const uint8_t *name, size_t len,
			      uint64_t ino, uint32_t type)
{
	uint8_t key[8 + META_NAME_MAX];
	struct dirent_val dv;
	MDB_val k = {8 + len, key}, v = {sizeof(dv), &dv};
	int ret, rc;

	ret = meta_store_dirent_get(t, parent, name, len, &dv);
	if (ret)
		return ret;
	dv.ino = ino;
	dv.type = type;
	dirent_key(key, parent, name, len);
	rc = mdb_put(txn_of(t), store_of(t)->db_dirents, &k, &v, 0);
	if (rc)
		return lmdb_errno(rc);
	return dirpos_put(t, parent, dv.id, name, len, ino, type);
}

int meta_store_dirent_delete(struct meta_txn *t, uint64_t parent, const uint8_t *name, size_t len)
{
	uint8_t key[8 + META_NAME_MAX], pos[16];
	struct dirent_val dv;
	MDB_val k = {8 + len, key}, pk = {sizeof(pos), pos};
	int ret, rc;

	ret = meta_store_dirent_get(t, parent, name, len, &dv);
	if (ret)
		return ret;
	dirent_key(key, parent, name, len);
	rc = mdb_del(txn_of(t), store_of(t)->db_dirents, &k, NULL);
	if (rc)
		return lmdb_errno(rc);
	rdmafs_be64_put(pos, parent);
	rdmafs_be64_put(pos + 8, dv.id);
	return lmdb_errno(mdb_del(txn_of(t), store_of(t)->db_dirpos, &pk, NULL));
}

int meta_store_dir_empty(struct meta_txn *t, uint64_t ino)
{
	uint8_t prefix[8];
	MDB_cursor *c;
	MDB_val k = {sizeof(prefix), prefix}, v;
	int rc;

	rdmafs_be64_put(prefix, ino);
	rc = mdb_cursor_open(txn_of(t), store_of(t)->db_dirents, &c);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		return 1;
	if (rc)
		return lmdb_errno(rc);
	return !(k.mv_size >= 8 && memcmp(k.mv_data, prefix, 8) == 0);
}

int meta_store_dirents_from(struct meta_txn *t, uint64_t parent, uint64_t after_id,
			    meta_store_dirent_cb cb, void *arg)
{
	uint8_t key[16];
	MDB_cursor *c;
	MDB_val k = {sizeof(key), key}, v;
	int rc, ret = 0;

	if (after_id == UINT64_MAX)
		return 0;
	rdmafs_be64_put(key, parent);
	rdmafs_be64_put(key + 8, after_id + 1);
	rc = mdb_cursor_open(txn_of(t), store_of(t)->db_dirpos, &c);
	if (rc)
		return lmdb_errno(rc);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct meta_store_dirent e;
		struct dirpos_val pv;

		if (k.mv_size != sizeof(key) || rdmafs_be64_get(k.mv_data) != parent)
			break;
		if (v.mv_size < sizeof(pv)) {
			ret = -EIO;
			break;
		}
		memcpy(&pv, v.mv_data, sizeof(pv));
		if (v.mv_size != sizeof(pv) + pv.name_len) {
			ret = -EIO;
			break;
		}
		e.id = rdmafs_be64_get((const uint8_t *)k.mv_data + 8);
		e.ino = pv.ino;
		e.type = pv.type;
		e.name = (const uint8_t *)v.mv_data + sizeof(pv);
		e.name_len = pv.name_len;
		ret = cb(t, &e, arg);
		if (ret)
			break;
	}
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

/* ---- symlinks and xattrs ---- */

int meta_store_symlink_get(struct meta_txn *t, uint64_t ino, const void **target, size_t *len)
{
	MDB_val v;
	int rc;

	rc = get_by_id(t, store_of(t)->db_symlinks, ino, &v);
	if (rc)
		return lmdb_errno(rc);
	*target = v.mv_data;
	*len = v.mv_size;
	return 0;
}

int meta_store_symlink_put(struct meta_txn *t, uint64_t ino, const void *target, size_t len)
{
	uint8_t key[8];
	MDB_val k = {sizeof(key), key}, v = {len, (void *)target};

	rdmafs_be64_put(key, ino);
	return lmdb_errno(mdb_put(txn_of(t), store_of(t)->db_symlinks, &k, &v, 0));
}

/* The xattrs key of @name (@len bytes, at most META_XATTR_NAME_MAX) of @ino; its size. */
static size_t xattr_key(uint8_t *key, uint64_t ino, const uint8_t *name, size_t len)
{
	rdmafs_be64_put(key, ino);
	memcpy(key + 8, name, len);
	return 8 + len;
}

int meta_store_xattr_get(struct meta_txn *t, uint64_t ino, const uint8_t *name, size_t len,
			 const void **value, size_t *value_len)
{
	uint8_t key[8 + META_XATTR_NAME_MAX];
	MDB_val k = {0, key}, v;
	int rc;

	if (len > META_XATTR_NAME_MAX)
		return -ERANGE;
	k.mv_size = xattr_key(key, ino, name, len);
	rc = mdb_get(txn_of(t), store_of(t)->db_xattrs, &k, &v);
	if (rc)
		return lmdb_errno(rc);
	*value = v.mv_data;
	*value_len = v.mv_size;
	return 0;
}

int meta_store_xattr_put(struct meta_txn *t, uint64_t ino, const uint8_t *name, size_t len,
			 const void *value, size_t value_len)
{
	uint8_t key[8 + META_XATTR_NAME_MAX];
	MDB_val k = {0, key}, v = {value_len, (void *)value};

	if (len > META_XATTR_NAME_MAX)
		return -ERANGE;
	k.mv_size = xattr_key(key, ino, name, len);
	if (!v.mv_data)
		v.mv_data = key; /* an empty value still needs a pointer */
	return lmdb_errno(mdb_put(txn_of(t), store_of(t)->db_xattrs, &k, &v, 0));
}

int meta_store_xattr_delete(struct meta_txn *t, uint64_t ino, const uint8_t *name, size_t len)
{
	uint8_t key[8 + META_XATTR_NAME_MAX];
	MDB_val k = {0, key};

	if (len > META_XATTR_NAME_MAX)
		return -ERANGE;
	k.mv_size = xattr_key(key, ino, name, len);
	return lmdb_errno(mdb_del(txn_of(t), store_of(t)->db_xattrs, &k, NULL));
}

int meta_store_xattrs_each(struct meta_txn *t, uint64_t ino, meta_store_xattr_cb cb, void *arg)
{
	uint8_t prefix[8];
	MDB_cursor *c;
	MDB_val k = {sizeof(prefix), prefix}, v;
	int rc, ret = 0;

	rdmafs_be64_put(prefix, ino);
	rc = mdb_cursor_open(txn_of(t), store_of(t)->db_xattrs, &c);
	if (rc)
		return lmdb_errno(rc);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size <= 8 || memcmp(k.mv_data, prefix, 8) != 0)
			break;
		ret = cb(t, (const uint8_t *)k.mv_data + 8, k.mv_size - 8, arg);
		if (ret)
			break;
	}
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

/* ---- the cluster map's daemons ---- */

/* A uint16 length and that many bytes, into @out (room for @max and a NUL). */
static bool daemon_take_string(const uint8_t **p, const uint8_t *end, char *out, size_t max,
			       uint16_t *out_len)
{
	uint16_t len;

	if (end - *p < 2)
		return false;
	memcpy(&len, *p, 2);
	*p += 2;
	if (len > max || end - *p < len)
		return false;
	memcpy(out, *p, len);
	out[len] = '\0';
	*p += len;
	if (out_len)
		*out_len = len;
	return true;
}

static uint8_t *daemon_put_string(uint8_t *p, const char *s, uint16_t len)
{
	memcpy(p, &len, 2);
	memcpy(p + 2, s, len);
	return p + 2 + len;
}

static int daemon_decode(struct meta *m, const MDB_val *k, const MDB_val *v, struct daemon *d)
{
	const uint8_t *p = (const uint8_t *)v->mv_data + sizeof(d->r);
	const uint8_t *end = (const uint8_t *)v->mv_data + v->mv_size;

	if (k->mv_size != RDMAFS_UUID_LEN || v->mv_size < sizeof(d->r))
		goto corrupt;
	memcpy(d->uuid, k->mv_data, RDMAFS_UUID_LEN);
	memcpy(&d->r, v->mv_data, sizeof(d->r));
	if (d->r.address_count > META_MAX_ADDRESSES)
		goto corrupt;
	for (uint32_t i = 0; i < d->r.address_count; i++)
		if (!daemon_take_string(&p, end, d->address[i], META_MAX_ADDRESS_LEN,
					&d->address_len[i]))
			goto corrupt;
	d->name[0] = d->disk_id[0] = d->host[0] = d->rack[0] = '\0';
	d->flags = 0;
	/* records written before daemons had names end here */
	if (p == end)
		return 0;
	if (!daemon_take_string(&p, end, d->name, META_MAX_DAEMON_NAME, NULL) ||
	    !daemon_take_string(&p, end, d->disk_id, META_MAX_DAEMON_NAME, NULL) ||
	    end - p < (ptrdiff_t)sizeof(d->flags))
		goto corrupt;
	memcpy(&d->flags, p, sizeof(d->flags));
	p += sizeof(d->flags);
	/* records written before failure domains end here */
	if (p == end)
		return 0;
	if (!daemon_take_string(&p, end, d->host, META_MAX_DAEMON_NAME, NULL) ||
	    !daemon_take_string(&p, end, d->rack, META_MAX_DAEMON_NAME, NULL) || p != end)
		goto corrupt;
	return 0;
corrupt:
	meta_log(m, META_LOG_ERR, "cluster map: corrupt daemon record");
	return -EIO;
}

int meta_store_daemon_get(struct meta_txn *t, const uint8_t *uuid, struct daemon *out)
{
	MDB_val k = {RDMAFS_UUID_LEN, (void *)uuid}, v;
	int rc = mdb_get(txn_of(t), store_of(t)->db_daemons, &k, &v);

	if (rc)
		return lmdb_errno(rc);
	return daemon_decode(t->m, &k, &v, out);
}

int meta_store_daemon_put(struct meta_txn *t, const struct daemon *d)
{
	MDB_val k = {RDMAFS_UUID_LEN, (void *)d->uuid}, v;
	uint16_t name_len = (uint16_t)strnlen(d->name, META_MAX_DAEMON_NAME);
	uint16_t disk_len = (uint16_t)strnlen(d->disk_id, META_MAX_DAEMON_NAME);
	uint16_t host_len = (uint16_t)strnlen(d->host, META_MAX_DAEMON_NAME);
	uint16_t rack_len = (uint16_t)strnlen(d->rack, META_MAX_DAEMON_NAME);
	size_t size = sizeof(d->r) + 2 + name_len + 2 + disk_len + sizeof(d->flags) + 2 + host_len +
		      2 + rack_len;
	uint8_t *p;
	int rc;

	for (uint32_t i = 0; i < d->r.address_count; i++)
		size += 2 + d->address_len[i];
	v.mv_size = size;
	rc = mdb_put(txn_of(t), store_of(t)->db_daemons, &k, &v, MDB_RESERVE);
	if (rc)
		return lmdb_errno(rc);
	p = v.mv_data;
	memcpy(p, &d->r, sizeof(d->r));
	p += sizeof(d->r);
	for (uint32_t i = 0; i < d->r.address_count; i++)
		p = daemon_put_string(p, d->address[i], d->address_len[i]);
	p = daemon_put_string(p, d->name, name_len);
	p = daemon_put_string(p, d->disk_id, disk_len);
	memcpy(p, &d->flags, sizeof(d->flags));
	p += sizeof(d->flags);
	p = daemon_put_string(p, d->host, host_len);
	daemon_put_string(p, d->rack, rack_len);
	return 0;
}

int meta_store_daemon_count(struct meta_txn *t, size_t *count)
{
	MDB_stat st;
	int rc = mdb_stat(txn_of(t), store_of(t)->db_daemons, &st);

	if (rc)
		return lmdb_errno(rc);
	*count = st.ms_entries;
	return 0;
}

int meta_store_daemons_each(struct meta_txn *t, meta_store_daemon_cb cb, void *arg)
{
	struct daemon *d = meta_alloc(t, sizeof(*d));
	MDB_cursor *c;
	MDB_val k, v;
	int rc, ret = 0;

	if (!d)
		return -ENOMEM;
	rc = mdb_cursor_open(txn_of(t), store_of(t)->db_daemons, &c);
	if (rc)
		return lmdb_errno(rc);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		ret = daemon_decode(t->m, &k, &v, d);
		if (!ret)
			ret = cb(t, d, arg);
		if (ret)
			break;
	}
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

/* ---- client keys ---- */

static int client_decode(struct meta *m, uint64_t serial, const MDB_val *v, struct meta_client *out)
{
	size_t name_len;

	if (v->mv_size <= sizeof(out->r) || v->mv_size > sizeof(out->r) + META_CLIENT_NAME_MAX) {
		meta_log(m, META_LOG_ERR, "client key %llu: corrupt record of %zu bytes",
			 (unsigned long long)serial, v->mv_size);
		return -EIO;
	}
	name_len = v->mv_size - sizeof(out->r);
	out->serial = serial;
	memcpy(&out->r, v->mv_data, sizeof(out->r));
	memcpy(out->name, (const uint8_t *)v->mv_data + sizeof(out->r), name_len);
	out->name[name_len] = '\0';
	return 0;
}

int meta_store_client_get(struct meta_txn *t, uint64_t serial, struct meta_client *out)
{
	MDB_val v;
	int rc = get_by_id(t, store_of(t)->db_clients, serial, &v);

	if (rc)
		return lmdb_errno(rc);
	return client_decode(t->m, serial, &v, out);
}

int meta_store_client_put(struct meta_txn *t, const struct meta_client *c)
{
	uint8_t key[8];
	size_t name_len = strnlen(c->name, META_CLIENT_NAME_MAX);
	MDB_val k = {sizeof(key), key}, v = {sizeof(c->r) + name_len, NULL};
	int rc;

	if (name_len == 0)
		return -EINVAL;
	rdmafs_be64_put(key, c->serial);
	rc = mdb_put(txn_of(t), store_of(t)->db_clients, &k, &v, MDB_RESERVE);
	if (rc)
		return lmdb_errno(rc);
	memcpy(v.mv_data, &c->r, sizeof(c->r));
	memcpy((uint8_t *)v.mv_data + sizeof(c->r), c->name, name_len);
	return 0;
}

int meta_store_clients_from(struct meta_txn *t, uint64_t after, meta_store_client_cb cb, void *arg)
{
	struct meta_client *c = meta_alloc(t, sizeof(*c));
	uint8_t start[8];
	MDB_cursor *cur;
	MDB_val k = {sizeof(start), start}, v;
	int rc, ret = 0;

	if (!c)
		return -ENOMEM;
	if (after == UINT64_MAX)
		return 0;
	rdmafs_be64_put(start, after + 1);
	rc = mdb_cursor_open(txn_of(t), store_of(t)->db_clients, &cur);
	if (rc)
		return lmdb_errno(rc);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8) {
			ret = -EIO;
			break;
		}
		ret = client_decode(t->m, rdmafs_be64_get(k.mv_data), &v, c);
		if (!ret)
			ret = cb(t, c, arg);
		if (ret)
			break;
	}
	mdb_cursor_close(cur);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

/* ---- the environment and its transactions ---- */

int meta_store_open(struct meta *m, const char *dir)
{
	char side[PATH_MAX], boot_id[LMDB_GUARD_BOOT_ID_LEN];
	struct lmdb_guard_report report;
	struct meta_store *st;
	int n, ret;

	n = snprintf(side, sizeof(side), "%s/flushed.snapshot", dir);
	if (n < 0 || (size_t)n >= sizeof(side))
		return -ENAMETOOLONG;
	ret = m->opts.boot_id ? 0 : lmdb_guard_boot_id(boot_id);
	if (ret) {
		meta_log(m, META_LOG_ERR, "cannot read this boot's id: %s", strerror(-ret));
		return ret;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	ret = lmdb_errno(mdb_env_create(&st->env));
	if (ret)
		goto err_free;
	ret = lmdb_errno(mdb_env_set_maxdbs(st->env, 16));
	if (!ret)
		ret = lmdb_errno(mdb_env_set_mapsize(st->env, m->opts.map_size));
	if (!ret)
		ret = lmdb_errno(mdb_env_set_maxreaders(st->env, 512));
	/*
	 * MDB_NOTLS: a read transaction is not tied to the thread that began it.
	 * metadata_sync = batch: commits flush nothing, the guard keeps the
	 * last flushed snapshot for a power loss to return to (lmdb_guard.h).
	 */
	if (!ret)
		ret = lmdb_guard_open(st->env, dir, MDB_NOTLS, side,
				      m->opts.boot_id ? m->opts.boot_id : boot_id,
				      !m->opts.sync_always, &st->guard, &report);
	if (ret) {
		meta_log(m, META_LOG_ERR, "cannot open metadata store in %s: %s", dir,
			 strerror(-ret));
		goto err_close_env;
	}
	if (report.restored)
		meta_log(m, META_LOG_WARN,
			 "the metadata store in %s did not close on this boot: restored it to its "
			 "last flush (transaction %" PRIu64
			 "); what was committed after it is lost",
			 dir, report.txnid);
	m->store = st;
	return 0;

err_close_env:
	mdb_env_close(st->env);
err_free:
	free(st);
	return ret;
}

int meta_store_sync(struct meta *m)
{
	struct meta_store *st = m->store;
	int ret = st->guard ? lmdb_guard_flush(st->guard) : lmdb_errno(mdb_env_sync(st->env, 1));

	if (ret) {
		meta_log(m, META_LOG_ERR, "cannot flush the metadata store: %s", strerror(-ret));
		return ret;
	}
	__atomic_add_fetch(&m->syncs, 1, __ATOMIC_RELAXED);
	return 0;
}

/* meta_store_sync() logs its failure in both: the next call tries again */
void meta_store_sync_new(struct meta *m)
{
	if (m->store->guard && lmdb_guard_unflushed(m->store->guard))
		meta_store_sync(m);
}

void meta_store_bound_growth(struct meta *m)
{
	uint64_t unflushed = m->store->guard ? lmdb_guard_unflushed(m->store->guard) : 0;

	/* lmdb_guard_lagging(), with the count kept for the hard bound: one look at LMDB a group */
	if (unflushed <= LMDB_GUARD_LAG)
		return;
	/* the flusher flushes beside the requests; past the hard bound they outran it */
	if (m->flusher && unflushed <= META_STORE_HARD_LAG) {
		__atomic_add_fetch(&m->growth_kicks, 1, __ATOMIC_RELAXED);
		rdmafs_flusher_kick(m->flusher);
	} else {
		__atomic_add_fetch(&m->growth_flushes, 1, __ATOMIC_RELAXED);
		meta_store_sync(m);
	}
}

void meta_store_close(struct meta *m)
{
	int ret;

	if (!m || !m->store)
		return;
	ret = lmdb_guard_close(m->store->guard);
	if (ret)
		meta_log(m, META_LOG_ERR, "cannot flush the metadata store at close: %s",
			 strerror(-ret));
	mdb_env_close(m->store->env);
	free(m->store);
	m->store = NULL;
}

int meta_store_open_databases(struct meta_txn *t)
{
	static const struct {
		const char *name;
		size_t offset;
	} dbs[] = {
		{"counters", offsetof(struct meta_store, db_counters)},
		{"inodes", offsetof(struct meta_store, db_inodes)},
		{"dirents", offsetof(struct meta_store, db_dirents)},
		{"dirpos", offsetof(struct meta_store, db_dirpos)},
		{"symlinks", offsetof(struct meta_store, db_symlinks)},
		{"xattrs", offsetof(struct meta_store, db_xattrs)},
		{"handles", offsetof(struct meta_store, db_handles)},
		{"daemons", offsetof(struct meta_store, db_daemons)},
		{"allocs", offsetof(struct meta_store, db_allocs)},
		{"clients", offsetof(struct meta_store, db_clients)},
	};

	for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]); i++) {
		MDB_dbi *dbi = (MDB_dbi *)((char *)store_of(t) + dbs[i].offset);
		int rc = mdb_dbi_open(txn_of(t), dbs[i].name, MDB_CREATE, dbi);

		if (rc) {
			meta_log(t->m, META_LOG_ERR, "cannot open database %s: %s", dbs[i].name,
				 mdb_strerror(rc));
			return lmdb_errno(rc);
		}
	}
	return 0;
}

int meta_store_txn_begin(struct meta_txn *t, bool write)
{
	MDB_txn *txn = NULL;
	int rc = mdb_txn_begin(t->m->store->env, NULL, write ? 0 : MDB_RDONLY, &txn);

	if (rc)
		meta_log(t->m, META_LOG_ERR, "cannot begin a transaction: %s", mdb_strerror(rc));
	t->txn = (struct meta_store_txn *)txn;
	return lmdb_errno(rc);
}

int meta_store_group_begin(struct meta *m, struct meta_store_txn **out)
{
	MDB_txn *txn = NULL;
	int rc = mdb_txn_begin(m->store->env, NULL, 0, &txn);

	if (rc)
		meta_log(m, META_LOG_ERR, "cannot begin a transaction: %s", mdb_strerror(rc));
	*out = (struct meta_store_txn *)txn;
	return lmdb_errno(rc);
}

int meta_store_txn_begin_in(struct meta_txn *t, struct meta_store_txn *group)
{
	MDB_txn *txn = NULL;
	int rc = mdb_txn_begin(t->m->store->env, (MDB_txn *)group, 0, &txn);

	if (rc)
		meta_log(t->m, META_LOG_ERR, "cannot begin a nested transaction: %s",
			 mdb_strerror(rc));
	t->txn = (struct meta_store_txn *)txn;
	return lmdb_errno(rc);
}

int meta_store_group_commit(struct meta *m, struct meta_store_txn *group)
{
	int rc = mdb_txn_commit((MDB_txn *)group);

	if (rc)
		meta_log(m, META_LOG_ERR, "cannot commit: %s", mdb_strerror(rc));
	return lmdb_errno(rc);
}

void meta_store_group_abort(struct meta_store_txn *group)
{
	mdb_txn_abort((MDB_txn *)group);
}

int meta_store_txn_commit(struct meta_txn *t)
{
	int rc = mdb_txn_commit(txn_of(t));

	/* LMDB frees the transaction whether or not the commit succeeded */
	t->txn = NULL;
	if (rc)
		meta_log(t->m, META_LOG_ERR, "cannot commit: %s", mdb_strerror(rc));
	return lmdb_errno(rc);
}

void meta_store_txn_abort(struct meta_txn *t)
{
	if (!t->txn)
		return;
	mdb_txn_abort(txn_of(t));
	t->txn = NULL;
}
