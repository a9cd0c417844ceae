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

static void *bg_thread(void *arg)
{
	struct fs *fs = arg;
	struct bg *bg = fs->bg;

	pthread_mutex_lock(&bg->lock);
	for (;;) {
		struct bg_call *call = NULL;

		for (unsigned i = 0; i < BG_WINDOW && !call; i++)
			if (bg->calls[i].state == BG_QUEUED)
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
		pthread_mutex_lock(&bg->lock);
		/* ENOENT: another mount removed the name first, as this one was asked to */
		if (call->err && call->err != -ENOENT && !bg->err) {
			bg->err = call->err;
			bg->err_parent = call->parent;
		}
		call->state = BG_FREE;
		__atomic_sub_fetch(&bg->used, 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&bg->done);
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
	if (bg->err)
		rdmafs_log(RDMAFS_LOG_WARN,
			   "a background unlink in directory %" PRIu64
			   " failed (%s) and no fsync of it was told",
			   bg->err_parent, strerror(-bg->err));
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

	if (len >= sizeof(call->name))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&bg->lock);
	while (bg->used == BG_WINDOW)
		pthread_cond_wait(&bg->done, &bg->lock);
	for (unsigned i = 0; i < BG_WINDOW && !call; i++)
		if (bg->calls[i].state == BG_FREE)
			call = &bg->calls[i];
	call->state = BG_QUEUED;
	call->parent = parent;
	memcpy(call->name, name, len + 1);
	call->cred = *cred;
	call->mark = mark;
	call->err = 0;
	__atomic_add_fetch(&bg->used, 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&bg->work);
	pthread_mutex_unlock(&bg->lock);
	mount_count(&fs->stats.bg_unlinks, 1);
	return 0;
}

void bg_drain(struct fs *fs)
{
	struct bg *bg = fs->bg;

	if (!bg || !__atomic_load_n(&bg->used, __ATOMIC_ACQUIRE))
		return;
	mount_count(&fs->stats.bg_waits, 1);
	pthread_mutex_lock(&bg->lock);
	while (bg->used)
		pthread_cond_wait(&bg->done, &bg->lock);
	pthread_mutex_unlock(&bg->lock);
}

/* A call of @bg on (@parent, @name) not yet answered; the caller holds bg.lock. */
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

	if (!bg || !__atomic_load_n(&bg->used, __ATOMIC_ACQUIRE))
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

int bg_take_error(struct fs *fs, uint64_t parent)
{
	struct bg *bg = fs->bg;
	int err = 0;

	if (!bg)
		return 0;
	pthread_mutex_lock(&bg->lock);
	if (bg->err && bg->err_parent == parent) {
		err = bg->err;
		bg->err = 0;
	}
	pthread_mutex_unlock(&bg->lock);
	return err;
}
