// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * librdmafs_common's promises (rdmafs_common.h) other than placement, which
 * test_placement.c holds: layout limits, chunk counts, crc32c, the errno
 * mapping, log level names and lines (stderr, journald, a file) and the secret
 * file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
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
#include "check.h"

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

/* Big-endian numbers: the bytes as written, back whole, and byte order is number order. */
static void test_be64(void **state)
{
	static const uint64_t ordered[] = {0, 1, 255, 256, 0x0102030405060708ull, UINT64_MAX};
	uint8_t a[8], b[8];

	(void)state;
	rdmafs_be64_put(a, 0x0102030405060708ull);
	assert_memory_equal(a, ((uint8_t[]){1, 2, 3, 4, 5, 6, 7, 8}), 8);
	for (size_t i = 0; i < sizeof(ordered) / sizeof(ordered[0]); i++) {
		rdmafs_be64_put(a, ordered[i]);
		assert_true(rdmafs_be64_get(a) == ordered[i]);
		if (i) {
			rdmafs_be64_put(b, ordered[i - 1]);
			assert_true(memcmp(b, a, 8) < 0);
		}
	}
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
	assert_int_equal(rdmafs_status_for_caller(-EHOSTUNREACH), -EIO);
	assert_int_equal(rdmafs_status_for_caller(-ETIMEDOUT), -ETIMEDOUT);
	assert_int_equal(rdmafs_status_for_caller(-ENOENT), -ENOENT);
	assert_int_equal(rdmafs_status_for_caller(0), 0);
}

static void test_log_level(void **state)
{
	static const struct {
		const char *text;
		enum rdmafs_log_level level;
	} names[] = {
		{"error", RDMAFS_LOG_ERR}, {"err", RDMAFS_LOG_ERR},   {"warning", RDMAFS_LOG_WARN},
		{"warn", RDMAFS_LOG_WARN}, {"info", RDMAFS_LOG_INFO}, {"debug", RDMAFS_LOG_DEBUG},
	};
	enum rdmafs_log_level level = RDMAFS_LOG_INFO;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(rdmafs_log_parse_level(names[i].text, &level), 0);
		assert_int_equal(level, names[i].level);
	}
	assert_int_equal(rdmafs_log_parse_level("fatal", &level), -EINVAL);
	assert_int_equal(rdmafs_log_parse_level("", &level), -EINVAL);
	assert_int_equal(rdmafs_log_parse_level("Debug", &level), -EINVAL);
	assert_int_equal(level, RDMAFS_LOG_DEBUG);
	assert_string_equal(rdmafs_log_level_name(RDMAFS_LOG_ERR), "error");
	assert_string_equal(rdmafs_log_level_name(RDMAFS_LOG_WARN), "warning");
	assert_string_equal(rdmafs_log_level_name(RDMAFS_LOG_INFO), "info");
	assert_string_equal(rdmafs_log_level_name(RDMAFS_LOG_DEBUG), "debug");
}

/* ---- log lines: stderr is swapped for a file while a test logs ---- */

static char log_path[PATH_MAX];
static int saved_stderr = -1;

/* Points fd 2 at a fresh, empty log_path. */
static void capture_start(void)
{
	int fd;

	assert_int_equal(check_tmp_template(log_path, sizeof(log_path), "rdmafs-test-log"), 0);
	fd = mkstemp(log_path);
	assert_true(fd >= 0);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	assert_true(saved_stderr >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
}

/* Gives fd 2 back (so cmocka's messages are seen) and reads what was logged. */
static void capture_end(char *out, size_t size)
{
	ssize_t len;
	int fd;

	assert_int_equal(dup2(saved_stderr, STDERR_FILENO), STDERR_FILENO);
	close(saved_stderr);
	saved_stderr = -1;
	fd = open(log_path, O_RDONLY);
	assert_true(fd >= 0);
	len = read(fd, out, size - 1);
	assert_true(len >= 0);
	out[len] = '\0';
	close(fd);
	unlink(log_path);
}

/* JOURNAL_STREAM naming the file fd 2 is now, plus @ino_delta on the inode. */
static void set_journal_stream(int ino_delta)
{
	struct stat st;
	char value[64];

	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(value, sizeof(value), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + (unsigned long long)ino_delta);
	assert_int_equal(setenv("JOURNAL_STREAM", value, 1), 0);
}

/* Every line of @text matches @pattern (POSIX extended); returns the line count. */
static int lines_match(const char *text, const char *pattern)
{
	regex_t re;
	char line[2048];
	int count = 0;

	assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t len;

		assert_non_null(nl); /* every line ends in a newline */
		len = (size_t)(nl - text);
		assert_true(len < sizeof(line));
		memcpy(line, text, len);
		line[len] = '\0';
		if (regexec(&re, line, 0, NULL, 0) != 0)
			fail_msg("log line \"%s\" does not match %s", line, pattern);
		count++;
		text = nl + 1;
	}
	regfree(&re);
	return count;
}

#define TIMESTAMP_RE \
	"^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}[+-][0-9]{4} "

static void log_every_level(void)
{
	rdmafs_log(RDMAFS_LOG_ERR, "one %d", 1);
	rdmafs_log(RDMAFS_LOG_WARN, "two %s", "2");
	rdmafs_log(RDMAFS_LOG_INFO, "three");
	rdmafs_log(RDMAFS_LOG_DEBUG, "four");
}

static void test_log_terminal(void **state)
{
	char got[8192], pattern[256];

	(void)state;
	unsetenv("JOURNAL_STREAM");
	capture_start();
	rdmafs_log_init("test-log", RDMAFS_LOG_INFO);
	log_every_level();
	capture_end(got, sizeof(got));
	snprintf(pattern, sizeof(pattern),
		 TIMESTAMP_RE "test-log\\[%ld\\]: (error: one 1|warning: two 2|info: three)$",
		 (long)getpid());
	assert_int_equal(lines_match(got, pattern), 3); /* debug is above INFO */
	assert_non_null(strstr(got, ": error: one 1\n"));
	assert_non_null(strstr(got, ": warning: two 2\n"));
	assert_non_null(strstr(got, ": info: three\n"));

	capture_start();
	rdmafs_log_set_level(RDMAFS_LOG_DEBUG);
	log_every_level();
	capture_end(got, sizeof(got));
	assert_int_equal(lines_match(got, TIMESTAMP_RE "test-log\\[[0-9]+\\]: [a-z]+: "), 4);
	assert_non_null(strstr(got, ": debug: four\n"));

	capture_start();
	rdmafs_log_set_level(RDMAFS_LOG_ERR);
	log_every_level();
	capture_end(got, sizeof(got));
	assert_int_equal(lines_match(got, ": error: one 1$"), 1);
}

static void test_log_journal(void **state)
{
	static const char *const bad[] = {"", "12", "12:", ":12", "1:2:3", "x:y", "1:2x"};
	char got[8192];

	(void)state;
	/* stderr is the stream journald gave us: priority prefixes, nothing else */
	capture_start();
	set_journal_stream(0);
	rdmafs_log_init("test-log", RDMAFS_LOG_DEBUG);
	log_every_level();
	capture_end(got, sizeof(got));
	assert_string_equal(got, "<3>one 1\n<4>two 2\n<6>three\n<7>four\n");

	/* an inherited JOURNAL_STREAM of another file: stderr was redirected */
	capture_start();
	set_journal_stream(1);
	rdmafs_log_init("test-log", RDMAFS_LOG_DEBUG);
	log_every_level();
	capture_end(got, sizeof(got));
	assert_int_equal(lines_match(got, TIMESTAMP_RE "test-log\\[[0-9]+\\]: [a-z]+: "), 4);

	/* nonsense in it is no journal either */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		capture_start();
		assert_int_equal(setenv("JOURNAL_STREAM", bad[i], 1), 0);
		rdmafs_log_init("test-log", RDMAFS_LOG_INFO);
		rdmafs_log(RDMAFS_LOG_WARN, "bad %zu", i);
		capture_end(got, sizeof(got));
		assert_int_equal(lines_match(got, TIMESTAMP_RE "test-log\\[[0-9]+\\]: warning: "
							       "bad [0-9]+$"),
				 1);
	}
	unsetenv("JOURNAL_STREAM");
}

static void test_log_long_line(void **state)
{
	char got[8192], *text = malloc(5000);

	(void)state;
	assert_non_null(text);
	memset(text, 'x', 4999);
	text[4999] = '\0';
	capture_start();
	rdmafs_log_init("test-log", RDMAFS_LOG_INFO);
	rdmafs_log(RDMAFS_LOG_INFO, "%s", text);
	rdmafs_log(RDMAFS_LOG_INFO, "after");
	capture_end(got, sizeof(got));
	free(text);
	/* cut, but whole lines: the next one starts on a line of its own */
	assert_int_equal(lines_match(got, TIMESTAMP_RE "test-log\\[[0-9]+\\]: info: (x+|after)$"),
			 2);
	assert_true(strlen(got) < 2600);
}

/* Last: the target stays the file for the rest of the process. */
static void test_log_file(void **state)
{
	char path[PATH_MAX], got[8192];
	ssize_t len;
	int fd;

	(void)state;
	unsetenv("JOURNAL_STREAM");
	assert_int_equal(check_tmp_template(path, sizeof(path), "rdmafs-test-logfile"), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "kept\n", 5), 5);
	close(fd);
	assert_int_equal(rdmafs_log_to_file("/nonexistent/rdmafs/log"), -ENOENT);
	rdmafs_log_init("test-log", RDMAFS_LOG_INFO);
	assert_int_equal(rdmafs_log_to_file(path), 0);
	rdmafs_log(RDMAFS_LOG_WARN, "to the file");
	rdmafs_log(RDMAFS_LOG_DEBUG, "not written");
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	len = read(fd, got, sizeof(got) - 1);
	assert_true(len > 5);
	got[len] = '\0';
	close(fd);
	unlink(path);
	/* appended, with the time and the level */
	assert_memory_equal(got, "kept\n", 5);
	assert_int_equal(lines_match(got + 5, TIMESTAMP_RE "test-log\\[[0-9]+\\]: warning: to the "
							   "file$"),
			 1);
}

/* Writes @len bytes of @data to a new temporary file; its path goes to @path. */
static void write_file(char *path, size_t size, const void *data, size_t len)
{
	int fd;

	assert_int_equal(check_tmp_template(path, size, "rdmafs-test-secret"), 0);
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

/* tests/lib/check.h's check_tmp_template(), which the unit tests' scratch files use. */
static void test_tmp_template(void **state)
{
	const char *saved = getenv("TMPDIR");
	char *keep = saved ? strdup(saved) : NULL;
	char out[32];

	(void)state;
	setenv("TMPDIR", "/var/x", 1);
	assert_int_equal(check_tmp_template(out, sizeof(out), "name"), 0);
	assert_string_equal(out, "/var/x/name.XXXXXX");
	setenv("TMPDIR", "", 1); /* empty: as unset */
	assert_int_equal(check_tmp_template(out, sizeof(out), "name"), 0);
	assert_string_equal(out, "/tmp/name.XXXXXX");
	unsetenv("TMPDIR");
	assert_int_equal(check_tmp_template(out, sizeof(out), "name"), 0);
	assert_string_equal(out, "/tmp/name.XXXXXX");
	/* "/tmp/" + 19 + ".XXXXXX" is 31 bytes and its NUL: just fits; one more does not */
	assert_int_equal(check_tmp_template(out, sizeof(out), "nnnnnnnnnnnnnnnnnnn"), 0);
	assert_int_equal(strlen(out), 31);
	assert_int_equal(check_tmp_template(out, sizeof(out), "nnnnnnnnnnnnnnnnnnnn"),
			 -ENAMETOOLONG);
	if (keep)
		setenv("TMPDIR", keep, 1);
	free(keep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_check),  cmocka_unit_test(test_chunk_count),
		cmocka_unit_test(test_be64),	      cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_status),	      cmocka_unit_test(test_log_level),
		cmocka_unit_test(test_secret),	      cmocka_unit_test(test_secret_mode),
		cmocka_unit_test(test_log_terminal),  cmocka_unit_test(test_log_journal),
		cmocka_unit_test(test_log_long_line), cmocka_unit_test(test_log_file),
		cmocka_unit_test(test_tmp_template),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
