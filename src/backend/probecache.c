/* SPDX-License-Identifier: Apache-2.0 */
/* The answers of a backend's real probes (probecache.h). */
#include <stdio.h>
#include <string.h>

#include "backend/probecache.h"

/* The entry for the key, NULL when none is kept. Under the lock. */
static struct sseg_probe_answer *find(struct sseg_probe_cache *c, int what, int device, int node)
{
	for (int i = 0; i < c->n; i++)
		if (c->answers[i].what == what && c->answers[i].device == device &&
		    c->answers[i].node == node)
			return &c->answers[i];
	return NULL;
}

static void keep(struct sseg_probe_cache *c, const struct sseg_probe_answer *a)
{
	if (c->n < SSEG_PROBE_CACHE_MAX)
		c->answers[c->n++] = *a;
}

int sseg_probe_ask(struct sseg_probe_cache *cache, int what, int device, int node,
		   sseg_probe_fn probe, void *ctx, char *why, size_t len)
{
	struct sseg_probe_answer fresh = { what, device, node, false, "" };
	const struct sseg_probe_answer *a;
	int rc = 0;

	pthread_mutex_lock(&cache->lock);
	a = find(cache, what, device, node);
	if (!a) {
		rc = probe(ctx, fresh.why, sizeof(fresh.why));
		fresh.works = rc > 0;
		if (rc >= 0)
			keep(cache, &fresh);
		a = &fresh;
	}
	if (rc >= 0) {
		rc = a->works;
		if (why && len)
			snprintf(why, len, "%s", a->works ? "" : a->why);
	}
	pthread_mutex_unlock(&cache->lock);
	return rc;
}

void sseg_probe_forget(struct sseg_probe_cache *cache)
{
	pthread_mutex_lock(&cache->lock);
	cache->n = 0;
	pthread_mutex_unlock(&cache->lock);
}

/* The end of the last clause of why that fits in room bytes. */
static size_t clause_end(const char *why, size_t room)
{
	size_t n = strlen(why), cut = 0;

	if (n < room)
		return n;
	for (size_t i = 0; i + 1 < room; i++)
		if ((why[i] == ':' || why[i] == ';') && why[i + 1] == ' ')
			cut = i;
	return cut ? cut : room - 1;
}

void sseg_probe_reason(char *reason, size_t len, const char *why)
{
	static const char prefix[] = "not available: ";

	if (len <= sizeof(prefix))
		return;
	snprintf(reason, len, "%s%.*s", prefix, (int)clause_end(why, len - (sizeof(prefix) - 1)),
		 why);
}
