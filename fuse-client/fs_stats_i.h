/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the client core: the counters behind rfs_stats_get() (rdmafs_fs.h).
 * Every field is updated with relaxed atomic additions by whichever thread
 * makes or completes a call (the transport's progress thread included) and
 * read the same way; nothing here locks or allocates.
 */
#ifndef RDMAFS_FS_STATS_I_H
#define RDMAFS_FS_STATS_I_H

#include <stdint.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

struct rfs_method_counters {
	uint64_t errors, timeouts;
	struct rdmafs_latency latency; /* its count is the requests */
};

struct rfs_counters {
	struct rfs_method_counters methods[RFS_STATS_METHODS];
	struct rfs_target_stats targets[RFS_TARGETS];
	uint64_t map_fetches, map_changes, layout_refetches;
	uint64_t read_bytes, write_bytes;
	uint64_t buffer_waits, buffer_wait_ns, buffer_timeouts;
	uint64_t replica_moves, replica_waits;
};

/* Adds @n to a counter of struct rfs_counters. */
static inline void rfs_count(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/*
 * Counts one call of @method (an rdmafs.proto Method) made at @start_ns
 * (rdmafs_now_ns()) that ended now with @status (0 or a negative errno).
 */
void rfs_count_call(struct rfs_counters *c, uint32_t method, uint64_t start_ns, int status);

/* Copies @c into @out's methods, targets and counters (not what struct rfs knows). */
void rfs_counters_read(const struct rfs_counters *c, struct rfs_stats *out);

#endif /* RDMAFS_FS_STATS_I_H */
