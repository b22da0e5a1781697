/* SPDX-License-Identifier: Apache-2.0 */
/* populate=background (background.c): once complete has handed the pages to
 * every peer, the owner's threads make them resident while the segment is
 * already in use. */
#ifndef SSEG_BACKGROUND_H
#define SSEG_BACKGROUND_H

#include <stdint.h>

#include "hidden.h"

struct sseg;

/* Peer, in create: 0, or -ENOMEM when its memory cgroup could not hold
 * the segment's pages that it may be the first to touch. */
SSEG_HIDDEN int sseg_background_check_peer(const struct sseg *seg);
/* Owner, at the end of a successful complete: starts the work when the
 * segment asked for it. */
SSEG_HIDDEN int sseg_background_start(struct sseg *seg);
/* Stops the work at its next step and joins it; the first thing destroy
 * does. Idempotent. */
SSEG_HIDDEN void sseg_background_stop(struct sseg *seg);
/* The work's seconds: so far, or all of it once it ended (sseg_info's
 * populate_s on the owner). */
SSEG_HIDDEN double sseg_background_seconds(const struct sseg *seg);
/* In a child after fork(): the threads are the parent's. */
SSEG_HIDDEN void sseg_background_forget_in_child(struct sseg *seg);

#endif
