// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The one logging helper of every rdmafs program. Lines go to one place:
 *
 *  - stderr, the default. When stderr is the journal (systemd sets
 *    JOURNAL_STREAM to the device and inode of the stream it gave us, see
 *    systemd.exec(5)), a line is "<N>text" with the sd-daemon(3) priority
 *    prefix, so journald keeps the level and adds time, name and pid itself.
 *    Anywhere else (a terminal, a file of a test harness, a child whose
 *    stderr was redirected but which inherited JOURNAL_STREAM) a line says
 *    when, who and how bad: "2026-11-23T17:40:01.123+0000 PROGRAM[PID]:
 *    LEVEL: text".
 *  - a file (rdmafs_log_to_file), appended to, lines as on a terminal;
 *  - syslog (rdmafs_log_to_syslog), for a program that went to the
 *    background; journald takes syslog over on systemd hosts.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "xprt.h"
#include "rdmafs_common.h"

/* Longest line written, prefixes included; longer messages are cut. */
#define LINE_MAX_BYTES 1200

enum log_target {
	TARGET_STDERR,
	TARGET_FILE,
	TARGET_SYSLOG,
};

static const char *program = "rdmafs";
static enum rdmafs_log_level max_level = RDMAFS_LOG_INFO;
static enum log_target target = TARGET_STDERR;
static int journal = -1; /* stderr is the journal: unknown until init or the first line */
static int file_fd = -1;
static bool xprt_hooked;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warning", "info", "debug"};
static const int syslog_prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

/* Whether JOURNAL_STREAM ("DEV:INODE") names the file that fd 2 is. */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char *end;

	if (!env || !*env)
		return false;
	errno = 0;
	dev = strtoull(env, &end, 10);
	if (errno || end == env || *end != ':')
		return false;
	env = end + 1;
	ino = strtoull(env, &end, 10);
	if (errno || end == env || *end)
		return false;
	if (fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void rdmafs_log_init(const char *name, enum rdmafs_log_level level)
{
	pthread_mutex_lock(&log_lock);
	program = name;
	max_level = level;
	journal = stderr_is_journal();
	pthread_mutex_unlock(&log_lock);
}

void rdmafs_log_set_level(enum rdmafs_log_level level)
{
	max_level = level;
	if (xprt_hooked)
		rdmafs_log_hook_xprt();
}

int rdmafs_log_parse_level(const char *text, enum rdmafs_log_level *out)
{
	/* the names the lines carry, and the short ones of older configs */
	static const struct {
		const char *name;
		enum rdmafs_log_level level;
	} names[] = {
		{"error", RDMAFS_LOG_ERR}, {"err", RDMAFS_LOG_ERR},   {"warning", RDMAFS_LOG_WARN},
		{"warn", RDMAFS_LOG_WARN}, {"info", RDMAFS_LOG_INFO}, {"debug", RDMAFS_LOG_DEBUG},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(text, names[i].name) == 0) {
			*out = names[i].level;
			return 0;
		}
	}
	return -EINVAL;
}

const char *rdmafs_log_level_name(enum rdmafs_log_level level)
{
	return (unsigned)level <= RDMAFS_LOG_DEBUG ? level_names[level] : "unknown";
}

int rdmafs_log_to_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	int old;

	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&log_lock);
	old = target == TARGET_FILE ? file_fd : -1;
	file_fd = fd;
	target = TARGET_FILE;
	pthread_mutex_unlock(&log_lock);
	if (old >= 0)
		close(old);
	return 0;
}

void rdmafs_log_to_syslog(void)
{
	int old;

	pthread_mutex_lock(&log_lock);
	openlog(program, LOG_PID, LOG_DAEMON);
	old = target == TARGET_FILE ? file_fd : -1;
	file_fd = -1;
	target = TARGET_SYSLOG;
	pthread_mutex_unlock(&log_lock);
	if (old >= 0)
		close(old);
}

/*
 * "2026-11-23T17:40:01.123+0000 PROGRAM[PID]: LEVEL: " into @out; returns
 * its length.
 */
static size_t format_prefix(char *out, size_t size, enum rdmafs_log_level level)
{
	struct timespec now;
	struct tm tm;
	size_t n;
	int k;

	clock_gettime(CLOCK_REALTIME, &now);
	localtime_r(&now.tv_sec, &tm);
	n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
	k = snprintf(out + n, size - n, ".%03ld", now.tv_nsec / 1000000L);
	n += k > 0 ? (size_t)k : 0;
	n += strftime(out + n, size - n, "%z", &tm);
	k = snprintf(out + n, size - n, " %s[%ld]: %s: ", program, (long)getpid(),
		     level_names[level]);
	n += k > 0 ? (size_t)k : 0;
	return n < size ? n : size - 1;
}

/* Writes all of @buf to @fd; a log line has nowhere to report its own failure. */
static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		len -= (size_t)w;
	}
}

void rdmafs_vlog(enum rdmafs_log_level level, const char *fmt, va_list ap)
{
	char line[LINE_MAX_BYTES];
	size_t n = 0, room;
	int k;

	if (level > max_level || (unsigned)level > RDMAFS_LOG_DEBUG)
		return;
	pthread_mutex_lock(&log_lock);
	if (target == TARGET_SYSLOG) {
		vsnprintf(line, sizeof(line), fmt, ap);
		syslog(syslog_prio[level], "%s", line);
		goto out_unlock;
	}
	if (journal < 0)
		journal = stderr_is_journal();
	if (target == TARGET_STDERR && journal)
		n = (size_t)snprintf(line, sizeof(line), "<%d>", syslog_prio[level]);
	else
		n = format_prefix(line, sizeof(line), level);
	/* room for the text and its NUL, less one byte kept for the newline */
	room = sizeof(line) - n - 1;
	k = vsnprintf(line + n, room, fmt, ap);
	if (k > 0)
		n += (size_t)k < room ? (size_t)k : room - 1;
	line[n++] = '\n';
	write_all(target == TARGET_FILE ? file_fd : STDERR_FILENO, line, n);
out_unlock:
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
	xprt_hooked = true;
	xprt_set_log(log_from_xprt, NULL, (enum xprt_log_level)max_level);
}
