/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The bottom layer of the metadata service (meta_i.h has the others):
 * store.c and this header. store.c owns the LMDB environment and every
 * record format, and is the only code of the service that calls LMDB; the
 * layers above see typed records, transactions and walks, and never a key.
 * It also keeps the log and the reply memory that every layer uses.
 *
 * Named databases and their records (integers in keys are big-endian so that
 * LMDB's byte order is numeric order; values use the host byte order, as the
 * LMDB file itself does):
 *
 *   counters  "format", "next_ino", ... (string key) -> uint64
 *   inodes    ino -> struct inode_rec, then stripe_width daemon UUIDs, then (files
 *             with more than one copy of each chunk only) a uint32 replica count
 *   dirents   (parent, name bytes) -> struct dirent_val
 *   dirpos    (parent, entry id) -> struct dirpos_val, then the name bytes
 *   symlinks  ino -> target bytes
 *   xattrs    (ino, name bytes) -> value bytes
 *   handles   handle -> (ino, flags, reserved): open handles, as builds
 *             before handles lived in memory kept them; emptied at open
 *   allocs    (ino, daemon uuid) -> uint64 bytes that daemon allocated to the file;
 *             (ino) alone -> uint64 0, the mark that st_blocks comes from the
 *             reports: set on files created since allocs exists, and on older
 *             files once a report covers every daemon of their layout
 *   daemons   uuid (16 bytes) -> struct daemon_rec, then the addresses, then
 *             (since daemons have names; absent in older records) the name
 *             and the disk id, each a uint16 length and the bytes, and a
 *             uint32 of DAEMON_F_* flags
 *   clients   serial -> struct client_rec, then the name bytes (client keys;
 *             the database is created empty when an older store is opened)
 *
 * Readdir cookies: each directory hands out increasing entry ids (its
 * next_dirent_id, starting at META_DIRENT_FIRST_ID so a client can give "."
 * and ".." the offsets 1 and 2); a dirent keeps its id for life and dirpos
 * indexes the directory by id. READDIR returns entries in id order and a
 * cookie is the entry's id, so resuming after a cookie is a range scan that
 * is exact however many entries were added or removed meanwhile: an entry
 * present for the whole listing is returned exactly once, new entries (with
 * larger ids) may or may not be, removed ones are not returned after removal.
 */
#ifndef RDMAFS_META_STORE_I_H
#define RDMAFS_META_STORE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "meta.h"
#include "rdmafs_common.h"

/* Limits of the records. */
#define META_NAME_MAX	     255
#define META_XATTR_NAME_MAX  255
#define META_MAX_ADDRESSES   16
#define META_MAX_ADDRESS_LEN 255
#define META_MAX_DAEMON_NAME 64 /* a daemon's name and its disk id */
#define META_DIRENT_FIRST_ID 3

/* The LMDB environment and its databases, defined in store.c. */
struct meta_store;
/* An LMDB transaction; only store.c looks inside. */
struct meta_store_txn;

/* The service: every layer reads its options and clocks. */
struct meta {
	struct meta_store *store; /* meta_store_open() .. meta_store_close() */
	struct meta_options opts;
	uint64_t run_id; /* "runs" counter at open: tells stale heartbeat stamps */
	uint64_t salt;	 /* per-filesystem, mixed into placement seeds */
	uint8_t cluster_id[RDMAFS_UUID_LEN]; /* counters "cluster_id.0" and ".1" */
	uint64_t now_sec;		     /* meta_tick() clock, read and written atomically */
	uint64_t first_tick;		     /* now_sec of the first tick of this run, 0 before */
	/* dispatch.c's, one per method of its table, for meta_method_stats() */
	struct meta_method_counters *method_counters;
	struct meta_group *group;	       /* group.c: the write requests waiting to commit */
	struct meta_handles *handles;	       /* handles.c: the open handles */
	uint64_t syncs;			       /* meta_store_sync() calls that flushed (atomic) */
	uint64_t growth_kicks, growth_flushes; /* meta_growth_stats() (atomic) */
	struct rdmafs_flusher *flusher; /* dispatch.c: batch's flushes every sync_interval_ms */
	struct meta_reports *reports;	/* cluster.c: the daemons' last miss reports, in memory */
};

struct inode_rec {
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	uint64_t rdev;
	uint64_t generation;
	uint64_t parent;	 /* directories: for the rename loop check and ".." */
	uint64_t next_dirent_id; /* directories */
	int64_t atime_sec;
	int64_t mtime_sec;
	int64_t ctime_sec;
	uint32_t atime_nsec;
	uint32_t mtime_nsec;
	uint32_t ctime_nsec;
	uint32_t open_count; /* unused: open handles live in memory (handles.c) */
	uint32_t chunk_size; /* layout of regular files, stripe_width UUIDs follow */
	uint32_t stripe_width;
	uint32_t placement;
	/*
	 * Layout.generation: bumped by SET_LAYOUT. It took the place of a field
	 * that was always 0, so inodes written before it read as generation 0
	 * and the record's size did not change.
	 */
	uint32_t layout_generation;
	uint64_t placement_seed;
};

struct inode {
	uint64_t ino;
	struct inode_rec r;
	uint8_t daemons[RDMAFS_MAX_STRIPE][RDMAFS_UUID_LEN];
	uint32_t replicas; /* regular files: Layout.replicas, 1..RDMAFS_MAX_REPLICAS */
	/* files of copies: Layout.domains, one per daemon (n_domains = stripe_width), or
	 * n_domains 0: each daemon a failure domain of its own */
	uint32_t n_domains;
	uint32_t domains[RDMAFS_MAX_STRIPE];
};

/* The directory xattr whose value ("1".."4") new files and directories under it inherit. */
#define META_XATTR_REPLICAS "rdmafs.replicas"

struct dirent_val {
	uint64_t ino;
	uint64_t id;
	uint32_t type; /* S_IFMT bits of the inode */
	uint32_t reserved;
};

struct dirpos_val {
	uint64_t ino;
	uint32_t type;
	uint32_t name_len;
};

struct daemon_rec {
	uint32_t state;		/* Rdmafs__DaemonState */
	uint32_t address_count; /* each follows as a uint16 length and the bytes */
	uint64_t capacity_bytes;
	uint64_t used_bytes;
	uint64_t hb_run; /* struct meta.run_id when hb_sec was stamped */
	uint64_t hb_sec;
	uint64_t hb_unix_ms;
};

/* struct daemon.flags */
#define DAEMON_F_HOSTS_METADATA 1u

/* A daemons record decoded. */
struct daemon {
	uint8_t uuid[RDMAFS_UUID_LEN];
	struct daemon_rec r;
	uint16_t address_len[META_MAX_ADDRESSES];
	char address[META_MAX_ADDRESSES][META_MAX_ADDRESS_LEN + 1];
	char name[META_MAX_DAEMON_NAME + 1];	/* "" in records older than names */
	char disk_id[META_MAX_DAEMON_NAME + 1]; /* "": shares no disk we know of */
	uint32_t flags;				/* DAEMON_F_* */
	/* its failure domains as declared ("": not; records older than domains) */
	char host[META_MAX_DAEMON_NAME + 1];
	char rack[META_MAX_DAEMON_NAME + 1];
};

#define META_CLIENT_NAME_MAX 64 /* as XPRT_KEY_NAME_MAX */

/* A client key the service issued (its key is derived, never stored). */
struct client_rec {
	uint32_t flags;	  /* RDMAFS_KEY_* */
	uint32_t revoked; /* 0 or 1 */
	uint64_t created_unix_ms;
	uint64_t revoked_unix_ms;
};

struct meta_client {
	uint64_t serial;
	struct client_rec r;
	char name[META_CLIENT_NAME_MAX + 1];
};

/* The caller of one request. */
struct meta_cred {
	uint32_t uid;
	uint32_t gid;
	size_t group_count;
	const uint32_t *groups;
};

struct meta_arena;

/* One request: its transaction, caller, clock and reply memory. */
struct meta_txn {
	struct meta *m;
	struct meta_store_txn *txn; /* LMDB's, opaque outside store.c */
	struct meta_cred cred;
	struct timespec now;	  /* CLOCK_REALTIME at the start */
	struct meta_arena *arena; /* reply memory, freed after packing */
	size_t resp_cap;	  /* room for the packed reply */
	struct handle_undo *undo; /* handles.c: this request's changes of the table, newest first */
	bool durable;		  /* answer only once the store is flushed (SYNC, ...) */
	bool caller_flushes;	  /* flush_before_free: freeing a file does not set @durable */
};

/* ---- the log and reply memory of every layer ---- */

/* Logs through meta_options.log, or to stderr without one. @m may be NULL. */
__attribute__((format(printf, 3, 4))) void meta_log(struct meta *m, enum meta_log_level level,
						    const char *fmt, ...);

/*
 * Zeroed memory of request @t that lives until its reply is packed (@t owns
 * it); NULL when out of memory. meta_dup() copies @len bytes into it.
 */
void *meta_alloc(struct meta_txn *t, size_t size);
void *meta_dup(struct meta_txn *t, const void *data, size_t len);
/* Frees a request's memory: every block of list @a. NULL is a no-op. */
void meta_arena_free(struct meta_arena *a);

/* ---- the environment and its transactions ---- */

/*
 * Opens (creating if needed) the LMDB environment in the existing directory
 * @dir, sized by m->opts.map_size, into m->store. Its databases open in the
 * first write transaction (meta_store_open_databases()). Returns 0 or -errno
 * (-ENOENT for a missing @dir, -ENOMEM, ...).
 */
int meta_store_open(struct meta *m, const char *dir);

/* Closes m->store; no transaction may be open. NULL and a closed store are no-ops. */
void meta_store_close(struct meta *m);

/*
 * Opens the named databases, creating those missing. Runs once, in the first
 * write transaction after meta_store_open(), before any other store call;
 * when that transaction aborts, nothing was created. Returns 0 or -errno.
 */
int meta_store_open_databases(struct meta_txn *t);

/*
 * Begins the transaction of @t (t->m set), read-write when @write. Every
 * store call on @t runs in it until meta_store_txn_commit() or
 * meta_store_txn_abort() ends it. Writers wait for each other; readers run
 * in parallel with everything. Returns 0, -EAGAIN when every reader slot is
 * taken, or -errno.
 */
int meta_store_txn_begin(struct meta_txn *t, bool write);

/* Commits and ends @t's transaction. Returns 0, -ENOSPC when the store is full, or -errno. */
int meta_store_txn_commit(struct meta_txn *t);

/* Ends @t's transaction, undoing its writes; a no-op when none is open. */
void meta_store_txn_abort(struct meta_txn *t);

/*
 * Flushes every committed transaction to disk (with batch, through the
 * guard: lmdb_guard_flush()) and counts it. 0 or -errno.
 */
int meta_store_sync(struct meta *m);

/*
 * metadata_sync = batch, for a caller holding no transaction; no-ops with
 * always. The guard counts the commits since the last flush, whoever made
 * them (requests, ticks, sweeps). meta_store_sync_new() flushes when there
 * is any (the flusher, meta_tick()). meta_store_bound_growth() (a group's
 * leader) acts when there are more than LMDB_GUARD_LAG, so that a burst
 * between two of the flusher's rounds cannot grow the store to its map
 * size: it kicks the flusher (rdmafs_flusher_kick()), so that requests do
 * not wait for the flush, and flushes itself past META_STORE_HARD_LAG or
 * when there is no flusher.
 */
#define META_STORE_HARD_LAG (4 * LMDB_GUARD_LAG)
void meta_store_sync_new(struct meta *m);
void meta_store_bound_growth(struct meta *m);

/*
 * A group transaction (group.c): one write transaction that several
 * requests share, each in a transaction of its own nested in it.
 * meta_store_group_begin() begins it (writers wait for each other, as
 * above); meta_store_txn_begin_in() begins @t's transaction inside @group,
 * ended as any other by meta_store_txn_commit() (its writes join the
 * group's) or meta_store_txn_abort() (they are undone, the group's are
 * not); meta_store_group_commit() makes the group durable at once, or fails
 * and keeps nothing of it; meta_store_group_abort() undoes it all. No
 * store call may use @group while a nested transaction is open in it.
 * Return 0, -ENOSPC when the store is full, or -errno.
 */
int meta_store_group_begin(struct meta *m, struct meta_store_txn **group);
int meta_store_txn_begin_in(struct meta_txn *t, struct meta_store_txn *group);
int meta_store_group_commit(struct meta *m, struct meta_store_txn *group);
void meta_store_group_abort(struct meta_store_txn *group);

/*
 * ---- records ----
 *
 * Each call runs in @t's transaction and returns 0 or a negative errno:
 * -ENOENT when the record asked for does not exist, -EIO (logged) when a
 * record does not decode, -ENOSPC when the store is full, -ENOMEM. Records
 * come back as copies the caller owns, except where a call hands out a
 * pointer "into the store": that memory belongs to LMDB and stays valid only
 * until @t writes or ends.
 *
 * The walks call a callback for each record of a range. It gets the walk's
 * transaction, which it may read (and write where its walk says so), and
 * returns 0 to go on, a positive value to stop, or a negative errno. A walk
 * returns 0 when the range ran out, else what the callback stopped with.
 */

/* Reads counter @name ("format", "next_ino", "epoch", ...) into *@value. */
int meta_store_counter_get(struct meta_txn *t, const char *name, uint64_t *value);
/* Sets counter @name to @value, creating it. */
int meta_store_counter_put(struct meta_txn *t, const char *name, uint64_t value);
/* Returns counter @name in *@value and stores value + 1. */
int meta_store_counter_next(struct meta_txn *t, const char *name, uint64_t *value);
/* Adds @delta (maybe negative) to counter @name. */
int meta_store_counter_add(struct meta_txn *t, const char *name, int64_t delta);

/* Reads inode @ino, with its layout, into @out. */
int meta_store_inode_get(struct meta_txn *t, uint64_t ino, struct inode *out);
/* Writes inode @in (in->ino), creating or replacing it. */
int meta_store_inode_put(struct meta_txn *t, const struct inode *in);
/*
 * Deletes inode @ino with its symlink target, xattrs and allocation reports,
 * and counts it out of "inodes". Its directory entries are the caller's.
 */
int meta_store_inode_delete(struct meta_txn *t, uint64_t ino);

typedef int (*meta_store_inode_cb)(struct meta_txn *t, const struct inode *in, void *arg);
/*
 * Walks the inodes numbered @first or above, in number order. @in is the
 * walk's copy, valid during the call. -EIO stops it at a corrupt inode.
 */
int meta_store_inodes_from(struct meta_txn *t, uint64_t first, meta_store_inode_cb cb, void *arg);

/* Reads the entry @name (@len bytes) of directory @parent into @out; -ENAMETOOLONG. */
int meta_store_dirent_get(struct meta_txn *t, uint64_t parent, const uint8_t *name, size_t len,
			  struct dirent_val *out);
/*
 * Adds entry @name of directory @dir pointing at @ino of @type (S_IFMT bits),
 * with the next entry id of @dir, which it advances: the caller then writes
 * @dir. -EEXIST if @name is taken.
 */
int meta_store_dirent_add(struct meta_txn *t, struct inode *dir, const uint8_t *name, size_t len,
			  uint64_t ino, uint32_t type);
/* Points the existing entry @name of @parent at another inode, keeping its id (RENAME_EXCHANGE). */
int meta_store_dirent_repoint(struct meta_txn *t, uint64_t parent, const uint8_t *name, size_t len,
			      uint64_t ino, uint32_t type);
/* Deletes the entry @name of @parent (the inode it names is the caller's). */
int meta_store_dirent_delete(struct meta_txn *t, uint64_t parent, const uint8_t *name, size_t len);
/* 1 if directory @ino has no entries, 0 if it has, or a negative errno. */
int meta_store_dir_empty(struct meta_txn *t, uint64_t ino);

/* One entry of a directory, as the walk by id sees it; @name points into the store. */
struct meta_store_dirent {
	uint64_t id; /* the readdir cookie */
	uint64_t ino;
	uint32_t type; /* S_IFMT bits */
	const uint8_t *name;
	size_t name_len;
};
typedef int (*meta_store_dirent_cb)(struct meta_txn *t, const struct meta_store_dirent *e,
				    void *arg);
/*
 * Walks the entries of directory @parent whose id is above @after_id, in id
 * order (see "Readdir cookies" above). -EIO stops it at a corrupt record.
 */
int meta_store_dirents_from(struct meta_txn *t, uint64_t parent, uint64_t after_id,
			    meta_store_dirent_cb cb, void *arg);

/* Reads the target of symlink @ino: *@target (@len bytes) points into the store. */
int meta_store_symlink_get(struct meta_txn *t, uint64_t ino, const void **target, size_t *len);
/* Writes the target of symlink @ino (copied). */
int meta_store_symlink_put(struct meta_txn *t, uint64_t ino, const void *target, size_t len);

/*
 * Extended attribute @name (@len bytes, at most META_XATTR_NAME_MAX, else
 * -ERANGE) of inode @ino. get: *@value (@value_len bytes) points into the
 * store. put: creates or replaces it (copied; @value may be NULL when
 * @value_len is 0). delete: -ENOENT if there is none.
 */
int meta_store_xattr_get(struct meta_txn *t, uint64_t ino, const uint8_t *name, size_t len,
			 const void **value, size_t *value_len);
int meta_store_xattr_put(struct meta_txn *t, uint64_t ino, const uint8_t *name, size_t len,
			 const void *value, size_t value_len);
int meta_store_xattr_delete(struct meta_txn *t, uint64_t ino, const uint8_t *name, size_t len);

/* @name points into the store. */
typedef int (*meta_store_xattr_cb)(struct meta_txn *t, const uint8_t *name, size_t len, void *arg);
/* Walks the names of the xattrs of inode @ino, in byte order. */
int meta_store_xattrs_each(struct meta_txn *t, uint64_t ino, meta_store_xattr_cb cb, void *arg);

/*
 * Empties the handles database, which only stores of older builds filled
 * (handles live in memory now, meta_i.h), counting into *@count what it held.
 */
int meta_store_handles_clear(struct meta_txn *t, uint64_t *count);

/*
 * Sums into *@bytes what the daemons of @in's layout reported holding for
 * it; reports of daemons no longer in the layout do not count.
 */
int meta_store_alloc_sum(struct meta_txn *t, const struct inode *in, uint64_t *bytes);
/* Records that daemon @uuid holds @bytes of inode @ino. */
int meta_store_alloc_put(struct meta_txn *t, uint64_t ino, const uint8_t *uuid, uint64_t bytes);
/* 1 if inode @ino's st_blocks comes from the reports (its mark), 0 if not, or -errno. */
int meta_store_alloc_known(struct meta_txn *t, uint64_t ino);
/* Sets that mark on inode @ino. */
int meta_store_alloc_mark(struct meta_txn *t, uint64_t ino);

/* Reads the cluster map's daemon @uuid (RDMAFS_UUID_LEN bytes) into @out. */
int meta_store_daemon_get(struct meta_txn *t, const uint8_t *uuid, struct daemon *out);
/* Writes daemon @d (d->uuid), creating or replacing it. */
int meta_store_daemon_put(struct meta_txn *t, const struct daemon *d);
/* How many daemons the map holds. */
int meta_store_daemon_count(struct meta_txn *t, size_t *count);

typedef int (*meta_store_daemon_cb)(struct meta_txn *t, struct daemon *d, void *arg);
/*
 * Walks the daemons in UUID order. @d is the walk's copy: the callback may
 * change it and meta_store_daemon_put() it (the walk goes on after it), but
 * must write no other daemon. -EIO stops it at a corrupt record.
 */
int meta_store_daemons_each(struct meta_txn *t, meta_store_daemon_cb cb, void *arg);

/* Reads client key @serial into @out. */
int meta_store_client_get(struct meta_txn *t, uint64_t serial, struct meta_client *out);
/* Writes client key @c (c->serial), creating or replacing it. */
int meta_store_client_put(struct meta_txn *t, const struct meta_client *c);

typedef int (*meta_store_client_cb)(struct meta_txn *t, const struct meta_client *c, void *arg);
/* Walks the client keys with a serial above @after, in serial order. */
int meta_store_clients_from(struct meta_txn *t, uint64_t after, meta_store_client_cb cb, void *arg);

#endif
