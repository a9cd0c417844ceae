// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The power-loss guard of an LMDB environment without a flush per commit
 * (lmdb_guard.h says why and how).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmdb_errno.h"
#include "lmdb_guard.h"
#include "rdmafs_common.h"

#define SLOT_MAGIC   "rdmafsLG"
#define SLOT_VERSION 1u
#define SLOT_HEAD    4096u /* the head gets a page of its own, so the copies stay aligned */

/*
 * LMDB 0.9's meta page (mdb.c, MDB_DATA_VERSION 1): a 16-byte page header,
 * then MDB_meta, whose magic is its first field and whose txnid its last.
 */
#define LMDB_META_MAGIC	   0xBEEFC0DEu
#define LMDB_META_MAGIC_AT 16u
#define LMDB_META_TXNID_AT 144u

/* One slot of the side file: this head, then the data file's first two pages. */
struct slot_head {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint64_t seq;	/* which slot is newer */
	uint64_t txnid; /* the snapshot the pages describe */
	uint32_t clean; /* written by lmdb_guard_close() */
	char boot_id[LMDB_GUARD_BOOT_ID_LEN];
	uint32_t crc; /* crc32c of the head (this field 0) and the pages */
};

struct lmdb_guard {
	MDB_env *env;
	int data_fd; /* LMDB's own descriptor of the data file */
	int side_fd;
	size_t page_size;
	char boot_id[LMDB_GUARD_BOOT_ID_LEN];
	pthread_mutex_t lock; /* the fields below; one slot written at a time */
	MDB_txn *pin;	      /* read transaction on the last flushed snapshot */
	uint64_t txnid;	      /* its id (written under lock, read atomically) */
	uint64_t seq;	      /* the newest slot written */
	unsigned char *slot;  /* SLOT_HEAD + 2 pages, reused by every flush */
};

int lmdb_guard_boot_id(char out[LMDB_GUARD_BOOT_ID_LEN])
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	int ret = 0;

	if (!f)
		return -errno;
	if (!fgets(out, LMDB_GUARD_BOOT_ID_LEN, f))
		ret = -EIO;
	fclose(f);
	if (!ret)
		out[strcspn(out, "\n")] = '\0';
	return ret;
}

static size_t slot_size(size_t page_size)
{
	return SLOT_HEAD + 2 * page_size;
}

static uint32_t slot_crc(const unsigned char *slot, size_t page_size)
{
	struct slot_head head;

	memcpy(&head, slot, sizeof(head));
	head.crc = 0;
	return rdmafs_crc32c_extend(rdmafs_crc32c(&head, sizeof(head)), slot + SLOT_HEAD,
				    2 * page_size);
}

static bool slot_valid(const unsigned char *slot, size_t page_size)
{
	const struct slot_head *h = (const void *)slot;

	return memcmp(h->magic, SLOT_MAGIC, sizeof(h->magic)) == 0 && h->version == SLOT_VERSION &&
	       h->page_size == page_size && memchr(h->boot_id, '\0', sizeof(h->boot_id)) &&
	       h->crc == slot_crc(slot, page_size);
}

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Whether one of the two meta pages at @pages is LMDB's meta page of transaction @txnid. */
static bool names_txn(const unsigned char *pages, size_t page_size, uint64_t txnid)
{
	for (int i = 0; i < 2; i++) {
		const unsigned char *p = pages + i * page_size;

		if (get_u32(p + LMDB_META_MAGIC_AT) == LMDB_META_MAGIC &&
		    get_u64(p + LMDB_META_TXNID_AT) == txnid)
			return true;
	}
	return false;
}

static int pread_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		done += (size_t)n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

/* Makes the entries of the directory holding @path durable (a new or removed side file). */
static int sync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, n, ret = 0;

	if (!slash)
		n = snprintf(dir, sizeof(dir), ".");
	else
		n = snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path),
			     path);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return -ENAMETOOLONG;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

static int data_path(const char *path, unsigned flags, char *out, size_t cap)
{
	int n = (flags & MDB_NOSUBDIR) ? snprintf(out, cap, "%s", path)
				       : snprintf(out, cap, "%s/data.mdb", path);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/*
 * The newest valid slot of the side file @fd into @slot (slot_size() bytes
 * for the system's page size). Returns 1 when there is one, 0 when none is
 * valid (a new, empty or torn side file), or -errno.
 */
static int newest_slot(int fd, size_t page_size, unsigned char *slot)
{
	size_t size = slot_size(page_size);
	unsigned char *other = malloc(size);
	int found = 0, ret;

	if (!other)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		ret = pread_all(fd, other, size, (off_t)(i * size));
		if (ret == -ENODATA)
			break;
		if (ret) {
			found = ret;
			break;
		}
		if (!slot_valid(other, page_size))
			continue;
		if (!found || ((struct slot_head *)other)->seq > ((struct slot_head *)slot)->seq)
			memcpy(slot, other, size);
		found = 1;
	}
	free(other);
	return found;
}

/*
 * Puts the meta pages of @slot back into the data file when the run that
 * wrote it ended neither cleanly nor on this boot. Returns 1 when it did,
 * 0 when nothing was to be done, or -errno.
 */
static int restore(const char *file, const unsigned char *slot, size_t page_size,
		   const char *boot_id)
{
	const struct slot_head *h = (const void *)slot;
	int fd, ret;

	if (h->clean || strcmp(h->boot_id, boot_id) == 0)
		return 0;
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = pwrite_all(fd, slot + SLOT_HEAD, 2 * page_size, 0);
	if (!ret && fdatasync(fd))
		ret = -errno;
	close(fd);
	return ret ? ret : 1;
}

/* A flush between flush_begin() and flush_end(). */
struct lmdb_guard_ticket {
	MDB_txn *pin;	/* on the snapshot this flush makes the one restored */
	uint64_t txnid; /* its id */
	bool clean;
	unsigned char pages[]; /* its two meta pages, as read under the writer's lock */
};

/*
 * Pins the newest snapshot and copies its meta pages: *@out is the ticket,
 * or NULL when that snapshot is the last flushed already (unless @clean).
 */
static int flush_begin(struct lmdb_guard *g, bool clean, struct lmdb_guard_ticket **out)
{
	struct lmdb_guard_ticket *t = malloc(sizeof(*t) + 2 * g->page_size);
	MDB_txn *writer = NULL;
	int ret;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->pin = NULL;
	t->clean = clean;
	/* the writer's lock: no commit rewrites a meta page while it is copied */
	ret = lmdb_errno(mdb_txn_begin(g->env, NULL, 0, &writer));
	if (!ret)
		ret = lmdb_errno(mdb_txn_begin(g->env, NULL, MDB_RDONLY, &t->pin));
	if (ret)
		goto out;
	t->txnid = mdb_txn_id(t->pin);
	pthread_mutex_lock(&g->lock);
	if (g->pin && t->txnid == g->txnid && !clean)
		ret = 1; /* nothing committed since the last flush */
	pthread_mutex_unlock(&g->lock);
	if (!ret)
		ret = pread_all(g->data_fd, t->pages, 2 * g->page_size, 0);
	if (!ret && !names_txn(t->pages, g->page_size, t->txnid))
		ret = -EPROTO; /* not the LMDB format this guard knows */
out:
	if (writer)
		mdb_txn_abort(writer);
	if (ret) {
		if (t->pin)
			mdb_txn_abort(t->pin);
		free(t);
		return ret > 0 ? 0 : ret;
	}
	*out = t;
	return 0;
}

/*
 * Writes @t's slot once the data file is flushed (@synced 0) and moves the
 * pin to it, unless a flush that began later ended first: its slot covers
 * this one. Frees @t. Returns 0, @synced, or -errno.
 */
static int flush_end(struct lmdb_guard *g, struct lmdb_guard_ticket *t, int synced)
{
	struct slot_head *h = (void *)g->slot;
	int ret = synced;

	pthread_mutex_lock(&g->lock);
	if (ret || (g->pin && (t->txnid < g->txnid || (t->txnid == g->txnid && !t->clean))))
		goto out;
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, SLOT_MAGIC, sizeof(h->magic));
	h->version = SLOT_VERSION;
	h->page_size = (uint32_t)g->page_size;
	h->seq = g->seq + 1;
	h->txnid = t->txnid;
	h->clean = t->clean;
	memcpy(h->boot_id, g->boot_id, sizeof(h->boot_id));
	memcpy(g->slot + SLOT_HEAD, t->pages, 2 * g->page_size);
	h->crc = slot_crc(g->slot, g->page_size);
	/* the older slot: a torn write leaves the newer, still pinned, to restore */
	ret = pwrite_all(g->side_fd, g->slot, slot_size(g->page_size),
			 (off_t)((h->seq & 1) * slot_size(g->page_size)));
	if (!ret && fdatasync(g->side_fd))
		ret = -errno;
	if (ret)
		goto out;
	if (g->pin)
		mdb_txn_abort(g->pin);
	g->pin = t->pin;
	t->pin = NULL;
	__atomic_store_n(&g->txnid, t->txnid, __ATOMIC_RELAXED);
	g->seq = h->seq;
out:
	pthread_mutex_unlock(&g->lock);
	if (t->pin)
		mdb_txn_abort(t->pin);
	free(t);
	return ret;
}

/* lmdb_guard_flush(), or with @clean the last one, which lmdb_guard_close() makes. */
static int guard_flush(struct lmdb_guard *g, bool clean)
{
	struct lmdb_guard_ticket *t;
	int ret = flush_begin(g, clean, &t);

	if (ret || !t)
		return ret;
	/*
	 * Every page of the snapshot was written before its meta page, which
	 * flush_begin() read: this flush carries them all.
	 */
	return flush_end(g, t, lmdb_errno(mdb_env_sync(g->env, 1)));
}

static void guard_free(struct lmdb_guard *g)
{
	if (g->pin)
		mdb_txn_abort(g->pin);
	if (g->side_fd >= 0)
		close(g->side_fd);
	pthread_mutex_destroy(&g->lock);
	free(g->slot);
	free(g);
}

/* The guard of the open @env, with the side file @side_fd (taken) and its newest slot @seq. */
static int guard_start(MDB_env *env, int side_fd, uint64_t seq, const char *boot_id,
		       struct lmdb_guard **out)
{
	struct lmdb_guard *g = calloc(1, sizeof(*g));
	int ret;

	if (!g) {
		close(side_fd);
		return -ENOMEM;
	}
	g->env = env;
	g->side_fd = side_fd;
	g->seq = seq;
	g->page_size = (size_t)sysconf(_SC_PAGESIZE);
	snprintf(g->boot_id, sizeof(g->boot_id), "%s", boot_id);
	pthread_mutex_init(&g->lock, NULL);
	g->slot = calloc(1, slot_size(g->page_size));
	ret = g->slot ? lmdb_errno(mdb_env_get_fd(env, &g->data_fd)) : -ENOMEM;
	if (!ret)
		ret = guard_flush(g, false);
	if (ret) {
		guard_free(g);
		return ret;
	}
	*out = g;
	return 0;
}

int lmdb_guard_open(MDB_env *env, const char *path, unsigned flags, const char *side_path,
		    const char *boot_id, bool guard, struct lmdb_guard **out,
		    struct lmdb_guard_report *report)
{
	size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *slot = malloc(slot_size(page_size));
	char file[PATH_MAX];
	MDB_envinfo info;
	uint64_t seq = 0;
	int side_fd, found, ret;

	*out = NULL;
	*report = (struct lmdb_guard_report){0};
	if (!slot)
		return -ENOMEM;
	ret = data_path(path, flags, file, sizeof(file));
	if (ret)
		goto out_free;
	side_fd = open(side_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (side_fd < 0) {
		ret = -errno;
		goto out_free;
	}
	found = newest_slot(side_fd, page_size, slot);
	ret = found < 0 ? found : 0;
	if (found > 0) {
		seq = ((struct slot_head *)slot)->seq;
		ret = restore(file, slot, page_size, boot_id);
		report->restored = ret > 0;
		ret = ret < 0 ? ret : 0;
	}
	if (!ret)
		ret = lmdb_errno(mdb_env_open(env, path, flags | (guard ? MDB_NOSYNC : 0), 0600));
	if (ret)
		goto out_close_side;
	if (report->restored) {
		report->txnid = ((struct slot_head *)slot)->txnid;
		ret = lmdb_errno(mdb_env_info(env, &info));
		if (!ret && info.me_last_txnid != report->txnid)
			ret = -EIO;
		if (ret)
			goto out_close_side;
	}
	if (guard) {
		/* the side file's name must outlive a power loss as its slots do */
		ret = sync_parent(side_path);
		if (ret)
			goto out_close_side;
		ret = guard_start(env, side_fd, seq, boot_id, out);
		goto out_free;
	}
	/* every commit flushes from now on: no slot may restore an older snapshot later */
	ret = lmdb_errno(mdb_env_sync(env, 1));
	if (!ret && unlink(side_path))
		ret = -errno;
	if (!ret)
		ret = sync_parent(side_path);
out_close_side:
	close(side_fd);
out_free:
	free(slot);
	return ret;
}

int lmdb_guard_flush(struct lmdb_guard *g)
{
	return guard_flush(g, false);
}

uint64_t lmdb_guard_unflushed(struct lmdb_guard *g)
{
	uint64_t flushed = __atomic_load_n(&g->txnid, __ATOMIC_RELAXED);
	MDB_envinfo info;

	if (mdb_env_info(g->env, &info) || info.me_last_txnid < flushed)
		return 0;
	return info.me_last_txnid - flushed;
}

bool lmdb_guard_lagging(struct lmdb_guard *g)
{
	return lmdb_guard_unflushed(g) > LMDB_GUARD_LAG;
}

int lmdb_guard_close(struct lmdb_guard *g)
{
	int ret;

	if (!g)
		return 0;
	ret = guard_flush(g, true);
	guard_free(g);
	return ret;
}
