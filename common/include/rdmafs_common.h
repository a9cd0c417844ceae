/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * librdmafs_common: what every program of rdmafs must agree on, written once.
 *
 *  - placement: which daemon of a file's layout holds chunk i, and which
 *    daemons hold its replicas, in chain order (clients place chunks without
 *    asking anyone, so this formula is fixed forever);
 *  - layout arithmetic: the limits of a layout and chunk counts;
 *  - crc32c: the checksum every chunk carries on the wire and on disk;
 *  - errno mapping: what a transport failure is to the caller of a client;
 *  - logging: one helper for daemons, clients and tools;
 *  - latency histograms: the buckets every daemon counts requests in;
 *  - small helpers every program needs: the monotonic clock, the secret file,
 *    client key files.
 *
 * Linked by rdmafs-daemon (and its metadata service), the client library,
 * rdmafs-fuse, rdmafs-copy, rdmafsctl and the tests. It depends on the
 * transport (for its log hook and its error names) and on ISA-L, nothing else.
 *
 * Threads: every function may be called from any thread.
 * Errors: 0 or a negative errno.
 */
#ifndef RDMAFS_COMMON_H
#define RDMAFS_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- placement ------------------------------------------------------------------ */

/* Bytes of a daemon's UUID. */
#define RDMAFS_UUID_LEN 16

/*
 * PLACEMENT_RENDEZVOUS_V1, fixed forever (a change gets a new Placement value):
 *
 *   mix(x)  = the MurmurHash3 64-bit finalizer:
 *             x ^= x >> 33; x *= 0xff51afd7ed558ccd; x ^= x >> 33;
 *             x *= 0xc4ceb9fe1a85ec53; x ^= x >> 33
 *   u0, u1  = the 16 UUID bytes read as two little-endian 64-bit words
 *   score   = mix(mix(mix(mix(mix(seed ^ 0x9e3779b97f4a7c15) ^ ino) ^ index) ^ u0) ^ u1)
 *
 * Chunk @index of inode @ino goes to the daemon of the layout with the highest
 * score; equal scores (never seen in practice) go to the smaller UUID by
 * memcmp, so the answer does not depend on the order of the list. Removing a
 * daemon from the list moves only the chunks it held.
 */

/* The rendezvous score of @uuid (RDMAFS_UUID_LEN bytes) for one chunk. */
uint64_t rdmafs_rendezvous_score(uint64_t seed, uint64_t ino, uint64_t chunk_index,
				 const uint8_t *uuid);

/*
 * A file's layout is the daemons that score highest for the whole file: its
 * rendezvous score at chunk index RDMAFS_LAYOUT_INDEX. The metadata service
 * makes layouts so (meta_choose_layout()), and rdmafsctl's drain and
 * rebalance pick daemons so; rdmafs_rank_cmp() orders them.
 */
#define RDMAFS_LAYOUT_INDEX UINT64_MAX
uint64_t rdmafs_layout_score(uint64_t seed, uint64_t ino, const uint8_t *uuid);

/*
 * The order of daemons by score, best first (qsort's sign): daemon @a of
 * score @sa before daemon @b of score @sb when its score is higher, or equal
 * and its UUID smaller by memcmp, as in chains. 0 only for one daemon.
 */
int rdmafs_rank_cmp(uint64_t sa, const uint8_t *a, uint64_t sb, const uint8_t *b);

/*
 * Places chunk @chunk_index of inode @ino among the @count daemons whose
 * UUIDs are @uuids[0..count-1] (each RDMAFS_UUID_LEN bytes, e.g. the
 * Layout.daemons of the file), with the layout's @seed.
 *
 * Returns the index into @uuids of the chosen daemon, or -EINVAL when @count
 * is 0 or @uuids is NULL.
 */
int rdmafs_place_chunk(const uint8_t *const *uuids, size_t count, uint64_t seed, uint64_t ino,
		       uint64_t chunk_index);

/* Most copies of a chunk a layout may ask for (Layout.replicas). */
#define RDMAFS_MAX_REPLICAS 4

/*
 * The chain of chunk @chunk_index of inode @ino: the @replicas daemons of
 * @uuids[0..count-1] with the highest scores, in score order (ties as
 * rdmafs_place_chunk() breaks them), their indexes into @uuids written to
 * @out[0..n-1], where no two share a failure domain: @domains[i] is daemon
 * i's (Layout.domains), and a daemon scoring below another of its domain is
 * passed over. @domains NULL: every daemon a domain of its own. @out[0],
 * the head, is the best daemon of all, rdmafs_place_chunk()'s answer, so a
 * layout of one replica places every chunk where it always did. A layout
 * gets no more replicas than it has domains: n = min(@replicas, the distinct
 * domains of @domains (rdmafs_domain_count())), and @replicas 0 counts as 1.
 *
 * Returns n, or -EINVAL when @count is 0, @uuids or @out is NULL, or
 * @replicas is above RDMAFS_MAX_REPLICAS.
 */
int rdmafs_place_chain(const uint8_t *const *uuids, const uint32_t *domains, size_t count,
		       uint64_t seed, uint64_t ino, uint64_t chunk_index, uint32_t replicas,
		       int *out);

/* The distinct values of @domains[0..count-1]; @count when @domains is NULL. */
size_t rdmafs_domain_count(const uint32_t *domains, size_t count);

/*
 * The failure domains of daemons whose declared domains are @keys[0..n-1]
 * (a rack, else a host, made distinct by the caller, e.g. "r" or "h" before
 * the name; NULL or "": the daemon alone in its own): numbered from 0 in
 * order of first appearance into @out[0..n-1]. Returns whether two daemons
 * share a domain (false: a layout may carry none). The metadata service
 * numbers a new file's layout so, and a rebalance the list it moves a file to.
 */
bool rdmafs_domains_number(const char *const *keys, size_t n, uint32_t *out);

/*
 * The key rdmafs_domains_number() takes for a daemon that declares @host and
 * @rack (NULL or "": undeclared): "r" and the rack, else "h" and the host,
 * else "" (alone), into @buf of @len bytes (RDMAFS_DOMAIN_KEY_MAX is room
 * for names of 64 bytes). Returns @buf.
 */
#define RDMAFS_DOMAIN_KEY_MAX 66
const char *rdmafs_domain_key(const char *host, const char *rack, char *buf, size_t len);

/*
 * The failure domains of a layout's new daemon list @now[0..n_now-1]
 * (n_now <= RDMAFS_MAX_STRIPE) when it replaces @was[0..n_was-1], whose
 * domains are @was_domains (NULL: each its own): a daemon in both keeps
 * its domain, one new to the list gets a domain of its own; numbered from 0
 * in order of first appearance, into @out[0..n_now-1]. A drain's copies and
 * the metadata service's SET_LAYOUT agree on the new chains by both using
 * this. Returns whether two daemons of @now share a domain (false: the
 * layout may carry no domains).
 */
bool rdmafs_domains_keep(const uint8_t *const *was, const uint32_t *was_domains, size_t n_was,
			 const uint8_t *const *now, size_t n_now, uint32_t *out);

/* ---- layout arithmetic ---------------------------------------------------------- */

/* A layout's chunk size is any size in [MIN, MAX]. */
#define RDMAFS_CHUNK_SIZE_MIN 4096u
#define RDMAFS_CHUNK_SIZE_MAX (64u << 20)
/* Most daemons one layout may name. */
#define RDMAFS_MAX_STRIPE 64

/*
 * Checks the shape of a layout as it comes off the wire: a chunk size in
 * [RDMAFS_CHUNK_SIZE_MIN, RDMAFS_CHUNK_SIZE_MAX] (0 allowed with
 * @zero_chunk_ok, for a service that leaves it to the daemon), 1 to
 * RDMAFS_MAX_STRIPE daemons, a stripe width equal to the daemon count.
 * Returns 0 or -EPROTO.
 */
int rdmafs_layout_check(uint64_t chunk_size, size_t n_daemons, uint64_t stripe_width);

/*
 * Checks a layout's failure domains as they come off the wire
 * (Layout.domains): none, or one per daemon, each below @n_daemons and
 * numbered in order of first appearance. Returns 0 or -EPROTO.
 */
int rdmafs_domains_check(const uint32_t *domains, size_t n_domains, size_t n_daemons);

/* How many chunks hold the first @size bytes of a file: ceil(size / chunk_size). */
static inline uint64_t rdmafs_chunk_count(uint64_t size, uint32_t chunk_size)
{
	return size / chunk_size + (size % chunk_size != 0);
}

/*
 * A number big-endian at @p (8 bytes): the keys of the daemons' LMDB tables
 * hold numbers so, and their byte order is then the numbers' order.
 */
static inline void rdmafs_be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t rdmafs_be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* ---- crc32c --------------------------------------------------------------------- */

/*
 * Standard CRC-32C (Castagnoli, the iSCSI one: "123456789" -> 0xe3069283),
 * computed by ISA-L.
 */
uint32_t rdmafs_crc32c(const void *data, size_t len);

/* The CRC-32C of the bytes behind @crc followed by @len more bytes. */
uint32_t rdmafs_crc32c_extend(uint32_t crc, const void *data, size_t len);

/* ---- errno mapping -------------------------------------------------------------- */

/*
 * A status as a peer sent it: 0 or a negative errno in [-4095, -1]. Anything
 * else (a positive number, a larger magnitude) is -EPROTO.
 */
int rdmafs_status_from_peer(int status);

/*
 * What the caller of a client call sees for a transport failure: a connection
 * that broke (-ECONNRESET, -ENOTCONN, -EPIPE) or a daemon that cannot be
 * reached (-EHOSTUNREACH) is -EIO, as a disk that went away is; every other
 * status is unchanged.
 */
int rdmafs_status_for_caller(int status);

/* ---- logging -------------------------------------------------------------------- */

enum rdmafs_log_level {
	RDMAFS_LOG_ERR = 0,
	RDMAFS_LOG_WARN,
	RDMAFS_LOG_INFO,
	RDMAFS_LOG_DEBUG,
};

/*
 * Names the program in every line and sets the most verbose level written
 * (RDMAFS_LOG_INFO until called). @program must outlive the process's
 * logging (a string literal or argv[0]). Lines go to stderr, as
 * "2026-11-23T17:40:01.123+0000 PROGRAM[PID]: LEVEL: text" (local time,
 * milliseconds, LEVEL one of error, warning, info, debug); when stderr is
 * the journal (JOURNAL_STREAM names the device and inode of fd 2, as systemd
 * sets it) as "<N>text" instead, N the sd-daemon(3) priority (3 error,
 * 4 warning, 6 info, 7 debug), so journald keeps the level and adds the rest.
 * Each call looks at JOURNAL_STREAM and fd 2 again.
 */
void rdmafs_log_init(const char *program, enum rdmafs_log_level max_level);

/* Changes the most verbose level written, the transport's too once hooked. */
void rdmafs_log_set_level(enum rdmafs_log_level max_level);

/*
 * Parses "error", "warning", "info", "debug" (and the short "err", "warn")
 * into *@out. -EINVAL otherwise.
 */
int rdmafs_log_parse_level(const char *text, enum rdmafs_log_level *out);

/* "error", "warning", "info" or "debug", as the lines say it. */
const char *rdmafs_log_level_name(enum rdmafs_log_level level);

/*
 * From now on lines are appended to the file @path (created 0640 if
 * missing), formatted as on a terminal. The file stays open across fork.
 * Returns 0 or the negative errno of open(2); the target is unchanged then.
 */
int rdmafs_log_to_file(const char *path);

/*
 * From now on lines go to syslog(3) (the program's name as ident, LOG_PID,
 * facility LOG_DAEMON; journald on systemd hosts), for a program that went
 * to the background and has no stderr left.
 */
void rdmafs_log_to_syslog(void);

/* Writes one line, whole even when threads log at once. */
void rdmafs_log(enum rdmafs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void rdmafs_vlog(enum rdmafs_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/*
 * Routes libxprt's messages through rdmafs_log() ("xprt: ..."), at the
 * current level and at the levels rdmafs_log_set_level() sets later.
 */
void rdmafs_log_hook_xprt(void);

/* ---- latency histograms ----------------------------------------------------------- */

/*
 * Every request latency the daemons count goes into these buckets: their
 * upper bounds in microseconds, ascending, the same for every operation.
 * DAEMON_STATS sends them (latency_bounds_us) and /metrics prints them as
 * le= in seconds, so rdmafsctl and Prometheus read the same histogram.
 */
#define RDMAFS_LATENCY_BOUNDS 13
extern const uint64_t rdmafs_latency_bounds_us[RDMAFS_LATENCY_BOUNDS];

/*
 * One histogram. Bucket i counts latencies in (bound[i-1], bound[i]]; the
 * last bucket, RDMAFS_LATENCY_BOUNDS, everything above the largest bound.
 * The number of observations is the sum of the buckets. Zero it to start.
 */
struct rdmafs_latency {
	uint64_t buckets[RDMAFS_LATENCY_BOUNDS + 1];
	uint64_t sum_ns;
};

/* Counts one latency of @ns nanoseconds. Atomic: any thread, no lock. */
void rdmafs_latency_record(struct rdmafs_latency *h, uint64_t ns);

/*
 * Copies @h into @out field by field, each read atomically, for a reader
 * while others record: the copy's count (its buckets' sum) always matches
 * its buckets, though sum_ns may hold an observation more or less.
 */
void rdmafs_latency_read(const struct rdmafs_latency *h, struct rdmafs_latency *out);

/* The observations in @h: the sum of its buckets. */
uint64_t rdmafs_latency_count(const struct rdmafs_latency *h);

/* ---- small helpers -------------------------------------------------------------- */

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t rdmafs_now_ms(void);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t rdmafs_now_ns(void);

/* Longest cluster secret, in bytes. */
#define RDMAFS_SECRET_MAX 4095

/*
 * Reads a cluster secret file into malloc()ed *@out (the caller frees it),
 * trailing newlines dropped. As ssh refuses a private key others can read, a
 * file whose mode gives its group or others any access (mode & 077) is
 * refused with -EPERM before a byte is read: whoever can read the secret can
 * join the cluster as root. Returns -EPERM, -ENOENT, -EACCES and the like
 * from opening or reading it, -EINVAL for a secret that is empty or longer
 * than RDMAFS_SECRET_MAX bytes, -ENOMEM.
 */
int rdmafs_read_secret(const char *path, uint8_t **out, size_t *len);

/*
 * Reads up to @room bytes of a file only its owner may access into @buf,
 * *@len getting how many: the secret's and a client key's reader. -EPERM,
 * before a byte is read, when its group or others have any access; else
 * -errno from opening or reading it.
 */
int rdmafs_read_private(const char *path, void *buf, size_t room, size_t *len);

/*
 * Says in one sentence, into @buf (@size bytes), why rdmafs_read_secret(@path)
 * returned @err, for the caller's own error line, e.g. "secret file /s is
 * accessible by others (mode 0644): chmod 600 /s". Every program that reads
 * the secret says it the same way. Returns @buf.
 */
const char *rdmafs_secret_strerror(const char *path, int err, char *buf, size_t size);

/* ---- client keys (keyfile.c) ---------------------------------------------------- */

/*
 * The flags of a client key (struct xprt_key.flags, ClientInfo.flags): what
 * every daemon enforces on a connection that proved such a key. A connection
 * that proved the cluster secret itself has none of these limits and may
 * administer the cluster; a keyed one never may.
 */
#define RDMAFS_KEY_READ_ONLY   0x1u /* EROFS for every change of metadata or chunks */
#define RDMAFS_KEY_ROOT_SQUASH 0x2u /* uid 0 and gid 0 act as RDMAFS_SQUASH_ID (as NFS) */
#define RDMAFS_KEY_FLAGS_ALL   0x3u
#define RDMAFS_SQUASH_ID       65534u

struct xprt_key;

/*
 * "read-only,root-squash", or "none" for 0, into @buf (@size bytes); an
 * unknown bit shows as its number. Returns @buf.
 */
const char *rdmafs_key_flags_text(uint32_t flags, char *buf, size_t size);
/* The reverse: "none" or names joined by commas. -EINVAL for anything else. */
int rdmafs_key_flags_parse(const char *text, uint32_t *flags);

/*
 * Writes @key to a new file @path, mode 0600 (never over an existing file:
 * -EEXIST), as text lines "name = ", "serial = ", "flags = " and "key = "
 * (64 hex digits). Returns 0 or -errno; a failed write leaves no file.
 */
int rdmafs_key_write(const char *path, const struct xprt_key *key);
/*
 * Reads a key file into @out. As the secret, a file whose group or others
 * have any access is refused with -EPERM before a byte is read. -EINVAL for
 * a file that is not a key file (a missing or bad line), -ENOENT and the like
 * from opening or reading it.
 */
int rdmafs_key_read(const char *path, struct xprt_key *out);
/*
 * Reads key file @path only for the client name it holds, into @name (@size
 * bytes), so that a program can check the file before it connects and name
 * the client in its messages. rdmafs_key_read()'s errors.
 */
int rdmafs_key_file_name(const char *path, char *name, size_t size);
/*
 * What a refused connection or call means to a client that used the key of
 * client @key_name (NULL: the secret): "key for client NAME was revoked"
 * (-EKEYREVOKED), a refused key or secret (-EACCES), administration refused
 * to a key (-EPERM); else xprt_strerror(). Returns @buf.
 */
const char *rdmafs_auth_strerror(int err, const char *key_name, char *buf, size_t size);
/* rdmafs_secret_strerror() for key files: one sentence on why @err. Returns @buf. */
const char *rdmafs_key_strerror(const char *path, int err, char *buf, size_t size);

/* ---- flushing in the background ------------------------------------------------------ */

/*
 * A thread that calls @flush(@arg) for a store whose durability is batched.
 * Noted (@periodic false): a call begins within @interval_ms of the first
 * rdmafs_flusher_note() since the last call began, so that whatever was
 * done before a note is flushed by a call that begins after it (none
 * when rdmafs_flusher_sync() covered the notes first); a call that fails
 * is made again @interval_ms later; at rdmafs_flusher_stop(), once more
 * when a note is due. Periodic: a call every @interval_ms, on a
 * fixed schedule, notes or not, and none at stop (the store's close makes
 * its own last flush). @flush returns 0 or -errno; a failure is counted.
 * -errno if the thread cannot start.
 */
struct rdmafs_flusher;
typedef int (*rdmafs_flush_cb)(void *arg);

struct rdmafs_flusher_counts {
	uint64_t notes;	  /* rdmafs_flusher_note() calls */
	uint64_t kicks;	  /* rdmafs_flusher_kick() calls */
	uint64_t flushes; /* calls of @flush */
	uint64_t errors;  /* of those, failed */
};

int rdmafs_flusher_start(unsigned interval_ms, bool periodic, rdmafs_flush_cb flush, void *arg,
			 struct rdmafs_flusher **out);
void rdmafs_flusher_note(struct rdmafs_flusher *f);
/*
 * Asks for a call of @flush at once, in either mode, for a caller that must
 * not wait for it (a writer whose store has grown past a bound). A kick
 * while a call runs is dropped, not queued: a caller whose bound is still
 * passed once that call returned kicks again (so a burst makes no call
 * right after another). A periodic flusher keeps its schedule: the kicked
 * call is an extra one.
 */
void rdmafs_flusher_kick(struct rdmafs_flusher *f);
/*
 * Returns once every note made before the call is covered by a call of
 * @flush that succeeded: at once when one began after the last note, else
 * after calling it on this thread. Until one succeeds, none counts as
 * made: the first sync flushes whatever the store held at start. 0, or the error of that call (the
 * notes stay uncovered). For a caller that must not answer before then.
 */
int rdmafs_flusher_sync(struct rdmafs_flusher *f);
void rdmafs_flusher_counts(struct rdmafs_flusher *f, struct rdmafs_flusher_counts *out);
/* Stops and frees @f (NULL: nothing), after its last flush if one is due. */
void rdmafs_flusher_stop(struct rdmafs_flusher *f);

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_COMMON_H */
