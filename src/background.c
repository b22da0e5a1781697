/* SPDX-License-Identifier: Apache-2.0 */
/* populate=background: complete returns once every rank has mapped, and
 * populate_threads workers of the owner's populate the copy, each its
 * slice in steps, asking between steps whether destroy wants them to stop
 * and whether memory still has room for the next step. Every rank can
 * watch the copy become resident (the backend counts the pages of its
 * file, whoever faulted them) and wait for it; the owner's wait also
 * returns the work's error, which the log callback has reported already,
 * and a peer's wait ends with the owner's word on its work, or when the
 * owner is gone (background_link.c). A page an engine touches first is
 * simply faulted then, and charged to the memory cgroup of whoever
 * touched it. */
#define _GNU_SOURCE /* pthread_sigmask */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "background.h"
#include "background_link.h"
#include "fdchannel.h"
#include "backend/backend.h"
#include "segment_types.h"
#include "os/host.h"
#include "os/populate.h"
#include "pages.h"

/* Small enough that destroy waits at most one step, large enough that the
 * workers' start costs nothing next to it. */
#define BACKGROUND_STEP (64ull << 20)
#define WAIT_POLL_MS 20
#define BACKGROUND_WORKERS 64

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
	uint64_t inflight; /* bytes of the steps running now (under lock) */
	double started, seconds; /* seconds: the work's, once finished (under lock) */
	int *watchers; /* the local peers' connections, told how the work ended */
	int nwatchers;
};

/* One worker's slice, in steps; the first error stops every worker. The
 * sentence is thread-local: the failing worker copies it out. */
struct worker {
	struct sseg *seg;
	uint64_t start, end;
	int threads; /* workers in all; worker 0 starts the others */
	pthread_t tid;
};

static void record_failure(struct sseg_background *bg, int rc)
{
	if (rc && !bg->rc) {
		bg->rc = rc;
		snprintf(bg->why, sizeof(bg->why), "%s", sseg_last_error());
	}
}

static bool is_hugetlb(const struct sseg *seg)
{
	return seg->pages == SSEG_PAGES_HUGETLB_2M || seg->pages == SSEG_PAGES_HUGETLB_1G;
}

/* Before each step: room for it beside the steps other workers run now,
 * in MemAvailable and this process's memory cgroup, so that memory taken
 * since create stops the work with -ENOMEM rather than the OOM killer's
 * signal. HugeTLB pages were reserved by mmap in create. */
static bool step_fits(struct sseg *seg, uint64_t off, uint64_t n)
{
	struct sseg_background *bg = seg->background;
	char what[128];
	int rc = sseg_fault("background_step");
	bool go;

	snprintf(what, sizeof(what), "the background population's next step (%llu bytes at "
		 "offset %llu)", (unsigned long long)n, (unsigned long long)off);
	pthread_mutex_lock(&bg->lock);
	if (!rc && !is_hugetlb(seg))
		rc = sseg_memory_fits(n + bg->inflight, what);
	record_failure(bg, rc);
	go = !bg->stop && !bg->rc;
	if (go)
		bg->inflight += n;
	pthread_mutex_unlock(&bg->lock);
	return go;
}

static bool step_done(struct sseg_background *bg, uint64_t n, int rc)
{
	bool go;

	pthread_mutex_lock(&bg->lock);
	bg->inflight -= n;
	record_failure(bg, rc);
	if (!rc)
		bg->done += n;
	go = !bg->stop && !bg->rc;
	pthread_mutex_unlock(&bg->lock);
	return go;
}

static void *populate_slice(void *arg)
{
	struct worker *w = arg;
	struct sseg *seg = w->seg;
	uint64_t off = w->start;
	bool go = true;

	while (go && off < w->end) {
		uint64_t n = w->end - off < BACKGROUND_STEP ? w->end - off : BACKGROUND_STEP;
		int rc;

		if (!step_fits(seg, off, n))
			break;
		rc = sseg_os_populate(seg->base, off, n, seg->page_size, 1, !seg->readonly);
		go = step_done(seg->background, n, rc);
		off += n;
	}
	return NULL;
}

/* Slices of whole pages, one a worker; the caller's interrupt check is not
 * asked here: it belongs to the thread that waits (a Python binding takes
 * the GIL in it). */
static int start_workers(struct sseg *seg, struct worker *w, int n)
{
	uint64_t pages = seg->mapped_size / seg->page_size;
	int started = 1;

	for (int i = 0; i < n; i++)
		w[i] = (struct worker){ seg, pages * (uint64_t)i / (uint64_t)n * seg->page_size,
					pages * (uint64_t)(i + 1) / (uint64_t)n * seg->page_size,
					n, 0 };
	for (; started < n; started++)
		if (pthread_create(&w[started].tid, NULL, populate_slice, &w[started]))
			break;
	return started;
}

/* The peers' word: the work's error, destroy's stop, or 0 when done. */
static void tell_peers(struct sseg *seg)
{
	struct sseg_background *bg = seg->background;
	int rc = bg->rc;
	const char *why = bg->why;

	if (!rc && bg->done < seg->mapped_size) {
		rc = -ECANCELED;
		why = "it destroyed the segment first";
	}
	sseg_link_tell(bg->watchers, bg->nwatchers, rc, why);
	bg->nwatchers = 0;
}

static void *populate_in_background(void *arg)
{
	struct sseg *seg = arg;
	struct sseg_background *bg = seg->background;
	int threads = seg->opts.populate_threads, started;
	struct worker w[BACKGROUND_WORKERS];

	if (threads <= 0)
		threads = sseg_os_cpu_count() < 4 ? sseg_os_cpu_count() : 4;
	if (threads > BACKGROUND_WORKERS)
		threads = BACKGROUND_WORKERS;
	if ((uint64_t)threads > seg->mapped_size / seg->page_size)
		threads = 1;
	started = start_workers(seg, w, threads);
	populate_slice(&w[0]);
	/* A worker that could not start leaves its slice to this thread. */
	for (int i = started; i < threads; i++)
		populate_slice(&w[i]);
	for (int i = 1; i < started; i++)
		pthread_join(w[i].tid, NULL);
	/* No lock held while logging: the callback may ask about the segment. */
	if (bg->rc)
		sseg_log(SSEG_LOG_ERROR, "segment '%s': background population stopped with %llu of "
			 "%llu bytes resident: %s", seg->name, (unsigned long long)bg->done,
			 (unsigned long long)seg->mapped_size, bg->why);
	tell_peers(seg);
	pthread_mutex_lock(&bg->lock);
	bg->seconds = sseg_now() - bg->started;
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
	return seg->is_owner && sseg_link_wanted(seg);
}

/* The thread blocks every signal: a process's signals (Ctrl-C) stay with
 * the threads that expect them. */
static int start_thread(struct sseg *seg)
{
	sigset_t all, old;
	int err;

	err = -sseg_fault("background_thread");
	if (!err) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		err = pthread_create(&seg->background->thread, NULL, populate_in_background, seg);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (err)
		return sseg_err(-err, "cannot start background population: %s", strerror(err));
	seg->background->joinable = 1;
	return 0;
}

/* A page is charged to the memory cgroup of the first rank to touch it,
 * and with background population that may be a peer: a peer whose cgroup
 * cannot hold the segment is refused in create, as the owner is, rather
 * than OOM-killed at its first writes. The page kind is the owner's
 * decision, which the same host's pool and knobs give here too. */
int sseg_background_check_peer(const struct sseg *seg)
{
	struct sseg_page_choice choice;
	char what[160];
	uint64_t span;

	if (seg->is_owner || !sseg_link_wanted(seg) ||
	    sseg_backend_choose_pages(seg->ops, seg->opts.pages, seg->size, &choice))
		return 0;
	sseg_err_clear(); /* a refused choice is the owner's to report */
	if (choice.pages == SSEG_PAGES_HUGETLB_2M || choice.pages == SSEG_PAGES_HUGETLB_1G ||
	    sseg_round_up(seg->size, choice.page_size, &span))
		return 0;
	snprintf(what, sizeof(what), "rank %d, whose first touch of a page not yet populated is "
		 "charged to it (populate=background; populate=owner charges the owner),",
		 seg->opts.rank);
	return sseg_memory_fits(span, what);
}

/* The peers learn at once that no work will end their wait. */
static int not_started(struct sseg *seg, int *conns, int n, int rc)
{
	sseg_link_tell(conns, n, rc, sseg_last_error());
	free(conns);
	return rc;
}

int sseg_background_start(struct sseg *seg)
{
	struct sseg_background *bg;
	int *conns, n, rc;

	if (!wanted(seg))
		return 0;
	conns = sseg_channel_take_peers(seg, &n);
	bg = calloc(1, sizeof(*bg));
	if (!bg)
		return not_started(seg, conns, n,
				   sseg_err(-ENOMEM, "out of memory for background population"));
	pthread_mutex_init(&bg->lock, NULL);
	init_cond(&bg->cond);
	seg->background = bg;
	bg->started = sseg_now();
	bg->watchers = conns;
	bg->nwatchers = n;
	rc = start_thread(seg);
	if (rc) {
		/* The owner's wait returns this, as it would the work's error. */
		bg->watchers = NULL;
		bg->nwatchers = 0;
		bg->finished = 1;
		record_failure(bg, rc);
		return not_started(seg, conns, n, rc);
	}
	return 0;
}

void sseg_background_stop(struct sseg *seg)
{
	struct sseg_background *bg = seg->background;

	sseg_link_release(seg);
	if (!bg)
		return;
	if (bg->joinable) {
		pthread_mutex_lock(&bg->lock);
		bg->stop = 1;
		pthread_mutex_unlock(&bg->lock);
		pthread_join(bg->thread, NULL);
	}
	/* The thread told the peers and closed their connections. */
	free(bg->watchers);
	pthread_cond_destroy(&bg->cond);
	pthread_mutex_destroy(&bg->lock);
	free(bg);
	seg->background = NULL;
}

void sseg_background_forget_in_child(struct sseg *seg)
{
	struct sseg_background *bg = seg->background;

	sseg_link_forget_in_child(seg);
	/* The parent's thread, lock and condition are not this process's; what
	 * the child may still ask (progress, destroy) needs none of them. Its
	 * copies of the peers' connections would keep them open past the
	 * owner's death. */
	if (bg) {
		for (int i = 0; i < bg->nwatchers; i++)
			if (bg->watchers[i] >= 0)
				close(bg->watchers[i]);
		seg->background = NULL;
		free(bg->watchers);
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

/* Any other rank: the file's pages, counted, until the owner's word (or
 * its channel's close) says that its work ended. */
static int wait_resident(struct sseg *seg, double deadline)
{
	uint64_t resident, total;
	int rc;

	for (;;) {
		rc = sseg_populate_progress(seg, &resident, &total);
		if (rc || resident >= total)
			return rc;
		if (sseg_link_outcome(seg, &rc))
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
