/* The process-wide registry: live segments (exact-range lookup, pins) and
 * segments whose teardown kept failing (retried on later creates). */
#include <pthread.h>
#include <stdlib.h>

#include "layout.h"
#include "segment.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sseg *live;
static struct sseg *pending;
static int npending;
static double last_pending_log;

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
	uintptr_t base = (uintptr_t)seg->window, a = (uintptr_t)addr;

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
	int rc = 0;

	pthread_mutex_lock(&registry_lock);
	if (!seg || !is_live(seg))
		rc = -ENOENT;
	else if (seg->pins == 0)
		rc = -EINVAL;
	else
		seg->pins--;
	pthread_mutex_unlock(&registry_lock);
	if (rc == -EINVAL)
		return sseg_err(rc, "segment '%s' is not pinned", seg->name);
	return rc ? sseg_err(rc, "only a live segment can be unpinned") : 0;
}

void sseg_registry_defer(struct sseg *seg, int err, const char *stage)
{
	pthread_mutex_lock(&registry_lock);
	seg->next = pending;
	pending = seg;
	npending++;
	pthread_mutex_unlock(&registry_lock);
	sseg_log_throttled(&last_pending_log, 10.0, SSEG_LOG_ERROR,
			   "segment '%s' (base %p, %llu bytes) could not be torn down in %s (%d: %s); "
			   "%d segment(s) pending cleanup",
			   seg->name, seg->window, (unsigned long long)seg->window_size, stage, err,
			   sseg_last_error(), npending);
}

/* Called by every create: one more try for each pending segment. A failure
 * is logged (throttled) and never blocks the create that triggered it. */
void sseg_registry_retry_pending(void)
{
	struct sseg *todo, *next, *still = NULL;
	int n = 0;

	pthread_mutex_lock(&registry_lock);
	todo = pending;
	pending = NULL;
	pthread_mutex_unlock(&registry_lock);
	if (!todo)
		return;
	for (struct sseg *s = todo; s; s = next) {
		next = s->next;
		if (sseg_release(s) == 0) {
			free(s);
			continue;
		}
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
	npending = 0;
	for (struct sseg *s = pending; s; s = s->next)
		npending++;
	pthread_mutex_unlock(&registry_lock);
	if (n)
		sseg_log_throttled(&last_pending_log, 10.0, SSEG_LOG_ERROR,
				   "%d segment(s) still pending cleanup: %s", n, sseg_last_error());
	sseg_err_clear();
}

int sseg_cleanup_pending(void)
{
	int n;

	pthread_mutex_lock(&registry_lock);
	n = npending;
	pthread_mutex_unlock(&registry_lock);
	return n;
}
