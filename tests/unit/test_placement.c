// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Rendezvous chunk placement (common/placement.c): fixed
 * results, even spread, and minimal movement when the daemon set changes;
 * chains of replicas in score order.
 */
#include <errno.h>
#include <setjmp.h>
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
		assert_int_equal(rdmafs_place_chain(uuids, DAEMONS, 99, 1234, c, 3, chain), 3);
		for (int i = 0; i < 3; i++)
			assert_int_equal(chain[i], want[c][i]);
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
		int n = rdmafs_place_chain(uuids, DAEMONS, 5, 77, c, 3, chain);

		assert_int_equal(n, 3);
		/* the head is where one replica goes; members are distinct, in score order */
		assert_int_equal(chain[0], rdmafs_place_chunk(uuids, DAEMONS, 5, 77, c));
		for (int i = 1; i < n; i++) {
			assert_int_not_equal(chain[i], chain[i - 1]);
			assert_true(rdmafs_rendezvous_score(5, 77, c, uuids[chain[i - 1]]) >
				    rdmafs_rendezvous_score(5, 77, c, uuids[chain[i]]));
		}
		/* a longer chain extends a shorter one */
		assert_int_equal(rdmafs_place_chain(uuids, DAEMONS, 5, 77, c, 4, longer), 4);
		assert_memory_equal(chain, longer, 3 * sizeof(int));
		/* without daemon 3: the chain keeps its order and the next one fills in */
		assert_int_equal(rdmafs_place_chain(fewer, DAEMONS - 1, 5, 77, c, 3, after), 3);
		for (int i = 0, j = 0; i < 3; i++, j++) {
			if (longer[j] == 3)
				j++;
			assert_ptr_equal(fewer[after[i]], uuids[longer[j]]);
		}
	}
	/* no more replicas than daemons; 0 is 1; past the most allowed is refused */
	assert_int_equal(rdmafs_place_chain(uuids, 2, 1, 1, 1, 3, chain), 2);
	assert_int_not_equal(chain[0], chain[1]);
	assert_int_equal(rdmafs_place_chain(uuids, DAEMONS, 1, 1, 1, 0, chain), 1);
	assert_int_equal(
		rdmafs_place_chain(uuids, DAEMONS, 1, 1, 1, RDMAFS_MAX_REPLICAS + 1, chain),
		-EINVAL);
	assert_int_equal(rdmafs_place_chain(uuids, DAEMONS, 1, 1, 1, 2, NULL), -EINVAL);
	assert_int_equal(rdmafs_place_chain(uuids, 0, 1, 1, 1, 2, chain), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frozen_values), cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_spread),	      cmocka_unit_test(test_minimal_movement),
		cmocka_unit_test(test_chain_frozen),  cmocka_unit_test(test_chain_rules),
	};

	return cmocka_run_group_tests_name("meta-placement", tests, NULL, NULL) ? 1 : 0;
}
