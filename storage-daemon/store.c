/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk store.
 *
 * Data: one file per chunk, chunks/<inode>/<index> (16 hex digits each). Its
 * length is the chunk's length; a file longer than its metadata says is the
 * leftover of a write that was never acknowledged, and is cut back before the
 * next write.
 *
 * Metadata: one LMDB record per chunk, keyed by (inode, index) big-endian so a
 * cursor walks a file's chunks in order. The value is struct chunk_meta
 * (host-endian): length, version, and a CRC-32C for every 4 KiB block over the
 * block's bytes inside the chunk (the last block may be shorter).
 *
 * A write reads the partly covered first and last blocks (checking their
 * stored CRCs, so bad data is never laundered into a fresh CRC), merges the
 * payload, and writes whole blocks: the file offset is always 4 KiB aligned,
 * so a write of DIRECT_MIN or more uses O_DIRECT unless its end is the
 * unaligned end of the chunk. A shorter write goes to the page cache: it
 * costs a copy, not a disk round trip, and COMMIT flushes it like the rest.
 * Reads always cover whole blocks. A client's read goes through the page
 * cache, so a block read again comes from memory (a direct write drops the
 * cached pages it covers, and the chunk lock keeps a chunk's reads and writes
 * apart); a scrub reads with O_DIRECT, to check what the disk holds. Data
 * goes to disk before the metadata. A write's metadata goes to the index's
 * journal (journal.c: a record appended, the change held in memory, where
 * meta_load() looks first), which a checkpoint applies to the index in one
 * transaction, written without sync (MDB_NOSYNC): every JOURNAL_RECORDS
 * changes and before any walk of the index. The journal's file keeps every
 * record since the index's last flush, so COMMIT makes the metadata durable
 * by fdatasyncing that file together with the chunk files and their
 * directories: one round of flushes. The index itself is flushed now and
 * then (index_settle(): every LMDB_GUARD_LAG transactions, or when the
 * journal passes JOURNAL_FILE_MAX bytes), and its guard (meta/lmdb_guard.h)
 * makes that flush the state a power loss returns to, never a corrupt one;
 * the journal's records, replayed at the next open, bring it to what the
 * last COMMIT left (after a kill -9 too).
 *
 * Crash safety of overwrites: a write that rewrites blocks holding existing
 * data first records the new CRCs of those blocks as "pending" beside the
 * old ones, so a block found with either content verifies after a kill -9 in
 * the middle (an append that shares a block with committed data must not
 * turn that data into EIO). The next write or truncate of the chunk reads the
 * pending blocks back and keeps whichever CRC matches, or, when this process
 * wrote them through the file it still holds open (the cache's) and nothing
 * changed the chunk since, takes the pending CRCs unread (settle_pending()). A write
 * shorter than DIRECT_MIN that neither grows the chunk nor fails stops there
 * (one commit, the version bumped with the pending CRCs); any other write
 * commits again after its data, with the new CRCs in place. A block torn inside (power loss
 * in mid-write) fails its CRC: EIO, never bad data.
 *
 * Concurrency: a striped reader/writer lock per chunk keeps a chunk's data
 * and metadata in step; LMDB serialises its own writers.
 *
 * Open chunk files: chunk files stay open for buffered reads, writes and
 * truncates (a clock evicts one nobody holds), so a small request costs no
 * open, fstat and close: a quarter of the descriptors the process may open
 * (RLIMIT_NOFILE), between FD_CACHE_MIN and FD_CACHE_MAX, found through a
 * hash of the chunk id. Whoever holds a cached descriptor
 * holds its chunk's lock, so removing a chunk (under the lock, exclusively)
 * closes its descriptors before the name can be reused: a later write never
 * lands in an unlinked file. O_DIRECT transfers and COMMIT open their own.
 *
 * Fences (rdmafsctl drain, see rdmafs.proto "Layout generations and
 * fences"): one record per fenced inode, inode big-endian -> the lowest
 * layout generation still served, in a second LMDB environment
 * (meta/fences.mdb) so the chunk index holds chunk records only. Fences are
 * rare and must survive a restart at once, so that environment syncs every
 * commit. A reader/writer lock makes setting a fence wait for every request
 * that already passed its check: a request holds it shared from the check
 * to the end of its disk work, CHUNK_FENCE holds it exclusively. It prefers
 * the writer, so a stream of requests cannot starve a fence.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <liburing.h>
#include <lmdb.h>

#include "xprt.h"
#include "daemon_i.h"
#include "lmdb_errno.h"
#include "lmdb_guard.h"

#define BS	     STORE_BLOCK_SIZE
#define META_MAGIC   0x314d4352u /* "RCM1" */
#define LOCK_STRIPES 64
#define RING_ENTRIES 8
/* A write this long or longer goes to the disk directly; a shorter one to the page cache. */
#define DIRECT_MIN (64u << 10)
/* Chunk files kept open for buffered I/O (see "Open chunk files" above). */
#define FD_CACHE_MIN 64
#define FD_CACHE_MAX 4096
/* The journal's file past which the index is flushed and the file emptied (index_settle()). */
#define JOURNAL_FILE_MAX (64u << 20)
/* Index changes the journal holds before a checkpoint applies them; 4x that refuses writes. */
#define JOURNAL_RECORDS 4096
/* Far more fences than a drain ever leaves (16 bytes each); the file is sparse. */
#define FENCE_MAP_SIZE (64ull << 20)

struct chunk_meta {
	uint32_t magic;
	uint32_t length;
	uint64_t version;
	uint32_t block_size;
	uint32_t block_count;
	uint32_t pending_first; /* blocks with a second acceptable CRC ... */
	uint32_t pending_count; /* ... stored after the block_count CRCs */
	uint32_t crc[];
};

struct store {
	char *meta_path;
	int chunks_fd;
	MDB_env *env;
	struct lmdb_guard *guard; /* the chunk index's last flushed state, for a power loss */
	struct journal *journal;  /* index changes not in the index yet (journal.c) */
	MDB_dbi dbi;
	uint32_t max_chunk_size;
	uint32_t max_blocks;
	int direct_ok;	/* cleared (atomically) when the file system refuses O_DIRECT */
	int noatime_ok; /* cleared (atomically) when O_NOATIME is refused (files not ours) */
	pthread_rwlock_t locks[LOCK_STRIPES];
	MDB_env *fence_env;
	MDB_dbi fence_dbi;
	pthread_rwlock_t fence_lock;
	uint64_t fence_count; /* records in fence_env, under fence_lock: 0 skips the lookup */
	pthread_mutex_t fd_lock;
	struct fd_slot {
		struct store_chunk_id id;
		int fd;		/* -1: free */
		unsigned users; /* holders now: a slot in use is never closed */
		bool recent;	/* the clock's second chance */
		int next;	/* the next slot of its hash chain; -1 ends it */
		/*
		 * The chunk's version after a short overwrite written through
		 * this file (settle_later): its pending CRCs are the blocks'
		 * content while the version is that one. 0: none known.
		 */
		uint64_t settled;
	} * fds;
	unsigned fd_count, fd_hand;
	int *fd_heads; /* the first slot of each hash chain (fd_mask + 1 of them) */
	unsigned fd_mask;
	uint64_t pending_reads; /* blocks read back to settle their CRCs (atomic) */
};

struct store_io {
	struct store *st;
	struct io_uring ring;
	bool fixed;
	bool broken;	     /* a completion could not be reaped: no request runs here again */
	bool nowait;	     /* reads that would wait for the disk fail with -EAGAIN */
	bool nowait_refused; /* the file system has no RWF_NOWAIT: every such read does */
	uint8_t *region;
	size_t region_len;
	uint8_t *aux;		 /* two blocks, aligned, for the old head and tail */
	struct chunk_meta *meta; /* room for max_blocks CRCs */
};

static const uint8_t zero_block[BS];

static inline uint32_t div_up(uint32_t a, uint32_t b)
{
	return (uint32_t)(((uint64_t)a + b - 1) / b);
}

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static size_t meta_size(uint32_t blocks)
{
	return sizeof(struct chunk_meta) + (size_t)blocks * sizeof(uint32_t);
}

static size_t meta_bytes(const struct chunk_meta *m)
{
	return meta_size(m->block_count + m->pending_count);
}

/* Whether @crc is an acceptable checksum for block @b. */
static bool block_ok(const struct chunk_meta *m, uint32_t b, uint32_t crc)
{
	if (crc == m->crc[b])
		return true;
	return b >= m->pending_first && b - m->pending_first < m->pending_count &&
	       crc == m->crc[m->block_count + b - m->pending_first];
}

static void key_encode(struct store_chunk_id id, uint8_t *key)
{
	rdmafs_be64_put(key, id.inode);
	rdmafs_be64_put(key + 8, id.index);
}

static struct store_chunk_id key_decode(const uint8_t *key)
{
	return (struct store_chunk_id){rdmafs_be64_get(key), rdmafs_be64_get(key + 8)};
}

/* A hash of @id, its high bits well mixed. */
static uint64_t chunk_hash(struct store_chunk_id id)
{
	uint64_t h = id.inode * 0x9e3779b97f4a7c15ull ^ (id.index + 0x632be59bd9b4e019ull);

	h ^= h >> 29;
	return h * 0xbf58476d1ce4e5b9ull;
}

static pthread_rwlock_t *chunk_lock(struct store *st, struct store_chunk_id id)
{
	return &st->locks[(chunk_hash(id) >> 40) % LOCK_STRIPES];
}

/* ---- metadata ---- */

/* Takes @len bytes at @data as @id's metadata into @m: -EIO unless they are whole and ours. */
static int meta_take(struct store *st, struct store_chunk_id id, const void *data, size_t len,
		     struct chunk_meta *m)
{
	struct chunk_meta hdr;

	/* LMDB values are not aligned: read the header through a copy. */
	if (len >= sizeof(hdr))
		memcpy(&hdr, data, sizeof(hdr));
	if (len < sizeof(hdr) || hdr.magic != META_MAGIC || hdr.block_size != BS ||
	    hdr.length > st->max_chunk_size || hdr.block_count != div_up(hdr.length, BS) ||
	    hdr.pending_count > hdr.block_count ||
	    hdr.pending_first > hdr.block_count - hdr.pending_count || len != meta_bytes(&hdr)) {
		rdmafs_log(RDMAFS_LOG_ERR,
			   "chunk %016" PRIx64 "/%016" PRIx64
			   ": metadata damaged or larger than max_chunk_size",
			   id.inode, id.index);
		return -EIO;
	}
	memmove(m, data, len);
	return 0;
}

/*
 * Loads @id's metadata into @m (room for 2 * max_blocks CRCs): the
 * journal's newest change, else the index's record. *@exists false (and @m
 * an empty chunk) if none.
 */
static int meta_load(struct store *st, struct store_chunk_id id, struct chunk_meta *m, bool *exists)
{
	uint8_t key[16];
	MDB_val k = {sizeof(key), key}, v;
	MDB_txn *txn;
	uint32_t len;
	int rc, ret;

	memset(m, 0, sizeof(*m));
	m->magic = META_MAGIC;
	m->block_size = BS;
	*exists = false;
	key_encode(id, key);
	ret = journal_lookup(st->journal, key, m, meta_size(2 * st->max_blocks), &len);
	if (ret == 1 && len == JOURNAL_DELETED)
		return 0; /* removed: @m is the empty chunk */
	if (ret == 1) {
		ret = meta_take(st, id, m, len, m);
		*exists = ret == 0;
		return ret;
	}
	if (ret)
		return ret;
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (rc == 0) {
		ret = meta_take(st, id, v.mv_data, v.mv_size, m);
		*exists = ret == 0;
	} else if (rc != MDB_NOTFOUND) {
		ret = lmdb_errno(rc);
	}
	mdb_txn_abort(txn);
	return ret;
}

/* Puts (@value) or deletes (NULL) one record of the index in @txn. */
static int index_apply(MDB_txn *txn, MDB_dbi dbi, const uint8_t *key, const void *value,
		       uint32_t len)
{
	MDB_val k = {16, (void *)key}, v = {len, (void *)value};
	int rc;

	if (!value) {
		rc = mdb_del(txn, dbi, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
	}
	return lmdb_errno(mdb_put(txn, dbi, &k, &v, 0));
}

/* The id of the index's newest transaction. */
static uint64_t index_txnid(struct store *st)
{
	MDB_envinfo info;

	return mdb_env_info(st->env, &info) ? 0 : info.me_last_txnid;
}

/* journal_commit_fn: the journal's changes in one transaction of the index. */
static int commit_changes(void *arg, struct journal_change *const *changes, size_t n,
			  uint64_t *base)
{
	struct store *st = arg;
	MDB_txn *txn = NULL;
	int ret = lmdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));

	for (size_t i = 0; i < n && !ret; i++)
		ret = index_apply(txn, st->dbi, changes[i]->key, changes[i]->value,
				  changes[i]->len);
	if (ret) {
		if (txn)
			mdb_txn_abort(txn);
		return ret;
	}
	*base = mdb_txn_id(txn);
	return lmdb_errno(mdb_txn_commit(txn));
}

/* journal_flush_fn: the guard's flush of the index; *@base the transaction flushed. */
static int flush_index(void *arg, uint64_t *base)
{
	struct store *st = arg;
	int ret = lmdb_guard_flush(st->guard);

	/* appends are stopped (journal_settle()): nothing is held, no other writer of the index
	 * runs */
	*base = index_txnid(st);
	return ret;
}

/* The index flushed with every change, and the journal's file emptied (journal_settle()). */
static int index_settle(struct store *st)
{
	return journal_settle(st->journal, commit_changes, flush_index, st);
}

/*
 * Applies the journal's changes to the index (a walk of the index needs
 * them there), then settles when too many commits ran since the last flush
 * (the guard's pinned snapshot holds every page they freed) or the
 * journal's file grew past JOURNAL_FILE_MAX.
 */
static int index_checkpoint(struct store *st)
{
	int ret = journal_checkpoint(st->journal, commit_changes, st), settled;

	if (!ret &&
	    (lmdb_guard_lagging(st->guard) || journal_bytes(st->journal) > JOURNAL_FILE_MAX)) {
		settled = index_settle(st);
		/* the checkpoint stands; the next one tries again */
		if (settled)
			rdmafs_log(RDMAFS_LOG_WARN, "chunk index flush: %s", strerror(-settled));
	}
	return ret;
}

/* Makes every change of the index so far durable: the journal's file on disk. */
static int index_sync(struct store *st)
{
	return fdatasync(journal_fd(st->journal)) ? -errno : 0;
}

/*
 * Records one change of @id's metadata (@m, or NULL: removed) in the
 * journal, after a checkpoint when it holds JOURNAL_RECORDS already. A
 * checkpoint that fails (the index's map is full, say) leaves the changes
 * held; when four times that many are, the change is refused with its error.
 */
static int meta_put(struct store *st, struct store_chunk_id id, const struct chunk_meta *m)
{
	uint64_t held = journal_records(st->journal);
	uint8_t key[16];
	int ret;

	if (held >= JOURNAL_RECORDS) {
		ret = index_checkpoint(st);
		if (ret && held >= 4 * JOURNAL_RECORDS) {
			rdmafs_log(RDMAFS_LOG_ERR,
				   "chunk index checkpoint (%" PRIu64 " changes held): %s; "
				   "refusing more",
				   held, strerror(-ret));
			return ret;
		}
		if (ret)
			rdmafs_log(RDMAFS_LOG_WARN,
				   "chunk index checkpoint (%" PRIu64 " changes held): %s", held,
				   strerror(-ret));
	}
	key_encode(id, key);
	return journal_append(st->journal, key, m, m ? meta_bytes(m) : 0);
}

static int meta_delete(struct store *st, struct store_chunk_id id)
{
	return meta_put(st, id, NULL);
}

/* ---- files ---- */

static void chunk_path(struct store_chunk_id id, char *out, size_t size)
{
	snprintf(out, size, "%016" PRIx64 "/%016" PRIx64, id.inode, id.index);
}

static void inode_path(uint64_t inode, char *out, size_t size)
{
	snprintf(out, size, "%016" PRIx64, inode);
}

static bool direct_allowed(struct store *st)
{
	return __atomic_load_n(&st->direct_ok, __ATOMIC_RELAXED);
}

/*
 * Opens a chunk file; O_DIRECT is dropped for good where the file system
 * refuses it. O_NOATIME: a chunk's access time means nothing, and keeping it
 * would dirty the inode on a read after every write (relatime); dropped for
 * good once an open it failed (EPERM: a file another user owns) succeeds
 * without it, so an EPERM of another cause stays the open's error.
 */
static int chunk_open(struct store *st, struct store_chunk_id id, bool create, bool direct,
		      int *fd_out)
{
	char path[64], dir[32];
	int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
	bool noatime = __atomic_load_n(&st->noatime_ok, __ATOMIC_RELAXED), refused = false;
	int fd;

	chunk_path(id, path, sizeof(path));
	for (int attempt = 0; attempt < 4; attempt++) {
		fd = openat(st->chunks_fd, path,
			    flags | (direct ? O_DIRECT : 0) | (noatime ? O_NOATIME : 0), 0640);
		if (fd >= 0) {
			if (refused && __atomic_exchange_n(&st->noatime_ok, 0, __ATOMIC_RELAXED))
				rdmafs_log(RDMAFS_LOG_INFO, "chunk files refuse O_NOATIME"
							    " (not ours); keeping access times");
			*fd_out = fd;
			return 0;
		}
		if (errno == EPERM && noatime) {
			noatime = false;
			refused = true;
			continue;
		}
		if (errno == EINVAL && direct) {
			if (__atomic_exchange_n(&st->direct_ok, 0, __ATOMIC_RELAXED))
				rdmafs_log(RDMAFS_LOG_WARN, "the data file system refuses O_DIRECT;"
							    " using buffered I/O");
			direct = false;
			continue;
		}
		if (errno != ENOENT || !create)
			return -errno;
		/* The inode's directory is missing (first chunk, or removed meanwhile). */
		inode_path(id.inode, dir, sizeof(dir));
		if (mkdirat(st->chunks_fd, dir, 0750) && errno != EEXIST)
			return -errno;
	}
	return -EIO;
}

static bool same_chunk(struct store_chunk_id a, struct store_chunk_id b)
{
	return a.inode == b.inode && a.index == b.index;
}

/* The head of @id's hash chain of cached files; the caller holds fd_lock. */
static int *fd_chain(struct store *st, struct store_chunk_id id)
{
	return &st->fd_heads[(chunk_hash(id) >> 32) & st->fd_mask];
}

/* A cached file of @id, or NULL; the caller holds fd_lock. */
static struct fd_slot *fd_find(struct store *st, struct store_chunk_id id)
{
	for (int i = *fd_chain(st, id); i >= 0; i = st->fds[i].next)
		if (same_chunk(st->fds[i].id, id))
			return &st->fds[i];
	return NULL;
}

/* Closes @s's file and takes it off its chain; the caller holds fd_lock. */
static void fd_drop(struct store *st, struct fd_slot *s)
{
	for (int *p = fd_chain(st, s->id); *p >= 0; p = &st->fds[*p].next) {
		if (&st->fds[*p] == s) {
			*p = s->next;
			break;
		}
	}
	close(s->fd);
	s->fd = -1;
	s->users = 0;
}

/*
 * The chunk's file for buffered I/O, from the cache or opened (and created,
 * with @create) and cached; *@fresh says it was just opened. The caller holds
 * the chunk's lock until chunk_put(). 0 or -errno.
 */
static int chunk_get(struct store *st, struct store_chunk_id id, bool create, int *fd,
		     struct fd_slot **slot, bool *fresh)
{
	struct fd_slot *s;
	int ret, *head;

	pthread_mutex_lock(&st->fd_lock);
	s = fd_find(st, id);
	if (s) {
		s->users++;
		s->recent = true;
	}
	pthread_mutex_unlock(&st->fd_lock);
	if (s) {
		*fd = s->fd;
		*slot = s;
		*fresh = false;
		return 0;
	}
	ret = chunk_open(st, id, create, false, fd);
	if (ret)
		return ret;
	*fresh = true;
	*slot = NULL; /* uncached if every slot is in use */
	pthread_mutex_lock(&st->fd_lock);
	for (unsigned step = 0; step < 2 * st->fd_count; step++) {
		s = &st->fds[st->fd_hand];
		st->fd_hand = (st->fd_hand + 1) % st->fd_count;
		if (s->fd >= 0 && (s->users || s->recent)) {
			s->recent = false;
			continue;
		}
		if (s->fd >= 0)
			fd_drop(st, s);
		head = fd_chain(st, id);
		*s = (struct fd_slot){
			.id = id, .fd = *fd, .users = 1, .recent = true, .next = *head};
		*head = (int)(s - st->fds);
		*slot = s;
		break;
	}
	pthread_mutex_unlock(&st->fd_lock);
	return 0;
}

/* Gives back what chunk_get() gave; with @bad it closes the file (reopened, and checked, next). */
static void chunk_put(struct store *st, int fd, struct fd_slot *slot, bool bad)
{
	if (!slot) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&st->fd_lock);
	slot->users--;
	if (bad && !slot->users)
		fd_drop(st, slot);
	pthread_mutex_unlock(&st->fd_lock);
}

/*
 * Closes every cached file of @id (two readers may have cached one each);
 * its chunk lock is held exclusively, so no one holds one.
 */
static void chunk_forget(struct store *st, struct store_chunk_id id)
{
	struct fd_slot *s;

	pthread_mutex_lock(&st->fd_lock);
	while ((s = fd_find(st, id)))
		fd_drop(st, s);
	pthread_mutex_unlock(&st->fd_lock);
}

/*
 * The open-file cache: a quarter of RLIMIT_NOFILE's slots, within
 * FD_CACHE_MIN .. FD_CACHE_MAX, and a power of two of hash chains at least
 * as many. 0 or -ENOMEM.
 */
static int fd_cache_create(struct store *st)
{
	struct rlimit rl;
	unsigned count = FD_CACHE_MIN, chains = 1;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t quarter = rl.rlim_cur == RLIM_INFINITY ? FD_CACHE_MAX : rl.rlim_cur / 4;

		count = quarter < FD_CACHE_MIN	 ? FD_CACHE_MIN
			: quarter > FD_CACHE_MAX ? FD_CACHE_MAX
						 : (unsigned)quarter;
	}
	while (chains < count)
		chains <<= 1;
	st->fds = calloc(count, sizeof(*st->fds));
	st->fd_heads = malloc(chains * sizeof(*st->fd_heads));
	if (!st->fds || !st->fd_heads)
		return -ENOMEM;
	st->fd_count = count;
	st->fd_mask = chains - 1;
	for (unsigned i = 0; i < count; i++)
		st->fds[i].fd = -1;
	for (unsigned i = 0; i < chains; i++)
		st->fd_heads[i] = -1;
	return 0;
}

/* Closes every cached file and frees the cache. */
static void fd_cache_destroy(struct store *st)
{
	for (unsigned i = 0; i < st->fd_count; i++)
		if (st->fds[i].fd >= 0)
			close(st->fds[i].fd);
	free(st->fds);
	free(st->fd_heads);
}

/* ---- io_uring ---- */

/*
 * The ring's discipline: a request the kernel took is always waited for (its
 * buffer and file stay in use until its completion is reaped), and a request
 * it did not take never runs later. A failed io_uring_enter(2) leaves the
 * prepared SQEs queued, where the next submission would run them with
 * whatever the buffer then holds; so a refusal is retried SUBMIT_TRIES times,
 * and then, once everything taken is reaped, the idle ring is made anew
 * (ring_rebuild()), which drops them.
 */
#define SUBMIT_TRIES 5

/* The ring, with the pool's region registered as a fixed buffer where allowed. */
static int ring_setup(struct store_io *io)
{
	struct iovec iov = {io->region, io->region_len};
	int ret = io_uring_queue_init(RING_ENTRIES, &io->ring, 0);

	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "io_uring_queue_init: %s", strerror(-ret));
		return ret;
	}
	io->fixed = false;
	if (!io->region)
		return 0;
	ret = io_uring_register_buffers(&io->ring, &iov, 1);
	if (ret == 0)
		io->fixed = true;
	else
		rdmafs_log(RDMAFS_LOG_WARN,
			   "io_uring_register_buffers: %s (raise the memlock limit);"
			   " using unregistered buffers",
			   strerror(-ret));
	return 0;
}

/*
 * Submits the @queued SQEs prepared since the last submission, waiting for
 * @wait completions; *@taken gets how many the kernel took. -EIO when it
 * keeps refusing: the caller reaps the *@taken and calls ring_rebuild().
 */
static int ring_submit(struct store_io *io, unsigned queued, unsigned wait, unsigned *taken)
{
	int ret = 0;

	*taken = 0;
	for (unsigned tries = 0; *taken < queued && tries < SUBMIT_TRIES;) {
		ret = io_uring_submit_and_wait(&io->ring, *taken ? 0 : wait);
		if (ret > 0) {
			*taken += (unsigned)ret;
			continue;
		}
		if (ret != -EINTR)
			usleep(1000u << tries); /* -EAGAIN, -EBUSY: the kernel is short of memory */
		tries++;
	}
	if (*taken == queued)
		return 0;
	rdmafs_log(RDMAFS_LOG_ERR, "io_uring_enter refused %u of %u requests: %s", queued - *taken,
		   queued, strerror(ret < 0 ? -ret : EIO));
	return -EIO;
}

/* Waits for the next completion; nothing but a broken ring stops the wait. */
static int ring_reap(struct store_io *io, int *res, void **data)
{
	struct io_uring_cqe *cqe;
	int ret;

	do
		ret = io_uring_wait_cqe(&io->ring, &cqe);
	while (ret == -EINTR || ret == -EAGAIN);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "io_uring_wait_cqe: %s; this worker's disk I/O stops",
			   strerror(-ret));
		io->broken = true;
		return -EIO;
	}
	*res = cqe->res;
	if (data)
		*data = io_uring_cqe_get_data(cqe);
	io_uring_cqe_seen(&io->ring, cqe);
	return 0;
}

/* Drops the SQEs a refused submission left: the ring is idle, so it is made anew. */
static void ring_rebuild(struct store_io *io)
{
	io_uring_queue_exit(&io->ring);
	if (ring_setup(io)) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot make the io_uring anew; this worker's disk I/O"
					   " stops");
		io->broken = true;
	}
}

/*
 * Reads or writes [addr, addr + len) at @off of @fd through the ring,
 * resubmitting after short transfers. *@done gets the bytes moved (a read
 * stops early at end of file). Returns 0 or -errno.
 */
static int ring_rw(struct store_io *io, bool write, int fd, uint8_t *addr, uint32_t len,
		   uint64_t off, uint32_t *done)
{
	struct io_uring_sqe *sqe;
	uint32_t moved = 0;
	unsigned taken;
	int ret, res;

	bool nowait = !write && io->nowait;

	ret = io->broken ? -EIO : 0;
	if (nowait && io->nowait_refused)
		ret = -EAGAIN; /* cannot know whether it would wait: it may */
	while (!ret && moved < len) {
		uint8_t *p = addr + moved;
		unsigned n = len - moved;
		bool fixed = io->fixed && p >= io->region && p + n <= io->region + io->region_len;

		sqe = io_uring_get_sqe(&io->ring);
		if (!sqe) {
			/* cannot happen: the ring is idle between requests */
			ret = -EIO;
			goto out;
		}
		if (write && fixed)
			io_uring_prep_write_fixed(sqe, fd, p, n, off + moved, 0);
		else if (write)
			io_uring_prep_write(sqe, fd, p, n, off + moved);
		else if (fixed)
			io_uring_prep_read_fixed(sqe, fd, p, n, off + moved, 0);
		else
			io_uring_prep_read(sqe, fd, p, n, off + moved);
		if (nowait)
			sqe->rw_flags |= RWF_NOWAIT;
		io_uring_sqe_set_data(sqe, io);
		ret = ring_submit(io, 1, 1, &taken);
		if (ret) {
			ring_rebuild(io);
			goto out;
		}
		ret = ring_reap(io, &res, NULL);
		if (ret)
			goto out;
		if (nowait && (res == -EAGAIN || res == -EOPNOTSUPP)) {
			/* EOPNOTSUPP: tmpfs, 9p, ...; from now on every read is handed on */
			io->nowait_refused |= res == -EOPNOTSUPP;
			ret = -EAGAIN; /* not in the page cache: the caller's to hand on */
			goto out;
		}
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res < 0) {
			ret = res;
			goto out;
		}
		if (res == 0) {
			/* End of file for a read; a write that moves nothing is an error. */
			ret = write ? -EIO : 0;
			goto out;
		}
		moved += (uint32_t)res;
	}
out:
	*done = moved;
	return ret;
}

/* ---- fetches into the page cache (daemon_i.h) ---- */

struct store_fetch {
	struct store *st;
	pthread_mutex_t lock; /* the ring's submissions and its reaping */
	struct io_uring ring;
	unsigned depth, in_flight;
	bool broken;	  /* the ring refused a submission: no fetch starts again */
	uint8_t *scratch; /* STORE_FETCH_MAX bytes every fetch reads into; never read */
};

int store_fetch_create(struct store *st, unsigned depth, struct store_fetch **out)
{
	struct store_fetch *f = calloc(1, sizeof(*f));
	int ret;

	if (!f)
		return -ENOMEM;
	f->st = st;
	f->depth = depth;
	f->scratch = aligned_alloc(BS, STORE_FETCH_MAX);
	if (!f->scratch) {
		free(f);
		return -ENOMEM;
	}
	ret = io_uring_queue_init(depth, &f->ring, 0);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "io_uring_queue_init: %s", strerror(-ret));
		free(f->scratch);
		free(f);
		return ret;
	}
	pthread_mutex_init(&f->lock, NULL);
	*out = f;
	return 0;
}

void store_fetch_destroy(struct store_fetch *f)
{
	if (!f)
		return;
	io_uring_queue_exit(&f->ring);
	pthread_mutex_destroy(&f->lock);
	free(f->scratch);
	free(f);
}

int store_fetch_fd(const struct store_fetch *f)
{
	return f->ring.ring_fd;
}

int store_fetch_start(struct store_fetch *f, struct store_chunk_id id, uint32_t offset,
		      uint32_t len, uint64_t tag)
{
	struct store *st = f->st;
	pthread_rwlock_t *lock = chunk_lock(st, id);
	uint32_t b0 = offset / BS, b1 = div_up(offset + len, BS);
	struct io_uring_sqe *sqe;
	struct fd_slot *slot;
	bool fresh;
	int fd, ret;

	if ((b1 - b0) * BS > STORE_FETCH_MAX)
		return -E2BIG;
	pthread_mutex_lock(&f->lock);
	if (f->in_flight == f->depth || f->broken) {
		pthread_mutex_unlock(&f->lock);
		return -EBUSY;
	}
	/*
	 * The descriptor is the cache's only while the chunk's lock is held:
	 * through the submit. A chunk being written is not waited for (the
	 * caller must not wait): its request goes the usual way.
	 */
	if (pthread_rwlock_tryrdlock(lock)) {
		pthread_mutex_unlock(&f->lock);
		return -EBUSY;
	}
	ret = chunk_get(st, id, false, &fd, &slot, &fresh);
	if (!ret) {
		sqe = io_uring_get_sqe(&f->ring); /* never NULL: fewer than depth are in flight */
		io_uring_prep_read(sqe, fd, f->scratch, (b1 - b0) * BS, (uint64_t)b0 * BS);
		io_uring_sqe_set_data64(sqe, tag);
		/* the kernel takes its own reference to the file as it takes the read */
		do
			ret = io_uring_submit(&f->ring);
		while (ret == -EINTR);
		chunk_put(st, fd, slot, false);
		if (ret == 1)
			f->in_flight++;
		else if (ret >= 0)
			ret = -EIO;
	}
	pthread_rwlock_unlock(lock);
	if (ret < 0 && ret != -ENOENT) {
		/*
		 * A refused submission leaves its SQE queued, where the next one would
		 * run it; the ring's descriptor is watched, so it is not made anew:
		 * reads wait for the disk on a worker again, as without a fetcher.
		 */
		rdmafs_log(RDMAFS_LOG_ERR,
			   "chunk %016" PRIx64 "/%016" PRIx64 ": io_uring refused a fetch: %s;"
			   " cold reads go to the workers from now on",
			   id.inode, id.index, strerror(-ret));
		f->broken = true;
	}
	pthread_mutex_unlock(&f->lock);
	return ret < 0 ? ret : 0;
}

int store_fetch_reap(struct store_fetch *f, bool wait, uint64_t *tag)
{
	struct io_uring_cqe *cqe;
	int ret;

	pthread_mutex_lock(&f->lock);
	if (!f->in_flight) {
		pthread_mutex_unlock(&f->lock);
		return -ENOENT;
	}
	do
		ret = wait ? io_uring_wait_cqe(&f->ring, &cqe) : io_uring_peek_cqe(&f->ring, &cqe);
	while (ret == -EINTR);
	if (!ret) {
		*tag = io_uring_cqe_get_data64(cqe);
		io_uring_cqe_seen(&f->ring, cqe);
		f->in_flight--;
	}
	pthread_mutex_unlock(&f->lock);
	if (ret && wait)
		rdmafs_log(RDMAFS_LOG_ERR, "io_uring_wait_cqe: %s", strerror(-ret));
	return !ret ? 0 : wait ? -EIO : -EAGAIN;
}

bool store_io_can_fetch(const struct store_io *io)
{
	return io->nowait && !io->nowait_refused;
}

/*
 * Writes [addr, addr + len) at @off of @fd, opened without O_DIRECT, with
 * pwrite(2): a write to the page cache does not block on the disk, and the
 * ring would hand it to a kernel worker thread (the file systems here have no
 * non-blocking buffered write), a thread hop for a memory copy.
 */
static int cache_write(int fd, const uint8_t *addr, uint32_t len, uint64_t off, uint32_t *done)
{
	uint32_t moved = 0;
	int ret = 0;

	while (moved < len) {
		ssize_t n = pwrite(fd, addr + moved, len - moved, (off_t)(off + moved));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		moved += (uint32_t)n;
	}
	*done = moved;
	return ret;
}

/*
 * Flushes the @n (at most RING_ENTRIES) files of @fds at once: one submission
 * for all, so the disk gets them together rather than one after the other;
 * the first @datasync of them with fdatasync, the rest with fsync. Waits for
 * every one; returns the first error, whose index goes to *@failed.
 */
static int ring_fsync_all(struct store_io *io, const int *fds, unsigned n, unsigned datasync,
			  unsigned *failed)
{
	unsigned taken;
	int first = 0, ret;

	if (io->broken)
		return -EIO;
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);

		if (!sqe) {
			/* cannot happen: an idle ring has room for n <= RING_ENTRIES */
			ring_rebuild(io);
			return -EIO;
		}
		io_uring_prep_fsync(sqe, fds[i], i < datasync ? IORING_FSYNC_DATASYNC : 0);
		io_uring_sqe_set_data(sqe, (void *)(uintptr_t)i);
	}
	ret = ring_submit(io, n, 0, &taken);
	for (unsigned reaped = 0; reaped < taken; reaped++) {
		void *data;
		int res, wait = ring_reap(io, &res, &data);

		if (wait)
			return wait;
		if (res < 0 && !first) {
			first = res;
			*failed = (unsigned)(uintptr_t)data;
		}
	}
	if (ret)
		ring_rebuild(io);
	return first ? first : ret;
}

static int ring_fsync(struct store_io *io, int fd, bool datasync)
{
	unsigned failed;

	return ring_fsync_all(io, &fd, 1, datasync, &failed);
}

/*
 * Reads block @b of the chunk described by @m into @dst (BS bytes, zeros past
 * the chunk's end) and checks it against its stored CRC.
 */
static int block_read_verified(struct store_io *io, int fd, struct store_chunk_id id, uint32_t b,
			       const struct chunk_meta *m, uint8_t *dst)
{
	uint32_t extent = min_u32(BS, m->length - b * BS), got;
	int ret = ring_rw(io, false, fd, dst, BS, (uint64_t)b * BS, &got);

	if (ret)
		return ret;
	if (got < BS)
		memset(dst + got, 0, BS - got);
	memset(dst + extent, 0, BS - extent);
	if (!block_ok(m, b, rdmafs_crc32c(dst, extent))) {
		rdmafs_log(RDMAFS_LOG_ERR,
			   "chunk %016" PRIx64 "/%016" PRIx64 " block %u: stored data fails its"
			   " checksum",
			   id.inode, id.index, b);
		return -EBADMSG;
	}
	return 0;
}

/* ---- fences ---- */

static void fence_key(uint64_t inode, uint8_t *key)
{
	rdmafs_be64_put(key, inode);
}

/* Opens meta/fences.mdb (created on first use) and counts its records. */
static int fence_open(struct store *st, int dir_fd)
{
	pthread_rwlockattr_t attr;
	MDB_stat ms;
	MDB_txn *txn;
	char path[80];
	int rc;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&st->fence_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	snprintf(path, sizeof(path), "/proc/self/fd/%d/meta/fences.mdb", dir_fd);
	rc = mdb_env_create(&st->fence_env);
	if (rc)
		goto err;
	rc = mdb_env_set_mapsize(st->fence_env, FENCE_MAP_SIZE);
	if (!rc)
		rc = mdb_env_open(st->fence_env, path, MDB_NOSUBDIR | MDB_NOTLS, 0640);
	if (rc)
		goto err_close;
	rc = mdb_txn_begin(st->fence_env, NULL, 0, &txn);
	if (rc)
		goto err_close;
	rc = mdb_dbi_open(txn, NULL, 0, &st->fence_dbi);
	if (!rc)
		rc = mdb_stat(txn, st->fence_dbi, &ms);
	if (rc) {
		mdb_txn_abort(txn);
		goto err_close;
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto err_close;
	st->fence_count = ms.ms_entries;
	return 0;

err_close:
	mdb_env_close(st->fence_env);
	st->fence_env = NULL;
err:
	rdmafs_log(RDMAFS_LOG_ERR, "cannot open the fence table (LMDB meta/fences.mdb): %s",
		   mdb_strerror(rc));
	pthread_rwlock_destroy(&st->fence_lock);
	return lmdb_errno(rc);
}

/* The fence of @inode (0: none). Called with fence_lock held. */
static int fence_get(struct store *st, uint64_t inode, uint64_t *fence)
{
	uint8_t key[8];
	MDB_val k = {sizeof(key), key}, v;
	MDB_txn *txn;
	int rc;

	*fence = 0;
	if (st->fence_count == 0)
		return 0;
	fence_key(inode, key);
	rc = mdb_txn_begin(st->fence_env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_get(txn, st->fence_dbi, &k, &v);
	if (rc == 0 && v.mv_size == sizeof(*fence))
		memcpy(fence, v.mv_data, sizeof(*fence));
	else if (rc == 0)
		rc = MDB_CORRUPTED;
	mdb_txn_abort(txn);
	return rc == MDB_NOTFOUND ? 0 : lmdb_errno(rc);
}

int store_fence_enter(struct store *st, uint64_t inode, uint64_t generation)
{
	uint64_t fence;
	int ret;

	pthread_rwlock_rdlock(&st->fence_lock);
	ret = fence_get(st, inode, &fence);
	if (!ret && generation < fence)
		ret = -ESTALE;
	if (ret)
		pthread_rwlock_unlock(&st->fence_lock);
	return ret;
}

void store_fence_leave(struct store *st)
{
	pthread_rwlock_unlock(&st->fence_lock);
}

int store_fence_set(struct store *st, uint64_t inode, uint64_t generation, bool lift, uint64_t *now)
{
	uint8_t key[8];
	MDB_val k = {sizeof(key), key}, v = {sizeof(generation), &generation};
	MDB_txn *txn = NULL;
	uint64_t fence;
	int rc = 0, ret;

	if (inode == 0 || generation == 0)
		return -EINVAL;
	fence_key(inode, key);
	/* exclusive: every request that passed its check has finished */
	pthread_rwlock_wrlock(&st->fence_lock);
	ret = fence_get(st, inode, &fence);
	if (ret)
		goto out_unlock;
	*now = fence;
	if (lift ? fence != generation : fence >= generation)
		goto out_unlock; /* nothing to change */
	rc = mdb_txn_begin(st->fence_env, NULL, 0, &txn);
	if (!rc)
		rc = lift ? mdb_del(txn, st->fence_dbi, &k, NULL)
			  : mdb_put(txn, st->fence_dbi, &k, &v, 0);
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		ret = lmdb_errno(rc);
		goto out_unlock;
	}
	/* the environment syncs on commit: the fence is on disk before the reply */
	ret = lmdb_errno(mdb_txn_commit(txn));
	if (ret)
		goto out_unlock;
	if (lift) {
		st->fence_count--;
		*now = 0;
	} else {
		st->fence_count += fence == 0;
		*now = generation;
	}
	rdmafs_log(RDMAFS_LOG_INFO, "inode %016" PRIx64 ": fence %s generation %" PRIu64, inode,
		   lift ? "lifted from" : "set at", generation);
out_unlock:
	pthread_rwlock_unlock(&st->fence_lock);
	return ret;
}

int store_fence_list(struct store *st, uint64_t after, struct store_fence *out, size_t cap,
		     size_t *count, bool *more)
{
	uint8_t key[8];
	MDB_val k = {sizeof(key), key}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	int rc;

	*count = 0;
	*more = false;
	if (after == UINT64_MAX)
		return 0;
	fence_key(after + 1, key);
	pthread_rwlock_rdlock(&st->fence_lock);
	rc = mdb_txn_begin(st->fence_env, NULL, MDB_RDONLY, &txn);
	if (rc)
		goto out_unlock;
	rc = mdb_cursor_open(txn, st->fence_dbi, &cur);
	if (rc)
		goto out_abort;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != sizeof(key) || v.mv_size != sizeof(uint64_t)) {
			rc = MDB_CORRUPTED;
			break;
		}
		if (*count == cap) {
			*more = true;
			break;
		}
		out[*count].inode = rdmafs_be64_get(k.mv_data);
		memcpy(&out[*count].generation, v.mv_data, sizeof(uint64_t));
		(*count)++;
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_cursor_close(cur);
out_abort:
	mdb_txn_abort(txn);
out_unlock:
	pthread_rwlock_unlock(&st->fence_lock);
	return lmdb_errno(rc);
}

/* ---- public ---- */

struct replay {
	struct store *st;
	MDB_txn *txn;
};

static int replay_one(void *arg, const uint8_t *key, const void *value, uint32_t len)
{
	struct replay *r = arg;

	return index_apply(r->txn, r->st->dbi, key, value, len);
}

/*
 * Opens the index's journal and brings the index up to it: its records
 * follow the index's last flush, to which a power loss returned it (those
 * a COMMIT fdatasynced are there: the store is as the last COMMIT left it),
 * and which a kill -9 left as it was (the page cache kept every record).
 * Records that follow another state of the index are dropped (journal.c).
 * Then the index is flushed and the file emptied.
 */
static int journal_start(struct store *st, int dir_fd)
{
	struct replay r = {.st = st};
	uint64_t records = 0, stale = 0, base = index_txnid(st);
	int ret = journal_open(dir_fd, "meta/index.journal", &st->journal);

	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open the chunk index journal: %s",
			   strerror(-ret));
		return ret;
	}
	ret = lmdb_errno(mdb_txn_begin(st->env, NULL, 0, &r.txn));
	if (!ret) {
		ret = journal_replay(st->journal, base, replay_one, &r, &records, &stale);
		if (ret || !records) {
			mdb_txn_abort(r.txn);
		} else {
			base = mdb_txn_id(r.txn);
			ret = lmdb_errno(mdb_txn_commit(r.txn));
		}
	}
	/* the records go only once the index that holds them is on disk */
	if (!ret && records)
		ret = lmdb_guard_flush(st->guard);
	if (!ret)
		ret = journal_discard(st->journal, base);
	if (ret)
		rdmafs_log(RDMAFS_LOG_ERR, "cannot replay the chunk index journal: %s",
			   strerror(-ret));
	else if (records)
		rdmafs_log(RDMAFS_LOG_INFO,
			   "chunk index: %" PRIu64 " changes replayed from its journal", records);
	if (stale)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "chunk index journal: records after index transaction %" PRIu64
			   " dropped: the index is at %" PRIu64,
			   stale, index_txnid(st));
	return ret;
}

int store_open(int dir_fd, uint32_t max_chunk_size, uint64_t map_size, struct store **out)
{
	char path[64], side[96], boot_id[LMDB_GUARD_BOOT_ID_LEN];
	struct lmdb_guard_report report;
	struct store *st;
	MDB_txn *txn;
	int rc, ret, dead;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->max_chunk_size = max_chunk_size;
	st->max_blocks = div_up(max_chunk_size, BS);
	st->direct_ok = 1;
	st->noatime_ok = 1;
	for (int i = 0; i < LOCK_STRIPES; i++)
		pthread_rwlock_init(&st->locks[i], NULL);
	pthread_mutex_init(&st->fd_lock, NULL);
	ret = fd_cache_create(st);
	if (ret)
		goto err_free;
	if (mkdirat(dir_fd, "chunks", 0750) && errno != EEXIST) {
		ret = -errno;
		goto err_free;
	}
	if (mkdirat(dir_fd, "meta", 0750) && errno != EEXIST) {
		ret = -errno;
		goto err_free;
	}
	st->chunks_fd = openat(dir_fd, "chunks", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->chunks_fd < 0) {
		ret = -errno;
		goto err_free;
	}
	/* LMDB wants a path: reach the directory through our descriptor. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d/meta", dir_fd);
	snprintf(side, sizeof(side), "%s/flushed.snapshot", path);
	ret = lmdb_guard_boot_id(boot_id);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot read this boot's id: %s", strerror(-ret));
		goto err_close_chunks;
	}
	rc = mdb_env_create(&st->env);
	if (rc) {
		ret = lmdb_errno(rc);
		goto err_close_chunks;
	}
	rc = mdb_env_set_mapsize(st->env, map_size);
	if (!rc)
		rc = mdb_env_set_maxreaders(st->env, 256);
	ret = lmdb_errno(rc);
	if (!ret)
		ret = lmdb_guard_open(st->env, path, MDB_NOTLS, side, boot_id, true, &st->guard,
				      &report);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open the chunk index (LMDB): %s",
			   strerror(-ret));
		goto err_close_env;
	}
	if (report.restored)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "the chunk index did not close on this boot: restored it to its last "
			   "flush (transaction %" PRIu64 "), which its journal brings to the last "
			   "COMMIT; writes no COMMIT covered may read as EIO",
			   report.txnid);
	/* Reader slots of a daemon killed with -9 would pin old pages forever. */
	mdb_reader_check(st->env, &dead);
	rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (!rc) {
		rc = mdb_dbi_open(txn, NULL, 0, &st->dbi);
		if (rc)
			mdb_txn_abort(txn);
		else
			rc = mdb_txn_commit(txn);
	}
	if (rc) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open the chunk index (LMDB): %s",
			   mdb_strerror(rc));
		ret = lmdb_errno(rc);
		goto err_close_env;
	}
	ret = journal_start(st, dir_fd);
	if (ret)
		goto err_close_env;
	ret = fence_open(st, dir_fd);
	if (ret)
		goto err_close_env;
	*out = st;
	return 0;

err_close_env:
	journal_close(st->journal);
	lmdb_guard_close(st->guard);
	st->guard = NULL;
	mdb_env_close(st->env);
err_close_chunks:
	close(st->chunks_fd);
err_free:
	fd_cache_destroy(st);
	for (int i = 0; i < LOCK_STRIPES; i++)
		pthread_rwlock_destroy(&st->locks[i]);
	pthread_mutex_destroy(&st->fd_lock);
	free(st);
	return ret;
}

void store_close(struct store *st)
{
	int ret;

	if (!st)
		return;
	ret = index_settle(st);
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "chunk index flush at close: %s; its journal keeps the changes",
			   strerror(-ret));
	journal_close(st->journal);
	lmdb_guard_close(st->guard);
	mdb_env_close(st->env);
	mdb_env_close(st->fence_env);
	pthread_rwlock_destroy(&st->fence_lock);
	close(st->chunks_fd);
	fd_cache_destroy(st);
	pthread_mutex_destroy(&st->fd_lock);
	for (int i = 0; i < LOCK_STRIPES; i++)
		pthread_rwlock_destroy(&st->locks[i]);
	free(st);
}

int store_data_fd(const struct store *st)
{
	return st->chunks_fd;
}

uint32_t store_max_chunk_size(const struct store *st)
{
	return st->max_chunk_size;
}

int store_io_create(struct store *st, struct xprt_pool *pool, struct store_io **out)
{
	struct store_io *io = calloc(1, sizeof(*io));
	void *region;
	int ret;

	if (!io)
		return -ENOMEM;
	io->st = st;
	io->aux = aligned_alloc(BS, 2 * BS);
	io->meta = malloc(meta_size(2 * st->max_blocks));
	if (!io->aux || !io->meta) {
		ret = -ENOMEM;
		goto err_free;
	}
	if (pool) {
		xprt_pool_region(pool, &region, &io->region_len);
		io->region = region;
	}
	ret = ring_setup(io);
	if (ret)
		goto err_free;
	*out = io;
	return 0;

err_free:
	free(io->meta);
	free(io->aux);
	free(io);
	return ret;
}

void store_io_nowait(struct store_io *io)
{
	io->nowait = true;
}

void store_io_destroy(struct store_io *io)
{
	if (!io)
		return;
	io_uring_queue_exit(&io->ring);
	free(io->meta);
	free(io->aux);
	free(io);
}

/* Block CRCs of @m for a chunk growing from m->length to @new_len with zeros. */
static void meta_grow_zeros(struct chunk_meta *m, uint32_t new_len)
{
	uint32_t old_len = m->length, b;

	if (new_len <= old_len)
		return;
	b = old_len / BS;
	if (old_len % BS) {
		uint32_t upto = min_u32((b + 1) * BS, new_len);

		m->crc[b] = rdmafs_crc32c_extend(m->crc[b], zero_block, upto - old_len);
		b++;
	}
	for (; b * BS < new_len; b++)
		m->crc[b] = rdmafs_crc32c(zero_block, min_u32(BS, new_len - b * BS));
	m->length = new_len;
	m->block_count = div_up(new_len, BS);
}

static void info_from_meta(const struct chunk_meta *m, bool exists, struct store_chunk_info *info)
{
	if (!info)
		return;
	info->exists = exists;
	info->length = m->length;
	info->version = m->version;
	info->block_count = m->block_count;
}

/* Cuts off what an unacknowledged write left past the chunk's end. */
static int trim_leftover(int fd, uint32_t length)
{
	struct stat sb;

	if (fstat(fd, &sb))
		return -errno;
	if (sb.st_size > (off_t)length && ftruncate(fd, length))
		return -errno;
	return 0;
}

/*
 * Settles pending CRCs left by a write that did not finish: each pending
 * block is read back and keeps the CRC its content matches.
 */
static int resolve_pending(struct store_io *io, int fd, struct chunk_meta *m)
{
	uint32_t first = m->pending_first, count = m->pending_count;
	int ret;

	for (uint32_t b = first; b < first + count; b++) {
		uint32_t extent = min_u32(BS, m->length - b * BS), got, crc;

		ret = ring_rw(io, false, fd, io->aux, BS, (uint64_t)b * BS, &got);
		if (ret)
			return ret;
		if (got < BS)
			memset(io->aux + got, 0, BS - got);
		crc = rdmafs_crc32c(io->aux, extent);
		if (crc == m->crc[m->block_count + b - first])
			m->crc[b] = crc;
	}
	m->pending_count = 0;
	m->pending_first = 0;
	__atomic_add_fetch(&io->st->pending_reads, count, __ATOMIC_RELAXED);
	return 0;
}

/* @slot's record of a completed short overwrite (0: none, or no slot), cleared. */
static uint64_t slot_take_settled(struct fd_slot *slot)
{
	uint64_t settled = slot ? slot->settled : 0;

	if (slot)
		slot->settled = 0;
	return settled;
}

/*
 * Settles @m's pending CRCs before a change of the chunk, under its lock
 * held exclusively. @settled is what the chunk's cached file recorded
 * (fd_slot.settled, taken and cleared by the caller; 0: none). When the
 * short overwrite that left the CRCs completed through that file and
 * nothing changed the chunk since (the version is the one it left), its data
 * is in the file and the pending CRCs are the blocks' content: they are
 * taken without reading the blocks back, as a read-back from the page cache
 * would find them (a block whose writeback then failed and was evicted fails
 * its CRC: EIO, never bad data). Otherwise (a daemon restarted since, the
 * file closed, no cached file: an O_DIRECT write's own, or one the cache
 * could not keep) resolve_pending() reads them.
 */
static int settle_pending(struct store_io *io, int fd, uint64_t settled, struct chunk_meta *m)
{
	if (!settled || settled != m->version)
		return resolve_pending(io, fd, m);
	for (uint32_t i = 0; i < m->pending_count; i++)
		m->crc[m->pending_first + i] = m->crc[m->block_count + i];
	m->pending_count = 0;
	m->pending_first = 0;
	return 0;
}

/*
 * Frees the whole blocks of [@offset, @offset + @len) of a chunk file whose
 * @payload (those bytes) is zeros, just written: a hole reads back the same
 * zeros, so the stored CRCs stay right. A payload that is not zeros, or a
 * filesystem without holes, keeps its blocks (same data, more space).
 */
static void punch_zero_blocks(int fd, const uint8_t *payload, uint32_t offset, uint32_t len)
{
	uint32_t first = div_up(offset, BS) * BS, last = (offset + len) / BS * BS;

	if (first >= last || payload[0] != 0 || memcmp(payload, payload + 1, len - 1) != 0)
		return;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, first, last - first) &&
	    errno != EOPNOTSUPP)
		rdmafs_log(RDMAFS_LOG_WARN, "punching a hole in a chunk file: %s", strerror(errno));
}

int store_write(struct store_io *io, struct store_chunk_id id, uint32_t offset, uint32_t len,
		uint8_t *buf, bool sync, bool hole, struct store_chunk_info *info)
{
	struct store *st = io->st;
	struct chunk_meta *m = io->meta;
	pthread_rwlock_t *lock = chunk_lock(st, id);
	uint32_t end = offset + len, b0 = offset / BS, b1 = div_up(end, BS);
	uint32_t old_len, new_len, wstart = b0 * BS, wend, done, head_block = UINT32_MAX;
	bool exists, direct, fresh = true, settle_later = false;
	struct fd_slot *slot = NULL;
	bool touched = false; /* the chunk's file or metadata changed */
	uint64_t settled = 0;
	int fd, ret;

	if (len == 0 || end > st->max_chunk_size || end < offset)
		return -EINVAL;
	pthread_rwlock_wrlock(lock);
	ret = meta_load(st, id, m, &exists);
	if (ret)
		goto out_unlock;
	old_len = m->length;
	new_len = end > old_len ? end : old_len;
	wend = min_u32(b1 * BS, new_len);
	direct = direct_allowed(st) && (wend - wstart) % BS == 0 && wend - wstart >= DIRECT_MIN;
	if (direct)
		ret = chunk_open(st, id, true, true, &fd);
	else
		ret = chunk_get(st, id, true, &fd, &slot, &fresh);
	if (ret)
		goto out_unlock;
	/* A file kept open has no leftover: any failure below closes it. */
	if (fresh)
		ret = trim_leftover(fd, old_len);
	/*
	 * Only a short overwrite that completes records one again, below; a
	 * write that stops before it changed anything (-EAGAIN: a block to
	 * fetch) leaves it as it was.
	 */
	settled = slot_take_settled(slot);
	if (!ret && m->pending_count)
		ret = settle_pending(io, fd, settled, m);
	if (ret)
		goto out_close;

	/* Complete the partly covered first and last blocks from disk. */
	if (offset > wstart) {
		if (wstart < old_len) {
			ret = block_read_verified(io, fd, id, b0, m, io->aux);
			if (ret)
				goto out_close;
			memcpy(buf, io->aux, offset - wstart);
			head_block = b0;
		} else {
			memset(buf, 0, offset - wstart);
		}
	}
	if (end < wend) {
		/* Only old data can lie past the payload inside the last block. */
		uint32_t tb = b1 - 1;
		uint8_t *old = io->aux;

		if (tb != head_block) {
			old = io->aux + BS;
			ret = block_read_verified(io, fd, id, tb, m, old);
			if (ret)
				goto out_close;
		}
		memcpy(buf + (end - wstart), old + (end - tb * BS), wend - end);
	}

	touched = true;
	/*
	 * Blocks that hold data now may hold either content until the metadata
	 * says. A short write inside the chunk leaves it at that: its one commit
	 * is this one, and the next change of the chunk settles the CRCs (a read
	 * of at most DIRECT_MIN from the page cache) instead of a second commit.
	 */
	if (wstart < old_len) {
		uint32_t last = min_u32(b1, m->block_count);

		m->pending_first = b0;
		m->pending_count = last - b0;
		for (uint32_t b = b0; b < last; b++)
			m->crc[m->block_count + b - b0] =
				rdmafs_crc32c(buf + (b - b0) * BS, min_u32(BS, old_len - b * BS));
		settle_later = wend <= old_len && wend - wstart < DIRECT_MIN;
		if (settle_later)
			m->version++;
		ret = meta_put(st, id, m);
		if (ret)
			goto out_close;
	}

	if (direct)
		ret = ring_rw(io, true, fd, buf, wend - wstart, wstart, &done);
	else
		ret = cache_write(fd, buf, wend - wstart, wstart, &done);
	if (ret) {
		/* Cut back what reached the file past the old end, settle the rest. */
		int err = ret;

		if (ftruncate(fd, old_len))
			rdmafs_log(RDMAFS_LOG_WARN, "ftruncate after a failed write: %s",
				   strerror(errno));
		if (m->pending_count && resolve_pending(io, fd, m) == 0) {
			m->version++;
			meta_put(st, id, m);
		}
		if (err != -ENOSPC && err != -EDQUOT)
			rdmafs_log(RDMAFS_LOG_ERR, "chunk %016" PRIx64 "/%016" PRIx64 " write: %s",
				   id.inode, id.index, strerror(-err));
		ret = err == -EDQUOT ? -ENOSPC : err;
		goto out_close;
	}

	if (hole)
		punch_zero_blocks(fd, buf + (offset - wstart), offset, len);

	if (!settle_later) {
		/* CRCs: the old partial last block and any gap grow with zeros, then ours. */
		m->pending_count = 0;
		m->pending_first = 0;
		if (wstart > old_len)
			meta_grow_zeros(m, wstart);
		for (uint32_t b = b0; b < b1; b++)
			m->crc[b] =
				rdmafs_crc32c(buf + (b - b0) * BS, min_u32(BS, new_len - b * BS));
		m->length = new_len;
		m->block_count = div_up(new_len, BS);
		m->version++;
	}
	/* with O_SYNC: the data on disk before the metadata that describes it */
	if (sync)
		ret = ring_fsync(io, fd, true);
	if (!ret && !settle_later)
		ret = meta_put(st, id, m);
	if (!ret && sync)
		ret = index_sync(st);
	if (!ret && settle_later && slot)
		slot->settled = m->version;
	if (!ret)
		info_from_meta(m, true, info);
out_close:
	if (slot && !touched)
		slot->settled = settled;
	if (ret && direct)
		chunk_forget(st, id); /* the cached file may now have a leftover */
	chunk_put(st, fd, slot, ret != 0 && ret != -EAGAIN);
out_unlock:
	pthread_rwlock_unlock(lock);
	return ret;
}

int store_read(struct store_io *io, struct store_chunk_id id, uint32_t offset, uint32_t len,
	       uint8_t *buf, uint32_t *bytes, uint32_t *chunk_length)
{
	struct store *st = io->st;
	struct chunk_meta *m = io->meta;
	pthread_rwlock_t *lock = chunk_lock(st, id);
	uint32_t n, b0, b1, got;
	struct fd_slot *slot;
	bool exists, fresh;
	int fd, ret;

	*bytes = 0;
	*chunk_length = 0;
	pthread_rwlock_rdlock(lock);
	ret = meta_load(st, id, m, &exists);
	if (ret || !exists)
		goto out_unlock;
	*chunk_length = m->length;
	if (offset >= m->length || len == 0)
		goto out_unlock;
	n = min_u32(len, m->length - offset);
	b0 = offset / BS;
	b1 = div_up(offset + n, BS);
	/* through the page cache: a block read again comes from memory (see the top) */
	ret = chunk_get(st, id, false, &fd, &slot, &fresh);
	if (ret == -ENOENT) {
		/* Metadata without a file: read as zeros, so the CRCs decide. */
		got = 0;
	} else if (ret) {
		goto out_unlock;
	} else {
		ret = ring_rw(io, false, fd, buf, (b1 - b0) * BS, (uint64_t)b0 * BS, &got);
		/* -EAGAIN: not in the page cache, with store_io_nowait(); the file is fine */
		chunk_put(st, fd, slot, ret != 0 && ret != -EAGAIN);
		if (ret && ret != -EAGAIN)
			rdmafs_log(RDMAFS_LOG_ERR, "chunk %016" PRIx64 "/%016" PRIx64 " read: %s",
				   id.inode, id.index, strerror(-ret));
		if (ret)
			goto out_unlock;
	}
	if (got < (b1 - b0) * BS)
		memset(buf + got, 0, (b1 - b0) * BS - got);
	for (uint32_t b = b0; b < b1; b++) {
		uint32_t extent = min_u32(BS, m->length - b * BS);

		if (!block_ok(m, b, rdmafs_crc32c(buf + (b - b0) * BS, extent))) {
			rdmafs_log(RDMAFS_LOG_ERR,
				   "chunk %016" PRIx64 "/%016" PRIx64 " block %u: stored data"
				   " fails its checksum",
				   id.inode, id.index, b);
			ret = -EBADMSG;
			goto out_unlock;
		}
	}
	*bytes = n;
out_unlock:
	pthread_rwlock_unlock(lock);
	return ret;
}

int store_verify(struct store_io *io, struct store_chunk_id id, uint8_t *buf, uint32_t *length,
		 uint32_t *bad_block)
{
	struct store *st = io->st;
	struct chunk_meta *m = io->meta;
	pthread_rwlock_t *lock = chunk_lock(st, id);
	uint32_t blocks, got = 0;
	bool exists;
	int fd, ret;

	*length = 0;
	*bad_block = 0;
	pthread_rwlock_rdlock(lock);
	ret = meta_load(st, id, m, &exists);
	if (ret || !exists)
		goto out_unlock;
	*length = m->length;
	blocks = m->block_count;
	ret = chunk_open(st, id, false, direct_allowed(st), &fd);
	if (ret == -ENOENT) {
		/* Metadata without a file reads as zeros: the CRCs decide. */
		ret = 0;
	} else if (ret) {
		goto out_unlock;
	} else {
		ret = ring_rw(io, false, fd, buf, blocks * BS, 0, &got);
		close(fd);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR,
				   "chunk %016" PRIx64 "/%016" PRIx64 " scrub read: %s", id.inode,
				   id.index, strerror(-ret));
			ret = -EIO;
			goto out_unlock;
		}
	}
	if (got < blocks * BS)
		memset(buf + got, 0, blocks * BS - got);
	for (uint32_t b = 0; b < blocks; b++) {
		if (!block_ok(
			    m, b,
			    rdmafs_crc32c(buf + (size_t)b * BS, min_u32(BS, m->length - b * BS)))) {
			rdmafs_log(RDMAFS_LOG_ERR,
				   "chunk %016" PRIx64 "/%016" PRIx64 " block %u: stored data"
				   " fails its checksum (scrub)",
				   id.inode, id.index, b);
			*bad_block = b;
			ret = -EBADMSG;
			break;
		}
	}
out_unlock:
	pthread_rwlock_unlock(lock);
	return ret;
}

int store_truncate(struct store_io *io, struct store_chunk_id id, uint32_t length,
		   struct store_chunk_info *info)
{
	struct store *st = io->st;
	struct chunk_meta *m = io->meta;
	pthread_rwlock_t *lock = chunk_lock(st, id);
	uint32_t old_len, lb;
	struct fd_slot *slot;
	uint64_t settled;
	bool exists, fresh;
	int fd, ret;

	if (length > st->max_chunk_size)
		return -EINVAL;
	pthread_rwlock_wrlock(lock);
	ret = meta_load(st, id, m, &exists);
	if (ret)
		goto out_unlock;
	old_len = m->length;
	ret = chunk_get(st, id, true, &fd, &slot, &fresh);
	if (ret)
		goto out_unlock;
	settled = slot_take_settled(slot);
	if (m->pending_count) {
		ret = settle_pending(io, fd, settled, m);
		if (ret)
			goto out_close;
	}
	if (length < old_len) {
		lb = length / BS;
		if (length % BS) {
			ret = block_read_verified(io, fd, id, lb, m, io->aux);
			if (ret)
				goto out_close;
			m->crc[lb] = rdmafs_crc32c(io->aux, length % BS);
		}
		m->length = length;
		m->block_count = div_up(length, BS);
		m->version++;
		/* Metadata first: a file longer than its metadata is harmless. */
		ret = meta_put(st, id, m);
		if (!ret && ftruncate(fd, length))
			ret = -errno;
	} else {
		ret = trim_leftover(fd, old_len);
		if (!ret && ftruncate(fd, length))
			ret = -errno;
		if (ret)
			goto out_close;
		meta_grow_zeros(m, length);
		m->version++;
		ret = meta_put(st, id, m);
	}
	if (!ret)
		info_from_meta(m, true, info);
out_close:
	chunk_put(st, fd, slot, ret != 0);
out_unlock:
	pthread_rwlock_unlock(lock);
	return ret == -EDQUOT ? -ENOSPC : ret;
}

int store_stat(struct store *st, struct store_chunk_id id, struct store_chunk_info *info)
{
	struct chunk_meta *m = malloc(meta_size(2 * st->max_blocks));
	pthread_rwlock_t *lock = chunk_lock(st, id);
	bool exists;
	int ret;

	if (!m)
		return -ENOMEM;
	pthread_rwlock_rdlock(lock);
	ret = meta_load(st, id, m, &exists);
	pthread_rwlock_unlock(lock);
	if (!ret)
		info_from_meta(m, exists, info);
	free(m);
	return ret;
}

/*
 * The next chunk of @sel at or after position *@pos (an index into
 * sel->indexes, or a chunk index for a range: a walk of the index, whose
 * caller checkpointed the journal first). Returns 1 with *@id set, 0 at the
 * end, or an errno.
 */
static int selection_next(struct store *st, const struct store_selection *sel, uint64_t *pos,
			  struct store_chunk_id *id)
{
	uint8_t key[16];
	MDB_val k = {sizeof(key), key}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	int rc;

	if (!sel->range) {
		if (*pos >= sel->count)
			return 0;
		id->inode = sel->inode;
		id->index = sel->indexes[(*pos)++];
		return 1;
	}
	if (*pos == UINT64_MAX)
		return 0;
	id->inode = sel->inode;
	id->index = *pos;
	key_encode(*id, key);
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_open(txn, st->dbi, &cur);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_errno(rc);
	}
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0 && k.mv_size == 16)
		*id = key_decode(k.mv_data);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (rc == MDB_NOTFOUND || (rc == 0 && id->inode != sel->inode))
		return 0;
	if (rc)
		return lmdb_errno(rc);
	*pos = id->index == UINT64_MAX ? UINT64_MAX : id->index + 1;
	return 1;
}

/* Closes what commit_batch() closes: every file of @fds but the index, @fds[@chunks .. @datasync).
 */
static void close_batch(const int *fds, unsigned chunks, unsigned datasync, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (i < chunks || i >= datasync)
			close(fds[i]);
}

/*
 * Flushes @n files in one submission: @fds[0 .. @chunks) are chunk files
 * (@ids), then up to @datasync fdatasyncs in all (the index's journal,
 * which stays open), then fsyncs (directories), which are closed with the
 * chunk files.
 */
static int commit_batch(struct store_io *io, int *fds, const struct store_chunk_id *ids,
			unsigned chunks, unsigned datasync, unsigned n)
{
	unsigned failed = 0;
	int ret = ring_fsync_all(io, fds, n, datasync, &failed);

	if (ret && failed < chunks)
		rdmafs_log(RDMAFS_LOG_ERR, "chunk %016" PRIx64 "/%016" PRIx64 " fdatasync: %s",
			   ids[failed].inode, ids[failed].index, strerror(-ret));
	else if (ret && failed < datasync)
		rdmafs_log(RDMAFS_LOG_ERR, "chunk index journal fdatasync: %s", strerror(-ret));
	else if (ret)
		rdmafs_log(RDMAFS_LOG_ERR, "chunk directory fsync: %s", strerror(-ret));
	close_batch(fds, chunks, datasync, n);
	return ret;
}

/* Opens directory @name under @parent_fd for its fsync; -ENOENT if it is not there. */
static int dir_open(int parent_fd, const char *name, int *fd)
{
	*fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return *fd < 0 ? -errno : 0;
}

/*
 * fdatasyncs the selected chunk files, and fsyncs the inode's directory and
 * the chunks directory (new chunk files and inode directories must survive
 * too), RING_ENTRIES at a time in one submission each; the last one also
 * fdatasyncs the index's journal, whose records (every change since the
 * index's last flush) a power loss then replays: the chunks' CRCs with
 * their data, in one round of flushes. The COMMIT answers once every one
 * of them succeeded.
 */
int store_commit(struct store_io *io, const struct store_selection *sel)
{
	struct store *st = io->st;
	struct store_chunk_id ids[RING_ENTRIES];
	int fds[RING_ENTRIES];
	uint64_t pos = sel->range ? sel->first_index : 0;
	unsigned n = 0, chunks, datasync;
	char path[64];
	int fd, ret;

	/* a range walks the index: every chunk written must be in it */
	ret = sel->range ? index_checkpoint(st) : 0;
	if (ret)
		return ret;
	while ((ret = selection_next(st, sel, &pos, &ids[n])) == 1) {
		chunk_path(ids[n], path, sizeof(path));
		fd = openat(st->chunks_fd, path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue; /* never written: nothing to make durable */
		if (fd < 0) {
			ret = -errno;
			break;
		}
		fds[n++] = fd;
		/* room for the index and the two directories of the last batch */
		if (n == RING_ENTRIES - 3) {
			ret = commit_batch(io, fds, ids, n, n, n);
			n = 0;
			if (ret)
				return ret;
		}
	}
	chunks = n;
	if (!ret)
		fds[n++] = journal_fd(st->journal); /* stays open: commit_batch() closes the rest */
	datasync = n;
	if (!ret) {
		inode_path(sel->inode, path, sizeof(path));
		ret = dir_open(st->chunks_fd, path, &fds[n]);
		if (!ret)
			n++;
		else if (ret == -ENOENT)
			ret = 0; /* no chunk of the inode was ever written here */
	}
	if (!ret) {
		ret = dir_open(st->chunks_fd, ".", &fds[n]);
		if (!ret)
			n++;
	}
	if (ret)
		close_batch(fds, chunks, datasync, n);
	else
		ret = commit_batch(io, fds, ids, chunks, datasync, n);
	return ret;
}

int store_flush(struct store *st)
{
	int ret = syncfs(st->chunks_fd) ? -errno : 0;

	if (!ret)
		ret = index_sync(st);
	if (ret)
		rdmafs_log(RDMAFS_LOG_ERR,
			   "data flush: %s: what was committed at a close since the last flush may "
			   "not be on disk",
			   strerror(-ret));
	return ret;
}

/*
 * Bytes the local file system allocated to the chunk files of @inode (their
 * st_blocks), so holes inside a chunk count for nothing, as they do on the
 * disk. One fstatat() per chunk: called at commit (fsync, close), not per
 * write, and never on stat (the metadata service keeps the client's report).
 */
int store_allocated(struct store *st, uint64_t inode, uint64_t *bytes)
{
	struct store_chunk_id id = {.inode = inode, .index = 0};
	uint8_t key[16];
	MDB_val k = {sizeof(key), key}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	char path[64];
	struct stat sb;
	int rc, ret = 0;

	*bytes = 0;
	key_encode(id, key);
	ret = index_checkpoint(st);
	if (ret)
		return ret;
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_open(txn, st->dbi, &cur);
	if (rc)
		goto out_abort;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16)
			continue;
		id = key_decode(k.mv_data);
		if (id.inode != inode)
			break;
		chunk_path(id, path, sizeof(path));
		if (fstatat(st->chunks_fd, path, &sb, 0)) {
			if (errno == ENOENT)
				continue; /* removed meanwhile */
			ret = -errno;
			break;
		}
		*bytes += (uint64_t)sb.st_blocks * 512;
	}
	mdb_cursor_close(cur);
out_abort:
	mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND && !ret)
		ret = lmdb_errno(rc);
	return ret;
}

int store_remove(struct store_io *io, const struct store_selection *sel, uint64_t *removed,
		 uint64_t *bytes_freed)
{
	struct store *st = io->st;
	struct chunk_meta *m = io->meta;
	struct store_chunk_id id;
	uint64_t pos = sel->range ? sel->first_index : 0;
	pthread_rwlock_t *lock;
	char path[64];
	bool exists;
	int ret;

	*removed = 0;
	*bytes_freed = 0;
	/* a range walks the index: every chunk written must be in it */
	ret = sel->range ? index_checkpoint(st) : 0;
	if (ret)
		return ret;
	while ((ret = selection_next(st, sel, &pos, &id)) == 1) {
		lock = chunk_lock(st, id);
		pthread_rwlock_wrlock(lock);
		ret = meta_load(st, id, m, &exists);
		if (ret == -EIO)
			ret = 0; /* damaged metadata: removing it is the cure */
		if (!ret)
			ret = meta_delete(st, id);
		chunk_path(id, path, sizeof(path));
		chunk_forget(st, id);
		if (!ret && unlinkat(st->chunks_fd, path, 0) && errno != ENOENT)
			ret = -errno;
		pthread_rwlock_unlock(lock);
		if (ret)
			return ret;
		if (exists) {
			(*removed)++;
			*bytes_freed += m->length;
		}
	}
	if (ret < 0)
		return ret;
	if (sel->range && sel->first_index == 0) {
		inode_path(sel->inode, path, sizeof(path));
		unlinkat(st->chunks_fd, path, AT_REMOVEDIR); /* fails while chunks remain */
	}
	return 0;
}

/*
 * A read-only transaction and a cursor on the chunk index, the journal's
 * changes checkpointed into it first. 0 or -errno.
 */
static int index_cursor(struct store *st, MDB_txn **txn, MDB_cursor **cur)
{
	int rc = index_checkpoint(st);

	if (rc)
		return rc;
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_open(*txn, st->dbi, cur);
	if (rc) {
		mdb_txn_abort(*txn);
		return lmdb_errno(rc);
	}
	return 0;
}

int store_list(struct store *st, const struct store_chunk_id *after, struct store_list_entry *out,
	       size_t max, size_t *count, bool *done)
{
	uint8_t key[16];
	MDB_val k = {sizeof(key), key}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_cursor_op op = MDB_FIRST;
	int rc;

	*count = 0;
	*done = false;
	rc = index_cursor(st, &txn, &cur);
	if (rc)
		return rc;
	if (after) {
		key_encode(*after, key);
		op = MDB_SET_RANGE;
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		struct chunk_meta cm;
		struct store_chunk_id id;

		op = MDB_NEXT;
		if (k.mv_size != 16 || v.mv_size < sizeof(cm))
			continue;
		/* LMDB values are not aligned: read the header through a copy. */
		memcpy(&cm, v.mv_data, sizeof(cm));
		id = key_decode(k.mv_data);
		if (after && id.inode == after->inode && id.index == after->index)
			continue;
		if (*count == max)
			break;
		out[*count].id = id;
		out[*count].length = cm.length;
		out[*count].version = cm.version;
		(*count)++;
	}
	if (rc == MDB_NOTFOUND) {
		*done = true;
		rc = 0;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return lmdb_errno(rc);
}

int store_bytes(struct store *st, uint64_t *out)
{
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_val k, v;
	uint64_t sum = 0;
	int rc = index_cursor(st, &txn, &cur);

	if (rc)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct chunk_meta cm;

		if (k.mv_size != 16 || v.mv_size < sizeof(cm))
			continue;
		memcpy(&cm, v.mv_data, sizeof(cm));
		sum += cm.length;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (rc != MDB_NOTFOUND)
		return lmdb_errno(rc);
	*out = sum;
	return 0;
}

uint64_t store_pending_reads(const struct store *st)
{
	return __atomic_load_n(&st->pending_reads, __ATOMIC_RELAXED);
}

uint64_t store_chunk_count(struct store *st)
{
	MDB_stat ms;
	MDB_txn *txn;
	uint64_t n = 0;

	if (index_checkpoint(st) || mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
		return 0;
	if (mdb_stat(txn, st->dbi, &ms) == 0)
		n = ms.ms_entries;
	mdb_txn_abort(txn);
	return n;
}
