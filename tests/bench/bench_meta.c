// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-meta: the metadata service alone, through the client library (no
 * FUSE): creates, lookups, opens (an open and its close) and unlinks per
 * second with 1, 16 and 64 requests in flight (that many threads on one rfs
 * handle, one connection), beside the same calls on a local directory (open
 * O_CREAT|O_EXCL + close, stat, open + close, unlink) with as many threads.
 * Not a test: it prints a table and JSON.
 *
 *   bench-meta META_URI SECRET_FILE LOCAL_DIR [OUT.json]
 *
 * tests/bench/bench-meta.sh starts the service and runs this. Creates are
 * timed alone: each file's handle is released after the timed phase. Every
 * thread works in the same directory, as an application unpacking a tree
 * would. Environment: BENCH_META_FILES (per depth, default 10000).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

enum phase { PH_CREATE, PH_LOOKUP, PH_OPEN, PH_UNLINK, PH_COUNT };
static const char *const phase_name[PH_COUNT] = {"create", "lookup", "open", "unlink"};
static const unsigned depths[] = {1, 16, 64};
#define NDEPTHS (sizeof(depths) / sizeof(depths[0]))

struct run {
	struct rfs *fs;	   /* NULL: the local directory */
	const char *local; /* its path */
	uint64_t dir;	   /* rdmafs: the directory's inode */
	uint64_t *handles; /* per file, released after the create phase */
	uint64_t *inos;	   /* per file, from its create */
	unsigned files;
	atomic_uint next; /* the next file index to work on */
	enum phase phase;
	atomic_int error; /* the first error, negative errno */
};

static void name_of(unsigned i, char *buf, size_t size)
{
	snprintf(buf, size, "f%u", i);
}

static int one_rdmafs(struct run *r, unsigned i)
{
	struct rfs_entry e;
	uint64_t handle;
	char name[16];
	int ret;

	name_of(i, name, sizeof(name));
	switch (r->phase) {
	case PH_CREATE:
		ret = rfs_create_file(r->fs, NULL, r->dir, name, 0644, 0, 0,
				      O_CREAT | O_EXCL | O_WRONLY, &r->handles[i], NULL, &e);
		r->inos[i] = ret ? 0 : (uint64_t)e.attr.st_ino;
		return ret;
	case PH_LOOKUP:
		return rfs_lookup(r->fs, NULL, r->dir, name, &e);
	case PH_OPEN:
		ret = rfs_open(r->fs, NULL, r->inos[i], O_RDONLY, &handle, &e);
		return ret ? ret : rfs_release(r->fs, NULL, r->inos[i], handle, NULL);
	default:
		return rfs_unlink(r->fs, NULL, r->dir, name, NULL, NULL);
	}
}

static int one_local(struct run *r, unsigned i)
{
	char path[4096];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/f%u", r->local, i);
	switch (r->phase) {
	case PH_CREATE:
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	case PH_LOOKUP:
		return stat(path, &st) ? -errno : 0;
	case PH_OPEN:
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	default:
		return unlink(path) ? -errno : 0;
	}
}

static void *worker(void *arg)
{
	struct run *r = arg;
	unsigned i;

	while ((i = atomic_fetch_add(&r->next, 1)) < r->files && !atomic_load(&r->error)) {
		int ret = r->fs ? one_rdmafs(r, i) : one_local(r, i);

		if (ret) {
			int none = 0;

			atomic_compare_exchange_strong(&r->error, &none, ret);
		}
	}
	return NULL;
}

/* One phase with @threads threads; operations per second, or 0 after an error. */
static double timed(struct run *r, enum phase phase, unsigned threads)
{
	pthread_t tids[64];
	uint64_t start;
	double sec;

	r->phase = phase;
	atomic_store(&r->next, 0);
	start = rdmafs_now_ns();
	for (unsigned t = 0; t < threads; t++)
		if (pthread_create(&tids[t], NULL, worker, r)) {
			atomic_store(&r->error, -EAGAIN);
			threads = t;
			break;
		}
	for (unsigned t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	sec = (double)(rdmafs_now_ns() - start) / 1e9;
	if (atomic_load(&r->error)) {
		fprintf(stderr, "bench-meta: %s with %u in flight on %s: %s\n", phase_name[phase],
			threads, r->fs ? "rdmafs" : r->local, strerror(-atomic_load(&r->error)));
		return 0;
	}
	return r->files / sec;
}

/* Create, lookup, open, unlink with @threads in flight; the rates into @out. */
static void measure(struct run *r, unsigned threads, double out[PH_COUNT])
{
	atomic_store(&r->error, 0);
	out[PH_CREATE] = timed(r, PH_CREATE, threads);
	if (r->fs) {
		for (unsigned i = 0; i < r->files; i++)
			if (r->handles[i])
				rfs_release(r->fs, NULL, 0, r->handles[i], NULL);
		memset(r->handles, 0, r->files * sizeof(r->handles[0]));
	}
	out[PH_LOOKUP] = out[PH_CREATE] ? timed(r, PH_LOOKUP, threads) : 0;
	out[PH_OPEN] = out[PH_CREATE] ? timed(r, PH_OPEN, threads) : 0;
	/* whatever the phases before did, the directory must be empty after */
	atomic_store(&r->error, 0);
	out[PH_UNLINK] = timed(r, PH_UNLINK, threads);
}

static int open_service(const char *uri, const char *secret_file, struct rfs **out)
{
	struct rfs_options o;
	uint8_t *secret;
	size_t len;
	int ret = rdmafs_read_secret(secret_file, &secret, &len);

	if (ret) {
		fprintf(stderr, "bench-meta: secret %s: %s\n", secret_file, strerror(-ret));
		return ret;
	}
	rfs_options_init(&o);
	o.meta_uri = uri;
	o.secret = secret;
	o.secret_len = len;
	o.name = "bench-meta";
	o.buf_count = 1; /* no data moves */
	ret = rfs_create(&o, out);
	free(secret);
	if (ret)
		fprintf(stderr, "bench-meta: cannot reach %s: %s\n", uri, strerror(-ret));
	return ret;
}

int main(int argc, char **argv)
{
	double rates[2][NDEPTHS][PH_COUNT];
	const char *env = getenv("BENCH_META_FILES");
	struct run r = {0};
	struct rfs_entry e;
	struct rfs *fs;
	char dirname[32];
	FILE *json = NULL;
	int ret;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: bench-meta META_URI SECRET_FILE LOCAL_DIR [OUT.json]\n");
		return 2;
	}
	r.files = env ? (unsigned)strtoul(env, NULL, 10) : 10000;
	if (r.files == 0 || r.files > 10000000) {
		fprintf(stderr, "bench-meta: BENCH_META_FILES must be 1..10000000\n");
		return 2;
	}
	r.handles = calloc(r.files, sizeof(r.handles[0]));
	r.inos = calloc(r.files, sizeof(r.inos[0]));
	if (!r.handles || !r.inos)
		return 1;
	if (open_service(argv[1], argv[2], &fs))
		return 1;
	r.fs = fs;
	snprintf(dirname, sizeof(dirname), "bench-meta.%d", (int)getpid());
	ret = rfs_mkdir(r.fs, NULL, RFS_ROOT_INO, dirname, 0755, 0, 0, &e);
	if (ret) {
		fprintf(stderr, "bench-meta: mkdir on rdmafs: %s\n", strerror(-ret));
		return 1;
	}
	r.dir = (uint64_t)e.attr.st_ino;
	for (size_t d = 0; d < NDEPTHS; d++)
		measure(&r, depths[d], rates[0][d]);
	rfs_rmdir(r.fs, NULL, RFS_ROOT_INO, dirname);

	r.fs = NULL;
	r.local = argv[3];
	for (size_t d = 0; d < NDEPTHS; d++)
		measure(&r, depths[d], rates[1][d]);

	printf("\nbench-meta: the metadata service through the client library vs a local "
	       "directory, %u files per run\n",
	       r.files);
	printf("%-8s %9s %14s %14s %9s\n", "op", "in flight", "rdmafs ops/s", "local ops/s",
	       "vs-local");
	if (argc == 5 && !(json = fopen(argv[4], "w")))
		fprintf(stderr, "bench-meta: %s: %s\n", argv[4], strerror(errno));
	if (json)
		fprintf(json, "{\"files\": %u, \"baseline\": \"local directory\", \"results\": [",
			r.files);
	for (int p = 0; p < PH_COUNT; p++)
		for (size_t d = 0; d < NDEPTHS; d++) {
			double a = rates[0][d][p], b = rates[1][d][p], ratio = b ? a / b : 0;

			printf("%-8s %9u %14.0f %14.0f %9.3f\n", phase_name[p], depths[d], a, b,
			       ratio);
			if (json)
				fprintf(json,
					"%s\n {\"op\": \"%s\", \"in_flight\": %u, \"rdmafs\": "
					"%.0f, "
					"\"local\": %.0f, \"ratio_vs_local\": %.3f}",
					p || d ? "," : "", phase_name[p], depths[d], a, b, ratio);
		}
	if (json) {
		fprintf(json, "\n]}\n");
		fclose(json);
	}
	rfs_destroy(fs);
	free(r.handles);
	free(r.inos);
	return 0;
}
