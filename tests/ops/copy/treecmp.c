/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * treecmp: compares two local trees the way rdmafs-copy promises to keep
 * them: the same names, types, bytes, mode bits, owners (--owner), mtimes,
 * xattrs (user.*, and trusted.* with --owner), symlink targets, device
 * numbers, hard-link groups, and holes (a source file with most of its
 * bytes in holes must have a sparse copy).
 *
 *   treecmp [--owner] A B
 *
 * Prints every difference; exits 0 when there is none, 1 when there is one,
 * 2 when it could not compare (bad usage, or a tree it could not read: an
 * error of the check, not a verdict on the copy).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_LINKS 65536

static bool check_owner;
static unsigned differences;
static unsigned troubles; /* what could not be read: no verdict on it */
static unsigned long entries;

/* hard links: inode of A -> inode of B */
static struct {
	ino_t a, b;
} links[MAX_LINKS];
static size_t nlinks;

/* Prints one finding about @path and counts it in *@counter. */
__attribute__((format(printf, 4, 0))) static void
report(unsigned *counter, const char *tag, const char *path, const char *fmt, va_list ap)
{
	fprintf(stderr, "treecmp: %s%s: ", tag, path);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	(*counter)++;
}

/* A difference between the trees. */
__attribute__((format(printf, 2, 3))) static void diff(const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(&differences, "", path, fmt, ap);
	va_end(ap);
}

/* Something that could not be read: no verdict on it. */
__attribute__((format(printf, 2, 3))) static void trouble(const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(&troubles, "ERROR: ", path, fmt, ap);
	va_end(ap);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of directory @path (without . and ..), or NULL. */
static char **list(const char *path, size_t *count)
{
	DIR *d = opendir(path);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	*count = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[n] = strdup(de->d_name);
		if (!names[n++])
			abort();
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	*count = n;
	return names ? names : calloc(1, sizeof(char *));
}

static void free_list(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 2);

	if (!p)
		abort();
	memcpy(p, a, la);
	p[la] = '/';
	memcpy(p + la + 1, b, lb + 1);
	return p;
}

static bool xattr_compared(const char *name)
{
	return !strncmp(name, "user.", 5) || (check_owner && !strncmp(name, "trusted.", 8));
}

/* Every compared xattr of @a exists with the same value on @b, and the other way round. */
static void compare_xattrs(const char *a, const char *b, const char *shown)
{
	const char *paths[2] = {a, b};

	for (int side = 0; side < 2; side++) {
		char names[65536];
		ssize_t len = llistxattr(paths[side], names, sizeof(names));

		if (len < 0) {
			if (errno != ENOTSUP)
				trouble(shown, "listxattr: %s", strerror(errno));
			continue;
		}
		for (ssize_t pos = 0; pos < len; pos += (ssize_t)strlen(names + pos) + 1) {
			const char *name = names + pos;
			char v0[65536], v1[65536];
			ssize_t l0, l1;

			if (!xattr_compared(name))
				continue;
			l0 = lgetxattr(paths[side], name, v0, sizeof(v0));
			l1 = lgetxattr(paths[!side], name, v1, sizeof(v1));
			if (l1 < 0)
				diff(shown, "xattr %s missing on %s", name, side ? "A" : "B");
			else if (l0 != l1 || memcmp(v0, v1, (size_t)l0))
				diff(shown, "xattr %s differs", name);
		}
	}
}

static void compare_data(const char *a, const char *b, const struct stat *sa, const struct stat *sb,
			 const char *shown)
{
	static char ba[1 << 20], bb[1 << 20];
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
	off_t off = 0;

	if (fa < 0 || fb < 0) {
		trouble(shown, "cannot open: %s", strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t na = pread(fa, ba, sizeof(ba), off), nb = pread(fb, bb, sizeof(bb), off);

		if (na < 0 || nb < 0) {
			trouble(shown, "read: %s", strerror(errno));
			break;
		}
		if (na != nb || memcmp(ba, bb, (size_t)na)) {
			diff(shown, "contents differ near offset %lld", (long long)off);
			break;
		}
		if (na == 0)
			break;
		off += na;
	}
	/* a mostly-hole source must have a copy that is mostly holes too */
	if (sa->st_size >= 1 << 20 && (uint64_t)sa->st_blocks * 512 < (uint64_t)sa->st_size / 4 &&
	    (uint64_t)sb->st_blocks * 512 >= (uint64_t)sb->st_size / 2)
		diff(shown, "not sparse: %lld bytes allocated for %lld (source %lld)",
		     (long long)sb->st_blocks * 512, (long long)sb->st_size,
		     (long long)sa->st_blocks * 512);
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
}

static void compare_links(const struct stat *sa, const struct stat *sb, const char *shown)
{
	if (sa->st_nlink != sb->st_nlink)
		diff(shown, "%lu links, copy has %lu", (unsigned long)sa->st_nlink,
		     (unsigned long)sb->st_nlink);
	if (sa->st_nlink < 2)
		return;
	for (size_t i = 0; i < nlinks; i++) {
		if (links[i].a == sa->st_ino) {
			if (links[i].b != sb->st_ino)
				diff(shown, "hard link group split in the copy");
			return;
		}
		if (links[i].b == sb->st_ino) {
			diff(shown, "hard link made in the copy between different files");
			return;
		}
	}
	if (nlinks < MAX_LINKS) {
		links[nlinks].a = sa->st_ino;
		links[nlinks].b = sb->st_ino;
		nlinks++;
	}
}

static void compare(const char *a, const char *b, const char *shown)
{
	struct stat sa, sb;

	entries++;
	if (lstat(a, &sa)) {
		trouble(shown, "A: %s", strerror(errno));
		return;
	}
	if (lstat(b, &sb)) {
		diff(shown, "missing in the copy (%s)", strerror(errno));
		return;
	}
	if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
		diff(shown, "type %o, copy has %o", sa.st_mode & S_IFMT, sb.st_mode & S_IFMT);
		return;
	}
	if (!S_ISLNK(sa.st_mode) && (sa.st_mode & 07777) != (sb.st_mode & 07777))
		diff(shown, "mode %04o, copy has %04o", sa.st_mode & 07777, sb.st_mode & 07777);
	if (check_owner && (sa.st_uid != sb.st_uid || sa.st_gid != sb.st_gid))
		diff(shown, "owner %u:%u, copy has %u:%u", sa.st_uid, sa.st_gid, sb.st_uid,
		     sb.st_gid);
	if (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec || sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec)
		diff(shown, "mtime %lld.%09ld, copy has %lld.%09ld", (long long)sa.st_mtim.tv_sec,
		     sa.st_mtim.tv_nsec, (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
	if (!S_ISLNK(sa.st_mode))
		compare_xattrs(a, b, shown);
	if (S_ISREG(sa.st_mode)) {
		if (sa.st_size != sb.st_size)
			diff(shown, "size %lld, copy has %lld", (long long)sa.st_size,
			     (long long)sb.st_size);
		else
			compare_data(a, b, &sa, &sb, shown);
		compare_links(&sa, &sb, shown);
	} else if (S_ISLNK(sa.st_mode)) {
		char ta[4096], tb[4096];
		ssize_t la = readlink(a, ta, sizeof(ta)), lb = readlink(b, tb, sizeof(tb));

		if (la < 0 || lb < 0 || la != lb || memcmp(ta, tb, (size_t)la))
			diff(shown, "symlink target differs");
	} else if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) {
		if (sa.st_rdev != sb.st_rdev)
			diff(shown, "device number differs");
	} else if (S_ISDIR(sa.st_mode)) {
		size_t na, nb, i = 0, j = 0;
		char **la = list(a, &na), **lb = list(b, &nb);

		if (!la || !lb) {
			trouble(shown, "cannot list: %s", strerror(errno));
			na = la ? na : 0;
			nb = lb ? nb : 0;
		}
		while (la && lb && (i < na || j < nb)) {
			int c = i == na ? 1 : j == nb ? -1 : strcmp(la[i], lb[j]);

			if (c < 0) {
				char *s = join(shown, la[i]);

				diff(s, "missing in the copy");
				free(s);
				i++;
			} else if (c > 0) {
				char *s = join(shown, lb[j]);

				diff(s, "only in the copy");
				free(s);
				j++;
			} else {
				char *pa = join(a, la[i]), *pb = join(b, lb[j]),
				     *s = join(shown, la[i]);

				compare(pa, pb, s);
				free(pa);
				free(pb);
				free(s);
				i++;
				j++;
			}
		}
		if (la)
			free_list(la, na);
		if (lb)
			free_list(lb, nb);
	}
}

int main(int argc, char **argv)
{
	int i = 1;

	if (argc > 1 && !strcmp(argv[1], "--owner")) {
		check_owner = true;
		i++;
	}
	if (argc - i != 2) {
		fprintf(stderr, "usage: treecmp [--owner] A B\n");
		return 2;
	}
	compare(argv[i], argv[i + 1], ".");
	if (differences) {
		fprintf(stderr, "treecmp: %u differences in %lu entries\n", differences, entries);
		return 1;
	}
	if (troubles) {
		fprintf(stderr, "treecmp: could not compare %u things: no verdict\n", troubles);
		return 2;
	}
	printf("treecmp: %lu entries identical\n", entries);
	return 0;
}
