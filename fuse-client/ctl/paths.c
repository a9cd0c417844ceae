/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inode numbers to paths, for the files fsck and scrub report: INODE_PATHS
 * at the metadata service, in batches. Best effort: an inode without a path
 * (deleted, unlinked but open, a service too old to answer) keeps its number
 * and a reason, and the command goes on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_i.h"

/* INODE_PATHS takes at most this many inodes at once. */
#define PATHS_BATCH 256
/* The longest path a service may send: PATH_MAX - 1. */
#define PATH_LEN_MAX 4095

struct ctl_path_entry {
	uint64_t ino;
	char *path;	 /* NULL: none, see why */
	const char *why; /* static text */
};

struct ctl_paths {
	struct ctl_path_entry *entries; /* sorted by ino, no repeats */
	size_t count;
};

static int ino_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const char *state_why(Rdmafs__PathState state)
{
	switch (state) {
	case RDMAFS__PATH_STATE__PATH_STATE_NO_INODE:
		return "no such inode";
	case RDMAFS__PATH_STATE__PATH_STATE_UNLINKED:
		return "unlinked, still open";
	case RDMAFS__PATH_STATE__PATH_STATE_NOT_FOUND:
		return "no directory entry names it";
	case RDMAFS__PATH_STATE__PATH_STATE_TOO_LONG:
		return "its path is longer than PATH_MAX";
	default:
		return "the metadata service gave no path";
	}
}

/* Stores one answer of the service in @e, checking it. */
static int path_from(const Rdmafs__InodePath *p, struct ctl_path_entry *e)
{
	if (!p || p->ino != e->ino)
		return -EBADMSG;
	if (p->state != RDMAFS__PATH_STATE__PATH_STATE_FOUND) {
		e->why = state_why(p->state);
		return 0;
	}
	if (p->path.len == 0 || p->path.len > PATH_LEN_MAX || p->path.data[0] != '/' ||
	    memchr(p->path.data, '\0', p->path.len))
		return -EBADMSG;
	e->path = malloc(p->path.len + 1);
	if (!e->path)
		return -ENOMEM;
	memcpy(e->path, p->path.data, p->path.len);
	e->path[p->path.len] = '\0';
	return 0;
}

/* Asks the service for the paths of entries[@first...], as many as it answers. */
static int paths_batch(struct rfs_daemon *meta, struct ctl_paths *p, size_t first, size_t *done)
{
	Rdmafs__InodePathsReq req = RDMAFS__INODE_PATHS_REQ__INIT;
	Rdmafs__InodePathsResp *resp;
	uint64_t inos[PATHS_BATCH];
	size_t n = p->count - first < PATHS_BATCH ? p->count - first : PATHS_BATCH;
	int ret;

	for (size_t i = 0; i < n; i++)
		inos[i] = p->entries[first + i].ino;
	req.inos = inos;
	req.n_inos = n;
	ret = rfs_daemon_call(meta, RDMAFS__METHOD__METHOD_INODE_PATHS, &req.base,
			      &rdmafs__inode_paths_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (resp->n_paths == 0 || resp->n_paths > n)
		ret = -EBADMSG;
	for (size_t i = 0; !ret && i < resp->n_paths; i++)
		ret = path_from(resp->paths[i], &p->entries[first + i]);
	*done = resp->n_paths;
	rdmafs__inode_paths_resp__free_unpacked(resp, NULL);
	return ret;
}

int ctl_paths_resolve(struct ctl *c, const uint64_t *inos, size_t n, struct ctl_paths **out)
{
	struct ctl_paths *p = calloc(1, sizeof(*p));
	uint64_t *sorted = malloc((n + 1) * sizeof(*sorted));
	struct rfs_daemon *meta;
	const char *why = NULL;
	int ret;

	if (!p || !sorted || !(p->entries = calloc(n + 1, sizeof(*p->entries)))) {
		free(sorted);
		free(p);
		return -ENOMEM;
	}
	memcpy(sorted, inos, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), ino_cmp);
	for (size_t i = 0; i < n; i++)
		if (p->count == 0 || p->entries[p->count - 1].ino != sorted[i])
			p->entries[p->count++].ino = sorted[i];
	free(sorted);

	ret = ctl_meta(c, &meta);
	for (size_t i = 0, done = 0; !ret && i < p->count; i += done)
		ret = paths_batch(meta, p, i, &done);
	if (ret == -EOPNOTSUPP)
		why = "the metadata service is too old to name paths";
	else if (ret == -ENOMEM)
		why = "out of memory";
	else if (ret)
		why = "the path lookup failed";
	for (size_t i = 0; i < p->count; i++)
		if (!p->entries[i].path && !p->entries[i].why)
			p->entries[i].why = why;
	if (ret && ret != -EOPNOTSUPP)
		ctl_err("cannot look up the paths of %zu inodes: %s (inode numbers only)", p->count,
			ctl_strerror(ret));
	*out = p;
	return 0;
}

const char *ctl_path_of(const struct ctl_paths *p, uint64_t ino, const char **why)
{
	size_t lo = 0, hi = p ? p->count : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->entries[mid].ino == ino) {
			*why = p->entries[mid].why;
			return p->entries[mid].path;
		}
		if (p->entries[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	*why = "not looked up";
	return NULL;
}

void ctl_paths_free(struct ctl_paths *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->count; i++)
		free(p->entries[i].path);
	free(p->entries);
	free(p);
}
