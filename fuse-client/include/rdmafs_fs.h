/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The rdmafs client core: what a mount (rdmafs-fuse) or a copy tool needs to
 * speak to a whole cluster.
 *
 *  - One connection to the metadata service, and metadata calls on it
 *    (rfs_meta_call(): a protobuf request in, a protobuf reply out).
 *  - The cluster map (GET_CLUSTER_MAP), fetched at start, polled in the
 *    background and refetched when a daemon cannot be reached or a layout
 *    names a daemon we do not know.
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

#include "rdmafs.pb-c.h"

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
	enum rfs_transport transport;
	const char *name;	     /* our name in the daemons' logs */
	uint32_t call_timeout_ms;    /* every RPC [5000] */
	uint32_t connect_timeout_ms; /* [2000] */
	uint32_t buf_size;	     /* bytes per registered buffer [1 MiB] */
	uint32_t buf_count;	     /* registered buffers [32] */
	uint32_t map_poll_ms;	     /* cluster map poll interval, 0: the default [5000] */
	uint32_t fence_wait_ms;	     /* how long a data call waits out a drain, 0: [30000] */
};

/* Fills @opts with the defaults (meta_uri and secret stay NULL). */
void rfs_options_init(struct rfs_options *opts);

/*
 * Creates the transport context and the buffer pool, connects to the metadata
 * service and fetches the cluster map. Storage daemons are connected on first
 * use. Returns -EINVAL (bad options), -ENOMEM, or the connect error
 * (-ECONNREFUSED, -EACCES: secret refused, -ETIMEDOUT, -ENODEV: rdma://
 * without an RDMA device).
 */
int rfs_create(const struct rfs_options *opts, struct rfs **out);

/* Closes every connection and frees everything. No call may be running. NULL is a no-op. */
void rfs_destroy(struct rfs *fs);

/* ---- metadata ---------------------------------------------------------------- */

/*
 * Calls metadata method @method with @req and, on success, unpacks the reply
 * as @resp_desc into *@resp (free it with rfs_meta_free()). An idempotent call
 * is retried once on a fresh connection when the connection broke; any call
 * is retried when its connection was found dead before it was sent.
 * Returns the service's status, -EBADMSG for a reply that does not unpack,
 * or a transport error.
 */
int rfs_meta_call(struct rfs *fs, uint32_t method, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, bool idempotent,
		  ProtobufCMessage **resp);

/* Frees a reply of rfs_meta_call(). NULL is a no-op. */
void rfs_meta_free(ProtobufCMessage *resp);

/*
 * Refetches the cluster map if it changed (@force: whatever its epoch).
 * Returns 0 or the metadata call's error.
 */
int rfs_map_refresh(struct rfs *fs, bool force);

/* The epoch of the map we hold. */
uint64_t rfs_map_epoch(struct rfs *fs);

/* ---- layouts and placement ---------------------------------------------------- */

/* A regular file's layout, checked and copied out of its Layout message. */
struct rfs_layout {
	uint32_t chunk_size;
	uint32_t stripe_width;
	uint64_t seed;
	uint64_t generation; /* sent with every chunk request (daemons fence old ones) */
	uint8_t daemons[RFS_MAX_STRIPE][RFS_UUID_LEN];
};

/*
 * Checks @pb (chunk size 4 KiB..64 MiB, 1..64 daemons of 16 bytes,
 * stripe_width matching, a placement we implement) and copies it to @out.
 * Returns -EPROTO when it does not pass.
 */
int rfs_layout_parse(const Rdmafs__Layout *pb, struct rfs_layout *out);

/* Which daemon of @layout (an index into daemons[]) holds chunk @index of @ino. */
int rfs_layout_place(const struct rfs_layout *layout, uint64_t ino, uint64_t index);

/*
 * Fetches the current layout of regular file @ino from the metadata service
 * (GETATTR) into @out. -ENOENT for a file that is gone, -EPROTO for a reply
 * without a valid layout.
 */
int rfs_layout_fetch(struct rfs *fs, uint64_t ino, struct rfs_layout *out);

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
	/* room for rfs_alloc_report_attach() */
	Rdmafs__DaemonAllocation pb[RFS_MAX_STRIPE];
	Rdmafs__DaemonAllocation *pb_ptrs[RFS_MAX_STRIPE];
};

/*
 * rfs_commit() that also collects in @report (may be NULL) what each daemon
 * answered has been allocated to @ino (all its chunks, holes excluded); a
 * daemon too old to say stays unknown. Without @durable the daemons only
 * report, nothing is synced (an older daemon commits anyway). When the
 * layout changed, every daemon of the new one is asked and @report indexes
 * the new *@layout: attach it with that one.
 */
int rfs_commit_alloc(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t daemon_mask,
		     uint64_t first_index, bool durable, struct rfs_alloc_report *report);

/*
 * Points @req's allocations at the known entries of @report, which st_blocks
 * at the metadata service is made of. @report and @layout must outlive @req.
 */
void rfs_alloc_report_attach(struct rfs_alloc_report *report, const struct rfs_layout *layout,
			     Rdmafs__UpdateSizeReq *req);

/*
 * Makes the chunks match a file shrunk to @new_size: the chunk holding the new
 * end is truncated, every later chunk is removed on every daemon of @layout.
 */
int rfs_truncate_data(struct rfs *fs, uint64_t ino, struct rfs_layout *layout, uint64_t new_size);

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

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_FS_H */
