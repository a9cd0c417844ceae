/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunk placement: which daemon of a file's layout holds chunk i. Pure
 * functions with no state, shared by the metadata service (which picks the
 * daemons of a layout at create) and the client (which places every chunk
 * without asking anyone).
 *
 * PLACEMENT_RENDEZVOUS_V1, fixed forever (a change gets a new Placement value):
 *
 *   mix(x)  = the MurmurHash3 64-bit finalizer:
 *             x ^= x >> 33; x *= 0xff51afd7ed558ccd; x ^= x >> 33;
 *             x *= 0xc4ceb9fe1a85ec53; x ^= x >> 33
 *   u0, u1  = the 16 UUID bytes read as two little-endian 64-bit words
 *   score   = mix(mix(mix(mix(mix(seed ^ 0x9e3779b97f4a7c15) ^ ino) ^ index) ^ u0) ^ u1)
 *
 * Chunk @index of inode @ino goes to the daemon of the layout with the highest
 * score; equal scores (never seen in practice) go to the smaller UUID by
 * memcmp, so the answer does not depend on the order of the list. Removing a
 * daemon from the list moves only the chunks it held.
 */
#ifndef RDMAFS_META_PLACEMENT_H
#define RDMAFS_META_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#define META_UUID_LEN 16

/* The rendezvous score of @uuid (META_UUID_LEN bytes) for one chunk. */
uint64_t meta_rendezvous_score(uint64_t seed, uint64_t ino, uint64_t chunk_index,
			       const uint8_t *uuid);

/*
 * Places chunk @chunk_index of inode @ino among the @count daemons whose
 * UUIDs are @uuids[0..count-1] (each META_UUID_LEN bytes, e.g. the
 * Layout.daemons of the file), with the layout's @seed.
 *
 * Returns the index into @uuids of the chosen daemon, or -EINVAL when @count
 * is 0 or @uuids is NULL.
 */
int meta_place_chunk(const uint8_t *const *uuids, size_t count, uint64_t seed, uint64_t ino,
		     uint64_t chunk_index);

#endif
