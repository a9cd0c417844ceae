// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The chunk index's journal (storage-daemon/journal.c, daemon_i.h): each
 * promise of its header. A change appended is found by a lookup (the newest
 * per key, removals included) and read back by a replay in the order
 * written; a checkpoint hands the commit one change per key and, once that
 * commits, forgets them while the file keeps their records, and a commit
 * that fails keeps everything; a settle checkpoints, flushes, and only then
 * empties the file, whose next records follow the flush; a replay takes the
 * records only when they follow a flush the index holds (at or before its
 * newest transaction), and stops at the first damaged or cut record or at
 * one of another base; a discard forgets what is held; an append the file
 * system refuses leaves nothing of itself, in the file or in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "daemon_i.h"
#include "check.h"

#define FILE_NAME "index.journal"

struct fixture {
	char dir[256];
	int dir_fd;
	struct journal *j;
};

/* What a replay or a commit saw, in order. */
struct seen {
	unsigned n, flushes;
	uint8_t key[16][JOURNAL_KEY_LEN];
	uint32_t len[16];
	uint8_t first[16]; /* the value's first byte */
	bool removed[16];
	int fail;	   /* returned by the commit */
	int flush_fail;	   /* returned by the flush */
	uint64_t base;	   /* the commit's transaction id */
	uint64_t flushed;  /* the flush's */
	unsigned notes_at; /* how many changes the commit had seen at the flush */
};

static void key_of(unsigned k, uint8_t *key)
{
	memset(key, 0, JOURNAL_KEY_LEN);
	key[15] = (uint8_t)k;
}

static void value_of(unsigned k, unsigned gen, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(k * 16 + gen + i);
}

static void append(struct journal *j, unsigned k, unsigned gen, size_t len)
{
	uint8_t key[JOURNAL_KEY_LEN], value[2048];

	key_of(k, key);
	value_of(k, gen, value, len);
	assert_int_equal(journal_append(j, key, value, len), 0);
}

static void note(struct seen *s, const uint8_t *key, const void *value, uint32_t len)
{
	assert_true(s->n < 16);
	memcpy(s->key[s->n], key, JOURNAL_KEY_LEN);
	s->removed[s->n] = value == NULL;
	s->len[s->n] = len;
	s->first[s->n] = value && len ? *(const uint8_t *)value : 0;
	s->n++;
}

static int replay_note(void *arg, const uint8_t *key, const void *value, uint32_t len)
{
	note(arg, key, value, len);
	return 0;
}

static int commit_note(void *arg, struct journal_change *const *changes, size_t n, uint64_t *base)
{
	struct seen *s = arg;

	for (size_t i = 0; i < n; i++)
		note(s, changes[i]->key, changes[i]->value,
		     changes[i]->value ? changes[i]->len : 0);
	*base = s->base;
	return s->fail;
}

static int flush_note(void *arg, uint64_t *base)
{
	struct seen *s = arg;

	s->flushes++;
	s->notes_at = s->n;
	*base = s->flushed;
	return s->flush_fail;
}

static off_t file_size(struct fixture *fx)
{
	struct stat sb;

	assert_int_equal(fstatat(fx->dir_fd, FILE_NAME, &sb, 0), 0);
	return sb.st_size;
}

/* 1: held with @gen's value of @len bytes; 0: not held; 2: held as removed. */
static int held(struct journal *j, unsigned k, unsigned gen, size_t len)
{
	uint8_t key[JOURNAL_KEY_LEN], want[2048], got[2048];
	uint32_t got_len;
	int ret;

	key_of(k, key);
	ret = journal_lookup(j, key, got, sizeof(got), &got_len);
	if (ret != 1)
		return ret;
	if (got_len == JOURNAL_DELETED)
		return 2;
	value_of(k, gen, want, len);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, want, len);
	return 1;
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx || check_tmp_template(fx->dir, sizeof(fx->dir), "rdmafs-journal") ||
	    !mkdtemp(fx->dir))
		return -1;
	fx->dir_fd = open(fx->dir, O_RDONLY | O_DIRECTORY);
	if (fx->dir_fd < 0 || journal_open(fx->dir_fd, FILE_NAME, &fx->j))
		return -1;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	journal_close(fx->j);
	unlinkat(fx->dir_fd, FILE_NAME, 0);
	close(fx->dir_fd);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

/*
 * Reopens the file as a new daemon would, and replays it into @s for an
 * index at transaction @base; *@stale gets the base of a record left out.
 */
static void reopen_and_replay_at(struct fixture *fx, uint64_t base, struct seen *s,
				 uint64_t *records, uint64_t *stale)
{
	journal_close(fx->j);
	assert_int_equal(journal_open(fx->dir_fd, FILE_NAME, &fx->j), 0);
	memset(s, 0, sizeof(*s));
	assert_int_equal(journal_replay(fx->j, base, replay_note, s, records, stale), 0);
}

/* Replays the file for an index at @newest into @s: @want records, @want_stale left out. */
static void replay_expects(struct fixture *fx, uint64_t newest, struct seen *s, uint64_t want,
			   uint64_t want_stale)
{
	uint64_t records, stale;

	reopen_and_replay_at(fx, newest, s, &records, &stale);
	assert_int_equal(records, want);
	assert_int_equal(stale, want_stale);
}

/* The same, for exactly one record: key @k's first value. */
static void replay_expects_one(struct fixture *fx, uint64_t newest, unsigned k)
{
	struct seen s;

	replay_expects(fx, newest, &s, 1, 0);
	assert_int_equal(s.first[0], (uint8_t)(k * 16 + 1));
}

/* The same for a journal that no checkpoint emptied yet (base 0). */
static void reopen_and_replay(struct fixture *fx, struct seen *s, uint64_t *records)
{
	uint64_t stale;

	reopen_and_replay_at(fx, 0, s, records, &stale);
	assert_int_equal(stale, 0);
}

static void test_lookup_holds_the_newest(void **state)
{
	struct fixture *fx = *state;
	uint8_t key[JOURNAL_KEY_LEN];

	assert_int_equal(held(fx->j, 1, 0, 0), 0);
	append(fx->j, 1, 1, 100);
	append(fx->j, 2, 1, 1000);
	append(fx->j, 1, 2, 300);
	key_of(2, key);
	assert_int_equal(journal_append(fx->j, key, NULL, 0), 0);
	assert_int_equal(held(fx->j, 1, 2, 300), 1);
	assert_int_equal(held(fx->j, 2, 0, 0), 2);
	assert_int_equal(held(fx->j, 3, 0, 0), 0);
	assert_int_equal(journal_records(fx->j), 4);
	/* a value longer than the caller's room is an error, not a cut copy */
	uint8_t small[8];
	uint32_t len;

	key_of(1, key);
	assert_int_equal(journal_lookup(fx->j, key, small, sizeof(small), &len), -EIO);
}

static void test_checkpoint_hands_one_change_per_key(void **state)
{
	struct fixture *fx = *state;
	struct seen s = {0};
	uint8_t key[JOURNAL_KEY_LEN];

	off_t size;

	append(fx->j, 1, 1, 100);
	append(fx->j, 2, 1, 200);
	append(fx->j, 1, 2, 300);
	key_of(2, key);
	assert_int_equal(journal_append(fx->j, key, NULL, 0), 0);
	size = file_size(fx);
	assert_true(size > 0);

	assert_int_equal(journal_checkpoint(fx->j, commit_note, &s), 0);
	assert_int_equal(s.n, 2);
	key_of(1, key);
	assert_memory_equal(s.key[0], key, JOURNAL_KEY_LEN);
	assert_false(s.removed[0]);
	assert_int_equal(s.len[0], 300);
	assert_int_equal(s.first[0], (uint8_t)(1 * 16 + 2));
	key_of(2, key);
	assert_memory_equal(s.key[1], key, JOURNAL_KEY_LEN);
	assert_true(s.removed[1]);

	assert_int_equal(held(fx->j, 1, 0, 0), 0);
	assert_int_equal(held(fx->j, 2, 0, 0), 0);
	assert_int_equal(journal_records(fx->j), 0);
	/* the records stay until a flush of the index holds them (journal_settle()) */
	assert_int_equal(file_size(fx), size);
	assert_int_equal((off_t)journal_bytes(fx->j), size);
	/* nothing held: the commit is not called */
	memset(&s, 0, sizeof(s));
	assert_int_equal(journal_checkpoint(fx->j, commit_note, &s), 0);
	assert_int_equal(s.n, 0);
}

static void test_failed_commit_keeps_everything(void **state)
{
	struct fixture *fx = *state;
	struct seen s = {.fail = -ENOSPC};
	off_t size;

	append(fx->j, 1, 1, 100);
	append(fx->j, 2, 1, 200);
	size = file_size(fx);
	assert_int_equal(journal_checkpoint(fx->j, commit_note, &s), -ENOSPC);
	assert_int_equal(held(fx->j, 1, 1, 100), 1);
	assert_int_equal(held(fx->j, 2, 1, 200), 1);
	assert_int_equal(journal_records(fx->j), 2);
	assert_int_equal(file_size(fx), size);

	s = (struct seen){0};
	assert_int_equal(journal_checkpoint(fx->j, commit_note, &s), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(file_size(fx), size);
}

/*
 * A settle commits what is held, then flushes, then empties the file; a
 * failed flush keeps the file (its records are in no flushed index yet),
 * and so does a failed commit, before any flush.
 */
static void test_settle_empties_after_the_flush(void **state)
{
	struct fixture *fx = *state;
	struct seen s = {.flush_fail = -EIO, .base = 5, .flushed = 5};
	off_t size;

	append(fx->j, 1, 1, 100);
	append(fx->j, 2, 1, 200);
	size = file_size(fx);
	assert_int_equal(journal_settle(fx->j, commit_note, flush_note, &s), -EIO);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.flushes, 1);
	assert_int_equal(s.notes_at, 2); /* the flush came after the commit */
	assert_int_equal(journal_records(fx->j), 0);
	assert_int_equal(file_size(fx), size);

	s = (struct seen){.fail = -ENOSPC, .flushed = 9};
	append(fx->j, 3, 1, 100);
	assert_int_equal(journal_settle(fx->j, commit_note, flush_note, &s), -ENOSPC);
	assert_int_equal(s.flushes, 0);
	assert_int_equal(held(fx->j, 3, 1, 100), 1);
	assert_true(file_size(fx) > size);

	s = (struct seen){.base = 8, .flushed = 9};
	assert_int_equal(journal_settle(fx->j, commit_note, flush_note, &s), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.flushes, 1);
	assert_int_equal(file_size(fx), 0);
	assert_int_equal(journal_bytes(fx->j), 0);
	/* the next records follow the flush's transaction */
	append(fx->j, 4, 1, 100);
	replay_expects_one(fx, 9, 4);
	replay_expects(fx, 8, &s, 0, 9);
}

static void test_replay_in_written_order(void **state)
{
	struct fixture *fx = *state;
	struct seen s;
	uint64_t records;
	uint8_t key[JOURNAL_KEY_LEN];

	append(fx->j, 5, 1, 40);
	append(fx->j, 6, 1, 1500);
	key_of(5, key);
	assert_int_equal(journal_append(fx->j, key, NULL, 0), 0);
	append(fx->j, 5, 3, 60);

	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 4);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.len[0], 40);
	assert_int_equal(s.len[1], 1500);
	assert_int_equal(s.first[1], (uint8_t)(6 * 16 + 1));
	assert_true(s.removed[2]);
	assert_int_equal(s.len[3], 60);
	assert_int_equal(s.first[3], (uint8_t)(5 * 16 + 3));
	/* a replay holds nothing in memory and keeps the file until the discard */
	assert_int_equal(held(fx->j, 5, 0, 0), 0);
	assert_true(file_size(fx) > 0);
	assert_int_equal(journal_discard(fx->j, 0), 0);
	assert_int_equal(file_size(fx), 0);
	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 0);
}

static void test_replay_needs_its_base(void **state)
{
	struct fixture *fx = *state;
	struct seen s = {.base = 6, .flushed = 7};

	append(fx->j, 1, 1, 100);
	assert_int_equal(journal_settle(fx->j, commit_note, flush_note, &s), 0);
	append(fx->j, 2, 1, 100);
	append(fx->j, 3, 1, 100);
	/* the index at the flush's transaction (a power loss returned it there): both */
	replay_expects(fx, 7, &s, 2, 0);
	/* past it (a kill -9 after checkpoints that applied some): both again */
	replay_expects(fx, 9, &s, 2, 0);
	/* before it (the index lost that flush): none */
	replay_expects(fx, 6, &s, 0, 7);
	assert_int_equal(s.n, 0);
}

/* A settle whose flush waits at a gate, with a lookup and an append on other threads. */
struct gated {
	struct journal *j;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool in_flush, open, looked, appended;
	int lookup;
};

static int gated_flush(void *arg, uint64_t *base)
{
	struct gated *g = arg;

	pthread_mutex_lock(&g->lock);
	g->in_flush = true;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	*base = 11;
	return 0;
}

static int commit_none(void *arg, struct journal_change *const *changes, size_t n, uint64_t *base)
{
	*base = 10;
	return 0;
}

static void *settle_main(void *arg)
{
	struct gated *g = arg;

	assert_int_equal(journal_settle(g->j, commit_none, gated_flush, g), 0);
	return NULL;
}

static void *lookup_main(void *arg)
{
	struct gated *g = arg;
	int ret = held(g->j, 1, 1, 100);

	pthread_mutex_lock(&g->lock);
	g->lookup = ret;
	g->looked = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

static void *append_main(void *arg)
{
	struct gated *g = arg;

	append(g->j, 2, 1, 100);
	pthread_mutex_lock(&g->lock);
	g->appended = true;
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/*
 * A settle's flush stops appends, not lookups: a lookup answers while the
 * flush waits (nothing is held then: everything is in the index), and an
 * append made meanwhile lands after the truncation, in the emptied file,
 * following the flush (10 s at most for the lookup, then the test fails).
 */
static void test_settle_flush_stops_appends_only(void **state)
{
	struct fixture *fx = *state;
	struct gated g = {
		.j = fx->j, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct timespec until;
	pthread_t ts, tl, ta;
	bool looked;

	append(fx->j, 1, 1, 100);
	assert_int_equal(pthread_create(&ts, NULL, settle_main, &g), 0);
	pthread_mutex_lock(&g.lock);
	while (!g.in_flush)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);

	assert_int_equal(pthread_create(&tl, NULL, lookup_main, &g), 0);
	assert_int_equal(pthread_create(&ta, NULL, append_main, &g), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&g.lock);
	while (!g.looked && pthread_cond_timedwait(&g.cond, &g.lock, &until) == 0)
		;
	looked = g.looked;
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(ts, NULL);
	pthread_join(tl, NULL);
	pthread_join(ta, NULL);
	assert_true(looked);
	assert_int_equal(g.lookup, 0); /* checkpointed: in the index, no longer held */
	assert_true(g.appended);
	/* the append is the file's one record, after the flush */
	replay_expects_one(fx, 11, 2);
}

/*
 * A settle's truncation the disk never got, under the records written after
 * it: the replay takes the new records and stops at the first old one (its
 * base is another), which the flush before the truncation holds.
 */
static void test_replay_stops_at_another_base(void **state)
{
	struct fixture *fx = *state;
	struct seen s = {.flushed = 3};
	char old[4096];
	ssize_t len;
	off_t one;
	int fd;

	assert_int_equal(journal_settle(fx->j, commit_note, flush_note, &s), 0);
	append(fx->j, 1, 1, 100);
	one = file_size(fx);
	append(fx->j, 2, 1, 100);
	append(fx->j, 3, 1, 100);
	fd = openat(fx->dir_fd, FILE_NAME, O_RDWR);
	assert_true(fd >= 0);
	len = pread(fd, old, sizeof(old), 0);
	assert_int_equal(len, 3 * one);
	s = (struct seen){.flushed = 5};
	assert_int_equal(journal_settle(fx->j, commit_note, flush_note, &s), 0);
	append(fx->j, 4, 1, 100); /* as long as each old record */
	assert_int_equal(file_size(fx), one);
	/* the old records after the new one, as if the truncation never happened */
	assert_int_equal(pwrite(fd, old + one, (size_t)(len - one), one), len - one);
	close(fd);
	replay_expects_one(fx, 5, 4);
}

static void test_discard_forgets_what_is_held(void **state)
{
	struct fixture *fx = *state;
	struct seen s;
	uint64_t records, stale;

	append(fx->j, 1, 1, 100);
	append(fx->j, 2, 1, 100);
	assert_int_equal(journal_discard(fx->j, 3), 0);
	assert_int_equal(held(fx->j, 1, 0, 0), 0);
	assert_int_equal(held(fx->j, 2, 0, 0), 0);
	assert_int_equal(journal_records(fx->j), 0);
	assert_int_equal(file_size(fx), 0);
	/* what comes next follows transaction 3 */
	append(fx->j, 4, 1, 100);
	reopen_and_replay_at(fx, 3, &s, &records, &stale);
	assert_int_equal(records, 1);
	assert_int_equal(stale, 0);
}

static void test_replay_stops_at_damage(void **state)
{
	struct fixture *fx = *state;
	struct seen s;
	uint64_t records;
	off_t one, two;
	uint8_t byte;

	append(fx->j, 1, 1, 100);
	one = file_size(fx);
	append(fx->j, 2, 1, 100);
	two = file_size(fx);
	append(fx->j, 3, 1, 100);
	journal_close(fx->j);
	fx->j = NULL;

	/* a flipped byte in the second record's value: only the first is replayed */
	int fd = openat(fx->dir_fd, FILE_NAME, O_RDWR);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &byte, 1, two - 10), 1);
	byte ^= 0x40;
	assert_int_equal(pwrite(fd, &byte, 1, two - 10), 1);
	assert_int_equal(journal_open(fx->dir_fd, FILE_NAME, &fx->j), 0);
	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 1);
	assert_int_equal(s.n, 1);

	/* mended, then cut inside the third record: two are replayed */
	byte ^= 0x40;
	assert_int_equal(pwrite(fd, &byte, 1, two - 10), 1);
	assert_int_equal(ftruncate(fd, two + 20), 0);
	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 2);

	/* a flipped byte in the second record's key: only the first */
	assert_int_equal(pread(fd, &byte, 1, one + 20), 1);
	byte ^= 0x01;
	assert_int_equal(pwrite(fd, &byte, 1, one + 20), 1);
	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 1);

	/* foreign bytes from the start: nothing */
	assert_int_equal(pwrite(fd, "not a journal", 13, 0), 13);
	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 0);
	close(fd);
}

static void test_refused_append_leaves_nothing(void **state)
{
	struct fixture *fx = *state;
	struct rlimit old, small;
	uint8_t key[JOURNAL_KEY_LEN], value[1024] = {0};
	struct seen s;
	uint64_t records;
	off_t size;

	append(fx->j, 1, 1, 100);
	size = file_size(fx);
	/* the file system takes part of the record, then refuses (as a full disk would) */
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = size + 200;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	key_of(2, key);
	assert_int_not_equal(journal_append(fx->j, key, value, sizeof(value)), 0);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);

	assert_int_equal(file_size(fx), size);
	assert_int_equal(held(fx->j, 2, 0, 0), 0);
	assert_int_equal(journal_records(fx->j), 1);
	/* the journal goes on: the next append and the replay find no piece of the refused one */
	append(fx->j, 3, 1, 50);
	reopen_and_replay(fx, &s, &records);
	assert_int_equal(records, 2);
	assert_int_equal(s.len[1], 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lookup_holds_the_newest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_hands_one_change_per_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_commit_keeps_everything, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_replay_in_written_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_settle_empties_after_the_flush, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_replay_needs_its_base, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_stops_at_another_base, setup, teardown),
		cmocka_unit_test_setup_teardown(test_settle_flush_stops_appends_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_discard_forgets_what_is_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_stops_at_damage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_append_leaves_nothing, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
