/* SPDX-License-Identifier: Apache-2.0 */
/* Messages (log.c): through the application's callback (sseg_set_log), or
 * to stderr without ever blocking; SHAREDSEG_LOG=off|error|warn|info|debug. */
#ifndef SSEG_LOG_H
#define SSEG_LOG_H

#include "hidden.h"
#include "sharedseg.h"
#include "util.h"

/* The environment variable name (SHAREDSEG_...), NULL where unset or empty.
 * For a name a release up to 0.2 spelled SSEG_..., that spelling is read
 * too where the new one is unset, and its use is logged once (warn). */
SSEG_HIDDEN const char *sseg_env(const char *name);
/* Declares variables that releases up to 0.2 spelled SSEG_<name>: names
 * after the SHAREDSEG_ prefix, NULL-terminated, static. Log's own (LOG) is
 * known; each backend declares its own (its ops table's renamed_env). */
SSEG_HIDDEN void sseg_env_declare(const char *const *names);

SSEG_HIDDEN void sseg_log(enum sseg_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* One cause's rate limit: a message an outsider can trigger (a refused
 * connection) is logged at most once per interval, and the next line says
 * how many were held back. Zero-initialised, static (a cause with lines
 * held back is listed until they are told); one per cause. */
struct sseg_ratelimit {
	double last;
	double interval_s;
	unsigned held_back;
	enum sseg_log_level level;
	struct sseg_ratelimit *next_held;
	char message[SSEG_ERR_MAX]; /* the last line held back */
};

/* interval_s between lines of this cause; the first always passes. */
SSEG_HIDDEN void sseg_log_limited(struct sseg_ratelimit *rl, double interval_s,
				  enum sseg_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Tells the held-back count of every cause whose interval has passed (one
 * line per cause and interval still). Any other line does it first, and so
 * does sseg_destroy; the exit of a process using the default writer tells
 * every count: a flood that stops is still counted. */
SSEG_HIDDEN void sseg_log_flush(void);

#endif
