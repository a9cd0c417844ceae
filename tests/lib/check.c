/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

const char *check_test_name = "setup";

static unsigned failures;
/* Where a failed REQUIRE goes: the check_run_test() of this thread, in this process. */
static __thread jmp_buf *test_end;
static __thread pid_t test_end_pid;

__attribute__((format(printf, 4, 0))) static void
report(const char *file, int line, const char *expr, const char *fmt, va_list ap)
{
	flockfile(stderr);
	fprintf(stderr, "FAIL [%s] %s:%d: ", check_test_name, file, line);
	/* REQUIRE(false, ...) marks a failure found by other means: no condition to show */
	if (expr && strcmp(expr, "false") != 0 && strcmp(expr, "0") != 0)
		fprintf(stderr, "%s: ", expr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
	fflush(stderr);
	__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

void check_fail_at(const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(file, line, expr, fmt, ap);
	va_end(ap);
}

void check_end_test(void)
{
	/* A forked child of a test inherits test_end but must not run the parent's tests. */
	if (test_end && test_end_pid == getpid())
		longjmp(*test_end, 1);
	fflush(stdout);
	exit(CHECK_EXIT_FAIL);
}

void check_skip(const char *fmt, ...)
{
	va_list ap;

	fflush(stderr);
	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(CHECK_EXIT_SKIP);
}

void check_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "ERROR [%s]: ", check_test_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (the test itself could not check: no verdict on the system)\n");
	exit(CHECK_EXIT_ERROR);
}

unsigned check_failure_count(void)
{
	return __atomic_load_n(&failures, __ATOMIC_RELAXED);
}

int check_exit_status(void)
{
	return check_failure_count() ? CHECK_EXIT_FAIL : CHECK_EXIT_PASS;
}

bool check_run_test(const char *name, void (*fn)(void))
{
	jmp_buf here, *outer = test_end;
	pid_t outer_pid = test_end_pid;
	const char *outer_name = check_test_name;
	unsigned before = check_failure_count();

	check_test_name = name;
	if (setjmp(here) == 0) {
		test_end = &here;
		test_end_pid = getpid();
		fn();
	}
	test_end = outer;
	test_end_pid = outer_pid;
	check_test_name = outer_name;
	return check_failure_count() == before;
}

const char *check_errno_name(int err)
{
	static __thread char text[24];
	const char *name = err ? strerrorname_np(err) : "no error";

	if (name)
		return name;
	snprintf(text, sizeof(text), "errno %d", err);
	return text;
}

int check_tmp_template(char *out, size_t size, const char *name)
{
	const char *dir = getenv("TMPDIR");
	int len = snprintf(out, size, "%s/%s.XXXXXX", dir && *dir ? dir : "/tmp", name);

	return len < 0 || (size_t)len >= size ? -ENAMETOOLONG : 0;
}
