/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: transparent and HugeTLB pages (hugepage.c). Each returns 0 or a negative errno and sets the
 * error sentence on failure; no policy lives here. */
#ifndef SSEG_OS_HUGEPAGE_H
#define SSEG_OS_HUGEPAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sharedseg.h"

#include "internal.h"

/* The shmem THP knobs: global shmem_enabled and the 2 MiB per-size one
 * ("" when the kernel has no per-size knobs), the bracketed values. */
SSEG_HIDDEN int sseg_os_thp_shmem_knobs(char global[16], char per2m[16]);
/* The bracketed value of a choice knob's text ("always [never]" -> never). */
SSEG_HIDDEN int sseg_os_knob_choice(const char *text, char *value, size_t len);
/* The judgement behind sseg_os_thp_shmem_usable, for given knob values. */
SSEG_HIDDEN bool sseg_os_thp_shmem_allows(const char *global, const char *per2m, char *reason,
				     size_t len);
/* True when MADV_HUGEPAGE on a memfd mapping can get 2 MiB pages; when not,
 * reason says which knob is in the way. */
SSEG_HIDDEN bool sseg_os_thp_shmem_usable(char *reason, size_t len);
SSEG_HIDDEN int sseg_os_madvise_hugepage(void *addr, uint64_t len);
/* The HugeTLB pool of one page size; -ENOENT when the kernel has none. */
SSEG_HIDDEN int sseg_os_hugetlb_pool(uint64_t page_size, struct sseg_hugetlb_pool *pool);
/* Every pool, smallest page size first, at most max; returns how many
 * (0 on a kernel without HugeTLB). */
SSEG_HIDDEN int sseg_os_hugetlb_pools(struct sseg_hugetlb_pool *pools, int max);
/* Bytes of [addr, addr+len) mapped with PMD (2 MiB) or larger pages, from
 * /proc/self/smaps (ShmemPmdMapped and FilePmdMapped of the VMAs inside,
 * Shared_Hugetlb and Private_Hugetlb for HugeTLB ones). */
SSEG_HIDDEN int sseg_os_huge_bytes(const void *addr, uint64_t len, uint64_t *bytes);

#endif
