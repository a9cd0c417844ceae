/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "rdmafs_fs.h"
#include "harness.h"

/* Bounds of a start, as tests/lib/cluster.sh's (the guest runs ten times slower). */
#define PORT_WAIT_MS  60000
#define READY_WAIT_MS 120000
#define MAP_REPLY_MAX (64u << 10)

extern char **environ;

const char *harness_daemon_path;
const char *const *harness_daemon_wrap;
const char *harness_kind = "tcp";

static char scratch[256];

const char *harness_addr(void)
{
	/* rdma_cm cannot route 127.0.0.1 over soft-RoCE: the rdma-vm guest sets these. */
	const char *addr = getenv("RDMAFS_TEST_ADDR");

	if (!addr || !*addr)
		addr = getenv("RDMAFS_VM_RDMA_ADDR");
	return addr && *addr ? addr : "127.0.0.1";
}
static pid_t children[64];
static unsigned child_count;

uint64_t harness_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The clock of the cluster map's heartbeat stamps. */
static uint64_t unix_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

void fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 2654435761u + 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(rnd(&x) >> 24);
}

uint8_t stream_byte(uint64_t seed, uint64_t pos)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (pos * 0xbf58476d1ce4e5b9ull);

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return (uint8_t)x;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

void harness_cleanup(void)
{
	for (unsigned i = 0; i < child_count; i++) {
		if (children[i] > 0 && kill(children[i], SIGKILL) == 0)
			waitpid(children[i], NULL, 0);
		children[i] = 0;
	}
	if (scratch[0] && !getenv("RDMAFS_TEST_KEEP"))
		nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	scratch[0] = '\0';
}

const char *harness_dir(void)
{
	char path[256], secret_path[300];
	const char *base = getenv("TMPDIR");
	FILE *f;
	int fd;

	if (scratch[0])
		return scratch;
	snprintf(path, sizeof(path), "%s/rdmafs-daemon-test.XXXXXX", base ? base : "/tmp");
	if (!mkdtemp(path))
		check_error("mkdtemp %s: %s", path, strerror(errno));
	snprintf(scratch, sizeof(scratch), "%s", path);
	snprintf(secret_path, sizeof(secret_path), "%s/secret", scratch);
	/* 0600: the daemon refuses a secret file others may read */
	fd = open(secret_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f)
		check_error("cannot create %s: %s", secret_path, strerror(errno));
	fputs(SECRET "\n", f);
	fclose(f);
	atexit(harness_cleanup);
	return scratch;
}

void harness_require_kind(void)
{
	struct xprt_options o;
	struct xprt_ctx *ctx;
	bool rdma;

	if (strcmp(harness_kind, "tcp") == 0)
		return;
	if (strcmp(harness_kind, "rdma") != 0)
		check_error("unknown transport %s", harness_kind);
	xprt_options_init(&o);
	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	if (xprt_ctx_create(&o, &ctx))
		check_error("cannot create a transport context");
	rdma = xprt_ctx_has_rdma(ctx);
	xprt_ctx_destroy(ctx);
	if (!rdma)
		check_skip("no RDMA device (the rdma-vm suite runs this over soft-RoCE)");
}

static void print_log(const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	fprintf(stderr, "--- %s\n", path);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

/* Options for a handle on @uri with @buf_count buffers of @buf_size bytes and the test's secret. */
static void handle_options(struct rfs_daemon_options *o, const char *uri, uint32_t buf_size,
			   uint32_t buf_count)
{
	rfs_daemon_options_init(o);
	o->uri = uri;
	o->secret = SECRET;
	o->secret_len = strlen(SECRET);
	o->name = "daemon-test";
	o->buf_size = buf_size;
	o->buf_count = buf_count;
}

/*
 * Whether the cluster map @meta answers lists @uri up with a heartbeat at or
 * after @since_unix_ms: 0, -EAGAIN (not yet), -EOPNOTSUPP (@meta is no
 * metadata service), or the call's error.
 */
static int map_lists(struct rfs_daemon *meta, const char *uri, uint64_t since_unix_ms)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *map;
	uint8_t packed[16], *reply = malloc(MAP_REPLY_MAX);
	size_t reply_len;
	int ret;

	if (!reply)
		return -ENOMEM;
	ret = rfs_daemon_call_raw(meta, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, packed,
				  rdmafs__get_cluster_map_req__pack(&req, packed), reply,
				  MAP_REPLY_MAX, &reply_len);
	map = ret ? NULL : rdmafs__get_cluster_map_resp__unpack(NULL, reply_len, reply);
	free(reply);
	if (ret)
		return ret;
	if (!map)
		return -EBADMSG;
	ret = -EAGAIN;
	for (size_t i = 0; i < map->n_daemons; i++) {
		const Rdmafs__DaemonInfo *info = map->daemons[i];

		for (size_t k = 0; k < info->n_addresses; k++)
			if (strcmp(info->addresses[k], uri) == 0 &&
			    info->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP &&
			    info->last_heartbeat_unix_ms >= since_unix_ms)
				ret = 0;
	}
	rdmafs__get_cluster_map_resp__free_unpacked(map, NULL);
	return ret;
}

/*
 * tests/lib/cluster.sh's readiness check, for one daemon: it answers a
 * DAEMON_STATS itself, and the metadata service it registers with (@meta_uri,
 * or its own when NULL) lists it up with a heartbeat since @since_unix_ms (the
 * process just started registered, not one before it). A daemon that hosts
 * no metadata service and was given none is ready once it answers. The
 * handles are opened once and kept in *@self and *@meta between tries.
 * Returns 0, or a negative errno (-EAGAIN: not yet).
 */
static int daemon_ready(const struct daemon_proc *d, const char *meta_uri, uint64_t since_unix_ms,
			struct rfs_daemon **self, struct rfs_daemon **meta)
{
	struct rfs_daemon_options o;
	struct rfs_daemon_stats stats;
	int ret;

	handle_options(&o, d->uri, 4096, 1);
	if (!*self && (ret = rfs_daemon_open(&o, self)))
		return ret;
	ret = rfs_daemon_stats(*self, &stats);
	if (ret)
		return ret;
	if (!meta_uri) {
		ret = map_lists(*self, d->uri, since_unix_ms);
		return ret == -EOPNOTSUPP ? 0 : ret;
	}
	o.uri = meta_uri;
	if (!*meta && (ret = rfs_daemon_open(&o, meta)))
		return ret;
	return map_lists(*meta, d->uri, since_unix_ms);
}

/* The value following @flag in @extra, or NULL. */
static const char *extra_value(const char *const *extra, const char *flag)
{
	for (unsigned i = 0; extra && extra[i] && extra[i + 1]; i++)
		if (strcmp(extra[i], flag) == 0)
			return extra[i + 1];
	return NULL;
}

/* Reads the port the daemon wrote to @path; 0 while there is none yet. */
static unsigned port_read(const char *path)
{
	char text[32];
	unsigned port = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	if (fgets(text, sizeof(text), f))
		port = (unsigned)strtoul(text, NULL, 10);
	fclose(f);
	return port;
}

int daemon_start(struct daemon_proc *d, const char *data_dir, const char *const *extra)
{
	char listen[64], secret[300], port_file[300];
	const char *argv[40], *meta_uri = extra_value(extra, "--metadata-uri");
	struct rfs_daemon *self = NULL, *meta = NULL;
	posix_spawn_file_actions_t fa;
	uint64_t since = unix_now_ms(), deadline;
	unsigned n = 0;
	int status, ret;

	memset(d, 0, sizeof(*d));
	snprintf(d->data_dir, sizeof(d->data_dir), "%s", data_dir);
	snprintf(listen, sizeof(listen), "%s://%s:0", harness_kind, harness_addr());
	snprintf(secret, sizeof(secret), "%s/secret", harness_dir());
	snprintf(port_file, sizeof(port_file), "%s/port", harness_dir());
	snprintf(d->log_path, sizeof(d->log_path), "%s/daemon.log", harness_dir());
	unlink(port_file);
	for (unsigned i = 0; harness_daemon_wrap && harness_daemon_wrap[i] && i < 8; i++)
		argv[n++] = harness_daemon_wrap[i];
	argv[n++] = harness_daemon_path;
	argv[n++] = "--data-dir";
	argv[n++] = data_dir;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--secret-file";
	argv[n++] = secret;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	argv[n++] = "--foreground";
	for (unsigned i = 0; extra && extra[i] && n < 38; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, d->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (posix_spawnp(&d->pid, argv[0], &fa, NULL, (char **)argv, environ)) {
		posix_spawn_file_actions_destroy(&fa);
		perror("posix_spawn");
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	if (child_count < 64)
		children[child_count++] = d->pid;
	/* the port file, written once the daemon's first listener serves */
	for (deadline = harness_now_ms() + PORT_WAIT_MS; !(d->port = port_read(port_file));) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid)
			goto err_exited;
		if (harness_now_ms() > deadline) {
			fprintf(stderr, "rdmafs-daemon did not write its port file in %u s\n",
				PORT_WAIT_MS / 1000);
			goto err_log;
		}
		usleep(10000);
	}
	snprintf(d->uri, sizeof(d->uri), "%s://%s:%u", harness_kind, harness_addr(), d->port);
	/* then the answers cluster.sh waits for */
	for (deadline = harness_now_ms() + READY_WAIT_MS;; usleep(50000)) {
		ret = daemon_ready(d, meta_uri, since, &self, &meta);
		if (!ret)
			break;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid)
			goto err_exited;
		if (harness_now_ms() > deadline) {
			fprintf(stderr, "rdmafs-daemon at %s not ready after %u s: %s\n", d->uri,
				READY_WAIT_MS / 1000, strerror(-ret));
			goto err_log;
		}
	}
	rfs_daemon_close(meta);
	rfs_daemon_close(self);
	return 0;

err_exited:
	fprintf(stderr, "rdmafs-daemon exited early (status %d)\n", status);
	d->pid = 0;
err_log:
	rfs_daemon_close(meta);
	rfs_daemon_close(self);
	print_log(d->log_path);
	return -1;
}

int daemon_stop(struct daemon_proc *d, int sig)
{
	int status = -1;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	waitpid(d->pid, &status, 0);
	for (unsigned i = 0; i < child_count; i++)
		if (children[i] == d->pid)
			children[i] = 0;
	d->pid = 0;
	return status;
}

int daemon_run_capture(const char *const *args, char *err, size_t err_size)
{
	char path[300];
	posix_spawn_file_actions_t fa;
	const char *argv[40];
	unsigned n = 0;
	ssize_t len;
	pid_t pid;
	int status, fd;

	snprintf(path, sizeof(path), "%s/capture.err", harness_dir());
	argv[n++] = harness_daemon_path;
	for (unsigned i = 0; args[i] && n < 39; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, harness_daemon_path, &fa, NULL, (char **)argv, environ)) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	/* A daemon that wrongly starts would never exit: bound the wait. */
	for (uint64_t deadline = harness_now_ms() + 10000;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (harness_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			snprintf(err, err_size, "(daemon kept running)");
			return -2;
		}
		usleep(10000);
	}
	err[0] = '\0';
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		len = read(fd, err, err_size - 1);
		err[len > 0 ? len : 0] = '\0';
		close(fd);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct rfs *fs_of(const struct daemon_proc *d, uint32_t call_timeout_ms)
{
	struct rfs_options opts;
	struct rfs *fs;
	int ret;

	rfs_options_init(&opts);
	opts.meta_uri = d->uri;
	opts.secret = SECRET;
	opts.secret_len = strlen(SECRET);
	opts.transport = strcmp(harness_kind, "rdma") == 0 ? RFS_TRANSPORT_RDMA : RFS_TRANSPORT_TCP;
	if (call_timeout_ms)
		opts.call_timeout_ms = call_timeout_ms;
	ret = rfs_create(&opts, &fs);
	REQUIRE(ret == 0, "rfs_create on %s: %s", d->uri, strerror(-ret));
	return fs;
}

void fs_create_file(struct rfs *fs, const char *name, uint64_t *handle, struct rfs_entry *e)
{
	int ret = rfs_create_file(fs, NULL, RFS_ROOT_INO, name, 0644, 0, 0, O_RDWR | O_CREAT,
				  handle, NULL, e);

	REQUIRE(ret == 0, "CREATE %s: %s", name, strerror(-ret));
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: a client call hung (no answer within the test's bound)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

void harness_hang_guard(unsigned secs)
{
	signal(SIGALRM, on_alarm);
	alarm(secs);
}

void harness_client_test(int argc, char **argv, const char *name, unsigned hang_secs)
{
	if (argc != 3)
		check_error("usage: client-%s DAEMON_BINARY tcp|rdma", name);
	harness_daemon_path = argv[1];
	harness_kind = argv[2];
	check_test_name = name;
	harness_require_kind();
	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	harness_hang_guard(hang_secs);
}

struct rfs_daemon *client_of(const struct daemon_proc *d, uint32_t buf_size)
{
	struct rfs_daemon_options o;
	struct rfs_daemon *c;
	int ret;

	handle_options(&o, d->uri, buf_size, 4);
	o.call_timeout_ms = 20000;
	ret = rfs_daemon_open(&o, &c);
	REQUIRE(ret == 0, "connect to %s: %s", d->uri, strerror(-ret));
	return c;
}
