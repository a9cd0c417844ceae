/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A directory of 10,000 entries listed while a thread keeps creating,
 * renaming and removing other entries in it: every entry that existed for the
 * whole listing appears exactly once, no name appears twice, no name that
 * never existed appears; a quiet listing afterwards is exact.
 * Usage: fs-bigdir DIRECTORY [ENTRIES]   (or RDMAFS_FS_BIGDIR_ENTRIES)
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fscheck.h"

#define PASSES	  4
#define MAX_CHURN (1u << 22)

static unsigned entries = 10000;

/* Churn: names "churn-N" (created) and "moved-N" (renamed from churn-N),
 * never reused, so a second sighting of one in a listing is a bug. */
static uint8_t *churn_state; /* per N: 0 never, 1 churn-N, 2 moved-N, 3 gone */
static unsigned churn_next;  /* next N; written by the churn thread only */
static unsigned churn_ops;
static bool churn_stop;
static int churn_error;

static void *churn_main(void *arg)
{
	char name[40], moved[40];
	unsigned n;

	for (n = 0; !__atomic_load_n(&churn_stop, __ATOMIC_ACQUIRE) && n + 1 < MAX_CHURN; n++) {
		int fd;

		snprintf(name, sizeof(name), "big/churn-%u", n);
		/* published first: a listing may see the name as soon as it exists */
		__atomic_store_n(&churn_next, n + 1, __ATOMIC_RELEASE);
		fd = open(name, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0 || close(fd)) {
			churn_error = errno;
			break;
		}
		__atomic_store_n(&churn_state[n], 1, __ATOMIC_RELEASE);
		if (n % 3 == 1) {
			snprintf(moved, sizeof(moved), "big/moved-%u", n);
			if (rename(name, moved)) {
				churn_error = errno;
				break;
			}
			__atomic_store_n(&churn_state[n], 2, __ATOMIC_RELEASE);
		}
		/* keep about 40 churn entries alive, removing old ones */
		if (n >= 40 && churn_state[n - 40] != 3) {
			unsigned old = n - 40;

			snprintf(name, sizeof(name), "big/%s-%u",
				 churn_state[old] == 2 ? "moved" : "churn", old);
			if (unlink(name)) {
				churn_error = errno;
				break;
			}
			__atomic_store_n(&churn_state[old], 3, __ATOMIC_RELEASE);
		}
		__atomic_add_fetch(&churn_ops, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* One listing; @quiet: nothing changes, so the listing must be exact. */
static void list_once(unsigned pass, bool quiet)
{
	unsigned *keep_seen = calloc(entries, sizeof(*keep_seen));
	uint8_t *churn_seen = calloc(MAX_CHURN, 1);
	unsigned ops_before = __atomic_load_n(&churn_ops, __ATOMIC_ACQUIRE);
	unsigned listed = 0, churn_listed = 0;
	struct dirent *e;
	DIR *d;

	REQUIRE(keep_seen && churn_seen, "out of memory");
	d = opendir("big");
	if (!CHECK(d, "opendir big: %s", check_errno_name(errno)))
		return;
	errno = 0;
	while ((e = readdir(d))) {
		unsigned n;
		char tail;

		listed++;
		/* give the churn thread time to run in the middle of the listing */
		if (!quiet && listed % 1000 == 0)
			usleep(2000);
		if (sscanf(e->d_name, "keep-%u%c", &n, &tail) == 1 && n < entries) {
			if (!CHECK(++keep_seen[n] == 1, "pass %u: %s listed twice", pass,
				   e->d_name)) {
				closedir(d);
				return;
			}
		} else if ((sscanf(e->d_name, "churn-%u%c", &n, &tail) == 1 ||
			    sscanf(e->d_name, "moved-%u%c", &n, &tail) == 1) &&
			   n < MAX_CHURN) {
			/* churn-N and, after its rename, moved-N may both show (POSIX
			 * leaves names added or removed during a listing open), but
			 * each name at most once */
			uint8_t bit = e->d_name[0] == 'c' ? 1 : 2;

			churn_listed++;
			if (!CHECK(!(churn_seen[n] & bit), "pass %u: %s listed twice", pass,
				   e->d_name) ||
			    !CHECK(n < __atomic_load_n(&churn_next, __ATOMIC_ACQUIRE),
				   "pass %u: %s listed before it was created", pass, e->d_name) ||
			    !CHECK(!quiet || churn_state[n] == (e->d_name[0] == 'c' ? 1 : 2),
				   "quiet listing: %s listed in state %u", e->d_name,
				   churn_state[n])) {
				closedir(d);
				return;
			}
			churn_seen[n] |= bit;
		} else if (!CHECK(!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."),
				  "pass %u: unknown name \"%s\" listed", pass, e->d_name)) {
			closedir(d);
			return;
		}
		errno = 0;
	}
	if (!CHECK(errno == 0, "pass %u: readdir: %s", pass, check_errno_name(errno)))
		return;
	closedir(d);
	for (unsigned i = 0; i < entries; i++)
		if (!CHECK(keep_seen[i] == 1, "pass %u: keep-%05u listed %u times", pass, i,
			   keep_seen[i]))
			return;
	if (quiet) {
		unsigned alive = 0, end = churn_next;

		for (unsigned n = 0; n < end; n++)
			if (churn_state[n] == 1 || churn_state[n] == 2) {
				alive++;
				if (!CHECK(churn_seen[n], "quiet listing lacks live churn entry %u",
					   n))
					return;
			}
		if (!CHECK(alive == churn_listed, "quiet listing: %u churn entries, %u alive",
			   churn_listed, alive))
			return;
	}
	printf("pass %u: %u names, %u churn ops during the listing\n", pass, listed,
	       __atomic_load_n(&churn_ops, __ATOMIC_ACQUIRE) - ops_before);
	free(keep_seen);
	free(churn_seen);
}

static void test_bigdir(void)
{
	char name[32];
	pthread_t thread;
	uint64_t start;
	unsigned before, raced = 0;

	REQUIRE_OK(mkdir("big", 0755));
	for (unsigned i = 0; i < entries; i++) {
		snprintf(name, sizeof(name), "big/keep-%05u", i);
		/* a mix of files, directories and symlinks */
		if (i % 10 == 3)
			REQUIRE_OK(mkdir(name, 0755));
		else if (i % 10 == 7)
			REQUIRE_OK(symlink("target", name));
		else
			REQUIRE_OK(mknod(name, S_IFREG | 0644, 0));
	}
	printf("created %u entries\n", entries);
	list_once(0, true);
	if (check_failure_count())
		return;

	churn_state = calloc(MAX_CHURN, 1);
	REQUIRE(churn_state, "out of memory");
	REQUIRE(pthread_create(&thread, NULL, churn_main, NULL) == 0, "pthread_create");
	/* wait until the churn runs */
	start = (uint64_t)time(NULL);
	while (__atomic_load_n(&churn_ops, __ATOMIC_ACQUIRE) < 50 && !churn_error &&
	       (uint64_t)time(NULL) < start + 60)
		usleep(1000);
	for (unsigned pass = 1; pass <= PASSES && !check_failure_count() && !churn_error; pass++) {
		before = __atomic_load_n(&churn_ops, __ATOMIC_ACQUIRE);
		list_once(pass, false);
		if (__atomic_load_n(&churn_ops, __ATOMIC_ACQUIRE) != before)
			raced++;
	}
	__atomic_store_n(&churn_stop, true, __ATOMIC_RELEASE);
	pthread_join(thread, NULL);
	REQUIRE(!churn_error, "churn thread: %s", check_errno_name(churn_error));
	REQUIRE(raced > 0, "no listing overlapped a change: the test did not test anything");
	list_once(PASSES + 1, true);
	free(churn_state);
}

int main(int argc, char **argv)
{
	static const struct fs_test tests[] = {
		{"bigdir", test_bigdir},
		{NULL, NULL},
	};
	const char *count = argc > 2 ? argv[2] : getenv("RDMAFS_FS_BIGDIR_ENTRIES");

	if (count && *count) {
		char *end;
		unsigned long v = strtoul(count, &end, 10);

		if (*end || v < 100 || v > 100000) {
			fprintf(stderr, "entries: expected 100..100000, got \"%s\"\n", count);
			return 1;
		}
		entries = (unsigned)v;
	}
	fs_setup(argc, argv, "bigdir");
	return fs_run(tests);
}
