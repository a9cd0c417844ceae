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
	pthread_mutex_t lock;	  /* guards nocaps_until_ms */
	uint64_t nocaps_until_ms; /* security.capability known absent until then */
};

struct handle {
	uint64_t server; /* the metadata service's handle */
	struct node *node;
	int flags;
};

struct fs {
	struct rfs *rfs;
	struct fuse_session *se;
	double attr_timeout, entry_timeout;
	bool kernel_acl;       /* the kernel enforces POSIX ACLs (with default_permissions) */
	char bdi[32];	       /* "major:minor" of our mount, for its read-ahead */
	unsigned readahead_kb; /* 0: leave the kernel's */
	int readahead_done;    /* atomic */
	pthread_mutex_t table_lock;
	struct node *buckets[NODE_BUCKETS];
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

extern const struct fuse_lowlevel_ops mount_ops;

#endif /* RDMAFS_MOUNT_I_H */
