// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Open handles, in memory (meta_i.h). An OPEN or a CREATE used to write a
 * handle record and the inode's open count to the store, and a RELEASE to
 * delete them: two flushes for every file opened and closed. Here a handle
 * is a table entry, and the store hears of handles only when an unlinked
 * file's last one goes (then the file is freed).
 *
 * Two hash tables under one mutex: handle number -> (ino, flags), and ino ->
 * the number of handles on it. A handle's number is the service's run in its
 * top 24 bits and a counter below, so a number of an earlier run never names
 * a handle of this one, and a client can reclaim its numbers after a restart.
 *
 * A change made in a write request's transaction is logged in the request
 * (struct meta_txn's undo list, in its arena): if the request fails, or its
 * group does not commit, meta_handles_undo() takes it back, so the table
 * never holds a handle whose OPEN the caller saw fail.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "meta_i.h"

#define HANDLE_BUCKETS 16384u
#define RUN_SHIFT      40
#define RUN_PREFIXES   ((1ULL << (64 - RUN_SHIFT)) - 1)
#define COUNTER_MAX    ((1ULL << RUN_SHIFT) - 1)

struct handle_ent {
	uint64_t handle, ino;
	uint32_t flags;
	struct handle_ent *next;
};

struct open_ent {
	uint64_t ino;
	uint32_t count;
	struct open_ent *next;
};

struct meta_handles {
	pthread_mutex_t lock;
	bool grace;
	uint64_t next; /* the counter of this run's numbers */
	uint64_t total;
	struct handle_ent *handles[HANDLE_BUCKETS];
	struct open_ent *opens[HANDLE_BUCKETS];
};

/* One change of the table, logged in its request to be undone. */
struct handle_undo {
	bool added; /* undone by removing; else by adding back */
	uint64_t handle, ino;
	uint32_t flags;
	struct handle_undo *next;
};

static unsigned bucket_of(uint64_t key)
{
	return (unsigned)((key * 0x9e3779b97f4a7c15ULL) >> 50) & (HANDLE_BUCKETS - 1);
}

int meta_handles_create(struct meta *m)
{
	struct meta_handles *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	m->handles = h;
	return 0;
}

/* Frees every entry. Under h->lock, or alone. */
static void empty(struct meta_handles *h)
{
	for (unsigned b = 0; b < HANDLE_BUCKETS; b++) {
		while (h->handles[b]) {
			struct handle_ent *e = h->handles[b];

			h->handles[b] = e->next;
			free(e);
		}
		while (h->opens[b]) {
			struct open_ent *o = h->opens[b];

			h->opens[b] = o->next;
			free(o);
		}
	}
	h->total = 0;
}

void meta_handles_destroy(struct meta *m)
{
	struct meta_handles *h = m->handles;

	if (!h)
		return;
	empty(h);
	pthread_mutex_destroy(&h->lock);
	free(h);
	m->handles = NULL;
}

void meta_handles_reset(struct meta *m)
{
	struct meta_handles *h = m->handles;

	pthread_mutex_lock(&h->lock);
	empty(h);
	h->next = 0;
	h->grace = false;
	pthread_mutex_unlock(&h->lock);
}

static struct handle_ent **find_handle(struct meta_handles *h, uint64_t handle)
{
	struct handle_ent **p = &h->handles[bucket_of(handle)];

	while (*p && (*p)->handle != handle)
		p = &(*p)->next;
	return p;
}

static struct open_ent **find_open(struct meta_handles *h, uint64_t ino)
{
	struct open_ent **p = &h->opens[bucket_of(ino)];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Adds handle @handle on @ino; the number must be free. Under h->lock. */
static int insert(struct meta_handles *h, uint64_t handle, uint64_t ino, uint32_t flags)
{
	struct handle_ent *e;
	struct open_ent **po = find_open(h, ino), *o = *po;

	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		o->ino = ino;
		*po = o;
	}
	e = malloc(sizeof(*e));
	if (!e) {
		if (!o->count) {
			*po = o->next;
			free(o);
		}
		return -ENOMEM;
	}
	e->handle = handle;
	e->ino = ino;
	e->flags = flags;
	e->next = h->handles[bucket_of(handle)];
	h->handles[bucket_of(handle)] = e;
	o->count++;
	h->total++;
	return 0;
}

/* Removes the entry at @pe. Under h->lock. */
static void take_out(struct meta_handles *h, struct handle_ent **pe)
{
	struct handle_ent *e = *pe;
	struct open_ent **po = find_open(h, e->ino), *o = *po;

	*pe = e->next;
	if (o && --o->count == 0) {
		*po = o->next;
		free(o);
	}
	h->total--;
	free(e);
}

/* The top bits of this run's handle numbers: never 0, so no number is 0. */
static uint64_t run_prefix(const struct meta *m)
{
	return m->run_id % RUN_PREFIXES + 1;
}

static int log_change(struct meta_txn *t, bool added, uint64_t handle, uint64_t ino, uint32_t flags)
{
	struct handle_undo *u = meta_alloc(t, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->added = added;
	u->handle = handle;
	u->ino = ino;
	u->flags = flags;
	u->next = t->undo;
	t->undo = u;
	return 0;
}

int meta_handle_add(struct meta_txn *t, uint64_t ino, uint32_t flags, uint64_t *handle)
{
	struct meta_handles *h = t->m->handles;
	uint64_t number = *handle;
	int ret;

	/* logged first: an entry that cannot be logged is never made */
	ret = log_change(t, true, 0, ino, flags);
	if (ret)
		return ret;
	pthread_mutex_lock(&h->lock);
	if (number) {
		/* a reclaim: a number of an earlier run, not taken since */
		if (number >> RUN_SHIFT == run_prefix(t->m) || number >> RUN_SHIFT == 0)
			ret = -EINVAL;
		else if (*find_handle(h, number))
			ret = -EEXIST;
	} else if (h->next == COUNTER_MAX) {
		ret = -ENFILE;
	} else {
		number = run_prefix(t->m) << RUN_SHIFT | ++h->next;
	}
	if (!ret)
		ret = insert(h, number, ino, flags);
	pthread_mutex_unlock(&h->lock);
	if (ret) {
		t->undo = t->undo->next; /* nothing to undo */
		return ret;
	}
	t->undo->handle = number;
	*handle = number;
	return 0;
}

int meta_handle_remove(struct meta_txn *t, uint64_t handle, struct meta_handle_info *out)
{
	struct meta_handles *h = t->m->handles;
	struct handle_ent **pe;
	int ret = log_change(t, false, handle, 0, 0);

	if (ret)
		return ret;
	pthread_mutex_lock(&h->lock);
	pe = find_handle(h, handle);
	if (*pe) {
		out->ino = t->undo->ino = (*pe)->ino;
		out->flags = t->undo->flags = (*pe)->flags;
		take_out(h, pe);
	} else {
		ret = -ENOENT;
	}
	pthread_mutex_unlock(&h->lock);
	if (ret)
		t->undo = t->undo->next;
	return ret;
}

int meta_handle_find(struct meta *m, uint64_t handle, struct meta_handle_info *out)
{
	struct meta_handles *h = m->handles;
	struct handle_ent *e;
	int ret = -ENOENT;

	pthread_mutex_lock(&h->lock);
	e = *find_handle(h, handle);
	if (e) {
		out->ino = e->ino;
		out->flags = e->flags;
		ret = 0;
	}
	pthread_mutex_unlock(&h->lock);
	return ret;
}

uint32_t meta_handle_opens(struct meta *m, uint64_t ino)
{
	struct meta_handles *h = m->handles;
	struct open_ent *o;
	uint32_t n;

	pthread_mutex_lock(&h->lock);
	o = *find_open(h, ino);
	n = o ? o->count : 0;
	pthread_mutex_unlock(&h->lock);
	return n;
}

uint64_t meta_handles_total(struct meta *m)
{
	uint64_t n;

	pthread_mutex_lock(&m->handles->lock);
	n = m->handles->total;
	pthread_mutex_unlock(&m->handles->lock);
	return n;
}

void meta_handles_undo(struct meta_txn *t)
{
	struct meta_handles *h = t->m->handles;
	struct handle_ent **pe;

	pthread_mutex_lock(&h->lock);
	for (struct handle_undo *u = t->undo; u; u = u->next) {
		if (u->added) {
			pe = find_handle(h, u->handle);
			if (*pe)
				take_out(h, pe);
		} else if (insert(h, u->handle, u->ino, u->flags)) {
			/*
			 * Out of memory putting back a handle that a failed
			 * RELEASE took: the caller sees the RELEASE fail and
			 * the handle gone, as after a restart of the service.
			 */
			meta_log(t->m, META_LOG_WARN,
				 "out of memory: handle %llu of inode %llu lost",
				 (unsigned long long)u->handle, (unsigned long long)u->ino);
		}
	}
	pthread_mutex_unlock(&h->lock);
	t->undo = NULL;
}

bool meta_in_grace(struct meta *m)
{
	return __atomic_load_n(&m->handles->grace, __ATOMIC_ACQUIRE);
}

void meta_set_grace(struct meta *m, bool on)
{
	__atomic_store_n(&m->handles->grace, on, __ATOMIC_RELEASE);
}
