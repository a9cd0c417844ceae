// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs-fuse built without libmicrohttpd: no /metrics (mount_i.h). */
#include <errno.h>
#include <stdio.h>

#include "mount_i.h"

int mount_metrics_check(const char *listen, char *why, size_t why_len)
{
	snprintf(why, why_len,
		 "%s: this rdmafs-fuse was built without libmicrohttpd and serves no metrics",
		 listen);
	return -ENOTSUP;
}

int mount_metrics_start(struct fs *fs, const struct mount_metrics_params *p,
			struct mount_metrics **out)
{
	return -ENOTSUP;
}

void mount_metrics_stop(struct mount_metrics *m)
{
}
