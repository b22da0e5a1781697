/* SPDX-License-Identifier: Apache-2.0 */
/* Mappings of a page kind, made the way a user of each baseline makes
 * them, and population. */
#ifndef BENCH_MAPPING_H
#define BENCH_MAPPING_H

#include <stdbool.h>
#include <stdint.h>

#include "sharedseg.h"

#define SIZE_2M (2ull << 20)

struct mapping {
	void *base;
	uint64_t len;
};

uint64_t pages_size(enum sseg_pages kind);
/* Whether kind's pages come from a HugeTLB pool. */
bool pages_hugetlb(enum sseg_pages kind);
/* size rounded up to the kind's page size */
uint64_t pages_round(enum sseg_pages kind, uint64_t size);

/* A private anonymous mapping, what malloc returns for a large size:
 * MADV_NOHUGEPAGE for base, 2 MiB aligned with MADV_HUGEPAGE for thp,
 * MAP_HUGETLB for the HugeTLB kinds. Nothing is faulted in. */
int map_private(enum sseg_pages kind, uint64_t size, struct mapping *m);
/* fd shared, placed and advised the same way. */
int map_shared_fd(enum sseg_pages kind, int fd, uint64_t size, struct mapping *m);
/* fd shared wherever the kernel places it, with no advice. */
int map_shared_anywhere(int fd, uint64_t size, struct mapping *m);
void unmap(struct mapping *m);

/* One written byte per 4 KiB page: how a user first-touches a buffer. */
void touch_write(void *base, uint64_t len);
/* One read per 4 KiB page: faults page tables in without the bandwidth. */
void touch_read(const void *base, uint64_t len);
/* MADV_POPULATE_WRITE (a written byte per page before 5.14): 0 or -errno */
int populate_write(void *base, uint64_t len);

#endif
