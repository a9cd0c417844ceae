/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The client programs' settings: one file, client.conf, that rdmafs-fuse,
 * rdmafs-copy and rdmafsctl read their defaults from, and one default secret
 * path for all three.
 *
 *   [client]
 *   meta = rdma://10.0.0.1:7471       ; the metadata service
 *   secret_file = /etc/rdmafs/secret  ; the cluster secret
 *   key_file = /etc/rdmafs/client.key ; or a client key (rdmafsctl client add),
 *                                     ; which wins over secret_file
 *   transport = auto                  ; auto, rdma or tcp
 *
 *   [rdmafsctl]                       ; a program's own keys
 *   timeout = 10
 *
 * The file is SYSCONFDIR/rdmafs/client.conf (rfs_client_conf_path()), or the
 * one RDMAFS_CLIENT_CONF names, or the one a program's --config (rdmafs-fuse:
 * -o config=FILE) names. Every program takes, in increasing precedence: the
 * built-in defaults, this file, the environment (RDMAFS_META,
 * RDMAFS_SECRET_FILE, RDMAFS_KEY_FILE), its command line.
 */
#ifndef RDMAFS_CONF_H
#define RDMAFS_CONF_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What client.conf's [client] section set; NULL for what it did not. */
struct rfs_client_conf {
	char *meta_uri;
	char *secret_file;
	char *key_file;	 /* a client key: used instead of secret_file where given */
	char *transport; /* "auto", "rdma" or "tcp" (checked) */
};

/*
 * A key of a program's own section ([rdmafsctl], [rdmafs-fuse],
 * [rdmafs-copy]). Returns 0 when taken, -ENOENT for a key it does not know,
 * -EINVAL for a bad value with what is allowed in @why.
 */
typedef int (*rfs_conf_key_fn)(void *arg, const char *key, const char *value, char *why,
			       size_t why_len);

/* The file client programs read when no --config names one: RDMAFS_CLIENT_CONF, or the default. */
const char *rfs_client_conf_path(void);

/* The secret file used when none is given anywhere: SYSCONFDIR/rdmafs/secret. */
const char *rfs_default_secret_file(void);

/*
 * Reads @path into @out (zeroed first). @must_exist: a missing file is an
 * error (a file the user named); else a missing file sets nothing. Keys of
 * section @own (the program's, or NULL) go to @key_fn; the other programs'
 * sections are skipped; any other section, an unknown key of [client], a bad
 * value or a syntax error is an error. Returns 0, or -ENOENT, -EACCES, ... or
 * -EINVAL with "FILE:LINE: what is wrong" in @why.
 */
int rfs_client_conf_load(const char *path, bool must_exist, const char *own, rfs_conf_key_fn key_fn,
			 void *arg, struct rfs_client_conf *out, char *why, size_t why_len);

void rfs_client_conf_free(struct rfs_client_conf *c);

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_CONF_H */
