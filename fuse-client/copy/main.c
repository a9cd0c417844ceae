/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy: bulk copy between a local tree and rdmafs, on the client core
 * (no FUSE in the path). Options, the cluster connection, progress and the
 * summary; the copy itself is engine.c.
 *
 * Exit status: 0 everything copied, 1 some files failed (each named on
 * stderr), 2 usage or configuration error, 3 the service is unreachable.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "copy_i.h"

#define EXIT_FAILED	 1
#define EXIT_USAGE	 2
#define EXIT_UNREACHABLE 3
#define DEFAULT_SECRET	 "/etc/rdmafs/secret"
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
		"  -s, --secret-file FILE  cluster secret [$RDMAFS_SECRET_FILE, " DEFAULT_SECRET
		"]\n"
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
		"      --owner / --no-owner\n"
		"                          preserve uid and gid [on when run as root]\n"
		"  -q, --quiet             no progress and no summary; errors only\n"
		"  -v, --verbose           say what is checked, skipped and cleaned\n"
		"      --log-level LEVEL   debug, info, warning or error: messages of the client\n"
		"                          library and the transport at LEVEL and worse on\n"
		"                          stderr [warning]\n"
		"  -V, --version           print the version and exit\n"
		"  -h, --help              print this and exit\n"
		"\n"
		"Progress: a bar refreshed 4 times a second on a terminal (stderr), else a\n"
		"line every 5 seconds. The summary goes to stdout.\n"
		"\n"
		"exit status: 0 everything copied, 1 some files failed (each is named on\n"
		"stderr), 2 usage or configuration error, 3 the service is unreachable.\n",
		prog);
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

static int parse_size(const char *s, size_t *out)
{
	unsigned long v, mult = 1;
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mult = 1024;
	else if (*end == 'M' || *end == 'm')
		mult = MIB;
	if (mult != 1)
		end++;
	if (*end || v > (64ul * MIB) / mult)
		return -EINVAL;
	v *= mult;
	if (v < 64 * 1024 || v > 64ul * MIB)
		return -EINVAL;
	*out = v;
	return 0;
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

/* ---- progress ---------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

struct progress {
	struct cp_stats *stats;
	bool tty;
	double start;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	pthread_t thread;
	double last_t;
	uint64_t last_bytes;
	double rate; /* smoothed bytes/s */
};

static void progress_line(struct progress *p, bool final_line)
{
	const struct cp_stats *s = p->stats;
	uint64_t files = load(&s->files_done), ftotal = load(&s->files_total);
	uint64_t bytes = load(&s->bytes_done), btotal = load(&s->bytes_total);
	bool counting = !__atomic_load_n(&s->walk_done, __ATOMIC_ACQUIRE);
	double t = now_s(), dt = t - p->last_t;
	char b[32], bt[32], r[32], eta[32] = "--:--";
	char line[256];

	if (dt > 0.2) {
		double inst = (double)(bytes - p->last_bytes) / dt;

		p->rate = p->rate == 0 ? inst : 0.7 * p->rate + 0.3 * inst;
		p->last_t = t;
		p->last_bytes = bytes;
	}
	human((double)bytes, b, sizeof(b));
	human((double)btotal, bt, sizeof(bt));
	human(p->rate, r, sizeof(r));
	if (!counting && p->rate > 1 && btotal >= bytes) {
		double left = (double)(btotal - bytes) / p->rate;
		unsigned long sec = (unsigned long)left;

		snprintf(eta, sizeof(eta), "%lu:%02lu:%02lu", sec / 3600, sec / 60 % 60, sec % 60);
	}
	if (p->tty) {
		unsigned width = 20, fill = 0;
		char bar[24];

		if (btotal && !counting)
			fill = (unsigned)((double)bytes / (double)btotal * width);
		else if (ftotal && !counting)
			fill = (unsigned)((double)files / (double)ftotal * width);
		if (fill > width)
			fill = width;
		memset(bar, '#', fill);
		memset(bar + fill, '.', width - fill);
		bar[width] = '\0';
		snprintf(line, sizeof(line),
			 "[%s] files %" PRIu64 "/%" PRIu64 "%s  %s/%s%s  %s/s  ETA %s", bar, files,
			 ftotal, counting ? "+" : "", b, bt, counting ? "+" : "", r, eta);
		fprintf(stderr, "\r\033[K%s%s", line, final_line ? "\n" : "");
	} else {
		fprintf(stderr,
			"rdmafs-copy: %" PRIu64 "/%" PRIu64 "%s files, %s/%s, %s/s, ETA %s\n",
			files, ftotal, counting ? "+" : "", b, bt, r, eta);
	}
	fflush(stderr);
}

static void *progress_main(void *arg)
{
	struct progress *p = arg;
	double period = p->tty ? 0.25 : 5.0;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;
		double when;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		when = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + period;
		ts.tv_sec = (time_t)when;
		ts.tv_nsec = (long)((when - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
		if (p->stop)
			break;
		progress_line(p, false);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int progress_start(struct progress *p, struct cp_stats *stats)
{
	pthread_condattr_t ca;

	memset(p, 0, sizeof(*p));
	p->stats = stats;
	p->tty = isatty(STDERR_FILENO);
	p->start = p->last_t = now_s();
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (p->tty)
		cp_msg_set_bar(true);
	return -pthread_create(&p->thread, NULL, progress_main, p);
}

static void progress_stop(struct progress *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	if (p->tty) {
		progress_line(p, true);
		cp_msg_set_bar(false);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
}

static void summary(const struct cp_stats *s, double secs)
{
	char b[32], r[32];
	double rate = secs > 0 ? (double)s->bytes_copied / secs : 0;

	human((double)s->bytes_copied, b, sizeof(b));
	human(rate, r, sizeof(r));
	printf("rdmafs-copy: %" PRIu64 " files (%s) copied, %" PRIu64 " directories, %" PRIu64
	       " hard links, %" PRIu64 " symlinks, %" PRIu64 " special, %" PRIu64
	       " skipped, %" PRIu64 " failed in %.2f s (%s/s, %.0f files/s)\n",
	       s->files_copied, b, s->dirs, s->links, s->symlinks, s->specials, s->skipped,
	       s->failed, secs, r, secs > 0 ? (double)s->files_done / secs : 0.0);
	fflush(stdout);
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
};

static const struct option long_opts[] = {
	{"meta", required_argument, NULL, 'm'},
	{"secret-file", required_argument, NULL, 's'},
	{"transport", required_argument, NULL, 't'},
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
	{"version", no_argument, NULL, 'V'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

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
	struct progress prog_state;
	struct rfs *fs = NULL;
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	char meta_buf[512], why[1024];
	unsigned long v;
	int owner = -1, c, ret, status = EXIT_USAGE, rt;
	enum rdmafs_log_level log_level = RDMAFS_LOG_WARN;
	bool progress_on = false;
	double t0;

	rdmafs_log_init("rdmafs-copy", RDMAFS_LOG_WARN);
	/* a peer that went away must be an error of one call, not the end of the process */
	signal(SIGPIPE, SIG_IGN);
	rfs_options_init(&ro);
	while ((c = getopt_long(argc, argv, "m:s:t:j:qvVh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			meta = optarg;
			break;
		case 's':
			secret_file = optarg;
			break;
		case 't':
			if (strcmp(optarg, "auto") == 0)
				ro.transport = RFS_TRANSPORT_AUTO;
			else if (strcmp(optarg, "rdma") == 0)
				ro.transport = RFS_TRANSPORT_RDMA;
			else if (strcmp(optarg, "tcp") == 0)
				ro.transport = RFS_TRANSPORT_TCP;
			else
				return usage_error("--transport takes auto, rdma or tcp, not '%s'",
						   optarg);
			transport = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_uint(optarg, 100, 600000, &v))
				return usage_error("--timeout takes 100..600000 ms, not '%s'",
						   optarg);
			ro.call_timeout_ms = (uint32_t)v;
			break;
		case 'j':
			if (parse_uint(optarg, 1, 256, &v))
				return usage_error("--jobs takes 1..256, not '%s'", optarg);
			opts.jobs = (unsigned)v;
			break;
		case OPT_INFLIGHT:
			if (parse_uint(optarg, 0, 256, &v))
				return usage_error("--inflight takes 0..256, not '%s'", optarg);
			opts.inflight = (unsigned)v;
			break;
		case OPT_PIECE:
			if (parse_size(optarg, &opts.piece_size))
				return usage_error("--piece-size takes 64K..64M, not '%s'", optarg);
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
			if (rdmafs_log_parse_level(optarg, &log_level))
				return usage_error(
					"--log-level takes debug, info, warning or error, "
					"not '%s'",
					optarg);
			break;
		case 'V':
			printf("rdmafs-copy %s\n", RDMAFS_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "(%s --help lists the options)\n", prog);
			return EXIT_USAGE;
		}
	}
	rdmafs_log_set_level(log_level);
	rdmafs_log_hook_xprt();
	if (argc - optind != 2)
		return usage_error("needs exactly two arguments, SRC and DST (got %d)",
				   argc - optind);
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
	}
	if (!meta || !*meta) {
		status = usage_error("no metadata service: give -m URI, RDMAFS_META or "
				     "rdmafs://HOST:PORT/path");
		goto out_free;
	}
	if (!secret_file)
		secret_file = DEFAULT_SECRET;
	ret = rdmafs_read_secret(secret_file, &secret, &secret_len);
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog,
			rdmafs_secret_strerror(secret_file, ret, why, sizeof(why)));
		goto out_free;
	}
	/* every thread has at most one piece in flight: enough buffers for all of them */
	ro.buf_size = MIB;
	ro.buf_count = (uint32_t)((opts.jobs + opts.inflight) * (opts.piece_size / MIB + 1) + 8);
	if (ro.buf_count < 32)
		ro.buf_count = 32;
	ro.meta_uri = meta;
	ro.secret = secret;
	ro.secret_len = secret_len;
	ro.name = "rdmafs-copy";
	ret = rfs_create(&ro, &fs);
	if (ret) {
		fprintf(stderr, "%s: cannot reach the cluster at %s: %s\n", prog, meta,
			ret == -EACCES ? "the secret was refused" : cp_strerror(ret));
		status = ret == -EINVAL ? EXIT_USAGE : EXIT_UNREACHABLE;
		goto out_free;
	}

	cp_side_local_init(&local);
	cp_side_rdmafs_init(&remote, fs);
	src.path = t[0].path;
	dst.path = t[1].path;
	t[0].path = t[1].path = NULL;
	if (!opts.quiet) {
		rt = progress_start(&prog_state, &stats);
		progress_on = rt == 0;
	}
	t0 = now_s();
	ret = t[0].rdmafs ? cp_run(&opts, &remote, &src, &local, &dst, &stats)
			  : cp_run(&opts, &local, &src, &remote, &dst, &stats);
	if (progress_on)
		progress_stop(&prog_state);
	if (!opts.quiet)
		summary(&stats, now_s() - t0);
	status = ret == 0 ? 0 : EXIT_FAILED;
	/* the service went away under us: say so with the exit status */
	if (ret && ret != -EIO && (ret == -ETIMEDOUT || ret == -ECONNREFUSED))
		status = EXIT_UNREACHABLE;

	rfs_destroy(fs);
out_free:
	if (secret)
		memset(secret, 0, secret_len);
	free(secret);
	cp_loc_free(&src);
	cp_loc_free(&dst);
	target_free(&t[0]);
	target_free(&t[1]);
	return status;
}
