/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The pure parts of the protocol: frame header, connection parameters,
 * emulated one-sided op bodies, credit accounting, HELLO proofs and the
 * key/bounds checks of a one-sided access. No I/O here, so all of it is unit
 * tested directly.
 */
#include <errno.h>
#include <string.h>
#include <sodium.h>

#include "xprt_i.h"

/* Smallest and largest receive windows and buffers a peer may announce. */
#define XPRT_MIN_WINDOW	  2u
#define XPRT_MAX_WINDOW	  4096u
#define XPRT_MIN_MSG_SIZE (XPRT_HDR_SIZE + 64u)
#define XPRT_MAX_MSG_SIZE (16u << 20)

void xprt_hdr_encode(const struct xprt_hdr *h, uint8_t *out)
{
	xprt_put_le32(out + 0, h->magic);
	out[4] = h->version;
	out[5] = h->type;
	xprt_put_le16(out + 6, h->flags);
	xprt_put_le64(out + 8, h->request_id);
	xprt_put_le32(out + 16, h->method);
	xprt_put_le32(out + 20, h->body_len);
	xprt_put_le32(out + 24, h->credits);
	xprt_put_le32(out + 28, (uint32_t)h->status);
}

static bool msg_type_known(uint8_t type)
{
	return (type >= XPRT_MSG_REQUEST && type <= XPRT_MSG_HELLO) ||
	       (type >= XPRT_MSG_RDMA_READ_REQ && type <= XPRT_MSG_RDMA_WRITE_ACK);
}

bool xprt_msg_uses_credit(uint8_t type)
{
	return type >= XPRT_MSG_REQUEST && type <= XPRT_MSG_HELLO;
}

int xprt_hdr_decode(const uint8_t *in, size_t len, uint32_t max_msg_size, struct xprt_hdr *h)
{
	if (len < XPRT_HDR_SIZE)
		return -EBADMSG;
	h->magic = xprt_get_le32(in + 0);
	h->version = in[4];
	h->type = in[5];
	h->flags = xprt_get_le16(in + 6);
	h->request_id = xprt_get_le64(in + 8);
	h->method = xprt_get_le32(in + 16);
	h->body_len = xprt_get_le32(in + 20);
	h->credits = xprt_get_le32(in + 24);
	h->status = (int32_t)xprt_get_le32(in + 28);
	if (h->magic != XPRT_MAGIC || h->version != XPRT_VERSION || !msg_type_known(h->type))
		return -EPROTO;
	/* A status is 0 or a negative errno; anything else (INT_MIN among them) is not ours. */
	if (h->status > 0 || h->status < -XPRT_MAX_ERRNO)
		return -EPROTO;
	/* Compare in 64 bits: body_len near UINT32_MAX must not wrap. */
	if (xprt_msg_uses_credit(h->type) &&
	    (uint64_t)h->body_len + XPRT_HDR_SIZE > (uint64_t)max_msg_size)
		return -EMSGSIZE;
	return 0;
}

void xprt_rdma_wire_encode(const struct xprt_rdma_wire *w, uint8_t *out)
{
	xprt_put_le64(out, w->addr);
	xprt_put_le32(out + 8, w->rkey);
	xprt_put_le32(out + 12, w->len);
}

int xprt_rdma_wire_decode(const uint8_t *in, size_t len, struct xprt_rdma_wire *w)
{
	if (len < XPRT_RDMA_WIRE_SIZE)
		return -EBADMSG;
	w->addr = xprt_get_le64(in);
	w->rkey = xprt_get_le32(in + 8);
	w->len = xprt_get_le32(in + 12);
	return 0;
}

void xprt_params_encode(const struct xprt_conn_params *p, uint8_t *out)
{
	memset(out, 0, XPRT_PARAMS_SIZE);
	xprt_put_le32(out, p->magic);
	out[4] = p->version;
	xprt_put_le32(out + 8, p->credits);
	xprt_put_le32(out + 12, p->max_msg_size);
}

int xprt_params_decode(const uint8_t *in, size_t len, struct xprt_conn_params *p)
{
	if (len < XPRT_PARAMS_SIZE)
		return -EBADMSG;
	p->magic = xprt_get_le32(in);
	p->version = in[4];
	p->credits = xprt_get_le32(in + 8);
	p->max_msg_size = xprt_get_le32(in + 12);
	if (p->magic != XPRT_MAGIC || p->version != XPRT_VERSION)
		return -EPROTO;
	if (p->credits < XPRT_MIN_WINDOW || p->credits > XPRT_MAX_WINDOW ||
	    p->max_msg_size < XPRT_MIN_MSG_SIZE || p->max_msg_size > XPRT_MAX_MSG_SIZE)
		return -EPROTO;
	return 0;
}

/* ---- credits ---- */

void xprt_credits_init(struct xprt_credits *c, uint32_t our_window, uint32_t peer_window)
{
	memset(c, 0, sizeof(*c));
	c->our_window = our_window;
	c->send_avail = peer_window;
	c->granted_total = our_window;
}

bool xprt_credits_can_send(const struct xprt_credits *c, bool control)
{
	return control ? c->send_avail >= 1 : c->send_avail >= 2;
}

uint32_t xprt_credits_take(struct xprt_credits *c)
{
	uint32_t grant = c->to_grant;

	c->send_avail--;
	c->to_grant = 0;
	c->granted_total += grant;
	return grant;
}

int xprt_credits_on_receive(struct xprt_credits *c)
{
	c->received++;
	if (c->received > c->granted_total)
		return -EPROTO;
	return 0;
}

int xprt_credits_on_grant(struct xprt_credits *c, uint32_t granted, uint32_t peer_window)
{
	if ((uint64_t)c->send_avail + granted > peer_window)
		return -EPROTO;
	c->send_avail += granted;
	return 0;
}

void xprt_credits_reposted(struct xprt_credits *c, uint32_t n)
{
	c->to_grant += n;
}

bool xprt_credits_grant_due(const struct xprt_credits *c)
{
	return c->to_grant > 0 && c->to_grant >= c->our_window / 2;
}

/* ---- HELLO ---- */

void xprt_hello_nonce(uint8_t *nonce)
{
	randombytes_buf(nonce, XPRT_NONCE_SIZE);
}

void xprt_hello_mac(const void *secret, size_t secret_len, bool from_server,
		    const uint8_t *server_nonce, const uint8_t *client_nonce, uint8_t *mac)
{
	/* Distinct labels and nonce orders: neither proof can be replayed as the other. */
	static const char client_label[] = "rdmafs client hello v1";
	static const char server_label[] = "rdmafs server hello v1";
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, secret, secret_len);
	if (from_server) {
		crypto_auth_hmacsha256_update(&st, (const uint8_t *)server_label,
					      sizeof(server_label));
		crypto_auth_hmacsha256_update(&st, client_nonce, XPRT_NONCE_SIZE);
		crypto_auth_hmacsha256_update(&st, server_nonce, XPRT_NONCE_SIZE);
	} else {
		crypto_auth_hmacsha256_update(&st, (const uint8_t *)client_label,
					      sizeof(client_label));
		crypto_auth_hmacsha256_update(&st, server_nonce, XPRT_NONCE_SIZE);
		crypto_auth_hmacsha256_update(&st, client_nonce, XPRT_NONCE_SIZE);
	}
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
}

int xprt_hello_verify(const void *secret, size_t secret_len, bool from_server,
		      const uint8_t *server_nonce, const uint8_t *client_nonce, const uint8_t *mac)
{
	uint8_t expect[XPRT_MAC_SIZE];
	int ret;

	xprt_hello_mac(secret, secret_len, from_server, server_nonce, client_nonce, expect);
	ret = sodium_memcmp(expect, mac, XPRT_MAC_SIZE) == 0 ? 0 : -EACCES;
	sodium_memzero(expect, sizeof(expect));
	return ret;
}

/* ---- client keys ---- */

bool xprt_key_name_valid(const char *name)
{
	size_t len;

	if (!name)
		return false;
	len = strnlen(name, XPRT_KEY_NAME_MAX + 1);
	if (len == 0 || len > XPRT_KEY_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] <= 0x20 || name[i] >= 0x7f)
			return false;
	return true;
}

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_le(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = bytes; i > 0; i--)
		v = (v << 8) | p[i - 1];
	return v;
}

int xprt_key_derive(const void *secret, size_t secret_len, const char *name, uint64_t serial,
		    uint32_t flags, uint8_t key[XPRT_KEY_SIZE])
{
	/*
	 * Its own label, NUL included, so no HELLO mac (whose labels differ) is
	 * ever a key; the name's length first so that (name, serial, flags)
	 * reads one way only.
	 */
	static const char label[] = "rdmafs client key v1";
	crypto_auth_hmacsha256_state st;
	uint8_t fixed[1 + 8 + 4];
	size_t len;

	if (!xprt_key_name_valid(name))
		return -EINVAL;
	len = strlen(name);
	crypto_auth_hmacsha256_init(&st, secret, secret_len);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, sizeof(label));
	fixed[0] = (uint8_t)len;
	crypto_auth_hmacsha256_update(&st, fixed, 1);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)name, len);
	put_le(fixed, serial, 8);
	put_le(fixed + 8, flags, 4);
	crypto_auth_hmacsha256_update(&st, fixed, 12);
	crypto_auth_hmacsha256_final(&st, key);
	sodium_memzero(&st, sizeof(st));
	return 0;
}

size_t xprt_key_wire_encode(const struct xprt_key *key, uint8_t *out)
{
	size_t len = strnlen(key->name, XPRT_KEY_NAME_MAX);

	put_le(out, key->serial, 8);
	put_le(out + 8, key->flags, 4);
	out[12] = (uint8_t)len;
	memcpy(out + XPRT_KEY_WIRE_FIXED, key->name, len);
	return XPRT_KEY_WIRE_FIXED + len;
}

int xprt_key_wire_decode(const uint8_t *in, size_t len, struct xprt_identity *id, size_t *used)
{
	size_t name_len;

	if (len < XPRT_KEY_WIRE_FIXED)
		return -EPROTO;
	name_len = in[12];
	if (name_len == 0 || name_len > XPRT_KEY_NAME_MAX || len - XPRT_KEY_WIRE_FIXED < name_len)
		return -EPROTO;
	memset(id, 0, sizeof(*id));
	id->keyed = true;
	id->serial = get_le(in, 8);
	id->flags = (uint32_t)get_le(in + 8, 4);
	memcpy(id->name, in + XPRT_KEY_WIRE_FIXED, name_len);
	id->name[name_len] = '\0';
	if (!xprt_key_name_valid(id->name))
		return -EPROTO;
	*used = XPRT_KEY_WIRE_FIXED + name_len;
	return 0;
}

/* ---- one-sided access checks ---- */

int xprt_mr_check_access(const struct xprt_mr *mr, uint64_t addr, uint64_t len, unsigned need)
{
	uint64_t start, end;

	if (!mr || (mr->access & need) != need)
		return -EACCES;
	start = (uint64_t)(uintptr_t)mr->addr;
	end = start + mr->len;
	/* Written so that no sum can wrap: addr + len is never computed. */
	if (addr < start || addr > end || len > end - addr)
		return -EACCES;
	return 0;
}
