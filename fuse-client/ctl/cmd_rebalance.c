/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl rebalance: gives the daemons added to a cluster (or back from a
 * drain) their share of the files already there, online, fenced as a drain
 * is (cmd_drain.c).
 *
 * A file's layout is the @width UP daemons that scored highest for it when it
 * was made (the metadata service's rule, meta_choose_layout()); a daemon
 * added later is in no old file's layout. For every regular file whose layout
 * (generation g) is not what that rule picks now among the UP daemons, with
 * the same width and the failure domains the daemons declare now:
 *
 *   1. CHUNK_FENCE on every daemon of the old layout raises the file's fence
 *      to g + 1 (ctl_fence_layout()): from its reply on, no request made with
 *      the old layout is served, and none is in progress; every copy of a
 *      chain holds each write a head took before its fence (forwarded writes
 *      pass fences). Writers and readers wait for the new layout (fs_client.c
 *      fence_retry()), as in a drain;
 *   2. every chunk any of them holds is copied, for each daemon of its chain
 *      under the new list that is not in its chain under the old one, from a
 *      daemon of its old chain that holds it; the destinations commit;
 *   3. SET_LAYOUT switches the file to the new list (generation g + 1) with
 *      its domains, a compare-and-swap against the old list;
 *   4. each old copy no longer in its chunk's chain is removed (the fence
 *      keeps every old-layout request off it).
 *
 * When a step before 3 fails, or SET_LAYOUT does for another reason than a
 * concurrent change, the copies made are removed and the fences lifted (once
 * the service confirms the file still has generation g), and the file stays
 * as it was. -ESTALE: someone else moved the file; its generation is past
 * the fences, which are harmless, and the copies are left to fsck (they may
 * be in the new layout's chains). -ENOENT: the file is gone; its chunks are
 * removed everywhere we know of.
 *
 * A file whose layout names a daemon removed by force (its copies gone with
 * it) is moved too, its chunks copied from the copies left, so it has all
 * its copies again; unless as many of its daemons are removed as it keeps
 * copies: a chunk may then have lost every copy, and the file is left for
 * fsck to report rather than turned into holes.
 *
 * Before it moves anything it lifts the fences a move interrupted between
 * steps 1 and 3 left (a fence above its file's layout generation: the file's
 * writers wait on it), listing each daemon's (lift_stale_fences()).
 *
 * Every daemon must be UP (none DOWN, SYNCING or DRAINING) with no chunk
 * lacking a copy: a rebalance copies from any member of a chain, so every
 * member must hold the chunk whole. A file whose new list would have fewer
 * failure domains than it keeps copies stays where it is, and is reported.
 * Files are moved one at a time; a file's writers wait only while it moves.
 * Running it again finds nothing to move.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "rdmafs_common.h"
#include "ctl_i.h"

struct rebalance {
	struct ctl *c;
	uint64_t files, moved, kept, failed, stale, lost, chunks, bytes, lifted;
};

/* Fences asked of a daemon at once (a CHUNK_FENCE list answers at most 128). */
#define FENCES_PAGE 128u

/* A copy of a chunk one of the old layout's daemons holds. */
struct held {
	uint64_t index;
	uint32_t length;
	int daemon; /* into the old layout's daemons */
};

/* A daemon of the old or the new list, reached. */
struct member {
	const uint8_t *uuid;
	struct ctl_daemon *d;
	struct rfs_daemon *h;
};

/* One file's move: the old layout, the new list, what is held and what was done. */
struct move {
	struct rebalance *rb;
	uint64_t ino;
	const Rdmafs__Layout *l;
	struct member old[RDMAFS_MAX_STRIPE];
	size_t n_old;
	struct ctl_fences fences;
	struct member now[RDMAFS_MAX_STRIPE];
	uint32_t domains[RDMAFS_MAX_STRIPE];
	bool shared; /* two daemons of the new list share a domain */
	size_t n_now;
	struct held *held;
	size_t n_held, cap_held;
	struct held *copied; /* daemon: into now[] */
	size_t n_copied, cap_copied;
};

struct candidate {
	uint64_t score;
	struct ctl_daemon *d;
};

static int candidate_cmp(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	return rdmafs_rank_cmp(x->score, x->d->uuid, y->score, y->d->uuid);
}

/*
 * The list the metadata service would give @ino now, as wide as its layout
 * @l: its UP daemons that score highest for it, best first, and their
 * failure domains as declared now.
 */
static int new_list(struct move *m)
{
	struct ctl *c = m->rb->c;
	struct candidate *cand = calloc(c->map.count ? c->map.count : 1, sizeof(*cand));
	const char *keys[RDMAFS_MAX_STRIPE];
	char key[RDMAFS_MAX_STRIPE][RDMAFS_DOMAIN_KEY_MAX];
	size_t n = 0;

	if (!cand)
		return -ENOMEM;
	for (size_t i = 0; i < c->map.count; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];

		if (d->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
			continue;
		cand[n].d = d;
		cand[n].score = rdmafs_layout_score(m->l->placement_seed, m->ino, d->uuid);
		n++;
	}
	qsort(cand, n, sizeof(*cand), candidate_cmp);
	m->n_now = n < m->l->n_daemons ? n : m->l->n_daemons;
	for (size_t i = 0; i < m->n_now; i++) {
		m->now[i].d = cand[i].d;
		m->now[i].uuid = cand[i].d->uuid;
		keys[i] =
			rdmafs_domain_key(cand[i].d->host, cand[i].d->rack, key[i], sizeof(key[i]));
	}
	free(cand);
	m->shared = rdmafs_domains_number(keys, m->n_now, m->domains);
	return 0;
}

/* Where @uuid is in the old list, or -1. */
static int old_slot(const struct move *m, const uint8_t *uuid)
{
	for (size_t i = 0; i < m->n_old; i++)
		if (memcmp(m->old[i].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return (int)i;
	return -1;
}

/* The domain of old daemon @i (Layout.domains), or its own. */
static uint32_t old_domain(const struct move *m, size_t i)
{
	return m->l->n_domains ? m->l->domains[i] : (uint32_t)i;
}

/*
 * Whether the new list is the layout already: the same daemons, and, for a
 * file of copies, daemons share a domain there exactly where they do in the
 * layout (so every chain is the same; a file of one copy keeps no domains).
 */
static bool same_layout(const struct move *m)
{
	int at[RDMAFS_MAX_STRIPE];

	if (m->n_now != m->n_old)
		return false;
	for (size_t i = 0; i < m->n_now; i++) {
		at[i] = old_slot(m, m->now[i].uuid);
		if (at[i] < 0)
			return false;
	}
	if (m->l->replicas <= 1)
		return true;
	for (size_t i = 0; i < m->n_now; i++)
		for (size_t j = 0; j < i; j++)
			if ((m->domains[i] == m->domains[j]) !=
			    (old_domain(m, (size_t)at[i]) == old_domain(m, (size_t)at[j])))
				return false;
	return true;
}

static int add_held(struct held **v, size_t *n, size_t *cap, uint64_t index, uint32_t length,
		    int daemon)
{
	if (*n == *cap) {
		size_t want = *cap ? *cap * 2 : 64;
		struct held *grown = realloc(*v, want * sizeof(**v));

		if (!grown)
			return -ENOMEM;
		*v = grown;
		*cap = want;
	}
	(*v)[(*n)++] = (struct held){.index = index, .length = length, .daemon = daemon};
	return 0;
}

/* Every chunk of the file each old daemon holds, into m->held. */
static int list_held(struct move *m)
{
	struct rfs_chunk_entry page[CTL_LIST_PAGE];

	for (size_t i = 0; i < m->n_old; i++) {
		uint64_t after_ino = m->ino - 1, after_index = UINT64_MAX;
		bool end = !m->old[i].h; /* removed: it holds nothing any more */
		size_t count;
		int ret;

		while (!end) {
			ret = rfs_chunk_list(m->old[i].h, after_ino, after_index, false, page,
					     CTL_LIST_PAGE, &count, &end);
			if (ret) {
				ctl_err("cannot list the chunks of daemon %s: %s",
					m->old[i].d->uuid_text, ctl_strerror(ret));
				return ret;
			}
			for (size_t k = 0; k < count; k++) {
				if (page[k].inode != m->ino) {
					end = true;
					break;
				}
				after_ino = page[k].inode;
				after_index = page[k].index;
				ret = add_held(&m->held, &m->n_held, &m->cap_held, page[k].index,
					       page[k].length, (int)i);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

/* The copy of chunk @index old daemon @daemon holds, or NULL. */
static const struct held *holds(const struct move *m, uint64_t index, int daemon)
{
	for (size_t i = 0; i < m->n_held; i++)
		if (m->held[i].index == index && m->held[i].daemon == daemon)
			return &m->held[i];
	return NULL;
}

/* Whether @uuid is one of the @n daemons of chain @chain (indexes into @list). */
static bool in_chain(const uint8_t *uuid, const struct member *list, const int *chain, int n)
{
	for (int i = 0; i < n; i++)
		if (memcmp(list[chain[i]].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return true;
	return false;
}

/* The chains of chunk @index under the old layout and the new list. */
static int chains(const struct move *m, uint64_t index, int *was, int *n_was, int *now, int *n_now)
{
	const uint8_t *old_uuids[RDMAFS_MAX_STRIPE], *new_uuids[RDMAFS_MAX_STRIPE];

	for (size_t i = 0; i < m->n_old; i++)
		old_uuids[i] = m->old[i].uuid;
	for (size_t i = 0; i < m->n_now; i++)
		new_uuids[i] = m->now[i].uuid;
	*n_was = rdmafs_place_chain(old_uuids, m->l->n_domains ? m->l->domains : NULL, m->n_old,
				    m->l->placement_seed, m->ino, index, m->l->replicas, was);
	*n_now = rdmafs_place_chain(new_uuids, m->shared ? m->domains : NULL, m->n_now,
				    m->l->placement_seed, m->ino, index, m->l->replicas, now);
	return *n_was < 0 || *n_now < 0 ? -EINVAL : 0;
}

/* Whether chunk @index was dealt with already (m->held is in daemon order, not index order). */
static bool seen_before(const struct move *m, size_t at)
{
	for (size_t i = 0; i < at; i++)
		if (m->held[i].index == m->held[at].index)
			return true;
	return false;
}

/* Step 2: each chunk to the daemons its new chain adds, then their commits. */
static int copy_chunks(struct move *m)
{
	bool used[RDMAFS_MAX_STRIPE] = {false};
	int ret;

	for (size_t k = 0; k < m->n_held; k++) {
		uint64_t index = m->held[k].index;
		int was[RDMAFS_MAX_REPLICAS], now[RDMAFS_MAX_REPLICAS], n_was, n_now;
		const struct held *src = NULL;

		if (seen_before(m, k))
			continue;
		ret = chains(m, index, was, &n_was, now, &n_now);
		if (ret)
			return ret;
		for (int i = 0; i < n_was && !src; i++)
			src = holds(m, index, was[i]);
		if (!src)
			continue; /* held only off its chain: an orphan, fsck's */
		for (int i = 0; i < n_now; i++) {
			struct member *dst = &m->now[now[i]];
			struct rfs_chunk_id id = {m->ino, index, RFS_GENERATION_ADMIN};
			if (in_chain(dst->uuid, m->old, was, n_was))
				continue; /* it has its copy */
			ret = add_held(&m->copied, &m->n_copied, &m->cap_copied, index, 0, now[i]);
			if (!ret)
				ret = rfs_chunk_copy(m->old[src->daemon].h, dst->h, id, src->length,
						     m->l->chunk_size);
			if (ret) {
				ctl_err("inode %" PRIu64 " chunk %" PRIu64
					": copy from %s to %s: %s",
					m->ino, index, m->old[src->daemon].d->uuid_text,
					dst->d->uuid_text, ctl_strerror(ret));
				return ret;
			}
			used[now[i]] = true;
			m->rb->chunks++;
			m->rb->bytes += src->length;
		}
	}
	for (size_t i = 0; i < m->n_now; i++) {
		if (!used[i])
			continue;
		ret = ctl_chunk_commit_inode(m->now[i].h, m->ino);
		if (ret) {
			ctl_err("inode %" PRIu64 ": commit on daemon %s: %s", m->ino,
				m->now[i].d->uuid_text, ctl_strerror(ret));
			return ret;
		}
	}
	return 0;
}

/* Removes chunk @index of the file from @h. */
static int remove_chunk(struct rfs_daemon *h, uint64_t ino, uint64_t index)
{
	struct rfs_chunk_sel sel = {
		.inode = ino, .generation = RFS_GENERATION_ADMIN, .indexes = &index, .count = 1};

	return rfs_chunk_remove(h, &sel, NULL, NULL);
}

/* Undoes step 2: the copies made are removed. */
static void remove_copies(struct move *m)
{
	for (size_t i = 0; i < m->n_copied; i++)
		remove_chunk(m->now[m->copied[i].daemon].h, m->ino, m->copied[i].index);
}

/* Step 4: each old copy no longer in its chunk's chain is removed. */
static void remove_left(struct move *m)
{
	for (size_t k = 0; k < m->n_held; k++) {
		const struct held *h = &m->held[k];
		int was[RDMAFS_MAX_REPLICAS], now[RDMAFS_MAX_REPLICAS], n_was, n_now, ret;

		if (chains(m, h->index, was, &n_was, now, &n_now) ||
		    !in_chain(m->old[h->daemon].uuid, m->old, was, n_was) ||
		    in_chain(m->old[h->daemon].uuid, m->now, now, n_now))
			continue; /* an orphan is fsck's; a copy still in its chain stays */
		ret = remove_chunk(m->old[h->daemon].h, m->ino, h->index);
		if (ret)
			ctl_err("inode %" PRIu64 " chunk %" PRIu64
				": cannot remove the old copy on %s (%s): fsck --repair will",
				m->ino, h->index, m->old[h->daemon].d->uuid_text,
				ctl_strerror(ret));
	}
}

/*
 * A move that fenced the old daemons at @fence failed before switching:
 * removes its copies and lifts the fences, unless the service shows a
 * generation at or past it (the switch happened after all).
 */
static void undo(struct move *m, uint64_t fence)
{
	uint64_t generation = 0;
	int ret = ctl_layout_generation(m->rb->c, m->ino, &generation);

	if (ret == -ENOENT || (!ret && generation >= fence))
		return;
	remove_copies(m);
	ctl_fences_lift(m->rb->c, m->ino, fence, &m->fences, "the rebalance");
}

/*
 * Reaches every daemon of both lists but the old list's removed ones (a
 * forced removal): those are left with no handle, and the chunks they held
 * are copied to the new chains from the copies left, if any.
 */
static int reach(struct move *m)
{
	struct ctl *c = m->rb->c;
	int ret;

	for (size_t i = 0; i < m->n_old; i++) {
		m->old[i].d = ctl_map_find(c, m->old[i].uuid);
		m->old[i].h = NULL;
	}
	for (size_t i = 0; i < m->n_old + m->n_now; i++) {
		struct member *x = i < m->n_old ? &m->old[i] : &m->now[i - m->n_old];

		if (!x->d || x->d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
			continue;
		ret = ctl_daemon(c, x->d, &x->h);
		if (ret) {
			ctl_err("cannot reach daemon %s at %s: %s", x->d->uuid_text,
				x->d->conn_address, ctl_daemon_strerror(x->d, ret));
			return ret;
		}
	}
	return 0;
}

/* Moves one file; 1 when it needs no move. */
static int move_file(struct move *m)
{
	uint64_t fence = m->l->generation + 1;
	uint32_t copies = m->l->replicas ? m->l->replicas : 1;
	size_t domains, removed = 0;
	int ret = new_list(m);

	if (ret)
		return ret;
	m->n_old = m->l->n_daemons;
	for (size_t i = 0; i < m->n_old; i++)
		m->old[i].uuid = m->l->daemons[i].data;
	if (m->n_now == 0 || same_layout(m))
		return 1;
	domains = rdmafs_domain_count(m->shared ? m->domains : NULL, m->n_now);
	if (copies > domains) {
		ctl_err("inode %" PRIu64 ": keeps %u copies of each chunk, and its new list would "
			"have %zu failure domains: not moved",
			m->ino, copies, domains);
		m->rb->kept++;
		return 1;
	}
	ret = reach(m);
	if (ret)
		return ret;
	/*
	 * A daemon removed by force took its copies: each chunk is copied from the
	 * copies left, which every chain has while fewer of its layout's daemons
	 * are removed than it keeps copies. Else a chunk may have had every copy
	 * there, and a move would turn that loss into a hole: the file stays, for
	 * fsck to report.
	 */
	for (size_t i = 0; i < m->n_old; i++)
		removed += !m->old[i].h;
	if (removed >= copies) {
		ctl_err("inode %" PRIu64 ": its layout names %zu removed daemon%s and it keeps %u "
			"cop%s of each chunk: a chunk may have had every copy there, so it is not "
			"moved (rdmafsctl fsck reports it)",
			m->ino, removed, removed == 1 ? "" : "s", copies,
			copies == 1 ? "y" : "ies");
		m->rb->lost++;
		return 1;
	}
	ret = ctl_fence_layout(m->rb->c, m->ino, m->l, fence, &m->fences);
	if (ret)
		return ret;
	ret = list_held(m);
	if (!ret)
		ret = copy_chunks(m);
	if (ret) {
		undo(m, fence);
		return ret;
	}
	{
		const uint8_t *list[RDMAFS_MAX_STRIPE];

		for (size_t i = 0; i < m->n_now; i++)
			list[i] = m->now[i].uuid;
		ret = ctl_set_layout(m->rb->c, m->ino, m->l, list, m->n_now, m->domains);
	}
	if (ret == -ENOENT) {
		/* gone meanwhile: its last client could not remove the fenced copies */
		remove_copies(m);
		for (size_t i = 0; i < m->n_old; i++)
			if (m->old[i].h)
				ctl_chunk_remove_inode(m->old[i].h, m->ino);
		return 0;
	}
	if (ret == -ESTALE)
		return ret;
	if (ret) {
		ctl_err("inode %" PRIu64 ": cannot switch its layout: %s", m->ino,
			ctl_strerror(ret));
		undo(m, fence);
		return ret;
	}
	remove_left(m);
	return 0;
}

/* Every daemon UP (or removed) with every copy in place; else why not, and an error. */
static int check_settled(struct ctl *c)
{
	int ret = 0;

	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];

		if (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
			continue;
		if (d->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP) {
			ctl_err("daemon %s is %s: a rebalance needs every daemon up (wait for it, "
				"or "
				"finish its drain and remove it)",
				d->label, ctl_state_name(d->state));
			ret = -EAGAIN;
		} else if (d->chunks_missing) {
			ctl_err("daemon %s lacks %" PRIu64
				" chunks it missed: a rebalance waits until "
				"they are copied to it",
				d->label, d->chunks_missing);
			ret = -EAGAIN;
		}
	}
	return ret;
}

/*
 * Lifts the fences an interrupted move left on @d: a fence above the file's
 * layout generation is a move's that fenced the file and never switched it
 * (a rebalance or drain killed half-way), and keeps every writer of the file
 * waiting; one at or below it is a finished move's and blocks only clients of
 * an older layout. With every daemon UP none is draining, and this runs
 * before this rebalance fences anything: no move is under way (one rebalance
 * at a time). A file gone meanwhile has its fence lifted too.
 */
static int lift_stale_fences(struct rebalance *rb, struct ctl_daemon *d)
{
	struct rfs_fence fences[FENCES_PAGE];
	struct rfs_daemon *h;
	uint64_t after = 0, generation;
	size_t count;
	bool more = true;
	int ret = ctl_daemon(rb->c, d, &h);

	while (!ret && more) {
		ret = rfs_chunk_fence_list(h, after, fences, FENCES_PAGE, &count, &more);
		for (size_t i = 0; !ret && i < count; i++) {
			const struct rfs_fence *f = &fences[i];

			after = f->inode;
			ret = ctl_layout_generation(rb->c, f->inode, &generation);
			if (!ret && generation >= f->generation)
				continue; /* a finished move's */
			if (ret && ret != -ENOENT)
				break;
			ret = rfs_chunk_fence(h, f->inode, f->generation, true, NULL);
			if (ret)
				break;
			printf("rebalance: inode %" PRIu64
			       ": lifted the fence at generation %" PRIu64
			       " that an interrupted move left on daemon %s\n",
			       f->inode, f->generation, d->label);
			rb->lifted++;
		}
	}
	if (ret)
		ctl_err("daemon %s: cannot lift the fences interrupted moves left: %s", d->label,
			ctl_strerror(ret));
	return ret;
}

int ctl_cmd_rebalance(struct ctl *c, int argc, char **argv)
{
	struct rebalance rb = {.c = c};
	Rdmafs__InodeListResp *page;
	uint64_t after = 0;
	bool end = false;
	char b[32];
	int ret = ctl_map_load(c, false);

	if (ret)
		return ctl_exit_for(ret);
	if (check_settled(c))
		return CTL_EXIT_FAILED;
	for (size_t i = 0; i < c->map.count && !ret; i++)
		if (c->map.daemons[i].state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP)
			ret = lift_stale_fences(&rb, &c->map.daemons[i]);
	while (!end && !ret) {
		ret = ctl_inode_list(c, after, &page);
		if (ret)
			break;
		end = page->done;
		for (size_t i = 0; i < page->n_inodes; i++) {
			const Rdmafs__InodeListEntry *e = page->inodes[i];
			struct move m = {.rb = &rb, .ino = e->ino, .l = e->layout};
			int r;

			after = e->ino;
			if (!e->layout)
				continue;
			rb.files++;
			r = move_file(&m);
			free(m.held);
			free(m.copied);
			if (r == 1)
				continue;
			if (r == -ESTALE)
				rb.stale++;
			else if (r)
				rb.failed++;
			else
				rb.moved++;
			if (r && r != -ESTALE && ctl_exit_for(r) == CTL_EXIT_UNREACHABLE) {
				ret = r; /* a daemon went away: stop here */
				break;
			}
		}
		rdmafs__inode_list_resp__free_unpacked(page, NULL);
	}
	printf("rebalance: %" PRIu64 " files looked at, %" PRIu64 " moved (%" PRIu64
	       " chunk copies, %s), %" PRIu64 " failed, %" PRIu64 " changed meanwhile, %" PRIu64
	       " kept for want of failure domains, %" PRIu64 " with copies lost; %" PRIu64
	       " fences of interrupted moves lifted\n",
	       rb.files, rb.moved, rb.chunks, ctl_fmt_bytes(rb.bytes, b, sizeof(b)), rb.failed,
	       rb.stale, rb.kept, rb.lost, rb.lifted);
	if (ret)
		return ctl_exit_for(ret);
	return rb.failed || rb.stale || rb.lost ? CTL_EXIT_PROBLEMS : CTL_EXIT_OK;
}
