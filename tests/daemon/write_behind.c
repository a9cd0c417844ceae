/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Write-behind (rdmafs_fs.h, rfs_options.write_behind, rfs_file_write()):
 *
 *   order:  writes answered before their daemons, many of them overlapping,
 *           read back through a fresh file object as the last write left
 *           each byte; no write starts while an older one it overlaps is in
 *           flight (the daemons may run two requests in either order), and
 *           at most write_behind are in flight, at least two at some point
 *           (or nothing here was written behind);
 *   errors: a write to a daemon killed before it is answered at once, and
 *           the fsync after it fails; an error met by a settled write comes
 *           with the next write and the next sync, never lost to a success.
 *
 * rfs_write_start() and rfs_write_finish() are wrapped at link time to see
 * the jobs in flight; the outcome, not the time, is checked.
 *
 *   client-write-behind DAEMON_BINARY tcp|rdma
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs_fs.h"
#include "harness.h"

#define HANG_SECS 150
#define BLOCK	  4096u
#define JOBS_MAX  64

/* ---- the jobs in flight, seen through the wrappers ---------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct rfs_wjob *job;
	uint64_t ino, start, end;
} flying[JOBS_MAX];
static unsigned in_flight, most_in_flight, overlaps;

int __real_rfs_write_start(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
			   uint64_t off, size_t len, const void *src, struct rfs_wjob **out);
int __wrap_rfs_write_start(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
			   uint64_t off, size_t len, const void *src, struct rfs_wjob **out);
int __real_rfs_write_finish(struct rfs_wjob *job, struct rfs_layout *layout, uint64_t *written);
int __wrap_rfs_write_finish(struct rfs_wjob *job, struct rfs_layout *layout, uint64_t *written);

int __wrap_rfs_write_start(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout,
			   uint64_t off, size_t len, const void *src, struct rfs_wjob **out)
{
	uint64_t start = off / BLOCK * BLOCK, end = (off + len + BLOCK - 1) / BLOCK * BLOCK;
	int ret;

	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < JOBS_MAX; i++)
		if (flying[i].job && flying[i].ino == ino && flying[i].start < end &&
		    start < flying[i].end)
			overlaps++;
	pthread_mutex_unlock(&lock);
	ret = __real_rfs_write_start(fs, ino, layout, off, len, src, out);
	if (ret)
		return ret;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < JOBS_MAX; i++) {
		if (flying[i].job)
			continue;
		flying[i].job = *out;
		flying[i].ino = ino;
		flying[i].start = start;
		flying[i].end = end;
		break;
	}
	if (++in_flight > most_in_flight)
		most_in_flight = in_flight;
	pthread_mutex_unlock(&lock);
	return 0;
}

int __wrap_rfs_write_finish(struct rfs_wjob *job, struct rfs_layout *layout, uint64_t *written)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < JOBS_MAX; i++)
		if (flying[i].job == job)
			flying[i].job = NULL;
	in_flight--;
	pthread_mutex_unlock(&lock);
	return __real_rfs_write_finish(job, layout, written);
}

/* ---- helpers ------------------------------------------------------------------------ */

/* A new file as the mount has one: its size and layout from CREATE's answer. */
static struct rfs_file *new_file(struct rfs *fs, const char *name, uint64_t *handle,
				 struct rfs_entry *e)
{
	struct rfs_file *f;
	struct stat st;

	fs_create_file(fs, name, handle, e);
	REQUIRE(rfs_file_create(fs, (uint64_t)e->attr.st_ino, &f) == 0, "rfs_file_create");
	rfs_file_merge(f, e, &st, NULL, RFS_SEQ_NOW);
	return f;
}

static int file_write(struct rfs_file *f, uint64_t off, const uint8_t *src, size_t len)
{
	bool due;

	return rfs_file_write(f, off, len, src, false, &due);
}

/* ---- order ---------------------------------------------------------------------------- */

/*
 * 1 MiB, then 4 KiB writes over it that overlap each other and the first
 * (and some that straddle two blocks), then the whole file read back through
 * a file object that never wrote: every byte as the last write left it.
 */
static void test_order(struct rfs *fs)
{
	const size_t size = 1u << 20;
	uint8_t *want = malloc(size), *got = malloc(size), piece[2 * BLOCK];
	unsigned failed = check_failure_count();
	struct rfs_file *f, *reader;
	uint64_t handle, ino;
	struct rfs_entry e;
	size_t n;
	int ret;

	REQUIRE(want && got, "out of memory");
	f = new_file(fs, "order", &handle, &e);
	ino = (uint64_t)e.attr.st_ino;
	memset(want, 0x11, size);
	ret = file_write(f, 0, want, size);
	REQUIRE(ret == 0, "order: the first 1 MiB: %s", strerror(-ret));
	for (unsigned i = 1; i <= 96; i++) {
		/* blocks 0..7 over and over; every third write straddles two blocks */
		uint64_t off = (uint64_t)(i * 5 % 8) * BLOCK + (i % 3 == 0 ? BLOCK / 2 : 0);
		size_t len = i % 3 == 0 ? BLOCK : BLOCK / 2 + i;

		memset(piece, (int)(i & 0xff), len);
		memcpy(want + off, piece, len);
		ret = file_write(f, off, piece, len);
		REQUIRE(ret == 0, "order: write %u at %llu: %s", i, (unsigned long long)off,
			strerror(-ret));
	}
	pthread_mutex_lock(&lock);
	CHECK(overlaps == 0,
	      "order: %u writes started while an older one they overlap was in"
	      " flight",
	      overlaps);
	CHECK(most_in_flight >= 2 && most_in_flight <= rfs_write_behind(fs),
	      "order: at most %u writes in flight, want 2 to %u", most_in_flight,
	      rfs_write_behind(fs));
	pthread_mutex_unlock(&lock);
	ret = rfs_file_sync(f, NULL, RFS_SYNC_FSYNC);
	REQUIRE(ret == 0, "order: fsync: %s", strerror(-ret));

	REQUIRE(rfs_file_create(fs, ino, &reader) == 0, "rfs_file_create");
	rfs_file_merge(reader, &e, &(struct stat){0}, NULL, RFS_SEQ_NOW);
	/* CREATE said size 0: the reader learns the size as a new opener would */
	ret = rfs_file_getattr(fs, reader, NULL, ino, &(struct stat){0});
	REQUIRE(ret == 0, "order: getattr: %s", strerror(-ret));
	ret = rfs_file_read(reader, 0, size, got, &n);
	REQUIRE(ret == 0 && n == size, "order: read back %zu of %zu bytes: %s", n, size,
		strerror(-ret));
	for (size_t i = 0; i < size; i++)
		if (got[i] != want[i]) {
			CHECK(false, "order: byte %zu is %#x, the last write there left %#x", i,
			      got[i], want[i]);
			break;
		}
	rfs_file_destroy(reader);
	REQUIRE(rfs_release(fs, NULL, ino, handle, NULL) == 0, "order: release");
	rfs_file_destroy(f);
	if (check_failure_count() == failed)
		printf("order: 97 writes, up to %u in flight, none overlapping an older one in"
		       " flight; read back as written\n",
		       most_in_flight);
	free(want);
	free(got);
}

/* ---- errors --------------------------------------------------------------------------- */

/* The uuid in @data_dir's rdmafs-format marker. */
static void marker_uuid(const char *data_dir, uint8_t uuid[RFS_UUID_LEN])
{
	char path[600], line[128];
	unsigned b[RFS_UUID_LEN];
	bool found = false;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/rdmafs-format", data_dir);
	fp = fopen(path, "r");
	REQUIRE(fp, "cannot read %s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), fp))
		found = sscanf(line, "uuid %2x%2x%2x%2x-%2x%2x-%2x%2x-%2x%2x-%2x%2x%2x%2x%2x%2x",
			       &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9],
			       &b[10], &b[11], &b[12], &b[13], &b[14], &b[15]) == RFS_UUID_LEN;
	fclose(fp);
	REQUIRE(found, "no uuid in %s", path);
	for (int i = 0; i < RFS_UUID_LEN; i++)
		uuid[i] = (uint8_t)b[i];
}

/* The first chunk index of @ino that @l places on (@on) or off (!@on) the daemon @uuid. */
static uint64_t chunk_where(const struct rfs_layout *l, uint64_t ino, const uint8_t *uuid, bool on)
{
	for (uint64_t index = 0; index < 4096; index++) {
		int d = rfs_layout_place(l, ino, index);

		REQUIRE(d >= 0, "rfs_layout_place: %s", strerror(-d));
		if ((memcmp(l->daemons[d], uuid, RFS_UUID_LEN) == 0) == on)
			return index;
	}
	REQUIRE(false, "no chunk of 4096 lands %s the storage daemon", on ? "on" : "off");
	return 0;
}

/*
 * A file over both daemons; the storage daemon @victim (not the service's)
 * is killed, and then written to.
 */
static void test_errors(struct rfs *fs, struct daemon_proc *victim, const char *victim_dir)
{
	unsigned failed = check_failure_count();
	uint8_t uuid[RFS_UUID_LEN], data[BLOCK];
	uint64_t handle, ino, dead, live, chunk;
	struct rfs_entry e;
	struct rfs_file *f;
	char name[32];
	int ret;

	marker_uuid(victim_dir, uuid);
	/* the storage daemon registers after the service: wait until layouts name it */
	for (unsigned i = 0;; i++) {
		snprintf(name, sizeof(name), "errors%u", i);
		fs_create_file(fs, name, &handle, &e);
		if (e.has_layout && e.layout.stripe_width == 2)
			break;
		REQUIRE(i < 200, "no layout over both daemons after %u files", i + 1);
		rfs_release(fs, NULL, (uint64_t)e.attr.st_ino, handle, NULL);
		usleep(100000);
	}
	ino = (uint64_t)e.attr.st_ino;
	REQUIRE(rfs_file_create(fs, ino, &f) == 0, "rfs_file_create");
	rfs_file_merge(f, &e, &(struct stat){0}, NULL, RFS_SEQ_NOW);
	chunk = e.layout.chunk_size;
	dead = chunk_where(&e.layout, ino, uuid, true);
	live = chunk_where(&e.layout, ino, uuid, false);
	memset(data, 0x5a, sizeof(data));
	ret = file_write(f, live * chunk, data, sizeof(data));
	REQUIRE(ret == 0, "errors: a write to the service's daemon: %s", strerror(-ret));
	ret = file_write(f, dead * chunk, data, sizeof(data));
	REQUIRE(ret == 0, "errors: a write to the storage daemon: %s", strerror(-ret));
	ret = rfs_file_sync(f, NULL, RFS_SYNC_FSYNC);
	REQUIRE(ret == 0, "errors: fsync with both daemons up: %s", strerror(-ret));

	daemon_stop(victim, SIGKILL);
	ret = file_write(f, dead * chunk + BLOCK, data, sizeof(data));
	CHECK(ret == 0, "errors: a write behind to a killed daemon was not answered at once: %s",
	      strerror(-ret));
	ret = rfs_file_sync(f, NULL, RFS_SYNC_FSYNC);
	CHECK(ret != 0, "errors: fsync after a write to a killed daemon succeeded");

	/* settled by a stat (which answers as it can), reported by the next write */
	ret = file_write(f, dead * chunk + 2 * BLOCK, data, sizeof(data));
	CHECK(ret == 0, "errors: the second write behind was not answered at once: %s",
	      strerror(-ret));
	rfs_file_getattr(fs, f, NULL, ino, &(struct stat){0});
	ret = file_write(f, live * chunk + BLOCK, data, sizeof(data));
	CHECK(ret != 0, "errors: a write after a settled write failed succeeded");
	ret = rfs_file_sync(f, NULL, RFS_SYNC_FSYNC);
	CHECK(ret != 0, "errors: fsync after a settled write failed succeeded");

	rfs_release(fs, NULL, ino, handle, NULL);
	rfs_file_destroy(f);
	if (check_failure_count() == failed)
		printf("errors: writes to a killed daemon answered at once; their error came"
		       " with the next fsync and the next write\n");
}

int main(int argc, char **argv)
{
	struct daemon_proc meta, storage;
	char meta_dir[512], storage_dir[512];
	const char *extra[] = {"--metadata-uri", NULL, NULL};
	struct rfs *fs;

	harness_client_test(argc, argv, "write-behind", HANG_SECS);

	snprintf(meta_dir, sizeof(meta_dir), "%s/meta", harness_dir());
	snprintf(storage_dir, sizeof(storage_dir), "%s/storage", harness_dir());
	REQUIRE(daemon_start(&meta, meta_dir, NULL) == 0, "the metadata daemon did not start");
	extra[1] = meta.uri;
	REQUIRE(daemon_start(&storage, storage_dir, extra) == 0,
		"the storage daemon did not start");
	/* short calls: the writes to the killed daemon fail within seconds */
	fs = fs_of(&meta, 2000);
	REQUIRE(rfs_write_behind(fs) >= 2, "write-behind is off by default (%u)",
		rfs_write_behind(fs));

	test_order(fs);
	test_errors(fs, &storage, storage_dir);

	rfs_destroy(fs);
	REQUIRE(WEXITSTATUS(daemon_stop(&meta, SIGTERM)) == 0, "clean stop");
	return check_exit_status();
}
