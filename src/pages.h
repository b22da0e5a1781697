/* SPDX-License-Identifier: Apache-2.0 */
/* Host pages (pages.c): which page kind a request gets, whether memory can
 * back it, where it is placed, how it is faulted in, and what the mapping
 * really obtained. A service for the backends that map host memory. */
#ifndef SSEG_PAGES_H
#define SSEG_PAGES_H

#include "internal.h"

struct sseg;

struct sseg_page_choice {
	enum sseg_pages pages;
	uint64_t page_size;
	char reason[320];
};

/* The page kind pages=req gets for size bytes (0: one page): 0 with the
 * choice, or -errno naming the knob or pool in the way. */
SSEG_HIDDEN int sseg_pages_choose(enum sseg_pages req, uint64_t size,
				  struct sseg_page_choice *choice);
/* 0 when bytes of ordinary memory (not HugeTLB) can be populated without
 * passing MemAvailable or this process's memory cgroup limit; else -ENOMEM
 * with both numbers. what names the memory in the sentence. */
SSEG_HIDDEN int sseg_memory_fits(uint64_t bytes, const char *what);

/* Whether what was obtained can only be measured from smaps (costly). */
SSEG_HIDDEN bool sseg_pages_need_smaps(const struct sseg *seg);
/* Measures what the mapping obtained and records it in the segment. */
SSEG_HIDDEN void sseg_pages_verify(struct sseg *seg);
/* Applies opts.numa to [base, base + mapped_size) before first touch. */
SSEG_HIDDEN int sseg_place(struct sseg *seg);
/* Faults [offset, offset + len) in with threads (0: up to 4). */
SSEG_HIDDEN int sseg_populate_range(struct sseg *seg, uint64_t offset, uint64_t len, int threads);
/* populate=spread: slice i of n, cut at page boundaries. */
SSEG_HIDDEN int sseg_populate_slice(struct sseg *seg, int slice, int nslices);

#endif
