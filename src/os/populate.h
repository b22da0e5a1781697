/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: population (populate.c). Each returns 0 or a negative
 * errno and sets the error sentence on failure. */
#ifndef SSEG_OS_POPULATE_H
#define SSEG_OS_POPULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Faults every page of [base+offset, +len) in with MADV_POPULATE_WRITE
 * (READ when !writable), split over threads (>= 1) at page_size
 * boundaries; a kernel without it gets a first-touch fallback. -ENOMEM
 * when memory ran out (instead of a later SIGBUS). Errors name offsets
 * from base. */
SSEG_HIDDEN int sseg_os_populate(void *base, uint64_t offset, uint64_t len, uint64_t page_size,
				 int threads, bool writable);

/* Whether this kernel has MADV_POPULATE_* (5.14 and newer). Without it,
 * population falls back to first touch, which an exhausted pool or memory
 * limit answers with a signal: allocate the file first (fallocate). */
SSEG_HIDDEN bool sseg_os_populate_supported(void);
/* Bytes of [addr, +len) that mincore() finds resident (base-page units). */
SSEG_HIDDEN int sseg_os_resident(void *addr, uint64_t len, uint64_t *bytes);

#endif
