/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Permissions for a non-root user on a mounted file system. Runs as root,
 * sets up files, then checks each case in a child that dropped to
 * uid/gid 65534 (setresgid, setgroups, setresuid). Usage:
 * fs-permissions DIRECTORY
 */
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "fscheck.h"

#define USER_ID	 65534
#define GROUP_ID 65534

static int put(const char *path, const char *text, mode_t mode, uid_t uid, gid_t gid)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t len = strlen(text);
	int ret = 0;

	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || fchown(fd, uid, gid) || fchmod(fd, mode))
		ret = -1;
	if (close(fd))
		ret = -1;
	return ret;
}

/*
 * Runs @fn in a child as USER_ID:GROUP_ID; a failure in it fails the test
 * (a REQUIRE there ends the child with exit 1, see tests/lib/check.h).
 */
static void as_user(void (*fn)(void))
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0, "fork: %s", check_errno_name(errno));
	if (pid == 0) {
		unsigned before = check_failure_count();

		if (setgroups(0, NULL) || setresgid(GROUP_ID, GROUP_ID, GROUP_ID) ||
		    setresuid(USER_ID, USER_ID, USER_ID)) {
			fprintf(stderr, "dropping to %d:%d: %s\n", USER_ID, GROUP_ID,
				strerror(errno));
			_exit(1);
		}
		fn();
		fflush(NULL);
		_exit(check_failure_count() != before ? 1 : 0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", check_errno_name(errno));
	/* the child printed what failed; count it here */
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "checks as uid %d failed (status 0x%x)", USER_ID, status);
}

static void user_root_files(void)
{
	char buf[64];
	int fd;

	/* 0644 root file in a 0755 root directory: read yes, write no */
	REQUIRE_FD(fd, open("dir/public", O_RDONLY));
	REQUIRE(read(fd, buf, sizeof(buf)) == 6, "read of a 0644 file: %s",
		check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_ERR(open("dir/public", O_WRONLY), EACCES);
	REQUIRE_ERR(open("dir/public", O_RDWR | O_APPEND), EACCES);
	REQUIRE_ERR(truncate("dir/public", 0), EACCES);
	REQUIRE_ERR(open("dir/secret", O_RDONLY), EACCES);
	REQUIRE_ERR(open("dir/new", O_CREAT | O_WRONLY, 0644), EACCES);
	REQUIRE_ERR(mkdir("dir/newdir", 0755), EACCES);
	REQUIRE_ERR(symlink("x", "dir/newlink"), EACCES);
	/* our own file: fs.protected_hardlinks would make root's EPERM */
	REQUIRE_ERR(link("dir/owned", "dir/newlink"), EACCES);
	REQUIRE_ERR(unlink("dir/public"), EACCES);
	REQUIRE_ERR(rename("dir/public", "dir/renamed"), EACCES);
	REQUIRE_ERR(mkfifo("dir/fifo", 0644), EACCES);
	/* metadata of someone else's file */
	REQUIRE_ERR(chmod("dir/public", 0666), EPERM);
	REQUIRE_ERR(chown("dir/public", USER_ID, GROUP_ID), EPERM);
	{
		struct timespec t[2] = {{1, 0}, {2, 0}};

		REQUIRE_ERR(utimensat(AT_FDCWD, "dir/public", t, 0), EPERM);
		/* "now" only needs write permission, which we lack */
		REQUIRE_ERR(utimensat(AT_FDCWD, "dir/public", NULL, 0), EACCES);
	}
	REQUIRE_ERR(setxattr("dir/public", "user.x", "v", 1, 0), EACCES);
	/* group permission: root:65534 0640 is readable by the group */
	REQUIRE_FD(fd, open("dir/group", O_RDONLY));
	REQUIRE_OK(close(fd));
	REQUIRE_ERR(open("dir/group", O_WRONLY), EACCES);
	/* no search permission on a 0700 directory */
	{
		struct stat st;

		REQUIRE_ERR(stat("closed/inside", &st), EACCES);
		REQUIRE_ERR(open("closed/inside", O_RDONLY), EACCES);
	}
}

static void user_own_files(void)
{
	struct stat st;
	int fd;

	/* in a directory we may write: create, chmod, write our own files */
	REQUIRE_FD(fd, open("open/mine", O_CREAT | O_EXCL | O_WRONLY, 0644));
	REQUIRE(write(fd, "mine", 4) == 4, "write own file: %s", check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(stat("open/mine", &st));
	REQUIRE(st.st_uid == USER_ID && st.st_gid == GROUP_ID,
		"new file owned by %u:%u, expected %d:%d", st.st_uid, st.st_gid, USER_ID, GROUP_ID);
	REQUIRE_OK(chmod("open/mine", 0600));
	REQUIRE_OK(stat("open/mine", &st));
	REQUIRE((st.st_mode & 07777) == 0600, "owner chmod 0600: mode %o", st.st_mode & 07777);
	{
		struct timespec t[2] = {{1000, 0}, {2000, 0}};

		REQUIRE_OK(utimensat(AT_FDCWD, "open/mine", t, 0));
	}
	/* giving the file away is not allowed */
	REQUIRE_ERR(chown("open/mine", 0, GROUP_ID), EPERM);
	/* a pre-made file of ours in root's directory */
	REQUIRE_OK(chmod("dir/owned", 0640));
	REQUIRE_OK(truncate("dir/owned", 2));
	REQUIRE_OK(setxattr("dir/owned", "user.mine", "v", 1, 0));
	/* but even an owner cannot write a file without w */
	REQUIRE_OK(chmod("dir/owned", 0444));
	REQUIRE_ERR(open("dir/owned", O_WRONLY), EACCES);
	REQUIRE_OK(chmod("dir/owned", 0644));
	REQUIRE_FD(fd, open("dir/owned", O_WRONLY));
	REQUIRE_OK(close(fd));
	/* setgid for our own group stays; for a group we are not in it is dropped */
	REQUIRE_OK(chmod("open/mine", 02755));
	REQUIRE_OK(stat("open/mine", &st));
	REQUIRE((st.st_mode & 07777) == 02755, "chmod 02755 (own group): mode %o",
		st.st_mode & 07777);
	REQUIRE_OK(chmod("dir/foreign_group", 02755));
	REQUIRE_OK(stat("dir/foreign_group", &st));
	REQUIRE((st.st_mode & 07777) == 0755,
		"chmod 02755 by a non-member of the file's group: mode %o, expected 0755",
		st.st_mode & 07777);
	/* a sticky directory: our files yes, root's no */
	REQUIRE_FD(fd, open("sticky/mine", O_CREAT | O_WRONLY, 0644));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(rename("sticky/mine", "sticky/mine2"));
	REQUIRE_OK(unlink("sticky/mine2"));
	REQUIRE_ERR(unlink("sticky/roots"), EPERM);
	REQUIRE_ERR(rename("sticky/roots", "sticky/stolen"), EPERM);
	/* our own directory: rmdir ours, but not in root's dir */
	REQUIRE_OK(mkdir("open/mydir", 0700));
	REQUIRE_OK(rmdir("open/mydir"));
	REQUIRE_ERR(rmdir("dir/sub"), EACCES);
}

static void setup_tree(void)
{
	REQUIRE_OK(mkdir("dir", 0755));
	REQUIRE_OK(mkdir("dir/sub", 0755));
	REQUIRE_OK(put("dir/public", "public", 0644, 0, 0));
	REQUIRE_OK(put("dir/secret", "secret", 0600, 0, 0));
	REQUIRE_OK(put("dir/group", "group", 0640, 0, GROUP_ID));
	REQUIRE_OK(put("dir/owned", "owned by the user", 0644, USER_ID, GROUP_ID));
	REQUIRE_OK(put("dir/foreign_group", "user's, root's group", 0644, USER_ID, 0));
	REQUIRE_OK(mkdir("closed", 0700));
	REQUIRE_OK(put("closed/inside", "x", 0644, 0, 0));
	REQUIRE_OK(mkdir("open", 0777));
	REQUIRE_OK(chmod("open", 0777));
	REQUIRE_OK(mkdir("sticky", 01777));
	REQUIRE_OK(chmod("sticky", 01777));
	REQUIRE_OK(put("sticky/roots", "root's", 0666, 0, 0));
}

static void test_non_owner(void)
{
	setup_tree();
	as_user(user_root_files);
}

static void test_owner(void)
{
	struct stat st;

	setup_tree();
	as_user(user_own_files);
	/* root sees what the user did */
	REQUIRE_OK(stat("open/mine", &st));
	REQUIRE(st.st_uid == USER_ID && (st.st_mode & 07777) == 02755,
		"as root: open/mine is %u mode %o, expected %d mode 2755", st.st_uid,
		st.st_mode & 07777, USER_ID);
}

/*
 * What ext4 does when a user who may write a root-owned setuid/setgid file
 * (04777, 02777, 06777) writes or truncates it: the call succeeds and the
 * kernel clears set-user-ID, and set-group-ID as group-execute is set.
 */
static void user_kill_privs(void)
{
	static const char *const names[] = {"kill/write", "kill/truncate", "kill/ftruncate",
					    "kill/sgid"};
	struct stat st;
	int fd;

	REQUIRE_FD(fd, open(names[0], O_WRONLY));
	REQUIRE(write(fd, "new", 3) == 3, "write to a 06777 file as a non-owner: %s",
		check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(truncate(names[1], 2));
	REQUIRE_FD(fd, open(names[2], O_RDWR));
	REQUIRE_OK(ftruncate(fd, 1));
	REQUIRE_OK(close(fd));
	REQUIRE_FD(fd, open(names[3], O_WRONLY | O_APPEND));
	REQUIRE(write(fd, "more", 4) == 4, "write to a 02777 file as a non-owner: %s",
		check_errno_name(errno));
	REQUIRE_OK(close(fd));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		REQUIRE_OK(stat(names[i], &st));
		REQUIRE((st.st_mode & 07777) == 0777 && st.st_uid == 0,
			"%s: mode %o uid %u after a non-owner's write, expected 777 uid 0",
			names[i], st.st_mode & 07777, st.st_uid);
	}
	/* and the user cannot set them back: only the owner may chmod */
	REQUIRE_ERR(chmod(names[0], 04777), EPERM);
	REQUIRE_ERR(chmod(names[0], 0775), EPERM);
}

/* open(O_CREAT | O_RDWR, 0) then ftruncate: open checked the access, ftruncate works */
static void user_create_mode0(void)
{
	struct stat st;
	int fd;

	REQUIRE_FD(fd, open("open/mode0", O_CREAT | O_RDWR | O_EXCL, 0));
	REQUIRE_OK(ftruncate(fd, 8192));
	REQUIRE(write(fd, "data", 4) == 4, "write to a fresh mode-0 file: %s",
		check_errno_name(errno));
	REQUIRE_OK(ftruncate(fd, 2));
	REQUIRE_OK(fstat(fd, &st));
	REQUIRE(st.st_size == 2 && (st.st_mode & 07777) == 0, "mode-0 file: size %lld mode %o",
		(long long)st.st_size, st.st_mode & 07777);
	REQUIRE_OK(close(fd));
	/* a new descriptor is refused: the mode says so */
	REQUIRE_ERR(open("open/mode0", O_RDWR), EACCES);
	REQUIRE_ERR(truncate("open/mode0", 0), EACCES);
}

static void test_kill_privs(void)
{
	REQUIRE_OK(mkdir("kill", 0777));
	REQUIRE_OK(chmod("kill", 0777));
	REQUIRE_OK(put("kill/write", "old contents", 06777, 0, 0));
	REQUIRE_OK(put("kill/truncate", "old contents", 04777, 0, 0));
	REQUIRE_OK(put("kill/ftruncate", "old contents", 06777, 0, 0));
	REQUIRE_OK(put("kill/sgid", "old contents", 02777, 0, 0));
	REQUIRE_OK(mkdir("open", 0777));
	REQUIRE_OK(chmod("open", 0777));
	as_user(user_kill_privs);
	as_user(user_create_mode0);
}

static void test_root(void)
{
	char buf[16];
	int fd;

	/* root reads and writes other users' private files */
	REQUIRE_OK(put("private", "user's", 0600, USER_ID, GROUP_ID));
	REQUIRE_OK(chmod("private", 0000));
	REQUIRE_FD(fd, open("private", O_RDWR));
	REQUIRE(read(fd, buf, sizeof(buf)) == 6, "root read of a 0000 file: %s",
		check_errno_name(errno));
	REQUIRE_OK(close(fd));
	REQUIRE_OK(chmod("private", 0644));
	REQUIRE_OK(chown("private", 0, 0));
}

int main(int argc, char **argv)
{
	static const struct fs_test tests[] = {
		{"non_owner", test_non_owner},
		{"owner", test_owner},
		{"kill_privs", test_kill_privs},
		{"root", test_root},
		{NULL, NULL},
	};

	if (geteuid() != 0) {
		printf("SKIP: fs-permissions must start as root to drop to uid %d\n", USER_ID);
		return CHECK_EXIT_SKIP;
	}
	fs_setup(argc, argv, "permissions");
	return fs_run(tests);
}
