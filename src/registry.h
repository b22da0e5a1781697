/* SPDX-License-Identifier: Apache-2.0 */
/* The process-wide registry (registry.c): every segment not yet freed (for
 * fork), the live ones (exact-range lookup, pins), and those whose teardown
 * kept failing (retried on later creates). */
#ifndef SSEG_REGISTRY_H
#define SSEG_REGISTRY_H

#include "internal.h"

struct sseg;

/* From create to free: what a forked child must let go of. */
SSEG_HIDDEN void sseg_registry_track(struct sseg *seg);
/* Forgets and frees the segment (its stages are all released). */
SSEG_HIDDEN void sseg_registry_free(struct sseg *seg);
/* After complete: lookup and pins see it. */
SSEG_HIDDEN void sseg_registry_add(struct sseg *seg);
/* Removes a segment from the live list unless pinned (-EBUSY). */
SSEG_HIDDEN int sseg_registry_remove(struct sseg *seg);
/* Takes over a segment whose teardown failed: from now on only the
 * registry touches it (retried by later creates, counted, logged). */
SSEG_HIDDEN void sseg_registry_defer(struct sseg *seg, int err, const char *stage);
SSEG_HIDDEN void sseg_registry_retry_pending(void);
/* A driver handle whose release failed and is never released again. */
SSEG_HIDDEN void sseg_registry_abandoned(void);

#endif
