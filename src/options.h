/* SPDX-License-Identifier: Apache-2.0 */
/* The caller's options, validated into the segment's own copy (options.c). */
#ifndef SSEG_OPTIONS_H
#define SSEG_OPTIONS_H

#include "decl.h"
#include "internal.h"

struct sseg;

/* Checks every field (the backend's own through its check_opts) and fills
 * seg's copy, name, layout, backend, size and role. */
SSEG_HIDDEN int sseg_opts_load(struct sseg *seg, const struct sseg_opts *opts);
/* What seg's options declare (decl.h): its blob's, its keeper's. */
SSEG_HIDDEN void sseg_decl_of(const struct sseg *seg, struct sseg_decl *d);

#endif
