// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The cluster map: storage daemons register and heartbeat, the map has an
 * epoch bumped by every change that clients care about (a daemon added, its
 * addresses, capacity or state changed; never by a plain heartbeat), and new
 * files get their layout from the daemons that are UP. A REMOVED daemon
 * leaves the map (unless a caller asks for the removed too) but its record
 * stays, so that it is refused if it comes back. Also STATFS, which sums the
 * daemons' capacity.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_i.h"
#include "rdmafs_names.h"

#define STATFS_BSIZE 4096
#define STATFS_FFREE (1ULL << 32)
/* Scores daemons for a layout; no chunk has this index. */

static int bump_epoch(struct meta_txn *t)
{
	return meta_store_counter_add(t, "epoch", 1);
}

static void stamp_heartbeat(struct meta_txn *t, struct daemon *d)
{
	d->r.hb_run = t->m->run_id;
	d->r.hb_sec = __atomic_load_n(&t->m->now_sec, __ATOMIC_RELAXED);
	d->r.hb_unix_ms = (uint64_t)t->now.tv_sec * 1000 + (uint64_t)t->now.tv_nsec / 1000000;
}

static const char *uuid_text(const uint8_t *uuid, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < RDMAFS_UUID_LEN && o + 3 < len; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[o++] = '-';
		buf[o++] = hex[uuid[i] >> 4];
		buf[o++] = hex[uuid[i] & 15];
	}
	buf[o] = '\0';
	return buf;
}

/* A daemon's name or disk id: printable ASCII, at most META_MAX_DAEMON_NAME bytes. */
static bool daemon_label_ok(const char *s)
{
	size_t len = 0;

	for (; s && s[len]; len++)
		if (s[len] < 0x21 || s[len] > 0x7e)
			return false;
	return len <= META_MAX_DAEMON_NAME;
}

/*
 * A REMOVED daemon's record stays as a tombstone so that the daemon, if it
 * runs again, is told so: -EIDRM to its REGISTER_DAEMON and HEARTBEAT, on
 * which it stops. It may join again only under a new UUID (a new data
 * directory): its chunks left every layout when it was drained or removed.
 */
static int refuse_removed(struct meta_txn *t, const struct daemon *d, const char *what)
{
	char text[40];

	meta_log(t->m, META_LOG_WARN,
		 "daemon %s was removed from the cluster: its %s is refused (it stops)",
		 uuid_text(d->uuid, text, sizeof(text)), what);
	return -EIDRM;
}

int meta_op_register_daemon(struct meta_txn *t, const ProtobufCMessage *msg,
			    ProtobufCMessage **resp)
{
	const Rdmafs__RegisterDaemonReq *req = (const void *)msg;
	Rdmafs__RegisterDaemonResp *out;
	struct daemon *d, *old;
	bool known, changed;
	char text[40];
	int ret;

	if (req->uuid.len != RDMAFS_UUID_LEN || req->n_addresses > META_MAX_ADDRESSES ||
	    !daemon_label_ok(req->name) || !daemon_label_ok(req->disk_id) ||
	    !daemon_label_ok(req->host) || !daemon_label_ok(req->rack) ||
	    (req->cluster_id.len != 0 && req->cluster_id.len != RDMAFS_UUID_LEN))
		return -EINVAL;
	if (req->cluster_id.len &&
	    memcmp(req->cluster_id.data, t->m->cluster_id, RDMAFS_UUID_LEN) != 0) {
		meta_log(t->m, META_LOG_WARN,
			 "refused daemon %s (%s): its data directory belongs to another cluster",
			 uuid_text(req->uuid.data, text, sizeof(text)),
			 req->name && req->name[0] ? req->name : "no name");
		return -EXDEV;
	}
	for (size_t i = 0; i < req->n_addresses; i++) {
		size_t len = strlen(req->addresses[i]);

		if (len == 0 || len > META_MAX_ADDRESS_LEN)
			return -EINVAL;
	}
	d = meta_alloc(t, sizeof(*d));
	old = meta_alloc(t, sizeof(*old));
	out = meta_alloc(t, sizeof(*out));
	if (!d || !old || !out)
		return -ENOMEM;

	ret = meta_store_daemon_get(t, req->uuid.data, old);
	if (ret && ret != -ENOENT)
		return ret;
	known = ret == 0;
	if (known && old->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
		return refuse_removed(t, old, "registration");
	memcpy(d->uuid, req->uuid.data, RDMAFS_UUID_LEN);
	if (known)
		d->r = old->r;
	d->r.address_count = (uint32_t)req->n_addresses;
	for (size_t i = 0; i < req->n_addresses; i++) {
		d->address_len[i] = (uint16_t)strlen(req->addresses[i]);
		memcpy(d->address[i], req->addresses[i], d->address_len[i]);
	}
	d->r.capacity_bytes = req->capacity_bytes;
	d->r.used_bytes = req->used_bytes;
	snprintf(d->name, sizeof(d->name), "%s", req->name ? req->name : "");
	snprintf(d->disk_id, sizeof(d->disk_id), "%s", req->disk_id ? req->disk_id : "");
	snprintf(d->host, sizeof(d->host), "%s", req->host ? req->host : "");
	snprintf(d->rack, sizeof(d->rack), "%s", req->rack ? req->rack : "");
	d->flags = req->hosts_metadata ? DAEMON_F_HOSTS_METADATA : 0;
	if (!known || d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UNSPECIFIED)
		d->r.state = RDMAFS__DAEMON_STATE__DAEMON_STATE_UP;
	else if (d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN)
		d->r.state = RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING; /* may lack writes */
	stamp_heartbeat(t, d);

	changed = !known || d->r.state != old->r.state ||
		  d->r.capacity_bytes != old->r.capacity_bytes ||
		  d->r.address_count != old->r.address_count || d->flags != old->flags ||
		  strcmp(d->name, old->name) != 0 || strcmp(d->disk_id, old->disk_id) != 0 ||
		  strcmp(d->host, old->host) != 0 || strcmp(d->rack, old->rack) != 0;
	for (uint32_t i = 0; !changed && i < d->r.address_count; i++)
		changed = d->address_len[i] != old->address_len[i] ||
			  memcmp(d->address[i], old->address[i], d->address_len[i]) != 0;

	ret = meta_store_daemon_put(t, d);
	if (!ret && changed)
		ret = bump_epoch(t);
	if (ret)
		return ret;
	if (changed)
		meta_log(t->m, META_LOG_INFO, "daemon %s%s%s%s %s (%s, %llu bytes)", d->name,
			 d->name[0] ? " (" : "", uuid_text(d->uuid, text, sizeof(text)),
			 d->name[0] ? ")" : "", known ? "registered again" : "registered",
			 d->r.address_count ? d->address[0] : "no address",
			 (unsigned long long)d->r.capacity_bytes);

	rdmafs__register_daemon_resp__init(out);
	ret = meta_store_counter_get(t, "epoch", &out->epoch);
	out->cluster_id.data = t->m->cluster_id;
	out->cluster_id.len = RDMAFS_UUID_LEN;
	out->heartbeat_interval_ms = t->m->opts.heartbeat_interval_ms;
	out->state = d->r.state;
	*resp = &out->base;
	return ret;
}

int meta_keys_epoch(struct meta_txn *t, uint64_t *epoch)
{
	int ret = meta_store_counter_get(t, "keys_epoch", epoch);

	if (ret == -ENOENT) {
		*epoch = 0;
		ret = 0;
	}
	return ret;
}

/*
 * What each daemon's last heartbeat said of the writes others missed
 * (HeartbeatReq known_epoch and misses), in memory: a SYNCING daemon
 * becomes UP when every daemon not DOWN has reported at the current epoch
 * with none left for it (docs/replication.md). A service that restarts
 * waits for a round of heartbeats.
 */
struct meta_report {
	uint8_t uuid[RDMAFS_UUID_LEN];
	uint64_t epoch;
	size_t n; /* daemons with chunks left, in targets, and how many each */
	uint8_t (*targets)[RDMAFS_UUID_LEN];
	uint64_t *chunks;
};

struct meta_reports {
	pthread_mutex_t lock;
	struct meta_report *list;
	size_t count, cap;
};

void meta_cluster_free(struct meta *m)
{
	struct meta_reports *r = m->reports;

	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++) {
		free(r->list[i].targets);
		free(r->list[i].chunks);
	}
	free(r->list);
	pthread_mutex_destroy(&r->lock);
	free(r);
	m->reports = NULL;
}

/* The report of daemon @uuid, made (empty) if there is none; NULL when out of memory. Locked. */
static struct meta_report *report_of(struct meta_reports *r, const uint8_t *uuid)
{
	struct meta_report *grown;

	for (size_t i = 0; i < r->count; i++)
		if (memcmp(r->list[i].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return &r->list[i];
	if (r->count == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;

		grown = realloc(r->list, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		r->list = grown;
		r->cap = cap;
	}
	grown = &r->list[r->count++];
	memset(grown, 0, sizeof(*grown));
	memcpy(grown->uuid, uuid, RDMAFS_UUID_LEN);
	return grown;
}

/* Keeps what heartbeat @req says of missed writes. */
static int report_keep(struct meta *m, const Rdmafs__HeartbeatReq *req)
{
	struct meta_reports *r = m->reports;
	struct meta_report *rep;
	uint8_t(*targets)[RDMAFS_UUID_LEN] = NULL;
	uint64_t *chunks = NULL;
	size_t n = 0;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		pthread_mutex_init(&r->lock, NULL);
		/* the map's readers look at it outside the writers' transaction */
		__atomic_store_n(&m->reports, r, __ATOMIC_RELEASE);
	}
	if (req->n_misses) {
		targets = calloc(req->n_misses, sizeof(*targets));
		chunks = calloc(req->n_misses, sizeof(*chunks));
		if (!targets || !chunks) {
			free(targets);
			free(chunks);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < req->n_misses; i++) {
		if (req->misses[i]->uuid.len != RDMAFS_UUID_LEN || !req->misses[i]->chunks)
			continue;
		memcpy(targets[n], req->misses[i]->uuid.data, RDMAFS_UUID_LEN);
		chunks[n++] = req->misses[i]->chunks;
	}
	pthread_mutex_lock(&r->lock);
	rep = report_of(r, req->uuid.data);
	if (rep) {
		free(rep->targets);
		free(rep->chunks);
		rep->targets = targets;
		rep->chunks = chunks;
		rep->n = n;
		rep->epoch = req->known_epoch;
	}
	pthread_mutex_unlock(&r->lock);
	if (!rep) {
		free(targets);
		free(chunks);
		return -ENOMEM;
	}
	return 0;
}

/* The chunks whose copy on daemon @uuid the heads last reported missing. */
static uint64_t chunks_missing(struct meta *m, const uint8_t *uuid)
{
	struct meta_reports *r = __atomic_load_n(&m->reports, __ATOMIC_ACQUIRE);
	uint64_t sum = 0;

	if (!r)
		return 0;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->count; i++)
		for (size_t k = 0; k < r->list[i].n; k++)
			if (memcmp(r->list[i].targets[k], uuid, RDMAFS_UUID_LEN) == 0)
				sum += r->list[i].chunks[k];
	pthread_mutex_unlock(&r->lock);
	return sum;
}

struct sync_walk {
	const struct daemon *syncing;
	uint64_t epoch;
	bool ready;
};

/* Whether daemon @d has reported, at the current epoch, nothing left for w->syncing. */
static int sync_check(struct meta_txn *t, struct daemon *d, void *arg)
{
	struct sync_walk *w = arg;
	struct meta_reports *r = t->m->reports;
	const struct meta_report *rep = NULL;

	if (d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
	    d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED ||
	    memcmp(d->uuid, w->syncing->uuid, RDMAFS_UUID_LEN) == 0)
		return 0;
	for (size_t i = 0; r && i < r->count; i++)
		if (memcmp(r->list[i].uuid, d->uuid, RDMAFS_UUID_LEN) == 0)
			rep = &r->list[i];
	if (!rep || rep->epoch != w->epoch) {
		w->ready = false;
		return 1;
	}
	for (size_t i = 0; i < rep->n; i++)
		if (memcmp(rep->targets[i], w->syncing->uuid, RDMAFS_UUID_LEN) == 0) {
			w->ready = false;
			return 1;
		}
	return 0;
}

/* SYNCING daemon @s becomes UP once nothing it missed is left to copy (sync_check()). */
static int sync_done(struct meta_txn *t, struct daemon *s, void *arg)
{
	struct sync_walk w = {.syncing = s, .ready = true};
	int *changed = arg, ret;
	char text[40];

	if (s->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING)
		return 0;
	ret = meta_store_counter_get(t, "epoch", &w.epoch);
	if (ret)
		return ret;
	if (t->m->reports)
		pthread_mutex_lock(&t->m->reports->lock);
	ret = meta_store_daemons_each(t, sync_check, &w);
	if (t->m->reports)
		pthread_mutex_unlock(&t->m->reports->lock);
	if (ret < 0 || !w.ready)
		return ret < 0 ? ret : 0;
	meta_log(t->m, META_LOG_INFO,
		 "daemon %s: syncing -> up (every daemon reports no write left to copy to it)",
		 uuid_text(s->uuid, text, sizeof(text)));
	s->r.state = RDMAFS__DAEMON_STATE__DAEMON_STATE_UP;
	(*changed)++;
	return meta_store_daemon_put(t, s);
}

int meta_op_heartbeat(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__HeartbeatReq *req = (const void *)msg;
	Rdmafs__HeartbeatResp *out;
	struct daemon *d;
	char text[40];
	int ret, changed = 0;

	if (req->uuid.len != RDMAFS_UUID_LEN)
		return -EINVAL;
	d = meta_alloc(t, sizeof(*d));
	out = meta_alloc(t, sizeof(*out));
	if (!d || !out)
		return -ENOMEM;
	/* -ENOENT tells an unknown daemon to register */
	ret = meta_store_daemon_get(t, req->uuid.data, d);
	if (ret)
		return ret;
	if (d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
		return refuse_removed(t, d, "heartbeat");
	d->r.capacity_bytes = req->capacity_bytes;
	d->r.used_bytes = req->used_bytes;
	stamp_heartbeat(t, d);
	if (d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN) {
		/* it may lack writes made while it was DOWN: no reads until they are copied */
		d->r.state = RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING;
		ret = bump_epoch(t);
		if (ret)
			return ret;
		meta_log(t->m, META_LOG_INFO, "daemon %s: down -> syncing (heartbeats again)",
			 uuid_text(d->uuid, text, sizeof(text)));
	}
	ret = meta_store_daemon_put(t, d);
	if (!ret)
		ret = report_keep(t->m, req);
	if (!ret)
		ret = meta_store_daemons_each(t, sync_done, &changed);
	if (ret < 0)
		return ret;
	if (changed) {
		ret = bump_epoch(t);
		if (ret)
			return ret;
	}
	rdmafs__heartbeat_resp__init(out);
	/* it stops serving copies before it can be marked DOWN (docs/replication.md) */
	out->lease_ms = t->m->opts.heartbeat_timeout_sec * 1000u / 2u;
	ret = meta_store_counter_get(t, "epoch", &out->epoch);
	if (!ret)
		ret = meta_keys_epoch(t, &out->keys_epoch);
	out->state = d->r.state;
	*resp = &out->base;
	return ret;
}

struct cluster_map_walk {
	Rdmafs__GetClusterMapResp *out;
	size_t max; /* room in out->daemons */
	bool include_removed;
};

static int cluster_map_add(struct meta_txn *t, struct daemon *d, void *arg)
{
	struct cluster_map_walk *w = arg;
	Rdmafs__DaemonInfo *info;

	if (w->out->n_daemons == w->max)
		return 1;
	/* removed daemons are forgotten by the map, but for those who ask */
	if (d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED && !w->include_removed)
		return 0;
	info = meta_alloc(t, sizeof(*info));
	if (!info)
		return -ENOMEM;
	rdmafs__daemon_info__init(info);
	info->uuid.data = meta_dup(t, d->uuid, RDMAFS_UUID_LEN);
	info->uuid.len = RDMAFS_UUID_LEN;
	info->capacity_bytes = d->r.capacity_bytes;
	info->used_bytes = d->r.used_bytes;
	info->state = d->r.state;
	info->last_heartbeat_unix_ms = d->r.hb_unix_ms;
	info->name = meta_dup(t, d->name, strlen(d->name) + 1);
	info->disk_id = meta_dup(t, d->disk_id, strlen(d->disk_id) + 1);
	info->host = meta_dup(t, d->host, strlen(d->host) + 1);
	info->rack = meta_dup(t, d->rack, strlen(d->rack) + 1);
	info->hosts_metadata = d->flags & DAEMON_F_HOSTS_METADATA;
	info->chunks_missing = chunks_missing(t->m, d->uuid);
	info->addresses = meta_alloc(t, (d->r.address_count + 1) * sizeof(char *));
	if (!info->uuid.data || !info->addresses || !info->name || !info->disk_id || !info->host ||
	    !info->rack)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->r.address_count; i++) {
		info->addresses[i] = meta_dup(t, d->address[i], d->address_len[i] + 1u);
		if (!info->addresses[i])
			return -ENOMEM;
		info->n_addresses++;
	}
	w->out->daemons[w->out->n_daemons++] = info;
	return 0;
}

int meta_op_get_cluster_map(struct meta_txn *t, const ProtobufCMessage *msg,
			    ProtobufCMessage **resp)
{
	const Rdmafs__GetClusterMapReq *req = (const void *)msg;
	struct cluster_map_walk w = {.include_removed = req->include_removed};
	int ret;

	w.out = meta_alloc(t, sizeof(*w.out));
	if (!w.out)
		return -ENOMEM;
	rdmafs__get_cluster_map_resp__init(w.out);
	w.out->cluster_id.data = t->m->cluster_id;
	w.out->cluster_id.len = RDMAFS_UUID_LEN;
	w.out->service_run = t->m->run_id;
	ret = meta_store_counter_get(t, "epoch", &w.out->epoch);
	if (ret)
		return ret;
	*resp = &w.out->base;
	if (req->known_epoch && req->known_epoch == w.out->epoch) {
		w.out->unchanged = true;
		return 0;
	}
	ret = meta_store_daemon_count(t, &w.max);
	if (ret)
		return ret;
	w.out->daemons = meta_alloc(t, (w.max + 1) * sizeof(*w.out->daemons));
	if (!w.out->daemons)
		return -ENOMEM;
	ret = meta_store_daemons_each(t, cluster_map_add, &w);
	return ret < 0 ? ret : 0;
}

struct layout_count_walk {
	const uint8_t *uuid;
	bool first_only;
	uint64_t count;
};

static int layout_count_one(struct meta_txn *t, const struct inode *in, void *arg)
{
	struct layout_count_walk *w = arg;

	for (uint32_t i = 0; i < in->r.stripe_width; i++) {
		if (memcmp(in->daemons[i], w->uuid, RDMAFS_UUID_LEN) == 0) {
			w->count++;
			return w->first_only ? 1 : 0;
		}
	}
	return 0;
}

/*
 * Counts the regular files whose layout names @uuid into *@count, stopping at
 * the first one when @first_only.
 */
static int daemon_layout_count(struct meta_txn *t, const uint8_t *uuid, bool first_only,
			       uint64_t *count)
{
	struct layout_count_walk w = {.uuid = uuid, .first_only = first_only};
	int ret = meta_store_inodes_from(t, 0, layout_count_one, &w);

	*count = w.count;
	return ret < 0 ? ret : 0;
}

/* 1 if some inode's layout still names @uuid, 0 if none, or a negative errno. */
static int daemon_in_layouts(struct meta_txn *t, const uint8_t *uuid)
{
	uint64_t count;
	int ret = daemon_layout_count(t, uuid, true, &count);

	return ret ? ret : count != 0;
}

int meta_daemon_state(struct meta_txn *t, const uint8_t *uuid, uint32_t *state)
{
	struct daemon *d = meta_alloc(t, sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	ret = meta_store_daemon_get(t, uuid, d);
	if (!ret)
		*state = d->r.state;
	return ret;
}

int meta_op_drain_status(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	const Rdmafs__DrainStatusReq *req = (const void *)msg;
	Rdmafs__DrainStatusResp *out;
	struct daemon *d;
	uint64_t remaining;
	int ret;

	if (req->uuid.len != RDMAFS_UUID_LEN)
		return -EINVAL;
	d = meta_alloc(t, sizeof(*d));
	out = meta_alloc(t, sizeof(*out));
	if (!d || !out)
		return -ENOMEM;
	ret = meta_store_daemon_get(t, req->uuid.data, d);
	if (!ret)
		ret = daemon_layout_count(t, d->uuid, false, &remaining);
	if (ret)
		return ret;
	rdmafs__drain_status_resp__init(out);
	out->daemon_state = d->r.state;
	out->files_remaining = remaining;
	switch (d->r.state) {
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING:
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED:
		out->state = remaining ? RDMAFS__JOB_STATE__JOB_STATE_RUNNING
				       : RDMAFS__JOB_STATE__JOB_STATE_DONE;
		out->removable = remaining == 0;
		break;
	default:
		out->state = RDMAFS__JOB_STATE__JOB_STATE_NEVER_RUN;
		break;
	}
	*resp = &out->base;
	return 0;
}

/*
 * Whether an operator may move daemon @d to @state: REMOVED is final, and UP
 * only ends a drain (a DOWN daemon comes up by heartbeating, not by decree).
 */
static int state_change_allowed(const struct daemon *d, uint32_t state)
{
	if (d->r.state == state)
		return 0;
	if (d->r.state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
		return -EIDRM;
	if (state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP &&
	    d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING)
		return -EHOSTDOWN;
	/* a DOWN or SYNCING daemon may lack writes: DRAINING would have it serve reads */
	if (state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING &&
	    d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
		return -EBUSY;
	return 0;
}

int meta_op_set_daemon_state(struct meta_txn *t, const ProtobufCMessage *msg,
			     ProtobufCMessage **resp)
{
	const Rdmafs__SetDaemonStateReq *req = (const void *)msg;
	Rdmafs__SetDaemonStateResp *out;
	struct daemon *d;
	char text[40];
	int ret;

	if (req->uuid.len != RDMAFS_UUID_LEN)
		return -EINVAL;
	switch (req->state) {
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_UP:
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING:
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED:
		break;
	default:
		/* DOWN is for meta_tick() to decide */
		return -EINVAL;
	}
	d = meta_alloc(t, sizeof(*d));
	out = meta_alloc(t, sizeof(*out));
	if (!d || !out)
		return -ENOMEM;
	ret = meta_store_daemon_get(t, req->uuid.data, d);
	if (!ret)
		ret = state_change_allowed(d, (uint32_t)req->state);
	if (ret)
		return ret;
	if (req->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED && !req->force &&
	    d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		/* a finished drain: draining, and no file's layout names it any more */
		if (d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING)
			return -EBUSY;
		ret = daemon_in_layouts(t, d->uuid);
		if (ret < 0)
			return ret;
		if (ret)
			return -EBUSY;
	}
	if (d->r.state != (uint32_t)req->state) {
		meta_log(t->m, META_LOG_INFO, "daemon %s: %s -> %s%s",
			 uuid_text(d->uuid, text, sizeof(text)),
			 rdmafs_daemon_state_name(d->r.state),
			 rdmafs_daemon_state_name((uint32_t)req->state),
			 req->force ? " (forced)" : "");
		d->r.state = req->state;
		ret = meta_store_daemon_put(t, d);
		if (!ret)
			ret = bump_epoch(t);
		if (ret)
			return ret;
	}
	rdmafs__set_daemon_state_resp__init(out);
	ret = meta_store_counter_get(t, "epoch", &out->epoch);
	*resp = &out->base;
	return ret;
}

/*
 * Daemons that share a file system (one disk_id) share its free space: it
 * counts once, and what each stores adds up. A daemon reports capacity as
 * what it stores plus what is free to it.
 */
#define STATFS_MAX_DISKS 256

struct statfs_disk {
	const char *id;
	uint64_t used, free_bytes;
};

struct statfs_walk {
	struct statfs_disk disks[STATFS_MAX_DISKS];
	size_t count;
	uint64_t capacity, free_bytes; /* of daemons beyond STATFS_MAX_DISKS disks */
};

static int statfs_add(struct meta_txn *t, struct daemon *d, void *arg)
{
	struct statfs_walk *w = arg;
	uint64_t used = d->r.used_bytes, free_bytes;
	struct statfs_disk *disk = NULL;

	if (d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
		return 0;
	if (used > d->r.capacity_bytes)
		used = d->r.capacity_bytes;
	free_bytes = d->r.capacity_bytes - used;
	for (size_t i = 0; d->disk_id[0] && i < w->count && !disk; i++)
		if (strcmp(w->disks[i].id, d->disk_id) == 0)
			disk = &w->disks[i];
	if (!disk && w->count < STATFS_MAX_DISKS) {
		disk = &w->disks[w->count++];
		/* the walk's record is reused for the next daemon: keep a copy */
		disk->id = meta_dup(t, d->disk_id, strlen(d->disk_id) + 1);
		if (!disk->id)
			return -ENOMEM;
		disk->used = disk->free_bytes = 0;
	}
	if (!disk) {
		w->capacity += d->r.capacity_bytes;
		w->free_bytes += free_bytes;
		return 0;
	}
	disk->used += used;
	/* the daemons' reports of one disk differ by the writes between their heartbeats */
	if (free_bytes > disk->free_bytes)
		disk->free_bytes = free_bytes;
	return 0;
}

int meta_op_statfs(struct meta_txn *t, const ProtobufCMessage *msg, ProtobufCMessage **resp)
{
	Rdmafs__StatfsResp *out = meta_alloc(t, sizeof(*out));
	struct statfs_walk *w;
	uint64_t inodes;
	int ret;

	if (!out)
		return -ENOMEM;
	w = meta_alloc(t, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->count = 0;
	w->capacity = w->free_bytes = 0;
	ret = meta_store_daemons_each(t, statfs_add, w);
	for (size_t i = 0; !ret && i < w->count; i++) {
		w->capacity += w->disks[i].used + w->disks[i].free_bytes;
		w->free_bytes += w->disks[i].free_bytes;
	}
	if (!ret)
		ret = meta_store_counter_get(t, "inodes", &inodes);
	if (ret)
		return ret;
	rdmafs__statfs_resp__init(out);
	out->bsize = STATFS_BSIZE;
	out->frsize = STATFS_BSIZE;
	out->blocks = w->capacity / STATFS_BSIZE;
	out->bfree = w->free_bytes / STATFS_BSIZE;
	out->bavail = out->bfree;
	/* statvfs wants totals: files in use + ffree, an arbitrary large budget */
	out->ffree = STATFS_FFREE;
	out->files = inodes + STATFS_FFREE;
	out->namemax = META_NAME_MAX;
	*resp = &out->base;
	return 0;
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

struct candidate {
	uint64_t score;
	uint8_t uuid[RDMAFS_UUID_LEN];
	char domain[RDMAFS_DOMAIN_KEY_MAX]; /* rdmafs_domain_key() */
};

static int candidate_cmp(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	return rdmafs_rank_cmp(x->score, x->uuid, y->score, y->uuid);
}

struct layout_walk {
	const struct inode *in;
	struct candidate *cand;
	size_t n, max;
};

static int layout_candidate(struct meta_txn *t, struct daemon *d, void *arg)
{
	struct layout_walk *w = arg;

	if (w->n == w->max)
		return 1;
	if (d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
		return 0;
	memcpy(w->cand[w->n].uuid, d->uuid, RDMAFS_UUID_LEN);
	rdmafs_domain_key(d->host, d->rack, w->cand[w->n].domain, sizeof(w->cand[w->n].domain));
	w->cand[w->n].score = rdmafs_layout_score(w->in->r.placement_seed, w->in->ino, d->uuid);
	w->n++;
	return 0;
}

/*
 * The failure domains of @in's daemons, the first stripe_width of @cand:
 * numbered from 0 in order of first appearance, a daemon that declares
 * neither rack nor host a domain of its own; none kept (n_domains 0) when
 * every daemon is alone in its domain.
 */
static void number_domains(const struct candidate *cand, struct inode *in)
{
	const char *keys[RDMAFS_MAX_STRIPE];

	for (uint32_t i = 0; i < in->r.stripe_width; i++)
		keys[i] = cand[i].domain;
	in->n_domains = rdmafs_domains_number(keys, in->r.stripe_width, in->domains)
				? in->r.stripe_width
				: 0;
}

int meta_choose_layout(struct meta_txn *t, struct inode *in)
{
	struct layout_walk w = {.in = in};
	int ret;

	ret = meta_store_daemon_count(t, &w.max);
	if (ret)
		return ret;
	w.cand = meta_alloc(t, (w.max + 1) * sizeof(*w.cand));
	if (!w.cand)
		return -ENOMEM;
	in->r.placement_seed = splitmix64(t->m->salt ^ in->ino);
	ret = meta_store_daemons_each(t, layout_candidate, &w);
	if (ret < 0)
		return ret;
	if (w.n == 0) {
		meta_log(t->m, META_LOG_WARN,
			 "no storage daemon is UP: cannot place a new file (ENOSPC)");
		return -ENOSPC;
	}
	qsort(w.cand, w.n, sizeof(*w.cand), candidate_cmp);
	in->r.chunk_size = t->m->opts.chunk_size;
	in->r.stripe_width =
		w.n < t->m->opts.stripe_width ? (uint32_t)w.n : t->m->opts.stripe_width;
	in->r.placement = RDMAFS__PLACEMENT__PLACEMENT_RENDEZVOUS_V1;
	for (uint32_t i = 0; i < in->r.stripe_width; i++)
		memcpy(in->daemons[i], w.cand[i].uuid, RDMAFS_UUID_LEN);
	number_domains(w.cand, in);
	/* two copies of a chunk are never on one daemon, nor in one rack or host declared */
	if (in->replicas >
	    rdmafs_domain_count(in->n_domains ? in->domains : NULL, in->r.stripe_width))
		in->replicas = (uint32_t)rdmafs_domain_count(in->n_domains ? in->domains : NULL,
							     in->r.stripe_width);
	return 0;
}

struct silent_walk {
	uint64_t now, first_tick;
	bool apply;
	int count;
};

static int silent_check(struct meta_txn *t, struct daemon *d, void *arg)
{
	struct silent_walk *w = arg;
	struct meta *m = t->m;
	uint64_t first = w->first_tick, last;
	char text[40];

	if (d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP &&
	    d->r.state != RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING)
		return 0;
	/* stamps of an earlier run are on another clock: count from the first tick */
	last = first;
	if (d->r.hb_run == m->run_id && d->r.hb_sec > first)
		last = d->r.hb_sec;
	if (w->now <= last || w->now - last <= m->opts.heartbeat_timeout_sec)
		return 0;
	w->count++;
	if (!w->apply)
		return 0;
	meta_log(m, META_LOG_WARN, "daemon %s: %s -> down (no heartbeat for %llu s)",
		 uuid_text(d->uuid, text, sizeof(text)), rdmafs_daemon_state_name(d->r.state),
		 (unsigned long long)(w->now - last));
	d->r.state = RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN;
	return meta_store_daemon_put(t, d);
}

/* Finds UP daemons silent for too long; marks them DOWN when @apply. */
static int scan_silent(struct meta_txn *t, uint64_t now, bool apply)
{
	struct silent_walk w = {
		.now = now,
		.first_tick = __atomic_load_n(&t->m->first_tick, __ATOMIC_RELAXED),
		.apply = apply,
	};
	int ret = meta_store_daemons_each(t, silent_check, &w);

	if (!ret && apply && w.count)
		ret = bump_epoch(t);
	return ret ? ret : w.count;
}

int meta_cluster_tick(struct meta *m, uint64_t now_sec)
{
	struct meta_txn t = {.m = m};
	uint64_t zero = 0;
	int rc, ret;

	__atomic_store_n(&m->now_sec, now_sec, __ATOMIC_RELAXED);
	__atomic_compare_exchange_n(&m->first_tick, &zero, now_sec ? now_sec : 1, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	clock_gettime(CLOCK_REALTIME, &t.now);

	/* a read transaction first: most ticks find nothing and write nothing */
	ret = meta_store_txn_begin(&t, false);
	if (ret)
		return ret;
	ret = scan_silent(&t, now_sec, false);
	meta_store_txn_abort(&t);
	if (ret <= 0)
		goto out_free;

	ret = meta_store_txn_begin(&t, true);
	if (ret)
		goto out_free;
	ret = scan_silent(&t, now_sec, true);
	if (ret < 0) {
		meta_store_txn_abort(&t);
		goto out_free;
	}
	rc = meta_store_txn_commit(&t);
	if (rc)
		ret = rc;
out_free:
	meta_arena_free(t.arena);
	return ret;
}
