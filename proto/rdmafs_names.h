/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs.proto's enums as logs and rdmafsctl say them, written once for the
 * daemon and the clients (common/ cannot: it does not know protobuf).
 */
#ifndef RDMAFS_NAMES_H
#define RDMAFS_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* "up", "down", "draining", "removed"; "unknown" for any other value. */
const char *rdmafs_daemon_state_name(uint32_t state);

/*
 * "chunk_write" for METHOD_CHUNK_WRITE, into @out (@len bytes): the enum's
 * name in lower case without METHOD_; "method_N" for a number this build
 * does not know. Returns @out.
 */
const char *rdmafs_method_name(uint32_t method, char *out, size_t len);

#endif /* RDMAFS_NAMES_H */
