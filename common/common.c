// SPDX-License-Identifier: GPL-2.0-or-later
/* Layout limits, crc32c, errno mapping and small helpers; see rdmafs_common.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <isa-l/crc.h>

#include "rdmafs_common.h"

int rdmafs_layout_check(uint64_t chunk_size, size_t n_daemons, uint64_t stripe_width)
{
	if (chunk_size < RDMAFS_CHUNK_SIZE_MIN || chunk_size > RDMAFS_CHUNK_SIZE_MAX)
		return -EPROTO;
	if (n_daemons == 0 || n_daemons > RDMAFS_MAX_STRIPE || stripe_width != n_daemons)
		return -EPROTO;
	return 0;
}

int rdmafs_domains_check(const uint32_t *domains, size_t n_domains, size_t n_daemons)
{
	uint32_t next = 0;

	if (n_domains == 0)
		return 0;
	if (n_domains != n_daemons || !domains)
		return -EPROTO;
	for (size_t i = 0; i < n_domains; i++) {
		if (domains[i] > next)
			return -EPROTO;
		if (domains[i] == next)
			next++;
	}
	return 0;
}

/* ISA-L's crc32_iscsi() leaves out the initial and final inversion of the standard CRC. */
uint32_t rdmafs_crc32c(const void *data, size_t len)
{
	return ~crc32_iscsi((unsigned char *)data, (int)len, 0xffffffffu);
}

uint32_t rdmafs_crc32c_extend(uint32_t crc, const void *data, size_t len)
{
	return ~crc32_iscsi((unsigned char *)data, (int)len, ~crc);
}

int rdmafs_status_from_peer(int status)
{
	return status > 0 || status < -4095 ? -EPROTO : status;
}

int rdmafs_status_for_caller(int status)
{
	return status == -ECONNRESET || status == -ENOTCONN || status == -EPIPE ||
			       status == -EHOSTUNREACH
		       ? -EIO
		       : status;
}

uint64_t rdmafs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rdmafs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const uint64_t rdmafs_latency_bounds_us[RDMAFS_LATENCY_BOUNDS] = {
	50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000,
};

void rdmafs_latency_record(struct rdmafs_latency *h, uint64_t ns)
{
	unsigned b = 0;

	while (b < RDMAFS_LATENCY_BOUNDS && ns > rdmafs_latency_bounds_us[b] * 1000u)
		b++;
	__atomic_add_fetch(&h->buckets[b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

void rdmafs_latency_read(const struct rdmafs_latency *h, struct rdmafs_latency *out)
{
	for (unsigned b = 0; b <= RDMAFS_LATENCY_BOUNDS; b++)
		out->buckets[b] = __atomic_load_n(&h->buckets[b], __ATOMIC_RELAXED);
	out->sum_ns = __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
}

uint64_t rdmafs_latency_count(const struct rdmafs_latency *h)
{
	uint64_t n = 0;

	for (unsigned b = 0; b <= RDMAFS_LATENCY_BOUNDS; b++)
		n += h->buckets[b];
	return n;
}

int rdmafs_read_private(const char *path, void *buf, size_t room, size_t *len)
{
	struct stat st;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* fstat, not stat: the mode checked is the mode of the file read */
	if (fstat(fd, &st))
		ret = -errno;
	else if (st.st_mode & (S_IRWXG | S_IRWXO))
		ret = -EPERM;
	else if ((n = read(fd, buf, room)) < 0)
		ret = -errno;
	else
		*len = (size_t)n;
	close(fd);
	return ret;
}

int rdmafs_read_secret(const char *path, uint8_t **out, size_t *len)
{
	/* one byte more than allowed, to tell a secret that is too long */
	const size_t room = RDMAFS_SECRET_MAX + 1;
	uint8_t *buf = malloc(room);
	size_t n = 0;
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = rdmafs_read_private(path, buf, room, &n);
	while (!ret && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (!ret && (n == 0 || n == room))
		ret = -EINVAL;
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	*len = n;
	return 0;
}

const char *rdmafs_secret_strerror(const char *path, int err, char *buf, size_t size)
{
	struct stat st;

	if (err == -EPERM && stat(path, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)))
		snprintf(buf, size, "secret file %s is accessible by %s (mode %04o): chmod 600 %s",
			 path, st.st_mode & S_IRWXO ? "others" : "its group",
			 (unsigned)(st.st_mode & 07777), path);
	else if (err == -EINVAL)
		snprintf(buf, size, "the secret file %s must hold 1 to %d bytes", path,
			 RDMAFS_SECRET_MAX);
	else
		snprintf(buf, size, "cannot read the secret file %s: %s", path, strerror(-err));
	return buf;
}
