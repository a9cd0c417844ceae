// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Group commit (meta_i.h): every write request used to be a transaction of
 * its own, with a flush of its own, so the service committed one request per
 * flush however many waited. Here the requests that arrive while a group is
 * committing queue up; the first of them to find no group running leads the
 * next, taking the whole queue into one transaction, each request nested in
 * it so that a failing one is undone alone. With metadata_sync = always one
 * flush makes them all durable before any is answered; with batch the
 * commit flushes nothing (lmdb_guard.h), and a request that must be
 * durable flushes after it (dispatch.c, meta_txn.durable).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "meta_i.h"

struct group_req {
	struct meta_txn *t;
	meta_group_fn fn;
	void *arg;
	int ret;
	bool done;
	struct group_req *next;
};

struct meta_group {
	pthread_mutex_t lock;
	pthread_cond_t done; /* a group finished: its requests are done, a leader may start */
	struct group_req *head, **tail;
	unsigned queued;
	bool running; /* a leader is committing a group */
	uint64_t groups, requests;
};

int meta_group_create(struct meta *m)
{
	struct meta_group *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->done, NULL);
	g->tail = &g->head;
	m->group = g;
	return 0;
}

void meta_group_destroy(struct meta *m)
{
	struct meta_group *g = m->group;

	if (!g)
		return;
	pthread_cond_destroy(&g->done);
	pthread_mutex_destroy(&g->lock);
	free(g);
	m->group = NULL;
}

/* A group that did not commit: each request's handle changes go, newest first, and it gets @err. */
static void undo_all(struct group_req *r, int err)
{
	if (!r)
		return;
	undo_all(r->next, err);
	if (!r->ret) {
		meta_handles_undo(r->t);
		r->ret = err;
	}
}

/* Runs @r in its open transaction and ends that: committed, or undone with its handle changes. */
static void run_in_txn(struct group_req *r)
{
	r->ret = r->fn(r->t, r->arg);
	if (r->ret)
		meta_store_txn_abort(r->t);
	else
		r->ret = meta_store_txn_commit(r->t);
	if (r->ret)
		meta_handles_undo(r->t);
}

/*
 * A group of one request runs in a transaction of its own: nesting buys
 * nothing there, and LMDB's nested transaction allocates its own dirty and
 * free page lists (3 MiB) each time.
 */
static void run_alone(struct group_req *r)
{
	r->ret = meta_store_txn_begin(r->t, true);
	if (!r->ret)
		run_in_txn(r);
}

/* Runs the requests of @list in one group transaction; each gets its ret. */
static void commit_group(struct meta *m, struct group_req *list)
{
	struct meta_store_txn *group;
	struct group_req *r;
	int ret;

	if (!list->next) {
		run_alone(list);
		return;
	}
	ret = meta_store_group_begin(m, &group);

	for (r = list; r; r = r->next) {
		if (ret) {
			r->ret = ret;
			continue;
		}
		r->ret = meta_store_txn_begin_in(r->t, group);
		if (!r->ret)
			run_in_txn(r);
	}
	if (ret)
		return;
	ret = meta_store_group_commit(m, group);
	if (ret)
		undo_all(list, ret);
}

/*
 * Queues the @n requests of @reqs together, so that one group takes them
 * all, and returns once that group ran (led by this thread if no other was
 * leading when they were queued).
 */
static void group_run(struct meta *m, struct group_req *reqs, size_t n)
{
	struct meta_group *g = m->group;
	struct group_req *list, *r;
	uint64_t count = 0;

	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < n; i++) {
		*g->tail = &reqs[i];
		g->tail = &reqs[i].next;
	}
	g->queued += (unsigned)n;
	while (!reqs[0].done && g->running)
		pthread_cond_wait(&g->done, &g->lock);
	if (reqs[0].done) {
		pthread_mutex_unlock(&g->lock);
		return;
	}
	/* no group runs and ours are still queued: lead the next, with every request queued */
	g->running = true;
	list = g->head;
	g->head = NULL;
	g->tail = &g->head;
	g->queued = 0;
	pthread_mutex_unlock(&g->lock);

	commit_group(m, list);
	meta_store_bound_growth(m);

	pthread_mutex_lock(&g->lock);
	for (r = list; r; r = r->next) {
		r->done = true;
		count++;
	}
	g->groups++;
	g->requests += count;
	g->running = false;
	pthread_cond_broadcast(&g->done);
	pthread_mutex_unlock(&g->lock);
}

int meta_group_run(struct meta *m, struct meta_txn *t, meta_group_fn fn, void *arg)
{
	struct group_req self = {.t = t, .fn = fn, .arg = arg};

	group_run(m, &self, 1);
	return self.ret;
}

int meta_group_run_many(struct meta *m, struct meta_txn *const *t, meta_group_fn fn,
			void *const *args, int *rets, size_t n)
{
	struct group_req *reqs;

	if (!n)
		return 0;
	reqs = calloc(n, sizeof(*reqs));
	if (!reqs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		reqs[i] = (struct group_req){.t = t[i], .fn = fn, .arg = args[i]};
	group_run(m, reqs, n);
	for (size_t i = 0; i < n; i++)
		rets[i] = reqs[i].ret;
	free(reqs);
	return 0;
}

void meta_group_stats(struct meta *m, uint64_t *groups, uint64_t *requests)
{
	struct meta_group *g = m->group;

	pthread_mutex_lock(&g->lock);
	*groups = g->groups;
	*requests = g->requests;
	pthread_mutex_unlock(&g->lock);
}

bool meta_group_idle(struct meta *m)
{
	struct meta_group *g = m->group;
	bool idle;

	pthread_mutex_lock(&g->lock);
	idle = !g->running && !g->queued;
	pthread_mutex_unlock(&g->lock);
	return idle;
}

unsigned meta_group_queued(struct meta *m)
{
	struct meta_group *g = m->group;
	unsigned n;

	pthread_mutex_lock(&g->lock);
	n = g->queued;
	pthread_mutex_unlock(&g->lock);
	return n;
}
