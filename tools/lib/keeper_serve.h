/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper's server (keeper_serve.c), a tool's work: `sharedseg keep`
 * runs it. What owners say to it: src/keeper.c and keeper_wire.c, the
 * library's side. */
#ifndef SSEG_KEEPER_SERVE_H
#define SSEG_KEEPER_SERVE_H

#include "internal.h"

/* Runs a keeper named name (1..SSEG_NAME_MAX bytes of A-Z a-z 0-9 . _ -)
 * for this user on this host until stop(ctx) answers non-zero (asked at
 * least every 100 ms; NULL: never), then lets go of every segment it
 * holds. -EADDRINUSE when a keeper of that name runs already, -EPERM when
 * the runtime directory is not this user's alone (the sentence names who is
 * in the way), -EINVAL for a name that is none. This thread serves one
 * owner at a time, each bounded to seconds. */
SSEG_HIDDEN int sseg_keeper_run(const char *name, sseg_interrupt_fn stop, void *ctx);

#endif
