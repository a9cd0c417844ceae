/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy internals: one copy engine over two "sides" (a local tree and
 * an rdmafs tree) that implement the same ops table, so the engine never asks
 * which direction it copies.
 *
 * Errors: 0 or a negative errno everywhere.
 */
#ifndef RDMAFS_COPY_I_H
#define RDMAFS_COPY_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"

#define CP_NAME_MAX 255
/* Prefix of the temporary names a file is written under before its rename. */
#define CP_TMP_PREFIX ".rdmafs-copy."
#define CP_TMP_SUFFIX ".tmp"

/* What the copy needs of a file's attributes, on either side. */
struct cp_attr {
	uint32_t mode; /* type and permission bits, as st_mode */
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t size;
	uint64_t blocks; /* 512-byte units */
	uint64_t dev;	 /* local: st_dev; rdmafs: 0 */
	uint64_t ino;	 /* local: st_ino; rdmafs: the inode */
	uint64_t rdev;
	struct timespec atime, mtime;
};

/*
 * A place on one side: @path always (messages, and every local call); @ino
 * on rdmafs (0 while unknown). Owned by whoever holds it; cp_loc_free().
 */
struct cp_loc {
	char *path;
	uint64_t ino;
};

struct cp_dirent {
	char *name;
	struct cp_attr attr;
};

/* A listing: entries sorted by name (strcmp), so cp_dir_find() can bisect. */
struct cp_dir {
	struct cp_dirent *ents;
	size_t count;
};

/* An open file on either side. */
struct cp_file {
	int fd;		       /* local */
	uint64_t ino;	       /* rdmafs */
	uint64_t handle;       /* rdmafs: the service's handle */
	struct rfs_file *file; /* rdmafs: its layout, size and writes, kept by the client core */
};

struct cp_side;

/*
 * The operations a side implements. Entries are named by (parent dir, name)
 * when they are created, by their cp_loc otherwise. Nothing follows a final
 * symbolic link.
 */
struct cp_side_ops {
	/* lstat of @loc; fills @loc->ino on rdmafs */
	int (*stat)(struct cp_side *s, struct cp_loc *loc, struct cp_attr *a);
	/* the entries of directory @dir with their attributes */
	int (*list)(struct cp_side *s, const struct cp_loc *dir, struct cp_dir *out);
	int (*open_read)(struct cp_side *s, const struct cp_loc *loc, struct cp_file *f);
	int (*read)(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len, void *buf);
	/* the next data extent [*start, *end) at or after @off; -ENXIO: none */
	int (*data_extent)(struct cp_side *s, struct cp_file *f, uint64_t off, uint64_t size,
			   uint64_t *start, uint64_t *end);
	/* creates a regular file exclusively, open for writing; *@ino on rdmafs */
	int (*create)(struct cp_side *s, const struct cp_loc *dir, const char *name,
		      const struct cp_attr *a, struct cp_file *f, uint64_t *ino);
	int (*write)(struct cp_side *s, struct cp_file *f, uint64_t off, size_t len,
		     const void *buf);
	/* after writes: size @size (rdmafs: data durable, COMMIT + UPDATE_SIZE) */
	int (*finish)(struct cp_side *s, struct cp_file *f, uint64_t size);
	/*
	 * at the end of the copy: everything it wrote under @root is on disk
	 * (rdmafs: SYNC, the metadata service's flush; local: syncfs)
	 */
	int (*sync)(struct cp_side *s, const struct cp_loc *root);
	/* closes (rdmafs: RELEASE); never fails the copy */
	void (*close)(struct cp_side *s, struct cp_file *f);
	int (*readlink)(struct cp_side *s, const struct cp_loc *loc, char *buf, size_t size);
	/* the names, NUL-separated, malloc()ed into *@names (NULL when none) */
	int (*listxattr)(struct cp_side *s, const struct cp_loc *loc, char **names, size_t *len);
	int (*getxattr)(struct cp_side *s, const struct cp_loc *loc, const char *name, void **value,
			size_t *len);
	int (*setxattr)(struct cp_side *s, const struct cp_loc *loc, const char *name,
			const void *value, size_t len);
	int (*mkdir)(struct cp_side *s, const struct cp_loc *dir, const char *name,
		     const struct cp_attr *a, uint64_t *ino);
	int (*symlink)(struct cp_side *s, const struct cp_loc *dir, const char *name,
		       const char *target, const struct cp_attr *a, uint64_t *ino);
	int (*mknod)(struct cp_side *s, const struct cp_loc *dir, const char *name,
		     const struct cp_attr *a, uint64_t *ino);
	/* a new name @name in @dir for the existing file @target */
	int (*link)(struct cp_side *s, const struct cp_loc *target, const struct cp_loc *dir,
		    const char *name);
	int (*rename)(struct cp_side *s, const struct cp_loc *dir, const char *from,
		      const char *to);
	int (*unlink)(struct cp_side *s, const struct cp_loc *dir, const char *name);
	/* mode (not for symlinks), owner (@owner), atime and mtime of @loc */
	int (*set_attr)(struct cp_side *s, const struct cp_loc *loc, const struct cp_attr *a,
			bool owner);
};

struct cp_side {
	const struct cp_side_ops *ops;
	struct rfs *rfs;      /* rdmafs side */
	struct rfs_cred cred; /* rdmafs side: our credentials */
	bool is_rdmafs;
	bool owner; /* files are created with the source's uid/gid (root) */
};

/* ---- sides (side_local.c, side_rdmafs.c) ---------------------------------------- */

void cp_side_local_init(struct cp_side *s);
/* @fs stays owned by the caller. */
void cp_side_rdmafs_init(struct cp_side *s, struct rfs *fs);
/* Resolves an absolute path inside rdmafs to its inode (lstat of the last component). */
int cp_rdmafs_resolve(struct cp_side *s, struct cp_loc *loc, struct cp_attr *a);

/* ---- helpers (util.c) ------------------------------------------------------------ */

/* "@dir/@name" (or "/@name" when @dir is "/"), malloc()ed; NULL on ENOMEM. */
char *cp_path_join(const char *dir, const char *name);
void cp_loc_free(struct cp_loc *loc);
void cp_dir_free(struct cp_dir *d);
void cp_dir_sort(struct cp_dir *d);
const struct cp_dirent *cp_dir_find(const struct cp_dir *d, const char *name);
bool cp_is_tmp_name(const char *name);
/* CRC-32C of @len bytes without the initial and final inversion (linear). */
uint32_t cp_crc_raw(const void *buf, size_t len);
/* The raw CRC of a message followed by @len zero bytes, given the raw CRC of the message. */
uint32_t cp_crc_shift(uint32_t crc, uint64_t len);
/* The standard CRC-32C of a @len-byte message from its raw CRC. */
uint32_t cp_crc_finish(uint32_t raw, uint64_t len);
const char *cp_strerror(int err);
/* CLOCK_MONOTONIC in seconds. */
double cp_now(void);

/* ---- the terminal (term.c) ----------------------------------------------------------- */

/* The columns of the terminal @fd is, or 0 when it is none (a file, a pipe). */
unsigned cp_term_width(int fd);
/*
 * Writes @text to @out in lines of fewer than @width columns, broken at
 * spaces (a word longer than a line is cut), continuation lines indented by
 * two; @width 0: as it is. Ends with a newline.
 */
void cp_term_wrap(FILE *out, unsigned width, const char *text);
/*
 * Writes the command @words as one shell command line, each word quoted
 * where the shell needs it, indented by two. With @width (a terminal), in
 * lines of fewer than @width columns joined by backslash-newline, which the
 * shell removes: pasted whole, it runs @words exactly, even where a long
 * word had to be cut. Ends with a newline.
 */
void cp_term_command(FILE *out, unsigned width, char *const *words, size_t count);

/* ---- the engine (engine.c) -------------------------------------------------------- */

struct cp_options {
	unsigned jobs;	      /* file workers */
	unsigned inflight;    /* extra threads that only move pieces of large files */
	size_t piece_size;    /* bytes per read/write call of a large file */
	bool verify;	      /* read back and compare a CRC-32C */
	bool verify_existing; /* a complete-looking destination is checked by CRC */
	bool quiet;
	bool verbose;
	bool owner;	  /* preserve uid/gid (root) */
	uint64_t bwlimit; /* bytes read from the source per second at most; 0: no limit */
};

/* Counters, updated atomically by the workers, read by the progress thread. */
struct cp_stats {
	uint64_t files_total, files_done;
	uint64_t bytes_total, bytes_done;
	uint64_t files_copied, bytes_copied;
	uint64_t dirs, links, symlinks, specials, skipped, failed;
	uint64_t verified;
	int walk_done;
};

/*
 * Copies @src (on side @from) to @dst (on side @to). @dst names what the
 * copy becomes; if @dst is an existing directory and @src is not the same
 * kind of thing, the copy goes inside it as the basename of @src (cp's rule).
 * Returns 0 when everything copied, -EIO when some files failed (each one was
 * reported on stderr), -EINTR when cp_stop() stopped it, or the error that
 * stopped the whole copy.
 */
int cp_run(const struct cp_options *opts, struct cp_side *from, struct cp_loc *src,
	   struct cp_side *to, struct cp_loc *dst, struct cp_stats *stats);
/*
 * Stops the cp_run() of this process, now or as soon as it starts (any
 * thread; not async-signal-safe): nothing new is started, the files under
 * way stop after the pieces in flight and their temporaries are removed
 * (they count neither as done nor as failed), and directory attributes are
 * not set. Files renamed into place stay: a later run of the same copy
 * skips them and copies the rest.
 */
void cp_stop(void);

/*
 * Prints a line on stderr, clearing a progress bar first and wrapped to the
 * terminal's width (thread-safe).
 */
__attribute__((format(printf, 1, 2))) void cp_msg(const char *fmt, ...);
/*
 * The progress display (main.c) tells cp_msg() whether a bar is on stderr
 * and how wide the terminal is (0: no terminal, no wrapping).
 */
void cp_msg_set_term(bool bar, unsigned width);
/* Runs @fn(@arg) with cp_msg()'s lock held, so no message cuts into its output. */
void cp_msg_locked(void (*fn)(void *arg), void *arg);

#endif /* RDMAFS_COPY_I_H */
