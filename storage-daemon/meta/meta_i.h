/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Internals of the metadata service, in layers. Each file calls only the
 * layers below it, so each can be read without the ones above:
 *
 *   dispatch.c  meta_open() (the format check, a new store's counters),
 *               meta_close(), meta_handle(): unpack -> transaction -> pack,
 *               through the method table
 *   group.c     group commit: write requests that arrive together share one
 *               transaction and one flush
 *   handles.c   the open handles, in memory, undone with their request
 *   admin.c     rdmafsctl's methods: INODE_LIST, SET_LAYOUT, INODE_PATHS, CLIENT_*
 *   ops.c       the filesystem operations and their permission checks
 *   cluster.c   the cluster map: daemons, epoch, STATFS, the daemons of a
 *               new file's layout, meta_tick()
 *   store.c     the LMDB store (meta_store_i.h): environment, transactions,
 *               record formats, walks; the log and the reply memory
 *
 * Dependency order: store <- handles <- group, cluster <- ops <- admin <- dispatch; no file
 * calls one above it. store.c includes only the store's headers, so it
 * cannot, and it is the only file that calls LMDB: grep the other four for
 * LMDB's mdb prefix and nothing turns up.
 */
#ifndef RDMAFS_META_I_H
#define RDMAFS_META_I_H

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "rdmafs.pb-c.h"
#include "meta.h"
#include "meta_store_i.h"
#include "rdmafs_common.h"

#define META_FORMAT_VERSION 1
#define META_ROOT_INO	    1
#define META_SYMLINK_MAX    4095 /* PATH_MAX - 1 */
#define META_XATTR_SIZE_MAX 65536
#define META_LINK_MAX	    65000 /* hard links of one file, as ext4 */

typedef int (*meta_op_fn)(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);

/* ---- group.c ---- */

/* What one write request does in its transaction; 0 or -errno (then it is undone). */
typedef int (*meta_group_fn)(struct meta_txn *t, void *arg);

/* The queue of write requests (m->group): 0 or -ENOMEM. */
int meta_group_create(struct meta *m);
/* Frees m->group; no request may be waiting. */
void meta_group_destroy(struct meta *m);

/*
 * Runs @fn(@t, @arg) in a write transaction of its own, nested in a group
 * transaction that the write requests arriving meanwhile share: the first
 * caller to find no group running leads, takes every request queued, runs
 * them one after the other in their order of arrival, and commits them all
 * with one flush; the others wait for it. A request whose @fn fails is
 * undone alone. Returns @fn's result when the group committed, else the
 * commit's error (nothing of the group stays). Runs when this returns
 * durably committed (as a transaction of its own would be).
 */
int meta_group_run(struct meta *m, struct meta_txn *t, meta_group_fn fn, void *arg);

/*
 * meta_group_run() for @n requests at once from one thread (@fn(@t[i],
 * @args[i]) each, its result in @rets[i]): all in the same group, in their
 * order. Returns 0 once they ran, or -ENOMEM and none ran.
 */
int meta_group_run_many(struct meta *m, struct meta_txn *const *t, meta_group_fn fn,
			void *const *args, int *rets, size_t n);

/* Groups committed and requests run in them since meta_group_create(). */
void meta_group_stats(struct meta *m, uint64_t *groups, uint64_t *requests);

/* True when no group commits and no request waits for one. */
bool meta_group_idle(struct meta *m);

/* Requests queued and not yet taken by a leader (for tests). */
unsigned meta_group_queued(struct meta *m);

/* ---- handles.c ---- */

/*
 * Open handles live in the service's memory (m->handles), never in the
 * store: OPEN and CREATE add one, RELEASE removes it, and only the release
 * of an unlinked file's last handle writes (it frees the file). A handle's
 * number carries the service's run in its top bits, so no number of an
 * earlier run names a handle of this one. After a restart, clients reclaim
 * their handles (RECLAIM) under their old numbers; meta_tick() frees, once
 * the grace period is over, the unlinked files (orphans) none was reclaimed
 * for.
 *
 * The changes are made at once, for the requests after them to see, and
 * logged in @t: a request that fails, or whose group does not commit, is
 * undone by meta_handles_undo(t) (group.c calls it).
 */
struct meta_handle_info {
	uint64_t ino;
	uint32_t flags; /* open(2) flags as OPEN got them */
};

/* The table (m->handles): 0 or -ENOMEM. */
int meta_handles_create(struct meta *m);
/* Frees m->handles and every handle in it. NULL is a no-op. */
void meta_handles_destroy(struct meta *m);

/*
 * Adds a handle on @ino open with @flags. *@handle 0: a new number, put in
 * *@handle (-ENFILE once a run used 2^40); else a reclaim of that number,
 * which must be of an earlier run (-EINVAL) and not taken already (-EEXIST).
 * -ENOMEM.
 */
int meta_handle_add(struct meta_txn *t, uint64_t ino, uint32_t flags, uint64_t *handle);
/* Removes @handle, saying what it held in @out: 0 or -ENOENT (no such handle), -ENOMEM. */
int meta_handle_remove(struct meta_txn *t, uint64_t handle, struct meta_handle_info *out);
/* What @handle holds: 0 or -ENOENT. */
int meta_handle_find(struct meta *m, uint64_t handle, struct meta_handle_info *out);
/* The handles open on @ino. */
uint32_t meta_handle_opens(struct meta *m, uint64_t ino);
/* The handles open on every inode. */
uint64_t meta_handles_total(struct meta *m);
/* Takes back the changes @t made, newest first, and forgets them. */
void meta_handles_undo(struct meta_txn *t);

/*
 * Whether the reclaim grace period runs: the last run may have ended with
 * handles open (it did not close with none), so any file may be held by a
 * client that has not reclaimed yet, and no unlinked file is freed.
 */
bool meta_in_grace(struct meta *m);
/* Starts (@on) or ends the grace period. */
void meta_set_grace(struct meta *m, bool on);
/* For the fuzz target: no handle open, numbers counted from the start again, no grace. */
void meta_handles_reset(struct meta *m);

/* ---- cluster.c ---- */

int meta_op_statfs(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_register_daemon(struct meta_txn *t, const ProtobufCMessage *req,
			    ProtobufCMessage **resp);
int meta_op_heartbeat(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_get_cluster_map(struct meta_txn *t, const ProtobufCMessage *req,
			    ProtobufCMessage **resp);
int meta_op_set_daemon_state(struct meta_txn *t, const ProtobufCMessage *req,
			     ProtobufCMessage **resp);
int meta_op_drain_status(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);

/* meta_tick()'s cluster part: marks silent daemons DOWN (meta.h). */
int meta_cluster_tick(struct meta *m, uint64_t now_sec);
/* Frees what the cluster map keeps in memory (the daemons' miss reports). */
void meta_cluster_free(struct meta *m);

/* The state of daemon @uuid in the cluster map (a DaemonState); -ENOENT if unknown. */
int meta_daemon_state(struct meta_txn *t, const uint8_t *uuid, uint32_t *state);

/*
 * Chooses the daemons of a new file's layout: min(stripe width, UP daemons),
 * the top scores of rdmafs_rendezvous_score(seed, ino, 0, uuid), so files spread
 * over all daemons. -ENOSPC when no daemon is UP.
 */
int meta_choose_layout(struct meta_txn *t, struct inode *in);

/* The counter CLIENT_ADD and CLIENT_REVOKE bump (0 in a store without keys). */
int meta_keys_epoch(struct meta_txn *t, uint64_t *epoch);

/* ---- ops.c ---- */

int meta_op_lookup(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_getattr(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_setattr(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_create(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_mknod(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_mkdir(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_symlink(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_unlink(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_rmdir(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_rename(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_link(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_readlink(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_readdir(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_open(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_release(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_setxattr(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_getxattr(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_listxattr(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_removexattr(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_update_size(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_reclaim(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_sync(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);

/* Handles one RECLAIM may name. */
#define META_RECLAIM_MAX 1024

/*
 * Frees the orphans (unlinked files) that no handle holds, once the
 * reclaim grace period has run since the first tick at @now_sec: 0 when
 * done or not yet due, else -errno (tried again at the next tick).
 */
int meta_orphans_sweep(struct meta *m, uint64_t now_sec);

/* Creates the root directory in a new store. */
int meta_make_root(struct meta_txn *t);

/* The layout of a regular file, in reply memory; *@out stays NULL for anything else. */
int meta_layout_out(struct meta_txn *t, const struct inode *in, Rdmafs__Layout **out);

/* ---- admin.c: rdmafsctl's methods ---- */

int meta_op_inode_list(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_set_layout(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_inode_paths(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_client_add(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_client_list(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);
int meta_op_client_revoke(struct meta_txn *t, const ProtobufCMessage *req, ProtobufCMessage **resp);

#endif
