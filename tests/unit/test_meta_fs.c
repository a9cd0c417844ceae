// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The metadata service's filesystem operations through meta_handle(), with
 * the errno of every error case, permission checks for non-owners, readdir
 * cookies under concurrent change, unlink-while-open and persistence.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <lmdb.h>

#include "lmdb_guard.h"
#include "test_meta_util.h"

#define ROOT 1

static int setup(void **state)
{
	struct tm_env *e = calloc(1, sizeof(*e));

	tm_setup(e, 3);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct tm_env *e = *state;

	tm_teardown(e);
	free(e);
	tm_resp_cap = 1 << 20;
	return 0;
}

static bool later(int64_t s1, uint32_t n1, int64_t s0, uint32_t n0)
{
	return s1 > s0 || (s1 == s0 && n1 >= n0);
}

static void test_root(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a;

	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &a), 0);
	assert_int_equal(a.ino, ROOT);
	assert_int_equal(a.mode, S_IFDIR | 0755);
	assert_int_equal(a.uid, 0);
	assert_int_equal(a.gid, 0);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(tm_getattr(e->m, NULL, 999999, &a), -ENOENT);
}

static void test_mkdir_lookup(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr d, l, root0, root1, f;

	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &root0), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "a", 0750, &d), 0);
	assert_int_equal(d.mode, S_IFDIR | 0750);
	assert_int_equal(d.nlink, 2);
	assert_int_equal(d.stripe_width, 0);
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &root1), 0);
	assert_int_equal(root1.nlink, 3);
	assert_true(later(root1.mtime_sec, root1.mtime_nsec, root0.mtime_sec, root0.mtime_nsec));
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "a", &l), 0);
	assert_int_equal(l.ino, d.ino);
	assert_int_equal(l.generation, d.generation);
	assert_int_equal(tm_lookup(e->m, NULL, d.ino, "..", &l), 0);
	assert_int_equal(l.ino, ROOT);
	assert_int_equal(tm_lookup(e->m, NULL, d.ino, ".", &l), 0);
	assert_int_equal(l.ino, d.ino);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "a", 0755, NULL), -EEXIST);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "nope", NULL), -ENOENT);
	assert_int_equal(tm_mkdir(e->m, NULL, 424242, "x", 0755, NULL), -ENOENT);
	assert_true(tm_mkfile(e->m, NULL, ROOT, "f", 0644) > 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "f", &f), 0);
	assert_int_equal(tm_lookup(e->m, NULL, f.ino, "x", NULL), -ENOTDIR);
	assert_int_equal(tm_mkdir(e->m, NULL, f.ino, "x", 0755, NULL), -ENOTDIR);
	/* setgid directories hand down their group and the bit */
	{
		Rdmafs__SetattrReq s = RDMAFS__SETATTR_REQ__INIT;
		struct tm_attr sub;

		s.ino = d.ino;
		s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE |
			  RDMAFS__SETATTR_VALID__SETATTR_VALID_GID;
		s.mode = 02775;
		s.gid = 50;
		assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), 0);
		assert_int_equal(tm_mkdir(e->m, NULL, d.ino, "sub", 0755, &sub), 0);
		assert_int_equal(sub.gid, 50);
		assert_int_equal(sub.mode, S_IFDIR | 02755);
	}
}

static void test_names(void **state)
{
	struct tm_env *e = *state;
	char name[300];

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "", 0755, NULL), -EINVAL);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, ".", 0755, NULL), -EINVAL);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "..", 0755, NULL), -EINVAL);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "a/b", 0755, NULL), -EINVAL);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "/", 0644, true, O_RDWR, NULL, NULL, NULL),
			 -EINVAL);
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "..", "x", NULL), -EINVAL);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "a/b", NULL), -EINVAL);
	memset(name, 'n', 256);
	name[256] = '\0';
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, name, 0755, NULL), -ENAMETOOLONG);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, name, NULL), -ENAMETOOLONG);
	assert_true(tm_mkfile(e->m, NULL, ROOT, name, 0644) == -ENAMETOOLONG);
	name[255] = '\0';
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, name, 0755, NULL), 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, name, NULL), 0);
	/* a NUL inside the bytes */
	{
		Rdmafs__MkdirReq req = RDMAFS__MKDIR_REQ__INIT;
		uint8_t nul[3] = {'a', 0, 'b'};

		req.parent = ROOT;
		req.name.data = nul;
		req.name.len = 3;
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_MKDIR, &req, NULL, NULL),
				 -EINVAL);
	}
	/* odd but valid bytes */
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "...", 0755, NULL), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "\xff\xfe name with\nnewline", 0755, NULL), 0);
}

static void test_create_open(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a, b;
	uint64_t h1, h2, h3, freed = 9;
	bool created;

	assert_int_equal(
		tm_create(e->m, NULL, ROOT, "f", S_IFREG | 0640, false, O_RDWR, &a, &h1, &created),
		0);
	assert_true(created);
	assert_int_equal(a.mode, S_IFREG | 0640);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.size, 0);
	assert_int_equal(a.stripe_width, 3); /* min(4, 3 daemons) */
	assert_int_equal(a.chunk_size, 1 << 20);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", S_IFREG | 0600, false, O_RDONLY, &b, &h2,
				   &created),
			 0);
	assert_false(created);
	assert_int_equal(b.ino, a.ino);
	assert_int_equal(b.mode, S_IFREG | 0640);
	assert_int_not_equal(h1, h2);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, true, O_RDWR, NULL, NULL, NULL),
			 -EEXIST);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, NULL), 0);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "d", 0644, false, O_RDWR, NULL, NULL, NULL),
			 -EISDIR);
	assert_int_equal(
		tm_create(e->m, NULL, ROOT, "g", S_IFDIR | 0644, false, O_RDWR, NULL, NULL, NULL),
		-EINVAL);
	assert_int_equal(tm_open(e->m, NULL, a.ino, O_WRONLY, &h3), 0);
	assert_int_equal(tm_release(e->m, h1, a.ino, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_release(e->m, h1, a.ino, NULL), -EBADF);
	assert_int_equal(tm_release(e->m, h2, a.ino + 1, NULL), -EINVAL);
	assert_int_equal(tm_release(e->m, h2, a.ino, NULL), 0);
	assert_int_equal(tm_release(e->m, h3, 0, NULL), 0);
	assert_int_equal(tm_open(e->m, NULL, 777777, O_RDONLY, NULL), -ENOENT);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "d", &b), 0);
	assert_int_equal(tm_open(e->m, NULL, b.ino, O_RDWR, NULL), -EISDIR);
	assert_int_equal(tm_open(e->m, NULL, b.ino, O_RDONLY, &h1), 0);
	assert_int_equal(tm_release(e->m, h1, b.ino, NULL), 0);
}

static void test_create_without_daemons(void **state)
{
	struct tm_env e;
	struct tm_attr a;

	tm_setup(&e, 0);
	assert_int_equal(tm_create(e.m, NULL, ROOT, "f", 0644, true, O_RDWR, NULL, NULL, NULL),
			 -ENOSPC);
	assert_int_equal(tm_mknod(e.m, NULL, ROOT, "r", S_IFREG | 0644, 0, NULL), -ENOSPC);
	assert_int_equal(tm_lookup(e.m, NULL, ROOT, "f", NULL), -ENOENT);
	/* what has no data needs no daemon */
	assert_int_equal(tm_mkdir(e.m, NULL, ROOT, "d", 0755, NULL), 0);
	assert_int_equal(tm_mknod(e.m, NULL, ROOT, "p", S_IFIFO | 0644, 0, &a), 0);
	assert_int_equal(tm_symlink(e.m, NULL, ROOT, "s", "t", NULL), 0);
	tm_teardown(&e);
}

static void test_mknod(void **state)
{
	struct tm_env *e = *state;
	struct tm_cred u;
	struct tm_attr a;

	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "fifo", S_IFIFO | 0644, 0, &a), 0);
	assert_int_equal(a.mode, S_IFIFO | 0644);
	assert_int_equal(a.stripe_width, 0);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "sock", S_IFSOCK | 0644, 0, NULL), 0);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "reg", S_IFREG | 0644, 0, &a), 0);
	assert_int_equal(a.stripe_width, 3);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "chr", S_IFCHR | 0600, 0x0501, NULL), 0);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "dir", S_IFDIR | 0755, 0, NULL), -EPERM);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "lnk", S_IFLNK | 0755, 0, NULL), -EINVAL);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "fifo", S_IFIFO | 0644, 0, NULL), -EEXIST);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "pub", 0777, &a), 0);
	assert_int_equal(
		tm_mknod(e->m, tm_user(&u, 1000, 1000), a.ino, "blk", S_IFBLK | 0600, 1, NULL),
		-EPERM);
	assert_int_equal(tm_mknod(e->m, tm_user(&u, 1000, 1000), a.ino, "p", S_IFIFO | 0600, 0, &a),
			 0);
	assert_int_equal(a.uid, 1000);
}

static void test_symlink(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a;
	char buf[5000], target[4097];

	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "s", "../some/where", &a), 0);
	assert_int_equal(a.mode, S_IFLNK | 0777);
	assert_int_equal(a.size, strlen("../some/where"));
	assert_int_equal(tm_readlink(e->m, a.ino, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "../some/where");
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "s", "x", NULL), -EEXIST);
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "e", "", NULL), -ENOENT);
	memset(target, 't', 4096);
	target[4096] = '\0';
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "long", target, NULL), -ENAMETOOLONG);
	target[4095] = '\0';
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "long", target, &a), 0);
	assert_int_equal(tm_readlink(e->m, a.ino, buf, sizeof(buf)), 0);
	assert_int_equal(strlen(buf), 4095);
	assert_int_equal(tm_readlink(e->m, ROOT, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(tm_readlink(e->m, 4242, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(tm_open(e->m, NULL, a.ino, O_RDONLY, NULL), -ELOOP);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "long", NULL), 0);
	assert_int_equal(tm_readlink(e->m, a.ino, buf, sizeof(buf)), -ENOENT);
}

static void test_unlink_rmdir(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr d, r0, r1, a;
	uint64_t freed = 0;
	int64_t f;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	f = tm_mkfile(e->m, NULL, d.ino, "f", 0644);
	assert_true(f > 0);
	assert_int_equal(tm_rmdir(e->m, NULL, ROOT, "d"), -ENOTEMPTY);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "d", NULL), -EISDIR);
	assert_int_equal(tm_rmdir(e->m, NULL, d.ino, "f"), -ENOTDIR);
	assert_int_equal(tm_rmdir(e->m, NULL, d.ino, ".."), -ENOTEMPTY);
	assert_int_equal(tm_rmdir(e->m, NULL, d.ino, "."), -EINVAL);
	assert_int_equal(tm_unlink(e->m, NULL, d.ino, "nope", NULL), -ENOENT);
	assert_int_equal(tm_rmdir(e->m, NULL, ROOT, "nope"), -ENOENT);
	assert_int_equal(tm_unlink(e->m, NULL, (uint64_t)f, "x", NULL), -ENOTDIR);
	assert_int_equal(tm_getattr(e->m, NULL, d.ino, &r0), 0);
	assert_int_equal(tm_unlink(e->m, NULL, d.ino, "f", &freed), 0);
	assert_int_equal(freed, (uint64_t)f);
	assert_int_equal(tm_getattr(e->m, NULL, (uint64_t)f, NULL), -ENOENT);
	assert_int_equal(tm_lookup(e->m, NULL, d.ino, "f", NULL), -ENOENT);
	assert_int_equal(tm_getattr(e->m, NULL, d.ino, &r1), 0);
	assert_true(later(r1.ctime_sec, r1.ctime_nsec, r0.ctime_sec, r0.ctime_nsec));
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &r0), 0);
	assert_int_equal(r0.nlink, 3);
	assert_int_equal(tm_rmdir(e->m, NULL, ROOT, "d"), 0);
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &r1), 0);
	assert_int_equal(r1.nlink, 2);
	assert_int_equal(tm_getattr(e->m, NULL, d.ino, NULL), -ENOENT);
	/* a special file frees nothing on the daemons */
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "p", S_IFIFO | 0644, 0, &a), 0);
	freed = 7;
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "p", &freed), 0);
	assert_int_equal(freed, 0);
}

static void test_link(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a, d;
	uint64_t freed = 1;
	int64_t f = tm_mkfile(e->m, NULL, ROOT, "f", 0644);

	assert_true(f > 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	assert_int_equal(tm_link(e->m, NULL, (uint64_t)f, d.ino, "g", &a), 0);
	assert_int_equal(a.ino, (uint64_t)f);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(a.stripe_width, 3);
	assert_int_equal(tm_link(e->m, NULL, (uint64_t)f, d.ino, "g", NULL), -EEXIST);
	assert_int_equal(tm_link(e->m, NULL, d.ino, ROOT, "dl", NULL), -EPERM);
	assert_int_equal(tm_link(e->m, NULL, 98765, ROOT, "x", NULL), -ENOENT);
	assert_int_equal(tm_link(e->m, NULL, (uint64_t)f, (uint64_t)f, "x", NULL), -ENOTDIR);
	assert_int_equal(tm_link(e->m, NULL, (uint64_t)f, ROOT, "..", NULL), -EINVAL);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_getattr(e->m, NULL, (uint64_t)f, &a), 0);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(tm_unlink(e->m, NULL, d.ino, "g", &freed), 0);
	assert_int_equal(freed, (uint64_t)f);
}

static void test_rename(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a, b, d1, d2, x, r;
	uint64_t freed = 0;
	int64_t f, g;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d1", 0755, &d1), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d2", 0755, &d2), 0);
	f = tm_mkfile(e->m, NULL, d1.ino, "f", 0644);
	g = tm_mkfile(e->m, NULL, d2.ino, "g", 0644);
	assert_true(f > 0 && g > 0);

	/* within a directory, then across */
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "f", d1.ino, "f2", 0, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_lookup(e->m, NULL, d1.ino, "f", NULL), -ENOENT);
	assert_int_equal(tm_lookup(e->m, NULL, d1.ino, "f2", &a), 0);
	assert_int_equal(a.ino, (uint64_t)f);
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "f2", d2.ino, "f", 0, NULL), 0);
	assert_int_equal(tm_lookup(e->m, NULL, d2.ino, "f", &a), 0);
	assert_int_equal(a.ino, (uint64_t)f);

	/* replacing a file frees it */
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "f", d2.ino, "g", 0, &freed), 0);
	assert_int_equal(freed, (uint64_t)g);
	assert_int_equal(tm_getattr(e->m, NULL, (uint64_t)g, NULL), -ENOENT);

	/* NOREPLACE */
	assert_true(tm_mkfile(e->m, NULL, d2.ino, "h", 0644) > 0);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "h", d2.ino, "g",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_NOREPLACE, NULL),
			 -EEXIST);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "h", d2.ino, "h2",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_NOREPLACE, NULL),
			 0);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "h2", d2.ino, "x", 3, NULL), -EINVAL);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "h2", d2.ino, "x", 4, NULL), -EINVAL);

	/* type mismatches and non-empty targets */
	assert_int_equal(tm_mkdir(e->m, NULL, d1.ino, "sub", 0755, &x), 0);
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "sub", d2.ino, "g", 0, NULL), -ENOTDIR);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "g", d1.ino, "sub", 0, NULL), -EISDIR);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "d1", ROOT, "d2", 0, NULL), -ENOTEMPTY);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "nope", ROOT, "d3", 0, NULL), -ENOENT);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "d1", 55555, "d3", 0, NULL), -ENOENT);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "d1", ROOT, "..", 0, NULL), -EINVAL);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, ".", ROOT, "z", 0, NULL), -EINVAL);

	/* a directory moves: link counts of both parents and its ".." */
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "sub", d2.ino, "sub", 0, NULL), 0);
	assert_int_equal(tm_getattr(e->m, NULL, d1.ino, &a), 0);
	assert_int_equal(tm_getattr(e->m, NULL, d2.ino, &b), 0);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(b.nlink, 3);
	assert_int_equal(tm_lookup(e->m, NULL, x.ino, "..", &r), 0);
	assert_int_equal(r.ino, d2.ino);
	/* over an empty directory */
	assert_int_equal(tm_mkdir(e->m, NULL, d1.ino, "empty", 0755, &a), 0);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "sub", d1.ino, "empty", 0, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), -ENOENT);
	assert_int_equal(tm_getattr(e->m, NULL, d1.ino, &a), 0);
	assert_int_equal(a.nlink, 3);
	assert_int_equal(tm_getattr(e->m, NULL, d2.ino, &b), 0);
	assert_int_equal(b.nlink, 2);

	/* two names of one inode: nothing happens */
	assert_int_equal(tm_link(e->m, NULL, (uint64_t)f, d2.ino, "f-link", NULL), 0);
	assert_int_equal(tm_rename(e->m, NULL, d2.ino, "g", d2.ino, "f-link", 0, &freed), 0);
	assert_int_equal(tm_lookup(e->m, NULL, d2.ino, "g", NULL), 0);
	assert_int_equal(tm_lookup(e->m, NULL, d2.ino, "f-link", NULL), 0);
	assert_int_equal(tm_getattr(e->m, NULL, (uint64_t)f, &a), 0);
	assert_int_equal(a.nlink, 2);
}

static void test_rename_loop(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a, b, c, x;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "a", 0755, &a), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, a.ino, "b", 0755, &b), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, b.ino, "c", 0755, &c), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "x", 0755, &x), 0);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "a", c.ino, "a", 0, NULL), -EINVAL);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "a", a.ino, "a", 0, NULL), -EINVAL);
	assert_int_equal(tm_rename(e->m, NULL, a.ino, "b", b.ino, "b2", 0, NULL), -EINVAL);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "a", c.ino, "a",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_NOREPLACE, NULL),
			 -EINVAL);
	/* the same through an exchange, from either side */
	assert_int_equal(tm_mkdir(e->m, NULL, c.ino, "y", 0755, NULL), 0);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "a", c.ino, "y",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE, NULL),
			 -EINVAL);
	assert_int_equal(tm_rename(e->m, NULL, c.ino, "y", ROOT, "a",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE, NULL),
			 -EINVAL);
	/* the target is an ancestor of the source: it is not empty */
	assert_int_equal(tm_rename(e->m, NULL, b.ino, "c", ROOT, "a", 0, NULL), -ENOTEMPTY);
	/* moving sideways and up is fine */
	assert_int_equal(tm_rename(e->m, NULL, b.ino, "c", x.ino, "c", 0, NULL), 0);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "x", a.ino, "x", 0, NULL), 0);
	assert_int_equal(tm_rename(e->m, NULL, a.ino, "x", ROOT, "x", 0, NULL), 0);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "a", x.ino, "a", 0, NULL), 0);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "x", c.ino, "x", 0, NULL), -EINVAL);
}

static void test_rename_exchange(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr d1, d2, sub, a, b;
	uint64_t freed = 5;
	int64_t f;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d1", 0755, &d1), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d2", 0755, &d2), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, d1.ino, "sub", 0755, &sub), 0);
	f = tm_mkfile(e->m, NULL, d2.ino, "file", 0644);
	assert_true(f > 0);
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "sub", d2.ino, "missing",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE, NULL),
			 -ENOENT);
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "sub", d2.ino, "file",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE, &freed),
			 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_lookup(e->m, NULL, d1.ino, "sub", &a), 0);
	assert_int_equal(a.ino, (uint64_t)f);
	assert_int_equal(tm_lookup(e->m, NULL, d2.ino, "file", &b), 0);
	assert_int_equal(b.ino, sub.ino);
	assert_true(S_ISDIR(b.mode));
	assert_int_equal(tm_getattr(e->m, NULL, d1.ino, &a), 0);
	assert_int_equal(tm_getattr(e->m, NULL, d2.ino, &b), 0);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(b.nlink, 3);
	assert_int_equal(tm_lookup(e->m, NULL, sub.ino, "..", &a), 0);
	assert_int_equal(a.ino, d2.ino);
	/* exchange within one directory, two files */
	assert_true(tm_mkfile(e->m, NULL, d1.ino, "other", 0600) > 0);
	assert_int_equal(tm_rename(e->m, NULL, d1.ino, "other", d1.ino, "sub",
				   RDMAFS__RENAME_FLAG__RENAME_FLAG_EXCHANGE, NULL),
			 0);
	assert_int_equal(tm_lookup(e->m, NULL, d1.ino, "other", &a), 0);
	assert_int_equal(a.ino, (uint64_t)f);
	assert_int_equal(tm_lookup(e->m, NULL, d1.ino, "sub", &b), 0);
	assert_int_equal(b.mode, S_IFREG | 0600);
}

static void test_setattr(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__SetattrReq s = RDMAFS__SETATTR_REQ__INIT;
	Rdmafs__Timespec at = RDMAFS__TIMESPEC__INIT, mt = RDMAFS__TIMESPEC__INIT;
	struct tm_attr a, d;
	int64_t f = tm_mkfile(e->m, NULL, ROOT, "f", 06755);

	assert_true(f > 0);
	s.ino = (uint64_t)f;
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
	s.mode = 0600;
	assert_int_equal(tm_setattr(e->m, NULL, &s, &a), 0);
	assert_int_equal(a.mode, S_IFREG | 0600);
	s.mode = S_IFDIR | 0600;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), -EINVAL);
	s.valid =
		RDMAFS__SETATTR_VALID__SETATTR_VALID_UID | RDMAFS__SETATTR_VALID__SETATTR_VALID_GID;
	s.uid = 1000;
	s.gid = 100;
	assert_int_equal(tm_setattr(e->m, NULL, &s, &a), 0);
	assert_int_equal(a.uid, 1000);
	assert_int_equal(a.gid, 100);
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
	s.size = 12345;
	assert_int_equal(tm_setattr(e->m, NULL, &s, &a), 0);
	assert_int_equal(a.size, 12345);
	s.size = 10;
	assert_int_equal(tm_setattr(e->m, NULL, &s, &a), 0);
	assert_int_equal(a.size, 10);
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME |
		  RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME;
	at.sec = 1000;
	at.nsec = 5;
	mt.sec = 2000;
	mt.nsec = 7;
	s.atime = &at;
	s.mtime = &mt;
	assert_int_equal(tm_setattr(e->m, NULL, &s, &a), 0);
	assert_int_equal(a.atime_sec, 1000);
	assert_int_equal(a.atime_nsec, 5);
	assert_int_equal(a.mtime_sec, 2000);
	assert_int_equal(a.mtime_nsec, 7);
	assert_true(a.ctime_sec > 2000);
	mt.nsec = 1000000000;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), -EINVAL);
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME |
		  RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME_NOW;
	assert_int_equal(tm_setattr(e->m, NULL, &s, &a), 0);
	assert_true(a.mtime_sec > 2000);
	s.valid = 64; /* FATTR_FH is not ours */
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), -EINVAL);
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	s.ino = d.ino;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), -EISDIR);
	assert_int_equal(tm_mknod(e->m, NULL, ROOT, "p", S_IFIFO | 0644, 0, &d), 0);
	s.ino = d.ino;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), -EINVAL);
	s.ino = 31337;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), -ENOENT);
}

static void test_permissions(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__SetattrReq s = RDMAFS__SETATTR_REQ__INIT;
	struct tm_cred uc, oc, gc;
	const Rdmafs__Cred *alice = tm_user(&uc, 1000, 1000);
	const Rdmafs__Cred *bob = tm_user(&oc, 1001, 1001);
	const Rdmafs__Cred *carol;
	struct tm_attr home, priv, tmp, f, a;
	Rdmafs__ReaddirResp *r;
	uint64_t h;
	int64_t fb;

	gc.groups[0] = 1000;
	carol = tm_user(&gc, 1002, 1002);
	gc.c.n_groups = 1;

	/* the root directory is 0755 root:root: nobody else creates there */
	assert_int_equal(tm_mkdir(e->m, alice, ROOT, "x", 0755, NULL), -EACCES);
	assert_int_equal(tm_create(e->m, alice, ROOT, "x", 0644, true, O_RDWR, NULL, NULL, NULL),
			 -EACCES);
	assert_int_equal(tm_symlink(e->m, alice, ROOT, "x", "y", NULL), -EACCES);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "home", 0755, &home), 0);
	s.ino = home.ino;
	s.valid =
		RDMAFS__SETATTR_VALID__SETATTR_VALID_UID | RDMAFS__SETATTR_VALID__SETATTR_VALID_GID;
	s.uid = 1000;
	s.gid = 1000;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), 0);
	assert_int_equal(tm_unlink(e->m, alice, ROOT, "home", NULL), -EACCES);
	assert_int_equal(tm_rmdir(e->m, alice, ROOT, "home"), -EACCES);
	assert_int_equal(tm_rename(e->m, alice, ROOT, "home", ROOT, "h2", 0, NULL), -EACCES);

	/* alice's home: she creates, bob reads but cannot write */
	assert_int_equal(tm_create(e->m, alice, home.ino, "f", 0644, true, O_RDWR, &f, &h, NULL),
			 0);
	assert_int_equal(f.uid, 1000);
	assert_int_equal(tm_release(e->m, h, f.ino, NULL), 0);
	assert_int_equal(tm_mkfile(e->m, bob, home.ino, "g", 0644), -EACCES);
	assert_int_equal(tm_unlink(e->m, bob, home.ino, "f", NULL), -EACCES);
	assert_int_equal(tm_link(e->m, bob, f.ino, home.ino, "f2", NULL), -EACCES);
	assert_int_equal(tm_lookup(e->m, bob, home.ino, "f", NULL), 0);
	assert_int_equal(tm_open(e->m, bob, f.ino, O_RDONLY, &h), 0);
	assert_int_equal(tm_release(e->m, h, f.ino, NULL), 0);
	assert_int_equal(tm_open(e->m, bob, f.ino, O_RDWR, NULL), -EACCES);
	assert_int_equal(tm_open(e->m, bob, f.ino, O_WRONLY, NULL), -EACCES);
	assert_int_equal(tm_open(e->m, bob, f.ino, O_RDONLY | O_TRUNC, NULL), -EACCES);
	assert_int_equal(tm_open(e->m, alice, f.ino, O_RDWR, &h), 0);
	assert_int_equal(tm_release(e->m, h, f.ino, NULL), 0);
	assert_int_equal(tm_create(e->m, bob, home.ino, "f", 0644, false, O_RDWR, NULL, NULL, NULL),
			 -EACCES);

	/* owner-only attribute changes */
	s.ino = f.ino;
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
	s.mode = 0666;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
	assert_int_equal(tm_setattr(e->m, alice, &s, &a), 0);
	assert_int_equal(a.mode, S_IFREG | 0666);
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_UID;
	s.uid = 1001;
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), -EPERM); /* no giving away */
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_GID;
	s.gid = 1001;
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), -EPERM); /* not her group */
	s.gid = 1000;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), 0); /* unchanged is fine */
	{
		Rdmafs__Timespec t = RDMAFS__TIMESPEC__INIT;

		s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME;
		t.sec = 5;
		s.mtime = &t;
		assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
		/* "now" needs only write permission: the file is 0666 */
		s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME_NOW |
			  RDMAFS__SETATTR_VALID__SETATTR_VALID_ATIME_NOW;
		assert_int_equal(tm_setattr(e->m, bob, &s, NULL), 0);
		s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
		s.mode = 0644;
		assert_int_equal(tm_setattr(e->m, alice, &s, NULL), 0);
		s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MTIME_NOW;
		assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EACCES);
		s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
		s.size = 0;
		assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EACCES);
		s.mtime = NULL;
	}

	/* a private directory: no search, no listing */
	assert_int_equal(tm_mkdir(e->m, alice, home.ino, "priv", 0700, &priv), 0);
	assert_true(tm_mkfile(e->m, alice, priv.ino, "secret", 0644) > 0);
	assert_int_equal(tm_lookup(e->m, bob, priv.ino, "secret", NULL), -EACCES);
	assert_int_equal(tm_readdir(e->m, bob, priv.ino, 0, 0, false, &r), -EACCES);
	assert_int_equal(tm_readdir(e->m, alice, priv.ino, 0, 0, false, &r), 0);
	assert_int_equal(r->n_entries, 1);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(tm_lookup(e->m, NULL, priv.ino, "secret", NULL), 0); /* root */

	/* group permission through the supplementary groups */
	s.ino = priv.ino;
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
	s.mode = 0770;
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), 0);
	assert_int_equal(tm_lookup(e->m, carol, priv.ino, "secret", NULL), 0);
	assert_true(tm_mkfile(e->m, carol, priv.ino, "carols", 0644) > 0);
	assert_int_equal(tm_lookup(e->m, bob, priv.ino, "secret", NULL), -EACCES);

	/* root bypasses read/write, but not execute on a file without x bits */
	assert_int_equal(tm_open(e->m, NULL, f.ino, O_RDWR, &h), 0);
	assert_int_equal(tm_release(e->m, h, f.ino, NULL), 0);

	/* the sticky bit */
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "tmp", 01777, &tmp), 0);
	assert_int_equal(tmp.mode, S_IFDIR | 01777);
	fb = tm_mkfile(e->m, bob, tmp.ino, "bobs", 0666);
	assert_true(fb > 0);
	assert_true(tm_mkfile(e->m, alice, tmp.ino, "alices", 0666) > 0);
	assert_int_equal(tm_unlink(e->m, alice, tmp.ino, "bobs", NULL), -EPERM);
	assert_int_equal(tm_rename(e->m, alice, tmp.ino, "bobs", tmp.ino, "mine", 0, NULL), -EPERM);
	assert_int_equal(tm_rename(e->m, alice, tmp.ino, "alices", tmp.ino, "bobs", 0, NULL),
			 -EPERM);
	assert_int_equal(tm_unlink(e->m, bob, tmp.ino, "bobs", NULL), 0);
	assert_int_equal(tm_unlink(e->m, NULL, tmp.ino, "alices", NULL), 0);

	/* rename of a directory to another parent needs write on it (its "..") */
	assert_int_equal(tm_mkdir(e->m, NULL, tmp.ino, "rootdir", 0755, NULL), 0);
	assert_int_equal(tm_mkdir(e->m, alice, tmp.ino, "alicedir", 0755, &a), 0);
	s.ino = tmp.ino;
	s.mode = 0777;
	assert_int_equal(tm_setattr(e->m, NULL, &s, NULL), 0);
	assert_int_equal(tm_rename(e->m, alice, tmp.ino, "rootdir", a.ino, "r", 0, NULL), -EACCES);
	assert_int_equal(tm_rename(e->m, alice, tmp.ino, "rootdir", tmp.ino, "r", 0, NULL), 0);
}

/*
 * What a non-owner's write or truncate does to a set-user-ID file: the kernel
 * sends a SETATTR of the mode without S_ISUID (and S_ISGID when group-execute
 * is set) in the writer's name; ext4 takes it, so the service must, and must
 * take nothing else. ftruncate through a handle open for writing needs no
 * write permission (open(O_CREAT | O_RDWR, 0) then ftruncate works on ext4).
 */
static void test_kill_privs(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__SetattrReq s = RDMAFS__SETATTR_REQ__INIT;
	struct tm_cred uc, oc;
	const Rdmafs__Cred *alice = tm_user(&uc, 1000, 1000);
	const Rdmafs__Cred *bob = tm_user(&oc, 1001, 1001);
	struct tm_attr dir, f, a;
	uint64_t h, hr;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 01777, &dir), 0);
	assert_int_equal(tm_create(e->m, alice, dir.ino, "suid", 0777, true, O_RDWR, &f, &h, NULL),
			 0);
	assert_int_equal(tm_release(e->m, h, f.ino, NULL), 0);
	s.ino = f.ino;
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
	s.mode = 06777;
	assert_int_equal(tm_setattr(e->m, alice, &s, &a), 0);
	assert_int_equal(a.mode, S_IFREG | 06777);

	/* bob may not set bits, change other bits, or change nothing */
	s.mode = 06777;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
	s.mode = 06775;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
	s.mode = 0775;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
	/* the kernel's kill on write: both bits (group-execute is set) */
	s.mode = 0777;
	assert_int_equal(tm_setattr(e->m, bob, &s, &a), 0);
	assert_int_equal(a.mode, S_IFREG | 0777);
	/* bob cannot put them back */
	s.mode = 04777;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);

	/* without group-execute set-group-ID is not "execute as group": it stays */
	s.mode = 06767;
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), 0);
	s.mode = 0767;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);
	s.mode = 02767;
	assert_int_equal(tm_setattr(e->m, bob, &s, &a), 0);
	/* bob is not in group 1000: setattr_copy() drops set-group-ID as ext4 does */
	assert_int_equal(a.mode & 07777, 0767);

	/* truncate with the kill, as do_truncate() sends it */
	s.mode = 04777;
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), 0);
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE |
		  RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
	s.mode = 0777;
	s.size = 10;
	assert_int_equal(tm_setattr(e->m, bob, &s, &a), 0);
	assert_int_equal(a.mode, S_IFREG | 0777);
	assert_int_equal(a.size, 10);

	/* no write permission, no kill */
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_MODE;
	s.mode = 04775;
	assert_int_equal(tm_setattr(e->m, alice, &s, NULL), 0);
	s.mode = 0775;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EPERM);

	/* ftruncate through a write handle of a mode-0 file */
	assert_int_equal(tm_create(e->m, bob, dir.ino, "zero", 0, true, O_RDWR, &f, &h, NULL), 0);
	assert_int_equal(f.mode, S_IFREG);
	s.ino = f.ino;
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
	s.size = 4096;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EACCES);
	s.handle = h;
	assert_int_equal(tm_setattr(e->m, bob, &s, &a), 0);
	assert_int_equal(a.size, 4096);
	/* a handle of another inode, a read-only one, or a stale one does not count */
	assert_int_equal(tm_open(e->m, NULL, f.ino, O_RDONLY, &hr), 0);
	s.handle = hr;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EACCES);
	assert_int_equal(tm_release(e->m, hr, f.ino, NULL), 0);
	assert_int_equal(tm_release(e->m, h, f.ino, NULL), 0);
	s.handle = h;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EACCES);
	assert_int_equal(tm_create(e->m, bob, dir.ino, "other", 0600, true, O_RDWR, &a, &h, NULL),
			 0);
	s.handle = h;
	assert_int_equal(tm_setattr(e->m, bob, &s, NULL), -EACCES);
	assert_int_equal(tm_release(e->m, h, a.ino, NULL), 0);
}

/* INODE_LIST's open_count of @ino (what fsck reads), or -1 if it does not list it. */
static int listed_opens(struct meta *m, uint64_t ino)
{
	Rdmafs__InodeListReq req = RDMAFS__INODE_LIST_REQ__INIT;
	Rdmafs__InodeListResp *r = NULL;
	int opens = -1;

	req.start_after = ino - 1;
	req.limit = 1;
	assert_int_equal(tm_call(m, RDMAFS__METHOD__METHOD_INODE_LIST, &req,
				 &rdmafs__inode_list_resp__descriptor, (void **)&r),
			 0);
	if (r->n_inodes == 1 && r->inodes[0]->ino == ino)
		opens = (int)r->inodes[0]->open_count;
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return opens;
}

/* The three daemons of setup() heartbeat: UP again after ticks that found them silent. */
static void heartbeat_all(struct meta *m)
{
	for (unsigned d = 1; d <= 3; d++)
		assert_int_equal(tm_heartbeat(m, d, 1ULL << 40, 1ULL << 30, NULL), 0);
}

static void test_unlink_while_open(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a, b;
	uint64_t h1, h2, freed = 0;
	bool gone = false;

	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, true, O_RDWR, &a, &h1, NULL), 0);
	assert_int_equal(tm_open(e->m, NULL, a.ino, O_RDONLY, &h2), 0);
	assert_int_equal(tm_update_size(e->m, a.ino, 5000, NULL, NULL), 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "f", NULL), -ENOENT);
	/* still there for its handles: fstat, reads, size updates */
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, &a), 0);
	assert_int_equal(a.nlink, 0);
	assert_int_equal(a.size, 5000);
	assert_int_equal(tm_update_size(e->m, a.ino, 6000, NULL, &a), 0);
	assert_int_equal(tm_link(e->m, NULL, a.ino, ROOT, "back", NULL), -ENOENT);
	/* a new file of the same name is another inode */
	assert_true(tm_mkfile(e->m, NULL, ROOT, "f", 0644) > 0);
	assert_int_equal(tm_release(e->m, h1, a.ino, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), 0);
	{
		/* the last release frees it, with its size and layout */
		Rdmafs__ReleaseReq req = RDMAFS__RELEASE_REQ__INIT;
		Rdmafs__ReleaseResp *r = NULL;

		req.handle = h2;
		req.ino = a.ino;
		assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_RELEASE, &req,
					 &rdmafs__release_resp__descriptor, (void **)&r),
				 0);
		assert_non_null(r->freed);
		assert_int_equal(r->freed->ino, a.ino);
		assert_int_equal(r->freed->size, 6000);
		assert_non_null(r->freed->layout);
		assert_int_equal(r->freed->layout->n_daemons, 3);
		assert_int_equal(r->freed->layout->chunk_size, 1 << 20);
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), -ENOENT);

	/* a rename over an open file keeps it too */
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "f", &a), 0);
	assert_int_equal(tm_open(e->m, NULL, a.ino, O_RDONLY, &h1), 0);
	assert_true(tm_mkfile(e->m, NULL, ROOT, "g", 0644) > 0);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "g", ROOT, "f", 0, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), 0);
	assert_int_equal(tm_release(e->m, h1, a.ino, &freed), 0);
	assert_int_equal(freed, a.ino);

	/* handles live in memory; the unlinked file outlives a restart of the service */
	assert_int_equal(tm_create(e->m, NULL, ROOT, "p", 0644, true, O_RDWR, &a, &h1, NULL), 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "p", &freed), 0);
	assert_int_equal(freed, 0);
	tm_reopen(e);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), 0);
	/* the service forgot the handle: the client reclaims it under its number */
	assert_int_equal(tm_release(e->m, h1, a.ino, &freed), -EBADF);
	assert_int_equal(tm_reclaim(e->m, h1, a.ino, O_RDWR, &gone), 0);
	assert_false(gone);
	/* again (a client's retry): no error; the number on another inode: refused */
	assert_int_equal(tm_reclaim(e->m, h1, a.ino, O_RDWR, NULL), 0);
	assert_int_equal(tm_reclaim(e->m, h1, ROOT, O_RDONLY, NULL), -EINVAL);
	/* a number of this run is not the client's to claim */
	assert_int_equal(tm_open(e->m, NULL, ROOT, O_RDONLY, &h2), 0);
	assert_int_equal(tm_reclaim(e->m, h2 + 1, ROOT, O_RDONLY, NULL), -EINVAL);
	assert_int_equal(tm_release(e->m, h2, ROOT, NULL), 0);
	/*
	 * In the grace period nothing unlinked is freed (another client may yet
	 * reclaim a handle on it); when it ends, meta_tick() frees what none holds.
	 */
	assert_int_equal(tm_release(e->m, h1, a.ino, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), 0);
	assert_true(meta_tick(e->m, 100) >= 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), 0);
	assert_true(meta_tick(e->m, 100 + 30) >= 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), -ENOENT);
	/* and a reclaim of a handle on it says the file is gone */
	assert_int_equal(tm_reclaim(e->m, h1, a.ino, O_RDWR, &gone), 0);
	assert_true(gone);

	/* a reclaimed handle keeps its file through the grace period */
	heartbeat_all(e->m);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "q", 0644, true, O_RDWR, &a, &h1, NULL), 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "q", &freed), 0);
	tm_reopen(e);
	/* fsck must not judge a file's chunks past its size while a writer may not have reclaimed
	 */
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "f", &b), 0);
	assert_int_equal(listed_opens(e->m, b.ino), 1);
	assert_int_equal(tm_reclaim(e->m, h1, a.ino, O_RDWR, NULL), 0);
	assert_int_equal(listed_opens(e->m, a.ino), 1);
	assert_true(meta_tick(e->m, 500) >= 0);
	assert_true(meta_tick(e->m, 600) >= 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), 0);
	assert_int_equal(listed_opens(e->m, b.ino), 0);
	assert_int_equal(listed_opens(e->m, a.ino), 1);
	/* after it, the last RELEASE frees it again, and says so to the client */
	assert_int_equal(tm_release(e->m, h1, a.ino, &freed), 0);
	assert_int_equal(freed, a.ino);

	/* a clean close with no handle open: no grace, an unlink frees at once */
	tm_reopen(e);
	heartbeat_all(e->m);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "r", 0644, true, O_RDWR, &a, &h1, NULL), 0);
	assert_int_equal(tm_release(e->m, h1, a.ino, NULL), 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "r", &freed), 0);
	assert_int_equal(freed, a.ino);
}

/*
 * A request that fails after it took a handle gives it back: here OPEN and
 * CREATE whose replies do not fit (-EMSGSIZE), so the caller never saw the
 * handle. Had one stayed, the unlink below would keep the file.
 */
static void test_failed_open_leaves_no_handle(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr a;
	uint64_t h, freed = 0;

	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, true, O_RDWR, &a, &h, NULL), 0);
	assert_int_equal(tm_release(e->m, h, a.ino, NULL), 0);
	tm_resp_cap = 40;
	assert_int_equal(tm_open(e->m, NULL, a.ino, O_RDONLY, &h), -EMSGSIZE);
	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, false, O_RDWR, &a, &h, NULL),
			 -EMSGSIZE);
	tm_resp_cap = 1 << 20;
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", &freed), 0);
	assert_int_equal(freed, a.ino);
}

static void test_readdir(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__ReaddirResp *r;
	struct tm_attr d;
	uint64_t cookie = 0;
	char name[16];
	unsigned seen = 0;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	assert_int_equal(tm_readdir(e->m, NULL, d.ino, 0, 0, false, &r), 0);
	assert_int_equal(r->n_entries, 0);
	assert_true(r->eof);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "e%d", i);
		assert_true(tm_mkfile(e->m, NULL, d.ino, name, 0644) > 0);
	}
	assert_int_equal(tm_mkdir(e->m, NULL, d.ino, "sub", 0755, NULL), 0);
	assert_int_equal(tm_symlink(e->m, NULL, d.ino, "ln", "e0", NULL), 0);
	do {
		assert_int_equal(tm_readdir(e->m, NULL, d.ino, cookie, 5, true, &r), 0);
		assert_true(r->n_entries <= 5);
		for (size_t i = 0; i < r->n_entries; i++) {
			Rdmafs__DirEntry *de = r->entries[i];

			assert_true(de->cookie > cookie);
			assert_true(de->cookie >= 3); /* 1 and 2 are the client's "." and ".." */
			cookie = de->cookie;
			assert_non_null(de->attr);
			assert_int_equal(de->attr->ino, de->ino);
			assert_int_equal(de->attr->mode & S_IFMT, de->mode);
			seen++;
		}
		if (r->eof) {
			protobuf_c_message_free_unpacked(&r->base, NULL);
			break;
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
	} while (1);
	assert_int_equal(seen, 12);
	/* without attrs, and from a cookie past the end */
	assert_int_equal(tm_readdir(e->m, NULL, d.ino, 0, 0, false, &r), 0);
	assert_int_equal(r->n_entries, 12);
	assert_null(r->entries[0]->attr);
	assert_true(r->eof);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(tm_readdir(e->m, NULL, d.ino, cookie, 0, false, &r), 0);
	assert_int_equal(r->n_entries, 0);
	assert_true(r->eof);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(tm_readdir(e->m, NULL, UINT64_MAX / 2, 0, 0, false, &r), -ENOENT);
	assert_int_equal(tm_lookup(e->m, NULL, d.ino, "e1", &d), 0);
	assert_int_equal(tm_readdir(e->m, NULL, d.ino, 0, 0, false, &r), -ENOTDIR);
	/* the reply size bounds a page; too small for one entry is EMSGSIZE */
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "d", &d), 0);
	tm_resp_cap = 64;
	assert_int_equal(tm_readdir(e->m, NULL, d.ino, 0, 0, false, &r), 0);
	assert_true(r->n_entries >= 1 && r->n_entries < 12);
	assert_false(r->eof);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	tm_resp_cap = 40;
	assert_int_equal(tm_readdir(e->m, NULL, d.ino, 0, 0, true, &r), -EMSGSIZE);
}

/* Every entry present for the whole listing is returned exactly once. */
static void test_readdir_10000_changing(void **state)
{
	enum { N = 10000 };
	struct tm_env *e = *state;
	unsigned char *present = calloc(N, 1), *seen = calloc(2 * N + 100000, 1);
	unsigned char *touched = calloc(N, 1);
	Rdmafs__ReaddirResp *r;
	struct tm_attr d;
	uint64_t cookie = 0;
	unsigned next_new = N, pages = 0, rounds = 0;
	char name[32];

	assert_non_null(present);
	assert_non_null(seen);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "big", 0755, &d), 0);
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "entry-%u", i);
		assert_int_equal(tm_mknod(e->m, NULL, d.ino, name, S_IFIFO | 0644, 0, NULL), 0);
		present[i] = 1;
	}
	srand(42);
	tm_resp_cap = 4096;
	for (;;) {
		bool eof;

		assert_int_equal(tm_readdir(e->m, NULL, d.ino, cookie, 0, false, &r), 0);
		pages++;
		for (size_t i = 0; i < r->n_entries; i++) {
			unsigned idx;

			assert_true(r->entries[i]->cookie > cookie);
			cookie = r->entries[i]->cookie;
			assert_true(r->entries[i]->name.len < sizeof(name));
			memcpy(name, r->entries[i]->name.data, r->entries[i]->name.len);
			name[r->entries[i]->name.len] = '\0';
			assert_int_equal(sscanf(name, "entry-%u", &idx), 1);
			assert_true(idx < 2 * N + 100000);
			assert_int_equal(seen[idx], 0); /* never twice */
			seen[idx] = 1;
		}
		eof = r->eof;
		protobuf_c_message_free_unpacked(&r->base, NULL);
		if (eof)
			break;
		/* between pages: remove some old entries, add new ones, rename one */
		for (int k = 0; k < 7; k++) {
			unsigned victim = (unsigned)rand() % N;

			if (!present[victim])
				continue;
			snprintf(name, sizeof(name), "entry-%u", victim);
			assert_int_equal(tm_unlink(e->m, NULL, d.ino, name, NULL), 0);
			present[victim] = 0;
			touched[victim] = 1;
		}
		for (int k = 0; k < 9; k++) {
			snprintf(name, sizeof(name), "entry-%u", next_new++);
			assert_int_equal(tm_mknod(e->m, NULL, d.ino, name, S_IFIFO | 0644, 0, NULL),
					 0);
		}
		{
			unsigned victim = (unsigned)rand() % N;
			char to[32];

			if (present[victim]) {
				snprintf(name, sizeof(name), "entry-%u", victim);
				snprintf(to, sizeof(to), "entry-%u", next_new++);
				assert_int_equal(
					tm_rename(e->m, NULL, d.ino, name, d.ino, to, 0, NULL), 0);
				present[victim] = 0;
				touched[victim] = 1;
			}
		}
		rounds++;
	}
	assert_true(pages > 50);
	for (unsigned i = 0; i < N; i++) {
		if (!touched[i])
			assert_int_equal(seen[i], 1);
	}
	/* entries added during the listing (larger ids) show up at the end */
	assert_true(rounds > 0);
	assert_int_equal(seen[next_new - 1], 1);
	free(present);
	free(seen);
	free(touched);
}

static void test_statfs(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__StatfsResp *r;
	uint64_t files;

	assert_int_equal(tm_statfs(e->m, &r), 0);
	assert_int_equal(r->bsize, 4096);
	assert_int_equal(r->blocks, 3 * ((1ULL << 40) / 4096));
	assert_int_equal(r->bfree, 3 * (((1ULL << 40) - (1ULL << 30)) / 4096));
	assert_int_equal(r->bavail, r->bfree);
	assert_int_equal(r->namemax, 255);
	assert_int_equal(r->files - r->ffree, 1); /* the root */
	files = r->files;
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_true(tm_mkfile(e->m, NULL, ROOT, "f", 0644) > 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, NULL), 0);
	assert_int_equal(tm_statfs(e->m, &r), 0);
	assert_int_equal(r->files, files + 2);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", NULL), 0);
	assert_int_equal(tm_statfs(e->m, &r), 0);
	assert_int_equal(r->files, files + 1);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	/* only UP daemons count */
	assert_int_equal(
		tm_set_state(e->m, 2, RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING, false, NULL), 0);
	assert_int_equal(tm_statfs(e->m, &r), 0);
	assert_int_equal(r->blocks, 2 * ((1ULL << 40) / 4096));
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* Builds a system.posix_acl_access value: version 2, then (tag, perm, id) entries. */
static size_t acl_value(uint8_t *out, const uint16_t (*entries)[2], size_t n)
{
	size_t len = 4;

	out[0] = 2;
	out[1] = out[2] = out[3] = 0;
	for (size_t i = 0; i < n; i++, len += 8) {
		uint32_t id = entries[i][0] == 0x02 || entries[i][0] == 0x08 ? 1001 : 0xffffffffu;

		out[len] = (uint8_t)entries[i][0];
		out[len + 1] = (uint8_t)(entries[i][0] >> 8);
		out[len + 2] = (uint8_t)entries[i][1];
		out[len + 3] = 0;
		memcpy(out + len + 4, &id, 4);
	}
	return len;
}

/* Setting an access ACL sets the mode bits, as cp -a and tar expect. */
static void test_acl_sets_mode(void **state)
{
	struct tm_env *e = *state;
	static const uint16_t minimal[][2] = {{0x01, 6}, {0x04, 4}, {0x20, 4}};
	static const uint16_t named[][2] = {{0x01, 7}, {0x02, 6}, {0x04, 4}, {0x10, 5}, {0x20, 0}};
	static const uint16_t no_other[][2] = {{0x01, 6}, {0x04, 4}};
	static const uint16_t no_mask[][2] = {{0x01, 6}, {0x02, 6}, {0x04, 4}, {0x20, 4}};
	int64_t f = tm_mkfile(e->m, NULL, ROOT, "acl", 0600);
	uint64_t ino = (uint64_t)f;
	uint8_t v[64], buf[64];
	struct tm_attr a;
	size_t len;

	assert_true(f > 0);
	/* A minimal ACL is the mode itself: 0644, and nothing is stored. */
	len = acl_value(v, minimal, 3);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "system.posix_acl_access", v, len, 0), 0);
	assert_int_equal(tm_getattr(e->m, NULL, ino, &a), 0);
	assert_int_equal(a.mode & 07777, 0644);
	assert_int_equal(
		tm_getxattr(e->m, NULL, ino, "system.posix_acl_access", (char *)buf, sizeof(buf)),
		-ENODATA);
	/* Named entries: stored, and the group class bits are the mask's. */
	len = acl_value(v, named, 5);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "system.posix_acl_access", v, len, 0), 0);
	assert_int_equal(tm_getattr(e->m, NULL, ino, &a), 0);
	assert_int_equal(a.mode & 07777, 0750);
	assert_int_equal(
		tm_getxattr(e->m, NULL, ino, "system.posix_acl_access", (char *)buf, sizeof(buf)),
		(int)len);
	/* Malformed ACLs change nothing. */
	len = acl_value(v, no_other, 2);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "system.posix_acl_access", v, len, 0),
			 -EINVAL);
	len = acl_value(v, no_mask, 4);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "system.posix_acl_access", v, len, 0),
			 -EINVAL);
	v[0] = 1;
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "system.posix_acl_access", v, len, 0),
			 -EINVAL);
	assert_int_equal(tm_getattr(e->m, NULL, ino, &a), 0);
	assert_int_equal(a.mode & 07777, 0750);
}

static void test_xattrs(void **state)
{
	struct tm_env *e = *state;
	struct tm_cred bc;
	const Rdmafs__Cred *bob = tm_user(&bc, 1001, 1001);
	char buf[70000], name[300];
	int64_t f = tm_mkfile(e->m, NULL, ROOT, "f", 0644);
	uint64_t ino = (uint64_t)f;
	struct tm_attr a;

	assert_true(f > 0);
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.a", "one", 3, 0), 0);
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.a", buf, sizeof(buf)), 3);
	assert_string_equal(buf, "one");
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.a", "x", 1,
				     RDMAFS__XATTR_FLAG__XATTR_FLAG_CREATE),
			 -EEXIST);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.b", "x", 1,
				     RDMAFS__XATTR_FLAG__XATTR_FLAG_REPLACE),
			 -ENODATA);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.a", "two!", 4,
				     RDMAFS__XATTR_FLAG__XATTR_FLAG_REPLACE),
			 0);
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.a", buf, sizeof(buf)), 4);
	assert_string_equal(buf, "two!");
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.empty", "", 0,
				     RDMAFS__XATTR_FLAG__XATTR_FLAG_CREATE),
			 0);
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.empty", buf, sizeof(buf)), 0);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.a", "x", 1, 3), -EINVAL);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "", "x", 1, 0), -ERANGE);
	memset(name, 'x', 256);
	memcpy(name, "user.", 5);
	name[256] = '\0';
	assert_int_equal(tm_setxattr(e->m, NULL, ino, name, "x", 1, 0), -ERANGE);
	name[255] = '\0';
	assert_int_equal(tm_setxattr(e->m, NULL, ino, name, "x", 1, 0), 0);
	memset(buf, 'v', 65537);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.big", buf, 65537, 0), -E2BIG);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "user.big", buf, 65536, 0), 0);
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.big", buf, sizeof(buf)), 65536);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "trusted.t", "t", 1, 0), 0);
	assert_int_equal(tm_setxattr(e->m, NULL, ino, "security.s", "s", 1, 0), 0);
	assert_int_equal(tm_listxattr(e->m, NULL, ino, buf, sizeof(buf)), 6);
	assert_non_null(strstr(buf, "user.a"));
	assert_non_null(strstr(buf, "trusted.t"));
	/* another user: reads user.* with read permission, no trusted.* at all */
	assert_int_equal(tm_listxattr(e->m, bob, ino, buf, sizeof(buf)), 5);
	assert_null(strstr(buf, "trusted."));
	assert_int_equal(tm_getxattr(e->m, bob, ino, "user.a", buf, sizeof(buf)), 4);
	assert_int_equal(tm_getxattr(e->m, bob, ino, "trusted.t", buf, sizeof(buf)), -EPERM);
	assert_int_equal(tm_setxattr(e->m, bob, ino, "user.a", "b", 1, 0), -EACCES);
	assert_int_equal(tm_setxattr(e->m, bob, ino, "security.s", "b", 1, 0), -EPERM);
	assert_int_equal(tm_removexattr(e->m, bob, ino, "user.a"), -EACCES);
	assert_int_equal(tm_removexattr(e->m, NULL, ino, "user.a"), 0);
	assert_int_equal(tm_removexattr(e->m, NULL, ino, "user.a"), -ENODATA);
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(tm_setxattr(e->m, NULL, 123456, "user.a", "x", 1, 0), -ENOENT);
	/* user.* only on files and directories */
	assert_int_equal(tm_symlink(e->m, NULL, ROOT, "s", "f", &a), 0);
	assert_int_equal(tm_setxattr(e->m, NULL, a.ino, "user.a", "x", 1, 0), -EPERM);
	assert_int_equal(tm_getxattr(e->m, NULL, a.ino, "user.a", buf, sizeof(buf)), -ENODATA);
	/* too big for the reply */
	tm_resp_cap = 1000;
	assert_int_equal(tm_getxattr(e->m, NULL, ino, "user.big", buf, sizeof(buf)), -EMSGSIZE);
	tm_resp_cap = 1 << 20;
	/* they go with the inode */
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", NULL), 0);
	assert_true(tm_mkfile(e->m, NULL, ROOT, "f", 0644) > 0);
	assert_int_equal(tm_listxattr(e->m, NULL, ino, buf, sizeof(buf)), -ENOENT);
}

/*
 * Replicas: a directory's rdmafs.replicas is what its new files get (fixed
 * in their layouts) and what its new directories inherit; never more copies
 * than the layout has daemons; the service's default for the rest; kept
 * across a restart.
 */
static void test_replicas(void **state)
{
	struct tm_env *e = *state, four;
	struct tm_attr d, sub, f;
	char buf[8];
	int64_t plain = tm_mkfile(e->m, NULL, ROOT, "plain", 0644);

	assert_true(plain > 0);
	assert_int_equal(tm_getattr(e->m, NULL, (uint64_t)plain, &f), 0);
	assert_int_equal(f.replicas, 0);
	assert_int_equal(
		tm_getxattr(e->m, NULL, (uint64_t)plain, "rdmafs.replicas", buf, sizeof(buf)), 1);
	assert_string_equal(buf, "1");
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	/* a value is 1..4; a file's count is fixed; others may not set it */
	assert_int_equal(tm_setxattr(e->m, NULL, d.ino, "rdmafs.replicas", "5", 1, 0), -EINVAL);
	assert_int_equal(tm_setxattr(e->m, NULL, d.ino, "rdmafs.replicas", "22", 2, 0), -EINVAL);
	assert_int_equal(tm_setxattr(e->m, NULL, d.ino, "rdmafs.replicas", "0", 1, 0), -EINVAL);
	assert_int_equal(tm_setxattr(e->m, NULL, (uint64_t)plain, "rdmafs.replicas", "2", 1, 0),
			 -EPERM);
	assert_int_equal(tm_setxattr(e->m, NULL, d.ino, "rdmafs.replicas", "2", 1, 0), 0);
	assert_int_equal(tm_create(e->m, NULL, d.ino, "f", 0644, true, O_RDWR, &f, NULL, NULL), 0);
	assert_int_equal(f.replicas, 2);
	assert_int_equal(tm_mkdir(e->m, NULL, d.ino, "sub", 0755, &sub), 0);
	assert_int_equal(tm_getxattr(e->m, NULL, sub.ino, "rdmafs.replicas", buf, sizeof(buf)), 1);
	assert_memory_equal(buf, "2", 1);
	/* 3 daemons: at most 3 copies */
	assert_int_equal(tm_setxattr(e->m, NULL, sub.ino, "rdmafs.replicas", "4", 1, 0), 0);
	assert_int_equal(tm_mknod(e->m, NULL, sub.ino, "g", S_IFREG | 0644, 0, &f), 0);
	assert_int_equal(f.replicas, 3);
	assert_int_equal(tm_getxattr(e->m, NULL, f.ino, "rdmafs.replicas", buf, sizeof(buf)), 1);
	assert_memory_equal(buf, "3", 1);
	tm_reopen(e);
	assert_int_equal(tm_lookup(e->m, NULL, sub.ino, "g", &f), 0);
	assert_int_equal(f.replicas, 3);
	assert_int_equal(tm_lookup(e->m, NULL, d.ino, "f", &f), 0);
	assert_int_equal(f.replicas, 2);
	/* the service's default, for a directory that says nothing */
	tm_setup_with(&four, 4, &(struct meta_options){.replicas = 3});
	assert_int_equal(tm_create(four.m, NULL, ROOT, "f", 0644, true, O_RDWR, &f, NULL, NULL), 0);
	assert_int_equal(f.replicas, 3);
	assert_int_equal(tm_mkdir(four.m, NULL, ROOT, "one", 0755, &d), 0);
	assert_int_equal(tm_setxattr(four.m, NULL, d.ino, "rdmafs.replicas", "1", 1, 0), 0);
	assert_int_equal(tm_create(four.m, NULL, d.ino, "f", 0644, true, O_RDWR, &f, NULL, NULL),
			 0);
	assert_int_equal(f.replicas, 0);
	tm_teardown(&four);
}

static void test_update_size(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__Timespec mt = RDMAFS__TIMESPEC__INIT;
	struct tm_attr a;
	int64_t f = tm_mkfile(e->m, NULL, ROOT, "f", 0644);

	assert_true(f > 0);
	assert_int_equal(tm_update_size(e->m, (uint64_t)f, 1 << 22, NULL, &a), 0);
	assert_int_equal(a.size, 1 << 22);
	assert_int_equal(tm_update_size(e->m, (uint64_t)f, 100, NULL, &a), 0);
	assert_int_equal(a.size, 1 << 22); /* never shrinks */
	mt.sec = 4242;
	mt.nsec = 1;
	assert_int_equal(tm_update_size(e->m, (uint64_t)f, 0, &mt, &a), 0);
	assert_int_equal(a.mtime_sec, 4242);
	assert_int_equal(a.mtime_nsec, 1);
	mt.nsec = 2000000000;
	assert_int_equal(tm_update_size(e->m, (uint64_t)f, 0, &mt, NULL), -EINVAL);
	assert_int_equal(tm_update_size(e->m, ROOT, 10, NULL, NULL), -EISDIR);
	assert_int_equal(tm_update_size(e->m, 999999, 10, NULL, NULL), -ENOENT);
	assert_int_equal(tm_getattr(e->m, NULL, (uint64_t)f, &a), 0);
	assert_int_equal(a.size, 1 << 22);
}

/* UPDATE_SIZE with daemon reports: @n of them, daemon numbers in @daemons. */
static int update_alloc(struct meta *m, uint64_t ino, uint64_t size, size_t n,
			const unsigned *daemons, const uint64_t *bytes, struct tm_attr *a)
{
	Rdmafs__UpdateSizeReq req = RDMAFS__UPDATE_SIZE_REQ__INIT;
	Rdmafs__DaemonAllocation allocs[8], *ptrs[8];
	uint8_t uuids[8][16];
	Rdmafs__AttrResp *r = NULL;
	int ret;

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		rdmafs__daemon_allocation__init(&allocs[i]);
		tm_uuid(uuids[i], daemons[i]);
		allocs[i].uuid.data = uuids[i];
		allocs[i].uuid.len = daemons[i] == 0 ? 3 : 16; /* daemon 0: a malformed uuid */
		allocs[i].bytes = bytes[i];
		ptrs[i] = &allocs[i];
	}
	req.ino = ino;
	req.size = size;
	req.n_allocations = n;
	req.allocations = ptrs;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_UPDATE_SIZE, &req, &rdmafs__attr_resp__descriptor,
		      (void **)&r);
	if (!ret && a) {
		assert_non_null(r->attr);
		a->blocks = r->attr->blocks;
		a->size = r->attr->size;
	}
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	return ret;
}

/* Deletes @ino's allocation mark, as for a file from before the reports. */
static void make_old_inode(struct tm_env *e, uint64_t ino)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint8_t key[8];
	MDB_val k = {sizeof(key), key};

	for (int i = 7; i >= 0; i--, ino >>= 8)
		key[i] = (uint8_t)ino;
	meta_close(e->m);
	e->m = NULL;
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_open(env, e->dir, 0, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "allocs", 0, &dbi), 0);
	assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	tm_reopen(e);
}

/*
 * st_blocks is what the daemons reported at the clients' commits, not the
 * size: a 40 MiB file holding 12 KiB shows 24 blocks, as on ext4.
 */
static void test_allocations(void **state)
{
	struct tm_env *e = *state;
	const unsigned d12[] = {1, 2}, d1[] = {1}, d9[] = {9}, d0[] = {0}, d123[] = {1, 2, 3};
	const uint64_t b12[] = {8192, 4096}, b0[] = {0}, b123[] = {4096, 4096, 4096};
	struct tm_attr a;
	uint64_t h;

	assert_int_equal(tm_create(e->m, NULL, ROOT, "f", 0644, true, O_RDWR, &a, &h, NULL), 0);
	assert_int_equal(a.stripe_width, 3);
	assert_int_equal(a.blocks, 0);
	assert_int_equal(update_alloc(e->m, a.ino, 40 << 20, 2, d12, b12, &a), 0);
	assert_int_equal(a.size, 40 << 20);
	assert_int_equal(a.blocks, 24);
	/* absolute: a repeated report changes nothing, a new one replaces */
	assert_int_equal(update_alloc(e->m, a.ino, 0, 2, d12, b12, &a), 0);
	assert_int_equal(a.blocks, 24);
	assert_int_equal(update_alloc(e->m, a.ino, 0, 1, d1, b0, &a), 0);
	assert_int_equal(a.blocks, 8);
	/* a daemon outside the layout is ignored, a malformed uuid refused */
	assert_int_equal(update_alloc(e->m, a.ino, 0, 1, d9, b12, &a), 0);
	assert_int_equal(a.blocks, 8);
	assert_int_equal(update_alloc(e->m, a.ino, 0, 1, d0, b12, NULL), -EINVAL);
	tm_reopen(e);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, &a), 0);
	assert_int_equal(a.blocks, 8);
	/* handles live in memory: this one went with the restart */
	assert_int_equal(tm_release(e->m, h, a.ino, NULL), -EBADF);

	/* a file from before the reports: the size, until every daemon reported */
	make_old_inode(e, a.ino);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, &a), 0);
	assert_int_equal(a.blocks, (40 << 20) / 512);
	assert_int_equal(update_alloc(e->m, a.ino, 0, 2, d12, b12, &a), 0);
	assert_int_equal(a.blocks, (40 << 20) / 512);
	assert_int_equal(update_alloc(e->m, a.ino, 0, 3, d123, b123, &a), 0);
	assert_int_equal(a.blocks, 24);
	tm_reopen(e);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, &a), 0);
	assert_int_equal(a.blocks, 24);
	/* the records go with the inode */
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", NULL), 0);
	assert_int_equal(tm_getattr(e->m, NULL, a.ino, NULL), -ENOENT);
}

static void test_persistence(void **state)
{
	struct tm_env *e = *state;
	struct tm_attr d, f, s, after;
	char buf[64];
	int64_t g;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0711, &d), 0);
	g = tm_mkfile(e->m, NULL, d.ino, "g", 0640);
	assert_true(g > 0);
	assert_int_equal(tm_symlink(e->m, NULL, d.ino, "s", "g", &s), 0);
	assert_int_equal(tm_setxattr(e->m, NULL, (uint64_t)g, "user.k", "v", 1, 0), 0);
	assert_int_equal(tm_update_size(e->m, (uint64_t)g, 777, NULL, NULL), 0);
	tm_reopen(e);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "d", &after), 0);
	assert_int_equal(after.ino, d.ino);
	assert_int_equal(after.mode, S_IFDIR | 0711);
	assert_int_equal(tm_lookup(e->m, NULL, d.ino, "g", &f), 0);
	assert_int_equal(f.ino, (uint64_t)g);
	assert_int_equal(f.size, 777);
	assert_int_equal(f.stripe_width, 3);
	assert_int_equal(tm_readlink(e->m, s.ino, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "g");
	assert_int_equal(tm_getxattr(e->m, NULL, (uint64_t)g, "user.k", buf, sizeof(buf)), 1);
	/* numbers are never reused */
	g = tm_mkfile(e->m, NULL, d.ino, "h", 0640);
	assert_true((uint64_t)g > s.ino);
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &after), 0);
	assert_int_equal(after.nlink, 3);
}

/*
 * metadata_sync = batch: SYNC (a client's fsync) flushes the store before it
 * answers, and meta_tick() flushes what was committed since the last flush,
 * once; a tick with nothing new committed flushes nothing.
 */
static void test_sync(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__SyncReq r = RDMAFS__SYNC_REQ__INIT;
	struct tm_attr a;
	uint64_t n;

	meta_tick(e->m, 100); /* what the setup committed */
	n = meta_sync_count(e->m);
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SYNC, &r,
				 &rdmafs__sync_resp__descriptor, NULL),
			 0);
	assert_int_equal(meta_sync_count(e->m), n + 1);
	meta_tick(e->m, 101);
	assert_int_equal(meta_sync_count(e->m), n + 1);
	assert_true(tm_mkfile(e->m, NULL, ROOT, "f", 0644) > 0);
	assert_int_equal(meta_sync_count(e->m), n + 1);
	meta_tick(e->m, 102);
	assert_int_equal(meta_sync_count(e->m), n + 2);
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &a), 0);
	meta_tick(e->m, 103);
	assert_int_equal(meta_sync_count(e->m), n + 2);
}

/*
 * metadata_sync_ms: a thread of the service flushes what was committed,
 * with no tick and no request asking; meta_close() stops it.
 */
static void test_sync_interval(void **state)
{
	struct tm_env e;
	uint64_t n;
	int waited_ms = 0;

	(void)state;
	tm_setup_with(&e, 0, &(struct meta_options){.sync_interval_ms = 10});
	n = meta_sync_count(e.m);
	assert_int_equal(tm_mkdir(e.m, NULL, ROOT, "d", 0755, NULL), 0);
	/* not a speed check: the bound only ends a test whose flusher never runs */
	while (meta_sync_count(e.m) == n && waited_ms < 30000) {
		usleep(5000);
		waited_ms += 5;
	}
	if (meta_sync_count(e.m) == n)
		fail_msg("no flush 30 s after a commit with metadata_sync_ms = 10");
	n = meta_sync_count(e.m);
	usleep(50000); /* rounds with nothing new committed: no flush */
	assert_int_equal(meta_sync_count(e.m), n);
	tm_teardown(&e);
}

/* Directories "b@from" .. "b@to - 1": one commit each. */
static void mkdirs(struct meta *m, unsigned from, unsigned to)
{
	char name[32];

	for (unsigned i = from; i < to; i++) {
		snprintf(name, sizeof(name), "b%u", i);
		assert_int_equal(tm_mkdir(m, NULL, ROOT, name, 0755, NULL), 0);
	}
}

/*
 * metadata_sync = batch bounds the commits past the last flush
 * (LMDB_GUARD_LAG, the store's growth): without a flusher the request
 * that crosses the bound flushes before its answer; with one, it kicks the
 * flusher and flushes nothing itself (meta_growth_stats()), and the
 * flusher's interval is an hour here, so that only the kick can make the
 * flush that follows.
 */
static void test_sync_bound(void **state)
{
	struct tm_env e;
	uint64_t n, kicks, flushes;
	int waited_ms = 0;

	(void)state;
	tm_setup_with(&e, 0, &(struct meta_options){0});
	n = meta_sync_count(e.m); /* the open flushed: nothing is unflushed */
	mkdirs(e.m, 0, LMDB_GUARD_LAG);
	assert_int_equal(meta_sync_count(e.m), n);
	mkdirs(e.m, LMDB_GUARD_LAG, LMDB_GUARD_LAG + 1);
	assert_int_equal(meta_sync_count(e.m), n + 1);
	meta_growth_stats(e.m, &kicks, &flushes);
	assert_int_equal(kicks, 0);
	assert_int_equal(flushes, 1);
	tm_teardown(&e);

	tm_setup_with(&e, 0, &(struct meta_options){.sync_interval_ms = 3600000});
	n = meta_sync_count(e.m);
	mkdirs(e.m, 0, LMDB_GUARD_LAG + 1);
	meta_growth_stats(e.m, &kicks, &flushes);
	assert_int_equal(kicks, 1);
	assert_int_equal(flushes, 0);
	/* not a speed check: the bound only ends a test whose kick is lost */
	while (meta_sync_count(e.m) == n && waited_ms < 30000) {
		usleep(5000);
		waited_ms += 5;
	}
	if (meta_sync_count(e.m) == n)
		fail_msg("no flush 30 s after %u commits with the flusher's interval an hour",
			 LMDB_GUARD_LAG + 1);
	tm_teardown(&e);
}

/* SETATTR of @ino's size alone. */
static int set_size(struct meta *m, uint64_t ino, uint64_t size)
{
	Rdmafs__SetattrReq s = RDMAFS__SETATTR_REQ__INIT;

	s.ino = ino;
	s.valid = RDMAFS__SETATTR_VALID__SETATTR_VALID_SIZE;
	s.size = size;
	return tm_setattr(m, NULL, &s, NULL);
}

/*
 * metadata_sync = batch answers a commit before it is flushed, but not a
 * change whose answer makes the caller destroy data: the unlink that frees
 * a file with bytes (the client removes its chunks next), a truncate that
 * shrinks (it cuts them), and an administration change (a drain acts on
 * it). Each of those is flushed before its answer; the rest wait for a tick.
 */
static void test_sync_before_destroying(void **state)
{
	struct tm_env *e = *state;
	uint64_t n, freed = 0;
	int64_t a, b;

	meta_tick(e->m, 100);
	n = meta_sync_count(e->m);
	a = tm_mkfile(e->m, NULL, ROOT, "a", 0644);
	assert_true(a > 0);
	assert_int_equal(tm_update_size(e->m, (uint64_t)a, 4096, NULL, NULL), 0);
	assert_int_equal(set_size(e->m, (uint64_t)a, 8192), 0);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 0, NULL), 0);
	assert_int_equal(meta_sync_count(e->m), n);
	assert_int_equal(set_size(e->m, (uint64_t)a, 100), 0);
	assert_int_equal(meta_sync_count(e->m), n + 1);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "a", &freed), 0);
	assert_int_equal(freed, (uint64_t)a);
	assert_int_equal(meta_sync_count(e->m), n + 2);
	/* an empty file's unlink destroys nothing */
	b = tm_mkfile(e->m, NULL, ROOT, "b", 0644);
	assert_true(b > 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "b", &freed), 0);
	assert_int_equal(freed, (uint64_t)b);
	assert_int_equal(meta_sync_count(e->m), n + 2);
	assert_int_equal(
		tm_set_state(e->m, 1, RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING, false, NULL), 0);
	assert_int_equal(meta_sync_count(e->m), n + 3);
}

/* The inode a reply's FreedInode names (0: none); frees the reply. */
static uint64_t freed_of(ProtobufCMessage *resp, Rdmafs__FreedInode *f)
{
	uint64_t ino = f ? f->ino : 0;

	protobuf_c_message_free_unpacked(resp, NULL);
	return ino;
}

/*
 * flush_before_free (rdmafs.proto, FreedInode): a caller that SYNCs before
 * it removes a freed file's chunks gets the answer of the unlink, the
 * rename over a file or the last release that frees one with bytes without
 * a flush; the file is freed all the same.
 */
static void test_free_flushed_by_caller(void **state)
{
	Rdmafs__UnlinkReq u = RDMAFS__UNLINK_REQ__INIT;
	Rdmafs__RenameReq r = RDMAFS__RENAME_REQ__INIT;
	Rdmafs__ReleaseReq rel = RDMAFS__RELEASE_REQ__INIT;
	Rdmafs__UnlinkResp *ur = NULL;
	Rdmafs__RenameResp *rr = NULL;
	Rdmafs__ReleaseResp *relr = NULL;
	struct tm_env *e = *state;
	int64_t a, b, t;
	struct tm_attr c;
	uint64_t n, h, freed = 1;

	a = tm_mkfile(e->m, NULL, ROOT, "a", 0644);
	b = tm_mkfile(e->m, NULL, ROOT, "b", 0644);
	t = tm_mkfile(e->m, NULL, ROOT, "t", 0644);
	assert_true(a > 0 && b > 0 && t > 0);
	assert_int_equal(
		tm_create(e->m, NULL, ROOT, "c", S_IFREG | 0644, true, O_RDWR, &c, &h, NULL), 0);
	assert_int_equal(tm_update_size(e->m, (uint64_t)a, 4096, NULL, NULL), 0);
	assert_int_equal(tm_update_size(e->m, (uint64_t)b, 4096, NULL, NULL), 0);
	assert_int_equal(tm_update_size(e->m, c.ino, 4096, NULL, NULL), 0);
	/* c stays open: its unlink frees nothing, its release does */
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "c", &freed), 0);
	assert_int_equal(freed, 0);
	meta_tick(e->m, 100);
	n = meta_sync_count(e->m);

	u.parent = ROOT;
	u.name = (ProtobufCBinaryData){1, (uint8_t *)"a"};
	u.flush_before_free = true;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_UNLINK, &u,
				 &rdmafs__unlink_resp__descriptor, (void **)&ur),
			 0);
	assert_int_equal(freed_of(&ur->base, ur->freed), (uint64_t)a);
	r.old_parent = r.new_parent = ROOT;
	r.old_name = (ProtobufCBinaryData){1, (uint8_t *)"t"};
	r.new_name = (ProtobufCBinaryData){1, (uint8_t *)"b"};
	r.flush_before_free = true;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_RENAME, &r,
				 &rdmafs__rename_resp__descriptor, (void **)&rr),
			 0);
	assert_int_equal(freed_of(&rr->base, rr->freed), (uint64_t)b);
	rel.handle = h;
	rel.ino = c.ino;
	rel.flush_before_free = true;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_RELEASE, &rel,
				 &rdmafs__release_resp__descriptor, (void **)&relr),
			 0);
	assert_int_equal(freed_of(&relr->base, relr->freed), c.ino);
	assert_int_equal(meta_sync_count(e->m), n);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "a", NULL), -ENOENT);
	assert_int_equal(tm_getattr(e->m, NULL, c.ino, &c), -ENOENT);

	/* without it, a rename over a file and a last release that free one flush first */
	b = tm_mkfile(e->m, NULL, ROOT, "b2", 0644);
	t = tm_mkfile(e->m, NULL, ROOT, "t2", 0644);
	assert_true(b > 0 && t > 0);
	assert_int_equal(
		tm_create(e->m, NULL, ROOT, "c2", S_IFREG | 0644, true, O_RDWR, &c, &h, NULL), 0);
	assert_int_equal(tm_update_size(e->m, (uint64_t)b, 4096, NULL, NULL), 0);
	assert_int_equal(tm_update_size(e->m, c.ino, 4096, NULL, NULL), 0);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "c2", &freed), 0);
	assert_int_equal(freed, 0);
	n = meta_sync_count(e->m);
	assert_int_equal(tm_rename(e->m, NULL, ROOT, "t2", ROOT, "b2", 0, &freed), 0);
	assert_int_equal(freed, (uint64_t)b);
	assert_int_equal(meta_sync_count(e->m), n + 1);
	assert_int_equal(tm_release(e->m, h, c.ino, &freed), 0);
	assert_int_equal(freed, c.ino);
	assert_int_equal(meta_sync_count(e->m), n + 2);
}

/* GETATTR of @ino with its layout; the caller frees the reply. */
static Rdmafs__AttrResp *getattr_layout(struct meta *m, uint64_t ino)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *r = NULL;

	req.ino = ino;
	assert_int_equal(tm_call(m, RDMAFS__METHOD__METHOD_GETATTR, &req,
				 &rdmafs__attr_resp__descriptor, (void **)&r),
			 0);
	return r;
}

/*
 * Layout generations (drain's fences rely on them): 0 at create, bumped by
 * every SET_LAYOUT that succeeds and by nothing else, returned by GETATTR,
 * LOOKUP and OPEN, and kept across a restart.
 */
static void test_layout_generation(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__SetLayoutReq sl = RDMAFS__SET_LAYOUT_REQ__INIT;
	Rdmafs__SetLayoutResp *slr = NULL;
	Rdmafs__OpenReq oreq = RDMAFS__OPEN_REQ__INIT;
	Rdmafs__OpenResp *oresp = NULL;
	Rdmafs__LookupReq lreq = RDMAFS__LOOKUP_REQ__INIT;
	Rdmafs__EntryResp *lresp = NULL;
	ProtobufCBinaryData old[3], fewer[2];
	Rdmafs__AttrResp *r;
	struct tm_attr d;
	int64_t f = tm_mkfile(e->m, NULL, ROOT, "f", 0644);

	assert_true(f > 0);
	r = getattr_layout(e->m, (uint64_t)f);
	assert_non_null(r->layout);
	assert_int_equal(r->layout->generation, 0);
	assert_int_equal(r->layout->n_daemons, 3);
	for (size_t i = 0; i < 3; i++) {
		old[i].len = 16;
		old[i].data = malloc(16);
		assert_non_null(old[i].data);
		memcpy(old[i].data, r->layout->daemons[i].data, 16);
	}
	rdmafs__attr_resp__free_unpacked(r, NULL);
	fewer[0] = old[0];
	fewer[1] = old[2];

	/* the switch drain makes: generation 1 */
	sl.ino = (uint64_t)f;
	sl.expected_daemons = old;
	sl.n_expected_daemons = 3;
	sl.daemons = fewer;
	sl.n_daemons = 2;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
				 &rdmafs__set_layout_resp__descriptor, (void **)&slr),
			 0);
	assert_int_equal(slr->layout->generation, 1);
	assert_int_equal(slr->layout->n_daemons, 2);
	rdmafs__set_layout_resp__free_unpacked(slr, NULL);
	/* a refused compare-and-swap changes nothing */
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
				 &rdmafs__set_layout_resp__descriptor, NULL),
			 -ESTALE);
	r = getattr_layout(e->m, (uint64_t)f);
	assert_int_equal(r->layout->generation, 1);
	assert_int_equal(r->layout->n_daemons, 2);
	rdmafs__attr_resp__free_unpacked(r, NULL);

	/* every reply that carries the layout carries its generation */
	oreq.ino = (uint64_t)f;
	oreq.flags = O_RDWR;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_OPEN, &oreq,
				 &rdmafs__open_resp__descriptor, (void **)&oresp),
			 0);
	assert_int_equal(oresp->layout->generation, 1);
	assert_int_equal(tm_release(e->m, oresp->handle, (uint64_t)f, NULL), 0);
	rdmafs__open_resp__free_unpacked(oresp, NULL);
	lreq.parent = ROOT;
	lreq.name.data = (uint8_t *)"f";
	lreq.name.len = 1;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_LOOKUP, &lreq,
				 &rdmafs__entry_resp__descriptor, (void **)&lresp),
			 0);
	assert_int_equal(lresp->layout->generation, 1);
	rdmafs__entry_resp__free_unpacked(lresp, NULL);

	/* a second switch, then a restart */
	sl.expected_daemons = fewer;
	sl.n_expected_daemons = 2;
	sl.daemons = fewer;
	sl.n_daemons = 1;
	assert_int_equal(tm_call(e->m, RDMAFS__METHOD__METHOD_SET_LAYOUT, &sl,
				 &rdmafs__set_layout_resp__descriptor, NULL),
			 0);
	tm_reopen(e);
	r = getattr_layout(e->m, (uint64_t)f);
	assert_int_equal(r->layout->generation, 2);
	assert_int_equal(r->layout->n_daemons, 1);
	rdmafs__attr_resp__free_unpacked(r, NULL);

	/* GETATTR of anything but a regular file has no layout */
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &d), 0);
	r = getattr_layout(e->m, d.ino);
	assert_null(r->layout);
	rdmafs__attr_resp__free_unpacked(r, NULL);
	for (size_t i = 0; i < 3; i++)
		free(old[i].data);
}

/* A store written by a newer format is refused and left alone. */
static void test_newer_format(void **state)
{
	struct tm_env *e = *state;
	struct meta *m = NULL;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint64_t v = 99;
	MDB_val k = {6, "format"}, val = {sizeof(v), &v};

	meta_close(e->m);
	e->m = NULL;
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_open(env, e->dir, 0, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "counters", 0, &dbi), 0);
	assert_int_equal(mdb_put(txn, dbi, &k, &val, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	assert_int_equal(meta_open(e->dir, NULL, &m), -EPROTONOSUPPORT);
	assert_null(m);
	assert_int_equal(meta_open("/nonexistent/dir", NULL, &m), -ENOENT);
	/* put it back so teardown has a store to close */
	v = 1;
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_open(env, e->dir, 0, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "counters", 0, &dbi), 0);
	assert_int_equal(mdb_put(txn, dbi, &k, &val, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	tm_reopen(e);
}

/* A reply that does not fit changes nothing. */
static void test_emsgsize(void **state)
{
	struct tm_env *e = *state;

	tm_resp_cap = 8;
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, NULL), -EMSGSIZE);
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, NULL), -EMSGSIZE);
	tm_resp_cap = 1 << 20;
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "d", NULL), -ENOENT);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, NULL), 0);
}

/* Garbage never crashes: -EBADMSG, or whatever the parsed request deserves. */
static void test_malformed(void **state)
{
	struct tm_env *e = *state;
	static const uint8_t bad[][8] = {
		{0x0a, 0x05, 'a'},		      /* field 1 length 5, 1 byte follows */
		{0xff, 0xff, 0xff, 0xff},	      /* unterminated varint tag */
		{0x12, 0xff, 0xff, 0xff, 0xff, 0x0f}, /* length near 4 GiB */
		{0x0f},				      /* wire type 7 */
		{0x08},				      /* varint value missing */
	};
	uint8_t buf[256], out[4096];
	size_t out_len;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = 1;

		while (len < sizeof(bad[i]) && bad[i][len])
			len++;
		if (i == 2)
			len = 6;
		for (uint32_t method = 200; method <= 222; method++)
			assert_int_equal(
				meta_handle(e->m, method, bad[i], len, out, sizeof(out), &out_len),
				-EBADMSG);
		for (uint32_t method = 300; method <= 303; method++)
			assert_int_equal(
				meta_handle(e->m, method, bad[i], len, out, sizeof(out), &out_len),
				-EBADMSG);
	}
	assert_int_equal(meta_handle(e->m, 100, "", 0, out, sizeof(out), &out_len), -EOPNOTSUPP);
	assert_int_equal(meta_handle(e->m, 223, "", 0, out, sizeof(out), &out_len), -EOPNOTSUPP);
	assert_int_equal(meta_handle(e->m, 0, "", 0, out, sizeof(out), &out_len), -EOPNOTSUPP);
	assert_false(meta_handles_method(1));
	assert_true(meta_handles_method(212));
	assert_true(meta_handles_method(303));
	/* an empty body parses: GETATTR of inode 0 */
	assert_int_equal(meta_handle(e->m, 201, "", 0, out, sizeof(out), &out_len), -ENOENT);

	/* random bytes into every method; some parse and run, none crash */
	srand(7);
	for (int round = 0; round < 20000; round++) {
		uint32_t methods[] = {200, 201, 202, 203, 204, 205, 206, 207, 208,
				      209, 210, 211, 212, 213, 214, 215, 216, 217,
				      218, 219, 220, 300, 301, 302, 303};
		size_t len = (size_t)rand() % sizeof(buf);
		int ret;

		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rand();
		/* often a valid-looking small prefix: parent 1 */
		if (round % 3 == 0 && len > 2) {
			buf[0] = 0x08;
			buf[1] = 0x01;
		}
		ret = meta_handle(e->m, methods[rand() % 25], buf, len, out, sizeof(out), &out_len);
		assert_true(ret <= 0);
		if (ret == 0)
			assert_true(out_len <= sizeof(out));
	}
	/* the store is still sound */
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, NULL), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "after-fuzz", 0755, NULL), 0);
}

struct worker {
	struct meta *m;
	uint64_t dir;
	int errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t req[512], out[65536];
	char name[32];

	for (int i = 0; i < 300; i++) {
		Rdmafs__MkdirReq mk = RDMAFS__MKDIR_REQ__INIT;
		Rdmafs__ReaddirReq rd = RDMAFS__READDIR_REQ__INIT;
		size_t len, out_len;

		snprintf(name, sizeof(name), "n%d", i);
		mk.parent = w->dir;
		mk.name.data = (uint8_t *)name;
		mk.name.len = strlen(name);
		mk.mode = 0755;
		len = rdmafs__mkdir_req__pack(&mk, req);
		if (meta_handle(w->m, RDMAFS__METHOD__METHOD_MKDIR, req, len, out, sizeof(out),
				&out_len))
			w->errors++;
		rd.ino = ROOT;
		len = rdmafs__readdir_req__pack(&rd, req);
		if (meta_handle(w->m, RDMAFS__METHOD__METHOD_READDIR, req, len, out, sizeof(out),
				&out_len))
			w->errors++;
	}
	return NULL;
}

/* Worker threads at once: writers serialize, readers do not get in the way. */
static void test_threads(void **state)
{
	enum { THREADS = 4 };
	struct tm_env *e = *state;
	struct worker w[THREADS];
	pthread_t tid[THREADS];
	struct tm_attr a;
	char name[16];

	for (int i = 0; i < THREADS; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		assert_int_equal(tm_mkdir(e->m, NULL, ROOT, name, 0755, &a), 0);
		w[i] = (struct worker){.m = e->m, .dir = a.ino};
		assert_int_equal(pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(tm_getattr(e->m, NULL, w[i].dir, &a), 0);
		assert_int_equal(a.nlink, 2 + 300);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_open, setup, teardown),
		cmocka_unit_test(test_create_without_daemons),
		cmocka_unit_test_setup_teardown(test_mknod, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_rmdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_exchange, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setattr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_permissions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_privs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_while_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_open_leaves_no_handle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdir_10000_changing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_statfs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xattrs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_sets_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replicas, setup, teardown),
		cmocka_unit_test_setup_teardown(test_update_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persistence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_before_destroying, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_flushed_by_caller, setup, teardown),
		cmocka_unit_test(test_sync_interval),
		cmocka_unit_test(test_sync_bound),
		cmocka_unit_test_setup_teardown(test_layout_generation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_emsgsize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};

	return cmocka_run_group_tests_name("meta-fs", tests, NULL, NULL) ? 1 : 0;
}
