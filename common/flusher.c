// SPDX-License-Identifier: GPL-2.0-or-later
/* A thread that flushes a store in the background (rdmafs_common.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "rdmafs_common.h"

struct rdmafs_flusher {
	unsigned interval_ms;
	bool periodic;
	rdmafs_flush_cb flush;
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* on CLOCK_MONOTONIC: a note, a kick, or stop */
	bool due;	     /* noted since the last flush began */
	bool kicked;	     /* rdmafs_flusher_kick(): a call at once */
	bool flushing;	     /* a call of @flush runs */
	bool stopping;
	struct timespec due_at; /* when the first of those notes must be flushed */
	/* counts.notes when the last flush that succeeded began; UINT64_MAX: none yet */
	uint64_t flushed;
	struct rdmafs_flusher_counts counts;
};

static void add_ms(struct timespec *ts, unsigned ms)
{
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void deadline(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	add_ms(ts, ms);
}

/* Calls the flush, lock held across all but the call: every note before it is covered. */
static int flush_locked(struct rdmafs_flusher *f)
{
	uint64_t upto = f->counts.notes;
	int ret;

	f->flushing = true;
	pthread_mutex_unlock(&f->lock);
	ret = f->flush(f->arg);
	pthread_mutex_lock(&f->lock);
	f->flushing = false;
	f->counts.flushes++;
	if (ret)
		f->counts.errors++;
	else if (f->flushed == UINT64_MAX || upto > f->flushed)
		f->flushed = upto;
	return ret;
}

/* Waits, lock held, for stop, a kick or @until; false once stopping. */
static bool wait_until(struct rdmafs_flusher *f, const struct timespec *until)
{
	while (!f->stopping && !f->kicked &&
	       pthread_cond_timedwait(&f->wake, &f->lock, until) != ETIMEDOUT)
		;
	return !f->stopping;
}

static void *flusher_main(void *arg)
{
	struct rdmafs_flusher *f = arg;
	struct timespec until;
	bool scheduled = false; /* periodic: @until is a call not made yet */

	pthread_mutex_lock(&f->lock);
	deadline(&until, 0);
	for (;;) {
		if (f->periodic) {
			/* a fixed schedule: a slow flush or a kick does not move the next one */
			if (!scheduled)
				add_ms(&until, f->interval_ms);
			scheduled = true;
			if (!wait_until(f, &until))
				break;
			if (!f->kicked)
				scheduled = false;
		} else {
			while (!f->due && !f->kicked && !f->stopping)
				pthread_cond_wait(&f->wake, &f->lock);
			if (!f->due && !f->kicked)
				break;
			until = f->due_at;
			if (!f->kicked)
				wait_until(f, &until); /* stopping: flush what is due now */
			if (!f->kicked && f->flushed == f->counts.notes) {
				f->due = false; /* rdmafs_flusher_sync() covered the notes */
				continue;
			}
		}
		f->kicked = false;
		f->due = false;
		/* a failed flush is due again: the next one may succeed */
		if (flush_locked(f) && !f->periodic && !f->stopping && !f->due) {
			f->due = true;
			deadline(&f->due_at, f->interval_ms);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int rdmafs_flusher_start(unsigned interval_ms, bool periodic, rdmafs_flush_cb flush, void *arg,
			 struct rdmafs_flusher **out)
{
	struct rdmafs_flusher *f = calloc(1, sizeof(*f));
	pthread_condattr_t attr;
	int ret;

	if (!f)
		return -ENOMEM;
	f->interval_ms = interval_ms;
	f->periodic = periodic;
	f->flush = flush;
	f->arg = arg;
	f->flushed = UINT64_MAX;
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&f->wake, &attr);
	pthread_condattr_destroy(&attr);
	ret = -pthread_create(&f->thread, NULL, flusher_main, f);
	if (ret) {
		pthread_cond_destroy(&f->wake);
		pthread_mutex_destroy(&f->lock);
		free(f);
		return ret;
	}
	*out = f;
	return 0;
}

void rdmafs_flusher_note(struct rdmafs_flusher *f)
{
	pthread_mutex_lock(&f->lock);
	f->counts.notes++;
	if (!f->due) {
		f->due = true;
		deadline(&f->due_at, f->interval_ms);
		pthread_cond_signal(&f->wake);
	}
	pthread_mutex_unlock(&f->lock);
}

void rdmafs_flusher_kick(struct rdmafs_flusher *f)
{
	pthread_mutex_lock(&f->lock);
	f->counts.kicks++;
	if (!f->flushing && !f->kicked) {
		f->kicked = true;
		pthread_cond_signal(&f->wake);
	}
	pthread_mutex_unlock(&f->lock);
}

int rdmafs_flusher_sync(struct rdmafs_flusher *f)
{
	int ret = 0;

	pthread_mutex_lock(&f->lock);
	if (f->flushed != f->counts.notes)
		ret = flush_locked(f);
	pthread_mutex_unlock(&f->lock);
	return ret;
}

void rdmafs_flusher_counts(struct rdmafs_flusher *f, struct rdmafs_flusher_counts *out)
{
	pthread_mutex_lock(&f->lock);
	*out = f->counts;
	pthread_mutex_unlock(&f->lock);
}

void rdmafs_flusher_stop(struct rdmafs_flusher *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stopping = true;
	pthread_cond_signal(&f->wake);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	pthread_cond_destroy(&f->wake);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
