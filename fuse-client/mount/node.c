// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs-fuse: the inode table (mount_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmafs_common.h"
#include "mount_i.h"

static struct node **bucket(struct fs *fs, uint64_t ino)
{
	return &fs->buckets[(ino * 0x9e3779b97f4a7c15ULL) >> 52 & (NODE_BUCKETS - 1)];
}

static struct node *node_lookup_locked(struct fs *fs, uint64_t ino)
{
	for (struct node *n = *bucket(fs, ino); n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

/* The node of @ino, created if needed, with @lookups and @opens added. */
struct node *node_ref(struct fs *fs, uint64_t ino, uint64_t lookups, uint32_t opens)
{
	struct node *n;

	pthread_mutex_lock(&fs->table_lock);
	n = node_lookup_locked(fs, ino);
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n)
			goto out_unlock;
		if (rfs_file_create(fs->rfs, ino, &n->file)) {
			free(n);
			n = NULL;
			goto out_unlock;
		}
		n->ino = ino;
		pthread_mutex_init(&n->lock, NULL);
		n->next = *bucket(fs, ino);
		*bucket(fs, ino) = n;
	}
	n->nlookup += lookups;
	n->opens += opens;
out_unlock:
	pthread_mutex_unlock(&fs->table_lock);
	return n;
}

/* The node of @ino if the kernel holds it; the kernel keeps it while it calls us. */
struct node *node_find(struct fs *fs, uint64_t ino)
{
	struct node *n;

	pthread_mutex_lock(&fs->table_lock);
	n = node_lookup_locked(fs, ino);
	pthread_mutex_unlock(&fs->table_lock);
	return n;
}

/* Drops @lookups and @opens; frees the node when nothing holds it (never the root). */
void node_unref(struct fs *fs, struct node *n, uint64_t lookups, uint32_t opens)
{
	struct node **pp;

	pthread_mutex_lock(&fs->table_lock);
	n->nlookup = lookups > n->nlookup ? 0 : n->nlookup - lookups;
	n->opens = opens > n->opens ? 0 : n->opens - opens;
	if (n->nlookup || n->opens || n->ino == FUSE_ROOT_ID)
		goto out_unlock;
	for (pp = bucket(fs, n->ino); *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			break;
		}
	}
	rfs_file_destroy(n->file);
	pthread_mutex_destroy(&n->lock);
	free(n);
out_unlock:
	pthread_mutex_unlock(&fs->table_lock);
}
