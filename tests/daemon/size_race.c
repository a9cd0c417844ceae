/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A write's batched size update against the truncate that follows it
 * (rdmafs_fs.h, struct rfs_file). rdmafs-fuse answers a write before it
 * sends the batched UPDATE_SIZE, so the application's next call, a truncate,
 * can run while that update is on its way. Whatever the order, the size the
 * truncate set is the size afterwards, at the service and in the client:
 *
 *   grow:   the update (of the write's smaller end) is answered, and its
 *           reply is merged only after the truncate grew the file: it must
 *           not shrink the client's size (a read inside the file then saw
 *           end of file);
 *   shrink: the update (of the write's larger end) is sent only after the
 *           truncate shrank the file: it must not grow the file back.
 *
 * The interleaving is forced by wrapping rfs_update_size() at link time: the
 * wrapper holds the update (after or before sending it) until the truncate
 * is done, or 500 ms, since a client that orders the two makes the truncate
 * wait for the update. The outcome, not the time, is checked.
 *
 * It also holds the schedule of those updates (due_schedule()).
 *
 *   client-size-race DAEMON_BINARY tcp|rdma
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs_fs.h"
#include "harness.h"

#define HANG_SECS 120

enum hold { HOLD_NONE, HOLD_AFTER_SENDING, HOLD_BEFORE_SENDING };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static enum hold hold;
static bool held, truncated;

/* Until the truncate is done, or 500 ms: the client may make the truncate wait for us. */
static void wait_for_truncate(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 500 * 1000 * 1000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&lock);
	held = true;
	pthread_cond_broadcast(&cond);
	while (!truncated)
		if (pthread_cond_timedwait(&cond, &lock, &until))
			break;
	pthread_mutex_unlock(&lock);
}

int __real_rfs_update_size(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t size,
			   const struct timespec *mtime, const struct rfs_alloc_report *report,
			   const struct rfs_layout *layout, struct rfs_entry *out);
int __wrap_rfs_update_size(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t size,
			   const struct timespec *mtime, const struct rfs_alloc_report *report,
			   const struct rfs_layout *layout, struct rfs_entry *out);

int __wrap_rfs_update_size(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t size,
			   const struct timespec *mtime, const struct rfs_alloc_report *report,
			   const struct rfs_layout *layout, struct rfs_entry *out)
{
	enum hold how;
	int ret;

	pthread_mutex_lock(&lock);
	how = hold;
	hold = HOLD_NONE; /* the first update only */
	pthread_mutex_unlock(&lock);
	if (how == HOLD_BEFORE_SENDING)
		wait_for_truncate();
	ret = __real_rfs_update_size(fs, cred, ino, size, mtime, report, layout, out);
	if (how == HOLD_AFTER_SENDING)
		wait_for_truncate();
	return ret;
}

struct writer {
	struct rfs_file *f;
	uint64_t off;
	size_t len;
	int ret;
};

/* What fs_write() does: the write, then (answered already) the batched size update. */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t *buf = malloc(w->len);
	bool due = false;

	REQUIRE(buf, "out of memory");
	memset(buf, 0x5a, w->len);
	w->ret = rfs_file_write(w->f, w->off, w->len, buf, false, &due);
	/* as if due: a file that grows for a second sends its update so */
	if (!w->ret)
		w->ret = rfs_file_sync(w->f, NULL, RFS_SYNC_SIZE);
	free(buf);
	return NULL;
}

/*
 * Writes @len bytes at @off of a new file (its update held as @how), truncates
 * it to @size meanwhile, and checks that the size is @size everywhere.
 */
static void race(struct rfs *fs, const char *name, enum hold how, uint64_t off, size_t len,
		 uint64_t size)
{
	struct rfs_setattr set = {.valid = RFS_SET_SIZE, .size = size};
	struct writer w = {.off = off, .len = len};
	unsigned failed = check_failure_count();
	struct timespec until;
	struct rfs_entry e;
	struct stat st;
	pthread_t thread;
	uint64_t ino;
	uint8_t byte;
	size_t got;
	int ret;

	/* as the mount does: the file takes its layout and size from CREATE's answer */
	fs_create_file(fs, name, &set.handle, &e);
	ino = (uint64_t)e.attr.st_ino;
	REQUIRE(rfs_file_create(fs, ino, &w.f) == 0, "rfs_file_create");
	rfs_file_merge(w.f, &e, &st, NULL, RFS_SEQ_NOW);
	pthread_mutex_lock(&lock);
	hold = how;
	held = truncated = false;
	pthread_mutex_unlock(&lock);
	REQUIRE(pthread_create(&thread, NULL, writer_main, &w) == 0, "pthread_create");

	/* the truncate, once the update is held */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&lock);
	while (!held)
		REQUIRE(pthread_cond_timedwait(&cond, &lock, &until) == 0,
			"%s: the write's size update never came", name);
	pthread_mutex_unlock(&lock);
	ret = rfs_file_setattr(fs, w.f, NULL, ino, &set, &st);
	pthread_mutex_lock(&lock);
	truncated = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	REQUIRE(ret == 0, "%s: truncate to %llu: %s", name, (unsigned long long)size,
		strerror(-ret));
	REQUIRE(w.ret == 0, "%s: write and size update: %s", name, strerror(-w.ret));

	/*
	 * Everywhere the truncate's size: reads at the end first (what the client
	 * holds, before a GETATTR could mend it), then the service and the client.
	 */
	ret = rfs_file_read(w.f, size - 1, 1, &byte, &got);
	CHECK(ret == 0 && got == 1, "%s: the last byte of %llu reads %zu bytes (%d)", name,
	      (unsigned long long)size, got, ret);
	ret = rfs_file_read(w.f, size, 1, &byte, &got);
	CHECK(ret == 0 && got == 0, "%s: a read at the end of %llu gives %zu bytes (%d)", name,
	      (unsigned long long)size, got, ret);
	ret = rfs_getattr(fs, NULL, ino, &e);
	CHECK(ret == 0 && (uint64_t)e.attr.st_size == size,
	      "%s: the service says size %lld after a truncate to %llu", name,
	      (long long)e.attr.st_size, (unsigned long long)size);
	ret = rfs_file_getattr(fs, w.f, NULL, ino, &st);
	CHECK(ret == 0 && (uint64_t)st.st_size == size,
	      "%s: the client says size %lld after a truncate to %llu", name, (long long)st.st_size,
	      (unsigned long long)size);
	REQUIRE(rfs_release(fs, NULL, ino, set.handle, NULL) == 0, "%s: release", name);
	rfs_file_destroy(w.f);
	if (check_failure_count() == failed)
		printf("%s: size %llu after the race, at the service and in the client\n", name,
		       (unsigned long long)size);
}

/*
 * rfs_file_write()'s *size_due (rdmafs_fs.h): not at a new file's first
 * write, which its close announces; due a second after the file began to
 * grow; not again at once after the update.
 */
static void due_schedule(struct rfs *fs)
{
	static const uint8_t data[100];
	struct timespec pause = {1, 100 * 1000 * 1000};
	struct rfs_setattr set = {0};
	struct rfs_entry e;
	struct rfs_file *f;
	struct stat st;
	uint64_t ino, t0;
	bool due = true;

	fs_create_file(fs, "due", &set.handle, &e);
	ino = (uint64_t)e.attr.st_ino;
	REQUIRE(rfs_file_create(fs, ino, &f) == 0, "rfs_file_create");
	rfs_file_merge(f, &e, &st, NULL, RFS_SEQ_NOW);
	REQUIRE(rfs_file_write(f, 0, sizeof(data), data, false, &due) == 0, "first write");
	CHECK(!due, "the first write of a new file is due a size update");
	nanosleep(&pause, NULL);
	REQUIRE(rfs_file_write(f, 100, sizeof(data), data, false, &due) == 0, "second write");
	CHECK(due, "a write 1.1 s after the file began to grow is not due a size update");
	REQUIRE(rfs_file_sync(f, NULL, RFS_SYNC_SIZE) == 0, "the size update");
	t0 = rdmafs_now_ms();
	REQUIRE(rfs_file_write(f, 200, sizeof(data), data, false, &due) == 0, "third write");
	/* only if this thread was not stalled for most of a second */
	if (rdmafs_now_ms() - t0 < 500)
		CHECK(!due, "a write right after the size update is due another");
	REQUIRE(rfs_file_sync(f, NULL, RFS_SYNC_CLOSE) == 0, "close's sync");
	REQUIRE(rfs_getattr(fs, NULL, ino, &e) == 0 && e.attr.st_size == 300,
		"the service's size after close: %lld", (long long)e.attr.st_size);
	REQUIRE(rfs_release(fs, NULL, ino, set.handle, NULL) == 0, "release");
	rfs_file_destroy(f);
	printf("due: no update at the first write, one a second into the growth\n");
}

int main(int argc, char **argv)
{
	struct daemon_proc d;
	char data_dir[512];
	struct rfs *fs;

	harness_client_test(argc, argv, "size-race", HANG_SECS);

	snprintf(data_dir, sizeof(data_dir), "%s/data", harness_dir());
	REQUIRE(daemon_start(&d, data_dir, NULL) == 0, "the daemon did not start");
	fs = fs_of(&d, 0);

	race(fs, "grow", HOLD_AFTER_SENDING, 64008, 913, 2091346);
	race(fs, "shrink", HOLD_BEFORE_SENDING, 0, 100000, 10);
	due_schedule(fs);

	rfs_destroy(fs);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	return check_exit_status();
}
