/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers for the fs suite's check programs. Each program takes a DIRECTORY
 * (the rdmafs mount, or any local directory to validate the checks
 * themselves), works in a fresh subdirectory of it and exits 0 (pass),
 * 1 (fail), 77 (skip, reason printed) or 99 (the check could not run).
 *
 * Verdicts come from tests/lib/check.h: CHECK records a failure and goes
 * on, REQUIRE records it and ends the test function; fs_run() then goes on
 * with the next test and the program exits 1 at the end. The REQUIRE_*
 * forms below are REQUIREs for system calls that print the operation, the
 * expected and the actual result (errno by name).
 */
#ifndef RDMAFS_TEST_FS_FSCHECK_H
#define RDMAFS_TEST_FS_FSCHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "check.h"

/* @call (a syscall returning -1 + errno on error) must succeed. */
#define REQUIRE_OK(call)                                                          \
	do {                                                                      \
		errno = 0;                                                        \
		if ((long)(call) == -1) {                                         \
			int err_ = errno;                                         \
			check_fail_at(__FILE__, __LINE__, NULL,                   \
				      "%s: expected success, got %s (%s)", #call, \
				      check_errno_name(err_), strerror(err_));    \
			check_end_test();                                         \
		}                                                                 \
	} while (0)

/* @call must fail with errno @err. */
#define REQUIRE_ERR(call, err)                                                               \
	do {                                                                                 \
		errno = 0;                                                                   \
		long ret_ = (long)(call);                                                    \
		int err_ = errno;                                                            \
		if (ret_ != -1 || err_ != (err)) {                                           \
			if (ret_ != -1)                                                      \
				check_fail_at(__FILE__, __LINE__, NULL,                      \
					      "%s: expected %s, got success (%ld)", #call,   \
					      check_errno_name(err), ret_);                  \
			else                                                                 \
				check_fail_at(__FILE__, __LINE__, NULL,                      \
					      "%s: expected %s, got %s (%s)", #call,         \
					      check_errno_name(err), check_errno_name(err_), \
					      strerror(err_));                               \
			check_end_test();                                                    \
		}                                                                            \
	} while (0)

/* Like REQUIRE_OK, for calls returning an fd or a count: stores it in @var. */
#define REQUIRE_FD(var, call)                                                     \
	do {                                                                      \
		errno = 0;                                                        \
		(var) = (call);                                                   \
		if ((long)(var) == -1) {                                          \
			int err_ = errno;                                         \
			check_fail_at(__FILE__, __LINE__, NULL,                   \
				      "%s: expected success, got %s (%s)", #call, \
				      check_errno_name(err_), strerror(err_));    \
			check_end_test();                                         \
		}                                                                 \
	} while (0)

struct fs_test {
	const char *name;
	void (*run)(void);
};

/*
 * Parses "PROG DIR", creates DIR/@prefix.XXXXXX and chdir()s into it (every
 * test then uses relative paths). Exits 1 when DIR is unusable.
 */
const char *fs_setup(int argc, char **argv, const char *prefix);
/* Runs @tests (NULL-terminated by name) with check_run_test(), each in a
 * directory of its own, prints a summary, removes the work directory on
 * success (kept on failure, or with RDMAFS_TEST_KEEP). Returns the exit code. */
int fs_run(const struct fs_test *tests);
/* Removes @path recursively; returns 0 or -errno. */
int fs_remove_tree(const char *path);

/* Deterministic data: byte @pos of stream @seed. */
uint8_t fs_stream_byte(uint64_t seed, uint64_t pos);
void fs_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t pos);
uint64_t fs_rand(uint64_t *state);

/* Full-length pread/pwrite that loop over short counts; return the count
 * done or -1 (errno set). */
ssize_t fs_pread_all(int fd, void *buf, size_t len, off_t off);
ssize_t fs_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* Writes @len bytes of stream @seed at @off to a new file @path (fsync'ed). */
int fs_write_file(const char *path, size_t len, uint64_t seed);
/* Returns the first offset in [0,len) where @a and @b differ, or -1. */
long fs_first_diff(const uint8_t *a, const uint8_t *b, size_t len);

#endif
