// SPDX-License-Identifier: GPL-2.0-or-later
/* The client core's counters (fs_stats_i.h), read by rfs_stats_get(). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdmafs.pb-c.h"
#include "rdmafs_names.h"
#include "fs_stats_i.h"

/*
 * Slots of the methods the library sends: the chunk methods, the metadata
 * calls, GET_CLUSTER_MAP, then OTHER for anything else. Contiguous ranges of
 * rdmafs.proto, so a slot is found with arithmetic on the hot path.
 */
#define CHUNK_FIRST RDMAFS__METHOD__METHOD_CHUNK_WRITE
#define CHUNK_LAST  RDMAFS__METHOD__METHOD_CHUNK_FENCE
#define META_FIRST  RDMAFS__METHOD__METHOD_LOOKUP
#define META_LAST   RDMAFS__METHOD__METHOD_SYNC
#define META_SLOT   (CHUNK_LAST - CHUNK_FIRST + 1)
#define MAP_SLOT    (META_SLOT + META_LAST - META_FIRST + 1)
#define OTHER_SLOT  (MAP_SLOT + 1)

_Static_assert(OTHER_SLOT < RFS_STATS_METHODS, "RFS_STATS_METHODS too small");

static unsigned method_slot(uint32_t method)
{
	if (method >= CHUNK_FIRST && method <= CHUNK_LAST)
		return method - CHUNK_FIRST;
	if (method >= META_FIRST && method <= META_LAST)
		return META_SLOT + method - META_FIRST;
	if (method == RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP)
		return MAP_SLOT;
	return OTHER_SLOT;
}

/* The method of slot @slot; METHOD_UNSPECIFIED for OTHER. */
static uint32_t slot_method(unsigned slot)
{
	if (slot < META_SLOT)
		return CHUNK_FIRST + slot;
	if (slot < MAP_SLOT)
		return META_FIRST + slot - META_SLOT;
	if (slot == MAP_SLOT)
		return RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP;
	return RDMAFS__METHOD__METHOD_UNSPECIFIED;
}

void rfs_count_call(struct rfs_counters *c, uint32_t method, uint64_t start_ns, int status)
{
	struct rfs_method_counters *m = &c->methods[method_slot(method)];

	rdmafs_latency_record(&m->latency, rdmafs_now_ns() - start_ns);
	if (status) {
		rfs_count(&m->errors, 1);
		if (status == -ETIMEDOUT)
			rfs_count(&m->timeouts, 1);
	}
}

static uint64_t load(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

void rfs_counters_read(const struct rfs_counters *c, struct rfs_stats *out)
{
	for (unsigned i = 0; i <= OTHER_SLOT; i++) {
		const struct rfs_method_counters *m = &c->methods[i];
		struct rfs_method_stats *o = &out->methods[i];
		uint32_t method = slot_method(i);

		if (method == RDMAFS__METHOD__METHOD_UNSPECIFIED) {
			snprintf(o->name, sizeof(o->name), "OTHER");
		} else {
			rdmafs_method_name(method, o->name, sizeof(o->name));
			for (char *ch = o->name; *ch; ch++)
				*ch = (char)toupper((unsigned char)*ch);
		}
		o->target = i < META_SLOT ? RFS_TARGET_STORAGE : RFS_TARGET_META;
		rdmafs_latency_read(&m->latency, &o->latency);
		o->requests = rdmafs_latency_count(&o->latency);
		o->errors = load(&m->errors);
		o->timeouts = load(&m->timeouts);
	}
	out->method_count = OTHER_SLOT + 1;
	for (unsigned t = 0; t < RFS_TARGETS; t++) {
		out->targets[t].retries = load(&c->targets[t].retries);
		out->targets[t].connects = load(&c->targets[t].connects);
		out->targets[t].reconnects = load(&c->targets[t].reconnects);
		out->targets[t].connect_failures = load(&c->targets[t].connect_failures);
	}
	out->map_fetches = load(&c->map_fetches);
	out->map_changes = load(&c->map_changes);
	out->layout_refetches = load(&c->layout_refetches);
	out->read_bytes = load(&c->read_bytes);
	out->write_bytes = load(&c->write_bytes);
	out->buffer_waits = load(&c->buffer_waits);
	out->buffer_wait_ns = load(&c->buffer_wait_ns);
	out->buffer_timeouts = load(&c->buffer_timeouts);
	out->replica_moves = load(&c->replica_moves);
	out->replica_waits = load(&c->replica_waits);
}
