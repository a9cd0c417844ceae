/* SPDX-License-Identifier: GPL-2.0-or-later */
/* client.conf, the client programs' settings (the end of rdmafs_fs.h), read with inih. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "rdmafs_fs.h"

#ifndef RFS_SYSCONFDIR
#define RFS_SYSCONFDIR "/etc"
#endif

/* The sections of the programs that share the file: each reads its own. */
static const char *const program_sections[] = {"rdmafsctl", "rdmafs-fuse", "rdmafs-copy"};

struct conf_state {
	struct rfs_client_conf *out;
	const char *own;
	rfs_conf_key_fn key_fn;
	void *arg;
	FILE *f;
	int line;	/* of the line inih handles */
	int what_line;	/* the line of @what */
	char what[256]; /* the first error the handler found */
};

/* inih's reader: fgets() that counts lines (Debian's inih gives handlers no line). */
static char *conf_read(char *str, int num, void *stream)
{
	struct conf_state *st = stream;

	if (!fgets(str, num, st->f))
		return NULL;
	st->line++;
	return str;
}

const char *rfs_client_conf_path(void)
{
	const char *env = getenv("RDMAFS_CLIENT_CONF");

	return env && *env ? env : RFS_SYSCONFDIR "/rdmafs/client.conf";
}

const char *rfs_default_secret_file(void)
{
	return RFS_SYSCONFDIR "/rdmafs/secret";
}

static int set_string(char **slot, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

static int client_key(struct rfs_client_conf *c, const char *key, const char *value, char *why,
		      size_t why_len)
{
	if (!*value) {
		snprintf(why, why_len, "%s must not be empty", key);
		return -EINVAL;
	}
	if (strcmp(key, "meta") == 0)
		return set_string(&c->meta_uri, value);
	if (strcmp(key, "secret_file") == 0)
		return set_string(&c->secret_file, value);
	if (strcmp(key, "key_file") == 0)
		return set_string(&c->key_file, value);
	if (strcmp(key, "transport") == 0) {
		if (strcmp(value, "auto") && strcmp(value, "rdma") && strcmp(value, "tcp")) {
			snprintf(why, why_len, "transport = %s: must be auto, rdma or tcp", value);
			return -EINVAL;
		}
		return set_string(&c->transport, value);
	}
	return -ENOENT;
}

/* inih's handler: 1 to go on, 0 for an error (inih reports the first one's line). */
static int conf_line(void *user, const char *section, const char *key, const char *value)
{
	struct conf_state *st = user;
	char why[200] = "";
	bool program = false;
	int ret;

	for (size_t i = 0; i < sizeof(program_sections) / sizeof(program_sections[0]); i++)
		program |= strcmp(section, program_sections[i]) == 0;
	if (strcmp(section, "client") == 0)
		ret = client_key(st->out, key, value, why, sizeof(why));
	else if (program && st->own && strcmp(section, st->own) == 0)
		ret = st->key_fn ? st->key_fn(st->arg, key, value, why, sizeof(why)) : -ENOENT;
	else if (program)
		return 1; /* another program's */
	else
		ret = -ESRCH;
	if (!ret)
		return 1;
	if (st->what[0])
		return 0;
	st->what_line = st->line;
	if (ret == -ESRCH)
		snprintf(st->what, sizeof(st->what),
			 "unknown section [%s] (known: [client], [rdmafsctl], [rdmafs-fuse], "
			 "[rdmafs-copy])",
			 section);
	else if (ret == -ENOENT)
		snprintf(st->what, sizeof(st->what), "unknown key '%s' in [%s]", key, section);
	else if (ret == -ENOMEM)
		snprintf(st->what, sizeof(st->what), "out of memory");
	else
		snprintf(st->what, sizeof(st->what), "%s", why);
	return 0;
}

int rfs_client_conf_load(const char *path, bool must_exist, const char *own, rfs_conf_key_fn key_fn,
			 void *arg, struct rfs_client_conf *out, char *why, size_t why_len)
{
	struct conf_state st = {.out = out, .own = own, .key_fn = key_fn, .arg = arg};
	FILE *f;
	int line, err;

	memset(out, 0, sizeof(*out));
	f = fopen(path, "re");
	if (!f) {
		err = errno;
		if (err == ENOENT && !must_exist)
			return 0;
		snprintf(why, why_len, "cannot read %s: %s", path, strerror(err));
		return -err;
	}
	st.f = f;
	line = ini_parse_stream(conf_read, &st, conf_line, &st);
	fclose(f);
	if (line == 0)
		return 0;
	if (line > 0)
		snprintf(why, why_len, "%s:%d: %s", path, line,
			 line == st.what_line ? st.what
					      : "syntax error: want key = value, [section] or a "
						"comment");
	else
		snprintf(why, why_len, "cannot read %s: %s", path,
			 line == -2 ? "out of memory" : "error");
	rfs_client_conf_free(out);
	return -EINVAL;
}

void rfs_client_conf_free(struct rfs_client_conf *c)
{
	free(c->meta_uri);
	free(c->secret_file);
	free(c->key_file);
	free(c->transport);
	memset(c, 0, sizeof(*c));
}
