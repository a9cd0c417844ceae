/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy: the copy engine.
 *
 * A walker thread lists the source tree, makes the destination directories
 * and queues one job per non-directory. File workers (-j) take jobs; a file
 * larger than one piece is cut into pieces that go on a second queue, taken
 * first by every thread (the file workers while they wait for their own
 * pieces, and the --inflight threads that only move pieces), so a large file
 * has many calls in flight and a tree of small files has many files.
 *
 * A file is written under a temporary name in its destination directory,
 * read back and compared by CRC-32C when verifying, given its mode, owner,
 * times and xattrs, and only then renamed into place: a name that exists
 * with the source's size and mtime is complete, which is what a re-run
 * skips. Temporaries a killed run left are removed when their directory is
 * walked again.
 *
 * cp_stop() ends a copy early: the walk and the file queue stop, the pieces
 * in flight finish and the files under way are abandoned, their temporaries
 * removed, so that what is left on the destination is what a killed run
 * leaves, less the temporaries: complete files a re-run skips.
 *
 * Hard links: the first name of a source inode with several links is copied;
 * the others wait for it and become links to its copy. Directory modes and
 * times are set at the end, deepest first, as writing into a directory
 * changes its mtime.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "copy_i.h"

#define MAX_QUEUED_FILES 8192
#define GROUP_BUCKETS	 4096

enum group_state { GROUP_PENDING, GROUP_DONE, GROUP_FAILED };

/* A destination directory the walk made or found. */
struct dirnode {
	struct dirnode *next; /* every directory, newest first: children before parents */
	struct cp_loc src, dst;
	struct cp_attr sattr;
	bool apply; /* set its attributes at the end (not for the parent of a file root) */
};

struct job;

/* The source inodes with more than one link that the walk met. */
struct group {
	struct group *next;
	uint64_t dev, ino;
	enum group_state state;
	struct cp_loc dst; /* the copy of the first name */
	uint64_t dst_dev, dst_ino;
	struct job *waiters;
};

struct job {
	struct job *next;
	bool is_link; /* a later name of @group */
	struct cp_loc src;
	struct cp_attr sattr;
	struct dirnode *dir;
	char *name;
	bool dst_exists;
	struct cp_attr dattr;
	struct group *group;
};

struct filecopy;

struct piece {
	struct piece *next;
	struct filecopy *fc;
	uint64_t off;
	size_t len;
};

/* A regular file in flight: its pieces report here. */
struct filecopy {
	struct job *job;
	struct cp_file in, out;
	/* check mode: the pieces only read @check_file of @check_side, into vcrc */
	struct cp_side *check_side;
	struct cp_file *check_file;
	uint64_t moved; /* bytes read and written */
	size_t pending;
	int error;
	uint32_t crc, vcrc; /* raw CRCs shifted to the file's end, XORed */
	struct piece *pieces;
};

struct engine {
	const struct cp_options *opts;
	struct cp_side *from, *to;
	struct cp_stats *stats;
	pthread_mutex_t lock;
	pthread_cond_t cond;  /* work queued, a file's pieces done, all done */
	pthread_cond_t space; /* the file queue shrank */
	struct job *files, *files_tail;
	size_t nfiles;
	struct piece *pieces, *pieces_tail;
	unsigned active; /* jobs running */
	bool walk_done;
	struct dirnode *dirs;
	struct group *groups[GROUP_BUCKETS];
	uint64_t tmp_seq;
	int fatal;
	int stop;	   /* cp_stop() was called: set under lock, read atomically */
	double start;	   /* cp_now() when the copy began, for --bwlimit */
	uint64_t admitted; /* bytes --bwlimit let through so far */
};

/* The cp_run() of this process, for cp_stop(); taken before any engine lock. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static struct engine *running;
static bool stop_asked;

static __thread void *thread_buf;

static void stat_add(uint64_t *counter, uint64_t v)
{
	__atomic_fetch_add(counter, v, __ATOMIC_RELAXED);
}

static bool stopping(struct engine *e)
{
	return __atomic_load_n(&e->stop, __ATOMIC_RELAXED);
}

/* Did @ret come from cp_stop() rather than from a side? */
static bool stopped(struct engine *e, int ret)
{
	return ret == -EINTR && stopping(e);
}

void cp_stop(void)
{
	pthread_mutex_lock(&running_lock);
	stop_asked = true;
	if (running) {
		pthread_mutex_lock(&running->lock);
		__atomic_store_n(&running->stop, 1, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&running->cond);
		pthread_cond_broadcast(&running->space);
		pthread_mutex_unlock(&running->lock);
	}
	pthread_mutex_unlock(&running_lock);
}

/*
 * --bwlimit: a piece of @len bytes may start once the bytes let through
 * before it fit the rate since the start. Sleeps in short steps so that a
 * stop is noticed; -EINTR then.
 */
static int throttle(struct engine *e, size_t len)
{
	uint64_t before;
	double due;

	if (!e->opts->bwlimit)
		return 0;
	before = __atomic_fetch_add(&e->admitted, len, __ATOMIC_RELAXED);
	due = e->start + (double)before / (double)e->opts->bwlimit;
	for (;;) {
		double wait = due - cp_now();
		struct timespec ts;

		if (stopping(e))
			return -EINTR;
		if (wait <= 0)
			return 0;
		if (wait > 0.1)
			wait = 0.1;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(wait * 1e9);
		nanosleep(&ts, NULL);
	}
}

/* A fresh temporary name (CP_NAME_MAX + 1 bytes). */
static void tmp_name(struct engine *e, char *out, size_t size)
{
	uint64_t seq = __atomic_fetch_add(&e->tmp_seq, 1, __ATOMIC_RELAXED);

	snprintf(out, size, CP_TMP_PREFIX "%ld.%llu" CP_TMP_SUFFIX, (long)getpid(),
		 (unsigned long long)seq);
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	cp_loc_free(&j->src);
	free(j->name);
	free(j);
}

static void *piece_buffer(struct engine *e)
{
	if (!thread_buf && posix_memalign(&thread_buf, 4096, e->opts->piece_size))
		thread_buf = NULL;
	return thread_buf;
}

/* ---- queues (under e->lock) ------------------------------------------------------- */

static void push_file_locked(struct engine *e, struct job *j)
{
	j->next = NULL;
	if (e->files_tail)
		e->files_tail->next = j;
	else
		e->files = j;
	e->files_tail = j;
	e->nfiles++;
	pthread_cond_broadcast(&e->cond);
}

static struct job *pop_file_locked(struct engine *e)
{
	struct job *j = e->files;

	if (!j)
		return NULL;
	e->files = j->next;
	if (!e->files)
		e->files_tail = NULL;
	e->nfiles--;
	pthread_cond_signal(&e->space);
	return j;
}

static struct piece *pop_piece_locked(struct engine *e)
{
	struct piece *p = e->pieces;

	if (!p)
		return NULL;
	e->pieces = p->next;
	if (!e->pieces)
		e->pieces_tail = NULL;
	return p;
}

/* ---- failures ------------------------------------------------------------------------ */

static void fail(struct engine *e, const char *path, const char *what, int err)
{
	stat_add(&e->stats->failed, 1);
	cp_msg("%s: %s%s%s", path, what ? what : "", what ? ": " : "", cp_strerror(err));
}

/* The job's destination as a loc for messages and local calls; path malloc()ed. */
static int dst_loc(struct job *j, const char *name, struct cp_loc *out)
{
	out->path = cp_path_join(j->dir->dst.path, name);
	out->ino = 0;
	return out->path ? 0 : -ENOMEM;
}

/* ---- hard-link groups ----------------------------------------------------------- */

static struct group **group_bucket(struct engine *e, uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ULL)) * 0x9e3779b97f4a7c15ULL;

	return &e->groups[h >> 52 & (GROUP_BUCKETS - 1)];
}

/*
 * After the first name of @g was copied (@ok) or failed: queue its waiting
 * names as links, or fail them.
 */
static void group_settle(struct engine *e, struct group *g, bool ok, const struct cp_loc *dst,
			 const struct cp_attr *dattr)
{
	struct job *w, *next;

	pthread_mutex_lock(&e->lock);
	g->state = ok ? GROUP_DONE : GROUP_FAILED;
	if (ok) {
		g->dst.path = strdup(dst->path);
		g->dst.ino = dst->ino;
		g->dst_dev = dattr->dev;
		g->dst_ino = dattr->ino;
		if (!g->dst.path)
			g->state = GROUP_FAILED;
	}
	w = g->waiters;
	g->waiters = NULL;
	for (; w; w = next) {
		next = w->next;
		if (g->state == GROUP_DONE) {
			push_file_locked(e, w);
		} else if (e->stop) {
			/* not failed: left for the next run, as the first name is */
			job_free(w);
		} else {
			pthread_mutex_unlock(&e->lock);
			fail(e, w->src.path, "hard link not made, its first name failed", -EIO);
			stat_add(&e->stats->files_done, 1);
			job_free(w);
			pthread_mutex_lock(&e->lock);
		}
	}
	pthread_mutex_unlock(&e->lock);
}

/* ---- xattrs and attributes ---------------------------------------------------------- */

static bool xattr_optional(const char *name)
{
	return strncmp(name, "user.", 5) != 0;
}

/* Copies the xattrs of @src to @dst: user.* always, others where permitted. */
static int copy_xattrs(struct engine *e, const struct cp_loc *src, const struct cp_loc *dst)
{
	char *names = NULL;
	size_t len = 0;
	int ret;

	ret = e->from->ops->listxattr(e->from, src, &names, &len);
	if (ret)
		return ret;
	for (size_t pos = 0; pos < len && !ret;) {
		const char *name = names + pos;
		size_t n = strnlen(name, len - pos);
		void *value = NULL;
		size_t vlen = 0;

		pos += n + 1;
		if (n == 0 || n == len)
			continue;
		ret = e->from->ops->getxattr(e->from, src, name, &value, &vlen);
		if (ret == -ENODATA) {
			ret = 0;
			continue;
		}
		if (!ret)
			ret = e->to->ops->setxattr(e->to, dst, name, value, vlen);
		free(value);
		if (ret && xattr_optional(name) &&
		    (ret == -EPERM || ret == -EACCES || ret == -EOPNOTSUPP || ret == -ENOTSUP))
			ret = 0;
	}
	free(names);
	return ret;
}

/* ---- pieces ------------------------------------------------------------------------ */

/* Is [p, p + len) all zero bytes? */
static bool all_zero(const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		if (*p)
			return false;
		p++;
		len--;
	}
	for (; len >= 32; p += 32, len -= 32) {
		const uint64_t *q = (const uint64_t *)(const void *)p;

		if (q[0] | q[1] | q[2] | q[3])
			return false;
	}
	for (; len; p++, len--)
		if (*p)
			return false;
	return true;
}

/*
 * Writes the non-zero blocks of @buf to [@off, @off + @len) of @f: zero
 * blocks stay holes (the size is set at the end).
 */
static int write_sparse(struct engine *e, struct cp_file *f, uint64_t off, size_t len,
			const uint8_t *buf)
{
	size_t block = e->to->is_rdmafs ? 65536 : 4096, pos = 0;
	int ret = 0;

	while (pos < len && !ret) {
		size_t start, end;

		while (pos < len) {
			size_t n = len - pos < block ? len - pos : block;

			if (!all_zero(buf + pos, n))
				break;
			pos += n;
		}
		start = pos;
		while (pos < len) {
			size_t n = len - pos < block ? len - pos : block;

			if (all_zero(buf + pos, n))
				break;
			pos += n;
		}
		end = pos;
		if (end > start)
			ret = e->to->ops->write(e->to, f, off + start, end - start, buf + start);
	}
	return ret;
}

static uint64_t file_size(const struct filecopy *fc)
{
	return fc->job->sattr.size;
}

/* Moves or verifies one piece; the result goes into its filecopy under e->lock. */
static void run_piece(struct engine *e, struct piece *p)
{
	struct filecopy *fc = p->fc;
	uint8_t *buf = piece_buffer(e);
	uint32_t crc = 0;
	int ret = 0, error;

	pthread_mutex_lock(&e->lock);
	error = fc->error;
	pthread_mutex_unlock(&e->lock);
	if (error)
		goto out_done;
	if (stopping(e)) {
		ret = -EINTR;
		goto out_done;
	}
	if (!buf) {
		ret = -ENOMEM;
		goto out_done;
	}
	if (fc->check_side) {
		ret = fc->check_side->ops->read(fc->check_side, fc->check_file, p->off, p->len,
						buf);
	} else {
		ret = throttle(e, p->len);
		if (!ret)
			ret = e->from->ops->read(e->from, &fc->in, p->off, p->len, buf);
		if (!ret)
			ret = write_sparse(e, &fc->out, p->off, p->len, buf);
		if (!ret) {
			stat_add(&e->stats->bytes_done, p->len);
			stat_add(&fc->moved, p->len);
		}
	}
	if (!ret)
		crc = cp_crc_shift(cp_crc_raw(buf, p->len), file_size(fc) - p->off - p->len);
out_done:
	pthread_mutex_lock(&e->lock);
	if (ret && !fc->error)
		fc->error = ret;
	if (fc->check_side)
		fc->vcrc ^= crc;
	else
		fc->crc ^= crc;
	if (--fc->pending == 0)
		pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

/*
 * Cuts the data extents of the file being read (the source, or the
 * destination when verifying) into pieces aligned to the piece size.
 */
static int make_pieces(struct engine *e, struct filecopy *fc)
{
	struct cp_side *side = fc->check_side ? fc->check_side : e->from;
	struct cp_file *f = fc->check_side ? fc->check_file : &fc->in;
	uint64_t size = file_size(fc), off = 0, ps = e->opts->piece_size;
	struct piece **tail = &fc->pieces;

	fc->pieces = NULL;
	while (off < size) {
		uint64_t start, end;
		int ret = side->ops->data_extent(side, f, off, size, &start, &end);

		if (ret == -ENXIO)
			break;
		if (ret)
			return ret;
		if (end <= start || start < off) /* a filesystem that does not move on */
			return -EIO;
		while (start < end) {
			uint64_t stop = (start / ps + 1) * ps;
			struct piece *p = calloc(1, sizeof(*p));

			if (!p)
				return -ENOMEM;
			if (stop > end)
				stop = end;
			p->fc = fc;
			p->off = start;
			p->len = (size_t)(stop - start);
			*tail = p;
			tail = &p->next;
			start = stop;
		}
		off = end;
	}
	return 0;
}

static void free_pieces(struct filecopy *fc)
{
	while (fc->pieces) {
		struct piece *p = fc->pieces;

		fc->pieces = p->next;
		free(p);
	}
}

/*
 * Runs every piece of @fc: inline when there is one, else queued for all
 * threads while this one helps. Returns the first error.
 */
static int run_all_pieces(struct engine *e, struct filecopy *fc)
{
	struct piece *p, *list;
	size_t count = 0;
	int ret;

	ret = make_pieces(e, fc);
	if (ret) {
		free_pieces(fc);
		return ret;
	}
	for (p = fc->pieces; p; p = p->next)
		count++;
	fc->pending = count;
	fc->error = 0;
	if (count == 1) {
		run_piece(e, fc->pieces);
	} else if (count > 1) {
		list = fc->pieces;
		pthread_mutex_lock(&e->lock);
		/* queued pieces are linked through next: keep our own list apart */
		for (p = list; p; p = p->next) {
			struct piece *q = malloc(sizeof(*q));

			if (!q) {
				fc->error = -ENOMEM;
				fc->pending--;
				continue;
			}
			*q = *p;
			q->next = NULL;
			if (e->pieces_tail)
				e->pieces_tail->next = q;
			else
				e->pieces = q;
			e->pieces_tail = q;
		}
		pthread_cond_broadcast(&e->cond);
		while (fc->pending) {
			struct piece *q = pop_piece_locked(e);

			if (!q) {
				pthread_cond_wait(&e->cond, &e->lock);
				continue;
			}
			pthread_mutex_unlock(&e->lock);
			run_piece(e, q);
			free(q);
			pthread_mutex_lock(&e->lock);
		}
		pthread_mutex_unlock(&e->lock);
	}
	free_pieces(fc);
	return fc->error;
}

/* ---- one regular file ---------------------------------------------------------------- */

/* The raw CRC of all of @f on @side, read by pieces. */
static int checksum(struct engine *e, struct job *j, struct cp_side *side, struct cp_file *f,
		    uint32_t *crc)
{
	struct filecopy fc = {.job = j, .check_side = side, .check_file = f};
	int ret = run_all_pieces(e, &fc);

	*crc = fc.vcrc;
	return ret;
}

/* The CRC-32C check of an existing destination against the source. */
static int compare_existing(struct engine *e, struct job *j, const struct cp_loc *dst, bool *same)
{
	struct cp_file in, out;
	uint32_t scrc = 0, dcrc = 0;
	int ret;

	*same = false;
	ret = e->from->ops->open_read(e->from, &j->src, &in);
	if (ret)
		return ret;
	ret = e->to->ops->open_read(e->to, dst, &out);
	if (ret)
		goto out_close_in;
	ret = checksum(e, j, e->from, &in, &scrc);
	if (!ret)
		ret = checksum(e, j, e->to, &out, &dcrc);
	*same = !ret && scrc == dcrc;
	e->to->ops->close(e->to, &out);
out_close_in:
	e->from->ops->close(e->from, &in);
	return ret;
}

static int copy_regular(struct engine *e, struct job *j)
{
	struct filecopy fc = {.job = j};
	struct cp_loc tmp = {0}, final = {0};
	char tname[CP_NAME_MAX + 1];
	struct cp_attr dattr;
	uint64_t ino = 0, counted = 0;
	int ret;
	const char *what = NULL;

	fc.in.fd = fc.out.fd = -1;
	tmp_name(e, tname, sizeof(tname));
	ret = dst_loc(j, tname, &tmp);
	if (ret)
		goto out;
	ret = dst_loc(j, j->name, &final);
	if (ret)
		goto out;
	what = "cannot open";
	ret = e->from->ops->open_read(e->from, &j->src, &fc.in);
	if (ret)
		goto out;
	what = "cannot create";
	ret = e->to->ops->create(e->to, &j->dir->dst, tname, &j->sattr, &fc.out, &ino);
	if (ret)
		goto err_close_in;
	tmp.ino = ino;
	what = "copy failed";
	ret = run_all_pieces(e, &fc);
	/* holes count as done: the total is the files' sizes */
	stat_add(&e->stats->bytes_done, j->sattr.size - fc.moved);
	counted = j->sattr.size;
	if (!ret)
		ret = e->to->ops->finish(e->to, &fc.out, j->sattr.size);
	if (ret)
		goto err_unlink;
	if (e->opts->verify) {
		uint32_t dcrc = 0;

		what = "verify failed";
		ret = checksum(e, j, e->to, &fc.out, &dcrc);
		if (!ret && dcrc != fc.crc)
			ret = -EILSEQ;
		if (ret)
			goto err_unlink;
		stat_add(&e->stats->verified, 1);
		if (e->opts->verbose)
			cp_msg("%s: crc32c %08x verified", final.path,
			       cp_crc_finish(fc.crc, j->sattr.size));
	}
	what = "xattrs";
	ret = copy_xattrs(e, &j->src, &tmp);
	if (ret)
		goto err_unlink;
	what = "attributes";
	ret = e->to->ops->set_attr(e->to, &tmp, &j->sattr, e->opts->owner);
	if (ret)
		goto err_unlink;
	e->to->ops->close(e->to, &fc.out);
	e->from->ops->close(e->from, &fc.in);
	what = "rename into place";
	ret = e->to->ops->rename(e->to, &j->dir->dst, tname, j->name);
	if (ret) {
		e->to->ops->unlink(e->to, &j->dir->dst, tname);
		goto out;
	}
	final.ino = ino;
	stat_add(&e->stats->files_copied, 1);
	stat_add(&e->stats->bytes_copied, j->sattr.size);
	if (j->group) {
		dattr = j->sattr;
		dattr.dev = 0;
		dattr.ino = ino;
		if (!e->to->is_rdmafs && e->to->ops->stat(e->to, &final, &dattr))
			dattr.ino = 0;
		group_settle(e, j->group, true, &final, &dattr);
	}
	cp_loc_free(&tmp);
	cp_loc_free(&final);
	return 0;

err_unlink:
	e->to->ops->close(e->to, &fc.out);
	e->to->ops->unlink(e->to, &j->dir->dst, tname);
err_close_in:
	e->from->ops->close(e->from, &fc.in);
out:
	if (stopped(e, ret))
		/* abandoned, not failed: the file is still to do */
		__atomic_fetch_sub(&e->stats->bytes_done, counted ? counted : fc.moved,
				   __ATOMIC_RELAXED);
	else
		fail(e, j->src.path, what, ret);
	if (j->group)
		group_settle(e, j->group, false, NULL, NULL);
	cp_loc_free(&tmp);
	cp_loc_free(&final);
	return ret;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* 0, or the error that ended the copy of this file (-EINTR: cp_stop()) */
static int job_regular(struct engine *e, struct job *j)
{
	if (j->dst_exists && S_ISREG(j->dattr.mode) && j->dattr.size == j->sattr.size &&
	    same_time(&j->dattr.mtime, &j->sattr.mtime)) {
		struct cp_loc final = {0};
		bool same = true;
		int ret = dst_loc(j, j->name, &final);

		final.ino = e->to->is_rdmafs ? j->dattr.ino : 0;
		if (!ret && e->opts->verify_existing)
			ret = compare_existing(e, j, &final, &same);
		if (ret) {
			if (!stopped(e, ret))
				fail(e, j->src.path, "checking the existing copy", ret);
			if (j->group)
				group_settle(e, j->group, false, NULL, NULL);
		} else if (same) {
			stat_add(&e->stats->skipped, 1);
			stat_add(&e->stats->bytes_done, j->sattr.size);
			if (j->group)
				group_settle(e, j->group, true, &final, &j->dattr);
			cp_loc_free(&final);
			return 0;
		}
		cp_loc_free(&final);
		if (ret)
			return ret;
		if (e->opts->verbose)
			cp_msg("%s: existing copy differs, copying again", j->src.path);
	}
	return copy_regular(e, j);
}

/* ---- links, symlinks, special files -------------------------------------------------- */

/* Makes @tname in the job's directory with @make, gives it its attributes, renames it in. */
static int place_tmp(struct engine *e, struct job *j, const char *tname, uint64_t ino,
		     const char **what)
{
	struct cp_loc tmp = {0};
	int ret = dst_loc(j, tname, &tmp);

	if (ret)
		return ret;
	tmp.ino = ino;
	*what = "attributes";
	if (!S_ISLNK(j->sattr.mode)) {
		*what = "xattrs";
		ret = copy_xattrs(e, &j->src, &tmp);
		*what = "attributes";
	}
	if (!ret)
		ret = e->to->ops->set_attr(e->to, &tmp, &j->sattr, e->opts->owner);
	if (!ret) {
		*what = "rename into place";
		ret = e->to->ops->rename(e->to, &j->dir->dst, tname, j->name);
	}
	if (ret)
		e->to->ops->unlink(e->to, &j->dir->dst, tname);
	cp_loc_free(&tmp);
	return ret;
}

static void job_symlink(struct engine *e, struct job *j)
{
	char target[PATH_MAX], old[PATH_MAX], tname[CP_NAME_MAX + 1];
	const char *what = "readlink";
	uint64_t ino = 0;
	int ret;

	ret = e->from->ops->readlink(e->from, &j->src, target, sizeof(target));
	if (ret)
		goto out_fail;
	if (j->dst_exists && S_ISLNK(j->dattr.mode)) {
		struct cp_loc d = {0};

		if (dst_loc(j, j->name, &d) == 0) {
			d.ino = j->dattr.ino;
			ret = e->to->ops->readlink(e->to, &d, old, sizeof(old));
			cp_loc_free(&d);
			if (!ret && strcmp(old, target) == 0 &&
			    same_time(&j->dattr.mtime, &j->sattr.mtime)) {
				stat_add(&e->stats->skipped, 1);
				return;
			}
		}
	}
	tmp_name(e, tname, sizeof(tname));
	what = "cannot create symlink";
	ret = e->to->ops->symlink(e->to, &j->dir->dst, tname, target, &j->sattr, &ino);
	if (!ret)
		ret = place_tmp(e, j, tname, ino, &what);
	if (!ret) {
		stat_add(&e->stats->symlinks, 1);
		return;
	}
out_fail:
	fail(e, j->src.path, what, ret);
}

static void job_special(struct engine *e, struct job *j)
{
	char tname[CP_NAME_MAX + 1];
	const char *what = "cannot create";
	uint64_t ino = 0;
	int ret;

	if (j->dst_exists && (j->dattr.mode & S_IFMT) == (j->sattr.mode & S_IFMT) &&
	    j->dattr.rdev == j->sattr.rdev && same_time(&j->dattr.mtime, &j->sattr.mtime)) {
		stat_add(&e->stats->skipped, 1);
		return;
	}
	tmp_name(e, tname, sizeof(tname));
	ret = e->to->ops->mknod(e->to, &j->dir->dst, tname, &j->sattr, &ino);
	if (!ret)
		ret = place_tmp(e, j, tname, ino, &what);
	if (!ret) {
		stat_add(&e->stats->specials, 1);
		return;
	}
	fail(e, j->src.path, what, ret);
}

static void job_link(struct engine *e, struct job *j)
{
	struct group *g = j->group;
	char tname[CP_NAME_MAX + 1];
	const char *what = "hard link";
	int ret;

	if (j->dst_exists && S_ISREG(j->dattr.mode) &&
	    (e->to->is_rdmafs
		     ? j->dattr.ino == g->dst.ino
		     : g->dst_ino && j->dattr.ino == g->dst_ino && j->dattr.dev == g->dst_dev)) {
		stat_add(&e->stats->skipped, 1);
		return;
	}
	tmp_name(e, tname, sizeof(tname));
	ret = e->to->ops->link(e->to, &g->dst, &j->dir->dst, tname);
	if (!ret) {
		what = "rename into place";
		ret = e->to->ops->rename(e->to, &j->dir->dst, tname, j->name);
		if (ret)
			e->to->ops->unlink(e->to, &j->dir->dst, tname);
	}
	if (!ret) {
		stat_add(&e->stats->links, 1);
		return;
	}
	fail(e, j->src.path, what, ret);
}

static void run_job(struct engine *e, struct job *j)
{
	int ret = 0;

	/* links, symbolic links and special files are one call or two: they finish */
	if (j->is_link)
		job_link(e, j);
	else if (S_ISREG(j->sattr.mode))
		ret = job_regular(e, j);
	else if (S_ISLNK(j->sattr.mode))
		job_symlink(e, j);
	else
		job_special(e, j);
	if (!stopped(e, ret))
		stat_add(&e->stats->files_done, 1);
	job_free(j);
}

/* ---- threads ---------------------------------------------------------------------- */

struct worker {
	struct engine *e;
	bool takes_files;
	pthread_t thread;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct engine *e = w->e;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		struct piece *p = pop_piece_locked(e);
		struct job *j;

		if (p) {
			pthread_mutex_unlock(&e->lock);
			run_piece(e, p);
			free(p);
			pthread_mutex_lock(&e->lock);
			continue;
		}
		j = w->takes_files && !e->stop ? pop_file_locked(e) : NULL;
		if (j) {
			e->active++;
			pthread_mutex_unlock(&e->lock);
			run_job(e, j);
			pthread_mutex_lock(&e->lock);
			e->active--;
			pthread_cond_broadcast(&e->cond);
			continue;
		}
		/* stopping: the pieces of the files under way still end, in error */
		if (!e->pieces && e->active == 0 && (e->stop || (e->walk_done && !e->files)))
			break;
		pthread_cond_wait(&e->cond, &e->lock);
	}
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	free(thread_buf);
	thread_buf = NULL;
	return NULL;
}

/* ---- the walk ------------------------------------------------------------------------ */

static void queue_job(struct engine *e, struct job *j)
{
	pthread_mutex_lock(&e->lock);
	while (e->nfiles >= MAX_QUEUED_FILES && !e->stop)
		pthread_cond_wait(&e->space, &e->lock);
	if (e->stop)
		job_free(j); /* counted in files_total: left to do */
	else
		push_file_locked(e, j);
	pthread_mutex_unlock(&e->lock);
}

/*
 * Queues a non-directory: a later name of a multi-link inode waits for the
 * first name's copy.
 */
static int add_job(struct engine *e, struct dirnode *dir, const struct cp_dirent *se,
		   const struct cp_dirent *de)
{
	struct job *j = calloc(1, sizeof(*j));
	struct group *g;

	if (!j)
		return -ENOMEM;
	j->src.path = cp_path_join(dir->src.path, se->name);
	j->name = strdup(se->name);
	if (!j->src.path || !j->name) {
		job_free(j);
		return -ENOMEM;
	}
	j->src.ino = e->from->is_rdmafs ? se->attr.ino : 0;
	j->sattr = se->attr;
	j->dir = dir;
	if (de) {
		j->dst_exists = true;
		j->dattr = de->attr;
	}
	stat_add(&e->stats->files_total, 1);
	if (!S_ISREG(se->attr.mode) || se->attr.nlink < 2) {
		if (S_ISREG(se->attr.mode))
			stat_add(&e->stats->bytes_total, se->attr.size);
		queue_job(e, j);
		return 0;
	}
	pthread_mutex_lock(&e->lock);
	for (g = *group_bucket(e, se->attr.dev, se->attr.ino); g; g = g->next)
		if (g->dev == se->attr.dev && g->ino == se->attr.ino)
			break;
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (!g) {
			pthread_mutex_unlock(&e->lock);
			job_free(j);
			return -ENOMEM;
		}
		g->dev = se->attr.dev;
		g->ino = se->attr.ino;
		g->state = GROUP_PENDING;
		g->next = *group_bucket(e, g->dev, g->ino);
		*group_bucket(e, g->dev, g->ino) = g;
		j->group = g;
		pthread_mutex_unlock(&e->lock);
		stat_add(&e->stats->bytes_total, se->attr.size);
		queue_job(e, j);
		return 0;
	}
	j->is_link = true;
	j->group = g;
	if (g->state == GROUP_PENDING) {
		j->next = g->waiters;
		g->waiters = j;
		pthread_mutex_unlock(&e->lock);
	} else if (g->state == GROUP_DONE) {
		pthread_mutex_unlock(&e->lock);
		queue_job(e, j);
	} else if (e->stop) {
		/* its first name was abandoned by the stop: both are left to do */
		pthread_mutex_unlock(&e->lock);
		job_free(j);
	} else {
		pthread_mutex_unlock(&e->lock);
		fail(e, j->src.path, "hard link not made, its first name failed", -EIO);
		stat_add(&e->stats->files_done, 1);
		job_free(j);
	}
	return 0;
}

static struct dirnode *dirnode_new(struct engine *e, const char *src, uint64_t src_ino,
				   const char *dst, uint64_t dst_ino, const struct cp_attr *a,
				   bool apply)
{
	struct dirnode *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->src.path = strdup(src);
	d->dst.path = strdup(dst);
	if (!d->src.path || !d->dst.path) {
		cp_loc_free(&d->src);
		cp_loc_free(&d->dst);
		free(d);
		return NULL;
	}
	d->src.ino = src_ino;
	d->dst.ino = dst_ino;
	d->sattr = *a;
	d->apply = apply;
	d->next = e->dirs;
	e->dirs = d;
	return d;
}

/*
 * Walks one directory: removes stale temporaries in its copy, makes the
 * copies of its subdirectories (pushed on @stack) and queues the rest.
 */
static int walk_dir(struct engine *e, struct dirnode *dir, bool dst_fresh, struct dirnode ***stack,
		    size_t *depth, size_t *cap)
{
	struct cp_dir src = {0}, dst = {0};
	int ret;

	ret = e->from->ops->list(e->from, &dir->src, &src);
	if (ret) {
		fail(e, dir->src.path, "cannot list", ret);
		return 0;
	}
	if (!dst_fresh) {
		ret = e->to->ops->list(e->to, &dir->dst, &dst);
		if (ret) {
			fail(e, dir->dst.path, "cannot list", ret);
			cp_dir_free(&src);
			return 0;
		}
		for (size_t i = 0; i < dst.count; i++) {
			if (!cp_is_tmp_name(dst.ents[i].name))
				continue;
			ret = e->to->ops->unlink(e->to, &dir->dst, dst.ents[i].name);
			if (e->opts->verbose || ret)
				cp_msg("%s/%s: stale temporary of an interrupted copy %s%s",
				       dir->dst.path, dst.ents[i].name,
				       ret ? "not removed: " : "removed",
				       ret ? cp_strerror(ret) : "");
		}
	}
	for (size_t i = 0; i < src.count && !stopping(e); i++) {
		const struct cp_dirent *se = &src.ents[i];
		const struct cp_dirent *de = cp_dir_find(&dst, se->name);

		if (cp_is_tmp_name(se->name))
			continue;
		if (S_ISDIR(se->attr.mode)) {
			char *sp = cp_path_join(dir->src.path, se->name);
			char *dp = cp_path_join(dir->dst.path, se->name);
			uint64_t ino = 0;
			struct dirnode *child = NULL;
			bool fresh = false;

			ret = sp && dp ? 0 : -ENOMEM;
			if (!ret && de && !S_ISDIR(de->attr.mode)) {
				fail(e, dp, "exists and is not a directory", -EEXIST);
			} else if (!ret) {
				if (de) {
					ino = de->attr.ino;
				} else {
					ret = e->to->ops->mkdir(e->to, &dir->dst, se->name,
								&se->attr, &ino);
					fresh = true;
				}
				if (ret) {
					fail(e, dp, "cannot make directory", ret);
				} else {
					child = dirnode_new(
						e, sp, e->from->is_rdmafs ? se->attr.ino : 0, dp,
						e->to->is_rdmafs ? ino : 0, &se->attr, true);
					if (!child)
						fail(e, dp, NULL, -ENOMEM);
				}
			}
			if (child) {
				stat_add(&e->stats->dirs, 1);
				if (*depth == *cap) {
					size_t ncap = *cap ? *cap * 2 : 64;
					struct dirnode **n = realloc(*stack, ncap * sizeof(*n));

					if (n) {
						*stack = n;
						*cap = ncap;
					}
				}
				if (*depth < *cap) {
					/* the low bit of the pointer says "fresh" */
					(*stack)[(*depth)++] =
						(struct dirnode *)((uintptr_t)child | fresh);
				} else {
					fail(e, sp, NULL, -ENOMEM);
				}
			}
			free(sp);
			free(dp);
			continue;
		}
		ret = add_job(e, dir, se, de);
		if (ret)
			fail(e, se->name, NULL, ret);
	}
	cp_dir_free(&src);
	cp_dir_free(&dst);
	return 0;
}

struct walk_arg {
	struct engine *e;
	struct dirnode *root;
	bool root_fresh;
	struct job *root_job; /* a single non-directory source */
};

static void *walker_main(void *arg)
{
	struct walk_arg *wa = arg;
	struct engine *e = wa->e;
	struct dirnode **stack = NULL;
	size_t depth = 0, cap = 0;

	if (wa->root_job) {
		queue_job(e, wa->root_job);
	} else if (wa->root) {
		walk_dir(e, wa->root, wa->root_fresh, &stack, &depth, &cap);
		while (depth && !stopping(e)) {
			uintptr_t v = (uintptr_t)stack[--depth];

			walk_dir(e, (struct dirnode *)(v & ~(uintptr_t)1), v & 1, &stack, &depth,
				 &cap);
		}
	}
	free(stack);
	pthread_mutex_lock(&e->lock);
	e->walk_done = true;
	__atomic_store_n(&e->stats->walk_done, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Directory attributes, deepest first: their contents are all in place now. */
static void finish_dirs(struct engine *e)
{
	for (struct dirnode *d = e->dirs; d; d = d->next) {
		int ret;

		if (!d->apply)
			continue;
		ret = copy_xattrs(e, &d->src, &d->dst);
		if (ret) {
			fail(e, d->src.path, "xattrs", ret);
			continue;
		}
		ret = e->to->ops->set_attr(e->to, &d->dst, &d->sattr, e->opts->owner);
		if (ret)
			fail(e, d->src.path, "attributes", ret);
	}
}

static void engine_free(struct engine *e)
{
	/* what a stop left queued */
	while (e->files) {
		struct job *j = pop_file_locked(e);

		job_free(j);
	}
	while (e->dirs) {
		struct dirnode *d = e->dirs;

		e->dirs = d->next;
		cp_loc_free(&d->src);
		cp_loc_free(&d->dst);
		free(d);
	}
	for (size_t b = 0; b < GROUP_BUCKETS; b++) {
		while (e->groups[b]) {
			struct group *g = e->groups[b];

			e->groups[b] = g->next;
			while (g->waiters) {
				struct job *w = g->waiters;

				g->waiters = w->next;
				job_free(w);
			}
			cp_loc_free(&g->dst);
			free(g);
		}
	}
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	pthread_cond_destroy(&e->space);
}

/* Splits @path into a malloc()ed parent directory and a pointer to its last name. */
static int split_path(const char *path, char **parent, const char **name)
{
	const char *slash = strrchr(path, '/');

	if (!slash || !slash[1])
		return -EINVAL;
	*name = slash + 1;
	*parent = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	return *parent ? 0 : -ENOMEM;
}

int cp_run(const struct cp_options *opts, struct cp_side *from, struct cp_loc *src,
	   struct cp_side *to, struct cp_loc *dst, struct cp_stats *stats)
{
	struct engine e = {.opts = opts, .from = from, .to = to, .stats = stats};
	struct walk_arg wa = {.e = &e};
	struct cp_attr sattr, dattr, pattr;
	struct worker *workers = NULL;
	char *dparent = NULL, *sparent = NULL;
	const char *dname = NULL, *sname = NULL;
	struct cp_loc ploc = {0};
	bool dst_exists;
	unsigned nthreads = opts->jobs + opts->inflight, started = 0;
	pthread_t walker;
	int ret;

	pthread_mutex_init(&e.lock, NULL);
	pthread_cond_init(&e.cond, NULL);
	pthread_cond_init(&e.space, NULL);
	from->owner = to->owner = opts->owner;
	e.start = cp_now();
	pthread_mutex_lock(&running_lock);
	running = &e;
	e.stop = stop_asked;
	pthread_mutex_unlock(&running_lock);

	ret = from->ops->stat(from, src, &sattr);
	if (ret) {
		fail(&e, src->path, "source", ret);
		goto out_free;
	}
	ret = to->ops->stat(to, dst, &dattr);
	if (ret && ret != -ENOENT) {
		fail(&e, dst->path, "destination", ret);
		goto out_free;
	}
	dst_exists = ret == 0;
	/* a non-directory copied to an existing directory goes inside it, as with cp */
	if (dst_exists && S_ISDIR(dattr.mode) && !S_ISDIR(sattr.mode)) {
		char *inside;

		ret = split_path(src->path, &sparent, &sname);
		if (ret) {
			fail(&e, src->path, "source", ret);
			goto out_free;
		}
		inside = cp_path_join(dst->path, sname);
		if (!inside) {
			ret = -ENOMEM;
			goto out_free;
		}
		free(dst->path);
		dst->path = inside;
		dst->ino = 0;
		ret = to->ops->stat(to, dst, &dattr);
		if (ret && ret != -ENOENT) {
			fail(&e, dst->path, "destination", ret);
			goto out_free;
		}
		dst_exists = ret == 0;
	}
	if (dst_exists && S_ISDIR(sattr.mode) != S_ISDIR(dattr.mode)) {
		ret = -EEXIST;
		fail(&e, dst->path,
		     S_ISDIR(sattr.mode) ? "exists and is not a directory"
					 : "exists and is a directory",
		     ret);
		goto out_free;
	}
	if (strcmp(dst->path, "/") != 0) {
		ret = split_path(dst->path, &dparent, &dname);
		if (ret) {
			fail(&e, dst->path, "destination", ret);
			goto out_free;
		}
		ploc.path = dparent;
		ret = to->ops->stat(to, &ploc, &pattr);
		if (!ret && !S_ISDIR(pattr.mode))
			ret = -ENOTDIR;
		if (ret) {
			fail(&e, dparent, "destination directory", ret);
			goto out_free;
		}
	}

	if (S_ISDIR(sattr.mode)) {
		uint64_t ino = dst_exists ? dattr.ino : 0;

		if (!dst_exists) {
			ret = to->ops->mkdir(to, &ploc, dname, &sattr, &ino);
			if (ret) {
				fail(&e, dst->path, "cannot make directory", ret);
				goto out_free;
			}
		}
		wa.root = dirnode_new(&e, src->path, from->is_rdmafs ? src->ino : 0, dst->path,
				      to->is_rdmafs ? ino : 0, &sattr, true);
		wa.root_fresh = !dst_exists;
		ret = wa.root ? 0 : -ENOMEM;
		if (!ret)
			stat_add(&stats->dirs, 1);
	} else {
		struct cp_dirent se = {.name = (char *)dname, .attr = sattr};
		struct cp_dirent de = {.name = (char *)dname, .attr = dattr};
		struct dirnode *pd;

		ret = sparent ? 0 : split_path(src->path, &sparent, &sname);
		if (!ret) {
			/* the parent's attributes are not ours to change */
			pd = dirnode_new(&e, sparent, 0, dparent, ploc.ino, &pattr, false);
			ret = pd ? 0 : -ENOMEM;
		}
		if (!ret) {
			struct job *j = calloc(1, sizeof(*j));

			ret = -ENOMEM;
			if (j) {
				j->src.path = strdup(src->path);
				j->src.ino = src->ino;
				j->name = strdup(dname);
				j->sattr = se.attr;
				j->dir = pd;
				j->dst_exists = dst_exists;
				j->dattr = de.attr;
				ret = j->src.path && j->name ? 0 : -ENOMEM;
				if (ret)
					job_free(j);
				else
					wa.root_job = j;
			}
			stat_add(&stats->files_total, 1);
			if (S_ISREG(sattr.mode))
				stat_add(&stats->bytes_total, sattr.size);
		}
	}
	if (ret) {
		fail(&e, src->path, NULL, ret);
		goto out_free;
	}

	workers = calloc(nthreads, sizeof(*workers));
	if (!workers) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (; started < nthreads; started++) {
		workers[started].e = &e;
		workers[started].takes_files = started < opts->jobs;
		ret = -pthread_create(&workers[started].thread, NULL, worker_main,
				      &workers[started]);
		if (ret)
			break;
	}
	if (!ret)
		ret = -pthread_create(&walker, NULL, walker_main, &wa);
	if (ret) {
		/* let the started workers end: nothing will come */
		pthread_mutex_lock(&e.lock);
		e.walk_done = true;
		pthread_cond_broadcast(&e.cond);
		pthread_mutex_unlock(&e.lock);
		job_free(wa.root_job);
	} else {
		pthread_join(walker, NULL);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(workers[i].thread, NULL);
	if (ret) {
		fail(&e, src->path, "cannot start threads", ret);
		goto out_free;
	}
	/* stopped: directories keep the modes they were made with, as after a kill */
	if (stopping(&e)) {
		ret = -EINTR;
		goto out_free;
	}
	finish_dirs(&e);
	/* exit 0 promises a copy that survives a power loss */
	ret = e.to->ops->sync(e.to, dst);
	if (ret)
		fail(&e, dst->path, "flushing the copy to disk", ret);
	ret = 0;

out_free:
	pthread_mutex_lock(&running_lock);
	running = NULL;
	pthread_mutex_unlock(&running_lock);
	free(workers);
	free(dparent);
	free(sparent);
	engine_free(&e);
	if (!ret && __atomic_load_n(&stats->failed, __ATOMIC_RELAXED))
		ret = -EIO;
	return ret;
}
