// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Group commit (storage-daemon/meta/group.c, meta_i.h): the write requests
 * that arrive while a group commits share the next group's transaction and
 * flush; one that fails is undone alone; many writers at once on one
 * directory get exactly POSIX's answers. The groups are made
 * deterministically: a request that blocks inside its transaction holds its
 * group open while the others queue, counted by meta_group_queued().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta_i.h"
#include "test_meta_util.h"

#define ROOT 1

static int setup(void **state)
{
	struct tm_env *e = calloc(1, sizeof(*e));

	tm_setup(e, 1);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct tm_env *e = *state;

	tm_teardown(e);
	free(e);
	return 0;
}

/* One request of a test: writes counter @name = 1, then returns @ret. */
struct req {
	struct meta *m;
	const char *name;
	int ret;    /* what its body returns after the write */
	bool block; /* waits for gate->open inside its transaction */
	int result; /* meta_group_run()'s */
	struct gate *gate;
	uint64_t handle; /* the handle it opened on the root */
};

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool inside, open;
};

static int body(struct meta_txn *t, void *arg)
{
	struct req *r = arg;
	int ret = meta_store_counter_put(t, r->name, 1);

	if (!ret)
		ret = meta_handle_add(t, ROOT, O_RDONLY, &r->handle);
	if (ret)
		return ret;
	if (r->block) {
		pthread_mutex_lock(&r->gate->lock);
		r->gate->inside = true;
		pthread_cond_broadcast(&r->gate->cond);
		while (!r->gate->open)
			pthread_cond_wait(&r->gate->cond, &r->gate->lock);
		pthread_mutex_unlock(&r->gate->lock);
	}
	return r->ret;
}

static void *run(void *arg)
{
	struct req *r = arg;
	struct meta_txn t = {.m = r->m};

	clock_gettime(CLOCK_REALTIME, &t.now);
	r->result = meta_group_run(r->m, &t, body, r);
	meta_arena_free(t.arena);
	return NULL;
}

/* Counter @name in a read transaction of its own: its value, or -ENOENT. */
static int64_t counter(struct meta *m, const char *name)
{
	struct meta_txn t = {.m = m};
	uint64_t v = 0;
	int ret;

	assert_int_equal(meta_store_txn_begin(&t, false), 0);
	ret = meta_store_counter_get(&t, name, &v);
	meta_store_txn_abort(&t);
	return ret ? ret : (int64_t)v;
}

/* Waits (10 s at most: then the test fails, never hangs) until @n requests are queued. */
static void wait_queued(struct meta *m, unsigned n)
{
	for (int i = 0; i < 10000 && meta_group_queued(m) < n; i++)
		usleep(1000);
	assert_int_equal(meta_group_queued(m), n);
}

/*
 * A holds its group open; B, C and D queue meanwhile. When A's group
 * commits, the next leader takes B, C and D into one group: three groups
 * would have been three flushes. C fails after its write and its OPEN of a
 * handle: C alone is undone, handle and all; B and D stay, each request
 * gets its own answer.
 */
static void test_queued_requests_share_a_group(void **state)
{
	struct tm_env *e = *state;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
	struct req a = {e->m, "test_a", 0, true, -1, &g}, b = {e->m, "test_b", 0, false, -1, &g},
		   c = {e->m, "test_c", -EEXIST, false, -1, &g},
		   d = {e->m, "test_d", 0, false, -1, &g};
	uint64_t groups0, reqs0, groups, reqs;
	struct meta_handle_info info;
	pthread_t ta, tb, tc, td;

	meta_group_stats(e->m, &groups0, &reqs0);
	assert_int_equal(pthread_create(&ta, NULL, run, &a), 0);
	pthread_mutex_lock(&g.lock);
	while (!g.inside)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
	/* A's group runs: B, C, D queue behind it, in this order */
	assert_int_equal(pthread_create(&tb, NULL, run, &b), 0);
	wait_queued(e->m, 1);
	assert_int_equal(pthread_create(&tc, NULL, run, &c), 0);
	wait_queued(e->m, 2);
	assert_int_equal(pthread_create(&td, NULL, run, &d), 0);
	wait_queued(e->m, 3);
	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tc, NULL);
	pthread_join(td, NULL);

	assert_int_equal(a.result, 0);
	assert_int_equal(b.result, 0);
	assert_int_equal(c.result, -EEXIST);
	assert_int_equal(d.result, 0);
	meta_group_stats(e->m, &groups, &reqs);
	assert_int_equal(groups - groups0, 2);
	assert_int_equal(reqs - reqs0, 4);
	assert_int_equal(counter(e->m, "test_a"), 1);
	assert_int_equal(counter(e->m, "test_b"), 1);
	assert_int_equal(counter(e->m, "test_c"), -ENOENT);
	assert_int_equal(counter(e->m, "test_d"), 1);
	/* the handles too: C's went with C, the others' stay */
	assert_int_equal(meta_handles_total(e->m), 3);
	assert_int_equal(meta_handle_opens(e->m, ROOT), 3);
	assert_int_equal(meta_handle_find(e->m, c.handle, &info), -ENOENT);
	assert_int_equal(meta_handle_find(e->m, b.handle, &info), 0);
	assert_int_equal(info.ino, ROOT);
	assert_int_equal(meta_handle_find(e->m, d.handle, &info), 0);
}

/* What a group committed is in the store after a reopen (its flush happened). */
static void test_group_durable_across_reopen(void **state)
{
	struct tm_env *e = *state;
	struct req a = {e->m, "test_kept", 0, false, -1, NULL};

	run(&a);
	assert_int_equal(a.result, 0);
	tm_reopen(e);
	assert_int_equal(counter(e->m, "test_kept"), 1);
}

/* ---- many writers on one directory ---- */

enum { WRITERS = 8, NAMES = 120 };

struct writer {
	struct meta *m;
	uint64_t dir;
	int created, exists, other;
};

/* Every writer creates (O_EXCL) and then unlinks the same NAMES names. */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char name[16];

	for (int i = 0; i < NAMES; i++) {
		struct tm_attr a;
		uint64_t h;
		int ret;

		snprintf(name, sizeof(name), "n%d", i);
		ret = tm_create(w->m, NULL, w->dir, name, 0644, true, 0, &a, &h, NULL);
		if (ret == 0) {
			w->created++;
			if (tm_release(w->m, h, 0, NULL))
				w->other++;
		} else if (ret == -EEXIST) {
			w->exists++;
		} else {
			w->other++;
		}
	}
	return NULL;
}

/* Each name is created exactly once whatever the grouping; the directory lists each once. */
static void test_writers_on_one_directory(void **state)
{
	struct tm_env *e = *state;
	struct writer w[WRITERS];
	pthread_t tid[WRITERS];
	Rdmafs__ReaddirResp *rd;
	struct tm_attr dir;
	int created = 0, exists = 0;
	size_t listed = 0;
	uint64_t cookie = 0;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "shared", 0755, &dir), 0);
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){.m = e->m, .dir = dir.ino};
		assert_int_equal(pthread_create(&tid[i], NULL, writer_main, &w[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(tid[i], NULL);
		assert_int_equal(w[i].other, 0);
		created += w[i].created;
		exists += w[i].exists;
	}
	assert_int_equal(created, NAMES);
	assert_int_equal(exists, (WRITERS - 1) * NAMES);
	for (;;) {
		assert_int_equal(tm_readdir(e->m, NULL, dir.ino, cookie, 1000, false, &rd), 0);
		for (size_t i = 0; i < rd->n_entries; i++) {
			const char *n = (const char *)rd->entries[i]->name.data;

			if (rd->entries[i]->name.len > 2 || n[0] != '.')
				listed++;
			cookie = rd->entries[i]->cookie;
		}
		if (rd->eof || rd->n_entries == 0) {
			rdmafs__readdir_resp__free_unpacked(rd, NULL);
			break;
		}
		rdmafs__readdir_resp__free_unpacked(rd, NULL);
	}
	assert_int_equal(listed, NAMES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_queued_requests_share_a_group, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_group_durable_across_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writers_on_one_directory, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
