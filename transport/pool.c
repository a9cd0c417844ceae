/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Registered memory: regions registered once with every backend of a context,
 * and pools of equal buffers carved out of one region, so the hot path never
 * registers memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sodium.h>

#include "xprt_i.h"

#define POOL_ALIGN 4096u

struct xprt_buf {
	struct xprt_pool *pool;
	uint8_t *data;
	uint32_t index;
	struct xprt_buf *next_free;
};

struct xprt_pool {
	struct xprt_mr *mr;
	uint8_t *region;
	size_t region_len;
	size_t buf_size;
	uint32_t count;
	struct xprt_buf *bufs;
	struct xprt_buf *free_list;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

/* A random, non-zero key that no other region of @ctx uses. */
static uint32_t new_tcp_key(struct xprt_ctx *ctx)
{
	uint32_t key;

	do
		key = randombytes_random();
	while (key == 0 || xprt_core_mr_by_tcp_key(ctx, key));
	return key;
}

struct xprt_mr *xprt_core_mr_by_tcp_key(struct xprt_ctx *ctx, uint32_t key)
{
	struct list_head *pos;

	list_for_each (pos, &ctx->mrs) {
		struct xprt_mr *mr = list_entry(pos, struct xprt_mr, link);

		if (mr->tcp_key == key)
			return mr;
	}
	return NULL;
}

int xprt_mr_register(struct xprt_ctx *ctx, void *addr, size_t len, unsigned access,
		     struct xprt_mr **out)
{
	struct xprt_mr *mr;
	int k, ret = 0;

	if (!addr || len == 0)
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->ctx = ctx;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	pthread_mutex_lock(&ctx->lock);
	mr->tcp_key = new_tcp_key(ctx);
	for (k = 0; k < 3; k++) {
		if (!ctx->backends[k])
			continue;
		ret = ctx->backends[k]->mr_register(ctx, mr);
		if (ret)
			break;
	}
	if (ret) {
		while (--k >= 0)
			if (ctx->backends[k])
				ctx->backends[k]->mr_deregister(ctx, mr);
		pthread_mutex_unlock(&ctx->lock);
		free(mr);
		return ret;
	}
	list_add_tail(&mr->link, &ctx->mrs);
	pthread_mutex_unlock(&ctx->lock);
	*out = mr;
	return 0;
}

void xprt_mr_deregister(struct xprt_mr *mr)
{
	struct xprt_ctx *ctx;

	if (!mr)
		return;
	ctx = mr->ctx;
	pthread_mutex_lock(&ctx->lock);
	list_del(&mr->link);
	for (int k = 0; k < 3; k++)
		if (ctx->backends[k])
			ctx->backends[k]->mr_deregister(ctx, mr);
	pthread_mutex_unlock(&ctx->lock);
	free(mr);
}

int xprt_mr_desc(struct xprt_conn *conn, struct xprt_mr *mr, const void *addr, size_t len,
		 struct xprt_desc *out)
{
	const uint8_t *p = addr;

	if (p < mr->addr || (size_t)(p - mr->addr) > mr->len ||
	    len > mr->len - (size_t)(p - mr->addr) || len > UINT32_MAX)
		return -EINVAL;
	out->addr = (uint64_t)(uintptr_t)addr;
	out->len = (uint32_t)len;
	pthread_mutex_lock(&mr->ctx->lock);
	out->rkey = conn->ops->mr_rkey(conn, mr);
	pthread_mutex_unlock(&mr->ctx->lock);
	return 0;
}

int xprt_pool_create(struct xprt_ctx *ctx, size_t buf_size, uint32_t count, unsigned access,
		     struct xprt_pool **out)
{
	struct xprt_pool *pool;
	int ret;

	if (buf_size == 0 || count == 0)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->buf_size = (buf_size + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1);
	pool->count = count;
	pool->region_len = pool->buf_size * count;
	pool->region = mmap(NULL, pool->region_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool->region == MAP_FAILED) {
		ret = -errno;
		goto err_free;
	}
	pool->bufs = calloc(count, sizeof(*pool->bufs));
	if (!pool->bufs) {
		ret = -ENOMEM;
		goto err_unmap;
	}
	ret = xprt_mr_register(ctx, pool->region, pool->region_len, access, &pool->mr);
	if (ret)
		goto err_bufs;
	for (uint32_t i = count; i-- > 0;) {
		struct xprt_buf *b = &pool->bufs[i];

		b->pool = pool;
		b->index = i;
		b->data = pool->region + (size_t)i * pool->buf_size;
		b->next_free = pool->free_list;
		pool->free_list = b;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->cond, NULL);
	*out = pool;
	return 0;

err_bufs:
	free(pool->bufs);
err_unmap:
	munmap(pool->region, pool->region_len);
err_free:
	free(pool);
	return ret;
}

void xprt_pool_destroy(struct xprt_pool *pool)
{
	if (!pool)
		return;
	xprt_mr_deregister(pool->mr);
	pthread_cond_destroy(&pool->cond);
	pthread_mutex_destroy(&pool->lock);
	free(pool->bufs);
	munmap(pool->region, pool->region_len);
	free(pool);
}

int xprt_pool_get(struct xprt_pool *pool, int timeout_ms, struct xprt_buf **out)
{
	struct timespec until;
	int ret = 0;

	if (timeout_ms > 0) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&pool->lock);
	while (!pool->free_list) {
		if (timeout_ms == 0) {
			ret = -EAGAIN;
			break;
		}
		if (timeout_ms < 0) {
			pthread_cond_wait(&pool->cond, &pool->lock);
		} else if (pthread_cond_timedwait(&pool->cond, &pool->lock, &until)) {
			ret = pool->free_list ? 0 : -EAGAIN;
			break;
		}
	}
	if (ret == 0) {
		*out = pool->free_list;
		pool->free_list = (*out)->next_free;
		(*out)->next_free = NULL;
	}
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

void xprt_pool_put(struct xprt_buf *buf)
{
	struct xprt_pool *pool = buf->pool;

	pthread_mutex_lock(&pool->lock);
	buf->next_free = pool->free_list;
	pool->free_list = buf;
	pthread_cond_signal(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

void *xprt_buf_data(const struct xprt_buf *buf)
{
	return buf->data;
}

size_t xprt_buf_size(const struct xprt_buf *buf)
{
	return buf->pool->buf_size;
}

uint32_t xprt_buf_index(const struct xprt_buf *buf)
{
	return buf->index;
}

struct xprt_mr *xprt_buf_mr(const struct xprt_buf *buf)
{
	return buf->pool->mr;
}

void xprt_pool_region(const struct xprt_pool *pool, void **addr, size_t *len)
{
	*addr = pool->region;
	*len = pool->region_len;
}
