/* Internal helpers shared by every part of the library. Nothing here is
 * exported from the shared library. */
#ifndef SSEG_INTERNAL_H
#define SSEG_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sharedseg.h"

#define SSEG_HIDDEN __attribute__((visibility("hidden")))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SSEG_DEFAULT_TIMEOUT_MS 30000
#define SSEG_ERR_MAX 512

/* ---- errors (error.c) ---- */

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

/* ---- logging (log.c): SSEG_LOG=error|warn|info|debug, default warn ---- */

enum sseg_log_level { SSEG_LOG_ERROR = 0, SSEG_LOG_WARN, SSEG_LOG_INFO, SSEG_LOG_DEBUG };
SSEG_HIDDEN void sseg_log(enum sseg_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Logs at most once per interval_s for the given *last stamp. */
SSEG_HIDDEN void sseg_log_throttled(double *last, double interval_s, enum sseg_log_level level,
				    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- small utilities (util.c) ---- */

SSEG_HIDDEN double sseg_now(void); /* CLOCK_MONOTONIC seconds */
SSEG_HIDDEN uint64_t sseg_hash64(const void *data, size_t len, uint64_t seed); /* FNV-1a */
SSEG_HIDDEN bool sseg_is_pow2(uint64_t v);
/* round_up with overflow check: 0 on success, -EOVERFLOW otherwise. */
SSEG_HIDDEN int sseg_round_up(uint64_t v, uint64_t align, uint64_t *out);
SSEG_HIDDEN void sseg_format_size(uint64_t bytes, char *buf, size_t len); /* "2 MiB" */

/* ---- explicit little-endian encoding (blobs, wire frames) ---- */

static inline void sseg_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sseg_put64(uint8_t *p, uint64_t v)
{
	sseg_put32(p, (uint32_t)v);
	sseg_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t sseg_get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t sseg_get64(const uint8_t *p)
{
	return sseg_get32(p) | (uint64_t)sseg_get32(p + 4) << 32;
}

/* ---- fault injection for tests (fault.c) ----
 * A site is a short name ("munmap", "send_fd", ...). Code that can fail calls
 * sseg_fault("site") before the real call and fails with its result when it
 * is non-zero. Tests arm sites through sseg_test_fault(). */
SSEG_HIDDEN int sseg_fault(const char *site);
/* Fail the site's calls number skip+1 .. skip+count with err (negative);
 * count < 0: forever. site NULL disarms everything. */
SSEG_HIDDEN void sseg_test_fault(const char *site, int skip, int count, int err);

#endif
