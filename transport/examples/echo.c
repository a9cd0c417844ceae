/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xprt-echo: the smallest libxprt program, for newcomers.
 *
 *   xprt-echo server tcp://127.0.0.1:7000          # serves until Ctrl-C
 *   xprt-echo client tcp://127.0.0.1:7000 hello    # prints "hello" back
 *
 * Use rdma:// on a host with an RDMA device, or auto:// to pick. Both sides
 * must share the secret in RDMAFS_SECRET (default "echo").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xprt.h"

#define ECHO_METHOD 1

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static void echo_request(struct xprt_req *req, void *arg)
{
	size_t len;
	const void *body = xprt_req_body(req, &len);

	xprt_reply(req, 0, body, len);
}

static int run_server(struct xprt_ctx *ctx, const char *uri)
{
	struct xprt_listener *l;
	int ret = xprt_listen(ctx, uri, echo_request, NULL, &l);

	if (ret) {
		fprintf(stderr, "xprt-echo: cannot listen on %s: %s\n", uri, xprt_strerror(ret));
		return 1;
	}
	printf("serving on %s port %u (%s)\n", uri, xprt_listener_port(l),
	       xprt_kind_name(xprt_listener_kind(l)));
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!stop)
		pause();
	xprt_listener_close(l);
	return 0;
}

static int run_client(struct xprt_ctx *ctx, const char *uri, const char *text)
{
	struct xprt_conn *conn;
	char reply[4096];
	size_t len = 0;
	int ret = xprt_connect(ctx, uri, &conn);

	if (ret) {
		fprintf(stderr, "xprt-echo: cannot connect to %s: %s\n", uri, xprt_strerror(ret));
		return 1;
	}
	ret = xprt_call(conn, ECHO_METHOD, text, strlen(text), reply, sizeof(reply) - 1, &len, 0);
	if (ret) {
		fprintf(stderr, "xprt-echo: call failed: %s\n", xprt_strerror(ret));
	} else {
		reply[len] = '\0';
		printf("%s\n", reply);
	}
	xprt_conn_close(conn);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct xprt_options opts;
	struct xprt_ctx *ctx;
	const char *secret = getenv("RDMAFS_SECRET");
	int ret;

	if (argc < 3 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (strcmp(argv[1], "client") == 0 && argc < 4)) {
		fprintf(stderr, "usage: xprt-echo server URI | xprt-echo client URI TEXT\n");
		return 2;
	}
	if (!secret)
		secret = "echo";
	xprt_options_init(&opts);
	opts.secret = secret;
	opts.secret_len = strlen(secret);
	opts.name = "xprt-echo";
	ret = xprt_ctx_create(&opts, &ctx);
	if (ret) {
		fprintf(stderr, "xprt-echo: %s\n", xprt_strerror(ret));
		return 1;
	}
	ret = strcmp(argv[1], "server") == 0 ? run_server(ctx, argv[2])
					     : run_client(ctx, argv[2], argv[3]);
	xprt_ctx_destroy(ctx);
	return ret;
}
