/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target: the transport's receive path. Input bytes become a
 * sequence of frames ([u16 length][bytes] each) fed to a server-side
 * connection through the same hook the backends use, so header decoding,
 * credit accounting, HELLO parsing and request dispatch all see hostile
 * input. The first byte chooses whether HELLO is taken as done (a fuzzer
 * cannot forge the HMAC) and the rest goes through the decoders directly too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xprt_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fake_send(struct xprt_conn *c, const uint8_t *hdr, const void *body, size_t len)
{
	return 0;
}

static int fake_rdma(struct xprt_conn *c, struct xprt_rdma_op *op)
{
	return -EIO;
}

static void fake_shutdown(struct xprt_conn *c)
{
}

static void fake_destroy(struct xprt_conn *c)
{
	c->backend = NULL;
}

static uint32_t fake_rkey(struct xprt_conn *c, struct xprt_mr *mr)
{
	return 0;
}

static const struct xprt_backend_ops fake_ops = {
	.name = "fuzz",
	.kind = XPRT_KIND_TCP,
	.send = fake_send,
	.rdma = fake_rdma,
	.shutdown = fake_shutdown,
	.conn_destroy = fake_destroy,
	.mr_rkey = fake_rkey,
};

static void echo(struct xprt_req *req, void *arg)
{
	size_t len;
	const void *body = xprt_req_body(req, &len);

	xprt_reply(req, 0, body, len);
}

static struct xprt_ctx *ctx;
static struct xprt_listener listener;

static void setup_once(void)
{
	struct xprt_options o;

	xprt_options_init(&o);
	o.secret = "fuzz";
	o.secret_len = 4;
	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	if (xprt_ctx_create(&o, &ctx))
		abort();
	listener.ctx = ctx;
	listener.ops = &fake_ops;
	listener.cb = echo;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xprt_conn_params params = {XPRT_MAGIC, XPRT_VERSION, 8, 4096}, p;
	struct xprt_rdma_wire w;
	struct xprt_hdr h;
	struct xprt_conn *c;
	enum xprt_kind kind;
	char host[64], uri[128];
	uint16_t port;
	size_t off = 1;

	if (!ctx)
		setup_once();
	if (size < 1)
		return 0;
	/* The plain decoders. */
	xprt_hdr_decode(data, size, 4096, &h);
	xprt_params_decode(data, size, &p);
	xprt_rdma_wire_decode(data, size, &w);
	memcpy(uri, data, size < sizeof(uri) - 1 ? size : sizeof(uri) - 1);
	uri[size < sizeof(uri) - 1 ? size : sizeof(uri) - 1] = '\0';
	xprt_uri_parse(uri, &kind, host, sizeof(host), &port);

	pthread_mutex_lock(&ctx->lock);
	c = xprt_core_conn_new(&listener);
	if (!c)
		goto out_unlock;
	c->backend = &listener; /* anything non-NULL: the fake ops keep no state */
	xprt_core_conn_established(c, &params);
	if (data[0] & 1)
		c->state = XPRT_CONN_READY;
	while (off + 2 <= size && c->state != XPRT_CONN_DEAD) {
		size_t len = (size_t)data[off] | ((size_t)data[off + 1] << 8);

		off += 2;
		if (len > size - off)
			len = size - off;
		xprt_core_recv(c, data + off, len);
		if (c->state != XPRT_CONN_DEAD && !c->closing)
			xprt_core_recv_reposted(c, 1);
		off += len;
	}
	xprt_core_conn_failed(c, -ECONNRESET);
out_unlock:
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}
