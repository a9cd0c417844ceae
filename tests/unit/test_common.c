// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * librdmafs_common's promises (rdmafs_common.h) other than placement, which
 * test_placement.c holds: layout limits, chunk counts, crc32c, the errno
 * mapping, log level names and the secret file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "rdmafs_common.h"

static void test_layout_check(void **state)
{
	(void)state;
	assert_int_equal(rdmafs_layout_check(RDMAFS_CHUNK_SIZE_MIN, 1, 1), 0);
	assert_int_equal(
		rdmafs_layout_check(RDMAFS_CHUNK_SIZE_MAX, RDMAFS_MAX_STRIPE, RDMAFS_MAX_STRIPE),
		0);
	assert_int_equal(rdmafs_layout_check(RDMAFS_CHUNK_SIZE_MIN - 1, 1, 1), -EPROTO);
	assert_int_equal(rdmafs_layout_check(RDMAFS_CHUNK_SIZE_MAX + 1ull, 1, 1), -EPROTO);
	assert_int_equal(rdmafs_layout_check(0, 1, 1), -EPROTO);
	assert_int_equal(rdmafs_layout_check(1u << 20, 0, 0), -EPROTO);
	assert_int_equal(
		rdmafs_layout_check(1u << 20, RDMAFS_MAX_STRIPE + 1, RDMAFS_MAX_STRIPE + 1),
		-EPROTO);
	assert_int_equal(rdmafs_layout_check(1u << 20, 3, 2), -EPROTO);
}

static void test_chunk_count(void **state)
{
	(void)state;
	assert_int_equal(rdmafs_chunk_count(0, 4096), 0);
	assert_int_equal(rdmafs_chunk_count(1, 4096), 1);
	assert_int_equal(rdmafs_chunk_count(4096, 4096), 1);
	assert_int_equal(rdmafs_chunk_count(4097, 4096), 2);
	assert_true(rdmafs_chunk_count(UINT64_MAX, 1u << 20) == (UINT64_MAX >> 20) + 1);
}

static void test_crc32c(void **state)
{
	static const char check[] = "123456789";
	uint8_t zeros[32] = {0};

	(void)state;
	/* the check value of CRC-32C (Castagnoli), and RFC 3720 B.4's 32 zero bytes */
	assert_int_equal(rdmafs_crc32c(check, 9), 0xe3069283u);
	assert_int_equal(rdmafs_crc32c(zeros, sizeof(zeros)), 0x8a9136aau);
	assert_int_equal(rdmafs_crc32c(check, 0), 0);
	/* extending a CRC is the CRC of the concatenation */
	for (size_t cut = 0; cut <= 9; cut++)
		assert_int_equal(
			rdmafs_crc32c_extend(rdmafs_crc32c(check, cut), check + cut, 9 - cut),
			0xe3069283u);
}

static void test_status(void **state)
{
	(void)state;
	assert_int_equal(rdmafs_status_from_peer(0), 0);
	assert_int_equal(rdmafs_status_from_peer(-ENOENT), -ENOENT);
	assert_int_equal(rdmafs_status_from_peer(-4095), -4095);
	assert_int_equal(rdmafs_status_from_peer(-4096), -EPROTO);
	assert_int_equal(rdmafs_status_from_peer(1), -EPROTO);
	assert_int_equal(rdmafs_status_from_peer(INT_MIN), -EPROTO);
	assert_int_equal(rdmafs_status_from_peer(INT_MAX), -EPROTO);

	assert_int_equal(rdmafs_status_for_caller(-ECONNRESET), -EIO);
	assert_int_equal(rdmafs_status_for_caller(-ENOTCONN), -EIO);
	assert_int_equal(rdmafs_status_for_caller(-EPIPE), -EIO);
	assert_int_equal(rdmafs_status_for_caller(-ETIMEDOUT), -ETIMEDOUT);
	assert_int_equal(rdmafs_status_for_caller(-ENOENT), -ENOENT);
	assert_int_equal(rdmafs_status_for_caller(0), 0);
}

static void test_log_level(void **state)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};
	enum rdmafs_log_level level = RDMAFS_LOG_INFO;

	(void)state;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(rdmafs_log_parse_level(names[i], &level), 0);
		assert_int_equal(level, i);
	}
	assert_int_equal(rdmafs_log_parse_level("error", &level), -EINVAL);
	assert_int_equal(rdmafs_log_parse_level("", &level), -EINVAL);
	assert_int_equal(level, RDMAFS_LOG_DEBUG);
}

/* Writes @len bytes of @data to a new temporary file; its path goes to @path. */
static void write_file(char *path, size_t size, const void *data, size_t len)
{
	int fd;

	snprintf(path, size, "%s/rdmafs-test-secret.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void expect_secret(const void *data, size_t len, int want, const char *want_secret)
{
	char path[PATH_MAX];
	uint8_t *secret = NULL;
	size_t secret_len = 0;

	write_file(path, sizeof(path), data, len);
	assert_int_equal(rdmafs_read_secret(path, &secret, &secret_len), want);
	if (want == 0) {
		assert_int_equal(secret_len, strlen(want_secret));
		assert_memory_equal(secret, want_secret, secret_len);
	}
	free(secret);
	unlink(path);
}

static void test_secret(void **state)
{
	char *big = malloc(RDMAFS_SECRET_MAX + 2);
	uint8_t *secret;
	size_t len;

	(void)state;
	assert_non_null(big);
	expect_secret("abc\n", 4, 0, "abc");
	expect_secret("abc\r\n\n", 6, 0, "abc");
	expect_secret("a b\nc", 5, 0, "a b\nc");
	expect_secret("\n\n", 2, -EINVAL, NULL);
	expect_secret("", 0, -EINVAL, NULL);
	memset(big, 'k', RDMAFS_SECRET_MAX + 1);
	big[RDMAFS_SECRET_MAX] = '\0';
	expect_secret(big, RDMAFS_SECRET_MAX, 0, big);
	big[RDMAFS_SECRET_MAX] = 'k';
	expect_secret(big, RDMAFS_SECRET_MAX + 1, -EINVAL, NULL);
	free(big);
	assert_int_equal(rdmafs_read_secret("/nonexistent/rdmafs/secret", &secret, &len), -ENOENT);
}

/* A secret file its group or others may use is refused, as ssh refuses such a key. */
static void test_secret_mode(void **state)
{
	static const struct {
		mode_t mode;
		int want;
	} cases[] = {
		{0600, 0},	{0400, 0},	{0700, 0},	{0644, -EPERM}, {0640, -EPERM},
		{0604, -EPERM}, {0620, -EPERM}, {0602, -EPERM}, {0601, -EPERM}, {0610, -EPERM},
	};
	char path[PATH_MAX], why[1024], want[PATH_MAX * 2 + 100];
	uint8_t *secret;
	size_t len;

	(void)state;
	write_file(path, sizeof(path), "abc\n", 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		secret = NULL;
		assert_int_equal(chmod(path, cases[i].mode), 0);
		assert_int_equal(rdmafs_read_secret(path, &secret, &len), cases[i].want);
		if (cases[i].want == 0)
			assert_memory_equal(secret, "abc", 3);
		else
			assert_null(secret);
		free(secret);
	}
	assert_int_equal(chmod(path, 0644), 0);
	snprintf(want, sizeof(want),
		 "secret file %s is accessible by others (mode 0644): chmod 600 %s", path, path);
	assert_string_equal(rdmafs_secret_strerror(path, -EPERM, why, sizeof(why)), want);
	assert_int_equal(chmod(path, 0640), 0);
	snprintf(want, sizeof(want),
		 "secret file %s is accessible by its group (mode 0640): chmod 600 %s", path, path);
	assert_string_equal(rdmafs_secret_strerror(path, -EPERM, why, sizeof(why)), want);
	snprintf(want, sizeof(want), "the secret file %s must hold 1 to %d bytes", path,
		 RDMAFS_SECRET_MAX);
	assert_string_equal(rdmafs_secret_strerror(path, -EINVAL, why, sizeof(why)), want);
	unlink(path);
	assert_string_equal(
		rdmafs_secret_strerror("/nonexistent/s", -ENOENT, why, sizeof(why)),
		"cannot read the secret file /nonexistent/s: No such file or directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_check), cmocka_unit_test(test_chunk_count),
		cmocka_unit_test(test_crc32c),	     cmocka_unit_test(test_status),
		cmocka_unit_test(test_log_level),    cmocka_unit_test(test_secret),
		cmocka_unit_test(test_secret_mode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
