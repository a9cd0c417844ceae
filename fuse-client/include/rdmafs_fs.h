/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The rdmafs client core: what a mount (rdmafs-fuse), a copy tool or any
 * application needs to use rdmafs as a filesystem, without FUSE. It is the
 * library's one public header (prefix rfs_), in three parts: the
 * filesystem (struct rfs: this comment, to the first ==== line), one daemon
 * spoken to directly (struct rfs_daemon: for administration tools, tests and
 * benchmarks), and the client programs' settings file (client.conf).
 *
 *  - One connection to the metadata service, and the filesystem's calls on
 *    it in plain C types (lookup, create, readdir, rename, xattrs, ...: "the
 *    filesystem" below). The wire format stays inside the library.
 *  - The cluster map (GET_CLUSTER_MAP), fetched at start, polled in the
 *    background and refetched when a daemon cannot be reached or a layout
 *    names a daemon we do not know. Its cluster id becomes the handle's: a
 *    metadata service that answers for another cluster later (its address
 *    reused) is refused, on every new connection to it, and calls fail with
 *    -EIO rather than reach another cluster's files.
 *  - One connection per storage daemon (by UUID), to the addresses of the map
 *    in their order, rdma:// only when this host has an RDMA device (or the
 *    transport is forced). A daemon that cannot be reached is retried with
 *    exponential backoff; meanwhile calls to it fail at once.
 *  - Striped chunk I/O: a byte range is cut at chunk boundaries, each chunk is
 *    placed with rdmafs_place_chunk() over the file's layout, and the chunk RPCs
 *    go to all daemons at once from buffers of a registered pool, which the
 *    daemons RDMA READ (writes) or RDMA WRITE (reads).
 *
 * Threads: every function may be called from any number of threads at once.
 *
 * Errors: 0 or a negative errno. Metadata calls return the service's POSIX
 * error. Transport failures: -ETIMEDOUT (no answer within the call timeout),
 * -EIO (a daemon or the metadata service cannot be reached or the connection
 * broke; the log says why), -EPROTO (a reply that does not make sense). No
 * call waits longer than about the call timeout plus the connect timeout.
 */
#ifndef RDMAFS_FS_H
#define RDMAFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#include "rdmafs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rfs;

/* Most daemons a layout may name (the metadata service allows 64). */
#define RFS_MAX_STRIPE 64
#define RFS_UUID_LEN   16

enum rfs_transport {
	RFS_TRANSPORT_AUTO = 0, /* rdma:// addresses when an RDMA device exists, else tcp:// */
	RFS_TRANSPORT_RDMA,	/* rdma:// addresses only */
	RFS_TRANSPORT_TCP,	/* tcp:// addresses only */
};

struct rfs_options {
	const char *meta_uri; /* metadata service, e.g. "tcp://10.0.0.1:7471" */
	const void *secret;   /* cluster secret; copied */
	size_t secret_len;
	/*
	 * A client key file (rdmafsctl client add) to prove instead of the
	 * secret: read at rfs_create(), which then fails with what
	 * rdmafs_key_read() returned; the service enforces the key's flags.
	 */
	const char *key_file;
	enum rfs_transport transport;
	const char *name;	     /* our name in the daemons' logs */
	uint32_t call_timeout_ms;    /* every RPC [5000] */
	uint32_t connect_timeout_ms; /* [2000] */
	uint32_t buf_size;	     /* bytes per registered buffer [1 MiB] */
	uint32_t buf_count;	     /* registered buffers [32] */
	uint32_t map_poll_ms;	     /* cluster map poll interval, 0: the default [5000] */
	uint32_t fence_wait_ms;	     /* how long a data call waits out a drain, 0: [30000] */
	/*
	 * Write-behind: how many writes of one file rfs_file_write() keeps in
	 * flight before it waits for the oldest, 0: none (every write waits
	 * for its daemons) [8]. See rfs_file_write().
	 */
	unsigned write_behind;
	/*
	 * How long (us) a thread waiting for its answer, or the transport's
	 * thread after it handled completions, polls before it
	 * sleeps (verbs: the completion queue; tcp: the socket); -1: libxprt's
	 * default [100] (xprt.h, busy_poll_us).
	 */
	int busy_poll_us;
};

/* Fills @opts with the defaults (meta_uri, secret and key_file stay NULL). */
void rfs_options_init(struct rfs_options *opts);

/*
 * Creates the transport context and the buffer pool, connects to the metadata
 * service and fetches the cluster map. Storage daemons are connected on first
 * use: over tcp with one connection per slot of the calling threads (8 slots,
 * a thread keeps its own, as NFS's nconnect), so that a thread waiting for
 * its answer reads its own socket; over verbs with one. Returns -EINVAL (bad options), -ENOMEM, or
 * the connect error
 * (-ECONNREFUSED, -EACCES: secret or key refused, -EKEYREVOKED: the key
 * was revoked, -ETIMEDOUT, -ENODEV: rdma://
 * without an RDMA device).
 */
int rfs_create(const struct rfs_options *opts, struct rfs **out);

/* Closes every connection and frees everything. No call may be running. NULL is a no-op. */
void rfs_destroy(struct rfs *fs);

/*
 * Refetches the cluster map if it changed (@force: whatever its epoch).
 * Returns 0 or the metadata call's error.
 */
int rfs_map_refresh(struct rfs *fs, bool force);

/* The epoch of the map we hold. */
uint64_t rfs_map_epoch(struct rfs *fs);

/* ---- statistics ------------------------------------------------------------------ */

/*
 * What a struct rfs counted since rfs_create(), for monitoring: rdmafs-fuse
 * serves it as Prometheus metrics (docs/metrics.md), and any application
 * linking the library may read it. Counting is always on and cheap: two
 * clock reads and a few relaxed atomic additions per RPC, no lock.
 */

/* Where an RPC goes. */
enum rfs_target {
	RFS_TARGET_META = 0, /* the metadata service, which serves the cluster map too */
	RFS_TARGET_STORAGE,  /* the storage daemons, all together */
	RFS_TARGETS,
};

/* Methods counted one by one: every method the library sends, and OTHER. */
#define RFS_STATS_METHODS 40

/*
 * The RPCs of one method. requests counts every call made (a retry is one
 * more); errors, those that failed: an error the peer answered (ENOENT of a
 * lookup too) or a transport error; timeouts, those of the errors that got
 * no answer within the call timeout. latency runs from sending to the answer
 * or the failure.
 */
struct rfs_method_stats {
	char name[24]; /* rdmafs.proto's name without METHOD_ ("LOOKUP"), or "OTHER" */
	enum rfs_target target;
	uint64_t requests, errors, timeouts;
	struct rdmafs_latency latency;
};

/*
 * Connections and retries of one target. retries: calls made again after
 * their connection broke or the daemon was busy (EBUSY). connects:
 * connections made, the first to each peer (and to each of a peer's
 * slots, rfs_create()) included; reconnects, those of them made after one
 * of the peer's connections broke (or was closed for its new address) or a
 * connect to it failed: a daemon that came back, whichever of the caller's
 * threads reconnects. connect_failures:
 * connection attempts that failed (every address of the peer tried); calls
 * to that peer then fail at once until its backoff ends.
 */
struct rfs_target_stats {
	uint64_t retries, connects, reconnects, connect_failures;
};

/*
 * Everything counted. The cluster map: its epoch, the maps fetched
 * (GET_CLUSTER_MAP answered) and of those the ones newer than the map held.
 * layout_refetches: layouts fetched again after a daemon refused the one
 * used (a drain moves the file). File data moved to and from the storage
 * daemons (the zeros of punched holes included). The registered buffer pool:
 * its size, the data calls that waited for a free buffer, how long, and the
 * waits that ended without one (the call failed with -ETIMEDOUT).
 * replica_moves: chunk reads that failed on one copy of a replicated file
 * and were asked of the next daemon of the chunk's chain. replica_waits:
 * replicated reads and writes redone after a wait for the chain to settle
 * (a daemon of it died and is not DOWN yet, or the maps disagree).
 */
struct rfs_stats {
	struct rfs_method_stats methods[RFS_STATS_METHODS];
	unsigned method_count; /* methods[] filled */
	struct rfs_target_stats targets[RFS_TARGETS];
	uint64_t map_epoch, map_fetches, map_changes;
	uint64_t layout_refetches;
	uint64_t read_bytes, write_bytes;
	uint32_t buffers;
	uint64_t buffer_waits, buffer_wait_ns, buffer_timeouts;
	uint64_t replica_moves, replica_waits;
};

/*
 * Copies what @fs counted into @out. Any thread, while calls run; it never
 * makes them wait. Each counter is read atomically, not all at one instant.
 */
void rfs_stats_get(struct rfs *fs, struct rfs_stats *out);

/* ---- layouts and placement ---------------------------------------------------- */

/* A regular file's layout, checked and copied out of its Layout message. */
struct rfs_layout {
	uint32_t chunk_size;
	uint32_t stripe_width;
	uint64_t seed;
	uint64_t generation; /* sent with every chunk request (daemons fence old ones) */
	uint32_t replicas;   /* copies of each chunk, 1..RFS_MAX_REPLICAS */
	uint8_t daemons[RFS_MAX_STRIPE][RFS_UUID_LEN];
	/* each daemon's failure domain (Layout.domains) when n_domains is stripe_width;
	 * n_domains 0: each daemon its own */
	uint32_t n_domains;
	uint32_t domains[RFS_MAX_STRIPE];
};

/* Most copies of a chunk (RDMAFS_MAX_REPLICAS). */
#define RFS_MAX_REPLICAS 4

/*
 * Which daemon of @layout (an index into daemons[]) holds chunk @index of
 * @ino: the head of its chain, the only one with one replica.
 */
int rfs_layout_place(const struct rfs_layout *layout, uint64_t ino, uint64_t index);

/*
 * The chain of chunk @index of @ino: the daemons of @layout (indexes into
 * daemons[]) that hold its copies, head first, in @out[0..n-1]
 * (RFS_MAX_REPLICAS of room). Returns n, or -EINVAL for a bad layout.
 */
int rfs_layout_chain(const struct rfs_layout *layout, uint64_t ino, uint64_t index, int *out);

/*
 * Fetches the current layout of regular file @ino from the metadata service
 * (GETATTR) into @out. -ENOENT for a file that is gone, -EPROTO for a reply
 * without a valid layout.
 */
int rfs_layout_fetch(struct rfs *fs, uint64_t ino, struct rfs_layout *out);

/* ---- the filesystem, in plain C types ----------------------------------------------- */

/*
 * Metadata calls. Each takes the caller's credentials (NULL: uid 0, root),
 * which the metadata service checks as a local filesystem checks a process:
 * permission bits, sticky directories, ownership. Names are one path
 * component (1..RFS_NAME_MAX bytes, no '/'); the service refuses others.
 * They return 0 or the service's POSIX error (-ENOENT, -EEXIST, -ENOTEMPTY,
 * -EACCES, ...), or a transport error (above). Every answer is checked before
 * it is handed back: a malformed one is -EPROTO.
 */

#define RFS_ROOT_INO	   1
#define RFS_NAME_MAX	   255
#define RFS_GROUPS_MAX	   64
#define RFS_XATTR_NAME_MAX 255

/* Who makes a call. */
struct rfs_cred {
	uint32_t uid;
	uint32_t gid;
	uint32_t n_groups; /* supplementary groups in groups[] */
	uint32_t groups[RFS_GROUPS_MAX];
};

/*
 * An inode as a call that names, creates or opens it answers: its attributes
 * (st_blksize is RFS_BLOCK_SIZE), the generation that tells apart inodes that
 * reused a number, and a regular file's layout.
 */
/*
 * A directory's attributes as a change of its entries left them (valid: the
 * service sent them), for a client that answers the kernel's next GETATTR
 * of it, which the change made the kernel ask, without a round trip.
 */
struct rfs_dir_after {
	bool valid;
	struct stat attr;
};

struct rfs_entry {
	struct stat attr;
	uint64_t generation;
	bool has_layout;
	struct rfs_layout layout;
	struct rfs_dir_after parent; /* mknod, mkdir, symlink, link, a create that created */
};

/*
 * A file whose last link and last handle went with a call (unlink, rename
 * over it, release): its data is still on the daemons until
 * rfs_free_data(), which the caller may run after answering its own caller.
 * Inode numbers are never reused, so nothing can reach that data meanwhile.
 */
struct rfs_freed {
	bool freed; /* false: nothing to free */
	uint64_t ino;
	struct rfs_layout layout;
	uint64_t service_run; /* the service's run known before the freeing call (0: unknown) */
};

/* LOOKUP of @name in directory @parent. */
int rfs_lookup(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	       struct rfs_entry *out);

/* GETATTR of @ino (out->has_layout for a regular file). */
int rfs_getattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, struct rfs_entry *out);

/* rfs_setattr's valid bits: the FUSE_SET_ATTR_* values, and the wire's. */
enum rfs_set {
	RFS_SET_MODE = 1u << 0,
	RFS_SET_UID = 1u << 1,
	RFS_SET_GID = 1u << 2,
	RFS_SET_SIZE = 1u << 3,
	RFS_SET_ATIME = 1u << 4,
	RFS_SET_MTIME = 1u << 5,
	RFS_SET_ATIME_NOW = 1u << 7, /* the service's clock */
	RFS_SET_MTIME_NOW = 1u << 8,
	RFS_SET_CTIME = 1u << 10,
};

/* What rfs_setattr() changes: only the fields whose bit is in @valid. */
struct rfs_setattr {
	uint32_t valid; /* enum rfs_set bits */
	uint32_t mode;	/* permission bits only; the file type cannot change */
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	struct timespec atime, mtime, ctime;
	/*
	 * With RFS_SET_SIZE: the handle of an open(2) that already checked write
	 * permission (ftruncate), 0 for none (truncate checks it now).
	 */
	uint64_t handle;
};

/*
 * SETATTR: the attributes only. A size change is recorded at the service;
 * the data past a smaller size is the caller's to cut (rfs_truncate_data()).
 */
int rfs_setattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino,
		const struct rfs_setattr *set, struct rfs_entry *out);

/* MKNOD of any type but a directory (@mode has S_IFMT), owned by @uid:@gid. */
int rfs_mknod(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	      uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev, struct rfs_entry *out);

/* MKDIR with permission bits @mode. */
int rfs_mkdir(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	      uint32_t mode, uint32_t uid, uint32_t gid, struct rfs_entry *out);

/* SYMLINK @name -> @target (1..4095 bytes). */
int rfs_symlink(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
		const char *target, uint32_t uid, uint32_t gid, struct rfs_entry *out);

/* LINK: a new name @new_name in @new_parent for @ino. */
int rfs_link(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t new_parent,
	     const char *new_name, struct rfs_entry *out);

/*
 * UNLINK; @freed (may be NULL: the data is freed before returning) says what
 * to free; @dir (may be NULL) gets the directory as the unlink left it.
 */
int rfs_unlink(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	       struct rfs_freed *freed, struct rfs_dir_after *dir);

/* RMDIR of an empty directory. */
int rfs_rmdir(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name);

/* rename(2)'s flags. */
#define RFS_RENAME_NOREPLACE 1u
#define RFS_RENAME_EXCHANGE  2u

/* RENAME, as renameat2(2); @freed as with rfs_unlink() (a replaced target). */
int rfs_rename(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
	       uint64_t new_parent, const char *new_name, unsigned flags, struct rfs_freed *freed);

/*
 * OPEN of @ino with open(2) @flags (the access mode is checked and recorded;
 * O_TRUNC is the caller's rfs_setattr()). *@handle must go back with
 * rfs_release(). A directory is opened with O_RDONLY | O_DIRECTORY.
 */
int rfs_open(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, int flags, uint64_t *handle,
	     struct rfs_entry *out);

/*
 * CREATE of a regular file with permission bits @mode (umask applied),
 * opened with @flags: O_EXCL fails with -EEXIST on an existing name, else an
 * existing file is opened (*@created false; may be NULL).
 */
int rfs_create_file(struct rfs *fs, const struct rfs_cred *cred, uint64_t parent, const char *name,
		    uint32_t mode, uint32_t uid, uint32_t gid, int flags, uint64_t *handle,
		    bool *created, struct rfs_entry *out);

/* RELEASE of an open's handle; @freed as with rfs_unlink() (an unlinked file's last). */
int rfs_release(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t handle,
		struct rfs_freed *freed);

/*
 * Removes the data of a freed file (see struct rfs_freed): first a SYNC of the
 * metadata service, which answered the call that freed it without a flush
 * (flush_before_free), so that the file cannot come back over removed chunks
 * after the service's power loss. No chunk is removed when that SYNC fails,
 * or when a service of another run answered it (the freeing answer's run may
 * not have reached the disk). Logs what it could not do (fsck finds the
 * chunks left).
 */
void rfs_free_data(struct rfs *fs, const struct rfs_freed *freed);

/* READLINK into @buf (@size bytes), NUL-terminated; -ENAMETOOLONG when it does not fit. */
int rfs_readlink(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, char *buf, size_t size);

/* One directory entry of rfs_readdir(). */
struct rfs_dirent {
	const char *name; /* NUL-terminated, checked: no '/', not "." or ".." */
	uint64_t ino;
	uint32_t type;	 /* S_IFMT bits of the mode */
	uint64_t cookie; /* resumes after this entry; <= INT64_MAX - 2 */
	bool has_attr;	 /* with @plus */
	struct stat attr;
	uint64_t generation;
};

/*
 * Called for each entry in order; returns 0 to go on, anything else to stop
 * before the entry (it was not taken: resuming after the previous cookie
 * returns it again).
 */
typedef int (*rfs_dirent_cb)(void *arg, const struct rfs_dirent *entry);

/*
 * READDIR of directory @ino after @cookie (0: from the start; "." and ".."
 * are not entries), calling @cb for up to about @max_entries entries (0: one
 * reply's worth), with attributes when @plus. *@eof is set when the listing
 * ended. A cookie stays valid while the directory changes: an entry present
 * for the whole listing is returned exactly once.
 */
int rfs_readdir(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t cookie,
		uint32_t max_entries, bool plus, rfs_dirent_cb cb, void *arg, bool *eof);

/*
 * SYNC: every metadata change the service answered before this call is on
 * its disk (fsync of a directory; rfs_file_fsync() for a file). The service
 * otherwise flushes the last change with the next one or within a second
 * (metadata_sync = batch, rdmafs-daemon(8)).
 */
int rfs_meta_sync(struct rfs *fs);

/* STATFS: the cluster's capacity and inode counts (f_bsize etc. as statvfs(3)). */
int rfs_statfs(struct rfs *fs, struct statvfs *out);

/* xattr flags, as setxattr(2)'s. */
#define RFS_XATTR_CREATE  1 /* -EEXIST if present */
#define RFS_XATTR_REPLACE 2 /* -ENODATA if absent */

int rfs_setxattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, const char *name,
		 const void *value, size_t size, int flags);

/*
 * GETXATTR into @buf (@size bytes). Returns the value's length, with @size 0
 * only that; -ERANGE when it does not fit, -ENODATA when absent.
 */
ssize_t rfs_getxattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, const char *name,
		     void *buf, size_t size);

/*
 * LISTXATTR into @buf as listxattr(2): names, each NUL-terminated. Returns
 * the list's length, with @size 0 only that; -ERANGE when it does not fit.
 */
ssize_t rfs_listxattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, char *buf,
		      size_t size);

int rfs_removexattr(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, const char *name);

/* ---- a file as one client sees it --------------------------------------------------- */

/*
 * What this client knows of one inode and has not yet told the metadata
 * service: the layout its data calls use (a data call that finds the file
 * moved by a drain keeps the new one), the size with this client's writes,
 * the daemons holding writes not yet committed and whether st_blocks is
 * stale. Keep one per inode in a process and share it between the inode's
 * handles (a mount keeps one per inode the kernel holds; rdmafs-copy one per
 * file it writes). Every call may run from any thread. Its data calls are
 * those of "file data" below, with the size and commit bookkeeping done.
 */
struct rfs_file;

/* A file object for @ino (no call is made). -ENOMEM. */
int rfs_file_create(struct rfs *fs, uint64_t ino, struct rfs_file **out);

/* Frees @f; what it did not sync is dropped (sync first). NULL is a no-op. */
void rfs_file_destroy(struct rfs_file *f);

/* rfs_file_merge()'s @seq for attributes that cannot predate our own size updates. */
#define RFS_SEQ_NOW UINT64_MAX

/*
 * Merges attributes the service answered (@e, from a call made when
 * rfs_file_seq() was @seq) into what @f knows, and gives in @st what the
 * caller should see: the size includes our writes, and a reply that may
 * predate our last size update cannot shrink it. *@changed (may be NULL):
 * the service's size or mtime differ from its previous answer (another
 * client changed the file: drop cached data). A layout in @e is kept unless
 * older than the one @f has. @f may be NULL: @st is @e's attributes.
 */
void rfs_file_merge(struct rfs_file *f, const struct rfs_entry *e, struct stat *st, bool *changed,
		    uint64_t seq);

/* The size sequence now, for rfs_file_merge() of a reply to a call about to be made. */
uint64_t rfs_file_seq(struct rfs_file *f);

/*
 * The file's layout, fetched (OPEN with @cred, then RELEASE) if @f never saw
 * one. -EIO when the service gives none.
 */
int rfs_file_layout(struct rfs_file *f, const struct rfs_cred *cred, struct rfs_layout *out);

/*
 * GETATTR of @ino merged with @f (may be NULL). When @f's chunks changed
 * since the service last heard, the daemons report what they hold first
 * (nothing is synced), so st_blocks is current.
 */
int rfs_file_getattr(struct rfs *fs, struct rfs_file *f, const struct rfs_cred *cred, uint64_t ino,
		     struct stat *st);

/*
 * SETATTR of @ino with @f's bookkeeping (@f may be NULL for an inode no
 * client file tracks): an explicit mtime drops the one our writes would
 * stamp; a new size replaces ours; a shrink cuts the chunks past the new end
 * and refreshes st_blocks. The resulting attributes go to @st.
 */
int rfs_file_setattr(struct rfs *fs, struct rfs_file *f, const struct rfs_cred *cred, uint64_t ino,
		     const struct rfs_setattr *set, struct stat *st);

/*
 * Reads up to @len bytes at @off, clamped to the size we know; *@got says how
 * many (0 at or past the end). -EIO for a file without a layout.
 */
int rfs_file_read(struct rfs_file *f, uint64_t off, size_t len, void *dst, size_t *got);

/*
 * Writes @len bytes at @off (@sync: durable before returning, O_SYNC) and
 * grows the size we know. *@size_due: the service should hear of the new
 * size now (once a second while a file grows, the first time a second
 * after it began to: a file written and closed at once sends its size only
 * at close): call rfs_file_sync(f, cred, RFS_SYNC_SIZE), after answering the writer
 * if you like.
 * -EFBIG past the largest offset.
 */
int rfs_file_write(struct rfs_file *f, uint64_t off, size_t len, const void *src, bool sync,
		   bool *size_due);

/* What rfs_file_sync() makes of our writes. */
enum rfs_sync_kind {
	RFS_SYNC_SIZE,	/* only the size: the batched update of a growing file */
	RFS_SYNC_CLOSE, /* a close: commit, which a daemon with data_sync = batch defers */
	RFS_SYNC_FSYNC, /* commit, on the daemons' disks before it returns */
};

/*
 * Makes our writes committed and our size known: with RFS_SYNC_CLOSE or
 * RFS_SYNC_FSYNC a commit on the daemons that got writes and UPDATE_SIZE
 * with the mtime our writes earned; with RFS_SYNC_SIZE only the size. What
 * fails stays due for the next call. The commit's reports also give the
 * service st_blocks.
 * A close's commit may be answered before the daemons flushed it (their
 * data_sync = batch: a flush begins within data_sync_ms, ChunkCommitResp).
 * The file keeps those daemons due for the next RFS_SYNC_FSYNC, which sends
 * them a durable commit: a daemon answers one only once every close's
 * commit it deferred is flushed, or with the flush's error. A new @f holds
 * every daemon of its layout so, since a close through an earlier rfs_file
 * of the inode may have left a commit deferred.
 */
int rfs_file_sync(struct rfs_file *f, const struct rfs_cred *cred, enum rfs_sync_kind kind);

/*
 * @f's inode was just made (CREATE made it): no close through an earlier
 * rfs_file of it can have left a commit deferred, so an fsync commits only
 * what went through @f.
 */
void rfs_file_made(struct rfs_file *f);

/*
 * fsync(2): rfs_file_sync() with RFS_SYNC_FSYNC, then rfs_meta_sync(), so
 * that the size, the mtime and the file's very existence are on the
 * service's disk too, not only its data on the daemons'.
 */
int rfs_file_fsync(struct rfs_file *f, const struct rfs_cred *cred);

/*
 * fallocate(2) with Linux's @mode: 0 and FALLOC_FL_KEEP_SIZE (chunks are
 * allocated when written: only the size moves), PUNCH_HOLE | KEEP_SIZE,
 * ZERO_RANGE [| KEEP_SIZE], COLLAPSE_RANGE and INSERT_RANGE (see
 * rfs_collapse_range()); the size change goes through the open @handle.
 * -EOPNOTSUPP for other modes, -EINVAL for an empty range, -EFBIG.
 */
int rfs_file_fallocate(struct rfs_file *f, const struct rfs_cred *cred, uint64_t handle, int mode,
		       uint64_t off, uint64_t len);

/* SEEK_DATA / SEEK_HOLE from @off within the size we know (rfs_seek()). */
int rfs_file_seek(struct rfs_file *f, uint64_t off, int whence, uint64_t *pos);

/* ---- file data ------------------------------------------------------------------ */

/*
 * Drain (rdmafsctl) moves a file's chunks off a daemon and then switches its
 * layout; from the moment it starts, that daemon refuses requests made with
 * the file's older layout (-ESTALE). The functions below that take a
 * non-const @layout then refetch the layout (rfs_layout_fetch()), store it in
 * *@layout and redo the whole operation with it and the same data: every
 * chunk request is idempotent. While the service still has the same layout
 * (the drain is copying) they retry with backoff, for at most fence_wait_ms,
 * then fail with -ETIMEDOUT (the log says to run the drain again). The
 * caller keeps the updated *@layout for its next calls.
 */

/*
 * Reads [@off, @off + @len) of inode @ino into @dst. Missing chunks and bytes
 * past a chunk's end read as zeros: the caller clamps @len to the file size.
 */
int rfs_read(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t off, size_t len,
	     void *dst);

/*
 * Writes @len bytes of @src at @off of inode @ino. With @sync the daemons make
 * the data durable before replying. Bits of daemons[] that received data are
 * ORed into *@written (may be NULL), even when the call fails part-way; when
 * the layout changed, every bit of the new one is set (older bits meant
 * other daemons).
 */
int rfs_write(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t off, size_t len,
	      const void *src, bool sync, uint64_t *written);

/*
 * Write-behind, the parts rfs_file_write() is made of. rfs_write_start()
 * copies @src into registered buffers, sends every piece and returns without
 * waiting: -EAGAIN when the buffers it needs are not free at once (write-behind
 * holds at most half of the pool), then write with rfs_write(). Every started
 * job must end in rfs_write_finish(), which waits for its replies (bounded by
 * the call timeout), sends again what a broken connection or a drain's fence
 * refused (the bytes wait in the job's buffers), ORs into *@written what
 * rfs_write() would, stores the layout the job ended with in *@layout and
 * frees the job. Jobs whose ranges overlap must be finished in order by the
 * caller: the daemons may run any two requests in either order.
 */
struct rfs_wjob;
int rfs_write_start(struct rfs *fs, uint64_t ino, const struct rfs_layout *layout, uint64_t off,
		    size_t len, const void *src, struct rfs_wjob **out);
int rfs_write_finish(struct rfs_wjob *job, struct rfs_layout *layout, uint64_t *written);

/* rfs_options.write_behind of @fs; 0 for NULL. */
unsigned rfs_write_behind(const struct rfs *fs);

/*
 * CHUNK_COMMIT of every chunk of @ino with index >= @first_index on the
 * daemons of @layout whose bits are set in @daemon_mask, in parallel. When
 * the layout changed, on every daemon of the new one.
 */
int rfs_commit(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t daemon_mask,
	       uint64_t first_index);

/* What the daemons of a layout hold for one file, as CHUNK_COMMIT answered. */
struct rfs_alloc_report {
	uint64_t allocated[RFS_MAX_STRIPE]; /* bytes, by daemon index in the layout */
	uint64_t known;			    /* bit d: allocated[d] was answered */
	/* 0: on every daemon's disk; else the most any daemon said it defers it */
	uint32_t durable_within_ms;
};

/* What rfs_commit_alloc() asks of the daemons. */
enum rfs_commit_kind {
	RFS_COMMIT_REPORT,  /* only what they hold: nothing is synced (an older daemon does) */
	RFS_COMMIT_CLOSE,   /* a close's: data_sync = batch defers it (durable_within_ms) */
	RFS_COMMIT_DURABLE, /* on disk before the answer */
};

/*
 * rfs_commit() of @kind that also collects in @report (may be NULL) what
 * each daemon answered has been allocated to @ino (all its chunks, holes
 * excluded); a daemon too old to say stays unknown. When the layout changed,
 * every daemon of the new one is asked and @report indexes the new
 * *@layout: attach it with that one.
 */
int rfs_commit_alloc(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t daemon_mask,
		     uint64_t first_index, enum rfs_commit_kind kind,
		     struct rfs_alloc_report *report);

/*
 * UPDATE_SIZE of @ino: the size the writer knows (the service keeps the
 * larger of it and its own unless a SETATTR shrank the file meanwhile),
 * @mtime (may be NULL: leave mtime and ctime) and, from @report (may be
 * NULL) over @layout, what each daemon holds, which st_blocks is made of.
 * The file's attributes go to @out.
 */
int rfs_update_size(struct rfs *fs, const struct rfs_cred *cred, uint64_t ino, uint64_t size,
		    const struct timespec *mtime, const struct rfs_alloc_report *report,
		    const struct rfs_layout *layout, struct rfs_entry *out);
/*
 * Makes the chunks match a file shrunk from @old_size to @new_size: the chunk
 * holding the new end is truncated, every later chunk is removed on every
 * daemon of @layout. A daemon DOWN that holds copies of a replicated file's
 * chunks misses it: each chunk up to @old_size is truncated on the others,
 * which record the miss, so it is cut there too when it is back.
 */
int rfs_truncate_data(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t new_size,
		      uint64_t old_size);

/*
 * Removes every chunk of @ino on every daemon of @layout (a freed inode). A
 * daemon that fenced the layout keeps its chunks: the inode is gone, so the
 * drain that fenced it removes them (or fsck finds them).
 */
int rfs_remove_data(struct rfs *fs, uint64_t ino, struct rfs_layout *layout);

/*
 * Punches [@off, @off + @len) of a file of @size bytes: whole chunks are
 * removed, partial ones get zeros written (never past @size) as a hole: the
 * daemon frees the whole 4 KiB blocks they cover.
 */
int rfs_punch_hole(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		   uint64_t off, uint64_t len);

/*
 * The block of fallocate's range shifts: COLLAPSE_RANGE and INSERT_RANGE
 * take offsets and lengths in multiples of it (-EINVAL otherwise, as ext4
 * with its block size), and rdmafs-fuse reports it as st_blksize. It is also
 * the kernel's largest FUSE write, so stdio buffers a whole request.
 */
#define RFS_BLOCK_SIZE (1u << 20)

/* Largest file size (a signed off_t); an insert that would pass it is -EFBIG. */
#define RFS_MAX_FILE_SIZE ((uint64_t)INT64_MAX)

/*
 * FALLOC_FL_COLLAPSE_RANGE on the data of a file of @size bytes: moves
 * [@off + @len, @size) down to @off (blocks of zeros become holes). The caller
 * then sets the size to @size - @len at the metadata service and calls
 * rfs_truncate_data(). -EINVAL: @off or @len not a multiple of RFS_BLOCK_SIZE,
 * @len 0, or the range reaching the end of the file. Not atomic: a failure
 * part-way leaves the tail partly moved (the size is still the old one).
 */
int rfs_collapse_range(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		       uint64_t off, uint64_t len);

/*
 * FALLOC_FL_INSERT_RANGE: moves [@off, @size) up by @len and punches the gap.
 * The caller then sets the size to @size + @len. -EINVAL: unaligned (as
 * above) or @off at or past the end of the file; -EFBIG: the file would pass
 * RFS_MAX_FILE_SIZE. Not atomic, as rfs_collapse_range().
 */
int rfs_insert_range(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size,
		     uint64_t off, uint64_t len);

/*
 * SEEK_DATA / SEEK_HOLE at chunk granularity (a missing chunk is a hole, a
 * chunk shorter than the chunk size ends in one) in a file of @size bytes.
 * Returns -ENXIO as lseek(2) does. CHUNK_STAT is not fenced: with a layout a
 * drain replaced, the answer comes from the drained daemon's copy until it
 * is REMOVED; then the layout is refetched as above.
 */
int rfs_seek(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t size, uint64_t off,
	     int whence, uint64_t *out);

/* ==== One daemon, spoken to directly ========================================
 *
 * The client core's handle for tools that administer daemons (rdmafsctl's
 * drain, scrub and fsck), for tests and benchmarks of a daemon, and for
 * anything else that must name a chunk on a given daemon rather than a byte
 * of a file (the filesystem part above does that).
 *
 * A handle holds one connection to one daemon, a transport context and a
 * pool of buffers registered with it. Handles opened with `share` use the
 * transport context and buffers of another handle, so a tool that talks to
 * many daemons registers its buffers once, and a chunk can move from one
 * daemon to another through one registered buffer (rfs_chunk_copy).
 *
 * Data moves zero-copy on the wire: a write's bytes are copied into a pool
 * buffer the daemon RDMA READs; a read's land in one the daemon RDMA WRITEs,
 * checked against the CRC-32C the daemon sends with them.
 *
 * Threads: every function may be called from any number of threads at once,
 * on one handle or several; calls beyond the pool's size wait for a buffer
 * within their timeout. A connection found dead is made again by the next
 * call. rfs_daemon_close() must not run while a call on the handle does,
 * and a handle others share must outlive them.
 *
 * Errors: 0 or a negative errno. The daemon's own: -EINVAL (a field out of
 * range), -EIO (a checksum mismatch, on the wire or on disk), -ENOSPC,
 * -EBUSY (overloaded: retry later), -EOPNOTSUPP (a method it does not
 * serve), -ESTALE (a drain fenced the layout generation the request
 * carries). The transport's: -ETIMEDOUT (no reply in time; the connection is
 * reset, so no late RDMA can reach the buffer), -ECONNRESET, -ENOTCONN,
 * -ECONNREFUSED, -EACCES (the secret was refused). -EBADMSG: a reply that
 * does not parse.
 */

struct rfs_daemon;

struct rfs_daemon_options {
	const char *uri;    /* "tcp://host:port" or "rdma://host:port" */
	const void *secret; /* cluster secret; copied */
	size_t secret_len;
	const char *key_file;	     /* a client key file instead of the secret (rdmafs_fs.h) */
	const char *name;	     /* our name in the daemon's logs */
	uint32_t call_timeout_ms;    /* every call [5000] */
	uint32_t connect_timeout_ms; /* [2000] */
	uint32_t buf_size;	     /* largest single transfer [1 MiB] */
	uint32_t buf_count;	     /* transfers in flight at once [8] */
	/*
	 * Not NULL: use this handle's transport context and buffers; the secret,
	 * name, timeouts and buffer sizes above are then its, not ours.
	 */
	struct rfs_daemon *share;
};

/* Fills @opts with the defaults above (uri, secret and share stay NULL). */
void rfs_daemon_options_init(struct rfs_daemon_options *opts);

/*
 * Connects to the daemon at @opts->uri, creating a transport context and
 * registering the buffer pool unless @opts->share gives them. Returns
 * -EINVAL (bad options), -ENOMEM, or the connect error (-ECONNREFUSED,
 * -EACCES, -ETIMEDOUT, -ENODEV for rdma:// without an RDMA device).
 */
int rfs_daemon_open(const struct rfs_daemon_options *opts, struct rfs_daemon **out);

/* Closes the connection and frees what no other handle shares. NULL is a no-op. */
void rfs_daemon_close(struct rfs_daemon *d);

/* The URI the handle was opened with. */
const char *rfs_daemon_uri(const struct rfs_daemon *d);

/* ---- chunks ---------------------------------------------------------------- */

/*
 * The layout generation a tool sends when it moves chunks itself (drain,
 * fsck): no fence refuses it.
 */
#define RFS_GENERATION_ADMIN UINT64_MAX

/* A chunk of a file, and the layout generation the caller placed it with. */
struct rfs_chunk_id {
	uint64_t inode;
	uint64_t index;
	/*
	 * Layout.generation of the file's layout: a daemon that fenced the file
	 * (drain) refuses an older one with -ESTALE.
	 */
	uint64_t generation;
};

/* Several chunks of one file: @count of @indexes, or with @range every one from @first_index. */
struct rfs_chunk_sel {
	uint64_t inode;
	uint64_t generation;
	const uint64_t *indexes;
	size_t count;
	bool range;
	uint64_t first_index;
};

struct rfs_chunk_state {
	bool exists;
	uint32_t length;
	uint64_t version;
	uint32_t block_size; /* granularity of the stored checksums (rfs_chunk_stat only) */
	uint32_t block_count;
};

/*
 * Writes @len bytes (1..buf_size) of @data at @offset of chunk @id, whose
 * file has chunks of @chunk_size bytes. With @commit the daemon makes the
 * data durable before replying. @state (may be NULL) gets the chunk's length
 * and version after the write. Up to 8 KiB travel inside the request; more
 * the daemon pulls with RDMA READ (rfs_daemon_stats() counts inline writes).
 */
int rfs_chunk_write(struct rfs_daemon *d, struct rfs_chunk_id id, uint32_t chunk_size,
		    uint32_t offset, const void *data, uint32_t len, bool commit,
		    struct rfs_chunk_state *state);

/*
 * Reads up to @len bytes (0..buf_size) at @offset of chunk @id into @data.
 * *@bytes is less than @len at the chunk's end and 0 for a chunk that does
 * not exist (a hole: the caller zero-fills). @chunk_length may be NULL.
 * -EIO when the data fails its checksum. Up to 8 KiB come inside the reply;
 * more the daemon pushes with RDMA WRITE (counted as inline reads or not).
 */
int rfs_chunk_read(struct rfs_daemon *d, struct rfs_chunk_id id, uint32_t offset, void *data,
		   uint32_t len, uint32_t *bytes, uint32_t *chunk_length);

/* Makes the acknowledged writes to the chunks of @sel durable. */
int rfs_chunk_commit(struct rfs_daemon *d, const struct rfs_chunk_sel *sel);

/* Sets a chunk's length, creating it or zero-filling as needed. @state may be NULL. */
int rfs_chunk_truncate(struct rfs_daemon *d, struct rfs_chunk_id id, uint32_t length,
		       struct rfs_chunk_state *state);

/*
 * Removes the chunks of @sel (missing ones are not an error). @removed and
 * @bytes_freed may be NULL.
 */
int rfs_chunk_remove(struct rfs_daemon *d, const struct rfs_chunk_sel *sel, uint64_t *removed,
		     uint64_t *bytes_freed);

/* What the daemon holds of chunk @id (the generation is not sent). */
int rfs_chunk_stat(struct rfs_daemon *d, struct rfs_chunk_id id, struct rfs_chunk_state *state);

/*
 * Copies the first @length bytes of chunk @id from @src to @dst through one
 * registered buffer (no copy in memory), then makes @dst's copy exactly
 * @length bytes long (a longer older copy is cut, an empty chunk created).
 * A chunk that shrank on @src meanwhile is copied as far as it goes. @src and
 * @dst must share their transport (one opened with the other as `share`, or
 * both with a third): -EINVAL if not, or if @length > @chunk_size. Nothing is
 * committed: rfs_chunk_commit() on @dst does that.
 */
int rfs_chunk_copy(struct rfs_daemon *src, struct rfs_daemon *dst, struct rfs_chunk_id id,
		   uint32_t length, uint32_t chunk_size);

/*
 * Sets (@lift false) or lifts the fence of @inode on the daemon: see
 * ChunkFenceReq in proto/rdmafs.proto. *@now (may be NULL) gets the fence in
 * force afterwards, 0 for none.
 */
int rfs_chunk_fence(struct rfs_daemon *d, uint64_t inode, uint64_t generation, bool lift,
		    uint64_t *now);

/* An inode's fence on a daemon. */
struct rfs_fence {
	uint64_t inode;
	uint64_t generation;
};

/*
 * The fences in force on the daemon, in inode order: up to @cap of those of
 * the inodes above @after (0: from the first) into @out; *@count gets how
 * many, *@more whether others follow (ask again after the last).
 */
int rfs_chunk_fence_list(struct rfs_daemon *d, uint64_t after, struct rfs_fence *out, size_t cap,
			 size_t *count, bool *more);

/* One chunk the daemon holds. */
struct rfs_chunk_entry {
	uint64_t inode;
	uint64_t index;
	uint32_t length;
	uint64_t version;
};

/*
 * Lists the chunks the daemon holds, in (inode, index) order: up to @cap of
 * those after (@after_inode, @after_index), or from the first with
 * @from_start, into @out; *@count gets how many. *@done is true when no
 * chunk follows the last one given. -EBADMSG for a page that is not in
 * order.
 */
int rfs_chunk_list(struct rfs_daemon *d, uint64_t after_inode, uint64_t after_index,
		   bool from_start, struct rfs_chunk_entry *out, size_t cap, size_t *count,
		   bool *done);

/* ---- the daemon ------------------------------------------------------------- */

struct rfs_daemon_stats {
	uint8_t uuid[16];
	uint64_t uptime_sec;
	uint64_t bytes_read, bytes_written;
	uint64_t errors, checksum_errors;
	uint64_t capacity_bytes, free_bytes;
	uint64_t chunks;
	uint64_t ops_total; /* requests served, all methods */
	uint32_t connections;
	uint32_t requests_in_flight;
	/* CHUNK_WRITEs and CHUNK_READs whose data travelled inside the messages */
	uint64_t inline_writes, inline_reads;
	/* requests the receiving thread ran; of those, handed to a worker (RDMA, O_SYNC, disk) */
	uint64_t run_on_receipt, handed_on;
	uint64_t fetched; /* of those, cold blocks the receiving thread fetched, not handed on */
	/* data_sync = batch: close's commits answered before their flush; flushes; failed ones */
	uint64_t commits_deferred, data_flushes, data_flush_errors;
	/* blocks read back to settle CRCs an overwrite this daemon did not see complete left */
	uint64_t pending_reads;
};

int rfs_daemon_stats(struct rfs_daemon *d, struct rfs_daemon_stats *out);

/*
 * Sends the @req_len bytes of @req as method @method and copies the reply's
 * body into @resp (@resp_cap bytes; -EMSGSIZE if it does not fit). For tests
 * and tools that speak the protocol (proto/rdmafs.proto) themselves.
 * Returns the daemon's status or a transport error.
 */
int rfs_daemon_call_raw(struct rfs_daemon *d, uint32_t method, const void *req, size_t req_len,
			void *resp, size_t resp_cap, size_t *resp_len);

/* ==== The client programs' settings (client.conf) ===========================
 *
 * One file, client.conf, that rdmafs-fuse, rdmafs-copy and rdmafsctl read
 * their defaults from, and one default secret path for all three.
 *
 *   [client]
 *   meta = rdma://10.0.0.1:7471       ; the metadata service
 *   secret_file = /etc/rdmafs/secret  ; the cluster secret
 *   key_file = /etc/rdmafs/client.key ; or a client key (rdmafsctl client add),
 *                                     ; which wins over secret_file
 *   transport = auto                  ; auto, rdma or tcp
 *
 *   [rdmafsctl]                       ; a program's own keys
 *   timeout = 10
 *
 * The file is SYSCONFDIR/rdmafs/client.conf (rfs_client_conf_path()), or the
 * one RDMAFS_CLIENT_CONF names, or the one a program's --config (rdmafs-fuse:
 * -o config=FILE) names. Every program takes, in increasing precedence: the
 * built-in defaults, this file, the environment (RDMAFS_META,
 * RDMAFS_SECRET_FILE, RDMAFS_KEY_FILE), its command line.
 */

/* What client.conf's [client] section set; NULL for what it did not. */
struct rfs_client_conf {
	char *meta_uri;
	char *secret_file;
	char *key_file;	 /* a client key: used instead of secret_file where given */
	char *transport; /* "auto", "rdma" or "tcp" (checked) */
};

/*
 * A key of a program's own section ([rdmafsctl], [rdmafs-fuse],
 * [rdmafs-copy]). Returns 0 when taken, -ENOENT for a key it does not know,
 * -EINVAL for a bad value with what is allowed in @why.
 */
typedef int (*rfs_conf_key_fn)(void *arg, const char *key, const char *value, char *why,
			       size_t why_len);

/* The file client programs read when no --config names one: RDMAFS_CLIENT_CONF, or the default. */
const char *rfs_client_conf_path(void);

/* The secret file used when none is given anywhere: SYSCONFDIR/rdmafs/secret. */
const char *rfs_default_secret_file(void);

/*
 * Reads @path into @out (zeroed first). @must_exist: a missing file is an
 * error (a file the user named); else a missing file sets nothing. Keys of
 * section @own (the program's, or NULL) go to @key_fn; the other programs'
 * sections are skipped; any other section, an unknown key of [client], a bad
 * value or a syntax error is an error. Returns 0, or -ENOENT, -EACCES, ... or
 * -EINVAL with "FILE:LINE: what is wrong" in @why.
 */
int rfs_client_conf_load(const char *path, bool must_exist, const char *own, rfs_conf_key_fn key_fn,
			 void *arg, struct rfs_client_conf *out, char *why, size_t why_len);

void rfs_client_conf_free(struct rfs_client_conf *c);

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_FS_H */
