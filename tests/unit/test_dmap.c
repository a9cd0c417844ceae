// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The contracts of daemon_i.h for degraded chains: the daemon's map and
 * lease (dmap.c) and the table of missed writes (missed.c).
 *
 * dmap: no lease and no map refuse every replicated request; the head of a
 * chain is its first UP or DRAINING member; a write's head and missed list
 * must agree with the map (-EREMCHG otherwise), and a member the map does
 * not know makes it behind; skips are counted until left, and the epoch a
 * heartbeat reports stays the oldest one a skip still uses; an older map
 * never replaces a newer one; only a leased UP or DRAINING daemon serves.
 *
 * missed: the file is made by the first record only; records come back in
 * key order (chunk, then daemon) with their chains, page by page, a chunk's
 * daemons together; a deleted record is gone (twice is no error); records
 * outlive a close.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "rdmafs.pb-c.h"
#include "daemon_i.h"

#define UP	 RDMAFS__DAEMON_STATE__DAEMON_STATE_UP
#define DOWN	 RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN
#define DRAINING RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING
#define REMOVED	 RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED
#define SYNCING	 RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING

/* Daemon n's UUID: n in every byte. */
static uint8_t uuids[8][RDMAFS_UUID_LEN];

static ProtobufCBinaryData bin(int n)
{
	return (ProtobufCBinaryData){RDMAFS_UUID_LEN, uuids[n]};
}

/* A map at @epoch of daemons 1..@n in @states, each at tcp://hN unless @no_uri. */
static void set_map(struct dmap *m, uint64_t epoch, const uint32_t *states, int n, int no_uri)
{
	Rdmafs__GetClusterMapResp resp = RDMAFS__GET_CLUSTER_MAP_RESP__INIT;
	Rdmafs__DaemonInfo info[8], *list[8];
	char uris[8][16], *addr[8][1];

	for (int i = 0; i < n; i++) {
		rdmafs__daemon_info__init(&info[i]);
		info[i].uuid = bin(i + 1);
		info[i].state = states[i];
		snprintf(uris[i], sizeof(uris[i]), "tcp://h%d", i + 1);
		addr[i][0] = uris[i];
		info[i].addresses = addr[i];
		info[i].n_addresses = i + 1 == no_uri ? 0 : 1;
		list[i] = &info[i];
	}
	resp.epoch = epoch;
	resp.daemons = list;
	resp.n_daemons = (size_t)n;
	assert_int_equal(dmap_set(m, &resp), 0);
}

static int setup(void **state)
{
	(void)state;
	for (int n = 0; n < 8; n++)
		memset(uuids[n], n, RDMAFS_UUID_LEN);
	return 0;
}

/* Which states serve replicated reads: UP and DRAINING, no other. */
static void test_state_serves(void **state)
{
	(void)state;
	assert_true(dmap_state_serves(RDMAFS__DAEMON_STATE__DAEMON_STATE_UP));
	assert_true(dmap_state_serves(RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING));
	assert_false(dmap_state_serves(RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING));
	assert_false(dmap_state_serves(RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN));
	assert_false(dmap_state_serves(RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED));
	assert_false(dmap_state_serves(0)); /* a daemon the map does not have */
}

static void test_no_map(void **state)
{
	ProtobufCBinaryData members[2] = {bin(1), bin(2)}, head = bin(1);
	struct dmap *m;
	bool down[2];
	uint64_t e;

	(void)state;
	assert_int_equal(dmap_create(uuids[1], &m), 0);
	assert_int_equal(dmap_epoch(m), 0);
	assert_false(dmap_leased(m));
	assert_false(dmap_may_serve(m));
	assert_int_equal(dmap_skip_enter(m, &head, members, 2, NULL, 0, down, &e), -EREMCHG);
	/* a map without a lease serves nothing either */
	set_map(m, 3, (uint32_t[]){UP, UP}, 2, 0);
	assert_false(dmap_may_serve(m));
	assert_int_equal(dmap_skip_enter(m, &head, members, 2, NULL, 0, down, &e), -EREMCHG);
	/* a lease granted long ago has run out */
	dmap_lease(m, dmap_now_ms() - 5000, 1000);
	assert_false(dmap_leased(m));
	dmap_lease(m, dmap_now_ms(), 60000);
	assert_true(dmap_leased(m));
	assert_true(dmap_may_serve(m));
	dmap_destroy(m);
}

static void test_head_and_skips(void **state)
{
	/* 1 UP, 2 DOWN, 3 SYNCING, 4 REMOVED, 5 DRAINING */
	const uint32_t states[] = {UP, DOWN, SYNCING, REMOVED, DRAINING};
	ProtobufCBinaryData head = bin(1), missed[1];
	struct dmap *m;
	char uri[DMAP_URI_MAX];
	bool down[4];
	uint64_t e;

	(void)state;
	assert_int_equal(dmap_create(uuids[3], &m), 0);
	set_map(m, 5, states, 5, 5);
	dmap_lease(m, dmap_now_ms(), 60000);
	assert_int_equal(dmap_epoch(m), 5);
	assert_int_equal(dmap_state(m, uuids[3]), SYNCING);
	assert_int_equal(dmap_state(m, uuids[6]), 0);
	assert_false(dmap_may_serve(m)); /* we are 3: SYNCING */
	assert_int_equal(dmap_uri(m, uuids[1], uri), 0);
	assert_string_equal(uri, "tcp://h1");
	assert_int_equal(dmap_uri(m, uuids[5], uri), -EHOSTUNREACH);
	assert_int_equal(dmap_uri(m, uuids[6], uri), -ENOENT);

	/* the head: the first UP or DRAINING member */
	assert_int_equal(dmap_head(m, (ProtobufCBinaryData[]){bin(2), bin(3), bin(1)}, 3), 2);
	assert_int_equal(dmap_head(m, (ProtobufCBinaryData[]){bin(2), bin(5), bin(1)}, 3), 1);
	assert_int_equal(dmap_head(m, (ProtobufCBinaryData[]){bin(2), bin(3)}, 2), -1);

	/* chain 2 1 3 4, head 1: 2 and 4 are skipped, the skip counts */
	{
		ProtobufCBinaryData members[4] = {bin(2), bin(1), bin(3), bin(4)};

		assert_int_equal(dmap_skip_enter(m, &head, members, 4, NULL, 0, down, &e), 1);
		assert_true(down[0] && !down[1] && !down[2] && down[3]);
		assert_int_equal(e, 5);
		/* a new map while the skip is in flight: the heartbeat still says 5 */
		set_map(m, 6, states, 5, 0);
		assert_int_equal(dmap_epoch(m), 6);
		assert_int_equal(dmap_report_epoch(m), 5);
		dmap_skip_leave(m, e);
		assert_int_equal(dmap_report_epoch(m), 6);
		/* an older map is no news */
		set_map(m, 4, (uint32_t[]){DOWN, DOWN, DOWN, DOWN, DOWN}, 5, 0);
		assert_int_equal(dmap_epoch(m), 6);
		assert_int_equal(dmap_state(m, uuids[1]), UP);

		/* another head than ours: one map is behind */
		head = bin(3);
		assert_int_equal(dmap_skip_enter(m, &head, members, 4, NULL, 0, down, &e),
				 -EREMCHG);
		head = bin(1);
		/* missed: DOWN or REMOVED here, else the sender's map differs from ours */
		missed[0] = bin(2);
		assert_int_equal(dmap_skip_enter(m, &head, members, 4, missed, 1, down, &e), 1);
		dmap_skip_leave(m, e);
		missed[0] = bin(4);
		assert_int_equal(dmap_skip_enter(m, &head, members, 4, missed, 1, down, &e), 1);
		dmap_skip_leave(m, e);
		missed[0] = bin(3);
		assert_int_equal(dmap_skip_enter(m, &head, members, 4, missed, 1, down, &e),
				 -EREMCHG);
		/* a truncate has no head to check */
		assert_int_equal(dmap_skip_enter(m, NULL, members + 1, 2, NULL, 0, down, &e), 0);
		assert_int_equal(dmap_report_epoch(m), 6);
	}
	/* a member the map does not know: -EREMCHG, and the map is behind until the next */
	{
		ProtobufCBinaryData members[2] = {bin(1), bin(6)};

		assert_false(dmap_behind(m));
		assert_int_equal(dmap_skip_enter(m, &head, members, 2, NULL, 0, down, &e),
				 -EREMCHG);
		assert_true(dmap_behind(m));
		set_map(m, 7, states, 5, 0);
		assert_false(dmap_behind(m));
	}
	dmap_destroy(m);
}

/* A data directory with meta/ in it, as the store makes it, in $TMPDIR; @path holds 200 bytes. */
static int make_dir(char *path)
{
	const char *tmp = getenv("TMPDIR");
	char meta[256];
	int fd;

	snprintf(path, 200, "%s/rdmafs-test-missed.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(path));
	snprintf(meta, sizeof(meta), "%s/meta", path);
	assert_int_equal(mkdir(meta, 0700), 0);
	fd = open(path, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	return fd;
}

static void remove_dir(const char *path)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	assert_int_equal(system(cmd), 0);
}

static void test_missed(void **state)
{
	struct store_chunk_id x = {.inode = 7, .index = 2}, y = {.inode = 7, .index = 3};
	const uint8_t(*members)[16] = (const uint8_t(*)[16])uuids + 1; /* 1, 2, 3 */
	struct missed_rec page[8];
	uint8_t targets[4][16];
	struct missed *ms;
	char path[200], file[256];
	size_t n;
	int fd;

	(void)state;
	fd = make_dir(path);
	snprintf(file, sizeof(file), "%s/meta/missed.mdb", path);
	assert_int_equal(missed_open(fd, &ms), 0);
	/* nothing recorded, nothing made */
	assert_int_equal(missed_list(ms, NULL, page, 8, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(missed_add(ms, x, NULL, 0, members, 3), 0);
	assert_int_equal(access(file, F_OK), -1);
	assert_int_equal(missed_add(ms, x, (const uint8_t(*)[16])uuids + 3, 1, members, 5),
			 -EINVAL);

	/* y missed by 3; x missed by 3 and 2 */
	assert_int_equal(missed_add(ms, y, (const uint8_t(*)[16])uuids + 3, 1, members, 3), 0);
	assert_int_equal(access(file, F_OK), 0);
	assert_int_equal(missed_add(ms, x, (const uint8_t(*)[16])uuids + 2, 2, members, 3), 0);
	assert_int_equal(missed_list(ms, NULL, page, 8, &n), 0);
	assert_int_equal(n, 3);
	/* chunk first, then daemon */
	assert_true(page[0].id.index == 2 && page[0].target[0] == 2);
	assert_true(page[1].id.index == 2 && page[1].target[0] == 3);
	assert_true(page[2].id.index == 3 && page[2].target[0] == 3);
	assert_int_equal(page[2].n_members, 3);
	assert_memory_equal(page[2].members, members, 3 * 16);
	/* a page at a time */
	assert_int_equal(missed_list(ms, &page[0], page + 4, 1, &n), 0);
	assert_true(n == 1 && page[4].target[0] == 3 && page[4].id.index == 2);
	assert_int_equal(missed_of_chunk(ms, x, targets, 4, &n), 0);
	assert_true(n == 2 && targets[0][0] == 2 && targets[1][0] == 3);
	assert_int_equal(missed_of_chunk(ms, (struct store_chunk_id){7, 9}, targets, 4, &n), 0);
	assert_int_equal(n, 0);

	/* counted once per chunk and daemon: adding one again changes nothing */
	assert_int_equal(missed_count(ms), 3);
	assert_int_equal(missed_add(ms, y, (const uint8_t(*)[16])uuids + 3, 1, members, 3), 0);
	assert_int_equal(missed_count(ms), 3);

	/* records outlive a close, and their count; a deleted one is gone, twice is no error */
	missed_close(ms);
	assert_int_equal(missed_open(fd, &ms), 0);
	assert_int_equal(missed_count(ms), 3);
	assert_false(page[1].recovered);
	assert_int_equal(missed_del(ms, &page[1]), 0);
	assert_int_equal(missed_del(ms, &page[1]), 0);
	assert_int_equal(missed_count(ms), 2);
	assert_int_equal(missed_of_chunk(ms, x, targets, 4, &n), 0);
	assert_true(n == 1 && targets[0][0] == 2);
	/* of those, the daemons that serve reads in a map: UP and DRAINING, not DOWN, SYNCING */
	{
		struct dmap *m;

		assert_int_equal(dmap_create(uuids[1], &m), 0);
		set_map(m, 3, (uint32_t[]){UP, UP, DOWN}, 3, 0);
		assert_int_equal(missed_of_chunk_serving(ms, m, x, targets, &n), 0);
		assert_true(n == 1 && targets[0][0] == 2);
		assert_int_equal(missed_of_chunk_serving(ms, m, y, targets, &n), 0);
		assert_int_equal(n, 0);
		set_map(m, 4, (uint32_t[]){UP, SYNCING, DRAINING}, 3, 0);
		assert_int_equal(missed_of_chunk_serving(ms, m, x, targets, &n), 0);
		assert_int_equal(n, 0);
		assert_int_equal(missed_of_chunk_serving(ms, m, y, targets, &n), 0);
		assert_true(n == 1 && targets[0][0] == 3);
		dmap_destroy(m);
	}
	/* a copy handed over (missed_add_handed()): recovered, over an ordinary record too */
	assert_int_equal(missed_add_handed(ms, x, (const uint8_t(*)[16])uuids + 2, 2, members, 3),
			 0);
	assert_int_equal(missed_count(ms), 3);
	assert_int_equal(missed_list(ms, NULL, page, 8, &n), 0);
	assert_int_equal(n, 3);
	assert_true(page[0].id.index == 2 && page[0].target[0] == 2 && page[0].recovered);
	assert_true(page[1].id.index == 2 && page[1].target[0] == 3 && page[1].recovered);
	assert_true(page[2].id.index == 3 && !page[2].recovered);
	/* and an ordinary record of the same chunk and daemon after it leaves it recovered */
	assert_int_equal(missed_add(ms, x, (const uint8_t(*)[16])uuids + 3, 1, members, 3), 0);
	assert_int_equal(missed_list(ms, NULL, page, 8, &n), 0);
	assert_true(n == 3 && page[1].target[0] == 3 && page[1].recovered);
	missed_close(ms);
	close(fd);
	remove_dir(path);
}

/*
 * missed_inflight_*(): a write whose slot a killed daemon left busy becomes,
 * at the next open, records (marked recovered) of its chunk as missed by every
 * other member of its chain; a slot ended, or past the count, leaves nothing;
 * after the open every slot is free.
 */
static void test_inflight(void **state)
{
	struct store_chunk_id x = {.inode = 9, .index = 4}, y = {.inode = 9, .index = 5};
	const uint8_t(*chain)[16] = (const uint8_t(*)[16])uuids + 1; /* 1 (this daemon), 2, 3 */
	const uint8_t *self = uuids[1];
	struct missed_rec page[8];
	struct missed *ms;
	char path[200], file[256];
	unsigned recovered = 7;
	size_t n;
	int fd;

	(void)state;
	fd = make_dir(path);
	snprintf(file, sizeof(file), "%s/meta/inflight", path);
	assert_int_equal(missed_open(fd, &ms), 0);
	assert_int_equal(missed_inflight_open(ms, self, 4, &recovered), 0);
	assert_int_equal(recovered, 0);
	assert_int_equal(access(file, F_OK), 0);
	missed_inflight_begin(ms, 0, y, chain, 3);
	missed_inflight_end(ms, 0);
	missed_inflight_begin(ms, 4, y, chain, 3); /* no such slot: ignored */
	missed_inflight_end(ms, 4);
	missed_inflight_begin(ms, 2, x, chain, 3);
	/* an older record of x missed by 2, of another chain: the recovery takes it over */
	assert_int_equal(missed_add(ms, x, (const uint8_t(*)[16])uuids + 2, 1,
				    (const uint8_t(*)[16])uuids + 4, 3),
			 0);
	/* killed here: the mapping's contents stay in the file */
	missed_close(ms);
	assert_int_equal(missed_open(fd, &ms), 0);
	assert_int_equal(missed_count(ms), 1);
	assert_int_equal(missed_inflight_open(ms, self, 2, &recovered), 0);
	assert_int_equal(recovered, 1);
	assert_int_equal(missed_count(ms), 2);
	assert_int_equal(missed_list(ms, NULL, page, 8, &n), 0);
	assert_int_equal(n, 2);
	for (int i = 0; i < 2; i++) {
		assert_true(page[i].id.inode == x.inode && page[i].id.index == x.index);
		assert_int_equal(page[i].target[0], 2 + i);
		assert_true(page[i].recovered);
		assert_int_equal(page[i].n_members, 3);
		assert_memory_equal(page[i].members, chain, 3 * 16);
	}
	/* an ordinary record of the same chunk and daemon leaves it recovered */
	assert_int_equal(missed_add(ms, x, (const uint8_t(*)[16])uuids + 3, 1, chain, 3), 0);
	assert_int_equal(missed_list(ms, NULL, page, 8, &n), 0);
	assert_true(n == 2 && page[1].target[0] == 3 && page[1].recovered);
	/* the slots were cleared: a second start finds nothing */
	missed_close(ms);
	assert_int_equal(missed_open(fd, &ms), 0);
	assert_int_equal(missed_inflight_open(ms, self, 2, &recovered), 0);
	assert_int_equal(recovered, 0);
	assert_int_equal(missed_count(ms), 2);
	missed_close(ms);
	close(fd);
	remove_dir(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_serves),   cmocka_unit_test(test_no_map),
		cmocka_unit_test(test_head_and_skips), cmocka_unit_test(test_missed),
		cmocka_unit_test(test_inflight),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
