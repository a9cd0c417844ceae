// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The one logging helper of every rdmafs program. Lines go to stderr with a
 * syslog priority prefix ("<3>") when stderr is the journal, so journald
 * keeps the levels; otherwise as "PROGRAM: LEVEL: text".
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs_common.h"

static const char *program = "rdmafs";
static enum rdmafs_log_level max_level = RDMAFS_LOG_INFO;
static int journal = -1; /* unknown until the first line */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warning", "info", "debug"};
static const int syslog_prio[] = {3, 4, 6, 7};

void rdmafs_log_init(const char *name, enum rdmafs_log_level level)
{
	program = name;
	max_level = level;
}

void rdmafs_log_set_level(enum rdmafs_log_level level)
{
	max_level = level;
}

int rdmafs_log_parse_level(const char *text, enum rdmafs_log_level *out)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};

	for (unsigned i = 0; i < 4; i++) {
		if (strcmp(text, names[i]) == 0) {
			*out = (enum rdmafs_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void rdmafs_vlog(enum rdmafs_log_level level, const char *fmt, va_list ap)
{
	char line[1024];

	if (level > max_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	pthread_mutex_lock(&log_lock);
	if (journal < 0)
		journal = getenv("JOURNAL_STREAM") != NULL;
	if (journal)
		fprintf(stderr, "<%d>%s\n", syslog_prio[level], line);
	else
		fprintf(stderr, "%s: %s: %s\n", program, level_names[level], line);
	pthread_mutex_unlock(&log_lock);
}

void rdmafs_log(enum rdmafs_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rdmafs_vlog(level, fmt, ap);
	va_end(ap);
}

static void log_from_xprt(enum xprt_log_level level, const char *msg, void *arg)
{
	(void)arg;
	rdmafs_log((enum rdmafs_log_level)level, "xprt: %s", msg);
}

void rdmafs_log_hook_xprt(void)
{
	xprt_set_log(log_from_xprt, NULL, (enum xprt_log_level)max_level);
}
