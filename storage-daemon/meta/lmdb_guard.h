/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An LMDB environment that commits without a flush and still survives a
 * power loss whole.
 *
 * With MDB_NOSYNC a commit writes its pages and then its meta page into the
 * page cache and flushes nothing. After a power loss the disk may hold a
 * meta page whose pages never arrived, or pages of the last flushed snapshot
 * that a later commit reused: LMDB 0.9 opens either and finds a corrupt
 * tree. (MDB_NOMETASYNC avoids that at the cost of a flush per commit,
 * which is what this guard saves.)
 *
 * The guard keeps the last flushed snapshot whole and knows where it is:
 *  - a read transaction stays open on it, so LMDB never reuses its pages;
 *  - lmdb_guard_flush() copies the newest snapshot's two meta pages (under
 *    the writer's lock, so no commit moves them), flushes the data file,
 *    then writes the copies into a side file (two slots, each with a
 *    sequence number, the boot id and a crc32c; the older slot is
 *    overwritten) and flushes that; only then does the pin move on;
 *  - lmdb_guard_open() first looks at the side file: when its newest slot
 *    was neither written by a clean close nor on this boot (a kill -9 keeps
 *    the page cache, so only a new boot can have lost writes), it writes
 *    those meta pages back into the data file before LMDB opens it, and
 *    LMDB opens the flushed snapshot, every page of which is on disk.
 * So a power loss loses the commits after the last flush, never the
 * store's consistency. The side file is LMDB 0.9's on-disk format (data
 * version 1) seen from outside: lmdb_guard_flush() checks the meta page it
 * copies names the snapshot it pinned, and fails rather than keep a copy it
 * does not understand.
 *
 * Thread safety: lmdb_guard_flush() (or its two halves) may run in any
 * thread at any time the thread holds no write transaction of the
 * environment, beside any number of readers, writers and other flushes.
 */
#ifndef RDMAFS_LMDB_GUARD_H
#define RDMAFS_LMDB_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include <lmdb.h>

#define LMDB_GUARD_BOOT_ID_LEN 37 /* a UUID's 36 characters and the NUL */

struct lmdb_guard;

/* What lmdb_guard_open() found. */
struct lmdb_guard_report {
	bool restored;	/* the last flushed snapshot was put back (a power loss) */
	uint64_t txnid; /* then: the transaction LMDB opened at */
};

/*
 * The id of the running boot (/proc/sys/kernel/random/boot_id) into @out.
 * Returns 0 or -errno.
 */
int lmdb_guard_boot_id(char out[LMDB_GUARD_BOOT_ID_LEN]);

/*
 * Opens @env (created and sized by the caller, not yet open) at @path with
 * @flags (MDB_NOSUBDIR or not, as mdb_env_open()), guarded by the side file
 * @side_path, on the boot @boot_id (lmdb_guard_boot_id(); tests pass their
 * own). With @guard the environment is opened MDB_NOSYNC, the current
 * snapshot is pinned and flushed, and *@out is the guard. Without it (a
 * caller that flushes every commit) a snapshot is still restored when the
 * side file asks for it, the side file is then removed, and *@out is NULL.
 * *@report says whether a snapshot was restored. The caller closes @env
 * (mdb_env_close()) after a failure, whether it opened or not. Returns 0,
 * -EIO when the restored store does not open at the flushed snapshot,
 * -EPROTO when the data file is not the LMDB format the guard knows, or
 * -errno.
 */
int lmdb_guard_open(MDB_env *env, const char *path, unsigned flags, const char *side_path,
		    const char *boot_id, bool guard, struct lmdb_guard **out,
		    struct lmdb_guard_report *report);

/*
 * Makes every transaction committed before the call durable, and the
 * newest of them the snapshot a power loss returns to. A call with nothing
 * new to flush does nothing. Returns 0 or -errno (the guard is unchanged:
 * the snapshot flushed before stays the one restored).
 */
int lmdb_guard_flush(struct lmdb_guard *g);

/*
 * Transactions a writer may commit past the last flushed snapshot before it
 * has a flush made (lmdb_guard_unflushed()): LMDB reuses no page freed since
 * the pinned snapshot, so without flushes a store that is rewritten over and
 * over would grow to its map size and fail with ENOSPC. The chunk index
 * flushes itself then; the metadata service kicks its flusher, and flushes
 * itself only past four times this (meta_store_bound_growth()).
 */
#define LMDB_GUARD_LAG 512

/*
 * How many transactions were committed after the last flushed snapshot: 0,
 * nothing to flush.
 */
uint64_t lmdb_guard_unflushed(struct lmdb_guard *g);

/*
 * True once more than LMDB_GUARD_LAG transactions were committed after the
 * last flushed snapshot: a writer holding no transaction should flush now.
 */
bool lmdb_guard_lagging(struct lmdb_guard *g);

/*
 * Ends the guard of an environment no transaction uses any more: a last
 * flush marked clean, so the next open restores nothing. The caller closes
 * the environment after it. NULL is a no-op. Returns what the flush did.
 */
int lmdb_guard_close(struct lmdb_guard *g);

#endif
