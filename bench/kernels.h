/* SPDX-License-Identifier: Apache-2.0 */
/* The timed inner loops: sequential read, copy, KV-block gather, memset. */
#ifndef BENCH_KERNELS_H
#define BENCH_KERNELS_H

#include <stdint.h>

double now_s(void); /* CLOCK_MONOTONIC: one clock for every process */

/* Each returns the seconds it took. */
double time_read(const void *base, uint64_t len);
double time_copy(void *dst, const void *src, uint64_t len);
double time_memset(void *dst, uint64_t len);

/* count blocks of block bytes at random block-aligned offsets of
 * [src, src+src_len), copied in turn into a ring of ring_len bytes at
 * staging: what a KV offload load does. The same seed gives the same
 * offsets, so two sources see the same pattern. */
struct gather {
	uint64_t block;
	uint64_t count;
	uint64_t seed;
	uint64_t ring_len;
};

double time_gather(void *staging, const void *src, uint64_t src_len, const struct gather *g);

#endif
