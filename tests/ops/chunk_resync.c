/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops-chunk-resync: CHUNK_RESYNC's contract (rdmafs.proto), on the storage
 * daemons of the cluster it runs under (tests/lib/cluster.sh, at least 3
 * storage daemons, all UP), with the cluster secret. A chain of storage1,
 * storage2, storage3 (members named in the request; no file needs it) is
 * headed by storage1, the first of them serving:
 * - storage2 and storage3 answer -EREMCHG: only the head hands copies;
 * - storage1 answers -EINVAL for no members and for a target outside them;
 * - asked whether the copies of a chunk no daemon recorded are done: 0;
 * - a chunk of an inode no file has written on storage1 alone, storage1 asked
 *   to copy it to storage2 and storage3 (ask): 0, and within 60 s its copies
 *   are done (a copy still to go answers -EINPROGRESS), so the same question
 *   answers 0 again, and storage2 and storage3 hold storage1's bytes.
 * Keys get -EPERM for it: ops-key-chunks.
 * Prints a line a check; exit 0 pass, 1 fail, 99 the test's own trouble.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmafs_fs.h"
#include "rdmafs_common.h"
#include "fs_client_i.h"
#include "cluster.h"

/* No file has this inode: nothing the test names is anybody's data. */
#define PROBE_INODE (UINT64_MAX - 11)
#define CHAIN	    3

static int failures;

/* CHUNK_RESYNC of the probe chunk to @d: @members, then @targets of them (indexes), @ask. */
static int resync(struct rfs_daemon *d, uint8_t (*uuids)[16], size_t n_members,
		  const unsigned *targets, size_t n_targets, bool ask)
{
	Rdmafs__ChunkResyncReq req = RDMAFS__CHUNK_RESYNC_REQ__INIT;
	Rdmafs__ChunkId cid = RDMAFS__CHUNK_ID__INIT;
	ProtobufCBinaryData members[CHAIN + 1], list[CHAIN + 1];
	Rdmafs__Empty *resp = NULL;
	int ret;

	for (size_t i = 0; i < n_members; i++)
		members[i] = (ProtobufCBinaryData){16, uuids[i]};
	for (size_t i = 0; i < n_targets; i++)
		list[i] = (ProtobufCBinaryData){16, uuids[targets[i]]};
	cid.inode = PROBE_INODE;
	req.chunk = &cid;
	req.members = members;
	req.n_members = n_members;
	req.targets = list;
	req.n_targets = n_targets;
	req.ask = ask;
	ret = rfs_daemon_call(d, RDMAFS__METHOD__METHOD_CHUNK_RESYNC, &req.base,
			      &rdmafs__empty__descriptor, (ProtobufCMessage **)&resp);
	if (!ret)
		rfs_meta_free(&resp->base);
	return ret;
}

static void expect(const char *what, int got, int want)
{
	if (got == want) {
		printf("ok   %s: %s\n", what, want ? strerror(-want) : "0");
		return;
	}
	printf("FAIL %s: got %d (%s), want %d (%s)\n", what, got, strerror(-got), want,
	       strerror(-want));
	failures++;
}

int main(void)
{
	/* the chain's members, then one daemon that is none of them */
	uint8_t uuids[CHAIN + 1][16];
	struct rfs_daemon *d[CHAIN] = {0};
	struct test_cluster cluster;
	struct rfs_daemon_options o;
	const unsigned others[] = {1, 2}, stranger[] = {CHAIN};
	struct rfs_chunk_id probe = {.inode = PROBE_INODE, .generation = RFS_GENERATION_ADMIN};
	struct rfs_chunk_sel all = {
		.inode = PROBE_INODE, .generation = RFS_GENERATION_ADMIN, .range = true};
	char data[4096], back[4096];
	uint8_t *secret;
	size_t secret_len;
	uint32_t bytes;
	uint64_t removed;
	int ret;

	ret = test_cluster_open(&cluster);
	if (ret) {
		fprintf(stderr, "ops-chunk-resync: no cluster: %s\n", strerror(-ret));
		return 99;
	}
	if (cluster.daemon_count < CHAIN + 1) {
		fprintf(stderr, "ops-chunk-resync: needs %d storage daemons\n", CHAIN);
		return 99;
	}
	ret = rdmafs_read_secret(cluster.secret_path, &secret, &secret_len);
	if (ret) {
		fprintf(stderr, "ops-chunk-resync: %s: %s\n", cluster.secret_path, strerror(-ret));
		return 99;
	}
	for (size_t i = 0; i < CHAIN; i++) {
		struct rfs_daemon_stats st;

		rfs_daemon_options_init(&o);
		o.uri = cluster.daemons[i + 1].uri; /* daemons[0] is the metadata daemon */
		o.secret = secret;
		o.secret_len = secret_len;
		o.name = "ops-chunk-resync";
		ret = rfs_daemon_open(&o, &d[i]);
		if (!ret)
			ret = rfs_daemon_stats(d[i], &st);
		if (ret) {
			fprintf(stderr, "ops-chunk-resync: %s (%s): %s\n",
				cluster.daemons[i + 1].name, o.uri, strerror(-ret));
			return 99;
		}
		memcpy(uuids[i], st.uuid, 16);
	}
	memset(uuids[CHAIN], 0x5a, 16);

	expect("storage2, not the chain's head, asked", resync(d[1], uuids, CHAIN, others, 2, true),
	       -EREMCHG);
	expect("storage3, not the chain's head, asked", resync(d[2], uuids, CHAIN, others, 2, true),
	       -EREMCHG);
	expect("the head asked with no members", resync(d[0], uuids, 0, NULL, 0, true), -EINVAL);
	expect("the head asked for a daemon outside the chain",
	       resync(d[0], uuids, CHAIN, stranger, 1, true), -EINVAL);
	expect("the head asked whether copies nobody asked for are done",
	       resync(d[0], uuids, CHAIN, others, 2, false), 0);
	memset(data, 0xa5, sizeof(data));
	ret = rfs_chunk_write(d[0], probe, 1u << 20, 0, data, sizeof(data), true, NULL);
	if (ret) {
		fprintf(stderr, "ops-chunk-resync: writing the probe chunk on storage1: %s\n",
			strerror(-ret));
		return 99;
	}
	expect("the head asked to copy a chunk to storage2 and storage3",
	       resync(d[0], uuids, CHAIN, others, 2, true), 0);
	/* its resync copies within a pass (once a second, or at once when asked) */
	for (int i = 0; i < 600; i++) {
		ret = resync(d[0], uuids, CHAIN, others, 2, false);
		if (ret != -EINPROGRESS)
			break;
		usleep(100 * 1000);
	}
	expect("the head asked, after the ask, whether those copies are done (within 60 s)", ret,
	       0);
	for (size_t i = 1; i < CHAIN; i++) {
		char what[64];

		ret = rfs_chunk_read(d[i], probe, 0, back, sizeof(back), &bytes, NULL);
		snprintf(what, sizeof(what), "storage%zu reads the head's copy", i + 1);
		expect(what, ret, 0);
		if (!ret && (bytes != sizeof(data) || memcmp(back, data, bytes))) {
			printf("FAIL storage%zu holds %u bytes, not the head's copy\n", i + 1,
			       bytes);
			failures++;
		}
	}
	for (size_t i = 0; i < CHAIN; i++) {
		rfs_chunk_remove(d[i], &all, &removed, NULL);
		rfs_daemon_close(d[i]);
	}
	free(secret);
	return failures ? 1 : 0;
}
