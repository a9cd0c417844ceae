/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl scrub and fsck.
 *
 * scrub starts the SCRUB job on each daemon (it runs there, in the
 * background) and polls until every one has finished.
 *
 * fsck runs here, as a client: it lists every daemon's chunks (CHUNK_LIST),
 * then every inode (INODE_LIST; in that order, so a chunk whose inode is
 * missing from the later list belonged to an inode already gone), and
 * compares. What it reports:
 *
 *   orphan  a chunk on an UP or DOWN daemon that no file needs: its inode
 *           does not exist or is not a regular file, the daemon is not in the
 *           file's layout, placement puts that chunk index on another
 *           daemon, or the chunk starts at or past the file's size. --repair
 *           removes these (after checking the inode again).
 *   lost    a file whose layout names a REMOVED daemon or one the cluster
 *           map does not know: the chunks it had there are gone.
 *   bad     chunks the last scrub of each daemon found failing their
 *           checksums (or unreadable).
 *   holes   chunk indexes inside a file's size that no daemon holds. Legal
 *           (sparse files, data never written) and read as zeros: counted,
 *           never a problem. Without per-chunk records in the metadata,
 *           "missing data" cannot be told from a hole.
 *
 * Every file reported is named by its path too (INODE_PATHS), or says why
 * it has none. Daemons the map shows DOWN are not contacted (their chunks
 * are not checked, as for one that does not answer).
 *
 * Not judged: chunks on DRAINING daemons (they keep serving old layouts
 * until removal), chunks of files whose layout names a draining daemon (a
 * drain may be copying them), and chunks past the end of files that are open
 * (a writer may not have sent its new size yet).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "ctl_i.h"

#define POLL_US	       250000
#define REMOVE_BATCH   4096
#define LIST_IN_TABLES 50

static const char *chunk_error_name(int32_t err)
{
	switch (err) {
	case -EBADMSG:
		return "checksum mismatch";
	case -EIO:
		return "read error";
	default:
		return "error";
	}
}

/* "path": the path of @ino, or null and "path_error": why there is none. */
static void json_path(const struct ctl_paths *p, uint64_t ino)
{
	const char *why, *path = ctl_path_of(p, ino, &why);

	if (path) {
		ctl_json_string("path", path);
	} else {
		ctl_json_null("path");
		ctl_json_string("path_error", why);
	}
}

/* The path of @ino for a table, or "(no path: why)". */
static const char *text_path(const struct ctl_paths *p, uint64_t ino, char *buf, size_t len)
{
	const char *why, *path = ctl_path_of(p, ino, &why);

	if (path)
		return path;
	snprintf(buf, len, "(no path: %s)", why);
	return buf;
}

/* ---- scrub ---- */

static int scrub_call(struct ctl *c, struct ctl_daemon *d, Rdmafs__JobAction action,
		      Rdmafs__ScrubResp **out)
{
	Rdmafs__ScrubReq req = RDMAFS__SCRUB_REQ__INIT;
	struct rfs_daemon *handle;
	int ret = ctl_daemon(c, d, &handle);

	*out = NULL;
	if (ret)
		return ret;
	req.action = action;
	ret = rfs_daemon_call(handle, RDMAFS__METHOD__METHOD_SCRUB, &req.base,
			      &rdmafs__scrub_resp__descriptor, (ProtobufCMessage **)out);
	if (!ret) {
		for (size_t i = 0; i < (*out)->n_bad; i++) {
			if (!(*out)->bad[i] || !(*out)->bad[i]->chunk) {
				rdmafs__scrub_resp__free_unpacked(*out, NULL);
				*out = NULL;
				return -EBADMSG;
			}
		}
	}
	return ret;
}

static const char *job_state_name(Rdmafs__JobState s)
{
	switch (s) {
	case RDMAFS__JOB_STATE__JOB_STATE_NEVER_RUN:
		return "never run";
	case RDMAFS__JOB_STATE__JOB_STATE_RUNNING:
		return "running";
	case RDMAFS__JOB_STATE__JOB_STATE_DONE:
		return "done";
	case RDMAFS__JOB_STATE__JOB_STATE_FAILED:
		return "failed";
	case RDMAFS__JOB_STATE__JOB_STATE_CANCELLED:
		return "cancelled";
	default:
		return "unknown";
	}
}

static void report_daemon_error(struct ctl_daemon *d, int err)
{
	ctl_report_daemon_error(d, err);
}

/* The paths of the files of every bad chunk the scrubs found (NULL if none). */
static struct ctl_paths *scrub_paths(struct ctl *c, Rdmafs__ScrubResp **res, const int *errs,
				     size_t n)
{
	struct ctl_paths *paths = NULL;
	uint64_t *inos;
	size_t count = 0;

	for (size_t i = 0; i < n; i++)
		count += res[i] && errs[i] == 0 ? res[i]->n_bad : 0;
	if (count == 0)
		return NULL;
	inos = malloc(count * sizeof(*inos));
	if (!inos)
		return NULL;
	count = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; res[i] && errs[i] == 0 && k < res[i]->n_bad; k++)
			inos[count++] = res[i]->bad[k]->chunk->inode;
	if (ctl_paths_resolve(c, inos, count, &paths))
		paths = NULL;
	free(inos);
	return paths;
}

int ctl_cmd_scrub(struct ctl *c, int argc, char **argv)
{
	bool status_only = ctl_flags & CTL_FLAG_STATUS, no_wait = ctl_flags & CTL_FLAG_NO_WAIT;
	bool repair = ctl_flags & CTL_FLAG_REPAIR;
	uint64_t repaired = 0, unrepaired = 0;
	struct ctl_daemon *one = NULL;
	struct ctl_paths *paths;
	Rdmafs__ScrubResp **res;
	int *errs, ret, status = CTL_EXIT_OK;
	uint64_t bad_total = 0;
	size_t n;
	bool running;

	ret = ctl_map_load(c, false);
	if (ret)
		return ctl_exit_for(ret);
	if (argc == 1) {
		ret = ctl_resolve(c, argv[0], &one);
		if (ret)
			return ret == -ENOENT || ret == -EINVAL ? CTL_EXIT_USAGE
								: ctl_exit_for(ret);
	}
	n = c->map.count;
	res = calloc(n + 1, sizeof(*res));
	errs = calloc(n + 1, sizeof(*errs));
	if (!res || !errs) {
		free(res);
		free(errs);
		return CTL_EXIT_FAILED;
	}
	for (size_t i = 0; i < n; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];

		if (one ? d != one : d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
			errs[i] = 1; /* not a target */
			continue;
		}
		ret = scrub_call(c, d,
				 status_only ? RDMAFS__JOB_ACTION__JOB_ACTION_STATUS
					     : RDMAFS__JOB_ACTION__JOB_ACTION_START,
				 &res[i]);
		if (ret == -EBUSY) /* one runs already: follow it */
			ret = scrub_call(c, d, RDMAFS__JOB_ACTION__JOB_ACTION_STATUS, &res[i]);
		errs[i] = ret;
		if (ret)
			report_daemon_error(d, ret);
	}
	do {
		running = false;
		for (size_t i = 0; i < n && !status_only && !no_wait; i++) {
			if (errs[i] || !res[i] ||
			    res[i]->state != RDMAFS__JOB_STATE__JOB_STATE_RUNNING)
				continue;
			running = true;
			rdmafs__scrub_resp__free_unpacked(res[i], NULL);
			ret = scrub_call(c, &c->map.daemons[i],
					 RDMAFS__JOB_ACTION__JOB_ACTION_STATUS, &res[i]);
			if (ret) {
				errs[i] = ret;
				report_daemon_error(&c->map.daemons[i], ret);
			}
		}
		if (running)
			usleep(POLL_US);
	} while (running);

	paths = scrub_paths(c, res, errs, n);
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_begin_array("daemons");
	} else {
		printf("%-36s  %-10s  %10s  %10s  %8s\n", "DAEMON", "SCRUB", "CHECKED", "BYTES",
		       "BAD");
	}
	for (size_t i = 0; i < n; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];
		const Rdmafs__ScrubResp *r = res[i];
		char b[32];

		if (errs[i] == 1)
			continue;
		if (errs[i]) {
			if (ctl_exit_for(errs[i]) > status)
				status = ctl_exit_for(errs[i]);
			if (c->json) {
				ctl_json_begin_object(NULL);
				ctl_json_string("uuid", d->uuid_text);
				ctl_json_string("error", ctl_daemon_strerror(d, errs[i]));
				ctl_json_end_object();
			} else {
				printf("%-36s  %-10s\n", d->uuid_text,
				       ctl_daemon_skipped(d, errs[i]) ? "down" : "unreachable");
			}
			continue;
		}
		bad_total += r->bad_count;
		if (r->state == RDMAFS__JOB_STATE__JOB_STATE_FAILED && status == CTL_EXIT_OK)
			status = CTL_EXIT_FAILED;
		if (c->json) {
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", d->uuid_text);
			ctl_json_string("state", job_state_name(r->state));
			ctl_json_u64("chunks_total", r->chunks_total);
			ctl_json_u64("chunks_checked", r->chunks_checked);
			ctl_json_u64("bytes_checked", r->bytes_checked);
			ctl_json_u64("bad_count", r->bad_count);
			if (r->error && r->error[0])
				ctl_json_string("error", r->error);
			ctl_json_begin_array("bad");
			for (size_t k = 0; k < r->n_bad; k++) {
				ctl_json_begin_object(NULL);
				ctl_json_u64("inode", r->bad[k]->chunk->inode);
				ctl_json_u64("index", r->bad[k]->chunk->index);
				ctl_json_u64("block", r->bad[k]->block);
				ctl_json_string("error", chunk_error_name(r->bad[k]->error));
				json_path(paths, r->bad[k]->chunk->inode);
				ctl_json_end_object();
			}
			ctl_json_end_array();
			ctl_json_end_object();
			continue;
		}
		printf("%-36s  %-10s  %10" PRIu64 "  %10s  %8" PRIu64 "%s%s\n", d->uuid_text,
		       job_state_name(r->state), r->chunks_checked,
		       ctl_fmt_bytes(r->bytes_checked, b, sizeof(b)), r->bad_count,
		       r->error && r->error[0] ? "  " : "", r->error ? r->error : "");
	}
	if (!c->json && bad_total) {
		printf("\n%-36s  %20s  %10s  %6s  %-17s  %s\n", "BAD CHUNK ON", "INODE", "INDEX",
		       "BLOCK", "ERROR", "PATH");
		for (size_t i = 0; i < n; i++) {
			for (size_t k = 0; res[i] && errs[i] == 0 && k < res[i]->n_bad; k++) {
				const Rdmafs__BadChunk *bc = res[i]->bad[k];
				char why[128];

				printf("%-36s  %20" PRIu64 "  %10" PRIu64 "  %6u  %-17s  %s\n",
				       c->map.daemons[i].uuid_text, bc->chunk->inode,
				       bc->chunk->index, bc->block, chunk_error_name(bc->error),
				       text_path(paths, bc->chunk->inode, why, sizeof(why)));
			}
			if (res[i] && errs[i] == 0 && res[i]->bad_count > res[i]->n_bad)
				printf("%-36s  ... and %" PRIu64 " more\n",
				       c->map.daemons[i].uuid_text,
				       res[i]->bad_count - res[i]->n_bad);
		}
	}
	if (repair && bad_total && !(no_wait && !status_only)) {
		if (!c->json)
			printf("\n");
		ctl_scrub_repair(c, res, errs, n, &repaired, &unrepaired);
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_u64("bad_total", bad_total);
		if (repair) {
			ctl_json_u64("repaired", repaired);
			ctl_json_u64("unrepaired", unrepaired);
		}
		ctl_json_end_object();
		ctl_json_finish();
	} else if (no_wait && !status_only) {
		printf("\nstarted; `rdmafsctl scrub --status` shows the result\n");
	}
	/* repaired bad chunks are no problem left; the rest (and those repair left alone) are */
	if (status == CTL_EXIT_OK && bad_total && (!repair || unrepaired || !repaired))
		status = CTL_EXIT_PROBLEMS;
	for (size_t i = 0; i < n; i++)
		if (res[i])
			rdmafs__scrub_resp__free_unpacked(res[i], NULL);
	ctl_paths_free(paths);
	free(res);
	free(errs);
	return status;
}

/* ---- fsck ---- */

struct fsck_inode {
	uint64_t ino;
	uint32_t mode;
	uint32_t open_count;
	uint64_t size;
	uint32_t chunk_size; /* 0: no layout */
	uint64_t seed;
	size_t width;
	uint32_t replicas; /* Layout.replicas: its chunks' chains are this long */
	uint8_t (*daemons)[RDMAFS_UUID_LEN];
	uint32_t *domains; /* Layout.domains, one per daemon; NULL: each its own */
	bool in_drain;	   /* its layout names a draining daemon */
	uint64_t chunks_ok;
};

struct fsck_chunk {
	uint64_t ino, index, version;
	uint32_t length;
	size_t daemon;
};

enum orphan_reason {
	ORPHAN_NO_INODE,
	ORPHAN_NOT_FILE,
	ORPHAN_NOT_IN_LAYOUT,
	ORPHAN_MISPLACED,
	ORPHAN_PAST_EOF,
};

static const char *const reason_text[] = {
	[ORPHAN_NO_INODE] = "no such inode",
	[ORPHAN_NOT_FILE] = "inode is not a regular file",
	[ORPHAN_NOT_IN_LAYOUT] = "daemon not in the file's layout",
	[ORPHAN_MISPLACED] = "placement puts it on another daemon",
	[ORPHAN_PAST_EOF] = "past the end of the file",
};

struct orphan {
	struct fsck_chunk chunk;
	enum orphan_reason reason;
	bool removed;
};

struct lost {
	uint64_t ino;
	uint8_t uuid[RDMAFS_UUID_LEN];
	uint32_t state; /* UINT32_MAX: not in the map */
};

struct bad {
	size_t daemon;
	uint64_t ino, index;
	uint32_t block;
	int32_t error;
};

struct fsck {
	struct ctl *c;
	struct fsck_inode *inodes;
	size_t inode_count, files;
	struct fsck_chunk *chunks;
	size_t chunk_count, chunk_cap;
	struct orphan *orphans;
	size_t orphan_count, orphans_removed;
	struct lost *lost;
	size_t lost_count;
	struct bad *bad;
	size_t bad_count;
	uint64_t bad_total;
	int *daemon_err; /* per map entry: connect/list error, 1 not listed (removed) */
	size_t unreachable;
	uint64_t skipped_draining, skipped_in_drain, skipped_open;
	uint64_t holes;
	bool scrub_never_run;
	struct ctl_paths *paths; /* of every file reported */
};

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return p;
	while (n < need)
		n *= 2;
	q = realloc(p, n * size);
	if (q)
		*cap = n;
	return q;
}

/* Every chunk of every reachable daemon that is not REMOVED. */
static int fsck_list_chunks(struct fsck *f)
{
	struct ctl *c = f->c;

	for (size_t i = 0; i < c->map.count; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];
		uint64_t after_ino = 0, after_index = 0;
		bool first = true, end = false;
		struct rfs_daemon *handle;
		int ret;

		if (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
			f->daemon_err[i] = 1;
			continue;
		}
		ret = ctl_daemon(c, d, &handle);
		while (!ret && !end) {
			struct rfs_chunk_entry page[CTL_LIST_PAGE];
			size_t count;

			ret = rfs_chunk_list(handle, after_ino, after_index, first, page,
					     CTL_LIST_PAGE, &count, &end);
			if (ret)
				break;
			first = false;
			for (size_t k = 0; k < count; k++) {
				const struct rfs_chunk_entry *e = &page[k];
				struct fsck_chunk *fc;

				f->chunks = grow(f->chunks, &f->chunk_cap, f->chunk_count + 1,
						 sizeof(*f->chunks));
				if (!f->chunks)
					return -ENOMEM;
				fc = &f->chunks[f->chunk_count++];
				fc->ino = e->inode;
				fc->index = e->index;
				fc->version = e->version;
				fc->length = e->length;
				fc->daemon = i;
				after_ino = fc->ino;
				after_index = fc->index;
			}
		}
		if (ret) {
			f->daemon_err[i] = ret;
			f->unreachable++;
			report_daemon_error(d, ret);
		}
	}
	return 0;
}

static bool is_draining(struct ctl *c, const uint8_t *uuid)
{
	const struct ctl_daemon *d = ctl_map_find(c, uuid);

	return d && d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING;
}

static int fsck_list_inodes(struct fsck *f)
{
	struct ctl *c = f->c;
	size_t cap = 0;
	uint64_t after = 0;
	bool end = false;
	int ret;

	while (!end) {
		Rdmafs__InodeListResp *page;

		ret = ctl_inode_list(c, after, &page);
		if (ret)
			return ret;
		end = page->done;
		for (size_t i = 0; i < page->n_inodes; i++) {
			const Rdmafs__InodeListEntry *e = page->inodes[i];
			const Rdmafs__Layout *l = e->layout;
			struct fsck_inode *in;

			f->inodes = grow(f->inodes, &cap, f->inode_count + 1, sizeof(*f->inodes));
			if (!f->inodes) {
				rdmafs__inode_list_resp__free_unpacked(page, NULL);
				return -ENOMEM;
			}
			in = &f->inodes[f->inode_count++];
			memset(in, 0, sizeof(*in));
			in->ino = e->ino;
			in->mode = e->mode;
			in->open_count = e->open_count;
			in->size = e->size;
			after = e->ino;
			if (!S_ISREG(e->mode))
				continue;
			f->files++;
			if (!l)
				continue;
			in->daemons = calloc(l->n_daemons, RDMAFS_UUID_LEN);
			if (!in->daemons) {
				rdmafs__inode_list_resp__free_unpacked(page, NULL);
				return -ENOMEM;
			}
			in->chunk_size = l->chunk_size;
			in->seed = l->placement_seed;
			in->width = l->n_daemons;
			in->replicas = l->replicas;
			if (l->n_domains) {
				in->domains = calloc(l->n_domains, sizeof(*in->domains));
				if (!in->domains) {
					rdmafs__inode_list_resp__free_unpacked(page, NULL);
					return -ENOMEM;
				}
				memcpy(in->domains, l->domains,
				       l->n_domains * sizeof(*in->domains));
			}
			for (size_t d = 0; d < l->n_daemons; d++) {
				const struct ctl_daemon *cd;
				struct lost *lo;

				memcpy(in->daemons[d], l->daemons[d].data, RDMAFS_UUID_LEN);
				in->in_drain |= is_draining(c, in->daemons[d]);
				cd = ctl_map_find(c, in->daemons[d]);
				if (cd && cd->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
					continue;
				lo = realloc(f->lost, (f->lost_count + 1) * sizeof(*f->lost));
				if (!lo) {
					rdmafs__inode_list_resp__free_unpacked(page, NULL);
					return -ENOMEM;
				}
				f->lost = lo;
				lo[f->lost_count].ino = e->ino;
				memcpy(lo[f->lost_count].uuid, in->daemons[d], RDMAFS_UUID_LEN);
				lo[f->lost_count].state = cd ? cd->state : UINT32_MAX;
				f->lost_count++;
			}
		}
		rdmafs__inode_list_resp__free_unpacked(page, NULL);
	}
	return 0;
}

static struct fsck_inode *find_inode(struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->inode_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->inodes[mid].ino == ino)
			return &f->inodes[mid];
		if (f->inodes[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int add_orphan(struct fsck *f, const struct fsck_chunk *ch, enum orphan_reason why)
{
	struct orphan *o = realloc(f->orphans, (f->orphan_count + 1) * sizeof(*o));

	if (!o)
		return -ENOMEM;
	f->orphans = o;
	o[f->orphan_count].chunk = *ch;
	o[f->orphan_count].reason = why;
	o[f->orphan_count].removed = false;
	f->orphan_count++;
	return 0;
}

static int fsck_classify(struct fsck *f)
{
	struct ctl *c = f->c;
	uint64_t expected = 0, ok = 0;
	int ret = 0;

	for (size_t k = 0; k < f->chunk_count && !ret; k++) {
		const struct fsck_chunk *ch = &f->chunks[k];
		const struct ctl_daemon *d = &c->map.daemons[ch->daemon];
		struct fsck_inode *in = find_inode(f, ch->ino);
		const uint8_t *list[RDMAFS_MAX_STRIPE];
		bool named = false, in_chain;
		int chain[RDMAFS_MAX_REPLICAS], n_chain;

		if (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING) {
			f->skipped_draining++;
			continue;
		}
		if (!in) {
			ret = add_orphan(f, ch, ORPHAN_NO_INODE);
			continue;
		}
		if (!S_ISREG(in->mode) || !in->chunk_size) {
			ret = add_orphan(f, ch, ORPHAN_NOT_FILE);
			continue;
		}
		for (size_t i = 0; i < in->width; i++) {
			list[i] = in->daemons[i];
			named |= memcmp(in->daemons[i], d->uuid, RDMAFS_UUID_LEN) == 0;
		}
		/* a chunk is where it belongs on any daemon of its chain */
		n_chain = rdmafs_place_chain(list, in->domains, in->width, in->seed, in->ino,
					     ch->index, in->replicas, chain);
		in_chain = false;
		for (int m = 0; m < n_chain; m++)
			in_chain |= memcmp(list[chain[m]], d->uuid, RDMAFS_UUID_LEN) == 0;
		if (!named || !in_chain) {
			if (in->in_drain) {
				f->skipped_in_drain++;
				continue;
			}
			ret = add_orphan(f, ch, named ? ORPHAN_MISPLACED : ORPHAN_NOT_IN_LAYOUT);
			continue;
		}
		if (ch->index >= in->size / in->chunk_size + (in->size % in->chunk_size != 0)) {
			if (in->open_count) {
				f->skipped_open++;
				continue;
			}
			ret = add_orphan(f, ch, ORPHAN_PAST_EOF);
			continue;
		}
		in->chunks_ok++;
	}
	for (size_t i = 0; i < f->inode_count; i++) {
		const struct fsck_inode *in = &f->inodes[i];

		if (!in->chunk_size)
			continue;
		expected += in->size / in->chunk_size + (in->size % in->chunk_size != 0);
		ok += in->chunks_ok;
	}
	f->holes = expected > ok ? expected - ok : 0;
	return ret;
}

/* The bad chunks the last scrub of every reachable daemon found. */
static int fsck_scrub_results(struct fsck *f)
{
	struct ctl *c = f->c;

	for (size_t i = 0; i < c->map.count; i++) {
		Rdmafs__ScrubResp *r;
		int ret;

		if (f->daemon_err[i])
			continue;
		ret = scrub_call(c, &c->map.daemons[i], RDMAFS__JOB_ACTION__JOB_ACTION_STATUS, &r);
		if (ret) {
			f->daemon_err[i] = ret;
			f->unreachable++;
			report_daemon_error(&c->map.daemons[i], ret);
			continue;
		}
		if (r->state == RDMAFS__JOB_STATE__JOB_STATE_NEVER_RUN)
			f->scrub_never_run = true;
		f->bad_total += r->bad_count;
		for (size_t k = 0; k < r->n_bad; k++) {
			struct bad *b = realloc(f->bad, (f->bad_count + 1) * sizeof(*b));

			if (!b) {
				rdmafs__scrub_resp__free_unpacked(r, NULL);
				return -ENOMEM;
			}
			f->bad = b;
			b[f->bad_count++] = (struct bad){.daemon = i,
							 .ino = r->bad[k]->chunk->inode,
							 .index = r->bad[k]->chunk->index,
							 .block = r->bad[k]->block,
							 .error = r->bad[k]->error};
		}
		rdmafs__scrub_resp__free_unpacked(r, NULL);
	}
	return 0;
}

/*
 * Whether orphan @o still is one: its inode still missing, or (past the end)
 * the file still not reaching it. Other reasons do not depend on time.
 */
static bool still_orphan(struct fsck *f, const struct orphan *o)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *resp;
	const struct fsck_inode *in;
	bool orphan = false;
	int ret;

	if (o->reason != ORPHAN_NO_INODE && o->reason != ORPHAN_PAST_EOF)
		return true;
	req.ino = o->chunk.ino;
	ret = ctl_meta_call(f->c, RDMAFS__METHOD__METHOD_GETATTR, &req.base,
			    &rdmafs__attr_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret == -ENOENT)
		return o->reason == ORPHAN_NO_INODE;
	if (ret)
		return false;
	in = find_inode(f, o->chunk.ino);
	if (o->reason == ORPHAN_PAST_EOF && resp->attr && in && in->chunk_size)
		orphan = o->chunk.index >= resp->attr->size / in->chunk_size +
						   (resp->attr->size % in->chunk_size != 0);
	rdmafs__attr_resp__free_unpacked(resp, NULL);
	return orphan;
}

/* Removes the orphans, batched per daemon and inode. */
static int fsck_repair(struct fsck *f)
{
	struct ctl *c = f->c;
	uint64_t *indexes = malloc(REMOVE_BATCH * sizeof(*indexes));
	size_t *which = malloc(REMOVE_BATCH * sizeof(*which));
	int ret = 0;

	if (!indexes || !which) {
		free(indexes);
		free(which);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->orphan_count && !ret;) {
		const struct fsck_chunk *first = &f->orphans[i].chunk;
		struct ctl_daemon *d = &c->map.daemons[first->daemon];
		struct rfs_chunk_sel sel = {.generation = RFS_GENERATION_ADMIN, .indexes = indexes};
		struct rfs_daemon *handle;
		size_t n = 0, j = i;

		for (; j < f->orphan_count && n < REMOVE_BATCH &&
		       f->orphans[j].chunk.daemon == first->daemon &&
		       f->orphans[j].chunk.ino == first->ino;
		     j++) {
			if (!still_orphan(f, &f->orphans[j]))
				continue;
			which[n] = j;
			indexes[n++] = f->orphans[j].chunk.index;
		}
		i = j;
		if (n == 0)
			continue;
		sel.inode = first->ino;
		sel.count = n;
		ret = ctl_daemon(c, d, &handle);
		if (!ret)
			ret = rfs_chunk_remove(handle, &sel, NULL, NULL);
		if (ret) {
			report_daemon_error(d, ret);
			break;
		}
		for (size_t k = 0; k < n; k++)
			f->orphans[which[k]].removed = true;
		f->orphans_removed += n;
	}
	free(indexes);
	free(which);
	return ret;
}

/* Looks up the paths of every inode reported: orphans', lost files', bad chunks'. */
static int fsck_paths(struct fsck *f)
{
	size_t n = f->orphan_count + f->lost_count + f->bad_count, k = 0;
	uint64_t *inos;
	int ret;

	if (n == 0)
		return 0;
	inos = malloc(n * sizeof(*inos));
	if (!inos)
		return -ENOMEM;
	for (size_t i = 0; i < f->orphan_count; i++)
		inos[k++] = f->orphans[i].chunk.ino;
	for (size_t i = 0; i < f->lost_count; i++)
		inos[k++] = f->lost[i].ino;
	for (size_t i = 0; i < f->bad_count; i++)
		inos[k++] = f->bad[i].ino;
	ret = ctl_paths_resolve(f->c, inos, n, &f->paths);
	free(inos);
	return ret;
}

static int orphan_cmp(const void *a, const void *b)
{
	const struct fsck_chunk *x = &((const struct orphan *)a)->chunk;
	const struct fsck_chunk *y = &((const struct orphan *)b)->chunk;

	if (x->daemon != y->daemon)
		return x->daemon < y->daemon ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static void fsck_print(struct fsck *f, bool repair)
{
	struct ctl *c = f->c;
	char text[37], why[128];

	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_u64("inodes", f->inode_count);
		ctl_json_u64("files", f->files);
		ctl_json_u64("chunks", f->chunk_count);
		ctl_json_u64("orphan_count", f->orphan_count);
		ctl_json_u64("orphans_removed", f->orphans_removed);
		ctl_json_begin_array("orphans");
		for (size_t i = 0; i < f->orphan_count; i++) {
			const struct orphan *o = &f->orphans[i];

			ctl_json_begin_object(NULL);
			ctl_json_string("daemon", c->map.daemons[o->chunk.daemon].uuid_text);
			ctl_json_u64("inode", o->chunk.ino);
			ctl_json_u64("index", o->chunk.index);
			ctl_json_u64("length", o->chunk.length);
			ctl_json_string("reason", reason_text[o->reason]);
			json_path(f->paths, o->chunk.ino);
			ctl_json_bool("removed", o->removed);
			ctl_json_end_object();
		}
		ctl_json_end_array();
		ctl_json_u64("lost_count", f->lost_count);
		ctl_json_begin_array("lost");
		for (size_t i = 0; i < f->lost_count; i++) {
			ctl_json_begin_object(NULL);
			ctl_json_u64("inode", f->lost[i].ino);
			ctl_uuid_format(f->lost[i].uuid, text);
			ctl_json_string("daemon", text);
			ctl_json_string("daemon_state", f->lost[i].state == UINT32_MAX
								? "not in the cluster map"
								: ctl_state_name(f->lost[i].state));
			json_path(f->paths, f->lost[i].ino);
			ctl_json_end_object();
		}
		ctl_json_end_array();
		ctl_json_u64("bad_count", f->bad_total);
		ctl_json_begin_array("bad");
		for (size_t i = 0; i < f->bad_count; i++) {
			ctl_json_begin_object(NULL);
			ctl_json_string("daemon", c->map.daemons[f->bad[i].daemon].uuid_text);
			ctl_json_u64("inode", f->bad[i].ino);
			ctl_json_u64("index", f->bad[i].index);
			ctl_json_u64("block", f->bad[i].block);
			ctl_json_string("error", chunk_error_name(f->bad[i].error));
			json_path(f->paths, f->bad[i].ino);
			ctl_json_end_object();
		}
		ctl_json_end_array();
		ctl_json_bool("scrub_never_run", f->scrub_never_run);
		if (f->unreachable)
			ctl_json_null("holes");
		else
			ctl_json_u64("holes", f->holes);
		ctl_json_u64("skipped_on_draining_daemons", f->skipped_draining);
		ctl_json_u64("skipped_files_being_drained", f->skipped_in_drain);
		ctl_json_u64("skipped_past_end_of_open_files", f->skipped_open);
		ctl_json_u64("daemons_unreachable", f->unreachable);
		ctl_json_begin_array("unreachable");
		for (size_t i = 0; i < c->map.count; i++) {
			if (f->daemon_err[i] == 0 || f->daemon_err[i] == 1)
				continue;
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", c->map.daemons[i].uuid_text);
			ctl_json_string("error",
					ctl_daemon_strerror(&c->map.daemons[i], f->daemon_err[i]));
			ctl_json_end_object();
		}
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
		return;
	}
	printf("fsck: %zu inodes (%zu regular files), %zu chunks on %zu daemons\n", f->inode_count,
	       f->files, f->chunk_count, c->map.count);
	printf("  orphan chunks   %zu", f->orphan_count);
	if (repair)
		printf(" (%zu removed)", f->orphans_removed);
	printf("\n  lost files      %zu (layout names a removed or unknown daemon)\n",
	       f->lost_count);
	printf("  bad chunks      %" PRIu64 " (from the last scrub of each daemon%s)\n",
	       f->bad_total, f->scrub_never_run ? "; some never scrubbed" : "");
	if (f->unreachable)
		printf("  holes           unknown (daemons unreachable)\n");
	else
		printf("  holes           %" PRIu64 " (never-written chunks inside a file's size:"
		       " read as zeros, not damage)\n",
		       f->holes);
	printf("  not judged      %" PRIu64 " chunks on draining daemons, %" PRIu64
	       " of files being drained, %" PRIu64 " past the end of open files\n",
	       f->skipped_draining, f->skipped_in_drain, f->skipped_open);
	if (f->unreachable)
		printf("  UNREACHABLE     %zu daemons (down or not answering): their chunks were "
		       "not checked\n",
		       f->unreachable);
	if (f->orphan_count)
		printf("\n%-36s  %12s  %8s  %10s  %-35s  %s\n", "ORPHAN ON", "INODE", "INDEX",
		       "LENGTH", "REASON", "PATH");
	for (size_t i = 0; i < f->orphan_count && i < LIST_IN_TABLES; i++) {
		const struct orphan *o = &f->orphans[i];

		printf("%-36s  %12" PRIu64 "  %8" PRIu64 "  %10u  %-35s  %s%s\n",
		       c->map.daemons[o->chunk.daemon].uuid_text, o->chunk.ino, o->chunk.index,
		       o->chunk.length, reason_text[o->reason],
		       text_path(f->paths, o->chunk.ino, why, sizeof(why)),
		       o->removed ? " [removed]" : "");
	}
	if (f->orphan_count > LIST_IN_TABLES)
		printf("... and %zu more (--json lists them all)\n",
		       f->orphan_count - LIST_IN_TABLES);
	if (f->lost_count)
		printf("\n%-12s  %-36s  %-22s  %s\n", "LOST INODE", "DAEMON", "ITS STATE", "PATH");
	for (size_t i = 0; i < f->lost_count && i < LIST_IN_TABLES; i++) {
		ctl_uuid_format(f->lost[i].uuid, text);
		printf("%-12" PRIu64 "  %-36s  %-22s  %s\n", f->lost[i].ino, text,
		       f->lost[i].state == UINT32_MAX ? "not in the cluster map"
						      : ctl_state_name(f->lost[i].state),
		       text_path(f->paths, f->lost[i].ino, why, sizeof(why)));
	}
	if (f->bad_count)
		printf("\n%-36s  %12s  %8s  %6s  %-17s  %s\n", "BAD CHUNK ON", "INODE", "INDEX",
		       "BLOCK", "ERROR", "PATH");
	for (size_t i = 0; i < f->bad_count && i < LIST_IN_TABLES; i++)
		printf("%-36s  %12" PRIu64 "  %8" PRIu64 "  %6u  %-17s  %s\n",
		       c->map.daemons[f->bad[i].daemon].uuid_text, f->bad[i].ino, f->bad[i].index,
		       f->bad[i].block, chunk_error_name(f->bad[i].error),
		       text_path(f->paths, f->bad[i].ino, why, sizeof(why)));
}

int ctl_cmd_fsck(struct ctl *c, int argc, char **argv)
{
	bool repair = (ctl_flags & CTL_FLAG_REPAIR) != 0;
	struct fsck f = {.c = c};
	int ret, status;

	ret = ctl_map_load(c, false);
	if (ret)
		return ctl_exit_for(ret);
	f.daemon_err = calloc(c->map.count + 1, sizeof(*f.daemon_err));
	if (!f.daemon_err)
		return CTL_EXIT_FAILED;
	ret = fsck_list_chunks(&f);
	if (!ret)
		ret = fsck_list_inodes(&f);
	if (!ret)
		ret = fsck_classify(&f);
	if (!ret)
		ret = fsck_scrub_results(&f);
	if (!ret && f.orphan_count)
		qsort(f.orphans, f.orphan_count, sizeof(*f.orphans), orphan_cmp);
	if (!ret && repair && f.orphan_count)
		ret = fsck_repair(&f);
	if (!ret || f.orphans_removed)
		fsck_paths(&f);
	if (ret && ret != -ENOMEM && ctl_exit_for(ret) == CTL_EXIT_FAILED)
		ctl_err("fsck: %s", ctl_strerror(ret));
	if (!ret || f.orphans_removed)
		fsck_print(&f, repair);

	if (ret)
		status = ctl_exit_for(ret);
	else if (f.unreachable)
		status = CTL_EXIT_UNREACHABLE;
	else if (f.orphan_count > f.orphans_removed || f.lost_count || f.bad_total)
		status = CTL_EXIT_PROBLEMS;
	else
		status = CTL_EXIT_OK;
	for (size_t i = 0; i < f.inode_count; i++) {
		free(f.inodes[i].daemons);
		free(f.inodes[i].domains);
	}
	free(f.inodes);
	free(f.chunks);
	free(f.orphans);
	free(f.lost);
	free(f.bad);
	free(f.daemon_err);
	ctl_paths_free(f.paths);
	return status;
}
