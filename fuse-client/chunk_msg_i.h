/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk data requests (CHUNK_WRITE, CHUNK_READ) as every client of a
 * storage daemon builds them, written once: the striped I/O of the client
 * core (fs_client.c) and the handles on one daemon (daemon.c), which
 * rdmafsctl's chunk copies use too. A request names a chunk and a registered buffer
 * the daemon moves the data to or from with one-sided RDMA; its reply is
 * checked here, the data's crc32c included.
 *
 * Private to the client side (librdmafs_client and the tools in fuse-client/).
 */
#ifndef RDMAFS_CHUNK_MSG_I_H
#define RDMAFS_CHUNK_MSG_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"

/*
 * Data of at most this many bytes travels inside the messages (the NFS over
 * RDMA inline threshold): a write's payload in its request, a read's data in
 * its reply when the request allows it. One-sided RDMA costs a round trip of
 * its own (the tcp backend's emulation a message and its answer), which a
 * small transfer does not repay; above this the data moves zero-copy.
 */
#define CHUNK_INLINE_MAX 8192u
/* A CHUNK_WRITE's or CHUNK_READ reply's fields besides its inline data, at most. */
#define CHUNK_MSG_SLACK 256u
/* The largest CHUNK_READ reply, for a request that allows inline data. */
#define CHUNK_READ_REPLY_MAX (CHUNK_INLINE_MAX + CHUNK_MSG_SLACK)

/* Which bytes of which chunk a request moves, and how a write is stored. */
struct chunk_io {
	uint64_t ino;
	uint64_t index;
	uint64_t generation; /* Layout.generation: a daemon that fenced the file refuses older */
	uint32_t offset;     /* in the chunk */
	uint32_t len;	     /* bytes; the buffer holds at least that many */
	uint32_t chunk_size; /* writes: the file layout's chunk size */
	bool commit;	     /* writes: durable before the reply */
	bool zeros_as_hole;  /* writes: blocks of zeros are freed, not stored */
	/* reads: the reply may carry the data (the caller takes CHUNK_READ_REPLY_MAX) */
	bool inline_ok;
};

/* A request and the messages it points to, all on the caller's stack. */
struct chunk_msg {
	Rdmafs__ChunkId id;
	Rdmafs__BufferDesc buf;
	union {
		Rdmafs__ChunkWriteReq write;
		Rdmafs__ChunkReadReq read;
	};
};

/*
 * Fills @m with a CHUNK_WRITE of the first @io->len bytes of @buf, which
 * holds the data, over @conn (whose peer gets the buffer's remote key), with
 * their crc32c; up to CHUNK_INLINE_MAX bytes (and what @conn's messages hold)
 * also go inline, pointing into @buf. Send &m->write.base. Returns 0 or
 * xprt_mr_desc()'s error.
 */
int chunk_msg_write(struct chunk_msg *m, struct xprt_conn *conn, struct xprt_buf *buf,
		    const struct chunk_io *io);

/*
 * The same for a CHUNK_READ into @buf; send &m->read.base. With
 * @io->inline_ok, a read of at most CHUNK_INLINE_MAX bytes asks for its data
 * inline, and the caller must take a reply of CHUNK_READ_REPLY_MAX bytes.
 */
int chunk_msg_read(struct chunk_msg *m, struct xprt_conn *conn, struct xprt_buf *buf,
		   const struct chunk_io *io);

/*
 * Checks the reply to a CHUNK_READ of @io into @buf; inline data is copied
 * into @buf first (@reply may lie in @buf past those bytes). The byte count (at most
 * @io->len: less at the chunk's end, 0 for a missing chunk) goes to *@bytes,
 * the chunk's length to *@chunk_length (may be NULL). Returns -EBADMSG for a
 * reply that does not unpack, -EPROTO for more bytes than asked, -EIO (and a
 * log line) for data that fails its checksum, and -EPROTO for inline data
 * that was not asked for or does not match the byte count.
 */
int chunk_read_reply(const void *reply, size_t reply_len, struct xprt_buf *buf,
		     const struct chunk_io *io, uint32_t *bytes, uint32_t *chunk_length);

/*
 * Checks the reply to a CHUNK_WRITE; the chunk's length and version after it
 * go to *@chunk_length and *@version (either may be NULL). -EBADMSG when it
 * does not unpack.
 */
int chunk_write_reply(const void *reply, size_t reply_len, uint32_t *chunk_length,
		      uint64_t *version);

#endif /* RDMAFS_CHUNK_MSG_I_H */
