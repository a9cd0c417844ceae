/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * soak: the writer and the verifier of tests/fault/crash-soak.sh.
 *
 *   soak write FILE LOG SEED STOP_FILE MAX_MS
 *   soak verify FILE LOG SEED
 *
 * write: until STOP_FILE exists (or MAX_MS passed), writes random sizes
 * (1 B .. 512 KiB) at random offsets of the first REGION bytes of FILE and
 * calls fsync after every 1 to 4 writes. Every write's content is a function
 * of (SEED, its number, the file offset), so the verifier can recompute it.
 * LOG (a local file) records each step before and after it happens:
 *
 *   W op off len     write op is about to be issued
 *   E op errno       ... and failed (its bytes may or may not have landed)
 *   S op             fsync after op succeeded: it covers every write since
 *                    the previous fsync attempt that did not fail
 *   F op errno       fsync after op failed: those writes are covered never
 *   O errno          open failed (retried)
 *
 * A write is covered when it succeeded and the first fsync after it
 * succeeded: then rdmafs promised it durable. A failed fsync uncovers the
 * writes before it for good, as on Linux after a writeback error.
 *
 * verify: reads FILE (from a mount that never cached it) and checks every
 * byte that a covered write wrote last among the covered writes: it must hold
 * that write's byte, or the byte of a later write that was not covered (it
 * may have landed). Prints "B bytes verified, L bytes lost" and the first
 * lost ranges. Exit 0 nothing lost, 1 bytes lost or FILE unreadable, 99 the
 * check itself could not run (LOG unreadable or malformed, no memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "check.h"

#define REGION	    (6u << 20) /* spans six 1 MiB chunks: several daemons */
#define MAX_WRITE   (512u << 10)
#define SHOW_LOST   10
#define LOG_LINE_SZ 128

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The byte write @op of writer @seed puts at file offset @pos. */
static uint8_t data_byte(uint64_t seed, uint64_t op, uint64_t pos)
{
	return (uint8_t)mix64(seed * 0x9e3779b97f4a7c15ull ^ op * 0xbf58476d1ce4e5b9ull ^ pos);
}

static uint64_t rnd(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return mix64(*state);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return !errno && end != s && !*end;
}

/* ---- write ---- */

static int do_write(const char *path, const char *log_path, uint64_t seed, const char *stop,
		    uint64_t max_ms)
{
	uint64_t state = seed, deadline = now_ms() + max_ms, op = 0;
	uint8_t *buf = malloc(MAX_WRITE);
	int log_fd, fd = -1;

	log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (!buf || log_fd < 0) {
		fprintf(stderr, "ERROR: soak write: cannot open the log %s or no memory\n",
			log_path);
		free(buf);
		return CHECK_EXIT_ERROR;
	}
	while (access(stop, F_OK) != 0 && now_ms() < deadline) {
		unsigned batch = 1 + (unsigned)(rnd(&state) % 4);

		if (fd < 0) {
			fd = open(path, O_RDWR | O_CREAT, 0644);
			if (fd < 0) {
				dprintf(log_fd, "O %d\n", errno);
				usleep(50000);
				continue;
			}
		}
		for (unsigned i = 0; i < batch; i++) {
			uint64_t off, len, r = rnd(&state);
			ssize_t n;

			op++;
			off = r % (REGION - 1);
			/* half small writes, half up to MAX_WRITE */
			len = 1 + (r >> 40) % ((r & 1) ? 8192 : MAX_WRITE);
			if (len > REGION - off)
				len = REGION - off;
			for (uint64_t k = 0; k < len; k++)
				buf[k] = data_byte(seed, op, off + k);
			dprintf(log_fd, "W %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", op, off, len);
			n = pwrite(fd, buf, len, (off_t)off);
			if (n != (ssize_t)len)
				dprintf(log_fd, "E %" PRIu64 " %d\n", op, n < 0 ? errno : EIO);
		}
		if (fsync(fd) == 0)
			dprintf(log_fd, "S %" PRIu64 "\n", op);
		else
			dprintf(log_fd, "F %" PRIu64 " %d\n", op, errno);
	}
	if (fd >= 0)
		close(fd); /* what close reports is not a promise: fsync's was */
	close(log_fd);
	free(buf);
	return 0;
}

/* ---- verify ---- */

struct wop {
	uint64_t off, len;
	bool failed;
	bool covered;
};

struct wlog {
	struct wop *ops; /* ops[op - 1] */
	uint64_t count;
};

/* Reads LOG into @l. Returns 0, or -1 after saying why (test trouble). */
static int read_log(const char *path, struct wlog *l)
{
	char line[LOG_LINE_SZ];
	uint64_t cap = 0, first_open = 1, lineno = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "ERROR: cannot open the log %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		uint64_t op, off, len;
		int err;
		char kind;

		lineno++;
		if (sscanf(line, "W %" SCNu64 " %" SCNu64 " %" SCNu64, &op, &off, &len) == 3) {
			if (op != l->count + 1 || off + len > REGION)
				goto bad;
			if (l->count == cap) {
				struct wop *n;

				cap = cap ? cap * 2 : 1024;
				n = realloc(l->ops, cap * sizeof(*n));
				if (!n)
					goto bad;
				l->ops = n;
			}
			l->ops[l->count++] = (struct wop){.off = off, .len = len};
		} else if (sscanf(line, "E %" SCNu64 " %d", &op, &err) == 2) {
			if (op == 0 || op > l->count)
				goto bad;
			l->ops[op - 1].failed = true;
		} else if (sscanf(line, "%c %" SCNu64, &kind, &op) == 2 &&
			   (kind == 'S' || kind == 'F')) {
			if (op > l->count)
				goto bad;
			for (uint64_t i = first_open; i <= op; i++)
				l->ops[i - 1].covered = kind == 'S' && !l->ops[i - 1].failed;
			first_open = op + 1;
		} else if (line[0] != 'O') {
			goto bad;
		}
	}
	fclose(f);
	return 0;
bad:
	fprintf(stderr, "ERROR: the log %s is malformed at line %" PRIu64 ": %s", path, lineno,
		line);
	fclose(f);
	return -1;
}

static int do_verify(const char *path, const char *log_path, uint64_t seed)
{
	struct wlog l = {0};
	int64_t *last = NULL; /* per byte: the covered op that wrote it last, or 0 */
	uint8_t *got = NULL;
	uint64_t verified = 0, lost = 0, shown = 0, size;
	struct stat st;
	ssize_t n = 0;
	int fd = -1, ret = CHECK_EXIT_ERROR;

	if (read_log(log_path, &l))
		goto out;
	last = calloc(REGION, sizeof(*last));
	got = malloc(REGION);
	if (!last || !got) {
		fprintf(stderr, "ERROR: no memory\n");
		goto out;
	}
	for (uint64_t i = 0; i < l.count; i++)
		if (l.ops[i].covered)
			for (uint64_t p = l.ops[i].off; p < l.ops[i].off + l.ops[i].len; p++)
				last[p] = (int64_t)i + 1;
	ret = CHECK_EXIT_FAIL;
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "FAIL: %s: cannot open or stat after the restart: %s\n", path,
			strerror(errno));
		goto out;
	}
	size = (uint64_t)st.st_size < REGION ? (uint64_t)st.st_size : REGION;
	for (uint64_t done = 0; done < size; done += (uint64_t)n) {
		n = pread(fd, got + done, size - done, (off_t)done);
		if (n <= 0) {
			fprintf(stderr, "FAIL: %s: read at %" PRIu64 " after the restart: %s\n",
				path, done, n < 0 ? strerror(errno) : "unexpected end of file");
			goto out;
		}
	}
	for (uint64_t p = 0; p < REGION; p++) {
		uint64_t op = (uint64_t)last[p];
		bool ok;

		if (!op)
			continue;
		verified++;
		ok = p < size && got[p] == data_byte(seed, op, p);
		/* a later write that was not covered may have landed */
		for (uint64_t j = op; !ok && j < l.count; j++)
			ok = !l.ops[j].covered && p >= l.ops[j].off &&
			     p < l.ops[j].off + l.ops[j].len && p < size &&
			     got[p] == data_byte(seed, j + 1, p);
		if (ok)
			continue;
		lost++;
		if (shown < SHOW_LOST && (p == 0 || last[p - 1] != last[p] || lost == 1)) {
			shown++;
			fprintf(stderr,
				"LOST: %s byte %" PRIu64 " (covered write %" PRIu64 " of %" PRIu64
				"@%" PRIu64 "): %s, expected 0x%02x\n",
				path, p, op, l.ops[op - 1].len, l.ops[op - 1].off,
				p < size ? "wrong content" : "past the end of the file",
				data_byte(seed, op, p));
		}
	}
	printf("%s: %" PRIu64 " writes, %" PRIu64 " bytes verified, %" PRIu64 " bytes lost\n", path,
	       l.count, verified, lost);
	ret = lost ? CHECK_EXIT_FAIL : 0;
out:
	if (fd >= 0)
		close(fd);
	free(got);
	free(last);
	free(l.ops);
	return ret;
}

int main(int argc, char **argv)
{
	uint64_t seed, max_ms;

	if (argc == 7 && !strcmp(argv[1], "write") && parse_u64(argv[4], &seed) &&
	    parse_u64(argv[6], &max_ms))
		return do_write(argv[2], argv[3], seed, argv[5], max_ms);
	if (argc == 5 && !strcmp(argv[1], "verify") && parse_u64(argv[4], &seed))
		return do_verify(argv[2], argv[3], seed);
	fprintf(stderr, "usage: soak write FILE LOG SEED STOP_FILE MAX_MS\n"
			"       soak verify FILE LOG SEED\n");
	return CHECK_EXIT_ERROR;
}
