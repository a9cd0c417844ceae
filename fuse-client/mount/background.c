// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rdmafs-fuse: unlinks answered at once and sent in the background
 * (async_dirops, mount_i.h). A window of BG_WINDOW calls; BG_THREADS threads
 * send them, so several are in flight and the service commits them in one
 * group. Nothing here orders calls: ops.c waits (bg_drain(), bg_wait_name())
 * before any call that could see a pending one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mount_i.h"

/* Keeps @err of a call in @parent for the directory's next fsync; the caller holds bg.lock. */
static void bg_keep_error(struct bg *bg, uint64_t parent, int err)
{
	struct bg_error *free_entry = NULL;

	for (unsigned i = 0; i < BG_ERRORS; i++) {
		if (bg->errors[i].err && bg->errors[i].parent == parent)
			return; /* the first one in a directory is the one returned */
		if (!bg->errors[i].err && !free_entry)
			free_entry = &bg->errors[i];
	}
	if (!free_entry) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "background unlink failures in more than %u directories: the one in "
			   "directory %" PRIu64 " (%s) is only logged",
			   BG_ERRORS, parent, strerror(-err));
		return;
	}
	free_entry->parent = parent;
	free_entry->err = err;
}

static void *bg_thread(void *arg)
{
	struct fs *fs = arg;
	struct bg *bg = fs->bg;

	pthread_mutex_lock(&bg->lock);
	for (;;) {
		struct bg_call *call = NULL;
		struct rfs_freed freed;

		/* the oldest first: a drain waits for the calls queued before it */
		for (unsigned i = 0; i < BG_WINDOW; i++)
			if (bg->calls[i].state == BG_QUEUED &&
			    (!call || bg->calls[i].seq < call->seq))
				call = &bg->calls[i];
		if (!call) {
			if (bg->stopping)
				break;
			pthread_cond_wait(&bg->work, &bg->lock);
			continue;
		}
		call->state = BG_SENT;
		pthread_mutex_unlock(&bg->lock);
		bg->run(fs, call);
		if (call->err)
			mount_count(&fs->stats.bg_errors, 1);
		node_unref(fs, call->pin, 0, 1);
		freed = call->freed;
		pthread_mutex_lock(&bg->lock);
		/* ENOENT: another mount removed the name first, as this one was asked to */
		if (call->err && call->err != -ENOENT)
			bg_keep_error(bg, call->parent, call->err);
		call->state = BG_FREE;
		__atomic_sub_fetch(&bg->used, 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&bg->done);
		/* the chunks go after the call is done: no request waits for that */
		pthread_mutex_unlock(&bg->lock);
		rfs_free_data(fs->rfs, &freed);
		pthread_mutex_lock(&bg->lock);
	}
	pthread_mutex_unlock(&bg->lock);
	return NULL;
}

int bg_start(struct fs *fs, bg_run_fn run)
{
	struct bg *bg = calloc(1, sizeof(*bg));
	int err;

	if (!bg)
		return -ENOMEM;
	bg->run = run;
	pthread_mutex_init(&bg->lock, NULL);
	pthread_cond_init(&bg->work, NULL);
	pthread_cond_init(&bg->done, NULL);
	fs->bg = bg;
	for (bg->threads = 0; bg->threads < BG_THREADS; bg->threads++) {
		err = pthread_create(&bg->thread[bg->threads], NULL, bg_thread, fs);
		if (err) {
			bg_stop(fs);
			return -err;
		}
	}
	return 0;
}

void bg_stop(struct fs *fs)
{
	struct bg *bg = fs->bg;

	if (!bg)
		return;
	/* every call queued is sent first: an answered unlink is never dropped here */
	pthread_mutex_lock(&bg->lock);
	bg->stopping = true;
	pthread_cond_broadcast(&bg->work);
	pthread_mutex_unlock(&bg->lock);
	for (unsigned i = 0; i < bg->threads; i++)
		pthread_join(bg->thread[i], NULL);
	for (unsigned i = 0; i < BG_ERRORS; i++)
		if (bg->errors[i].err)
			rdmafs_log(RDMAFS_LOG_WARN,
				   "a background unlink in directory %" PRIu64
				   " failed (%s) and no fsync of it was told",
				   bg->errors[i].parent, strerror(-bg->errors[i].err));
	pthread_cond_destroy(&bg->done);
	pthread_cond_destroy(&bg->work);
	pthread_mutex_destroy(&bg->lock);
	free(bg);
	fs->bg = NULL;
}

int bg_unlink(struct fs *fs, uint64_t parent, const char *name, const struct rfs_cred *cred,
	      struct dir_mark mark)
{
	struct bg *bg = fs->bg;
	struct bg_call *call = NULL;
	size_t len = strlen(name);
	struct node *pin;

	if (len >= sizeof(call->name))
		return -ENAMETOOLONG;
	/* the kernel holds @parent now, not once it forgets: held until the call is done */
	pin = node_ref(fs, parent, 0, 1);
	if (!pin)
		return -ENOMEM;
	pthread_mutex_lock(&bg->lock);
	while (bg->used == BG_WINDOW)
		pthread_cond_wait(&bg->done, &bg->lock);
	for (unsigned i = 0; i < BG_WINDOW && !call; i++)
		if (bg->calls[i].state == BG_FREE)
			call = &bg->calls[i];
	call->state = BG_QUEUED;
	call->seq = ++bg->queued;
	call->parent = parent;
	call->pin = pin;
	memcpy(call->name, name, len + 1);
	call->cred = *cred;
	call->mark = mark;
	call->err = 0;
	memset(&call->freed, 0, sizeof(call->freed));
	__atomic_add_fetch(&bg->used, 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&bg->work);
	pthread_mutex_unlock(&bg->lock);
	mount_count(&fs->stats.bg_unlinks, 1);
	return 0;
}

/* A call of @bg queued at or before @seq not yet done; the caller holds bg.lock. */
static bool bg_pending_before(struct bg *bg, uint64_t seq)
{
	for (unsigned i = 0; i < BG_WINDOW; i++)
		if (bg->calls[i].state != BG_FREE && bg->calls[i].seq <= seq)
			return true;
	return false;
}

bool bg_busy(struct fs *fs)
{
	return fs->bg && __atomic_load_n(&fs->bg->used, __ATOMIC_ACQUIRE);
}

void bg_drain(struct fs *fs)
{
	struct bg *bg = fs->bg;
	uint64_t seq;

	if (!bg_busy(fs))
		return;
	mount_count(&fs->stats.bg_waits, 1);
	/* the calls queued before this request, not those after: unlinks go on meanwhile */
	pthread_mutex_lock(&bg->lock);
	seq = bg->queued;
	while (bg_pending_before(bg, seq))
		pthread_cond_wait(&bg->done, &bg->lock);
	pthread_mutex_unlock(&bg->lock);
}

/* A call of @bg on (@parent, @name) not yet done; the caller holds bg.lock. */
static bool bg_pending(struct bg *bg, uint64_t parent, const char *name)
{
	for (unsigned i = 0; i < BG_WINDOW; i++)
		if (bg->calls[i].state != BG_FREE && bg->calls[i].parent == parent &&
		    !strcmp(bg->calls[i].name, name))
			return true;
	return false;
}

void bg_wait_name(struct fs *fs, uint64_t parent, const char *name)
{
	struct bg *bg = fs->bg;
	bool waited = false;

	if (!bg_busy(fs))
		return;
	pthread_mutex_lock(&bg->lock);
	while (bg_pending(bg, parent, name)) {
		waited = true;
		pthread_cond_wait(&bg->done, &bg->lock);
	}
	pthread_mutex_unlock(&bg->lock);
	if (waited)
		mount_count(&fs->stats.bg_waits, 1);
}

bool bg_pending_in(struct fs *fs, uint64_t parent, const struct bg_call *self)
{
	struct bg *bg = fs->bg;
	bool pending = false;

	pthread_mutex_lock(&bg->lock);
	for (unsigned i = 0; i < BG_WINDOW && !pending; i++)
		pending = &bg->calls[i] != self && bg->calls[i].state != BG_FREE &&
			  bg->calls[i].parent == parent;
	pthread_mutex_unlock(&bg->lock);
	return pending;
}

int bg_take_error(struct fs *fs, uint64_t parent)
{
	struct bg *bg = fs->bg;
	int err = 0;

	if (!bg)
		return 0;
	pthread_mutex_lock(&bg->lock);
	for (unsigned i = 0; i < BG_ERRORS && !err; i++) {
		if (bg->errors[i].err && bg->errors[i].parent == parent) {
			err = bg->errors[i].err;
			bg->errors[i].err = 0;
		}
	}
	pthread_mutex_unlock(&bg->lock);
	return err;
}
