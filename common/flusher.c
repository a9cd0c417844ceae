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
	int (*flush)(void *arg);
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* on CLOCK_MONOTONIC: a note, or stop */
	bool due;	     /* noted since the last flush began */
	bool stopping;
	struct timespec due_at; /* when the first of those notes must be flushed */
	struct rdmafs_flusher_counts counts;
};

static void deadline(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Waits, lock held, for stop or @until; false once stopping. */
static bool wait_until(struct rdmafs_flusher *f, const struct timespec *until)
{
	while (!f->stopping && pthread_cond_timedwait(&f->wake, &f->lock, until) != ETIMEDOUT)
		;
	return !f->stopping;
}

static void *flusher_main(void *arg)
{
	struct rdmafs_flusher *f = arg;
	struct timespec until;
	int ret;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		if (f->periodic) {
			deadline(&until, f->interval_ms);
			if (!wait_until(f, &until))
				break;
		} else {
			while (!f->due && !f->stopping)
				pthread_cond_wait(&f->wake, &f->lock);
			if (!f->due)
				break;
			until = f->due_at;
			wait_until(f, &until); /* stopping: flush what is due now */
		}
		f->due = false;
		pthread_mutex_unlock(&f->lock);
		ret = f->flush(f->arg);
		pthread_mutex_lock(&f->lock);
		f->counts.flushes++;
		if (ret)
			f->counts.errors++;
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int rdmafs_flusher_start(unsigned interval_ms, bool periodic, int (*flush)(void *arg), void *arg,
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
