/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bench-daemon: write and read throughput through rdmafs-daemon (tcp backend
 * unless told otherwise) beside fio with the io_uring engine on the same
 * directory in the same run. Not a test: it prints a table and JSON.
 *
 *   bench-daemon DAEMON_BINARY [tcp|rdma] [DIR]
 *
 * Workloads: 1 MiB and 4 KiB blocks, CLIENTS clients (one connection each),
 * sequential 1 MiB chunks / random 4 KiB blocks. fio runs the same block
 * sizes with numjobs = CLIENTS and --direct=1 (the daemon writes and reads
 * aligned blocks with O_DIRECT). Ratio = daemon / fio.
 * Environment: RDMAFS_BENCH_MB (data per client and workload, default 128).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "xprt.h"
#include "rdmafs_fs.h"
#include "harness.h"

#define CLIENTS 4
#define MiB	(1u << 20)

struct job {
	const struct daemon_proc *d;
	unsigned id;
	uint32_t bs;
	uint64_t bytes;
	bool write;
	int error;
};

static void *bench_thread(void *arg)
{
	struct job *j = arg;
	struct rfs_daemon *c = client_of(j->d, MiB);
	uint8_t *buf = malloc(MiB);
	uint64_t seed = 42 + j->id, count = j->bytes / j->bs, chunks = j->bytes / MiB;
	uint32_t bytes;

	fill_pattern(buf, MiB, j->id);
	for (uint64_t i = 0; i < count && !j->error; i++) {
		/* 1 MiB: chunk after chunk; 4 KiB: random blocks of the same chunks. */
		uint64_t index = j->bs == MiB ? i : rnd(&seed) % chunks;
		uint32_t off = j->bs == MiB ? 0 : (uint32_t)(rnd(&seed) % (MiB / j->bs)) * j->bs;
		struct rfs_chunk_id id = {1000 + j->id, index};

		if (j->write)
			j->error = rfs_chunk_write(c, id, MiB, off, buf, j->bs, false, NULL);
		else
			j->error = rfs_chunk_read(c, id, off, buf, j->bs, &bytes, NULL);
	}
	free(buf);
	rfs_daemon_close(c);
	return NULL;
}

static double run_daemon(const struct daemon_proc *d, uint32_t bs, bool write, uint64_t bytes)
{
	struct job jobs[CLIENTS];
	pthread_t t[CLIENTS];
	uint64_t start = harness_now_ms(), ms;

	for (unsigned i = 0; i < CLIENTS; i++) {
		jobs[i] = (struct job){.d = d, .id = i, .bs = bs, .bytes = bytes, .write = write};
		pthread_create(&t[i], NULL, bench_thread, &jobs[i]);
	}
	for (unsigned i = 0; i < CLIENTS; i++) {
		pthread_join(t[i], NULL);
		if (jobs[i].error) {
			fprintf(stderr, "client %u: %s\n", i, strerror(-jobs[i].error));
			return 0;
		}
	}
	ms = harness_now_ms() - start;
	return (double)bytes * CLIENTS / MiB / ((double)(ms ? ms : 1) / 1000.0);
}

/* Runs fio and returns its bandwidth in MiB/s (0 when it fails). */
static double run_fio(const char *dir, uint32_t bs, bool write, uint64_t bytes)
{
	char cmd[1024], line[4096];
	double bw = 0;
	bool in_section = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=bench --directory=%s --ioengine=io_uring --direct=1 --rw=%s"
		 " --bs=%u --size=%llu --numjobs=%u --iodepth=1 --runtime=15 --group_reporting"
		 " --output-format=json 2>/dev/null",
		 dir,
		 write ? (bs == MiB ? "write" : "randwrite") : (bs == MiB ? "read" : "randread"),
		 bs, (unsigned long long)bytes, CLIENTS);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	/* "read" : { ... "bw_bytes" : N ... }, "write" : { ... }: take the one we ran. */
	while (fgets(line, sizeof(line), p)) {
		char *q;

		if (strstr(line, write ? "\"write\" : {" : "\"read\" : {"))
			in_section = true;
		else if (strstr(line, write ? "\"read\" : {" : "\"write\" : {"))
			in_section = false;
		q = strstr(line, "\"bw_bytes\" : ");
		if (in_section && q && bw == 0)
			bw = strtod(q + 13, NULL) / MiB;
	}
	pclose(p);
	return bw;
}

int main(int argc, char **argv)
{
	static const struct {
		uint32_t bs;
		bool write;
		const char *name;
	} loads[] = {
		{MiB, true, "write 1 MiB"},
		{MiB, false, "read 1 MiB"},
		{4096, true, "write 4 KiB"},
		{4096, false, "read 4 KiB"},
	};
	const char *env = getenv("RDMAFS_BENCH_MB");
	uint64_t bytes = (uint64_t)(env ? strtoul(env, NULL, 10) : 128) * MiB;
	double daemon_bw[4], fio_bw[4];
	char data[400], fio_dir[400];
	struct daemon_proc d;

	if (argc < 2) {
		fprintf(stderr, "usage: bench-daemon DAEMON_BINARY [tcp|rdma] [DIR]\n");
		return 1;
	}
	harness_daemon_path = argv[1];
	harness_kind = argc > 2 ? argv[2] : "tcp";
	if (argc > 3)
		setenv("TMPDIR", argv[3], 1);
	if (bytes < MiB)
		bytes = MiB;
	signal(SIGPIPE, SIG_IGN);
	harness_require_kind();
	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	snprintf(data, sizeof(data), "%s/data", harness_dir());
	snprintf(fio_dir, sizeof(fio_dir), "%s/fio", harness_dir());
	mkdir(fio_dir, 0755);
	if (daemon_start(&d, data, NULL)) {
		fprintf(stderr, "cannot start the daemon\n");
		return 1;
	}
	for (unsigned i = 0; i < 4; i++) {
		/* 4 KiB reads and writes run a quarter of the data: they are slow. */
		uint64_t n = loads[i].bs == MiB ? bytes : bytes / 4;

		daemon_bw[i] =
			run_daemon(&d, loads[i].bs, loads[i].write, loads[i].bs == MiB ? bytes : n);
		/* fio's files must exist at full size before random I/O. */
		fio_bw[i] = run_fio(fio_dir, loads[i].bs, loads[i].write, bytes);
	}
	daemon_stop(&d, SIGTERM);

	printf("\nrdmafs-daemon over %s vs fio io_uring --direct=1, %u clients/jobs, %s\n",
	       harness_kind, CLIENTS, harness_dir());
	printf("%-14s %12s %12s %8s\n", "workload", "daemon MiB/s", "fio MiB/s", "ratio");
	for (unsigned i = 0; i < 4; i++)
		printf("%-14s %12.1f %12.1f %8.2f\n", loads[i].name, daemon_bw[i], fio_bw[i],
		       fio_bw[i] > 0 ? daemon_bw[i] / fio_bw[i] : 0);
	printf("{\"bench\":\"bench-daemon\",\"transport\":\"%s\",\"clients\":%u,\"results\":[",
	       harness_kind, CLIENTS);
	for (unsigned i = 0; i < 4; i++)
		printf("%s{\"workload\":\"%s\",\"daemon_mib_s\":%.1f,\"fio_mib_s\":%.1f,"
		       "\"ratio\":%.3f}",
		       i ? "," : "", loads[i].name, daemon_bw[i], fio_bw[i],
		       fio_bw[i] > 0 ? daemon_bw[i] / fio_bw[i] : 0);
	printf("]}\n");
	return 0;
}
