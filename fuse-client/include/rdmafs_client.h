/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * librdmafs_client: the client side of the storage daemon's chunk RPCs.
 *
 * A client holds one connection to one rdmafs-daemon and a pool of buffers
 * registered once with the transport. Data moves zero-copy on the wire: a
 * call copies the caller's bytes into a pool buffer, advertises it to the
 * daemon in the request, and the daemon RDMA READs (write) or RDMA WRITEs
 * (read) it. Reads are checked against the CRC-32C the daemon returns.
 *
 * Threads: every function may be called from any number of threads at once;
 * calls beyond the pool size wait for a buffer inside their timeout.
 *
 * Errors: 0 or a negative errno. The daemon's: -EINVAL (a field out of
 * range), -EIO (a checksum mismatch, on the wire or on disk), -ENOSPC,
 * -EBUSY (daemon overloaded: retry later), -EOPNOTSUPP, -ESTALE (a drain
 * fenced the layout generation the request carries). The transport's:
 * -ETIMEDOUT (the connection was reset, so no late RDMA can reach the
 * buffer), -ECONNRESET, -ENOTCONN, -EACCES, -ECONNREFUSED. A connection found
 * dead is re-established by the next call.
 */
#ifndef RDMAFS_CLIENT_H
#define RDMAFS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rfc_client;

struct rfc_options {
	const char *uri;    /* "tcp://host:port", "rdma://host:port", "auto://..." */
	const void *secret; /* cluster secret; copied */
	size_t secret_len;
	const char *name;    /* our name in the daemon's logs */
	uint32_t buf_size;   /* largest single transfer; default 1 MiB */
	uint32_t buf_count;  /* transfers in flight at once; default 8 */
	uint32_t timeout_ms; /* per call; default 10 s */
};

struct rfc_chunk {
	uint64_t inode;
	uint64_t index;
	/*
	 * Layout.generation of the file's layout, sent with writes, reads and
	 * truncates: a daemon that fenced the file (drain) refuses an older one
	 * with -ESTALE. Commit and removal through this API send 0.
	 */
	uint64_t generation;
};

struct rfc_chunk_state {
	bool exists;
	uint32_t length;
	uint64_t version;
	uint32_t block_size; /* granularity of the stored checksums (stat only) */
	uint32_t block_count;
};

struct rfc_daemon_stats {
	uint8_t uuid[16];
	uint64_t uptime_sec;
	uint64_t bytes_read, bytes_written;
	uint64_t errors, checksum_errors;
	uint64_t capacity_bytes, free_bytes;
	uint64_t chunks;
	uint64_t ops_total; /* requests served, all methods */
	uint32_t requests_in_flight;
};

/* Fills @opts with the defaults above (uri and secret stay NULL). */
void rfc_options_init(struct rfc_options *opts);

/*
 * Creates a transport context, registers the buffer pool and connects.
 * Returns -EINVAL (bad options), or the transport's connect error
 * (-ECONNREFUSED, -EACCES for a wrong secret, -ENODEV, -ETIMEDOUT).
 */
int rfc_client_create(const struct rfc_options *opts, struct rfc_client **out);

/* Closes the connection and frees everything. NULL is a no-op. */
void rfc_client_destroy(struct rfc_client *client);

/*
 * Writes @len bytes (1..buf_size) of @data at @offset of chunk @id; the
 * file's layout has chunks of @chunk_size bytes. With @commit the daemon
 * makes the data durable before replying. @state (may be NULL) gets the
 * chunk's length and version afterwards.
 */
int rfc_chunk_write(struct rfc_client *client, struct rfc_chunk id, uint32_t chunk_size,
		    uint32_t offset, const void *data, uint32_t len, bool commit,
		    struct rfc_chunk_state *state);

/*
 * Reads up to @len bytes (0..buf_size) at @offset of chunk @id into @data.
 * *@bytes is less than @len at the chunk's end and 0 for a missing chunk
 * (a hole: the caller zero-fills). @chunk_length may be NULL. -EIO when the
 * data fails its checksum.
 */
int rfc_chunk_read(struct rfc_client *client, struct rfc_chunk id, uint32_t offset, void *data,
		   uint32_t len, uint32_t *bytes, uint32_t *chunk_length);

/* Makes acknowledged writes to the @count chunks of @inode in @indexes durable. */
int rfc_chunk_commit(struct rfc_client *client, uint64_t inode, const uint64_t *indexes,
		     size_t count);
/* The same for every chunk of @inode with index >= @first_index. */
int rfc_chunk_commit_range(struct rfc_client *client, uint64_t inode, uint64_t first_index);

/* Sets a chunk's length, creating it or zero-filling as needed. @state may be NULL. */
int rfc_chunk_truncate(struct rfc_client *client, struct rfc_chunk id, uint32_t length,
		       struct rfc_chunk_state *state);

/* Removes chunks (missing ones are not an error). @removed and @bytes_freed may be NULL. */
int rfc_chunk_remove(struct rfc_client *client, uint64_t inode, const uint64_t *indexes,
		     size_t count, uint64_t *removed, uint64_t *bytes_freed);
int rfc_chunk_remove_range(struct rfc_client *client, uint64_t inode, uint64_t first_index,
			   uint64_t *removed, uint64_t *bytes_freed);

int rfc_chunk_stat(struct rfc_client *client, struct rfc_chunk id, struct rfc_chunk_state *state);

int rfc_daemon_stats(struct rfc_client *client, struct rfc_daemon_stats *out);

/*
 * Sends @req_len bytes as method @method and copies the reply body into
 * @resp (@resp_cap bytes). For tools and tests that speak the protocol
 * themselves. Returns the daemon's status or a transport error.
 */
int rfc_call_raw(struct rfc_client *client, uint32_t method, const void *req, size_t req_len,
		 void *resp, size_t resp_cap, size_t *resp_len);

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_CLIENT_H */
