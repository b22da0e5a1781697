/* SPDX-License-Identifier: Apache-2.0 */
/* The timed inner loops. */
#include <string.h>
#include <time.h>

#include "kernels.h"

/* Keeps the read loops from being optimized away. */
static volatile uint64_t sink;

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Eight independent sums, so the loop is bound by memory, not by one
 * chain of additions. */
static uint64_t sum_words(const uint64_t *w, uint64_t n)
{
	uint64_t s[8] = { 0 }, i = 0;

	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			s[k] += w[i + (uint64_t)k];
	for (; i < n; i++)
		s[0] += w[i];
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

double time_read(const void *base, uint64_t len)
{
	double t0 = now_s();

	sink += sum_words(base, len / 8);
	return now_s() - t0;
}

double time_copy(void *dst, const void *src, uint64_t len)
{
	double t0 = now_s();

	memcpy(dst, src, len);
	return now_s() - t0;
}

double time_memset(void *dst, uint64_t len)
{
	double t0 = now_s();

	memset(dst, (int)(sink & 0x7f) + 1, len);
	return now_s() - t0;
}

static uint64_t xorshift(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

double time_gather(void *staging, const void *src, uint64_t src_len, const struct gather *g)
{
	uint64_t nblocks = src_len / g->block, slots = g->ring_len / g->block;
	uint64_t state = g->seed | 1;
	const unsigned char *from = src;
	unsigned char *to = staging;
	double t0;

	if (!nblocks || !slots)
		return 0;
	t0 = now_s();
	for (uint64_t i = 0; i < g->count; i++) {
		uint64_t b = xorshift(&state) % nblocks;

		memcpy(to + (i % slots) * g->block, from + b * g->block, g->block);
	}
	return now_s() - t0;
}
