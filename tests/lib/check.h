/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Verdicts for the C test programs: one idiom for every suite (the shell
 * tests have tests/lib/check.sh, the cmocka unit tests cmocka's assert_*).
 *
 * A test program exits
 *   0   pass
 *   1   FAIL: the system under test did something wrong
 *   77  SKIP: the test cannot run here; check_skip() prints the reason
 *   99  ERROR: the test itself could not check (no memory, its own scratch
 *       file unreadable); check_error() says so: no verdict either way
 *
 * CHECK(cond, fmt, ...)    When @cond is false: prints "FAIL [test] FILE:LINE:
 *                          cond: message" (the message says what was seen and
 *                          what was expected), marks the test failed, and goes
 *                          on. It is an expression, false when the check
 *                          failed, so a helper can leave on its own:
 *                          `if (!CHECK(fd >= 0, ...)) return;`. The message's
 *                          arguments are evaluated only on failure.
 * REQUIRE(cond, fmt, ...)  The same, then ends the test, for checks the rest
 *                          depends on: check_run_test() goes on with its next
 *                          test when it runs this one on this thread (as
 *                          cmocka's assert_* do); anywhere else the program
 *                          exits 1 and its atexit() handlers clean up.
 *
 * A program that ran all its checks returns check_exit_status(): 1 if any
 * failed, else 0. One that cannot check ends with check_skip() or
 * check_error(), never with a pass.
 */
#ifndef RDMAFS_TEST_CHECK_H
#define RDMAFS_TEST_CHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define CHECK_EXIT_PASS	 0
#define CHECK_EXIT_FAIL	 1
#define CHECK_EXIT_SKIP	 77
#define CHECK_EXIT_ERROR 99

#define CHECK(cond, ...) CHECK_AS_(cond, #cond, __VA_ARGS__)

#define REQUIRE(cond, ...)                                \
	do {                                              \
		if (!CHECK_AS_(cond, #cond, __VA_ARGS__)) \
			check_end_test();                 \
	} while (0)

/* Both, showing @text for the condition; the message's arguments are evaluated only on failure. */
#define CHECK_AS_(cond, text, ...)                                            \
	({                                                                    \
		bool check_ok_ = (cond);                                      \
		if (!check_ok_)                                               \
			check_fail_at(__FILE__, __LINE__, text, __VA_ARGS__); \
		check_ok_;                                                    \
	})

/* The name in "FAIL [name]" lines: the running test's, or the program's phase. */
extern const char *check_test_name;

/*
 * Reports and counts a failure at @file:@line: the condition @expr that
 * did not hold (NULL for none) and the message. Thread-safe.
 */
void check_fail_at(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Ends the current test (see REQUIRE). */
void check_end_test(void) __attribute__((noreturn));
/* Prints "SKIP: reason" and exits 77. */
void check_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Prints "ERROR: reason (...)" and exits 99: the test could not do its job. */
void check_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Failures counted so far, in every thread. */
unsigned check_failure_count(void);
/* CHECK_EXIT_FAIL if any check failed so far, else CHECK_EXIT_PASS. */
int check_exit_status(void);

/*
 * Runs @fn as the test @name: a REQUIRE that fails in it, on this thread and
 * in this process, returns here. Returns true if no check failed in it.
 */
bool check_run_test(const char *name, void (*fn)(void));

/* The errno's name ("ENOENT"), or "errno N" if it has none. */
const char *check_errno_name(int err);

/*
 * Writes into @out (@size bytes) the template of a scratch file or directory
 * of the test, for mkstemp() or mkdtemp(): "DIR/@name.XXXXXX", DIR being
 * TMPDIR when set and not empty, else /tmp. Returns 0, or -ENAMETOOLONG
 * when it does not fit (a TMPDIR too long for the room): then @out is no
 * template and must not be used.
 */
int check_tmp_template(char *out, size_t size, const char *name);

#endif
