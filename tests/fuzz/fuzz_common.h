/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the request-level fuzz targets share: the input format and a scratch
 * directory on tmpfs for their stores.
 *
 * An input is a sequence of records, each [u8 selector][u16 length, little
 * endian][length bytes of body]; a record cut short by the end of the input
 * keeps the bytes that are there. The selector's low bits pick a method from
 * the target's table (so every method is one mutation away), its high bits
 * are flags of the target. The body goes to the method's real decoder as it
 * is: the fuzzer mutates protobuf bytes.
 */
#ifndef RDMAFS_FUZZ_COMMON_H
#define RDMAFS_FUZZ_COMMON_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fuzz_record {
	uint8_t selector;
	const uint8_t *body;
	size_t len;
};

/* Takes the next record off [*@data, *@data + *@size); false at the end. */
static inline int fuzz_next_record(const uint8_t **data, size_t *size, struct fuzz_record *r)
{
	size_t len;

	if (*size < 3)
		return 0;
	r->selector = (*data)[0];
	len = (size_t)(*data)[1] | ((size_t)(*data)[2] << 8);
	*data += 3;
	*size -= 3;
	if (len > *size)
		len = *size;
	r->body = *data;
	r->len = len;
	*data += len;
	*size -= len;
	return 1;
}

static char fuzz_scratch_path[256];

static inline int fuzz_remove_one(const char *path, const struct stat *st, int flag,
				  struct FTW *ftw)
{
	remove(path);
	return 0;
}

static inline void fuzz_remove_scratch(void)
{
	nftw(fuzz_scratch_path, fuzz_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * A fresh directory for a target's store, on tmpfs where there is one: the
 * stores sync on every commit, which tmpfs makes free. Aborts on failure (a
 * fuzz target has no caller to tell). It is removed when the process exits
 * normally; a crash leaves it for the post-mortem.
 */
static inline const char *fuzz_scratch_dir(const char *name)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(fuzz_scratch_path, sizeof(fuzz_scratch_path), "%s/rdmafs-fuzz-%s.XXXXXX", base,
		 name);
	if (!mkdtemp(fuzz_scratch_path))
		abort();
	atexit(fuzz_remove_scratch);
	return fuzz_scratch_path;
}

#endif /* RDMAFS_FUZZ_COMMON_H */
