/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ops suite: rdmafsctl against a live cluster, a daemon that hosts the
 * metadata service plus three storage daemons, started by tests/lib/cluster.sh
 * over tcp or rdma:
 *
 *   cluster.sh --no-fuse --transport KIND ... -- ops-test RDMAFSCTL CASE
 *
 * Files are written through librdmafs_client and the metadata calls (no
 * FUSE): CREATE at the metadata service, each chunk to the daemon that
 * rendezvous placement picks, UPDATE_SIZE, RELEASE.
 *
 * Cases: cli (status, daemons, stats in text and JSON, usage, configuration
 * and unreachable errors), drain (drain a daemon while a reader thread keeps
 * reading and checking every file, then remove it), scrub (a chunk corrupted
 * on disk is found), fsck (orphan chunks found, then removed by --repair),
 * health (status's health line and exit status with a daemon down, what
 * the daemons store, a shared disk counted once),
 * undrain (an interrupted drain's fence lifted, a finished drain undone:
 * nothing lost, new chunks land on the daemon again), removed (a removed
 * daemon leaves the map, stops, and is refused when started again) and down
 * (commands skip a daemon the map shows down without contacting it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_fs.h"
#include "rdmafs_common.h"
#include "check.h"
#include "cluster.h"
#include "json.h"

extern char **environ;

#define STORAGE_DAEMONS 3
#define DAEMONS		(STORAGE_DAEMONS + 1)
#define MAX_FILES	32
#define OUT_MAX		(1u << 20)
#define REPLY_MAX	(64u << 10)

static const char *ctl_path;

/* The cluster cluster.sh runs this under, and room for our own files in it. */
static struct test_cluster cluster;
static char work_dir[TEST_CLUSTER_PATH_MAX + 16];
static uint8_t *secret;
static size_t secret_len;

struct cluster_daemon {
	const char *name; /* cluster.sh ctl's name for it */
	const char *uri;
	const char *data_dir;
	uint8_t uuid[16];
	char uuid_text[37];
	struct rfs_daemon *client;
};

static struct cluster_daemon daemons[DAEMONS];
static struct rfs_daemon *meta; /* the metadata service (daemons[0]) */
static const char *secret_path;

struct file {
	char name[32];
	uint64_t ino;
	uint64_t size;
	uint64_t seed;
	uint64_t hole; /* a chunk index left unwritten, UINT64_MAX for none */
	uint32_t chunk_size;
	uint64_t layout_seed;
	uint64_t generation; /* Layout.generation, sent with chunk I/O */
	size_t width;
	uint8_t layout[8][16];
};

static struct file files[MAX_FILES];
static size_t file_count;

/* ---- small helpers ---- */

/* Deterministic file contents: byte @pos of the stream @seed. */
static uint8_t stream_byte(uint64_t seed, uint64_t pos)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (pos * 0xbf58476d1ce4e5b9ull);

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return (uint8_t)x;
}

/* SIGKILLs daemon @d through cluster.sh and waits until it is gone. */
static void kill_daemon(struct cluster_daemon *d)
{
	int rc = test_cluster_ctl(&cluster, "kill", d->name, "KILL");

	REQUIRE(rc == 0, "cluster.sh ctl kill %s exited %d", d->name, rc);
}

static void uuid_text(const uint8_t *u, char *out)
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

static int meta_call(uint32_t method, const ProtobufCMessage *req,
		     const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out)
{
	size_t len = protobuf_c_message_get_packed_size(req), reply_len = 0;
	uint8_t *buf = malloc(len + 1), *reply = malloc(REPLY_MAX);
	int ret;

	REQUIRE(buf && reply, "out of memory");
	protobuf_c_message_pack(req, buf);
	ret = rfs_daemon_call_raw(meta, method, buf, len, reply, REPLY_MAX, &reply_len);
	*out = NULL;
	if (!ret) {
		*out = protobuf_c_message_unpack(desc, NULL, reply_len, reply);
		if (!*out)
			ret = -EBADMSG;
	}
	free(buf);
	free(reply);
	return ret;
}

static struct cluster_daemon *daemon_by_uuid(const uint8_t *uuid)
{
	for (int i = 0; i < DAEMONS; i++)
		if (memcmp(daemons[i].uuid, uuid, 16) == 0)
			return &daemons[i];
	return NULL;
}

/*
 * Runs rdmafsctl with @args (NULL-terminated) and @envp; stdout and stderr
 * are captured (NUL-terminated). Returns its exit status, 128 + signal.
 */
static int run_ctl_env(const char *const *args, char **envp, char *out, char *err)
{
	char out_path[sizeof(work_dir) + 16], err_path[sizeof(work_dir) + 16];
	posix_spawn_file_actions_t fa;
	const char *argv[32];
	unsigned n = 0;
	pid_t pid;
	int status, fd;
	ssize_t len;

	snprintf(out_path, sizeof(out_path), "%s/ctl.out", work_dir);
	snprintf(err_path, sizeof(err_path), "%s/ctl.err", work_dir);
	argv[n++] = ctl_path;
	for (unsigned i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(posix_spawn(&pid, ctl_path, &fa, NULL, (char **)argv, envp) == 0, "spawn %s",
		ctl_path);
	posix_spawn_file_actions_destroy(&fa);
	REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
	for (int k = 0; k < 2; k++) {
		char *dst = k ? err : out;

		fd = open(k ? err_path : out_path, O_RDONLY);
		len = fd >= 0 ? read(fd, dst, OUT_MAX - 1) : 0;
		dst[len > 0 ? len : 0] = '\0';
		if (fd >= 0)
			close(fd);
	}
	if (getenv("RDMAFS_TEST_VERBOSE"))
		fprintf(stderr, "$ rdmafsctl ... %s -> %d\n%s%s", args[4] ? args[4] : "",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char ctl_out[OUT_MAX], ctl_errbuf[OUT_MAX];

/* rdmafsctl -m META -s SECRET @a0 @a1 ... against our cluster. */
static int ctl(const char *a0, const char *a1, const char *a2, const char *a3)
{
	const char *args[] = {"-m", cluster.meta_uri, "-s", secret_path, a0, a1, a2, a3, NULL};

	return run_ctl_env(args, environ, ctl_out, ctl_errbuf);
}

/* Parses ctl_out as JSON; fails the test if it is not. */
static struct jv *ctl_json(void)
{
	char err[128];
	struct jv *v = json_parse(ctl_out, err, sizeof(err));

	REQUIRE(v, "rdmafsctl --json printed no valid JSON (%s):\n%s", err, ctl_out);
	return v;
}

/* ---- the cluster ---- */

static void load_uuids(void)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	uint64_t deadline = rdmafs_now_ms() + 30000;

	for (;;) {
		Rdmafs__GetClusterMapResp *map;
		int found = 0, up = 0;

		REQUIRE(meta_call(RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req.base,
				  &rdmafs__get_cluster_map_resp__descriptor,
				  (ProtobufCMessage **)&map) == 0,
			"GET_CLUSTER_MAP");
		for (size_t i = 0; i < map->n_daemons; i++) {
			const Rdmafs__DaemonInfo *d = map->daemons[i];

			for (int k = 0; k < DAEMONS; k++) {
				if (d->n_addresses &&
				    strcmp(d->addresses[0], daemons[k].uri) == 0) {
					memcpy(daemons[k].uuid, d->uuid.data, 16);
					uuid_text(daemons[k].uuid, daemons[k].uuid_text);
					found++;
					up += d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP;
				}
			}
		}
		rdmafs__get_cluster_map_resp__free_unpacked(map, NULL);
		if (found == DAEMONS && up == DAEMONS)
			return;
		REQUIRE(rdmafs_now_ms() < deadline, "only %d of %d daemons registered and up", up,
			DAEMONS);
		usleep(100000);
	}
}

static struct rfs_daemon *connect_to(const char *uri)
{
	struct rfs_daemon_options o;
	struct rfs_daemon *c;
	int ret;

	rfs_daemon_options_init(&o);
	o.uri = uri;
	o.secret = secret;
	o.secret_len = secret_len;
	o.name = "ops-test";
	o.buf_size = 1u << 20;
	o.buf_count = 4;
	o.call_timeout_ms = 20000;
	ret = rfs_daemon_open(&o, &c);
	REQUIRE(ret == 0, "connect to %s: %s", uri, strerror(-ret));
	return c;
}

static void cluster_start(void)
{
	int ret = test_cluster_open(&cluster);

	if (ret)
		check_error("no cluster to test (%s): run under tests/lib/cluster.sh --no-fuse",
			    strerror(-ret));
	if (cluster.daemon_count != DAEMONS)
		check_error("the cluster has %zu daemons, the test needs %d", cluster.daemon_count,
			    DAEMONS);
	snprintf(work_dir, sizeof(work_dir), "%s/ops-test", cluster.dir);
	if (mkdir(work_dir, 0700) && errno != EEXIST)
		check_error("mkdir %s: %s", work_dir, strerror(errno));
	secret_path = cluster.secret_path;
	ret = rdmafs_read_secret(secret_path, &secret, &secret_len);
	if (ret)
		check_error("reading the secret %s: %s", secret_path, strerror(-ret));
	for (int i = 0; i < DAEMONS; i++) {
		daemons[i].name = cluster.daemons[i].name;
		daemons[i].uri = cluster.daemons[i].uri;
		daemons[i].data_dir = cluster.daemons[i].data_dir;
	}
	meta = connect_to(cluster.meta_uri);
	load_uuids();
	for (int i = 0; i < DAEMONS; i++)
		daemons[i].client = connect_to(daemons[i].uri);
}

/* ---- files ---- */

static uint8_t expected_byte(const struct file *f, uint64_t pos)
{
	if (f->hole != UINT64_MAX && pos / f->chunk_size == f->hole)
		return 0;
	return stream_byte(f->seed, pos);
}

static void layout_from(struct file *f, const Rdmafs__Layout *l)
{
	REQUIRE(l && l->chunk_size && l->n_daemons >= 1 && l->n_daemons <= 8, "file layout");
	REQUIRE(l->chunk_size <= (1u << 20), "chunk size %u larger than the test's buffers",
		l->chunk_size);
	f->chunk_size = l->chunk_size;
	f->layout_seed = l->placement_seed;
	f->generation = l->generation;
	f->width = l->n_daemons;
	for (size_t i = 0; i < l->n_daemons; i++) {
		REQUIRE(l->daemons[i].len == 16, "uuid length");
		memcpy(f->layout[i], l->daemons[i].data, 16);
	}
}

/* The daemon that holds chunk @index of @f under the layout in @f. */
static struct cluster_daemon *placed(const struct file *f, uint64_t index)
{
	const uint8_t *list[8];
	int slot;

	for (size_t i = 0; i < f->width; i++)
		list[i] = f->layout[i];
	slot = rdmafs_place_chunk(list, f->width, f->layout_seed, f->ino, index);
	REQUIRE(slot >= 0, "placement");
	return daemon_by_uuid(list[slot]);
}

/* Creates file @name at the next slot of files[]; its size and bytes come with fill_file(). */
static Rdmafs__CreateResp *create_file(const char *name, uint64_t hole)
{
	Rdmafs__CreateReq req = RDMAFS__CREATE_REQ__INIT;
	Rdmafs__CreateResp *resp;
	struct file *f = &files[file_count];
	int ret;

	REQUIRE(file_count < MAX_FILES, "too many files");
	snprintf(f->name, sizeof(f->name), "%s", name);
	req.parent = 1;
	req.name.data = (uint8_t *)f->name;
	req.name.len = strlen(f->name);
	req.mode = S_IFREG | 0644;
	req.exclusive = true;
	req.open_flags = O_RDWR;
	ret = meta_call(RDMAFS__METHOD__METHOD_CREATE, &req.base, &rdmafs__create_resp__descriptor,
			(ProtobufCMessage **)&resp);
	REQUIRE(ret == 0, "CREATE %s: %s", name, strerror(-ret));
	f->ino = resp->attr->ino;
	f->seed = f->ino * 7919 + 13;
	f->hole = hole;
	layout_from(f, resp->layout);
	return resp;
}

/* Writes @size bytes into the file create_file() just made, sets its size and closes it. */
static void fill_file(Rdmafs__CreateResp *resp, uint64_t size)
{
	Rdmafs__UpdateSizeReq us = RDMAFS__UPDATE_SIZE_REQ__INIT;
	Rdmafs__ReleaseReq rel = RDMAFS__RELEASE_REQ__INIT;
	ProtobufCMessage *r;
	struct file *f = &files[file_count];
	uint8_t *buf = malloc(1u << 20);
	int ret;

	REQUIRE(buf, "out of memory");
	f->size = size;
	for (uint64_t idx = 0; idx * f->chunk_size < size; idx++) {
		uint32_t len = (uint32_t)(size - idx * f->chunk_size < f->chunk_size
						  ? size - idx * f->chunk_size
						  : f->chunk_size);
		struct cluster_daemon *d = placed(f, idx);

		if (idx == f->hole)
			continue;
		for (uint32_t k = 0; k < len; k++)
			buf[k] = stream_byte(f->seed, idx * f->chunk_size + k);
		ret = rfs_chunk_write(d->client, (struct rfs_chunk_id){f->ino, idx, f->generation},
				      f->chunk_size, 0, buf, len, true, NULL);
		REQUIRE(ret == 0, "write %s chunk %" PRIu64 ": %s", f->name, idx, strerror(-ret));
	}
	us.ino = f->ino;
	us.size = size;
	REQUIRE(meta_call(RDMAFS__METHOD__METHOD_UPDATE_SIZE, &us.base,
			  &rdmafs__attr_resp__descriptor, &r) == 0,
		"UPDATE_SIZE");
	protobuf_c_message_free_unpacked(r, NULL);
	rel.handle = resp->handle;
	rel.ino = f->ino;
	REQUIRE(meta_call(RDMAFS__METHOD__METHOD_RELEASE, &rel.base,
			  &rdmafs__release_resp__descriptor, &r) == 0,
		"RELEASE");
	protobuf_c_message_free_unpacked(r, NULL);
	rdmafs__create_resp__free_unpacked(resp, NULL);
	free(buf);
	file_count++;
}

static void write_file(const char *name, uint64_t size, uint64_t hole)
{
	fill_file(create_file(name, hole), size);
}

/* Whether a written chunk of @f (inside its size, not its hole) is placed on @d; its index in
 * *@index. */
static bool chunk_on(const struct file *f, const struct cluster_daemon *d, uint64_t *index)
{
	for (uint64_t idx = 0; idx * f->chunk_size < f->size; idx++) {
		if (idx != f->hole && placed(f, idx) == d) {
			*index = idx;
			return true;
		}
	}
	return false;
}

/* Whether the layout of @f names daemon @d. */
static bool in_layout(const struct file *f, const struct cluster_daemon *d)
{
	for (size_t i = 0; i < f->width; i++)
		if (memcmp(f->layout[i], d->uuid, 16) == 0)
			return true;
	return false;
}

/*
 * Writes a new file of at least @min_size bytes that has a chunk on daemon @d:
 * placement is a hash of random uuids, so a file of a fixed size may miss a
 * daemon by chance; this one is made long enough that it does not. Files
 * whose layout leaves @d out are written empty and another is tried; returns
 * how many were.
 */
static int write_file_onto(const char *name, uint64_t min_size, struct cluster_daemon *d)
{
	char fname[64];

	for (int attempt = 0; attempt < 64; attempt++) {
		Rdmafs__CreateResp *resp;
		struct file *f = &files[file_count];
		uint64_t size = min_size;

		snprintf(fname, sizeof(fname), attempt ? "%s.%d" : "%s", name, attempt);
		resp = create_file(fname, UINT64_MAX);
		if (!in_layout(f, d)) {
			fill_file(resp, 0);
			continue;
		}
		for (uint64_t idx = 0;; idx++) {
			REQUIRE(idx < 4096, "%s: no chunk of 4096 placed on %s", fname, d->name);
			if (placed(f, idx) == d) {
				if (size < (idx + 1) * f->chunk_size)
					size = (idx + 1) * f->chunk_size;
				break;
			}
		}
		fill_file(resp, size);
		return attempt;
	}
	REQUIRE(false, "64 new files in a row left %s out of their layouts", d->name);
	return -1;
}

static void write_files(void)
{
	static const uint64_t MiB = 1u << 20;
	char name[32];

	write_file("empty", 0, UINT64_MAX);
	write_file("small", 1000, UINT64_MAX);
	write_file("sparse", 4 * MiB + 77, 1); /* chunk 1 never written: a hole */
	for (int i = 0; i < 9; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		write_file(name, (uint64_t)(i % 4 + 1) * MiB + (uint64_t)i * 4099, UINT64_MAX);
	}
	/* every daemon holds a chunk, whatever the placement of this run's uuids */
	for (int d = 0; d < DAEMONS; d++) {
		bool holds = false;
		uint64_t idx;

		for (size_t i = 0; i < file_count && !holds; i++)
			holds = chunk_on(&files[i], &daemons[d], &idx);
		if (!holds) {
			snprintf(name, sizeof(name), "on-%s", daemons[d].name);
			write_file_onto(name, MiB, &daemons[d]);
		}
	}
}

/* Fetches the current layout of @f into @out (a copy of @f). */
static void fresh_layout(const struct file *f, struct file *out)
{
	Rdmafs__LookupReq req = RDMAFS__LOOKUP_REQ__INIT;
	Rdmafs__EntryResp *resp;
	int ret;

	*out = *f;
	req.parent = 1;
	req.name.data = (uint8_t *)f->name;
	req.name.len = strlen(f->name);
	ret = meta_call(RDMAFS__METHOD__METHOD_LOOKUP, &req.base, &rdmafs__entry_resp__descriptor,
			(ProtobufCMessage **)&resp);
	REQUIRE(ret == 0, "LOOKUP %s: %s", f->name, strerror(-ret));
	REQUIRE(resp->attr->ino == f->ino && resp->attr->size == f->size, "attributes of %s",
		f->name);
	layout_from(out, resp->layout);
	rdmafs__entry_resp__free_unpacked(resp, NULL);
}

/*
 * Reads all of @f through the layout in @f and compares every byte. Returns
 * 0, or an errno / -EILSEQ (wrong data) with a message in @why.
 */
static int verify_file(const struct file *f, uint8_t *buf, char *why, size_t why_len)
{
	for (uint64_t idx = 0; idx * f->chunk_size < f->size; idx++) {
		uint32_t len = (uint32_t)(f->size - idx * f->chunk_size < f->chunk_size
						  ? f->size - idx * f->chunk_size
						  : f->chunk_size);
		struct cluster_daemon *d = placed(f, idx);
		uint32_t got = 0;
		int ret;

		if (!d) {
			snprintf(why, why_len, "%s chunk %" PRIu64 ": placed on an unknown daemon",
				 f->name, idx);
			return -ENODEV;
		}
		ret = rfs_chunk_read(d->client, (struct rfs_chunk_id){f->ino, idx, f->generation},
				     0, buf, len, &got, NULL);
		if (ret) {
			snprintf(why, why_len, "%s chunk %" PRIu64 " on %s: %s", f->name, idx,
				 d->uri, strerror(-ret));
			return ret;
		}
		for (uint32_t k = 0; k < len; k++) {
			uint8_t have = k < got ? buf[k] : 0;

			if (have != expected_byte(f, idx * f->chunk_size + k)) {
				snprintf(why, why_len,
					 "%s chunk %" PRIu64
					 " on %s: wrong byte at %u (%u of %u read)",
					 f->name, idx, d->uri, k, got, len);
				return -EILSEQ;
			}
		}
	}
	return 0;
}

static void verify_all_fresh(const uint8_t *must_not_name)
{
	uint8_t *buf = malloc(1u << 20);
	char why[256];

	REQUIRE(buf, "out of memory");
	for (size_t i = 0; i < file_count; i++) {
		struct file f;

		fresh_layout(&files[i], &f);
		for (size_t k = 0; must_not_name && k < f.width; k++)
			REQUIRE(memcmp(f.layout[k], must_not_name, 16) != 0,
				"%s: layout still names the drained daemon", f.name);
		REQUIRE(verify_file(&f, buf, why, sizeof(why)) == 0, "%s", why);
	}
	free(buf);
}

static uint64_t daemon_chunks(struct cluster_daemon *d)
{
	struct rfs_daemon_stats s;

	REQUIRE(rfs_daemon_stats(d->client, &s) == 0, "DAEMON_STATS of %s", d->uri);
	return s.chunks;
}

/* ---- cli ---- */

static void test_cli(void)
{
	char prefix[9], cfg_path[sizeof(work_dir) + 32], bad_meta[64], *env[8];
	struct jv *v, *ds;
	uint64_t written = 0, sum_written = 0;
	int n_env = 0;
	FILE *f;

	write_files();
	for (size_t i = 0; i < file_count; i++)
		written += files[i].size - (files[i].hole != UINT64_MAX ? files[i].chunk_size : 0);

	/* status, text: every daemon with its state and address */
	REQUIRE(ctl("status", NULL, NULL, NULL) == 0, "status: %s", ctl_errbuf);
	REQUIRE(strstr(ctl_out, "epoch"), "status prints the epoch:\n%s", ctl_out);
	REQUIRE(strncmp(ctl_out, "health: OK\n", 11) == 0, "status opens with its health:\n%s",
		ctl_out);
	for (int i = 0; i < DAEMONS; i++) {
		char start[64], line[512], uuid8[16];
		const char *at;

		snprintf(start, sizeof(start), "\n%s ", daemons[i].name);
		at = strstr(ctl_out, start);
		REQUIRE(at, "status lists %s by name:\n%s", daemons[i].name, ctl_out);
		snprintf(line, sizeof(line), "%.*s", (int)strcspn(at + 1, "\n"), at + 1);
		snprintf(uuid8, sizeof(uuid8), " %.8s ", daemons[i].uuid_text);
		REQUIRE(strstr(line, " up ") && strstr(line, daemons[i].uri) &&
				strstr(line, i == 0 ? " meta+data " : " data ") &&
				strstr(line, uuid8),
			"status line of %s: %s", daemons[i].name, line);
	}

	/* status --json */
	REQUIRE(ctl("--json", "status", NULL, NULL) == 0, "status --json: %s", ctl_errbuf);
	v = ctl_json();
	REQUIRE(jnum(jget(v, "epoch"), 0) >= 1, "epoch");
	ds = jget(v, "daemons");
	REQUIRE(jlen(ds) == DAEMONS, "%zu daemons in status --json", jlen(ds));
	for (size_t i = 0; i < jlen(ds); i++) {
		struct jv *d = jat(ds, i);
		struct cluster_daemon *cd = NULL;

		for (int k = 0; k < DAEMONS; k++)
			if (strcmp(jstr(jget(d, "uuid")), daemons[k].uuid_text) == 0)
				cd = &daemons[k];
		REQUIRE(cd, "unknown uuid %s", jstr(jget(d, "uuid")));
		REQUIRE(strcmp(jstr(jget(d, "state")), "up") == 0, "state %s",
			jstr(jget(d, "state")));
		REQUIRE(strcmp(jstr(jat(jget(d, "addresses"), 0)), cd->uri) == 0, "address");
		REQUIRE(jnum(jget(d, "capacity_bytes"), 0) > 0, "capacity");
		REQUIRE(jnum(jget(d, "heartbeat_age_ms"), 1e9) < 30000, "heartbeat age");
		REQUIRE(strcmp(jstr(jget(d, "name")), cd->name) == 0, "name %s of %s",
			jstr(jget(d, "name")), cd->name);
		REQUIRE(jget(d, "hosts_metadata") &&
				jget(d, "hosts_metadata")->b == (cd == daemons),
			"%s hosts_metadata", cd->name);
	}
	REQUIRE(strcmp(jstr(jget(jget(v, "health"), "status")), "OK") == 0 &&
			jlen(jget(jget(v, "health"), "reasons")) == 0,
		"health in status --json:\n%s", ctl_out);
	json_free(v);

	/* daemons, text and JSON */
	REQUIRE(ctl("daemons", NULL, NULL, NULL) == 0, "daemons");
	for (int i = 0; i < DAEMONS; i++)
		REQUIRE(strstr(ctl_out, daemons[i].uuid_text) && strstr(ctl_out, daemons[i].uri),
			"daemons lists %s", daemons[i].uri);
	REQUIRE(ctl("daemons", "--json", NULL, NULL) == 0, "daemons --json");
	v = ctl_json();
	REQUIRE(jlen(jget(v, "daemons")) == DAEMONS, "daemons --json count");
	json_free(v);

	/* stats: every byte written shows up, with latency percentiles */
	REQUIRE(ctl("stats", NULL, NULL, NULL) == 0, "stats: %s", ctl_errbuf);
	REQUIRE(strstr(ctl_out, "chunk_write") && strstr(ctl_out, "p99"), "stats table:\n%s",
		ctl_out);
	REQUIRE(ctl("stats", "--json", NULL, NULL) == 0, "stats --json");
	v = ctl_json();
	ds = jget(v, "daemons");
	REQUIRE(jlen(ds) == DAEMONS, "stats of %zu daemons", jlen(ds));
	for (size_t i = 0; i < jlen(ds); i++) {
		struct jv *d = jat(ds, i), *ops = jget(d, "ops");

		sum_written += (uint64_t)jnum(jget(d, "bytes_written"), 0);
		REQUIRE(jnum(jget(d, "uptime_sec"), -1) >= 0 && jget(d, "checksum_errors"),
			"stats fields");
		for (size_t k = 0; k < jlen(ops); k++) {
			struct jv *op = jat(ops, k);

			if (strcmp(jstr(jget(op, "method")), "chunk_write") != 0 ||
			    jnum(jget(op, "count"), 0) == 0)
				continue;
			REQUIRE(jnum(jget(jget(op, "latency_us"), "p50"), -1) > 0 &&
					jnum(jget(jget(op, "latency_us"), "p99"), -1) >=
						jnum(jget(jget(op, "latency_us"), "p50"), -1),
				"chunk_write percentiles");
		}
	}
	REQUIRE(sum_written == written, "stats: %" PRIu64 " bytes written, %" PRIu64 " expected",
		sum_written, written);
	json_free(v);

	/* one daemon, by UUID prefix and by address */
	snprintf(prefix, sizeof(prefix), "%.8s", daemons[2].uuid_text);
	REQUIRE(ctl("--json", "stats", prefix, NULL) == 0, "stats PREFIX");
	v = ctl_json();
	REQUIRE(jlen(jget(v, "daemons")) == 1 &&
			strcmp(jstr(jget(jat(jget(v, "daemons"), 0), "uuid")),
			       daemons[2].uuid_text) == 0,
		"stats of one daemon by prefix");
	json_free(v);
	/* an address without its scheme */
	REQUIRE(ctl("--json", "stats", strstr(daemons[3].uri, "://") + 3, NULL) == 0,
		"stats ADDRESS");
	v = ctl_json();
	REQUIRE(strcmp(jstr(jget(jat(jget(v, "daemons"), 0), "uuid")), daemons[3].uuid_text) == 0,
		"stats by address");
	json_free(v);

	/* usage and configuration errors: 2 */
	REQUIRE(ctl("stats", "zzzz", NULL, NULL) == 2, "unknown daemon");
	REQUIRE(strstr(ctl_errbuf, "zzzz"), "names the daemon asked for: %s", ctl_errbuf);
	REQUIRE(ctl("stats", "", NULL, NULL) == 2, "empty daemon name");
	REQUIRE(ctl("frobnicate", NULL, NULL, NULL) == 2, "unknown command");
	REQUIRE(ctl("fsck", "--force", NULL, NULL) == 2, "a flag of another command");
	REQUIRE(ctl("--timeout", "0", "status", NULL) == 2, "bad timeout");
	REQUIRE(ctl("drain", NULL, NULL, NULL) == 2, "drain without a daemon");
	{
		const char *args[] = {"-m", daemons[0].uri, "-s", "/nonexistent/secret", "status",
				      NULL};

		REQUIRE(run_ctl_env(args, environ, ctl_out, ctl_errbuf) == 2, "missing secret");
		REQUIRE(strstr(ctl_errbuf, "/nonexistent/secret"), "names the secret file");
	}
	{
		char wrong[sizeof(work_dir) + 32];
		const char *args[] = {"-m", daemons[0].uri, "-s", wrong, "status", NULL};

		snprintf(wrong, sizeof(wrong), "%s/wrong-secret", work_dir);
		f = fopen(wrong, "w");
		REQUIRE(f, "wrong secret file");
		fputs("not the cluster secret\n", f);
		fclose(f);
		/* readable by others: refused before any connection, as ssh refuses a key */
		if (chmod(wrong, 0644))
			check_error("chmod 644 %s: %s", wrong, strerror(errno));
		REQUIRE(run_ctl_env(args, environ, ctl_out, ctl_errbuf) == 2, "secret mode 0644");
		REQUIRE(strstr(ctl_errbuf, "accessible by others (mode 0644): chmod 600"),
			"says the secret file is too open: %s", ctl_errbuf);
		/* 0600: read, sent, and refused by the cluster */
		if (chmod(wrong, 0600))
			check_error("chmod 600 %s: %s", wrong, strerror(errno));
		REQUIRE(run_ctl_env(args, environ, ctl_out, ctl_errbuf) == 2, "wrong secret");
		REQUIRE(strstr(ctl_errbuf, "secret") && !strstr(ctl_errbuf, "accessible"),
			"says the secret was refused: %s", ctl_errbuf);
	}

	/* the metadata service unreachable: 3, naming the address */
	{
		const char *args[] = {"-m", "tcp://127.0.0.1:1", "-s", secret_path, "status", NULL};

		REQUIRE(run_ctl_env(args, environ, ctl_out, ctl_errbuf) == 3,
			"unreachable service");
		REQUIRE(strstr(ctl_errbuf, "tcp://127.0.0.1:1") && strstr(ctl_errbuf, "refused"),
			"message names the address and the error: %s", ctl_errbuf);
	}

	/* the config file, then the environment over it, then flags over both */
	snprintf(cfg_path, sizeof(cfg_path), "%s/client.conf", work_dir);
	f = fopen(cfg_path, "w");
	REQUIRE(f, "config file");
	fprintf(f,
		"[client]\nmeta = %s\nsecret_file = %s\n[rdmafs-fuse]\nanything = else\n"
		"[rdmafsctl]\ntimeout = 5\n",
		daemons[0].uri, secret_path);
	fclose(f);
	{
		const char *args[] = {"--config", cfg_path, "--json", "daemons", NULL};
		const char *args_flag[] = {"--config",	   cfg_path,  "-m",
					   daemons[0].uri, "daemons", NULL};
		char **e = env;

		snprintf(bad_meta, sizeof(bad_meta), "RDMAFS_META=tcp://127.0.0.1:1");
		env[n_env++] = "PATH=/usr/bin:/bin";
		env[n_env] = NULL;
		REQUIRE(run_ctl_env(args, e, ctl_out, ctl_errbuf) == 0, "config file: %s",
			ctl_errbuf);
		env[n_env++] = bad_meta;
		env[n_env] = NULL;
		REQUIRE(run_ctl_env(args, e, ctl_out, ctl_errbuf) == 3,
			"RDMAFS_META wins over the file");
		REQUIRE(run_ctl_env(args_flag, e, ctl_out, ctl_errbuf) == 0,
			"-m wins over RDMAFS_META");
	}
	f = fopen(cfg_path, "w");
	REQUIRE(f, "config file");
	fputs("[client]\nmetta = tcp://x:1\n", f);
	fclose(f);
	{
		const char *args[] = {"--config", cfg_path, "status", NULL};

		REQUIRE(run_ctl_env(args, environ, ctl_out, ctl_errbuf) == 2, "unknown config key");
		REQUIRE(strstr(ctl_errbuf, "metta") && strstr(ctl_errbuf, "client.conf:2:"),
			"names the bad key and its line: %s", ctl_errbuf);
	}
	{
		const char *args[] = {"--help", NULL};

		REQUIRE(run_ctl_env(args, environ, ctl_out, ctl_errbuf) == 0 &&
				strstr(ctl_out, "drain") && strstr(ctl_out, "fsck"),
			"--help");
	}

	/* a daemon down: stats still reports the others, exits 3 and names it */
	kill_daemon(&daemons[3]);
	REQUIRE(ctl("stats", NULL, NULL, NULL) == 3, "stats with a daemon down");
	REQUIRE(strstr(ctl_errbuf, daemons[3].uri), "names the daemon's address: %s", ctl_errbuf);
	REQUIRE(strstr(ctl_out, daemons[1].uuid_text), "still reports the others");
}

/* ---- drain ---- */

struct reader {
	pthread_t thread;
	volatile bool stop;
	uint64_t reads_stale, reads_fresh, reads_refetched, passes;
	int error;
	char why[256];
};

/*
 * Reads every file again and again, alternating the layout it had when it
 * was written (a client that opened it before the drain) and the current
 * one (a client that opens it now), and checks every byte. The drained
 * daemon refuses a layout the drain replaced (-ESTALE): the reader then
 * does what the client core does, refetching the layout until the drain has
 * switched it (bounded) and reading again.
 */
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint8_t *buf = malloc(1u << 20);

	if (!buf) {
		r->error = -ENOMEM;
		return NULL;
	}
	while (!r->stop && !r->error) {
		for (size_t i = 0; i < file_count && !r->error; i++) {
			struct file fresh;
			bool use_fresh = (r->passes + i) % 2;
			int ret;

			if (use_fresh)
				fresh_layout(&files[i], &fresh);
			ret = verify_file(use_fresh ? &fresh : &files[i], buf, r->why,
					  sizeof(r->why));
			for (int wait = 0; ret == -ESTALE && wait < 1000; wait++) {
				usleep(10000);
				fresh_layout(&files[i], &fresh);
				ret = verify_file(&fresh, buf, r->why, sizeof(r->why));
				if (!ret)
					r->reads_refetched++;
			}
			if (ret)
				r->error = ret;
			else if (use_fresh)
				r->reads_fresh++;
			else
				r->reads_stale++;
		}
		r->passes++;
	}
	free(buf);
	return NULL;
}

/*
 * After the drain the drained daemon refuses chunk I/O through every file's
 * old layout (-ESTALE) and serves the generation the drain installed.
 */
static void check_fenced(struct cluster_daemon *victim)
{
	uint8_t *buf = malloc(1u << 20);
	size_t checked = 0;

	REQUIRE(buf, "out of memory");
	for (size_t i = 0; i < file_count; i++) {
		const struct file *f = &files[i];
		struct file fresh;
		uint32_t got;

		fresh_layout(f, &fresh);
		for (uint64_t idx = 0; idx * f->chunk_size < f->size; idx++) {
			if (placed(f, idx) != victim || idx == f->hole)
				continue;
			REQUIRE(fresh.generation == f->generation + 1,
				"%s: layout generation %" PRIu64 " after the drain, was %" PRIu64,
				f->name, fresh.generation, f->generation);
			REQUIRE(rfs_chunk_read(victim->client,
					       (struct rfs_chunk_id){f->ino, idx, f->generation}, 0,
					       buf, f->chunk_size, &got, NULL) == -ESTALE,
				"%s chunk %" PRIu64 ": the drained daemon serves the old layout",
				f->name, idx);
			REQUIRE(rfs_chunk_read(victim->client,
					       (struct rfs_chunk_id){f->ino, idx, fresh.generation},
					       0, buf, f->chunk_size, &got, NULL) == 0,
				"%s chunk %" PRIu64 ": the new generation is refused", f->name,
				idx);
			checked++;
			break;
		}
	}
	REQUIRE(checked > 0, "no file had a chunk on the drained daemon");
	free(buf);
}

/* status --json until its exit status is @want (bounded); returns the parsed JSON. */
static struct jv *status_until(int want, const char *what)
{
	uint64_t deadline = rdmafs_now_ms() + 120000;
	int rc;

	while ((rc = ctl("--json", "status", NULL, NULL)) != want) {
		REQUIRE(rc == 0 || rc == 1 || rc == 5,
			"status exited %d while waiting for %s:\n%s%s", rc, what, ctl_out,
			ctl_errbuf);
		REQUIRE(rdmafs_now_ms() < deadline,
			"status still exits %d, not %d, after 120 s "
			"waiting for %s:\n%s",
			rc, want, what, ctl_out);
		usleep(200000);
	}
	return ctl_json();
}

/*
 * Health: OK with every daemon up; ERROR naming the daemon that is down;
 * OK again when it returns. Capacity: what the daemons store adds up to what
 * was written, and the one disk they share counts once (in status and in
 * STATFS, which is df on a mount).
 */
static void test_health(void)
{
	Rdmafs__StatfsReq sreq = RDMAFS__STATFS_REQ__INIT;
	Rdmafs__StatfsResp *sf;
	struct cluster_daemon *victim = &daemons[2];
	uint64_t written = 0, deadline, max_cap = 0, stored;
	const char *disk;
	struct jv *v, *ds;
	char want[128];

	write_files();
	for (size_t i = 0; i < file_count; i++)
		written += files[i].size - (files[i].hole != UINT64_MAX ? files[i].chunk_size : 0);

	/* every chunk byte written, counted by the daemons that store it */
	deadline = rdmafs_now_ms() + 120000;
	for (;;) {
		v = status_until(0, "every daemon up");
		stored = (uint64_t)jnum(jget(v, "stored_bytes"), 0);
		if (stored == written)
			break;
		REQUIRE(rdmafs_now_ms() < deadline,
			"status says %" PRIu64 " bytes stored, %" PRIu64 " were written", stored,
			written);
		json_free(v);
		usleep(500000);
	}
	/* the test's daemons share one file system: one disk, counted once */
	ds = jget(v, "daemons");
	disk = jstr(jget(jat(ds, 0), "disk_id"));
	REQUIRE(disk && disk[0], "a disk id");
	for (size_t i = 0; i < jlen(ds); i++) {
		REQUIRE(strcmp(jstr(jget(jat(ds, i), "disk_id")), disk) == 0,
			"daemons on one file system with different disk ids:\n%s", ctl_out);
		if (jnum(jget(jat(ds, i), "capacity_bytes"), 0) > (double)max_cap)
			max_cap = (uint64_t)jnum(jget(jat(ds, i), "capacity_bytes"), 0);
	}
	REQUIRE(jnum(jget(v, "disks"), 0) == 1, "disks: %s", ctl_out);
	/* the sum would be 4 times one daemon's; writes between heartbeats move it a little */
	REQUIRE(jnum(jget(v, "capacity_bytes"), 0) < 1.5 * (double)max_cap,
		"status counts the shared disk more than once:\n%s", ctl_out);
	json_free(v);
	REQUIRE(meta_call(RDMAFS__METHOD__METHOD_STATFS, &sreq.base,
			  &rdmafs__statfs_resp__descriptor, (ProtobufCMessage **)&sf) == 0,
		"STATFS");
	REQUIRE((double)sf->blocks * sf->frsize < 1.5 * (double)max_cap &&
			(double)sf->blocks * sf->frsize > 0.5 * (double)max_cap,
		"STATFS counts %" PRIu64 " bytes for a disk of at most %" PRIu64,
		sf->blocks * sf->frsize, max_cap);
	rdmafs__statfs_resp__free_unpacked(sf, NULL);

	/* a daemon down: ERROR, exit 5, the daemon named */
	kill_daemon(victim);
	v = status_until(5, "the killed daemon marked down");
	snprintf(want, sizeof(want), "down: %s (", victim->name);
	REQUIRE(strcmp(jstr(jget(jget(v, "health"), "status")), "ERROR") == 0 &&
			strstr(jstr(jat(jget(jget(v, "health"), "reasons"), 0)), want),
		"health with %s down:\n%s", victim->name, ctl_out);
	json_free(v);
	REQUIRE(ctl("status", NULL, NULL, NULL) == 5, "status text with a daemon down");
	REQUIRE(strncmp(ctl_out, "health: ERROR\n", 14) == 0 && strstr(ctl_out, want),
		"status text with %s down:\n%s", victim->name, ctl_out);

	/* back: OK again */
	REQUIRE(test_cluster_ctl(&cluster, "start", victim->name, NULL) == 0, "restart %s",
		victim->name);
	v = status_until(0, "the daemon back up");
	REQUIRE(strcmp(jstr(jget(jget(v, "health"), "status")), "OK") == 0, "health: %s", ctl_out);
	json_free(v);
}

static void test_drain(void)
{
	struct cluster_daemon *victim = &daemons[2];
	struct reader r = {0};
	uint64_t passes_before;
	struct jv *v;
	int rc;

	write_files();
	REQUIRE(daemon_chunks(victim) > 0, "the daemon to drain holds no chunk: nothing to test");

	/* remove refuses a daemon that is not drained */
	REQUIRE(ctl("remove", victim->uuid_text, NULL, NULL) == 4, "remove before drain: %s",
		ctl_errbuf);
	REQUIRE(strstr(ctl_errbuf, "drain"), "says to drain first: %s", ctl_errbuf);
	REQUIRE(ctl("--json", "drain", "--status", victim->uuid_text) == 0, "drain --status");
	v = ctl_json();
	REQUIRE(strcmp(jstr(jget(v, "state")), "up") == 0 && jget(v, "removable") &&
			!jget(v, "removable")->b,
		"drain --status before the drain");
	json_free(v);

	REQUIRE(pthread_create(&r.thread, NULL, reader_main, &r) == 0, "reader thread");
	while (r.passes < 2 && !r.error)
		usleep(10000);

	rc = ctl("--json", "drain", "--wait", victim->uuid_text);
	v = rc == 0 ? ctl_json() : NULL;
	REQUIRE(rc == 0, "drain exit %d: %s", rc, ctl_errbuf);
	REQUIRE(strstr(ctl_errbuf, "files to move"), "--wait prints progress: %s", ctl_errbuf);
	REQUIRE(jget(v, "removable") && jget(v, "removable")->b, "drain: not removable");
	REQUIRE(jnum(jget(v, "files_moved"), 0) > 0 && jnum(jget(v, "chunks_moved"), 0) > 0,
		"drain moved nothing");
	REQUIRE(jnum(jget(v, "files_failed"), 1) == 0, "drain: files failed");
	json_free(v);

	/* the reader keeps going a full pass on the new layouts, still correct */
	passes_before = r.passes;
	while (r.passes < passes_before + 3 && !r.error)
		usleep(10000);
	r.stop = true;
	pthread_join(r.thread, NULL);
	REQUIRE(r.error == 0, "reader during the drain: %s", r.why);
	REQUIRE(r.reads_stale > 0 && r.reads_fresh > 0, "the reader read with both layouts");
	check_fenced(victim);

	/* drained and not yet removed: DEGRADED, exit 1 */
	REQUIRE(ctl("--json", "status", NULL, NULL) == 1, "status after the drain");
	v = ctl_json();
	REQUIRE(strcmp(jstr(jget(jget(v, "health"), "status")), "DEGRADED") == 0,
		"health after the drain: %s", ctl_out);
	for (size_t i = 0; i < jlen(jget(v, "daemons")); i++) {
		struct jv *d = jat(jget(v, "daemons"), i);

		if (strcmp(jstr(jget(d, "uuid")), victim->uuid_text) != 0)
			continue;
		REQUIRE(strcmp(jstr(jget(d, "state")), "draining") == 0 && jget(d, "drained") &&
				jget(d, "drained")->b,
			"status shows the daemon drained");
	}
	json_free(v);
	REQUIRE(ctl("status", NULL, NULL, NULL) == 1 && strstr(ctl_out, "drained") &&
			strncmp(ctl_out, "health: DEGRADED\n", 17) == 0,
		"status text says drained:\n%s", ctl_out);

	/* no file needs the daemon any more: stop it and read everything */
	kill_daemon(victim);
	verify_all_fresh(victim->uuid);

	REQUIRE(ctl("remove", victim->uuid_text, NULL, NULL) == 0, "remove: %s", ctl_errbuf);
	/* the map forgets a removed daemon */
	REQUIRE(ctl("--json", "daemons", NULL, NULL) == 0, "daemons after remove");
	v = ctl_json();
	REQUIRE(jlen(jget(v, "daemons")) == DAEMONS - 1, "daemons after remove: %zu listed",
		jlen(jget(v, "daemons")));
	for (size_t i = 0; i < jlen(jget(v, "daemons")); i++)
		REQUIRE(strcmp(jstr(jget(jat(jget(v, "daemons"), i), "uuid")), victim->uuid_text) !=
				0,
			"the removed daemon is still listed");
	json_free(v);
	/* new files go to the others; the whole filesystem checks clean */
	write_file("after-remove", 3u << 20, UINT64_MAX);
	verify_all_fresh(victim->uuid);
	REQUIRE(ctl("fsck", NULL, NULL, NULL) == 0, "fsck after drain and remove: %s\n%s",
		ctl_errbuf, ctl_out);
	/* a forced remove of a daemon in use makes fsck report lost files */
	REQUIRE(ctl("--json", "remove", "--force", daemons[1].uuid_text) == 0, "remove --force");
	REQUIRE(ctl("--json", "fsck", NULL, NULL) == 1, "fsck after a forced remove");
	v = ctl_json();
	REQUIRE(jnum(jget(v, "lost_count"), 0) > 0, "fsck reports lost files");
	json_free(v);
}

/* ---- scrub ---- */

static void corrupt_chunk(struct cluster_daemon *d, uint64_t ino, uint64_t index)
{
	char path[600];
	uint8_t byte;
	int fd;

	snprintf(path, sizeof(path), "%s/chunks/%016" PRIx64 "/%016" PRIx64, d->data_dir, ino,
		 index);
	fd = open(path, O_RDWR);
	REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
	REQUIRE(pread(fd, &byte, 1, 100) == 1, "read %s", path);
	byte ^= 0x5a;
	REQUIRE(pwrite(fd, &byte, 1, 100) == 1, "write %s", path);
	REQUIRE(fsync(fd) == 0, "fsync");
	close(fd);
}

static void test_scrub(void)
{
	const struct file *f;
	struct cluster_daemon *bad, *good = NULL;
	struct jv *v, *ds;
	char prefix[9], path[40];
	uint64_t found = 0;
	int rc;

	write_files();
	/* a clean cluster scrubs clean */
	REQUIRE(ctl("scrub", NULL, NULL, NULL) == 0, "scrub of a clean cluster: %s\n%s", ctl_errbuf,
		ctl_out);

	f = &files[5];
	bad = placed(f, 0);
	corrupt_chunk(bad, f->ino, 0);
	for (int i = 0; i < DAEMONS; i++)
		if (&daemons[i] != bad)
			good = &daemons[i];

	rc = ctl("scrub", NULL, NULL, NULL);
	REQUIRE(rc == 1, "scrub with a corrupted chunk exits %d:\n%s%s", rc, ctl_out, ctl_errbuf);
	REQUIRE(strstr(ctl_out, bad->uuid_text) && strstr(ctl_out, "checksum mismatch"),
		"scrub names the daemon and the damage:\n%s", ctl_out);
	snprintf(path, sizeof(path), "/%s", f->name);
	REQUIRE(strstr(ctl_out, path), "scrub names the damaged file %s:\n%s", path, ctl_out);

	REQUIRE(ctl("--json", "scrub", NULL, NULL) == 1, "scrub --json");
	v = ctl_json();
	REQUIRE(jnum(jget(v, "bad_total"), 0) == 1, "one bad chunk, not %g",
		jnum(jget(v, "bad_total"), 0));
	ds = jget(v, "daemons");
	for (size_t i = 0; i < jlen(ds); i++) {
		struct jv *d = jat(ds, i);

		REQUIRE(strcmp(jstr(jget(d, "state")), "done") == 0, "scrub state");
		REQUIRE(jnum(jget(d, "chunks_checked"), -1) == jnum(jget(d, "chunks_total"), -2),
			"every chunk checked");
		for (size_t k = 0; k < jlen(jget(d, "bad")); k++) {
			struct jv *b = jat(jget(d, "bad"), k);

			REQUIRE(strcmp(jstr(jget(d, "uuid")), bad->uuid_text) == 0, "bad on %s",
				jstr(jget(d, "uuid")));
			REQUIRE((uint64_t)jnum(jget(b, "inode"), 0) == f->ino &&
					jnum(jget(b, "index"), -1) == 0 &&
					jnum(jget(b, "block"), -1) == 0 &&
					strcmp(jstr(jget(b, "error")), "checksum mismatch") == 0,
				"the bad chunk's identity");
			REQUIRE(strcmp(jstr(jget(b, "path")), path) == 0, "the bad chunk's path %s",
				jstr(jget(b, "path")));
			found++;
		}
	}
	REQUIRE(found == 1, "%" PRIu64 " bad chunks listed", found);
	json_free(v);

	/* one daemon at a time: the damaged one fails, a clean one passes */
	snprintf(prefix, sizeof(prefix), "%.8s", bad->uuid_text);
	REQUIRE(ctl("scrub", prefix, NULL, NULL) == 1, "scrub of the damaged daemon");
	REQUIRE(ctl("scrub", good->uuid_text, NULL, NULL) == 0, "scrub of a clean daemon");
	REQUIRE(ctl("scrub", "--status", prefix, NULL) == 1, "scrub --status keeps the result");
	REQUIRE(ctl("--json", "stats", prefix, NULL) == 0, "stats");
	v = ctl_json();
	REQUIRE(jnum(jget(jat(jget(v, "daemons"), 0), "checksum_errors"), 0) >= 1,
		"the damage counts in checksum_errors");
	json_free(v);
	/* fsck reports what the scrub found */
	REQUIRE(ctl("--json", "fsck", NULL, NULL) == 1, "fsck with a bad chunk");
	v = ctl_json();
	REQUIRE(jnum(jget(v, "bad_count"), 0) == 1 && jnum(jget(v, "orphan_count"), -1) == 0,
		"fsck: bad 1, no orphans");
	REQUIRE(strcmp(jstr(jget(jat(jget(v, "bad"), 0), "path")), path) == 0,
		"fsck names the file of the bad chunk");
	json_free(v);
}

/* ---- fsck ---- */

static bool chunk_exists(struct cluster_daemon *d, uint64_t ino, uint64_t index)
{
	struct rfs_chunk_state st;

	REQUIRE(rfs_chunk_stat(d->client, (struct rfs_chunk_id){ino, index}, &st) == 0, "stat");
	return st.exists;
}

static void test_fsck(void)
{
	static const uint8_t junk[5000] = {1, 2, 3};
	const uint64_t no_ino = 987654321;
	const struct file *small;
	struct cluster_daemon *d1, *d2;
	struct jv *v, *orphans;
	bool seen_no_inode = false, seen_eof = false;
	int rc;

	write_files();
	REQUIRE(ctl("fsck", NULL, NULL, NULL) == 0, "fsck of a clean cluster: %s\n%s", ctl_errbuf,
		ctl_out);
	REQUIRE(ctl("--json", "fsck", NULL, NULL) == 0, "fsck --json");
	v = ctl_json();
	REQUIRE(jnum(jget(v, "orphan_count"), -1) == 0 && jnum(jget(v, "lost_count"), -1) == 0,
		"clean");
	/* the sparse file's unwritten chunk is a hole, not damage */
	REQUIRE(jnum(jget(v, "holes"), 0) >= 1, "holes counted");
	REQUIRE(jnum(jget(v, "files"), 0) == (double)file_count, "files counted");
	json_free(v);

	/* an orphan of no inode, and one past the end of a closed file */
	d1 = &daemons[1];
	REQUIRE(rfs_chunk_write(d1->client, (struct rfs_chunk_id){no_ino, 0}, 1u << 20, 0, junk,
				sizeof(junk), true, NULL) == 0,
		"write an orphan");
	small = &files[1];
	d2 = placed(small, 7);
	REQUIRE(rfs_chunk_write(d2->client, (struct rfs_chunk_id){small->ino, 7}, small->chunk_size,
				0, junk, sizeof(junk), true, NULL) == 0,
		"write past the end");

	rc = ctl("fsck", NULL, NULL, NULL);
	REQUIRE(rc == 1, "fsck with orphans exits %d:\n%s%s", rc, ctl_out, ctl_errbuf);
	REQUIRE(strstr(ctl_out, "987654321") && strstr(ctl_out, "no such inode"),
		"fsck names the orphan:\n%s", ctl_out);
	REQUIRE(strstr(ctl_out, "/small") && strstr(ctl_out, "(no path: no such inode)"),
		"fsck names the file by path, or says why it cannot:\n%s", ctl_out);
	REQUIRE(ctl("--json", "fsck", NULL, NULL) == 1, "fsck --json with orphans");
	v = ctl_json();
	orphans = jget(v, "orphans");
	REQUIRE(jnum(jget(v, "orphan_count"), 0) == 2 && jlen(orphans) == 2, "two orphans");
	for (size_t i = 0; i < jlen(orphans); i++) {
		struct jv *o = jat(orphans, i);
		uint64_t ino = (uint64_t)jnum(jget(o, "inode"), 0);

		if (ino == no_ino)
			seen_no_inode = strcmp(jstr(jget(o, "daemon")), d1->uuid_text) == 0 &&
					strcmp(jstr(jget(o, "reason")), "no such inode") == 0 &&
					jget(o, "path") && jget(o, "path")->type == J_NULL &&
					strcmp(jstr(jget(o, "path_error")), "no such inode") == 0;
		if (ino == small->ino)
			seen_eof =
				jnum(jget(o, "index"), 0) == 7 &&
				strcmp(jstr(jget(o, "reason")), "past the end of the file") == 0 &&
				strcmp(jstr(jget(o, "path")), "/small") == 0;
		REQUIRE(jget(o, "removed") && !jget(o, "removed")->b,
			"not removed without --repair");
	}
	REQUIRE(seen_no_inode && seen_eof, "both orphans described");
	json_free(v);
	REQUIRE(chunk_exists(d1, no_ino, 0), "fsck without --repair removes nothing");

	REQUIRE(ctl("--json", "fsck", "--repair", NULL) == 0, "fsck --repair: %s", ctl_errbuf);
	v = ctl_json();
	REQUIRE(jnum(jget(v, "orphans_removed"), 0) == 2, "two orphans removed");
	json_free(v);
	REQUIRE(!chunk_exists(d1, no_ino, 0) && !chunk_exists(d2, small->ino, 7),
		"the orphans are gone");
	REQUIRE(ctl("fsck", NULL, NULL, NULL) == 0, "fsck after the repair:\n%s", ctl_out);
	verify_all_fresh(NULL);
}

/* ---- undrain, removed, down: a daemon's lifecycle ---- */

static const char *daemon_path; /* rdmafs-daemon, for the cases that start one */

static void set_state(struct cluster_daemon *d, Rdmafs__DaemonState state)
{
	Rdmafs__SetDaemonStateReq req = RDMAFS__SET_DAEMON_STATE_REQ__INIT;
	ProtobufCMessage *r;
	int ret;

	req.uuid.data = d->uuid;
	req.uuid.len = 16;
	req.state = state;
	ret = meta_call(RDMAFS__METHOD__METHOD_SET_DAEMON_STATE, &req.base,
			&rdmafs__set_daemon_state_resp__descriptor, &r);
	REQUIRE(ret == 0, "SET_DAEMON_STATE: %s", strerror(-ret));
	protobuf_c_message_free_unpacked(r, NULL);
}

/* Writes chunk @index of @f again (the same bytes) with layout generation @gen. */
static int rewrite_chunk(struct cluster_daemon *d, const struct file *f, uint64_t index,
			 uint64_t gen)
{
	uint64_t start = index * f->chunk_size;
	uint32_t len =
		(uint32_t)(f->size - start < f->chunk_size ? f->size - start : f->chunk_size);
	uint8_t *buf = malloc(f->chunk_size);
	int ret;

	REQUIRE(buf, "out of memory");
	for (uint32_t k = 0; k < len; k++)
		buf[k] = expected_byte(f, start + k);
	ret = rfs_chunk_write(d->client, (struct rfs_chunk_id){f->ino, index, gen}, f->chunk_size,
			      0, buf, len, true, NULL);
	free(buf);
	return ret;
}

/* The state `rdmafsctl --json status` shows for @d, "" if it does not list it. */
static const char *status_state(struct cluster_daemon *d, char *out, size_t len)
{
	struct jv *v;
	int rc = ctl("--json", "status", NULL, NULL);

	/* 1 and 5: DEGRADED and ERROR (a daemon down), the map printed all the same */
	REQUIRE(rc == 0 || rc == 1 || rc == 5, "status exited %d: %s", rc, ctl_errbuf);
	v = ctl_json();
	out[0] = '\0';
	for (size_t i = 0; i < jlen(jget(v, "daemons")); i++) {
		struct jv *e = jat(jget(v, "daemons"), i);

		if (strcmp(jstr(jget(e, "uuid")), d->uuid_text) == 0)
			snprintf(out, len, "%s", jstr(jget(e, "state")));
	}
	json_free(v);
	return out;
}

static void test_undrain(void)
{
	struct cluster_daemon *victim = &daemons[2];
	const struct file *fenced = NULL, *after;
	uint64_t fenced_index = 0;
	int skipped;
	char state[32];
	struct jv *v;
	int rc;

	write_files();
	REQUIRE(daemon_chunks(victim) > 0, "the daemon to drain holds no chunk: nothing to test");

	/* only a draining daemon can be undrained */
	REQUIRE(ctl("undrain", victim->uuid_text, NULL, NULL) == 4, "undrain of an up daemon");
	REQUIRE(strstr(ctl_errbuf, "not draining"), "says why: %s", ctl_errbuf);

	/*
	 * A drain killed between its fence and its layout switch: the daemon is
	 * draining and one file is fenced on it at generation + 1, which blocks
	 * every writer of the file that uses its (still current) layout.
	 */
	set_state(victim, RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING);
	for (size_t i = 0; i < file_count && !fenced; i++)
		if (chunk_on(&files[i], victim, &fenced_index))
			fenced = &files[i];
	REQUIRE(fenced, "no file has a chunk on the daemon");
	REQUIRE(rfs_chunk_fence(victim->client, fenced->ino, fenced->generation + 1, false, NULL) ==
			0,
		"fence");
	REQUIRE(rewrite_chunk(victim, fenced, fenced_index, fenced->generation) == -ESTALE,
		"the fence refuses the file's writers");

	rc = ctl("--json", "undrain", victim->uuid_text, NULL);
	REQUIRE(rc == 0, "undrain exits %d: %s", rc, ctl_errbuf);
	v = ctl_json();
	REQUIRE(strcmp(jstr(jget(v, "state")), "up") == 0 && jnum(jget(v, "files_kept"), 0) > 0,
		"undrain --json:\n%s", ctl_out);
	json_free(v);
	REQUIRE(strcmp(status_state(victim, state, sizeof(state)), "up") == 0,
		"status after undrain: %s", state);
	REQUIRE(rewrite_chunk(victim, fenced, fenced_index, fenced->generation) == 0,
		"the interrupted drain's fence is lifted: the file's writers go on");
	verify_all_fresh(NULL);

	/* a finished drain, then undrain: nothing lost, the stale copies go */
	rc = ctl("drain", "--wait", victim->uuid_text, NULL);
	REQUIRE(rc == 0, "drain exits %d: %s", rc, ctl_errbuf);
	REQUIRE(daemon_chunks(victim) > 0, "the drained daemon keeps its old copies until undrain");
	rc = ctl("undrain", victim->uuid_text, NULL, NULL);
	REQUIRE(rc == 0, "undrain exits %d: %s", rc, ctl_errbuf);
	REQUIRE(strstr(ctl_out, "up again"), "undrain says so:\n%s", ctl_out);
	REQUIRE(daemon_chunks(victim) == 0, "%" PRIu64 " stale chunks left on the daemon",
		daemon_chunks(victim));
	verify_all_fresh(victim->uuid);

	/* new files are placed on it again, and their chunks land there */
	skipped = write_file_onto("after-undrain", 8u << 20, victim);
	after = &files[file_count - 1];
	/* a layout as wide as the cluster names every daemon: the first new file had it */
	REQUIRE(skipped == 0 || after->width < DAEMONS,
		"%d new files' layouts of all %d daemons left the undrained daemon out", skipped,
		DAEMONS);
	REQUIRE(daemon_chunks(victim) > 0, "no chunk landed on the undrained daemon");
	verify_all_fresh(NULL);
	REQUIRE(ctl("fsck", NULL, NULL, NULL) == 0, "fsck after undrain: %s\n%s", ctl_errbuf,
		ctl_out);
}

/*
 * A rebalance killed between its fence and its layout switch leaves a file
 * fenced above its layout generation on every daemon of its layout, and its
 * writers wait; the next rebalance lifts those fences first, naming each.
 * (That it leaves a finished move's fences, at the file's generation, is
 * fs-rebalance's: its second rebalance lifts none.)
 */
static void test_rebalance(void)
{
	const struct file *fenced = NULL;
	uint64_t fenced_index = 0;
	char line[128];
	int rc;

	write_files();
	for (size_t i = 0; i < file_count && !fenced; i++)
		if (chunk_on(&files[i], placed(&files[i], 0), &fenced_index))
			fenced = &files[i];
	REQUIRE(fenced, "no file has a chunk 0");
	for (size_t i = 0; i < fenced->width; i++) {
		struct cluster_daemon *d = daemon_by_uuid(fenced->layout[i]);

		REQUIRE(rfs_chunk_fence(d->client, fenced->ino, fenced->generation + 1, false,
					NULL) == 0,
			"fence on %s", d->name);
	}
	REQUIRE(rewrite_chunk(placed(fenced, fenced_index), fenced, fenced_index,
			      fenced->generation) == -ESTALE,
		"the interrupted move's fence refuses the file's writers");

	rc = ctl("rebalance", NULL, NULL, NULL);
	REQUIRE(rc == 0, "rebalance exits %d: %s\n%s", rc, ctl_errbuf, ctl_out);
	snprintf(line, sizeof(line), "inode %" PRIu64 ": lifted the fence at generation %" PRIu64,
		 fenced->ino, fenced->generation + 1);
	REQUIRE(strstr(ctl_out, line), "rebalance names the fence it lifts:\n%s", ctl_out);
	snprintf(line, sizeof(line), "; %zu fences of interrupted moves lifted", fenced->width);
	REQUIRE(strstr(ctl_out, line), "rebalance lifts the %zu fences:\n%s", fenced->width,
		ctl_out);
	REQUIRE(rewrite_chunk(placed(fenced, fenced_index), fenced, fenced_index,
			      fenced->generation) == 0,
		"the file's writers go on");
	rc = ctl("rebalance", NULL, NULL, NULL);
	REQUIRE(rc == 0 && strstr(ctl_out, "; 0 fences of interrupted moves lifted"),
		"a second rebalance lifts nothing (exit %d):\n%s", rc, ctl_out);
	verify_all_fresh(NULL);
}

/* The pid cluster.sh recorded for daemon @d. */
static pid_t daemon_pid(const struct cluster_daemon *d)
{
	char path[sizeof(cluster.dir) + 32];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.pid", cluster.dir, d->name);
	f = fopen(path, "r");
	REQUIRE(f && fscanf(f, "%ld", &pid) == 1 && pid > 1, "pid of %s", d->name);
	fclose(f);
	return (pid_t)pid;
}

/* Whether file @path holds @text. */
static bool file_has(const char *path, const char *text)
{
	char *buf = malloc(OUT_MAX);
	bool found = false;
	ssize_t len;
	int fd = open(path, O_RDONLY);

	REQUIRE(buf, "out of memory");
	if (fd >= 0) {
		len = read(fd, buf, OUT_MAX - 1);
		buf[len > 0 ? len : 0] = '\0';
		found = strstr(buf, text) != NULL;
		close(fd);
	}
	free(buf);
	return found;
}

#define REMOVED_MESSAGE "was removed from the cluster (rdmafsctl remove)"

static void test_removed(void)
{
	struct cluster_daemon *victim = &daemons[3];
	char log[sizeof(cluster.dir) + 32], state[32], line_start[80];
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *map;
	pid_t pid = daemon_pid(victim), child;
	int rc, status;

	write_files();
	rc = ctl("drain", "--wait", victim->uuid_text, NULL);
	REQUIRE(rc == 0, "drain exits %d: %s", rc, ctl_errbuf);
	/* removed while it still runs */
	REQUIRE(ctl("remove", victim->uuid_text, NULL, NULL) == 0, "remove: %s", ctl_errbuf);

	/* the map forgets it: status, daemons and GET_CLUSTER_MAP */
	snprintf(line_start, sizeof(line_start), "\n%s ", victim->name);
	REQUIRE(ctl("status", NULL, NULL, NULL) == 0 && !strstr(ctl_out, line_start),
		"status still lists the removed daemon:\n%s", ctl_out);
	REQUIRE(status_state(victim, state, sizeof(state))[0] == '\0', "status --json lists it");
	REQUIRE(ctl("daemons", NULL, NULL, NULL) == 0 && !strstr(ctl_out, victim->uuid_text),
		"daemons still lists the removed daemon:\n%s", ctl_out);
	REQUIRE(meta_call(RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req.base,
			  &rdmafs__get_cluster_map_resp__descriptor,
			  (ProtobufCMessage **)&map) == 0,
		"GET_CLUSTER_MAP");
	REQUIRE(map->n_daemons == DAEMONS - 1, "the map lists %zu daemons", map->n_daemons);
	for (size_t i = 0; i < map->n_daemons; i++)
		REQUIRE(memcmp(map->daemons[i]->uuid.data, victim->uuid, 16) != 0,
			"the map lists the removed daemon");
	rdmafs__get_cluster_map_resp__free_unpacked(map, NULL);

	/* commands that name it say it was removed */
	REQUIRE(ctl("stats", victim->uuid_text, NULL, NULL) == 4 && strstr(ctl_errbuf, "removed"),
		"stats of a removed daemon: %s", ctl_errbuf);
	REQUIRE(ctl("undrain", victim->uuid_text, NULL, NULL) == 4 && strstr(ctl_errbuf, "removed"),
		"undrain of a removed daemon: %s", ctl_errbuf);
	REQUIRE(ctl("remove", victim->uuid_text, NULL, NULL) == 0 &&
			strstr(ctl_out, "already removed"),
		"remove again: %s", ctl_errbuf);

	/* the running daemon is told at its next heartbeat, says why and stops */
	for (int i = 0; i < 600 && kill(pid, 0) == 0; i++)
		usleep(100000);
	REQUIRE(kill(pid, 0) != 0, "the removed daemon still runs after a minute");
	snprintf(log, sizeof(log), "%s/%s.log", cluster.dir, victim->name);
	REQUIRE(file_has(log, REMOVED_MESSAGE), "its log does not say it was removed (%s)", log);

	/* started again, it is refused at once: it exits 3 with the message */
	{
		char err_path[sizeof(work_dir) + 32];
		const char *argv[] = {
			daemon_path, "--data-dir",     victim->data_dir, "--listen",
			victim->uri, "--secret-file",  secret_path,	 "--metadata",
			"no",	     "--metadata-uri", cluster.meta_uri, "--foreground",
			NULL};
		posix_spawn_file_actions_t fa;

		snprintf(err_path, sizeof(err_path), "%s/removed-daemon.log", work_dir);
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC,
						 0644);
		REQUIRE(posix_spawn(&child, daemon_path, &fa, NULL, (char **)argv, environ) == 0,
			"spawn %s", daemon_path);
		posix_spawn_file_actions_destroy(&fa);
		for (int i = 0; i < 600 && waitpid(child, &status, WNOHANG) == 0; i++)
			usleep(100000);
		if (kill(child, 0) == 0) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			REQUIRE(false,
				"the removed daemon, started again, still runs after a minute");
		}
		REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 3,
			"the removed daemon exited with status %d, not 3",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		REQUIRE(file_has(err_path, REMOVED_MESSAGE) && file_has(err_path, "data directory"),
			"it does not say it was removed (%s)", err_path);
	}
	/* nothing lost, nothing to repair */
	verify_all_fresh(victim->uuid);
	REQUIRE(ctl("fsck", NULL, NULL, NULL) == 0, "fsck after the removal: %s\n%s", ctl_errbuf,
		ctl_out);
}

/* The accept backlog of the listening TCP socket on @port (IPv4), -1 if none. */
static long listen_backlog(unsigned port)
{
	char line[512];
	long backlog = -1;
	FILE *f = fopen("/proc/net/tcp", "r");

	REQUIRE(f, "/proc/net/tcp");
	while (fgets(line, sizeof(line), f)) {
		unsigned local_port, st;
		unsigned long tx, rx;

		/* sl local_address rem_address st tx_queue:rx_queue ... */
		if (sscanf(line, " %*u: %*x:%x %*x:%*x %x %lx:%lx", &local_port, &st, &tx, &rx) ==
			    4 &&
		    local_port == port && st == 0x0a)
			backlog =
				(long)rx; /* a listener's rx_queue: connections not yet accepted */
	}
	fclose(f);
	return backlog;
}

static void wait_state(struct cluster_daemon *d, const char *want)
{
	char state[32];

	for (int i = 0; i < 1200; i++) {
		if (strcmp(status_state(d, state, sizeof(state)), want) == 0)
			return;
		usleep(100000);
	}
	REQUIRE(false, "%s is still %s, not %s, after two minutes", d->uri, state, want);
}

static void test_down(void)
{
	static const char *const commands[] = {"stats", "scrub", "fsck"};
	struct cluster_daemon *victim = &daemons[3];
	bool tcp = strncmp(victim->uri, "tcp://", 6) == 0;
	unsigned port = (unsigned)strtoul(strrchr(victim->uri, ':') + 1, NULL, 10);
	pid_t pid = daemon_pid(victim);
	struct jv *v, *ds;
	bool seen = false;

	write_files();
	/*
	 * Stopped, not killed: it heartbeats no more, so the map marks it down,
	 * but its socket still completes TCP handshakes. A command that tried
	 * it would leave a connection in its accept queue and then wait for a
	 * HELLO that never comes (its call timeout).
	 */
	REQUIRE(kill(pid, SIGSTOP) == 0, "SIGSTOP %s", victim->name);
	wait_state(victim, "down");
	REQUIRE(!tcp || listen_backlog(port) == 0, "a connection waits at %s already", victim->uri);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		int rc = ctl(commands[i], NULL, NULL, NULL);

		REQUIRE(rc == 3, "%s with a daemon down exits %d:\n%s%s", commands[i], rc, ctl_out,
			ctl_errbuf);
		REQUIRE(strstr(ctl_errbuf, victim->uuid_text) &&
				strstr(ctl_errbuf, "down in the cluster map") &&
				strstr(ctl_errbuf, "not contacted"),
			"%s does not say the daemon is down: %s", commands[i], ctl_errbuf);
		REQUIRE(!strstr(ctl_errbuf, "timed out") && !strstr(ctl_errbuf, "refused"),
			"%s tried the daemon: %s", commands[i], ctl_errbuf);
		REQUIRE(!tcp || listen_backlog(port) == 0,
			"%s connected to the daemon the map shows down", commands[i]);
	}
	/* the others are still reported */
	REQUIRE(ctl("--json", "stats", NULL, NULL) == 3, "stats --json");
	v = ctl_json();
	ds = jget(v, "daemons");
	REQUIRE(jlen(ds) == DAEMONS, "stats of %zu daemons", jlen(ds));
	for (size_t i = 0; i < jlen(ds); i++) {
		struct jv *d = jat(ds, i);

		if (strcmp(jstr(jget(d, "uuid")), victim->uuid_text) == 0) {
			REQUIRE(strcmp(jstr(jget(d, "error")),
				       "down in the cluster map: not contacted") == 0,
				"the down daemon's entry: %s", jstr(jget(d, "error")));
			seen = true;
		} else {
			REQUIRE(jget(d, "uptime_sec"), "stats of %s", jstr(jget(d, "uuid")));
		}
	}
	REQUIRE(seen, "stats --json leaves the down daemon out");
	json_free(v);

	/* back: heartbeats again, and every command reaches it */
	REQUIRE(kill(pid, SIGCONT) == 0, "SIGCONT %s", victim->name);
	wait_state(victim, "up");
	REQUIRE(ctl("stats", NULL, NULL, NULL) == 0, "stats after it came back: %s", ctl_errbuf);
	REQUIRE(ctl("fsck", NULL, NULL, NULL) == 0, "fsck after it came back: %s", ctl_errbuf);
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4)
		check_error(
			"usage: %s RDMAFSCTL cli|drain|scrub|fsck|health|undrain|rebalance|down "
			"[RDMAFS-DAEMON]"
			" (under tests/lib/cluster.sh); removed needs RDMAFS-DAEMON",
			argv[0]);
	ctl_path = argv[1];
	daemon_path = argc == 4 ? argv[3] : NULL;
	if (strcmp(argv[2], "removed") == 0 && !daemon_path)
		check_error("the removed case needs the rdmafs-daemon to start");
	check_test_name = argv[2];
	signal(SIGPIPE, SIG_IGN);
	cluster_start();
	if (strcmp(argv[2], "cli") == 0)
		test_cli();
	else if (strcmp(argv[2], "drain") == 0)
		test_drain();
	else if (strcmp(argv[2], "scrub") == 0)
		test_scrub();
	else if (strcmp(argv[2], "fsck") == 0)
		test_fsck();
	else if (strcmp(argv[2], "health") == 0)
		test_health();
	else if (strcmp(argv[2], "undrain") == 0)
		test_undrain();
	else if (strcmp(argv[2], "rebalance") == 0)
		test_rebalance();
	else if (strcmp(argv[2], "removed") == 0)
		test_removed();
	else if (strcmp(argv[2], "down") == 0)
		test_down();
	else
		check_error("unknown case %s", argv[2]);
	for (int i = 0; i < DAEMONS; i++)
		rfs_daemon_close(daemons[i].client);
	rfs_daemon_close(meta);
	free(secret);
	printf("%s %s\n", check_exit_status() ? "FAIL" : "PASS", argv[2]);
	return check_exit_status();
}
