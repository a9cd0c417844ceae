/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl internals: the session (options, transport, connections, the
 * cluster map), output (tables and JSON) and the commands. Prefix ctl_.
 */
#ifndef RDMAFS_CTL_I_H
#define RDMAFS_CTL_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "rdmafs.pb-c.h"
#include "rdmafs_common.h"

struct xprt_ctx;
struct xprt_conn;
struct xprt_pool;

/* Exit status of rdmafsctl (the man page lists them). */
enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_PROBLEMS = 1,	  /* scrub/fsck found damage that remains */
	CTL_EXIT_USAGE = 2,	  /* bad command line or configuration */
	CTL_EXIT_UNREACHABLE = 3, /* the metadata service or a daemon could not be reached */
	CTL_EXIT_FAILED = 4,	  /* the service refused, or the operation failed midway */
};

/* Flags only some commands take; main() checks they fit the command. */
enum ctl_flag {
	CTL_FLAG_WAIT = 1u << 0,
	CTL_FLAG_REPAIR = 1u << 1,
	CTL_FLAG_FORCE = 1u << 2,
	CTL_FLAG_NO_WAIT = 1u << 3,
	CTL_FLAG_STATUS = 1u << 4,
};

/* The command line's enum ctl_flag bits. */
extern unsigned ctl_flags;

#define CTL_MAX_ADDRESSES 16

/* One storage daemon of the cluster map, and our connection to it. */
struct ctl_daemon {
	uint8_t uuid[RDMAFS_UUID_LEN];
	char uuid_text[37];
	char *addresses[CTL_MAX_ADDRESSES];
	size_t address_count;
	uint64_t capacity_bytes, used_bytes;
	uint32_t state; /* Rdmafs__DaemonState, maybe a value we do not know */
	uint64_t last_heartbeat_unix_ms;
	struct xprt_conn *conn;	  /* NULL until ctl_daemon_conn() */
	int conn_error;		  /* the last connect error, 0 if none */
	const char *conn_address; /* the address that answered or failed last */
};

struct ctl_map {
	uint64_t epoch;
	struct ctl_daemon *daemons;
	size_t count;
};

struct ctl {
	/* options */
	const char *meta_uri;
	uint8_t *secret;
	size_t secret_len;
	bool json;
	bool verbose;
	unsigned timeout_ms;

	struct xprt_ctx *xctx;
	struct xprt_conn *meta;
	struct xprt_pool *pool; /* registered buffers for chunk copies (drain) */
	uint32_t pool_buf_size;
	uint8_t *reply; /* a reply body, the largest a connection carries */
	size_t reply_cap;
	struct ctl_map map;
	bool map_loaded;
};

/* ---- session (rpc.c) ---- */

/* Prints "rdmafsctl: ..." to stderr. */
__attribute__((format(printf, 1, 2))) void ctl_err(const char *fmt, ...);

/* Starts the transport. A CTL_EXIT_* status. */
int ctl_session_open(struct ctl *c);
void ctl_session_close(struct ctl *c);

/*
 * Packs @req, calls @method on @conn and unpacks the reply as @resp_desc into
 * *@resp (free it with protobuf_c_message_free_unpacked()). Returns 0, the
 * peer's negative errno, a transport error, or -EBADMSG for a reply that
 * does not parse.
 */
int ctl_call(struct ctl *c, struct xprt_conn *conn, uint32_t method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);

/* The metadata service's connection; prints why and returns an errno if unreachable. */
int ctl_meta_conn(struct ctl *c, struct xprt_conn **out);
/* Calls the metadata service; see ctl_call(). */
int ctl_meta_call(struct ctl *c, uint32_t method, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);

/* Loads the cluster map (once; @reload fetches it again). 0 or a negative errno. */
int ctl_map_load(struct ctl *c, bool reload);
struct ctl_daemon *ctl_map_find(struct ctl *c, const uint8_t *uuid);

/*
 * Finds the daemon named by @arg: a full UUID, a unique prefix of it (dashes
 * optional), or one of its addresses (with or without the scheme). Prints
 * why and returns -ENOENT or -EINVAL (ambiguous) when there is no single one.
 */
int ctl_resolve(struct ctl *c, const char *arg, struct ctl_daemon **out);

/*
 * A connection to @d, trying its addresses in order. On failure
 * d->conn_error and d->conn_address say what failed; nothing is printed.
 */
int ctl_daemon_conn(struct ctl *c, struct ctl_daemon *d, struct xprt_conn **out);

const char *ctl_state_name(uint32_t state);
void ctl_uuid_format(const uint8_t *uuid, char out[37]);
/* xprt_strerror() for transport and peer errors. */
const char *ctl_strerror(int err);

/* ---- chunk copies (rpc.c) ---- */

/*
 * The layout generation rdmafsctl's chunk requests carry: above every fence
 * (rdmafs.proto, "Layout generations and fences"), because rdmafsctl is what
 * moves a fenced file's chunks.
 */
#define CTL_LAYOUT_GENERATION_ADMIN UINT64_MAX

/*
 * Copies chunk (@ino, @index) of @length bytes from @src to @dst, for a file
 * with chunks of @chunk_size bytes, through a registered buffer: the source
 * RDMA WRITEs into it, the destination RDMA READs from it, and both ends
 * check the CRC-32C. The destination ends up with exactly @length bytes.
 * Not yet durable: commit the destination after.
 */
int ctl_chunk_copy(struct ctl *c, struct xprt_conn *src, struct xprt_conn *dst, uint64_t ino,
		   uint64_t index, uint32_t length, uint32_t chunk_size);
int ctl_chunk_commit_inode(struct ctl *c, struct xprt_conn *conn, uint64_t ino);
/* Removes every chunk of @ino on @conn's daemon. */
int ctl_chunk_remove_inode(struct ctl *c, struct xprt_conn *conn, uint64_t ino);
/*
 * CHUNK_FENCE: raises @ino's fence on @conn's daemon to @generation, or with
 * @lift clears it if it is exactly @generation. *@now (may be NULL) gets the
 * fence in force afterwards.
 */
int ctl_chunk_fence(struct ctl *c, struct xprt_conn *conn, uint64_t ino, uint64_t generation,
		    bool lift, uint64_t *now);
/* Lists up to a reply's worth of chunks after (@after_ino, @after_index). */
int ctl_chunk_list(struct ctl *c, struct xprt_conn *conn, uint64_t after_ino, uint64_t after_index,
		   bool from_start, Rdmafs__ChunkListResp **out);

/*
 * The inodes after @after (0: from the first), one reply's worth, checked:
 * ascending numbers, and each layout with a chunk size and 1..64 UUIDs of 16
 * bytes matching its stripe width. -EBADMSG otherwise.
 */
int ctl_inode_list(struct ctl *c, uint64_t after, Rdmafs__InodeListResp **out);

/* ---- output (out.c) ---- */

/* A small JSON writer to stdout, pretty-printed. Keys are NULL inside arrays. */
void ctl_json_begin_object(const char *key);
void ctl_json_end_object(void);
void ctl_json_begin_array(const char *key);
void ctl_json_end_array(void);
void ctl_json_string(const char *key, const char *value);
void ctl_json_u64(const char *key, uint64_t value);
void ctl_json_i64(const char *key, int64_t value);
void ctl_json_double(const char *key, double value);
void ctl_json_bool(const char *key, bool value);
void ctl_json_null(const char *key);
/* Ends the document with a newline. */
void ctl_json_finish(void);

/* "1.5 GiB", "512 B" */
const char *ctl_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* ---- commands ---- */

int ctl_cmd_status(struct ctl *c, int argc, char **argv);
int ctl_cmd_daemons(struct ctl *c, int argc, char **argv);
int ctl_cmd_stats(struct ctl *c, int argc, char **argv);
int ctl_cmd_drain(struct ctl *c, int argc, char **argv);
int ctl_cmd_remove(struct ctl *c, int argc, char **argv);
int ctl_cmd_scrub(struct ctl *c, int argc, char **argv);
int ctl_cmd_fsck(struct ctl *c, int argc, char **argv);

/* Maps an errno from the service or the transport to an exit status. */
int ctl_exit_for(int err);

#endif /* RDMAFS_CTL_I_H */
