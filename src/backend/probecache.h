/* SPDX-License-Identifier: Apache-2.0 */
/* The answers of a device backend's real probes (a create and release on
 * the device), kept per (what, device, node) and process: attributes claim
 * what drivers then refuse, so each probe runs once for real and its
 * answer, and why it was refused, is kept. One cache per backend, a
 * static struct sseg_probe_cache initialised with SSEG_PROBE_CACHE_INIT. */
#ifndef SSEG_BACKEND_PROBECACHE_H
#define SSEG_BACKEND_PROBECACHE_H

#include <pthread.h>

#include "internal.h"

#define SSEG_PROBE_CACHE_MAX 64

struct sseg_probe_answer {
	int what;   /* the backend's own kind of probe */
	int device;
	int node;
	bool works;
	char why[SSEG_ERR_MAX]; /* refused: the sentence */
};

struct sseg_probe_cache {
	pthread_mutex_t lock;
	int n;
	struct sseg_probe_answer answers[SSEG_PROBE_CACHE_MAX];
};

#define SSEG_PROBE_CACHE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* One probe: 1 works; 0 refused, why says why; -errno no answer (the
 * device or memory could not be had), kept out of the cache, so that the
 * next ask runs the probe again. */
typedef int (*sseg_probe_fn)(void *ctx, char *why, size_t len);

/* The cached answer for (what, device, node), else probe's, run under the
 * cache's lock (one probe of a backend at a time; probe must not ask the
 * same cache). 1 works; 0 refused, with the reason copied to why; -errno
 * when there is no answer, the sentence set. A full cache runs the probe
 * every time. */
SSEG_HIDDEN int sseg_probe_ask(struct sseg_probe_cache *cache, int what, int device, int node,
			       sseg_probe_fn probe, void *ctx, char *why, size_t len);
/* Forgets every answer (tests: the fake driver changes its mind). */
SSEG_HIDDEN void sseg_probe_forget(struct sseg_probe_cache *cache);
/* "not available: " and the sentence why, cut after the last clause
 * (": ", "; ") that fits in len, for struct sseg_probe_backend's reason. */
SSEG_HIDDEN void sseg_probe_reason(char *reason, size_t len, const char *why);

#endif
