// SPDX-License-Identifier: GPL-2.0-or-later
/* CHUNK_WRITE and CHUNK_READ requests and their replies, written once; see chunk_msg_i.h. */
#include <errno.h>
#include <string.h>

#include "rdmafs_common.h"
#include "chunk_msg_i.h"

/* The chunk and buffer parts every data request has. */
static int chunk_msg_init(struct chunk_msg *m, struct xprt_conn *conn, struct xprt_buf *buf,
			  const struct chunk_io *io)
{
	struct xprt_desc desc;
	int ret;

	/* a buffer of at least one byte, for a read of nothing */
	ret = xprt_mr_desc(conn, xprt_buf_mr(buf), xprt_buf_data(buf), io->len ? io->len : 1,
			   &desc);
	if (ret)
		return ret;
	rdmafs__chunk_id__init(&m->id);
	m->id.inode = io->ino;
	m->id.index = io->index;
	rdmafs__buffer_desc__init(&m->buf);
	m->buf.addr = desc.addr;
	m->buf.len = io->len;
	m->buf.rkey = desc.rkey;
	return 0;
}

int chunk_msg_write(struct chunk_msg *m, struct xprt_conn *conn, struct xprt_buf *buf,
		    const struct chunk_io *io)
{
	int ret = chunk_msg_init(m, conn, buf, io);

	if (ret)
		return ret;
	rdmafs__chunk_write_req__init(&m->write);
	m->write.chunk = &m->id;
	m->write.offset = io->offset;
	m->write.length = io->len;
	m->write.crc32c = rdmafs_crc32c(xprt_buf_data(buf), io->len);
	m->write.buf = &m->buf;
	m->write.chunk_size = io->chunk_size;
	m->write.commit = io->commit;
	m->write.zeros_as_hole = io->zeros_as_hole;
	m->write.layout_generation = io->generation;
	if (io->len <= CHUNK_INLINE_MAX && io->len + CHUNK_MSG_SLACK <= xprt_conn_max_body(conn)) {
		m->write.data.data = xprt_buf_data(buf);
		m->write.data.len = io->len;
	}
	return 0;
}

int chunk_msg_read(struct chunk_msg *m, struct xprt_conn *conn, struct xprt_buf *buf,
		   const struct chunk_io *io)
{
	int ret = chunk_msg_init(m, conn, buf, io);

	if (ret)
		return ret;
	rdmafs__chunk_read_req__init(&m->read);
	m->read.chunk = &m->id;
	m->read.offset = io->offset;
	m->read.length = io->len;
	m->read.buf = &m->buf;
	m->read.layout_generation = io->generation;
	if (io->inline_ok && io->len <= CHUNK_INLINE_MAX)
		m->read.inline_max = CHUNK_INLINE_MAX;
	return 0;
}

int chunk_read_reply(const void *reply, size_t reply_len, struct xprt_buf *buf,
		     const struct chunk_io *io, uint32_t *bytes, uint32_t *chunk_length)
{
	Rdmafs__ChunkReadResp *rr;
	int ret = 0;

	rr = rdmafs__chunk_read_resp__unpack(NULL, reply_len, reply);
	if (!rr)
		return -EBADMSG;
	if (rr->bytes > io->len ||
	    (rr->data.len && (rr->data.len != rr->bytes || !io->inline_ok))) {
		ret = -EPROTO;
		goto out;
	}
	if (rr->data.len)
		memcpy(xprt_buf_data(buf), rr->data.data, rr->bytes);
	if (rdmafs_crc32c(xprt_buf_data(buf), rr->bytes) != rr->crc32c) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "inode %llu chunk %llu: read data fails its checksum (%u bytes at %u)",
			   (unsigned long long)io->ino, (unsigned long long)io->index, rr->bytes,
			   io->offset);
		ret = -EIO;
		goto out;
	}
	*bytes = rr->bytes;
	if (chunk_length)
		*chunk_length = rr->chunk_length;
out:
	rdmafs__chunk_read_resp__free_unpacked(rr, NULL);
	return ret;
}

int chunk_write_reply(const void *reply, size_t reply_len, uint32_t *chunk_length,
		      uint64_t *version)
{
	Rdmafs__ChunkWriteResp *wr;

	wr = rdmafs__chunk_write_resp__unpack(NULL, reply_len, reply);
	if (!wr)
		return -EBADMSG;
	if (chunk_length)
		*chunk_length = wr->chunk_length;
	if (version)
		*version = wr->version;
	rdmafs__chunk_write_resp__free_unpacked(wr, NULL);
	return 0;
}
