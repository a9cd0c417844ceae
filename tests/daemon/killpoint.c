/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Linked into rdmafs-daemon-killpoint only (-Wl,--wrap=pwrite,--wrap=pwrite64,
 * --wrap=io_uring_submit_and_wait):
 * - RDMAFS_TEST_KILL_PWRITE="before:N" or "after:N" kills the daemon with
 *   SIGKILL just before or just after its Nth pwrite(2) to a chunk file, so
 *   a test can stop a chunk write exactly between its data and its
 *   metadata (the metadata store's own pwrites do not count);
 * - RDMAFS_TEST_RING_REFUSE="N:K" makes the Nth to the (N+K-1)th submission
 *   to an io_uring fail with -EAGAIN, as a kernel short of memory does (the
 *   prepared requests stay queued);
 * - RDMAFS_TEST_BOOT_ID=ID is the boot the chunk store believes it runs in
 *   (lmdb_guard_boot_id(), --wrap=lmdb_guard_boot_id): a store that did not
 *   close in another boot went through a power loss;
 * - RDMAFS_TEST_FORWARD_HOLD_MS=N holds the daemon's first forward of a
 *   replicated write (chain_forward_start(), --wrap=chain_forward_start) N ms before it
 *   goes, so a second write can overtake it;
 * - RDMAFS_TEST_FORWARD_GATE=PATH holds each forward of the daemon while
 *   the file PATH.PID exists (PID: the daemon's; 60 s at most), with the
 *   file PATH.PID.held there meanwhile, so that a test can look at a chain
 *   with a write on its way down (test chaindirty, fs-dirty);
 * - RDMAFS_TEST_PULL_GATE=PATH holds each pull of a write's payload
 *   (xprt_rdma_read(), --wrap=xprt_rdma_read: from a client, or from the
 *   daemon before this one in a chain, or a resync's copy) the same way, so
 *   a test can stop a chain between its head's store and the next daemon's
 *   (fs-headkill);
 * - RDMAFS_TEST_FORWARD_TIMEOUT_MS=N gives each forward of a replicated
 *   write (a CHUNK_WRITE call, xprt_call_async(), --wrap=xprt_call_async) N ms
 *   from the head instead of CHAIN_FORWARD_TIMEOUT_MS, less the same second
 *   at each later hop, so a test that holds the next
 *   daemon's pull at its gate has all the time it needs to kill the head
 *   while the forward is on its way, on a slow machine too (fs-headkill,
 *   fs-headswap);
 * - RDMAFS_TEST_NOWAIT_RESIDENT=1 fails each RWF_NOWAIT read of a chunk file
 *   (io_uring_submit_and_wait(), the store's reads on receipt) with -EAGAIN
 *   when a page it would read is out of the page cache as mincore(2) sees it
 *   at submission, without reading: the kernel's own answer to such a read
 *   may be the data, when the readahead it starts for it is done before it
 *   looks again, so a test could not say whether the daemon would fetch
 *   (test receipt); the daemon's log says whether it can, and through what.
 * Unset, the daemon is the ordinary one.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <liburing.h>

#include "lmdb_guard.h"
#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "daemon_i.h"
#include "page_cache.h"

ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __real_pwrite64(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite64(int fd, const void *buf, size_t n, off_t off);

/* Whether @fd is a chunk file (DATA_DIR/chunks/...). */
static bool chunk_file(int fd)
{
	char link[64], path[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = '\0';
	return strstr(path, "/chunks/") != NULL;
}

/* Whether this call is the one to die at, before (@before) or after it. */
static bool kill_here(bool before)
{
	static long calls;
	const char *spec = getenv("RDMAFS_TEST_KILL_PWRITE");
	bool want_before;
	long n;

	if (!spec)
		return false;
	want_before = strncmp(spec, "before:", 7) == 0;
	if (!want_before && strncmp(spec, "after:", 6) != 0)
		return false;
	n = strtol(spec + (want_before ? 7 : 6), NULL, 10);
	if (before)
		calls++; /* threads: the tests that use it write one request at a time */
	return want_before == before && calls == n;
}

/* One pwrite through @real, the kill before or after it where the test asked. */
static ssize_t killable(ssize_t (*real)(int, const void *, size_t, off_t), int fd, const void *buf,
			size_t n, off_t off)
{
	ssize_t ret;

	bool counted = chunk_file(fd);

	if (counted && kill_here(true))
		raise(SIGKILL);
	ret = real(fd, buf, n, off);
	if (counted && kill_here(false))
		raise(SIGKILL);
	return ret;
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return killable(__real_pwrite, fd, buf, n, off);
}

ssize_t __wrap_pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return killable(__real_pwrite64, fd, buf, n, off);
}

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr);

int __real_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr);

/* Whether a RWF_NOWAIT read of @fd through an io_uring fails with -EAGAIN. */
static bool nowait_read_says_eagain(int fd)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	char bytes[8];
	int res = 0;

	if (io_uring_queue_init(2, &ring, 0))
		return false;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, fd, bytes, sizeof(bytes), 0);
	sqe->rw_flags = RWF_NOWAIT;
	if (__real_io_uring_submit_and_wait(&ring, 1) == 1 && !io_uring_peek_cqe(&ring, &cqe))
		res = cqe->res;
	io_uring_queue_exit(&ring);
	return res == -EAGAIN;
}

/*
 * A descriptor whose RWF_NOWAIT read through io_uring fails with -EAGAIN at
 * once: the reading end of an empty pipe (Linux 6.4 on; before, such a read
 * says -EOPNOTSUPP), else an eventfd at zero (5.12 on), else one end of an
 * empty socket pair, all non-blocking; -1 when none's does. The daemon's log
 * says which (the test reads it).
 */
static int nowait_eagain_fd = -1;

/* Keeps @fd (of @what) if its RWF_NOWAIT read fails with -EAGAIN, else closes it and @other. */
static bool nowait_eagain_take(int fd, int other, const char *what)
{
	if (fd >= 0 && nowait_read_says_eagain(fd)) {
		nowait_eagain_fd = fd; /* @other stays open: no end of file */
		fprintf(stderr, "killpoint: cold RWF_NOWAIT reads fail through %s\n", what);
		return true;
	}
	if (fd >= 0)
		close(fd);
	if (other >= 0)
		close(other);
	return false;
}

static void nowait_eagain_open(void)
{
	int p[2] = {-1, -1}, s[2] = {-1, -1};

	if (pipe2(p, O_NONBLOCK | O_CLOEXEC))
		p[0] = p[1] = -1;
	if (nowait_eagain_take(p[0], p[1], "a pipe") ||
	    nowait_eagain_take(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), -1, "an eventfd"))
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, s))
		s[0] = s[1] = -1;
	if (!nowait_eagain_take(s[0], s[1], "a socket"))
		fprintf(stderr,
			"killpoint: cannot fail a cold RWF_NOWAIT read: no pipe's, eventfd's "
			"or socket's answers -EAGAIN here\n");
}

/* RDMAFS_TEST_NOWAIT_RESIDENT: set up before main(), so the log says it before the daemon serves */
__attribute__((constructor)) static void nowait_from_resident_setup(void)
{
	if (getenv("RDMAFS_TEST_NOWAIT_RESIDENT"))
		nowait_eagain_open();
}

/*
 * With RDMAFS_TEST_NOWAIT_RESIDENT: each RWF_NOWAIT read of a chunk file
 * queued on @ring that would read a page out of the page cache reads
 * nowait_eagain_fd instead, which answers -EAGAIN at once.
 */
static void nowait_from_resident(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;

	if (nowait_eagain_fd < 0)
		return;
	for (unsigned i = sq->sqe_head; i != sq->sqe_tail; i++) {
		struct io_uring_sqe *sqe = &sq->sqes[i & sq->ring_mask];

		if ((sqe->opcode == IORING_OP_READ || sqe->opcode == IORING_OP_READ_FIXED) &&
		    (sqe->rw_flags & RWF_NOWAIT) && !(sqe->flags & IOSQE_FIXED_FILE) &&
		    chunk_file(sqe->fd) && page_cache_cold(sqe->fd, sqe->off, sqe->len) == 1)
			sqe->fd = nowait_eagain_fd;
	}
}

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	static long calls;
	const char *spec = getenv("RDMAFS_TEST_RING_REFUSE");
	long first, count;
	char *end;

	calls++;
	if (spec) {
		first = strtol(spec, &end, 10);
		count = *end == ':' ? strtol(end + 1, NULL, 10) : 1;
		if (calls >= first && calls < first + count)
			return -EAGAIN;
	}
	nowait_from_resident(ring);
	return __real_io_uring_submit_and_wait(ring, wait_nr);
}

int __real_lmdb_guard_boot_id(char out[LMDB_GUARD_BOOT_ID_LEN]);
int __wrap_lmdb_guard_boot_id(char out[LMDB_GUARD_BOOT_ID_LEN]);

int __wrap_lmdb_guard_boot_id(char out[LMDB_GUARD_BOOT_ID_LEN])
{
	const char *id = getenv("RDMAFS_TEST_BOOT_ID");

	if (!id)
		return __real_lmdb_guard_boot_id(out);
	snprintf(out, LMDB_GUARD_BOOT_ID_LEN, "%s", id);
	return 0;
}

/* declared from the real one's type, so a change to it is a compile error here */
__typeof__(chain_forward_start) __real_chain_forward_start, __wrap_chain_forward_start;

/*
 * The gate named by environment variable @env (PATH): while PATH.PID exists,
 * waits (60 s at most) with PATH.PID.held there.
 */
static void gate_pass(const char *env)
{
	const char *gate = getenv(env);
	char path[PATH_MAX], mark[PATH_MAX + 8];
	int fd;

	if (!gate)
		return;
	snprintf(path, sizeof(path), "%s.%d", gate, (int)getpid());
	snprintf(mark, sizeof(mark), "%s.held", path);
	if (access(path, F_OK))
		return;
	fd = open(mark, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 6000 && access(path, F_OK) == 0; i++)
		usleep(10 * 1000);
	unlink(mark);
}

int __wrap_chain_forward_start(struct chain *c, const struct Rdmafs__ChunkWriteReq *m, size_t skip,
			       const ProtobufCBinaryData *missed, size_t n_missed,
			       struct xprt_buf *buf, const void *payload, struct chain_call *call)
{
	static bool held;
	const char *spec = getenv("RDMAFS_TEST_FORWARD_HOLD_MS");

	if (spec && !__atomic_exchange_n(&held, true, __ATOMIC_RELAXED))
		usleep((useconds_t)strtoul(spec, NULL, 10) * 1000u);
	gate_pass("RDMAFS_TEST_FORWARD_GATE");
	return __real_chain_forward_start(c, m, skip, missed, n_missed, buf, payload, call);
}

__typeof__(xprt_call_async) __real_xprt_call_async, __wrap_xprt_call_async;

int __wrap_xprt_call_async(struct xprt_conn *conn, uint32_t method, const void *req, size_t req_len,
			   int timeout_ms, xprt_reply_cb cb, void *arg)
{
	const char *spec = getenv("RDMAFS_TEST_FORWARD_TIMEOUT_MS");

	if (spec && method == RDMAFS__METHOD__METHOD_CHUNK_WRITE)
		timeout_ms += (int)strtol(spec, NULL, 10) - CHAIN_FORWARD_TIMEOUT_MS;
	return __real_xprt_call_async(conn, method, req, req_len, timeout_ms, cb, arg);
}

__typeof__(xprt_rdma_read) __real_xprt_rdma_read, __wrap_xprt_rdma_read;

int __wrap_xprt_rdma_read(struct xprt_conn *conn, void *local, struct xprt_mr *local_mr,
			  uint64_t remote_addr, uint32_t rkey, size_t len, int timeout_ms)
{
	gate_pass("RDMAFS_TEST_PULL_GATE");
	return __real_xprt_rdma_read(conn, local, local_mr, remote_addr, rkey, len, timeout_ms);
}
