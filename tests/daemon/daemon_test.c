/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon suite: real rdmafs-daemon processes, real clients.
 *
 *   daemon-test DAEMON_BINARY TRANSPORT TEST
 *
 * TRANSPORT is "tcp" or "rdma" (exits 77 without an RDMA device); the same
 * tests run over both. TEST is one of: roundtrip, clients, crash, killpoint
 * (with rdmafs-daemon-killpoint), ringrefuse and receipt (the same), rewrite, indexgrowth, corrupt,
 * enospc, config,
 * malformed, fence, handles, inline. Exit 0 pass, 1 fail, 77 skip, 99 the test could not run
 * (tests/lib/check.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_fs.h"
#include "rdmafs_common.h"
#include "harness.h"
#include "page_cache.h"

#define MiB	  (1u << 20)
#define CHUNK	  MiB
#define MAX_CHUNK MiB /* the daemon's default max_chunk_size */

static unsigned env_scale(const char *name, unsigned def)
{
	const char *v = getenv(name);
	unsigned long n;
	char *end;

	if (!v)
		return def;
	n = strtoul(v, &end, 10);
	return *end || n == 0 || n > 1000000 ? def : (unsigned)n;
}

static char *data_path(const char *name)
{
	static char path[4][300];
	static unsigned next;
	char *p = path[next++ % 4];

	snprintf(p, 300, "%s/%s", harness_dir(), name);
	return p;
}

/* ---- roundtrip: random writes, reads, truncates against a model ---- */

struct model_chunk {
	struct rfs_chunk_id id;
	uint32_t chunk_size;
	uint32_t length;
	uint8_t *data;
};

/* Reads chunk @id whole: it must be @len bytes long and equal to @want. */
static void chunk_check(struct rfs_daemon *c, struct rfs_chunk_id id, const uint8_t *want,
			uint32_t len, const char *what)
{
	uint8_t *buf = malloc(MAX_CHUNK);
	uint32_t bytes = 0, clen = 0;
	int ret;

	REQUIRE(buf, "out of memory");
	ret = rfs_chunk_read(c, id, 0, buf, MAX_CHUNK, &bytes, &clen);
	REQUIRE(ret == 0, "%s: reading chunk %llu/%llu back: %s", what,
		(unsigned long long)id.inode, (unsigned long long)id.index, strerror(-ret));
	REQUIRE(bytes == len && clen == len,
		"%s: chunk %llu/%llu has %u bytes (length %u), want %u", what,
		(unsigned long long)id.inode, (unsigned long long)id.index, bytes, clen, len);
	for (uint32_t i = 0; i < len; i++)
		REQUIRE(buf[i] == want[i],
			"%s: chunk %llu/%llu byte %u is not what was acknowledged", what,
			(unsigned long long)id.inode, (unsigned long long)id.index, i);
	free(buf);
}

static int test_roundtrip(void)
{
	struct model_chunk chunks[3] = {
		{{7, 0}, CHUNK, 0, NULL},
		{{7, 1}, CHUNK, 0, NULL},
		{{8, 5}, 256u << 10, 0, NULL},
	};
	unsigned rounds = env_scale("RDMAFS_TEST_ROUNDS", 400);
	uint8_t *buf = malloc(MiB), *pat = malloc(MiB);
	struct rfs_chunk_state st;
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	uint64_t seed = 0x1234567, removed = 0, freed = 0;
	uint32_t bytes, clen;
	int ret;

	REQUIRE(buf && pat, "malloc");
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	c = client_of(&d, MiB);
	for (unsigned i = 0; i < 3; i++)
		chunks[i].data = calloc(1, CHUNK);

	/* A chunk never written reads as a hole. */
	ret = rfs_chunk_read(c, (struct rfs_chunk_id){99, 99}, 0, buf, 4096, &bytes, &clen);
	REQUIRE(ret == 0 && bytes == 0 && clen == 0, "hole read: %d %u %u", ret, bytes, clen);
	ret = rfs_chunk_stat(c, (struct rfs_chunk_id){99, 99}, &st);
	REQUIRE(ret == 0 && !st.exists, "stat of a missing chunk: %d", ret);

	for (unsigned r = 0; r < rounds; r++) {
		struct model_chunk *m = &chunks[rnd(&seed) % 3];
		unsigned op = (unsigned)(rnd(&seed) % 10);
		uint32_t off, len;

		if (op < 6) {
			/* Sizes from 1 byte to the whole chunk, aligned or not. */
			switch (rnd(&seed) % 4) {
			case 0:
				len = 1 + (uint32_t)(rnd(&seed) % 100);
				break;
			case 1:
				len = 4096u * (1 + (uint32_t)(rnd(&seed) % 16));
				break;
			case 2:
				len = m->chunk_size;
				break;
			default:
				len = 1 + (uint32_t)(rnd(&seed) % m->chunk_size);
				break;
			}
			if (len > m->chunk_size)
				len = m->chunk_size;
			off = (uint32_t)(rnd(&seed) % (m->chunk_size - len + 1));
			if (rnd(&seed) % 2)
				off &= ~4095u;
			fill_pattern(pat, len, r);
			ret = rfs_chunk_write(c, m->id, m->chunk_size, off, pat, len,
					      rnd(&seed) % 8 == 0, &st);
			REQUIRE(ret == 0, "write %u@%u: %s", len, off, strerror(-ret));
			memcpy(m->data + off, pat, len);
			if (off + len > m->length)
				m->length = off + len;
			REQUIRE(st.length == m->length, "write reply length %u, want %u", st.length,
				m->length);
		} else if (op < 9) {
			off = (uint32_t)(rnd(&seed) % (m->chunk_size + 1));
			len = (uint32_t)(rnd(&seed) % (m->chunk_size - off + 1));
			ret = rfs_chunk_read(c, m->id, off, buf, len, &bytes, &clen);
			REQUIRE(ret == 0, "read %u@%u: %s", len, off, strerror(-ret));
			{
				uint32_t want =
					off >= m->length
						? 0
						: (len < m->length - off ? len : m->length - off);

				REQUIRE(bytes == want, "read %u@%u gave %u bytes, want %u", len,
					off, bytes, want);
				REQUIRE(memcmp(buf, m->data + off, bytes) == 0,
					"read %u@%u: content differs", len, off);
			}
		} else {
			uint32_t nl = (uint32_t)(rnd(&seed) % (m->chunk_size + 1));

			ret = rfs_chunk_truncate(c, m->id, nl, &st);
			REQUIRE(ret == 0 && st.length == nl, "truncate to %u: %d", nl, ret);
			if (nl < m->length)
				memset(m->data + nl, 0, m->length - nl);
			m->length = nl;
		}
	}
	for (unsigned i = 0; i < 3; i++) {
		chunk_check(c, chunks[i].id, chunks[i].data, chunks[i].length, "roundtrip");
		ret = rfs_chunk_stat(c, chunks[i].id, &st);
		REQUIRE(ret == 0 && st.exists && st.length == chunks[i].length &&
				st.block_count == (st.length + 4095) / 4096,
			"stat: %d len %u blocks %u", ret, st.length, st.block_count);
	}
	REQUIRE(rfs_chunk_commit(c, &(struct rfs_chunk_sel){.inode = 7, .range = true}) == 0,
		"commit range");
	{
		uint64_t idx = 5;

		REQUIRE(rfs_chunk_commit(c, &(struct rfs_chunk_sel){.inode = 8,
								    .indexes = &idx,
								    .count = 1}) == 0,
			"commit list");
	}
	ret = rfs_daemon_stats(c, &ds);
	REQUIRE(ret == 0 && ds.bytes_written > 0 && ds.ops_total >= rounds && ds.chunks == 3 &&
			ds.capacity_bytes > 0 && ds.errors == 0,
		"stats: %d written %llu ops %llu chunks %llu errors %llu", ret,
		(unsigned long long)ds.bytes_written, (unsigned long long)ds.ops_total,
		(unsigned long long)ds.chunks, (unsigned long long)ds.errors);
	rfs_daemon_close(c);

	/* A clean stop exits 0 and everything is there after the restart. */
	ret = daemon_stop(&d, SIGTERM);
	REQUIRE(WIFEXITED(ret) && WEXITSTATUS(ret) == 0, "SIGTERM exit status %d", ret);
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon restart");
	c = client_of(&d, MiB);
	for (unsigned i = 0; i < 3; i++)
		chunk_check(c, chunks[i].id, chunks[i].data, chunks[i].length, "roundtrip");

	ret = rfs_chunk_remove(c, &(struct rfs_chunk_sel){.inode = 7, .range = true}, &removed,
			       &freed);
	REQUIRE(ret == 0 && removed == 2 && freed == (uint64_t)chunks[0].length + chunks[1].length,
		"remove range: %d removed %llu", ret, (unsigned long long)removed);
	{
		uint64_t idx[2] = {5, 6};

		ret = rfs_chunk_remove(
			c, &(struct rfs_chunk_sel){.inode = 8, .indexes = idx, .count = 2},
			&removed, &freed);
		REQUIRE(ret == 0 && removed == 1, "remove list: %d removed %llu", ret,
			(unsigned long long)removed);
	}
	ret = rfs_chunk_stat(c, chunks[0].id, &st);
	REQUIRE(ret == 0 && !st.exists, "chunk still exists after remove");
	ret = rfs_chunk_read(c, chunks[2].id, 0, buf, 4096, &bytes, &clen);
	REQUIRE(ret == 0 && bytes == 0, "removed chunk reads as a hole");
	rfs_daemon_close(c);
	ret = daemon_stop(&d, SIGTERM);
	REQUIRE(WIFEXITED(ret) && WEXITSTATUS(ret) == 0, "SIGTERM exit status %d", ret);
	for (unsigned i = 0; i < 3; i++)
		free(chunks[i].data);
	free(buf);
	free(pat);
	printf("roundtrip: %u random operations verified over %s\n", rounds, harness_kind);
	return 0;
}

/* ---- clients: several clients at once, own chunks and one shared chunk ---- */

#define CLIENTS 4

struct client_job {
	const struct daemon_proc *d;
	unsigned id;
	unsigned ops;
	char error[256];
};

static void *client_thread(void *arg)
{
	struct client_job *job = arg;
	struct rfs_daemon *c = client_of(job->d, 256u << 10);
	uint8_t *model = calloc(1, 256u << 10), *buf = malloc(256u << 10),
		*pat = malloc(256u << 10);
	/* The shared chunk: each client owns 50000 bytes starting at an odd offset. */
	uint32_t mine = 7 + job->id * 50000u, mine_len = 50000;
	uint8_t *shared = malloc(mine_len);
	struct rfs_chunk_id own = {100 + job->id, 0}, common = {1000, 0};
	uint64_t seed = 77 + job->id;
	uint32_t length = 0, bytes, clen;
	int ret;

	for (unsigned r = 0; r < job->ops && !job->error[0]; r++) {
		uint32_t len = 1 + (uint32_t)(rnd(&seed) % (64u << 10));
		uint32_t off = (uint32_t)(rnd(&seed) % ((256u << 10) - len));

		fill_pattern(pat, len, seed);
		ret = rfs_chunk_write(c, own, 256u << 10, off, pat, len, false, NULL);
		if (ret) {
			snprintf(job->error, sizeof(job->error), "write: %s", strerror(-ret));
			break;
		}
		memcpy(model + off, pat, len);
		if (off + len > length)
			length = off + len;
		fill_pattern(shared, mine_len, seed + 1);
		ret = rfs_chunk_write(c, common, MiB, mine, shared, mine_len, false, NULL);
		if (ret) {
			snprintf(job->error, sizeof(job->error), "shared write: %s",
				 strerror(-ret));
			break;
		}
		ret = rfs_chunk_read(c, own, 0, buf, 256u << 10, &bytes, &clen);
		if (ret || bytes != length || memcmp(buf, model, length)) {
			snprintf(job->error, sizeof(job->error),
				 "read back: %d, %u bytes want %u, or content differs", ret, bytes,
				 length);
			break;
		}
		ret = rfs_chunk_read(c, common, mine, buf, mine_len, &bytes, &clen);
		if (ret || bytes != mine_len || memcmp(buf, shared, mine_len)) {
			snprintf(job->error, sizeof(job->error),
				 "shared chunk read back: %d, %u bytes, or content differs", ret,
				 bytes);
			break;
		}
	}
	rfs_daemon_close(c);
	free(shared);
	free(pat);
	free(buf);
	free(model);
	return NULL;
}

static int test_clients(void)
{
	struct client_job jobs[CLIENTS];
	pthread_t threads[CLIENTS];
	struct daemon_proc d;
	const char *extra[] = {"--workers", "4", NULL};
	unsigned ops = env_scale("RDMAFS_TEST_ROUNDS", 200);

	REQUIRE(daemon_start(&d, data_path("data"), extra) == 0, "daemon start");
	for (unsigned i = 0; i < CLIENTS; i++) {
		jobs[i] = (struct client_job){.d = &d, .id = i, .ops = ops};
		REQUIRE(pthread_create(&threads[i], NULL, client_thread, &jobs[i]) == 0, "thread");
	}
	for (unsigned i = 0; i < CLIENTS; i++) {
		pthread_join(threads[i], NULL);
		REQUIRE(!jobs[i].error[0], "client %u: %s", i, jobs[i].error);
	}
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	printf("clients: %u clients x %u write/read rounds, private and shared chunks\n", CLIENTS,
	       ops);
	return 0;
}

/* ---- crash: kill -9 during a write storm ---- */

#define WRITERS	    4
#define CRASH_CHUNK (256u << 10)

struct writer {
	const struct daemon_proc *d;
	unsigned id;
	volatile bool stop;
	uint64_t acked;	    /* bytes of the stream acknowledged */
	uint64_t committed; /* bytes of the stream made durable by COMMIT */
	unsigned writes;
};

/* Appends stream bytes [pos, pos + len) to inode 500 + id, split at chunk ends. */
static int append(struct rfs_daemon *c, struct writer *w, uint64_t pos, uint32_t len, uint8_t *buf)
{
	while (len) {
		uint64_t index = pos / CRASH_CHUNK;
		uint32_t off = (uint32_t)(pos % CRASH_CHUNK);
		uint32_t n = len < CRASH_CHUNK - off ? len : CRASH_CHUNK - off;
		int ret;

		for (uint32_t i = 0; i < n; i++)
			buf[i] = stream_byte(w->id, pos + i);
		ret = rfs_chunk_write(c, (struct rfs_chunk_id){500 + w->id, index}, CRASH_CHUNK,
				      off, buf, n, false, NULL);
		if (ret)
			return ret;
		pos += n;
		len -= n;
	}
	return 0;
}

static void *writer_thread(void *arg)
{
	struct writer *w = arg;
	struct rfs_daemon *c = client_of(w->d, CRASH_CHUNK);
	uint8_t *buf = malloc(CRASH_CHUNK);
	uint64_t seed = 991 + w->id;

	while (!w->stop) {
		uint32_t len = 1 + (uint32_t)(rnd(&seed) % 30000);

		if (append(c, w, w->acked, len, buf))
			break;
		w->acked += len;
		w->writes++;
		if (w->writes % 4 == 0) {
			uint64_t upto = w->acked;

			if (rfs_chunk_commit(c, &(struct rfs_chunk_sel){.inode = 500 + w->id,
									.range = true}))
				break;
			w->committed = upto;
		}
	}
	free(buf);
	rfs_daemon_close(c);
	return NULL;
}

static void verify_stream(struct rfs_daemon *c, const struct writer *w, uint64_t upto,
			  const char *what)
{
	uint8_t *buf = malloc(CRASH_CHUNK);
	uint32_t bytes, clen;

	for (uint64_t pos = 0; pos < upto; pos += CRASH_CHUNK) {
		uint32_t want = upto - pos < CRASH_CHUNK ? (uint32_t)(upto - pos) : CRASH_CHUNK;
		int ret = rfs_chunk_read(c, (struct rfs_chunk_id){500 + w->id, pos / CRASH_CHUNK},
					 0, buf, want, &bytes, &clen);

		REQUIRE(ret == 0, "writer %u %s bytes at %llu: %s", w->id, what,
			(unsigned long long)pos, strerror(-ret));
		REQUIRE(bytes == want, "writer %u %s chunk at %llu: %u bytes, want %u", w->id, what,
			(unsigned long long)pos, bytes, want);
		for (uint32_t i = 0; i < want; i++)
			REQUIRE(buf[i] == stream_byte(w->id, pos + i),
				"writer %u %s byte %llu differs", w->id, what,
				(unsigned long long)(pos + i));
	}
	free(buf);
}

/*
 * The overwriter rewrites short ranges inside one laid-out chunk (inode 600),
 * the daemon's one-commit path: every byte must read back as the last
 * acknowledged write left it, or as the write in flight at the kill, never
 * as an error.
 */
#define OVER_INODE 600u

struct overwriter {
	const struct daemon_proc *d;
	volatile bool stop;
	bool ready;			 /* the chunk is laid out */
	uint64_t seed;			 /* continues across the cycles */
	uint32_t gen[CRASH_CHUNK];	 /* per byte: the generation acknowledged */
	uint32_t next;			 /* the newest generation sent */
	uint32_t flight_off, flight_len; /* the write not yet acknowledged */
	unsigned writes;
};

static uint8_t over_byte(uint32_t gen, uint32_t pos)
{
	return (uint8_t)(gen * 131u + pos * 7u + (pos >> 9));
}

static int over_write(struct rfs_daemon *c, struct overwriter *o, uint32_t off, uint32_t len,
		      uint8_t *buf)
{
	uint32_t gen = ++o->next;
	int ret;

	for (uint32_t i = 0; i < len; i++)
		buf[i] = over_byte(gen, off + i);
	o->flight_off = off;
	o->flight_len = len;
	ret = rfs_chunk_write(c, (struct rfs_chunk_id){OVER_INODE, 0}, CRASH_CHUNK, off, buf, len,
			      false, NULL);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < len; i++)
		o->gen[off + i] = gen;
	o->flight_len = 0;
	return 0;
}

static void *overwriter_thread(void *arg)
{
	struct overwriter *o = arg;
	struct rfs_daemon *c = client_of(o->d, CRASH_CHUNK);
	uint8_t *buf = malloc(CRASH_CHUNK);

	if (!o->ready) {
		if (over_write(c, o, 0, CRASH_CHUNK, buf) ||
		    rfs_chunk_commit(c,
				     &(struct rfs_chunk_sel){.inode = OVER_INODE, .range = true}))
			goto out;
		o->ready = true;
	}
	while (!o->stop) {
		/* Whole blocks half the time, any range the other half; up to 12 KiB. */
		uint32_t len = 1 + (uint32_t)(rnd(&o->seed) % 12288);
		uint32_t off = (uint32_t)(rnd(&o->seed) % (CRASH_CHUNK - len + 1));

		if (o->writes % 2 == 0) {
			off &= ~4095u;
			len = (len + 4095u) & ~4095u;
		}
		if (over_write(c, o, off, len, buf))
			break;
		o->writes++;
	}
out:
	free(buf);
	rfs_daemon_close(c);
	return NULL;
}

/* Checks the chunk; a byte the write in flight reached is that write's from now on. */
static void verify_overwrites(struct rfs_daemon *c, struct overwriter *o)
{
	uint8_t *buf = malloc(CRASH_CHUNK);
	uint32_t bytes = 0, clen = 0;
	int ret = rfs_chunk_read(c, (struct rfs_chunk_id){OVER_INODE, 0}, 0, buf, CRASH_CHUNK,
				 &bytes, &clen);

	REQUIRE(ret == 0, "overwritten chunk: %s", strerror(-ret));
	REQUIRE(bytes == CRASH_CHUNK, "overwritten chunk: %u bytes, want %u", bytes, CRASH_CHUNK);
	for (uint32_t i = 0; i < CRASH_CHUNK; i++) {
		bool flight = i >= o->flight_off && i - o->flight_off < o->flight_len;

		REQUIRE(buf[i] == over_byte(o->gen[i], i) ||
				(flight && buf[i] == over_byte(o->next, i)),
			"overwritten chunk byte %u is neither the acknowledged generation %u%s", i,
			o->gen[i], flight ? " nor the one in flight" : "");
		if (flight)
			o->gen[i] = buf[i] == over_byte(o->gen[i], i) ? o->gen[i] : o->next;
	}
	o->flight_len = 0;
	free(buf);
}

static int test_crash(void)
{
	struct writer writers[WRITERS];
	struct overwriter *over = calloc(1, sizeof(*over));
	pthread_t threads[WRITERS], over_thread;
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	unsigned cycles = env_scale("RDMAFS_TEST_CRASH_CYCLES", 3);
	uint64_t total_committed = 0;

	memset(writers, 0, sizeof(writers));
	REQUIRE(over, "out of memory");
	over->seed = 4099;
	for (unsigned cycle = 0; cycle < cycles; cycle++) {
		REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
		/* Everything from before the last crash must still be there. */
		if (cycle) {
			c = client_of(&d, CRASH_CHUNK);
			for (unsigned i = 0; i < WRITERS; i++)
				verify_stream(c, &writers[i], writers[i].committed, "committed");
			if (over->ready)
				verify_overwrites(c, over);
			rfs_daemon_close(c);
		}
		for (unsigned i = 0; i < WRITERS; i++) {
			/* Each cycle continues the stream where the commits left it. */
			writers[i].d = &d;
			writers[i].id = i;
			writers[i].stop = false;
			writers[i].acked = writers[i].committed;
			REQUIRE(pthread_create(&threads[i], NULL, writer_thread, &writers[i]) == 0,
				"thread");
		}
		over->d = &d;
		over->stop = false;
		REQUIRE(pthread_create(&over_thread, NULL, overwriter_thread, over) == 0, "thread");
		usleep(700000 + 300000 * cycle);
		daemon_stop(&d, SIGKILL);
		for (unsigned i = 0; i < WRITERS; i++) {
			writers[i].stop = true;
			pthread_join(threads[i], NULL);
		}
		over->stop = true;
		pthread_join(over_thread, NULL);
	}
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	c = client_of(&d, CRASH_CHUNK);
	for (unsigned i = 0; i < WRITERS; i++) {
		/* kill -9 keeps the page cache: acknowledged writes survive too. */
		verify_stream(c, &writers[i], writers[i].committed, "committed");
		verify_stream(c, &writers[i], writers[i].acked, "acknowledged");
		total_committed += writers[i].committed;
		REQUIRE(writers[i].committed > 0, "writer %u never committed", i);
	}
	REQUIRE(over->ready && over->writes > 0, "the overwriter never wrote");
	verify_overwrites(c, over);
	REQUIRE(rfs_daemon_stats(c, &ds) == 0 && ds.checksum_errors == 0,
		"checksum errors after the crashes: %llu", (unsigned long long)ds.checksum_errors);
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	printf("crash: %u kill -9 cycles, %llu committed bytes intact and verified, %u "
	       "overwrites\n",
	       cycles, (unsigned long long)total_committed, over->writes);
	free(over);
	return 0;
}

/* ---- killpoint: kill -9 between a write's data and its metadata ---- */

/* Starts a daemon on @dir with @name=@value in its environment, and a client of it. */
static struct rfs_daemon *start_with_env(struct daemon_proc *d, const char *dir, const char *name,
					 const char *value)
{
	setenv(name, value, 1);
	REQUIRE(daemon_start(d, dir, NULL) == 0, "daemon start (%s=%s)", name, value);
	unsetenv(name);
	return client_of(d, MAX_CHUNK);
}

#define KP_INODE 700u
#define KP_LEN	 (64u << 10)

static int kp_write(struct rfs_daemon *c, uint32_t gen, uint32_t off, uint32_t len, uint8_t *model)
{
	uint8_t *buf = malloc(len);
	int ret;

	for (uint32_t i = 0; i < len; i++)
		buf[i] = over_byte(gen, off + i);
	ret = rfs_chunk_write(c, (struct rfs_chunk_id){KP_INODE, 0}, MAX_CHUNK, off, buf, len,
			      false, NULL);
	if (ret == 0 && model)
		memcpy(model + off, buf, len);
	free(buf);
	return ret;
}

/*
 * store.c's contract: a short overwrite this daemon completed through the
 * chunk file it keeps open leaves pending CRCs that the chunk's next change
 * takes unread, and they are right; one written before a restart is read
 * back. @gen: the last generation written; @model: the chunk as it is.
 */
static void kp_settle_unread(struct daemon_proc *d, uint8_t *model, uint32_t gen)
{
	struct rfs_daemon_stats ds;
	struct rfs_daemon *c;
	uint64_t before;
	int ret;

	REQUIRE(daemon_start(d, data_path("kp"), NULL) == 0, "daemon start");
	c = client_of(d, MAX_CHUNK);
	/* opens the file and settles what the last daemon left */
	REQUIRE(kp_write(c, ++gen, 100, 10, model) == 0, "a first short overwrite");
	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	before = ds.pending_reads;
	/* one block, blocks across, the same block again, the chunk's last block */
	for (unsigned i = 0; i < 40; i++) {
		static const uint32_t offs[] = {8192, 10000, 8200, KP_LEN - 3000, 0};
		static const uint32_t lens[] = {4096, 9000, 50, 3000, 20000};

		REQUIRE(kp_write(c, ++gen, offs[i % 5], lens[i % 5], model) == 0,
			"short overwrite %u", i);
	}
	/* a truncate settles the last one too, every block checked against its CRC */
	ret = rfs_chunk_truncate(c, (struct rfs_chunk_id){KP_INODE, 0}, KP_LEN, NULL);
	REQUIRE(ret == 0, "truncate to the chunk's length: %s", strerror(-ret));
	chunk_check(c, (struct rfs_chunk_id){KP_INODE, 0}, model, KP_LEN,
		    "40 short overwrites settled unread");
	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	CHECK(ds.pending_reads == before && ds.checksum_errors == 0,
	      "40 short overwrites settled through the open file: %llu blocks read back, "
	      "%llu checksum errors",
	      (unsigned long long)(ds.pending_reads - before),
	      (unsigned long long)ds.checksum_errors);
	/* a clean stop leaves the last overwrite's CRCs pending: the next daemon reads them */
	REQUIRE(kp_write(c, ++gen, 12300, 700, model) == 0, "an overwrite before the stop");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(d, SIGTERM)) == 0, "clean stop");
	REQUIRE(daemon_start(d, data_path("kp"), NULL) == 0, "daemon start");
	c = client_of(d, MAX_CHUNK);
	REQUIRE(kp_write(c, ++gen, 40000, 100, model) == 0, "the next write");
	chunk_check(c, (struct rfs_chunk_id){KP_INODE, 0}, model, KP_LEN,
		    "an overwrite settled after a restart");
	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	CHECK(ds.pending_reads == 1, "after a restart the pending block was read back: %llu",
	      (unsigned long long)ds.pending_reads);
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(d, SIGTERM)) == 0, "clean stop");
	printf("killpoint: 40 short overwrites settled unread; one left by a stop read back\n");
}

/*
 * store.c's contract: a write killed between its pending CRCs and its data,
 * or between its data and its last commit, leaves each block verifying with
 * the content it has (old before the data, new after), the chunk's length as
 * it was, and the next write settles it. rdmafs-daemon-killpoint dies at the
 * store's first pwrite(2) of its life, just before or just after it.
 */
static int test_killpoint(void)
{
	static const struct {
		const char *what;
		uint32_t off, len;
	} cases[] = {
		{"one whole block inside the chunk", 8192, 4096},
		{"a range across blocks, unaligned", 10000, 5000},
		{"a range that grows the chunk", KP_LEN - 6000, 12000},
	};
	uint8_t *model = calloc(1, MAX_CHUNK);
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	uint32_t gen = 1, len = KP_LEN;
	char what[160];

	REQUIRE(model, "out of memory");
	REQUIRE(daemon_start(&d, data_path("kp"), NULL) == 0, "daemon start");
	c = client_of(&d, MAX_CHUNK);
	REQUIRE(kp_write(c, gen, 0, KP_LEN, model) == 0, "laying the chunk out");
	REQUIRE(rfs_chunk_commit(c, &(struct rfs_chunk_sel){.inode = KP_INODE, .range = true}) == 0,
		"commit");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int after = 0; after <= 1; after++) {
			uint32_t off = cases[i].off, n = cases[i].len;

			snprintf(what, sizeof(what), "%s, killed %s its data", cases[i].what,
				 after ? "after" : "before");
			c = start_with_env(&d, data_path("kp"), "RDMAFS_TEST_KILL_PWRITE",
					   after ? "after:1" : "before:1");
			REQUIRE(kp_write(c, ++gen, off, n, NULL) != 0,
				"%s: the write was answered, the daemon did not die", what);
			rfs_daemon_close(c);
			daemon_stop(&d, SIGKILL);

			/* The page cache keeps what the killed write put there, within the length.
			 */
			if (after)
				for (uint32_t b = off; b < off + n && b < len; b++)
					model[b] = over_byte(gen, b);
			REQUIRE(daemon_start(&d, data_path("kp"), NULL) == 0, "daemon start");
			c = client_of(&d, MAX_CHUNK);
			chunk_check(c, (struct rfs_chunk_id){KP_INODE, 0}, model, len, what);
			/*
			 * The next write settles the CRCs the killed one left,
			 * reading its blocks back: this daemon never saw it complete.
			 */
			REQUIRE(kp_write(c, ++gen, 30000 + 100 * i, 100, model) == 0,
				"%s: the next write", what);
			REQUIRE(rfs_daemon_stats(c, &ds) == 0 && ds.pending_reads > 0,
				"%s: the next write took the pending CRCs unread (%llu blocks "
				"read)",
				what, (unsigned long long)ds.pending_reads);
			snprintf(what, sizeof(what), "%s, killed %s its data, written again",
				 cases[i].what, after ? "after" : "before");
			chunk_check(c, (struct rfs_chunk_id){KP_INODE, 0}, model, len, what);
			REQUIRE(rfs_daemon_stats(c, &ds) == 0 && ds.checksum_errors == 0,
				"%s: checksum errors %llu", what,
				(unsigned long long)ds.checksum_errors);
			rfs_daemon_close(c);
			REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
		}
	}
	printf("killpoint: %u writes killed before and after their data, every block verified\n",
	       (unsigned)(2 * sizeof(cases) / sizeof(cases[0])));
	kp_settle_unread(&d, model, gen);
	free(model);
	return 0;
}

/* ---- powerloss: a COMMIT survives the loss of everything not flushed ---- */

#define PL_INODE 0x9au

/* Copies file @from over @to, whole. */
static void copy_file(const char *from, const char *to)
{
	static char buf[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n = 0;

	REQUIRE(in >= 0 && out >= 0, "copy %s to %s: %s", from, to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		REQUIRE(write(out, buf, (size_t)n) == n, "copy to %s: %s", to, strerror(errno));
	REQUIRE(n == 0 && fsync(out) == 0, "copy %s: %s", from, strerror(errno));
	close(in);
	close(out);
}

/*
 * store.c: COMMIT makes the chunks and their CRCs durable with one round of
 * flushes, of the chunk files and of the index's journal, never of the
 * index. The power loss is made as the disk would be left by one right
 * after the COMMIT answered, at its worst: the index's data file as at its
 * last flush (the daemon's open), the journal as long as when the COMMIT
 * answered (a write after it is lost), the chunk files as fdatasynced, and
 * another boot (rdmafs-daemon-killpoint's RDMAFS_TEST_BOOT_ID), so that the
 * index's guard restores that flush. Every committed byte must read back,
 * verified: small writes, large ones, an overwrite inside a chunk.
 */
static int test_powerloss(void)
{
	uint8_t *model[3], *buf = malloc(MAX_CHUNK);
	const uint32_t lens[3] = {4096, 300000, MAX_CHUNK};
	char mdb[512], flushed[512], journal[512];
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	struct stat sb;
	off_t committed;

	REQUIRE(buf, "out of memory");
	/* an index that is not empty: a chunk committed, and a clean stop */
	fill_pattern(buf, 4096, 89);
	c = start_with_env(&d, data_path("pl"), "RDMAFS_TEST_BOOT_ID", "rdmafs-test-boot-A");
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){PL_INODE, 9, 0}, MAX_CHUNK, 0, buf, 4096,
				false, NULL) == 0 &&
			rfs_chunk_commit(
				c, &(struct rfs_chunk_sel){.inode = PL_INODE, .range = true}) == 0,
		"the first chunk");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");

	c = start_with_env(&d, data_path("pl"), "RDMAFS_TEST_BOOT_ID", "rdmafs-test-boot-A");
	snprintf(mdb, sizeof(mdb), "%s/meta/data.mdb", d.data_dir);
	snprintf(journal, sizeof(journal), "%s/meta/index.journal", d.data_dir);
	snprintf(flushed, sizeof(flushed), "%s/../pl-index-flushed.mdb", d.data_dir);
	/* the index as the open flushed it: nothing was written since */
	copy_file(mdb, flushed);

	for (uint64_t i = 0; i < 3; i++) {
		model[i] = calloc(1, MAX_CHUNK);
		REQUIRE(model[i], "out of memory");
		fill_pattern(model[i], lens[i], 90 + (unsigned)i);
		REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){PL_INODE, i, 0}, MAX_CHUNK, 0,
					model[i], lens[i], false, NULL) == 0,
			"write chunk %llu", (unsigned long long)i);
	}
	/* an overwrite inside the large chunk: pending CRCs, then settled */
	fill_pattern(model[2] + 5000, 20000, 99);
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){PL_INODE, 2, 0}, MAX_CHUNK, 5000,
				model[2] + 5000, 20000, false, NULL) == 0,
		"overwrite");
	REQUIRE(rfs_chunk_commit(c, &(struct rfs_chunk_sel){.inode = PL_INODE, .range = true}) == 0,
		"commit");
	REQUIRE(stat(journal, &sb) == 0, "stat %s: %s", journal, strerror(errno));
	committed = sb.st_size;
	CHECK(committed > 0, "the journal holds the committed changes (%lld bytes)",
	      (long long)committed);
	/* written after the COMMIT: nothing promised it */
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){PL_INODE, 3, 0}, MAX_CHUNK, 0, model[0],
				4096, false, NULL) == 0,
		"a write after the commit");
	rfs_daemon_close(c);
	daemon_stop(&d, SIGKILL);

	/* the power loss: what was not flushed is gone */
	copy_file(flushed, mdb);
	REQUIRE(truncate(journal, committed) == 0, "truncate %s: %s", journal, strerror(errno));

	c = start_with_env(&d, data_path("pl"), "RDMAFS_TEST_BOOT_ID", "rdmafs-test-boot-B");
	for (uint64_t i = 0; i < 3; i++) {
		char what[64];

		snprintf(what, sizeof(what), "committed chunk %llu after the power loss",
			 (unsigned long long)i);
		chunk_check(c, (struct rfs_chunk_id){PL_INODE, i, 0}, model[i], lens[i], what);
	}
	chunk_check(c, (struct rfs_chunk_id){PL_INODE, 9, 0}, buf, 4096,
		    "the chunk committed before the last flush");
	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	CHECK(ds.checksum_errors == 0, "no checksum errors: %llu",
	      (unsigned long long)ds.checksum_errors);
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	for (int i = 0; i < 3; i++)
		free(model[i]);
	free(buf);
	printf("powerloss: 3 committed chunks whole and verified after the index lost every "
	       "unflushed page\n");
	return 0;
}

/* ---- ringrefuse: io_uring submissions the kernel refuses ---- */

#define RR_INODE 710u
#define RR_LEN	 (64u << 10) /* long enough for O_DIRECT: the store's ring writes it */

static int rr_write(struct rfs_daemon *c, uint64_t index, const uint8_t *data)
{
	return rfs_chunk_write(c, (struct rfs_chunk_id){RR_INODE, index}, MAX_CHUNK, 0, data,
			       RR_LEN, false, NULL);
}

static void rr_check(struct rfs_daemon *c, uint64_t index, const uint8_t *want, const char *what)
{
	chunk_check(c, (struct rfs_chunk_id){RR_INODE, index}, want, RR_LEN, what);
}

/*
 * store.c's ring discipline: a submission the kernel refuses is retried; if
 * the refusal lasts, the request fails and never runs later, when its buffer
 * holds the next request's bytes. rdmafs-daemon-killpoint refuses the
 * submissions RDMAFS_TEST_RING_REFUSE names.
 */
static int test_ringrefuse(void)
{
	uint8_t *model = malloc(RR_LEN), *next = malloc(RR_LEN), *other = malloc(RR_LEN);
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	int ret;

	REQUIRE(model && next && other, "out of memory");
	fill_pattern(model, RR_LEN, 71);
	REQUIRE(daemon_start(&d, data_path("rr"), NULL) == 0, "daemon start");
	c = client_of(&d, MAX_CHUNK);
	REQUIRE(rr_write(c, 0, model) == 0, "laying the chunk out");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");

	/* One refusal: the store submits again and the write goes through. */
	c = start_with_env(&d, data_path("rr"), "RDMAFS_TEST_RING_REFUSE", "1:1");
	fill_pattern(model, RR_LEN, 72);
	ret = rr_write(c, 0, model);
	REQUIRE(ret == 0, "a write whose first submission was refused: %s", strerror(-ret));
	rr_check(c, 0, model, "one refusal");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");

	/*
	 * Refusals that last: the write is refused (or, sent again by the client
	 * later, done), and what it left queued never lands over the chunk, not
	 * even when the next request's bytes sit in the same buffer.
	 */
	c = start_with_env(&d, data_path("rr"), "RDMAFS_TEST_RING_REFUSE", "1:5");
	fill_pattern(next, RR_LEN, 73);
	if (rr_write(c, 0, next) == 0)
		memcpy(model, next, RR_LEN);
	fill_pattern(other, RR_LEN, 74);
	ret = rr_write(c, 1, other);
	REQUIRE(ret == 0, "the write after the refusals: %s", strerror(-ret));
	rr_check(c, 0, model, "lasting refusals");
	rr_check(c, 1, other, "the write after the refusals");
	REQUIRE(rfs_daemon_stats(c, &ds) == 0 && ds.checksum_errors == 0, "checksum errors %llu",
		(unsigned long long)ds.checksum_errors);
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	free(model);
	free(next);
	free(other);
	printf("ringrefuse: a refused submission retried, lasting refusals fail the request"
	       " and leave nothing queued\n");
	return 0;
}

/* ---- rewrite: chunks removed and written again, more than the store keeps open ---- */

#define RW_INODE  900u
#define RW_CHUNKS 300u /* more than the daemon below keeps open (64) */
#define RW_NOFILE 256u /* its open files limit: a quarter is store.c's cache, FD_CACHE_MIN */
#define RW_LEN	  4096u

/* Reads the chunk file as the daemon's data directory holds it. */
static void rewrite_check_file(uint32_t index, const uint8_t *want, const char *what)
{
	char path[400];
	uint8_t got[RW_LEN];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/chunks/%016llx/%016llx", data_path("rw"),
		 (unsigned long long)RW_INODE, (unsigned long long)index);
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0, "%s: chunk %u is not in the data directory (%s): %s", what, index, path,
		strerror(errno));
	n = pread(fd, got, RW_LEN, 0);
	REQUIRE(n >= 0, "%s: reading %s: %s", what, path, strerror(errno));
	REQUIRE(n == RW_LEN && memcmp(got, want, RW_LEN) == 0,
		"%s: chunk %u in the data directory is not the last write (%zd bytes)", what, index,
		n);
	close(fd);
}

/* Sets @path's access time to 1 s past the epoch, its modification time as it is. */
static void atime_set_old(const char *path)
{
	struct timespec ts[2] = {{.tv_sec = 1}, {.tv_nsec = UTIME_OMIT}};

	if (utimensat(AT_FDCWD, path, ts, 0))
		check_error("utimensat %s: %s", path, strerror(errno));
}

static time_t atime_of(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		check_error("stat %s: %s", path, strerror(errno));
	return st.st_atim.tv_sec;
}

/*
 * Whether a plain read of a file in @dir updates its access time once it is
 * older than the modification time (the relatime rule), as the check of
 * test_rewrite() needs; false on a noatime mount, where it tells nothing.
 */
static bool reads_touch_atime(const char *dir)
{
	static int known = -1;
	char path[400], c = 'x';
	bool touched;
	int fd;

	if (known >= 0)
		return known;
	snprintf(path, sizeof(path), "%s/atime-probe", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || pwrite(fd, &c, 1, 0) != 1)
		check_error("atime probe %s: %s", path, strerror(errno));
	close(fd);
	atime_set_old(path);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, &c, 1, 0) != 1)
		check_error("atime probe %s: %s", path, strerror(errno));
	close(fd);
	touched = atime_of(path) != 1;
	unlink(path);
	known = touched;
	return touched;
}

/*
 * The chunk's access time, set far back, as a read by the daemon left it:
 * store.c opens chunk files O_NOATIME, so a read dirties no inode.
 */
static void rewrite_check_atime(struct rfs_daemon *c, uint32_t index)
{
	char path[400];
	uint8_t got[RW_LEN];
	uint32_t bytes, clen;
	int ret;

	if (!reads_touch_atime(harness_dir())) {
		printf("rewrite: access times not checked: this file system does not update them"
		       " on a read\n");
		return;
	}
	snprintf(path, sizeof(path), "%s/chunks/%016llx/%016llx", data_path("rw"),
		 (unsigned long long)RW_INODE, (unsigned long long)index);
	atime_set_old(path);
	ret = rfs_chunk_read(c, (struct rfs_chunk_id){RW_INODE, index}, 0, got, RW_LEN, &bytes,
			     &clen);
	REQUIRE(ret == 0, "chunk %u read: %s", index, strerror(-ret));
	REQUIRE(atime_of(path) == 1, "a read by the daemon updated chunk %u's access time", index);
}

/* Whether process @pid holds capability @cap in its effective set (/proc/PID/status). */
static bool proc_has_cap(pid_t pid, unsigned cap)
{
	char path[64], line[256];
	unsigned long long eff = ~0ull;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		check_error("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff >> cap & 1;
}

/* Whether @prog is an executable file in a directory of PATH. */
static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char dir[PATH_MAX], file[PATH_MAX + 64];

	while (path && *path) {
		size_t len = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s", (int)len, path);
		snprintf(file, sizeof(file), "%s/%s", len ? dir : ".", prog);
		if (access(file, X_OK) == 0)
			return true;
		path += len + (path[len] == ':');
	}
	return false;
}

/* Whether a line of @d's log holds @what (the test's own trouble reading it: ERROR). */
static bool log_says(const struct daemon_proc *d, const char *what)
{
	char line[512];
	bool said = false;
	FILE *log = fopen(d->log_path, "r");

	if (!log)
		check_error("%s: %s", d->log_path, strerror(errno));
	while (!said && fgets(line, sizeof(line), log))
		said = strstr(line, what) != NULL;
	fclose(log);
	return said;
}

/*
 * store.c opens chunk files O_NOATIME, which only their owner (or
 * CAP_FOWNER) may: a chunk file another user owns (a data directory copied
 * in by hand) is opened without it, and reads back. The daemon is started
 * without CAP_FOWNER (setpriv(1) drops it from its bounding and inheritable
 * sets; this process keeps its own: over verbs a process whose credentials
 * change can no longer use the devices it opened), after chunk @index's file
 * was given to nobody.
 */
static void rewrite_check_foreign(struct daemon_proc *d, uint32_t index, const uint8_t *want)
{
	static const char *const drop_fowner[] = {"setpriv", "--bounding-set=-fowner",
						  "--inh-caps=-fowner", "--", NULL};
	char path[400];
	uint8_t got[RW_LEN];
	uint32_t bytes, clen;
	struct rfs_daemon *c;
	int ret;

	if (geteuid() != 0 || !in_path("setpriv")) {
		printf("rewrite: a chunk file of another user not checked: %s\n",
		       geteuid() ? "giving it away needs root" : "no setpriv(1) in PATH");
		return;
	}
	snprintf(path, sizeof(path), "%s/chunks/%016llx/%016llx", data_path("rw"),
		 (unsigned long long)RW_INODE, (unsigned long long)index);
	if (chown(path, 65534, 65534))
		check_error("chown %s: %s", path, strerror(errno));
	atime_set_old(path);
	harness_daemon_wrap = drop_fowner;
	ret = daemon_start(d, data_path("rw"), NULL);
	harness_daemon_wrap = NULL;
	REQUIRE(ret == 0, "daemon start through setpriv");
	if (proc_has_cap(d->pid, CAP_FOWNER)) {
		printf("rewrite: a chunk file of another user not checked: the daemon kept"
		       " CAP_FOWNER (inherited)\n");
		daemon_stop(d, SIGTERM);
		return;
	}
	c = client_of(d, MAX_CHUNK);
	ret = rfs_chunk_read(c, (struct rfs_chunk_id){RW_INODE, index}, 0, got, RW_LEN, &bytes,
			     &clen);
	REQUIRE(ret == 0 && bytes == RW_LEN && memcmp(got, want, RW_LEN) == 0,
		"a chunk file nobody owns, read by a daemon without CAP_FOWNER: %s",
		ret ? strerror(-ret) : "wrong bytes");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(d, SIGTERM)) == 0, "clean stop");
	/* opened without O_NOATIME: the read kept the access time, where reads do */
	if (reads_touch_atime(harness_dir()))
		CHECK(atime_of(path) != 1,
		      "the read of chunk %u left its access time alone:"
		      " was it opened O_NOATIME?",
		      index);
	CHECK(log_says(d, "refuse O_NOATIME"),
	      "the daemon's log says chunk files refuse O_NOATIME");
	printf("rewrite: a chunk file nobody owns reads back through a daemon without"
	       " CAP_FOWNER, opened without O_NOATIME\n");
}

/*
 * store.c keeps chunk files open: a chunk removed and written again must land
 * in the new file (the daemon's data directory shows it), not in the unlinked
 * one, for chunks still open and chunks evicted alike.
 */
static int test_rewrite(void)
{
	struct rfs_chunk_sel sel = {.inode = RW_INODE, .range = true};
	uint8_t buf[RW_LEN], got[RW_LEN];
	struct daemon_proc d;
	struct rfs_daemon *c;
	uint64_t removed, freed;
	uint32_t bytes, clen;
	char what[64];
	int ret;

	struct rlimit small = {RW_NOFILE, RW_NOFILE};

	/*
	 * The daemon inherits the limit, soft and hard, so its cache cannot grow
	 * past 64 files. This process (one test) keeps it: only a privileged one
	 * could raise its hard limit again.
	 */
	if (setrlimit(RLIMIT_NOFILE, &small))
		check_error("lowering the open files limit: %s", strerror(errno));
	ret = daemon_start(&d, data_path("rw"), NULL);
	REQUIRE(ret == 0, "daemon start");
	c = client_of(&d, MAX_CHUNK);
	for (unsigned round = 0; round < 3; round++) {
		snprintf(what, sizeof(what), "round %u", round);
		/* Every other round backwards: the chunks open last come first. */
		for (uint32_t k = 0; k < RW_CHUNKS; k++) {
			uint32_t i = round % 2 ? RW_CHUNKS - 1 - k : k;

			fill_pattern(buf, RW_LEN, round * 1000003ull + i);
			ret = rfs_chunk_write(c, (struct rfs_chunk_id){RW_INODE, i}, MAX_CHUNK, 0,
					      buf, RW_LEN, false, NULL);
			REQUIRE(ret == 0, "%s: write chunk %u: %s", what, i, strerror(-ret));
			ret = rfs_chunk_read(c, (struct rfs_chunk_id){RW_INODE, i}, 0, got, RW_LEN,
					     &bytes, &clen);
			REQUIRE(ret == 0 && bytes == RW_LEN && memcmp(got, buf, RW_LEN) == 0,
				"%s: chunk %u read back wrong (%s)", what, i, strerror(-ret));
		}
		for (uint32_t i = 0; i < RW_CHUNKS; i++) {
			fill_pattern(buf, RW_LEN, round * 1000003ull + i);
			rewrite_check_file(i, buf, what);
		}
		/* one open still, one evicted and opened again */
		rewrite_check_atime(c, round % 2 ? 0 : RW_CHUNKS - 1);
		rewrite_check_atime(c, round % 2 ? RW_CHUNKS - 1 : 0);
		ret = rfs_chunk_remove(c, &sel, &removed, &freed);
		REQUIRE(ret == 0 && removed == RW_CHUNKS, "%s: remove: %s, %llu removed", what,
			strerror(-ret), (unsigned long long)removed);
	}
	fill_pattern(buf, RW_LEN, 77);
	ret = rfs_chunk_write(c, (struct rfs_chunk_id){RW_INODE, 0}, MAX_CHUNK, 0, buf, RW_LEN,
			      false, NULL);
	REQUIRE(ret == 0, "write chunk 0: %s", strerror(-ret));
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	rewrite_check_foreign(&d, 0, buf);
	printf("rewrite: 3 rounds of %u chunks written, checked in the data directory, removed\n",
	       RW_CHUNKS);
	return 0;
}

/* ---- corrupt: damaged data on disk and on the wire ---- */

/* A raw connection with one registered buffer, to send hand-made requests. */
struct raw {
	struct xprt_ctx *ctx;
	struct xprt_pool *pool;
	struct xprt_conn *conn;
	struct xprt_buf *buf;
};

static void raw_open(struct raw *r, const struct daemon_proc *d)
{
	struct xprt_options o;
	int ret;

	xprt_options_init(&o);
	o.secret = SECRET;
	o.secret_len = strlen(SECRET);
	o.name = "daemon-test-raw";
	REQUIRE(xprt_ctx_create(&o, &r->ctx) == 0, "ctx");
	REQUIRE(xprt_pool_create(r->ctx, MiB, 1, XPRT_ACCESS_REMOTE_READ | XPRT_ACCESS_REMOTE_WRITE,
				 &r->pool) == 0,
		"pool");
	REQUIRE(xprt_pool_get(r->pool, 0, &r->buf) == 0, "buf");
	ret = xprt_connect(r->ctx, d->uri, &r->conn);
	REQUIRE(ret == 0, "connect: %s", xprt_strerror(ret));
}

static void raw_reconnect(struct raw *r, const struct daemon_proc *d)
{
	int ret;

	xprt_conn_close(r->conn);
	ret = xprt_connect(r->ctx, d->uri, &r->conn);
	REQUIRE(ret == 0, "reconnect: %s", xprt_strerror(ret));
}

static void raw_close(struct raw *r)
{
	xprt_conn_close(r->conn);
	xprt_pool_put(r->buf);
	xprt_pool_destroy(r->pool);
	xprt_ctx_destroy(r->ctx);
}

static int raw_call(struct raw *r, uint32_t method, const ProtobufCMessage *msg)
{
	/* room for an inline payload of a few KiB and its fields */
	uint8_t req[16384], resp[4096];
	size_t len, got;

	REQUIRE(protobuf_c_message_get_packed_size(msg) <= sizeof(req), "raw request too long");
	len = protobuf_c_message_pack(msg, req);
	return xprt_call(r->conn, method, req, len, resp, sizeof(resp), &got, 10000);
}

/* @bd: the first @len bytes of @r's buffer, for the daemon to read or write by RDMA. */
static void raw_desc(struct raw *r, uint32_t len, Rdmafs__BufferDesc *bd)
{
	struct xprt_desc desc;

	REQUIRE(xprt_mr_desc(r->conn, xprt_buf_mr(r->buf), xprt_buf_data(r->buf), MiB, &desc) == 0,
		"desc");
	bd->addr = desc.addr;
	bd->len = len;
	bd->rkey = desc.rkey;
}

static int raw_write(struct raw *r, uint64_t inode, uint32_t chunk_size, uint32_t offset,
		     uint32_t length, uint32_t crc, uint32_t desc_len, uint32_t rkey_xor)
{
	Rdmafs__ChunkWriteReq req = RDMAFS__CHUNK_WRITE_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__BufferDesc bd = RDMAFS__BUFFER_DESC__INIT;

	raw_desc(r, desc_len, &bd);
	bd.rkey ^= rkey_xor;
	cid.inode = inode;
	req.chunk = &cid;
	req.offset = offset;
	req.length = length;
	req.crc32c = crc;
	req.buf = &bd;
	req.chunk_size = chunk_size;
	return raw_call(r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &req.base);
}

static int test_corrupt(void)
{
	struct rfs_chunk_id id = {0xabc, 3};
	uint8_t *pat = malloc(MiB), *buf = malloc(MiB);
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	struct raw r;
	char path[400];
	uint32_t bytes, clen;
	uint8_t byte;
	int fd, ret;

	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	c = client_of(&d, MiB);
	fill_pattern(pat, 200000, 5);
	REQUIRE(rfs_chunk_write(c, id, MiB, 0, pat, 200000, true, NULL) == 0, "write");

	/* Flip one byte in block 10 of the chunk file, behind the daemon's back. */
	snprintf(path, sizeof(path), "%s/chunks/%016llx/%016llx", d.data_dir,
		 (unsigned long long)id.inode, (unsigned long long)id.index);
	fd = open(path, O_RDWR);
	REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
	REQUIRE(pread(fd, &byte, 1, 10 * 4096 + 17) == 1, "pread");
	byte ^= 0x40;
	REQUIRE(pwrite(fd, &byte, 1, 10 * 4096 + 17) == 1, "pwrite");
	fsync(fd);
	close(fd);

	ret = rfs_chunk_read(c, id, 0, buf, 200000, &bytes, &clen);
	REQUIRE(ret == -EIO, "read over the damaged block: %d, want -EIO", ret);
	ret = rfs_chunk_read(c, id, 10 * 4096 + 100, buf, 10, &bytes, &clen);
	REQUIRE(ret == -EIO, "small read inside the damaged block: %d, want -EIO", ret);
	/* The rest of the chunk still reads. */
	ret = rfs_chunk_read(c, id, 0, buf, 10 * 4096, &bytes, &clen);
	REQUIRE(ret == 0 && bytes == 10 * 4096 && !memcmp(buf, pat, bytes), "read before: %d", ret);
	ret = rfs_chunk_read(c, id, 11 * 4096, buf, 4096, &bytes, &clen);
	REQUIRE(ret == 0 && bytes == 4096 && !memcmp(buf, pat + 11 * 4096, 4096), "read after: %d",
		ret);
	/* A write that merges the bad block refuses to launder it. */
	ret = rfs_chunk_write(c, id, MiB, 10 * 4096 + 1, pat, 5, false, NULL);
	REQUIRE(ret == -EIO, "partial write over the damaged block: %d, want -EIO", ret);
	/* Rewriting the whole block repairs it. */
	ret = rfs_chunk_write(c, id, MiB, 10 * 4096, pat + 10 * 4096, 4096, false, NULL);
	REQUIRE(ret == 0, "rewrite of the damaged block: %d", ret);
	ret = rfs_chunk_read(c, id, 0, buf, 200000, &bytes, &clen);
	REQUIRE(ret == 0 && bytes == 200000 && !memcmp(buf, pat, bytes), "read after repair: %d",
		ret);

	/* A payload whose checksum does not match is refused on the wire. */
	raw_open(&r, &d);
	fill_pattern(xprt_buf_data(r.buf), 8192, 9);
	ret = raw_write(&r, 0xabd, MiB, 0, 8192, rdmafs_crc32c(xprt_buf_data(r.buf), 8192) ^ 1,
			8192, 0);
	REQUIRE(ret == -EIO, "write with a bad crc: %d, want -EIO", ret);
	ret = raw_write(&r, 0xabd, MiB, 0, 8192, rdmafs_crc32c(xprt_buf_data(r.buf), 8192), 8192,
			0);
	REQUIRE(ret == 0, "write with the right crc: %d", ret);
	raw_close(&r);

	REQUIRE(rfs_daemon_stats(c, &ds) == 0 && ds.checksum_errors >= 4,
		"checksum errors counted: %llu", (unsigned long long)ds.checksum_errors);
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	free(pat);
	free(buf);
	printf("corrupt: damaged disk block and bad wire crc both gave EIO, counted %llu\n",
	       (unsigned long long)ds.checksum_errors);
	return 0;
}

/* ---- fence: drain's per-file fences (CHUNK_FENCE) ---- */

/* CHUNK_COMMIT (@remove false) or CHUNK_REMOVE of every chunk of @inode at @generation. */
static int whole_inode(struct rfs_daemon *c, bool remove, uint64_t inode, uint64_t generation)
{
	struct rfs_chunk_sel sel = {.inode = inode, .generation = generation, .range = true};

	return remove ? rfs_chunk_remove(c, &sel, NULL, NULL) : rfs_chunk_commit(c, &sel);
}

struct fence_writer {
	struct rfs_daemon *c;
	uint64_t inode;
	uint32_t last_ok;     /* the value of the last write the daemon acknowledged */
	int refused;	      /* the status that ended the loop */
	volatile bool fenced; /* the main thread's FENCE returned */
	uint32_t after_fence; /* writes acknowledged after that: must stay 0 */
};

/* Overwrites one chunk with generation 0 until the daemon refuses it. */
static void *fence_writer_main(void *arg)
{
	struct fence_writer *w = arg;
	uint32_t value = 0;

	for (unsigned i = 0; i < 1000000; i++) {
		bool fenced_before = w->fenced;
		int ret;

		value++;
		ret = rfs_chunk_write(w->c, (struct rfs_chunk_id){w->inode, 0, 0}, MiB, 0, &value,
				      sizeof(value), false, NULL);
		if (ret) {
			w->refused = ret;
			return NULL;
		}
		w->last_ok = value;
		/* sent after the fence was in force, yet accepted */
		if (fenced_before)
			w->after_fence++;
	}
	w->refused = 0;
	return NULL;
}

static int test_fence(void)
{
	const uint64_t ino = 0xf00, other = 0xf01;
	uint8_t *data = malloc(MiB), *buf = malloc(MiB);
	struct fence_writer fw = {0};
	struct daemon_proc d;
	struct rfs_chunk_state st;
	struct rfs_daemon *c;
	pthread_t thread;
	uint32_t bytes, clen, seen;
	uint64_t now;

	REQUIRE(data && buf, "out of memory");
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	c = client_of(&d, MiB);
	fill_pattern(data, 8192, 3);
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){ino, 0, 0}, MiB, 0, data, 8192, true,
				NULL) == 0,
		"write before any fence");
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){other, 0, 0}, MiB, 0, data, 8192, true,
				NULL) == 0,
		"write of another inode");

	REQUIRE(rfs_chunk_fence(c, 0, 1, false, NULL) == -EINVAL, "fence of inode 0");
	REQUIRE(rfs_chunk_fence(c, ino, 0, false, NULL) == -EINVAL, "fence at generation 0");
	REQUIRE(rfs_chunk_fence(c, ino, 2, false, &now) == 0 && now == 2, "fence at 2: now %llu",
		(unsigned long long)now);
	/* a fence only rises */
	REQUIRE(rfs_chunk_fence(c, ino, 1, false, &now) == 0 && now == 2,
		"fence at 1 after 2: %llu", (unsigned long long)now);

	/* below the fence: every request that reads or changes data is refused */
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){ino, 0, 1}, MiB, 0, data, 4096, false,
				NULL) == -ESTALE,
		"write at generation 1");
	REQUIRE(rfs_chunk_read(c, (struct rfs_chunk_id){ino, 0, 1}, 0, buf, 8192, &bytes, &clen) ==
			-ESTALE,
		"read at generation 1");
	REQUIRE(rfs_chunk_truncate(c, (struct rfs_chunk_id){ino, 0, 0}, 10, NULL) == -ESTALE,
		"truncate at generation 0");
	REQUIRE(whole_inode(c, false, ino, 1) == -ESTALE, "commit at generation 1");
	REQUIRE(whole_inode(c, true, ino, 1) == -ESTALE, "remove at generation 1");
	/* stat and list are not fenced; neither is another inode */
	REQUIRE(rfs_chunk_stat(c, (struct rfs_chunk_id){ino, 0, 0}, &st) == 0 && st.exists &&
			st.length == 8192,
		"stat of a fenced chunk");
	REQUIRE(rfs_chunk_read(c, (struct rfs_chunk_id){other, 0, 0}, 0, buf, 8192, &bytes,
			       &clen) == 0 &&
			bytes == 8192,
		"read of an unfenced inode");
	/* at or above it (and the admin generation) everything works, data unchanged */
	REQUIRE(rfs_chunk_read(c, (struct rfs_chunk_id){ino, 0, 2}, 0, buf, 8192, &bytes, &clen) ==
				0 &&
			bytes == 8192 && !memcmp(buf, data, 8192),
		"read at generation 2");
	REQUIRE(whole_inode(c, false, ino, RFS_GENERATION_ADMIN) == 0,
		"commit at the admin generation");

	/* the fence is on disk: it survives kill -9 */
	rfs_daemon_close(c);
	daemon_stop(&d, SIGKILL);
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon restart");
	c = client_of(&d, MiB);
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){ino, 0, 1}, MiB, 0, data, 4096, false,
				NULL) == -ESTALE,
		"write at generation 1 after a restart");

	/* lift: only the exact generation, then the old layout is served again */
	REQUIRE(rfs_chunk_fence(c, ino, 3, true, &now) == 0 && now == 2, "lift of a fence not set");
	REQUIRE(rfs_chunk_fence(c, ino, 2, true, &now) == 0 && now == 0, "lift");
	REQUIRE(rfs_chunk_read(c, (struct rfs_chunk_id){ino, 0, 0}, 0, buf, 8192, &bytes, &clen) ==
				0 &&
			bytes == 8192 && !memcmp(buf, data, 8192),
		"read at generation 0 after the lift");

	/*
	 * A fence waits for the requests already past their check: once it
	 * returns, no write through the old generation is acknowledged, and
	 * the chunk holds the last one that was.
	 */
	fw.c = client_of(&d, MiB);
	fw.inode = ino;
	REQUIRE(pthread_create(&thread, NULL, fence_writer_main, &fw) == 0, "thread");
	while (fw.last_ok < 50 && !fw.refused)
		usleep(1000);
	REQUIRE(rfs_chunk_fence(c, ino, 1, false, &now) == 0 && now == 1, "fence under a writer");
	fw.fenced = true;
	pthread_join(thread, NULL);
	REQUIRE(fw.refused == -ESTALE, "the writer ended with %d, want -ESTALE", fw.refused);
	REQUIRE(fw.after_fence == 0, "%u writes accepted after the fence", fw.after_fence);
	REQUIRE(rfs_chunk_read(c, (struct rfs_chunk_id){ino, 0, UINT64_MAX}, 0, &seen, sizeof(seen),
			       &bytes, &clen) == 0 &&
			bytes == sizeof(seen),
		"read after the fence");
	REQUIRE(seen == fw.last_ok, "the chunk holds write %u, the last acknowledged was %u", seen,
		fw.last_ok);
	rfs_daemon_close(fw.c);

	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	free(data);
	free(buf);
	printf("fence: old generations refused, fence durable, lifted, and waits out writers over "
	       "%s\n",
	       harness_kind);
	return 0;
}

/* ---- enospc: a full file system ---- */

static int test_enospc(void)
{
	const char *mnt = data_path("small");
	char dir[400];
	uint8_t *pat = malloc(MiB), *buf = malloc(MiB);
	const char *extra[] = {"--workers", "2", NULL};
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	uint32_t bytes, clen;
	unsigned written = 0;
	int ret = 0, status;

	mkdir(mnt, 0755);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=8m"))
		check_skip("cannot mount a size-limited tmpfs (%s); needs root", strerror(errno));
	snprintf(dir, sizeof(dir), "%s/data", mnt);
	if (daemon_start(&d, dir, extra)) {
		umount2(mnt, MNT_DETACH);
		REQUIRE(false, "daemon start on tmpfs");
	}
	c = client_of(&d, MiB);
	for (unsigned i = 0; i < 64; i++) {
		fill_pattern(pat, MiB, i);
		ret = rfs_chunk_write(c, (struct rfs_chunk_id){1, i}, MiB, 0, pat, MiB, false,
				      NULL);
		if (ret)
			break;
		written++;
	}
	if (ret != -ENOSPC) {
		rfs_daemon_close(c);
		daemon_stop(&d, SIGKILL);
		umount2(mnt, MNT_DETACH);
		REQUIRE(false, "filling an 8 MiB file system: %s after %u chunks, want ENOSPC",
			strerror(-ret), written);
	}
	/* The daemon keeps serving: reads, stats, and writes once space is freed. */
	for (unsigned i = 0; i < written; i++) {
		fill_pattern(pat, MiB, i);
		ret = rfs_chunk_read(c, (struct rfs_chunk_id){1, i}, 0, buf, MiB, &bytes, &clen);
		REQUIRE(ret == 0 && bytes == MiB && !memcmp(buf, pat, MiB),
			"read chunk %u after ENOSPC: %d", i, ret);
	}
	ret = rfs_chunk_stat(c, (struct rfs_chunk_id){1, written}, &(struct rfs_chunk_state){0});
	REQUIRE(ret == 0, "stat after ENOSPC: %d", ret);
	REQUIRE(rfs_daemon_stats(c, &ds) == 0 && ds.free_bytes < MiB, "stats: free %llu",
		(unsigned long long)ds.free_bytes);
	{
		uint64_t idx[2] = {0, 1};

		REQUIRE(rfs_chunk_remove(
				c, &(struct rfs_chunk_sel){.inode = 1, .indexes = idx, .count = 2},
				NULL, NULL) == 0,
			"remove");
	}
	fill_pattern(pat, MiB, 1000);
	ret = rfs_chunk_write(c, (struct rfs_chunk_id){2, 0}, MiB, 0, pat, MiB, false, NULL);
	REQUIRE(ret == 0, "write after freeing space: %s", strerror(-ret));
	rfs_daemon_close(c);
	status = daemon_stop(&d, SIGTERM);
	umount2(mnt, MNT_DETACH);
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "clean stop: %d", status);
	free(pat);
	free(buf);
	printf("enospc: ENOSPC after %u MiB on an 8 MiB tmpfs; reads and new writes served\n",
	       written);
	return 0;
}

/* ---- config: bad configurations and data directories are refused ---- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL, "create %s", path);
	fputs(text, f);
	fclose(f);
}

/* ---- indexgrowth: a chunk rewritten over and over, never committed ---- */

#define IG_INODE  720u
#define IG_LEN	  (64u << 10)
#define IG_WRITES 6000u

/*
 * The chunk index commits without a flush, and its guard pins the last
 * flushed state, whose pages LMDB may not reuse: a store rewritten over and
 * over with no COMMIT between would grow to its map size and fail with
 * ENOSPC. The writer flushes past LMDB_GUARD_LAG commits; with a 16 MiB
 * map, 6,000 short overwrites (each one or two index commits of a 64 KiB
 * chunk's record) must all go through and read back.
 */
static int test_indexgrowth(void)
{
	uint8_t *model = malloc(IG_LEN), block[4096];
	struct rfs_chunk_id id = {IG_INODE, 0};
	struct daemon_proc d;
	struct rfs_daemon *c;
	char conf[400];
	int ret;

	REQUIRE(model, "out of memory");
	snprintf(conf, sizeof(conf), "%s/indexgrowth.conf", harness_dir());
	write_file(conf, "[daemon]\nlmdb_map_size = 16777216\n");
	REQUIRE(daemon_start(&d, data_path("ig"), (const char *[]){"--config", conf, NULL}) == 0,
		"daemon start");
	c = client_of(&d, MAX_CHUNK);
	fill_pattern(model, IG_LEN, 81);
	ret = rfs_chunk_write(c, id, MAX_CHUNK, 0, model, IG_LEN, false, NULL);
	REQUIRE(ret == 0, "laying the chunk out: %s", strerror(-ret));
	for (unsigned i = 0; i < IG_WRITES; i++) {
		uint32_t off = (i * 7u % (IG_LEN / sizeof(block))) * (uint32_t)sizeof(block);

		fill_pattern(block, sizeof(block), 100 + i);
		ret = rfs_chunk_write(c, id, MAX_CHUNK, off, block, sizeof(block), false, NULL);
		REQUIRE(ret == 0, "overwrite %u of %u, no COMMIT since the first: %s", i + 1,
			IG_WRITES, strerror(-ret));
		memcpy(model + off, block, sizeof(block));
	}
	chunk_check(c, id, model, IG_LEN, "after the overwrites");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	free(model);
	printf("indexgrowth: %u overwrites with no COMMIT in a 16 MiB chunk index, read back\n",
	       IG_WRITES);
	return 0;
}

static void expect_refused(const char *what, const char *const *args, const char *needle)
{
	char err[4096];
	int code = daemon_run_capture(args, err, sizeof(err));

	REQUIRE(code == 1, "%s: exit code %d, want 1; stderr:\n%s", what, code, err);
	REQUIRE(strstr(err, needle) != NULL, "%s: stderr lacks \"%s\":\n%s", what, needle, err);
	printf("  refused %-28s: %.*s\n", what, (int)strcspn(err, "\n"), err);
}

static bool dir_has(const char *dir, const char *name)
{
	char path[600];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &sb) == 0;
}

static int test_config(void)
{
	char secret[400], conf[400], dirty[400], foreign[400], newer[400], good[400], port[400];
	char text[1024], before[256], after[256];
	struct daemon_proc d;
	FILE *f;
	int status;

	snprintf(secret, sizeof(secret), "%s/secret", harness_dir());
	snprintf(conf, sizeof(conf), "%s/daemon.conf", harness_dir());
	snprintf(dirty, sizeof(dirty), "%s/dirty", harness_dir());
	snprintf(foreign, sizeof(foreign), "%s/foreign", harness_dir());
	snprintf(newer, sizeof(newer), "%s/newer", harness_dir());
	snprintf(good, sizeof(good), "%s/good", harness_dir());
	snprintf(port, sizeof(port), "%s/conf.port", harness_dir());

	write_file(conf, "[daemon]\ndata_dir = /nonexistent\nlisten = tcp://127.0.0.1:0\n"
			 "colour = blue\n");
	expect_refused("unknown key", (const char *[]){"--config", conf, NULL},
		       "unknown key 'colour'");
	write_file(conf, "[daemon]\nworkers = many\n");
	expect_refused("bad number", (const char *[]){"--config", conf, NULL},
		       "daemon.conf:2: workers = many: must be 1..64");
	write_file(conf, "[daemon]\nbusy_poll_us = 100001\n");
	expect_refused("spin too long", (const char *[]){"--config", conf, NULL},
		       "daemon.conf:2: busy_poll_us = 100001: must be 0..100000");
	write_file(conf, "[daemon]\nmax_chunk_size = 1000\n");
	expect_refused("unaligned chunk size", (const char *[]){"--config", conf, NULL},
		       "daemon.conf:2: max_chunk_size = 1000: must be a multiple of 4096");
	write_file(conf, "[daemon]\ndata_sync = sometimes\n");
	expect_refused("bad data_sync", (const char *[]){"--config", conf, NULL},
		       "daemon.conf:2: data_sync = sometimes: must be always or batch");
	write_file(conf, "[daemon]\ndata_sync_ms = 5\n");
	expect_refused("data_sync_ms too short", (const char *[]){"--config", conf, NULL},
		       "daemon.conf:2: data_sync_ms = 5: must be 10..60000");
	write_file(conf, "[store]\ndata_dir = /x\n");
	expect_refused("unknown section", (const char *[]){"--config", conf, NULL},
		       "unknown section [store]");
	write_file(conf, "[daemon]\nthis line has no equals sign\n");
	expect_refused("syntax error", (const char *[]){"--config", conf, NULL}, "syntax error");
	expect_refused("missing config file",
		       (const char *[]){"--config", "/nonexistent/daemon.conf", NULL},
		       "cannot open config file");
	expect_refused("no secret",
		       (const char *[]){"--data-dir", good, "--listen", "tcp://127.0.0.1:0", NULL},
		       "no cluster secret");
	expect_refused("no listen",
		       (const char *[]){"--data-dir", good, "--secret-file", secret, NULL},
		       "nothing to listen on");
	expect_refused("bad flag", (const char *[]){"--bogus", NULL}, "usage");

	/* Data directories: refused, and left exactly as they were. */
	mkdir(dirty, 0755);
	snprintf(text, sizeof(text), "%s/precious.txt", dirty);
	write_file(text, "do not touch\n");
	expect_refused("non-empty without marker",
		       (const char *[]){"--data-dir", dirty, "--listen", "tcp://127.0.0.1:0",
					"--secret-file", secret, NULL},
		       "not empty and has no rdmafs-format marker");
	REQUIRE(!dir_has(dirty, "rdmafs-format") && !dir_has(dirty, "chunks") &&
			!dir_has(dirty, "meta"),
		"the refused directory was changed");

	mkdir(foreign, 0755);
	snprintf(text, sizeof(text), "%s/rdmafs-format", foreign);
	write_file(text, "something else entirely\n");
	expect_refused("foreign marker",
		       (const char *[]){"--data-dir", foreign, "--listen", "tcp://127.0.0.1:0",
					"--secret-file", secret, NULL},
		       "is not an rdmafs format marker");
	REQUIRE(!dir_has(foreign, "chunks") && !dir_has(foreign, "meta"),
		"the foreign directory was changed");

	mkdir(newer, 0755);
	snprintf(text, sizeof(text), "%s/rdmafs-format", newer);
	write_file(text, "rdmafs-daemon data directory\nformat 7\n"
			 "uuid 01234567-89ab-4def-8123-456789abcdef\n");
	expect_refused("newer format",
		       (const char *[]){"--data-dir", newer, "--listen", "tcp://127.0.0.1:0",
					"--secret-file", secret, NULL},
		       "newer than this daemon's format");
	f = fopen(text, "r");
	REQUIRE(f && fgets(before, sizeof(before), f) && fgets(after, sizeof(after), f), "reread");
	fclose(f);
	REQUIRE(strcmp(after, "format 7\n") == 0, "the newer marker was changed: %s", after);

	/* A good config file starts, and a second daemon on its directory is refused. */
	snprintf(text, sizeof(text),
		 "; test config\n[daemon]\ndata_dir = %s\nlisten = tcp://127.0.0.1:0\n"
		 "secret_file = %s\nworkers = 2\nqueue_depth = 64\nbusy_poll_us = 0\n"
		 "log_level = warn\n",
		 good, secret);
	write_file(conf, text);
	REQUIRE(daemon_start(&d, good, (const char *[]){"--config", conf, NULL}) == 0,
		"daemon from a config file");
	expect_refused("directory in use",
		       (const char *[]){"--data-dir", good, "--listen", "tcp://127.0.0.1:0",
					"--secret-file", secret, NULL},
		       "in use by another rdmafs-daemon");
	status = daemon_stop(&d, SIGTERM);
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "clean stop: %d", status);
	REQUIRE(dir_has(good, "rdmafs-format") && dir_has(good, "chunks"), "initialised");
	printf("config: 14 bad configurations and data directories refused with clear messages\n");
	return 0;
}

/* ---- malformed: garbage and out-of-range requests ---- */

static int test_malformed(void)
{
	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x08, 0x96, 0x01, 0x12};
	Rdmafs__ChunkReadReq rd = RDMAFS__CHUNK_READ_REQ__INIT;
	Rdmafs__ChunkTruncateReq tr = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;
	Rdmafs__ChunkCommitReq cm = RDMAFS__CHUNK_COMMIT_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__BufferDesc bd = RDMAFS__BUFFER_DESC__INIT;
	uint8_t resp[256];
	struct daemon_proc d;
	struct rfs_daemon *c;
	struct xprt_desc desc;
	struct raw r;
	uint8_t data[100];
	size_t got;
	unsigned checks = 0;
	uint32_t bytes, clen;
	int ret;

	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	raw_open(&r, &d);
	fill_pattern(xprt_buf_data(r.buf), 65536, 3);

	/* Garbage protobuf for every chunk method. */
	for (uint32_t m = 100; m <= 106; m++) {
		ret = xprt_call(r.conn, m, garbage, sizeof(garbage), resp, sizeof(resp), &got, 0);
		REQUIRE(ret == -EBADMSG, "garbage to method %u: %d, want -EBADMSG", m, ret);
		checks++;
	}
	ret = xprt_call(r.conn, 9999, NULL, 0, resp, sizeof(resp), &got, 0);
	REQUIRE(ret == -EOPNOTSUPP, "unknown method: %d", ret);
	ret = xprt_call(r.conn, RDMAFS__METHOD__METHOD_CHUNK_WRITE, NULL, 0, resp, sizeof(resp),
			&got, 0);
	REQUIRE(ret == -EINVAL, "empty write request: %d", ret);
	checks += 2;

	/* Writes: lengths and offsets out of range. */
	REQUIRE(raw_write(&r, 1, MiB, 0, 0, 0, 0, 0) == -EINVAL, "zero length");
	REQUIRE(raw_write(&r, 1, MiB, MiB - 10, 100, 0, 100, 0) == -EINVAL, "past chunk_size");
	REQUIRE(raw_write(&r, 1, 2 * MiB, MiB, 100, 0, 100, 0) == -EINVAL, "chunk_size too big");
	REQUIRE(raw_write(&r, 1, 0, 0, 100, 0, 100, 0) == -EINVAL, "chunk_size 0");
	REQUIRE(raw_write(&r, 1, MiB, 0xffffffffu, 100, 0, 100, 0) == -EINVAL, "absurd offset");
	REQUIRE(raw_write(&r, 1, MiB, 100, 0xffffffffu, 0, 100, 0) == -EINVAL, "absurd length");
	REQUIRE(raw_write(&r, 1, MiB, 0, 4096, 0, 100, 0) == -EINVAL, "descriptor too short");
	checks += 7;

	/* Reads. */
	cid.inode = 1;
	rd.chunk = &cid;
	rd.buf = &bd;
	REQUIRE(xprt_mr_desc(r.conn, xprt_buf_mr(r.buf), xprt_buf_data(r.buf), MiB, &desc) == 0,
		"desc");
	bd.addr = desc.addr;
	bd.rkey = desc.rkey;
	bd.len = MiB;
	rd.offset = MiB;
	rd.length = 1;
	REQUIRE(raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_READ, &rd.base) == -EINVAL, "read past");
	rd.offset = 0;
	rd.length = 0xffffffffu;
	REQUIRE(raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_READ, &rd.base) == -EINVAL, "read huge");
	rd.length = 4096;
	bd.len = 10;
	REQUIRE(raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_READ, &rd.base) == -EINVAL, "read desc");
	rd.chunk = NULL;
	bd.len = MiB;
	REQUIRE(raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_READ, &rd.base) == -EINVAL, "no chunk");
	checks += 4;

	tr.chunk = &cid;
	tr.length = MiB + 1;
	REQUIRE(raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_TRUNCATE, &tr.base) == -EINVAL,
		"truncate past the max");
	REQUIRE(raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_COMMIT, &cm.base) == -EINVAL,
		"commit without a selection");
	checks += 2;

	/* A descriptor with a wrong key: refused by the target, fatal to that connection. */
	ret = raw_write(&r, 1, MiB, 0, 4096, rdmafs_crc32c(xprt_buf_data(r.buf), 4096), 4096,
			0x5a5a);
	REQUIRE(ret < 0, "write from a bad descriptor: %d", ret);
	printf("  bad descriptor: %s\n", xprt_strerror(ret));
	raw_reconnect(&r, &d);
	/* A descriptor pointing past the registered memory. */
	{
		Rdmafs__ChunkWriteReq wr = RDMAFS__CHUNK_WRITE_REQ__INIT;

		REQUIRE(xprt_mr_desc(r.conn, xprt_buf_mr(r.buf), xprt_buf_data(r.buf), MiB,
				     &desc) == 0,
			"desc");
		bd.addr = desc.addr + MiB - 100;
		bd.rkey = desc.rkey;
		bd.len = 4096;
		wr.chunk = &cid;
		wr.length = 4096;
		wr.buf = &bd;
		wr.chunk_size = MiB;
		ret = raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &wr.base);
		REQUIRE(ret < 0, "write from out-of-bounds memory: %d", ret);
		printf("  out-of-bounds descriptor: %s\n", xprt_strerror(ret));
	}
	checks += 2;
	raw_close(&r);

	/* The daemon is alive and serves a well-formed client. */
	REQUIRE(kill(d.pid, 0) == 0, "daemon died");
	c = client_of(&d, MiB);
	fill_pattern(data, sizeof(data), 1);
	REQUIRE(rfs_chunk_write(c, (struct rfs_chunk_id){1, 0}, MiB, 5, data, 100, false, NULL) ==
			0,
		"good write");
	REQUIRE(rfs_chunk_read(c, (struct rfs_chunk_id){1, 0}, 5, resp, 100, &bytes, &clen) == 0 &&
			bytes == 100 && !memcmp(resp, data, 100),
		"good read");
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	printf("malformed: %u bad requests answered with errors, daemon kept serving\n", checks);
	return 0;
}

/* ---- handles: rfs_daemon's shared handles, chunk copies and lists ---- */

/* A handle on @d that shares @share's transport and buffers. */
static struct rfs_daemon *shared_handle(const struct daemon_proc *d, struct rfs_daemon *share)
{
	struct rfs_daemon_options o;
	struct rfs_daemon *h;
	int ret;

	rfs_daemon_options_init(&o);
	o.uri = d->uri;
	o.share = share;
	ret = rfs_daemon_open(&o, &h);
	REQUIRE(ret == 0, "open %s sharing a handle: %s", d->uri, strerror(-ret));
	return h;
}

/* Reads chunk @id of @c whole and compares it with @want (@len bytes). */
static void expect_chunk(struct rfs_daemon *c, struct rfs_chunk_id id, const uint8_t *want,
			 uint32_t len, const char *what)
{
	struct rfs_chunk_state st;
	uint8_t *got = malloc(len + 1);
	uint32_t bytes = 0, off = 0;

	REQUIRE(got, "out of memory");
	while (off < len) {
		uint32_t piece = len - off < 64 * 1024 ? len - off : 64 * 1024;
		int ret = rfs_chunk_read(c, id, off, got + off, piece, &bytes, NULL);

		REQUIRE(ret == 0, "%s: read at %u: %s", what, off, strerror(-ret));
		if (bytes == 0)
			break;
		off += bytes;
	}
	CHECK(off == len && memcmp(got, want, len) == 0, "%s: %u of %u bytes read back, %s", what,
	      off, len, memcmp(got, want, off < len ? off : len) ? "different" : "same so far");
	REQUIRE(rfs_chunk_stat(c, id, &st) == 0, "%s: stat", what);
	CHECK(st.exists && st.length == len, "%s: stat says exists %d length %u, want %u", what,
	      st.exists, st.length, len);
	free(got);
}

static int test_handles(void)
{
	const uint32_t piece = 64 * 1024, len = 200 * 1024 + 123;
	const struct rfs_chunk_id id = {0x4a, 0, 0}, empty = {0x4b, 0, 0};
	uint8_t *data = malloc(MiB), *old = malloc(MiB);
	struct rfs_chunk_entry page[2];
	struct daemon_proc da, db;
	struct rfs_daemon *a, *b, *alone;
	uint64_t now, listed = 0, next_index = 0;
	struct rfs_chunk_id after = {0};
	bool done = false, first = true;
	unsigned pages = 0;
	size_t count;
	int ret;

	REQUIRE(data && old, "out of memory");
	REQUIRE(daemon_start(&da, data_path("a"), NULL) == 0, "daemon a start");
	REQUIRE(daemon_start(&db, data_path("b"), NULL) == 0, "daemon b start");
	/* 64 KiB buffers: a copy of 200 KiB goes in four pieces */
	a = client_of(&da, piece);
	b = shared_handle(&db, a);
	alone = client_of(&db, MiB);
	CHECK(strcmp(rfs_daemon_uri(b), db.uri) == 0, "uri %s, want %s", rfs_daemon_uri(b), db.uri);

	fill_pattern(data, len, 11);
	fill_pattern(old, 300 * 1024, 12);
	for (uint32_t off = 0; off < len; off += piece) {
		uint32_t n = len - off < piece ? len - off : piece;

		REQUIRE(rfs_chunk_write(a, id, MiB, off, data + off, n, false, NULL) == 0,
			"write the source at %u", off);
	}
	/* b holds an older, longer copy that the copy must cut */
	REQUIRE(rfs_chunk_write(alone, id, MiB, 0, old, 300 * 1024, false, NULL) == 0,
		"write the older copy");

	ret = rfs_chunk_copy(a, alone, id, len, MiB);
	CHECK(ret == -EINVAL, "a copy between handles that share nothing: %d, want -EINVAL", ret);
	ret = rfs_chunk_copy(a, b, id, MiB + 1, MiB);
	CHECK(ret == -EINVAL, "a copy longer than the chunk size: %d, want -EINVAL", ret);
	ret = rfs_chunk_copy(a, b, id, len, MiB);
	REQUIRE(ret == 0, "copy a -> b: %s", strerror(-ret));
	expect_chunk(alone, id, data, len, "the copy on b");
	/* asked for more than the source has (it shrank): what there is, exactly */
	ret = rfs_chunk_copy(a, b, id, len + 5000, MiB);
	REQUIRE(ret == 0, "copy of a chunk that shrank: %s", strerror(-ret));
	expect_chunk(alone, id, data, len, "the copy of a chunk that shrank");
	/* a chunk a does not have becomes an empty chunk on b */
	REQUIRE(rfs_chunk_copy(a, b, empty, 0, MiB) == 0, "copy of nothing");
	expect_chunk(alone, empty, data, 0, "the copy of nothing");
	REQUIRE(rfs_chunk_commit(b, &(struct rfs_chunk_sel){.inode = id.inode, .range = true}) == 0,
		"commit on b");

	/* lists: in (inode, index) order, two at a time, done only after the last */
	for (uint64_t i = 0; i < 5; i++)
		REQUIRE(rfs_chunk_write(alone, (struct rfs_chunk_id){0x4c, i, 0}, MiB, 0, data,
					(uint32_t)(i + 1), false, NULL) == 0,
			"write chunk %llu of the list", (unsigned long long)i);
	while (!done) {
		ret = rfs_chunk_list(b, after.inode, after.index, first, page, 2, &count, &done);
		REQUIRE(ret == 0 && count <= 2, "list: %d, %zu entries", ret, count);
		for (size_t k = 0; k < count; k++) {
			if (page[k].inode != 0x4c)
				continue; /* 0x4a and 0x4b are on b too */
			CHECK(page[k].index == next_index && page[k].length == next_index + 1,
			      "list entry %llu of length %u, want %llu",
			      (unsigned long long)page[k].index, page[k].length,
			      (unsigned long long)next_index);
			next_index++;
			listed++;
		}
		if (count > 0) {
			after = (struct rfs_chunk_id){page[count - 1].inode, page[count - 1].index,
						      0};
			first = false;
		}
		REQUIRE(++pages <= 10, "the list goes on past the last chunk");
	}
	CHECK(listed == 5, "listed %llu chunks of 0x4c, want 5", (unsigned long long)listed);
	CHECK(rfs_chunk_list(b, 0, 0, true, page, 0, &count, &done) == -EINVAL,
	      "a list into no room");

	/* fences through a shared handle */
	REQUIRE(rfs_chunk_fence(b, id.inode, 7, false, &now) == 0 && now == 7, "fence at 7: %llu",
		(unsigned long long)now);
	ret = rfs_chunk_write(b, (struct rfs_chunk_id){id.inode, 0, 6}, MiB, 0, data, 10, false,
			      NULL);
	CHECK(ret == -ESTALE, "a write below the fence: %d, want -ESTALE", ret);
	ret = rfs_chunk_write(b, (struct rfs_chunk_id){id.inode, 0, RFS_GENERATION_ADMIN}, MiB, 0,
			      data, 10, false, NULL);
	CHECK(ret == 0, "a write at the admin generation: %d", ret);
	REQUIRE(rfs_chunk_fence(b, id.inode, 7, true, &now) == 0 && now == 0, "lift: %llu",
		(unsigned long long)now);

	/* the handle shared from goes first; the one sharing keeps working */
	rfs_daemon_close(a);
	expect_chunk(b, id, data, len, "b after the handle it shares was closed");
	rfs_daemon_close(b);
	rfs_daemon_close(alone);
	REQUIRE(WEXITSTATUS(daemon_stop(&da, SIGTERM)) == 0, "clean stop of a");
	REQUIRE(WEXITSTATUS(daemon_stop(&db, SIGTERM)) == 0, "clean stop of b");
	free(data);
	free(old);
	return 0;
}

/* ---- receipt: small requests run by the thread that received them ---- */

struct receipt_counts {
	uint64_t ran, handed, fetched;
};

/* expect_receipt()'s @fetched where either count is right: 0 or 1 */
#define FETCHED_EITHER UINT64_MAX

/*
 * Checks what the daemon of @c counted since @r, and moves @r on: one request
 * run on receipt, @fetched of them fetched there, @handed handed on.
 */
static void expect_receipt(struct rfs_daemon *c, struct receipt_counts *r, const char *what,
			   uint64_t fetched, uint64_t handed)
{
	struct rfs_daemon_stats ds;
	uint64_t f;

	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	f = ds.fetched - r->fetched;
	CHECK(ds.run_on_receipt - r->ran == 1 &&
		      (fetched == FETCHED_EITHER ? f <= 1 : f == fetched) &&
		      ds.handed_on - r->handed == handed,
	      "%s: %llu run on receipt (want 1), %llu fetched (want %s), %llu handed on "
	      "(want %llu)",
	      what, (unsigned long long)(ds.run_on_receipt - r->ran), (unsigned long long)f,
	      fetched == FETCHED_EITHER ? "0 or 1"
	      : fetched			? "1"
					: "0",
	      (unsigned long long)(ds.handed_on - r->handed), (unsigned long long)handed);
	*r = (struct receipt_counts){ds.run_on_receipt, ds.handed_on, ds.fetched};
}

/*
 * Drops chunk @id's file of @d from the page cache (its pages made clean
 * first), and sees that its first block left: under load a page another CPU
 * still holds for a moment stays (POSIX_FADV_DONTNEED drops only what no one
 * holds), so it asks again, up to 100 times, 10 ms apart. A page that never
 * leaves is the test's own trouble, no verdict on the daemon.
 */
static void evict_chunk(const struct daemon_proc *d, struct rfs_chunk_id id)
{
	char path[512];
	int fd, cold, tries = 0;

	snprintf(path, sizeof(path), "%s/chunks/%016llx/%016llx", d->data_dir,
		 (unsigned long long)id.inode, (unsigned long long)id.index);
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
	REQUIRE(fdatasync(fd) == 0, "fdatasync %s: %s", path, strerror(errno));
	do {
		if (tries)
			usleep(10000);
		REQUIRE(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0, "fadvise %s", path);
		cold = page_cache_cold(fd, 0, 4096); /* the block the test reads and writes */
		if (cold < 0)
			check_error("mincore of %s: %s", path, strerror(-cold));
	} while (!cold && ++tries < 100);
	close(fd);
	if (tries == 100)
		check_error("%s stays in the page cache after 100 POSIX_FADV_DONTNEED", path);
}

/*
 * Whether the file system of @dir answers a read with RWF_NOWAIT (tmpfs and
 * 9p refuse it, -EOPNOTSUPP: the daemon then hands every such read on).
 */
static bool nowait_supported(const char *dir)
{
	char path[512], byte = 'x';
	struct iovec iov = {&byte, 1};
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/nowait-probe", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0 && write(fd, &byte, 1) == 1, "probe %s: %s", path, strerror(errno));
	n = preadv2(fd, &iov, 1, 0, RWF_NOWAIT);
	REQUIRE(n == 1 || errno == EOPNOTSUPP || errno == EAGAIN, "preadv2 RWF_NOWAIT: %s",
		strerror(errno));
	close(fd);
	unlink(path);
	return n == 1 || errno != EOPNOTSUPP;
}

/*
 * server.c: a small write or read (its bytes inside the messages) runs on the
 * thread that received it. A read of a block out of the page cache, or a
 * write that must complete a cold, partly covered block, has its blocks
 * fetched there by the fetcher's io_uring and is answered when the fetch is
 * done, and answers the same. On a file system without RWF_NOWAIT every such
 * request is handed to a worker. The only client here
 * and its calls one at a time: nothing else can hold the receiving thread's
 * turn, so every count is exact. The daemon is rdmafs-daemon-killpoint with
 * RDMAFS_TEST_NOWAIT_RESIDENT: the kernel answers a RWF_NOWAIT read of a
 * page out of the cache with the data when the readahead it starts for it
 * is done first (on a busy machine, often), so which request finds its
 * block cold would otherwise be the kernel's timing, not the daemon's.
 * Where that daemon cannot fail a read (no pipe, eventfd or socket of this
 * kernel answers a RWF_NOWAIT read with -EAGAIN; its log says so), a cold
 * request counts as fetched or as answered at once, and never as handed on.
 */
static int test_receipt(void)
{
	struct rfs_chunk_id id = {0x2e, 0, 0};
	uint8_t pat[4096], buf[4096];
	struct receipt_counts r;
	struct rfs_daemon_stats ds;
	struct daemon_proc d;
	struct rfs_daemon *c;
	uint32_t bytes, clen;
	uint64_t cold; /* what a cold request counts as fetched */
	bool nowait;
	int ret;

	REQUIRE(setenv("RDMAFS_TEST_NOWAIT_RESIDENT", "1", 1) == 0, "setenv");
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	unsetenv("RDMAFS_TEST_NOWAIT_RESIDENT");
	c = client_of(&d, MiB);
	fill_pattern(pat, sizeof(pat), 7);
	nowait = nowait_supported(d.data_dir);
	if (!nowait)
		printf("receipt: %s has no RWF_NOWAIT: every cold block is handed on\n",
		       d.data_dir);
	cold = nowait;
	if (nowait && log_says(&d, "cannot fail a cold RWF_NOWAIT read")) {
		/* the kernel's timing decides: fetched, or answered once its readahead is in */
		cold = FETCHED_EITHER;
		printf("receipt: the daemon cannot make a cold read fail here (its log says why):"
		       " a cold request is fetched or answered at once, never handed on\n");
	}

	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	r = (struct receipt_counts){ds.run_on_receipt, ds.handed_on, ds.fetched};
	REQUIRE(rfs_chunk_write(c, id, MiB, 0, pat, 4096, false, NULL) == 0, "write");
	expect_receipt(c, &r, "a 4 KiB write", 0, 0);

	/*
	 * The block out of the page cache: the receiving thread fetches it with
	 * its own ring and answers when the fetch is done, handing nothing on;
	 * without RWF_NOWAIT it cannot tell a cold block, and a worker reads.
	 */
	if (nowait)
		evict_chunk(&d, id);
	memset(buf, 0, sizeof(buf));
	ret = rfs_chunk_read(c, id, 0, buf, 4096, &bytes, &clen);
	CHECK(ret == 0 && bytes == 4096 && !memcmp(buf, pat, 4096),
	      "a cold read answers the data: %d, %u bytes", ret, bytes);
	expect_receipt(c, &r, "a cold read", cold, !nowait);

	/* now in the page cache: the thread that received it answers */
	ret = rfs_chunk_read(c, id, 0, buf, 4096, &bytes, &clen);
	CHECK(ret == 0 && bytes == 4096 && !memcmp(buf, pat, 4096), "a warm read: %d", ret);
	expect_receipt(c, &r, "a warm read", 0, !nowait);

	/* a write inside a block out of the page cache must read the rest of it first */
	if (nowait)
		evict_chunk(&d, id);
	memset(pat + 100, 0xa5, 50);
	REQUIRE(rfs_chunk_write(c, id, MiB, 100, pat + 100, 50, false, NULL) == 0, "write 50 B");
	expect_receipt(c, &r, "a write completing a cold block", cold, !nowait);
	ret = rfs_chunk_read(c, id, 0, buf, 4096, &bytes, &clen);
	CHECK(ret == 0 && bytes == 4096 && !memcmp(buf, pat, 4096),
	      "the block reads back whole after that write: %d, %u bytes", ret, bytes);

	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	printf("receipt: small requests run on receipt, cold blocks fetched there\n");
	return 0;
}

/* ---- inline: small payloads inside the messages (struct rfs_daemon) ---- */

static void inline_counts(struct rfs_daemon *c, uint64_t *writes, uint64_t *reads)
{
	struct rfs_daemon_stats ds;

	REQUIRE(rfs_daemon_stats(c, &ds) == 0, "stats");
	*writes = ds.inline_writes;
	*reads = ds.inline_reads;
}

/*
 * rfs_chunk_write()/rfs_chunk_read() of up to 8 KiB travel inside the
 * messages and more by RDMA, and both read back what was written; a request
 * whose inline payload disagrees with its length, or with its checksum, is
 * refused; an inline payload is the data even when its descriptor is bad.
 */
static int test_inline(void)
{
	static const uint32_t sizes[] = {1, 4096, 8192, 8193, 65536};
	uint8_t *pat = malloc(65536), *buf = malloc(65536);
	uint64_t w0, r0, w1, r1;
	struct daemon_proc d;
	struct rfs_daemon *c;
	uint32_t bytes, clen;
	struct raw r;
	int ret;

	REQUIRE(pat && buf, "malloc");
	REQUIRE(daemon_start(&d, data_path("data"), NULL) == 0, "daemon start");
	c = client_of(&d, MiB);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct rfs_chunk_id id = {0x1e, i, 0};
		uint32_t n = sizes[i];
		bool small = n <= 8192;

		fill_pattern(pat, n, 40 + i);
		inline_counts(c, &w0, &r0);
		REQUIRE(rfs_chunk_write(c, id, MiB, 100, pat, n, false, NULL) == 0, "write %u", n);
		memset(buf, 0, n);
		ret = rfs_chunk_read(c, id, 100, buf, n, &bytes, &clen);
		CHECK(ret == 0 && bytes == n && clen == 100 + n && !memcmp(buf, pat, n),
		      "%u bytes read back: %d, %u bytes", n, ret, bytes);
		inline_counts(c, &w1, &r1);
		CHECK(w1 - w0 == small, "%u bytes: %llu inline writes, want %d", n,
		      (unsigned long long)(w1 - w0), small);
		CHECK(r1 - r0 == small, "%u bytes: %llu inline reads, want %d", n,
		      (unsigned long long)(r1 - r0), small);
	}
	/* a read past the chunk's end is short, inline too */
	fill_pattern(pat, 4096, 41); /* chunk 0x1e/1's bytes 100..4195 */
	ret = rfs_chunk_read(c, (struct rfs_chunk_id){0x1e, 1, 0}, 4000, buf, 4096, &bytes, &clen);
	CHECK(ret == 0 && bytes == 196 && !memcmp(buf, pat + 3900, 196),
	      "a short inline read: %d, %u bytes", ret, bytes);

	raw_open(&r, &d);
	fill_pattern(xprt_buf_data(r.buf), 4096, 7);
	{
		Rdmafs__ChunkWriteReq wr = RDMAFS__CHUNK_WRITE_REQ__INIT;
		Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
		uint8_t *data = xprt_buf_data(r.buf);

		cid.inode = 0x1f;
		wr.chunk = &cid;
		wr.chunk_size = MiB;
		wr.length = 4096;
		wr.crc32c = rdmafs_crc32c(data, 4096);
		wr.data.data = data;
		wr.data.len = 4095;
		ret = raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &wr.base);
		CHECK(ret == -EINVAL, "inline payload shorter than length: %d, want -EINVAL", ret);
		wr.data.len = 4096;
		wr.crc32c ^= 1;
		ret = raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &wr.base);
		CHECK(ret == -EIO, "inline payload with a bad crc: %d, want -EIO", ret);
		/* no descriptor at all: the inline payload is the data */
		wr.crc32c ^= 1;
		ret = raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &wr.base);
		CHECK(ret == 0, "inline payload without a descriptor: %d", ret);
	}
	/* a descriptor with a wrong key is never used for an inline write */
	{
		Rdmafs__ChunkWriteReq wr = RDMAFS__CHUNK_WRITE_REQ__INIT;
		Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
		Rdmafs__BufferDesc bd = RDMAFS__BUFFER_DESC__INIT;
		struct xprt_desc desc;
		uint8_t *data = xprt_buf_data(r.buf);

		REQUIRE(xprt_mr_desc(r.conn, xprt_buf_mr(r.buf), data, MiB, &desc) == 0, "desc");
		bd.addr = desc.addr;
		bd.len = 4096;
		bd.rkey = desc.rkey ^ 0x5a5a;
		cid.inode = 0x1f;
		cid.index = 1;
		wr.chunk = &cid;
		wr.chunk_size = MiB;
		wr.length = 4096;
		wr.crc32c = rdmafs_crc32c(data, 4096);
		wr.buf = &bd;
		wr.data.data = data;
		wr.data.len = 4096;
		ret = raw_call(&r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &wr.base);
		CHECK(ret == 0, "inline write beside a bad descriptor: %d", ret);
	}
	REQUIRE(xprt_conn_alive(r.conn), "the raw connection died");
	for (uint64_t index = 0; index < 2; index++) {
		ret = rfs_chunk_read(c, (struct rfs_chunk_id){0x1f, index, 0}, 0, buf, 4096, &bytes,
				     &clen);
		CHECK(ret == 0 && bytes == 4096 && !memcmp(buf, xprt_buf_data(r.buf), 4096),
		      "chunk 0x1f/%llu reads back the inline payload: %d, %u bytes",
		      (unsigned long long)index, ret, bytes);
	}
	raw_close(&r);
	rfs_daemon_close(c);
	REQUIRE(WEXITSTATUS(daemon_stop(&d, SIGTERM)) == 0, "clean stop");
	free(pat);
	free(buf);
	printf("inline: 1 B to 8 KiB inside the messages, larger by RDMA, bad ones refused\n");
	return 0;
}

/* ---- chain: a replicated write goes on from daemon to daemon (chain.c) ---- */

/* The UUID of daemon @d, from its data directory's format marker. */
static void daemon_uuid(const struct daemon_proc *d, uint8_t *out)
{
	char path[400], line[128];
	unsigned v[16];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/rdmafs-format", d->data_dir);
	f = fopen(path, "r");
	if (!f)
		check_error("cannot read %s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "uuid %2x%2x%2x%2x-%2x%2x-%2x%2x-%2x%2x-%2x%2x%2x%2x%2x%2x",
			       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9],
			       &v[10], &v[11], &v[12], &v[13], &v[14], &v[15]) == 16;
	fclose(f);
	if (!found)
		check_error("no uuid line in %s", path);
	for (int i = 0; i < 16; i++)
		out[i] = (uint8_t)v[i];
}

/*
 * A CHUNK_WRITE of the first @length bytes of @r's buffer to chunk @ino/0,
 * inline when @inl, forwarded along @hops (@n of them, each a daemon of
 * @d[] by index), meant for @to (NULL: whoever gets it), at hop @hop.
 */
static int chain_write(struct raw *r, uint64_t ino, uint32_t length, bool inl,
		       const struct daemon_proc *d, uint8_t (*uuids)[16], const int *hops, size_t n,
		       const uint8_t *to, uint32_t hop)
{
	Rdmafs__ChunkWriteReq req = RDMAFS__CHUNK_WRITE_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__BufferDesc bd = RDMAFS__BUFFER_DESC__INIT;
	Rdmafs__ChainHop chain[3], *list[3];
	uint8_t *data = xprt_buf_data(r->buf);

	REQUIRE(n <= 3, "at most 3 hops");
	raw_desc(r, length, &bd);
	for (size_t i = 0; i < n; i++) {
		rdmafs__chain_hop__init(&chain[i]);
		chain[i].uuid.data = uuids[hops[i]];
		chain[i].uuid.len = 16;
		chain[i].uri = (char *)d[hops[i]].uri;
		list[i] = &chain[i];
	}
	cid.inode = ino;
	req.chunk = &cid;
	req.length = length;
	req.crc32c = rdmafs_crc32c(data, length);
	req.buf = &bd;
	req.chunk_size = MiB;
	req.chain = list;
	req.n_chain = n;
	req.hop = hop;
	if (inl) {
		req.data.data = data;
		req.data.len = length;
	}
	if (to) {
		req.to.data = (uint8_t *)to;
		req.to.len = 16;
	}
	return raw_call(r, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &req.base);
}

/* Whether chunk @ino/0 on @c holds exactly the first @length bytes of @want. */
static bool chunk_holds(struct rfs_daemon *c, uint64_t ino, const uint8_t *want, uint32_t length)
{
	static uint8_t got[MiB];
	uint32_t bytes = 0, clen = 0;
	int ret = rfs_chunk_read(c, (struct rfs_chunk_id){ino, 0, 0}, 0, got, MiB, &bytes, &clen);

	if (ret)
		check_error("reading chunk %llx back: %s", (unsigned long long)ino, strerror(-ret));
	return clen == length && bytes == length && memcmp(got, want, length) == 0;
}

/* Starts @d[0..2] (with the test's daemon binary) and learns their UUIDs and handles. */
static void chain_start(const char *prefix, struct daemon_proc *d, uint8_t (*uuids)[16],
			struct rfs_daemon **c)
{
	for (int i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%s%d", prefix, i);
		REQUIRE(daemon_start(&d[i], data_path(name), NULL) == 0, "daemon %d start", i);
		c[i] = client_of(&d[i], MiB);
		daemon_uuid(&d[i], uuids[i]);
	}
}

/* Closes the handles of @d[0..n-1] and stops them, each exiting 0. */
static void chain_stop(struct daemon_proc *d, struct rfs_daemon **c, int n)
{
	for (int i = 0; i < n; i++) {
		rfs_daemon_close(c[i]);
		REQUIRE(WEXITSTATUS(daemon_stop(&d[i], SIGTERM)) == 0, "daemon %d stop", i);
	}
}

/* One of two writers racing overlapping writes of one chunk through a chain. */
struct chain_racer {
	const struct daemon_proc *d;
	uint8_t (*uuids)[16];
	uint64_t ino;
	unsigned id, rounds, failed; /* round i writes fill_pattern(1000 * id + i) */
	int first_error;
};

static void *chain_race(void *arg)
{
	static const int both[] = {1, 2};
	struct chain_racer *cr = arg;
	struct raw r;

	raw_open(&r, &cr->d[0]);
	for (unsigned i = 0; i < cr->rounds; i++) {
		int ret;

		fill_pattern(xprt_buf_data(r.buf), 65536, 1000 * cr->id + i);
		ret = chain_write(&r, cr->ino, 65536, false, cr->d, cr->uuids, both, 2, NULL, 0);
		if (ret && !cr->failed++)
			cr->first_error = ret;
	}
	raw_close(&r);
	return NULL;
}

/*
 * Three daemons: a write sent to the first with a chain of the other two is
 * stored by all three before it is answered, inline and by RDMA (each hop
 * pulls from the previous daemon's buffer); one meant for another daemon,
 * or past the last hop, is refused and stores nothing; a chain whose next
 * daemon is gone fails the write, in bounded time.
 */
static int test_chain(void)
{
	static const uint32_t sizes[] = {3000, 300000};
	static const int both[] = {1, 2};
	struct daemon_proc d[3];
	struct rfs_daemon *c[3];
	uint8_t uuids[3][16], *want = malloc(MiB);
	struct raw r;
	uint64_t start;
	int ret;

	REQUIRE(want, "malloc");
	chain_start("chain", d, uuids, c);
	raw_open(&r, &d[0]);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t n = sizes[s];
		bool inl = n <= 4000; /* raw_call()'s request holds 4 KiB */

		fill_pattern(xprt_buf_data(r.buf), n, 90 + s);
		memcpy(want, xprt_buf_data(r.buf), n);
		ret = chain_write(&r, 0x70 + s, n, inl, d, uuids, both, 2, uuids[0], 0);
		CHECK(ret == 0, "%u bytes (%s) through a chain of 3: %d", n,
		      inl ? "inline" : "RDMA", ret);
		for (int i = 0; i < 3; i++)
			CHECK(chunk_holds(c[i], 0x70 + s, want, n),
			      "%u bytes: daemon %d holds them", n, i);
	}
	/* two clients' overlapping writes of one chunk: every copy ends the same */
	{
		struct chain_racer cr[2];
		pthread_t t[2];
		uint32_t bytes, clen;
		uint8_t *copy = malloc(65536);

		REQUIRE(copy, "malloc");
		for (unsigned i = 0; i < 2; i++) {
			cr[i] = (struct chain_racer){
				.d = d, .uuids = uuids, .ino = 0x74, .id = i, .rounds = 150};
			REQUIRE(pthread_create(&t[i], NULL, chain_race, &cr[i]) == 0, "thread");
		}
		for (unsigned i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			CHECK(cr[i].failed == 0, "racer %u: %u writes failed, first with %d", i,
			      cr[i].failed, cr[i].first_error);
		}
		ret = rfs_chunk_read(c[0], (struct rfs_chunk_id){0x74, 0, 0}, 0, copy, 65536,
				     &bytes, &clen);
		REQUIRE(ret == 0 && bytes == 65536, "reading the raced chunk from daemon 0: %d",
			ret);
		for (int i = 1; i < 3; i++)
			CHECK(chunk_holds(c[i], 0x74, copy, 65536),
			      "after 2 x 150 racing writes daemon %d holds what daemon 0 does", i);
		free(copy);
	}
	/*
	 * A fence refuses a client's write made with an older layout, and lets a
	 * forwarded one (hop 1) pass: the head took it before its own fence, and a
	 * move fences every daemon of the layout before it copies.
	 */
	{
		static uint8_t got[3000];
		uint32_t bytes = 0, clen = 0;

		REQUIRE(rfs_chunk_fence(c[0], 0x75, 5, false, NULL) == 0, "fence 0x75 at 5");
		fill_pattern(xprt_buf_data(r.buf), 3000, 77);
		memcpy(want, xprt_buf_data(r.buf), 3000);
		ret = chain_write(&r, 0x75, 3000, true, d, uuids, NULL, 0, NULL, 0);
		CHECK(ret == -ESTALE, "a client's write of an older layout under a fence: %d", ret);
		ret = chain_write(&r, 0x75, 3000, true, d, uuids, NULL, 0, NULL, 1);
		CHECK(ret == 0, "a forwarded write (hop 1) passes the fence: %d", ret);
		ret = rfs_chunk_read(c[0], (struct rfs_chunk_id){0x75, 0, 5}, 0, got, sizeof(got),
				     &bytes, &clen);
		CHECK(ret == 0 && bytes == 3000 && memcmp(got, want, 3000) == 0,
		      "the forwarded write is stored: %d, %u bytes", ret, bytes);
	}
	/* meant for daemon 1: daemon 0 stores nothing, nor does the chain */
	fill_pattern(xprt_buf_data(r.buf), 3000, 99);
	ret = chain_write(&r, 0x72, 3000, true, d, uuids, both, 2, uuids[1], 0);
	CHECK(ret == -ESTALE, "a write meant for another daemon: %d, want -ESTALE", ret);
	for (int i = 0; i < 3; i++)
		CHECK(chunk_holds(c[i], 0x72, want, 0), "nothing stored on daemon %d", i);
	/* hop 2 with two more to go would be a fifth copy */
	ret = chain_write(&r, 0x72, 3000, true, d, uuids, both, 2, NULL, 2);
	CHECK(ret == -EINVAL, "a chain past the most replicas: %d, want -EINVAL", ret);
	/* the last daemon gone: the write fails, once its connection is refused */
	REQUIRE(WEXITSTATUS(daemon_stop(&d[2], SIGTERM)) == 0, "daemon 2 stop");
	rfs_daemon_close(c[2]);
	start = harness_now_ms();
	ret = chain_write(&r, 0x73, 300000, false, d, uuids, both, 2, NULL, 0);
	CHECK(ret != 0, "a write whose chain's tail is gone fails: %d", ret);
	CHECK(harness_now_ms() - start < 30000, "and answers within 30 s: %llu ms",
	      (unsigned long long)(harness_now_ms() - start));
	raw_close(&r);
	chain_stop(d, c, 2);
	free(want);
	printf("chain: writes stored along a chain of 3 before the answer, inline and by RDMA;"
	       " racing writers leave the copies equal\n");
	return 0;
}

/*
 * The head orders a chunk's writes through its chain: a second write that
 * reaches the head while the first one's forward is held (500 ms, the
 * killpoint daemon's RDMAFS_TEST_FORWARD_HOLD_MS) waits for it, so every
 * copy ends with the second write's bytes. Without the order the second
 * overtakes the first down the chain and the copies differ.
 */
static int test_chainorder(void)
{
	struct daemon_proc d[3];
	struct rfs_daemon *c[3];
	uint8_t uuids[3][16], *want = malloc(65536);
	struct chain_racer first, second;
	pthread_t t;

	REQUIRE(want, "malloc");
	REQUIRE(setenv("RDMAFS_TEST_FORWARD_HOLD_MS", "500", 1) == 0, "setenv");
	chain_start("order", d, uuids, c);
	unsetenv("RDMAFS_TEST_FORWARD_HOLD_MS");
	first = (struct chain_racer){.d = d, .uuids = uuids, .ino = 0x75, .id = 0, .rounds = 1};
	second = first;
	second.id = 1;
	REQUIRE(pthread_create(&t, NULL, chain_race, &first) == 0, "thread");
	usleep(150 * 1000); /* the first write is at the head, its forward held */
	chain_race(&second);
	pthread_join(t, NULL);
	CHECK(first.failed == 0 && second.failed == 0, "the writes: %d, %d", first.first_error,
	      second.first_error);
	fill_pattern(want, 65536, 1000);
	for (int i = 0; i < 3; i++)
		CHECK(chunk_holds(c[i], 0x75, want, 65536),
		      "daemon %d holds the second write, as the head does", i);
	chain_stop(d, c, 3);
	free(want);
	printf("chainorder: a write overtaking a held one waits at the head; copies equal\n");
	return 0;
}

/* A replicated CHUNK_READ of chunk @ino/0's first 64 KiB at @r's daemon: its status. */
static int chain_read(struct raw *r, uint64_t ino)
{
	Rdmafs__ChunkReadReq req = RDMAFS__CHUNK_READ_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__BufferDesc bd = RDMAFS__BUFFER_DESC__INIT;

	raw_desc(r, 65536, &bd);
	cid.inode = ino;
	req.chunk = &cid;
	req.length = 65536;
	req.buf = &bd;
	req.replicated = true;
	return raw_call(r, RDMAFS__METHOD__METHOD_CHUNK_READ, &req.base);
}

/* The gate of @d's forwards (RDMAFS_TEST_FORWARD_GATE=@prefix): closed, or opened. */
static void gate_set(const char *prefix, const struct daemon_proc *d, bool closed)
{
	char path[400];
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", prefix, (int)d->pid);
	if (!closed) {
		if (unlink(path))
			check_error("cannot remove %s: %s", path, strerror(errno));
		return;
	}
	f = fopen(path, "w");
	if (!f)
		check_error("cannot make %s: %s", path, strerror(errno));
	fclose(f);
}

/* Whether @d holds a forward at its gate within 30 s. */
static bool gate_holds(const char *prefix, const struct daemon_proc *d)
{
	uint64_t start = harness_now_ms();
	char path[400];

	snprintf(path, sizeof(path), "%s.%d.held", prefix, (int)d->pid);
	while (access(path, F_OK)) {
		if (harness_now_ms() - start > 30000)
			return false;
		usleep(10 * 1000);
	}
	return true;
}

/*
 * CRAQ's dirty copies: while a write of a chain of 3 is on its way down
 * (the forwards held at gates, RDMAFS_TEST_FORWARD_GATE, that the test
 * opens), a replicated read of its chunk answers -EINPROGRESS at the head,
 * then at the middle daemon too once the head's gate opens, and the copies
 * the write has not reached serve theirs; a read that is not replicated is
 * served. Once the chain answered every copy serves the write's bytes. The
 * gates wait for the test, not for time: only the head's forward timeout (4
 * s, from its gate's opening) bounds the steps between the two gates.
 */
static int test_chaindirty(void)
{
	struct daemon_proc d[3];
	struct rfs_daemon *c[3];
	uint8_t uuids[3][16], *want = malloc(65536);
	char gate[300];
	struct chain_racer w;
	struct raw r[3];
	pthread_t t;

	REQUIRE(want, "malloc");
	snprintf(gate, sizeof(gate), "%s/gate", harness_dir());
	REQUIRE(setenv("RDMAFS_TEST_FORWARD_GATE", gate, 1) == 0, "setenv");
	chain_start("dirty", d, uuids, c);
	unsetenv("RDMAFS_TEST_FORWARD_GATE");
	for (int i = 0; i < 3; i++)
		raw_open(&r[i], &d[i]);
	gate_set(gate, &d[0], true);
	gate_set(gate, &d[1], true);
	w = (struct chain_racer){.d = d, .uuids = uuids, .ino = 0x76, .id = 1, .rounds = 1};
	fill_pattern(want, 65536, 1000);
	REQUIRE(pthread_create(&t, NULL, chain_race, &w) == 0, "thread");

	CHECK(gate_holds(gate, &d[0]), "the write never reached the head's forward");
	CHECK(chain_read(&r[0], 0x76) == -EINPROGRESS,
	      "the head is dirty once it takes the write, before its own store");
	CHECK(chain_read(&r[1], 0x76) == 0 && chain_read(&r[2], 0x76) == 0,
	      "the copies the write has not reached serve theirs");
	gate_set(gate, &d[0], false);
	CHECK(gate_holds(gate, &d[1]), "the write never reached the middle daemon's forward");
	CHECK(chain_read(&r[1], 0x76) == -EINPROGRESS, "the middle daemon is dirty");
	CHECK(chain_read(&r[0], 0x76) == -EINPROGRESS, "the head is dirty until the chain answers");
	CHECK(chunk_holds(c[0], 0x76, want, 65536) || chunk_holds(c[0], 0x76, want, 0),
	      "a read that is not replicated is served at the head");
	CHECK(chain_read(&r[2], 0x76) == 0, "the tail, which the write has not reached, serves");
	gate_set(gate, &d[1], false);
	pthread_join(t, NULL);
	CHECK(w.failed == 0, "the write through the chain: %d", w.first_error);
	for (int i = 0; i < 3; i++) {
		CHECK(chain_read(&r[i], 0x76) == 0, "daemon %d serves replicated reads again", i);
		CHECK(chunk_holds(c[i], 0x76, want, 65536), "daemon %d holds the write", i);
		raw_close(&r[i]);
	}
	chain_stop(d, c, 3);
	free(want);
	printf("chaindirty: a write on its way down the chain makes the head, then the middle, "
	       "answer replicated reads EINPROGRESS; later copies serve; all clean after\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} tests[] = {
		{"roundtrip", test_roundtrip},	 {"clients", test_clients},
		{"crash", test_crash},		 {"killpoint", test_killpoint},
		{"rewrite", test_rewrite},	 {"ringrefuse", test_ringrefuse},
		{"powerloss", test_powerloss},	 {"indexgrowth", test_indexgrowth},
		{"corrupt", test_corrupt},	 {"enospc", test_enospc},
		{"config", test_config},	 {"malformed", test_malformed},
		{"fence", test_fence},		 {"handles", test_handles},
		{"inline", test_inline},	 {"receipt", test_receipt},
		{"chain", test_chain},		 {"chainorder", test_chainorder},
		{"chaindirty", test_chaindirty},
	};

	if (argc != 4)
		check_error("usage: daemon-test DAEMON_BINARY tcp|rdma TEST");
	harness_daemon_path = argv[1];
	harness_kind = argv[2];
	signal(SIGPIPE, SIG_IGN);
	if (access(harness_daemon_path, X_OK))
		check_error("no daemon binary at %s", harness_daemon_path);
	harness_require_kind();
	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(argv[3], tests[i].name) == 0) {
			int ret;

			check_test_name = tests[i].name;
			ret = tests[i].fn();
			return ret ? ret : check_exit_status();
		}
	}
	check_error("unknown test %s", argv[3]);
}
