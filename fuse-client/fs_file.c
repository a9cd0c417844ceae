// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A file as one client sees it (rdmafs_fs.h, struct rfs_file): the layout its
 * data calls use, the size including this client's writes, which daemons
 * hold writes not yet committed, and what the metadata service was last
 * told. This is where the client's size reconciliation lives: a growing file
 * tells the service its size at most once a second and at every sync; a
 * reply that may predate our own size update cannot shrink the size; an
 * explicit mtime wins over the one our writes would stamp; st_blocks follows
 * what the daemons report at each commit.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

/* A growing file tells the service its size at most this often. */
#define SIZE_UPDATE_GAP_MS 1000u

struct rfs_file {
	struct rfs *fs;
	uint64_t ino;
	/*
	 * Held across each call that sets the service's size (UPDATE_SIZE,
	 * SETATTR of the size), so that they reach it in the order they were
	 * made: a write's batched update, sent after the write was answered,
	 * cannot land after the truncate that followed it and undo it.
	 */
	pthread_mutex_t size_lock;
	pthread_mutex_t lock; /* guards everything below */
	bool has_layout;
	struct rfs_layout layout;
	uint64_t size;	      /* the size as we know it, our writes included */
	bool size_dirty;      /* size is larger than what the service has from us */
	bool mtime_dirty;     /* written since the last UPDATE_SIZE */
	uint64_t size_seq;    /* bumped whenever we change the size the service will have */
	uint64_t dirty_mask;  /* layout daemons holding uncommitted writes */
	uint64_t dirty_first; /* lowest chunk index written since the last commit */
	/*
	 * Layout daemons that deferred a close's commit (their data_sync =
	 * batch): due a durable commit at the next fsync, which makes them
	 * flush whatever they deferred, whatever chunks it names. A new file
	 * object starts with every daemon so (rfs_file_sync() in rdmafs_fs.h).
	 */
	uint64_t lazy_mask;
	uint64_t alloc_seq;  /* bumped whenever our calls change chunks */
	uint64_t alloc_told; /* the alloc_seq the service has allocations for */
	/*
	 * The allocations the service last stored from this client, by daemon
	 * index of the layout at told_generation (told.known: which ones);
	 * told_whole: one of those reports covered the whole layout (which
	 * marks an older file's allocations known at the service). A close
	 * with no chunk change of ours since (alloc_told), whose commit finds
	 * the same ones, tells the service nothing.
	 */
	struct rfs_alloc_report told;
	uint64_t told_generation;
	bool told_whole;
	/*
	 * The last UPDATE_SIZE, or the write since which the size has grown
	 * unannounced if that came later: the batched update is due a second
	 * after it, so a small file written and closed at once sends its size
	 * once, at close.
	 */
	uint64_t size_clock_ms;
	bool seen; /* seen_* hold the service's last attributes */
	uint64_t seen_size;
	int64_t seen_mtime_sec;
	uint32_t seen_mtime_nsec;
	/*
	 * Write-behind: the writes answered before their daemons, oldest
	 * first, until one thread settles each (wb_settle()); wb_cond wakes
	 * those waiting for a job another thread is settling. wb_err is the
	 * first error a settled job met, reported by every later write and by
	 * the next sync with commit (fsync, close), which clears it.
	 */
	struct wb_job *wb_head, **wb_tail;
	unsigned wb_count, wb_max;
	int wb_err;
	pthread_cond_t wb_cond;
};

/* A write in flight: [start, end) is its range widened to whole 4 KiB blocks. */
struct wb_job {
	struct rfs_wjob *job;
	uint64_t start, end, first_index;
	bool settling;
	struct wb_job *next;
};

#define WB_BLOCK 4096u

int rfs_file_create(struct rfs *fs, uint64_t ino, struct rfs_file **out)
{
	struct rfs_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->fs = fs;
	f->ino = ino;
	f->dirty_first = UINT64_MAX;
	f->lazy_mask = ~0ull;
	f->wb_tail = &f->wb_head;
	f->wb_max = rfs_write_behind(fs);
	pthread_mutex_init(&f->size_lock, NULL);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->wb_cond, NULL);
	*out = f;
	return 0;
}

static void note_written_locked(struct rfs_file *f, const struct rfs_layout *l, uint64_t written);

/*
 * Waits for the writes in flight that overlap [@start, @end) (or only the
 * oldest one, @oldest), sends again what was refused and records what they
 * wrote; the first error stays in wb_err. f->lock is not held. Two jobs never
 * overlap unsettled: rfs_file_write() settles the older one first.
 */
static void wb_settle(struct rfs_file *f, uint64_t start, uint64_t end, bool oldest)
{
	pthread_mutex_lock(&f->lock);
	for (;;) {
		struct rfs_layout layout;
		struct wb_job *w, **link;
		uint64_t written = 0;
		int ret;

		for (link = &f->wb_head; (w = *link); link = &w->next)
			if (oldest || (w->start < end && start < w->end))
				break;
		if (!w)
			break;
		if (w->settling) { /* another thread has it: wait until it is gone */
			pthread_cond_wait(&f->wb_cond, &f->lock);
			continue;
		}
		w->settling = true;
		pthread_mutex_unlock(&f->lock);
		ret = rfs_write_finish(w->job, &layout, &written);
		pthread_mutex_lock(&f->lock);
		note_written_locked(f, &layout, written);
		if (written) {
			f->alloc_seq++;
			if (w->first_index < f->dirty_first)
				f->dirty_first = w->first_index;
		}
		if (ret && !f->wb_err)
			f->wb_err = ret;
		for (link = &f->wb_head; *link != w; link = &(*link)->next)
			;
		*link = w->next;
		if (f->wb_tail == &w->next)
			f->wb_tail = link;
		f->wb_count--;
		free(w);
		pthread_cond_broadcast(&f->wb_cond);
		if (oldest)
			break;
	}
	pthread_mutex_unlock(&f->lock);
}

/* Every write in flight settled: what reads, syncs and changes of size need first. */
static void wb_settle_all(struct rfs_file *f)
{
	wb_settle(f, 0, UINT64_MAX, false);
}

/* The error a settled write met, until a sync with commit reports it (rfs_file_sync()). */
static int wb_error(struct rfs_file *f)
{
	int ret;

	pthread_mutex_lock(&f->lock);
	ret = f->wb_err;
	pthread_mutex_unlock(&f->lock);
	return ret;
}

void rfs_file_destroy(struct rfs_file *f)
{
	int ret;

	if (!f)
		return;
	wb_settle_all(f);
	ret = wb_error(f);
	if (ret)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %" PRIu64 ": a write answered before its daemons failed"
			   " (%s), and no sync was left to report it",
			   f->ino, strerror(-ret));
	pthread_cond_destroy(&f->wb_cond);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->size_lock);
	free(f);
}

void rfs_file_made(struct rfs_file *f)
{
	pthread_mutex_lock(&f->lock);
	f->lazy_mask = 0;
	pthread_mutex_unlock(&f->lock);
}

/*
 * Takes a layout from the service or from a data call that refetched it (a
 * drain moved the file: rdmafs_fs.h). f->lock is held. dirty_mask bits are
 * indexes into the layout's daemons, so after a change of generation they
 * mean other daemons: every daemon of the new layout is then dirty.
 */
static void keep_layout_locked(struct rfs_file *f, const struct rfs_layout *l)
{
	if (f->has_layout && l->generation < f->layout.generation)
		return; /* an older reply than what a data call found */
	if (f->has_layout && l->generation != f->layout.generation) {
		if (f->dirty_mask)
			f->dirty_mask = ~0ull;
		if (f->lazy_mask)
			f->lazy_mask = ~0ull;
	}
	f->layout = *l;
	f->has_layout = true;
}

/*
 * Records that daemons @written of @l (the layout a data call ended with)
 * hold uncommitted writes. f->lock is held.
 */
static void note_written_locked(struct rfs_file *f, const struct rfs_layout *l, uint64_t written)
{
	keep_layout_locked(f, l);
	/* another call moved the file to a newer layout: our bits meant the old one */
	if (written && l->generation != f->layout.generation)
		written = ~0ull;
	f->dirty_mask |= written;
}

void rfs_file_merge(struct rfs_file *f, const struct rfs_entry *e, struct stat *st, bool *changed,
		    uint64_t seq)
{
	uint64_t size = (uint64_t)e->attr.st_size;
	bool stale;

	*st = e->attr;
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	if (e->has_layout)
		keep_layout_locked(f, &e->layout);
	if (changed)
		*changed = f->seen &&
			   (f->seen_size != size || f->seen_mtime_sec != e->attr.st_mtim.tv_sec ||
			    f->seen_mtime_nsec != (uint32_t)e->attr.st_mtim.tv_nsec);
	f->seen = true;
	f->seen_size = size;
	f->seen_mtime_sec = e->attr.st_mtim.tv_sec;
	f->seen_mtime_nsec = (uint32_t)e->attr.st_mtim.tv_nsec;
	stale = seq != RFS_SEQ_NOW && seq != f->size_seq && size < f->size;
	if ((!f->size_dirty && !stale) || size > f->size)
		f->size = size;
	if ((f->size_dirty || stale) && S_ISREG(e->attr.st_mode))
		st->st_size = (off_t)f->size;
	pthread_mutex_unlock(&f->lock);
}

uint64_t rfs_file_seq(struct rfs_file *f)
{
	uint64_t seq;

	if (!f)
		return RFS_SEQ_NOW;
	pthread_mutex_lock(&f->lock);
	seq = f->size_seq;
	pthread_mutex_unlock(&f->lock);
	return seq;
}

int rfs_file_layout(struct rfs_file *f, const struct rfs_cred *c, struct rfs_layout *out)
{
	struct rfs_entry e;
	uint64_t handle, seq;
	struct stat st;
	int ret;

	pthread_mutex_lock(&f->lock);
	if (f->has_layout) {
		*out = f->layout;
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	seq = f->size_seq;
	pthread_mutex_unlock(&f->lock);
	ret = rfs_open(f->fs, c, f->ino, O_WRONLY, &handle, &e);
	if (ret)
		return ret;
	/* as any reply: it cannot shrink a size that changed while it was on its way */
	rfs_file_merge(f, &e, &st, NULL, seq);
	rfs_release(f->fs, c, f->ino, handle, NULL);
	pthread_mutex_lock(&f->lock);
	ret = f->has_layout ? 0 : -EIO;
	if (!ret)
		*out = f->layout;
	pthread_mutex_unlock(&f->lock);
	return ret;
}

/* A mask of every daemon of layout @l. */
static uint64_t layout_daemons(const struct rfs_layout *l)
{
	return l->stripe_width >= 64 ? UINT64_MAX : (1ull << l->stripe_width) - 1;
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
	uint64_t all = layout_daemons(l);

	if (l->generation != generation)
		mask = UINT64_MAX;
	return (report->known & all) == (mask & all);
}

/* The service has the allocations of every chunk change up to @alloc_seq. */
static void alloc_told(struct rfs_file *f, uint64_t alloc_seq)
{
	pthread_mutex_lock(&f->lock);
	if (alloc_seq > f->alloc_told)
		f->alloc_told = alloc_seq;
	pthread_mutex_unlock(&f->lock);
}

/* Whether @report answers for every daemon of @layout. */
static bool report_whole(const struct rfs_alloc_report *report, const struct rfs_layout *layout)
{
	uint64_t all = layout_daemons(layout);

	return layout->stripe_width && (report->known & all) == all;
}

/* The service stored @report, over @layout: remember it for the next commit's. */
static void report_told(struct rfs_file *f, const struct rfs_alloc_report *report,
			const struct rfs_layout *layout)
{
	pthread_mutex_lock(&f->lock);
	if (f->told_generation != layout->generation) {
		f->told.known = 0;
		f->told_whole = false;
		f->told_generation = layout->generation;
	}
	for (unsigned d = 0; d < RFS_MAX_STRIPE; d++)
		if (report->known & (1ull << d))
			f->told.allocated[d] = report->allocated[d];
	f->told.known |= report->known;
	f->told_whole |= report_whole(report, layout);
	pthread_mutex_unlock(&f->lock);
}

/*
 * Whether the service already has every allocation @report holds, over
 * @layout, made after our chunk changes up to @alloc_seq: we changed no
 * chunk since we told it the same values. (Another client's changes tell
 * the service themselves, and a change of ours since is told again: what a
 * second writer stored meanwhile is never left standing over ours.)
 */
static bool report_is_told(struct rfs_file *f, const struct rfs_alloc_report *report,
			   const struct rfs_layout *layout, uint64_t alloc_seq)
{
	bool same;

	pthread_mutex_lock(&f->lock);
	same = f->told_generation == layout->generation && f->alloc_told == alloc_seq &&
	       (report->known & f->told.known) == report->known &&
	       (f->told_whole || !report_whole(report, layout));
	for (unsigned d = 0; same && d < RFS_MAX_STRIPE; d++)
		if (report->known & (1ull << d))
			same = f->told.allocated[d] == report->allocated[d];
	pthread_mutex_unlock(&f->lock);
	return same;
}

/*
 * An UPDATE_SIZE that carried @size, made when f->size_seq was @seq, was
 * answered: the service has that size, unless ours changed meanwhile. The
 * seq to merge the reply with comes back (rfs_file_merge()).
 */
static uint64_t size_told(struct rfs_file *f, uint64_t size, uint64_t seq)
{
	pthread_mutex_lock(&f->lock);
	if (f->size == size)
		f->size_dirty = false;
	/*
	 * The reply is the service's size now, unless the size changed here while
	 * the update was on its way (a truncate that a write's batched update,
	 * sent after the write was answered, raced with): then it is merged as a
	 * reply that predates that change, which cannot shrink the size.
	 */
	if (f->size_seq == seq)
		seq = f->size_seq + 1;
	f->size_seq++;
	f->size_clock_ms = rdmafs_now_ms();
	pthread_mutex_unlock(&f->lock);
	return seq;
}

/*
 * GETATTR of a file whose chunks changed since the last commit (writes,
 * truncate, punch): the daemons concerned report what they now hold, without
 * syncing anything (the commit stays due for fsync and close), and
 * UPDATE_SIZE stores it and answers the attributes, so st_blocks follows at
 * once, as on a local filesystem. -EAGAIN when there is nothing to report.
 */
static int file_report(struct rfs_file *f, const struct rfs_cred *c, struct stat *st)
{
	struct rfs_alloc_report report;
	uint64_t mask, seq, alloc_seq, generation, size;
	struct rfs_layout layout;
	struct rfs_entry e;
	int ret;

	wb_settle_all(f); /* what the daemons hold must include every answered write */
	pthread_mutex_lock(&f->size_lock);
	pthread_mutex_lock(&f->lock);
	/* a stat after a stat asks the daemons again only if chunks changed since */
	mask = f->has_layout && f->alloc_seq != f->alloc_told ? f->dirty_mask : 0;
	alloc_seq = f->alloc_seq;
	layout = f->layout;
	seq = f->size_seq;
	size = f->size_dirty ? f->size : 0;
	pthread_mutex_unlock(&f->lock);
	if (!mask) {
		ret = -EAGAIN;
		goto out_unlock;
	}
	generation = layout.generation;
	ret = rfs_commit_alloc(f->fs, f->ino, &layout, mask, 0, RFS_COMMIT_REPORT, &report);
	pthread_mutex_lock(&f->lock);
	keep_layout_locked(f, &layout);
	pthread_mutex_unlock(&f->lock);
	if (ret)
		goto out_unlock;
	ret = rfs_update_size(f->fs, c, f->ino, size, NULL, &report, &layout, &e);
	if (ret)
		goto out_unlock;
	report_told(f, &report, &layout);
	if (size) /* a size we had not told: told now */
		seq = size_told(f, size, seq);
	e.has_layout = false; /* as with GETATTR */
	rfs_file_merge(f, &e, st, NULL, seq);
	if (report_complete(&report, &layout, generation, mask))
		alloc_told(f, alloc_seq);
out_unlock:
	pthread_mutex_unlock(&f->size_lock);
	return ret;
}

/*
 * The commit rfs_file_sync() of @kind owes, taken from @f (lock held): the
 * daemons with writes since the last commit, from chunk *@first, and for an
 * fsync those that deferred a close's commit (*@lazy; from no chunk when
 * none was written: the durable commit flushes what they deferred). 0: none.
 */
static uint64_t take_commit_locked(struct rfs_file *f, enum rfs_sync_kind kind, uint64_t *first,
				   uint64_t *lazy)
{
	uint64_t mask = f->dirty_mask;

	*first = f->dirty_first;
	*lazy = 0;
	if (kind == RFS_SYNC_SIZE || !f->has_layout)
		return 0;
	if (kind == RFS_SYNC_FSYNC) {
		*lazy = f->lazy_mask;
		f->lazy_mask = 0;
	}
	f->dirty_mask = 0;
	f->dirty_first = UINT64_MAX;
	return mask | *lazy;
}

int rfs_file_sync(struct rfs_file *f, const struct rfs_cred *c, enum rfs_sync_kind kind)
{
	struct rfs_alloc_report report = {.known = 0};
	struct rfs_layout layout;
	uint64_t mask, first, lazy, size, alloc_seq, generation = 0, seq;
	bool size_dirty, mtime_dirty, commit = kind != RFS_SYNC_SIZE;
	struct timespec now;
	struct rfs_entry e;
	struct stat st;
	int ret = 0, wb_ret;

	/* the size we tell the service must not run ahead of the data behind it */
	wb_settle_all(f);
	wb_ret = wb_error(f);
	pthread_mutex_lock(&f->size_lock);
	pthread_mutex_lock(&f->lock);
	alloc_seq = f->alloc_seq;
	mask = take_commit_locked(f, kind, &first, &lazy);
	if (mask) {
		layout = f->layout;
		generation = layout.generation;
	}
	size = f->size;
	size_dirty = f->size_dirty;
	seq = f->size_seq;
	/*
	 * The mtime our writes earned goes with flush, fsync and release only.
	 * The batched size update of a growing file runs after the write was
	 * answered, so it could land after the caller's own utimensat and undo it.
	 */
	mtime_dirty = commit && f->mtime_dirty;
	if (commit)
		f->mtime_dirty = false;
	pthread_mutex_unlock(&f->lock);

	if (mask) {
		ret = rfs_commit_alloc(
			f->fs, f->ino, &layout, mask, first,
			kind == RFS_SYNC_CLOSE ? RFS_COMMIT_CLOSE : RFS_COMMIT_DURABLE, &report);
		pthread_mutex_lock(&f->lock);
		keep_layout_locked(f, &layout);
		/* deferred: due again at the next fsync */
		if (!ret && report.durable_within_ms)
			f->lazy_mask |= layout.generation == generation ? mask : ~0ull;
		pthread_mutex_unlock(&f->lock);
		if (ret)
			goto err_redirty;
	}
	/*
	 * Nothing the service lacks: a close after a stat (tar, cp -a) whose
	 * report already told it what this commit found costs the commit alone.
	 */
	if (!size_dirty && !mtime_dirty &&
	    (!report.known || report_is_told(f, &report, &layout, alloc_seq))) {
		if (mask && report_complete(&report, &layout, generation, mask))
			alloc_told(f, alloc_seq);
		goto out_unlock;
	}
	if (mtime_dirty)
		clock_gettime(CLOCK_REALTIME, &now);
	/* the report indexes the layout the commit ended with (set whenever it is known) */
	ret = rfs_update_size(f->fs, c, f->ino, size, mtime_dirty ? &now : NULL,
			      report.known ? &report : NULL, report.known ? &layout : NULL, &e);
	if (ret)
		goto err_redirty;
	if (report.known)
		report_told(f, &report, &layout);
	seq = size_told(f, size, seq);
	e.has_layout = false; /* as with GETATTR */
	rfs_file_merge(f, &e, &st, NULL, seq);
	if (mask && report_complete(&report, &layout, generation, mask))
		alloc_told(f, alloc_seq);
	goto out_unlock;

err_redirty:
	pthread_mutex_lock(&f->lock);
	if (mask & ~lazy) /* layout is set only with a mask */
		note_written_locked(f, &layout, mask & ~lazy);
	if (lazy)
		f->lazy_mask |= layout.generation == f->layout.generation ? lazy : ~0ull;
	if (first < f->dirty_first)
		f->dirty_first = first;
	f->mtime_dirty |= mtime_dirty;
	pthread_mutex_unlock(&f->lock);
out_unlock:
	pthread_mutex_unlock(&f->size_lock);
	if (!ret && wb_ret && commit) { /* reported for good by this fsync or close */
		pthread_mutex_lock(&f->lock);
		if (f->wb_err == wb_ret)
			f->wb_err = 0;
		pthread_mutex_unlock(&f->lock);
	}
	return ret ? ret : wb_ret;
}

int rfs_file_fsync(struct rfs_file *f, const struct rfs_cred *c)
{
	int ret = rfs_file_sync(f, c, RFS_SYNC_FSYNC);

	return ret ? ret : rfs_meta_sync(f->fs);
}

/*
 * After a truncate, punch or range shift, which change chunks on daemons we
 * may not have written to: every daemon of @f's layout is due a commit from
 * chunk @first on (at fsync or close) and reports what it holds now, so
 * st_blocks follows at once. The attributes go to @st (may be NULL).
 */
static int chunks_changed(struct rfs_file *f, const struct rfs_cred *c, uint64_t first,
			  struct stat *st)
{
	struct stat ignored;
	int ret;

	pthread_mutex_lock(&f->lock);
	if (f->has_layout) {
		f->dirty_mask |= layout_daemons(&f->layout);
		if (first < f->dirty_first)
			f->dirty_first = first;
		f->alloc_seq++;
	}
	pthread_mutex_unlock(&f->lock);
	ret = file_report(f, c, st ? st : &ignored);
	return ret == -EAGAIN ? 0 : ret;
}

/* The layout and size of an open regular file; -EIO if the service gave none. */
static int io_state(struct rfs_file *f, struct rfs_layout *layout, uint64_t *size)
{
	int ret = 0;

	pthread_mutex_lock(&f->lock);
	if (f->has_layout && f->layout.chunk_size) {
		*layout = f->layout;
		*size = f->size;
	} else {
		ret = -EIO;
	}
	pthread_mutex_unlock(&f->lock);
	return ret;
}

/* Grows what we know of @f's size to @end and tells the service. */
static int extend(struct rfs_file *f, const struct rfs_cred *c, uint64_t end)
{
	pthread_mutex_lock(&f->lock);
	if (end > f->size) {
		f->size = end;
		f->size_dirty = true;
		f->size_seq++;
	}
	pthread_mutex_unlock(&f->lock);
	return rfs_file_sync(f, c, RFS_SYNC_SIZE);
}

/* Sets @f's size to @size at the service (a shrink), through the open handle @h. */
static int shrink(struct rfs_file *f, const struct rfs_cred *c, uint64_t handle, uint64_t size)
{
	struct rfs_setattr set = {.valid = RFS_SET_SIZE, .size = size, .handle = handle};
	struct rfs_entry e;
	struct stat st;
	int ret;

	pthread_mutex_lock(&f->size_lock);
	ret = rfs_setattr(f->fs, c, f->ino, &set, &e);
	if (!ret) {
		pthread_mutex_lock(&f->lock);
		f->size = size;
		f->size_dirty = false;
		f->size_seq++;
		pthread_mutex_unlock(&f->lock);
		e.has_layout = false; /* as with GETATTR */
		rfs_file_merge(f, &e, &st, NULL, RFS_SEQ_NOW);
	}
	pthread_mutex_unlock(&f->size_lock);
	return ret;
}

int rfs_file_getattr(struct rfs *fs, struct rfs_file *f, const struct rfs_cred *c, uint64_t ino,
		     struct stat *st)
{
	uint64_t seq = rfs_file_seq(f);
	struct rfs_entry e;
	int ret;

	/* on failure the plain GETATTR below still answers, with older blocks */
	if (f && file_report(f, c, st) == 0)
		return 0;
	ret = rfs_getattr(fs, c, ino, &e);
	if (ret)
		return ret;
	/* the layout comes with OPEN; a GETATTR's must not replace one a data call found */
	e.has_layout = false;
	rfs_file_merge(f, &e, st, NULL, seq);
	return 0;
}

int rfs_file_setattr(struct rfs *fs, struct rfs_file *f, const struct rfs_cred *c, uint64_t ino,
		     const struct rfs_setattr *set, struct stat *st)
{
	uint64_t old_size = UINT64_MAX;
	struct rfs_layout layout;
	bool mtime_was_dirty = false;
	struct rfs_entry e;
	int ret;

	if (f && (set->valid & RFS_SET_SIZE)) {
		wb_settle_all(f); /* no write in flight may land past the new end */
		pthread_mutex_lock(&f->lock);
		old_size = f->seen ? (f->size > f->seen_size ? f->size : f->seen_size) : UINT64_MAX;
		pthread_mutex_unlock(&f->lock);
	}
	/*
	 * An explicit mtime (tar, cp -a, rsync after writing) supersedes the one
	 * our earlier writes would stamp at the next sync: drop that, or restore
	 * it if the call fails.
	 */
	if (f && (set->valid & (RFS_SET_MTIME | RFS_SET_MTIME_NOW))) {
		pthread_mutex_lock(&f->lock);
		mtime_was_dirty = f->mtime_dirty;
		f->mtime_dirty = false;
		pthread_mutex_unlock(&f->lock);
	}
	if (f && (set->valid & RFS_SET_SIZE))
		pthread_mutex_lock(&f->size_lock);
	ret = rfs_setattr(fs, c, ino, set, &e);
	if (!ret && f && (set->valid & RFS_SET_SIZE)) {
		/* the size is now the service's: a pending larger one must not grow it back */
		pthread_mutex_lock(&f->lock);
		f->size = set->size;
		f->size_dirty = false;
		f->size_seq++;
		pthread_mutex_unlock(&f->lock);
	}
	if (!ret) {
		e.has_layout = false; /* as with GETATTR */
		rfs_file_merge(f, &e, st, NULL, RFS_SEQ_NOW);
	}
	if (f && (set->valid & RFS_SET_SIZE))
		pthread_mutex_unlock(&f->size_lock);
	if (ret) {
		if (mtime_was_dirty) {
			pthread_mutex_lock(&f->lock);
			f->mtime_dirty = true;
			pthread_mutex_unlock(&f->lock);
		}
		return ret;
	}
	/* a shrink: the bytes past the new end must read as zeros if the file grows again */
	if (!(set->valid & RFS_SET_SIZE) || !S_ISREG(st->st_mode) || set->size >= old_size)
		return 0;
	if (!f)
		return -EIO;
	ret = rfs_file_layout(f, c, &layout);
	if (ret)
		return ret;
	ret = rfs_truncate_data(fs, ino, &layout, set->size, old_size);
	pthread_mutex_lock(&f->lock);
	keep_layout_locked(f, &layout);
	pthread_mutex_unlock(&f->lock);
	if (ret)
		return ret;
	return chunks_changed(f, c, set->size / layout.chunk_size, st);
}

int rfs_file_read(struct rfs_file *f, uint64_t off, size_t len, void *dst, size_t *got)
{
	struct rfs_layout layout;
	uint64_t size;
	int ret;

	*got = 0;
	if (len) /* our own writes in flight there first */
		wb_settle(f, off / WB_BLOCK * WB_BLOCK, off + len, false);
	ret = io_state(f, &layout, &size);
	if (ret || off >= size)
		return ret;
	if (len > size - off)
		len = (size_t)(size - off);
	ret = rfs_read(f->fs, f->ino, &layout, off, len, dst);
	pthread_mutex_lock(&f->lock);
	keep_layout_locked(f, &layout);
	pthread_mutex_unlock(&f->lock);
	if (!ret)
		*got = len;
	return ret;
}

/*
 * Starts @len bytes at @off as a write in flight, after the writes in flight
 * it overlaps and, when the window is full, the oldest. -EAGAIN: write-behind
 * is off or the buffers are not free, write and wait instead.
 */
static int wb_start(struct rfs_file *f, const struct rfs_layout *layout, uint64_t off, size_t len,
		    const void *src)
{
	uint64_t start = off / WB_BLOCK * WB_BLOCK, end = off + len;
	struct wb_job *w;
	bool full;
	int ret;

	if (!f->wb_max || !len)
		return -EAGAIN;
	end = end > UINT64_MAX - WB_BLOCK ? UINT64_MAX : (end + WB_BLOCK - 1) / WB_BLOCK * WB_BLOCK;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->start = start;
	w->end = end;
	w->first_index = off / layout->chunk_size;
	wb_settle(f, start, end, false);
	for (;;) {
		pthread_mutex_lock(&f->lock);
		full = f->wb_count >= f->wb_max;
		pthread_mutex_unlock(&f->lock);
		if (!full)
			break;
		wb_settle(f, 0, 0, true);
	}
	ret = wb_error(f);
	if (!ret)
		ret = rfs_write_start(f->fs, f->ino, layout, off, len, src, &w->job);
	if (ret) {
		free(w);
		return ret;
	}
	/*
	 * Another thread may have started an overlapping write since we
	 * settled: two writers of one range race in POSIX too, and the job
	 * list keeps their order for whoever settles them.
	 */
	pthread_mutex_lock(&f->lock);
	*f->wb_tail = w;
	f->wb_tail = &w->next;
	f->wb_count++;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

int rfs_file_write(struct rfs_file *f, uint64_t off, size_t len, const void *src, bool sync,
		   bool *size_due)
{
	struct rfs_layout layout;
	uint64_t written = 0, end, size;
	int ret;

	*size_due = false;
	if (off > UINT64_MAX - len)
		return -EFBIG;
	end = off + len;
	ret = io_state(f, &layout, &size);
	if (ret)
		return ret;
	ret = sync ? -EAGAIN : wb_start(f, &layout, off, len, src);
	if (ret == -EAGAIN) {
		/* written and waited for, after every write in flight */
		wb_settle_all(f);
		ret = wb_error(f);
		if (!ret)
			ret = rfs_write(f->fs, f->ino, &layout, off, len, src, sync, &written);
	}
	pthread_mutex_lock(&f->lock);
	note_written_locked(f, &layout, written);
	if (written)
		f->alloc_seq++;
	if (written && off / layout.chunk_size < f->dirty_first)
		f->dirty_first = off / layout.chunk_size;
	if (!ret) {
		uint64_t now = rdmafs_now_ms();

		f->mtime_dirty = true;
		if (end > f->size) {
			if (!f->size_dirty && now - f->size_clock_ms >= SIZE_UPDATE_GAP_MS)
				f->size_clock_ms = now;
			f->size = end;
			f->size_dirty = true;
			f->size_seq++;
		}
		/* batched: a growing file tells the service once a second */
		*size_due = f->size_dirty && now - f->size_clock_ms >= SIZE_UPDATE_GAP_MS;
		if (*size_due)
			f->size_clock_ms = now;
	}
	pthread_mutex_unlock(&f->lock);
	return ret;
}

/* After a data call that may have changed the layout: keep it, and stamp the mtime. */
static void data_changed(struct rfs_file *f, const struct rfs_layout *layout)
{
	pthread_mutex_lock(&f->lock);
	keep_layout_locked(f, layout);
	f->mtime_dirty = true;
	pthread_mutex_unlock(&f->lock);
}

int rfs_file_fallocate(struct rfs_file *f, const struct rfs_cred *c, uint64_t handle, int mode,
		       uint64_t off, uint64_t len)
{
	struct rfs_layout layout;
	uint64_t size, end, first;
	int ret;

	if (len == 0 || off > UINT64_MAX - len)
		return -EINVAL;
	end = off + len;
	wb_settle_all(f);
	ret = io_state(f, &layout, &size);
	if (ret)
		return ret;
	if (end > RFS_MAX_FILE_SIZE && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EFBIG;
	first = off / layout.chunk_size;
	switch (mode) {
	case 0:
		return end > size ? extend(f, c, end) : 0;
	case FALLOC_FL_KEEP_SIZE:
		return 0;
	case FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE:
	case FALLOC_FL_ZERO_RANGE:
	case FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE:
		/* a hole reads as zeros: zeroing is punching, plus the size unless KEEP_SIZE */
		ret = rfs_punch_hole(f->fs, f->ino, &layout, size, off, len);
		data_changed(f, &layout);
		if (!ret && !(mode & FALLOC_FL_KEEP_SIZE) && end > size)
			ret = extend(f, c, end);
		break;
	case FALLOC_FL_COLLAPSE_RANGE:
		ret = rfs_collapse_range(f->fs, f->ino, &layout, size, off, len);
		if (!ret)
			ret = shrink(f, c, handle, size - len);
		if (!ret)
			ret = rfs_truncate_data(f->fs, f->ino, &layout, size - len, size);
		data_changed(f, &layout);
		break;
	case FALLOC_FL_INSERT_RANGE:
		ret = rfs_insert_range(f->fs, f->ino, &layout, size, off, len);
		data_changed(f, &layout);
		if (!ret) {
			pthread_mutex_lock(&f->lock);
			if (size + len > f->size) {
				f->size = size + len;
				f->size_dirty = true;
				f->size_seq++;
			}
			pthread_mutex_unlock(&f->lock);
		}
		break;
	default:
		return -EOPNOTSUPP;
	}
	/* chunks went away on daemons we may never have written to: report them all */
	return ret ? ret : chunks_changed(f, c, first, NULL);
}

int rfs_file_seek(struct rfs_file *f, uint64_t off, int whence, uint64_t *pos)
{
	struct rfs_layout layout;
	uint64_t size;
	int ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	wb_settle_all(f);
	ret = io_state(f, &layout, &size);
	if (ret)
		return ret;
	ret = rfs_seek(f->fs, f->ino, &layout, size, off, whence, pos);
	pthread_mutex_lock(&f->lock);
	keep_layout_locked(f, &layout);
	pthread_mutex_unlock(&f->lock);
	return ret;
}
