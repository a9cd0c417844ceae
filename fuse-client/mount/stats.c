// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs-fuse: what the operations count (mount_i.h). */
#include <errno.h>

#include "mount_i.h"

static const char *const op_names[MOUNT_OPS] = {
	[MOUNT_OP_LOOKUP] = "lookup",
	[MOUNT_OP_FORGET] = "forget",
	[MOUNT_OP_FORGET_MULTI] = "forget_multi",
	[MOUNT_OP_GETATTR] = "getattr",
	[MOUNT_OP_SETATTR] = "setattr",
	[MOUNT_OP_READLINK] = "readlink",
	[MOUNT_OP_MKNOD] = "mknod",
	[MOUNT_OP_MKDIR] = "mkdir",
	[MOUNT_OP_UNLINK] = "unlink",
	[MOUNT_OP_RMDIR] = "rmdir",
	[MOUNT_OP_SYMLINK] = "symlink",
	[MOUNT_OP_RENAME] = "rename",
	[MOUNT_OP_LINK] = "link",
	[MOUNT_OP_OPEN] = "open",
	[MOUNT_OP_READ] = "read",
	[MOUNT_OP_WRITE] = "write",
	[MOUNT_OP_FLUSH] = "flush",
	[MOUNT_OP_RELEASE] = "release",
	[MOUNT_OP_FSYNC] = "fsync",
	[MOUNT_OP_OPENDIR] = "opendir",
	[MOUNT_OP_READDIR] = "readdir",
	[MOUNT_OP_READDIRPLUS] = "readdirplus",
	[MOUNT_OP_RELEASEDIR] = "releasedir",
	[MOUNT_OP_FSYNCDIR] = "fsyncdir",
	[MOUNT_OP_STATFS] = "statfs",
	[MOUNT_OP_SETXATTR] = "setxattr",
	[MOUNT_OP_GETXATTR] = "getxattr",
	[MOUNT_OP_LISTXATTR] = "listxattr",
	[MOUNT_OP_REMOVEXATTR] = "removexattr",
	[MOUNT_OP_ACCESS] = "access",
	[MOUNT_OP_CREATE] = "create",
	[MOUNT_OP_FALLOCATE] = "fallocate",
	[MOUNT_OP_LSEEK] = "lseek",
};

/* The errnos an application of a mount meets, by name; anything else is "other". */
static const struct {
	int err;
	const char *name;
} errnos[MOUNT_ERRNOS - 1] = {
	{ENOENT, "ENOENT"},
	{EEXIST, "EEXIST"},
	{ENOTEMPTY, "ENOTEMPTY"},
	{ENOTDIR, "ENOTDIR"},
	{EISDIR, "EISDIR"},
	{EACCES, "EACCES"},
	{EPERM, "EPERM"},
	{EINVAL, "EINVAL"},
	{ENODATA, "ENODATA"},
	{ERANGE, "ERANGE"},
	{ENOSPC, "ENOSPC"},
	{EDQUOT, "EDQUOT"},
	{EIO, "EIO"},
	{ETIMEDOUT, "ETIMEDOUT"},
	{EXDEV, "EXDEV"},
	{ENAMETOOLONG, "ENAMETOOLONG"},
	{EROFS, "EROFS"},
	{EOPNOTSUPP, "EOPNOTSUPP"},
	{ENOSYS, "ENOSYS"},
	{EBADF, "EBADF"},
	{ENXIO, "ENXIO"},
	{EFBIG, "EFBIG"},
	{ENOMEM, "ENOMEM"},
	{EAGAIN, "EAGAIN"},
	{ELOOP, "ELOOP"},
	{EMLINK, "EMLINK"},
	{ESTALE, "ESTALE"},
	{EBUSY, "EBUSY"},
	{EINTR, "EINTR"},
};

const char *mount_op_name(enum mount_op op)
{
	return op < MOUNT_OPS ? op_names[op] : "unknown";
}

const char *mount_errno_name(unsigned slot)
{
	return slot < MOUNT_ERRNOS - 1 ? errnos[slot].name : "other";
}

static unsigned errno_slot(int err)
{
	unsigned slot = 0;

	while (slot < MOUNT_ERRNOS - 1 && errnos[slot].err != err)
		slot++;
	return slot;
}

void mount_stats_record(struct mount_stats *s, enum mount_op op, uint64_t ns, int err)
{
	rdmafs_latency_record(&s->ops[op].latency, ns);
	if (err)
		mount_count(&s->ops[op].errors[errno_slot(err)], 1);
}
