/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fscheck.h"

static char work_dir[4096];

const char *fs_setup(int argc, char **argv, const char *prefix)
{
	struct stat st;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIRECTORY [...]\n", argv[0]);
		exit(1);
	}
	if (stat(argv[1], &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: %s is not a directory\n", argv[0], argv[1]);
		exit(1);
	}
	snprintf(work_dir, sizeof(work_dir), "%s/%s.XXXXXX", argv[1], prefix);
	if (!mkdtemp(work_dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", work_dir, strerror(errno));
		exit(1);
	}
	/* Readable by the non-root users of permissions.c. */
	if (chmod(work_dir, 0755) || chdir(work_dir)) {
		fprintf(stderr, "chmod/chdir %s: %s\n", work_dir, strerror(errno));
		exit(1);
	}
	umask(022);
	printf("working in %s\n", work_dir);
	return work_dir;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	/* A test may leave a directory without write or search permission. */
	if (flag == FTW_DP || flag == FTW_D)
		chmod(path, 0700);
	return remove(path) ? -errno : 0;
}

int fs_remove_tree(const char *path)
{
	return nftw(path, remove_entry, 32, FTW_DEPTH | FTW_PHYS);
}

int fs_run(const struct fs_test *tests)
{
	unsigned failed_tests = 0, count = 0;

	for (const struct fs_test *t = tests; t->name; t++) {
		bool passed;

		check_test_name = t->name;
		count++;
		if (mkdir(t->name, 0755) || chdir(t->name)) {
			check_fail_at(__FILE__, __LINE__, NULL, "mkdir/chdir %s: %s", t->name,
				      check_errno_name(errno));
			failed_tests++;
			continue;
		}
		passed = check_run_test(t->name, t->run);
		if (chdir(work_dir))
			check_error("chdir %s: %s", work_dir, strerror(errno));
		if (!passed)
			failed_tests++;
		printf("%s %s\n", passed ? "ok  " : "FAIL", t->name);
		fflush(stdout);
	}
	if (chdir("/"))
		return 1;
	if (failed_tests) {
		printf("%u of %u tests failed; work directory kept: %s\n", failed_tests, count,
		       work_dir);
		return 1;
	}
	if (!getenv("RDMAFS_TEST_KEEP")) {
		int ret = fs_remove_tree(work_dir);

		if (ret) {
			fprintf(stderr, "FAIL: removing %s: %s\n", work_dir,
				check_errno_name(-ret));
			return 1;
		}
	}
	printf("all %u tests passed\n", count);
	return 0;
}

uint64_t fs_rand(uint64_t *s)
{
	/* splitmix64: any seed (0 included) gives a good stream */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint8_t fs_stream_byte(uint64_t seed, uint64_t pos)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (pos * 0xbf58476d1ce4e5b9ull);

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return (uint8_t)x;
}

void fs_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t pos)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = fs_stream_byte(seed, pos + i);
}

ssize_t fs_pread_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t fs_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO; /* a zero-length write of a non-empty buffer */
			return -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int fs_write_file(const char *path, size_t len, uint64_t seed)
{
	uint8_t *buf = malloc(len ? len : 1);
	int fd, ret = -1;

	if (!buf)
		return -1;
	fs_fill(buf, len, seed, 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (fs_pwrite_all(fd, buf, len, 0) == (ssize_t)len && fsync(fd) == 0)
			ret = 0;
		if (close(fd))
			ret = -1;
	}
	free(buf);
	return ret;
}

long fs_first_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
	if (memcmp(a, b, len) == 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}
