/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Unit tests of the transport's pure parts: framing, credits, bounds checks, HELLO, URIs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "xprt_i.h"

static void test_hdr_roundtrip(void **state)
{
	struct xprt_hdr h = {.magic = XPRT_MAGIC,
			     .version = XPRT_VERSION,
			     .type = XPRT_MSG_RESPONSE,
			     .flags = 0xbeef,
			     .request_id = 0x0123456789abcdefull,
			     .method = 0xfeedface,
			     .body_len = 100,
			     .credits = 7,
			     .status = -ENOENT};
	uint8_t raw[XPRT_HDR_SIZE];
	struct xprt_hdr d;

	xprt_hdr_encode(&h, raw);
	/* Little-endian on the wire whatever the host is. */
	assert_int_equal(raw[0], 0x52);
	assert_int_equal(raw[8], 0xef);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), 0);
	assert_int_equal(d.type, h.type);
	assert_int_equal(d.flags, h.flags);
	assert_true(d.request_id == h.request_id);
	assert_int_equal(d.method, h.method);
	assert_int_equal(d.body_len, h.body_len);
	assert_int_equal(d.credits, h.credits);
	assert_int_equal(d.status, -ENOENT);
}

static void test_hdr_rejects(void **state)
{
	struct xprt_hdr h = {.magic = XPRT_MAGIC,
			     .version = XPRT_VERSION,
			     .type = XPRT_MSG_REQUEST,
			     .body_len = 4096 - XPRT_HDR_SIZE};
	uint8_t raw[XPRT_HDR_SIZE];
	struct xprt_hdr d;

	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, XPRT_HDR_SIZE - 1, 4096, &d), -EBADMSG);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), 0);
	/* One byte over the maximum message. */
	h.body_len++;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EMSGSIZE);
	/* A length near 4 GiB must not wrap around the check. */
	h.body_len = UINT32_MAX;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EMSGSIZE);
	/* One-sided data frames are not bounded by the message size. */
	h.type = XPRT_MSG_RDMA_READ_RESP;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), 0);
	h.body_len = 0;
	h.magic = 0x12345678;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	h.magic = XPRT_MAGIC;
	h.version = 2;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	h.version = XPRT_VERSION;
	h.type = 0;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	h.type = 12;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	/* A status is 0 or an errno in [-4095, -1]; INT_MIN once reached a negation. */
	h.type = XPRT_MSG_RESPONSE;
	h.status = -XPRT_MAX_ERRNO;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), 0);
	assert_int_equal(d.status, -XPRT_MAX_ERRNO);
	h.status = -XPRT_MAX_ERRNO - 1;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	h.status = INT32_MIN;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	h.status = 1;
	xprt_hdr_encode(&h, raw);
	assert_int_equal(xprt_hdr_decode(raw, sizeof(raw), 4096, &d), -EPROTO);
	/* Printing any value is safe. */
	assert_non_null(xprt_strerror(INT32_MIN));
	assert_non_null(xprt_strerror(INT32_MAX));
}

static void test_params(void **state)
{
	struct xprt_conn_params p = {XPRT_MAGIC, XPRT_VERSION, 64, 16384}, d;
	uint8_t raw[XPRT_PARAMS_SIZE];

	/* It must fit rdma_cm private data (56 bytes). */
	assert_true(XPRT_PARAMS_SIZE <= 56);
	xprt_params_encode(&p, raw);
	assert_int_equal(xprt_params_decode(raw, sizeof(raw), &d), 0);
	assert_int_equal(d.credits, 64);
	assert_int_equal(d.max_msg_size, 16384);
	assert_int_equal(xprt_params_decode(raw, 8, &d), -EBADMSG);
	p.credits = 1;
	xprt_params_encode(&p, raw);
	assert_int_equal(xprt_params_decode(raw, sizeof(raw), &d), -EPROTO);
	p.credits = 64;
	p.max_msg_size = 0xffffffffu;
	xprt_params_encode(&p, raw);
	assert_int_equal(xprt_params_decode(raw, sizeof(raw), &d), -EPROTO);
}

static void test_credits(void **state)
{
	struct xprt_credits c;
	uint32_t window = 8;

	xprt_credits_init(&c, window, window);
	/* Normal messages leave the last credit for grants. */
	for (uint32_t i = 0; i < window - 1; i++) {
		assert_true(xprt_credits_can_send(&c, false));
		assert_int_equal(xprt_credits_take(&c), 0);
	}
	assert_false(xprt_credits_can_send(&c, false));
	assert_true(xprt_credits_can_send(&c, true));
	/* Receiving: the peer may use the whole window, not one more. */
	for (uint32_t i = 0; i < window; i++)
		assert_int_equal(xprt_credits_on_receive(&c), 0);
	assert_int_equal(xprt_credits_on_receive(&c), -EPROTO);

	xprt_credits_init(&c, window, window);
	for (uint32_t i = 0; i < window; i++)
		assert_int_equal(xprt_credits_on_receive(&c), 0);
	assert_false(xprt_credits_grant_due(&c));
	xprt_credits_reposted(&c, window / 2);
	assert_true(xprt_credits_grant_due(&c));
	/* The grant rides on the next message and lets the peer send again. */
	assert_int_equal(xprt_credits_take(&c), window / 2);
	assert_false(xprt_credits_grant_due(&c));
	assert_int_equal(xprt_credits_on_receive(&c), 0);
	/* Grants give back what we used; one beyond the peer's window is a protocol error. */
	xprt_credits_take(&c);
	xprt_credits_take(&c);
	assert_int_equal(c.send_avail, window - 3);
	assert_int_equal(xprt_credits_on_grant(&c, 2, window), 0);
	assert_int_equal(c.send_avail, window - 1);
	assert_int_equal(xprt_credits_on_grant(&c, window, window), -EPROTO);
}

static void test_mr_bounds(void **state)
{
	static uint8_t region[4096];
	struct xprt_mr mr = {
		.addr = region, .len = sizeof(region), .access = XPRT_ACCESS_REMOTE_READ};
	uint64_t base = (uint64_t)(uintptr_t)region;

	assert_int_equal(xprt_mr_check_access(&mr, base, 4096, XPRT_ACCESS_REMOTE_READ), 0);
	assert_int_equal(xprt_mr_check_access(&mr, base + 4096, 0, XPRT_ACCESS_REMOTE_READ), 0);
	assert_int_equal(xprt_mr_check_access(&mr, base + 1, 4096, XPRT_ACCESS_REMOTE_READ),
			 -EACCES);
	assert_int_equal(xprt_mr_check_access(&mr, base - 1, 2, XPRT_ACCESS_REMOTE_READ), -EACCES);
	/* addr + len overflows 64 bits: must be refused, not wrap into the region. */
	assert_int_equal(
		xprt_mr_check_access(&mr, base + 16, UINT64_MAX - 8, XPRT_ACCESS_REMOTE_READ),
		-EACCES);
	assert_int_equal(xprt_mr_check_access(&mr, UINT64_MAX, 2, XPRT_ACCESS_REMOTE_READ),
			 -EACCES);
	/* Wrong access right, and no region at all (unknown key). */
	assert_int_equal(xprt_mr_check_access(&mr, base, 16, XPRT_ACCESS_REMOTE_WRITE), -EACCES);
	assert_int_equal(xprt_mr_check_access(NULL, base, 16, XPRT_ACCESS_REMOTE_READ), -EACCES);
}

static void test_hello(void **state)
{
	const char secret[] = "cluster secret";
	uint8_t sn[XPRT_NONCE_SIZE], cn[XPRT_NONCE_SIZE], mac[XPRT_MAC_SIZE];

	xprt_hello_nonce(sn);
	xprt_hello_nonce(cn);
	assert_memory_not_equal(sn, cn, XPRT_NONCE_SIZE);
	xprt_hello_mac(secret, strlen(secret), false, sn, cn, mac);
	assert_int_equal(xprt_hello_verify(secret, strlen(secret), false, sn, cn, mac), 0);
	/* A wrong secret, a replayed nonce or the other direction's proof are refused. */
	assert_int_equal(xprt_hello_verify("wrong", 5, false, sn, cn, mac), -EACCES);
	assert_int_equal(xprt_hello_verify(secret, strlen(secret), true, sn, cn, mac), -EACCES);
	cn[0] ^= 1;
	assert_int_equal(xprt_hello_verify(secret, strlen(secret), false, sn, cn, mac), -EACCES);
	cn[0] ^= 1;
	mac[31] ^= 0x80;
	assert_int_equal(xprt_hello_verify(secret, strlen(secret), false, sn, cn, mac), -EACCES);
}

static void test_client_key(void **state)
{
	/* HMAC-SHA256("cluster secret", "rdmafs client key v1\0" 05 "alice" 07 00.. 03 00..) */
	static const uint8_t expect[XPRT_KEY_SIZE] = {
		0x29, 0x09, 0xe7, 0xd0, 0x82, 0x97, 0xc1, 0xdd, 0xaf, 0x27, 0xca,
		0xbd, 0xbe, 0xea, 0x74, 0xfa, 0xd6, 0xa6, 0xd7, 0x8b, 0x55, 0x34,
		0xe9, 0x65, 0x4e, 0x9e, 0xb9, 0x96, 0xb9, 0xa0, 0xcb, 0x07,
	};
	const char secret[] = "cluster secret";
	uint8_t key[XPRT_KEY_SIZE], other[XPRT_KEY_SIZE], wire[XPRT_KEY_WIRE_FIXED + 64];
	struct xprt_key k = {.name = "alice", .serial = 7, .flags = 3};
	struct xprt_identity id;
	size_t len, used;
	char long_name[XPRT_KEY_NAME_MAX + 2];

	assert_int_equal(xprt_key_derive(secret, strlen(secret), "alice", 7, 3, key), 0);
	assert_memory_equal(key, expect, sizeof(key));
	/* every input changes the key: name, serial, flags, secret */
	assert_int_equal(xprt_key_derive(secret, strlen(secret), "alicf", 7, 3, other), 0);
	assert_memory_not_equal(key, other, sizeof(key));
	assert_int_equal(xprt_key_derive(secret, strlen(secret), "alice", 8, 3, other), 0);
	assert_memory_not_equal(key, other, sizeof(key));
	assert_int_equal(xprt_key_derive(secret, strlen(secret), "alice", 7, 1, other), 0);
	assert_memory_not_equal(key, other, sizeof(key));
	assert_int_equal(xprt_key_derive("other secret", 12, "alice", 7, 3, other), 0);
	assert_memory_not_equal(key, other, sizeof(key));
	/* names: 1..64 printable characters without spaces */
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_equal(xprt_key_derive(secret, 1, long_name, 1, 0, other), -EINVAL);
	long_name[XPRT_KEY_NAME_MAX] = '\0';
	assert_int_equal(xprt_key_derive(secret, 1, long_name, 1, 0, other), 0);
	assert_int_equal(xprt_key_derive(secret, 1, "", 1, 0, other), -EINVAL);
	assert_false(xprt_key_name_valid("a b"));
	assert_false(xprt_key_name_valid("a\tb"));
	assert_false(xprt_key_name_valid(NULL));
	assert_true(xprt_key_name_valid("node-7.example"));

	/* the identity on the wire, and what its decode refuses */
	len = xprt_key_wire_encode(&k, wire);
	assert_int_equal(len, XPRT_KEY_WIRE_FIXED + 5);
	assert_int_equal(xprt_key_wire_decode(wire, len, &id, &used), 0);
	assert_int_equal(used, len);
	assert_true(id.keyed);
	assert_string_equal(id.name, "alice");
	assert_int_equal(id.serial, 7);
	assert_int_equal(id.flags, 3);
	assert_int_equal(xprt_key_wire_decode(wire, len - 1, &id, &used), -EPROTO);
	wire[12] = 0;
	assert_int_equal(xprt_key_wire_decode(wire, len, &id, &used), -EPROTO);
	wire[12] = 5;
	wire[XPRT_KEY_WIRE_FIXED] = ' ';
	assert_int_equal(xprt_key_wire_decode(wire, len, &id, &used), -EPROTO);
}

static void test_uri(void **state)
{
	enum xprt_kind k;
	char host[64];
	uint16_t port;

	assert_int_equal(xprt_uri_parse("rdma://10.0.0.1:7000", &k, host, sizeof(host), &port), 0);
	assert_int_equal(k, XPRT_KIND_VERBS);
	assert_string_equal(host, "10.0.0.1");
	assert_int_equal(port, 7000);
	assert_int_equal(xprt_uri_parse("tcp://[::1]:80", &k, host, sizeof(host), &port), 0);
	assert_int_equal(k, XPRT_KIND_TCP);
	assert_string_equal(host, "::1");
	assert_int_equal(xprt_uri_parse("node1:9", &k, host, sizeof(host), &port), 0);
	assert_int_equal(k, XPRT_KIND_AUTO);
	assert_int_equal(xprt_uri_parse("http://x:1", &k, host, sizeof(host), &port), -EINVAL);
	assert_int_equal(xprt_uri_parse("tcp://x:65536", &k, host, sizeof(host), &port), -EINVAL);
	assert_int_equal(xprt_uri_parse("tcp://x:", &k, host, sizeof(host), &port), -EINVAL);
	assert_int_equal(xprt_uri_parse("tcp://:5", &k, host, sizeof(host), &port), -EINVAL);
	assert_int_equal(xprt_uri_parse("tcp://x:5a", &k, host, sizeof(host), &port), -EINVAL);
	assert_int_equal(xprt_uri_parse("tcp://[::1:5", &k, host, sizeof(host), &port), -EINVAL);
	assert_int_equal(xprt_uri_parse(NULL, &k, host, sizeof(host), &port), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hdr_roundtrip), cmocka_unit_test(test_hdr_rejects),
		cmocka_unit_test(test_params),	      cmocka_unit_test(test_credits),
		cmocka_unit_test(test_mr_bounds),     cmocka_unit_test(test_hello),
		cmocka_unit_test(test_client_key),    cmocka_unit_test(test_uri),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
