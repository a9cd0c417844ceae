// SPDX-License-Identifier: GPL-2.0-or-later
/* Rendezvous (highest random weight) chunk placement; see rdmafs_common.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
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

uint64_t rdmafs_layout_score(uint64_t seed, uint64_t ino, const uint8_t *uuid)
{
	return rdmafs_rendezvous_score(seed, ino, RDMAFS_LAYOUT_INDEX, uuid);
}

int rdmafs_rank_cmp(uint64_t sa, const uint8_t *a, uint64_t sb, const uint8_t *b)
{
	if (sa != sb)
		return sa > sb ? -1 : 1;
	return memcmp(a, b, RDMAFS_UUID_LEN);
}

/* Whether daemon @a (score @sa) goes before daemon @b (score @sb) in a chain. */
static bool ranks_before(uint64_t sa, const uint8_t *a, uint64_t sb, const uint8_t *b)
{
	return rdmafs_rank_cmp(sa, a, sb, b) < 0;
}

int rdmafs_place_chunk(const uint8_t *const *uuids, size_t count, uint64_t seed, uint64_t ino,
		       uint64_t chunk_index)
{
	int head;
	int ret = rdmafs_place_chain(uuids, NULL, count, seed, ino, chunk_index, 1, &head);

	return ret < 0 ? ret : head;
}

/* The failure domain of daemon @i: its own index when @domains is NULL. */
static uint32_t domain_of(const uint32_t *domains, int i)
{
	return domains ? domains[i] : (uint32_t)i;
}

int rdmafs_place_chain(const uint8_t *const *uuids, const uint32_t *domains, size_t count,
		       uint64_t seed, uint64_t ino, uint64_t chunk_index, uint32_t replicas,
		       int *out)
{
	uint64_t scores[RDMAFS_MAX_REPLICAS];
	size_t n = 0;

	if (!uuids || !out || count == 0 || count > (size_t)INT32_MAX ||
	    replicas > RDMAFS_MAX_REPLICAS)
		return -EINVAL;
	if (replicas == 0)
		replicas = 1;
	/*
	 * The best daemon of each domain, the best @replicas domains of those
	 * seen so far, kept in chain order: a daemon that beats its domain's
	 * member takes its place (moving up), one of a domain not in the chain
	 * is inserted as any other. A domain pushed out never needs its old
	 * member again: a member only ever gives way to a better one.
	 */
	for (size_t i = 0; i < count; i++) {
		uint64_t s = rdmafs_rendezvous_score(seed, ino, chunk_index, uuids[i]);
		uint32_t dom = domain_of(domains, (int)i);
		size_t at, same = n;

		for (size_t k = 0; k < n && same == n; k++)
			if (domain_of(domains, out[k]) == dom)
				same = k;
		if (same < n) {
			if (!ranks_before(s, uuids[i], scores[same], uuids[out[same]]))
				continue;
			for (size_t j = same; j + 1 < n; j++) {
				scores[j] = scores[j + 1];
				out[j] = out[j + 1];
			}
			n--;
		}
		at = n;
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

size_t rdmafs_domain_count(const uint32_t *domains, size_t count)
{
	size_t distinct = 0;

	if (!domains)
		return count;
	for (size_t i = 0; i < count; i++) {
		size_t j = 0;

		while (j < i && domains[j] != domains[i])
			j++;
		distinct += j == i;
	}
	return distinct;
}

const char *rdmafs_domain_key(const char *host, const char *rack, char *buf, size_t len)
{
	if (rack && rack[0])
		snprintf(buf, len, "r%s", rack);
	else if (host && host[0])
		snprintf(buf, len, "h%s", host);
	else if (len)
		buf[0] = '\0';
	return buf;
}

bool rdmafs_domains_number(const char *const *keys, size_t n, uint32_t *out)
{
	uint32_t next = 0;
	bool shared = false;

	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		while (keys[i] && keys[i][0] && j < i &&
		       (!keys[j] || strcmp(keys[j], keys[i]) != 0))
			j++;
		if (keys[i] && keys[i][0] && j < i) {
			out[i] = out[j];
			shared = true;
		} else {
			out[i] = next++;
		}
	}
	return shared;
}

bool rdmafs_domains_keep(const uint8_t *const *was, const uint32_t *was_domains, size_t n_was,
			 const uint8_t *const *now, size_t n_now, uint32_t *out)
{
	uint32_t key[RDMAFS_MAX_STRIPE], next = 0;
	bool shared = false;

	/* a key per daemon: its old domain, or one past every old one for a new daemon */
	for (size_t i = 0; i < n_now; i++) {
		size_t j = 0;

		while (j < n_was && memcmp(was[j], now[i], RDMAFS_UUID_LEN) != 0)
			j++;
		key[i] = j < n_was ? domain_of(was_domains, (int)j) : (uint32_t)(n_was + i);
	}
	/* numbered from 0 in order of first appearance */
	for (size_t i = 0; i < n_now; i++) {
		size_t j = 0;

		while (j < i && key[j] != key[i])
			j++;
		if (j < i) {
			out[i] = out[j];
			shared = true;
		} else {
			out[i] = next++;
		}
	}
	return shared;
}
