/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whether a file's pages are in the page cache, for the daemon suite's test
 * (daemon-test receipt, which evicts a chunk file's block) and the killpoint
 * daemon (RDMAFS_TEST_NOWAIT_RESIDENT, which fails a read of a cold block):
 * both must see a block cold the same way, through mincore(2).
 */
#ifndef RDMAFS_TEST_DAEMON_PAGE_CACHE_H
#define RDMAFS_TEST_DAEMON_PAGE_CACHE_H

#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

/*
 * Whether a page of [@off, @off + @len) of @fd, within the file's size, is
 * out of the page cache: 1 if one is, 0 if none is (nothing to read past
 * the end counts as cached), or -errno when it cannot tell.
 */
static inline int page_cache_cold(int fd, uint64_t off, uint64_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char vec[64];
	uint64_t end, span;
	struct stat sb;
	void *map;
	int cold = 0;

	if (fstat(fd, &sb))
		return -errno;
	if (off >= (uint64_t)sb.st_size)
		return 0;
	end = off + len < (uint64_t)sb.st_size ? off + len : (uint64_t)sb.st_size;
	for (uint64_t at = off / page * page; at < end && !cold; at += span) {
		span = end - at < sizeof(vec) * page ? end - at : sizeof(vec) * page;
		map = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, (off_t)at);
		if (map == MAP_FAILED)
			return -errno;
		if (mincore(map, span, vec)) {
			cold = -errno;
			munmap(map, span);
			return cold;
		}
		munmap(map, span);
		for (uint64_t i = 0; i < (span + page - 1) / page; i++)
			cold |= !(vec[i] & 1);
	}
	return cold;
}

#endif
