// SPDX-License-Identifier: GPL-2.0-or-later
/* Rendezvous (highest random weight) chunk placement; see rdmafs_common.h. */
#include <errno.h>
#include <string.h>

#include "rdmafs_common.h"

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t rdmafs_rendezvous_score(uint64_t seed, uint64_t ino, uint64_t chunk_index,
				 const uint8_t *uuid)
{
	uint64_t h = mix(seed ^ 0x9e3779b97f4a7c15ULL);

	h = mix(h ^ ino);
	h = mix(h ^ chunk_index);
	h = mix(h ^ load_le64(uuid));
	return mix(h ^ load_le64(uuid + 8));
}

int rdmafs_place_chunk(const uint8_t *const *uuids, size_t count, uint64_t seed, uint64_t ino,
		       uint64_t chunk_index)
{
	uint64_t best_score = 0;
	size_t best = 0;

	if (!uuids || count == 0 || count > (size_t)INT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < count; i++) {
		uint64_t s = rdmafs_rendezvous_score(seed, ino, chunk_index, uuids[i]);

		if (i == 0 || s > best_score ||
		    (s == best_score && memcmp(uuids[i], uuids[best], RDMAFS_UUID_LEN) < 0)) {
			best_score = s;
			best = i;
		}
	}
	return (int)best;
}
