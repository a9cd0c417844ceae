/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target: the daemon's configuration, an INI file (inih) and the
 * command-line flags that override it.
 *
 * Input: the first byte chooses the entry point. Even: the bytes after it are
 * an INI file read by config_parse_file(), from memory. Odd: they are command
 * line arguments separated by NUL bytes up to an empty one (two NULs in a
 * row), then an INI file; config_load() gets "rdmafs-daemon --config FILE"
 * and those arguments, with FILE a memfd holding the INI part, so the file
 * really is opened by name and flags really override it. Every loaded
 * configuration is freed again (LeakSanitizer checks that nothing is lost).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "daemon_i.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 16

static int memfd = -1;
static char memfd_path[64];

static void parse_memory(const uint8_t *data, size_t size)
{
	struct daemon_config cfg = {0};
	FILE *f;

	f = fmemopen((void *)data, size, "r");
	if (!f)
		return; /* fmemopen refuses a size of 0 */
	config_parse_file(&cfg, f, "fuzz.ini");
	fclose(f);
	config_free(&cfg);
}

static void load_with_flags(const uint8_t *data, size_t size)
{
	char *argv[MAX_ARGS + 4], *copy;
	struct daemon_config cfg;
	size_t off = 0;
	int argc = 0;

	/* The arguments need their own NUL-terminated strings. */
	copy = malloc(size + 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = "rdmafs-daemon";
	argv[argc++] = "--config";
	argv[argc++] = memfd_path;
	while (off < size && copy[off] != '\0' && argc < MAX_ARGS + 3) {
		argv[argc++] = copy + off;
		off += strlen(copy + off) + 1;
	}
	argv[argc] = NULL;
	if (off < size && copy[off] == '\0')
		off++;
	if (ftruncate(memfd, 0) ||
	    pwrite(memfd, data + off, size - off, 0) != (ssize_t)(size - off))
		abort();
	/* getopt keeps its position in globals: 0 makes glibc start over. */
	optind = 0;
	config_load(&cfg, argc, argv);
	config_free(&cfg);
	free(copy);
}

/*
 * The daemon reports every refused line and flag on stderr (and --help on
 * stdout), which would bury libFuzzer's output under megabytes:
 * -close_fd_mask=3 sends both to /dev/null, while libFuzzer and the
 * sanitizers keep a copy of stderr for their own reports. Put first, so a
 * later flag overrides it.
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char flag[] = "-close_fd_mask=3";
	char **args = calloc((size_t)*argc + 2, sizeof(*args));

	if (!args)
		abort();
	args[0] = (*argv)[0];
	args[1] = flag;
	for (int i = 1; i < *argc; i++)
		args[i + 1] = (*argv)[i];
	*argv = args;
	(*argc)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (memfd < 0) {
		memfd = memfd_create("fuzz-config", MFD_CLOEXEC);
		if (memfd < 0)
			abort();
		snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
		opterr = 0; /* getopt's own complaints: config_load() prints usage anyway */
	}
	if (size < 1)
		return 0;
	if (data[0] & 1)
		load_with_flags(data + 1, size - 1);
	else
		parse_memory(data + 1, size - 1);
	return 0;
}
