// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Client key files (rdmafs_common.h): what `rdmafsctl client add` writes and
 * every client program reads with -o key= / --key-file / key_file =.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <sodium.h>

#include "xprt.h"
#include "rdmafs_common.h"

/* A key file is small: four lines and a comment. */
#define KEY_FILE_MAX 1024

static const struct {
	uint32_t bit;
	const char *name;
} flag_names[] = {
	{RDMAFS_KEY_READ_ONLY, "read-only"},
	{RDMAFS_KEY_ROOT_SQUASH, "root-squash"},
};

#define FLAG_NAMES (sizeof(flag_names) / sizeof(flag_names[0]))

const char *rdmafs_key_flags_text(uint32_t flags, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	if (!flags) {
		snprintf(buf, size, "none");
		return buf;
	}
	for (size_t i = 0; i < FLAG_NAMES; i++) {
		if (!(flags & flag_names[i].bit))
			continue;
		flags &= ~flag_names[i].bit;
		used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s",
					 used ? "," : "", flag_names[i].name);
	}
	if (flags && used < size)
		snprintf(buf + used, size - used, "%s%#x", used ? "," : "", flags);
	return buf;
}

int rdmafs_key_flags_parse(const char *text, uint32_t *flags)
{
	const char *p = text;

	*flags = 0;
	if (strcmp(text, "none") == 0)
		return 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		bool known = false;

		for (size_t i = 0; i < FLAG_NAMES && !known; i++) {
			if (strlen(flag_names[i].name) == len &&
			    strncmp(p, flag_names[i].name, len) == 0) {
				*flags |= flag_names[i].bit;
				known = true;
			}
		}
		if (!known)
			return -EINVAL;
		p += len;
		if (*p == ',' && *++p == '\0')
			return -EINVAL;
	}
	return *flags ? 0 : -EINVAL;
}

int rdmafs_key_write(const char *path, const struct xprt_key *key)
{
	char hex[XPRT_KEY_SIZE * 2 + 1], flags[64], text[KEY_FILE_MAX];
	int fd, len, ret = 0;

	sodium_bin2hex(hex, sizeof(hex), key->key, XPRT_KEY_SIZE);
	len = snprintf(text, sizeof(text),
		       "# rdmafs client key: whoever holds this file is client %s to the "
		       "cluster.\n# Keep it mode 0600; rdmafsctl client revoke %s ends it.\n"
		       "name = %s\nserial = %llu\nflags = %s\nkey = %s\n",
		       key->name, key->name, key->name, (unsigned long long)key->serial,
		       rdmafs_key_flags_text(key->flags, flags, sizeof(flags)), hex);
	sodium_memzero(hex, sizeof(hex));
	if (len < 0 || (size_t)len >= sizeof(text)) {
		ret = -EINVAL;
		goto out_wipe;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out_wipe;
	}
	/* the umask may have taken bits away, never added any: 0600 holds */
	if (write(fd, text, (size_t)len) != len)
		ret = errno ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		unlink(path);
out_wipe:
	sodium_memzero(text, sizeof(text));
	return ret;
}

/* Parses "KEY = VALUE" lines of @text into @out. */
static int parse_key_text(char *text, struct xprt_key *out)
{
	bool have_name = false, have_serial = false, have_flags = false, have_key = false;
	char *line = text, *next;

	memset(out, 0, sizeof(*out));
	for (; line && *line; line = next) {
		char *eq, *key, *value, *end;
		size_t klen, vlen, bin_len;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		line += strspn(line, " \t\r");
		if (!*line || *line == '#')
			continue;
		eq = strchr(line, '=');
		if (!eq)
			return -EINVAL;
		key = line;
		klen = (size_t)(eq - line);
		while (klen && (key[klen - 1] == ' ' || key[klen - 1] == '\t'))
			klen--;
		value = eq + 1 + strspn(eq + 1, " \t");
		vlen = strlen(value);
		while (vlen && strchr(" \t\r", value[vlen - 1]))
			vlen--;
		value[vlen] = '\0';
		if (klen == 4 && strncmp(key, "name", 4) == 0) {
			if (!xprt_key_name_valid(value))
				return -EINVAL;
			snprintf(out->name, sizeof(out->name), "%s", value);
			have_name = true;
		} else if (klen == 6 && strncmp(key, "serial", 6) == 0) {
			unsigned long long v;

			errno = 0;
			v = strtoull(value, &end, 10);
			if (errno || end == value || *end || value[0] == '-')
				return -EINVAL;
			out->serial = v;
			have_serial = true;
		} else if (klen == 5 && strncmp(key, "flags", 5) == 0) {
			if (rdmafs_key_flags_parse(value, &out->flags))
				return -EINVAL;
			have_flags = true;
		} else if (klen == 3 && strncmp(key, "key", 3) == 0) {
			if (vlen != XPRT_KEY_SIZE * 2 ||
			    sodium_hex2bin(out->key, sizeof(out->key), value, vlen, NULL, &bin_len,
					   NULL) ||
			    bin_len != XPRT_KEY_SIZE)
				return -EINVAL;
			have_key = true;
		} else {
			return -EINVAL;
		}
	}
	return have_name && have_serial && have_flags && have_key ? 0 : -EINVAL;
}

int rdmafs_key_read(const char *path, struct xprt_key *out)
{
	char text[KEY_FILE_MAX + 1];
	size_t n = 0;
	int ret;

	/* whoever can read the key is that client: refused as the secret is */
	ret = rdmafs_read_private(path, text, KEY_FILE_MAX + 1, &n);
	if (ret)
		goto out_wipe;
	if (n > KEY_FILE_MAX || memchr(text, '\0', n)) {
		ret = -EINVAL;
		goto out_wipe;
	}
	text[n] = '\0';
	ret = parse_key_text(text, out);
	if (ret)
		sodium_memzero(out, sizeof(*out));
out_wipe:
	sodium_memzero(text, sizeof(text));
	return ret;
}

const char *rdmafs_key_strerror(const char *path, int err, char *buf, size_t size)
{
	struct stat st;

	if (err == -EPERM && stat(path, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)))
		snprintf(buf, size, "key file %s is accessible by %s (mode %04o): chmod 600 %s",
			 path, st.st_mode & S_IRWXO ? "others" : "its group",
			 (unsigned)(st.st_mode & 07777), path);
	else if (err == -EINVAL)
		snprintf(buf, size,
			 "%s is not an rdmafs client key file (it needs name, serial, flags and "
			 "key lines, as rdmafsctl client add writes them)",
			 path);
	else if (err == -EEXIST)
		snprintf(buf, size, "key file %s exists already: not overwritten", path);
	else
		snprintf(buf, size, "cannot read the key file %s: %s", path, strerror(-err));
	return buf;
}

int rdmafs_key_file_name(const char *path, char *name, size_t size)
{
	struct xprt_key key;
	int ret = rdmafs_key_read(path, &key);

	if (ret)
		return ret;
	snprintf(name, size, "%s", key.name);
	sodium_memzero(&key, sizeof(key));
	return 0;
}

const char *rdmafs_auth_strerror(int err, const char *key_name, char *buf, size_t size)
{
	if (err == -EKEYREVOKED)
		snprintf(buf, size, "key for client %s was revoked", key_name ? key_name : "?");
	else if (err == -EACCES && key_name)
		snprintf(buf, size,
			 "the key for client %s was refused: it was made for another cluster "
			 "secret, or altered",
			 key_name);
	else if (err == -EACCES)
		snprintf(buf, size, "the secret was refused");
	else if (err == -EPERM && key_name)
		snprintf(buf, size,
			 "refused to the key for client %s: administration needs the cluster "
			 "secret",
			 key_name);
	else
		snprintf(buf, size, "%s", xprt_strerror(err));
	return buf;
}
