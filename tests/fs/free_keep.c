// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fs-free-keep: the client library's side of flush_before_free
 * (rfs_free_data(), rdmafs_fs.h), for unlink.sh. Through a client of its own
 * (RDMAFS_CLUSTER_META, RDMAFS_CLUSTER_SECRET: tests/lib/cluster.sh) it
 * unlinks PATH (a file with data, PATH relative to the root), says
 * "unlinked", waits for a line on stdin (meanwhile the caller may restart
 * the metadata service), then removes the freed file's data and says
 * "done". Whether the chunks went is the caller's to check.
 *
 *   fs-free-keep PATH
 * Exit: 0 done, 99 its own trouble (the unlink freed nothing, ...).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

static void trouble(const char *what, int err)
{
	fprintf(stderr, "fs-free-keep: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(99);
}

static struct rfs *open_service(void)
{
	const char *uri = getenv("RDMAFS_CLUSTER_META");
	const char *secret_file = getenv("RDMAFS_CLUSTER_SECRET");
	struct rfs_options o;
	struct rfs *fs;
	uint8_t *secret;
	size_t len;
	int ret;

	if (!uri || !secret_file)
		trouble("no cluster (run under tests/lib/cluster.sh)", EINVAL);
	ret = rdmafs_read_secret(secret_file, &secret, &len);
	if (ret)
		trouble(secret_file, ret);
	rfs_options_init(&o);
	o.meta_uri = uri;
	o.secret = secret;
	o.secret_len = len;
	o.name = "fs-free-keep";
	o.buf_count = 1; /* no data moves through it */
	ret = rfs_create(&o, &fs);
	free(secret);
	if (ret)
		trouble(uri, ret);
	return fs;
}

int main(int argc, char **argv)
{
	uint64_t parent = RFS_ROOT_INO;
	struct rfs_freed freed;
	struct rfs_entry e;
	char line[16], *path, *name, *next;
	struct rfs *fs;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: fs-free-keep PATH\n");
		return 2;
	}
	fs = open_service();
	path = argv[1];
	/* every component but the last is a directory to look up */
	for (name = path; (next = strchr(name, '/')); name = next + 1) {
		*next = '\0';
		ret = rfs_lookup(fs, NULL, parent, name, &e);
		if (ret)
			trouble(name, ret);
		parent = e.attr.st_ino;
	}
	ret = rfs_unlink(fs, NULL, parent, name, &freed, NULL);
	if (ret)
		trouble(name, ret);
	if (!freed.freed)
		trouble("the unlink freed no data (want a file with data, not open)", EINVAL);
	printf("unlinked\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		trouble("no line on stdin", EIO);
	rfs_free_data(fs, &freed);
	printf("done\n");
	fflush(stdout);
	rfs_destroy(fs);
	return 0;
}
