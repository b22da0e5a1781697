/* SPDX-License-Identifier: Apache-2.0 */
/* Small utilities (util.c) and the explicit little-endian encoding of blobs
 * and wire frames. */
#ifndef SSEG_UTIL_H
#define SSEG_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hidden.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SSEG_DEFAULT_TIMEOUT_MS 30000
#define SSEG_ERR_MAX 512 /* one error sentence or log line */
#define SSEG_2M (2ull << 20)
#define SSEG_1G (1ull << 30)

SSEG_HIDDEN double sseg_now(void); /* CLOCK_MONOTONIC seconds */
SSEG_HIDDEN uint64_t sseg_hash64(const void *data, size_t len, uint64_t seed); /* FNV-1a */
SSEG_HIDDEN bool sseg_is_pow2(uint64_t v);
/* round_up with overflow check: 0 on success, -EOVERFLOW otherwise. */
SSEG_HIDDEN int sseg_round_up(uint64_t v, uint64_t align, uint64_t *out);
SSEG_HIDDEN void sseg_format_size(uint64_t bytes, char *buf, size_t len); /* "2 MiB" */

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

#endif
