/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-fuse internals, one concern per file:
 *
 *   main.c       mount options, the session and its loop
 *   ops.c        the FUSE operations: each translates one kernel request to
 *                the client core (rdmafs_fs.h) and its answer back
 *   node.c       the inode table: what the kernel holds (lookups, opens)
 *   coherence.c  a node's size, layout and uncommitted writes against what
 *                the metadata service knows (size updates, commits, st_blocks)
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

#define NODE_BUCKETS	   4096u
#define SIZE_UPDATE_GAP_MS 1000u /* a growing file tells the service at most this often */
#define IO_SIZE		   (1u << 20)

/* What we know of an inode the kernel holds (lookup count) or has open. */
struct node {
	struct node *next; /* hash chain, under fs.table_lock */
	uint64_t ino;
	uint64_t nlookup; /* under fs.table_lock */
	uint32_t opens;	  /* under fs.table_lock */

	pthread_mutex_t lock; /* guards everything below */
	bool has_layout;
	struct rfs_layout layout;
	uint64_t size;	      /* the size as we know it, our writes included */
	bool size_dirty;      /* size is larger than what the service has from us */
	bool mtime_dirty;     /* written since the last UPDATE_SIZE */
	uint64_t size_seq;    /* bumped whenever we change the size the service will have */
	uint64_t dirty_mask;  /* layout daemons holding uncommitted writes */
	uint64_t dirty_first; /* lowest chunk index written since the last commit */
	uint64_t alloc_seq;   /* bumped whenever our calls change chunks */
	uint64_t alloc_told;  /* the alloc_seq the service has allocations for */
	uint64_t size_sent_ms;
	bool seen; /* seen_* hold the service's last attributes */
	uint64_t seen_size;
	int64_t seen_mtime_sec;
	uint32_t seen_mtime_nsec;
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

/* node_update_seq()'s @seq for a reply that cannot predate our own size updates. */
#define SIZE_SEQ_FRESH UINT64_MAX

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

/* ---- coherence (coherence.c) ---- */

void node_keep_layout_locked(struct node *n, const struct rfs_layout *l);
void node_note_written_locked(struct node *n, const struct rfs_layout *l, uint64_t written);
void node_update_seq(struct node *n, const struct rfs_entry *e, struct stat *st, bool *changed,
		     uint64_t seq);
void node_update(struct node *n, const struct rfs_entry *e, struct stat *st, bool *changed);
uint64_t node_size_seq(struct node *n);
int node_layout(struct fs *fs, struct node *n, const struct rfs_cred *c, struct rfs_layout *out);
int node_report(struct fs *fs, struct node *n, const struct rfs_cred *c, struct stat *st);
int node_sync(struct fs *fs, struct node *n, const struct rfs_cred *c, bool commit);
int node_chunks_changed(struct fs *fs, struct node *n, const struct rfs_cred *c, uint64_t first,
			struct stat *st);
int node_io_state(struct node *n, struct rfs_layout *layout, uint64_t *size);
int node_extend(struct fs *fs, struct node *n, const struct rfs_cred *c, uint64_t end);
int node_shrink(struct fs *fs, struct node *n, const struct rfs_cred *c, const struct handle *h,
		uint64_t size);

/* ---- read-ahead (readahead.c) ---- */

void readahead_find_bdi(struct fs *fs, const char *mountpoint);
void readahead_tune(struct fs *fs);

/* ---- the operations (ops.c) ---- */

extern const struct fuse_lowlevel_ops mount_ops;

#endif /* RDMAFS_MOUNT_I_H */
