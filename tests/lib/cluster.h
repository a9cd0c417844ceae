/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cluster a C test runs under. tests/lib/cluster.sh starts it (meson
 * registers the test as `cluster.sh OPTIONS -- TEST ARGS`) and tells the
 * test where it is; this reads that, and drives cluster.sh's ctl commands,
 * so C tests and shell tests share one harness, one readiness check and one
 * way to find ports.
 */
#ifndef RDMAFS_TEST_CLUSTER_H
#define RDMAFS_TEST_CLUSTER_H

#include <stddef.h>

#define TEST_CLUSTER_MAX_DAEMONS 16
#define TEST_CLUSTER_PATH_MAX	 512

struct test_cluster_daemon {
	char name[16]; /* "meta", "storage1", ...: what cluster.sh ctl takes */
	char uri[128]; /* as the cluster map lists it: KIND://ADDR:PORT */
	char data_dir[TEST_CLUSTER_PATH_MAX];
};

struct test_cluster {
	char dir[TEST_CLUSTER_PATH_MAX];	 /* its state, and room for the test */
	char ctl[TEST_CLUSTER_PATH_MAX];	 /* cluster.sh */
	char meta_uri[128];			 /* the metadata service */
	char secret_path[TEST_CLUSTER_PATH_MAX]; /* the cluster secret's file */
	/* daemons[0] is the metadata daemon (it stores chunks too) */
	struct test_cluster_daemon daemons[TEST_CLUSTER_MAX_DAEMONS];
	size_t daemon_count;
};

/*
 * Fills @c from the environment cluster.sh gives its command and the
 * daemons file in its state directory. Returns 0, -ENOENT when the program
 * does not run under cluster.sh, -EINVAL when what it finds is malformed.
 */
int test_cluster_open(struct test_cluster *c);

/*
 * Runs `cluster.sh ctl @verb @daemon [@arg]` (@arg may be NULL), e.g.
 * ("kill", "storage2", "KILL"): returns its exit status, or -errno when it
 * could not be run.
 */
int test_cluster_ctl(const struct test_cluster *c, const char *verb, const char *daemon,
		     const char *arg);

#endif
