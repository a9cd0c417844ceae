/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Test harness for the daemon suite: scratch directories and single
 * rdmafs-daemon processes for daemon-level tests (kill -9 between two of
 * the test's own calls, corrupted chunk files, malformed requests,
 * configurations a daemon must refuse, a data directory on a tiny tmpfs).
 * Clusters for everything else come from tests/lib/cluster.sh; this stays in
 * C because these tests need the daemon as their own child (its exit status
 * after SIGTERM, a signal at a moment of their choosing). It finds ports and
 * decides readiness as cluster.sh does: the port file the daemon writes once
 * it serves, then an answer to a DAEMON_STATS and a cluster map, from the
 * metadata service the daemon hosts or was given (--metadata-uri), that
 * lists it up with a heartbeat since this start. No log line decides
 * anything. Verdicts come from tests/lib/check.h.
 */
#ifndef RDMAFS_TEST_DAEMON_HARNESS_H
#define RDMAFS_TEST_DAEMON_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "check.h"

#define SECRET "daemon-test-secret"

struct daemon_proc {
	pid_t pid;
	unsigned port;
	char uri[128];
	char data_dir[256];
	char log_path[256];
};

/* The scratch directory of this test (created on first use, removed at exit). */
const char *harness_dir(void);
/* Path of the daemon binary and the transport ("tcp" / "rdma"), from argv. */
extern const char *harness_daemon_path;
extern const char *harness_kind;
/*
 * A command daemon_start() runs the daemon through (NULL-terminated, its
 * first word found in PATH; at most 8 words), such as setpriv(1) to start it
 * with fewer capabilities; NULL: none.
 */
extern const char *const *harness_daemon_wrap;
/*
 * The address daemons listen on, as in cluster.sh: RDMAFS_TEST_ADDR, else
 * RDMAFS_VM_RDMA_ADDR (rdma_cm cannot route 127.0.0.1 over soft-RoCE), else
 * 127.0.0.1.
 */
const char *harness_addr(void);

/*
 * Starts rdmafs-daemon on @data_dir (created if needed), listening on
 * KIND://ADDR:0, plus @extra arguments (NULL-terminated, may be NULL).
 * Waits until it is ready (see above). Returns 0, or -1 if it exited or was
 * not ready in time (its log is printed).
 */
int daemon_start(struct daemon_proc *d, const char *data_dir, const char *const *extra);
/* Sends @sig and waits; returns the wait status. */
int daemon_stop(struct daemon_proc *d, int sig);
/* Runs the daemon with @args to completion; returns its exit code, stderr in @err. */
int daemon_run_capture(const char *const *args, char *err, size_t err_size);
void harness_cleanup(void);
/* Exits 77 with a reason when @kind cannot run here (rdma without a device). */
void harness_require_kind(void);

uint64_t harness_now_ms(void);
void fill_pattern(uint8_t *p, size_t len, uint64_t seed);
/* The byte at @pos of the stream identified by @seed (for append tests). */
uint8_t stream_byte(uint64_t seed, uint64_t pos);
uint64_t rnd(uint64_t *state);

struct rfs_daemon;
/* A handle on @d with @buf_size buffers; a failure to connect fails the test (REQUIRE). */
struct rfs_daemon *client_of(const struct daemon_proc *d, uint32_t buf_size);

struct rfs;
struct rfs_entry;
/*
 * The client core on the metadata service @d hosts (it stores chunks too),
 * over the test's transport; @call_timeout_ms 0 keeps the default. A failure
 * fails the test.
 */
struct rfs *fs_of(const struct daemon_proc *d, uint32_t call_timeout_ms);
/* Creates /@name, open read-write (*@handle), its entry in @e; a failure fails the test. */
void fs_create_file(struct rfs *fs, const char *name, uint64_t *handle, struct rfs_entry *e);

/* A test still running @secs seconds from now has hung: it fails then. */
void harness_hang_guard(unsigned secs);

/*
 * The start of a client test's main(): `client-@name DAEMON_BINARY tcp|rdma`
 * (check_error() on other arguments), harness_require_kind(), the
 * transport's log quiet below errors, verdicts named @name, and
 * harness_hang_guard(@hang_secs).
 */
void harness_client_test(int argc, char **argv, const char *name, unsigned hang_secs);

#endif
