/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-daemon internals: configuration, the data directory, the chunk
 * store and the RPC server. Nothing here is exported; the prefixes say which
 * file a function lives in (config_, datadir_, store_, server_). Logging,
 * checksums and placement come from librdmafs_common (rdmafs_common.h).
 */
#ifndef RDMAFS_DAEMON_I_H
#define RDMAFS_DAEMON_I_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "rdmafs_common.h"

struct xprt_ctx;
struct xprt_pool;
struct xprt_req;
struct xprt_buf;
struct xprt_conn;
struct Rdmafs__ChunkWriteReq;

/* ---- configuration (config.c) ---- */

#define DAEMON_MAX_LISTEN 8
#define DAEMON_NAME_MAX	  64 /* RegisterDaemonReq.name */

struct daemon_config {
	char *config_file;
	char *data_dir;
	char *listen[DAEMON_MAX_LISTEN];
	unsigned listen_line[DAEMON_MAX_LISTEN]; /* its line in the file; 0: a flag */
	unsigned listen_count;
	char *secret_file;
	char *port_file;
	char *name;		    /* at most DAEMON_NAME_MAX printable characters */
	char *host;		    /* failure domains: the machine, the rack (NULL: undeclared; */
	char *rack;		    /* at most DAEMON_NAME_MAX printable characters each) */
	unsigned workers;	    /* worker threads, each with its own io_uring */
	unsigned meta_workers;	    /* metadata requests' threads; 0: the workers run them */
	unsigned reclaim_grace_sec; /* metadata service: clients' time to reclaim handles */
	unsigned replicas;	    /* metadata service: copies of each chunk of a new file [1] */
	bool metadata_sync_always;  /* metadata_sync = always (else batch) */
	unsigned metadata_sync_ms;  /* batch: how often what was committed is flushed */
	bool data_sync_always;	    /* data_sync = always (else batch) */
	unsigned data_sync_ms;	    /* batch: a close's commit is on disk within this */
	unsigned queue_depth;	    /* requests queued for the workers, then -EBUSY */
	int busy_poll_us;	    /* poll this long before sleeping; -1: libxprt's */
	uint32_t max_chunk_size;    /* largest chunk served; sizes the buffers */
	uint64_t lmdb_map_size;
	enum rdmafs_log_level log_level;
	bool foreground;
	bool check_only;		    /* --check-config: check, start nothing */
	int metadata;			    /* 1: host the metadata service, 0: not */
	unsigned metadata_line;		    /* where metadata was set; 0: a flag or not at all */
	char *metadata_uri;		    /* where to register; NULL: this daemon's own service */
	unsigned metadata_uri_line;	    /* as metadata_line */
	char *advertise[DAEMON_MAX_LISTEN]; /* URIs put in the cluster map */
	unsigned advertise_line[DAEMON_MAX_LISTEN];
	unsigned advertise_count;
	char *metrics_listen;	 /* "HOST:PORT" for /metrics; NULL: no metrics */
	unsigned metrics_line;	 /* its line in the file; 0: a flag */
	char *metrics_port_file; /* where to write the metrics port */
};

/*
 * Fills @cfg from the command line and the INI file it names (flags win) and
 * decides whether this daemon hosts the metadata service (see config.c).
 * Reports every unknown key, bad value, missing setting or conflict, each
 * with the file line or flag it came from and what is allowed, then returns
 * -EINVAL; 1 when --help or --version was answered, else 0. Whatever it returns, the
 * caller frees @cfg with config_free(). Touches nothing outside the process:
 * no name is resolved, no socket opened.
 */
int config_load(struct daemon_config *cfg, int argc, char **argv);
/*
 * The INI part of config_load(): reads @f (named @path in messages) into
 * @cfg, whose earlier values are the defaults a key overrides. Every bad line
 * is reported as "PATH:LINE: ..."; then -EINVAL. Apart from config_load() it
 * serves the fuzz target, which has the file's bytes in memory.
 */
int config_parse_file(struct daemon_config *cfg, FILE *f, const char *path);
/*
 * Checks that every listen address of @cfg resolves and, with @try_bind,
 * that it can be bound now (a TCP socket is bound and closed at once: an
 * address this host does not have, a port in use or a privileged port is
 * found before the data directory is touched). Reports each failure with the
 * line or flag that set the address. metrics_listen is checked the same way.
 * Returns 0 or -EINVAL.
 */
int config_check_listen(const struct daemon_config *cfg, bool try_bind);
/*
 * Splits metrics_listen's "HOST:PORT" ("[ADDR]:PORT" for IPv6) into @host
 * and @port: -EINVAL, with what is allowed in @why, unless the host is
 * non-empty and the port 0..65535. Touches nothing outside the process.
 */
int config_split_host_port(const char *value, char *host, size_t host_size, uint16_t *port,
			   char *why, size_t why_size);
/* Frees what @cfg holds and zeroes it; calling it again is harmless. */
void config_free(struct daemon_config *cfg);

/* ---- data directory (datadir.c) ---- */

#define DATADIR_FORMAT_VERSION 1
#define DATADIR_MARKER	       "rdmafs-format"

struct datadir {
	int dir_fd;
	int marker_fd; /* holds the flock that keeps a second daemon out */
	uint8_t uuid[16];
	char uuid_text[37];
};

/*
 * Opens (and on first use creates) the data directory at @path. A non-empty
 * directory without a marker, a foreign marker or a newer format is refused
 * with a message saying so, and nothing in it is changed: -EINVAL, -EBUSY
 * when another daemon holds it, or an errno from the file system.
 */
int datadir_open(const char *path, struct datadir *out);
/*
 * What datadir_open() would say of @path, changing nothing: a missing
 * directory whose parent is a directory is fine (it would be created); an
 * existing one needs a valid marker or no entries. A running daemon's lock is
 * not a fault here. Logs what is wrong; 0, -EINVAL or an errno.
 */
int datadir_check(const char *path);
void datadir_close(struct datadir *dd);
/*
 * The cluster the directory joined (its "cluster-id" file): *@known false
 * when it never joined one. 0, -EINVAL for a damaged file, or an errno.
 */
int datadir_cluster_get(const struct datadir *dd, uint8_t *id, bool *known);
/* Records the cluster joined (written atomically). 0 or -errno. */
int datadir_cluster_set(const struct datadir *dd, const uint8_t *id);
/* A UUID as text, 36 characters and a NUL. */
void datadir_uuid_format(const uint8_t *uuid, char out[37]);

/* ---- chunk store (store.c) ---- */

/* Granularity of the stored checksums; writes are read-modify-write of whole blocks. */
#define STORE_BLOCK_SIZE 4096u

struct store;
struct store_io;

struct store_chunk_id {
	uint64_t inode;
	uint64_t index;
};

struct store_chunk_info {
	bool exists;
	uint32_t length;
	uint64_t version;
	uint32_t block_count;
};

/*
 * Opens the chunk store inside the data directory @dir_fd: chunk files under
 * chunks/, their metadata in the LMDB environment meta/. Returns an errno.
 */
int store_open(int dir_fd, uint32_t max_chunk_size, uint64_t map_size, struct store **out);
/* Syncs and closes. Every store_io must be destroyed before. NULL is a no-op. */
void store_close(struct store *st);

/*
 * Per-thread I/O state: an io_uring with @pool's region registered as a fixed
 * buffer (falls back to plain reads and writes when registration is refused).
 */
int store_io_create(struct store *st, struct xprt_pool *pool, struct store_io **out);
void store_io_destroy(struct store_io *io);

/*
 * From now on the reads through @io never wait for the disk (RWF_NOWAIT): a
 * store_read(), or a store_write() that must complete a partly covered
 * block, that would wait fails with -EAGAIN and has changed nothing, so that
 * a thread which must not block (the transport's) can hand the request to
 * one that may. What is in the page cache is read as before, on a file
 * system that can tell (not tmpfs or 9p, which refuse RWF_NOWAIT: there
 * every such read fails with -EAGAIN).
 */
void store_io_nowait(struct store_io *io);

/*
 * A fetcher: its own io_uring that brings blocks of chunk files into the page
 * cache for a thread that must not wait for the disk (the transport's). A
 * request whose read store_io_nowait() refused (a read, a write completing
 * a block) is fetched, and run again when the fetch completes, finding its
 * blocks in memory. The fetch reads into a
 * scratch buffer nobody looks at and takes no chunk lock across the wait:
 * what the read run again does decides everything, so a fetch that read a
 * block being rewritten, or one whose chunk was removed meanwhile, only
 * costs a wasted read. At most @depth fetches are in flight. Thread-safe.
 */
struct store_fetch;

/* The largest range one fetch reads (a read answered inside its reply is shorter). */
#define STORE_FETCH_MAX (256u << 10)

int store_fetch_create(struct store *st, unsigned depth, struct store_fetch **out);
/* Frees @f; no fetch may be in flight (store_fetch_reap() with wait until -ENOENT). */
void store_fetch_destroy(struct store_fetch *f);
/* Readable while a completed fetch waits to be reaped: for xprt_watch_add(). */
int store_fetch_fd(const struct store_fetch *f);

/*
 * Starts fetching the blocks that hold [@offset, @offset + @len) of chunk
 * @id; @tag comes back from store_fetch_reap() once they are read (or the
 * read failed: the request run again meets the error itself). 0, -EBUSY
 * (@depth in flight, the chunk being written, or the ring failed before),
 * -E2BIG (past STORE_FETCH_MAX), -ENOENT (no file), or the error of opening
 * the file or of the ring.
 */
int store_fetch_start(struct store_fetch *f, struct store_chunk_id id, uint32_t offset,
		      uint32_t len, uint64_t tag);

/*
 * The tag of a completed fetch: 0 and *@tag; -EAGAIN when none has
 * completed; -ENOENT when none is in flight. With @wait it waits for one
 * in flight rather than answer -EAGAIN (-EIO: the ring cannot be waited on).
 */
int store_fetch_reap(struct store_fetch *f, bool wait, uint64_t *tag);

/* Whether reads through @io can tell the page cache from the disk (RWF_NOWAIT works). */
bool store_io_can_fetch(const struct store_io *io);

/*
 * Writes @len bytes at @offset of a chunk. The payload is already in @buf at
 * @buf + (@offset % STORE_BLOCK_SIZE); @buf (a pool buffer) holds the whole
 * block range, which this completes from disk. With @hole, whole blocks of
 * a payload of zeros are then punched out of the chunk file (a hole punched
 * by the client). -ENOSPC, -EBADMSG (stored data fails its checksum), -EIO,
 * -EINVAL.
 */
int store_write(struct store_io *io, struct store_chunk_id id, uint32_t offset, uint32_t len,
		uint8_t *buf, bool sync, bool hole, struct store_chunk_info *info);

/*
 * Reads up to @len bytes at @offset into @buf (starting at
 * @buf + (@offset % STORE_BLOCK_SIZE)), checking the stored checksums.
 * *@bytes is less than @len at the chunk's end, 0 for a missing chunk.
 * -EBADMSG on a checksum mismatch (the server turns it into -EIO).
 */
int store_read(struct store_io *io, struct store_chunk_id id, uint32_t offset, uint32_t len,
	       uint8_t *buf, uint32_t *bytes, uint32_t *chunk_length);

/*
 * Scrub: reads chunk @id whole into @buf (max_chunk_size bytes, 4 KiB
 * aligned) and checks every block against its stored CRC. *@length gets the
 * chunk's length (0: the chunk is gone), *@bad_block the first block that
 * fails. Returns 0, -EBADMSG (a checksum mismatch), -EIO (the read failed or
 * the chunk's metadata is damaged).
 */
int store_verify(struct store_io *io, struct store_chunk_id id, uint8_t *buf, uint32_t *length,
		 uint32_t *bad_block);

/* Sets a chunk's length (creating it when missing); zeros when it grows. */
int store_truncate(struct store_io *io, struct store_chunk_id id, uint32_t length,
		   struct store_chunk_info *info);

/*
 * Visits chunks of @inode: the @count in @indexes, or with @range every chunk
 * with index >= @first_index.
 */
struct store_selection {
	uint64_t inode;
	bool range;
	const uint64_t *indexes;
	size_t count;
	uint64_t first_index;
};

/* Makes the selected chunks durable (fdatasync via io_uring) and the metadata. */
int store_commit(struct store_io *io, const struct store_selection *sel);
/*
 * Makes everything the store holds durable at once: a syncfs() of the file
 * system its chunks are on (every chunk file and directory), then the
 * index's journal, wherever it is. What store_commit() does for some chunks,
 * for every chunk written before the call: the flush of commits deferred
 * with data_sync = batch (server.c). Needs Linux 5.8 or later to hear of a
 * failed writeback from syncfs().
 */
int store_flush(struct store *st);
int store_remove(struct store_io *io, const struct store_selection *sel, uint64_t *removed,
		 uint64_t *bytes_freed);
int store_stat(struct store *st, struct store_chunk_id id, struct store_chunk_info *info);
/* Bytes allocated on the local disk to every chunk of @inode (holes excluded). */
int store_allocated(struct store *st, uint64_t inode, uint64_t *bytes);

struct store_list_entry {
	struct store_chunk_id id;
	uint32_t length;
	uint64_t version;
};

/*
 * Fences (drain): a request for @inode carrying layout generation
 * @generation passes store_fence_enter() unless the inode's fence is above
 * it (-ESTALE). On 0 the caller does its disk work and then calls
 * store_fence_leave(); no fence is set in between.
 */
int store_fence_enter(struct store *st, uint64_t inode, uint64_t generation);
void store_fence_leave(struct store *st);

/*
 * Raises @inode's fence to @generation, or with @lift clears it if it is
 * exactly @generation. Waits for every request between enter and leave, and
 * the change is on disk before it returns. *@now gets the fence in force
 * afterwards (0: none). -EINVAL for inode or generation 0, or an LMDB error.
 */
int store_fence_set(struct store *st, uint64_t inode, uint64_t generation, bool lift,
		    uint64_t *now);

/* An inode's fence, as store_fence_list() gives it. */
struct store_fence {
	uint64_t inode, generation;
};

/*
 * Up to @cap fences of the inodes above @after, in inode order, into @out;
 * *@count gets how many, *@more whether others follow.
 */
int store_fence_list(struct store *st, uint64_t after, struct store_fence *out, size_t cap,
		     size_t *count, bool *more);

/* Up to @max chunks after @after (or from the first when @after is NULL). */
int store_list(struct store *st, const struct store_chunk_id *after, struct store_list_entry *out,
	       size_t max, size_t *count, bool *done);
uint64_t store_chunk_count(struct store *st);
/*
 * Blocks read back to settle the CRCs a short overwrite left pending: by a
 * later change of the chunk, unless this process saw that overwrite complete
 * through the cached file the change gets too (not after a restart, nor once
 * the file was closed, nor for an O_DIRECT write, which opens its own), and
 * after a write that failed.
 */
uint64_t store_pending_reads(const struct store *st);
/*
 * The bytes of every chunk (their lengths), summed by a walk of the chunk
 * index: O(chunks), for the agent's capacity report. 0 or -errno.
 */
int store_bytes(struct store *st, uint64_t *out);
/* A descriptor inside the data file system (for statvfs). */
int store_data_fd(const struct store *st);
uint32_t store_max_chunk_size(const struct store *st);

/* ---- chunk index journal (journal.c) ---- */

/*
 * Changes of the chunk index, appended to a file and held in memory until a
 * checkpoint applies them to the index in one transaction (see journal.c for
 * why). A change appended is in the file when journal_append() returns, so
 * a kill -9 keeps it; an fdatasync of journal_fd() makes every change
 * appended so far survive a power loss too. The file keeps its records
 * until journal_settle() has flushed the index they were applied to: a
 * replay on the index's last flush brings every one back.
 *
 * Thread safety: every function but open and close may be called by any
 * thread at any time; a checkpoint's commit runs with the journal locked
 * (no append or lookup meanwhile), a settle's flush with appends stopped.
 */
#define JOURNAL_KEY_LEN 16
#define JOURNAL_DELETED UINT32_MAX /* a change's len when it removes the key */

struct journal;

struct journal_change {
	uint8_t key[JOURNAL_KEY_LEN];
	uint32_t len;
	void *value; /* NULL: the key is removed */
};

/* Opens (creating, mode 0600) the journal file @name in @dir_fd. 0 or -errno. */
int journal_open(int dir_fd, const char *name, struct journal **out);
/* Flushes the file to the disk and closes; NULL is a no-op. What was not checkpointed stays. */
void journal_close(struct journal *j);

/* What a replay hands on: @value NULL for a removal. Returns 0 or -errno (ends the replay). */
typedef int (*journal_apply_fn)(void *arg, const uint8_t *key, const void *value, uint32_t len);

/*
 * At open, before any append: calls @apply for each record of the file, in
 * the order written, when their base (the flushed index transaction they
 * follow, the same for every record of the file) is at most @newest, the
 * index's newest transaction: the index holds that flush, and perhaps some
 * of the records already (a record is a key's whole value, so applying it
 * again changes nothing). It stops at the first record that fails a check
 * (a foreign or cut tail) or has another base (the leftover of a file that
 * was emptied since). A base past @newest (the index lost that flush) is
 * not replayed at all: *@stale_base gets it, else 0. *@records counts those
 * applied. The records stay in the file until journal_discard(). Returns 0
 * or the first error of a read or of @apply.
 */
int journal_replay(struct journal *j, uint64_t newest, journal_apply_fn apply, void *arg,
		   uint64_t *records, uint64_t *stale_base);

/*
 * Forgets every change, in memory and in the file (emptied); the records
 * appended next follow index transaction @base. 0 or -errno.
 */
int journal_discard(struct journal *j, uint64_t base);

/*
 * Appends @key's change: @value (@len bytes, at most 1 MiB) or, when @value
 * is NULL, its removal. Returns 0, or -ENOSPC (the file system is full),
 * -EINVAL, -ENOMEM or another -errno of the write: then nothing of the
 * change is in the file or in memory.
 */
int journal_append(struct journal *j, const uint8_t *key, const void *value, uint32_t len);

/* Changes appended since the last checkpoint (or open). */
uint64_t journal_records(struct journal *j);

/* The file's length: every record since the last journal_settle() (or open). */
uint64_t journal_bytes(struct journal *j);

/* The file's descriptor, for a caller that fdatasyncs it with files of its own. */
int journal_fd(struct journal *j);

/*
 * The newest change of @key held: 0 when none (the index is current), 1 with
 * *@len its length (the value copied into @buf of @cap bytes) or
 * JOURNAL_DELETED. -EIO when the value is longer than @cap.
 */
int journal_lookup(struct journal *j, const uint8_t *key, void *buf, size_t cap, uint32_t *len);

/*
 * Applies @n changes (one per key) to the index in one transaction: 0 once
 * committed, with *@base that transaction's id, or -errno.
 */
typedef int (*journal_commit_fn)(void *arg, struct journal_change *const *changes, size_t n,
				 uint64_t *base);

/*
 * Calls @commit with every change held (if any) and, when it returns 0,
 * forgets them; the file keeps their records. Returns 0 or @commit's error
 * (then everything is still held).
 */
int journal_checkpoint(struct journal *j, journal_commit_fn commit, void *arg);

/* Makes the index durable: 0 with *@base the transaction now flushed, or -errno. */
typedef int (*journal_flush_fn)(void *arg, uint64_t *base);

/*
 * A checkpoint, then @flush, then the file emptied: its records are all in
 * the flushed index; later records follow *base. No change is appended
 * meanwhile (journal_append() waits), but lookups and checkpoints go on
 * during @flush (nothing is held then). Returns 0 or the first error (a
 * failed checkpoint or flush keeps the file; a failed truncation too, which
 * a replay then applies again, changing nothing).
 */
int journal_settle(struct journal *j, journal_commit_fn commit, journal_flush_fn flush, void *arg);

/* ---- revoked client keys (keyring.c) ---- */

struct keyring;
struct meta;
struct xprt_identity;

/* An empty set; @meta (hosted here, or NULL) is asked too. */
int keyring_create(struct meta *meta, struct keyring **out);
/* NULL is a no-op. */
void keyring_destroy(struct keyring *kr);
/* Replaces the set with @count revoked serials, as of the service's keys_epoch @epoch. */
int keyring_set(struct keyring *kr, const uint64_t *serials, size_t count, uint64_t epoch);
/* The keys_epoch of the last keyring_set() (0 before). */
uint64_t keyring_epoch(struct keyring *kr);
/* Whether key @serial is revoked. Any thread. */
bool keyring_revoked(struct keyring *kr, uint64_t serial);
/* The transport's identity check (xprt_identity_cb): -EKEYREVOKED or 0; @arg is the keyring. */
int keyring_check(const struct xprt_identity *id, void *arg);

/* ---- chain replication (chain.c) ---- */

/* The connections a daemon forwards replicated writes on, one per peer it met. */
struct chain;

int chain_create(struct xprt_ctx *ctx, struct chain **out);
/* Closes the connections; no forward may be under way. */
void chain_destroy(struct chain *c);

/*
 * The hop field of the CHUNK_WRITE request @body (@len bytes) without
 * unpacking it, for choosing its lane before a worker does: 0 for a
 * client's request, and for one that does not parse (its worker refuses it).
 */
unsigned chain_write_hop(const void *body, size_t len);

/* A write forwarded to the next daemon of its chain, until its answer. */
struct chain_call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, done;
	int status;
	struct xprt_conn *conn;
	const char *uri; /* the request's, for the log */
	uint64_t inode, index;
	/* the daemons after the next one that did not store the write (its answer's missed) */
	uint8_t missed[RDMAFS_MAX_REPLICAS][RDMAFS_UUID_LEN];
	unsigned n_missed;
};

/*
 * A forward's answer is awaited at most this long from the head, a second
 * less at each later hop, so that the error of a daemon that stopped
 * answering comes back up the chain before the client's own call times out
 * (5 s by default) and the client retries on a chain that skips it.
 */
#define CHAIN_FORWARD_TIMEOUT_MS 4000

/*
 * Sends the CHUNK_WRITE @m on to @m->chain[@skip] (n_chain > @skip: the
 * daemons before it are DOWN and skipped) with the rest of the chain, hop + 1,
 * @missed (the chain's daemons skipped so far), and the @m->length bytes at
 * @payload in @buf (a
 * pool buffer registered for remote read) for it to pull, and returns
 * without waiting: the caller stores its own copy meanwhile, then must call
 * chain_forward_end() before it reuses @buf or leaves (the next daemon may
 * be reading it). A connection to each peer is kept. Returns 0 (started), or
 * an error reaching the next daemon (logged; nothing to end).
 */
int chain_forward_start(struct chain *c, const struct Rdmafs__ChunkWriteReq *m, size_t skip,
			const ProtobufCBinaryData *missed, size_t n_missed, struct xprt_buf *buf,
			const void *payload, struct chain_call *call);
/*
 * Waits for @call's answer (bounded by the context's call timeout): 0 once
 * every later daemon of the chain stored the write, else the first error
 * along the chain (logged). A connection that timed out is reset, since the
 * peer may still read the buffer.
 */
int chain_forward_end(struct chain_call *call);

/*
 * The head of a chain holds its chunk's lock from before it forwards through
 * chain_forward_end(), so the writes of one chunk go down the chain one
 * at a time and in one order: two clients' overlapping writes leave every
 * copy the same. Chunks share CHAIN_ORDER_LOCKS locks by hash. Later daemons
 * of the chain need none: each gets the next write only after it answered
 * the last.
 */
void chain_order_lock(struct chain *c, uint64_t inode, uint64_t index);
void chain_order_unlock(struct chain *c, uint64_t inode, uint64_t index);
/*
 * CRAQ's dirty copies (docs/replication.md, "A read"). A daemon that stores a
 * write it also forwards (the head, a middle daemon) marks the chunk dirty
 * from before its own store until chain_forward_end(): chain_dirty_begin()
 * and chain_dirty_end(), which may overlap for one chunk. A replicated read
 * asks chain_dirty() before it reads and again after: dirty either time, it
 * answers -EINPROGRESS and the client reads on down the chain, whose tail
 * stores last and is never dirty. So no reader sees bytes that the later
 * copies may never get (a write that began and ended while it read has its
 * chain's answer: stored by every later copy, or recorded as missed there
 * for the resync to copy from here, and its client told to write again). Exact per chunk: a chunk
 * never written here is never dirty. A begin waits while CHAIN_DIRTY_WAYS other chunks of its hash
 * bucket are dirty (each until its forward answers or times out). Any thread.
 */
void chain_dirty_begin(struct chain *c, uint64_t inode, uint64_t index);
void chain_dirty_end(struct chain *c, uint64_t inode, uint64_t index);
bool chain_dirty(struct chain *c, uint64_t inode, uint64_t index);
/*
 * The resync's calls (resync.c) on the connection kept for @uri: a
 * CHUNK_WRITE whose @m->length bytes at @payload in @buf (a pool buffer) the
 * peer pulls (m->buf is filled in), or any other request @req. 0 once the
 * peer answered 0; its error, or the transport's.
 */
int chain_push(struct chain *c, const char *uri, struct Rdmafs__ChunkWriteReq *m,
	       struct xprt_buf *buf, const void *payload);
int chain_peer_call(struct chain *c, const char *uri, uint32_t method, ProtobufCMessage *req);

/* ---- the daemon's cluster map and lease (dmap.c) ---- */

struct dmap;
struct Rdmafs__GetClusterMapResp;
#define DMAP_URI_MAX 256

int dmap_create(const uint8_t *self, struct dmap **out);
void dmap_destroy(struct dmap *m);
/* Takes the daemons of a GET_CLUSTER_MAP answer; one older than the map kept is ignored. */
int dmap_set(struct dmap *m, const struct Rdmafs__GetClusterMapResp *resp);
uint64_t dmap_epoch(struct dmap *m);
/*
 * Whether a request named a daemon this map does not have, or found no head
 * of its chain in it (the sender's map is newer): the agent fetches it then
 * without waiting for the next heartbeat.
 */
bool dmap_behind(struct dmap *m);
/* @fn(@arg) is called (without the map's lock) each time the map falls behind. */
void dmap_on_behind(struct dmap *m, void (*fn)(void *arg), void *arg);
/*
 * The epoch a heartbeat reports (HeartbeatReq.known_epoch): the map's, or
 * an older one while a write that skipped a daemon by that older map has
 * not recorded the miss yet (dmap_skip_enter()), so that the service never
 * counts a miss as copied before it is even recorded.
 */
uint64_t dmap_report_epoch(struct dmap *m);
/* A heartbeat sent at @sent_ms (dmap_now_ms()) was answered with a lease of @lease_ms. */
void dmap_lease(struct dmap *m, uint64_t sent_ms, uint32_t lease_ms);
uint64_t dmap_now_ms(void);
/* Whether the lease runs now. */
bool dmap_leased(struct dmap *m);
/* Whether this daemon may serve a replicated chunk's read: leased, and UP or DRAINING. */
bool dmap_may_serve(struct dmap *m);
/* A daemon's DaemonState in the map; 0 for one the map does not have. */
uint32_t dmap_state(struct dmap *m, const uint8_t *uuid);
/* Whether a daemon in @state serves replicated reads: UP or DRAINING. */
bool dmap_state_serves(uint32_t state);
/* A daemon's first address into @out (DMAP_URI_MAX bytes): -ENOENT, -EHOSTUNREACH. */
int dmap_uri(struct dmap *m, const uint8_t *uuid, char *out);
/* Which of @n @members (16-byte UUIDs) is the chain's head: the first UP or DRAINING; -1. */
int dmap_head(struct dmap *m, const ProtobufCBinaryData *members, size_t n);
/*
 * The checks of a replicated write (ChunkWriteReq head, members, missed; each
 * UUID 16 bytes, which the caller checked): a lease, @head the head of
 * @members in this map (@head NULL: a truncate, which has none), and each of
 * @missed DOWN or REMOVED here (a daemon unknown here: -EREMCHG, and the map
 * is behind);
 * else -EREMCHG. Fills @down[i] for each member (whether a chain skips it).
 * When any is down, the skip counts until dmap_skip_leave(@m, *@epoch) and
 * 1 is returned; else 0 (nothing to leave).
 */
int dmap_skip_enter(struct dmap *m, const ProtobufCBinaryData *head,
		    const ProtobufCBinaryData *members, size_t n_members,
		    const ProtobufCBinaryData *missed, size_t n_missed, bool *down,
		    uint64_t *epoch);
void dmap_skip_leave(struct dmap *m, uint64_t epoch);

/* ---- writes another daemon missed (missed.c) ---- */

#define MISSED_MEMBERS_MAX RDMAFS_MAX_REPLICAS

struct missed;

/* A write of chunk @id that daemon @target missed; @members: the chunk's chain. */
struct missed_rec {
	uint8_t target[RDMAFS_UUID_LEN];
	struct store_chunk_id id;
	uint8_t members[MISSED_MEMBERS_MAX][RDMAFS_UUID_LEN];
	unsigned n_members;
	/*
	 * Made by missed_inflight_open() for a write this daemon headed and was
	 * killed in: its copy may hold bytes the others lack. Never dropped for
	 * @target's return: this daemon copies the chunk to @target if it heads
	 * the chain, else hands its copy to the head (CHUNK_RESYNC, resync.c) and
	 * keeps the record until that head's copies are done.
	 */
	bool recovered;
};

/* Opens meta/missed.mdb of the data directory @dir_fd (created on first use). */
int missed_open(int dir_fd, struct missed **out);
void missed_close(struct missed *ms);
/* Records that each of @targets missed a write of @id; on disk when it returns 0. */
int missed_add(struct missed *ms, struct store_chunk_id id, const uint8_t (*targets)[16],
	       unsigned n_targets, const uint8_t (*members)[16], unsigned n_members);
/*
 * missed_add() of records marked recovered: a copy handed over to this
 * daemon, the chain's head (CHUNK_RESYNC). Like a recovered record of its
 * own, each goes to its target from the chain's head only, and is handed on
 * to another head if this daemon stops heading the chain before its copy.
 * An existing record of the same chunk and daemon becomes recovered.
 */
int missed_add_handed(struct missed *ms, struct store_chunk_id id, const uint8_t (*targets)[16],
		      unsigned n_targets, const uint8_t (*members)[16], unsigned n_members);
/* Deletes the record of @r's target and chunk (none: 0). */
int missed_del(struct missed *ms, const struct missed_rec *r);
/* Up to @max records after @after's key (NULL: from the first), in key order. */
int missed_list(struct missed *ms, const struct missed_rec *after, struct missed_rec *out,
		size_t max, size_t *count);
/* The daemons recorded as missing chunk @id, up to @max of them. */
int missed_of_chunk(struct missed *ms, struct store_chunk_id id, uint8_t (*targets)[16], size_t max,
		    size_t *count);
/*
 * How many records are kept, from a count (no lookup); for a moment while a
 * record is added, one more.
 */
uint64_t missed_count(struct missed *ms);
/*
 * The daemons recorded as missing chunk @id that serve reads in map @m (UP or
 * DRAINING), up to MISSED_MEMBERS_MAX of them; no lookup when no record is
 * kept (missed_count()), so the replicated reads may ask. 0 or -errno.
 */
int missed_of_chunk_serving(struct missed *ms, struct dmap *m, struct store_chunk_id id,
			    uint8_t (*targets)[16], size_t *count);

/*
 * Replicated writes in flight at their head (docs/replication.md, "A head
 * killed mid-write"). The head stores a write before the daemons after it
 * do, and records who missed it only once their answer comes: killed in
 * between, it would hold bytes the others lack, and nothing would say so.
 * So from before its store until that record each such write holds a slot
 * of meta/inflight (one per worker, @slot < the count opened), kept through
 * a kill -9 (not through a power loss, which may lose the chunk's unsynced
 * bytes as well). missed_inflight_open(), before the daemon serves, turns
 * every slot a killed run left busy into records (marked recovered) of that
 * chunk as missed by each other member of its chain, on disk, and counts them
 * in *@recovered; then every slot is free. Errors: -errno, or LMDB's.
 */
int missed_inflight_open(struct missed *ms, const uint8_t *self, unsigned slots,
			 unsigned *recovered);
void missed_inflight_begin(struct missed *ms, unsigned slot, struct store_chunk_id id,
			   const uint8_t (*members)[16], unsigned n_members);
void missed_inflight_end(struct missed *ms, unsigned slot);

/* ---- resync (resync.c) ---- */

struct resync;

struct resync_params {
	struct store *store;
	struct missed *missed;
	struct dmap *dmap;
	struct chain *chain;
	struct xprt_pool *pool; /* one buffer is taken for the thread's copies */
	const uint8_t *uuid;	/* this daemon's */
};

/*
 * Starts the thread that copies the chunks of missed writes (missed.c) to
 * their daemons once back (SYNCING or UP in the map), when this daemon is
 * the head of the chunk's chain, once a second or when kicked.
 */
int resync_start(const struct resync_params *p, struct resync **out);
/* A new map came: a pass now. NULL is a no-op. */
void resync_kick(struct resync *rs);
/* Chunks copied, and copies that failed (and are retried), since the start. */
void resync_counts(struct resync *rs, uint64_t *pushed, uint64_t *failed);
/* Stops the thread (its copy in progress ends first) and frees it. NULL is a no-op. */
void resync_stop(struct resync *rs);

/* ---- server (server.c) ---- */

struct server;

struct meta;

struct server_params {
	struct xprt_ctx *ctx;
	struct meta *meta; /* the metadata service this daemon hosts, or NULL */
	struct store *store;
	struct keyring *keyring; /* revoked client keys, or NULL: none */
	const uint8_t *uuid;
	unsigned workers;
	unsigned meta_workers; /* with @meta: its requests' own threads; 0: the workers' */
	unsigned queue_depth;  /* per lane */
	uint32_t max_chunk_size;
	/*
	 * data_sync = batch: a close's CHUNK_COMMIT (on_close) is answered
	 * without a flush, and a thread flushes the store (store_flush())
	 * within this many milliseconds. 0 (data_sync = always, or with
	 * no_threads): every commit flushes before its answer.
	 */
	unsigned data_sync_ms;
	/*
	 * Set up the workers' buffers and io_uring but start no thread: queued
	 * requests then run only in server_run_queued(). For the fuzz target,
	 * which needs each request to run to its end, on its own thread, before
	 * the next one (deterministic, and no hand-off per input).
	 */
	bool no_threads;
	/*
	 * Refuse a replicated write (-EOPNOTSUPP) instead of forwarding it:
	 * the fuzz target's inputs name peers that must not be dialled.
	 */
	bool no_chain;
	/*
	 * The cluster map and the records of missed writes: replicated writes
	 * skip DOWN daemons and record them, and a resync thread copies what
	 * they missed when they are back. NULL (either): every daemon of a
	 * chain is needed, as before degraded writes.
	 */
	struct dmap *dmap;
	struct missed *missed;
};

/*
 * Creates the daemon's buffer pool (registered with the NIC and with each
 * worker's io_uring) and starts the worker threads. Requests come through
 * server_request_cb().
 */
int server_create(const struct server_params *p, struct server **out);
/* Methods counted one by one in struct server_stats (the last one: all others). */
#define SERVER_OPS 10

struct server_op_stats {
	uint32_t method; /* an rdmafs Method; METHOD_UNSPECIFIED: every other method */
	uint64_t count, errors;
	uint64_t bytes; /* payload moved, inline or by one-sided RDMA */
	struct rdmafs_latency latency;
};

/* What the server counted since it started, for DAEMON_STATS and /metrics. */
struct server_stats {
	uint64_t uptime_ns;
	struct server_op_stats ops[SERVER_OPS];
	uint64_t bytes_read, bytes_written;
	uint64_t errors, checksum_errors;
	uint64_t busy; /* requests refused with -EBUSY: the queue was full */
	uint32_t in_flight, queued, queue_capacity, workers;
	uint64_t rdma_bytes_in_flight;
	uint64_t inline_writes, inline_reads;  /* payloads carried in the messages, no RDMA */
	uint64_t resync_pushed, resync_failed; /* resync_counts() */
	uint64_t missed_records;	       /* missed_count() */
	uint64_t map_epoch;		       /* dmap_epoch(): the map this daemon routes by */
	/* run on the thread that received them; of those, handed to a worker (RDMA, O_SYNC, disk)
	 */
	uint64_t run_on_receipt, handed_on;
	uint64_t fetched; /* of those, cold blocks fetched, not handed on (store_fetch_start()) */
	/* data_sync = batch: commits at close answered before their flush, the flushes, failed ones
	 */
	uint64_t commits_deferred, data_flushes, data_flush_errors;
	uint64_t batched; /* metadata changes served at their batch's end (server_batch_end()) */
	uint64_t pending_reads;				      /* store_pending_reads() */
	uint64_t rdma_read_ns, rdma_write_ns;		      /* one-sided transfers */
	uint64_t disk_read_ns, disk_write_ns, disk_commit_ns; /* the chunk store */
	uint32_t connections;				      /* served, past HELLO */
	uint32_t connections_verbs, connections_tcp, connections_handshaking;
	bool capacity_known;
	uint64_t capacity_bytes, free_bytes; /* of the data directory's file system */
	uint64_t chunks;
};

/*
 * Fills @out with the server's counters now, each read atomically (a
 * snapshot taken while workers count, not one instant). Any thread.
 */
void server_stats_get(struct server *srv, struct server_stats *out);
/*
 * The xprt_request_cb to pass to xprt_listen_batched() with
 * server_batch_end() (or to xprt_listen(): then it holds nothing); @arg is
 * the server.
 */
void server_request_cb(struct xprt_req *req, void *arg);
/*
 * The listener's batch end (xprt_listen_batched()): serves together
 * the metadata changes server_request_cb() held since the last one.
 */
void server_batch_end(void *arg);
/*
 * Runs every queued request on the calling thread with worker 0's buffers, as
 * a worker thread would, replies included; returns how many ran. Only for a
 * server created with no_threads (else worker 0's thread owns them).
 */
unsigned server_run_queued(struct server *srv);
/*
 * Refuses new requests (-ESHUTDOWN), finishes the queued ones, joins the
 * workers and releases the pool. Call before xprt_ctx_destroy().
 */
void server_stop(struct server *srv);
/* The daemon's map changed (agent.c): the resync looks at its records now. */
void server_map_changed(void *srv);
/* Frees the server, after xprt_ctx_destroy() (no more callbacks). NULL is a no-op. */
void server_destroy(struct server *srv);

/* ---- cluster membership (agent.c) ---- */

struct agent;

struct agent_params {
	struct xprt_ctx *ctx;
	struct meta *meta;	  /* hosted here: called directly, and ticked */
	const char *metadata_uri; /* else: the metadata service to register with */
	const uint8_t *uuid;
	const char *const *addresses; /* advertised URIs */
	unsigned address_count;
	struct store *store;	       /* for capacity: what it stores, and its file system */
	const struct datadir *datadir; /* the cluster it joined */
	const char *name;	       /* the config's name, or NULL: host:port */
	const char *host, *rack;       /* the config's failure domains, or NULL: undeclared */
	struct keyring *keyring;       /* refreshed when the service's keys_epoch moves, or NULL */
	/*
	 * The daemon's map, refetched when a heartbeat shows a new epoch (then
	 * map_changed(map_arg) is called), its lease, renewed by each heartbeat
	 * answered while the map is the service's, and the missed writes whose
	 * count per daemon each heartbeat reports. NULL: none of it.
	 */
	struct dmap *dmap;
	struct missed *missed;
	void (*map_changed)(void *arg);
	void *map_arg;
};

/*
 * Starts the thread that registers this daemon with the metadata service and
 * heartbeats to it (and, where the service is hosted here, ticks it so silent
 * daemons are marked down). It retries with backoff while the service is
 * unreachable and logs each change of state once.
 */
int agent_start(const struct agent_params *p, struct agent **out);
/* Stops and frees the agent. NULL is a no-op. */
void agent_stop(struct agent *a);
/*
 * This daemon's state in the cluster map as the metadata service last
 * answered it (an rdmafs DaemonState; 0 before it answered once), and
 * whether it is registered now. Any thread.
 */
void agent_state(struct agent *a, uint32_t *state, bool *registered);

/* ---- metrics (metrics.c) ---- */

struct metrics;

/* What /metrics reads; every pointer but @server may be NULL. */
struct metrics_params {
	const char *listen;    /* "HOST:PORT" (port 0: any free port) */
	const char *port_file; /* where to write the bound port, or NULL */
	struct server *server;
	struct meta *meta; /* the metadata service hosted here */
	struct agent *agent;
	const char *name; /* this daemon's name, for a label */
	const char *uuid_text;
};

/*
 * Serves /metrics in Prometheus' text format on @p->listen from a thread of
 * libmicrohttpd's own, and logs "metrics at http://HOST:PORT/metrics" with
 * the port bound. Binding errors are logged in an operator's words.
 * Returns 0, -EADDRINUSE, -EADDRNOTAVAIL, -EACCES, -EINVAL or another errno.
 */
int metrics_start(const struct metrics_params *p, struct metrics **out);
/* Stops serving (waits for a scrape in progress) and frees. NULL is a no-op. */
void metrics_stop(struct metrics *mx);
/*
 * Writes every metric of @p in Prometheus' text exposition format (0.0.4)
 * to @f. Returns 0 or -EIO when a write failed.
 */
int metrics_render(const struct metrics_params *p, FILE *f);

/* The exit status of a daemon the metadata service refused as removed. */
#define DAEMON_EXIT_REMOVED 3

/*
 * True once the metadata service refused this daemon because it was removed
 * from the cluster (-EIDRM). The agent has then logged why and sent the
 * process SIGTERM (unless the metadata service runs here: it keeps serving).
 * NULL gives false.
 */
bool agent_removed(const struct agent *a);

#endif /* RDMAFS_DAEMON_I_H */
