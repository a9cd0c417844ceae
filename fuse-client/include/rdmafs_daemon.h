/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One rdmafs daemon, spoken to directly: the client core's handle for tools
 * that administer daemons (rdmafsctl's drain, scrub and fsck), for tests and
 * benchmarks of a daemon, and for anything else that must name a chunk on a
 * given daemon rather than a byte of a file (rdmafs_fs.h does that).
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
#ifndef RDMAFS_DAEMON_H
#define RDMAFS_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_DAEMON_H */
