// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The daemon's one LMDB errno mapping (storage-daemon/meta/lmdb_errno.h):
 * every code it names, and the codes a real LMDB environment returns when it
 * is full, when a key is missing and when its directory does not exist.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lmdb_errno.h"
#include "check.h"

static void test_table(void **state)
{
	static const struct {
		int rc, expected;
	} cases[] = {
		{MDB_SUCCESS, 0},
		{MDB_NOTFOUND, -ENOENT},
		{MDB_KEYEXIST, -EEXIST},
		{MDB_MAP_FULL, -ENOSPC},
		{MDB_TXN_FULL, -ENOSPC},
		{MDB_READERS_FULL, -EAGAIN},
		{MDB_BAD_VALSIZE, -EINVAL},
		{MDB_VERSION_MISMATCH, -EPROTONOSUPPORT},
		{MDB_CORRUPTED, -EIO},
		{MDB_PAGE_NOTFOUND, -EIO},
		{MDB_INVALID, -EIO},
		{MDB_PANIC, -EIO},
		{MDB_PAGE_FULL, -EIO},
		{MDB_DBS_FULL, -EIO},
		{MDB_BAD_TXN, -EIO},
		{ENOMEM, -ENOMEM},
		{EACCES, -EACCES},
		{ENOSPC, -ENOSPC},
		{4095, -4095},
		{4096, -EIO},
		{-1, -EIO},
		{-30000, -EIO},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = lmdb_errno(cases[i].rc);

		if (got != cases[i].expected)
			fail_msg("lmdb_errno(%d) = %d, expected %d", cases[i].rc, got,
				 cases[i].expected);
	}
}

struct env {
	char dir[64];
	MDB_env *env;
};

static int env_setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	if (!e)
		return -1;
	if (check_tmp_template(e->dir, sizeof(e->dir), "lmdb-errno") || !mkdtemp(e->dir))
		goto err_free;
	if (mdb_env_create(&e->env))
		goto err_rmdir;
	/* small enough to fill in a moment; LMDB keeps at least a few pages */
	if (mdb_env_set_mapsize(e->env, 64 << 10) || mdb_env_open(e->env, e->dir, MDB_NOSYNC, 0600))
		goto err_close;
	*state = e;
	return 0;

err_close:
	mdb_env_close(e->env);
err_rmdir:
	rmdir(e->dir);
err_free:
	free(e);
	return -1;
}

static int env_teardown(void **state)
{
	struct env *e = *state;
	char path[96];

	mdb_env_close(e->env);
	snprintf(path, sizeof(path), "%s/data.mdb", e->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lock.mdb", e->dir);
	unlink(path);
	rmdir(e->dir);
	free(e);
	return 0;
}

/* A full environment: what a full metadata store or chunk index returns. */
static void test_map_full(void **state)
{
	struct env *e = *state;
	uint8_t value[1024] = {0};
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc = 0;

	assert_int_equal(mdb_txn_begin(e->env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	for (uint32_t i = 0; i < 100000 && rc == 0; i++) {
		MDB_val k = {sizeof(i), &i}, v = {sizeof(value), value};

		rc = mdb_put(txn, dbi, &k, &v, 0);
	}
	mdb_txn_abort(txn);
	assert_int_equal(rc, MDB_MAP_FULL);
	assert_int_equal(lmdb_errno(rc), -ENOSPC);
}

static void test_not_found(void **state)
{
	struct env *e = *state;
	uint32_t key = 7;
	MDB_val k = {sizeof(key), &key}, v;
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc;

	assert_int_equal(mdb_txn_begin(e->env, NULL, MDB_RDONLY, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	rc = mdb_get(txn, dbi, &k, &v);
	mdb_txn_abort(txn);
	assert_int_equal(lmdb_errno(rc), -ENOENT);
}

/* System errors come through LMDB as positive errnos. */
static void test_system_error(void **state)
{
	MDB_env *env;
	int rc;

	assert_int_equal(mdb_env_create(&env), 0);
	rc = mdb_env_open(env, "/nonexistent/rdmafs-lmdb-errno", 0, 0600);
	mdb_env_close(env);
	assert_int_equal(lmdb_errno(rc), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test_setup_teardown(test_map_full, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_not_found, env_setup, env_teardown),
		cmocka_unit_test(test_system_error),
	};

	return cmocka_run_group_tests_name("lmdb-errno", tests, NULL, NULL) ? 1 : 0;
}
