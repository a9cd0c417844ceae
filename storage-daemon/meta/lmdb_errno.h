/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one mapping of LMDB return codes to negative errnos in rdmafs-daemon:
 * the metadata service (meta/store.c) and the chunk index (store.c) both use
 * it, so a full store is -ENOSPC whichever of them fills up. It sits in meta/
 * because the daemon already links the metadata library and reaches its
 * headers; tests/unit/test_lmdb_errno.c holds every promise below.
 *
 *   0                              0
 *   MDB_NOTFOUND                   -ENOENT
 *   MDB_KEYEXIST                   -EEXIST
 *   MDB_MAP_FULL, MDB_TXN_FULL     -ENOSPC  the store or one transaction is full:
 *                                           what an application should see
 *   MDB_READERS_FULL               -EAGAIN  every reader slot is taken; one frees
 *                                           when a transaction ends
 *   MDB_BAD_VALSIZE                -EINVAL  a key or value LMDB cannot store
 *   MDB_VERSION_MISMATCH           -EPROTONOSUPPORT  written by another LMDB
 *                                           version: a format we cannot read
 *   a positive errno e             -e       LMDB passes system errors through
 *   anything else                  -EIO     MDB_CORRUPTED, MDB_PAGE_NOTFOUND,
 *                                           MDB_INVALID (not an LMDB file),
 *                                           MDB_PANIC, MDB_PAGE_FULL (an LMDB
 *                                           internal error, not a full store), ...
 */
#ifndef RDMAFS_LMDB_ERRNO_H
#define RDMAFS_LMDB_ERRNO_H

#include <errno.h>

#include <lmdb.h>

/* Returns 0 for MDB_SUCCESS, else the negative errno of LMDB return code @rc. */
static inline int lmdb_errno(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	case MDB_VERSION_MISMATCH:
		return -EPROTONOSUPPORT;
	default:
		/* 4095 is the largest errno the kernel returns (MAX_ERRNO) */
		if (rc > 0 && rc <= 4095)
			return -rc;
		return -EIO;
	}
}

#endif
