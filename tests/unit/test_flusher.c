// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The flusher's promises (rdmafs_common.h, rdmafs_flusher_*): a note is
 * flushed by a call that begins after it, a failed call is made again,
 * rdmafs_flusher_sync() returns once its notes are covered, a noted flusher
 * flushes a due note at stop and a periodic one does not, and a kick makes a
 * call at once in either mode, unless a call runs (then it is dropped).
 *
 * No check here measures time: each waits for the calls it expects (a
 * semaphore, bounded at HANG_SEC only so that a lost call fails the test
 * with a message instead of hanging it), and the intervals that must not
 * elapse during a test are an hour long.
 */
#include <errno.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "rdmafs_common.h"

#define HANG_SEC 60
#define HOUR_MS	 3600000u

struct calls {
	sem_t entered;	/* posted as each call begins */
	sem_t release;	/* a call waits for it when @hold */
	bool hold;	/* calls wait for @release */
	int fail_first; /* the first call returns it (0: none) */
	unsigned made;	/* calls begun */
};

static int flush_cb(void *arg)
{
	struct calls *c = arg;
	unsigned n = __atomic_add_fetch(&c->made, 1, __ATOMIC_SEQ_CST);

	sem_post(&c->entered);
	if (__atomic_load_n(&c->hold, __ATOMIC_SEQ_CST))
		sem_wait(&c->release);
	return n == 1 ? c->fail_first : 0;
}

static void calls_init(struct calls *c)
{
	memset(c, 0, sizeof(*c));
	sem_init(&c->entered, 0, 0);
	sem_init(&c->release, 0, 0);
}

static void calls_destroy(struct calls *c)
{
	sem_destroy(&c->entered);
	sem_destroy(&c->release);
}

/* Waits for the next call to begin: false when none did within HANG_SEC. */
static bool call_began(struct calls *c)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HANG_SEC;
	while (sem_timedwait(&c->entered, &until))
		if (errno != EINTR)
			return false;
	return true;
}

static struct rdmafs_flusher_counts counts_of(struct rdmafs_flusher *f)
{
	struct rdmafs_flusher_counts n;

	rdmafs_flusher_counts(f, &n);
	return n;
}

/* Waits for @n calls to have returned: false when they did not within HANG_SEC. */
static bool calls_returned(struct rdmafs_flusher *f, uint64_t n)
{
	const struct timespec tick = {.tv_nsec = 1000000};

	for (long i = 0; i < HANG_SEC * 1000L; i++) {
		if (counts_of(f).flushes >= n)
			return true;
		nanosleep(&tick, NULL);
	}
	return false;
}

/* A note is flushed by a call that begins after it; sync then has nothing to do. */
static void test_note_flushed(void **state)
{
	struct rdmafs_flusher *f;
	struct calls c;

	(void)state;
	calls_init(&c);
	assert_int_equal(rdmafs_flusher_start(10, false, flush_cb, &c, &f), 0);
	rdmafs_flusher_note(f);
	assert_true(call_began(&c));
	/* sync does not wait for a call in flight: once it returned, the note is covered */
	assert_true(calls_returned(f, 1));
	assert_int_equal(rdmafs_flusher_sync(f), 0);
	assert_int_equal(counts_of(f).notes, 1);
	rdmafs_flusher_stop(f);
	assert_int_equal(c.made, 1);
	calls_destroy(&c);
}

/* sync makes the call itself when a note is not covered yet, and returns its error. */
static void test_sync_covers_notes(void **state)
{
	struct rdmafs_flusher *f;
	struct calls c;

	(void)state;
	calls_init(&c);
	c.fail_first = -EIO;
	assert_int_equal(rdmafs_flusher_start(HOUR_MS, false, flush_cb, &c, &f), 0);
	/* before any success, the first sync flushes whatever the store held at start */
	assert_int_equal(rdmafs_flusher_sync(f), -EIO);
	assert_int_equal(rdmafs_flusher_sync(f), 0);
	assert_int_equal(rdmafs_flusher_sync(f), 0); /* covered: no call */
	assert_int_equal(c.made, 2);
	rdmafs_flusher_note(f);
	assert_int_equal(rdmafs_flusher_sync(f), 0);
	assert_int_equal(c.made, 3);
	assert_int_equal(counts_of(f).errors, 1);
	assert_int_equal(counts_of(f).flushes, 3);
	/* the note was covered by sync's call: nothing is due at stop */
	rdmafs_flusher_stop(f);
	assert_int_equal(c.made, 3);
	calls_destroy(&c);
}

/* A noted call that fails is made again. */
static void test_failed_call_again(void **state)
{
	struct rdmafs_flusher *f;
	struct calls c;

	(void)state;
	calls_init(&c);
	c.fail_first = -EIO;
	assert_int_equal(rdmafs_flusher_start(10, false, flush_cb, &c, &f), 0);
	rdmafs_flusher_note(f);
	assert_true(call_began(&c));
	assert_true(call_began(&c));
	/* counted when the first returned, before the second began */
	assert_int_equal(counts_of(f).errors, 1);
	rdmafs_flusher_stop(f);
	assert_int_equal(c.made, 2);
	calls_destroy(&c);
}

/* Stop: a noted flusher makes the call a due note asks for; a periodic one makes none. */
static void test_stop(void **state)
{
	struct rdmafs_flusher *f;
	struct calls c;

	(void)state;
	calls_init(&c);
	assert_int_equal(rdmafs_flusher_start(HOUR_MS, false, flush_cb, &c, &f), 0);
	rdmafs_flusher_note(f);
	rdmafs_flusher_stop(f);
	assert_int_equal(c.made, 1);
	calls_destroy(&c);

	calls_init(&c);
	assert_int_equal(rdmafs_flusher_start(HOUR_MS, true, flush_cb, &c, &f), 0);
	rdmafs_flusher_note(f);
	rdmafs_flusher_stop(f);
	assert_int_equal(c.made, 0);
	calls_destroy(&c);
}

/* A kick makes a call at once, in either mode, with the interval an hour away. */
static void test_kick(void **state)
{
	struct rdmafs_flusher *f;
	struct calls c;

	(void)state;
	for (int periodic = 0; periodic <= 1; periodic++) {
		calls_init(&c);
		assert_int_equal(rdmafs_flusher_start(HOUR_MS, periodic, flush_cb, &c, &f), 0);
		rdmafs_flusher_kick(f);
		assert_true(call_began(&c));
		/* and again once it returned (a kick during it is dropped): a call each time */
		assert_true(calls_returned(f, 1));
		rdmafs_flusher_kick(f);
		assert_true(call_began(&c));
		assert_int_equal(counts_of(f).kicks, 2);
		rdmafs_flusher_stop(f);
		assert_int_equal(c.made, 2);
		calls_destroy(&c);
	}
}

/*
 * A kick while a call runs is dropped: a noted flusher would make a pending
 * kick's call at stop, so one call in all says it was.
 */
static void test_kick_during_call(void **state)
{
	struct rdmafs_flusher *f;
	struct calls c;

	(void)state;
	calls_init(&c);
	c.hold = true;
	assert_int_equal(rdmafs_flusher_start(HOUR_MS, false, flush_cb, &c, &f), 0);
	rdmafs_flusher_kick(f);
	assert_true(call_began(&c));
	rdmafs_flusher_kick(f); /* the call waits for c.release: it runs */
	__atomic_store_n(&c.hold, false, __ATOMIC_SEQ_CST);
	sem_post(&c.release);
	rdmafs_flusher_stop(f);
	assert_int_equal(c.made, 1);
	calls_destroy(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_note_flushed),
		cmocka_unit_test(test_sync_covers_notes),
		cmocka_unit_test(test_failed_call_again),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_kick),
		cmocka_unit_test(test_kick_during_call),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
