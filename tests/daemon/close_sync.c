/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A close's commit (rdmafs_fs.h, rfs_file_sync(); rdmafs-daemon's data_sync):
 *
 *   batch:  with data_sync = batch (data_sync_ms a minute, so that only the
 *           fsync flushes here) a close's commit is answered before its
 *           flush (the daemon counts it deferred); an fsync after it commits
 *           again, durably, and the daemon flushes before it answers; a
 *           second fsync sends nothing; a file object made after a close
 *           through another one (a forgotten inode looked up again) commits
 *           every daemon at its first fsync; a file CREATE made commits only
 *           what it wrote;
 *   timed:  with data_sync_ms = 10 the daemon's flusher flushes a close's
 *           commit by itself;
 *   always: with data_sync = always the close's commit is on disk before
 *           its answer, so the fsync after it sends nothing.
 *
 * rfs_commit_alloc() is wrapped at link time to count the commits the client
 * sends and their kind; the daemon's counters say what it did with them.
 *
 *   client-close-sync DAEMON_BINARY tcp|rdma
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs_fs.h"
#include "harness.h"

#define HANG_SECS 150
#define BLOCK	  4096u

static unsigned sent[RFS_COMMIT_DURABLE + 1];

int __real_rfs_commit_alloc(struct rfs *fs, uint64_t ino, struct rfs_layout *layout,
			    uint64_t daemon_mask, uint64_t first_index, enum rfs_commit_kind kind,
			    struct rfs_alloc_report *report);
int __wrap_rfs_commit_alloc(struct rfs *fs, uint64_t ino, struct rfs_layout *layout,
			    uint64_t daemon_mask, uint64_t first_index, enum rfs_commit_kind kind,
			    struct rfs_alloc_report *report);

int __wrap_rfs_commit_alloc(struct rfs *fs, uint64_t ino, struct rfs_layout *layout,
			    uint64_t daemon_mask, uint64_t first_index, enum rfs_commit_kind kind,
			    struct rfs_alloc_report *report)
{
	sent[kind]++; /* one thread calls here: the test's */
	return __real_rfs_commit_alloc(fs, ino, layout, daemon_mask, first_index, kind, report);
}

/* Runs one rfs_file_sync() of @kind and checks the commits it sent: @close and @durable. */
static void sync_sends(struct rfs_file *f, enum rfs_sync_kind kind, const char *what,
		       unsigned close, unsigned durable)
{
	unsigned before_close = sent[RFS_COMMIT_CLOSE], before_durable = sent[RFS_COMMIT_DURABLE];
	int ret = rfs_file_sync(f, NULL, kind);

	REQUIRE(ret == 0, "%s: %s", what, strerror(-ret));
	CHECK(sent[RFS_COMMIT_CLOSE] - before_close == close &&
		      sent[RFS_COMMIT_DURABLE] - before_durable == durable,
	      "%s: sent %u close commits (want %u) and %u durable ones (want %u)", what,
	      sent[RFS_COMMIT_CLOSE] - before_close, close,
	      sent[RFS_COMMIT_DURABLE] - before_durable, durable);
}

static struct rfs_daemon_stats daemon_counts(struct rfs_daemon *c)
{
	struct rfs_daemon_stats ds;

	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "the daemon's stats");
	return ds;
}

/* A file object for @e's inode, as the mount makes one at a lookup. */
static struct rfs_file *file_of(struct rfs *fs, const struct rfs_entry *e)
{
	struct rfs_file *f;

	REQUIRE(rfs_file_create(fs, (uint64_t)e->attr.st_ino, &f) == 0, "rfs_file_create");
	rfs_file_merge(f, e, &(struct stat){0}, NULL, RFS_SEQ_NOW);
	return f;
}

/* A new file as the mount has one after its CREATE: made here, so nothing deferred before. */
static struct rfs_file *made_file(struct rfs *fs, const char *name, uint64_t *handle,
				  struct rfs_entry *e)
{
	struct rfs_file *f;

	fs_create_file(fs, name, handle, e);
	f = file_of(fs, e);
	rfs_file_made(f);
	return f;
}

/* Closes @f's handle and drops it, as the mount does at release and forget. */
static void file_done(struct rfs *fs, struct rfs_file *f, const struct rfs_entry *e,
		      uint64_t handle)
{
	rfs_file_destroy(f);
	rfs_release(fs, NULL, (uint64_t)e->attr.st_ino, handle, NULL);
}

static void write_block(struct rfs_file *f, uint64_t off, int byte)
{
	uint8_t data[BLOCK];
	bool due;
	int ret;

	memset(data, byte, sizeof(data));
	ret = rfs_file_write(f, off, sizeof(data), data, false, &due);
	REQUIRE(ret == 0, "write at %llu: %s", (unsigned long long)off, strerror(-ret));
}

/* made_file() with one block of @byte written and closed: the commit sent as a close's. */
static struct rfs_file *closed_file(struct rfs *fs, const char *name, int byte, uint64_t *handle,
				    struct rfs_entry *e)
{
	struct rfs_file *f = made_file(fs, name, handle, e);
	char what[64];

	write_block(f, 0, byte);
	snprintf(what, sizeof(what), "%s: a close", name);
	sync_sends(f, RFS_SYNC_CLOSE, what, 1, 0);
	return f;
}

/* Checks that the daemon flushed @want times since @before (the counts then). */
static void expect_flushes(struct rfs_daemon *c, struct rfs_daemon_stats *before, const char *what,
			   uint64_t want)
{
	struct rfs_daemon_stats ds = daemon_counts(c);

	CHECK(ds.data_flushes - before->data_flushes == want && ds.data_flush_errors == 0,
	      "%s: the daemon flushed %llu times (want %llu), %llu failed", what,
	      (unsigned long long)(ds.data_flushes - before->data_flushes),
	      (unsigned long long)want, (unsigned long long)ds.data_flush_errors);
	*before = ds;
}

static void test_batch(struct rfs *fs, struct rfs_daemon *c)
{
	struct rfs_daemon_stats ds = daemon_counts(c), now;
	struct rfs_file *f, *g;
	struct rfs_entry e;
	uint64_t handle;

	f = made_file(fs, "batch", &handle, &e);
	sync_sends(f, RFS_SYNC_FSYNC, "batch: an fsync of a file made and not written", 0, 0);
	write_block(f, 0, 0x11);
	sync_sends(f, RFS_SYNC_CLOSE, "batch: a close", 1, 0);
	now = daemon_counts(c);
	REQUIRE(now.commits_deferred == ds.commits_deferred + 1,
		"batch: the daemon deferred %llu commits at the close (want 1)",
		(unsigned long long)(now.commits_deferred - ds.commits_deferred));
	expect_flushes(c, &ds, "batch: after the close", 0);
	sync_sends(f, RFS_SYNC_FSYNC, "batch: an fsync after the close", 0, 1);
	expect_flushes(c, &ds, "batch: the fsync after the close", 1);
	sync_sends(f, RFS_SYNC_FSYNC, "batch: a second fsync", 0, 0);
	expect_flushes(c, &ds, "batch: a second fsync", 0);
	CHECK(ds.commits_deferred == now.commits_deferred, "batch: an fsync's commit was deferred");

	/* a close through f, then an fsync through a file object made after it */
	write_block(f, BLOCK, 0x22);
	sync_sends(f, RFS_SYNC_CLOSE, "batch: a second close", 1, 0);
	g = file_of(fs, &e);
	sync_sends(g, RFS_SYNC_FSYNC, "batch: an fsync through a new file object", 0, 1);
	expect_flushes(c, &ds, "batch: that fsync", 1);
	sync_sends(g, RFS_SYNC_FSYNC, "batch: its second fsync", 0, 0);
	rfs_file_destroy(g);
	file_done(fs, f, &e, handle);
	printf("batch: a close's commit deferred; the fsync after it durable, flushed first\n");
}

static void test_timed(struct rfs *fs, struct rfs_daemon *c)
{
	struct rfs_daemon_stats ds = daemon_counts(c), now;
	struct rfs_file *f;
	struct rfs_entry e;
	uint64_t handle;

	f = closed_file(fs, "timed", 0x44, &handle, &e);
	REQUIRE(daemon_counts(c).commits_deferred == ds.commits_deferred + 1,
		"timed: the daemon did not defer the close's commit");
	/* waited for, not timed: the hang guard bounds it */
	for (now = daemon_counts(c); now.data_flushes == ds.data_flushes; now = daemon_counts(c))
		usleep(10000);
	CHECK(now.data_flush_errors == 0, "timed: %llu data flushes failed",
	      (unsigned long long)now.data_flush_errors);
	file_done(fs, f, &e, handle);
	printf("timed: the flusher flushed a close's commit by itself\n");
}

static void test_always(struct rfs *fs, struct rfs_daemon *c)
{
	struct rfs_file *f;
	struct rfs_entry e;
	uint64_t handle;

	f = closed_file(fs, "always", 0x33, &handle, &e);
	sync_sends(f, RFS_SYNC_FSYNC, "always: an fsync after the close", 0, 0);
	file_done(fs, f, &e, handle);
	printf("always: a close's commit was durable, nothing left for fsync\n");
}

/* One daemon serving metadata and data with @conf_text, its test, and a clean stop. */
static void with_daemon(const char *name, const char *conf_text,
			void (*test)(struct rfs *fs, struct rfs_daemon *c))
{
	char conf[512], dir[512];
	struct daemon_proc d;
	struct rfs_daemon *c;
	struct rfs *fs;
	FILE *fp;

	snprintf(conf, sizeof(conf), "%s/%s.conf", harness_dir(), name);
	snprintf(dir, sizeof(dir), "%s/%s", harness_dir(), name);
	fp = fopen(conf, "w");
	REQUIRE(fp && fputs(conf_text, fp) >= 0 && fclose(fp) == 0, "write %s", conf);
	REQUIRE(daemon_start(&d, dir, (const char *[]){"--config", conf, NULL}) == 0,
		"the daemon (%s) did not start", name);
	fs = fs_of(&d, 10000);
	c = client_of(&d, 1u << 20);
	test(fs, c);
	rfs_daemon_close(c);
	rfs_destroy(fs);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
}

int main(int argc, char **argv)
{
	harness_client_test(argc, argv, "close-sync", HANG_SECS);
	with_daemon("batch", "[daemon]\ndata_sync = batch\ndata_sync_ms = 60000\n", test_batch);
	with_daemon("timed", "[daemon]\ndata_sync_ms = 10\n", test_timed);
	with_daemon("always", "[daemon]\ndata_sync = always\n", test_always);
	return check_exit_status();
}
