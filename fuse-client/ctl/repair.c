// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rdmafsctl scrub --repair: a chunk a daemon's scrub found failing its
 * checksums is rewritten from a good copy on another daemon of its chain
 * (docs/replication.md, "Repair and administration").
 *
 * For each bad chunk (inode I, index i) on daemon D:
 *   1. the file's layout from the metadata service (GETATTR); the chunk's
 *      chain under it must hold D, else the chunk is no copy of the file's
 *      (fsck's business) and is left alone;
 *   2. CHUNK_FENCE on D at the layout's generation + 1: from its answer on,
 *      D refuses every request for the file made with the current layout and
 *      none is in progress, so no write lands on D between the copy's read
 *      and its write. A write through the chain meanwhile fails at D, and its
 *      client retries it once the fence is lifted (fuse-client/fs_client.c
 *      fence_retry()), so it reaches every copy after the repair;
 *   3. each other daemon of the chain that the map shows UP, in chain order,
 *      is asked for its copy (CHUNK_STAT for the length, then rfs_chunk_copy():
 *      the source checks every block's crc32c as it reads, so a copy that is
 *      bad too fails with -EIO and the next is tried); D's copy is replaced
 *      whole and committed;
 *   4. the fence is lifted.
 * A chunk with no good copy left is reported lost. Do not run it while a
 * drain moves the same files: both fence at the next generation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "ctl_i.h"

/* Where a repair's lines go: stdout, or stderr when stdout is the JSON document. */
static FILE *report_out(const struct ctl *c)
{
	return c->json ? stderr : stdout;
}

/*
 * Replaces @dst's copy of @id with the first good one among the daemons of
 * @chain (@n of them) but @dst itself. 0 (the source's label in @from),
 * -ENOENT when no copy was good, or an error of @dst.
 */
static int copy_from_chain(struct ctl *c, struct rfs_daemon *dst, const uint8_t *dst_uuid,
			   struct rfs_chunk_id id, uint32_t chunk_size, const uint8_t **chain,
			   int n, const char **from)
{
	int ret = -ENOENT;

	for (int i = 0; i < n; i++) {
		struct ctl_daemon *src = ctl_map_find(c, chain[i]);
		struct rfs_chunk_state st;
		struct rfs_daemon *handle;
		int err;

		if (!memcmp(chain[i], dst_uuid, RDMAFS_UUID_LEN) || !src ||
		    src->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
			continue;
		err = ctl_daemon(c, src, &handle);
		if (!err)
			err = rfs_chunk_stat(handle, id, &st);
		if (!err && !st.exists)
			err = -ENOENT;
		if (!err)
			err = rfs_chunk_copy(handle, dst, id, st.length, chunk_size);
		if (!err) {
			*from = src->label;
			return 0;
		}
		ctl_err("inode %" PRIu64 " chunk %" PRIu64 ": no good copy on %s: %s", id.inode,
			id.index, src->label, ctl_strerror(err));
	}
	return ret;
}

/* Repairs @bc on @d; prints what it did. 0 repaired, 1 left alone, or an errno. */
static int repair_one(struct ctl *c, struct ctl_daemon *d, const Rdmafs__BadChunk *bc)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	struct rfs_chunk_id id = {bc->chunk->inode, bc->chunk->index, RFS_GENERATION_ADMIN};
	const uint8_t *chain[RDMAFS_MAX_REPLICAS];
	const char *from = NULL;
	Rdmafs__AttrResp *resp;
	struct rfs_daemon *dst;
	uint64_t fence;
	bool member = false;
	int n, ret, lift;

	req.ino = id.inode;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_GETATTR, &req.base,
			    &rdmafs__attr_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret == -ENOENT) {
		fprintf(report_out(c),
			"inode %" PRIu64 " chunk %" PRIu64 " on %s: its file is gone (fsck)\n",
			id.inode, id.index, d->label);
		return 1;
	}
	if (ret)
		return ret;
	n = resp->layout ? ctl_chain_of(resp->layout, id.inode, id.index, chain) : -EPROTO;
	for (int i = 0; i < n; i++)
		member |= !memcmp(chain[i], d->uuid, RDMAFS_UUID_LEN);
	if (n < 0 || !member) {
		fprintf(report_out(c),
			"inode %" PRIu64 " chunk %" PRIu64
			" on %s: not a copy of its file (fsck)\n",
			id.inode, id.index, d->label);
		rdmafs__attr_resp__free_unpacked(resp, NULL);
		return n < 0 ? n : 1;
	}
	fence = resp->layout->generation + 1;
	ret = ctl_daemon(c, d, &dst);
	if (!ret)
		ret = rfs_chunk_fence(dst, id.inode, fence, false, NULL);
	if (!ret) {
		ret = copy_from_chain(c, dst, d->uuid, id, resp->layout->chunk_size, chain, n,
				      &from);
		if (!ret)
			ret = ctl_chunk_commit_inode(dst, id.inode);
		lift = rfs_chunk_fence(dst, id.inode, fence, true, NULL);
		if (lift)
			ctl_err("inode %" PRIu64 ": cannot lift its fence on %s (%s): its writers"
				" wait until `rdmafsctl scrub --repair` runs again",
				id.inode, d->label, ctl_strerror(lift));
	}
	rdmafs__attr_resp__free_unpacked(resp, NULL);
	if (ret == -ENOENT) {
		fprintf(report_out(c),
			"inode %" PRIu64 " chunk %" PRIu64 " on %s: LOST, no good copy left\n",
			id.inode, id.index, d->label);
		return ret;
	}
	if (!ret)
		fprintf(report_out(c),
			"inode %" PRIu64 " chunk %" PRIu64 " on %s: repaired from %s\n", id.inode,
			id.index, d->label, from);
	return ret;
}

int ctl_scrub_repair(struct ctl *c, Rdmafs__ScrubResp *const *res, const int *errs, size_t n,
		     uint64_t *repaired, uint64_t *failed)
{
	*repaired = *failed = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; res[i] && errs[i] == 0 && k < res[i]->n_bad; k++) {
			const Rdmafs__BadChunk *bc = res[i]->bad[k];
			bool seen = false;
			int ret;

			/* a chunk's bad blocks come one by one: repair it once */
			for (size_t j = 0; j < k && !seen; j++)
				seen = res[i]->bad[j]->chunk->inode == bc->chunk->inode &&
				       res[i]->bad[j]->chunk->index == bc->chunk->index;
			if (seen)
				continue;
			ret = repair_one(c, &c->map.daemons[i], bc);
			if (ret == 0)
				(*repaired)++;
			else
				(*failed)++;
			if (ret < 0 && ret != -ENOENT)
				ctl_err("inode %" PRIu64 " chunk %" PRIu64 " on %s: cannot repair"
					" it: %s",
					bc->chunk->inode, bc->chunk->index, c->map.daemons[i].label,
					ctl_strerror(ret));
		}
		if (res[i] && errs[i] == 0 && res[i]->bad_count > res[i]->n_bad) {
			ctl_err("%s: %" PRIu64 " more bad blocks than the scrub kept: run it again"
				" after this repair",
				c->map.daemons[i].label, res[i]->bad_count - res[i]->n_bad);
			(*failed)++;
		}
	}
	return 0;
}
