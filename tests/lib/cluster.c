/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"

extern char **environ;

/* Copies the environment variable @name into @out; -ENOENT if unset or empty, -EINVAL if too long.
 */
static int env_copy(const char *name, char *out, size_t len)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return -ENOENT;
	if (strlen(v) >= len)
		return -EINVAL;
	snprintf(out, len, "%s", v);
	return 0;
}

int test_cluster_open(struct test_cluster *c)
{
	char path[TEST_CLUSTER_PATH_MAX + 16], line[1024];
	FILE *f;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = env_copy("RDMAFS_CLUSTER_DIR", c->dir, sizeof(c->dir));
	if (!ret)
		ret = env_copy("RDMAFS_CLUSTER_CTL", c->ctl, sizeof(c->ctl));
	if (!ret)
		ret = env_copy("RDMAFS_CLUSTER_META", c->meta_uri, sizeof(c->meta_uri));
	if (!ret)
		ret = env_copy("RDMAFS_CLUSTER_SECRET", c->secret_path, sizeof(c->secret_path));
	if (ret)
		return ret;
	/* one line per daemon, the metadata daemon first: NAME URI DATA_DIR */
	snprintf(path, sizeof(path), "%s/daemons", c->dir);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct test_cluster_daemon *d = &c->daemons[c->daemon_count];
		char name[sizeof(line)], uri[sizeof(line)], data_dir[sizeof(line)];

		if (sscanf(line, "%1023s %1023s %1023s", name, uri, data_dir) != 3 ||
		    c->daemon_count == TEST_CLUSTER_MAX_DAEMONS ||
		    strlen(name) >= sizeof(d->name) || strlen(uri) >= sizeof(d->uri) ||
		    strlen(data_dir) >= sizeof(d->data_dir)) {
			ret = -EINVAL;
			break;
		}
		snprintf(d->name, sizeof(d->name), "%s", name);
		snprintf(d->uri, sizeof(d->uri), "%s", uri);
		snprintf(d->data_dir, sizeof(d->data_dir), "%s", data_dir);
		c->daemon_count++;
	}
	fclose(f);
	if (!ret && (c->daemon_count == 0 || strcmp(c->daemons[0].name, "meta") != 0))
		ret = -EINVAL;
	return ret;
}

int test_cluster_ctl(const struct test_cluster *c, const char *verb, const char *daemon,
		     const char *arg)
{
	const char *argv[] = {c->ctl, "ctl", verb, daemon, arg, NULL};
	pid_t pid;
	int status, ret;

	fflush(NULL);
	ret = posix_spawn(&pid, c->ctl, NULL, NULL, (char **)argv, environ);
	if (ret)
		return -ret;
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
