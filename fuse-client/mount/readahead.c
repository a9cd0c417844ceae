// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs-fuse: the kernel's read-ahead for our mount (mount_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmafs_common.h"
#include "mount_i.h"

/*
 * The kernel reads ahead 128 KiB on a FUSE mount and INIT cannot raise it;
 * the bdi's sysfs knob can (root only). Its name is our mount's device
 * number, found in mountinfo without a FUSE request (we are not serving yet).
 */
void readahead_find_bdi(struct fs *fs, const char *mountpoint)
{
	char line[4096], *real = realpath(mountpoint, NULL);
	FILE *f;

	if (!real)
		return;
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		char mnt[PATH_MAX], *dash;

		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE ..." (spaces in names are \040)
		 */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) != 3)
			continue;
		dash = strstr(line, " - ");
		if (!dash || strncmp(dash + 3, "fuse", 4) != 0 || strcmp(mnt, real) != 0)
			continue;
		snprintf(fs->bdi, sizeof(fs->bdi), "%u:%u", maj, min);
	}
	if (f)
		fclose(f);
	free(real);
}

/* Runs once, at the first request: the kernel has applied INIT by then. */
void readahead_tune(struct fs *fs)
{
	char path[96], value[16];
	int fd, len;

	if (__atomic_exchange_n(&fs->readahead_done, 1, __ATOMIC_ACQ_REL))
		return;
	if (!fs->readahead_kb || !fs->bdi[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", fs->bdi);
	len = snprintf(value, sizeof(value), "%u", fs->readahead_kb);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, value, (size_t)len) != len)
		rdmafs_log(RDMAFS_LOG_WARN, "read-ahead left as it was (%s: %s)", path,
			   strerror(errno));
	if (fd >= 0)
		close(fd);
}
