/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops-key-chunks KEYFILE ro|rw: what a storage daemon lets a keyed client do
 * with chunks, on every daemon of the cluster it runs under
 * (tests/lib/cluster.sh). A chunk of an inode no file has is written, read,
 * truncated and removed with the key: a read-only key gets EROFS for the
 * write, the truncate and the remove, and reads; a read-write key does all
 * four. Either way CHUNK_LIST, an administration method, is EPERM, and so are
 * a write marked forwarded along a chain (hop 1: only daemons forward, and a
 * forwarded write passes the file's fence) and a read, write, truncate or
 * remove with the administration's layout generation (RFS_GENERATION_ADMIN,
 * which passes fences: the tools' that move chunks); a read-only key gets
 * EROFS first for the changes. A CHUNK_RESYNC, by which only daemons hand
 * copies to a chain's head, is EPERM too.
 * Prints one line a daemon; exit 0 pass, 1 fail, 99 the test's own trouble.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmafs_fs.h"
#include "rdmafs_common.h"
#include "fs_client_i.h"
#include "cluster.h"

/* No file has this inode: nothing the test writes is anybody's data. */
#define PROBE_INODE (UINT64_MAX - 7)
#define CHUNK_SIZE  (1u << 20)

static int failures;

/* A CHUNK_WRITE of @data inline at hop 1, as a daemon forwards one along a chain. */
static int forwarded_write(struct rfs_daemon *d, const char *data, size_t len)
{
	Rdmafs__ChunkWriteReq req = RDMAFS__CHUNK_WRITE_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__ChunkWriteResp *resp = NULL;
	int ret;

	cid.inode = PROBE_INODE;
	req.chunk = &cid;
	req.length = (uint32_t)len;
	req.crc32c = rdmafs_crc32c(data, len);
	req.data.data = (uint8_t *)data;
	req.data.len = len;
	req.chunk_size = CHUNK_SIZE;
	req.layout_generation = RFS_GENERATION_ADMIN;
	req.hop = 1;
	ret = rfs_daemon_call(d, RDMAFS__METHOD__METHOD_CHUNK_WRITE, &req.base,
			      &rdmafs__chunk_write_resp__descriptor, (ProtobufCMessage **)&resp);
	if (!ret)
		rfs_meta_free(&resp->base);
	return ret;
}

/* A CHUNK_RESYNC ask naming the probe chunk and a chain of two made-up daemons. */
static int resync_ask(struct rfs_daemon *d)
{
	Rdmafs__ChunkResyncReq req = RDMAFS__CHUNK_RESYNC_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	uint8_t uuids[2][16] = {{1}, {2}};
	ProtobufCBinaryData members[2] = {{16, uuids[0]}, {16, uuids[1]}};
	Rdmafs__Empty *resp = NULL;
	int ret;

	cid.inode = PROBE_INODE;
	req.chunk = &cid;
	req.members = members;
	req.n_members = 2;
	req.targets = &members[1];
	req.n_targets = 1;
	req.ask = true;
	ret = rfs_daemon_call(d, RDMAFS__METHOD__METHOD_CHUNK_RESYNC, &req.base,
			      &rdmafs__empty__descriptor, (ProtobufCMessage **)&resp);
	if (!ret)
		rfs_meta_free(&resp->base);
	return ret;
}

static void expect(const char *daemon, const char *what, int got, int want)
{
	if (got == want)
		return;
	printf("FAIL %s: %s: got %d (%s), want %d (%s)\n", daemon, what, got, strerror(-got), want,
	       strerror(-want));
	failures++;
}

int main(int argc, char **argv)
{
	/* generation 1: a file's first layout, which no fence stops on an inode never fenced */
	struct rfs_chunk_id id = {.inode = PROBE_INODE, .generation = 1},
			    admin = {.inode = PROBE_INODE, .generation = RFS_GENERATION_ADMIN};
	struct rfs_chunk_sel sel = {.inode = PROBE_INODE, .generation = 1, .range = true},
			     admin_sel = {.inode = PROBE_INODE,
					  .generation = RFS_GENERATION_ADMIN,
					  .range = true};
	struct rfs_chunk_entry entries[4];
	struct test_cluster cluster;
	struct rfs_daemon_options o;
	char data[4096], back[4096];
	bool read_only, done;
	uint32_t bytes = 0;
	uint64_t removed;
	size_t count;
	int ret;

	if (argc != 3 || (strcmp(argv[2], "ro") && strcmp(argv[2], "rw"))) {
		fprintf(stderr, "usage: ops-key-chunks KEYFILE ro|rw\n");
		return 99;
	}
	read_only = strcmp(argv[2], "ro") == 0;
	ret = test_cluster_open(&cluster);
	if (ret) {
		fprintf(stderr, "ops-key-chunks: no cluster: %s\n", strerror(-ret));
		return 99;
	}
	memset(data, 0x5a, sizeof(data));
	for (size_t i = 0; i < cluster.daemon_count; i++) {
		const char *uri = cluster.daemons[i].uri, *name = cluster.daemons[i].name;
		struct rfs_daemon *d;

		rfs_daemon_options_init(&o);
		o.uri = uri;
		o.key_file = argv[1];
		o.name = "ops-key-chunks";
		o.call_timeout_ms = 30000;
		ret = rfs_daemon_open(&o, &d);
		if (ret) {
			fprintf(stderr, "ops-key-chunks: %s (%s): %s\n", name, uri, strerror(-ret));
			return 99;
		}
		expect(name, "write",
		       rfs_chunk_write(d, id, CHUNK_SIZE, 0, data, sizeof(data), true, NULL),
		       read_only ? -EROFS : 0);
		ret = rfs_chunk_read(d, id, 0, back, sizeof(back), &bytes, NULL);
		expect(name, "read", ret, 0);
		if (!ret && !read_only && (bytes != sizeof(data) || memcmp(back, data, bytes))) {
			printf("FAIL %s: read back %u bytes, not what was written\n", name, bytes);
			failures++;
		}
		if (!ret && read_only && bytes != 0) {
			printf("FAIL %s: a read-only key's refused write left %u bytes\n", name,
			       bytes);
			failures++;
		}
		expect(name, "truncate", rfs_chunk_truncate(d, id, 100, NULL),
		       read_only ? -EROFS : 0);
		expect(name, "remove", rfs_chunk_remove(d, &sel, &removed, NULL),
		       read_only ? -EROFS : 0);
		expect(name, "list (administration)",
		       rfs_chunk_list(d, 0, 0, true, entries, 4, &count, &done), -EPERM);
		expect(name, "a write marked forwarded (hop 1)",
		       forwarded_write(d, data, sizeof(data)), read_only ? -EROFS : -EPERM);
		expect(name, "a read with the administration's generation",
		       rfs_chunk_read(d, admin, 0, back, sizeof(back), &bytes, NULL), -EPERM);
		expect(name, "a write with the administration's generation",
		       rfs_chunk_write(d, admin, CHUNK_SIZE, 0, data, sizeof(data), true, NULL),
		       read_only ? -EROFS : -EPERM);
		expect(name, "a truncate with the administration's generation",
		       rfs_chunk_truncate(d, admin, 100, NULL), read_only ? -EROFS : -EPERM);
		expect(name, "a remove with the administration's generation",
		       rfs_chunk_remove(d, &admin_sel, &removed, NULL),
		       read_only ? -EROFS : -EPERM);
		expect(name, "a copy handed to a chain's head (CHUNK_RESYNC)", resync_ask(d),
		       -EPERM);
		printf("ok   %s: a %s key's chunk calls as they should be\n", name,
		       read_only ? "read-only" : "read-write");
		rfs_daemon_close(d);
	}
	return failures ? 1 : 0;
}
