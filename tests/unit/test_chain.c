// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * storage-daemon/chain.c's contracts that need no peer (daemon_i.h):
 * chain_write_hop() reads a CHUNK_WRITE's hop without unpacking it, as
 * protobuf-c packs it (the last of a repeated field wins), and answers 0 for
 * what does not parse; the order lock makes a second locker of the same chunk
 * wait until the first unlocks.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rdmafs.pb-c.h"
#include "daemon_i.h"

/* A CHUNK_WRITE with every field set, packed by protobuf-c, at @hop. */
static size_t packed_write(uint32_t hop, uint8_t *out)
{
	Rdmafs__ChunkWriteReq m = RDMAFS__CHUNK_WRITE_REQ__INIT;
	Rdmafs__ChunkId id = RDMAFS__CHUNK_ID__INIT;
	Rdmafs__BufferDesc bd = RDMAFS__BUFFER_DESC__INIT;
	Rdmafs__ChainHop h = RDMAFS__CHAIN_HOP__INIT, *list[1] = {&h};
	static uint8_t data[300], uuid[16];

	id.inode = 0x1234567890ull;
	id.index = 77;
	bd.addr = 0xffffffffffffull;
	bd.len = 300;
	bd.rkey = 0xdeadbeef;
	h.uuid.data = uuid;
	h.uuid.len = sizeof(uuid);
	h.uri = "tcp://10.0.0.1:7471";
	m.chunk = &id;
	m.offset = 4096;
	m.length = sizeof(data);
	m.crc32c = 0xfeedface;
	m.buf = &bd;
	m.chunk_size = 1u << 20;
	m.commit = true;
	m.layout_generation = 3;
	m.data.data = data;
	m.data.len = sizeof(data);
	m.chain = list;
	m.n_chain = 1;
	m.hop = hop;
	m.to.data = uuid;
	m.to.len = sizeof(uuid);
	return rdmafs__chunk_write_req__pack(&m, out);
}

static void test_hop_read(void **state)
{
	uint8_t buf[1024];
	size_t n;

	(void)state;
	for (uint32_t hop = 0; hop < 5; hop++) {
		n = packed_write(hop, buf);
		assert_int_equal(chain_write_hop(buf, n), hop);
	}
	/* a large value (a multi-byte varint) */
	n = packed_write(300, buf);
	assert_int_equal(chain_write_hop(buf, n), 300);
	/* hop set twice: the last one wins, as protobuf says (field 12, varint: tag 0x60) */
	n = packed_write(1, buf);
	buf[n++] = 0x60;
	buf[n++] = 2;
	assert_int_equal(chain_write_hop(buf, n), 2);
}

static void test_hop_bad(void **state)
{
	uint8_t buf[1024];
	size_t n = packed_write(2, buf);

	(void)state;
	assert_int_equal(chain_write_hop(NULL, 0), 0);
	/* cut anywhere before its last field: never past the end, 0 or what was read */
	for (size_t cut = 0; cut < n; cut++)
		assert_true(chain_write_hop(buf, cut) <= 2);
	/* a length that runs past the end */
	buf[0] = 0x0a; /* field 1, length-delimited */
	buf[1] = 0x7f;
	assert_int_equal(chain_write_hop(buf, 10), 0);
	/* wire types 3, 4, 6, 7 are not in proto3 messages */
	buf[0] = 0x63;
	assert_int_equal(chain_write_hop(buf, 1), 0);
	/* a varint of 11 bytes */
	memset(buf, 0xff, 11);
	assert_int_equal(chain_write_hop(buf, 11), 0);
}

struct locker {
	struct chain *c;
	uint64_t inode, index;
	int entered; /* set once it holds the lock */
};

static void *lock_it(void *arg)
{
	struct locker *l = arg;

	chain_order_lock(l->c, l->inode, l->index);
	__atomic_store_n(&l->entered, 1, __ATOMIC_RELEASE);
	chain_order_unlock(l->c, l->inode, l->index);
	return NULL;
}

static void test_order_lock(void **state)
{
	struct chain *c;
	struct locker l;
	pthread_t t;

	(void)state;
	assert_int_equal(chain_create(NULL, &c), 0);
	chain_order_lock(c, 5, 9);
	l = (struct locker){.c = c, .inode = 5, .index = 9};
	assert_int_equal(pthread_create(&t, NULL, lock_it, &l), 0);
	/* the second locker of chunk 5/9 waits: it has not entered after 200 ms */
	usleep(200 * 1000);
	assert_int_equal(__atomic_load_n(&l.entered, __ATOMIC_ACQUIRE), 0);
	chain_order_unlock(c, 5, 9);
	pthread_join(t, NULL);
	assert_int_equal(l.entered, 1);
	chain_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hop_read),
		cmocka_unit_test(test_hop_bad),
		cmocka_unit_test(test_order_lock),
	};

	return cmocka_run_group_tests_name("chain", tests, NULL, NULL) ? 1 : 0;
}
