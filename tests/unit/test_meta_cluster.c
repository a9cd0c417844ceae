// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The cluster map of the metadata service: registration, heartbeats and the
 * DOWN timeout, the epoch, operator states, and the layouts new files get.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "rdmafs_common.h"
#include "test_meta_util.h"

#define ROOT	 1
#define UP	 RDMAFS__DAEMON_STATE__DAEMON_STATE_UP
#define DOWN	 RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN
#define DRAINING RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING
#define REMOVED	 RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED
#define SYNCING	 RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING
#define FOUND	 RDMAFS__PATH_STATE__PATH_STATE_FOUND
#define NO_INODE RDMAFS__PATH_STATE__PATH_STATE_NO_INODE
#define UNLINKED RDMAFS__PATH_STATE__PATH_STATE_UNLINKED

static int setup(void **state)
{
	struct tm_env *e = calloc(1, sizeof(*e));

	tm_setup(e, 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct tm_env *e = *state;

	tm_teardown(e);
	free(e);
	return 0;
}

static uint64_t epoch(struct meta *m)
{
	Rdmafs__GetClusterMapResp *r;
	uint64_t v;

	assert_int_equal(tm_cluster_map(m, 0, &r), 0);
	v = r->epoch;
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return v;
}

static void test_register(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__RegisterDaemonResp *rr;
	Rdmafs__GetClusterMapResp *map;
	uint64_t e0 = epoch(e->m), e1;

	assert_int_equal(tm_register(e->m, 1, "rdma://10.0.0.1:7471", 1000, 10, &rr), 0);
	assert_int_equal(rr->state, UP);
	assert_int_equal(rr->heartbeat_interval_ms, 2000);
	e1 = rr->epoch;
	assert_true(e1 > e0);
	protobuf_c_message_free_unpacked(&rr->base, NULL);
	/* the same again changes nothing; a heartbeat's numbers do not bump either */
	assert_int_equal(tm_register(e->m, 1, "rdma://10.0.0.1:7471", 1000, 20, NULL), 0);
	assert_int_equal(epoch(e->m), e1);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 30, NULL), 0);
	assert_int_equal(epoch(e->m), e1);
	/* a new address does */
	assert_int_equal(tm_register(e->m, 1, "tcp://10.0.0.1:7471", 1000, 20, NULL), 0);
	assert_true(epoch(e->m) > e1);
	assert_int_equal(tm_register(e->m, 2, "tcp://10.0.0.2:7471", 2000, 0, NULL), 0);

	assert_int_equal(tm_cluster_map(e->m, 0, &map), 0);
	assert_int_equal(map->n_daemons, 2);
	assert_false(map->unchanged);
	assert_int_equal(map->daemons[0]->n_addresses, 1);
	assert_string_equal(map->daemons[0]->addresses[0], "tcp://10.0.0.1:7471");
	assert_int_equal(map->daemons[0]->capacity_bytes, 1000);
	assert_int_equal(map->daemons[0]->used_bytes, 30 - 10); /* the register's 20 */
	assert_true(map->daemons[0]->last_heartbeat_unix_ms > 1600000000000ULL);
	e1 = map->epoch;
	protobuf_c_message_free_unpacked(&map->base, NULL);
	assert_int_equal(tm_cluster_map(e->m, e1, &map), 0);
	assert_true(map->unchanged);
	assert_int_equal(map->n_daemons, 0);
	protobuf_c_message_free_unpacked(&map->base, NULL);
	assert_int_equal(tm_cluster_map(e->m, e1 - 1, &map), 0);
	assert_false(map->unchanged);
	assert_int_equal(map->n_daemons, 2);
	protobuf_c_message_free_unpacked(&map->base, NULL);

	/* bad requests */
	{
		Rdmafs__RegisterDaemonReq req = RDMAFS__REGISTER_DAEMON_REQ__INIT;
		uint8_t uuid[15] = {1};
		char *empty[1] = {""};

		req.uuid.data = uuid;
		req.uuid.len = sizeof(uuid);
		assert_int_equal(
			tm_call(e->m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req, NULL, NULL),
			-EINVAL);
		req.uuid.len = 0;
		assert_int_equal(
			tm_call(e->m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req, NULL, NULL),
			-EINVAL);
		req.uuid.len = 16;
		req.uuid.data = (uint8_t[16]){9};
		req.addresses = empty;
		req.n_addresses = 1;
		assert_int_equal(
			tm_call(e->m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req, NULL, NULL),
			-EINVAL);
	}
	assert_int_equal(tm_heartbeat(e->m, 77, 1, 1, NULL), -ENOENT);
}

static void test_heartbeat_timeout(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__HeartbeatResp *hr;
	uint64_t e0;

	assert_int_equal(meta_tick(e->m, 100), 0);
	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_register(e->m, 2, "tcp://b:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_register(e->m, 3, "tcp://c:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_set_state(e->m, 3, DRAINING, false, NULL), 0);
	assert_int_equal(meta_tick(e->m, 105), 0);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 0, NULL), 0);
	assert_int_equal(meta_tick(e->m, 110), 0);
	e0 = epoch(e->m);
	/* 2 has been silent for 11 s, 1 for 6 s */
	assert_int_equal(meta_tick(e->m, 111), 1);
	assert_int_equal(tm_daemon_state(e->m, 2), DOWN);
	assert_int_equal(tm_daemon_state(e->m, 1), UP);
	assert_int_equal(tm_daemon_state(e->m, 3), DRAINING);
	assert_true(epoch(e->m) > e0);
	e0 = epoch(e->m);
	assert_int_equal(meta_tick(e->m, 112), 0);
	assert_int_equal(epoch(e->m), e0);
	assert_int_equal(meta_tick(e->m, 116), 1);
	assert_int_equal(tm_daemon_state(e->m, 1), DOWN);
	/*
	 * A heartbeat brings it back SYNCING (it may lack writes to copies):
	 * the DRAINING daemon has not reported at this epoch (test_syncing).
	 */
	assert_int_equal(tm_heartbeat(e->m, 2, 1000, 5, &hr), 0);
	assert_int_equal(hr->state, SYNCING);
	assert_true(hr->epoch > e0);
	assert_int_equal(hr->lease_ms, 5000); /* half the 10 s timeout */
	protobuf_c_message_free_unpacked(&hr->base, NULL);
	assert_int_equal(tm_daemon_state(e->m, 2), SYNCING);
	/* so does registering again */
	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_daemon_state(e->m, 1), SYNCING);
	/* and a SYNCING daemon that goes silent is DOWN again */
	assert_int_equal(meta_tick(e->m, 127), 2);
	assert_int_equal(tm_daemon_state(e->m, 1), DOWN);
	assert_int_equal(tm_daemon_state(e->m, 2), DOWN);
	assert_int_equal(tm_heartbeat(e->m, 3, 1000, 5, &hr), 0);
	assert_int_equal(hr->state, DRAINING);
	protobuf_c_message_free_unpacked(&hr->base, NULL);
}

/* A heartbeat that reports the map epoch it routes by and the chunks it is to copy. */
static int report(struct meta *m, unsigned n, uint64_t known_epoch, unsigned missed_by,
		  uint64_t chunks)
{
	Rdmafs__HeartbeatReq req = RDMAFS__HEARTBEAT_REQ__INIT;
	Rdmafs__MissCount mc = RDMAFS__MISS_COUNT__INIT, *list[1] = {&mc};
	uint8_t uuid[16], target[16];

	tm_uuid(uuid, n);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	req.capacity_bytes = 1000;
	req.known_epoch = known_epoch;
	if (missed_by) {
		tm_uuid(target, missed_by);
		mc.uuid.data = target;
		mc.uuid.len = sizeof(target);
		mc.chunks = chunks;
		req.misses = list;
		req.n_misses = 1;
	}
	return tm_call(m, RDMAFS__METHOD__METHOD_HEARTBEAT, &req, NULL, NULL);
}

/* DaemonInfo.chunks_missing of daemon @n in the cluster map. */
static uint64_t chunks_missing(struct meta *m, unsigned n)
{
	Rdmafs__GetClusterMapResp *r;
	uint8_t uuid[16];
	uint64_t v = UINT64_MAX;

	tm_uuid(uuid, n);
	assert_int_equal(tm_cluster_map(m, 0, &r), 0);
	for (size_t i = 0; i < r->n_daemons; i++)
		if (memcmp(r->daemons[i]->uuid.data, uuid, 16) == 0)
			v = r->daemons[i]->chunks_missing;
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return v;
}

/*
 * SYNCING -> UP: once every daemon not DOWN has reported at the current
 * epoch with no chunk left to copy to it (docs/replication.md).
 */
static void test_syncing(void **state)
{
	struct tm_env *e = *state;
	uint64_t e1;

	assert_int_equal(meta_tick(e->m, 100), 0);
	for (unsigned d = 1; d <= 4; d++)
		assert_int_equal(tm_register(e->m, d, "tcp://a:1", 1000, 0, NULL), 0);
	assert_int_equal(meta_tick(e->m, 106), 0);
	for (unsigned d = 1; d <= 3; d++)
		assert_int_equal(tm_heartbeat(e->m, d, 1000, 0, NULL), 0);
	assert_int_equal(meta_tick(e->m, 111), 1); /* 4 is DOWN */
	assert_int_equal(tm_daemon_state(e->m, 4), DOWN);
	assert_int_equal(tm_heartbeat(e->m, 4, 1000, 0, NULL), 0);
	assert_int_equal(tm_daemon_state(e->m, 4), SYNCING);
	/* it may lack writes: no drain (DRAINING serves reads) until it is UP */
	assert_int_equal(tm_set_state(e->m, 4, DRAINING, false, NULL), -EBUSY);
	assert_int_equal(tm_daemon_state(e->m, 4), SYNCING);
	e1 = epoch(e->m);
	/* 1 still has chunks for 4: it stays SYNCING whatever the others say */
	assert_int_equal(report(e->m, 1, e1, 4, 3), 0);
	assert_int_equal(report(e->m, 2, e1, 0, 0), 0);
	assert_int_equal(report(e->m, 3, e1, 0, 0), 0);
	assert_int_equal(tm_daemon_state(e->m, 4), SYNCING);
	/* the map says how many chunks 4 lacks: under-replication */
	assert_int_equal(chunks_missing(e->m, 4), 3);
	assert_int_equal(report(e->m, 2, e1, 4, 2), 0);
	assert_int_equal(chunks_missing(e->m, 4), 5);
	assert_int_equal(report(e->m, 2, e1, 0, 0), 0);
	assert_int_equal(chunks_missing(e->m, 4), 3);
	assert_int_equal(chunks_missing(e->m, 1), 0);
	/* chunks for another daemon hold nothing up; an older epoch is no report */
	assert_int_equal(report(e->m, 1, e1 - 1, 0, 0), 0);
	assert_int_equal(tm_daemon_state(e->m, 4), SYNCING);
	assert_int_equal(report(e->m, 1, e1, 2, 7), 0);
	assert_int_equal(tm_daemon_state(e->m, 4), UP);
	assert_int_equal(chunks_missing(e->m, 4), 0);
	assert_int_equal(chunks_missing(e->m, 2), 7);
	assert_true(epoch(e->m) > e1);

	/* a daemon DOWN need not report: with every other one DOWN, the first back is UP */
	assert_int_equal(meta_tick(e->m, 122), 4);
	assert_int_equal(tm_heartbeat(e->m, 4, 1000, 0, NULL), 0);
	assert_int_equal(tm_daemon_state(e->m, 4), UP);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 0, NULL), 0);
	assert_int_equal(tm_daemon_state(e->m, 1), SYNCING);
	e1 = epoch(e->m);
	/* its own report does not count, 4's does */
	assert_int_equal(report(e->m, 1, e1, 0, 0), 0);
	assert_int_equal(tm_daemon_state(e->m, 1), SYNCING);
	assert_int_equal(report(e->m, 4, e1, 0, 0), 0);
	assert_int_equal(tm_daemon_state(e->m, 1), UP);
}

/* After a restart every daemon gets a full timeout from the first tick. */
static void test_restart_grace(void **state)
{
	struct tm_env *e = *state;

	assert_int_equal(meta_tick(e->m, 5000), 0);
	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), 0);
	tm_reopen(e);
	/* another clock now: smaller than before */
	assert_int_equal(meta_tick(e->m, 20), 0);
	assert_int_equal(meta_tick(e->m, 30), 0);
	assert_int_equal(tm_daemon_state(e->m, 1), UP);
	assert_int_equal(meta_tick(e->m, 31), 1);
	assert_int_equal(tm_daemon_state(e->m, 1), DOWN);
}

static void test_set_state(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__GetClusterMapResp *map;
	uint64_t e0, e1, h, freed;
	uint8_t uuid1[16];
	struct tm_attr a;

	tm_uuid(uuid1, 1);

	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_register(e->m, 2, "tcp://b:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_set_state(e->m, 1, DOWN, false, NULL), -EINVAL);
	assert_int_equal(tm_set_state(e->m, 1, 0, false, NULL), -EINVAL);
	assert_int_equal(tm_set_state(e->m, 1, 42, false, NULL), -EINVAL);
	assert_int_equal(tm_set_state(e->m, 9, DRAINING, false, NULL), -ENOENT);
	/* REMOVED needs a finished drain: draining, and in no layout */
	assert_int_equal(tm_set_state(e->m, 1, REMOVED, false, NULL), -EBUSY);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, true, O_RDWR, &a, &h, NULL), 0);
	assert_int_equal(a.stripe_width, 2);
	e0 = epoch(e->m);
	assert_int_equal(tm_set_state(e->m, 1, DRAINING, false, &e1), 0);
	assert_true(e1 > e0);
	assert_int_equal(tm_set_state(e->m, 1, DRAINING, false, &e0), 0);
	assert_int_equal(e0, e1);
	assert_int_equal(tm_set_state(e->m, 1, REMOVED, false, NULL), -EBUSY);
	/* new files avoid it */
	assert_int_equal(tm_create(e->m, NULL, ROOT, "g", 0644, true, O_RDWR, &a, NULL, NULL), 0);
	assert_int_equal(a.stripe_width, 1);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", &freed), 0);
	assert_int_equal(freed, 0); /* still open */
	assert_int_equal(tm_set_state(e->m, 1, REMOVED, false, NULL), -EBUSY);
	assert_int_equal(tm_release(e->m, h, 0, &freed), 0);
	assert_int_not_equal(freed, 0);
	assert_int_equal(tm_set_state(e->m, 1, REMOVED, false, NULL), 0);
	assert_int_equal(tm_daemon_state(e->m, 1), REMOVED);
	/* the map forgets it, unless asked for the removed too */
	assert_int_equal(tm_cluster_map(e->m, 0, &map), 0);
	assert_int_equal(map->n_daemons, 1);
	assert_memory_not_equal(map->daemons[0]->uuid.data, uuid1, 16);
	protobuf_c_message_free_unpacked(&map->base, NULL);
	/* a removed daemon is refused when it registers or heartbeats again, and stays removed */
	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), -EIDRM);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 0, NULL), -EIDRM);
	assert_int_equal(tm_daemon_state(e->m, 1), REMOVED);
	/* removal is final; removing again changes nothing */
	assert_int_equal(tm_set_state(e->m, 1, UP, false, NULL), -EIDRM);
	assert_int_equal(tm_set_state(e->m, 1, DRAINING, false, NULL), -EIDRM);
	assert_int_equal(tm_set_state(e->m, 1, REMOVED, false, NULL), 0);
	/* force skips the drain */
	assert_int_equal(tm_set_state(e->m, 2, REMOVED, true, NULL), 0);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "h", 0644, true, O_RDWR, NULL, NULL, NULL),
			 -ENOSPC);
	assert_int_equal(tm_set_state(e->m, 2, UP, false, NULL), -EIDRM);
	assert_int_equal(tm_register(e->m, 3, "tcp://c:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "h", 0644, true, O_RDWR, NULL, NULL, NULL), 0);
}

/* UP ends a drain (undrain), and only that: a DOWN daemon comes up by heartbeating. */
static void test_undrain_state(void **state)
{
	struct tm_env *e = *state;
	uint64_t e0, e1;

	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_register(e->m, 2, "tcp://b:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_set_state(e->m, 1, UP, false, &e0), 0); /* already UP: nothing */
	assert_int_equal(tm_set_state(e->m, 1, DRAINING, false, NULL), 0);
	assert_int_equal(tm_set_state(e->m, 1, UP, false, &e1), 0);
	assert_true(e1 > e0);
	assert_int_equal(tm_daemon_state(e->m, 1), UP);
	/* both silent past the timeout: DOWN, and UP is refused until a heartbeat */
	assert_int_equal(meta_tick(e->m, 100), 0);
	assert_int_equal(meta_tick(e->m, 200), 2);
	assert_int_equal(tm_daemon_state(e->m, 2), DOWN);
	assert_int_equal(tm_set_state(e->m, 2, UP, false, NULL), -EHOSTDOWN);
	/* nor DRAINING: once back it would serve reads it may have missed writes of */
	assert_int_equal(tm_set_state(e->m, 2, DRAINING, false, NULL), -EBUSY);
	assert_int_equal(tm_heartbeat(e->m, 2, 1000, 0, NULL), 0);
	assert_int_equal(tm_daemon_state(e->m, 2), UP);
}

static void paths_check(struct meta *m, const uint64_t *inos, size_t n,
			const Rdmafs__PathState *states, const char *const *paths)
{
	Rdmafs__InodePathsReq req = RDMAFS__INODE_PATHS_REQ__INIT;
	Rdmafs__InodePathsResp *r;

	req.inos = (uint64_t *)inos;
	req.n_inos = n;
	assert_int_equal(tm_call(m, RDMAFS__METHOD__METHOD_INODE_PATHS, &req,
				 &rdmafs__inode_paths_resp__descriptor, (void **)&r),
			 0);
	assert_int_equal(r->n_paths, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(r->paths[i]->ino, inos[i]);
		assert_int_equal(r->paths[i]->state, states[i]);
		assert_int_equal(r->paths[i]->path.len, paths[i] ? strlen(paths[i]) : 0);
		if (paths[i])
			assert_memory_equal(r->paths[i]->path.data, paths[i], strlen(paths[i]));
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* INODE_PATHS: a path for each inode asked, or why there is none. */
static void test_inode_paths(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr d, sub;
	int64_t f, g, gone;
	uint64_t h;

	assert_int_equal(tm_register(e->m, 1, "tcp://a:1", 1000, 0, NULL), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, d.ino, "sub", 0755, &sub), 0);
	f = tm_mkfile(e->m, NULL, sub.ino, "f", 0644);
	g = tm_mkfile(e->m, NULL, ROOT, "g", 0644);
	gone = tm_mkfile(e->m, NULL, ROOT, "gone", 0644);
	assert_true(f > 0 && g > 0 && gone > 0);
	assert_int_equal(tm_open(e->m, NULL, (uint64_t)gone, O_RDONLY, &h), 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "gone", NULL), 0);
	{
		const uint64_t inos[] = {(uint64_t)f,	 ROOT,	      999999,	  sub.ino,
					 (uint64_t)gone, (uint64_t)g, (uint64_t)f};
		const Rdmafs__PathState states[] = {FOUND,    FOUND, NO_INODE, FOUND,
						    UNLINKED, FOUND, FOUND};
		const char *const paths[] = {"/d/sub/f", "/",  NULL,	  "/d/sub",
					     NULL,	 "/g", "/d/sub/f"};

		paths_check(e->m, inos, 7, states, paths);
	}
	/* a rename moves the path; bad requests */
	assert_int_equal(tm_rename(e->m, NULL, d.ino, "sub", ROOT, "moved", 0, NULL), 0);
	{
		const uint64_t inos[] = {(uint64_t)f};
		const Rdmafs__PathState states[] = {FOUND};
		const char *const paths[] = {"/moved/f"};
		Rdmafs__InodePathsReq req = RDMAFS__INODE_PATHS_REQ__INIT;
		uint64_t zero = 0;

		paths_check(e->m, inos, 1, states, paths);
		assert_int_equal(
			tm_call(e->m, RDMAFS__METHOD__METHOD_INODE_PATHS, &req, NULL, NULL),
			-EINVAL);
		req.inos = &zero;
		req.n_inos = 1;
		assert_int_equal(
			tm_call(e->m, RDMAFS__METHOD__METHOD_INODE_PATHS, &req, NULL, NULL),
			-EINVAL);
	}
}

static void test_layouts(void **state)
{
	struct tm_env *e = *state;
	unsigned uses[9] = {0};
	char name[32];

	assert_int_equal(tm_create(e->m, NULL, ROOT, "none", 0644, true, O_RDWR, NULL, NULL, NULL),
			 -ENOSPC);
	for (unsigned i = 1; i <= 8; i++)
		assert_int_equal(tm_register(e->m, i, "tcp://x:1", 1ULL << 40, 0, NULL), 0);
	assert_int_equal(meta_tick(e->m, 1000), 0);
	for (int f = 0; f < 400; f++) {
		Rdmafs__CreateReq req = RDMAFS__CREATE_REQ__INIT;
		Rdmafs__CreateResp *r = NULL;

		snprintf(name, sizeof(name), "f%d", f);
		req.parent = ROOT;
		req.name.data = (uint8_t *)name;
		req.name.len = strlen(name);
		req.mode = S_IFREG | 0644;
		req.exclusive = true;
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_CREATE, &req,
					 &rdmafs__create_resp__descriptor, (void **)&r),
				 0);
		assert_non_null(r->layout);
		assert_int_equal(r->layout->stripe_width, 4);
		assert_int_equal(r->layout->n_daemons, 4);
		assert_int_equal(r->layout->chunk_size, 1 << 20);
		assert_int_equal(r->layout->placement, RDMAFS__PLACEMENT__PLACEMENT_RENDEZVOUS_V1);
		for (size_t i = 0; i < 4; i++) {
			assert_int_equal(r->layout->daemons[i].len, 16);
			assert_true(r->layout->daemons[i].data[0] >= 1 &&
				    r->layout->daemons[i].data[0] <= 8);
			uses[r->layout->daemons[i].data[0]]++;
			for (size_t j = 0; j < i; j++)
				assert_memory_not_equal(r->layout->daemons[i].data,
							r->layout->daemons[j].data, 16);
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	/* 1600 slots over 8 daemons: each near 200 */
	for (unsigned i = 1; i <= 8; i++)
		assert_true(uses[i] > 140 && uses[i] < 260);
	/* a DOWN daemon gets no new files */
	assert_int_equal(meta_tick(e->m, 1005), 0);
	for (unsigned i = 2; i <= 8; i++)
		assert_int_equal(tm_heartbeat(e->m, i, 1ULL << 40, 0, NULL), 0);
	assert_int_equal(meta_tick(e->m, 1011), 1);
	for (int f = 0; f < 50; f++) {
		struct tm_attr a;
		Rdmafs__OpenResp *r = NULL;
		Rdmafs__OpenReq oreq = RDMAFS__OPEN_REQ__INIT;

		snprintf(name, sizeof(name), "g%d", f);
		assert_int_equal(
			tm_create(e->m, NULL, ROOT, name, 0644, true, O_RDWR, &a, NULL, NULL), 0);
		oreq.ino = a.ino;
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_OPEN, &oreq,
					 &rdmafs__open_resp__descriptor, (void **)&r),
				 0);
		for (size_t i = 0; i < r->layout->n_daemons; i++)
			assert_int_not_equal(r->layout->daemons[i].data[0], 1);
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
}

static void test_custom_options(void **state)
{
	struct tm_env *e = *state;
	struct meta_options o = {.chunk_size = 4 << 20,
				 .stripe_width = 2,
				 .heartbeat_timeout_sec = 3,
				 .heartbeat_interval_ms = 500,
				 .log = tm_quiet_log};
	Rdmafs__RegisterDaemonResp *rr;
	struct tm_attr a;

	meta_close(e->m);
	assert_int_equal(meta_open(e->dir, &o, &e->m), 0);
	assert_int_equal(meta_tick(e->m, 10), 0);
	for (unsigned i = 1; i <= 3; i++)
		assert_int_equal(tm_register(e->m, i, "tcp://x:1", 1ULL << 40, 0, NULL), 0);
	assert_int_equal(tm_register(e->m, 1, "tcp://x:1", 1ULL << 40, 0, &rr), 0);
	assert_int_equal(rr->heartbeat_interval_ms, 500);
	protobuf_c_message_free_unpacked(&rr->base, NULL);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, true, O_RDWR, &a, NULL, NULL), 0);
	assert_int_equal(a.chunk_size, 4 << 20);
	assert_int_equal(a.stripe_width, 2);
	assert_int_equal(meta_tick(e->m, 13), 0);
	assert_int_equal(meta_tick(e->m, 14), 3);
}

/* Registers daemon @n with a name, a disk id, a role, its space and its failure domains. */
static int register_full(struct meta *m, unsigned n, const char *name, const char *disk,
			 bool hosts_metadata, uint64_t capacity, uint64_t used, const char *host,
			 const char *rack)
{
	Rdmafs__RegisterDaemonReq req = RDMAFS__REGISTER_DAEMON_REQ__INIT;
	char *addresses[1] = {"tcp://10.0.0.9:7471"};
	uint8_t uuid[16];

	tm_uuid(uuid, n);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	req.addresses = addresses;
	req.n_addresses = 1;
	req.capacity_bytes = capacity;
	req.used_bytes = used;
	req.name = (char *)name;
	req.disk_id = (char *)disk;
	req.hosts_metadata = hosts_metadata;
	req.host = (char *)host;
	req.rack = (char *)rack;
	return tm_call(m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req, NULL, NULL);
}

static int register_named(struct meta *m, unsigned n, const char *name, const char *disk,
			  bool hosts_metadata, uint64_t capacity, uint64_t used)
{
	return register_full(m, n, name, disk, hosts_metadata, capacity, used, "", "");
}

/* The name, disk id and role a daemon registers with: in the map, kept, checked. */
static void test_names(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__GetClusterMapResp *map;
	char long_name[66];
	uint64_t e1;

	assert_int_equal(register_named(e->m, 1, "meta-1", "m:8:1", true, 1000, 10), 0);
	assert_int_equal(register_named(e->m, 2, "storage-2", "m:8:1", false, 1000, 10), 0);
	e1 = epoch(e->m);
	/* a new name is news for the map */
	assert_int_equal(register_named(e->m, 2, "storage-two", "m:8:1", false, 1000, 10), 0);
	assert_true(epoch(e->m) > e1);
	tm_reopen(e);
	assert_int_equal(tm_cluster_map(e->m, 0, &map), 0);
	assert_int_equal(map->n_daemons, 2);
	assert_string_equal(map->daemons[0]->name, "meta-1");
	assert_string_equal(map->daemons[0]->disk_id, "m:8:1");
	assert_true(map->daemons[0]->hosts_metadata);
	assert_string_equal(map->daemons[1]->name, "storage-two");
	assert_false(map->daemons[1]->hosts_metadata);
	protobuf_c_message_free_unpacked(&map->base, NULL);

	/* printable, no spaces, at most 64 bytes */
	assert_int_equal(register_named(e->m, 3, "two words", "", false, 1, 0), -EINVAL);
	assert_int_equal(register_named(e->m, 3, "ok", "tab\there", false, 1, 0), -EINVAL);
	memset(long_name, 'x', 65);
	long_name[65] = '\0';
	assert_int_equal(register_named(e->m, 3, long_name, "", false, 1, 0), -EINVAL);
	long_name[64] = '\0';
	assert_int_equal(register_named(e->m, 3, long_name, "", false, 1, 0), 0);
}

/*
 * STATFS counts a file system shared by several daemons once: its free space
 * once, what each daemon stores added up. Daemons without a disk id count alone.
 */
static void test_statfs_shared_disk(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__StatfsResp *r;
	const uint64_t b = 4096;

	/* disk A: free 1000 blocks (one report lags at 990), 100 + 200 stored */
	assert_int_equal(register_named(e->m, 1, "a1", "host:8:1", true, 1100 * b, 100 * b), 0);
	assert_int_equal(register_named(e->m, 2, "a2", "host:8:1", false, 1190 * b, 200 * b), 0);
	/* disk B: one daemon, 50 stored, 500 free */
	assert_int_equal(register_named(e->m, 3, "b1", "host:8:2", false, 550 * b, 50 * b), 0);
	/* no disk id: its own */
	assert_int_equal(register_named(e->m, 4, "c1", "", false, 70 * b, 20 * b), 0);
	assert_int_equal(tm_statfs(e->m, &r), 0);
	assert_int_equal(r->bsize, b);
	assert_int_equal(r->blocks, (100 + 200 + 1000) + 550 + 70);
	assert_int_equal(r->bfree, 1000 + 500 + 50);
	assert_int_equal(r->bavail, r->bfree);
	protobuf_c_message_free_unpacked(&r->base, NULL);

	/* a daemon that is not up counts for nothing */
	assert_int_equal(tm_set_state(e->m, 3, DRAINING, false, NULL), 0);
	assert_int_equal(tm_statfs(e->m, &r), 0);
	assert_int_equal(r->blocks, (100 + 200 + 1000) + 70);
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

static int register_in(struct meta *m, unsigned n, const uint8_t *cluster_id, size_t len)
{
	Rdmafs__RegisterDaemonReq req = RDMAFS__REGISTER_DAEMON_REQ__INIT;
	uint8_t uuid[16];

	tm_uuid(uuid, n);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	req.cluster_id.data = (uint8_t *)cluster_id;
	req.cluster_id.len = len;
	return tm_call(m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req, NULL, NULL);
}

/* The cluster id: made once, kept, told to daemons and clients; another cluster's refused. */
static void test_cluster_id(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__RegisterDaemonReq req = RDMAFS__REGISTER_DAEMON_REQ__INIT;
	Rdmafs__RegisterDaemonResp *rr;
	Rdmafs__GetClusterMapResp *map;
	uint8_t id[16], other[16], uuid[16];

	tm_uuid(uuid, 1);
	req.uuid.data = uuid;
	req.uuid.len = sizeof(uuid);
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req,
				 &rdmafs__register_daemon_resp__descriptor, (void **)&rr),
			 0);
	assert_int_equal(rr->cluster_id.len, 16);
	memcpy(id, rr->cluster_id.data, 16);
	protobuf_c_message_free_unpacked(&rr->base, NULL);
	memset(other, 0, sizeof(other));
	assert_memory_not_equal(id, other, 16);

	/* kept across a restart, and in every cluster map */
	tm_reopen(e);
	assert_int_equal(tm_cluster_map(e->m, 0, &map), 0);
	assert_int_equal(map->cluster_id.len, 16);
	assert_memory_equal(map->cluster_id.data, id, 16);
	protobuf_c_message_free_unpacked(&map->base, NULL);

	/* a daemon of this cluster comes back; one of another is refused */
	assert_int_equal(register_in(e->m, 1, id, 16), 0);
	memcpy(other, id, 16);
	other[15] ^= 1;
	assert_int_equal(register_in(e->m, 2, other, 16), -EXDEV);
	assert_int_equal(tm_daemon_state(e->m, 2), -1);
	assert_int_equal(register_in(e->m, 2, id, 8), -EINVAL);
}

/* Registers daemon @n (UP) declaring @host and @rack ("": undeclared). */
static int register_domain(struct meta *m, unsigned n, const char *host, const char *rack)
{
	return register_full(m, n, "", "", false, 1ULL << 40, 0, host, rack);
}

/* The layout of a new file @name in directory @dir (the caller frees it with the reply). */
static Rdmafs__CreateResp *create_layout(struct meta *m, uint64_t dir, const char *name)
{
	Rdmafs__CreateReq req = RDMAFS__CREATE_REQ__INIT;
	Rdmafs__CreateResp *r = NULL;

	req.parent = dir;
	req.name.data = (uint8_t *)name;
	req.name.len = strlen(name);
	req.mode = S_IFREG | 0644;
	req.exclusive = true;
	assert_int_equal(tm_call(m, RDMAFS__METHOD__METHOD_CREATE, &req,
				 &rdmafs__create_resp__descriptor, (void **)&r),
			 0);
	assert_non_null(r->layout);
	return r;
}

/*
 * Each daemon of @l in the domain @want[k] says for the daemon registered as
 * k + 1 (numbers compared as a partition: equal where @want is equal).
 */
static void assert_domains(const Rdmafs__Layout *l, const int *want)
{
	assert_int_equal(l->n_domains, l->n_daemons);
	assert_int_equal(rdmafs_domains_check(l->domains, l->n_domains, l->n_daemons), 0);
	for (size_t i = 0; i < l->n_daemons; i++)
		for (size_t j = 0; j < l->n_daemons; j++)
			assert_int_equal(l->domains[i] == l->domains[j],
					 want[l->daemons[i].data[0] - 1] ==
						 want[l->daemons[j].data[0] - 1]);
}

/*
 * Failure domains (issue 11): the host and rack a daemon declares are in
 * the map and kept; a new file of copies gets each daemon's domain in its
 * layout (its rack, else its host, else its own) and no more copies than
 * domains; a later change of a daemon's domain is news for the map and for
 * new files, never for an existing file's layout; SET_LAYOUT keeps the
 * remaining daemons' domains and refuses a list with fewer domains than
 * the file's copies.
 */
static void test_domains(void **state)
{
	static const int hosts[4] = {0, 0, 1, 1}, three[4] = {0, 0, 1, 2}, racks[4] = {0, 1, 0, 1};
	struct tm_env *e = *state;
	Rdmafs__GetClusterMapResp *map;
	Rdmafs__SetLayoutReq sl = RDMAFS__SET_LAYOUT_REQ__INIT;
	Rdmafs__SetLayoutResp *slr = NULL;
	Rdmafs__CreateResp *a, *b, *c;
	ProtobufCBinaryData old[4], kept[3], alone[2];
	Rdmafs__GetattrReq greq = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *ar = NULL;
	struct tm_attr d;
	uint64_t e1;
	size_t n_kept = 0, n_alone = 0;

	assert_int_equal(register_domain(e->m, 1, "hostA", ""), 0);
	assert_int_equal(register_domain(e->m, 2, "hostA", ""), 0);
	assert_int_equal(register_domain(e->m, 3, "hostB", ""), 0);
	assert_int_equal(register_domain(e->m, 4, "hostB", ""), 0);
	assert_int_equal(register_domain(e->m, 5, "two words", ""), -EINVAL);
	assert_int_equal(register_domain(e->m, 5, "", "tab\there"), -EINVAL);
	tm_reopen(e);
	assert_int_equal(tm_cluster_map(e->m, 0, &map), 0);
	assert_int_equal(map->n_daemons, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_string_equal(map->daemons[i]->host,
				    map->daemons[i]->uuid.data[0] <= 2 ? "hostA" : "hostB");
		assert_string_equal(map->daemons[i]->rack, "");
	}
	protobuf_c_message_free_unpacked(&map->base, NULL);

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "r", 0755, &d), 0);
	assert_int_equal(tm_setxattr(e->m, NULL, d.ino, "rdmafs.replicas", "3", 1, 0), 0);
	/* two hosts: two copies, one on each */
	a = create_layout(e->m, d.ino, "a");
	assert_int_equal(a->layout->n_daemons, 4);
	assert_int_equal(a->layout->replicas, 2);
	assert_domains(a->layout, hosts);
	/* a third host: three copies for new files; the first file keeps its layout */
	e1 = epoch(e->m);
	assert_int_equal(register_domain(e->m, 4, "hostC", ""), 0);
	assert_true(epoch(e->m) > e1);
	b = create_layout(e->m, d.ino, "b");
	assert_int_equal(b->layout->replicas, 3);
	assert_domains(b->layout, three);
	tm_reopen(e);
	greq.ino = a->attr->ino;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_GETATTR, &greq,
				 &rdmafs__attr_resp__descriptor, (void **)&ar),
			 0);
	assert_int_equal(ar->layout->replicas, 2);
	assert_domains(ar->layout, hosts);
	rdmafs__attr_resp__free_unpacked(ar, NULL);
	/* racks before hosts: daemons 1 and 3 in one rack, 2 and 4 in another */
	assert_int_equal(register_domain(e->m, 1, "hostA", "rack1"), 0);
	assert_int_equal(register_domain(e->m, 2, "hostA", "rack2"), 0);
	assert_int_equal(register_domain(e->m, 3, "hostB", "rack1"), 0);
	assert_int_equal(register_domain(e->m, 4, "hostC", "rack2"), 0);
	c = create_layout(e->m, 1, "c");
	assert_int_equal(c->layout->replicas, 0); /* the root says nothing: one copy, no domains */
	assert_int_equal(c->layout->n_domains, 0);
	rdmafs__create_resp__free_unpacked(c, NULL);
	c = create_layout(e->m, d.ino, "c");
	assert_int_equal(c->layout->replicas, 2);
	assert_domains(c->layout, racks);

	/* SET_LAYOUT without daemon 2: 1 and 3 keep sharing rack1, 4 is alone in rack2 */
	for (size_t i = 0; i < 4; i++) {
		old[i] = c->layout->daemons[i];
		if (old[i].data[0] != 2)
			kept[n_kept++] = old[i];
		if (old[i].data[0] == 1 || old[i].data[0] == 3)
			alone[n_alone++] = old[i];
	}
	sl.ino = c->attr->ino;
	sl.expected_daemons = old;
	sl.n_expected_daemons = 4;
	sl.daemons = kept;
	sl.n_daemons = n_kept;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
				 &rdmafs__set_layout_resp__descriptor, (void **)&slr),
			 0);
	assert_int_equal(slr->layout->n_daemons, 3);
	assert_domains(slr->layout, racks);
	rdmafs__set_layout_resp__free_unpacked(slr, NULL);
	/* only rack1 left: fewer domains than copies, refused, nothing changed */
	sl.expected_daemons = kept;
	sl.n_expected_daemons = n_kept;
	sl.daemons = alone;
	sl.n_daemons = n_alone;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
				 &rdmafs__set_layout_resp__descriptor, NULL),
			 -EINVAL);
	/* a rebalance gives the domains it copied by: kept as given, checked */
	{
		uint32_t given[3] = {0, 1, 1}, bad[3] = {1, 0, 0}, one[3] = {0, 0, 0};

		sl.daemons = kept;
		sl.n_daemons = n_kept;
		sl.domains = bad;
		sl.n_domains = 3;
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
					 &rdmafs__set_layout_resp__descriptor, NULL),
				 -EINVAL);
		sl.domains = one; /* one domain for a file of 2 copies */
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
					 &rdmafs__set_layout_resp__descriptor, NULL),
				 -EINVAL);
		sl.domains = given;
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
					 &rdmafs__set_layout_resp__descriptor, (void **)&slr),
				 0);
		assert_int_equal(slr->layout->n_domains, 3);
		for (size_t i = 0; i < 3; i++)
			assert_int_equal(slr->layout->domains[i], given[i]);
		rdmafs__set_layout_resp__free_unpacked(slr, NULL);
	}
	rdmafs__create_resp__free_unpacked(a, NULL);
	rdmafs__create_resp__free_unpacked(b, NULL);
	rdmafs__create_resp__free_unpacked(c, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_register, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syncing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undrain_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inode_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_custom_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_statfs_shared_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cluster_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_domains, setup, teardown),
	};

	return cmocka_run_group_tests_name("meta-cluster", tests, NULL, NULL) ? 1 : 0;
}
