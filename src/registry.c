/* SPDX-License-Identifier: Apache-2.0 */
/* The process-wide registry: every segment not yet freed (so that a forked
 * child lets go of their descriptors), the live ones (exact-range lookup,
 * pins) and those whose teardown kept failing (retried on later creates).
 * Once a segment is on the pending list only the registry touches it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "background.h"
#include "backend/backend.h"
#include "fdchannel.h"
#include "layout.h"
#include "segment_types.h"
#include "registry.h"
#include "tag.h"
#include "release.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static struct sseg *any;     /* next_any: every segment not yet freed */
static struct sseg *live;    /* next: completed, not being destroyed */
static struct sseg *pending; /* next: teardown failed, retried later */
static int npending;
static uint64_t abandoned;
static struct sseg_ratelimit pending_log;

/* ---- fork: the child closes what would keep peers waiting or pages
 * alive; its mappings stay (MAP_SHARED), like any other mapping ---- */

static void before_fork(void)
{
	pthread_mutex_lock(&registry_lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&registry_lock);
}

static void after_fork_child(void)
{
	for (struct sseg *s = any; s; s = s->next_any) {
		sseg_channel_forget(s);
		sseg_backend_forget_in_child(s);
		sseg_background_forget_in_child(s);
		sseg_tag_forget(s);
	}
	pthread_mutex_unlock(&registry_lock);
}

static void install_fork_handlers(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void sseg_registry_track(struct sseg *seg)
{
	pthread_once(&fork_once, install_fork_handlers);
	pthread_mutex_lock(&registry_lock);
	seg->next_any = any;
	any = seg;
	pthread_mutex_unlock(&registry_lock);
}

static void unlink_any(struct sseg *seg)
{
	for (struct sseg **p = &any; *p; p = &(*p)->next_any)
		if (*p == seg) {
			*p = seg->next_any;
			return;
		}
}

void sseg_registry_free(struct sseg *seg)
{
	pthread_mutex_lock(&registry_lock);
	unlink_any(seg);
	pthread_mutex_unlock(&registry_lock);
	free(seg);
}

/* ---- live segments ---- */

void sseg_registry_add(struct sseg *seg)
{
	pthread_mutex_lock(&registry_lock);
	seg->next = live;
	live = seg;
	pthread_mutex_unlock(&registry_lock);
}

static void unlink_from(struct sseg **list, struct sseg *seg)
{
	for (struct sseg **p = list; *p; p = &(*p)->next)
		if (*p == seg) {
			*p = seg->next;
			seg->next = NULL;
			return;
		}
}

int sseg_registry_remove(struct sseg *seg)
{
	int pins;

	pthread_mutex_lock(&registry_lock);
	pins = seg->pins;
	if (!pins)
		unlink_from(&live, seg);
	pthread_mutex_unlock(&registry_lock);
	if (pins)
		return sseg_err(-EBUSY, "segment '%s' is pinned %d time(s): unpin it before destroy",
				seg->name, pins);
	return 0;
}

static int match_entry(const struct sseg *seg, const void *addr, size_t len,
		       struct sseg_lookup_result *res)
{
	uintptr_t base = (uintptr_t)seg->base, a = (uintptr_t)addr;

	if (!seg->completed || a < base || a - base >= seg->size)
		return -ENOENT;
	if (a == base && len == seg->size) {
		res->seg = (struct sseg *)seg;
		res->block = -1;
		res->index = 0;
		return 0;
	}
	if (!seg->layout)
		return -ENOENT;
	if (sseg_layout_entry_at(seg->layout, a - base, len, &res->block, &res->index))
		return -ENOENT;
	res->seg = (struct sseg *)seg;
	return 0;
}

int sseg_lookup(const void *addr, size_t len, struct sseg_lookup_result *res)
{
	struct sseg_lookup_result found;
	int rc = -ENOENT;

	pthread_mutex_lock(&registry_lock);
	for (struct sseg *s = live; s && rc; s = s->next)
		rc = match_entry(s, addr, len, &found);
	pthread_mutex_unlock(&registry_lock);
	if (rc)
		return sseg_err(-ENOENT, "[%p, +%zu) is not exactly a live segment or layout entry",
				addr, len);
	if (res)
		*res = found;
	return 0;
}

static bool is_live(const struct sseg *seg)
{
	for (struct sseg *s = live; s; s = s->next)
		if (s == seg)
			return true;
	return false;
}

int sseg_pin(sseg_t *seg)
{
	int rc = 0;

	pthread_mutex_lock(&registry_lock);
	if (seg && is_live(seg))
		seg->pins++;
	else
		rc = -ENOENT;
	pthread_mutex_unlock(&registry_lock);
	return rc ? sseg_err(rc, "only a completed, live segment can be pinned") : 0;
}

int sseg_unpin(sseg_t *seg)
{
	char name[SSEG_NAME_MAX + 1] = "";
	int rc = 0;

	pthread_mutex_lock(&registry_lock);
	if (!seg || !is_live(seg))
		rc = -ENOENT;
	else if (seg->pins == 0)
		rc = -EINVAL;
	else
		seg->pins--;
	if (rc == -EINVAL)
		snprintf(name, sizeof(name), "%s", seg->name);
	pthread_mutex_unlock(&registry_lock);
	if (rc == -EINVAL)
		return sseg_err(rc, "segment '%s' is not pinned", name);
	return rc ? sseg_err(rc, "only a live segment can be unpinned") : 0;
}

/* ---- teardown that keeps failing ---- */

void sseg_registry_defer(struct sseg *seg, int err, const char *stage)
{
	char line[SSEG_ERR_MAX + 160];
	int n;

	/* Everything said of seg is said before it is handed over: from then
	 * on another thread's create may retry it and free it. */
	snprintf(line, sizeof(line),
		 "segment '%s' (base %p, %llu bytes) could not be torn down in %s (%d: %s)",
		 seg->name, seg->base, (unsigned long long)seg->mapped_size, stage, err,
		 sseg_last_error());
	pthread_mutex_lock(&registry_lock);
	seg->next = pending;
	pending = seg;
	n = ++npending;
	pthread_mutex_unlock(&registry_lock);
	sseg_log_limited(&pending_log, 10.0, SSEG_LOG_ERROR, "%s; %d segment(s) pending cleanup",
			 line, n);
}

/* Tries each segment taken off the pending list; those that still fail go
 * back. Returns how many failed again. */
static int retry(struct sseg *todo, char *why, size_t len)
{
	struct sseg *next, *still = NULL;
	int n = 0, freed = 0;

	for (struct sseg *s = todo; s; s = next) {
		next = s->next;
		if (sseg_release(s) == 0) {
			sseg_registry_free(s);
			freed++;
			continue;
		}
		snprintf(why, len, "%s", sseg_last_error());
		s->next = still;
		still = s;
		n++;
	}
	pthread_mutex_lock(&registry_lock);
	for (struct sseg *s = still; s; s = next) {
		next = s->next;
		s->next = pending;
		pending = s;
	}
	npending -= freed; /* the failed ones were counted all along */
	pthread_mutex_unlock(&registry_lock);
	return n;
}

/* Called by every create: one more try for each pending segment. A failure
 * is logged (rate-limited) and never blocks the create that triggered it. */
void sseg_registry_retry_pending(void)
{
	char why[SSEG_ERR_MAX];
	struct sseg *todo;
	int n;

	pthread_mutex_lock(&registry_lock);
	todo = pending;
	pending = NULL;
	pthread_mutex_unlock(&registry_lock);
	if (!todo)
		return;
	n = retry(todo, why, sizeof(why));
	if (n)
		sseg_log_limited(&pending_log, 10.0, SSEG_LOG_ERROR,
				 "%d segment(s) still pending cleanup: %s", n, why);
	sseg_err_clear();
}

int sseg_pending_count(void)
{
	int n;

	pthread_mutex_lock(&registry_lock);
	n = npending;
	pthread_mutex_unlock(&registry_lock);
	return n;
}

int sseg_cleanup_pending(void)
{
	return sseg_pending_count();
}

void sseg_registry_abandoned(void)
{
	__atomic_add_fetch(&abandoned, 1, __ATOMIC_RELAXED);
}

uint64_t sseg_abandoned_handles(void)
{
	return __atomic_load_n(&abandoned, __ATOMIC_RELAXED);
}
