/* SPDX-License-Identifier: Apache-2.0 */
/* The HugeTLB pages in use (sseg_os_hugetlb_in_use, the count the library,
 * the tool and the bench share): nr_hugepages already counts the surplus
 * pages, so they are counted once: on a copy of the sysfs tree (fake), and
 * on this kernel with pages beyond the pool (surplus; root, which sets
 * nr_hugepages and nr_overcommit_hugepages and puts back what it found). */
#define _GNU_SOURCE /* MAP_HUGETLB */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/hugetlb_use.h"
#include "testutil.h"

#define POOL_2M SSEG_OS_HUGETLB_DIR "/hugepages-2048kB"

static void put(const char *dir, const char *pool, const char *file, unsigned value)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, pool);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", dir, pool, file);
	f = fopen(path, "w");
	CHECK(f && fprintf(f, "%u\n", value) > 0 && fclose(f) == 0);
}

/* 5 pages of 2 MiB in use, 3 of them surplus; a 1 GiB pool, all free. */
static void fake(void)
{
	char dir[] = "/tmp/sseg-hugetlb-XXXXXX", cmd[64];
	uint64_t bytes = 1;

	CHECK(mkdtemp(dir));
	put(dir, "hugepages-2048kB", "nr_hugepages", 5);
	put(dir, "hugepages-2048kB", "surplus_hugepages", 3);
	put(dir, "hugepages-2048kB", "free_hugepages", 0);
	put(dir, "hugepages-1048576kB", "nr_hugepages", 1);
	put(dir, "hugepages-1048576kB", "surplus_hugepages", 0);
	put(dir, "hugepages-1048576kB", "free_hugepages", 1);
	put(dir, "hugepages-oddkB", "nr_hugepages", 9); /* no pool of a page size */
	CHECK_RC(sseg_os_hugetlb_in_use(dir, &bytes), 0);
	fprintf(stderr, "fake pools: %llu bytes in use\n", (unsigned long long)bytes);
	CHECK(bytes == 5 * (2ull << 20));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	CHECK_RC(sseg_os_hugetlb_in_use("/nonexistent/hugepages", &bytes), 0);
	CHECK(bytes == 0); /* a kernel without HugeTLB */
}

static unsigned long long pool_file(const char *file)
{
	char path[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), POOL_2M "/%s", file);
	f = fopen(path, "r");
	CHECK(f && fscanf(f, "%llu", &v) == 1);
	fclose(f);
	return v;
}

/* What /proc/meminfo says of the default (2 MiB) pool: Total less Free. */
static uint64_t meminfo_in_use(void)
{
	unsigned long long total = 0, free_pages = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");

	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Total: %llu", &total);
		sscanf(line, "HugePages_Free: %llu", &free_pages);
	}
	fclose(f);
	return (total - free_pages) * (2ull << 20);
}

/* A pool of 2 pages and 5 in use: 3 come from overcommit (surplus). */
static void surplus(void)
{
	const size_t len = 5 * (2ul << 20);
	uint64_t before, during, meminfo_before;
	void *p;

	if (geteuid() != 0 || access(POOL_2M, F_OK) ||
	    tu_knob_set("/proc/sys/vm/nr_hugepages", "2") ||
	    tu_knob_set("/proc/sys/vm/nr_overcommit_hugepages", "8")) {
		fprintf(stderr, "surplus: not root or no 2 MiB pool: skipped\n");
		return;
	}
	CHECK_RC(sseg_os_hugetlb_in_use(SSEG_OS_HUGETLB_DIR, &before), 0);
	meminfo_before = meminfo_in_use();
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
		 -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "surplus: the kernel gave no 5 HugeTLB pages: skipped\n");
		return;
	}
	memset(p, 1, len);
	CHECK_RC(sseg_os_hugetlb_in_use(SSEG_OS_HUGETLB_DIR, &during), 0);
	fprintf(stderr, "surplus: nr_hugepages %llu surplus_hugepages %llu free_hugepages %llu; "
		"%llu bytes in use before, %llu after 5 pages\n", pool_file("nr_hugepages"),
		pool_file("surplus_hugepages"), pool_file("free_hugepages"),
		(unsigned long long)before, (unsigned long long)during);
	CHECK(pool_file("surplus_hugepages") >= 3);
	CHECK(during - before == len);                   /* 5 pages, not 5 + 3 */
	CHECK(meminfo_in_use() - meminfo_before == len); /* as the kernel counts them */
	munmap(p, len);
}

int main(void)
{
	fake();
	surplus();
	printf("hugetlb_use: ok\n");
	return 0;
}
