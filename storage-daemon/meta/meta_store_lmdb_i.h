/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What lies behind the store's opaque types (meta_store_i.h): the LMDB
 * environment and its named databases. For store.c, and for the one test
 * that must reach under the store: the fuzz target copies every database
 * once and puts it back after each input. Nothing else includes it.
 */
#ifndef RDMAFS_META_STORE_LMDB_I_H
#define RDMAFS_META_STORE_LMDB_I_H

#include <lmdb.h>

#include "lmdb_guard.h"
#include "meta_store_i.h"

struct meta_store {
	MDB_env *env;
	struct lmdb_guard *guard; /* metadata_sync = batch: commits flush nothing */
	MDB_dbi db_counters;
	MDB_dbi db_inodes;
	MDB_dbi db_dirents;
	MDB_dbi db_dirpos;
	MDB_dbi db_symlinks;
	MDB_dbi db_xattrs;
	MDB_dbi db_handles;
	MDB_dbi db_daemons;
	MDB_dbi db_allocs;
	MDB_dbi db_clients;
};

#endif
