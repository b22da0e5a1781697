/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: the HugeTLB pages in use host-wide (hugetlb_use.c), the
 * one count of them for the library (sseg_os_meminfo), the tool (demo)
 * and the bench. It needs nothing of the library but this header, so the
 * tool and the bench link its object too (sseg_common, CMakeLists.txt);
 * it sets no error sentence. */
#ifndef SSEG_OS_HUGETLB_USE_H
#define SSEG_OS_HUGETLB_USE_H

#include <stdint.h>

#include "hidden.h"

#define SSEG_OS_HUGETLB_DIR "/sys/kernel/mm/hugepages"

/* Bytes of HugeTLB pages in use in every pool under dir (normally
 * SSEG_OS_HUGETLB_DIR): each pool's nr_hugepages less its free_hugepages.
 * nr_hugepages is meminfo's HugePages_Total and counts the surplus pages
 * already (surplus_hugepages is part of it, not more). 0, with *bytes 0
 * for a kernel without HugeTLB (no dir), or -errno. */
SSEG_HIDDEN int sseg_os_hugetlb_in_use(const char *dir, uint64_t *bytes);

#endif
