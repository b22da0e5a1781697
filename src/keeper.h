/* SPDX-License-Identifier: Apache-2.0 */
/* A segment's keeper as its owner meets it (keeper.c): before allocating,
 * the owner takes the keeper's segment of the same declaration; after
 * allocating, it leaves its own with the keeper. Only a keeper of the same
 * user is asked; a keeper that is not there, or fails, costs a warning,
 * never the segment. The keeper itself: keeper_serve.c. */
#ifndef SSEG_KEEPER_H
#define SSEG_KEEPER_H

#include "keeper_wire.h"

struct sseg;

/* 1 with *fd and what it holds in *got (a memfd of that declaration, whose
 * bytes are what the last group wrote); 0 when the keeper has none (or it
 * discarded one declared otherwise: logged, with why), or is not there. */
SSEG_HIDDEN int sseg_keeper_take(struct sseg *seg, int *fd, struct sseg_keep_decl *got);
/* Leaves the owner's memfd with the keeper; a failure is logged. */
SSEG_HIDDEN void sseg_keeper_hold(struct sseg *seg, int fd);

#endif
