/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Randomized data integrity: writes, reads, truncates, fallocates, renames,
 * unlinks, reopens and fsyncs on 8 files at once, each kept in an in-memory
 * model; every read (and every size) is compared with the model. Offsets
 * favour chunk (1 MiB) boundaries. Prints the seed; the same seed replays the
 * same operations.
 * Usage: fs-integrity DIRECTORY [OPS [SEED]]
 *        (or RDMAFS_FS_OPS, default 100000; RDMAFS_FS_SEED, default 1;
 *        "random" draws one from the clock, for exploring outside the gate)
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include "fscheck.h"

#define MIB	     (1024 * 1024)
#define NFILES	     8
#define MAX_SIZE     (6 * MIB)
#define HISTORY	     12
#define DEFAULT_SEED 1

enum op {
	OP_WRITE,
	OP_READ,
	OP_TRUNCATE,
	OP_FALLOCATE,
	OP_RENAME,
	OP_UNLINK,
	OP_REOPEN,
	OP_FSYNC,
	OP_VERIFY,
	OP_COUNT
};
static const char *const op_names[] = {"write",	 "read",   "truncate", "fallocate", "rename",
				       "unlink", "reopen", "fsync",    "verify"};
/* relative weights of the operations */
static const unsigned op_weight[] = {30, 30, 8, 6, 6, 3, 5, 2, 1};

struct slot {
	bool exists;
	int fd;
	char name[64];
	uint8_t *data; /* MAX_SIZE bytes, valid up to size */
	size_t size;
	char history[HISTORY][96];
	unsigned history_next;
};

static struct slot slots[NFILES];
static uint64_t rng, seed, op_index;
static unsigned long long op_counts[OP_COUNT];
static unsigned name_gen;
static bool punch_supported;
static uint8_t *io_buf;

static void note(struct slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct slot *s, const char *fmt, ...)
{
	char *line = s->history[s->history_next++ % HISTORY];
	int n = snprintf(line, 96, "#%llu ", (unsigned long long)op_index);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line + n, (size_t)(96 - n), fmt, ap);
	va_end(ap);
}

static void die(struct slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The model and the file disagree, or an operation failed: report and exit. */
static void die(struct slot *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL at operation %llu (seed %llu): ", (unsigned long long)op_index,
		(unsigned long long)seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (s) {
		fprintf(stderr, "last operations on %s (model size %zu):\n", s->name, s->size);
		for (unsigned i = 0; i < HISTORY; i++) {
			const char *line = s->history[(s->history_next + i) % HISTORY];

			if (line[0])
				fprintf(stderr, "  %s\n", line);
		}
	}
	fprintf(stderr, "replay: fs-integrity DIR %llu %llu\n", (unsigned long long)(op_index + 1),
		(unsigned long long)seed);
	exit(CHECK_EXIT_FAIL);
}

static uint64_t below(uint64_t n)
{
	return n ? fs_rand(&rng) % n : 0;
}

/* A length: mostly small, sometimes large, rarely over a chunk. */
static size_t pick_len(void)
{
	uint64_t r = below(100);

	if (r < 75)
		return 1 + below(16 * 1024);
	if (r < 98)
		return 1 + below(128 * 1024);
	return 1 + below(MIB + MIB / 4);
}

/* An offset for @len bytes: near a chunk boundary, around EOF or anywhere. */
static size_t pick_off(const struct slot *s, size_t len)
{
	uint64_t r = below(100), off;

	if (r < 30)
		off = (1 + below(MAX_SIZE / MIB - 1)) * MIB - 8192 + below(16384);
	else if (r < 60)
		off = below(s->size + 65536);
	else
		off = below(MAX_SIZE);
	if (off + len > MAX_SIZE)
		off = MAX_SIZE - len;
	return (size_t)off;
}

static void check_size(struct slot *s, const char *when)
{
	struct stat st;

	if (fstat(s->fd, &st))
		die(s, "fstat after %s: %s", when, check_errno_name(errno));
	if ((size_t)st.st_size != s->size)
		die(s, "size after %s: %lld, model %zu", when, (long long)st.st_size, s->size);
}

static void compare(struct slot *s, size_t off, size_t len, const char *what)
{
	ssize_t n = fs_pread_all(s->fd, io_buf, len, (off_t)off);
	size_t expect = off >= s->size ? 0 : (s->size - off < len ? s->size - off : len);
	long diff;

	if (n < 0)
		die(s, "%s pread %zu@%zu: %s", what, len, off, check_errno_name(errno));
	if ((size_t)n != expect)
		die(s, "%s pread %zu@%zu: %zd bytes, model %zu", what, len, off, n, expect);
	diff = fs_first_diff(io_buf, s->data + off, expect);
	if (diff >= 0)
		die(s, "%s pread %zu@%zu: byte at file offset %zu is 0x%02x, model 0x%02x", what,
		    len, off, off + (size_t)diff, io_buf[diff], s->data[off + (size_t)diff]);
}

static void open_slot(struct slot *s, int flags)
{
	s->fd = open(s->name, O_RDWR | flags, 0644);
	if (s->fd < 0)
		die(s, "open %s: %s", s->name, check_errno_name(errno));
}

static void new_name(struct slot *s, unsigned index)
{
	snprintf(s->name, sizeof(s->name), "%sfile-%u-%u", below(2) ? "sub/" : "", index,
		 name_gen++);
}

static void do_create(struct slot *s, unsigned index)
{
	new_name(s, index);
	open_slot(s, O_CREAT | O_EXCL);
	s->exists = true;
	s->size = 0;
	note(s, "create %s", s->name);
}

static void do_write(struct slot *s)
{
	size_t len = pick_len(), off = pick_off(s, len);

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = fs_rand(&rng);

		memcpy(io_buf + i, &v, len - i < 8 ? len - i : 8);
	}
	note(s, "write %zu@%zu", len, off);
	if (fs_pwrite_all(s->fd, io_buf, len, (off_t)off) != (ssize_t)len)
		die(s, "pwrite %zu@%zu: %s", len, off, check_errno_name(errno));
	if (off > s->size)
		memset(s->data + s->size, 0, off - s->size);
	memcpy(s->data + off, io_buf, len);
	if (off + len > s->size)
		s->size = off + len;
}

static void do_read(struct slot *s)
{
	size_t len = pick_len(), off = below(s->size + 8192);

	note(s, "read %zu@%zu", len, off);
	check_size(s, "read");
	compare(s, off, len, "read");
}

static void do_truncate(struct slot *s)
{
	size_t size = below(100) < 20 ? 0 : pick_off(s, 0);
	bool by_path = below(2);

	note(s, "truncate %zu (%s)", size, by_path ? "path" : "fd");
	if (by_path ? truncate(s->name, (off_t)size) : ftruncate(s->fd, (off_t)size))
		die(s, "truncate %s to %zu: %s", s->name, size, check_errno_name(errno));
	if (size > s->size)
		memset(s->data + s->size, 0, size - s->size);
	s->size = size;
	check_size(s, "truncate");
}

static void do_fallocate(struct slot *s)
{
	size_t len = pick_len(), off = pick_off(s, len);
	uint64_t r = below(3);
	int mode = r == 0   ? 0
		   : r == 1 ? FALLOC_FL_KEEP_SIZE
			    : FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

	if (mode & FALLOC_FL_PUNCH_HOLE && !punch_supported)
		mode = 0;
	note(s, "fallocate mode %d %zu@%zu", mode, len, off);
	if (fallocate(s->fd, mode, (off_t)off, (off_t)len))
		die(s, "fallocate mode %d %zu@%zu: %s", mode, len, off, check_errno_name(errno));
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		if (off < s->size)
			memset(s->data + off, 0, (off + len > s->size ? s->size : off + len) - off);
	} else if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > s->size) {
		memset(s->data + s->size, 0, off + len - s->size);
		s->size = off + len;
	}
	check_size(s, "fallocate");
}

static void do_rename(unsigned a)
{
	struct slot *s = &slots[a], *t;
	unsigned b = (unsigned)below(NFILES);
	uint8_t *data;
	char old[64];

	snprintf(old, sizeof(old), "%s", s->name);
	t = &slots[b];
	if (b == a || !t->exists) {
		/* to a fresh name, maybe in the other directory */
		new_name(s, a);
		note(s, "rename %s -> %s", old, s->name);
		if (rename(old, s->name))
			die(s, "rename %s -> %s: %s", old, s->name, check_errno_name(errno));
		return;
	}
	/* over another live file: slot b now holds a's inode (and open fd) */
	note(s, "rename %s over %s", old, t->name);
	note(t, "replaced by rename of %s", old);
	if (close(t->fd))
		die(t, "close: %s", check_errno_name(errno));
	if (rename(old, t->name))
		die(s, "rename %s -> %s: %s", old, t->name, check_errno_name(errno));
	data = t->data;
	t->data = s->data;
	t->size = s->size;
	t->fd = s->fd;
	s->data = data;
	s->exists = false;
	s->fd = -1;
	s->size = 0;
	check_size(t, "rename over");
	if (access(old, F_OK) == 0 || errno != ENOENT)
		die(t, "after rename, %s still exists (%s)", old, check_errno_name(errno));
}

static void do_unlink(struct slot *s)
{
	note(s, "unlink %s", s->name);
	if (close(s->fd))
		die(s, "close: %s", check_errno_name(errno));
	if (unlink(s->name))
		die(s, "unlink %s: %s", s->name, check_errno_name(errno));
	s->exists = false;
	s->fd = -1;
	s->size = 0;
}

static void verify_all(struct slot *s, const char *what)
{
	check_size(s, what);
	compare(s, 0, MAX_SIZE, what);
}

static void do_reopen(struct slot *s)
{
	note(s, "close + open %s", s->name);
	if (close(s->fd))
		die(s, "close: %s", check_errno_name(errno));
	open_slot(s, 0);
	check_size(s, "reopen");
}

static void one_op(void)
{
	unsigned index = (unsigned)below(NFILES), total = 0, pick;
	struct slot *s = &slots[index];
	enum op op = OP_WRITE;

	for (unsigned i = 0; i < OP_COUNT; i++)
		total += op_weight[i];
	pick = (unsigned)below(total);
	for (unsigned i = 0; i < OP_COUNT; i++) {
		if (pick < op_weight[i]) {
			op = (enum op)i;
			break;
		}
		pick -= op_weight[i];
	}
	if (!s->exists) {
		do_create(s, index);
		op = OP_WRITE;
	}
	op_counts[op]++;
	switch (op) {
	case OP_WRITE:
		do_write(s);
		break;
	case OP_READ:
		do_read(s);
		break;
	case OP_TRUNCATE:
		do_truncate(s);
		break;
	case OP_FALLOCATE:
		do_fallocate(s);
		break;
	case OP_RENAME:
		do_rename(index);
		break;
	case OP_UNLINK:
		do_unlink(s);
		break;
	case OP_REOPEN:
		do_reopen(s);
		break;
	case OP_FSYNC:
		note(s, "fsync");
		if (fsync(s->fd))
			die(s, "fsync: %s", check_errno_name(errno));
		break;
	case OP_VERIFY:
		note(s, "verify");
		verify_all(s, "verify");
		break;
	case OP_COUNT:
		break;
	}
}

static bool probe_punch(void)
{
	int fd = open("probe", O_CREAT | O_RDWR, 0644);
	bool ok;

	if (fd < 0 || ftruncate(fd, 8192))
		die(NULL, "probe file: %s", check_errno_name(errno));
	ok = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
	if (!ok && errno != EOPNOTSUPP)
		die(NULL, "fallocate PUNCH_HOLE probe: %s", check_errno_name(errno));
	close(fd);
	unlink("probe");
	return ok;
}

static uint64_t parse_u64(const char *text, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text || *end)
		check_error("%s: not a number: \"%s\"", what, text);
	return v;
}

int main(int argc, char **argv)
{
	const char *ops_text = argc > 2 ? argv[2] : getenv("RDMAFS_FS_OPS");
	const char *seed_text = argc > 3 ? argv[3] : getenv("RDMAFS_FS_SEED");
	uint64_t ops = 100000;
	struct timespec t0, t1;
	const char *dir;
	double secs;

	if (ops_text && *ops_text)
		ops = parse_u64(ops_text, "operations");
	/* A fixed seed unless asked: a CI run passes or fails on the code, not on the draw. */
	if (seed_text && strcmp(seed_text, "random") == 0) {
		clock_gettime(CLOCK_REALTIME, &t0);
		seed = (uint64_t)t0.tv_sec * 1000003u ^ (uint64_t)t0.tv_nsec ^ (uint64_t)getpid();
	} else if (seed_text && *seed_text) {
		seed = parse_u64(seed_text, "seed");
	} else {
		seed = DEFAULT_SEED;
	}
	dir = fs_setup(argc, argv, "integrity");
	printf("seed %llu, %llu operations on %d files (replay: %s DIR %llu %llu)\n",
	       (unsigned long long)seed, (unsigned long long)ops, NFILES, argv[0],
	       (unsigned long long)ops, (unsigned long long)seed);
	fflush(stdout);
	rng = seed;
	io_buf = malloc(MAX_SIZE);
	if (!io_buf || mkdir("sub", 0755)) {
		fprintf(stderr, "setup: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned i = 0; i < NFILES; i++) {
		slots[i].fd = -1;
		slots[i].data = malloc(MAX_SIZE);
		if (!slots[i].data) {
			fprintf(stderr, "out of memory\n");
			return 1;
		}
	}
	punch_supported = probe_punch();
	if (!punch_supported)
		printf("note: FALLOC_FL_PUNCH_HOLE not supported, fallocate uses modes 0 and "
		       "KEEP_SIZE\n");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (op_index = 0; op_index < ops; op_index++) {
		one_op();
		if ((op_index + 1) % 20000 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("%llu operations, %.1f s\n", (unsigned long long)op_index + 1,
			       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
			fflush(stdout);
		}
	}
	/* the end: every file read in full, then again after close and open */
	for (unsigned i = 0; i < NFILES; i++) {
		struct slot *s = &slots[i];

		if (!s->exists)
			continue;
		verify_all(s, "final verify");
		do_reopen(s);
		verify_all(s, "final verify after reopen");
		if (close(s->fd))
			die(s, "close: %s", check_errno_name(errno));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%llu operations in %.1f s:", (unsigned long long)ops, secs);
	for (unsigned i = 0; i < OP_COUNT; i++)
		printf(" %s %llu", op_names[i], op_counts[i]);
	printf("\n");
	if (op_counts[OP_READ] == 0 && ops >= 1000) {
		fprintf(stderr, "FAIL: no reads were checked\n");
		return 1;
	}
	if (chdir("/") == 0 && !getenv("RDMAFS_TEST_KEEP")) {
		int ret = fs_remove_tree(dir);

		if (ret) {
			fprintf(stderr, "FAIL: cleanup: %s\n", check_errno_name(-ret));
			return 1;
		}
	}
	printf("pass (seed %llu)\n", (unsigned long long)seed);
	return 0;
}
