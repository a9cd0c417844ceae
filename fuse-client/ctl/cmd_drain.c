/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl drain and remove.
 *
 * The drain runs here, in rdmafsctl, as a client of the daemons: the
 * metadata service only records the state. For every regular file whose
 * layout (generation g) names the draining daemon D:
 *
 *   1. the new daemon list is the old one without D (rendezvous placement
 *      then moves only D's chunks); a file whose only daemon is D gets the
 *      UP daemon that scores highest for it instead;
 *   2. CHUNK_FENCE on D, and on every other daemon of the layout the map
 *      does not show DOWN, raises the file's fence to g + 1
 *      (ctl_fence_layout()): from its reply on, that daemon refuses
 *      (-ESTALE) every request for the file made with the old layout, and
 *      none is still in progress. A writer that gets it refetches the layout
 *      and retries (fuse-client/fs_client.c). A write the head of its chain
 *      took before its own fence goes down the whole chain even past fences
 *      (a forwarded write passes them), so once all are fenced D's copy holds
 *      every write any head took: the copies of the chain cannot differ by a
 *      write refused half-way;
 *   3. each chunk D holds for the file is read from D and written to its
 *      place under the new list, and the destinations commit (fdatasync).
 *      A file with several copies of each chunk: the copy goes to the
 *      daemon that takes D's place in the chunk's chain (the other members
 *      keep theirs). A file whose new list would have fewer daemons than it
 *      keeps copies is not moved (ENOSPC): it keeps D, and `remove` refuses
 *      D until a daemon is added and the drain runs again.
 *      Nothing can change D's chunks of the file any more, so one round
 *      copies the final data: the re-copy rounds of old are gone;
 *   4. SET_LAYOUT switches the file to the new list (generation g + 1), a
 *      compare-and-swap against the old list. The fenced writers now find
 *      the new layout and redo their writes there.
 *
 * Why fence first: before fences a writer that kept an old layout could
 * write to D after the last copy, and `remove` then lost that data. Now a
 * write through an old layout either landed on D before the fence (and step
 * 3 copies it) or is refused and redone through the new layout.
 *
 * When step 3 or 4 fails the file stays on D: -ESTALE from SET_LAYOUT means
 * someone else changed the layout, so its generation is past the fence and
 * the fence is harmless; -ENOENT means the file is gone, and its chunks on
 * D and the copies are removed (its last client could not remove D's: they
 * were fenced). Otherwise the fence is lifted, but only after the service
 * confirms the file still has generation g (a lost reply may hide a switch
 * that happened). If rdmafsctl dies between steps 2 and 4, writers of that
 * one file wait and then fail with -ETIMEDOUT until the drain is run again,
 * which fences at the same generation and finishes the move. Run one drain
 * of a daemon at a time.
 *
 * D keeps every chunk and keeps serving the files it still holds until it is
 * REMOVED; a reader holding a moved file's old layout is fenced as a writer
 * is and rereads through the new one. Interrupting a drain is safe: the
 * daemon stays DRAINING and running the drain again finishes it.
 *
 * Undrain takes a DRAINING daemon D back to UP. While D is still DRAINING
 * (so no new file is placed on it and no drain of another daemon can pick
 * it as a replacement):
 *
 *   1. every file whose layout (generation g) still names D gets its fences
 *      g + 1 lifted on the daemons of its layout: only an interrupted drain
 *      leaves them (between its steps 2 and 4), and they would block that
 *      file's writers for good;
 *   2. every chunk D holds of a file whose layout no longer names D is
 *      removed from D: it is the stale copy a finished move left behind
 *      (the data lives on under the new layout; the fence g + 1 keeps any
 *      old-layout request off it). Were it kept, a later move of the file
 *      back to D would mix it with the new data. Chunks of inodes that no
 *      longer exist are left to fsck --repair;
 *   3. SET_DAEMON_STATE UP: new files may be placed on D again.
 *
 * Files already moved stay where they are (cmd_rebalance.c moves them). Never run an
 * undrain while a drain of the same daemon runs: step 1 would lift the
 * fence of the file that drain is copying.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "ctl_i.h"

#define MAX_PASSES 5

struct drain {
	struct ctl *c;
	struct ctl_daemon *src;
	struct rfs_daemon *src_handle;
	bool progress;
	uint64_t files_total;
	uint64_t files_moved, chunks_moved, bytes_moved, files_failed, files_stale;
};

static int drain_status(struct ctl *c, const struct ctl_daemon *d, Rdmafs__DrainStatusResp **out)
{
	Rdmafs__DrainStatusReq req = RDMAFS__DRAIN_STATUS_REQ__INIT;

	req.uuid.data = (uint8_t *)d->uuid;
	req.uuid.len = RDMAFS_UUID_LEN;
	return ctl_meta_call(c, RDMAFS__METHOD__METHOD_DRAIN_STATUS, &req.base,
			     &rdmafs__drain_status_resp__descriptor, (ProtobufCMessage **)out);
}

static int set_state(struct ctl *c, const struct ctl_daemon *d, Rdmafs__DaemonState state,
		     bool force, uint64_t *epoch)
{
	Rdmafs__SetDaemonStateReq req = RDMAFS__SET_DAEMON_STATE_REQ__INIT;
	Rdmafs__SetDaemonStateResp *resp;
	int ret;

	req.uuid.data = (uint8_t *)d->uuid;
	req.uuid.len = RDMAFS_UUID_LEN;
	req.state = state;
	req.force = force;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_SET_DAEMON_STATE, &req.base,
			    &rdmafs__set_daemon_state_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (epoch)
		*epoch = resp->epoch;
	rdmafs__set_daemon_state_resp__free_unpacked(resp, NULL);
	return 0;
}

static bool layout_names(const Rdmafs__Layout *l, const uint8_t *uuid)
{
	for (size_t i = 0; l && i < l->n_daemons; i++)
		if (memcmp(l->daemons[i].data, uuid, RDMAFS_UUID_LEN) == 0)
			return true;
	return false;
}

/* The UP daemon other than the source that scores highest for the whole file. */
static const uint8_t *replacement(struct drain *dr, uint64_t seed, uint64_t ino)
{
	const uint8_t *best = NULL;
	uint64_t best_score = 0;

	for (size_t i = 0; i < dr->c->map.count; i++) {
		const struct ctl_daemon *d = &dr->c->map.daemons[i];
		uint64_t s;

		if (d == dr->src || d->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
			continue;
		s = rdmafs_layout_score(seed, ino, d->uuid);
		if (!best || rdmafs_rank_cmp(s, d->uuid, best_score, best) < 0) {
			best = d->uuid;
			best_score = s;
		}
	}
	return best;
}

/* A new daemon list for a file: @n daemons, their failure domains (NULL: each its own). */
struct new_list {
	const uint8_t *daemons[RDMAFS_MAX_STRIPE];
	uint32_t domain_store[RDMAFS_MAX_STRIPE];
	const uint32_t *domains;
	size_t n;
};

/*
 * Where D's copy of chunk @index goes in @to: the daemon of the chunk's
 * chain there that is not in its chain under @l's list, which has D. Its
 * failure domain is D's own or one D's leaving let in: each domain's best
 * daemon, so one member at most is new. Returns its index in @to->daemons,
 * -ENOENT when the new chain is the old one without D, or a negative errno.
 */
static int destination(const Rdmafs__Layout *l, const struct new_list *to, uint64_t ino,
		       uint64_t index)
{
	const uint8_t *const *daemons = to->daemons;
	const uint8_t *was[RDMAFS_MAX_REPLICAS];
	int now[RDMAFS_MAX_REPLICAS];
	int n_was = ctl_chain_of(l, ino, index, was),
	    n_now = rdmafs_place_chain(daemons, to->domains, to->n, l->placement_seed, ino, index,
				       l->replicas, now);

	if (n_was < 0 || n_now < 0)
		return -EINVAL;
	for (int i = 0; i < n_now; i++) {
		bool held = false;

		for (int j = 0; j < n_was && !held; j++)
			held = memcmp(daemons[now[i]], was[j], RDMAFS_UUID_LEN) == 0;
		if (!held)
			return now[i];
	}
	return -ENOENT;
}

/*
 * Copies every chunk the source holds for @ino to its place in @to, then
 * commits the destinations. @used[i] is set for each destination
 * to->daemons[i] that got a chunk (so a failed move can clean them up).
 */
static int copy_chunks(struct drain *dr, uint64_t ino, const Rdmafs__Layout *l,
		       const struct new_list *to, bool *used)
{
	const uint8_t *const *daemons = to->daemons;
	size_t n = to->n;
	struct ctl *c = dr->c;
	uint64_t after_ino = ino - 1, after_index = UINT64_MAX;
	struct rfs_chunk_entry page[CTL_LIST_PAGE];
	bool end = false;
	size_t count;
	int ret = 0;

	while (!end) {
		ret = rfs_chunk_list(dr->src_handle, after_ino, after_index, false, page,
				     CTL_LIST_PAGE, &count, &end);
		if (ret) {
			ctl_err("cannot list the chunks of daemon %s: %s", dr->src->uuid_text,
				ctl_strerror(ret));
			return ret;
		}
		for (size_t i = 0; i < count && !ret; i++) {
			const struct rfs_chunk_entry *e = &page[i];
			struct rfs_chunk_id id = {ino, e->index, RFS_GENERATION_ADMIN};
			struct rfs_daemon *handle;
			struct ctl_daemon *dst;
			int slot;

			if (e->inode != ino) {
				end = true;
				break;
			}
			after_ino = e->inode;
			after_index = e->index;
			slot = destination(l, to, ino, e->index);
			if (slot == -ENOENT)
				continue; /* the chain's other daemons hold it */
			dst = slot >= 0 ? ctl_map_find(c, daemons[slot]) : NULL;
			if (!dst) {
				ret = -EINVAL;
				break;
			}
			ret = ctl_daemon(c, dst, &handle);
			if (ret) {
				ctl_err("cannot reach daemon %s at %s: %s", dst->uuid_text,
					dst->conn_address, ctl_daemon_strerror(dst, ret));
				break;
			}
			used[slot] = true;
			ret = rfs_chunk_copy(dr->src_handle, handle, id, e->length, l->chunk_size);
			if (ret) {
				ctl_err("inode %" PRIu64 " chunk %" PRIu64
					": copy from %s to %s: %s",
					ino, e->index, dr->src->uuid_text, dst->uuid_text,
					ctl_strerror(ret));
				break;
			}
			dr->chunks_moved++;
			dr->bytes_moved += e->length;
		}
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < n; i++) {
		struct ctl_daemon *dst = used[i] ? ctl_map_find(c, daemons[i]) : NULL;
		struct rfs_daemon *handle;

		if (!dst)
			continue;
		ret = ctl_daemon(c, dst, &handle);
		if (!ret)
			ret = ctl_chunk_commit_inode(handle, ino);
		if (ret) {
			ctl_err("inode %" PRIu64 ": commit on daemon %s: %s", ino, dst->uuid_text,
				ctl_strerror(ret));
			return ret;
		}
	}
	return 0;
}

/*
 * @ino was deleted while we moved it: its last client removed its chunks
 * everywhere but on the fenced source. Removes those and our copies.
 */
static void remove_gone(struct drain *dr, uint64_t ino, const uint8_t *const *daemons, size_t n,
			const bool *used)
{
	struct rfs_daemon *handle;

	ctl_chunk_remove_inode(dr->src_handle, ino);
	for (size_t i = 0; i < n; i++) {
		struct ctl_daemon *d = used[i] ? ctl_map_find(dr->c, daemons[i]) : NULL;

		if (d && ctl_daemon(dr->c, d, &handle) == 0)
			ctl_chunk_remove_inode(handle, ino);
	}
}

/* Moves one file off the source; see the top of this file. */
static int move_file(struct drain *dr, const Rdmafs__InodeListEntry *e)
{
	const Rdmafs__Layout *l = e->layout;
	const uint8_t *was[RDMAFS_MAX_STRIPE];
	struct new_list to = {.n = 0};
	const uint8_t **daemons = to.daemons;
	bool used[RDMAFS_MAX_STRIPE] = {false};
	struct ctl_fences fences;
	uint64_t fence = l->generation + 1;
	size_t n = 0, domains;
	int ret;

	for (size_t i = 0; i < l->n_daemons; i++) {
		was[i] = l->daemons[i].data;
		if (memcmp(l->daemons[i].data, dr->src->uuid, RDMAFS_UUID_LEN) != 0)
			daemons[n++] = l->daemons[i].data;
	}
	if (n == 0) {
		daemons[0] = replacement(dr, l->placement_seed, e->ino);
		if (!daemons[0])
			return -ENOSPC;
		n = 1;
	}
	to.n = n;
	/* the domains SET_LAYOUT gives the new list (the metadata service derives them so too) */
	if (rdmafs_domains_keep(was, l->n_domains ? l->domains : NULL, l->n_daemons, daemons, n,
				to.domain_store))
		to.domains = to.domain_store;
	domains = rdmafs_domain_count(to.domains, n);
	/* no copy is given up: the file stays, so the daemon cannot be removed (remove refuses) */
	if (l->replicas > domains) {
		ctl_err("inode %" PRIu64
			": keeps %u copies of each chunk, and its layout would have"
			" %zu daemons in %zu failure domains without %s: not moved (add a daemon"
			" first)",
			e->ino, l->replicas, n, domains, dr->src->uuid_text);
		return -ENOSPC;
	}
	/* the generation SET_LAYOUT gives the new layout: older ones are refused from now on */
	ret = ctl_fence_layout(dr->c, e->ino, l, fence, &fences);
	if (ret)
		return ret;
	ret = copy_chunks(dr, e->ino, l, &to, used);
	if (ret) {
		ctl_fences_lift(dr->c, e->ino, fence, &fences, "the drain");
		return ret;
	}
	ret = ctl_set_layout(dr->c, e->ino, l, daemons, n, NULL);
	if (ret == -ENOENT) {
		remove_gone(dr, e->ino, daemons, n, used);
		return 0;
	}
	if (ret && ret != -ESTALE) {
		ctl_err("inode %" PRIu64 ": cannot switch its layout: %s", e->ino,
			ctl_strerror(ret));
		ctl_fences_lift(dr->c, e->ino, fence, &fences, "the drain");
	}
	return ret;
}

/* One pass over every inode. *@touched: files found on the source. */
static int drain_pass(struct drain *dr, uint64_t *touched)
{
	struct ctl *c = dr->c;
	Rdmafs__InodeListResp *page;
	uint64_t after = 0;
	bool end = false;
	int ret;

	*touched = 0;
	while (!end) {
		ret = ctl_inode_list(c, after, &page);
		if (ret)
			return ret;
		end = page->done;
		for (size_t i = 0; i < page->n_inodes; i++) {
			const Rdmafs__InodeListEntry *e = page->inodes[i];

			after = e->ino;
			if (!e->layout || !layout_names(e->layout, dr->src->uuid))
				continue;
			(*touched)++;
			ret = move_file(dr, e);
			if (ret == -ESTALE) {
				dr->files_stale++;
				continue;
			}
			if (ret) {
				dr->files_failed++;
				if (ctl_exit_for(ret) == CTL_EXIT_UNREACHABLE)
					break; /* a daemon went away: stop this pass */
				continue;
			}
			dr->files_moved++;
			if (dr->progress) {
				char b[32];

				fprintf(stderr,
					"drain: %" PRIu64 "/%" PRIu64 " files, %" PRIu64
					" chunks, %s moved\n",
					dr->files_moved, dr->files_total, dr->chunks_moved,
					ctl_fmt_bytes(dr->bytes_moved, b, sizeof(b)));
			}
		}
		rdmafs__inode_list_resp__free_unpacked(page, NULL);
		if (ret && ctl_exit_for(ret) == CTL_EXIT_UNREACHABLE)
			return ret;
	}
	return 0;
}

static int report_status(struct ctl *c, const struct ctl_daemon *d)
{
	Rdmafs__DrainStatusResp *s;
	int ret = drain_status(c, d, &s);

	if (ret)
		return ctl_exit_for(ret);
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_string("uuid", d->uuid_text);
		ctl_json_string("state", ctl_state_name((uint32_t)s->daemon_state));
		ctl_json_u64("files_remaining", s->files_remaining);
		ctl_json_bool("removable", s->removable);
		ctl_json_end_object();
		ctl_json_finish();
	} else if (s->state == RDMAFS__JOB_STATE__JOB_STATE_NEVER_RUN) {
		printf("daemon %s is %s: not draining\n", d->uuid_text,
		       ctl_state_name((uint32_t)s->daemon_state));
	} else {
		printf("daemon %s is %s: %" PRIu64 " files still name it; %s\n", d->uuid_text,
		       ctl_state_name((uint32_t)s->daemon_state), s->files_remaining,
		       s->removable ? "removable" : "not removable yet");
	}
	rdmafs__drain_status_resp__free_unpacked(s, NULL);
	return CTL_EXIT_OK;
}

int ctl_cmd_drain(struct ctl *c, int argc, char **argv)
{
	struct drain dr = {.c = c, .progress = (ctl_flags & CTL_FLAG_WAIT) != 0};
	Rdmafs__DrainStatusResp *s = NULL;
	bool removable = false, has_target = false;
	uint8_t uuid[RDMAFS_UUID_LEN];
	char uuid_text[37];
	uint64_t touched;
	int ret, status;

	ret = ctl_resolve_any(c, argv[0], &dr.src);
	if (ret)
		return ret == -ENOENT || ret == -EINVAL ? CTL_EXIT_USAGE : ctl_exit_for(ret);
	if (ctl_flags & CTL_FLAG_STATUS)
		return report_status(c, dr.src);
	if (dr.src->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		ctl_err("daemon %s is already removed", dr.src->uuid_text);
		return CTL_EXIT_FAILED;
	}
	/* its copies are what the drain moves: they must hold every write */
	if (dr.src->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING ||
	    dr.src->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN || dr.src->chunks_missing) {
		ctl_err("daemon %s is %s%s: its copies may lack writes it missed, so a drain would "
			"move them stale; drain it once it is up with nothing missed (or `remove "
			"--force` it: the other copies of files of several copies stay)",
			dr.src->uuid_text, ctl_state_name(dr.src->state),
			dr.src->chunks_missing ? " and lacks chunks it missed" : "");
		return CTL_EXIT_FAILED;
	}
	for (size_t i = 0; i < c->map.count; i++)
		has_target |= &c->map.daemons[i] != dr.src &&
			      c->map.daemons[i].state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP;
	if (!has_target) {
		ctl_err("no other daemon is up to take the chunks of %s", dr.src->uuid_text);
		return CTL_EXIT_FAILED;
	}
	ret = ctl_daemon(c, dr.src, &dr.src_handle);
	if (ret) {
		ctl_err("cannot reach daemon %s at %s to read its chunks: %s", dr.src->uuid_text,
			dr.src->conn_address, ctl_daemon_strerror(dr.src, ret));
		return CTL_EXIT_UNREACHABLE;
	}
	if (dr.src->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING) {
		/* From now on new files are placed elsewhere. */
		ret = set_state(c, dr.src, RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING, false,
				NULL);
		if (ret) {
			ctl_err("cannot mark daemon %s draining: %s", dr.src->uuid_text,
				ctl_strerror(ret));
			return ctl_exit_for(ret);
		}
	}
	ret = drain_status(c, dr.src, &s);
	if (ret)
		return ctl_exit_for(ret);
	dr.files_total = s->files_remaining;
	rdmafs__drain_status_resp__free_unpacked(s, NULL);
	if (dr.progress)
		fprintf(stderr, "drain: daemon %s: %" PRIu64 " files to move\n", dr.src->uuid_text,
			dr.files_total);

	memcpy(uuid, dr.src->uuid, sizeof(uuid));
	for (int pass = 0; pass < MAX_PASSES; pass++) {
		uint64_t failed = dr.files_failed;

		/* The map may have changed (a daemon down, another draining); it is new memory. */
		dr.src = NULL;
		ret = ctl_map_load(c, true);
		if (!ret) {
			dr.src = ctl_map_find(c, uuid);
			ret = dr.src ? ctl_daemon(c, dr.src, &dr.src_handle) : -ENOENT;
		}
		if (!ret)
			ret = drain_pass(&dr, &touched);
		if (!ret)
			ret = drain_status(c, dr.src, &s);
		if (ret)
			break;
		removable = s->removable;
		rdmafs__drain_status_resp__free_unpacked(s, NULL);
		if (removable || touched == 0 || dr.files_failed > failed)
			break;
	}

	status = removable ? CTL_EXIT_OK : ret ? ctl_exit_for(ret) : CTL_EXIT_FAILED;
	ctl_uuid_format(uuid, uuid_text);
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_string("uuid", uuid_text);
		ctl_json_u64("files_moved", dr.files_moved);
		ctl_json_u64("chunks_moved", dr.chunks_moved);
		ctl_json_u64("bytes_moved", dr.bytes_moved);
		ctl_json_u64("files_failed", dr.files_failed);
		ctl_json_bool("removable", removable);
		ctl_json_end_object();
		ctl_json_finish();
	} else {
		char b[32];

		printf("drained %" PRIu64 " files (%" PRIu64 " chunks, %s) off %s\n",
		       dr.files_moved, dr.chunks_moved, ctl_fmt_bytes(dr.bytes_moved, b, sizeof(b)),
		       uuid_text);
		if (removable)
			printf("daemon %s holds no file any more: `rdmafsctl remove %.8s` takes it"
			       " out\n",
			       uuid_text, uuid_text);
	}
	if (!removable)
		ctl_err("the drain did not finish (%" PRIu64 " files failed%s%s): run it again",
			dr.files_failed, ret ? "; stopped by: " : "", ret ? ctl_strerror(ret) : "");
	return status;
}

int ctl_cmd_remove(struct ctl *c, int argc, char **argv)
{
	bool force = (ctl_flags & CTL_FLAG_FORCE) != 0;
	Rdmafs__DrainStatusResp *s;
	struct ctl_daemon *d;
	uint64_t epoch = 0;
	int ret;

	ret = ctl_resolve_any(c, argv[0], &d);
	if (ret)
		return ret == -ENOENT || ret == -EINVAL ? CTL_EXIT_USAGE : ctl_exit_for(ret);
	if (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		printf("daemon %s is already removed\n", d->uuid_text);
		return CTL_EXIT_OK;
	}
	if (!force) {
		ret = drain_status(c, d, &s);
		if (ret)
			return ctl_exit_for(ret);
		if (!s->removable) {
			ctl_err("daemon %s is %s and %" PRIu64 " files still name it: run "
				"`rdmafsctl drain %.8s` first (or remove --force: data only it "
				"holds is lost)",
				d->uuid_text, ctl_state_name((uint32_t)s->daemon_state),
				s->files_remaining, d->uuid_text);
			rdmafs__drain_status_resp__free_unpacked(s, NULL);
			return CTL_EXIT_FAILED;
		}
		rdmafs__drain_status_resp__free_unpacked(s, NULL);
	}
	ret = set_state(c, d, RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED, force, &epoch);
	if (ret == -EBUSY) {
		ctl_err("the metadata service refused: daemon %s is not drained (a file was "
			"placed on it meanwhile?): run `rdmafsctl drain %.8s` again",
			d->uuid_text, d->uuid_text);
		return CTL_EXIT_FAILED;
	}
	if (ret) {
		ctl_err("cannot remove daemon %s: %s", d->uuid_text, ctl_strerror(ret));
		return ctl_exit_for(ret);
	}
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_string("uuid", d->uuid_text);
		ctl_json_string("state", "removed");
		ctl_json_u64("epoch", epoch);
		ctl_json_bool("forced", force);
		ctl_json_end_object();
		ctl_json_finish();
	} else {
		printf("daemon %s removed (cluster map epoch %" PRIu64 ")%s\n", d->uuid_text, epoch,
		       force ? "; forced: files that named it have lost that data" : "");
	}
	return CTL_EXIT_OK;
}

/* ---- undrain ---- */

struct undrain {
	struct ctl *c;
	struct ctl_daemon *d;
	struct rfs_daemon *handle;
	uint64_t files_kept, files_cleaned, chunks_left;
};

/*
 * Lifts the fences of a drain of @e's layout on every daemon of it not DOWN
 * (the drain set them there: ctl_fence_layout()); lifted only where they are
 * exactly what a drain of this layout set.
 */
static int lift_layout(struct undrain *u, const Rdmafs__InodeListEntry *e)
{
	for (size_t i = 0; i < e->layout->n_daemons; i++) {
		struct ctl_daemon *d = ctl_map_find(u->c, e->layout->daemons[i].data);
		struct rfs_daemon *h;
		int ret;

		if (!d || d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
		    d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
			continue;
		ret = ctl_daemon(u->c, d, &h);
		if (!ret)
			ret = rfs_chunk_fence(h, e->ino, e->layout->generation + 1, true, NULL);
		if (ret) {
			ctl_err("inode %" PRIu64 ": cannot lift its fence on %s: %s", e->ino,
				d->uuid_text, ctl_strerror(ret));
			return ret;
		}
	}
	return 0;
}

/* Step 1: lifts the fences an interrupted drain left on each file still naming the daemon. */
static int undrain_fences(struct undrain *u)
{
	Rdmafs__InodeListResp *page;
	uint64_t after = 0;
	bool end = false;
	int ret = 0;

	while (!end && !ret) {
		ret = ctl_inode_list(u->c, after, &page);
		if (ret)
			return ret;
		end = page->done;
		for (size_t i = 0; i < page->n_inodes && !ret; i++) {
			const Rdmafs__InodeListEntry *e = page->inodes[i];

			after = e->ino;
			if (!e->layout || !layout_names(e->layout, u->d->uuid))
				continue;
			u->files_kept++;
			ret = lift_layout(u, e);
		}
		rdmafs__inode_list_resp__free_unpacked(page, NULL);
	}
	return ret;
}

/*
 * Whether the chunks of @ino on the daemon are stale copies: the file exists
 * and its layout no longer names the daemon. *@gone: it does not exist.
 */
static int stale_copy(struct undrain *u, uint64_t ino, bool *stale, bool *gone)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *resp;
	int ret;

	*stale = *gone = false;
	req.ino = ino;
	ret = ctl_meta_call(u->c, RDMAFS__METHOD__METHOD_GETATTR, &req.base,
			    &rdmafs__attr_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret == -ENOENT) {
		*gone = true;
		return 0;
	}
	if (ret)
		return ret;
	*stale = resp->layout && !layout_names(resp->layout, u->d->uuid);
	rdmafs__attr_resp__free_unpacked(resp, NULL);
	return 0;
}

/* Step 2: removes the stale copies of moved files from the daemon. */
static int undrain_stale(struct undrain *u)
{
	struct rfs_chunk_entry page[CTL_LIST_PAGE];
	uint64_t after_ino = 0, after_index = 0, last = 0;
	bool first = true, end = false, stale = false, gone = false;
	size_t count;
	int ret = 0;

	while (!end && !ret) {
		ret = rfs_chunk_list(u->handle, after_ino, after_index, first, page, CTL_LIST_PAGE,
				     &count, &end);
		if (ret) {
			ctl_err("cannot list the chunks of daemon %s: %s", u->d->uuid_text,
				ctl_strerror(ret));
			return ret;
		}
		first = false;
		for (size_t i = 0; i < count && !ret; i++) {
			const struct rfs_chunk_entry *e = &page[i];

			after_ino = e->inode;
			after_index = e->index;
			if (e->inode == last) {
				/* counted with the first chunk of the inode */
				continue;
			}
			last = e->inode;
			ret = stale_copy(u, e->inode, &stale, &gone);
			if (!ret && gone)
				u->chunks_left++;
			if (ret || !stale)
				continue;
			ret = rfs_chunk_remove(
				u->handle,
				&(struct rfs_chunk_sel){.inode = e->inode,
							.generation = RFS_GENERATION_ADMIN,
							.range = true},
				NULL, NULL);
			if (ret) {
				ctl_err("inode %" PRIu64
					": cannot remove its stale chunks from %s: %s",
					e->inode, u->d->uuid_text, ctl_strerror(ret));
				break;
			}
			u->files_cleaned++;
		}
	}
	return ret;
}

int ctl_cmd_undrain(struct ctl *c, int argc, char **argv)
{
	struct undrain u = {.c = c};
	uint64_t epoch = 0;
	int ret;

	ret = ctl_resolve_any(c, argv[0], &u.d);
	if (ret)
		return ret == -ENOENT || ret == -EINVAL ? CTL_EXIT_USAGE : ctl_exit_for(ret);
	if (u.d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		ctl_err("daemon %s was removed from the cluster: it cannot come back (a new data "
			"directory makes it join again as a new daemon)",
			u.d->uuid_text);
		return CTL_EXIT_FAILED;
	}
	if (u.d->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING) {
		ctl_err("daemon %s is %s, not draining: nothing to undrain", u.d->uuid_text,
			ctl_state_name(u.d->state));
		return CTL_EXIT_FAILED;
	}
	ret = ctl_daemon(c, u.d, &u.handle);
	if (ret) {
		ctl_err("cannot reach daemon %s at %s to lift its drain fences: %s (it stays "
			"draining)",
			u.d->uuid_text, u.d->conn_address, ctl_daemon_strerror(u.d, ret));
		return CTL_EXIT_UNREACHABLE;
	}
	ret = undrain_fences(&u);
	if (!ret)
		ret = undrain_stale(&u);
	if (!ret) {
		ret = set_state(c, u.d, RDMAFS__DAEMON_STATE__DAEMON_STATE_UP, false, &epoch);
		if (ret)
			ctl_err("cannot mark daemon %s up: %s", u.d->uuid_text, ctl_strerror(ret));
	}
	if (ret) {
		ctl_err("the undrain did not finish: daemon %s stays draining; run it again",
			u.d->uuid_text);
		return ctl_exit_for(ret);
	}
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_string("uuid", u.d->uuid_text);
		ctl_json_string("state", "up");
		ctl_json_u64("epoch", epoch);
		ctl_json_u64("files_kept", u.files_kept);
		ctl_json_u64("stale_files_removed", u.files_cleaned);
		ctl_json_u64("orphan_files_left", u.chunks_left);
		ctl_json_end_object();
		ctl_json_finish();
	} else {
		printf("daemon %s is up again (cluster map epoch %" PRIu64 "): new files may be "
		       "placed on it\n",
		       u.d->uuid_text, epoch);
		printf("  %" PRIu64 " files still on it (any fence a drain left on them lifted); "
		       "stale copies of %" PRIu64 " moved files removed; moved files stay where "
		       "they are\n",
		       u.files_kept, u.files_cleaned);
		if (u.chunks_left)
			printf("  chunks of %" PRIu64 " deleted files left on it: `rdmafsctl fsck "
			       "--repair` removes them\n",
			       u.chunks_left);
	}
	return CTL_EXIT_OK;
}
