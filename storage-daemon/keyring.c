// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Which client keys this daemon refuses: the serials the metadata service
 * lists as revoked (the agent refetches them when a heartbeat shows another
 * keys_epoch), and, where the service is hosted here, its record itself, so
 * that a revocation takes effect there at the very next connection. HELLO
 * asks keyring_check() (on the transport's progress thread: no blocking
 * beyond a short lock and an LMDB read transaction); the workers ask
 * keyring_revoked() for each request of a keyed connection, so a connection
 * open at the revocation gets nothing more either.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xprt.h"
#include "daemon_i.h"
#include "meta.h"

struct keyring {
	struct meta *meta; /* hosted here, or NULL */
	pthread_mutex_t lock;
	uint64_t *revoked; /* sorted */
	size_t count;
	uint64_t epoch;
};

int keyring_create(struct meta *meta, struct keyring **out)
{
	struct keyring *kr = calloc(1, sizeof(*kr));

	if (!kr)
		return -ENOMEM;
	kr->meta = meta;
	pthread_mutex_init(&kr->lock, NULL);
	*out = kr;
	return 0;
}

void keyring_destroy(struct keyring *kr)
{
	if (!kr)
		return;
	pthread_mutex_destroy(&kr->lock);
	free(kr->revoked);
	free(kr);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int keyring_set(struct keyring *kr, const uint64_t *serials, size_t count, uint64_t epoch)
{
	uint64_t *copy = malloc((count ? count : 1) * sizeof(*copy));

	if (!copy)
		return -ENOMEM;
	if (count)
		memcpy(copy, serials, count * sizeof(*copy));
	qsort(copy, count, sizeof(*copy), cmp_u64);
	pthread_mutex_lock(&kr->lock);
	free(kr->revoked);
	kr->revoked = copy;
	kr->count = count;
	kr->epoch = epoch;
	pthread_mutex_unlock(&kr->lock);
	return 0;
}

uint64_t keyring_epoch(struct keyring *kr)
{
	uint64_t epoch;

	pthread_mutex_lock(&kr->lock);
	epoch = kr->epoch;
	pthread_mutex_unlock(&kr->lock);
	return epoch;
}

bool keyring_revoked(struct keyring *kr, uint64_t serial)
{
	bool found;

	pthread_mutex_lock(&kr->lock);
	found = kr->count &&
		bsearch(&serial, kr->revoked, kr->count, sizeof(serial), cmp_u64) != NULL;
	pthread_mutex_unlock(&kr->lock);
	if (!found && kr->meta)
		found = meta_key_revoked(kr->meta, serial) == 1;
	return found;
}

int keyring_check(const struct xprt_identity *id, void *arg)
{
	struct keyring *kr = arg;

	if (keyring_revoked(kr, id->serial)) {
		rdmafs_log(RDMAFS_LOG_INFO, "refused key for client %s (serial %llu): revoked",
			   id->name, (unsigned long long)id->serial);
		return -EKEYREVOKED;
	}
	return 0;
}
