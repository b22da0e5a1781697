/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: NUMA (numa.c), raw syscalls, no libnuma. Each returns 0 or a negative errno and sets the
 * error sentence on failure; no policy lives here. */
#ifndef SSEG_OS_NUMA_H
#define SSEG_OS_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Nodes that have memory (bit n = node n); at least node 0. */
SSEG_HIDDEN int sseg_os_numa_nodes(uint64_t *mask);
/* mbind(MPOL_BIND) to one node, or MPOL_INTERLEAVE over mask. */
SSEG_HIDDEN int sseg_os_numa_bind(void *addr, uint64_t len, int node);
SSEG_HIDDEN int sseg_os_numa_interleave(void *addr, uint64_t len, uint64_t mask);
/* Nodes where up to 64 pages sampled evenly over the range live
 * (move_pages query); 0 when none is faulted in yet. */
SSEG_HIDDEN int sseg_os_numa_where(const void *addr, uint64_t len, uint64_t page_size,
			      uint64_t *mask);

#endif
