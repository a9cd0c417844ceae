/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs_fs.h, rfs_create(): over tcp a client keeps one connection to a
 * storage daemon per slot of its calling threads (RFS_TCP_CONNS slots, a
 * thread keeps its own), so that a thread waiting for its answer reads its own
 * socket; over verbs, one. THREADS threads write and read back files of their
 * own through one client at the same time: every byte reads back as written,
 * from its writer and from the others, and the connections made to storage
 * are THREADS over tcp, 1 over rdma.
 *
 *   client-conns DAEMON_BINARY tcp|rdma
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs_fs.h"
#include "harness.h"

#define THREADS	  4
#define ROUNDS	  20
#define FILE_LEN  ((2u << 20) + 4096u) /* three chunks, the last one partial */
#define HANG_SECS 150

struct worker {
	struct rfs *fs;
	unsigned n;
	uint64_t ino;
	struct rfs_layout layout;
	int error;
	char what[96];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t *want = malloc(FILE_LEN), *got = malloc(FILE_LEN);
	int ret = want && got ? 0 : -ENOMEM;

	for (unsigned r = 0; r < ROUNDS && !ret; r++) {
		fill_pattern(want, FILE_LEN, w->n * 1000u + r);
		ret = rfs_write(w->fs, w->ino, &w->layout, 0, FILE_LEN, want, false, NULL);
		snprintf(w->what, sizeof(w->what), "thread %u round %u: write", w->n, r);
		if (!ret) {
			/* a small read too: one chunk, one piece */
			ret = rfs_read(w->fs, w->ino, &w->layout, 4096, 4096, got);
			snprintf(w->what, sizeof(w->what), "thread %u round %u: 4 KiB read", w->n,
				 r);
			if (!ret && memcmp(got, want + 4096, 4096))
				ret = -EILSEQ;
		}
		if (!ret) {
			ret = rfs_read(w->fs, w->ino, &w->layout, 0, FILE_LEN, got);
			snprintf(w->what, sizeof(w->what), "thread %u round %u: read", w->n, r);
			if (!ret && memcmp(got, want, FILE_LEN))
				ret = -EILSEQ;
		}
	}
	w->error = ret;
	free(want);
	free(got);
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	struct daemon_proc d;
	struct rfs_stats st;
	struct rfs *fs;
	char data_dir[300];
	uint8_t *want, *got;
	uint64_t expect;

	harness_client_test(argc, argv, "conns", HANG_SECS);
	snprintf(data_dir, sizeof(data_dir), "%s/data", harness_dir());
	REQUIRE(daemon_start(&d, data_dir, NULL) == 0, "the daemon did not start");
	fs = fs_of(&d, 0);
	for (unsigned i = 0; i < THREADS; i++) {
		struct rfs_entry e;
		uint64_t handle;
		char name[16];

		snprintf(name, sizeof(name), "f%u", i);
		fs_create_file(fs, name, &handle, &e);
		REQUIRE(e.has_layout, "CREATE of %s gave no layout", name);
		w[i] = (struct worker){
			.fs = fs, .n = i, .ino = (uint64_t)e.attr.st_ino, .layout = e.layout};
	}
	for (unsigned i = 0; i < THREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0, "pthread_create");
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].error == 0, "%s: %s", w[i].what,
		      w[i].error == -EILSEQ ? "not what was written" : strerror(-w[i].error));
	}
	/* each file read back by this thread, which wrote none of them */
	want = malloc(FILE_LEN);
	got = malloc(FILE_LEN);
	REQUIRE(want && got, "out of memory");
	for (unsigned i = 0; i < THREADS; i++) {
		int ret = rfs_read(fs, w[i].ino, &w[i].layout, 0, FILE_LEN, got);

		fill_pattern(want, FILE_LEN, i * 1000u + ROUNDS - 1);
		CHECK(ret == 0, "file %u read by another thread: %s", i, strerror(-ret));
		CHECK(ret || memcmp(want, got, FILE_LEN) == 0,
		      "file %u read by another thread: not its last write", i);
	}
	rfs_stats_get(fs, &st);
	/* the main thread's read took a slot of its own: one more over tcp */
	expect = strcmp(harness_kind, "tcp") == 0 ? THREADS + 1 : 1;
	CHECK(st.targets[RFS_TARGET_STORAGE].connects == expect,
	      "%s: %llu connections made to the storage daemon, expected %llu", harness_kind,
	      (unsigned long long)st.targets[RFS_TARGET_STORAGE].connects,
	      (unsigned long long)expect);
	CHECK(st.targets[RFS_TARGET_STORAGE].reconnects == 0, "%llu reconnects",
	      (unsigned long long)st.targets[RFS_TARGET_STORAGE].reconnects);
	printf("%s: %u threads x %u rounds written and read back, %llu connections to storage\n",
	       harness_kind, THREADS, ROUNDS,
	       (unsigned long long)st.targets[RFS_TARGET_STORAGE].connects);
	free(want);
	free(got);
	rfs_destroy(fs);
	daemon_stop(&d, SIGTERM);
	harness_cleanup();
	return check_exit_status();
}
