/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers of the metadata service unit tests: a throw-away store in a
 * temporary directory, and one call per RPC that packs the request, runs
 * meta_handle() and unpacks the reply, so each test reads like the client.
 */
#ifndef RDMAFS_TEST_META_UTIL_H
#define RDMAFS_TEST_META_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdmafs.pb-c.h"
#include "meta.h"

struct tm_env {
	char dir[64];
	struct meta *m;
	struct meta_options opts; /* every open's, the log quiet */
};

/* What the tests look at in an Attr. */
struct tm_attr {
	uint64_t ino;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	uint64_t blocks;
	uint64_t generation;
	int64_t mtime_sec, ctime_sec, atime_sec;
	uint32_t mtime_nsec, ctime_nsec, atime_nsec;
	uint32_t stripe_width; /* 0: no layout in the reply */
	uint32_t chunk_size;
	uint32_t replicas; /* Layout.replicas: 0 (one copy) or 2.. */
};

/* Silent unless TEST_META_VERBOSE is set. */
void tm_quiet_log(void *arg, enum meta_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Room for a reply; tests of paging lower it. */
extern size_t tm_resp_cap;

/* A caller; NULL in the helpers below means no Cred (uid 0). */
struct tm_cred {
	Rdmafs__Cred c;
	uint32_t groups[4];
};
const Rdmafs__Cred *tm_user(struct tm_cred *tc, uint32_t uid, uint32_t gid);

/* A fresh store with @daemons registered daemons (UUIDs 1, 2, ... in byte 0). */
void tm_setup(struct tm_env *e, unsigned daemons);
/* tm_setup() with the service opened with @o (its log made quiet). */
void tm_setup_with(struct tm_env *e, unsigned daemons, const struct meta_options *o);
void tm_reopen(struct tm_env *e);
void tm_teardown(struct tm_env *e);

/* Who the helpers call as (meta_handle_as()); NULL, the default: the cluster secret. */
extern const struct meta_caller *tm_caller;

/* Packs @req, calls meta_handle_as(), unpacks the reply into *@resp if non-NULL. */
int tm_call(struct meta *m, uint32_t method, const void *req,
	    const ProtobufCMessageDescriptor *resp_desc, void **resp);

void tm_uuid(uint8_t *uuid, unsigned n);

int tm_getattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, struct tm_attr *a);
int tm_lookup(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	      struct tm_attr *a);
int tm_mkdir(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	     uint32_t mode, struct tm_attr *a);
int tm_create(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	      uint32_t mode, bool excl, uint32_t flags, struct tm_attr *a, uint64_t *handle,
	      bool *created);
/* Creates and releases at once. Returns the inode number or a negative errno. */
int64_t tm_mkfile(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
		  uint32_t mode);
int tm_mknod(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	     uint32_t mode, uint64_t rdev, struct tm_attr *a);
int tm_symlink(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	       const char *target, struct tm_attr *a);
int tm_readlink(struct meta *m, uint64_t ino, char *buf, size_t len);
/* *@freed gets the freed inode number or 0. */
int tm_unlink(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name,
	      uint64_t *freed);
int tm_rmdir(struct meta *m, const Rdmafs__Cred *c, uint64_t parent, const char *name);
int tm_rename(struct meta *m, const Rdmafs__Cred *c, uint64_t op, const char *on, uint64_t np,
	      const char *nn, uint32_t flags, uint64_t *freed);
int tm_link(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, uint64_t np, const char *nn,
	    struct tm_attr *a);
int tm_open(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, uint32_t flags, uint64_t *handle);
int tm_release(struct meta *m, uint64_t handle, uint64_t ino, uint64_t *freed);
/* RECLAIM of one handle; *@gone (if non-NULL) says the service reported its inode gone. */
int tm_reclaim(struct meta *m, uint64_t handle, uint64_t ino, uint32_t flags, bool *gone);
int tm_setattr(struct meta *m, const Rdmafs__Cred *c, Rdmafs__SetattrReq *req, struct tm_attr *a);
int tm_update_size(struct meta *m, uint64_t ino, uint64_t size, const Rdmafs__Timespec *mtime,
		   struct tm_attr *a);
int tm_setxattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, const char *name,
		const void *value, size_t len, uint32_t flags);
/* Value into @buf (NUL-terminated); returns its length or a negative errno. */
int tm_getxattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, const char *name, char *buf,
		size_t len);
/* Names joined with ',' into @buf; returns their count or a negative errno. */
int tm_listxattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, char *buf, size_t len);
int tm_removexattr(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, const char *name);
int tm_readdir(struct meta *m, const Rdmafs__Cred *c, uint64_t ino, uint64_t cookie, uint32_t max,
	       bool attrs, Rdmafs__ReaddirResp **resp);
int tm_statfs(struct meta *m, Rdmafs__StatfsResp **resp);

int tm_register(struct meta *m, unsigned n, const char *address, uint64_t capacity, uint64_t used,
		Rdmafs__RegisterDaemonResp **resp);
int tm_heartbeat(struct meta *m, unsigned n, uint64_t capacity, uint64_t used,
		 Rdmafs__HeartbeatResp **resp);
int tm_cluster_map(struct meta *m, uint64_t known_epoch, Rdmafs__GetClusterMapResp **resp);
int tm_set_state(struct meta *m, unsigned n, Rdmafs__DaemonState state, bool force,
		 uint64_t *epoch);
/* The state of daemon @n in the map (removed ones included), or -1 if absent. */
int tm_daemon_state(struct meta *m, unsigned n);

#endif
