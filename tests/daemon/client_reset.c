/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The client core against xprt.h's contract for asynchronous calls: an
 * _async call either returns 0 and its callback runs exactly once, or returns
 * an error and its callback never runs. The striped I/O of rdmafs_fs.h counts
 * every chunk call as pending until its callback; if it counted one the
 * transport refused (a connection that died between taking it and sending),
 * the caller would wait forever.
 *
 *   client-reset DAEMON_BINARY tcp|rdma
 *
 * The program links with -Wl,--wrap=xprt_call_async and
 * -Wl,--wrap=xprt_call_wait (the way of a piece alone in its wave, which holds
 * the same contract), so every chunk call of the client core goes through a
 * wrapper below, which can reset the connection just before the real send:
 * exactly the race, made deterministic. A single-node daemon (metadata
 * service + storage) serves. Checks, on a file of four chunks and on one of
 * one chunk: with the first sends' connections reset, writes and reads
 * succeed (the core retries on a fresh connection) and read back what was
 * written; with a reset before every send they fail with an error instead of
 * hanging, and lose nothing written before. A hang is
 * caught by alarm(). Exit 0 pass, 1 fail, 77 no RDMA device.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_fs.h"
#include "harness.h"

#define MiB	  (1u << 20)
#define CHUNKS	  4
#define FILE_LEN  ((CHUNKS - 1) * MiB + 12345) /* the last chunk partial */
#define HANG_SECS 120
#define ONE_LEN	  20000 /* a file of one chunk */

static uint8_t want_one[ONE_LEN];

/* Resets still to do before a send (-1: before every send), and how many were done. */
static int resets_left;
static unsigned resets, sends;

int __real_xprt_call_async(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			   int timeout_ms, xprt_reply_cb cb, void *arg);
int __wrap_xprt_call_async(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			   int timeout_ms, xprt_reply_cb cb, void *arg);

int __real_xprt_call_wait(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			  int timeout_ms, xprt_reply_cb cb, void *arg);
int __wrap_xprt_call_wait(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			  int timeout_ms, xprt_reply_cb cb, void *arg);

/* Counts a chunk call's send and, while resets are armed, kills its connection first. */
static void before_send(struct xprt_conn *conn)
{
	int left = __atomic_load_n(&resets_left, __ATOMIC_SEQ_CST);

	__atomic_fetch_add(&sends, 1, __ATOMIC_SEQ_CST);
	if (left != 0) {
		/* The connection dies after the core took it and before it sends. */
		xprt_conn_reset(conn);
		__atomic_fetch_add(&resets, 1, __ATOMIC_SEQ_CST);
		if (left > 0)
			__atomic_fetch_sub(&resets_left, 1, __ATOMIC_SEQ_CST);
	}
}

int __wrap_xprt_call_async(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			   int timeout_ms, xprt_reply_cb cb, void *arg)
{
	before_send(conn);
	return __real_xprt_call_async(conn, method, req, req_len, timeout_ms, cb, arg);
}

/* A piece alone in its wave goes this way (xprt.h: the same contract as _async's). */
int __wrap_xprt_call_wait(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			  int timeout_ms, xprt_reply_cb cb, void *arg)
{
	before_send(conn);
	return __real_xprt_call_wait(conn, method, req, req_len, timeout_ms, cb, arg);
}

static void arm(int n)
{
	__atomic_store_n(&resets_left, n, __ATOMIC_SEQ_CST);
	__atomic_store_n(&resets, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&sends, 0, __ATOMIC_SEQ_CST);
}

/* Creates /NAME through the metadata service, and gives its layout. */
static uint64_t create_file(struct rfs *fs, const char *name, struct rfs_layout *layout)
{
	struct rfs_entry e;
	uint64_t handle;

	fs_create_file(fs, name, &handle, &e);
	*layout = e.layout;
	return (uint64_t)e.attr.st_ino;
}

/* Writes and reads back @len bytes, with @n resets armed before each of the two. */
static void write_read_check(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, size_t len,
			     uint64_t seed, int n, const char *what)
{
	uint8_t *src = malloc(len), *dst = malloc(len);
	int ret;

	REQUIRE(src && dst, "out of memory");
	fill_pattern(src, len, seed);
	arm(n);
	ret = rfs_write(fs, ino, layout, 0, len, src, true, NULL);
	REQUIRE(ret == 0, "%s: write: %s", what, strerror(-ret));
	REQUIRE(resets == (unsigned)n, "%s: write: expected %d resets, saw %u", what, n, resets);
	memset(dst, 0xee, len);
	arm(n);
	ret = rfs_read(fs, ino, layout, 0, len, dst);
	REQUIRE(ret == 0, "%s: read: %s", what, strerror(-ret));
	REQUIRE(resets == (unsigned)n, "%s: read: expected %d resets, saw %u", what, n, resets);
	REQUIRE(memcmp(src, dst, len) == 0, "%s: the data read back differs from what was written",
		what);
	free(src);
	free(dst);
}

/* The same checks on a file of one chunk (a lone piece, xprt_call_wait()). */
static void one_check(struct rfs *fs)
{
	struct rfs_layout layout;
	uint64_t ino = create_file(fs, "one", &layout);
	uint8_t buf[ONE_LEN];
	int ret;

	write_read_check(fs, ino, &layout, ONE_LEN, 4, 0, "one chunk, no reset");
	REQUIRE(sends == 1, "one chunk: the wrapper saw %u calls for its read, not 1", sends);
	write_read_check(fs, ino, &layout, ONE_LEN, 5, 1,
			 "one chunk, one reset per write and read");
	arm(-1);
	memset(buf, 0, sizeof(buf));
	ret = rfs_write(fs, ino, &layout, 0, ONE_LEN, buf, true, NULL);
	REQUIRE(ret == -EIO, "one chunk, every send on a dead connection: write %s, not EIO",
		strerror(-ret));
	ret = rfs_read(fs, ino, &layout, 0, ONE_LEN, buf);
	REQUIRE(ret == -EIO, "one chunk, every send on a dead connection: read %s, not EIO",
		strerror(-ret));
	arm(0);
	fill_pattern(want_one, ONE_LEN, 5);
	ret = rfs_read(fs, ino, &layout, 0, ONE_LEN, buf);
	REQUIRE(ret == 0 && memcmp(buf, want_one, ONE_LEN) == 0,
		"one chunk: the data changed after writes that failed (%s)", strerror(-ret));
	printf("one chunk: retried after one reset, failed with EIO after a reset before every "
	       "send, nothing lost\n");
}

int main(int argc, char **argv)
{
	struct rfs_layout layout;
	struct daemon_proc d;
	struct rfs *fs = NULL;
	char data_dir[300];
	uint8_t *buf, *want;
	uint64_t ino;
	int ret;

	signal(SIGPIPE, SIG_IGN);
	harness_client_test(argc, argv, "reset", HANG_SECS);

	snprintf(data_dir, sizeof(data_dir), "%s/data", harness_dir());
	REQUIRE(daemon_start(&d, data_dir, NULL) == 0, "the daemon did not start");
	fs = fs_of(&d, 3000);
	ino = create_file(fs, "f", &layout);

	write_read_check(fs, ino, &layout, FILE_LEN, 1, 0, "no reset");
	REQUIRE(sends >= CHUNKS, "the wrapper saw %u chunk calls: the test tests nothing", sends);

	/* One chunk call's connection dies: that call is retried on a fresh one. */
	write_read_check(fs, ino, &layout, FILE_LEN, 2, 1, "one reset per write and per read");
	/* Every chunk call's first connection dies (each retry then finds a live one). */
	write_read_check(fs, ino, &layout, FILE_LEN, 3, CHUNKS,
			 "a reset before each chunk's first send");
	printf("a reset before each chunk's first send: %u sends, written and read back\n", sends);

	/* Every send finds a dead connection: an error, never a hang. */
	arm(-1);
	buf = calloc(1, FILE_LEN);
	REQUIRE(buf, "out of memory");
	ret = rfs_write(fs, ino, &layout, 0, FILE_LEN, buf, true, NULL);
	REQUIRE(ret == -EIO, "a write whose every send found a dead connection: %s, not EIO",
		strerror(-ret));
	printf("reset before every send: write failed with %s after %u sends\n", strerror(-ret),
	       sends);
	ret = rfs_read(fs, ino, &layout, 0, FILE_LEN, buf);
	REQUIRE(ret == -EIO, "a read whose every send found a dead connection: %s, not EIO",
		strerror(-ret));
	printf("reset before every send: read failed with %s\n", strerror(-ret));

	/*
	 * A file of one chunk: its piece is alone in its wave and goes with
	 * xprt_call_wait(), whose error must also mean its callback never runs.
	 */
	one_check(fs);

	/* Nothing was lost: the last good write is still there. */
	arm(0);
	want = malloc(FILE_LEN);
	REQUIRE(want, "out of memory");
	fill_pattern(want, FILE_LEN, 3);
	ret = rfs_read(fs, ino, &layout, 0, FILE_LEN, buf);
	REQUIRE(ret == 0, "read after the resets: %s", strerror(-ret));
	REQUIRE(memcmp(want, buf, FILE_LEN) == 0, "the data changed after writes that failed");
	free(want);
	free(buf);
	rfs_destroy(fs);
	daemon_stop(&d, SIGTERM);
	harness_cleanup();
	printf("PASS\n");
	return check_exit_status();
}
