/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-fuse internals, one concern per file:
 *
 *   main.c       mount options, the session and its loop
 *   ops.c        the FUSE operations: each translates one kernel request to
 *                the client core (rdmafs_fs.h) and its answer back
 *   node.c       the inode table: what the kernel holds (lookups, opens),
 *                each with the client core's struct rfs_file, which keeps
 *                its size, layout and uncommitted writes coherent with the
 *                metadata service (rdmafs_fs.h)
 *   readahead.c  the kernel's read-ahead for our mount, through sysfs
 *   background.c unlinks answered at once and sent after (async_dirops)
 *   stats.c      what the operations count: requests, errors by errno,
 *                latency from the request's arrival to its reply
 *   metrics.c    /metrics: those counts and the client core's (rfs_stats)
 *                in Prometheus' format, served by librdmafs_prom
 *                (metrics_none.c where libmicrohttpd is missing)
 *
 * Errors: functions here use 0 / negative errno; only the fuse_reply_err()
 * calls of ops.c turn them positive.
 */
#ifndef RDMAFS_MOUNT_I_H
#define RDMAFS_MOUNT_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

#define NODE_BUCKETS 4096u
#define IO_SIZE	     (1u << 20)

/* An inode the kernel holds (lookup count) or has open. */
struct node {
	struct node *next; /* hash chain, under fs.table_lock */
	uint64_t ino;
	uint64_t nlookup;	  /* under fs.table_lock */
	uint32_t opens;		  /* under fs.table_lock */
	struct rfs_file *file;	  /* its size, layout and writes: the client core's */
	pthread_mutex_t lock;	  /* guards nocaps_until_ms and the dir_ fields */
	uint64_t nocaps_until_ms; /* security.capability known absent until then */
	/*
	 * A directory's attributes as this mount's last change of its entries
	 * left them, answered to the kernel's GETATTR until dir_until_ms (the
	 * attribute timeout from that change); dir_gen counts the changes of
	 * its attributes this mount made that leave none (dir_watch()).
	 */
	struct stat dir_attr;
	uint64_t dir_until_ms, dir_gen;
	uint64_t dir_epoch; /* fs.dir_epoch when the copy was made */
	bool dir_touched;   /* its times moved by this mount's background unlinks (dir_touch()) */
};

struct handle {
	uint64_t server; /* the metadata service's handle */
	struct node *node;
	int flags;
};

/* The FUSE operations, each counted on its own (stats.c). */
enum mount_op {
	MOUNT_OP_LOOKUP,
	MOUNT_OP_FORGET,
	MOUNT_OP_FORGET_MULTI,
	MOUNT_OP_GETATTR,
	MOUNT_OP_SETATTR,
	MOUNT_OP_READLINK,
	MOUNT_OP_MKNOD,
	MOUNT_OP_MKDIR,
	MOUNT_OP_UNLINK,
	MOUNT_OP_RMDIR,
	MOUNT_OP_SYMLINK,
	MOUNT_OP_RENAME,
	MOUNT_OP_LINK,
	MOUNT_OP_OPEN,
	MOUNT_OP_READ,
	MOUNT_OP_WRITE,
	MOUNT_OP_FLUSH,
	MOUNT_OP_RELEASE,
	MOUNT_OP_FSYNC,
	MOUNT_OP_OPENDIR,
	MOUNT_OP_READDIR,
	MOUNT_OP_READDIRPLUS,
	MOUNT_OP_RELEASEDIR,
	MOUNT_OP_FSYNCDIR,
	MOUNT_OP_STATFS,
	MOUNT_OP_SETXATTR,
	MOUNT_OP_GETXATTR,
	MOUNT_OP_LISTXATTR,
	MOUNT_OP_REMOVEXATTR,
	MOUNT_OP_ACCESS,
	MOUNT_OP_CREATE,
	MOUNT_OP_FALLOCATE,
	MOUNT_OP_LSEEK,
	MOUNT_OPS,
};

/* Errnos counted by name (mount_errno_name()); the last slot counts every other. */
#define MOUNT_ERRNOS 30

/*
 * What the operations counted, updated with relaxed atomics by the threads
 * that answer requests and read the same way by /metrics.
 */
struct mount_stats {
	struct {
		struct rdmafs_latency latency; /* its count is the requests */
		uint64_t errors[MOUNT_ERRNOS];
	} ops[MOUNT_OPS];
	uint64_t read_bytes, write_bytes; /* answered to reads, taken from writes */
	uint64_t in_flight;		  /* requests being handled */
	uint64_t dir_attr_hits; /* GETATTRs of a directory answered from its copy (dir_after()) */
	uint64_t bg_unlinks;	/* unlinks answered at once and sent in the background */
	uint64_t bg_waits;	/* requests that waited for background calls first */
	uint64_t bg_errors;	/* background calls the service refused or that failed */
};

/*
 * Where a call that changes a directory's entries began (ops.c dir_watch()):
 * its copy of the directory's attributes is kept only if nothing that
 * leaves none came meanwhile.
 */
struct dir_mark {
	uint64_t gen, epoch;
};

/* ---- background unlinks (background.c), with async_dirops ---- */

/*
 * With async_dirops an unlink is answered once the kernel's checks passed
 * (default_permissions: the caller's permission, the sticky bit, the type,
 * on cached attributes) and its UNLINK goes to the service from a thread of
 * ours. Order: every request that could see a pending call waits for the
 * calls queued before it (ops.c op_begin(): all but LOOKUP, GETATTR,
 * UNLINK, FORGET, STATFS, and the data path: READ, WRITE, FLUSH,
 * RELEASE, RELEASEDIR, FALLOCATE, LSEEK); a LOOKUP waits for a
 * pending call on its name, and for all of them when what it found may
 * show one (a directory, a file of several links); a GETATTR answered from
 * a directory's copy waits for nothing. A call the service refuses (a race
 * with another mount: EACCES, EPERM, EIO...) is logged, counted, and
 * returned by the next fsync of its directory (BG_ERRORS directories at
 * most); ENOENT (another mount removed it first) is not an error. The
 * process sends every queued call before it exits; a mount killed loses
 * the calls of its window: other mounts see those names still.
 */
#define BG_WINDOW  64 /* calls answered and not yet done */
#define BG_THREADS 16 /* threads sending them */
#define BG_ERRORS  16 /* directories whose failure waits for their fsync */

enum bg_state { BG_FREE, BG_QUEUED, BG_SENT };

struct bg_call {
	enum bg_state state; /* under bg.lock */
	uint64_t seq;	     /* its place in the queue: bg.queued when it came */
	uint64_t parent;
	struct node *pin; /* the parent's node, held (an open) until the call is done */
	char name[RFS_NAME_MAX + 1];
	struct rfs_cred cred;
	struct dir_mark mark;
	int err;		/* the call's result, set by bg_run_fn */
	struct rfs_freed freed; /* what it freed, set by bg_run_fn; removed after it is done */
};

struct fs;

/*
 * Sends @call, sets call->err (0 or -errno) and call->freed; runs on a
 * thread of background.c, which then marks it done (unpins the parent) and
 * removes the freed data (rfs_free_data()) after, so no request waits for that.
 */
typedef void (*bg_run_fn)(struct fs *fs, struct bg_call *call);

struct bg {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a call queued, or stopping */
	pthread_cond_t done; /* a call done: a slot free */
	struct bg_call calls[BG_WINDOW];
	unsigned used;	 /* slots not free; changed under lock, read atomically */
	uint64_t queued; /* calls queued so far */
	bg_run_fn run;
	pthread_t thread[BG_THREADS];
	unsigned threads;
	bool stopping;
	struct bg_error {
		uint64_t parent;
		int err;     /* 0: a free entry */
	} errors[BG_ERRORS]; /* the first failure in each directory, until its fsync */
};

/* Starts the threads that run @run on each call; after fuse_daemonize(). 0 or -errno. */
int bg_start(struct fs *fs, bg_run_fn run);
/* Sends every call still queued, waits for all, stops the threads. No-op when not started. */
void bg_stop(struct fs *fs);
/*
 * Queues an unlink of (@parent, @name) by @cred, waiting for a free slot;
 * the kernel holds @parent (its request). 0, -ENAMETOOLONG or -ENOMEM.
 */
int bg_unlink(struct fs *fs, uint64_t parent, const char *name, const struct rfs_cred *cred,
	      struct dir_mark mark);
/* Whether any call is pending (a hint: read without the lock). */
bool bg_busy(struct fs *fs);
/* Whether a call other than @self in @parent is pending. */
bool bg_pending_in(struct fs *fs, uint64_t parent, const struct bg_call *self);
/* Waits until every call queued before it is done. No-op without async_dirops. */
void bg_drain(struct fs *fs);
/* Waits until no call on (@parent, @name) is pending. */
void bg_wait_name(struct fs *fs, uint64_t parent, const char *name);
/* The failure of a background call in @parent not yet returned (then cleared), or 0. */
int bg_take_error(struct fs *fs, uint64_t parent);

struct fs {
	struct rfs *rfs;
	struct fuse_session *se;
	double attr_timeout, entry_timeout;
	double negative_timeout; /* how long the kernel keeps a LOOKUP's ENOENT; 0: not at all */
	bool kernel_acl;	 /* the kernel enforces POSIX ACLs (with default_permissions) */
	char bdi[32];		 /* "major:minor" of our mount, for its read-ahead */
	unsigned readahead_kb;	 /* 0: leave the kernel's */
	int readahead_done;	 /* atomic */
	pthread_mutex_t table_lock;
	struct node *buckets[NODE_BUCKETS];
	struct mount_stats stats;
	/* bumped (atomic) by every rmdir and rename: every directory's copy goes (dir_after()) */
	uint64_t dir_epoch;
	struct bg *bg; /* async_dirops: background unlinks; NULL without */
};

/* ---- the inode table (node.c) ---- */

/*
 * The node of @ino, created if needed, with @lookups kernel lookups and
 * @opens opens more. NULL when out of memory.
 */
struct node *node_ref(struct fs *fs, uint64_t ino, uint64_t lookups, uint32_t opens);
/* The node of @ino if the kernel holds it, else NULL; takes no reference. */
struct node *node_find(struct fs *fs, uint64_t ino);
/* Drops @lookups and @opens; the node goes when both reach 0. */
void node_unref(struct fs *fs, struct node *n, uint64_t lookups, uint32_t opens);

/* ---- read-ahead (readahead.c) ---- */

void readahead_find_bdi(struct fs *fs, const char *mountpoint);
void readahead_tune(struct fs *fs);

/* ---- the operations (ops.c) ---- */

/* Every operation is counted in fs.stats (stats.c) around its handler. */
extern const struct fuse_lowlevel_ops mount_ops;
/* Starts the background unlinks of async_dirops (bg_start() with ops.c's UNLINK). */
int ops_bg_start(struct fs *fs);

/* ---- counting (stats.c) ---- */

/* "lookup", "getattr", ...: libfuse's names of the operations. */
const char *mount_op_name(enum mount_op op);
/* "ENOENT", "EIO", ... of errno slot @slot; "other" for the last. */
const char *mount_errno_name(unsigned slot);
/* Counts one request of @op that took @ns and was answered with @err (a positive errno, 0). */
void mount_stats_record(struct mount_stats *s, enum mount_op op, uint64_t ns, int err);
/* Adds @n to a counter of struct mount_stats. */
static inline void mount_count(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/* ---- /metrics (metrics.c) ---- */

struct mount_metrics;

/* What /metrics names in rdmafs_client_info. */
struct mount_metrics_params {
	const char *listen;    /* "HOST:PORT" (port 0: any free port) */
	const char *port_file; /* where to write the port bound, or NULL */
	const char *mountpoint;
	const char *meta_uri;
};

/*
 * Checks the form of @listen (HOST:PORT, [ADDR]:PORT) before anything
 * starts: 0, or -EINVAL (-ENOTSUP when this build serves no metrics) with
 * "@listen: why" in @why.
 */
int mount_metrics_check(const char *listen, char *why, size_t why_len);

/*
 * Serves /metrics of @fs (its counts and its client core's) on @p->listen
 * from a thread of libmicrohttpd's own; logs "metrics at
 * http://HOST:PORT/metrics". Call after fuse_daemonize(), with fs->rfs
 * made. Returns 0 or the negative errno of rdmafs_prom_start(), logged.
 */
int mount_metrics_start(struct fs *fs, const struct mount_metrics_params *p,
			struct mount_metrics **out);
/* Stops serving (a scrape in progress finishes) and frees. NULL is a no-op. */
void mount_metrics_stop(struct mount_metrics *m);

#endif /* RDMAFS_MOUNT_I_H */
