/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The data directory and its format marker.
 *
 * The marker file "rdmafs-format" is three lines of text:
 *   rdmafs-daemon data directory
 *   format 1
 *   uuid 0b7c6c1e-4a0e-4f57-9a1e-2f0d8e1c2a3b
 * It is written last on first start (tmp file, fsync, rename, fsync of the
 * directory), so a directory is either not initialised or complete. A
 * directory that has files but no marker, a marker that is not ours, or a
 * newer format is refused and left untouched. The marker is flock()ed while
 * a daemon runs, so a second daemon on the same directory is refused too.
 *
 * "cluster-id" holds the line "cluster UUID" of the cluster the directory
 * joined at its first registration (written the same way), so that it never
 * joins another.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "daemon_i.h"

#define MARKER_MAGIC "rdmafs-daemon data directory"
#define CLUSTER_FILE "cluster-id"

static void uuid_format(const uint8_t *u, char *out, size_t size)
{
	snprintf(out, size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

static int uuid_parse(const char *text, uint8_t *u)
{
	unsigned n = 0;

	if (strlen(text) != 36)
		return -EINVAL;
	for (unsigned i = 0; i < 36; i++) {
		const char c = text[i];
		int v;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return -EINVAL;
			continue;
		}
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else
			return -EINVAL;
		if (n % 2 == 0)
			u[n / 2] = (uint8_t)(v << 4);
		else
			u[n / 2] |= (uint8_t)v;
		n++;
	}
	return 0;
}

/* True when the directory has no entries besides "." and "..". */
static int dir_is_empty(int dir_fd, bool *empty)
{
	int fd = dup(dir_fd);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	rewinddir(d);
	*empty = true;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			*empty = false;
			break;
		}
	}
	closedir(d);
	return 0;
}

static void not_ours(const char *path)
{
	rdmafs_log(RDMAFS_LOG_ERR,
		   "data directory %s is not empty and has no " DATADIR_MARKER
		   " marker: refusing to use it (give an empty or rdmafs directory)",
		   path);
}

/* Writes @name in @dir_fd atomically: a temporary file, fsync, rename, fsync of the directory. */
static int write_atomically(int dir_fd, const char *name, const char *text)
{
	char tmp[64];
	size_t len = strlen(text);
	ssize_t done;
	int fd, ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	done = write(fd, text, len);
	if (done != (ssize_t)len || fsync(fd)) {
		ret = done < 0 || done == (ssize_t)len ? -errno : -ENOSPC;
		close(fd);
		unlinkat(dir_fd, tmp, 0);
		return ret;
	}
	close(fd);
	if (renameat(dir_fd, tmp, dir_fd, name) || fsync(dir_fd)) {
		ret = -errno;
		unlinkat(dir_fd, tmp, 0);
		return ret;
	}
	return 0;
}

static int marker_create(int dir_fd, const char *path, uint8_t *uuid)
{
	char text[128], uuid_text[37];
	int ret;

	if (getrandom(uuid, 16, 0) != 16)
		return -EIO;
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	uuid_format(uuid, uuid_text, sizeof(uuid_text));
	snprintf(text, sizeof(text), MARKER_MAGIC "\nformat %d\nuuid %s\n", DATADIR_FORMAT_VERSION,
		 uuid_text);
	ret = write_atomically(dir_fd, DATADIR_MARKER, text);
	if (ret)
		return ret;
	rdmafs_log(RDMAFS_LOG_INFO, "initialised data directory %s (format %d, uuid %s)", path,
		   DATADIR_FORMAT_VERSION, uuid_text);
	return 0;
}

static int marker_check(int fd, const char *path, uint8_t *uuid)
{
	char text[512], magic[64], uuid_text[64];
	unsigned long format;
	char *line, *end;
	ssize_t len = pread(fd, text, sizeof(text) - 1, 0);

	if (len < 0)
		return -errno;
	text[len] = '\0';
	line = text;
	end = strchr(line, '\n');
	if (!end || (size_t)(end - line) >= sizeof(magic))
		goto foreign;
	memcpy(magic, line, (size_t)(end - line));
	magic[end - line] = '\0';
	if (strcmp(magic, MARKER_MAGIC) != 0)
		goto foreign;
	line = end + 1;
	if (strncmp(line, "format ", 7) != 0)
		goto foreign;
	errno = 0;
	format = strtoul(line + 7, &end, 10);
	if (errno || end == line + 7 || *end != '\n')
		goto foreign;
	if (format > DATADIR_FORMAT_VERSION) {
		rdmafs_log(RDMAFS_LOG_ERR,
			   "data directory %s has format %lu, newer than this daemon's format %d:"
			   " refusing to use it (upgrade rdmafs-daemon)",
			   path, format, DATADIR_FORMAT_VERSION);
		return -EINVAL;
	}
	if (format < 1)
		goto foreign;
	line = end + 1;
	if (strncmp(line, "uuid ", 5) != 0)
		goto foreign;
	line += 5;
	end = strchr(line, '\n');
	if (!end || (size_t)(end - line) >= sizeof(uuid_text))
		goto foreign;
	memcpy(uuid_text, line, (size_t)(end - line));
	uuid_text[end - line] = '\0';
	if (uuid_parse(uuid_text, uuid))
		goto foreign;
	return 0;

foreign:
	rdmafs_log(RDMAFS_LOG_ERR,
		   "data directory %s: %s/" DATADIR_MARKER " is not an rdmafs format marker"
		   " (foreign or damaged): refusing to use it",
		   path, path);
	return -EINVAL;
}

int datadir_open(const char *path, struct datadir *out)
{
	bool empty = false, fresh = false;
	int ret;

	memset(out, 0, sizeof(*out));
	out->marker_fd = -1;
	if (mkdir(path, 0750) == 0)
		rdmafs_log(RDMAFS_LOG_INFO, "created data directory %s", path);
	else if (errno != EEXIST) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "cannot create data directory %s: %s", path,
			   strerror(-ret));
		return ret;
	}
	out->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (out->dir_fd < 0) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open data directory %s: %s", path,
			   strerror(-ret));
		return ret;
	}
	out->marker_fd = openat(out->dir_fd, DATADIR_MARKER, O_RDONLY | O_CLOEXEC);
	if (out->marker_fd < 0 && errno == ENOENT) {
		ret = dir_is_empty(out->dir_fd, &empty);
		if (ret)
			goto err_close_dir;
		if (!empty) {
			not_ours(path);
			ret = -EINVAL;
			goto err_close_dir;
		}
		ret = marker_create(out->dir_fd, path, out->uuid);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR, "cannot initialise data directory %s: %s", path,
				   strerror(-ret));
			goto err_close_dir;
		}
		fresh = true;
		out->marker_fd = openat(out->dir_fd, DATADIR_MARKER, O_RDONLY | O_CLOEXEC);
	}
	if (out->marker_fd < 0) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open %s/" DATADIR_MARKER ": %s", path,
			   strerror(-ret));
		goto err_close_dir;
	}
	if (flock(out->marker_fd, LOCK_EX | LOCK_NB)) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "data directory %s is in use by another rdmafs-daemon",
			   path);
		goto err_close_marker;
	}
	ret = marker_check(out->marker_fd, path, out->uuid);
	if (ret)
		goto err_close_marker;
	uuid_format(out->uuid, out->uuid_text, sizeof(out->uuid_text));
	if (!fresh)
		rdmafs_log(RDMAFS_LOG_INFO, "data directory %s (format %d, uuid %s)", path,
			   DATADIR_FORMAT_VERSION, out->uuid_text);
	return 0;

err_close_marker:
	close(out->marker_fd);
	out->marker_fd = -1;
err_close_dir:
	close(out->dir_fd);
	out->dir_fd = -1;
	return ret;
}

int datadir_check(const char *path)
{
	char parent[4096], *slash;
	uint8_t uuid[16];
	bool empty = false;
	struct stat sb;
	int dir_fd, marker_fd, ret;

	dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0 && errno == ENOENT) {
		/* datadir_open() would mkdir() it: its parent must be a directory */
		if ((size_t)snprintf(parent, sizeof(parent), "%s", path) >= sizeof(parent))
			return -ENAMETOOLONG;
		slash = strrchr(parent, '/');
		if (!slash)
			snprintf(parent, sizeof(parent), ".");
		else if (slash == parent)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (stat(parent, &sb))
			ret = -errno;
		else if (!S_ISDIR(sb.st_mode))
			ret = -ENOTDIR;
		else
			return 0;
		rdmafs_log(RDMAFS_LOG_ERR,
			   "data directory %s does not exist and cannot be created: %s: %s", path,
			   parent, strerror(-ret));
		return ret;
	}
	if (dir_fd < 0) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open data directory %s: %s", path,
			   strerror(-ret));
		return ret;
	}
	marker_fd = openat(dir_fd, DATADIR_MARKER, O_RDONLY | O_CLOEXEC);
	if (marker_fd >= 0) {
		ret = marker_check(marker_fd, path, uuid);
		close(marker_fd);
	} else if (errno != ENOENT) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open %s/" DATADIR_MARKER ": %s", path,
			   strerror(-ret));
	} else {
		ret = dir_is_empty(dir_fd, &empty);
		if (!ret && !empty) {
			not_ours(path);
			ret = -EINVAL;
		}
	}
	close(dir_fd);
	return ret;
}

int datadir_cluster_get(const struct datadir *dd, uint8_t *id, bool *known)
{
	char text[64];
	ssize_t len;
	int fd = openat(dd->dir_fd, CLUSTER_FILE, O_RDONLY | O_CLOEXEC);

	*known = false;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	len = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (len < 0)
		return -errno;
	text[len] = '\0';
	if (strncmp(text, "cluster ", 8) != 0 || strlen(text) != 8 + 36 + 1 || text[44] != '\n')
		return -EINVAL;
	text[44] = '\0';
	if (uuid_parse(text + 8, id))
		return -EINVAL;
	*known = true;
	return 0;
}

int datadir_cluster_set(const struct datadir *dd, const uint8_t *id)
{
	char text[64], uuid_text[37];

	uuid_format(id, uuid_text, sizeof(uuid_text));
	snprintf(text, sizeof(text), "cluster %s\n", uuid_text);
	return write_atomically(dd->dir_fd, CLUSTER_FILE, text);
}

void datadir_uuid_format(const uint8_t *uuid, char out[37])
{
	uuid_format(uuid, out, 37);
}

void datadir_close(struct datadir *dd)
{
	if (dd->marker_fd >= 0)
		close(dd->marker_fd);
	if (dd->dir_fd >= 0)
		close(dd->dir_fd);
	dd->marker_fd = dd->dir_fd = -1;
}
