/* SPDX-License-Identifier: Apache-2.0 */
/* The thread-local sentence behind every negative errno (error.c). */
#ifndef SSEG_ERROR_H
#define SSEG_ERROR_H

#include <errno.h>

#include "hidden.h"
#include "util.h"

/* Sets this thread's error sentence and returns err (a negative errno), so a
 * failure reads: return sseg_err(-EINVAL, "rank %d: ...", rank); */
SSEG_HIDDEN int sseg_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current sentence with more context; returns err. */
SSEG_HIDDEN int sseg_err_wrap(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
SSEG_HIDDEN void sseg_err_clear(void);

/* A status that came from another process, as a negative errno: anything
 * else (0 included, when a failure was expected) becomes fallback. */
static inline int sseg_errno_or(int status, int fallback)
{
	return status < 0 && status > -4096 ? status : fallback;
}

#endif
