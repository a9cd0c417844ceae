/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rdmafs-copy: the local side, plain system calls on full paths. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "copy_i.h"

static void stat_to_attr(const struct stat *st, struct cp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->mode = st->st_mode;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->nlink = (uint32_t)st->st_nlink;
	a->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
	a->blocks = st->st_blocks > 0 ? (uint64_t)st->st_blocks : 0;
	a->dev = st->st_dev;
	a->ino = st->st_ino;
	a->rdev = st->st_rdev;
	a->atime = st->st_atim;
	a->mtime = st->st_mtim;
}

static int local_stat(struct cp_side *s, struct cp_loc *loc, struct cp_attr *a)
{
	struct stat st;

	if (lstat(loc->path, &st))
		return -errno;
	stat_to_attr(&st, a);
	return 0;
}

static int local_list(struct cp_side *s, const struct cp_loc *dir, struct cp_dir *out)
{
	struct cp_dir d = {0};
	size_t cap = 0;
	struct dirent *de;
	DIR *dp;
	int fd, ret = 0;

	fd = open(dir->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dp = fdopendir(fd);
	if (!dp) {
		ret = -errno;
		close(fd);
		return ret;
	}
	for (;;) {
		struct stat st;

		errno = 0;
		de = readdir(dp);
		if (!de) {
			ret = -errno;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT)
				continue; /* gone meanwhile */
			ret = -errno;
			break;
		}
		if (d.count == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct cp_dirent *n = realloc(d.ents, ncap * sizeof(*n));

			if (!n) {
				ret = -ENOMEM;
				break;
			}
			d.ents = n;
			cap = ncap;
		}
		d.ents[d.count].name = strdup(de->d_name);
		if (!d.ents[d.count].name) {
			ret = -ENOMEM;
			break;
		}
		stat_to_attr(&st, &d.ents[d.count].attr);
		d.count++;
	}
	closedir(dp);
	if (ret) {
		cp_dir_free(&d);
		return ret;
	}
	cp_dir_sort(&d);
	*out = d;
	return 0;
}

static int local_open_read(struct cp_side *s, const struct cp_loc *loc, struct cp_file *f)
{
	memset(f, 0, sizeof(*f));
	f->fd = open(loc->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (f->fd < 0)
		return -errno;
	posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

static int local_read(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len, void *buf)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(f->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) /* shrank under us */
			return -EXDEV;
		done += (size_t)n;
	}
	return 0;
}

static int local_data_extent(struct cp_side *s, struct cp_file *f, uint64_t off, uint64_t size,
			     uint64_t *start, uint64_t *end)
{
	off_t d, h;

	if (off >= size)
		return -ENXIO;
	d = lseek(f->fd, (off_t)off, SEEK_DATA);
	if (d < 0) {
		if (errno == ENXIO)
			return -ENXIO;
		/* no SEEK_DATA here: all of it is data */
		*start = off;
		*end = size;
		return 0;
	}
	if ((uint64_t)d >= size)
		return -ENXIO;
	h = lseek(f->fd, d, SEEK_HOLE);
	if (h < 0 || (uint64_t)h > size)
		h = (off_t)size;
	*start = (uint64_t)d;
	*end = (uint64_t)h;
	return 0;
}

static int local_create(struct cp_side *s, const struct cp_loc *dir, const char *name,
			const struct cp_attr *a, struct cp_file *f, uint64_t *ino)
{
	char *path = cp_path_join(dir->path, name);

	memset(f, 0, sizeof(*f));
	if (!path)
		return -ENOMEM;
	/* the final mode comes with set_attr, after the data: keep it writable now */
	f->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	free(path);
	if (f->fd < 0)
		return -errno;
	*ino = 0;
	return 0;
}

static int local_write(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len,
		       const void *buf)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n =
			pwrite(f->fd, (const char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

static int local_finish(struct cp_side *s, struct cp_file *f, uint64_t size)
{
	/* the holes at the end exist only as the size */
	if (ftruncate(f->fd, (off_t)size))
		return -errno;
	return 0;
}

static int local_sync(struct cp_side *s, const struct cp_loc *root)
{
	char dir[PATH_MAX];
	int fd, ret = 0;

	(void)s;
	/* a directory to name the file system by (a file copied alone: its parent's) */
	fd = open(root->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOTDIR) {
		snprintf(dir, sizeof(dir), "%s", root->path);
		fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	if (syncfs(fd))
		ret = -errno;
	close(fd);
	return ret;
}

static void local_close(struct cp_side *s, struct cp_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

static int local_readlink(struct cp_side *s, const struct cp_loc *loc, char *buf, size_t size)
{
	ssize_t n = readlink(loc->path, buf, size);

	if (n < 0)
		return -errno;
	if ((size_t)n >= size)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return 0;
}

static int local_listxattr(struct cp_side *s, const struct cp_loc *loc, char **names, size_t *len)
{
	ssize_t n;
	char *buf;

	*names = NULL;
	*len = 0;
	for (int tries = 0; tries < 4; tries++) {
		n = llistxattr(loc->path, NULL, 0);
		if (n < 0)
			return errno == ENOTSUP ? 0 : -errno;
		if (n == 0)
			return 0;
		buf = malloc((size_t)n);
		if (!buf)
			return -ENOMEM;
		n = llistxattr(loc->path, buf, (size_t)n);
		if (n >= 0) {
			*names = buf;
			*len = (size_t)n;
			return 0;
		}
		free(buf);
		if (errno != ERANGE)
			return -errno;
	}
	return -ERANGE;
}

static int local_getxattr(struct cp_side *s, const struct cp_loc *loc, const char *name,
			  void **value, size_t *len)
{
	ssize_t n;
	void *buf;

	for (int tries = 0; tries < 4; tries++) {
		n = lgetxattr(loc->path, name, NULL, 0);
		if (n < 0)
			return -errno;
		buf = malloc(n ? (size_t)n : 1);
		if (!buf)
			return -ENOMEM;
		n = lgetxattr(loc->path, name, buf, (size_t)n);
		if (n >= 0) {
			*value = buf;
			*len = (size_t)n;
			return 0;
		}
		free(buf);
		if (errno != ERANGE)
			return -errno;
	}
	return -ERANGE;
}

static int local_setxattr(struct cp_side *s, const struct cp_loc *loc, const char *name,
			  const void *value, size_t len)
{
	return lsetxattr(loc->path, name, value, len, 0) ? -errno : 0;
}

/* Runs @fn on "@dir/@name"; the result as 0 / -errno. */
static int at_path(const struct cp_loc *dir, const char *name, char **out)
{
	*out = cp_path_join(dir->path, name);
	return *out ? 0 : -ENOMEM;
}

static int local_mkdir(struct cp_side *s, const struct cp_loc *dir, const char *name,
		       const struct cp_attr *a, uint64_t *ino)
{
	char *path;
	int ret = at_path(dir, name, &path);

	if (ret)
		return ret;
	/* writable by us until the final pass sets the real mode */
	if (mkdir(path, 0700))
		ret = -errno;
	free(path);
	*ino = 0;
	return ret;
}

static int local_symlink(struct cp_side *s, const struct cp_loc *dir, const char *name,
			 const char *target, const struct cp_attr *a, uint64_t *ino)
{
	char *path;
	int ret = at_path(dir, name, &path);

	if (ret)
		return ret;
	if (symlink(target, path))
		ret = -errno;
	free(path);
	*ino = 0;
	return ret;
}

static int local_mknod(struct cp_side *s, const struct cp_loc *dir, const char *name,
		       const struct cp_attr *a, uint64_t *ino)
{
	char *path;
	int ret = at_path(dir, name, &path);

	if (ret)
		return ret;
	if (mknod(path, (a->mode & S_IFMT) | 0600, (dev_t)a->rdev))
		ret = -errno;
	free(path);
	*ino = 0;
	return ret;
}

static int local_link(struct cp_side *s, const struct cp_loc *target, const struct cp_loc *dir,
		      const char *name)
{
	char *path;
	int ret = at_path(dir, name, &path);

	if (ret)
		return ret;
	if (link(target->path, path))
		ret = -errno;
	free(path);
	return ret;
}

static int local_rename(struct cp_side *s, const struct cp_loc *dir, const char *from,
			const char *to)
{
	int fd = open(dir->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (renameat(fd, from, fd, to))
		ret = -errno;
	close(fd);
	return ret;
}

static int local_unlink(struct cp_side *s, const struct cp_loc *dir, const char *name)
{
	int fd = open(dir->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (unlinkat(fd, name, 0))
		ret = -errno;
	close(fd);
	return ret;
}

static int local_set_attr(struct cp_side *s, const struct cp_loc *loc, const struct cp_attr *a,
			  bool owner)
{
	struct timespec ts[2] = {a->atime, a->mtime};

	/* owner first: chown clears setuid/setgid, which chmod then restores */
	if (owner && lchown(loc->path, a->uid, a->gid))
		return -errno;
	if (!S_ISLNK(a->mode) && chmod(loc->path, a->mode & 07777))
		return -errno;
	if (utimensat(AT_FDCWD, loc->path, ts, AT_SYMLINK_NOFOLLOW))
		return -errno;
	return 0;
}

static const struct cp_side_ops local_ops = {
	.stat = local_stat,
	.list = local_list,
	.open_read = local_open_read,
	.read = local_read,
	.data_extent = local_data_extent,
	.create = local_create,
	.write = local_write,
	.finish = local_finish,
	.sync = local_sync,
	.close = local_close,
	.readlink = local_readlink,
	.listxattr = local_listxattr,
	.getxattr = local_getxattr,
	.setxattr = local_setxattr,
	.mkdir = local_mkdir,
	.symlink = local_symlink,
	.mknod = local_mknod,
	.link = local_link,
	.rename = local_rename,
	.unlink = local_unlink,
	.set_attr = local_set_attr,
};

void cp_side_local_init(struct cp_side *s)
{
	memset(s, 0, sizeof(*s));
	s->ops = &local_ops;
}
