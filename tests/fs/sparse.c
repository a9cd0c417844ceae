/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sparse files and fallocate on a mounted file system, checked against what
 * ext4 does (RDMAFS_FS_LOCAL=/tmp runs the same checks on the local disk):
 *
 *  - st_blocks counts what a file holds, not its size, after writes (file
 *    still open and after close), truncate, punching holes, and a remount;
 *  - FALLOC_FL_ZERO_RANGE with and without KEEP_SIZE;
 *  - FALLOC_FL_COLLAPSE_RANGE and FALLOC_FL_INSERT_RANGE: byte-exact data,
 *    holes kept, and ext4's errors (EINVAL unaligned or at/past the end,
 *    EFBIG past the largest file), in units of st_blksize.
 *
 * Linux's FUSE refuses COLLAPSE_RANGE and INSERT_RANGE itself (EOPNOTSUPP
 * before rdmafs-fuse sees them), so on rdmafs (RDMAFS_CLUSTER_META set by
 * tests/lib/cluster.sh) those two run through the client core that
 * rdmafs-fuse would use (rfs_collapse_range(), rfs_insert_range()) and the
 * result is read back through the mount. The remounts use cluster.sh's
 * "ctl remount".
 *
 * Usage: fs-sparse DIRECTORY. Exit 0 pass, 1 a check failed, 99 the check
 * itself could not run (no memory, no connection to the cluster, remount
 * failed): "ERROR: ..." says which.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fscheck.h"
#include "rdmafs_common.h"
#include "rdmafs_fs.h"

#define KIB 1024ll
#define MIB (1024ll * 1024)
/*
 * What a backing store may allocate beyond the bytes written (a larger
 * block, XFS's speculative preallocation), per check. Far below the sizes
 * that tell a sparse file from a full one.
 */
#define ALLOC_SLACK (256 * KIB)

static void *xmalloc(size_t len)
{
	void *p = calloc(1, len ? len : 1);

	if (!p)
		check_error("out of memory (%zu bytes)", len);
	return p;
}

/*
 * Unmounts and mounts again (cluster.sh's ctl remount): the kernel and
 * rdmafs-fuse forget everything, what follows comes from the cluster. On a
 * local file system there is nothing to do. Nothing may be open.
 */
static void remount(void)
{
	const char *ctl = getenv("RDMAFS_CLUSTER_CTL");
	char cwd[4096];
	pid_t pid;
	int status;

	if (!ctl || !*ctl)
		return;
	if (!getcwd(cwd, sizeof(cwd)) || chdir("/"))
		check_error("getcwd/chdir before the remount: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		check_error("fork: %s", strerror(errno));
	if (pid == 0) {
		execl(ctl, ctl, "ctl", "remount", "1", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		check_error("%s ctl remount 1 failed (status 0x%x)", ctl, status);
	if (chdir(cwd))
		check_error("chdir %s after the remount: %s", cwd, strerror(errno));
}

/*
 * st_blocks of @path (or of @fd when >= 0) must say @expect bytes, give or
 * take the slack. A failure is counted; the test goes on.
 */
static void check_alloc(const char *what, const char *path, int fd, long long expect)
{
	struct stat st;
	long long bytes;

	if (!CHECK((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) == 0, "%s: stat %s: %s", what, path,
		   check_errno_name(errno)))
		return;
	bytes = (long long)st.st_blocks * 512;
	CHECK(bytes >= expect && bytes <= expect + ALLOC_SLACK,
	      "%s: %s of %lld bytes has st_blocks %lld (%lld bytes), expected %lld bytes", what,
	      path, (long long)st.st_size, (long long)st.st_blocks, bytes, expect);
}

/* @path must hold exactly @len bytes equal to @model. A failure is counted; the test goes on. */
static void check_content(const char *what, const char *path, const uint8_t *model, size_t len)
{
	uint8_t *got = xmalloc(len + 1);
	struct stat st;
	ssize_t n;
	long diff;
	int fd;

	fd = open(path, O_RDONLY);
	if (!CHECK(fd >= 0, "%s: open %s: %s", what, path, check_errno_name(errno))) {
		free(got);
		return;
	}
	n = fstat(fd, &st) ? -1 : fs_pread_all(fd, got, len + 1, 0);
	close(fd);
	if (!CHECK(n >= 0, "%s: reading %s: %s", what, path, check_errno_name(errno))) {
		free(got);
		return;
	}
	diff = (size_t)n == len ? fs_first_diff(got, model, len) : -1;
	free(got);
	if (!CHECK(st.st_size == (off_t)len && (size_t)n == len,
		   "%s: %s has size %lld and read %zd bytes, expected %zu", what, path,
		   (long long)st.st_size, n, len))
		return;
	CHECK(diff < 0, "%s: %s differs from the expected bytes at offset %ld", what, path, diff);
}

/* ---- the client core, for what Linux's FUSE does not pass on ---------------------------- */

static struct rfs *core;

static struct rfs *core_get(void)
{
	const char *uri = getenv("RDMAFS_CLUSTER_META"), *secret = getenv("RDMAFS_CLUSTER_SECRET");
	struct rfs_options o;
	uint8_t *key;
	size_t key_len;
	int ret;

	if (core)
		return core;
	if (!secret)
		check_error("RDMAFS_CLUSTER_META without RDMAFS_CLUSTER_SECRET");
	ret = rdmafs_read_secret(secret, &key, &key_len);
	if (ret)
		check_error("reading the secret %s: %s", secret, strerror(-ret));
	rfs_options_init(&o);
	o.meta_uri = uri;
	o.secret = key;
	o.secret_len = key_len;
	o.name = "fs-sparse";
	ret = rfs_create(&o, &core);
	free(key);
	if (ret)
		check_error("connecting the client core to %s: %s", uri, strerror(-ret));
	return core;
}

static int meta_update(struct rfs *fs, uint64_t ino, uint64_t size, struct rfs_layout *layout)
{
	struct rfs_alloc_report report;
	uint64_t all = layout->stripe_width >= 64 ? UINT64_MAX : (1ull << layout->stripe_width) - 1;
	struct rfs_entry e;
	int ret;

	/* as rdmafs-fuse after a shift: commit every daemon, report what they hold */
	ret = rfs_commit_alloc(fs, ino, layout, all, 0, RFS_COMMIT_DURABLE, &report);
	if (ret)
		return ret;
	return rfs_update_size(fs, NULL, ino, size, NULL, &report, layout, &e);
}

/* COLLAPSE_RANGE / INSERT_RANGE of @path through the client core, as rdmafs-fuse does them. */
static int core_shift(const char *path, int mode, off_t off, off_t len)
{
	struct rfs *fs = core_get();
	struct rfs_setattr set = {.valid = RFS_SET_SIZE};
	struct rfs_layout layout;
	struct rfs_entry e;
	uint64_t size, handle;
	struct stat st;
	int ret;

	if (stat(path, &st))
		return -errno;
	ret = rfs_open(fs, NULL, st.st_ino, O_RDWR, &handle, &e);
	if (ret)
		return ret;
	layout = e.layout;
	size = (uint64_t)e.attr.st_size;
	if (mode == FALLOC_FL_COLLAPSE_RANGE) {
		ret = rfs_collapse_range(fs, st.st_ino, &layout, size, (uint64_t)off,
					 (uint64_t)len);
		if (ret)
			goto out_release;
		set.size = size - (uint64_t)len;
		set.handle = handle;
		ret = rfs_setattr(fs, NULL, st.st_ino, &set, &e);
		if (ret)
			goto out_release;
		ret = rfs_truncate_data(fs, st.st_ino, &layout, set.size, size);
		if (!ret)
			ret = meta_update(fs, st.st_ino, 0, &layout);
	} else {
		ret = rfs_insert_range(fs, st.st_ino, &layout, size, (uint64_t)off, (uint64_t)len);
		if (!ret)
			ret = meta_update(fs, st.st_ino, size + (uint64_t)len, &layout);
	}
out_release:
	rfs_release(fs, NULL, st.st_ino, handle, NULL);
	return ret;
}

/*
 * fallocate(@mode) of a range shift on @path: 0 or -errno. Where the kernel
 * refuses the mode for the file system (FUSE), the client core does it.
 */
static int shift(const char *path, int mode, off_t off, off_t len)
{
	int fd = open(path, O_RDWR), ret = 0;

	if (fd < 0)
		return -errno;
	if (fallocate(fd, mode, off, len))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret == -EOPNOTSUPP && getenv("RDMAFS_CLUSTER_META"))
		ret = core_shift(path, mode, off, len);
	return ret;
}

/* ---- the checks ------------------------------------------------------------------------------ */

/* A 40 MiB file holding 12 KiB, then truncated, filled and punched. */
static void test_blocks(void)
{
	static const long long offsets[] = {0, 20 * MIB, 40 * MIB - 4 * KIB};
	uint8_t *model = xmalloc(40 * MIB), *data = xmalloc(3 * MIB);
	int fd;

	fd = open("sparse", O_CREAT | O_RDWR | O_EXCL, 0644);
	if (fd < 0) {
		free(model);
		free(data);
		REQUIRE(false, "create sparse: %s", check_errno_name(errno));
	}
	for (size_t i = 0; i < 3; i++) {
		fs_fill(model + offsets[i], 4 * KIB, 1, (uint64_t)offsets[i]);
		if (fs_pwrite_all(fd, model + offsets[i], 4 * KIB, offsets[i]) != 4 * KIB) {
			close(fd);
			REQUIRE(false, "write at %lld: %s", offsets[i], check_errno_name(errno));
		}
	}
	check_alloc("written, still open", "sparse", fd, 12 * KIB);
	REQUIRE_OK(close(fd));
	check_alloc("closed", "sparse", -1, 12 * KIB);
	remount();
	check_alloc("after a remount", "sparse", -1, 12 * KIB);
	check_content("after a remount", "sparse", model, 40 * MIB);

	REQUIRE_OK(truncate("sparse", 4 * KIB));
	check_alloc("truncated to 4 KiB", "sparse", -1, 4 * KIB);

	/* 3 MiB of data, then a hole punched in the middle MiB */
	fs_fill(data, 3 * MIB, 2, 0);
	REQUIRE_FD(fd, open("sparse", O_RDWR));
	REQUIRE(fs_pwrite_all(fd, data, 3 * MIB, 0) == 3 * MIB, "write of 3 MiB: %s",
		check_errno_name(errno));
	REQUIRE_OK(fsync(fd));
	check_alloc("3 MiB written", "sparse", fd, 3 * MIB);
	REQUIRE_OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 * MIB, 1 * MIB));
	check_alloc("1 MiB punched", "sparse", fd, 2 * MIB);
	/* inside one MiB, 4 KiB aligned: the blocks covered go, as on ext4 */
	REQUIRE_OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8 * KIB, 512 * KIB));
	check_alloc("512 KiB punched", "sparse", fd, 2 * MIB - 512 * KIB);
	/* unaligned: only what lies inside, zeroed; no whole block is covered */
	REQUIRE_OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 600 * KIB + 7, 3000));
	check_alloc("3000 bytes punched", "sparse", fd, 2 * MIB - 512 * KIB);
	REQUIRE_OK(close(fd));
	memset(data + 1 * MIB, 0, 1 * MIB);
	memset(data + 8 * KIB, 0, 512 * KIB);
	memset(data + 600 * KIB + 7, 0, 3000);
	check_content("punched", "sparse", data, 3 * MIB);
	remount();
	check_alloc("punched, after a remount", "sparse", -1, 2 * MIB - 512 * KIB);
	check_content("punched, after a remount", "sparse", data, 3 * MIB);
	REQUIRE_OK(unlink("sparse"));
	free(model);
	free(data);
}

/* FALLOC_FL_ZERO_RANGE inside the file, across its end with and without KEEP_SIZE. */
static void test_zero_range(void)
{
	size_t size = 2 * MIB + 100, cap = 4 * MIB;
	uint8_t *model = xmalloc(cap);
	int fd;

	fs_fill(model, size, 3, 0);
	fd = open("zero", O_CREAT | O_RDWR | O_EXCL, 0644);
	if (fd < 0) {
		free(model);
		REQUIRE(false, "create zero: %s", check_errno_name(errno));
	}
	if (fs_pwrite_all(fd, model, size, 0) != (ssize_t)size) {
		close(fd);
		free(model);
		REQUIRE(false, "write: %s", check_errno_name(errno));
	}
	/* unaligned, inside: no alignment rule for zeroing */
	REQUIRE_OK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 12 * KIB + 1, 5000));
	memset(model + 12 * KIB + 1, 0, 5000);
	/* a whole MiB */
	REQUIRE_OK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 1 * MIB, 1 * MIB));
	memset(model + 1 * MIB, 0, 1 * MIB);
	/* across the end, keeping the size */
	REQUIRE_OK(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)size - 10,
			     1 * MIB));
	memset(model + size - 10, 0, 10);
	REQUIRE_OK(close(fd));
	check_content("zeroed, size kept", "zero", model, size);
	/* across the end, growing the file */
	REQUIRE_FD(fd, open("zero", O_RDWR));
	REQUIRE_OK(fallocate(fd, FALLOC_FL_ZERO_RANGE, (off_t)size - 20, 1 * MIB));
	REQUIRE_OK(close(fd));
	memset(model + size - 20, 0, 20);
	size = size - 20 + 1 * MIB;
	check_content("zeroed past the end", "zero", model, size);
	remount();
	check_content("zeroed, after a remount", "zero", model, size);
	free(model);
}

/* Largest size the file system takes (to within a factor 2, aligned to @unit). */
static off_t largest_size(int fd, off_t unit)
{
	off_t x = (INT64_MAX / unit) * unit;

	while (x >= unit && ftruncate(fd, x) && errno == EFBIG)
		x = (x / 2 / unit) * unit;
	return x;
}

/* COLLAPSE_RANGE and INSERT_RANGE: data, holes, errors, remount. */
static void test_shift(void)
{
	uint8_t *model;
	struct stat st;
	off_t u, big, len;
	size_t size;
	int fd, ret;

	fd = open("shift", O_CREAT | O_RDWR | O_EXCL, 0644);
	if (fd < 0)
		REQUIRE(false, "create shift: %s", check_errno_name(errno));
	if (fstat(fd, &st)) {
		close(fd);
		REQUIRE(false, "fstat: %s", check_errno_name(errno));
	}
	u = st.st_blksize; /* the unit of the alignment rules */
	REQUIRE(u >= 512 && (u & (u - 1)) == 0, "st_blksize %lld is not a power of two",
		(long long)u);
	size = (size_t)(8 * u + 100);
	model = xmalloc(16 * (size_t)u);
	fs_fill(model, size, 4, 0);
	memset(model + 5 * u, 0, (size_t)u); /* unit 5 stays a hole */
	if (fs_pwrite_all(fd, model, (size_t)(5 * u), 0) != 5 * u ||
	    fs_pwrite_all(fd, model + 6 * u, size - (size_t)(6 * u), 6 * u) !=
		    (ssize_t)(size - (size_t)(6 * u))) {
		close(fd);
		REQUIRE(false, "write: %s", check_errno_name(errno));
	}
	REQUIRE_OK(fsync(fd));
	REQUIRE_OK(close(fd));

	/* collapse units 2 and 3: the tail moves down two units */
	ret = shift("shift", FALLOC_FL_COLLAPSE_RANGE, 2 * u, 2 * u);
	REQUIRE(ret == 0, "collapse of [2u, 4u) (u = %lld): %s", (long long)u,
		check_errno_name(-ret));
	memmove(model + 2 * u, model + 4 * u, size - (size_t)(4 * u));
	size -= (size_t)(2 * u);
	check_content("collapsed", "shift", model, size);

	/* insert three units at unit 1: zeros appear, the tail moves up */
	ret = shift("shift", FALLOC_FL_INSERT_RANGE, u, 3 * u);
	REQUIRE(ret == 0, "insert of 3u at u: %s", check_errno_name(-ret));
	memmove(model + 4 * u, model + u, size - (size_t)u);
	memset(model + u, 0, (size_t)(3 * u));
	size += (size_t)(3 * u);
	check_content("inserted", "shift", model, size);
	/*
	 * The inserted range and the moved hole hold nothing: five units of
	 * data and the 100-byte tail, which takes one 4 KiB block on disk.
	 */
	check_alloc("inserted", "shift", -1, 5 * u + 4 * KIB);

	/* ext4's refusals, which change nothing */
	ret = shift("shift", FALLOC_FL_COLLAPSE_RANGE, u / 2, u);
	REQUIRE(ret == -EINVAL, "collapse at an unaligned offset: %s, expected EINVAL",
		check_errno_name(-ret));
	ret = shift("shift", FALLOC_FL_COLLAPSE_RANGE, u, u / 2);
	REQUIRE(ret == -EINVAL, "collapse of an unaligned length: %s, expected EINVAL",
		check_errno_name(-ret));
	ret = shift("shift", FALLOC_FL_COLLAPSE_RANGE, u, ((off_t)size / u) * u);
	REQUIRE(ret == -EINVAL, "collapse reaching the end: %s, expected EINVAL",
		check_errno_name(-ret));
	ret = shift("shift", FALLOC_FL_COLLAPSE_RANGE, 0, ((off_t)size / u + 1) * u);
	REQUIRE(ret == -EINVAL, "collapse past the end: %s, expected EINVAL",
		check_errno_name(-ret));
	ret = shift("shift", FALLOC_FL_INSERT_RANGE, ((off_t)size / u + 1) * u, u);
	REQUIRE(ret == -EINVAL, "insert past the end: %s, expected EINVAL", check_errno_name(-ret));
	ret = shift("shift", FALLOC_FL_INSERT_RANGE, u, u / 2);
	REQUIRE(ret == -EINVAL, "insert of an unaligned length: %s, expected EINVAL",
		check_errno_name(-ret));
	check_content("after refused shifts", "shift", model, size);

	/* insert at the end of an exactly aligned file: EINVAL, the end is not inside */
	REQUIRE_FD(fd, open("aligned", O_CREAT | O_RDWR | O_EXCL, 0644));
	REQUIRE(fs_pwrite_all(fd, model, (size_t)(2 * u), 0) == 2 * u, "write: %s",
		check_errno_name(errno));
	REQUIRE_OK(close(fd));
	ret = shift("aligned", FALLOC_FL_INSERT_RANGE, 2 * u, u);
	REQUIRE(ret == -EINVAL, "insert at the end: %s, expected EINVAL", check_errno_name(-ret));

	/* an insert that would pass the largest file size: EFBIG */
	REQUIRE_FD(fd, open("big", O_CREAT | O_RDWR | O_EXCL, 0644));
	big = largest_size(fd, u);
	REQUIRE_OK(close(fd));
	REQUIRE(big >= u, "no size of at least %lld bytes is accepted", (long long)u);
	/* the smallest aligned length that passes INT64_MAX, without overflowing */
	len = ((INT64_MAX - big) / u + 1) * u;
	ret = shift("big", FALLOC_FL_INSERT_RANGE, 0, len);
	REQUIRE(ret == -EFBIG, "insert of %lld bytes into a %lld-byte file: %s, expected EFBIG",
		(long long)len, (long long)big, check_errno_name(-ret));
	REQUIRE_OK(unlink("big"));

	remount();
	check_content("shifted, after a remount", "shift", model, size);
	free(model);
}

int main(int argc, char **argv)
{
	static const struct fs_test tests[] = {
		{"blocks", test_blocks},
		{"zero_range", test_zero_range},
		{"shift", test_shift},
		{NULL, NULL},
	};
	int ret;

	fs_setup(argc, argv, "sparse");
	ret = fs_run(tests);
	rfs_destroy(core);
	return ret;
}
