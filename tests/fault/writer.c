/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fault-writer: the writer and the checker of the fault tests.
 *
 *   fault-writer write FILE LOG STOPFILE BLOCK ID
 *     Appends BLOCK-byte blocks of a pattern (a function of ID and the file
 *     offset) to FILE, each followed by fsync, without pause, until STOPFILE
 *     exists (or MAX_BYTES are written). After every successful fsync it
 *     appends "covered N" to LOG: bytes [0, N) are durable. A failed write or
 *     fsync is logged as "error OP ERRNO-NAME" and ends the writer (exit 3).
 *
 *   fault-writer verify FILE LOG ID
 *     Reads FILE and compares [0, N) with the pattern, N the last "covered"
 *     of LOG.
 *
 * Exit of verify (and of write for its own trouble): 0 every byte is right;
 * 1 FAIL, wrong or missing data (the first bad offset is printed); 99 ERROR,
 * the check itself could not run (usage, a log it cannot read, a read that
 * failed). A short file is missing data, so it is a FAIL.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define EXIT_WRITE    3
#define MAX_BYTES     (1ull << 30) /* bounds a writer nobody stops */
#define VERIFY_BUF    (1u << 20)
#define BLOCK_MAX     (16u << 20)
#define REPORT_RANGES 8

/* The MurmurHash3 finalizer: the pattern is unlikely to match stale or zero data. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint8_t pattern_byte(uint64_t id, uint64_t offset)
{
	return (uint8_t)(mix((id << 48) ^ (offset >> 3) ^ 0x5bd1e995ull) >> (8 * (offset & 7)));
}

static int parse_u64(const char *text, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int do_write(const char *path, const char *log_path, const char *stop, uint64_t block,
		    uint64_t id)
{
	uint8_t *buf = malloc(block);
	FILE *log = fopen(log_path, "a");
	uint64_t covered = 0;
	int fd = -1, ret = CHECK_EXIT_ERROR;

	if (!buf || !log) {
		fprintf(stderr, "ERROR: fault-writer: cannot allocate or open %s\n", log_path);
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(log, "error open %s\n", strerrorname_np(errno));
		fprintf(stderr, "fault-writer: open %s: %s\n", path, strerror(errno));
		ret = EXIT_WRITE;
		goto out;
	}
	while (covered < MAX_BYTES && access(stop, F_OK) != 0) {
		ssize_t n;

		for (uint64_t i = 0; i < block; i++)
			buf[i] = pattern_byte(id, covered + i);
		n = pwrite(fd, buf, block, (off_t)covered);
		if (n != (ssize_t)block) {
			fprintf(log, "error write %s\n", n < 0 ? strerrorname_np(errno) : "short");
			fprintf(stderr, "fault-writer: write %s at %" PRIu64 ": %s\n", path,
				covered, n < 0 ? strerror(errno) : "short write");
			ret = EXIT_WRITE;
			goto out;
		}
		if (fsync(fd)) {
			fprintf(log, "error fsync %s\n", strerrorname_np(errno));
			fprintf(stderr, "fault-writer: fsync %s: %s\n", path, strerror(errno));
			ret = EXIT_WRITE;
			goto out;
		}
		covered += block;
		fprintf(log, "covered %" PRIu64 "\n", covered);
		fflush(log);
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (log)
		fclose(log);
	free(buf);
	return ret;
}

/* The last "covered N" of @log_path into *@covered (0 if none). */
static int read_covered(const char *log_path, uint64_t *covered)
{
	FILE *log = fopen(log_path, "r");
	char line[128];

	if (!log)
		return -errno;
	*covered = 0;
	while (fgets(line, sizeof(line), log)) {
		uint64_t v;

		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "covered ", 8) == 0 && parse_u64(line + 8, UINT64_MAX, &v) == 0)
			*covered = v;
	}
	fclose(log);
	return 0;
}

static int do_verify(const char *path, const char *log_path, uint64_t id)
{
	uint8_t *buf = malloc(VERIFY_BUF);
	uint64_t covered = 0, at = 0, bad = 0, first_bad = UINT64_MAX, ranges = 0;
	bool in_bad = false;
	int fd = -1, ret = CHECK_EXIT_ERROR;

	if (!buf) {
		fprintf(stderr, "ERROR: out of memory\n");
		return CHECK_EXIT_ERROR;
	}
	if (read_covered(log_path, &covered)) {
		fprintf(stderr, "ERROR: cannot read %s: %s\n", log_path, strerror(errno));
		goto out;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* a file with fsynced bytes that cannot be opened: no verdict possible */
		fprintf(stderr, "ERROR: cannot open %s: %s\n", path, strerror(errno));
		goto out;
	}
	while (at < covered) {
		size_t want = covered - at < VERIFY_BUF ? (size_t)(covered - at) : VERIFY_BUF;
		ssize_t n = pread(fd, buf, want, (off_t)at);

		if (n < 0) {
			fprintf(stderr, "ERROR: read %s at %" PRIu64 ": %s\n", path, at,
				strerror(errno));
			goto out;
		}
		if (n == 0) {
			printf("FAIL: %s ends at %" PRIu64 " but %" PRIu64
			       " bytes were fsynced (%s)\n",
			       path, at, covered, log_path);
			ret = CHECK_EXIT_FAIL;
			goto out;
		}
		for (ssize_t i = 0; i < n; i++) {
			bool ok = buf[i] == pattern_byte(id, at + (uint64_t)i);

			if (!ok) {
				bad++;
				if (first_bad == UINT64_MAX)
					first_bad = at + (uint64_t)i;
				if (!in_bad && ranges++ < REPORT_RANGES)
					printf("  %s: wrong bytes from offset %" PRIu64
					       " (1 MiB slot %" PRIu64 ")\n",
					       path, at + (uint64_t)i, (at + (uint64_t)i) >> 20);
			}
			in_bad = !ok;
		}
		at += (uint64_t)n;
	}
	if (bad) {
		printf("FAIL: %s: %" PRIu64 " of %" PRIu64
		       " fsynced bytes wrong, the first at %" PRIu64 "\n",
		       path, bad, covered, first_bad);
		ret = CHECK_EXIT_FAIL;
		goto out;
	}
	printf("ok: %s: %" PRIu64 " fsynced bytes read back\n", path, covered);
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

int main(int argc, char **argv)
{
	uint64_t block, id;

	if (argc == 7 && strcmp(argv[1], "write") == 0) {
		if (parse_u64(argv[5], BLOCK_MAX, &block) || block == 0 ||
		    parse_u64(argv[6], 0xffff, &id)) {
			fprintf(stderr, "ERROR: bad BLOCK or ID\n");
			return CHECK_EXIT_ERROR;
		}
		return do_write(argv[2], argv[3], argv[4], block, id);
	}
	if (argc == 5 && strcmp(argv[1], "verify") == 0) {
		if (parse_u64(argv[4], 0xffff, &id)) {
			fprintf(stderr, "ERROR: bad ID\n");
			return CHECK_EXIT_ERROR;
		}
		return do_verify(argv[2], argv[3], id);
	}
	fprintf(stderr,
		"usage: %s write FILE LOG STOPFILE BLOCK ID\n"
		"       %s verify FILE LOG ID\n",
		argv[0], argv[0]);
	return CHECK_EXIT_ERROR;
}
