// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Rendezvous chunk placement (common/placement.c): fixed
 * results, even spread, and minimal movement when the daemon set changes;
 * chains of replicas in score order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rdmafs_common.h"

#define DAEMONS 8

static uint8_t uuid_store[DAEMONS + 1][RDMAFS_UUID_LEN];
static const uint8_t *uuids[DAEMONS + 1];

static void make_uuids(void)
{
	for (int i = 0; i <= DAEMONS; i++) {
		for (int b = 0; b < RDMAFS_UUID_LEN; b++)
			uuid_store[i][b] = (uint8_t)(i * 37 + b * 11 + 1);
		uuids[i] = uuid_store[i];
	}
}

/*
 * The algorithm is part of the wire format: these values must never change.
 * They were computed independently from the formula in rdmafs_common.h.
 */
static void test_frozen_values(void **state)
{
	uint8_t u[RDMAFS_UUID_LEN] = {0};

	assert_int_equal(rdmafs_rendezvous_score(0, 0, 0, u), 0x2b875fe90b264f7cULL);
	u[0] = 1;
	assert_int_equal(rdmafs_rendezvous_score(1, 2, 3, u), 0x19b10d3feeb9857cULL);
}

static void test_deterministic(void **state)
{
	const uint8_t *reversed[DAEMONS];

	make_uuids();
	for (int i = 0; i < DAEMONS; i++)
		reversed[i] = uuids[DAEMONS - 1 - i];
	for (uint64_t c = 0; c < 2000; c++) {
		int a = rdmafs_place_chunk(uuids, DAEMONS, 99, 1234, c);
		int b = rdmafs_place_chunk(uuids, DAEMONS, 99, 1234, c);
		int r = rdmafs_place_chunk(reversed, DAEMONS, 99, 1234, c);

		assert_true(a >= 0 && a < DAEMONS);
		assert_int_equal(a, b);
		/* the answer is a daemon, not a position in the list */
		assert_ptr_equal(uuids[a], reversed[r]);
	}
	assert_int_equal(rdmafs_place_chunk(uuids, 0, 1, 1, 1), -EINVAL);
	assert_int_equal(rdmafs_place_chunk(NULL, 3, 1, 1, 1), -EINVAL);
	assert_int_equal(rdmafs_place_chunk(uuids, 1, 1, 1, 1), 0);
}

static void test_spread(void **state)
{
	enum { CHUNKS = 80000 };
	unsigned count[DAEMONS] = {0}, seeds_differ = 0;

	make_uuids();
	for (uint64_t c = 0; c < CHUNKS; c++)
		count[rdmafs_place_chunk(uuids, DAEMONS, 7, 42, c)]++;
	for (int i = 0; i < DAEMONS; i++)
		assert_true(count[i] > CHUNKS / DAEMONS * 9 / 10 &&
			    count[i] < CHUNKS / DAEMONS * 11 / 10);
	/* other inodes and seeds give other placements */
	for (uint64_t c = 0; c < 1000; c++)
		seeds_differ += rdmafs_place_chunk(uuids, DAEMONS, 7, 42, c) !=
				rdmafs_place_chunk(uuids, DAEMONS, 8, 42, c);
	assert_true(seeds_differ > 700);
}

static void test_minimal_movement(void **state)
{
	enum { CHUNKS = 20000 };
	const uint8_t *fewer[DAEMONS - 1];
	unsigned moved_in = 0;

	make_uuids();
	/* remove daemon 3: only its chunks move, and they spread over the rest */
	for (int i = 0, j = 0; i < DAEMONS; i++)
		if (i != 3)
			fewer[j++] = uuids[i];
	for (uint64_t c = 0; c < CHUNKS; c++) {
		int before = rdmafs_place_chunk(uuids, DAEMONS, 5, 77, c);
		int after = rdmafs_place_chunk(fewer, DAEMONS - 1, 5, 77, c);

		if (before != 3)
			assert_ptr_equal(uuids[before], fewer[after]);
	}
	/* add a ninth: chunks move only onto it, about 1/9 of them */
	for (uint64_t c = 0; c < CHUNKS; c++) {
		int before = rdmafs_place_chunk(uuids, DAEMONS, 5, 77, c);
		int after = rdmafs_place_chunk(uuids, DAEMONS + 1, 5, 77, c);

		if (after != before) {
			assert_int_equal(after, DAEMONS);
			moved_in++;
		}
	}
	assert_true(moved_in > CHUNKS / 9 * 8 / 10 && moved_in < CHUNKS / 9 * 12 / 10);
}

/*
 * Chains: the best @replicas by score, head first. These chains were
 * computed independently (a sort of the formula's scores).
 */
static void test_chain_frozen(void **state)
{
	static const int want[3][3] = {{7, 5, 2}, {7, 0, 4}, {5, 0, 2}};
	int chain[RDMAFS_MAX_REPLICAS];

	make_uuids();
	for (uint64_t c = 0; c < 3; c++) {
		assert_int_equal(rdmafs_place_chain(uuids, NULL, DAEMONS, 99, 1234, c, 3, chain),
				 3);
		for (int i = 0; i < 3; i++)
			assert_int_equal(chain[i], want[c][i]);
	}
}

/* A layout's score is the rendezvous score at RDMAFS_LAYOUT_INDEX; ranks as chains do. */
static void test_layout_rank(void **state)
{
	uint8_t lo[RDMAFS_UUID_LEN] = {1}, hi[RDMAFS_UUID_LEN] = {2};

	make_uuids();
	for (int i = 0; i < DAEMONS; i++)
		assert_true(rdmafs_layout_score(99, 1234, uuids[i]) ==
			    rdmafs_rendezvous_score(99, 1234, UINT64_MAX, uuids[i]));
	assert_true(rdmafs_rank_cmp(5, hi, 4, lo) < 0); /* the higher score first */
	assert_true(rdmafs_rank_cmp(4, lo, 5, hi) > 0);
	assert_true(rdmafs_rank_cmp(5, lo, 5, hi) < 0); /* a tie: the smaller UUID first */
	assert_true(rdmafs_rank_cmp(5, hi, 5, lo) > 0);
	assert_int_equal(rdmafs_rank_cmp(5, lo, 5, lo), 0);
	/* the top of a ranking by layout score is the one-copy chain of RDMAFS_LAYOUT_INDEX */
	{
		int best = 0, chain;

		for (int i = 1; i < DAEMONS; i++)
			if (rdmafs_rank_cmp(rdmafs_layout_score(7, 42, uuids[i]), uuids[i],
					    rdmafs_layout_score(7, 42, uuids[best]),
					    uuids[best]) < 0)
				best = i;
		assert_int_equal(rdmafs_place_chain(uuids, NULL, DAEMONS, 7, 42,
						    RDMAFS_LAYOUT_INDEX, 1, &chain),
				 1);
		assert_int_equal(chain, best);
	}
}

static void test_chain_rules(void **state)
{
	const uint8_t *fewer[DAEMONS - 1];
	int chain[RDMAFS_MAX_REPLICAS], longer[RDMAFS_MAX_REPLICAS], after[RDMAFS_MAX_REPLICAS];

	make_uuids();
	for (int i = 0, j = 0; i < DAEMONS; i++)
		if (i != 3)
			fewer[j++] = uuids[i];
	for (uint64_t c = 0; c < 2000; c++) {
		int n = rdmafs_place_chain(uuids, NULL, DAEMONS, 5, 77, c, 3, chain);

		assert_int_equal(n, 3);
		/* the head is where one replica goes; members are distinct, in score order */
		assert_int_equal(chain[0], rdmafs_place_chunk(uuids, DAEMONS, 5, 77, c));
		for (int i = 1; i < n; i++) {
			assert_int_not_equal(chain[i], chain[i - 1]);
			assert_true(rdmafs_rendezvous_score(5, 77, c, uuids[chain[i - 1]]) >
				    rdmafs_rendezvous_score(5, 77, c, uuids[chain[i]]));
		}
		/* a longer chain extends a shorter one */
		assert_int_equal(rdmafs_place_chain(uuids, NULL, DAEMONS, 5, 77, c, 4, longer), 4);
		assert_memory_equal(chain, longer, 3 * sizeof(int));
		/* without daemon 3: the chain keeps its order and the next one fills in */
		assert_int_equal(rdmafs_place_chain(fewer, NULL, DAEMONS - 1, 5, 77, c, 3, after),
				 3);
		for (int i = 0, j = 0; i < 3; i++, j++) {
			if (longer[j] == 3)
				j++;
			assert_ptr_equal(fewer[after[i]], uuids[longer[j]]);
		}
	}
	/* no more replicas than daemons; 0 is 1; past the most allowed is refused */
	assert_int_equal(rdmafs_place_chain(uuids, NULL, 2, 1, 1, 1, 3, chain), 2);
	assert_int_not_equal(chain[0], chain[1]);
	assert_int_equal(rdmafs_place_chain(uuids, NULL, DAEMONS, 1, 1, 1, 0, chain), 1);
	assert_int_equal(
		rdmafs_place_chain(uuids, NULL, DAEMONS, 1, 1, 1, RDMAFS_MAX_REPLICAS + 1, chain),
		-EINVAL);
	assert_int_equal(rdmafs_place_chain(uuids, NULL, DAEMONS, 1, 1, 1, 2, NULL), -EINVAL);
	assert_int_equal(rdmafs_place_chain(uuids, NULL, 0, 1, 1, 1, 2, chain), -EINVAL);
}

/* Score order of daemons @a and @b for chunk @c (rdmafs_rendezvous_score(), ties by UUID). */
static int score_cmp(uint64_t c, int a, int b)
{
	uint64_t sa = rdmafs_rendezvous_score(5, 77, c, uuids[a]),
		 sb = rdmafs_rendezvous_score(5, 77, c, uuids[b]);

	if (sa != sb)
		return sa > sb ? -1 : 1;
	return memcmp(uuids[a], uuids[b], RDMAFS_UUID_LEN);
}

/*
 * Failure domains: the chain is the best daemon of each of the best
 * domains, head first, checked against a plain reference (each domain's
 * best daemon, those sorted by score); never two of one domain; no more
 * members than domains; each daemon its own domain is no domains at all.
 */
static void test_chain_domains(void **state)
{
	static const uint32_t hosts[DAEMONS] = {0, 0, 1, 1, 2, 2, 3, 3};
	static const uint32_t two[DAEMONS] = {0, 0, 0, 0, 1, 1, 1, 1};
	static const uint32_t alone[DAEMONS] = {0, 1, 2, 3, 4, 5, 6, 7};
	int chain[RDMAFS_MAX_REPLICAS], plain[RDMAFS_MAX_REPLICAS];

	make_uuids();
	for (uint64_t c = 0; c < 2000; c++) {
		int best[4] = {-1, -1, -1, -1}, n;

		/* the reference: each host's best daemon, then the hosts by that score */
		for (int i = 0; i < DAEMONS; i++)
			if (best[hosts[i]] < 0 || score_cmp(c, i, best[hosts[i]]) < 0)
				best[hosts[i]] = i;
		for (int i = 1; i < 4; i++)
			for (int j = i; j > 0 && score_cmp(c, best[j], best[j - 1]) < 0; j--) {
				int t = best[j];

				best[j] = best[j - 1];
				best[j - 1] = t;
			}
		n = rdmafs_place_chain(uuids, hosts, DAEMONS, 5, 77, c, 3, chain);
		assert_int_equal(n, 3);
		for (int i = 0; i < 3; i++)
			assert_int_equal(chain[i], best[i]);
		/* the head is where one copy goes, domains or not */
		assert_int_equal(chain[0], rdmafs_place_chunk(uuids, DAEMONS, 5, 77, c));
		/* two domains: two members, whatever is asked */
		assert_int_equal(rdmafs_place_chain(uuids, two, DAEMONS, 5, 77, c, 4, chain), 2);
		assert_int_not_equal(two[chain[0]], two[chain[1]]);
		/* every daemon alone in its domain: as with none */
		assert_int_equal(rdmafs_place_chain(uuids, alone, DAEMONS, 5, 77, c, 4, chain), 4);
		assert_int_equal(rdmafs_place_chain(uuids, NULL, DAEMONS, 5, 77, c, 4, plain), 4);
		assert_memory_equal(chain, plain, sizeof(plain));
	}
	assert_int_equal(rdmafs_domain_count(hosts, DAEMONS), 4);
	assert_int_equal(rdmafs_domain_count(two, DAEMONS), 2);
	assert_int_equal(rdmafs_domain_count(NULL, DAEMONS), DAEMONS);
}

/*
 * A drain's new list: daemons kept keep their domains, one added is alone;
 * numbered in order of first appearance. Without one daemon each chain
 * changes by one member at most (the drain copies to that one).
 */
static void test_domains_keep(void **state)
{
	static const uint32_t was_dom[4] = {0, 0, 1, 2};
	static const uint32_t hosts[DAEMONS] = {0, 0, 1, 1, 2, 2, 3, 3};
	const uint8_t *was[4], *now[4], *fewer[DAEMONS - 1];
	uint32_t fewer_dom[DAEMONS - 1], out[4];
	int chain[3], after[3];

	make_uuids();
	for (int i = 0; i < 4; i++)
		was[i] = uuids[i];
	/* B, C, D and a new E: B's partner A is gone, so nobody shares */
	now[0] = uuids[1], now[1] = uuids[2], now[2] = uuids[3], now[3] = uuids[4];
	assert_false(rdmafs_domains_keep(was, was_dom, 4, now, 4, out));
	for (int i = 0; i < 4; i++)
		assert_int_equal(out[i], i);
	/* C, A, E, B: A and B keep sharing, numbered as they first appear */
	now[0] = uuids[2], now[1] = uuids[0], now[2] = uuids[4], now[3] = uuids[1];
	assert_true(rdmafs_domains_keep(was, was_dom, 4, now, 4, out));
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 1);
	assert_int_equal(out[2], 2);
	assert_int_equal(out[3], 1);
	assert_int_equal(rdmafs_domains_check(out, 4, 4), 0);
	assert_false(rdmafs_domains_keep(was, NULL, 4, now, 2, out));

	/* daemon 2 (host 1) drained: each chain loses it and gains one member at most */
	for (int i = 0, j = 0; i < DAEMONS; i++)
		if (i != 2)
			fewer[j++] = uuids[i];
	assert_true(rdmafs_domains_keep(uuids, hosts, DAEMONS, fewer, DAEMONS - 1, fewer_dom));
	for (uint64_t c = 0; c < 2000; c++) {
		int added = 0;

		assert_int_equal(rdmafs_place_chain(uuids, hosts, DAEMONS, 5, 77, c, 3, chain), 3);
		assert_int_equal(
			rdmafs_place_chain(fewer, fewer_dom, DAEMONS - 1, 5, 77, c, 3, after), 3);
		for (int i = 0; i < 3; i++) {
			bool held = false;

			for (int k = 0; k < 3; k++)
				held |= fewer[after[i]] == uuids[chain[k]];
			added += !held;
		}
		assert_true(added <= 1);
	}
}

/* Declared racks and hosts to domains: a rack wins over a host; undeclared is alone. */
static void test_domains_number(void **state)
{
	char k[5][RDMAFS_DOMAIN_KEY_MAX];
	const char *keys[5] = {
		rdmafs_domain_key("h1", NULL, k[0], sizeof(k[0])),
		rdmafs_domain_key("h2", "r1", k[1], sizeof(k[1])),
		rdmafs_domain_key(NULL, "", k[2], sizeof(k[2])),
		rdmafs_domain_key("h1", "", k[3], sizeof(k[3])),
		rdmafs_domain_key("h3", "r1", k[4], sizeof(k[4])),
	};
	uint32_t out[5];

	assert_string_equal(keys[0], "hh1");
	assert_string_equal(keys[1], "rr1");
	assert_string_equal(keys[2], "");
	assert_true(rdmafs_domains_number(keys, 5, out));
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 1);
	assert_int_equal(out[2], 2);
	assert_int_equal(out[3], 0);
	assert_int_equal(out[4], 1);
	assert_int_equal(rdmafs_domains_check(out, 5, 5), 0);
	/* undeclared daemons never share */
	keys[0] = keys[1] = "";
	assert_false(rdmafs_domains_number(keys, 3, out));
	assert_int_equal(rdmafs_domain_count(out, 3), 3);
}

/* Layout.domains off the wire: none, or one a daemon numbered by first appearance. */
static void test_domains_check(void **state)
{
	static const uint32_t ok[4] = {0, 1, 0, 2}, gap[4] = {0, 2, 1, 1}, first[2] = {1, 0};

	assert_int_equal(rdmafs_domains_check(NULL, 0, 4), 0);
	assert_int_equal(rdmafs_domains_check(ok, 4, 4), 0);
	assert_int_equal(rdmafs_domains_check(ok, 3, 4), -EPROTO);
	assert_int_equal(rdmafs_domains_check(gap, 4, 4), -EPROTO);
	assert_int_equal(rdmafs_domains_check(first, 2, 2), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frozen_values),  cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_spread),	       cmocka_unit_test(test_minimal_movement),
		cmocka_unit_test(test_chain_frozen),   cmocka_unit_test(test_chain_rules),
		cmocka_unit_test(test_layout_rank),    cmocka_unit_test(test_chain_domains),
		cmocka_unit_test(test_domains_keep),   cmocka_unit_test(test_domains_check),
		cmocka_unit_test(test_domains_number),
	};

	return cmocka_run_group_tests_name("meta-placement", tests, NULL, NULL) ? 1 : 0;
}
