/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour of a mounted file system: every operation rdmafs-fuse
 * serves, with the errno of each error case (as Linux gives them on a local
 * file system). Usage: fs-posix DIRECTORY
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "fscheck.h"

#define MIB (1024 * 1024)

static int renameat2_sys(const char *from, const char *to, unsigned flags)
{
	return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

/* Creates @path holding the string @text; returns 0 or -1. */
static int put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t len = strlen(text);
	int ret = 0;

	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len)
		ret = -1;
	if (close(fd))
		ret = -1;
	return ret;
}

/* Reads @path into @buf (NUL-terminated); returns the length or -1. */
static ssize_t get(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = fs_pread_all(fd, buf, size - 1, 0);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

#define REQUIRE_CONTENT(path, text)                                                              \
	do {                                                                                     \
		char got_[256];                                                                  \
		if (get(path, got_, sizeof(got_)) < 0)                                           \
			REQUIRE(false, "read %s: %s", path, check_errno_name(errno));            \
		if (strcmp(got_, text) != 0)                                                     \
			REQUIRE(false, "content of %s: expected \"%s\", got \"%s\"", path, text, \
				got_);                                                           \
	} while (0)

/* Number of times @name appears in the listing of @dir, or -1. */
static int count_in_dir(const char *dir, const char *name, unsigned char *type)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int count = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, name) == 0) {
			count++;
			if (type)
				*type = e->d_type;
		}
	closedir(d);
	return count;
}

static void test_create_open(void)
{
	char name[300];
	struct stat st;
	int fd;

	REQUIRE_FD(fd, open("f", O_CREAT | O_EXCL | O_RDWR, 0640));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(stat("f", &st));
	REQUIRE(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640 && st.st_size == 0,
		"new file: mode %o size %lld, expected regular 0640 size 0", st.st_mode,
		(long long)st.st_size);
	REQUIRE(st.st_nlink == 1, "new file: nlink %lu, expected 1", (unsigned long)st.st_nlink);
	REQUIRE(st.st_uid == geteuid() && st.st_gid == getegid(),
		"new file owned by %u:%u, expected %u:%u", st.st_uid, st.st_gid, geteuid(),
		getegid());
	REQUIRE_ERR(open("f", O_CREAT | O_EXCL | O_RDWR, 0644), EEXIST);
	REQUIRE_ERR(open("missing", O_RDONLY), ENOENT);
	REQUIRE_ERR(open("nodir/x", O_CREAT | O_RDWR, 0644), ENOENT);
	REQUIRE_ERR(open("f/x", O_CREAT | O_RDWR, 0644), ENOTDIR);
	REQUIRE_ERR(open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);
	REQUIRE_OK(mkdir("d", 0755));
	REQUIRE_ERR(open("d", O_WRONLY), EISDIR);
	REQUIRE_ERR(open("d", O_CREAT | O_EXCL | O_RDWR, 0644), EEXIST);

	/* O_TRUNC, O_APPEND */
	REQUIRE_OK(put("f", "hello world"));
	REQUIRE_FD(fd, open("f", O_WRONLY | O_TRUNC));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(stat("f", &st));
	REQUIRE(st.st_size == 0, "after O_TRUNC: size %lld, expected 0", (long long)st.st_size);
	REQUIRE_OK(put("f", "abc"));
	REQUIRE_FD(fd, open("f", O_WRONLY | O_APPEND));
	REQUIRE_OK(lseek(fd, 0, SEEK_SET));
	REQUIRE(write(fd, "def", 3) == 3, "append write: %s", check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_CONTENT("f", "abcdef");
	REQUIRE_FD(fd, open("f", O_RDONLY));
	REQUIRE_ERR(write(fd, "x", 1), EBADF);
	REQUIRE_OK(close(fd));

	/* umask applies to the create mode */
	umask(027);
	REQUIRE_FD(fd, open("masked", O_CREAT | O_EXCL | O_WRONLY, 0666));
	umask(022);
	REQUIRE_OK(close(fd));
	REQUIRE_OK(stat("masked", &st));
	REQUIRE((st.st_mode & 0777) == 0640, "umask 027, mode 0666: got %o, expected 640",
		st.st_mode & 0777);

	/* mknod: a fifo and a regular file */
	REQUIRE_OK(mkfifo("fifo", 0600));
	REQUIRE_OK(lstat("fifo", &st));
	REQUIRE(S_ISFIFO(st.st_mode), "mkfifo: mode %o is not a fifo", st.st_mode);
	REQUIRE_OK(mknod("node", S_IFREG | 0600, 0));
	REQUIRE_OK(lstat("node", &st));
	REQUIRE(S_ISREG(st.st_mode), "mknod S_IFREG: mode %o", st.st_mode);
	REQUIRE_ERR(mknod("node", S_IFREG | 0600, 0), EEXIST);

	/* names: 255 bytes is the limit */
	memset(name, 'n', 255);
	name[255] = '\0';
	REQUIRE_OK(put(name, "long"));
	REQUIRE_CONTENT(name, "long");
	REQUIRE(count_in_dir(".", name, NULL) == 1, "255-byte name not listed once");
	name[255] = 'n';
	name[256] = '\0';
	REQUIRE_ERR(open(name, O_CREAT | O_RDWR, 0644), ENAMETOOLONG);
	REQUIRE_ERR(mkdir(name, 0755), ENAMETOOLONG);
	/* odd but valid names */
	REQUIRE_OK(put("sp ace\nnew-line-\xc3\xbc\xe6\x97\xa5", "odd"));
	REQUIRE_CONTENT("sp ace\nnew-line-\xc3\xbc\xe6\x97\xa5", "odd");
	REQUIRE_OK(put("-dash", "dash"));
	REQUIRE_CONTENT("-dash", "dash");
}

static void test_mkdir_rmdir(void)
{
	struct stat st;
	unsigned char type = 0;

	REQUIRE_OK(mkdir("d", 0750));
	REQUIRE_OK(stat("d", &st));
	REQUIRE(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0750, "mkdir 0750: mode %o",
		st.st_mode);
	REQUIRE_ERR(mkdir("d", 0755), EEXIST);
	REQUIRE_ERR(mkdir(".", 0755), EEXIST);
	REQUIRE_ERR(mkdir("d/..", 0755), EEXIST);
	REQUIRE_ERR(mkdir("missing/d", 0755), ENOENT);
	REQUIRE_OK(put("file", "x"));
	REQUIRE_ERR(mkdir("file", 0755), EEXIST);
	REQUIRE_ERR(mkdir("file/d", 0755), ENOTDIR);
	REQUIRE_OK(mkdir("d/sub", 0755));
	REQUIRE_OK(put("d/sub/f", "x"));
	REQUIRE_ERR(rmdir("d"), ENOTEMPTY);
	REQUIRE_ERR(rmdir("d/sub"), ENOTEMPTY);
	REQUIRE_ERR(rmdir("file"), ENOTDIR);
	REQUIRE_ERR(rmdir("missing"), ENOENT);
	REQUIRE_ERR(unlink("d"), EISDIR);
	REQUIRE_ERR(unlink("missing"), ENOENT);
	REQUIRE_ERR(rmdir("d/."), EINVAL);
	REQUIRE(count_in_dir("d", "sub", &type) == 1, "d/sub not listed once");
	REQUIRE(type == DT_DIR || type == DT_UNKNOWN, "d_type of a directory: %u", type);
	REQUIRE(count_in_dir("d", ".", NULL) == 1 && count_in_dir("d", "..", NULL) == 1,
		"listing of d lacks . or ..");
	REQUIRE_OK(unlink("d/sub/f"));
	REQUIRE_ERR(stat("d/sub/f", &st), ENOENT);
	REQUIRE(count_in_dir("d/sub", "f", NULL) == 0, "unlinked d/sub/f still listed");
	REQUIRE_OK(rmdir("d/sub"));
	REQUIRE_ERR(stat("d/sub", &st), ENOENT);
	REQUIRE_OK(rmdir("d"));
	REQUIRE_ERR(rmdir("d"), ENOENT);
	REQUIRE(count_in_dir(".", "d", NULL) == 0, "removed d still listed");
}

static int ts_cmp(struct timespec a, struct timespec b)
{
	return a.tv_sec != b.tv_sec	? (a.tv_sec < b.tv_sec ? -1 : 1)
	       : a.tv_nsec != b.tv_nsec ? (a.tv_nsec < b.tv_nsec ? -1 : 1)
					: 0;
}

/* @path's attributes after a change of its entries: links @nlink, mode @mode, times not back. */
static void dir_check(const char *path, struct stat *last, nlink_t nlink, mode_t mode,
		      const char *after)
{
	struct stat st;

	REQUIRE_OK(stat(path, &st));
	REQUIRE(st.st_nlink == nlink && (st.st_mode & 07777) == mode,
		"%s after %s: %lu links, mode %o; want %lu, %o", path, after,
		(unsigned long)st.st_nlink, st.st_mode & 07777, (unsigned long)nlink, mode);
	REQUIRE(ts_cmp(st.st_mtim, last->st_mtim) >= 0 && ts_cmp(st.st_ctim, last->st_ctim) >= 0,
		"%s after %s: its mtime or ctime went back", path, after);
	*last = st;
}

/*
 * A directory's attributes right after this mount's own changes of its
 * entries, which the client answers from what the service's reply carried
 * (fuse-client/mount/ops.c dir_after()): the link count follows mkdir and
 * rmdir, times never go back, and a chmod shows at once, also in the copy a
 * create after it leaves, and after a rename that sends no copy.
 */
static void test_dir_attrs(void)
{
	struct stat last, st;
	int fd;

	REQUIRE_OK(mkdir("da", 0755));
	REQUIRE_OK(stat("da", &last));
	REQUIRE_OK(mkdir("da/s1", 0755));
	dir_check("da", &last, 3, 0755, "mkdir");
	REQUIRE_OK(put("da/f", "x"));
	dir_check("da", &last, 3, 0755, "a create");
	REQUIRE_OK(symlink("f", "da/l"));
	dir_check("da", &last, 3, 0755, "symlink");
	REQUIRE_OK(link("da/f", "da/g"));
	dir_check("da", &last, 3, 0755, "link");
	REQUIRE_OK(chmod("da", 0700));
	dir_check("da", &last, 3, 0700, "chmod");
	REQUIRE_OK(put("da/h", "x"));
	dir_check("da", &last, 3, 0700, "a create after the chmod");
	REQUIRE_OK(rename("da/h", "da/i"));
	dir_check("da", &last, 3, 0700, "rename");
	REQUIRE_OK(mkdir("da/s2", 0755));
	dir_check("da", &last, 4, 0700, "a second mkdir");
	REQUIRE_OK(rmdir("da/s1"));
	dir_check("da", &last, 3, 0700, "rmdir");
	REQUIRE_OK(chmod("da", 0750));
	REQUIRE_OK(unlink("da/i"));
	dir_check("da", &last, 3, 0750, "a chmod, then an unlink");
	REQUIRE_OK(rmdir("da/s2"));
	REQUIRE_OK(unlink("da/g"));
	REQUIRE_OK(unlink("da/l"));
	REQUIRE_OK(unlink("da/f"));
	dir_check("da", &last, 2, 0750, "the last unlink");
	/* a subdirectory moved to another directory: both link counts */
	REQUIRE_OK(mkdir("db", 0755));
	REQUIRE_OK(mkdir("da/m", 0755));
	REQUIRE_OK(put("da/m/f", "x"));
	REQUIRE_OK(rename("da/m", "db/m"));
	REQUIRE_OK(stat("db", &st));
	REQUIRE(st.st_nlink == 3, "db after a directory moved in: %lu links, want 3",
		(unsigned long)st.st_nlink);
	dir_check("da", &last, 2, 0750, "a directory moved out");
	/* a directory removed while open, whose last change left a copy: not 2 links */
	fd = open("db/m", O_RDONLY | O_DIRECTORY);
	REQUIRE(fd >= 0, "open db/m: %s", check_errno_name(errno));
	REQUIRE_OK(unlink("db/m/f"));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_nlink == 2, "db/m after its last unlink: %lu links, want 2",
		(unsigned long)st.st_nlink);
	REQUIRE_OK(rmdir("db/m"));
	REQUIRE(fstat(fd, &st) != 0 || st.st_nlink == 0,
		"a removed directory, still open, shows %lu links", (unsigned long)st.st_nlink);
	close(fd);
	REQUIRE_OK(rmdir("db"));
	REQUIRE_OK(rmdir("da"));
}

static void test_rename(void)
{
	struct stat st, before;

	/* a file to a new name keeps its inode and content */
	REQUIRE_OK(put("a", "content a"));
	REQUIRE_OK(stat("a", &before));
	REQUIRE_OK(rename("a", "b"));
	REQUIRE_ERR(stat("a", &st), ENOENT);
	REQUIRE_OK(stat("b", &st));
	REQUIRE(st.st_ino == before.st_ino, "rename changed the inode %llu -> %llu",
		(unsigned long long)before.st_ino, (unsigned long long)st.st_ino);
	REQUIRE_CONTENT("b", "content a");
	/* over an existing file: the target is replaced */
	REQUIRE_OK(put("c", "content c"));
	REQUIRE_OK(rename("c", "b"));
	REQUIRE_CONTENT("b", "content c");
	REQUIRE_ERR(stat("c", &st), ENOENT);
	REQUIRE_ERR(rename("missing", "x"), ENOENT);
	/* a file onto itself, and onto a hard link of itself: no-ops */
	REQUIRE_OK(rename("b", "b"));
	REQUIRE_OK(link("b", "b2"));
	REQUIRE_OK(rename("b", "b2"));
	REQUIRE_OK(stat("b", &st));
	REQUIRE_OK(unlink("b2"));

	/* directories, with their contents, across parents */
	REQUIRE_OK(mkdir("d1", 0755));
	REQUIRE_OK(mkdir("d1/inner", 0755));
	REQUIRE_OK(put("d1/inner/f", "deep"));
	REQUIRE_OK(mkdir("p", 0755));
	REQUIRE_OK(rename("d1", "p/d2"));
	REQUIRE_CONTENT("p/d2/inner/f", "deep");
	REQUIRE_ERR(stat("d1", &st), ENOENT);
	REQUIRE_OK(rename("p/d2/inner/f", "moved"));
	REQUIRE_CONTENT("moved", "deep");
	/* a directory over an empty one replaces it, over a non-empty one fails */
	REQUIRE_OK(mkdir("empty", 0755));
	REQUIRE_OK(rename("p/d2/inner", "empty"));
	REQUIRE_OK(mkdir("full", 0755));
	REQUIRE_OK(put("full/x", "x"));
	REQUIRE_OK(mkdir("src", 0755));
	REQUIRE_ERR(rename("src", "full"), ENOTEMPTY);
	REQUIRE_ERR(rename("moved", "src"), EISDIR);
	REQUIRE_ERR(rename("src", "moved"), ENOTDIR);
	/* into its own subdirectory */
	REQUIRE_OK(mkdir("src/sub", 0755));
	REQUIRE_ERR(rename("src", "src/sub/loop"), EINVAL);
	REQUIRE_ERR(rename("src", "src/loop"), EINVAL);
	REQUIRE_ERR(rename("full/x/y", "z"), ENOTDIR);
	REQUIRE_ERR(rename(".", "dot"), EBUSY);

	/* RENAME_NOREPLACE */
	REQUIRE_OK(put("n1", "one"));
	REQUIRE_OK(put("n2", "two"));
	REQUIRE_ERR(renameat2_sys("n1", "n2", RENAME_NOREPLACE), EEXIST);
	REQUIRE_CONTENT("n1", "one");
	REQUIRE_CONTENT("n2", "two");
	REQUIRE_OK(renameat2_sys("n1", "n3", RENAME_NOREPLACE));
	REQUIRE_CONTENT("n3", "one");
	REQUIRE_ERR(stat("n1", &st), ENOENT);

	/* RENAME_EXCHANGE: two files, then a file and a directory */
	REQUIRE_OK(renameat2_sys("n2", "n3", RENAME_EXCHANGE));
	REQUIRE_CONTENT("n2", "one");
	REQUIRE_CONTENT("n3", "two");
	REQUIRE_OK(renameat2_sys("n2", "src", RENAME_EXCHANGE));
	REQUIRE_OK(stat("n2", &st));
	REQUIRE(S_ISDIR(st.st_mode), "after exchange n2 is not the directory (mode %o)",
		st.st_mode);
	REQUIRE_OK(stat("n2/sub", &st));
	REQUIRE_CONTENT("src", "one");
	REQUIRE_ERR(renameat2_sys("n3", "absent", RENAME_EXCHANGE), ENOENT);
	REQUIRE_ERR(renameat2_sys("n3", "n2", RENAME_EXCHANGE | RENAME_NOREPLACE), EINVAL);
	REQUIRE_ERR(renameat2_sys("n2", "n2/sub/x", RENAME_EXCHANGE), ENOENT);
	REQUIRE(count_in_dir(".", "n2", NULL) == 1 && count_in_dir(".", "n3", NULL) == 1,
		"after exchanges, n2 or n3 not listed once");
}

static void test_links(void)
{
	struct stat a, b;
	int fd;

	REQUIRE_OK(put("orig", "shared"));
	REQUIRE_OK(mkdir("dir", 0755));
	REQUIRE_OK(link("orig", "dir/alias"));
	REQUIRE_OK(stat("orig", &a));
	REQUIRE_OK(stat("dir/alias", &b));
	REQUIRE(a.st_ino == b.st_ino, "hard link has another inode: %llu vs %llu",
		(unsigned long long)a.st_ino, (unsigned long long)b.st_ino);
	REQUIRE(a.st_nlink == 2 && b.st_nlink == 2, "nlink after link: %lu/%lu, expected 2",
		(unsigned long)a.st_nlink, (unsigned long)b.st_nlink);
	REQUIRE_OK(link("orig", "third"));
	REQUIRE_OK(stat("orig", &a));
	REQUIRE(a.st_nlink == 3, "nlink after 2nd link: %lu, expected 3",
		(unsigned long)a.st_nlink);
	/* a write through one name shows through the others */
	REQUIRE_FD(fd, open("dir/alias", O_WRONLY | O_APPEND));
	REQUIRE(write(fd, "+more", 5) == 5, "append through the link: %s", check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_CONTENT("orig", "shared+more");
	REQUIRE_CONTENT("third", "shared+more");
	REQUIRE_ERR(link("dir", "dirlink"), EPERM);
	REQUIRE_ERR(link("orig", "third"), EEXIST);
	REQUIRE_ERR(link("missing", "x"), ENOENT);
	REQUIRE_ERR(link("orig", "missing/x"), ENOENT);
	REQUIRE_OK(unlink("orig"));
	REQUIRE_OK(stat("third", &a));
	REQUIRE(a.st_nlink == 2, "nlink after unlink: %lu, expected 2", (unsigned long)a.st_nlink);
	REQUIRE_OK(rename("third", "dir/alias"));
	REQUIRE_OK(stat("dir/alias", &a));
	REQUIRE(a.st_nlink == 2, "rename onto a link of the same inode changed nlink to %lu",
		(unsigned long)a.st_nlink);
	REQUIRE_OK(unlink("third"));
	REQUIRE_OK(stat("dir/alias", &a));
	REQUIRE(a.st_nlink == 1, "nlink of the last name: %lu, expected 1",
		(unsigned long)a.st_nlink);
	REQUIRE_CONTENT("dir/alias", "shared+more");
}

static void test_symlink(void)
{
	static const char target[] = "some/where/../target file";
	char buf[PATH_MAX];
	struct stat st;
	ssize_t n;

	REQUIRE_OK(symlink(target, "ln"));
	REQUIRE_OK(lstat("ln", &st));
	REQUIRE(S_ISLNK(st.st_mode), "lstat of a symlink: mode %o", st.st_mode);
	REQUIRE(st.st_size == (off_t)strlen(target), "symlink size %lld, expected %zu",
		(long long)st.st_size, strlen(target));
	REQUIRE_FD(n, readlink("ln", buf, sizeof(buf)));
	REQUIRE(n == (ssize_t)strlen(target) && memcmp(buf, target, (size_t)n) == 0,
		"readlink: got \"%.*s\", expected \"%s\"", (int)n, buf, target);
	/* dangling: stat follows and fails, lstat does not */
	REQUIRE_ERR(stat("ln", &st), ENOENT);
	REQUIRE_ERR(symlink("x", "ln"), EEXIST);
	REQUIRE_OK(put("real", "via link"));
	REQUIRE_OK(symlink("real", "good"));
	REQUIRE_CONTENT("good", "via link");
	REQUIRE_OK(stat("good", &st));
	REQUIRE(S_ISREG(st.st_mode), "stat through a symlink: mode %o", st.st_mode);
	REQUIRE_ERR(open("good", O_RDONLY | O_NOFOLLOW), ELOOP);
	REQUIRE_ERR(readlink("real", buf, sizeof(buf)), EINVAL);
	REQUIRE_ERR(readlink("missing", buf, sizeof(buf)), ENOENT);
	REQUIRE_OK(mkdir("dir", 0755));
	REQUIRE_OK(symlink("dir", "dirlink"));
	REQUIRE_OK(put("dirlink/inside", "in"));
	REQUIRE_CONTENT("dir/inside", "in");
	REQUIRE_ERR(rmdir("dirlink"), ENOTDIR);
	/* a symlink loop */
	REQUIRE_OK(symlink("loop2", "loop1"));
	REQUIRE_OK(symlink("loop1", "loop2"));
	REQUIRE_ERR(open("loop1", O_RDONLY), ELOOP);
	/* the longest target Linux accepts through the VFS (PATH_MAX - 1 bytes) */
	memset(buf, 'x', 4095);
	buf[4095] = '\0';
	for (int i = 100; i < 4095; i += 100)
		buf[i] = '/';
	REQUIRE_OK(symlink(buf, "long"));
	{
		char back[PATH_MAX];

		REQUIRE_FD(n, readlink("long", back, sizeof(back)));
		REQUIRE(n == 4095 && memcmp(back, buf, 4095) == 0,
			"readlink of a 4095-byte target: length %zd", n);
	}
	REQUIRE_OK(unlink("ln"));
	REQUIRE_ERR(lstat("ln", &st), ENOENT);
}

static bool ts_equal(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static void test_attrs(void)
{
	struct timespec times[2] = {{1000000000, 123456789}, {1200000000, 987654321}};
	struct timespec now;
	struct stat st, before;
	int fd;

	REQUIRE_OK(put("f", "attrs"));
	REQUIRE_OK(stat("f", &before));
	/* ctime moves on chmod; wait so a 1 s granularity would still show it */
	usleep(1100000);
	REQUIRE_OK(chmod("f", 0604));
	REQUIRE_OK(stat("f", &st));
	REQUIRE((st.st_mode & 07777) == 0604, "chmod 0604: mode %o", st.st_mode & 07777);
	REQUIRE(st.st_ctim.tv_sec > before.st_ctim.tv_sec ||
			(st.st_ctim.tv_sec == before.st_ctim.tv_sec &&
			 st.st_ctim.tv_nsec > before.st_ctim.tv_nsec),
		"chmod did not move ctime (%lld.%09ld)", (long long)st.st_ctim.tv_sec,
		st.st_ctim.tv_nsec);
	REQUIRE_FD(fd, open("f", O_RDWR));
	REQUIRE_OK(fchmod(fd, 04755));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE((st.st_mode & 07777) == 04755, "fchmod 04755: mode %o", st.st_mode & 07777);
	REQUIRE_OK(chown("f", 1234, 5678));
	REQUIRE_OK(stat("f", &st));
	REQUIRE(st.st_uid == 1234 && st.st_gid == 5678, "chown 1234:5678: got %u:%u", st.st_uid,
		st.st_gid);
	/* chown by root clears set-user-ID */
	REQUIRE((st.st_mode & 07777) == 0755, "chown kept the setuid bit: mode %o",
		st.st_mode & 07777);
	REQUIRE_OK(fchown(fd, 0, 0));
	REQUIRE_OK(chown("f", (uid_t)-1, 42));
	REQUIRE_OK(stat("f", &st));
	REQUIRE(st.st_uid == 0 && st.st_gid == 42, "chown -1:42 after 0:0: got %u:%u", st.st_uid,
		st.st_gid);

	/* explicit times, to the nanosecond */
	REQUIRE_OK(utimensat(AT_FDCWD, "f", times, 0));
	REQUIRE_OK(stat("f", &st));
	REQUIRE(ts_equal(st.st_atim, times[0]) && ts_equal(st.st_mtim, times[1]),
		"utimensat: atime %lld.%09ld mtime %lld.%09ld, expected %lld.%09ld %lld.%09ld",
		(long long)st.st_atim.tv_sec, st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec,
		st.st_mtim.tv_nsec, (long long)times[0].tv_sec, times[0].tv_nsec,
		(long long)times[1].tv_sec, times[1].tv_nsec);
	/* UTIME_OMIT keeps atime, UTIME_NOW sets mtime to now */
	clock_gettime(CLOCK_REALTIME, &now);
	{
		struct timespec t2[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};

		REQUIRE_OK(futimens(fd, t2));
	}
	REQUIRE_OK(stat("f", &st));
	REQUIRE(ts_equal(st.st_atim, times[0]), "UTIME_OMIT changed atime to %lld.%09ld",
		(long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
	REQUIRE(llabs((long long)st.st_mtim.tv_sec - now.tv_sec) <= 2,
		"UTIME_NOW: mtime %lld, now %lld", (long long)st.st_mtim.tv_sec,
		(long long)now.tv_sec);
	/* a write moves mtime */
	REQUIRE_OK(utimensat(AT_FDCWD, "f", times, 0));
	REQUIRE(pwrite(fd, "W", 1, 0) == 1, "pwrite: %s", check_errno_name(errno));
	REQUIRE_OK(fsync(fd));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_mtim.tv_sec >= now.tv_sec - 2, "write did not move mtime (%lld)",
		(long long)st.st_mtim.tv_sec);
	REQUIRE_OK(close(fd));
	/* on a directory and on a symlink itself */
	REQUIRE_OK(mkdir("d", 0755));
	REQUIRE_OK(utimensat(AT_FDCWD, "d", times, 0));
	REQUIRE_OK(stat("d", &st));
	REQUIRE(ts_equal(st.st_mtim, times[1]), "utimensat on a directory: mtime %lld.%09ld",
		(long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	REQUIRE_OK(symlink("f", "ln"));
	REQUIRE_OK(utimensat(AT_FDCWD, "ln", times, AT_SYMLINK_NOFOLLOW));
	REQUIRE_OK(lstat("ln", &st));
	REQUIRE(ts_equal(st.st_mtim, times[1]), "utimensat on a symlink: mtime %lld.%09ld",
		(long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	REQUIRE_OK(lchown("ln", 77, 88));
	REQUIRE_OK(lstat("ln", &st));
	REQUIRE(st.st_uid == 77 && st.st_gid == 88, "lchown on a symlink: %u:%u", st.st_uid,
		st.st_gid);
	REQUIRE_OK(stat("f", &st));
	REQUIRE(st.st_uid == 0, "lchown followed the symlink: target owned by %u", st.st_uid);
	REQUIRE_ERR(chmod("missing", 0644), ENOENT);
	REQUIRE_ERR(chown("missing", 1, 1), ENOENT);
}

static void test_truncate(void)
{
	enum { LEN = 100000, SHORT = 10000, LONG = 3 * MIB + 17 };
	uint8_t *buf = malloc(LONG), *want = malloc(LONG);
	struct stat st;
	ssize_t n;
	long diff;
	int fd;

	REQUIRE(buf && want, "out of memory");
	fs_fill(want, LEN, 1, 0);
	REQUIRE_FD(fd, open("f", O_CREAT | O_RDWR, 0644));
	REQUIRE(fs_pwrite_all(fd, want, LEN, 0) == LEN, "write: %s", check_errno_name(errno));
	/* down, through the path */
	REQUIRE_OK(truncate("f", SHORT));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == SHORT, "truncate down: size %lld, expected %d", (long long)st.st_size,
		SHORT);
	REQUIRE_FD(n, fs_pread_all(fd, buf, LEN, 0));
	REQUIRE(n == SHORT, "read after truncate down: %zd bytes, expected %d", n, SHORT);
	REQUIRE(memcmp(buf, want, SHORT) == 0, "truncate down changed the kept bytes");
	/* up, through the fd, across chunk boundaries: zeros */
	REQUIRE_OK(ftruncate(fd, LONG));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == LONG, "truncate up: size %lld, expected %d", (long long)st.st_size,
		LONG);
	memset(want + SHORT, 0, LONG - SHORT);
	REQUIRE_FD(n, fs_pread_all(fd, buf, LONG, 0));
	REQUIRE(n == LONG, "read after truncate up: %zd bytes, expected %d", n, LONG);
	diff = fs_first_diff(buf, want, LONG);
	REQUIRE(diff < 0, "after truncate up: byte %ld is 0x%02x, expected 0x%02x", diff, buf[diff],
		want[diff]);
	/* old bytes beyond a truncation point must not come back */
	fs_fill(want, LEN, 2, 0);
	REQUIRE(fs_pwrite_all(fd, want, LEN, MIB - LEN / 2) == LEN, "write: %s",
		check_errno_name(errno));
	REQUIRE_OK(fsync(fd));
	REQUIRE_OK(ftruncate(fd, MIB - 7));
	REQUIRE_OK(ftruncate(fd, 2 * MIB));
	REQUIRE_FD(n, fs_pread_all(fd, buf, 2 * MIB, 0));
	REQUIRE(n == 2 * MIB, "read: %zd bytes, expected %d", n, 2 * MIB);
	REQUIRE(memcmp(buf + MIB - LEN / 2, want, LEN / 2 - 7) == 0,
		"data before the truncation point changed");
	for (size_t i = MIB - 7; i < 2 * MIB; i++)
		REQUIRE(buf[i] == 0, "byte %zu after truncate down+up is 0x%02x, expected 0", i,
			buf[i]);
	REQUIRE_OK(ftruncate(fd, 0));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == 0, "truncate to 0: size %lld", (long long)st.st_size);
	REQUIRE_FD(n, pread(fd, buf, 10, 0));
	REQUIRE(n == 0, "read of an empty file returned %zd", n);
	REQUIRE_ERR(ftruncate(fd, -1), EINVAL);
	REQUIRE_OK(close(fd));
	REQUIRE_OK(mkdir("d", 0755));
	REQUIRE_ERR(truncate("d", 0), EISDIR);
	REQUIRE_ERR(truncate("missing", 0), ENOENT);
	REQUIRE_FD(fd, open("f", O_RDONLY));
	REQUIRE_ERR(ftruncate(fd, 5), EINVAL);
	REQUIRE_OK(close(fd));
	free(buf);
	free(want);
}

static void test_sparse(void)
{
	enum { DATA_OFF = 5 * MIB, DATA_LEN = 4096, MID = 3 * MIB - 100 };
	uint8_t *buf = malloc(DATA_OFF + DATA_LEN), data[DATA_LEN];
	struct stat st;
	off_t off;
	ssize_t n;
	int fd;

	REQUIRE(buf, "out of memory");
	fs_fill(data, DATA_LEN, 3, 0);
	REQUIRE_FD(fd, open("sparse", O_CREAT | O_RDWR, 0644));
	REQUIRE(pwrite(fd, data, DATA_LEN, DATA_OFF) == DATA_LEN, "pwrite at 5 MiB: %s",
		check_errno_name(errno));
	REQUIRE_OK(fsync(fd));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == DATA_OFF + DATA_LEN, "size %lld, expected %d", (long long)st.st_size,
		DATA_OFF + DATA_LEN);
	REQUIRE_FD(n, fs_pread_all(fd, buf, DATA_OFF + DATA_LEN, 0));
	REQUIRE(n == DATA_OFF + DATA_LEN, "read %zd bytes, expected %d", n, DATA_OFF + DATA_LEN);
	for (size_t i = 0; i < DATA_OFF; i++)
		REQUIRE(buf[i] == 0, "hole byte %zu is 0x%02x, expected 0", i, buf[i]);
	REQUIRE(memcmp(buf + DATA_OFF, data, DATA_LEN) == 0, "data after the hole differs");
	/* reads that start inside the hole and end in the data */
	REQUIRE_FD(n, pread(fd, buf, 8192, DATA_OFF - 4096));
	REQUIRE(n == 8192, "read across the hole's end: %zd", n);
	for (int i = 0; i < 4096; i++)
		REQUIRE(buf[i] == 0, "hole byte %d before the data is 0x%02x", i, buf[i]);
	REQUIRE(memcmp(buf + 4096, data, 4096) == 0, "data after the hole differs (2)");
	/* past EOF: nothing */
	REQUIRE_FD(n, pread(fd, buf, 100, DATA_OFF + DATA_LEN));
	REQUIRE(n == 0, "read at EOF returned %zd", n);
	REQUIRE_FD(n, pread(fd, buf, 100, DATA_OFF + 3 * MIB));
	REQUIRE(n == 0, "read past EOF returned %zd", n);
	/* a write into the middle of the hole, straddling a chunk boundary */
	REQUIRE(pwrite(fd, data, 200, MID) == 200, "pwrite in the hole: %s",
		check_errno_name(errno));
	REQUIRE_FD(n, fs_pread_all(fd, buf, DATA_OFF, 0));
	for (size_t i = 0; i < (size_t)DATA_OFF; i++) {
		size_t rel = i - (MID);
		uint8_t expect = rel < 200 ? data[rel] : 0;

		REQUIRE(buf[i] == expect, "byte %zu is 0x%02x, expected 0x%02x", i, buf[i], expect);
	}

	/* SEEK_DATA / SEEK_HOLE, at whatever granularity the fs keeps holes */
	errno = 0;
	off = lseek(fd, 0, SEEK_DATA);
	if (off < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
		printf("note: SEEK_DATA not supported (%s)\n", check_errno_name(errno));
	} else {
		REQUIRE(off >= 0 && off <= MID,
			"SEEK_DATA from 0 (first MiB a hole): %lld (%s), expected 0..%d",
			(long long)off, off < 0 ? check_errno_name(errno) : "ok", MID);
		off = lseek(fd, DATA_OFF, SEEK_HOLE);
		REQUIRE(off == DATA_OFF + DATA_LEN,
			"SEEK_HOLE from the last data: %lld, expected EOF %d", (long long)off,
			DATA_OFF + DATA_LEN);
		off = lseek(fd, DATA_OFF + 10, SEEK_DATA);
		REQUIRE(off == DATA_OFF + 10, "SEEK_DATA inside data: %lld, expected %d",
			(long long)off, DATA_OFF + 10);
		REQUIRE_ERR(lseek(fd, DATA_OFF + DATA_LEN, SEEK_DATA), ENXIO);
		REQUIRE_ERR(lseek(fd, DATA_OFF + DATA_LEN + 1, SEEK_HOLE), ENXIO);
	}
	REQUIRE_OK(close(fd));
	free(buf);
}

/* Writes @len bytes in pieces of @piece, reads back in pieces of @rpiece. */
static void big_file(const char *name, size_t len, size_t piece, size_t rpiece, uint64_t seed)
{
	uint8_t *want = malloc(len), *got = malloc(len);
	struct stat st;
	ssize_t n;
	long diff;
	int fd;

	REQUIRE(want && got, "out of memory");
	fs_fill(want, len, seed, 0);
	REQUIRE_FD(fd, open(name, O_CREAT | O_EXCL | O_WRONLY, 0644));
	for (size_t off = 0; off < len; off += piece) {
		size_t chunk = len - off < piece ? len - off : piece;

		REQUIRE(fs_pwrite_all(fd, want + off, chunk, (off_t)off) == (ssize_t)chunk,
			"write %zu bytes at %zu: %s", chunk, off, check_errno_name(errno));
	}
	REQUIRE_OK(fsync(fd));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(stat(name, &st));
	REQUIRE(st.st_size == (off_t)len, "%s: size %lld, expected %zu", name,
		(long long)st.st_size, len);
	REQUIRE_FD(fd, open(name, O_RDONLY));
	for (size_t off = 0; off < len; off += rpiece) {
		size_t chunk = len - off < rpiece ? len - off : rpiece;

		REQUIRE_FD(n, fs_pread_all(fd, got + off, chunk, (off_t)off));
		REQUIRE(n == (ssize_t)chunk, "read %zu at %zu: got %zd", chunk, off, n);
	}
	diff = fs_first_diff(got, want, len);
	REQUIRE(diff < 0, "%s: byte %ld is 0x%02x, expected 0x%02x", name, diff, got[diff],
		want[diff]);
	/* small reads straddling every chunk boundary */
	for (size_t b = MIB; b < len; b += MIB) {
		uint8_t small[64];

		REQUIRE_FD(n, pread(fd, small, sizeof(small), (off_t)b - 32));
		REQUIRE(n == 64 && memcmp(small, want + b - 32, 64) == 0,
			"%s: 64 bytes around the boundary at %zu differ", name, b);
	}
	REQUIRE_OK(close(fd));
	free(want);
	free(got);
}

static void test_big(void)
{
	/* larger than a chunk (1 MiB) */
	big_file("chunk", MIB + 12345, 100000, MIB, 10);
	/* larger than a stripe: 9 MiB, unaligned writes of 777 KiB */
	big_file("stripe", 9 * MIB, 777 * 1024, 333333, 11);
	/* whole 1 MiB writes, 4 KiB reads */
	big_file("aligned", 4 * MIB, MIB, 4096, 12);
	/* an overwrite straddling a chunk boundary */
	{
		uint8_t patch[7] = "PATCHED", got[16];
		ssize_t n;
		int fd;

		REQUIRE_FD(fd, open("stripe", O_RDWR));
		REQUIRE(pwrite(fd, patch, 7, 3 * MIB - 3) == 7, "overwrite: %s",
			check_errno_name(errno));
		REQUIRE_OK(close(fd));
		REQUIRE_FD(fd, open("stripe", O_RDONLY));
		REQUIRE_FD(n, pread(fd, got, 9, 3 * MIB - 4));
		REQUIRE_OK(close(fd));
		REQUIRE(n == 9 && memcmp(got + 1, patch, 7) == 0 &&
				got[0] == fs_stream_byte(11, 3 * MIB - 4) &&
				got[8] == fs_stream_byte(11, 3 * MIB + 4),
			"overwrite across the chunk boundary at 3 MiB read back wrong");
	}
}

static bool list_has(const char *list, ssize_t len, const char *name)
{
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(list + i) + 1)
		if (strcmp(list + i, name) == 0)
			return true;
	return false;
}

static void test_xattr(void)
{
	static const char binary[] = {'a', 0, 'b', 0, (char)0xff};
	char buf[256], list[1024];
	ssize_t n;

	REQUIRE_OK(put("f", "x"));
	REQUIRE_OK(setxattr("f", "user.one", "value one", 9, 0));
	REQUIRE_OK(setxattr("f", "user.two", binary, sizeof(binary), XATTR_CREATE));
	REQUIRE_OK(setxattr("f", "user.empty", "", 0, 0));
	REQUIRE_FD(n, getxattr("f", "user.one", buf, sizeof(buf)));
	REQUIRE(n == 9 && memcmp(buf, "value one", 9) == 0, "getxattr user.one: %zd \"%.*s\"", n,
		(int)(n > 0 ? n : 0), buf);
	REQUIRE_FD(n, getxattr("f", "user.one", NULL, 0));
	REQUIRE(n == 9, "getxattr size query: %zd, expected 9", n);
	REQUIRE_FD(n, getxattr("f", "user.two", buf, sizeof(buf)));
	REQUIRE(n == (ssize_t)sizeof(binary) && memcmp(buf, binary, sizeof(binary)) == 0,
		"binary xattr value: %zd bytes", n);
	REQUIRE_FD(n, getxattr("f", "user.empty", buf, sizeof(buf)));
	REQUIRE(n == 0, "empty xattr value: %zd bytes", n);
	REQUIRE_ERR(getxattr("f", "user.one", buf, 3), ERANGE);
	REQUIRE_FD(n, listxattr("f", list, sizeof(list)));
	REQUIRE(list_has(list, n, "user.one") && list_has(list, n, "user.two") &&
			list_has(list, n, "user.empty"),
		"listxattr lacks user.one, user.two or user.empty");
	{
		ssize_t size = listxattr("f", NULL, 0);

		REQUIRE(size == n, "listxattr size query %zd, list %zd", size, n);
		REQUIRE_ERR(listxattr("f", list, 1), ERANGE);
	}
	REQUIRE_ERR(setxattr("f", "user.one", "x", 1, XATTR_CREATE), EEXIST);
	REQUIRE_ERR(setxattr("f", "user.none", "x", 1, XATTR_REPLACE), ENODATA);
	REQUIRE_OK(setxattr("f", "user.one", "replaced", 8, XATTR_REPLACE));
	REQUIRE_FD(n, getxattr("f", "user.one", buf, sizeof(buf)));
	REQUIRE(n == 8 && memcmp(buf, "replaced", 8) == 0, "after XATTR_REPLACE: \"%.*s\"",
		(int)(n > 0 ? n : 0), buf);
	REQUIRE_ERR(getxattr("f", "user.none", buf, sizeof(buf)), ENODATA);
	REQUIRE_OK(removexattr("f", "user.one"));
	REQUIRE_ERR(getxattr("f", "user.one", buf, sizeof(buf)), ENODATA);
	REQUIRE_ERR(removexattr("f", "user.one"), ENODATA);
	REQUIRE_FD(n, listxattr("f", list, sizeof(list)));
	REQUIRE(!list_has(list, n, "user.one") && list_has(list, n, "user.two"),
		"listxattr after remove is wrong");
	/* a large value, and xattrs on a directory */
	{
		char big[4000];

		memset(big, 'v', sizeof(big));
		REQUIRE_OK(setxattr("f", "user.big", big, sizeof(big), 0));
		char back[4096];

		REQUIRE_FD(n, getxattr("f", "user.big", back, sizeof(back)));
		REQUIRE(n == (ssize_t)sizeof(big) && memcmp(back, big, sizeof(big)) == 0,
			"4000-byte xattr: got %zd bytes", n);
	}
	REQUIRE_OK(mkdir("d", 0755));
	REQUIRE_OK(setxattr("d", "user.dir", "on a dir", 8, 0));
	REQUIRE_FD(n, getxattr("d", "user.dir", buf, sizeof(buf)));
	REQUIRE(n == 8, "xattr on a directory: %zd", n);
	/* xattrs follow the inode through rename and hard links */
	REQUIRE_OK(rename("f", "g"));
	REQUIRE_OK(link("g", "h"));
	REQUIRE_FD(n, getxattr("h", "user.two", buf, sizeof(buf)));
	REQUIRE(n == (ssize_t)sizeof(binary), "xattr through a renamed hard link: %zd", n);
	REQUIRE_ERR(getxattr("missing", "user.x", buf, sizeof(buf)), ENOENT);
}

static void test_statfs(void)
{
	struct statvfs sv;

	REQUIRE_OK(statvfs(".", &sv));
	REQUIRE(sv.f_bsize > 0 && sv.f_frsize > 0, "statfs: bsize %lu frsize %lu", sv.f_bsize,
		sv.f_frsize);
	REQUIRE(sv.f_blocks > 0, "statfs: no blocks");
	REQUIRE(sv.f_bfree <= sv.f_blocks && sv.f_bavail <= sv.f_blocks,
		"statfs: free %llu avail %llu > total %llu", (unsigned long long)sv.f_bfree,
		(unsigned long long)sv.f_bavail, (unsigned long long)sv.f_blocks);
	REQUIRE(sv.f_bavail > 0, "statfs: no space available");
	REQUIRE(sv.f_namemax >= 255, "statfs: namemax %lu", sv.f_namemax);
	REQUIRE(sv.f_ffree <= sv.f_files, "statfs: ffree %llu > files %llu",
		(unsigned long long)sv.f_ffree, (unsigned long long)sv.f_files);
	/* a plausible size: at least 64 MiB */
	REQUIRE((unsigned long long)sv.f_blocks * sv.f_frsize >= 64ull * MIB,
		"statfs: total %llu bytes", (unsigned long long)sv.f_blocks * sv.f_frsize);
}

static void test_unlinked_open(void)
{
	enum { LEN = 2 * MIB + 5 };
	uint8_t *want = malloc(LEN), *got = malloc(LEN);
	struct stat st;
	int fd, fd2;
	ssize_t n;

	REQUIRE(want && got, "out of memory");
	fs_fill(want, LEN, 20, 0);
	REQUIRE_FD(fd, open("doomed", O_CREAT | O_RDWR, 0644));
	REQUIRE(fs_pwrite_all(fd, want, LEN, 0) == LEN, "write: %s", check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_FD(fd, open("doomed", O_RDWR));
	REQUIRE_FD(fd2, open("doomed", O_RDONLY));
	REQUIRE_OK(unlink("doomed"));
	REQUIRE_ERR(stat("doomed", &st), ENOENT);
	REQUIRE(count_in_dir(".", "doomed", NULL) == 0, "unlinked file still listed");
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_nlink == 0, "fstat of an unlinked file: nlink %lu",
		(unsigned long)st.st_nlink);
	REQUIRE_FD(n, fs_pread_all(fd, got, LEN, 0));
	REQUIRE(n == LEN && memcmp(got, want, LEN) == 0, "read of the unlinked file: %zd bytes%s",
		n, n == LEN ? ", content differs" : "");
	/* still writable, and a new file of the same name is another file */
	fs_fill(want + MIB, 1000, 21, 0);
	REQUIRE(pwrite(fd, want + MIB, 1000, MIB) == 1000, "write to the unlinked file: %s",
		check_errno_name(errno));
	REQUIRE_OK(put("doomed", "new"));
	REQUIRE_CONTENT("doomed", "new");
	REQUIRE_OK(close(fd));
	/* the other descriptor still reads, after the first closed */
	REQUIRE_FD(n, fs_pread_all(fd2, got, LEN, 0));
	REQUIRE(n == LEN && memcmp(got, want, LEN) == 0,
		"read through the 2nd fd after the 1st closed: %zd bytes%s", n,
		n == LEN ? ", content differs" : "");
	REQUIRE_OK(close(fd2));
	REQUIRE_CONTENT("doomed", "new");
	free(want);
	free(got);
}

static void test_fallocate(void)
{
	enum { LEN = 3 * MIB };
	uint8_t *buf = malloc(LEN), data[8192];
	struct stat st;
	ssize_t n;
	int fd, ret;

	REQUIRE(buf, "out of memory");
	REQUIRE_FD(fd, open("f", O_CREAT | O_RDWR, 0644));
	REQUIRE_OK(fallocate(fd, 0, 0, LEN));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == LEN, "fallocate 3 MiB: size %lld", (long long)st.st_size);
	REQUIRE_FD(n, fs_pread_all(fd, buf, LEN, 0));
	REQUIRE(n == LEN, "read %zd bytes, expected %d", n, LEN);
	for (size_t i = 0; i < LEN; i++)
		REQUIRE(buf[i] == 0, "fallocated byte %zu is 0x%02x", i, buf[i]);
	/* data written before a fallocate over it stays */
	fs_fill(data, sizeof(data), 30, 0);
	REQUIRE(pwrite(fd, data, sizeof(data), MIB - 4096) == sizeof(data), "pwrite: %s",
		check_errno_name(errno));
	REQUIRE_OK(fallocate(fd, 0, 0, LEN + MIB));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == LEN + MIB, "fallocate to 4 MiB: size %lld", (long long)st.st_size);
	REQUIRE_FD(n, pread(fd, buf, sizeof(data), MIB - 4096));
	REQUIRE(n == sizeof(data) && memcmp(buf, data, sizeof(data)) == 0,
		"fallocate over data changed it");
	/* KEEP_SIZE: no size change */
	REQUIRE_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, LEN + MIB, MIB));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == LEN + MIB, "FALLOC_FL_KEEP_SIZE changed the size to %lld",
		(long long)st.st_size);
	/* punching a hole: optional, but if it works it must zero the range only */
	errno = 0;
	ret = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MIB - 1000, 2000);
	if (ret && errno == EOPNOTSUPP) {
		printf("note: FALLOC_FL_PUNCH_HOLE not supported\n");
	} else {
		REQUIRE(ret == 0, "punch hole: %s", check_errno_name(errno));
		REQUIRE_FD(n, pread(fd, buf, sizeof(data), MIB - 4096));
		REQUIRE(n == sizeof(data), "read after punch: %zd", n);
		for (size_t i = 0; i < sizeof(data); i++) {
			size_t pos = MIB - 4096 + i;
			uint8_t expect = pos >= MIB - 1000 && pos < MIB + 1000 ? 0 : data[i];

			REQUIRE(buf[i] == expect,
				"after punch: byte %zu is 0x%02x, expected 0x%02x", pos, buf[i],
				expect);
		}
		REQUIRE_OK(fstat(fd, &st));
		REQUIRE(st.st_size == LEN + MIB, "punch hole changed the size to %lld",
			(long long)st.st_size);
	}
	REQUIRE_ERR(fallocate(fd, 0, -1, 10), EINVAL);
	REQUIRE_ERR(fallocate(fd, 0, 0, 0), EINVAL);
	REQUIRE_OK(close(fd));
	REQUIRE_FD(fd, open("f", O_RDONLY));
	REQUIRE_ERR(fallocate(fd, 0, 0, 10), EBADF);
	REQUIRE_OK(close(fd));
	free(buf);
}

static void test_exdev(void)
{
	/* A directory on another file system, if this host has one. */
	static const char *const candidates[] = {"/dev/shm", "/tmp", "/run", "/var/tmp"};
	struct stat here, there;
	char path[300];

	REQUIRE_OK(stat(".", &here));
	REQUIRE_OK(put("f", "x"));
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		if (stat(candidates[i], &there) || there.st_dev == here.st_dev ||
		    access(candidates[i], W_OK))
			continue;
		snprintf(path, sizeof(path), "%s/rdmafs-exdev-%d", candidates[i], (int)getpid());
		REQUIRE_ERR(rename("f", path), EXDEV);
		REQUIRE_ERR(link("f", path), EXDEV);
		return;
	}
	printf("note: no other writable file system here, EXDEV not checked\n");
}

static void test_readdir(void)
{
	enum { COUNT = 300 };
	char name[64];
	unsigned char type;
	DIR *d;
	struct dirent *e;
	unsigned seen[COUNT] = {0};
	unsigned others = 0;

	for (int i = 0; i < COUNT; i++) {
		snprintf(name, sizeof(name), "entry-%03d-%s", i, i % 3 ? "file" : "dir");
		if (i % 3)
			REQUIRE_OK(put(name, "x"));
		else
			REQUIRE_OK(mkdir(name, 0755));
	}
	REQUIRE_OK(symlink("entry-001-file", "link"));
	d = opendir(".");
	REQUIRE(d, "opendir: %s", check_errno_name(errno));
	while ((e = readdir(d))) {
		int i;

		if (sscanf(e->d_name, "entry-%03d-", &i) == 1 && i >= 0 && i < COUNT) {
			seen[i]++;
			type = i % 3 ? DT_REG : DT_DIR;
			if (e->d_type != DT_UNKNOWN && e->d_type != type) {
				closedir(d);
				REQUIRE(false, "d_type of %s: %u, expected %u", e->d_name,
					e->d_type, type);
			}
		} else if (strcmp(e->d_name, "link") == 0) {
			if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) {
				closedir(d);
				REQUIRE(false, "d_type of a symlink: %u", e->d_type);
			}
			others++;
		} else if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			closedir(d);
			REQUIRE(false, "readdir returned an unknown name \"%s\"", e->d_name);
		}
	}
	/* rewinddir starts over */
	rewinddir(d);
	REQUIRE(readdir(d) != NULL, "readdir after rewinddir returned nothing");
	closedir(d);
	for (int i = 0; i < COUNT; i++)
		REQUIRE(seen[i] == 1, "entry %d listed %u times", i, seen[i]);
	REQUIRE(others == 1, "symlink listed %u times", others);
	REQUIRE_ERR(opendir("missing") ? 0 : -1, ENOENT);
	REQUIRE_ERR(opendir("entry-001-file") ? 0 : -1, ENOTDIR);
}

static void test_fsync(void)
{
	int fd, dfd;

	REQUIRE_FD(fd, open("f", O_CREAT | O_RDWR, 0644));
	REQUIRE(write(fd, "sync", 4) == 4, "write: %s", check_errno_name(errno));
	REQUIRE_OK(fsync(fd));
	REQUIRE_OK(fdatasync(fd));
	REQUIRE_OK(close(fd));
	REQUIRE_FD(dfd, open(".", O_RDONLY | O_DIRECTORY));
	REQUIRE_OK(fsync(dfd));
	REQUIRE_OK(close(dfd));
	REQUIRE_CONTENT("f", "sync");
}

int main(int argc, char **argv)
{
	static const struct fs_test tests[] = {
		{"create_open", test_create_open},
		{"mkdir_rmdir", test_mkdir_rmdir},
		{"dir_attrs", test_dir_attrs},
		{"rename", test_rename},
		{"links", test_links},
		{"symlink", test_symlink},
		{"attrs", test_attrs},
		{"truncate", test_truncate},
		{"sparse", test_sparse},
		{"big", test_big},
		{"xattr", test_xattr},
		{"statfs", test_statfs},
		{"unlinked_open", test_unlinked_open},
		{"fallocate", test_fallocate},
		{"exdev", test_exdev},
		{"readdir", test_readdir},
		{"fsync", test_fsync},
		{NULL, NULL},
	};

	if (geteuid() != 0) {
		printf("SKIP: fs-posix needs root (chown, and to match the suite's mounts)\n");
		return CHECK_EXIT_SKIP;
	}
	fs_setup(argc, argv, "posix");
	return fs_run(tests);
}
