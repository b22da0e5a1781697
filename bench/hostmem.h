/* SPDX-License-Identifier: Apache-2.0 */
/* Host-wide memory, the way the bench counts a group's use: the rise of
 * Shmem + AnonPages + HugeTLB pages in use + PageTables in /proc/meminfo
 * and the HugeTLB pools. HugeTLB pages are in no process's Rss or Pss, so
 * they are counted from the pools. */
#ifndef BENCH_HOSTMEM_H
#define BENCH_HOSTMEM_H

#include <stdint.h>

struct hostmem {
	uint64_t shmem;
	uint64_t anon;
	uint64_t hugetlb;     /* pages in use, every pool, in bytes */
	uint64_t page_tables;
	double steal_s; /* CPU time the hypervisor took from this machine (/proc/stat) */
};

int hostmem_read(struct hostmem *m);
/* Shmem + AnonPages + HugeTLB in use + PageTables */
uint64_t hostmem_total(const struct hostmem *m);

/* What one process maps in [addr, addr+len), from /proc/self/smaps. */
struct vma_pages {
	uint64_t rss;
	uint64_t pmd_mapped;  /* AnonHugePages + ShmemPmdMapped + FilePmdMapped */
	uint64_t hugetlb;     /* Shared_Hugetlb + Private_Hugetlb */
	uint64_t kernel_page; /* the largest KernelPageSize seen */
};

/* This process's page tables (VmPTE of /proc/self/status), in bytes: exact
 * where the host-wide PageTables moves with everything else running. */
uint64_t own_page_tables(void);

/* Seconds to read all of /proc/self/smaps once (*vmas: the mappings in
 * it): what checking a page kind through smaps costs this process. */
double smaps_read_seconds(int *vmas);

int vma_pages_read(const void *addr, uint64_t len, struct vma_pages *v);

/* The page kind a process's mapping obtained, verified from smaps:
 * "hugetlb-2M", "hugetlb-1G", "thp" (at least 99% of the resident bytes
 * mapped by PMDs), "base" (under 1%), "mixed" between, "unverified" when
 * nothing is resident. *huge_fraction: huge bytes over resident bytes. */
const char *pages_obtained(const void *addr, uint64_t len, double *huge_fraction);

#endif
