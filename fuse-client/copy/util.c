/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rdmafs-copy: paths, listings, CRC-32C arithmetic and messages. */
#include <errno.h>
#include <isa-l/crc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy_i.h"

/* CRC-32C (Castagnoli), reflected. */
#define CRC32C_POLY 0x82f63b78u

static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;
static bool msg_bar;
static unsigned msg_width;

char *cp_path_join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	char *p;

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	p = malloc(dl + nl + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, dl);
	if (!(dl == 1 && dir[0] == '/'))
		p[dl++] = '/';
	memcpy(p + dl, name, nl);
	p[dl + nl] = '\0';
	return p;
}

void cp_loc_free(struct cp_loc *loc)
{
	if (!loc)
		return;
	free(loc->path);
	loc->path = NULL;
}

void cp_dir_free(struct cp_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->count; i++)
		free(d->ents[i].name);
	free(d->ents);
	d->ents = NULL;
	d->count = 0;
}

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cp_dirent *)a)->name, ((const struct cp_dirent *)b)->name);
}

void cp_dir_sort(struct cp_dir *d)
{
	if (d->count > 1)
		qsort(d->ents, d->count, sizeof(d->ents[0]), dirent_cmp);
}

const struct cp_dirent *cp_dir_find(const struct cp_dir *d, const char *name)
{
	struct cp_dirent key = {.name = (char *)name};

	if (!d || !d->count)
		return NULL;
	return bsearch(&key, d->ents, d->count, sizeof(d->ents[0]), dirent_cmp);
}

bool cp_is_tmp_name(const char *name)
{
	size_t n = strlen(name), pl = strlen(CP_TMP_PREFIX), sl = strlen(CP_TMP_SUFFIX);

	return n > pl + sl && strncmp(name, CP_TMP_PREFIX, pl) == 0 &&
	       strcmp(name + n - sl, CP_TMP_SUFFIX) == 0;
}

uint32_t cp_crc_raw(const void *buf, size_t len)
{
	uint32_t crc = 0;
	const unsigned char *p = buf;

	/* ISA-L leaves out both inversions: init 0 gives the linear CRC */
	while (len) {
		int n = len > (1u << 30) ? (1 << 30) : (int)len;

		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return crc;
}

/* a * b modulo the CRC polynomial (reflected bit order), as zlib's multmodp() */
static uint32_t mult_mod_p(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return p;
}

static uint32_t x2n_table[32];
static pthread_once_t x2n_once = PTHREAD_ONCE_INIT;

static void x2n_init(void)
{
	uint32_t q = 1u << 30; /* x^1 */

	x2n_table[0] = q;
	for (int i = 1; i < 32; i++)
		x2n_table[i] = q = mult_mod_p(q, q);
}

/* x^(n * 2^k) modulo the polynomial */
static uint32_t x2n_mod_p(uint64_t n, unsigned k)
{
	uint32_t p = 1u << 31; /* x^0 */

	pthread_once(&x2n_once, x2n_init);
	while (n) {
		if (n & 1)
			p = mult_mod_p(x2n_table[k & 31], p);
		n >>= 1;
		k++;
	}
	return p;
}

uint32_t cp_crc_shift(uint32_t crc, uint64_t len)
{
	if (!crc || !len)
		return crc;
	return mult_mod_p(x2n_mod_p(len, 3), crc);
}

uint32_t cp_crc_finish(uint32_t raw, uint64_t len)
{
	/* the register starts at ~0: its contribution moves through the message */
	return cp_crc_shift(0xffffffffu, len) ^ raw ^ 0xffffffffu;
}

const char *cp_strerror(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return "timed out (a daemon or the metadata service does not answer)";
	case -ECONNREFUSED:
		return "connection refused (is the daemon running?)";
	case -EPROTO:
	case -EBADMSG:
		return "protocol error (bad reply)";
	case -EXDEV:
		return "source changed during the copy";
	case -EILSEQ:
		return "checksum mismatch: the destination does not match the source";
	default:
		return strerror(err < 0 ? -err : err);
	}
}

double cp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cp_msg_set_term(bool bar, unsigned width)
{
	pthread_mutex_lock(&msg_lock);
	msg_bar = bar;
	msg_width = width;
	pthread_mutex_unlock(&msg_lock);
}

void cp_msg_locked(void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&msg_lock);
	fn(arg);
	pthread_mutex_unlock(&msg_lock);
}

void cp_msg(const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "rdmafs-copy: ");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&msg_lock);
	if (msg_bar)
		fputs("\r\033[K", stderr);
	cp_term_wrap(stderr, msg_width, line);
	fflush(stderr);
	pthread_mutex_unlock(&msg_lock);
}
