/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's one logging helper. Lines go to stderr with a syslog priority
 * prefix ("<3>") when stderr is the journal, so journald keeps the levels.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "daemon_i.h"

static enum daemon_log_level max_level = DLOG_INFO;
static int journal = -1; /* unknown until the first line */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warning", "info", "debug"};
static const int syslog_prio[] = {3, 4, 6, 7};

void daemon_log_set_level(enum daemon_log_level level)
{
	max_level = level;
}

int daemon_log_parse_level(const char *text, enum daemon_log_level *out)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};

	for (unsigned i = 0; i < 4; i++) {
		if (strcmp(text, names[i]) == 0) {
			*out = (enum daemon_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

__attribute__((format(printf, 2, 0))) static void vlog(enum daemon_log_level level, const char *fmt,
						       va_list ap)
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
		fprintf(stderr, "rdmafs-daemon: %s: %s\n", level_names[level], line);
	pthread_mutex_unlock(&log_lock);
}

void daemon_log(enum daemon_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

void daemon_vlog(enum daemon_log_level level, const char *fmt, va_list ap)
{
	vlog(level, fmt, ap);
}

static void xprt_log_cb_daemon(enum xprt_log_level level, const char *msg, void *arg)
{
	daemon_log((enum daemon_log_level)level, "xprt: %s", msg);
}

void daemon_log_hook_xprt(void)
{
	xprt_set_log(xprt_log_cb_daemon, NULL, (enum xprt_log_level)max_level);
}
