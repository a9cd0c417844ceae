/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the client core: the calls that speak protobuf. fs_meta.c builds
 * every filesystem call of rdmafs_fs.h on them; rdmafsctl, which is part of
 * the client side, makes its administration calls with rfs_daemon_call().
 * Nothing outside fuse-client/ includes this header.
 */
#ifndef RDMAFS_FS_CLIENT_I_H
#define RDMAFS_FS_CLIENT_I_H

#include <stdbool.h>
#include <stdint.h>

#include "rdmafs.pb-c.h"
#include "rdmafs_fs.h"

struct xprt_options;
struct xprt_ctx;

/*
 * xprt_ctx_create() with the client key of @key_file (NULL: none) read into
 * @xo for the call; -EPERM, -EINVAL, -ENOENT... from rdmafs_key_read().
 */
int rfs_ctx_create(struct xprt_options *xo, const char *key_file, struct xprt_ctx **out);

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

/* The metadata service's run as the last connection to it found it (0: none yet). */
uint64_t rfs_service_run(struct rfs *fs);

/*
 * The open handles we hold (fs_meta.c's open, create and release keep the
 * list): after a restart of the metadata service, the first new connection
 * reclaims them all (RECLAIM) before it serves a call, since the service
 * keeps handles in memory only. Out of memory, a handle is logged and not
 * listed: it works until such a restart.
 */
void rfs_held_add(struct rfs *fs, uint64_t handle, uint64_t ino, int flags);
void rfs_held_remove(struct rfs *fs, uint64_t handle);

/*
 * Checks @pb (chunk size 4 KiB..64 MiB, 1..64 daemons of 16 bytes,
 * stripe_width matching, a placement we implement) and copies it to @out.
 * Returns -EPROTO when it does not pass.
 */
int rfs_layout_parse(const Rdmafs__Layout *pb, struct rfs_layout *out);

/*
 * Calls @method on daemon @d with @req and, on success, unpacks the reply as
 * @resp_desc into *@resp (free it with rfs_meta_free()). For rdmafsctl's
 * administration calls, which speak protobuf themselves. Returns the
 * daemon's status, -EBADMSG for a reply that does not unpack, or a
 * transport error.
 */
int rfs_daemon_call(struct rfs_daemon *d, uint32_t method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);

#endif /* RDMAFS_FS_CLIENT_I_H */
