// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The chunk index's journal (daemon_i.h, "chunk index journal").
 *
 * Why: the index is an LMDB environment under a guard (meta/lmdb_guard.h)
 * that pins the last flushed snapshot, so LMDB reuses none of the pages a
 * later commit frees. A commit per small write then writes about seven fresh
 * 4 KiB pages (the leaf and root of the index and of LMDB's free list), every
 * one of which the next flush sends to the disk: a 4 KiB random write cost
 * 28 KiB of index writes. The journal takes those commits off the write
 * path: a change is one record appended to a file (about 1 KiB for a 1 MiB
 * chunk's CRCs) and kept in memory, and a checkpoint applies every change
 * held to the index in one transaction, then empties the file.
 *
 * The file is also what makes a COMMIT durable: a checkpoint applies the
 * changes to the index without flushing it and leaves their records in the
 * file, which keeps every record since the index's last flush; COMMIT
 * fdatasyncs it with the chunk files, one flush for all. The index is
 * flushed now and then (journal_settle(): a checkpoint, the flush, then the
 * file emptied, with no append between them).
 *
 * A record survives a kill -9 (it is in the page cache once pwrite()
 * returns), and once fdatasynced a power loss, and is replayed at the next
 * open: after a power loss the guard returns the index to its last flush,
 * which the records follow; after a kill -9 the index may hold some of them
 * already, and applying a key's whole value again changes nothing. A
 * record is: magic, crc32c of the rest, base, key, length (of the value;
 * JOURNAL_DELETED for a removal), value. The base is the flushed index
 * transaction the record follows (the settle's that emptied the file
 * last): a replay applies the file's records only when the index holds that
 * transaction, and stops at a record of another base (the leftover of a
 * longer file whose truncation the disk never got, which the flush after it
 * holds), so a file is never laid over an index state it does not follow.
 * The first record that fails any check ends the replay (a write cut short
 * by ENOSPC is cut back at once, so only a foreign file or a power loss in
 * mid-append ends that way).
 *
 * In memory the changes are an array with one entry per key (the newest
 * value), found through a tsearch(3) tree of the same entries. One mutex
 * covers the file, the array and the tree; a checkpoint holds it throughout,
 * so no change is appended or looked up between the index's commit and the
 * forgetting of the changes. A second one orders the file: an append holds
 * it, and a settle holds it from its checkpoint to the file's truncation, so
 * no record is appended that the truncation would erase, while lookups (of
 * an empty set then: everything is in the index) go on during the flush.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "daemon_i.h"

#define JOURNAL_MAGIC 0x314a4352u /* "RCJ1" */
/* Far above a chunk's metadata (max_blocks CRCs): a longer length is not ours. */
#define VALUE_MAX (1u << 20)

struct record_head {
	uint32_t magic;
	uint32_t crc;  /* of everything after this field, the value included */
	uint64_t base; /* the index transaction the record follows */
	uint8_t key[JOURNAL_KEY_LEN];
	uint32_t len; /* of the value, or JOURNAL_DELETED */
	uint32_t pad;
};

struct journal {
	pthread_mutex_t file_lock; /* appends and settles, in that order before lock */
	pthread_mutex_t lock;
	int fd;
	uint64_t tail;			 /* the file's length: where the next record goes */
	uint64_t base;			 /* of the records appended now */
	uint64_t records;		 /* appended since the last checkpoint */
	struct journal_change **changes; /* one per key, its newest value */
	size_t count, cap;
	void *tree; /* tsearch(3) root: the same changes, by key */
};

static int key_cmp(const void *a, const void *b)
{
	const struct journal_change *x = a, *y = b;

	return memcmp(x->key, y->key, JOURNAL_KEY_LEN);
}

static void free_nothing(void *node)
{
	(void)node; /* the changes are freed through the array */
}

int journal_open(int dir_fd, const char *name, struct journal **out)
{
	struct journal *j = calloc(1, sizeof(*j));
	struct stat sb;
	int ret;

	if (!j)
		return -ENOMEM;
	j->fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0 || fstat(j->fd, &sb)) {
		ret = -errno;
		if (j->fd >= 0)
			close(j->fd);
		free(j);
		return ret;
	}
	j->tail = sb.st_size;
	pthread_mutex_init(&j->file_lock, NULL);
	pthread_mutex_init(&j->lock, NULL);
	*out = j;
	return 0;
}

static void forget_changes(struct journal *j)
{
	tdestroy(j->tree, free_nothing);
	j->tree = NULL;
	for (size_t i = 0; i < j->count; i++) {
		free(j->changes[i]->value);
		free(j->changes[i]);
	}
	j->count = 0;
	j->records = 0;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	forget_changes(j);
	free(j->changes);
	/* a clean close's journal reaches the disk before the index is marked clean */
	if (fdatasync(j->fd))
		rdmafs_log(RDMAFS_LOG_WARN, "flushing the chunk index journal: %s",
			   strerror(errno));
	close(j->fd);
	pthread_mutex_destroy(&j->lock);
	pthread_mutex_destroy(&j->file_lock);
	free(j);
}

/*
 * Forgets every change and empties the file; the records appended next
 * follow index transaction @base. The lock is held.
 */
static int restart(struct journal *j, uint64_t base)
{
	forget_changes(j);
	j->base = base;
	if (ftruncate(j->fd, 0))
		return -errno;
	j->tail = 0;
	return 0;
}

static uint32_t record_crc(const struct record_head *h, const void *value, uint32_t len)
{
	uint32_t crc = rdmafs_crc32c((const uint8_t *)h + offsetof(struct record_head, base),
				     sizeof(*h) - offsetof(struct record_head, base));

	return rdmafs_crc32c_extend(crc, value, len);
}

int journal_replay(struct journal *j, uint64_t newest, journal_apply_fn apply, void *arg,
		   uint64_t *records, uint64_t *stale_base)
{
	struct record_head h;
	uint64_t off = 0, base = 0;
	void *value = NULL;
	uint32_t len;
	ssize_t n;
	int ret = 0;

	*records = 0;
	*stale_base = 0;
	for (;;) {
		n = pread(j->fd, &h, sizeof(h), off);
		if (n < 0) {
			ret = -errno;
			break;
		}
		if ((size_t)n < sizeof(h) || h.magic != JOURNAL_MAGIC)
			break;
		len = h.len == JOURNAL_DELETED ? 0 : h.len;
		if (len > VALUE_MAX)
			break;
		free(value);
		value = malloc(len ? len : 1);
		if (!value) {
			ret = -ENOMEM;
			break;
		}
		n = pread(j->fd, value, len, off + sizeof(h));
		if (n < 0) {
			ret = -errno;
			break;
		}
		if ((uint32_t)n < len || record_crc(&h, value, len) != h.crc)
			break;
		if (off == 0 && h.base > newest) {
			*stale_base = h.base;
			break;
		}
		if (off == 0)
			base = h.base;
		else if (h.base != base)
			break; /* older than the records before it: the flush that emptied it holds
				  it */
		ret = apply(arg, h.key, h.len == JOURNAL_DELETED ? NULL : value, len);
		if (ret)
			break;
		(*records)++;
		off += sizeof(h) + len;
	}
	free(value);
	return ret;
}

int journal_discard(struct journal *j, uint64_t base)
{
	int ret;

	pthread_mutex_lock(&j->file_lock);
	pthread_mutex_lock(&j->lock);
	ret = restart(j, base);
	pthread_mutex_unlock(&j->lock);
	pthread_mutex_unlock(&j->file_lock);
	return ret;
}

/* Keeps @value (@len bytes, NULL: deleted) as @key's newest change. */
static int hold_change(struct journal *j, const uint8_t *key, const void *value, uint32_t len)
{
	struct journal_change probe, *c, **found, **grown;
	void *copy = NULL;

	if (value) {
		copy = malloc(len ? len : 1);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, value, len);
	}
	memcpy(probe.key, key, JOURNAL_KEY_LEN);
	found = tfind(&probe, &j->tree, key_cmp);
	if (found) {
		c = *found;
		free(c->value);
		c->value = copy;
		c->len = len;
		return 0;
	}
	if (j->count == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 64;

		grown = realloc(j->changes, cap * sizeof(*grown));
		if (!grown)
			goto err_free;
		j->changes = grown;
		j->cap = cap;
	}
	c = malloc(sizeof(*c));
	if (!c)
		goto err_free;
	memcpy(c->key, key, JOURNAL_KEY_LEN);
	c->value = copy;
	c->len = len;
	if (!tsearch(c, &j->tree, key_cmp)) {
		free(c);
		goto err_free;
	}
	j->changes[j->count++] = c;
	return 0;

err_free:
	free(copy);
	return -ENOMEM;
}

int journal_append(struct journal *j, const uint8_t *key, const void *value, uint32_t len)
{
	static const uint32_t no_magic;
	struct record_head h = {.magic = JOURNAL_MAGIC, .len = value ? len : JOURNAL_DELETED};
	struct iovec iov[2];
	ssize_t n;
	int ret;

	if (value && len > VALUE_MAX)
		return -EINVAL;
	memcpy(h.key, key, JOURNAL_KEY_LEN);
	pthread_mutex_lock(&j->file_lock);
	pthread_mutex_lock(&j->lock);
	h.base = j->base;
	h.crc = record_crc(&h, value, value ? len : 0);
	iov[0] = (struct iovec){&h, sizeof(h)};
	iov[1] = (struct iovec){(void *)value, value ? len : 0};
	n = pwritev(j->fd, iov, value ? 2 : 1, j->tail);
	if (n == (ssize_t)(sizeof(h) + (value ? len : 0))) {
		ret = hold_change(j, key, value, len);
	} else {
		/* ENOSPC, EIO, a short write: the record is not there; neither is a piece of it */
		ret = n < 0 && errno != EDQUOT ? -errno : -ENOSPC;
	}
	if (ret) {
		/* unmarked first, so a record whole in the file is no record even if the cut fails
		 */
		if (n > 0 && pwrite(j->fd, &no_magic, sizeof(no_magic), j->tail) < 0)
			rdmafs_log(RDMAFS_LOG_WARN, "unmarking a journal record: %s",
				   strerror(errno));
		if (ftruncate(j->fd, j->tail))
			rdmafs_log(RDMAFS_LOG_WARN, "cutting back the chunk index journal: %s",
				   strerror(errno));
	} else {
		j->tail += n;
		j->records++;
	}
	pthread_mutex_unlock(&j->lock);
	pthread_mutex_unlock(&j->file_lock);
	return ret;
}

/* One of @j's counters, read under its lock. */
static uint64_t read_locked(struct journal *j, const uint64_t *field)
{
	uint64_t n;

	pthread_mutex_lock(&j->lock);
	n = *field;
	pthread_mutex_unlock(&j->lock);
	return n;
}

uint64_t journal_records(struct journal *j)
{
	return read_locked(j, &j->records);
}

int journal_lookup(struct journal *j, const uint8_t *key, void *buf, size_t cap, uint32_t *len)
{
	struct journal_change probe, **found, *c;
	int ret = 0;

	memcpy(probe.key, key, JOURNAL_KEY_LEN);
	pthread_mutex_lock(&j->lock);
	found = j->count ? tfind(&probe, &j->tree, key_cmp) : NULL;
	c = found ? *found : NULL;
	if (c && !c->value) {
		*len = JOURNAL_DELETED;
		ret = 1;
	} else if (c && c->len > cap) {
		ret = -EIO;
	} else if (c) {
		memcpy(buf, c->value, c->len);
		*len = c->len;
		ret = 1;
	}
	pthread_mutex_unlock(&j->lock);
	return ret;
}

/* The checkpoint, with the lock held. */
static int checkpoint_locked(struct journal *j, journal_commit_fn commit, void *arg)
{
	uint64_t base;
	int ret = 0;

	if (j->count) {
		ret = commit(arg, j->changes, j->count, &base);
		if (!ret)
			forget_changes(j); /* in the index now; the file keeps them until a flush */
	}
	return ret;
}

int journal_checkpoint(struct journal *j, journal_commit_fn commit, void *arg)
{
	int ret;

	pthread_mutex_lock(&j->lock);
	ret = checkpoint_locked(j, commit, arg);
	pthread_mutex_unlock(&j->lock);
	return ret;
}

int journal_settle(struct journal *j, journal_commit_fn commit, journal_flush_fn flush, void *arg)
{
	uint64_t base;
	int ret;

	pthread_mutex_lock(&j->file_lock);
	pthread_mutex_lock(&j->lock);
	ret = checkpoint_locked(j, commit, arg);
	pthread_mutex_unlock(&j->lock);
	/* nothing is held now and nothing is appended: lookups need not wait for the flush */
	if (!ret)
		ret = flush(arg, &base);
	pthread_mutex_lock(&j->lock);
	if (!ret)
		ret = restart(j, base); /* every record is in the flushed index */
	pthread_mutex_unlock(&j->lock);
	pthread_mutex_unlock(&j->file_lock);
	return ret;
}

uint64_t journal_bytes(struct journal *j)
{
	return read_locked(j, &j->tail);
}

int journal_fd(struct journal *j)
{
	return j->fd;
}
