/* SPDX-License-Identifier: Apache-2.0 */
/* populate=background: complete returns once every rank has mapped, and a
 * thread of the owner's populates the copy in steps, with populate_threads
 * workers a step, asking between steps whether destroy wants it to stop.
 * Every rank can watch the copy become resident (the backend counts the
 * pages of its file, whoever faulted them) and wait for it; the owner's
 * wait also returns the work's error, which the log callback has reported
 * already. A page an engine touches first is simply faulted then. */
#define _GNU_SOURCE /* pthread_sigmask */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "background.h"
#include "backend/backend.h"
#include "object.h"
#include "os/host.h"
#include "os/populate.h"

/* Small enough that destroy waits at most one step, large enough that the
 * workers' start costs nothing next to it. */
#define BACKGROUND_STEP (64ull << 20)
#define WAIT_POLL_MS 20

struct sseg_background {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int joinable; /* the thread runs or has not been joined */
	int stop;     /* destroy asked for the end (under lock) */
	int finished; /* under lock */
	int rc;       /* the work's result, once finished */
	char why[256];
	uint64_t done; /* bytes made resident by the work */
	double started, seconds; /* seconds: the work's, once finished (under lock) */
};

/* The work's steps. sseg_os_populate's errors are per step; the thread's
 * own sentence (thread-local) is copied out for the waiting caller. */
static void *populate_in_background(void *arg)
{
	struct sseg *seg = arg;
	struct sseg_background *bg = seg->background;
	int threads = seg->opts.populate_threads, stop = 0, rc = 0;

	/* The caller's interrupt check is not asked here: it belongs to the
	 * thread that waits (a Python binding takes the GIL in it). */
	if (threads <= 0)
		threads = sseg_os_cpu_count() < 4 ? sseg_os_cpu_count() : 4;

	while (!rc && !stop && bg->done < seg->mapped_size) {
		uint64_t n = seg->mapped_size - bg->done;

		if (n > BACKGROUND_STEP)
			n = BACKGROUND_STEP;
		rc = sseg_os_populate(seg->base, bg->done, n, seg->page_size, threads,
				      !seg->readonly);
		pthread_mutex_lock(&bg->lock);
		if (!rc)
			bg->done += n;
		stop = bg->stop;
		pthread_mutex_unlock(&bg->lock);
	}
	if (rc)
		sseg_log(SSEG_LOG_ERROR, "segment '%s': background population stopped with %llu of "
			 "%llu bytes resident: %s", seg->name, (unsigned long long)bg->done,
			 (unsigned long long)seg->mapped_size, sseg_last_error());
	pthread_mutex_lock(&bg->lock);
	bg->rc = rc;
	bg->seconds = sseg_now() - bg->started;
	if (rc)
		snprintf(bg->why, sizeof(bg->why), "%s", sseg_last_error());
	bg->finished = 1;
	pthread_cond_broadcast(&bg->cond);
	pthread_mutex_unlock(&bg->lock);
	return NULL;
}

/* The wait's polls run on the monotonic clock, as every deadline here. */
static void init_cond(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

static struct timespec in_ms(int ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += (long)ms * 1000000L;
	t.tv_sec += t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return t;
}

static bool wanted(const struct sseg *seg)
{
	return seg->is_owner && seg->opts.populate == SSEG_POPULATE_BACKGROUND &&
	       !(seg->ops->caps & SSEG_CAP_PINNED);
}

/* The thread blocks every signal: a process's signals (Ctrl-C) stay with
 * the threads that expect them. */
static int start_thread(struct sseg *seg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&seg->background->thread, NULL, populate_in_background, seg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return sseg_err(-err, "segment '%s': cannot start background population: %s",
				seg->name, strerror(err));
	seg->background->joinable = 1;
	return 0;
}

int sseg_background_start(struct sseg *seg)
{
	struct sseg_background *bg;
	int rc;

	if (!wanted(seg))
		return 0;
	bg = calloc(1, sizeof(*bg));
	if (!bg)
		return sseg_err(-ENOMEM, "out of memory");
	pthread_mutex_init(&bg->lock, NULL);
	init_cond(&bg->cond);
	seg->background = bg;
	bg->started = sseg_now();
	rc = start_thread(seg);
	if (rc)
		sseg_background_stop(seg);
	return rc;
}

void sseg_background_stop(struct sseg *seg)
{
	struct sseg_background *bg = seg->background;

	if (!bg)
		return;
	if (bg->joinable) {
		pthread_mutex_lock(&bg->lock);
		bg->stop = 1;
		pthread_mutex_unlock(&bg->lock);
		pthread_join(bg->thread, NULL);
	}
	pthread_cond_destroy(&bg->cond);
	pthread_mutex_destroy(&bg->lock);
	free(bg);
	seg->background = NULL;
}

void sseg_background_forget_in_child(struct sseg *seg)
{
	struct sseg_background *bg = seg->background;

	/* The parent's thread, lock and condition are not this process's; what
	 * the child may still ask (progress, destroy) needs none of them. */
	if (bg) {
		seg->background = NULL;
		free(bg);
	}
}

double sseg_background_seconds(const struct sseg *seg)
{
	struct sseg_background *bg = seg->background;
	double s;

	pthread_mutex_lock(&bg->lock);
	s = bg->finished ? bg->seconds : sseg_now() - bg->started;
	pthread_mutex_unlock(&bg->lock);
	return s;
}

/* ---- the public calls ---- */

int sseg_populate_progress(const sseg_t *seg, uint64_t *resident, uint64_t *total)
{
	uint64_t bytes = 0;
	int rc;

	if (!seg || !seg->completed)
		return sseg_err(-EINVAL, "sseg_populate_progress needs a completed segment");
	rc = sseg_backend_resident(seg, &bytes);
	if (rc)
		return rc;
	if (bytes > seg->mapped_size)
		bytes = seg->mapped_size;
	if (resident)
		*resident = bytes;
	if (total)
		*total = seg->mapped_size;
	return 0;
}

static int wait_step(const struct sseg *seg, double deadline)
{
	double left = deadline - sseg_now();

	if (seg->opts.interrupt && seg->opts.interrupt(seg->opts.interrupt_ctx))
		return sseg_err(-EINTR, "interrupted while waiting for segment '%s' to be resident",
				seg->name);
	if (deadline >= 0 && left <= 0)
		return -ETIMEDOUT;
	return 0;
}

/* The owner: its own work's end. */
static int wait_work(struct sseg *seg, double deadline)
{
	struct sseg_background *bg = seg->background;
	int rc = 0;

	pthread_mutex_lock(&bg->lock);
	while (!bg->finished && !rc) {
		struct timespec until = in_ms(WAIT_POLL_MS);

		pthread_cond_timedwait(&bg->cond, &bg->lock, &until);
		if (!bg->finished) {
			pthread_mutex_unlock(&bg->lock);
			rc = wait_step(seg, deadline);
			pthread_mutex_lock(&bg->lock);
		}
	}
	if (bg->finished && bg->rc)
		rc = sseg_err(bg->rc, "%s", bg->why);
	pthread_mutex_unlock(&bg->lock);
	return rc;
}

/* Any other rank: the file's pages, counted. */
static int wait_resident(struct sseg *seg, double deadline)
{
	uint64_t resident, total;
	int rc;

	for (;;) {
		rc = sseg_populate_progress(seg, &resident, &total);
		if (rc || resident >= total)
			return rc;
		rc = wait_step(seg, deadline);
		if (rc)
			return rc;
		nanosleep(&(struct timespec){ .tv_nsec = WAIT_POLL_MS * 1000000L }, NULL);
	}
}

int sseg_populate_wait(sseg_t *seg, int timeout_ms)
{
	double deadline = timeout_ms < 0 ? -1 : sseg_now() + timeout_ms / 1000.0;
	uint64_t resident = 0, total = 0;
	int rc;

	sseg_err_clear();
	if (!seg || !seg->completed)
		return sseg_err(-EINVAL, "sseg_populate_wait needs a completed segment");
	if (seg->opts.populate != SSEG_POPULATE_BACKGROUND)
		return 0;
	rc = seg->background ? wait_work(seg, deadline) : wait_resident(seg, deadline);
	if (rc != -ETIMEDOUT)
		return rc;
	sseg_populate_progress(seg, &resident, &total);
	return sseg_err(-ETIMEDOUT, "segment '%s': %llu of %llu bytes resident after %d ms",
			seg->name, (unsigned long long)resident, (unsigned long long)total,
			timeout_ms);
}
