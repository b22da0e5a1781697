/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/meminfo (the OS layer's one reader), the HugeTLB pools in sysfs, and
 * /proc/self/smaps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostmem.h"
#include "kernels.h"
#include "os/hugetlb_use.h"
#include "os/memory.h"

#define KIB 1024ull

/* The cpu line's steal column, in seconds summed over the CPUs. */
static double steal_seconds(void)
{
	FILE *f = fopen("/proc/stat", "re");
	unsigned long long v[8] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	return n == 8 && hz > 0 ? (double)v[7] / (double)hz : 0;
}

int hostmem_read(struct hostmem *m)
{
	const struct sseg_os_meminfo_key keys[] = {
		{ "Shmem", &m->shmem }, { "AnonPages", &m->anon }, { "PageTables", &m->page_tables },
	};
	int rc;

	memset(m, 0, sizeof(*m));
	rc = sseg_os_meminfo_keys("/proc/meminfo", keys, 3);
	if (!rc)
		rc = sseg_os_hugetlb_in_use(SSEG_OS_HUGETLB_DIR, &m->hugetlb);
	m->steal_s = steal_seconds();
	return rc;
}

uint64_t hostmem_total(const struct hostmem *m)
{
	return m->shmem + m->anon + m->hugetlb + m->page_tables;
}

uint64_t own_page_tables(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long kb = 0;
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPTE: %llu", &kb) == 1)
			break;
	fclose(f);
	return kb * KIB;
}

double smaps_read_seconds(int *vmas)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	double t0 = now_s();

	*vmas = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		*vmas += !strncmp(line, "VmFlags:", 8);
	fclose(f);
	return now_s() - t0;
}

static void vma_field(const char *line, struct vma_pages *v)
{
	static const char *const pmd[] = { "AnonHugePages:", "ShmemPmdMapped:",
					   "FilePmdMapped:" };
	static const char *const hugetlb[] = { "Shared_Hugetlb:", "Private_Hugetlb:" };
	char key[64];
	unsigned long long kb;

	if (sscanf(line, "%63s %llu", key, &kb) != 2)
		return;
	if (!strcmp(key, "Rss:"))
		v->rss += kb * KIB;
	if (!strcmp(key, "KernelPageSize:") && kb * KIB > v->kernel_page)
		v->kernel_page = kb * KIB;
	for (size_t i = 0; i < sizeof(pmd) / sizeof(pmd[0]); i++)
		if (!strcmp(key, pmd[i]))
			v->pmd_mapped += kb * KIB;
	for (size_t i = 0; i < sizeof(hugetlb) / sizeof(hugetlb[0]); i++)
		if (!strcmp(key, hugetlb[i]))
			v->hugetlb += kb * KIB;
}

int vma_pages_read(const void *addr, uint64_t len, struct vma_pages *v)
{
	unsigned long long lo = (unsigned long long)(uintptr_t)addr, hi = lo + len, s, e;
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	int inside = 0, seen = 0;

	memset(v, 0, sizeof(*v));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &s, &e) == 2) {
			inside = s < hi && e > lo;
			seen |= inside;
		} else if (inside) {
			vma_field(line, v);
		}
	}
	fclose(f);
	return seen ? 0 : -ENOENT;
}

const char *pages_obtained(const void *addr, uint64_t len, double *huge_fraction)
{
	struct vma_pages v;
	double frac;

	*huge_fraction = 0;
	if (vma_pages_read(addr, len, &v))
		return "unverified";
	if (v.hugetlb || v.kernel_page > 4 * KIB) {
		*huge_fraction = 1;
		return v.kernel_page >= (1ull << 30) ? "hugetlb-1G" : "hugetlb-2M";
	}
	if (!v.rss)
		return "unverified";
	frac = (double)v.pmd_mapped / (double)v.rss;
	*huge_fraction = frac;
	return frac >= 0.99 ? "thp" : frac < 0.01 ? "base" : "mixed";
}
