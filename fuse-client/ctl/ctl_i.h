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
#include "rdmafs_names.h"

#include "rdmafs_fs.h"
#include "fs_client_i.h"

/* Exit status of rdmafsctl (the man page lists them). */
enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_PROBLEMS = 1,	  /* scrub/fsck found damage that remains */
	CTL_EXIT_USAGE = 2,	  /* bad command line or configuration */
	CTL_EXIT_UNREACHABLE = 3, /* the metadata service or a daemon could not be reached */
	CTL_EXIT_FAILED = 4,	  /* the service refused, or the operation failed midway */
	CTL_EXIT_UNHEALTHY = 5,	  /* status: the cluster's health is ERROR (1: DEGRADED) */
};

/* Flags only some commands take; main() checks they fit the command. */
enum ctl_flag {
	CTL_FLAG_WAIT = 1u << 0,
	CTL_FLAG_REPAIR = 1u << 1,
	CTL_FLAG_FORCE = 1u << 2,
	CTL_FLAG_NO_WAIT = 1u << 3,
	CTL_FLAG_STATUS = 1u << 4,
	CTL_FLAG_READ_ONLY = 1u << 5,	/* client add */
	CTL_FLAG_ROOT_SQUASH = 1u << 6, /* client add */
	CTL_FLAG_OUT = 1u << 7,		/* client add --out FILE (ctl_out_file) */
};

/* The command line's enum ctl_flag bits. */
extern unsigned ctl_flags;
/* client add --out FILE, or NULL. */
extern const char *ctl_out_file;

#define CTL_MAX_ADDRESSES 16
#define CTL_MAX_LABEL	  64 /* a daemon's name or disk id (DaemonInfo) */

/* One storage daemon of the cluster map, and our connection to it. */
struct ctl_daemon {
	uint8_t uuid[RDMAFS_UUID_LEN];
	char uuid_text[37];
	char name[CTL_MAX_LABEL + 1];	 /* "" from a service older than names */
	char disk_id[CTL_MAX_LABEL + 1]; /* daemons with one disk_id share a disk */
	char host[CTL_MAX_LABEL + 1];	 /* its failure domains as declared ("": not) */
	char rack[CTL_MAX_LABEL + 1];
	char label[CTL_MAX_LABEL + 1]; /* the name, or the UUID's first 8 digits */
	bool hosts_metadata;
	char *addresses[CTL_MAX_ADDRESSES];
	size_t address_count;
	uint64_t capacity_bytes, used_bytes; /* what it may use, what it stores */
	uint32_t state;			     /* Rdmafs__DaemonState, maybe a value we do not know */
	uint64_t last_heartbeat_unix_ms;
	uint64_t chunks_missing;   /* copies here that missed writes (DaemonInfo.chunks_missing) */
	struct rfs_daemon *handle; /* NULL until ctl_daemon() */
	int conn_error;		   /* the last connect error, 0 if none */
	const char *conn_address;  /* the address that answered or failed last */
};

/*
 * The cluster map: the daemons it lists, and apart from them the REMOVED
 * ones, which the map forgets (rdmafsctl asks for them only to name them
 * in its messages and in fsck's lost files; it never contacts them).
 */
struct ctl_map {
	uint64_t epoch;
	char cluster_id[37]; /* "" from a service older than cluster ids */
	struct ctl_daemon *daemons;
	size_t count;
	struct ctl_daemon *removed;
	size_t removed_count;
};

struct ctl {
	/* options */
	const char *meta_uri;
	uint8_t *secret; /* NULL when a key is used */
	size_t secret_len;
	const char *key_file; /* the client key used instead of the secret, or NULL */
	char key_name[65];    /* its client name, for messages */
	bool json;
	bool verbose; /* --log-level or -v: the transport logs too */
	unsigned timeout_ms;

	struct rfs_daemon *meta; /* NULL until ctl_meta() */
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
 * The handle on the metadata service, opened on first use (its transport
 * context and buffers are shared by every daemon handle); prints why and
 * returns an errno if it cannot be opened.
 */
int ctl_meta(struct ctl *c, struct rfs_daemon **out);
/*
 * Calls the metadata service as rfs_daemon_call() does, and says what failed
 * when it is unreachable or does not serve @method.
 */
int ctl_meta_call(struct ctl *c, uint32_t method, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);

/* Loads the cluster map (once; @reload fetches it again). 0 or a negative errno. */
int ctl_map_load(struct ctl *c, bool reload);
/* The daemon @uuid of the map, or a removed one; NULL if neither. */
struct ctl_daemon *ctl_map_find(struct ctl *c, const uint8_t *uuid);

/*
 * Finds the daemon named by @arg: its name, a full UUID, a unique prefix of it
 * (dashes optional), or one of its addresses (with or without the scheme). Prints
 * why and returns -ENOENT or -EINVAL (ambiguous) when there is no single one.
 * A daemon of the map is preferred to a removed one; ctl_resolve() refuses
 * a removed one (-EIDRM, saying so), ctl_resolve_any() hands it out.
 */
int ctl_resolve(struct ctl *c, const char *arg, struct ctl_daemon **out);
int ctl_resolve_any(struct ctl *c, const char *arg, struct ctl_daemon **out);

/*
 * A handle on @d, opened on first use with its addresses tried in order (a
 * dead connection is made again by the handle's next call). On failure
 * d->conn_error and d->conn_address say what failed; nothing is printed.
 * A daemon the map shows DOWN (or REMOVED) is not contacted: -EHOSTDOWN at
 * once, rather than a connect timeout per command (ctl_daemon_skipped()).
 */
int ctl_daemon(struct ctl *c, struct ctl_daemon *d, struct rfs_daemon **out);
/* True when @err from ctl_daemon() means @d was skipped for its map state. */
bool ctl_daemon_skipped(const struct ctl_daemon *d, int err);
/* What @err means for @d, for tables and JSON ("down in the cluster map: ..."). */
const char *ctl_daemon_strerror(const struct ctl_daemon *d, int err);
/* Prints why @d failed with @err: "daemon UUID at ADDRESS: ...", or that it was skipped. */
void ctl_report_daemon_error(const struct ctl_daemon *d, int err);

const char *ctl_state_name(uint32_t state);
void ctl_uuid_format(const uint8_t *uuid, char out[37]);

/* xprt_strerror() for transport and peer errors. */
const char *ctl_strerror(int err);

/* ---- chunks (rpc.c) ---- */

/*
 * rdmafsctl's chunk requests carry RFS_GENERATION_ADMIN: above every fence
 * (rdmafs.proto, "Layout generations and fences"), because rdmafsctl is what
 * moves a fenced file's chunks. Chunk copies, fences and lists are the client
 * core's (rfs_chunk_copy, rfs_chunk_fence, rfs_chunk_list).
 */

/* Chunks asked of a daemon at once (rfs_chunk_list). */
#define CTL_LIST_PAGE 1024

/* Commits every chunk of @ino on @d. */
int ctl_chunk_commit_inode(struct rfs_daemon *d, uint64_t ino);
/* Removes every chunk of @ino on @d. */
int ctl_chunk_remove_inode(struct rfs_daemon *d, uint64_t ino);

/*
 * SET_LAYOUT: switches @ino from layout @old (a compare-and-swap on its
 * daemons) to the @n @daemons, with failure domains @domains (one a daemon;
 * NULL: each kept daemon keeps its own, an added one is alone). Returns 0,
 * -ESTALE (the layout is no longer @old), -ENOENT (the file is gone), or
 * another error of the call.
 */
int ctl_set_layout(struct ctl *c, uint64_t ino, const Rdmafs__Layout *old,
		   const uint8_t *const *daemons, size_t n, const uint32_t *domains);
/* The layout generation the metadata service has for @ino now. */
int ctl_layout_generation(struct ctl *c, uint64_t ino, uint64_t *generation);

/* The daemons a move fenced a file on (ctl_fence_layout()). */
struct ctl_fences {
	struct ctl_daemon *d[RDMAFS_MAX_STRIPE];
	struct rfs_daemon *h[RDMAFS_MAX_STRIPE];
	size_t n;
};

/*
 * A move's first step: fences @ino at @fence (its layout @l's generation + 1)
 * on every daemon of @l the map does not show DOWN, in @f. From each reply on
 * that daemon serves no request made with an older layout, and none is in
 * progress there; a write the head of its chain took before its own fence
 * has gone down the whole chain by then (daemons let forwarded writes pass
 * their fences), so once all are fenced every copy holds every write taken,
 * and the move copies them all. On failure, says which daemon failed and
 * lifts what it set.
 */
int ctl_fence_layout(struct ctl *c, uint64_t ino, const Rdmafs__Layout *l, uint64_t fence,
		     struct ctl_fences *f);
/*
 * Lifts the fences @f of a move of @ino that failed before its switch, unless
 * the service shows a generation at or past @fence (the switch happened after
 * all: they must stay). Names each it cannot lift and @what to run again.
 */
void ctl_fences_lift(struct ctl *c, uint64_t ino, uint64_t fence, const struct ctl_fences *f,
		     const char *what);

/*
 * The chain of chunk @index of @ino under layout @l: the UUIDs of the daemons
 * holding its copies, head first, in @out (RDMAFS_MAX_REPLICAS of room).
 * Returns their count, or -EPROTO for a layout without valid daemons.
 */
int ctl_chain_of(const Rdmafs__Layout *l, uint64_t ino, uint64_t index, const uint8_t **out);

/*
 * The inodes after @after (0: from the first), one reply's worth, checked:
 * ascending numbers, and each layout with a chunk size and 1..64 UUIDs of 16
 * bytes matching its stripe width. -EBADMSG otherwise.
 */
int ctl_inode_list(struct ctl *c, uint64_t after, Rdmafs__InodeListResp **out);

/* ---- repair of bad chunks from their copies (repair.c) ---- */

/*
 * Rewrites every bad chunk the scrub results @res[0..n-1] list (of the
 * map's daemons, @errs[i] 0 where res[i] is one) from a good copy on another
 * daemon of its chain, fenced; prints a line per chunk. *@repaired counts
 * the chunks rewritten, *@failed the rest (no good copy, an error, or left
 * to fsck: of a gone file, or not a copy of its file). Returns 0.
 */
int ctl_scrub_repair(struct ctl *c, Rdmafs__ScrubResp *const *res, const int *errs, size_t n,
		     uint64_t *repaired, uint64_t *failed);

/* ---- paths of inodes (paths.c) ---- */

struct ctl_paths;

/*
 * Looks up the paths of @inos (@n of them, repeats allowed) at the metadata
 * service into *@out, which ctl_paths_free() frees. Best effort: inodes
 * without a path keep a reason (a failed lookup is said on stderr once).
 * Returns 0, or -ENOMEM.
 */
int ctl_paths_resolve(struct ctl *c, const uint64_t *inos, size_t n, struct ctl_paths **out);
/* The path of @ino, or NULL and *@why says why there is none. @p may be NULL. */
const char *ctl_path_of(const struct ctl_paths *p, uint64_t ino, const char **why);
void ctl_paths_free(struct ctl_paths *p);

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
int ctl_cmd_undrain(struct ctl *c, int argc, char **argv);
int ctl_cmd_remove(struct ctl *c, int argc, char **argv);
int ctl_cmd_scrub(struct ctl *c, int argc, char **argv);
int ctl_cmd_fsck(struct ctl *c, int argc, char **argv);
int ctl_cmd_client(struct ctl *c, int argc, char **argv);
int ctl_cmd_rebalance(struct ctl *c, int argc, char **argv);

/* Maps an errno from the service or the transport to an exit status. */
int ctl_exit_for(int err);

#endif /* RDMAFS_CTL_I_H */
