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
#include "rdmafs_fs.h"
#include "harness.h"

extern char **environ;

const char *harness_daemon_path;
const char *harness_kind = "tcp";

static char scratch[256];

const char *harness_addr(void)
{
	/* rdma_cm cannot route 127.0.0.1 over soft-RoCE: the rdma-vm guest sets this. */
	const char *addr = getenv("RDMAFS_TEST_ADDR");

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

int daemon_start(struct daemon_proc *d, const char *data_dir, const char *const *extra)
{
	char listen[64], secret[300], port_file[300], text[32];
	const char *argv[40];
	posix_spawn_file_actions_t fa;
	unsigned n = 0;
	int status;

	memset(d, 0, sizeof(*d));
	snprintf(d->data_dir, sizeof(d->data_dir), "%s", data_dir);
	snprintf(listen, sizeof(listen), "%s://%s:0", harness_kind, harness_addr());
	snprintf(secret, sizeof(secret), "%s/secret", harness_dir());
	snprintf(port_file, sizeof(port_file), "%s/port", harness_dir());
	snprintf(d->log_path, sizeof(d->log_path), "%s/daemon.log", harness_dir());
	unlink(port_file);
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
	if (posix_spawn(&d->pid, harness_daemon_path, &fa, NULL, (char **)argv, environ)) {
		posix_spawn_file_actions_destroy(&fa);
		perror("posix_spawn");
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	if (child_count < 64)
		children[child_count++] = d->pid;
	for (uint64_t deadline = harness_now_ms() + 20000; harness_now_ms() < deadline;) {
		FILE *f = fopen(port_file, "r");

		if (f) {
			if (fgets(text, sizeof(text), f)) {
				d->port = (unsigned)strtoul(text, NULL, 10);
				fclose(f);
				snprintf(d->uri, sizeof(d->uri), "%s://%s:%u", harness_kind,
					 harness_addr(), d->port);
				return 0;
			}
			fclose(f);
		}
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			fprintf(stderr, "rdmafs-daemon exited early (status %d)\n", status);
			print_log(d->log_path);
			d->pid = 0;
			return -1;
		}
		usleep(10000);
	}
	fprintf(stderr, "rdmafs-daemon did not write its port file in time\n");
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
	int ret = -EAGAIN;

	for (uint64_t end = harness_now_ms() + 20000; harness_now_ms() < end; usleep(100000)) {
		ret = rfs_create_file(fs, NULL, RFS_ROOT_INO, name, 0644, 0, 0, O_RDWR | O_CREAT,
				      handle, NULL, e);
		if (ret != -ENOSPC && ret != -EAGAIN && ret != -EIO)
			break;
	}
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

	rfs_daemon_options_init(&o);
	o.uri = d->uri;
	o.secret = SECRET;
	o.secret_len = strlen(SECRET);
	o.name = "daemon-test";
	o.buf_size = buf_size;
	o.buf_count = 4;
	o.call_timeout_ms = 20000;
	ret = rfs_daemon_open(&o, &c);
	REQUIRE(ret == 0, "connect to %s: %s", d->uri, strerror(-ret));
	return c;
}
