// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The daemon's copy of the cluster map, and its lease (docs/replication.md,
 * "Losing a daemon"): which daemons of a chain are DOWN (a replicated write
 * skips them and records the miss), which one is the chain's head, and whether
 * this daemon may serve replicated chunks at all. The agent fills it after a
 * heartbeat shows a new epoch; the workers and the resync thread read it.
 * See daemon_i.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdmafs.pb-c.h"
#include "daemon_i.h"

struct dmap_entry {
	uint8_t uuid[RDMAFS_UUID_LEN];
	uint32_t state;
	char uri[DMAP_URI_MAX]; /* its first address; "" if none */
};

struct dmap {
	pthread_mutex_t lock;
	uint8_t self[RDMAFS_UUID_LEN];
	struct dmap_entry *entries;
	size_t count;
	uint64_t epoch;
	uint64_t lease_until_ms; /* monotonic; 0: none */
	/* skips decided and not yet recorded (dmap_skip_enter()), by the map they used */
	unsigned skips_now, skips_old;
	uint64_t skips_old_epoch;
	bool behind; /* a request named a daemon the map does not have: fetch it now */
	void (*on_behind)(void *arg); /* dmap_on_behind() */
	void *on_behind_arg;
};

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int dmap_create(const uint8_t *self, struct dmap **out)
{
	struct dmap *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	memcpy(m->self, self, RDMAFS_UUID_LEN);
	*out = m;
	return 0;
}

void dmap_destroy(struct dmap *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->entries);
	free(m);
}

int dmap_set(struct dmap *m, const Rdmafs__GetClusterMapResp *resp)
{
	struct dmap_entry *e = calloc(resp->n_daemons ? resp->n_daemons : 1, sizeof(*e));
	size_t n = 0;

	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < resp->n_daemons; i++) {
		const Rdmafs__DaemonInfo *d = resp->daemons[i];

		if (d->uuid.len != RDMAFS_UUID_LEN)
			continue;
		memcpy(e[n].uuid, d->uuid.data, RDMAFS_UUID_LEN);
		e[n].state = (uint32_t)d->state;
		if (d->n_addresses && strlen(d->addresses[0]) < DMAP_URI_MAX)
			strcpy(e[n].uri, d->addresses[0]);
		n++;
	}
	pthread_mutex_lock(&m->lock);
	if (resp->epoch < m->epoch) {
		/* an answer overtaken by a newer one: maps only move forward */
		pthread_mutex_unlock(&m->lock);
		free(e);
		return 0;
	}
	free(m->entries);
	m->entries = e;
	m->count = n;
	if (resp->epoch != m->epoch && m->skips_now) {
		/* skips decided under the old map are still to be recorded */
		if (!m->skips_old)
			m->skips_old_epoch = m->epoch;
		m->skips_old += m->skips_now;
		m->skips_now = 0;
	}
	m->epoch = resp->epoch;
	m->behind = false;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void dmap_on_behind(struct dmap *m, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&m->lock);
	m->on_behind = fn;
	m->on_behind_arg = arg;
	pthread_mutex_unlock(&m->lock);
}

bool dmap_behind(struct dmap *m)
{
	bool b;

	pthread_mutex_lock(&m->lock);
	b = m->behind;
	pthread_mutex_unlock(&m->lock);
	return b;
}

uint64_t dmap_epoch(struct dmap *m)
{
	uint64_t e;

	pthread_mutex_lock(&m->lock);
	e = m->epoch;
	pthread_mutex_unlock(&m->lock);
	return e;
}

uint64_t dmap_report_epoch(struct dmap *m)
{
	uint64_t e;

	pthread_mutex_lock(&m->lock);
	e = m->skips_old ? m->skips_old_epoch : m->epoch;
	pthread_mutex_unlock(&m->lock);
	return e;
}

void dmap_lease(struct dmap *m, uint64_t sent_ms, uint32_t lease_ms)
{
	pthread_mutex_lock(&m->lock);
	if (sent_ms + lease_ms > m->lease_until_ms)
		m->lease_until_ms = sent_ms + lease_ms;
	pthread_mutex_unlock(&m->lock);
}

uint64_t dmap_now_ms(void)
{
	return monotonic_ms();
}

/* The entry of @uuid, or NULL. Lock held. */
static const struct dmap_entry *find(const struct dmap *m, const uint8_t *uuid)
{
	for (size_t i = 0; i < m->count; i++)
		if (memcmp(m->entries[i].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return &m->entries[i];
	return NULL;
}

bool dmap_state_serves(uint32_t state)
{
	return state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP ||
	       state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING;
}

bool dmap_leased(struct dmap *m)
{
	bool ok;

	pthread_mutex_lock(&m->lock);
	ok = m->lease_until_ms && monotonic_ms() < m->lease_until_ms;
	pthread_mutex_unlock(&m->lock);
	return ok;
}

bool dmap_may_serve(struct dmap *m)
{
	const struct dmap_entry *e;
	bool ok;

	pthread_mutex_lock(&m->lock);
	e = find(m, m->self);
	ok = m->lease_until_ms && monotonic_ms() < m->lease_until_ms && e &&
	     dmap_state_serves(e->state);
	pthread_mutex_unlock(&m->lock);
	return ok;
}

uint32_t dmap_state(struct dmap *m, const uint8_t *uuid)
{
	const struct dmap_entry *e;
	uint32_t state;

	pthread_mutex_lock(&m->lock);
	e = find(m, uuid);
	state = e ? e->state : 0;
	pthread_mutex_unlock(&m->lock);
	return state;
}

int dmap_uri(struct dmap *m, const uint8_t *uuid, char *out)
{
	const struct dmap_entry *e;
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	e = find(m, uuid);
	if (!e)
		ret = -ENOENT;
	else if (!e->uri[0])
		ret = -EHOSTUNREACH;
	else
		strcpy(out, e->uri);
	pthread_mutex_unlock(&m->lock);
	return ret;
}

/* Whether a chain skips the daemon of @e (not NULL): DOWN or REMOVED. */
static bool down_state(const struct dmap_entry *e)
{
	return e->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
	       e->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED;
}

/* The first of @n @members this map shows serving; -1 if none. Lock held. */
static int head_of(const struct dmap *m, const ProtobufCBinaryData *members, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct dmap_entry *e;

		if (members[i].len != RDMAFS_UUID_LEN)
			return -1;
		e = find(m, members[i].data);
		if (e && dmap_state_serves(e->state))
			return (int)i;
	}
	return -1;
}

int dmap_head(struct dmap *m, const ProtobufCBinaryData *members, size_t n)
{
	int h;

	pthread_mutex_lock(&m->lock);
	h = head_of(m, members, n);
	pthread_mutex_unlock(&m->lock);
	return h;
}

int dmap_skip_enter(struct dmap *m, const ProtobufCBinaryData *head,
		    const ProtobufCBinaryData *members, size_t n_members,
		    const ProtobufCBinaryData *missed, size_t n_missed, bool *down, uint64_t *epoch)
{
	void (*kick)(void *arg) = NULL;
	void *kick_arg = NULL;
	bool was_behind;
	int h, ret = 0;

	pthread_mutex_lock(&m->lock);
	was_behind = m->behind;
	if (!m->lease_until_ms || monotonic_ms() >= m->lease_until_ms) {
		ret = -EREMCHG; /* no lease: our map may be stale, or we were taken out */
		goto out;
	}
	h = head ? head_of(m, members, n_members) : 0;
	if (head && h < 0)
		m->behind = true; /* no head in our map: it may be older than the sender's */
	if (head && (h < 0 || head->len != RDMAFS_UUID_LEN ||
		     memcmp(members[h].data, head->data, RDMAFS_UUID_LEN) != 0)) {
		ret = -EREMCHG; /* another head in our map: one of us is behind */
		goto out;
	}
	for (size_t i = 0; i < n_missed; i++) {
		const struct dmap_entry *e = find(m, missed[i].data);

		if (!e || !down_state(e)) {
			ret = -EREMCHG; /* skipped by a map that differs from ours */
			m->behind |= !e;
			goto out;
		}
	}
	for (size_t i = 0; i < n_members; i++) {
		const struct dmap_entry *e = find(m, members[i].data);

		if (!e) {
			/* a daemon newer than our map: the sender's is newer, fetch it */
			m->behind = true;
			ret = -EREMCHG;
			goto out;
		}
		down[i] = down_state(e);
		if (down[i])
			ret = 1;
	}
	if (ret) {
		m->skips_now++;
		*epoch = m->epoch;
	}
out:
	if (m->behind && !was_behind) {
		kick = m->on_behind;
		kick_arg = m->on_behind_arg;
	}
	pthread_mutex_unlock(&m->lock);
	/* the agent fetches the map now, not at its next heartbeat */
	if (kick)
		kick(kick_arg);
	return ret;
}

void dmap_skip_leave(struct dmap *m, uint64_t epoch)
{
	pthread_mutex_lock(&m->lock);
	if (epoch == m->epoch && m->skips_now)
		m->skips_now--;
	else if (m->skips_old)
		m->skips_old--;
	pthread_mutex_unlock(&m->lock);
}
