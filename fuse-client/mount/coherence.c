// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs-fuse: sizes, layouts and commits of the nodes against the metadata service (mount_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmafs_common.h"
#include "mount_i.h"

/*
 * Takes a layout from the service or from a data call that refetched it (a
 * drain moved the file: rdmafs_fs.h). n->lock is held. dirty_mask bits are
 * indexes into the layout's daemons, so after a change of generation they
 * mean other daemons: every daemon of the new layout is then dirty.
 */
void node_keep_layout_locked(struct node *n, const struct rfs_layout *l)
{
	if (n->has_layout && l->generation < n->layout.generation)
		return; /* an older reply than what a data call found */
	if (n->has_layout && l->generation != n->layout.generation && n->dirty_mask)
		n->dirty_mask = ~0ull;
	n->layout = *l;
	n->has_layout = true;
}

/*
 * Records that daemons @written of @l (the layout a data call ended with)
 * hold uncommitted writes. n->lock is held.
 */
void node_note_written_locked(struct node *n, const struct rfs_layout *l, uint64_t written)
{
	node_keep_layout_locked(n, l);
	/* another call moved the node to a newer layout: our bits meant the old one */
	if (written && l->generation != n->layout.generation)
		written = ~0ull;
	n->dirty_mask |= written;
}

/*
 * Like node_update(), for a reply to a call made when n->size_seq was @seq:
 * if we changed the size since (an UPDATE_SIZE finished meanwhile), the
 * service may have answered before it saw our change, so a smaller size in
 * the reply is stale and must not shrink ours.
 */
void node_update_seq(struct node *n, const struct rfs_entry *e, struct stat *st, bool *changed,
		     uint64_t seq)
{
	uint64_t size = (uint64_t)e->attr.st_size;
	bool stale;

	*st = e->attr;
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	if (e->has_layout)
		node_keep_layout_locked(n, &e->layout);
	if (changed)
		*changed = n->seen &&
			   (n->seen_size != size || n->seen_mtime_sec != e->attr.st_mtim.tv_sec ||
			    n->seen_mtime_nsec != (uint32_t)e->attr.st_mtim.tv_nsec);
	n->seen = true;
	n->seen_size = size;
	n->seen_mtime_sec = e->attr.st_mtim.tv_sec;
	n->seen_mtime_nsec = (uint32_t)e->attr.st_mtim.tv_nsec;
	stale = seq != SIZE_SEQ_FRESH && seq != n->size_seq && size < n->size;
	if ((!n->size_dirty && !stale) || size > n->size)
		n->size = size;
	if ((n->size_dirty || stale) && S_ISREG(e->attr.st_mode))
		st->st_size = (off_t)n->size;
	pthread_mutex_unlock(&n->lock);
}

void node_update(struct node *n, const struct rfs_entry *e, struct stat *st, bool *changed)
{
	node_update_seq(n, e, st, changed, SIZE_SEQ_FRESH);
}

/* The size sequence of @n now, for node_update_seq() after a call. */
uint64_t node_size_seq(struct node *n)
{
	uint64_t seq;

	if (!n)
		return SIZE_SEQ_FRESH;
	pthread_mutex_lock(&n->lock);
	seq = n->size_seq;
	pthread_mutex_unlock(&n->lock);
	return seq;
}

/* The layout of a regular file, fetched with an OPEN/RELEASE pair if we never saw it. */
int node_layout(struct fs *fs, struct node *n, const struct rfs_cred *c, struct rfs_layout *out)
{
	struct rfs_entry e;
	uint64_t handle;
	struct stat st;
	int ret;

	pthread_mutex_lock(&n->lock);
	if (n->has_layout) {
		*out = n->layout;
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	pthread_mutex_unlock(&n->lock);
	ret = rfs_open(fs->rfs, c, n->ino, O_WRONLY, &handle, &e);
	if (ret)
		return ret;
	node_update(n, &e, &st, NULL);
	rfs_release(fs->rfs, c, n->ino, handle, NULL);
	pthread_mutex_lock(&n->lock);
	ret = n->has_layout ? 0 : -EIO;
	if (!ret)
		*out = n->layout;
	pthread_mutex_unlock(&n->lock);
	return ret;
}

/*
 * Whether @report answers for every daemon that a commit of @mask asked: all
 * of the layout's when the commit found it newer than @generation (a drain
 * moved the file, and the commit then asks every daemon). Only then does the
 * service have all of the file's allocations.
 */
static bool report_complete(const struct rfs_alloc_report *report, const struct rfs_layout *l,
			    uint64_t generation, uint64_t mask)
{
	uint64_t all = l->stripe_width >= 64 ? UINT64_MAX : (1ull << l->stripe_width) - 1;

	if (l->generation != generation)
		mask = UINT64_MAX;
	return (report->known & all) == (mask & all);
}

/* The service has the allocations of every chunk change up to @alloc_seq. */
static void node_alloc_told(struct node *n, uint64_t alloc_seq)
{
	pthread_mutex_lock(&n->lock);
	if (alloc_seq > n->alloc_told)
		n->alloc_told = alloc_seq;
	pthread_mutex_unlock(&n->lock);
}

/*
 * GETATTR of a file whose chunks changed since the last commit (writes,
 * truncate, punch): the daemons concerned report what they now hold, without
 * syncing anything (the commit stays due for fsync and close), and
 * UPDATE_SIZE stores it and answers the attributes, so st_blocks follows at
 * once, as on a local filesystem. -EAGAIN when there is nothing to report.
 */
int node_report(struct fs *fs, struct node *n, const struct rfs_cred *c, struct stat *st)
{
	struct rfs_alloc_report report;
	uint64_t mask, seq, alloc_seq, generation, size;
	struct rfs_layout layout;
	struct rfs_entry e;
	int ret;

	pthread_mutex_lock(&n->lock);
	/* a stat after a stat asks the daemons again only if chunks changed since */
	mask = n->has_layout && n->alloc_seq != n->alloc_told ? n->dirty_mask : 0;
	alloc_seq = n->alloc_seq;
	layout = n->layout;
	seq = n->size_seq;
	size = n->size_dirty ? n->size : 0;
	pthread_mutex_unlock(&n->lock);
	if (!mask)
		return -EAGAIN;
	generation = layout.generation;
	ret = rfs_commit_alloc(fs->rfs, n->ino, &layout, mask, 0, false, &report);
	pthread_mutex_lock(&n->lock);
	node_keep_layout_locked(n, &layout);
	pthread_mutex_unlock(&n->lock);
	if (ret)
		return ret;
	ret = rfs_update_size(fs->rfs, c, n->ino, size, NULL, &report, &layout, &e);
	if (ret)
		return ret;
	e.has_layout = false; /* as with GETATTR */
	node_update_seq(n, &e, st, NULL, seq);
	if (report_complete(&report, &layout, generation, mask))
		node_alloc_told(n, alloc_seq);
	return 0;
}

/*
 * Makes our writes to @n durable and its size known: with @commit (flush,
 * fsync, release) CHUNK_COMMIT on the daemons that got writes and UPDATE_SIZE
 * with the new mtime; without it only the size. What fails stays dirty for
 * the next attempt. The commit's replies also tell the service what the
 * daemons hold (st_blocks).
 */
int node_sync(struct fs *fs, struct node *n, const struct rfs_cred *c, bool commit)
{
	struct rfs_alloc_report report = {.known = 0};
	struct rfs_layout layout;
	uint64_t mask = 0, first = UINT64_MAX, size, alloc_seq, generation = 0;
	bool size_dirty, mtime_dirty;
	struct timespec now;
	struct rfs_entry e;
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&n->lock);
	alloc_seq = n->alloc_seq;
	if (commit && n->dirty_mask && n->has_layout) {
		mask = n->dirty_mask;
		first = n->dirty_first;
		layout = n->layout;
		generation = layout.generation;
		n->dirty_mask = 0;
		n->dirty_first = UINT64_MAX;
	}
	size = n->size;
	size_dirty = n->size_dirty;
	/*
	 * The mtime our writes earned goes with flush, fsync and release only.
	 * The batched size update of a growing file runs after the write was
	 * answered, so it could land after the caller's own utimensat and undo it.
	 */
	mtime_dirty = commit && n->mtime_dirty;
	if (commit)
		n->mtime_dirty = false;
	pthread_mutex_unlock(&n->lock);

	if (mask) {
		ret = rfs_commit_alloc(fs->rfs, n->ino, &layout, mask, first, true, &report);
		pthread_mutex_lock(&n->lock);
		node_keep_layout_locked(n, &layout);
		pthread_mutex_unlock(&n->lock);
		if (ret)
			goto err_redirty;
	}
	if (!size_dirty && !mtime_dirty && !report.known)
		return 0;
	if (mtime_dirty)
		clock_gettime(CLOCK_REALTIME, &now);
	/* the report indexes the layout the commit ended with (set whenever it is known) */
	ret = rfs_update_size(fs->rfs, c, n->ino, size, mtime_dirty ? &now : NULL,
			      report.known ? &report : NULL, report.known ? &layout : NULL, &e);
	if (ret)
		goto err_redirty;
	pthread_mutex_lock(&n->lock);
	if (n->size == size)
		n->size_dirty = false;
	n->size_seq++;
	n->size_sent_ms = rdmafs_now_ms();
	pthread_mutex_unlock(&n->lock);
	e.has_layout = false; /* as with GETATTR */
	node_update(n, &e, &st, NULL);
	if (mask && report_complete(&report, &layout, generation, mask))
		node_alloc_told(n, alloc_seq);
	return 0;

err_redirty:
	pthread_mutex_lock(&n->lock);
	if (mask) /* layout is set only with a mask */
		node_note_written_locked(n, &layout, mask);
	if (first < n->dirty_first)
		n->dirty_first = first;
	n->mtime_dirty |= mtime_dirty;
	pthread_mutex_unlock(&n->lock);
	return ret;
}

/*
 * After a truncate, punch or range shift, which change chunks on daemons we
 * may not have written to: every daemon of @n's layout is due a commit from
 * chunk @first on (at fsync or close) and reports what it holds now, so
 * st_blocks follows at once. The attributes go to @st (may be NULL).
 */
int node_chunks_changed(struct fs *fs, struct node *n, const struct rfs_cred *c, uint64_t first,
			struct stat *st)
{
	struct stat ignored;
	int ret;

	pthread_mutex_lock(&n->lock);
	if (n->has_layout) {
		n->dirty_mask |= n->layout.stripe_width >= 64
					 ? UINT64_MAX
					 : (1ull << n->layout.stripe_width) - 1;
		if (first < n->dirty_first)
			n->dirty_first = first;
		n->alloc_seq++;
	}
	pthread_mutex_unlock(&n->lock);
	ret = node_report(fs, n, c, st ? st : &ignored);
	return ret == -EAGAIN ? 0 : ret;
}

/* The layout and size of an open regular file; -EIO if the service gave none. */
int node_io_state(struct node *n, struct rfs_layout *layout, uint64_t *size)
{
	int ret = 0;

	pthread_mutex_lock(&n->lock);
	if (n->has_layout && n->layout.chunk_size) {
		*layout = n->layout;
		*size = n->size;
	} else {
		ret = -EIO;
	}
	pthread_mutex_unlock(&n->lock);
	return ret;
}

/* Grows what we know of @n's size to @end and tells the service. */
int node_extend(struct fs *fs, struct node *n, const struct rfs_cred *c, uint64_t end)
{
	pthread_mutex_lock(&n->lock);
	if (end > n->size) {
		n->size = end;
		n->size_dirty = true;
		n->size_seq++;
	}
	pthread_mutex_unlock(&n->lock);
	return node_sync(fs, n, c, false);
}

/* Sets @n's size to @size at the service (a shrink), through the open handle @h. */
int node_shrink(struct fs *fs, struct node *n, const struct rfs_cred *c, const struct handle *h,
		uint64_t size)
{
	struct rfs_setattr set = {.valid = RFS_SET_SIZE, .size = size, .handle = h->server};
	struct rfs_entry e;
	struct stat st;
	int ret;

	ret = rfs_setattr(fs->rfs, c, n->ino, &set, &e);
	if (ret)
		return ret;
	pthread_mutex_lock(&n->lock);
	n->size = size;
	n->size_dirty = false;
	n->size_seq++;
	pthread_mutex_unlock(&n->lock);
	e.has_layout = false; /* as with GETATTR */
	node_update(n, &e, &st, NULL);
	return 0;
}
