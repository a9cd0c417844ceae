/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The metadata service: inodes, directories, symlinks, xattrs, open handles
 * and the cluster map, kept in one LMDB environment. It speaks the protobuf
 * messages of proto/rdmafs.proto (methods 200-221, 300-303, 401, 404-409) and knows
 * nothing of the network: the daemon hands it a request body and gets a reply
 * body back. Every request runs in one LMDB transaction, so rename, link and
 * unlink are atomic.
 *
 * Thread safety: meta_handle() and meta_tick() may be called from any number
 * of threads at once. Readers run in parallel; writers are serialized by
 * LMDB's write lock.
 */
#ifndef RDMAFS_META_H
#define RDMAFS_META_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdmafs_common.h"

struct meta;

enum meta_log_level { META_LOG_ERR = 0, META_LOG_WARN, META_LOG_INFO, META_LOG_DEBUG };

/* Where the service's messages go; the daemon routes them to its logger. */
typedef void (*meta_log_cb)(void *arg, enum meta_log_level level, const char *fmt, va_list ap);

/* Every field may be 0 (or NULL) to take the default in brackets. */
struct meta_options {
	uint64_t map_size;     /* LMDB map size, the store's limit [4 GiB] */
	uint32_t chunk_size;   /* chunk size of new files [1 MiB] */
	uint32_t stripe_width; /* daemons per new file, at most 64 [4] */
	/*
	 * Copies of each chunk of a new file whose directory has no
	 * rdmafs.replicas (META_XATTR_REPLICAS), 1..RDMAFS_MAX_REPLICAS [1]
	 */
	uint32_t replicas;
	uint32_t heartbeat_timeout_sec; /* silence after which a daemon is DOWN [10] */
	uint32_t heartbeat_interval_ms; /* told to daemons at REGISTER_DAEMON [2000] */
	/*
	 * After a start that may have lost open handles (the last run did not
	 * close with none open), how long clients have to reclaim theirs
	 * before unlinked files none reclaimed are freed [30]
	 */
	uint32_t reclaim_grace_sec;
	/*
	 * metadata_sync = always: every commit is on disk before its answer.
	 * Otherwise (batch, the default) a commit is answered once it is in
	 * the store, and meta_tick() within a second, or a request that needs
	 * it (SYNC, a change whose answer leads a client to remove or cut
	 * chunks unless the request says flush_before_free, an administration
	 * change), flushes it: a kill -9 loses
	 * nothing, a power loss can undo the commits since the last flush and
	 * never corrupts the store (lmdb_guard.h).
	 */
	bool sync_always;
	/*
	 * metadata_sync_ms: with batch, a thread of the service flushes what
	 * was committed this often. 0: no thread, meta_tick() flushes (tests
	 * and fuzzing, which want every flush where they call for it) [0]
	 */
	uint32_t sync_interval_ms;
	const char *boot_id; /* the running boot, for tests [/proc/sys/kernel/random/boot_id] */
	meta_log_cb log;     /* [stderr] */
	void *log_arg;
};

/*
 * Opens (and on first use creates) the metadata store in the existing
 * directory @dir, with root inode 1 (a directory, 0755, owned by 0:0).
 * @opts may be NULL for the defaults. On success *@out owns the store until
 * meta_close().
 *
 * Returns 0, -EPROTONOSUPPORT for a store written by a newer format (it is
 * never touched), -ENOMEM, or the negative errno of the LMDB failure.
 */
int meta_open(const char *dir, const struct meta_options *opts, struct meta **out);

/* Closes the store. No call may be running on it. NULL is a no-op. */
void meta_close(struct meta *m);

/* True for the method ids meta_handle() serves (200-221, 300-303, 401, 404-409). */
bool meta_handles_method(uint32_t method);

/*
 * True for the methods that read a bounded number of records and nothing
 * else (LOOKUP, GETATTR, READLINK, READDIR, GETXATTR, LISTXATTR, STATFS):
 * they wait for no writer, group or flush, so a daemon may run them on the
 * thread that received them instead of handing them to a worker.
 */
bool meta_method_quick(uint32_t method);

/*
 * True when a daemon may run @method on the thread that received it, now: a
 * quick read (meta_method_quick()), or a client's change (any method but
 * SYNC, RECLAIM and the administration's) while metadata_sync = batch and no
 * group commits or waits. Such a change is then a group of its own (alone,
 * or with the changes that came with it: meta_handle_many()): its own
 * transaction, whose commit writes to the page cache and flushes nothing
 * (unless the change must be on disk before its answer, as a removal whose
 * chunks go next without the client's own SYNC: then it flushes on that
 * thread), so handing it to another
 * thread would cost more than running it. A change that arrives while a
 * group runs or waits goes to the workers and joins the next group, so
 * concurrent clients still share one transaction. With metadata_sync =
 * always every change waits for a flush and is never run so.
 */
bool meta_may_run_inline(struct meta *m, uint32_t method);

/*
 * True when @method is a client's change that meta_may_run_inline() lets run
 * on the receiving thread while no group runs: one a daemon may hold until
 * the end of its batch of requests and then serve with the others held
 * (meta_handle_many()). False for reads, SYNC, RECLAIM, the administration's
 * changes and every change with metadata_sync = always.
 */
bool meta_may_batch(struct meta *m, uint32_t method);

/*
 * Serves one RPC: unpacks @req (@req_len bytes, the protobuf body of method
 * @method), runs it in one LMDB transaction and packs the reply into
 * @resp_buf (@resp_cap bytes), setting *@resp_len. The caller keeps owning
 * both buffers. A failed call changes nothing.
 *
 * Returns 0 or a negative errno for the reply header: the POSIX error of the
 * operation (-ENOENT, -EACCES, ...), -EBADMSG for a body that does not parse,
 * -EOPNOTSUPP for a method it does not serve, -EMSGSIZE when the reply does
 * not fit in @resp_cap (nothing is then changed), -ENOSPC when the store is
 * full or no storage daemon is UP to hold a new file.
 */
int meta_handle(struct meta *m, uint32_t method, const void *req, size_t req_len, void *resp_buf,
		size_t resp_cap, size_t *resp_len);

/*
 * Who calls, for meta_handle_as(): what HELLO proved on the request's
 * connection (the daemon copies it from the transport's identity).
 */
struct meta_caller {
	bool keyed;	 /* false: the cluster secret itself, full trust */
	uint64_t serial; /* keyed: the key's serial */
	uint32_t flags;	 /* keyed: RDMAFS_KEY_* */
};

/*
 * meta_handle() for a caller that may be limited: a keyed @caller gets -EPERM
 * for the administration methods (REGISTER_DAEMON, HEARTBEAT,
 * SET_DAEMON_STATE, DRAIN_STATUS, INODE_LIST, SET_LAYOUT, CLIENT_*), -EROFS
 * with RDMAFS_KEY_READ_ONLY for every change (OPEN for writing included),
 * uid and gid 65534 where it claims 0 with RDMAFS_KEY_ROOT_SQUASH, and
 * -EKEYREVOKED once its key is revoked. NULL: full trust, as meta_handle().
 */
int meta_handle_as(struct meta *m, const struct meta_caller *caller, uint32_t method,
		   const void *req, size_t req_len, void *resp_buf, size_t resp_cap,
		   size_t *resp_len);

/* One request of meta_handle_many(): what meta_handle_as() takes, and its result. */
struct meta_call {
	struct meta_caller caller;
	uint32_t method;
	const void *req;
	size_t req_len;
	void *resp_buf;
	size_t resp_cap;
	size_t resp_len; /* out: the reply's length, 0 on an error */
	int ret;	 /* out: meta_handle_as()'s result */
};

/*
 * meta_handle_as() for the @n changes of @calls at once, from one thread: they
 * join one group (meta/group.c), in their order, so changes that came
 * together share one transaction's commit, and those that must be durable
 * one flush. Each gets the result and reply it would have had alone, but
 * for a commit that fails: then every change of the group gets its error,
 * as in any group. A method that is not a change (a read) gets -EOPNOTSUPP
 * and counts as that method's error. Returns once every one is done.
 */
void meta_handle_many(struct meta *m, struct meta_call *calls, size_t n);

/*
 * 1 if client key @serial was revoked, 0 if not (or never recorded: a key
 * only a holder of the secret could make), or a negative errno. Does not
 * block on writers; any thread.
 */
int meta_key_revoked(struct meta *m, uint64_t serial);

/* Room for every method meta_handle() serves, for meta_method_stats(). */
#define META_METHODS_MAX 40

/* What meta_handle() counted for one method since meta_open(). */
struct meta_method_stats {
	uint32_t method; /* an rdmafs Method */
	uint64_t errors; /* calls that returned an error (ENOENT and the like too) */
	uint64_t request_bytes, reply_bytes; /* protobuf bodies */
	struct rdmafs_latency latency;	     /* its count is the calls */
};

/*
 * Copies the counters of every method meta_handle() serves into @out (room
 * for @max, at most META_METHODS_MAX are needed), in the order of the
 * method table; returns how many it wrote. Any thread, no lock.
 */
size_t meta_method_stats(struct meta *m, struct meta_method_stats *out, size_t max);

/* The state of the service's store, for /metrics. */
struct meta_store_stats {
	uint64_t inodes; /* the "inodes" counter: every inode but the root */
	uint64_t epoch;	 /* of the cluster map */
	/* daemons in the cluster map by DaemonState (0 unspecified .. 4 removed) */
	uint32_t daemons[5];
	/* write requests committed, and the groups (commits, flushes) they took */
	uint64_t commit_groups, grouped_requests;
};

/* Reads @out in one read transaction. Returns 0 or the LMDB failure's errno. */
int meta_store_stats(struct meta *m, struct meta_store_stats *out);

/*
 * Advances the service clock to @now_sec (any monotonic clock, e.g.
 * CLOCK_MONOTONIC seconds; the same one on every call) and marks DOWN every
 * UP daemon whose last heartbeat is older than the timeout (a DRAINING
 * one keeps its state: the operator started its drain),
 * bumping the cluster map epoch. Heartbeats are stamped with the latest
 * @now_sec. After meta_open() every known daemon gets a full timeout from the
 * first tick, since heartbeat stamps of an earlier run used another clock.
 * Once the reclaim grace period has passed since the first tick, it frees
 * the unlinked files that no reclaimed handle holds (their chunks are left
 * to `rdmafsctl fsck --repair`). With metadata_sync = batch and no
 * sync_interval_ms it flushes the store when something was committed since
 * the last flush. Call it about once a second.
 *
 * Returns the number of daemons marked DOWN, or a negative errno.
 */
int meta_tick(struct meta *m, uint64_t now_sec);

/*
 * How many times the store was flushed: for a request that needed it (SYNC,
 * ...), by the flusher (kicked past LMDB_GUARD_LAG commits) or
 * meta_tick(), or by a request past META_STORE_HARD_LAG.
 */
uint64_t meta_sync_count(struct meta *m);

/*
 * What the bound on commits past the last flush did (metadata_sync = batch):
 * *@kicks of the flusher past LMDB_GUARD_LAG, and *@flushes a request's
 * group made itself before its answer (past four times that, or with no
 * flusher).
 */
void meta_growth_stats(struct meta *m, uint64_t *kicks, uint64_t *flushes);

#endif
