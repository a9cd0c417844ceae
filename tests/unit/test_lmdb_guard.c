// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The power-loss guard of an LMDB environment that commits without flushing
 * (storage-daemon/meta/lmdb_guard.h), held against the disks a power loss
 * can leave.
 *
 * A child process fills a store, flushes it, then churns it (updates,
 * deletes, inserts: LMDB reuses every page it may) without flushing, copies
 * the data file as the disk held it at the flush and as the page cache
 * holds it at the end, and dies without closing. A power loss leaves, page
 * by page, either of the two: this test builds such disks (only the old
 * pages, only the new, only the new meta pages, all but them, every other
 * page, and fixed pseudo-random mixes) and opens each on another boot. Each
 * must open at the flushed snapshot, exactly (every key, every byte), and
 * take new commits. A kill -9 (the same boot, the page cache whole) must
 * keep every commit, and a clean close restore nothing.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lmdb_guard.h"
#include "check.h"

#define KEYS_FIRST 2000u /* the flushed snapshot holds keys 0 .. KEYS_FIRST - 1 */
#define KEYS_ALL   2600u /* the churn also inserts up to here */
#define CHURN_TXNS 30u
#define CHURN_OPS  100u

struct fixture {
	char dir[64];
	char data[96], side[96], lock[96];
	char flushed[96], later[96], side_copy[96], txnid[96];
};

/* Which generation of each key a state holds (0: absent). */
struct model {
	unsigned gen[KEYS_ALL];
};

static size_t value_len(unsigned key)
{
	return 40 + (key * 37u) % 1500u;
}

static void value_fill(unsigned key, unsigned gen, unsigned char *buf)
{
	for (size_t i = 0; i < value_len(key); i++)
		buf[i] = (unsigned char)(gen * 131u + key * 7u + i);
}

static void key_name(unsigned key, char out[16])
{
	snprintf(out, 16, "k%06u", key);
}

static int open_env(const struct fixture *fx, const char *boot, bool guard, MDB_env **env,
		    struct lmdb_guard **g, struct lmdb_guard_report *report)
{
	int ret;

	assert_int_equal(mdb_env_create(env), 0);
	assert_int_equal(mdb_env_set_mapsize(*env, 256u << 20), 0);
	ret = lmdb_guard_open(*env, fx->dir, MDB_NOTLS, fx->side, boot, guard, g, report);
	if (ret) {
		mdb_env_close(*env);
		*env = NULL;
	}
	return ret;
}

static void put_key(MDB_txn *txn, MDB_dbi dbi, unsigned key, unsigned gen)
{
	unsigned char buf[2048];
	char name[16];
	MDB_val k, v;

	key_name(key, name);
	value_fill(key, gen, buf);
	k = (MDB_val){strlen(name), name};
	v = (MDB_val){value_len(key), buf};
	if (mdb_put(txn, dbi, &k, &v, 0))
		abort();
}

/* Begins a write transaction on @env, or none when @env is NULL (the model alone). */
static MDB_txn *begin(MDB_env *env, MDB_dbi *dbi)
{
	MDB_txn *txn;

	if (!env)
		return NULL;
	if (mdb_txn_begin(env, NULL, 0, &txn) || mdb_dbi_open(txn, NULL, 0, dbi))
		abort();
	return txn;
}

static void commit(MDB_txn *txn)
{
	if (txn && mdb_txn_commit(txn))
		abort();
}

/* The first state: keys 0 .. KEYS_FIRST - 1 at generation 1, in 20 commits (@env NULL: @m only). */
static void fill(MDB_env *env, struct model *m)
{
	for (unsigned c = 0; c < 20; c++) {
		MDB_dbi dbi;
		MDB_txn *txn = begin(env, &dbi);

		for (unsigned key = c * 100; key < (c + 1) * 100; key++) {
			if (txn)
				put_key(txn, dbi, key, 1);
			m->gen[key] = 1;
		}
		commit(txn);
	}
}

/* Commits that rewrite, remove and add keys, so that LMDB reuses the pages it freed. */
static void churn(MDB_env *env, struct model *m)
{
	for (unsigned r = 0; r < CHURN_TXNS; r++) {
		MDB_dbi dbi;
		MDB_txn *txn = begin(env, &dbi);

		for (unsigned j = 0; j < CHURN_OPS; j++) {
			unsigned key = (r * 7919u + j * 31u) % KEYS_ALL;
			char name[16];
			MDB_val k;

			if (key % 5 == 0) {
				key_name(key, name);
				k = (MDB_val){strlen(name), name};
				if (txn && m->gen[key] && mdb_del(txn, dbi, &k, NULL))
					abort();
				m->gen[key] = 0;
			} else {
				if (txn)
					put_key(txn, dbi, key, r + 2);
				m->gen[key] = r + 2;
			}
		}
		commit(txn);
	}
}

/* Fails unless @env holds exactly the keys and values of @m. */
static void check_state(MDB_env *env, const struct model *m, const char *what)
{
	unsigned char buf[2048];
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k, v;
	unsigned seen = 0, want = 0;
	int rc;

	for (unsigned key = 0; key < KEYS_ALL; key++)
		want += m->gen[key] != 0;
	assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char name[16], got[8] = "";
		unsigned key = KEYS_ALL;

		if (k.mv_size == 7) {
			memcpy(got, k.mv_data, 7);
			if (sscanf(got, "k%6u", &key) != 1)
				key = KEYS_ALL;
		}
		if (key >= KEYS_ALL)
			fail_msg("%s: a key that was never written (%zu bytes)", what, k.mv_size);
		key_name(key, name);
		if (memcmp(k.mv_data, name, 7) != 0)
			fail_msg("%s: a key that was never written", what);
		if (!m->gen[key])
			fail_msg("%s: key %u is there but should not be", what, key);
		value_fill(key, m->gen[key], buf);
		if (v.mv_size != value_len(key) || memcmp(v.mv_data, buf, v.mv_size) != 0)
			fail_msg("%s: key %u does not hold generation %u", what, key, m->gen[key]);
		seen++;
	}
	if (rc != MDB_NOTFOUND)
		fail_msg("%s: the walk ended with %s", what, mdb_strerror(rc));
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (seen != want)
		fail_msg("%s: %u keys, expected %u", what, seen, want);
}

static unsigned char *read_file(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void write_file(const char *path, const unsigned char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	size_t len;
	unsigned char *buf = read_file(from, &len);

	write_file(to, buf, len);
	free(buf);
}

/* How crash_run() flushes the first state. */
enum first_flush {
	FLUSH_WHOLE,	 /* lmdb_guard_flush() after the first state */
	FLUSH_OPEN_ONLY, /* none after the first state: the open's alone */
};

/*
 * In a child that dies without closing: the first state, flushed as @how
 * says, then the churn. Leaves the data file as flushed and as at the end,
 * the side file, and the flushed transaction's id.
 */
static void crash_run(const struct fixture *fx, enum first_flush how)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct lmdb_guard_report report;
		struct lmdb_guard *g;
		struct model m = {0};
		MDB_env *env;
		MDB_envinfo info;
		char id[32];

		if (open_env(fx, "boot-A", true, &env, &g, &report))
			_exit(2);
		if (how == FLUSH_WHOLE)
			fill(env, &m);
		if ((how == FLUSH_WHOLE && lmdb_guard_flush(g)) || mdb_env_info(env, &info))
			_exit(3);
		copy_file(fx->data, fx->flushed);
		snprintf(id, sizeof(id), "%zu", info.me_last_txnid);
		write_file(fx->txnid, (const unsigned char *)id, strlen(id));
		churn(env, &m);
		copy_file(fx->data, fx->later);
		copy_file(fx->side, fx->side_copy);
		_exit(0); /* no close: the power goes */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static uint64_t flushed_txnid(const struct fixture *fx)
{
	size_t len;
	unsigned char *buf = read_file(fx->txnid, &len);
	uint64_t id;

	buf[len] = '\0';
	id = strtoull((const char *)buf, NULL, 10);
	free(buf);
	return id;
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (check_tmp_template(fx->dir, sizeof(fx->dir), "rdmafs-guard") || !mkdtemp(fx->dir))
		return -1;
	snprintf(fx->data, sizeof(fx->data), "%s/data.mdb", fx->dir);
	snprintf(fx->lock, sizeof(fx->lock), "%s/lock.mdb", fx->dir);
	snprintf(fx->side, sizeof(fx->side), "%s/flushed.snapshot", fx->dir);
	snprintf(fx->flushed, sizeof(fx->flushed), "%s/flushed.img", fx->dir);
	snprintf(fx->later, sizeof(fx->later), "%s/later.img", fx->dir);
	snprintf(fx->side_copy, sizeof(fx->side_copy), "%s/side.img", fx->dir);
	snprintf(fx->txnid, sizeof(fx->txnid), "%s/txnid", fx->dir);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->dir);
	if (system(cmd) != 0)
		return -1;
	free(fx);
	return 0;
}

/* The pages a power loss kept from after the flush: which, by page number. */
enum kept { KEEP_NONE, KEEP_ALL, KEEP_METAS, KEEP_ALL_BUT_METAS, KEEP_EVEN, KEEP_ODD, KEEP_MIX };

static const char *kept_name(enum kept k)
{
	static const char *const names[] = {"no page",
					    "every page",
					    "the meta pages only",
					    "every page but the metas",
					    "the even pages",
					    "the odd pages",
					    "a mix"};
	return names[k];
}

/* The disk a power loss left: each page from @later when @k keeps it, else from @flushed. */
static void power_loss_disk(const struct fixture *fx, enum kept k, uint64_t seed)
{
	size_t psize = (size_t)sysconf(_SC_PAGESIZE), flen, llen, len;
	unsigned char *flushed = read_file(fx->flushed, &flen);
	unsigned char *later = read_file(fx->later, &llen);
	unsigned char *disk;

	len = flen > llen ? flen : llen;
	disk = calloc(1, len);
	assert_non_null(disk);
	memcpy(disk, flushed, flen);
	for (size_t p = 0; p * psize < llen; p++) {
		bool keep = false;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		switch (k) {
		case KEEP_NONE:
			break;
		case KEEP_ALL:
			keep = true;
			break;
		case KEEP_METAS:
			keep = p < 2;
			break;
		case KEEP_ALL_BUT_METAS:
			keep = p >= 2;
			break;
		case KEEP_EVEN:
			keep = p % 2 == 0;
			break;
		case KEEP_ODD:
			keep = p % 2 == 1;
			break;
		case KEEP_MIX:
			keep = seed & 1;
			break;
		}
		if (keep)
			memcpy(disk + p * psize, later + p * psize,
			       llen - p * psize < psize ? llen - p * psize : psize);
	}
	write_file(fx->data, disk, len);
	copy_file(fx->side_copy, fx->side);
	unlink(fx->lock);
	free(disk);
	free(later);
	free(flushed);
}

/* Opens the disk left by @k on another boot and checks it is the flushed snapshot, writable. */
static void check_restored(const struct fixture *fx, enum kept k, uint64_t seed)
{
	struct lmdb_guard_report report;
	struct lmdb_guard *g;
	struct model first = {0};
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	char what[96];
	int ret;

	snprintf(what, sizeof(what), "power loss keeping %s (seed %llu)", kept_name(k),
		 (unsigned long long)seed);
	power_loss_disk(fx, k, seed);
	ret = open_env(fx, "boot-B", true, &env, &g, &report);
	if (ret)
		fail_msg("%s: open failed: %s", what, strerror(-ret));
	if (!report.restored)
		fail_msg("%s: nothing was restored", what);
	assert_int_equal(report.txnid, flushed_txnid(fx));
	fill(NULL, &first);
	check_state(env, &first, what);

	/* and it takes commits again, which a clean close keeps */
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	put_key(txn, dbi, KEYS_ALL - 1, 99);
	first.gen[KEYS_ALL - 1] = 99;
	assert_int_equal(mdb_txn_commit(txn), 0);
	assert_int_equal(lmdb_guard_close(g), 0);
	mdb_env_close(env);

	assert_int_equal(open_env(fx, "boot-C", true, &env, &g, &report), 0);
	if (report.restored)
		fail_msg("%s: a clean close was restored", what);
	check_state(env, &first, what);
	assert_int_equal(lmdb_guard_close(g), 0);
	mdb_env_close(env);
}

static void test_power_loss(void **state)
{
	struct fixture *fx = *state;

	crash_run(fx, FLUSH_WHOLE);
	for (enum kept k = KEEP_NONE; k < KEEP_MIX; k++)
		check_restored(fx, k, 1);
	for (uint64_t seed = 1; seed <= 4; seed++)
		check_restored(fx, KEEP_MIX, seed * 0x9E3779B97F4A7C15ull);
}

/* A power loss before any flush but the one lmdb_guard_open() makes: back to the empty store. */
static void test_power_loss_before_a_flush(void **state)
{
	struct fixture *fx = *state;
	struct lmdb_guard_report report;
	struct lmdb_guard *g;
	struct model none = {0};
	MDB_env *env;

	crash_run(fx, FLUSH_OPEN_ONLY);
	for (enum kept k = KEEP_METAS; k <= KEEP_ALL_BUT_METAS; k++) {
		power_loss_disk(fx, k, 1);
		assert_int_equal(open_env(fx, "boot-B", true, &env, &g, &report), 0);
		if (!report.restored)
			fail_msg("power loss keeping %s: nothing was restored", kept_name(k));
		assert_int_equal(report.txnid, flushed_txnid(fx));
		check_state(env, &none, kept_name(k));
		assert_int_equal(lmdb_guard_close(g), 0);
		mdb_env_close(env);
	}
}

/*
 * lmdb_guard_unflushed(): the commits since the last flush, past LMDB_GUARD_LAG
 * too; 0 after one. lmdb_guard_lagging(): past LMDB_GUARD_LAG, not at it.
 */
static void test_unflushed(void **state)
{
	struct fixture *fx = *state;
	struct lmdb_guard_report report;
	struct lmdb_guard *g;
	MDB_env *env;

	assert_int_equal(open_env(fx, "boot-A", true, &env, &g, &report), 0);
	assert_int_equal(lmdb_guard_unflushed(g), 0);
	for (unsigned i = 0; i <= LMDB_GUARD_LAG; i++) {
		MDB_dbi dbi;
		MDB_txn *txn = begin(env, &dbi);

		assert_int_equal(lmdb_guard_unflushed(g), i);
		assert_false(lmdb_guard_lagging(g));
		put_key(txn, dbi, i % KEYS_ALL, i + 1);
		commit(txn);
	}
	assert_true(lmdb_guard_unflushed(g) > LMDB_GUARD_LAG);
	assert_true(lmdb_guard_lagging(g));
	assert_int_equal(lmdb_guard_flush(g), 0);
	assert_int_equal(lmdb_guard_unflushed(g), 0);
	assert_false(lmdb_guard_lagging(g));
	assert_int_equal(lmdb_guard_close(g), 0);
	mdb_env_close(env);
}

/* A kill -9 on the same boot: the page cache kept every commit, and nothing is undone. */
static void test_kill_keeps_all(void **state)
{
	struct fixture *fx = *state;
	struct lmdb_guard_report report;
	struct lmdb_guard *g;
	struct model m = {0};
	MDB_env *env;

	crash_run(fx, FLUSH_WHOLE);
	power_loss_disk(fx, KEEP_ALL, 1);
	assert_int_equal(open_env(fx, "boot-A", true, &env, &g, &report), 0);
	assert_false(report.restored);
	fill(NULL, &m);
	churn(NULL, &m);
	check_state(env, &m, "kill -9 on the same boot");
	assert_int_equal(lmdb_guard_close(g), 0);
	mdb_env_close(env);
}

/*
 * metadata_sync = always opens without the guard: an unclean side file of
 * another boot is still restored, then removed, so that no later open goes
 * back to a snapshot whose pages commits have since reused.
 */
static void test_unguarded_open_restores_then_forgets(void **state)
{
	struct fixture *fx = *state;
	struct lmdb_guard_report report;
	struct lmdb_guard *g;
	struct model first = {0};
	MDB_env *env;

	crash_run(fx, FLUSH_WHOLE);
	power_loss_disk(fx, KEEP_ALL_BUT_METAS, 1);
	assert_int_equal(open_env(fx, "boot-B", false, &env, &g, &report), 0);
	assert_null(g);
	assert_true(report.restored);
	fill(NULL, &first);
	check_state(env, &first, "unguarded open after a power loss");
	mdb_env_close(env);
	assert_int_equal(access(fx->side, F_OK), -1);
	assert_int_equal(errno, ENOENT);

	assert_int_equal(open_env(fx, "boot-C", false, &env, &g, &report), 0);
	assert_false(report.restored);
	mdb_env_close(env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_power_loss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_power_loss_before_a_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unflushed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_keeps_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unguarded_open_restores_then_forgets, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
