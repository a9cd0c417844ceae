/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Writes the seed inputs of the request-level fuzz targets: valid requests of
 * every method, alone and in the sequences that reach deeper states (write
 * then read, create then open then unlink then release, ...). The checked-in
 * corpora started from these, then grew by fuzzing and were minimised with
 * -merge=1; rerun this only to start a corpus over.
 *
 *   fuzz-seeds DAEMON_DIR META_DIR
 *
 * The selectors and constants must match fuzz_daemon.c and fuzz_meta.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmafs.pb-c.h"

#define FAKE_ADDR 0x7f0000100000ull
#define FAKE_RKEY 0x5eedu
#define CHUNK	  (64u << 10)

/* Daemon selectors (fuzz_daemon.c). */
enum {
	D_WRITE = 0,
	D_READ,
	D_COMMIT,
	D_TRUNCATE,
	D_REMOVE,
	D_STAT,
	D_LIST,
	D_STATS,
	D_SCRUB,
	D_DAMAGE = 11,
	D_LOOKUP = 12,
	D_PING = 14,
	D_QUEUE_ONLY = 0x40,
	D_FIX_CRC = 0x80,
};

/* Meta selectors (fuzz_meta.c). */
enum {
	M_LOOKUP = 0,
	M_GETATTR,
	M_SETATTR,
	M_CREATE,
	M_MKNOD,
	M_MKDIR,
	M_SYMLINK,
	M_UNLINK,
	M_RMDIR,
	M_RENAME,
	M_LINK,
	M_READLINK,
	M_READDIR,
	M_OPEN,
	M_RELEASE,
	M_STATFS,
	M_SETXATTR,
	M_GETXATTR,
	M_LISTXATTR,
	M_REMOVEXATTR,
	M_UPDATE_SIZE,
	M_REGISTER,
	M_HEARTBEAT,
	M_MAP,
	M_SET_STATE,
	M_DRAIN_STATUS,
	M_INODE_LIST,
	M_SET_LAYOUT,
	M_TICK,
	M_SMALL = 0x40,
};

/* The prepared metadata state (fuzz_meta.c): root, then dir, file, link. */
#define INO_DIR	 2
#define INO_FILE 3
#define INO_LINK 4

struct seed {
	uint8_t bytes[1 << 16];
	size_t len;
};

static const char *out_dir;
static struct seed s;

static void add(uint8_t selector, const ProtobufCMessage *msg)
{
	size_t n = msg ? protobuf_c_message_get_packed_size(msg) : 0;

	if (s.len + 3 + n > sizeof(s.bytes))
		abort();
	s.bytes[s.len++] = selector;
	s.bytes[s.len++] = (uint8_t)n;
	s.bytes[s.len++] = (uint8_t)(n >> 8);
	if (msg)
		protobuf_c_message_pack(msg, s.bytes + s.len);
	s.len += n;
}

static void add_raw(uint8_t selector, const void *body, size_t n)
{
	s.bytes[s.len++] = selector;
	s.bytes[s.len++] = (uint8_t)n;
	s.bytes[s.len++] = (uint8_t)(n >> 8);
	memcpy(s.bytes + s.len, body, n);
	s.len += n;
}

static void save(const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", out_dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s.bytes, 1, s.len, f) != s.len || fclose(f)) {
		perror(path);
		exit(1);
	}
	s.len = 0;
}

/* ---- daemon ---- */

static Rdmafs__ChunkId id_of(uint64_t inode, uint64_t index)
{
	Rdmafs__ChunkId id = RDMAFS__CHUNK_ID__INIT;

	id.inode = inode;
	id.index = index;
	return id;
}

static void d_write(uint8_t flags, uint64_t inode, uint64_t index, uint32_t offset, uint32_t length,
		    uint64_t addr, uint32_t rkey, int commit)
{
	Rdmafs__ChunkWriteReq m = RDMAFS__CHUNK_WRITE_REQ__INIT;
	Rdmafs__BufferDesc buf = RDMAFS__BUFFER_DESC__INIT;
	Rdmafs__ChunkId id = id_of(inode, index);

	buf.addr = addr;
	buf.len = length;
	buf.rkey = rkey;
	m.chunk = &id;
	m.offset = offset;
	m.length = length;
	m.crc32c = 0x12345678;
	m.buf = &buf;
	m.chunk_size = CHUNK;
	m.commit = commit;
	add(D_WRITE | flags, &m.base);
}

/* A write whose payload travels inline (pattern bytes; D_FIX_CRC sums them). */
static void d_write_inline(uint8_t flags, uint64_t inode, uint64_t index, uint32_t offset,
			   uint32_t length)
{
	static uint8_t data[8192];
	Rdmafs__ChunkWriteReq m = RDMAFS__CHUNK_WRITE_REQ__INIT;
	Rdmafs__ChunkId id = id_of(inode, index);

	for (uint32_t i = 0; i < length && i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	m.chunk = &id;
	m.offset = offset;
	m.length = length;
	m.chunk_size = CHUNK;
	m.data.data = data;
	m.data.len = length < sizeof(data) ? length : sizeof(data);
	add(D_WRITE | flags, &m.base);
}

/* @inline_max: the reply may carry up to that many bytes (0: by RDMA WRITE only). */
static void d_read(uint8_t flags, uint64_t inode, uint64_t index, uint32_t offset, uint32_t length,
		   uint64_t addr, uint32_t rkey, uint32_t inline_max)
{
	Rdmafs__ChunkReadReq m = RDMAFS__CHUNK_READ_REQ__INIT;
	Rdmafs__BufferDesc buf = RDMAFS__BUFFER_DESC__INIT;
	Rdmafs__ChunkId id = id_of(inode, index);

	buf.addr = addr;
	buf.len = length;
	buf.rkey = rkey;
	m.chunk = &id;
	m.offset = offset;
	m.length = length;
	m.buf = &buf;
	m.inline_max = inline_max;
	add(D_READ | flags, &m.base);
}

static void d_selection(uint8_t selector, uint64_t inode, int range, uint64_t first,
			const uint64_t *indexes, size_t n)
{
	Rdmafs__ChunkSelection sel = RDMAFS__CHUNK_SELECTION__INIT;
	Rdmafs__ChunkCommitReq c = RDMAFS__CHUNK_COMMIT_REQ__INIT;
	Rdmafs__ChunkRemoveReq r = RDMAFS__CHUNK_REMOVE_REQ__INIT;

	sel.inode = inode;
	sel.range = range;
	sel.first_index = first;
	sel.indexes = (uint64_t *)indexes;
	sel.n_indexes = n;
	c.chunks = &sel;
	r.chunks = &sel;
	add(selector, (selector & 15) == D_COMMIT ? &c.base : &r.base);
}

static void d_truncate(uint64_t inode, uint64_t index, uint32_t length)
{
	Rdmafs__ChunkTruncateReq m = RDMAFS__CHUNK_TRUNCATE_REQ__INIT;
	Rdmafs__ChunkId id = id_of(inode, index);

	m.chunk = &id;
	m.length = length;
	add(D_TRUNCATE, &m.base);
}

static void d_stat(uint64_t inode, uint64_t index)
{
	Rdmafs__ChunkStatReq m = RDMAFS__CHUNK_STAT_REQ__INIT;
	Rdmafs__ChunkId id = id_of(inode, index);

	m.chunk = &id;
	add(D_STAT, &m.base);
}

static void d_list(int after, uint64_t inode, uint64_t index, uint32_t limit)
{
	Rdmafs__ChunkListReq m = RDMAFS__CHUNK_LIST_REQ__INIT;
	Rdmafs__ChunkId id = id_of(inode, index);

	if (after)
		m.start_after = &id;
	m.limit = limit;
	add(D_LIST, &m.base);
}

static void d_scrub(Rdmafs__JobAction action)
{
	Rdmafs__ScrubReq m = RDMAFS__SCRUB_REQ__INIT;

	m.action = action;
	add(D_SCRUB, &m.base);
}

static void daemon_seeds(void)
{
	static const uint64_t idx[] = {0, 1, 7};
	Rdmafs__DaemonStatsReq stats = RDMAFS__DAEMON_STATS_REQ__INIT;
	Rdmafs__LookupReq lookup = RDMAFS__LOOKUP_REQ__INIT;

	d_write(D_FIX_CRC, 1, 0, 0, 4096, FAKE_ADDR, FAKE_RKEY, 0);
	save("write");
	d_write(D_FIX_CRC, 1, 0, 0, 8192, FAKE_ADDR + 64, FAKE_RKEY, 0);
	d_read(0, 1, 0, 0, 8192, FAKE_ADDR, FAKE_RKEY, 0);
	d_stat(1, 0);
	save("write-read");
	d_write(D_FIX_CRC, 2, 3, 100, 5000, FAKE_ADDR + 4096, FAKE_RKEY, 1);
	d_write(D_FIX_CRC, 2, 3, 4000, 300, FAKE_ADDR + 7, FAKE_RKEY, 0);
	d_read(0, 2, 3, 50, 9000, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(0, 2, 3, 4090, 20, FAKE_ADDR + 100, FAKE_RKEY, 0);
	save("unaligned");
	d_write(D_FIX_CRC, 3, 0, CHUNK - 4096, 4096, FAKE_ADDR, FAKE_RKEY, 0);
	d_truncate(3, 0, 10);
	d_truncate(3, 0, 20000);
	d_read(0, 3, 0, 0, CHUNK, FAKE_ADDR, FAKE_RKEY, 0);
	d_truncate(3, 1, 0);
	save("truncate");
	d_write(0, 1, 0, 0, 512, FAKE_ADDR, FAKE_RKEY, 0);
	save("bad-crc");
	d_write(D_FIX_CRC, 1, 0, 0, 512, FAKE_ADDR, FAKE_RKEY + 1, 0);
	d_read(0, 1, 0, 0, 512, FAKE_ADDR, FAKE_RKEY, 0);
	save("bad-rkey");
	d_write(D_FIX_CRC, 1, 0, 0, 4096, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(0, 1, 0, 0, 4096, FAKE_ADDR + (1u << 20) - 100, FAKE_RKEY, 0);
	save("read-out-of-bounds");
	d_read(0, 9, 9, 0, 4096, FAKE_ADDR, FAKE_RKEY, 0);
	d_stat(9, 9);
	save("read-hole");
	d_write_inline(D_FIX_CRC, 5, 0, 100, 4096);
	d_read(0, 5, 0, 0, 8192, FAKE_ADDR, FAKE_RKEY, 8192);
	d_read(0, 5, 0, 50, 100, FAKE_ADDR, FAKE_RKEY, 64);
	save("inline");
	d_write_inline(0, 5, 1, 0, 300);
	d_write_inline(D_FIX_CRC, 5, 1, 0, 8192);
	save("inline-bad-crc");
	d_write(D_FIX_CRC, 4, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 4, 1, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 4, 7, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_selection(D_COMMIT, 4, 0, 0, idx, 3);
	d_selection(D_COMMIT, 4, 1, 1, NULL, 0);
	d_selection(D_REMOVE, 4, 0, 0, idx, 2);
	d_selection(D_REMOVE, 4, 1, 0, NULL, 0);
	save("commit-remove");
	d_write(D_FIX_CRC, 5, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 5, 1, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 6, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_list(0, 0, 0, 0);
	d_list(1, 5, 0, 1);
	d_list(1, 5, 1, 2);
	save("list");
	d_write(D_FIX_CRC, 7, 0, 0, 9000, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 7, 1, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_START);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_STATUS);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_CANCEL);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_START);
	save("scrub");
	d_write(D_FIX_CRC, 1, 0, 0, 9000, FAKE_ADDR, FAKE_RKEY, 0);
	add_raw(D_DAMAGE, "\x01\x00\x10\x00\x5a", 5);
	d_read(0, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 1, 0, 10, 10, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 1, 0, 8000, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(0, 1, 0, 8192, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_truncate(1, 0, 5000);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_START);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_STATUS);
	save("damaged");
	d_write(D_FIX_CRC, 1, 0, 0, 9000, FAKE_ADDR, FAKE_RKEY, 0);
	add_raw(D_DAMAGE, "\x01\x00\x00\x10\x00", 5);
	d_read(0, 1, 0, 0, 9000, FAKE_ADDR, FAKE_RKEY, 0);
	d_write(D_FIX_CRC, 1, 0, 9000, 10, FAKE_ADDR, FAKE_RKEY, 0);
	d_scrub(RDMAFS__JOB_ACTION__JOB_ACTION_START);
	save("cut-short");
	add(D_STATS, &stats.base);
	d_write(D_FIX_CRC, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	add(D_STATS, &stats.base);
	save("stats");
	for (int i = 0; i < 6; i++)
		d_stat(1, (uint64_t)i);
	save("stat-many");
	d_write(D_FIX_CRC | D_QUEUE_ONLY, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(D_QUEUE_ONLY, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(D_QUEUE_ONLY, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(D_QUEUE_ONLY, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(D_QUEUE_ONLY, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(D_QUEUE_ONLY, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	d_read(0, 1, 0, 0, 100, FAKE_ADDR, FAKE_RKEY, 0);
	save("pipeline-busy");
	lookup.parent = 1;
	lookup.name.data = (uint8_t *)"x";
	lookup.name.len = 1;
	add(D_LOOKUP, &lookup.base);
	add_raw(D_PING, "\x0a\x01x", 3);
	add_raw(D_STAT, "\xff\xff", 2);
	save("unsupported");
}

/* ---- meta ---- */

static Rdmafs__Cred cred_user = RDMAFS__CRED__INIT;

static ProtobufCBinaryData bin(const char *text)
{
	ProtobufCBinaryData b = {strlen(text), (uint8_t *)text};

	return b;
}

static void m_lookup(uint8_t flags, uint64_t parent, const char *name, Rdmafs__Cred *cred)
{
	Rdmafs__LookupReq m = RDMAFS__LOOKUP_REQ__INIT;

	m.parent = parent;
	m.name = bin(name);
	m.cred = cred;
	add(M_LOOKUP | flags, &m.base);
}

static void m_create(uint64_t parent, const char *name, uint32_t mode, int excl, Rdmafs__Cred *cred)
{
	Rdmafs__CreateReq m = RDMAFS__CREATE_REQ__INIT;

	m.parent = parent;
	m.name = bin(name);
	m.mode = mode;
	m.exclusive = excl;
	m.open_flags = 2;
	m.cred = cred;
	add(M_CREATE, &m.base);
}

static void m_mkdir(uint64_t parent, const char *name, Rdmafs__Cred *cred)
{
	Rdmafs__MkdirReq m = RDMAFS__MKDIR_REQ__INIT;

	m.parent = parent;
	m.name = bin(name);
	m.mode = 0755;
	m.cred = cred;
	add(M_MKDIR, &m.base);
}

static void m_name_op(uint8_t selector, uint64_t parent, const char *name)
{
	Rdmafs__UnlinkReq u = RDMAFS__UNLINK_REQ__INIT;
	Rdmafs__RmdirReq r = RDMAFS__RMDIR_REQ__INIT;

	u.parent = r.parent = parent;
	u.name = r.name = bin(name);
	add(selector, selector == M_UNLINK ? &u.base : &r.base);
}

static void m_ino_op(uint8_t selector, uint64_t ino)
{
	Rdmafs__GetattrReq g = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__ReadlinkReq r = RDMAFS__READLINK_REQ__INIT;
	Rdmafs__ListxattrReq l = RDMAFS__LISTXATTR_REQ__INIT;

	g.ino = r.ino = l.ino = ino;
	add(selector, selector == M_GETATTR ? &g.base : selector == M_READLINK ? &r.base : &l.base);
}

static void m_open(uint64_t ino, uint32_t flags)
{
	Rdmafs__OpenReq m = RDMAFS__OPEN_REQ__INIT;

	m.ino = ino;
	m.flags = flags;
	add(M_OPEN, &m.base);
}

static void m_release(uint64_t handle, uint64_t ino)
{
	Rdmafs__ReleaseReq m = RDMAFS__RELEASE_REQ__INIT;

	m.handle = handle;
	m.ino = ino;
	add(M_RELEASE, &m.base);
}

static void m_rename(uint64_t op, const char *on, uint64_t np, const char *nn, uint32_t flags)
{
	Rdmafs__RenameReq m = RDMAFS__RENAME_REQ__INIT;

	m.old_parent = op;
	m.old_name = bin(on);
	m.new_parent = np;
	m.new_name = bin(nn);
	m.flags = flags;
	add(M_RENAME, &m.base);
}

static void m_readdir(uint64_t ino, uint64_t cookie, uint32_t max, int attrs)
{
	Rdmafs__ReaddirReq m = RDMAFS__READDIR_REQ__INIT;

	m.ino = ino;
	m.cookie = cookie;
	m.max_entries = max;
	m.with_attrs = attrs;
	add(M_READDIR, &m.base);
}

static void m_xattr(uint8_t selector, uint64_t ino, const char *name, const char *value,
		    uint32_t flags)
{
	Rdmafs__SetxattrReq set = RDMAFS__SETXATTR_REQ__INIT;
	Rdmafs__GetxattrReq get = RDMAFS__GETXATTR_REQ__INIT;
	Rdmafs__RemovexattrReq rm = RDMAFS__REMOVEXATTR_REQ__INIT;

	set.ino = get.ino = rm.ino = ino;
	set.name = get.name = rm.name = bin(name);
	set.value = bin(value ? value : "");
	set.flags = flags;
	add(selector, selector == M_SETXATTR   ? &set.base
		      : selector == M_GETXATTR ? &get.base
					       : &rm.base);
}

static void m_uuid_op(uint8_t selector, uint8_t first, uint32_t state, int force)
{
	static uint8_t uuid[16];
	Rdmafs__HeartbeatReq hb = RDMAFS__HEARTBEAT_REQ__INIT;
	Rdmafs__SetDaemonStateReq st = RDMAFS__SET_DAEMON_STATE_REQ__INIT;
	Rdmafs__DrainStatusReq dr = RDMAFS__DRAIN_STATUS_REQ__INIT;
	ProtobufCBinaryData u = {sizeof(uuid), uuid};

	memset(uuid, 0, sizeof(uuid));
	uuid[0] = first;
	hb.uuid = st.uuid = dr.uuid = u;
	hb.capacity_bytes = 1ull << 41;
	hb.used_bytes = 12345;
	st.state = (Rdmafs__DaemonState)state;
	st.force = force;
	add(selector, selector == M_HEARTBEAT	? &hb.base
		      : selector == M_SET_STATE ? &st.base
						: &dr.base);
}

static void meta_seeds(void)
{
	static uint32_t groups[] = {100, 200};
	static char a0[] = "tcp://10.0.0.9:7471";
	static char *addrs[] = {a0};
	static uint8_t uuid9[16] = {0xd9}, uuid0[16] = {0xd0}, uuid1[16] = {0xd1};
	static uint8_t *layout_old[] = {uuid0, uuid1}, *layout_new[] = {uuid9, uuid1};
	Rdmafs__SetattrReq setattr = RDMAFS__SETATTR_REQ__INIT;
	Rdmafs__MknodReq mknod = RDMAFS__MKNOD_REQ__INIT;
	Rdmafs__SymlinkReq symlink = RDMAFS__SYMLINK_REQ__INIT;
	Rdmafs__LinkReq link = RDMAFS__LINK_REQ__INIT;
	Rdmafs__StatfsReq statfs = RDMAFS__STATFS_REQ__INIT;
	Rdmafs__UpdateSizeReq upd = RDMAFS__UPDATE_SIZE_REQ__INIT;
	Rdmafs__RegisterDaemonReq reg = RDMAFS__REGISTER_DAEMON_REQ__INIT;
	Rdmafs__GetClusterMapReq map = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__InodeListReq list = RDMAFS__INODE_LIST_REQ__INIT;
	Rdmafs__SetLayoutReq layout = RDMAFS__SET_LAYOUT_REQ__INIT;
	Rdmafs__Timespec ts = RDMAFS__TIMESPEC__INIT;
	ProtobufCBinaryData old_daemons[2], new_daemons[2];

	cred_user.uid = 1000;
	cred_user.gid = 1000;
	cred_user.groups = groups;
	cred_user.n_groups = 2;

	m_lookup(0, 1, "dir", NULL);
	m_lookup(0, 1, "file", &cred_user);
	m_lookup(0, INO_DIR, "missing", NULL);
	m_lookup(M_SMALL, 1, "file", NULL);
	save("lookup");
	m_ino_op(M_GETATTR, INO_FILE);
	m_ino_op(M_READLINK, INO_LINK);
	m_ino_op(M_LISTXATTR, INO_FILE);
	save("ino-ops");
	setattr.ino = INO_FILE;
	setattr.valid = 1 | 2 | 4 | 8 | 16 | 32 | 1024;
	setattr.mode = 0600;
	setattr.uid = 5;
	setattr.gid = 6;
	setattr.size = 1 << 20;
	ts.sec = 1700000000;
	ts.nsec = 5;
	setattr.atime = setattr.mtime = setattr.ctime = &ts;
	add(M_SETATTR, &setattr.base);
	setattr.valid = 128 | 256;
	setattr.cred = &cred_user;
	add(M_SETATTR, &setattr.base);
	save("setattr");
	m_create(1, "new", 0100644, 1, NULL);
	m_create(1, "file", 0100644, 0, NULL);
	m_create(INO_DIR, "user", 0100600, 1, &cred_user);
	m_open(INO_FILE, 0);
	m_open(INO_FILE, 01002);
	m_release(1, INO_FILE);
	m_release(2, INO_FILE);
	save("create-open-release");
	m_create(1, "gone", 0100644, 1, NULL);
	m_name_op(M_UNLINK, 1, "gone");
	m_release(2, 5);
	m_release(1, 5);
	save("unlink-open");
	mknod.parent = INO_DIR;
	mknod.name = bin("fifo");
	mknod.mode = 010644;
	add(M_MKNOD, &mknod.base);
	mknod.name = bin("chr");
	mknod.mode = 020600;
	mknod.rdev = 0x0103;
	add(M_MKNOD, &mknod.base);
	save("mknod");
	m_mkdir(INO_DIR, "sub", NULL);
	m_mkdir(INO_DIR, "sub", NULL);
	m_mkdir(1, "denied", &cred_user);
	m_name_op(M_RMDIR, INO_DIR, "sub");
	m_name_op(M_RMDIR, 1, "dir");
	save("mkdir-rmdir");
	symlink.parent = INO_DIR;
	symlink.name = bin("s");
	symlink.target = bin("../file");
	add(M_SYMLINK, &symlink.base);
	m_ino_op(M_READLINK, 5);
	save("symlink");
	m_name_op(M_UNLINK, 1, "file");
	m_name_op(M_UNLINK, 1, "link");
	m_name_op(M_UNLINK, 1, "dir");
	save("unlink");
	m_rename(1, "file", INO_DIR, "moved", 0);
	m_rename(1, "link", INO_DIR, "moved", 0);
	m_rename(1, "dir", INO_DIR, "loop", 0);
	save("rename");
	m_rename(1, "file", 1, "link", 2);
	m_rename(1, "file", 1, "dir", 1);
	save("rename-flags");
	link.ino = INO_FILE;
	link.new_parent = INO_DIR;
	link.new_name = bin("hard");
	add(M_LINK, &link.base);
	link.ino = INO_DIR;
	add(M_LINK, &link.base);
	m_name_op(M_UNLINK, 1, "file");
	m_lookup(0, INO_DIR, "hard", NULL);
	save("link");
	m_create(INO_DIR, "a", 0100644, 1, NULL);
	m_create(INO_DIR, "b", 0100644, 1, NULL);
	m_mkdir(INO_DIR, "c", NULL);
	m_readdir(1, 0, 0, 0);
	m_readdir(INO_DIR, 0, 2, 1);
	m_readdir(INO_DIR, 4, 0, 1);
	m_readdir(INO_FILE, 0, 0, 0);
	add_raw(M_READDIR | M_SMALL, "\x08\x01\x20\x01", 4);
	save("readdir");
	add(M_STATFS, &statfs.base);
	save("statfs");
	m_xattr(M_SETXATTR, INO_FILE, "user.a", "value", 0);
	m_xattr(M_SETXATTR, INO_FILE, "user.a", "other", 1);
	m_xattr(M_SETXATTR, INO_FILE, "user.b", "v2", 2);
	m_xattr(M_SETXATTR, INO_FILE, "user.c", "v3", 0);
	m_xattr(M_GETXATTR, INO_FILE, "user.a", NULL, 0);
	m_ino_op(M_LISTXATTR, INO_FILE);
	m_xattr(M_REMOVEXATTR, INO_FILE, "user.a", NULL, 0);
	m_xattr(M_REMOVEXATTR, INO_FILE, "user.a", NULL, 0);
	m_xattr(M_GETXATTR, INO_FILE, "user.a", NULL, 0);
	save("xattr");
	upd.ino = INO_FILE;
	upd.size = 123456;
	upd.mtime = &ts;
	add(M_UPDATE_SIZE, &upd.base);
	upd.size = 10;
	upd.mtime = NULL;
	add(M_UPDATE_SIZE, &upd.base);
	save("update-size");
	reg.uuid.data = uuid9;
	reg.uuid.len = 16;
	reg.addresses = addrs;
	reg.n_addresses = 1;
	reg.capacity_bytes = 1 << 30;
	add(M_REGISTER, &reg.base);
	m_uuid_op(M_HEARTBEAT, 0xd9, 0, 0);
	m_uuid_op(M_HEARTBEAT, 0xd0, 0, 0);
	add(M_MAP, &map.base);
	map.known_epoch = 4;
	add(M_MAP, &map.base);
	save("cluster");
	add_raw(M_TICK, "\x05", 1);
	m_uuid_op(M_HEARTBEAT, 0xd0, 0, 0);
	add_raw(M_TICK, "\x08", 1);
	m_create(1, "after-down", 0100644, 1, NULL);
	add_raw(M_TICK, "\x30", 1);
	m_create(1, "none-up", 0100644, 1, NULL);
	add(M_STATFS, &statfs.base);
	save("tick-down");
	m_uuid_op(M_SET_STATE, 0xd0, RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING, 0);
	m_uuid_op(M_DRAIN_STATUS, 0xd0, 0, 0);
	m_uuid_op(M_SET_STATE, 0xd0, RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED, 0);
	m_uuid_op(M_SET_STATE, 0xd0, RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED, 1);
	m_uuid_op(M_DRAIN_STATUS, 0xd0, 0, 0);
	m_uuid_op(M_SET_STATE, 0xd1, RDMAFS__DAEMON_STATE__DAEMON_STATE_UP, 0);
	save("drain");
	add(M_INODE_LIST, &list.base);
	list.start_after = 2;
	list.limit = 1;
	add(M_INODE_LIST, &list.base);
	save("inode-list");
	for (int i = 0; i < 2; i++) {
		old_daemons[i].data = layout_old[i];
		old_daemons[i].len = 16;
		new_daemons[i].data = layout_new[i];
		new_daemons[i].len = 16;
	}
	add(M_REGISTER, &reg.base);
	layout.ino = INO_FILE;
	layout.expected_daemons = old_daemons;
	layout.n_expected_daemons = 2;
	layout.daemons = new_daemons;
	layout.n_daemons = 2;
	add(M_SET_LAYOUT, &layout.base);
	add(M_SET_LAYOUT, &layout.base);
	save("set-layout");
	add_raw(29, "", 0);
	add_raw(30, "\x08\x01", 2);
	add_raw(31, "", 0);
	add_raw(M_LOOKUP, "\xff\xff\xff", 3);
	save("unsupported");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz-seeds DAEMON_DIR META_DIR\n");
		return 2;
	}
	out_dir = argv[1];
	daemon_seeds();
	out_dir = argv[2];
	meta_seeds();
	return 0;
}
