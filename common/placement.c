// SPDX-License-Identifier: GPL-2.0-or-later
/* Rendezvous (highest random weight) chunk placement; see rdmafs_common.h. */
#include <errno.h>
#include <stdbool.h>
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

/* Whether daemon @a (score @sa) goes before daemon @b (score @sb) in a chain. */
static bool ranks_before(uint64_t sa, const uint8_t *a, uint64_t sb, const uint8_t *b)
{
	return sa > sb || (sa == sb && memcmp(a, b, RDMAFS_UUID_LEN) < 0);
}

int rdmafs_place_chunk(const uint8_t *const *uuids, size_t count, uint64_t seed, uint64_t ino,
		       uint64_t chunk_index)
{
	int head;
	int ret = rdmafs_place_chain(uuids, count, seed, ino, chunk_index, 1, &head);

	return ret < 0 ? ret : head;
}

int rdmafs_place_chain(const uint8_t *const *uuids, size_t count, uint64_t seed, uint64_t ino,
		       uint64_t chunk_index, uint32_t replicas, int *out)
{
	uint64_t scores[RDMAFS_MAX_REPLICAS];
	size_t n = 0;

	if (!uuids || !out || count == 0 || count > (size_t)INT32_MAX ||
	    replicas > RDMAFS_MAX_REPLICAS)
		return -EINVAL;
	if (replicas == 0)
		replicas = 1;
	/* an insertion into the best @replicas seen so far, kept in chain order */
	for (size_t i = 0; i < count; i++) {
		uint64_t s = rdmafs_rendezvous_score(seed, ino, chunk_index, uuids[i]);
		size_t at = n;

		while (at > 0 && ranks_before(s, uuids[i], scores[at - 1], uuids[out[at - 1]]))
			at--;
		if (at >= replicas)
			continue;
		if (n < replicas)
			n++;
		for (size_t j = n - 1; j > at; j--) {
			scores[j] = scores[j - 1];
			out[j] = out[j - 1];
		}
		scores[at] = s;
		out[at] = (int)i;
	}
	return (int)n;
}
