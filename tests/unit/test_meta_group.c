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
#include "rdmafs_common.h"
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

/* Waits until the blocking request is inside its transaction, holding its group open. */
static void gate_wait_inside(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->inside)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

/* Lets the blocking request finish its transaction. */
static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
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
	gate_wait_inside(&g);
	/* A's group runs: B, C, D queue behind it, in this order */
	assert_int_equal(pthread_create(&tb, NULL, run, &b), 0);
	wait_queued(e->m, 1);
	assert_int_equal(pthread_create(&tc, NULL, run, &c), 0);
	wait_queued(e->m, 2);
	assert_int_equal(pthread_create(&td, NULL, run, &d), 0);
	wait_queued(e->m, 3);
	gate_open(&g);
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

/* ---- quick reads ---- */

struct quick {
	struct meta *m;
	uint64_t file, link;
	int results[7];
	bool done;
};

static void *quick_main(void *arg)
{
	struct quick *q = arg;
	Rdmafs__ReaddirResp *rd = NULL;
	Rdmafs__StatfsResp *sf = NULL;
	struct tm_attr a;
	char buf[64];

	q->results[0] = tm_lookup(q->m, NULL, ROOT, "f", &a);
	q->results[1] = tm_getattr(q->m, NULL, q->file, &a);
	q->results[2] = tm_readlink(q->m, q->link, buf, sizeof(buf));
	q->results[3] = tm_readdir(q->m, NULL, ROOT, 0, 100, true, &rd);
	q->results[4] = tm_getxattr(q->m, NULL, q->file, "user.a", buf, sizeof(buf));
	q->results[5] = tm_listxattr(q->m, NULL, q->file, buf, sizeof(buf));
	q->results[6] = tm_statfs(q->m, &sf);
	if (rd)
		rdmafs__readdir_resp__free_unpacked(rd, NULL);
	if (sf)
		rdmafs__statfs_resp__free_unpacked(sf, NULL);
	__atomic_store_n(&q->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * meta.h: the methods meta_method_quick() names wait for no writer, group or
 * flush (a daemon runs them on its transport's thread). Each answers while a
 * group holds the writer; the changes and SYNC (a flush) are not quick.
 */
static void test_quick_reads_wait_for_no_writer(void **state)
{
	static const uint32_t quick[] = {
		RDMAFS__METHOD__METHOD_LOOKUP,	 RDMAFS__METHOD__METHOD_GETATTR,
		RDMAFS__METHOD__METHOD_READLINK, RDMAFS__METHOD__METHOD_READDIR,
		RDMAFS__METHOD__METHOD_GETXATTR, RDMAFS__METHOD__METHOD_LISTXATTR,
		RDMAFS__METHOD__METHOD_STATFS,
	};
	static const uint32_t slow[] = {
		RDMAFS__METHOD__METHOD_CREATE,	   RDMAFS__METHOD__METHOD_SETATTR,
		RDMAFS__METHOD__METHOD_UNLINK,	   RDMAFS__METHOD__METHOD_OPEN,
		RDMAFS__METHOD__METHOD_RELEASE,	   RDMAFS__METHOD__METHOD_UPDATE_SIZE,
		RDMAFS__METHOD__METHOD_SYNC,	   RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP,
		RDMAFS__METHOD__METHOD_INODE_LIST, RDMAFS__METHOD__METHOD_CHUNK_READ,
	};
	struct tm_env *e = *state;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
	struct req a = {e->m, "test_a", 0, true, -1, &g};
	struct quick q = {.m = e->m};
	struct tm_attr l;
	pthread_t ta, tq;
	bool done = false;
	int64_t f;

	for (size_t i = 0; i < sizeof(quick) / sizeof(quick[0]); i++)
		assert_true(meta_method_quick(quick[i]));
	for (size_t i = 0; i < sizeof(slow) / sizeof(slow[0]); i++)
		assert_false(meta_method_quick(slow[i]));
	f = tm_mkfile(e->m, NULL, ROOT, "f", 0644);
	assert_true(f > 0);
	q.file = (uint64_t)f;
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "l", "target", &l), 0);
	q.link = l.ino;
	assert_int_equal(tm_setxattr(e->m, NULL, q.file, "user.a", "v", 1, 0), 0);

	assert_int_equal(pthread_create(&ta, NULL, run, &a), 0);
	gate_wait_inside(&g);
	/* A holds the writer: the reads must all answer meanwhile (10 s at most) */
	assert_int_equal(pthread_create(&tq, NULL, quick_main, &q), 0);
	for (int i = 0; i < 10000 && !done; i++) {
		done = __atomic_load_n(&q.done, __ATOMIC_ACQUIRE);
		if (!done)
			usleep(1000);
	}
	gate_open(&g);
	pthread_join(ta, NULL);
	pthread_join(tq, NULL);
	assert_true(done);
	assert_int_equal(a.result, 0);
	for (int i = 0; i < 7; i++)
		assert_true(q.results[i] >= 0);
}

/*
 * meta.h: meta_may_run_inline() names the quick reads always, a client's
 * change only with metadata_sync = batch while no group commits or waits,
 * and never SYNC, RECLAIM or the administration's methods.
 */
static void test_inline_only_when_no_group_runs(void **state)
{
	static const uint32_t changes[] = {
		RDMAFS__METHOD__METHOD_CREATE,	    RDMAFS__METHOD__METHOD_SETATTR,
		RDMAFS__METHOD__METHOD_UNLINK,	    RDMAFS__METHOD__METHOD_RENAME,
		RDMAFS__METHOD__METHOD_OPEN,	    RDMAFS__METHOD__METHOD_RELEASE,
		RDMAFS__METHOD__METHOD_UPDATE_SIZE, RDMAFS__METHOD__METHOD_SETXATTR,
	};
	static const uint32_t never[] = {
		RDMAFS__METHOD__METHOD_SYNC,
		RDMAFS__METHOD__METHOD_RECLAIM,
		RDMAFS__METHOD__METHOD_REGISTER_DAEMON,
		RDMAFS__METHOD__METHOD_HEARTBEAT,
		RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP,
		RDMAFS__METHOD__METHOD_CHUNK_READ,
	};
	struct tm_env *e = *state, always = {0};
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
	struct req a = {e->m, "test_a", 0, true, -1, &g};
	struct meta_options o;
	pthread_t ta;

	assert_false(e->opts.sync_always);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		assert_true(meta_may_run_inline(e->m, changes[i]));
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		assert_false(meta_may_run_inline(e->m, never[i]));
	assert_true(meta_may_run_inline(e->m, RDMAFS__METHOD__METHOD_LOOKUP));

	/* A holds a group open: a change must queue behind it, a read need not */
	assert_int_equal(pthread_create(&ta, NULL, run, &a), 0);
	gate_wait_inside(&g);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		assert_false(meta_may_run_inline(e->m, changes[i]));
	assert_true(meta_may_run_inline(e->m, RDMAFS__METHOD__METHOD_GETATTR));
	gate_open(&g);
	pthread_join(ta, NULL);
	assert_int_equal(a.result, 0);
	assert_true(meta_may_run_inline(e->m, RDMAFS__METHOD__METHOD_CREATE));

	/* metadata_sync = always: every change waits for a flush, never inline */
	o = e->opts;
	o.sync_always = true;
	tm_setup_with(&always, 1, &o);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		assert_false(meta_may_run_inline(always.m, changes[i]));
	assert_true(meta_may_run_inline(always.m, RDMAFS__METHOD__METHOD_LOOKUP));
	tm_teardown(&always);
}

/* ---- meta_handle_many(): a daemon's batch of changes ---- */

/* A packed CreateReq for @name in the root (exclusive), in @buf; its length. */
static size_t pack_create(const char *name, uint8_t *buf, size_t cap)
{
	Rdmafs__CreateReq req = RDMAFS__CREATE_REQ__INIT;

	req.parent = ROOT;
	req.name = (ProtobufCBinaryData){strlen(name), (uint8_t *)name};
	req.mode = S_IFREG | 0644;
	req.exclusive = true;
	req.open_flags = O_RDWR;
	assert_true(rdmafs__create_req__get_packed_size(&req) <= cap);
	return rdmafs__create_req__pack(&req, buf);
}

/* The handle of a CreateResp in @c's reply (the call succeeded). */
static uint64_t created_handle(const struct meta_call *c)
{
	Rdmafs__CreateResp *r;
	uint64_t h;

	assert_int_equal(c->ret, 0);
	r = rdmafs__create_resp__unpack(NULL, c->resp_len, c->resp_buf);
	assert_non_null(r);
	assert_true(r->created);
	h = r->handle;
	rdmafs__create_resp__free_unpacked(r, NULL);
	return h;
}

/*
 * meta.h: the changes of a batch run in one group, in their order, each with
 * the answer it would have had alone: "b1" twice (the second -EEXIST and
 * undone alone, its handle with it), a keyed read-only caller's create
 * -EROFS, a malformed request -EBADMSG, a read and an unknown method
 * -EOPNOTSUPP. One group holds the requests that reached their transaction.
 */
static void test_many_in_one_group(void **state)
{
	enum { N = 7 };
	struct tm_env *e = *state;
	static uint8_t reqs[N][256], resps[N][4096];
	struct meta_call calls[N];
	uint64_t groups0, reqs0, groups, nreqs;
	struct meta_handle_info info;
	const char *names[N] = {"b1", "b2", "b1", "b3", NULL, NULL, NULL};
	uint64_t h1, h2;
	struct tm_attr a;

	meta_group_stats(e->m, &groups0, &reqs0);
	for (int i = 0; i < N; i++) {
		calls[i] = (struct meta_call){
			.method = RDMAFS__METHOD__METHOD_CREATE,
			.req = reqs[i],
			.resp_buf = resps[i],
			.resp_cap = sizeof(resps[i]),
			.ret = 1,
		};
		if (names[i])
			calls[i].req_len = pack_create(names[i], reqs[i], sizeof(reqs[i]));
	}
	calls[3].caller =
		(struct meta_caller){.keyed = true, .serial = 7, .flags = RDMAFS_KEY_READ_ONLY};
	/* a field 1 (parent, a varint) cut short */
	reqs[4][0] = 0x08;
	reqs[4][1] = 0x80;
	calls[4].req_len = 2;
	calls[5].method = RDMAFS__METHOD__METHOD_LOOKUP;
	calls[6].method = 0x7fff;

	meta_handle_many(e->m, calls, N);

	h1 = created_handle(&calls[0]);
	h2 = created_handle(&calls[1]);
	assert_int_equal(calls[2].ret, -EEXIST);
	assert_int_equal(calls[3].ret, -EROFS);
	assert_int_equal(calls[4].ret, -EBADMSG);
	assert_int_equal(calls[5].ret, -EOPNOTSUPP);
	assert_int_equal(calls[6].ret, -EOPNOTSUPP);
	for (int i = 2; i < N; i++)
		assert_int_equal(calls[i].resp_len, 0);
	meta_group_stats(e->m, &groups, &nreqs);
	assert_int_equal(groups - groups0, 1);
	assert_int_equal(nreqs - reqs0, 3);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "b1", &a), 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "b2", &a), 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "b3", &a), -ENOENT);
	assert_int_equal(meta_handles_total(e->m), 2);
	assert_int_equal(meta_handle_find(e->m, h1, &info), 0);
	assert_int_equal(meta_handle_find(e->m, h2, &info), 0);
	/* what the batch committed is in the store after a reopen */
	tm_reopen(e);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "b1", &a), 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "b2", &a), 0);
}

struct many_run {
	struct meta *m;
	struct meta_call *calls;
	size_t n;
	bool done;
};

static void *many_main(void *arg)
{
	struct many_run *r = arg;

	meta_handle_many(r->m, r->calls, r->n);
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * A batch that arrives while another group runs queues behind it, all its
 * requests together, and they share the next group (a daemon sends such a
 * batch to its workers instead, meta_may_run_inline(); this is the contract
 * if one ever joins).
 */
static void test_many_waits_for_a_running_group(void **state)
{
	enum { N = 3 };
	struct tm_env *e = *state;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
	struct req a = {e->m, "test_a", 0, true, -1, &g};
	static uint8_t reqs[N][256], resps[N][4096];
	struct meta_call calls[N];
	struct many_run r = {e->m, calls, N, false};
	uint64_t groups0, reqs0, groups, nreqs;
	unsigned queued;
	pthread_t ta, tb;
	bool early;
	char name[8];

	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		calls[i] = (struct meta_call){
			.method = RDMAFS__METHOD__METHOD_CREATE,
			.req = reqs[i],
			.req_len = pack_create(name, reqs[i], sizeof(reqs[i])),
			.resp_buf = resps[i],
			.resp_cap = sizeof(resps[i]),
		};
	}
	meta_group_stats(e->m, &groups0, &reqs0);
	assert_int_equal(pthread_create(&ta, NULL, run, &a), 0);
	gate_wait_inside(&g);
	assert_int_equal(pthread_create(&tb, NULL, many_main, &r), 0);
	/* all N queued at once (10 s at most); the gate opens before any verdict */
	for (int i = 0; i < 10000 && meta_group_queued(e->m) < N; i++)
		usleep(1000);
	queued = meta_group_queued(e->m);
	early = __atomic_load_n(&r.done, __ATOMIC_ACQUIRE);
	gate_open(&g);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(queued, N);
	assert_false(early);
	assert_int_equal(a.result, 0);
	for (int i = 0; i < N; i++)
		created_handle(&calls[i]);
	meta_group_stats(e->m, &groups, &nreqs);
	assert_int_equal(groups - groups0, 2);
	assert_int_equal(nreqs - reqs0, 1 + N);
}

/*
 * meta.h: meta_may_batch() names a client's changes whether or not a group
 * runs (a batch is served as a group of its own), never a read, SYNC,
 * RECLAIM, the administration's methods, nor any change with
 * metadata_sync = always.
 */
static void test_may_batch(void **state)
{
	static const uint32_t changes[] = {
		RDMAFS__METHOD__METHOD_CREATE,	    RDMAFS__METHOD__METHOD_MKDIR,
		RDMAFS__METHOD__METHOD_UNLINK,	    RDMAFS__METHOD__METHOD_RENAME,
		RDMAFS__METHOD__METHOD_SETATTR,	    RDMAFS__METHOD__METHOD_RELEASE,
		RDMAFS__METHOD__METHOD_UPDATE_SIZE, RDMAFS__METHOD__METHOD_SETXATTR,
	};
	static const uint32_t never[] = {
		RDMAFS__METHOD__METHOD_LOOKUP,
		RDMAFS__METHOD__METHOD_GETATTR,
		RDMAFS__METHOD__METHOD_SYNC,
		RDMAFS__METHOD__METHOD_RECLAIM,
		RDMAFS__METHOD__METHOD_REGISTER_DAEMON,
		RDMAFS__METHOD__METHOD_HEARTBEAT,
		RDMAFS__METHOD__METHOD_CHUNK_WRITE,
		0x7fff,
	};
	struct tm_env *e = *state, always = {0};
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
	struct req a = {e->m, "test_a", 0, true, -1, &g};
	struct meta_options o;
	pthread_t ta;

	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		assert_false(meta_may_batch(e->m, never[i]));
	assert_int_equal(pthread_create(&ta, NULL, run, &a), 0);
	gate_wait_inside(&g);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		assert_true(meta_may_batch(e->m, changes[i]));
	gate_open(&g);
	pthread_join(ta, NULL);

	o = e->opts;
	o.sync_always = true;
	tm_setup_with(&always, 1, &o);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		assert_false(meta_may_batch(always.m, changes[i]));
	tm_teardown(&always);
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
		cmocka_unit_test_setup_teardown(test_quick_reads_wait_for_no_writer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_inline_only_when_no_group_runs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_many_in_one_group, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_waits_for_a_running_group, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_may_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writers_on_one_directory, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
