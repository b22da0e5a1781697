/* SPDX-License-Identifier: Apache-2.0 */
/* Sizes, limits and small helpers the subcommands share. */
#ifndef SSEG_GPU_COMMON_H
#define SSEG_GPU_COMMON_H

#include <stddef.h>

#include "sharedseg.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define MAX_REPS 32
#define MAX_RANKS 8

/* SSEG_GPU_PAGES, or auto. */
enum sseg_pages pages_wanted(void);
/* Seconds on the monotonic clock. */
double now(void);
const char *errno_name(int err);
void pattern(unsigned char *p, size_t len);
int pattern_holds(const unsigned char *p, size_t len);
/* The page kind and size the kernel maps p with (smaps): base:4096,
 * thp:2097152, hugetlb:SIZE, or unknown. */
void pages_of(const void *p, char *buf, size_t len);

#endif
