// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The writes this daemon stored that another daemon of their chain missed
 * (docs/replication.md, "Losing a daemon"): one record per (chunk, daemon),
 * keyed in that order so a chunk's records are together, with the chunk's
 * whole chain, in meta/missed.mdb. A record is on disk
 * before the write that made it is answered; the resync (resync.c) copies
 * the chunk to the daemon once it is back and then deletes the record. The
 * file is made by the first record: a daemon that never forwarded a write
 * of a replicated chunk (or was refused by the cluster) changes nothing in
 * its data directory. See daemon_i.h.
 *
 * The writes in flight at their head (missed_inflight_begin()) are kept in
 * meta/inflight, a file of one slot per worker mapped shared: a store to the
 * mapping is in the page cache at once, so a kill -9 leaves the slots of the
 * writes it cut short. missed_inflight_open() turns each into records of the
 * chunk as missed by every other member of its chain, marked recovered (see
 * resync.c), before the daemon serves anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "daemon_i.h"
#include "lmdb_errno.h"

/* 32-byte keys, values of at most 65 bytes: millions of records. */
#define MISSED_MAP_SIZE (1ull << 30)
#define KEY_LEN		(RDMAFS_UUID_LEN + 16)

#define MISSED_FILE "meta/missed.mdb"
/* The value's first byte: the member count, and this bit for a record of a write cut short. */
#define VALUE_RECOVERED 0x80u

#define INFLIGHT_FILE "meta/inflight"
#define INFLIGHT_BUSY 0x544847494c464e49ull /* "INFLIGHT" */

/* A write this daemon heads, stored or about to be, whose chain's answer is not recorded. */
struct inflight_slot {
	uint64_t busy; /* INFLIGHT_BUSY, set after the rest and cleared first; 0: free */
	uint64_t inode, index;
	uint32_t n_members, pad;
	uint8_t members[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
};

struct missed {
	int dir_fd;	      /* the data directory's, ours */
	pthread_mutex_t lock; /* guards opening env */
	MDB_env *env;	      /* NULL until the file exists */
	MDB_dbi dbi;
	uint64_t records;	     /* at least as many as kept (atomic): none means no lookup */
	struct inflight_slot *slots; /* meta/inflight, mapped; NULL before missed_inflight_open() */
	unsigned n_slots;
};

/* Opens (and with @create makes) meta/missed.mdb; 0 with env NULL when it is not there. */
static int env_open(struct missed *ms, bool create)
{
	char path[80];
	MDB_txn *txn;
	MDB_env *env;
	int rc;

	if (ms->env)
		return 0;
	if (!create && faccessat(ms->dir_fd, MISSED_FILE, F_OK, 0))
		return errno == ENOENT ? 0 : -errno;
	snprintf(path, sizeof(path), "/proc/self/fd/%d/" MISSED_FILE, ms->dir_fd);
	rc = mdb_env_create(&env);
	if (rc)
		goto err;
	rc = mdb_env_set_mapsize(env, MISSED_MAP_SIZE);
	if (!rc)
		rc = mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOTLS, 0640);
	if (!rc)
		rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		goto err_close;
	rc = mdb_dbi_open(txn, NULL, 0, &ms->dbi);
	if (rc) {
		mdb_txn_abort(txn);
		goto err_close;
	}
	{
		MDB_stat st;

		if (!mdb_stat(txn, ms->dbi, &st))
			__atomic_store_n(&ms->records, st.ms_entries, __ATOMIC_RELAXED);
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto err_close;
	ms->env = env;
	return 0;

err_close:
	mdb_env_close(env);
err:
	rdmafs_log(RDMAFS_LOG_ERR, "cannot open the table of missed writes (LMDB %s): %s",
		   MISSED_FILE, mdb_strerror(rc));
	return lmdb_errno(rc);
}

/* The environment, made first with @create; NULL (and *@ret 0) when there is none yet. */
static MDB_env *env_get(struct missed *ms, bool create, int *ret)
{
	MDB_env *env;

	pthread_mutex_lock(&ms->lock);
	*ret = env_open(ms, create);
	env = ms->env;
	pthread_mutex_unlock(&ms->lock);
	return env;
}

int missed_open(int dir_fd, struct missed **out)
{
	struct missed *ms = calloc(1, sizeof(*ms));
	int ret;

	if (!ms)
		return -ENOMEM;
	pthread_mutex_init(&ms->lock, NULL);
	ms->dir_fd = dup(dir_fd);
	ret = ms->dir_fd < 0 ? -errno : env_open(ms, false);
	if (ret) {
		missed_close(ms);
		return ret;
	}
	*out = ms;
	return 0;
}

void missed_close(struct missed *ms)
{
	if (!ms)
		return;
	if (ms->env)
		mdb_env_close(ms->env);
	if (ms->slots)
		munmap(ms->slots, ms->n_slots * sizeof(*ms->slots));
	if (ms->dir_fd >= 0)
		close(ms->dir_fd);
	pthread_mutex_destroy(&ms->lock);
	free(ms);
}

static void make_key(const uint8_t *target, struct store_chunk_id id, uint8_t *key)
{
	rdmafs_be64_put(key, id.inode);
	rdmafs_be64_put(key + 8, id.index);
	memcpy(key + 16, target, RDMAFS_UUID_LEN);
}

/* missed_add(), the records marked @recovered or not. */
static int add(struct missed *ms, struct store_chunk_id id, const uint8_t (*targets)[16],
	       unsigned n_targets, const uint8_t (*members)[16], unsigned n_members, bool recovered)
{
	uint8_t key[KEY_LEN], value[1 + MISSED_MEMBERS_MAX * RDMAFS_UUID_LEN];
	MDB_val k = {sizeof(key), key}, v;
	MDB_txn *txn = NULL;
	MDB_env *env;
	uint64_t added = 0;
	int rc, ret;

	if (n_members > MISSED_MEMBERS_MAX || n_targets == 0)
		return n_targets ? -EINVAL : 0;
	env = env_get(ms, true, &ret);
	if (!env)
		return ret;
	memcpy(value + 1, members, n_members * RDMAFS_UUID_LEN);
	rc = mdb_txn_begin(env, NULL, 0, &txn);
	for (unsigned i = 0; !rc && i < n_targets; i++) {
		make_key(targets[i], id, key);
		value[0] = (uint8_t)(n_members | (recovered ? VALUE_RECOVERED : 0));
		v = (MDB_val){1 + n_members * RDMAFS_UUID_LEN, value};
		rc = mdb_put(txn, ms->dbi, &k, &v, MDB_NOOVERWRITE);
		if (!rc) {
			added++;
		} else if (rc == MDB_KEYEXIST) {
			/* LMDB pointed @v at the record kept: a recovered one stays recovered */
			if (v.mv_size && (*(const uint8_t *)v.mv_data & VALUE_RECOVERED))
				value[0] |= VALUE_RECOVERED;
			v = (MDB_val){1 + n_members * RDMAFS_UUID_LEN, value};
			rc = mdb_put(txn, ms->dbi, &k, &v, 0);
		}
	}
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		return lmdb_errno(rc);
	}
	/* counted before the commit: a reader may look one up for nothing, never miss one */
	__atomic_add_fetch(&ms->records, added, __ATOMIC_RELAXED);
	/* the environment syncs on commit: the record is on disk before the write's answer */
	rc = mdb_txn_commit(txn);
	if (rc)
		__atomic_sub_fetch(&ms->records, added, __ATOMIC_RELAXED);
	return lmdb_errno(rc);
}

int missed_add(struct missed *ms, struct store_chunk_id id, const uint8_t (*targets)[16],
	       unsigned n_targets, const uint8_t (*members)[16], unsigned n_members)
{
	return add(ms, id, targets, n_targets, members, n_members, false);
}

int missed_add_handed(struct missed *ms, struct store_chunk_id id, const uint8_t (*targets)[16],
		      unsigned n_targets, const uint8_t (*members)[16], unsigned n_members)
{
	return add(ms, id, targets, n_targets, members, n_members, true);
}

int missed_del(struct missed *ms, const struct missed_rec *r)
{
	uint8_t key[KEY_LEN];
	MDB_val k = {sizeof(key), key};
	MDB_txn *txn;
	MDB_env *env;
	int rc, ret;

	env = env_get(ms, false, &ret);
	if (!env)
		return ret;
	make_key(r->target, r->id, key);
	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_del(txn, ms->dbi, &k, NULL);
	if (rc) {
		mdb_txn_abort(txn);
		return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
	}
	rc = mdb_txn_commit(txn);
	if (!rc)
		__atomic_sub_fetch(&ms->records, 1, __ATOMIC_RELAXED);
	return lmdb_errno(rc);
}

uint64_t missed_count(struct missed *ms)
{
	return __atomic_load_n(&ms->records, __ATOMIC_RELAXED);
}

int missed_of_chunk_serving(struct missed *ms, struct dmap *m, struct store_chunk_id id,
			    uint8_t (*targets)[16], size_t *count)
{
	size_t n = 0;
	int ret;

	*count = 0;
	if (!missed_count(ms))
		return 0;
	ret = missed_of_chunk(ms, id, targets, MISSED_MEMBERS_MAX, &n);
	for (size_t i = 0; !ret && i < n; i++)
		if (dmap_state_serves(dmap_state(m, targets[i])))
			memmove(targets[(*count)++], targets[i], RDMAFS_UUID_LEN);
	return ret;
}

/* Fills @r from a record; false for one this code did not write. */
static bool rec_from(const MDB_val *k, const MDB_val *v, struct missed_rec *r)
{
	const uint8_t *key = k->mv_data, *value = v->mv_data;

	unsigned n = v->mv_size ? value[0] & ~VALUE_RECOVERED : 0;

	if (k->mv_size != KEY_LEN || v->mv_size < 1 || n > MISSED_MEMBERS_MAX ||
	    v->mv_size != 1u + n * RDMAFS_UUID_LEN)
		return false;
	r->id.inode = rdmafs_be64_get(key);
	r->id.index = rdmafs_be64_get(key + 8);
	memcpy(r->target, key + 16, RDMAFS_UUID_LEN);
	r->recovered = value[0] & VALUE_RECOVERED;
	r->n_members = n;
	memcpy(r->members, value + 1, r->n_members * RDMAFS_UUID_LEN);
	return true;
}

int missed_list(struct missed *ms, const struct missed_rec *after, struct missed_rec *out,
		size_t max, size_t *count)
{
	uint8_t key[KEY_LEN];
	MDB_val k = {sizeof(key), key}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_env *env;
	size_t n = 0;
	int rc, ret;

	*count = 0;
	env = env_get(ms, false, &ret);
	if (!env)
		return ret;
	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_open(txn, ms->dbi, &cur);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_errno(rc);
	}
	if (after) {
		make_key(after->target, after->id, key);
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		/* past @after itself, if it is still there */
		if (!rc && k.mv_size == KEY_LEN && memcmp(k.mv_data, key, KEY_LEN) == 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	} else {
		rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	}
	while (!rc && n < max) {
		if (rec_from(&k, &v, &out[n]))
			n++;
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	*count = n;
	return rc == MDB_NOTFOUND || !rc ? 0 : lmdb_errno(rc);
}

int missed_of_chunk(struct missed *ms, struct store_chunk_id id, uint8_t (*targets)[16], size_t max,
		    size_t *count)
{
	struct missed_rec from = {.id = id}, page[MISSED_MEMBERS_MAX + 1];
	size_t n = 0;
	int ret;

	/* the all-zero UUID sorts first among the chunk's keys, and is no daemon's */
	*count = 0;
	ret = missed_list(ms, &from, page, MISSED_MEMBERS_MAX + 1, &n);
	for (size_t i = 0; !ret && i < n; i++) {
		if (page[i].id.inode != id.inode || page[i].id.index != id.index)
			break;
		if (*count < max)
			memcpy(targets[(*count)++], page[i].target, RDMAFS_UUID_LEN);
	}
	return ret;
}

/* Records the writes a killed daemon left in @f's slots (see the top of the file). */
static int inflight_recover(struct missed *ms, int fd, const uint8_t *self, unsigned *recovered)
{
	struct inflight_slot slot;
	uint8_t others[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	off_t at = 0;
	ssize_t n;
	int ret;

	*recovered = 0;
	while ((n = pread(fd, &slot, sizeof(slot), at)) == (ssize_t)sizeof(slot)) {
		unsigned n_others = 0;

		at += n;
		if (slot.busy != INFLIGHT_BUSY)
			continue;
		if (slot.n_members > MISSED_MEMBERS_MAX) {
			rdmafs_log(RDMAFS_LOG_WARN, "%s: a slot of %u members skipped",
				   INFLIGHT_FILE, slot.n_members);
			continue;
		}
		for (unsigned i = 0; i < slot.n_members; i++)
			if (memcmp(slot.members[i], self, RDMAFS_UUID_LEN) != 0)
				memcpy(others[n_others++], slot.members[i], RDMAFS_UUID_LEN);
		if (!n_others)
			continue; /* a chain of this daemon alone: nobody lacks anything */
		ret = add(ms, (struct store_chunk_id){slot.inode, slot.index},
			  (const uint8_t(*)[16])others, n_others,
			  (const uint8_t(*)[16])slot.members, slot.n_members, true);
		if (ret)
			return ret;
		rdmafs_log(RDMAFS_LOG_WARN,
			   "chunk %016" PRIx64 "/%016" PRIx64
			   ": a write was in flight when this daemon stopped: its copy goes to "
			   "the rest of the chain",
			   slot.inode, slot.index);
		(*recovered)++;
	}
	return n < 0 ? -errno : 0;
}

int missed_inflight_open(struct missed *ms, const uint8_t *self, unsigned slots,
			 unsigned *recovered)
{
	size_t len = (size_t)slots * sizeof(struct inflight_slot);
	void *map;
	int fd, ret;

	fd = openat(ms->dir_fd, INFLIGHT_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* on disk before the slots are cleared (add() commits synchronously) */
	ret = inflight_recover(ms, fd, self, recovered);
	if (!ret && (ftruncate(fd, 0) || ftruncate(fd, (off_t)len)))
		ret = -errno;
	map = ret ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (!ret && map == MAP_FAILED)
		ret = -errno;
	close(fd);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot take up the writes in flight (%s): %s",
			   INFLIGHT_FILE, strerror(-ret));
		return ret;
	}
	ms->slots = map;
	ms->n_slots = slots;
	return 0;
}

void missed_inflight_begin(struct missed *ms, unsigned slot, struct store_chunk_id id,
			   const uint8_t (*members)[16], unsigned n_members)
{
	struct inflight_slot *s;

	if (slot >= ms->n_slots)
		return; /* not a worker's (server.c gives each data worker one) */
	s = &ms->slots[slot];
	s->inode = id.inode;
	s->index = id.index;
	s->n_members = n_members;
	memcpy(s->members, members, n_members * RDMAFS_UUID_LEN);
	__atomic_store_n(&s->busy, INFLIGHT_BUSY, __ATOMIC_RELEASE);
}

void missed_inflight_end(struct missed *ms, unsigned slot)
{
	if (slot < ms->n_slots)
		__atomic_store_n(&ms->slots[slot].busy, 0, __ATOMIC_RELEASE);
}
