/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a well-behaved libxprt client can never send, sent by hand on a raw
 * socket to a tcp server: a request before HELLO, a foreign preamble, and a
 * peer that connects and then says nothing. Each must be refused or dropped
 * with a clear error, and the server must keep serving.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "xprt_i.h"

#define SECRET		   "raw-secret"
#define CONNECT_TIMEOUT_MS 500

static struct xprt_ctx *srv, *cli;
static struct xprt_listener *listener;
static uint16_t port;
static int served;

static void serve(struct xprt_req *req, void *arg)
{
	served++;
	xprt_reply(req, 0, NULL, 0);
}

static int raw_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Reads until EOF or @timeout_ms; returns bytes read into @buf. */
static size_t read_until_eof(int fd, uint8_t *buf, size_t cap, int timeout_ms, bool *eof)
{
	size_t got = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	*eof = false;
	while (poll(&p, 1, timeout_ms) == 1) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n <= 0) {
			*eof = true;
			break;
		}
		got += (size_t)n;
	}
	return got;
}

static void send_preamble(int fd)
{
	struct xprt_conn_params p = {XPRT_MAGIC, XPRT_VERSION, 8, 4096};
	uint8_t raw[XPRT_PARAMS_SIZE];

	xprt_params_encode(&p, raw);
	assert_int_equal(write(fd, raw, sizeof(raw)), sizeof(raw));
}

static void server_still_serves(void)
{
	struct xprt_conn *c;
	char uri[64];

	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	assert_int_equal(xprt_connect(cli, uri, &c), 0);
	assert_int_equal(xprt_call(c, 1, "x", 1, NULL, 0, NULL, 0), 0);
	xprt_conn_close(c);
}

static void test_request_before_hello(void **state)
{
	int fd = raw_connect();
	struct xprt_hdr h = {.magic = XPRT_MAGIC,
			     .version = XPRT_VERSION,
			     .type = XPRT_MSG_REQUEST,
			     .request_id = 1,
			     .method = 1};
	uint8_t frame[XPRT_HDR_SIZE], in[4096];
	int before = served;
	bool eof;
	size_t got;
	struct xprt_hdr last = {0};

	send_preamble(fd);
	xprt_hdr_encode(&h, frame);
	assert_int_equal(write(fd, frame, sizeof(frame)), sizeof(frame));
	got = read_until_eof(fd, in, sizeof(in), 3000, &eof);
	assert_true(eof);
	/* preamble, HELLO challenge (32 + 32 bytes), then ERROR -EACCES. */
	assert_true(got >= XPRT_PARAMS_SIZE + 2 * XPRT_HDR_SIZE);
	assert_int_equal(xprt_hdr_decode(in + got - XPRT_HDR_SIZE, XPRT_HDR_SIZE, 4096, &last), 0);
	assert_int_equal(last.type, XPRT_MSG_ERROR);
	assert_int_equal(last.status, -EACCES);
	assert_int_equal(served, before);
	close(fd);
	server_still_serves();
}

static void test_foreign_preamble(void **state)
{
	int fd = raw_connect();
	const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	uint8_t in[4096];
	bool eof;

	assert_int_equal(write(fd, junk, sizeof(junk) - 1), (ssize_t)(sizeof(junk) - 1));
	read_until_eof(fd, in, sizeof(in), 3000, &eof);
	assert_true(eof);
	close(fd);
	server_still_serves();
}

static void test_silent_peer_dropped(void **state)
{
	int fd = raw_connect();
	uint8_t in[4096];
	bool eof;

	/* Never completing HELLO must not hold a connection forever. */
	send_preamble(fd);
	read_until_eof(fd, in, sizeof(in), CONNECT_TIMEOUT_MS * 6, &eof);
	assert_true(eof);
	close(fd);
	server_still_serves();
}

static int setup(void **state)
{
	struct xprt_options o;

	xprt_options_init(&o);
	o.secret = SECRET;
	o.secret_len = strlen(SECRET);
	o.connect_timeout_ms = CONNECT_TIMEOUT_MS;
	if (xprt_ctx_create(&o, &srv) || xprt_ctx_create(&o, &cli))
		return -1;
	if (xprt_listen(srv, "tcp://127.0.0.1:0", serve, NULL, &listener))
		return -1;
	port = xprt_listener_port(listener);
	return 0;
}

static int teardown(void **state)
{
	xprt_ctx_destroy(cli);
	xprt_ctx_destroy(srv);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_before_hello),
		cmocka_unit_test(test_foreign_preamble),
		cmocka_unit_test(test_silent_peer_dropped),
	};

	xprt_set_log(NULL, NULL, XPRT_LOG_ERR);
	return cmocka_run_group_tests_name("raw-tcp", tests, setup, teardown);
}
