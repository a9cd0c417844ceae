/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy: bulk copy between a local tree and rdmafs, on the client core
 * (no FUSE in the path). Options, the cluster connection, progress and the
 * summary; the copy itself is engine.c.
 *
 * Exit status: 0 everything copied, 1 some files failed (each named on
 * stderr), 2 usage or configuration error, 3 the service is unreachable,
 * 130 interrupted (SIGINT, SIGTERM): a summary and the command that resumes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rdmafs_fs.h"
#include "copy_i.h"

#define EXIT_FAILED	 1
#define EXIT_USAGE	 2
#define EXIT_UNREACHABLE 3
/* as a shell reports a command that Ctrl-C ended (128 + SIGINT) */
#define EXIT_INTERRUPTED 130
#define MIB		 (1024u * 1024u)

static const char *prog = "rdmafs-copy";

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [options] SRC DST\n"
		"\n"
		"Copies a tree between a local filesystem and rdmafs, in either direction,\n"
		"talking to the daemons directly (no FUSE mount). Exactly one of SRC and DST is\n"
		"an rdmafs path:\n"
		"    rdmafs:/path/in/fs            the cluster of -m/--meta (or RDMAFS_META)\n"
		"    rdmafs://HOST:PORT/path       the metadata service named inline\n"
		"\n"
		"A directory is copied recursively: DST becomes its copy (made if missing,\n"
		"completed if it exists). A file copied to an existing directory goes inside\n"
		"it. Mode, owner (when run as root), atime and mtime, xattrs (user.*, and\n"
		"trusted.* and security.* where permitted), symbolic links, hard links and\n"
		"holes are preserved. Every file is written under a temporary name\n"
		"(" CP_TMP_PREFIX "*" CP_TMP_SUFFIX "), read back and compared by CRC-32C,\n"
		"and renamed into place: run the same command again after an interruption\n"
		"and it skips complete files (same size and mtime), removes the temporaries\n"
		"left behind and copies the rest.\n"
		"\n"
		"options:\n"
		"  -m, --meta URI          metadata service: tcp://, rdma:// or auto://HOST:PORT\n"
		"                          [$RDMAFS_META]\n"
		"  -s, --secret-file FILE  cluster secret [$RDMAFS_SECRET_FILE, %s]\n"
		"  -k, --key-file FILE     a client key instead of the secret (rdmafsctl client\n"
		"                          add) [$RDMAFS_KEY_FILE, key_file in the settings]\n"
		"  -c, --config FILE       client settings ([client] meta, secret_file,\n"
		"                          transport) [$RDMAFS_CLIENT_CONF, %s]\n"
		"  -t, --transport auto|rdma|tcp\n"
		"                          how to reach the storage daemons [auto]\n"
		"      --timeout MS        per-RPC timeout, 100..600000 [5000]\n"
		"  -j, --jobs N            files copied at once, 1..256 [4]\n"
		"      --inflight N        extra threads moving pieces of large files, 0..256 [4]\n"
		"      --piece-size SIZE   bytes per read/write call of a large file, with K or M\n"
		"                          suffix, 64K..64M [4M]\n"
		"      --no-verify         do not read the copies back to compare checksums\n"
		"      --verify-existing   a destination file with the source's size and mtime\n"
		"                          is compared by checksum before it is skipped\n"
		"      --bwlimit RATE      read at most RATE bytes/s from the source, with K, M\n"
		"                          or G suffix (binary), 1K..1024G [no limit]\n"
		"      --owner / --no-owner\n"
		"                          preserve uid and gid [on when run as root]\n"
		"  -q, --quiet             no progress and no summary; errors only\n"
		"  -v, --verbose           say what is checked, skipped and cleaned\n"
		"      --log-level LEVEL   debug, info, warning or error: messages of the client\n"
		"                          library and the transport at LEVEL and worse on\n"
		"                          stderr [warning]\n"
		"  -V, --version           print \"rdmafs-copy VERSION\" and exit\n"
		"  -h, --help              print this and exit\n"
		"\n"
		"Progress: a line refreshed 4 times a second on a terminal (stderr), fitted to\n"
		"its width, else a line every 5 seconds. The summary goes to stdout.\n"
		"\n"
		"Ctrl-C (SIGINT) or SIGTERM stops the copy: the pieces in flight end, the files\n"
		"under way are removed, complete ones stay; it prints what is done and left,\n"
		"and the command that resumes the copy. A second one stops at once.\n"
		"\n"
		"exit status: 0 everything copied, 1 some files failed (each is named on\n"
		"stderr), 2 usage or configuration error, 3 the service is unreachable,\n"
		"130 interrupted by SIGINT or SIGTERM (run the printed command to resume).\n",
		prog, rfs_default_secret_file(), rfs_client_conf_path());
}

/* ---- option values ----------------------------------------------------------------- */

static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A number of bytes with an optional K, M or G (binary) suffix, in @min..@max. */
static int parse_scaled(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v, mult = 1;
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mult = 1024;
	else if (*end == 'M' || *end == 'm')
		mult = MIB;
	else if (*end == 'G' || *end == 'g')
		mult = 1024ull * MIB;
	if (mult != 1)
		end++;
	if (*end || v > max / mult)
		return -EINVAL;
	v *= mult;
	if (v < min)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A piece size: 64K..64M. */
static int parse_size(const char *s, size_t *out)
{
	uint64_t v;
	int ret = parse_scaled(s, 64 * 1024, 64ull * MIB, &v);

	if (!ret)
		*out = (size_t)v;
	return ret;
}

/* A rate in bytes/s: 1K..1024G. */
static int parse_rate(const char *s, uint64_t *out)
{
	return parse_scaled(s, 1024, 1024ull * 1024 * MIB, out);
}

/* A side of the copy as written on the command line. */
struct target {
	bool rdmafs;
	char *path;	 /* malloc()ed, without trailing slashes */
	char *authority; /* "HOST:PORT" of rdmafs://, malloc()ed, or NULL */
};

static void target_free(struct target *t)
{
	free(t->path);
	free(t->authority);
}

static int strip_slashes(char *p)
{
	size_t n = strlen(p);

	if (!n)
		return -EINVAL;
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	return 0;
}

static int parse_target(const char *arg, struct target *t)
{
	memset(t, 0, sizeof(*t));
	if (strncmp(arg, "rdmafs://", 9) == 0) {
		const char *a = arg + 9, *slash;

		if (*a == '[') {
			const char *close = strchr(a, ']');

			slash = close ? strchr(close, '/') : NULL;
		} else {
			slash = strchr(a, '/');
		}
		if (slash == a)
			return -EINVAL;
		t->rdmafs = true;
		t->authority = slash ? strndup(a, (size_t)(slash - a)) : strdup(a);
		t->path = strdup(slash ? slash : "/");
	} else if (strncmp(arg, "rdmafs:", 7) == 0) {
		t->rdmafs = true;
		if (arg[7] != '/')
			return -EINVAL;
		t->path = strdup(arg + 7);
	} else {
		t->path = strdup(arg);
	}
	if (!t->path || (strncmp(arg, "rdmafs://", 9) == 0 && !t->authority)) {
		target_free(t);
		return -ENOMEM;
	}
	return strip_slashes(t->path);
}

/* ---- progress, signals and the summary ------------------------------------------------ */

static void human(double bytes, char *out, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	unsigned u = 0;

	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	snprintf(out, size, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static uint64_t load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/*
 * Set by the handlers, read by the watcher thread, the only thread that takes
 * these signals: every other one blocks them, and the watcher unblocks them
 * only inside ppoll(), so a signal always ends its wait at once.
 */
static volatile sig_atomic_t stop_signal;  /* the first SIGINT or SIGTERM */
static volatile sig_atomic_t stop_signals; /* how many came */
static volatile sig_atomic_t resized;	   /* SIGWINCH */

static void on_stop_signal(int sig)
{
	if (!stop_signal)
		stop_signal = sig;
	stop_signals = stop_signals + 1;
}

static void on_resize(int sig)
{
	resized = 1;
}

/* The command that resumes this copy (main() fills it): the same copy again. */
struct resume {
	char **words;
	size_t count, cap;
};

/*
 * Progress on stderr and the signals: a thread that redraws the line (4 times
 * a second on a terminal, fitted to its width; else a line every 5 seconds),
 * follows SIGWINCH and turns SIGINT and SIGTERM into cp_stop().
 */
struct watch {
	struct cp_stats *stats;
	const struct resume *resume;
	bool draw;	/* progress at all (not --quiet) */
	unsigned width; /* stderr's terminal columns; 0: not a terminal */
	int wake[2];	/* a pipe: written when the copy ended */
	double start;
	pthread_t thread;
	double last_t;
	uint64_t last_bytes;
	double rate; /* smoothed bytes/s */
};

/*
 * The progress line in fewer than @width columns. The fields go from the
 * least needed as the terminal narrows: the bar, then the rate, the file
 * count, the time left; the bytes stay (cut if even they do not fit).
 */
static void fit_line(char *line, size_t size, unsigned width, bool counting, double fraction,
		     char *const fields[4])
{
	/* display order: files, bytes, rate, ETA; dropped: rate, files, ETA */
	static const unsigned drop_order[] = {2, 0, 3};
	size_t max = width > 1 ? width - 1 : 1, len = 0, pos = 0;
	bool shown[4] = {true, true, true, true};
	int bar = 0;

	for (unsigned i = 0; i < 4; i++)
		len += strlen(fields[i]) + (i ? 2 : 0);
	for (unsigned d = 0; len > max && d < 3; d++) {
		unsigned f = drop_order[d];

		shown[f] = false;
		len = 0;
		for (unsigned i = 0; i < 4; i++)
			if (shown[i])
				len += strlen(fields[i]) + (len ? 2 : 0);
	}
	/* the bar takes what is left, 10 to 40 cells between its brackets */
	if (len + 2 + 2 + 10 <= max) {
		bar = (int)(max - len - 4);
		if (bar > 40)
			bar = 40;
	}
	line[0] = '\0';
	if (bar) {
		int fill = counting ? 0 : (int)(fraction * bar);

		fill = fill < 0 ? 0 : fill > bar ? bar : fill;
		pos += (size_t)snprintf(line + pos, size - pos, "[%.*s%.*s]  ", fill,
					"########################################", bar - fill,
					"........................................");
	}
	for (unsigned i = 0, n = 0; i < 4; i++) {
		if (!shown[i])
			continue;
		if (pos < size)
			pos += (size_t)snprintf(line + pos, size - pos, "%s%s", n++ ? "  " : "",
						fields[i]);
	}
	if (strlen(line) > max)
		line[max] = '\0';
}

static void progress_line(struct watch *w, bool final_line)
{
	const struct cp_stats *s = w->stats;
	uint64_t files = load(&s->files_done), ftotal = load(&s->files_total);
	uint64_t bytes = load(&s->bytes_done), btotal = load(&s->bytes_total);
	bool counting = !__atomic_load_n(&s->walk_done, __ATOMIC_ACQUIRE);
	double t = cp_now(), dt = t - w->last_t, fraction = 0;
	char b[32], bt[32], r[32], eta[32] = "--:--";
	char f_files[64], f_bytes[80], f_rate[48], f_eta[48];
	char *fields[4] = {f_files, f_bytes, f_rate, f_eta};
	char line[512];

	if (dt > 0.2) {
		double inst = (double)(bytes - w->last_bytes) / dt;

		w->rate = w->rate == 0 ? inst : 0.7 * w->rate + 0.3 * inst;
		w->last_t = t;
		w->last_bytes = bytes;
	}
	human((double)bytes, b, sizeof(b));
	human((double)btotal, bt, sizeof(bt));
	human(w->rate, r, sizeof(r));
	if (!counting && w->rate > 1 && btotal >= bytes) {
		double left = (double)(btotal - bytes) / w->rate;
		unsigned long sec = (unsigned long)left;

		snprintf(eta, sizeof(eta), "%lu:%02lu:%02lu", sec / 3600, sec / 60 % 60, sec % 60);
	}
	if (!w->width) {
		fprintf(stderr,
			"rdmafs-copy: %" PRIu64 "/%" PRIu64 "%s files, %s/%s, %s/s, ETA %s\n",
			files, ftotal, counting ? "+" : "", b, bt, r, eta);
		fflush(stderr);
		return;
	}
	if (btotal)
		fraction = (double)bytes / (double)btotal;
	else if (ftotal)
		fraction = (double)files / (double)ftotal;
	snprintf(f_files, sizeof(f_files), "files %" PRIu64 "/%" PRIu64 "%s", files, ftotal,
		 counting ? "+" : "");
	snprintf(f_bytes, sizeof(f_bytes), "%s/%s%s", b, bt, counting ? "+" : "");
	snprintf(f_rate, sizeof(f_rate), "%s/s", r);
	snprintf(f_eta, sizeof(f_eta), "ETA %s", eta);
	fit_line(line, sizeof(line), w->width, counting, fraction, fields);
	fprintf(stderr, "\r\033[K%s%s", line, final_line ? "\n" : "");
	fflush(stderr);
}

struct draw_arg {
	struct watch *w;
	bool final_line;
};

static void draw_locked(void *arg)
{
	struct draw_arg *d = arg;

	progress_line(d->w, d->final_line);
}

/* Draws under cp_msg()'s lock, so a message never lands inside the line. */
static void draw(struct watch *w, bool final_line)
{
	struct draw_arg d = {w, final_line};

	cp_msg_locked(draw_locked, &d);
}

static void print_resume(void *arg)
{
	const struct watch *w = arg;

	fputs(w->width ? "\r\033[K" : "", stderr);
	cp_term_wrap(stderr, w->width,
		     "rdmafs-copy: interrupted again: stopped at once, the files under way are "
		     "left as temporaries, which the next run removes.");
	cp_term_wrap(stderr, w->width, "rdmafs-copy: to resume, run:");
	cp_term_command(stderr, w->width, w->resume->words, w->resume->count);
	fflush(stderr);
}

/* A signal came: the first one stops the copy, a second one the process. */
static void watch_signal(struct watch *w, bool *asked)
{
	if (stop_signals > 1) {
		cp_msg_locked(print_resume, w);
		_exit(EXIT_INTERRUPTED);
	}
	if (*asked)
		return;
	*asked = true;
	cp_msg("%s: stopping after the pieces in flight (again: at once)",
	       stop_signal == SIGTERM ? "SIGTERM" : "SIGINT");
	cp_stop();
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	double period = w->width ? 0.25 : 5.0, next = cp_now() + period;
	sigset_t during;
	bool asked = false;

	/* the signals come in only while ppoll() waits */
	pthread_sigmask(SIG_SETMASK, NULL, &during);
	sigdelset(&during, SIGINT);
	sigdelset(&during, SIGTERM);
	sigdelset(&during, SIGWINCH);
	for (;;) {
		struct pollfd pfd = {.fd = w->wake[0], .events = POLLIN};
		double left;
		struct timespec ts;

		if (stop_signals)
			watch_signal(w, &asked);
		if (resized) {
			resized = 0;
			if (w->width) {
				w->width = cp_term_width(STDERR_FILENO);
				cp_msg_set_term(w->draw, w->width);
				/* the new width at once, not at the next tick */
				if (w->draw)
					draw(w, false);
			}
		}
		left = next - cp_now();
		if (left <= 0) {
			if (w->draw)
				draw(w, false);
			next += period * (1 + (double)(long)(-left / period));
			continue;
		}
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		if (ppoll(&pfd, 1, &ts, &during) > 0)
			break;
	}
	return NULL;
}

/*
 * Starts the watcher. The caller has blocked SIGINT, SIGTERM and SIGWINCH
 * in every thread and installed their handlers.
 */
static int watch_start(struct watch *w, struct cp_stats *stats, const struct resume *resume,
		       bool draw_progress)
{
	int ret;

	memset(w, 0, sizeof(*w));
	w->stats = stats;
	w->resume = resume;
	w->draw = draw_progress;
	w->width = cp_term_width(STDERR_FILENO);
	w->start = w->last_t = cp_now();
	if (pipe2(w->wake, O_CLOEXEC))
		return -errno;
	cp_msg_set_term(w->draw && w->width, w->width);
	ret = -pthread_create(&w->thread, NULL, watch_main, w);
	if (ret) {
		close(w->wake[0]);
		close(w->wake[1]);
		cp_msg_set_term(false, 0);
	}
	return ret;
}

static void watch_stop(struct watch *w)
{
	ssize_t n;

	do
		n = write(w->wake[1], "", 1);
	while (n < 0 && errno == EINTR);
	pthread_join(w->thread, NULL);
	close(w->wake[0]);
	close(w->wake[1]);
	if (w->draw && w->width)
		draw(w, true);
	cp_msg_set_term(false, w->width);
}

static void summary(const struct cp_stats *s, double secs)
{
	char b[32], r[32], line[512];
	double rate = secs > 0 ? (double)s->bytes_copied / secs : 0;

	human((double)s->bytes_copied, b, sizeof(b));
	human(rate, r, sizeof(r));
	snprintf(line, sizeof(line),
		 "rdmafs-copy: %" PRIu64 " files (%s) copied, %" PRIu64 " directories, %" PRIu64
		 " hard links, %" PRIu64 " symlinks, %" PRIu64 " special, %" PRIu64
		 " skipped, %" PRIu64 " failed in %.2f s (%s/s, %.0f files/s)",
		 s->files_copied, b, s->dirs, s->links, s->symlinks, s->specials, s->skipped,
		 s->failed, secs, r, secs > 0 ? (double)s->files_done / secs : 0.0);
	cp_term_wrap(stdout, cp_term_width(STDOUT_FILENO), line);
	fflush(stdout);
}

/*
 * After a stop: what was done, what is left and the command that does it,
 * on stderr (with --quiet too).
 */
static void interrupted(const struct cp_stats *s, double secs, int sig, const struct resume *resume)
{
	unsigned width = cp_term_width(STDERR_FILENO);
	uint64_t files_left = s->files_total - s->files_done, bytes_left = 0;
	char b[32], bl[32], line[1024];

	if (s->bytes_total > s->bytes_done)
		bytes_left = s->bytes_total - s->bytes_done;
	human((double)s->bytes_copied, b, sizeof(b));
	human((double)bytes_left, bl, sizeof(bl));
	snprintf(line, sizeof(line),
		 "rdmafs-copy: interrupted by %s after %.1f s: %" PRIu64
		 " files (%s) copied, %" PRIu64 " skipped as complete, %" PRIu64
		 " failed; left: %" PRIu64 " files (%s)%s. What "
		 "was copied stays; the files that were under way were removed.",
		 sig == SIGTERM ? "SIGTERM" : "SIGINT", secs, s->files_copied, b, s->skipped,
		 s->failed, files_left, bl,
		 s->walk_done ? "" : " and the part of the tree not listed yet");
	cp_term_wrap(stderr, width, line);
	cp_term_wrap(stderr, width, "rdmafs-copy: to resume, run:");
	cp_term_command(stderr, width, resume->words, resume->count);
	fflush(stderr);
}

static int resume_add(struct resume *r, const char *word)
{
	if (r->count == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		char **n = realloc(r->words, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		r->words = n;
		r->cap = cap;
	}
	r->words[r->count] = strdup(word);
	if (!r->words[r->count])
		return -ENOMEM;
	r->count++;
	return 0;
}

static void resume_free(struct resume *r)
{
	for (size_t i = 0; i < r->count; i++)
		free(r->words[i]);
	free(r->words);
	memset(r, 0, sizeof(*r));
}

/* A local path as an absolute one, so the command works from any directory. */
static int resume_add_path(struct resume *r, const char *arg, bool rdmafs)
{
	char cwd[PATH_MAX], *path;
	int ret;

	if (rdmafs || arg[0] == '/')
		return resume_add(r, arg);
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	path = cp_path_join(cwd, arg);
	if (!path)
		return -ENOMEM;
	ret = resume_add(r, path);
	free(path);
	return ret;
}

/* ---- main ---------------------------------------------------------------------------- */

enum {
	OPT_TIMEOUT = 256,
	OPT_INFLIGHT,
	OPT_PIECE,
	OPT_NO_VERIFY,
	OPT_VERIFY_EXISTING,
	OPT_OWNER,
	OPT_NO_OWNER,
	OPT_LOG_LEVEL,
	OPT_BWLIMIT,
};

static const struct option long_opts[] = {
	{"meta", required_argument, NULL, 'm'},
	{"secret-file", required_argument, NULL, 's'},
	{"key-file", required_argument, NULL, 'k'},
	{"transport", required_argument, NULL, 't'},
	{"config", required_argument, NULL, 'c'},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"jobs", required_argument, NULL, 'j'},
	{"inflight", required_argument, NULL, OPT_INFLIGHT},
	{"piece-size", required_argument, NULL, OPT_PIECE},
	{"no-verify", no_argument, NULL, OPT_NO_VERIFY},
	{"verify-existing", no_argument, NULL, OPT_VERIFY_EXISTING},
	{"owner", no_argument, NULL, OPT_OWNER},
	{"no-owner", no_argument, NULL, OPT_NO_OWNER},
	{"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"bwlimit", required_argument, NULL, OPT_BWLIMIT},
	{"version", no_argument, NULL, 'V'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* --NAME [VALUE] of option @c into the resume command, as the long option */
static int resume_add_option(struct resume *r, int c, const char *arg)
{
	char flag[64];
	int ret;

	for (const struct option *o = long_opts; o->name; o++) {
		if (o->val != c)
			continue;
		snprintf(flag, sizeof(flag), "--%s", o->name);
		ret = resume_add(r, flag);
		if (!ret && o->has_arg)
			ret = resume_add(r, arg);
		return ret;
	}
	return 0;
}

/* The program as run: found in PATH again, or by its absolute path. */
static int resume_add_program(struct resume *r, const char *argv0)
{
	char path[PATH_MAX];

	if (strchr(argv0, '/') && realpath(argv0, path))
		return resume_add(r, path);
	return resume_add(r, argv0);
}

static const int watched_signals[] = {SIGINT, SIGTERM, SIGWINCH};

/*
 * Blocks SIGINT, SIGTERM and SIGWINCH in this thread and the ones it starts
 * (the watcher takes them) and installs their handlers.
 */
static void block_signals(void)
{
	struct sigaction sa;
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(watched_signals) / sizeof(watched_signals[0]); i++)
		sigaddset(&set, watched_signals[i]);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_mask = set;
	for (size_t i = 0; i < sizeof(watched_signals) / sizeof(watched_signals[0]); i++) {
		sa.sa_handler = watched_signals[i] == SIGWINCH ? on_resize : on_stop_signal;
		sigaction(watched_signals[i], &sa, NULL);
	}
}

/* Back to the default actions, unblocked: for when no watcher runs. */
static void unblock_signals(void)
{
	struct sigaction sa;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(watched_signals) / sizeof(watched_signals[0]); i++) {
		sigaction(watched_signals[i], &sa, NULL);
		sigaddset(&set, watched_signals[i]);
	}
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(%s --help lists the options)\n", prog);
	return EXIT_USAGE;
}

int main(int argc, char *argv[])
{
	struct cp_options opts = {.jobs = 4, .inflight = 4, .piece_size = 4 * MIB, .verify = true};
	const char *meta = getenv("RDMAFS_META"), *secret_file = getenv("RDMAFS_SECRET_FILE");
	const char *transport = "auto";
	struct target t[2] = {{0}};
	struct cp_side local, remote;
	struct cp_loc src = {0}, dst = {0};
	struct cp_stats stats = {0};
	struct rfs_options ro;
	struct resume resume = {0};
	struct watch watch;
	struct rfs *fs = NULL;
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	char meta_buf[512], why[1024];
	unsigned long v;
	int owner = -1, c, ret, status = EXIT_USAGE;
	enum rdmafs_log_level log_level = RDMAFS_LOG_WARN;
	bool watching = false, meta_flag = false, secret_flag = false, transport_flag = false;
	bool key_flag = false;
	const char *key_file = getenv("RDMAFS_KEY_FILE");
	char key_name[65] = "";
	const char *config_path = NULL;
	struct rfs_client_conf conf = {0};
	double t0;

	rdmafs_log_init("rdmafs-copy", RDMAFS_LOG_WARN);
	/* a peer that went away must be an error of one call, not the end of the process */
	signal(SIGPIPE, SIG_IGN);
	rfs_options_init(&ro);
	if (resume_add_program(&resume, argv[0])) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return EXIT_USAGE;
	}
	while ((c = getopt_long(argc, argv, "m:s:k:t:c:j:qvVh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			meta = optarg;
			meta_flag = true;
			break;
		case 's':
			secret_file = optarg;
			secret_flag = true;
			break;
		case 'k':
			key_file = optarg;
			key_flag = true;
			break;
		case 't':
			if (strcmp(optarg, "auto") == 0)
				ro.transport = RFS_TRANSPORT_AUTO;
			else if (strcmp(optarg, "rdma") == 0)
				ro.transport = RFS_TRANSPORT_RDMA;
			else if (strcmp(optarg, "tcp") == 0)
				ro.transport = RFS_TRANSPORT_TCP;
			else {
				status = usage_error(
					"--transport takes auto, rdma or tcp, not '%s'", optarg);
				goto out_free;
			}
			transport = optarg;
			transport_flag = true;
			break;
		case 'c':
			/* not into the resume command: what it said goes there instead, below */
			config_path = optarg;
			continue;
		case OPT_TIMEOUT:
			if (parse_uint(optarg, 100, 600000, &v)) {
				status = usage_error("--timeout takes 100..600000 ms, not '%s'",
						     optarg);
				goto out_free;
			}
			ro.call_timeout_ms = (uint32_t)v;
			break;
		case 'j':
			if (parse_uint(optarg, 1, 256, &v)) {
				status = usage_error("--jobs takes 1..256, not '%s'", optarg);
				goto out_free;
			}
			opts.jobs = (unsigned)v;
			break;
		case OPT_INFLIGHT:
			if (parse_uint(optarg, 0, 256, &v)) {
				status = usage_error("--inflight takes 0..256, not '%s'", optarg);
				goto out_free;
			}
			opts.inflight = (unsigned)v;
			break;
		case OPT_PIECE:
			if (parse_size(optarg, &opts.piece_size)) {
				status = usage_error("--piece-size takes 64K..64M, not '%s'",
						     optarg);
				goto out_free;
			}
			break;
		case OPT_NO_VERIFY:
			opts.verify = false;
			break;
		case OPT_VERIFY_EXISTING:
			opts.verify_existing = true;
			break;
		case OPT_OWNER:
			owner = 1;
			break;
		case OPT_NO_OWNER:
			owner = 0;
			break;
		case 'q':
			opts.quiet = true;
			break;
		case 'v':
			opts.verbose = true;
			break;
		case OPT_LOG_LEVEL:
			if (rdmafs_log_parse_level(optarg, &log_level)) {
				status = usage_error(
					"--log-level takes debug, info, warning or error, "
					"not '%s'",
					optarg);
				goto out_free;
			}
			break;
		case OPT_BWLIMIT:
			if (parse_rate(optarg, &opts.bwlimit)) {
				status = usage_error("--bwlimit takes 1K..1024G bytes/s, not '%s'",
						     optarg);
				goto out_free;
			}
			break;
		case 'V':
			printf("rdmafs-copy %s\n", RDMAFS_VERSION);
			status = 0;
			goto out_free;
		case 'h':
			usage(stdout);
			status = 0;
			goto out_free;
		default:
			fprintf(stderr, "(%s --help lists the options)\n", prog);
			goto out_free;
		}
		if (resume_add_option(&resume, c, optarg)) {
			fprintf(stderr, "%s: out of memory\n", prog);
			goto out_free;
		}
	}
	rdmafs_log_set_level(log_level);
	rdmafs_log_hook_xprt();
	/* client.conf under the environment and the flags */
	ret = rfs_client_conf_load(config_path ? config_path : rfs_client_conf_path(),
				   config_path != NULL, "rdmafs-copy", NULL, NULL, &conf, why,
				   sizeof(why));
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog, why);
		goto out_free;
	}
	if ((!meta || !*meta) && conf.meta_uri)
		meta = conf.meta_uri;
	if (!secret_file && conf.secret_file)
		secret_file = conf.secret_file;
	if ((!key_file || !*key_file) && conf.key_file)
		key_file = conf.key_file;
	/* a key from anywhere is used, unless --secret-file asks for the secret */
	if (secret_flag && !key_flag)
		key_file = NULL;
	if (key_file && !*key_file)
		key_file = NULL;
	if (secret_flag && key_flag) {
		status = usage_error("give --key-file or --secret-file, not both");
		goto out_free;
	}
	if (!transport_flag && conf.transport) {
		transport = conf.transport;
		ro.transport = strcmp(transport, "rdma") == 0  ? RFS_TRANSPORT_RDMA
			       : strcmp(transport, "tcp") == 0 ? RFS_TRANSPORT_TCP
							       : RFS_TRANSPORT_AUTO;
		if (config_path && resume_add_option(&resume, 't', transport)) {
			fprintf(stderr, "%s: out of memory\n", prog);
			goto out_free;
		}
	}
	if (argc - optind != 2) {
		status = usage_error("needs exactly two arguments, SRC and DST (got %d)",
				     argc - optind);
		goto out_free;
	}
	opts.owner = owner < 0 ? geteuid() == 0 : owner == 1;
	for (int i = 0; i < 2; i++) {
		if (parse_target(argv[optind + i], &t[i])) {
			status = usage_error("bad path '%s'", argv[optind + i]);
			goto out_free;
		}
	}
	if (t[0].rdmafs == t[1].rdmafs) {
		status = usage_error("exactly one of SRC and DST must be an rdmafs: path");
		goto out_free;
	}
	{
		const struct target *r = t[0].rdmafs ? &t[0] : &t[1];

		if (r->authority) {
			snprintf(meta_buf, sizeof(meta_buf), "%s://%s", transport, r->authority);
			meta = meta_buf;
		}
		if (!meta || !*meta) {
			status = usage_error("no metadata service: give -m URI, RDMAFS_META, "
					     "rdmafs://HOST:PORT/path or meta = URI in %s",
					     config_path ? config_path : rfs_client_conf_path());
			goto out_free;
		}
		/*
		 * what the environment or a --config file said goes into the resume
		 * command, which may run elsewhere (the default client.conf is read again)
		 */
		ret = 0;
		if (!meta_flag && !r->authority && (meta != conf.meta_uri || config_path))
			ret = resume_add_option(&resume, 'm', meta);
		if (key_file) {
			/* a --key-file flag is in the command already */
			if (!ret && !key_flag)
				ret = resume_add_option(&resume, 'k', key_file);
		} else if (!ret && !secret_flag && secret_file &&
			   (secret_file != conf.secret_file || config_path))
			ret = resume_add_option(&resume, 's', secret_file);
		if (!ret)
			ret = resume_add(&resume, "--");
		for (int i = 0; i < 2 && !ret; i++)
			ret = resume_add_path(&resume, argv[optind + i], t[i].rdmafs);
		if (ret) {
			fprintf(stderr, "%s: %s\n", prog, cp_strerror(ret));
			goto out_free;
		}
	}
	if (!secret_file)
		secret_file = rfs_default_secret_file();
	if (key_file) {
		ret = rdmafs_key_file_name(key_file, key_name, sizeof(key_name));
		if (ret) {
			fprintf(stderr, "%s: %s\n", prog,
				rdmafs_key_strerror(key_file, ret, why, sizeof(why)));
			goto out_free;
		}
	} else {
		ret = rdmafs_read_secret(secret_file, &secret, &secret_len);
		if (ret) {
			fprintf(stderr, "%s: %s\n", prog,
				rdmafs_secret_strerror(secret_file, ret, why, sizeof(why)));
			goto out_free;
		}
	}
	/* every thread has at most one piece in flight: enough buffers for all of them */
	ro.buf_size = MIB;
	ro.buf_count = (uint32_t)((opts.jobs + opts.inflight) * (opts.piece_size / MIB + 1) + 8);
	if (ro.buf_count < 32)
		ro.buf_count = 32;
	ro.meta_uri = meta;
	ro.secret = secret;
	ro.secret_len = secret_len;
	ro.key_file = key_file;
	ro.name = "rdmafs-copy";
	/* before any thread starts, so that all of them inherit it */
	block_signals();
	ret = rfs_create(&ro, &fs);
	if (ret) {
		fprintf(stderr, "%s: cannot reach the cluster at %s: %s\n", prog, meta,
			ret == -EACCES || ret == -EKEYREVOKED
				? rdmafs_auth_strerror(ret, key_file ? key_name : NULL, why,
						       sizeof(why))
				: cp_strerror(ret));
		status = ret == -EINVAL ? EXIT_USAGE : EXIT_UNREACHABLE;
		goto out_free;
	}

	cp_side_local_init(&local);
	cp_side_rdmafs_init(&remote, fs);
	src.path = t[0].path;
	dst.path = t[1].path;
	t[0].path = t[1].path = NULL;
	watching = watch_start(&watch, &stats, &resume, !opts.quiet) == 0;
	if (!watching)
		/* nobody would take the signals: let them end the process, as a kill does */
		unblock_signals();
	t0 = cp_now();
	ret = t[0].rdmafs ? cp_run(&opts, &remote, &src, &local, &dst, &stats)
			  : cp_run(&opts, &local, &src, &remote, &dst, &stats);
	if (watching)
		watch_stop(&watch);
	if (!opts.quiet)
		summary(&stats, cp_now() - t0);
	if (ret == -EINTR) {
		interrupted(&stats, cp_now() - t0, stop_signal, &resume);
		status = EXIT_INTERRUPTED;
		goto out_destroy;
	}
	status = ret == 0 ? 0 : EXIT_FAILED;
	/* the service went away under us: say so with the exit status */
	if (ret && ret != -EIO && (ret == -ETIMEDOUT || ret == -ECONNREFUSED))
		status = EXIT_UNREACHABLE;

out_destroy:
	rfs_destroy(fs);
out_free:
	if (secret)
		memset(secret, 0, secret_len);
	free(secret);
	cp_loc_free(&src);
	cp_loc_free(&dst);
	target_free(&t[0]);
	target_free(&t[1]);
	resume_free(&resume);
	rfs_client_conf_free(&conf);
	return status;
}
