/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target: the metadata service, every method, through
 * meta_handle(), the dispatch the daemon's server calls with the body of a
 * request: unpack, one LMDB transaction, pack. The store is a real LMDB
 * environment in a scratch directory, opened once; it holds the root, three
 * registered storage daemons (so CREATE finds daemons UP) and a small tree,
 * and after any input that wrote, every database is put back to that state
 * (inputs stay independent and the store small).
 *
 * Input: records as in fuzz_common.h. Selector bits 0-4 pick the method
 * (table below; one entry advances the service clock by body[0] seconds
 * through meta_tick(), which marks silent daemons DOWN); 0x40 gives the reply
 * a buffer of 64 bytes instead of what a connection carries, so every
 * method's -EMSGSIZE path runs too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_i.h"
#include "meta_store_lmdb_i.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define METHOD_TICK 0xffffffffu
#define MAX_RECORDS 32
#define REPLY_CAP   ((16u << 10) - 40u) /* a 16 KiB message less the transport header */
#define SMALL_CAP   64u
#define SEL_SMALL   0x40
#define BASE_CLOCK  1000u

static const uint32_t methods[32] = {
	RDMAFS__METHOD__METHOD_LOOKUP,
	RDMAFS__METHOD__METHOD_GETATTR,
	RDMAFS__METHOD__METHOD_SETATTR,
	RDMAFS__METHOD__METHOD_CREATE,
	RDMAFS__METHOD__METHOD_MKNOD,
	RDMAFS__METHOD__METHOD_MKDIR,
	RDMAFS__METHOD__METHOD_SYMLINK,
	RDMAFS__METHOD__METHOD_UNLINK,
	RDMAFS__METHOD__METHOD_RMDIR,
	RDMAFS__METHOD__METHOD_RENAME,
	RDMAFS__METHOD__METHOD_LINK,
	RDMAFS__METHOD__METHOD_READLINK,
	RDMAFS__METHOD__METHOD_READDIR,
	RDMAFS__METHOD__METHOD_OPEN,
	RDMAFS__METHOD__METHOD_RELEASE,
	RDMAFS__METHOD__METHOD_STATFS,
	RDMAFS__METHOD__METHOD_SETXATTR,
	RDMAFS__METHOD__METHOD_GETXATTR,
	RDMAFS__METHOD__METHOD_LISTXATTR,
	RDMAFS__METHOD__METHOD_REMOVEXATTR,
	RDMAFS__METHOD__METHOD_UPDATE_SIZE,
	RDMAFS__METHOD__METHOD_REGISTER_DAEMON,
	RDMAFS__METHOD__METHOD_HEARTBEAT,
	RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP,
	RDMAFS__METHOD__METHOD_SET_DAEMON_STATE,
	RDMAFS__METHOD__METHOD_DRAIN_STATUS,
	RDMAFS__METHOD__METHOD_INODE_LIST,
	RDMAFS__METHOD__METHOD_SET_LAYOUT,
	METHOD_TICK,
	RDMAFS__METHOD__METHOD_RECLAIM,
	/* not served by the service */
	RDMAFS__METHOD__METHOD_CHUNK_WRITE,
	RDMAFS__METHOD__METHOD_UNSPECIFIED,
};

/* A copy of one database record, for the reset. */
struct record {
	MDB_dbi dbi;
	size_t key_len, val_len;
	uint8_t *key, *val;
};

static struct meta *meta;
static struct record *records;
static size_t record_count;
static uint64_t clock_now;
static uint64_t saved_now_sec, saved_first_tick;
static bool trace; /* FUZZ_TRACE=1: print every reply, to check what an input does */

static MDB_dbi *dbis(size_t *n)
{
	static MDB_dbi list[9];

	list[0] = meta->store->db_counters;
	list[1] = meta->store->db_inodes;
	list[2] = meta->store->db_dirents;
	list[3] = meta->store->db_dirpos;
	list[4] = meta->store->db_symlinks;
	list[5] = meta->store->db_xattrs;
	list[6] = meta->store->db_handles;
	list[7] = meta->store->db_daemons;
	list[8] =
		meta->store->db_allocs; /* st_blocks: one input's reports must not reach the next */
	*n = 9;
	return list;
}

static void call(uint32_t method, const ProtobufCMessage *req)
{
	static uint8_t body[4096], reply[REPLY_CAP];
	size_t len = protobuf_c_message_pack(req, body), reply_len;

	if (meta_handle(meta, method, body, len, reply, sizeof(reply), &reply_len))
		abort();
}

/* The state every input starts from. */
static void populate(void)
{
	static char addr0[] = "tcp://10.0.0.1:7471", addr1[] = "rdma://10.0.0.2:7471";
	char *addrs[] = {addr0, addr1};
	uint8_t uuid[16] = {0};
	Rdmafs__MkdirReq mkdir = RDMAFS__MKDIR_REQ__INIT;
	Rdmafs__CreateReq create = RDMAFS__CREATE_REQ__INIT;
	Rdmafs__SymlinkReq symlink = RDMAFS__SYMLINK_REQ__INIT;

	for (int i = 0; i < 3; i++) {
		Rdmafs__RegisterDaemonReq reg = RDMAFS__REGISTER_DAEMON_REQ__INIT;

		uuid[0] = (uint8_t)(0xd0 + i);
		reg.uuid.data = uuid;
		reg.uuid.len = sizeof(uuid);
		reg.n_addresses = 2;
		reg.addresses = addrs;
		reg.capacity_bytes = 1ull << 40;
		reg.used_bytes = (uint64_t)i << 30;
		call(RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &reg.base);
	}
	meta_tick(meta, clock_now);
	mkdir.parent = META_ROOT_INO;
	mkdir.name.data = (uint8_t *)"dir";
	mkdir.name.len = 3;
	mkdir.mode = 0755;
	call(RDMAFS__METHOD__METHOD_MKDIR, &mkdir.base);
	create.parent = META_ROOT_INO;
	create.name.data = (uint8_t *)"file";
	create.name.len = 4;
	create.mode = 0100644;
	create.exclusive = true;
	call(RDMAFS__METHOD__METHOD_CREATE, &create.base);
	symlink.parent = META_ROOT_INO;
	symlink.name.data = (uint8_t *)"link";
	symlink.name.len = 4;
	symlink.target.data = (uint8_t *)"dir/file";
	symlink.target.len = 8;
	call(RDMAFS__METHOD__METHOD_SYMLINK, &symlink.base);
	/* every input starts with no handle open: the CREATE's is dropped */
	meta_handles_reset(meta);
}

static void snapshot(void)
{
	size_t n;
	MDB_dbi *list = dbis(&n);
	MDB_txn *txn;

	if (mdb_txn_begin(meta->store->env, NULL, MDB_RDONLY, &txn))
		abort();
	for (size_t i = 0; i < n; i++) {
		MDB_cursor *cur;
		MDB_val k, v;
		int rc;

		if (mdb_cursor_open(txn, list[i], &cur))
			abort();
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			struct record *r;

			records = realloc(records, (record_count + 1) * sizeof(*records));
			if (!records)
				abort();
			r = &records[record_count++];
			r->dbi = list[i];
			r->key_len = k.mv_size;
			r->val_len = v.mv_size;
			r->key = malloc(k.mv_size + 1);
			r->val = malloc(v.mv_size + 1);
			if (!r->key || !r->val)
				abort();
			memcpy(r->key, k.mv_data, k.mv_size);
			memcpy(r->val, v.mv_data, v.mv_size);
		}
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	saved_now_sec = meta->now_sec;
	saved_first_tick = meta->first_tick;
}

static void restore(void)
{
	size_t n;
	MDB_dbi *list = dbis(&n);
	MDB_txn *txn;

	if (mdb_txn_begin(meta->store->env, NULL, 0, &txn))
		abort();
	for (size_t i = 0; i < n; i++)
		if (mdb_drop(txn, list[i], 0))
			abort();
	for (size_t i = 0; i < record_count; i++) {
		MDB_val k = {records[i].key_len, records[i].key};
		MDB_val v = {records[i].val_len, records[i].val};

		if (mdb_put(txn, records[i].dbi, &k, &v, 0))
			abort();
	}
	if (mdb_txn_commit(txn))
		abort();
	meta->now_sec = saved_now_sec;
	meta->first_tick = saved_first_tick;
	meta_handles_reset(meta); /* open handles live in memory, not in the store */
}

/* Methods that run in a read-only transaction: nothing to put back after them. */
static bool read_only(uint32_t method)
{
	switch (method) {
	case RDMAFS__METHOD__METHOD_LOOKUP:
	case RDMAFS__METHOD__METHOD_GETATTR:
	case RDMAFS__METHOD__METHOD_READLINK:
	case RDMAFS__METHOD__METHOD_READDIR:
	case RDMAFS__METHOD__METHOD_STATFS:
	case RDMAFS__METHOD__METHOD_GETXATTR:
	case RDMAFS__METHOD__METHOD_LISTXATTR:
	case RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP:
	case RDMAFS__METHOD__METHOD_DRAIN_STATUS:
	case RDMAFS__METHOD__METHOD_INODE_LIST:
	case RDMAFS__METHOD__METHOD_SERVICE_STATUS:
	case RDMAFS__METHOD__METHOD_CHUNK_WRITE:
	case RDMAFS__METHOD__METHOD_UNSPECIFIED:
		return true;
	default:
		return false;
	}
}

static void quiet(void *arg, enum meta_log_level level, const char *fmt, va_list ap)
{
}

static void setup_once(void)
{
	struct meta_options o = {
		.map_size = 64u << 20,
		.chunk_size = 64u << 10,
		.stripe_width = 2,
		.log = quiet,
	};

	trace = getenv("FUZZ_TRACE") != NULL;
	if (meta_open(fuzz_scratch_dir("meta"), &o, &meta))
		abort();
	clock_now = BASE_CLOCK;
	populate();
	snapshot();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t reply[REPLY_CAP];
	struct fuzz_record r;
	unsigned count = 0;
	bool wrote = false;

	if (!meta)
		setup_once();
	clock_now = BASE_CLOCK;
	while (count++ < MAX_RECORDS && fuzz_next_record(&data, &size, &r)) {
		uint32_t method = methods[r.selector & 31];
		size_t cap = r.selector & SEL_SMALL ? SMALL_CAP : REPLY_CAP, reply_len;
		int ret;

		if (method == METHOD_TICK) {
			clock_now += r.len ? r.body[0] : 1;
			ret = meta_tick(meta, clock_now);
			if (ret < 0)
				abort();
			wrote |= ret > 0;
			continue;
		}
		ret = meta_handle(meta, method, r.body, r.len, reply, cap, &reply_len);
		if (trace)
			fprintf(stderr, "method %u: %d, %zu bytes\n", method, ret, reply_len);
		if (ret > 0 || ret < -4095 || reply_len > cap)
			abort(); /* the reply header could not carry it */
		/* Not trusting "a failed call changes nothing": that is under test too. */
		wrote |= !read_only(method);
	}
	if (wrote || meta->now_sec != saved_now_sec)
		restore();
	return 0;
}
