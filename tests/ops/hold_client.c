/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops-hold-client: a client that connects to every daemon of the cluster it
 * runs under (tests/lib/cluster.sh), as "ops-hold"; each answers a
 * DAEMON_STATS and refuses a CHUNK_TRUNCATE to a length no chunk may have
 * (-EINVAL, for the daemon's debug log). Then it prints "connected" and
 * waits to be killed: logs.sh kills it with SIGKILL, so it never closes,
 * and the daemons must log that it died. Exit 99 when it cannot get that
 * far (the test's own trouble).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"
#include "cluster.h"

static void trouble(const char *what, int err)
{
	fprintf(stderr, "ops-hold-client: %s: %s\n", what, strerror(-err));
	exit(99);
}

int main(void)
{
	struct rfs_daemon *handles[TEST_CLUSTER_MAX_DAEMONS] = {0};
	struct test_cluster cluster;
	struct rfs_daemon_options o;
	struct rfs_daemon_stats stats;
	struct rfs_chunk_id bad = {.inode = UINT64_MAX - 1, .generation = RFS_GENERATION_ADMIN};
	uint8_t *secret;
	size_t secret_len;
	int ret;

	ret = test_cluster_open(&cluster);
	if (ret)
		trouble("no cluster (run under tests/lib/cluster.sh)", ret);
	ret = rdmafs_read_secret(cluster.secret_path, &secret, &secret_len);
	if (ret)
		trouble(cluster.secret_path, ret);
	for (size_t i = 0; i < cluster.daemon_count; i++) {
		rfs_daemon_options_init(&o);
		o.uri = cluster.daemons[i].uri;
		o.secret = secret;
		o.secret_len = secret_len;
		o.name = "ops-hold";
		o.share = i ? handles[0] : NULL;
		ret = rfs_daemon_open(&o, &handles[i]);
		if (ret)
			trouble(cluster.daemons[i].uri, ret);
		/* answered: the daemon has our name and logged the connection */
		ret = rfs_daemon_stats(handles[i], &stats);
		if (ret)
			trouble(cluster.daemons[i].uri, ret);
		/* no chunk is 4 GiB: refused before the store is asked */
		ret = rfs_chunk_truncate(handles[i], bad, UINT32_MAX, NULL);
		if (ret != -EINVAL)
			trouble("a CHUNK_TRUNCATE to 4 GiB was not refused with EINVAL",
				ret ? ret : -EPROTO);
	}
	printf("connected\n");
	fflush(stdout);
	for (;;)
		pause();
}
