/* SPDX-License-Identifier: Apache-2.0 */
/* Host-wide shared-memory use (/proc/meminfo, the HugeTLB pools in sysfs)
 * and one process's use of a mapping (/proc/self/smaps): how the demo shows
 * that N ranks hold one copy, not N. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define HUGEPAGES_DIR "/sys/kernel/mm/hugepages"

static int read_u64_file(const char *path, uint64_t *v)
{
	FILE *f = fopen(path, "re");
	unsigned long long x;
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "%llu", &x);
	fclose(f);
	if (n != 1)
		return -EINVAL;
	*v = x;
	return 0;
}

/* HugeTLB pages in use in one pool directory (hugepages-2048kB): the
 * persistent pages plus surplus ones, less the free ones. */
static uint64_t pool_used_bytes(const char *dir_name)
{
	char path[300];
	uint64_t kb, nr = 0, surplus = 0, free_pages = 0;

	if (sscanf(dir_name, "hugepages-%" SCNu64 "kB", &kb) != 1)
		return 0;
	snprintf(path, sizeof(path), HUGEPAGES_DIR "/%s/nr_hugepages", dir_name);
	read_u64_file(path, &nr);
	snprintf(path, sizeof(path), HUGEPAGES_DIR "/%s/surplus_hugepages", dir_name);
	read_u64_file(path, &surplus);
	snprintf(path, sizeof(path), HUGEPAGES_DIR "/%s/free_hugepages", dir_name);
	read_u64_file(path, &free_pages);
	if (nr + surplus < free_pages)
		return 0;
	return (nr + surplus - free_pages) * kb * 1024;
}

static int hugetlb_used_sysfs(uint64_t *bytes)
{
	DIR *d = opendir(HUGEPAGES_DIR);
	struct dirent *e;

	if (!d)
		return -errno;
	*bytes = 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "hugepages-", 10))
			*bytes += pool_used_bytes(e->d_name);
	closedir(d);
	return 0;
}

/* /proc/meminfo: Shmem, and the default pool's use when sysfs is missing. */
static int read_meminfo(uint64_t *shmem, uint64_t *hugetlb_default)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long v, total = 0, free_pages = 0, page_kb = 0;
	char line[256];
	int found = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Shmem: %llu kB", &v) == 1) {
			*shmem = v * 1024;
			found = 1;
		}
		sscanf(line, "HugePages_Total: %llu", &total);
		sscanf(line, "HugePages_Free: %llu", &free_pages);
		sscanf(line, "Hugepagesize: %llu kB", &page_kb);
	}
	fclose(f);
	*hugetlb_default = total > free_pages ? (total - free_pages) * page_kb * 1024 : 0;
	return found ? 0 : -ENOENT;
}

int host_mem_read(struct host_mem *m)
{
	uint64_t hugetlb_default = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = read_meminfo(&m->shmem, &hugetlb_default);
	if (rc)
		return rc;
	if (hugetlb_used_sysfs(&m->hugetlb_used))
		m->hugetlb_used = hugetlb_default;
	return 0;
}

/* "7f12a0000000-7f12b0000000 rw-s ..." starts a VMA; fields follow. */
static bool vma_header(const char *line, uint64_t *start, uint64_t *end)
{
	unsigned long long s, e;

	if (sscanf(line, "%llx-%llx ", &s, &e) != 2)
		return false;
	*start = s;
	*end = e;
	return true;
}

static void add_field(const char *line, struct vma_use *u)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "Rss:", offsetof(struct vma_use, rss) },
		{ "Pss:", offsetof(struct vma_use, pss) },
		{ "Shared_Hugetlb:", offsetof(struct vma_use, hugetlb) },
		{ "Private_Hugetlb:", offsetof(struct vma_use, hugetlb) },
		{ "ShmemPmdMapped:", offsetof(struct vma_use, pmd_mapped) },
		{ "FilePmdMapped:", offsetof(struct vma_use, pmd_mapped) },
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		size_t n = strlen(fields[i].name);

		if (!strncmp(line, fields[i].name, n)) {
			uint64_t *sum = (uint64_t *)((char *)u + fields[i].off);

			*sum += strtoull(line + n, NULL, 10) * 1024;
			return;
		}
	}
}

int vma_use_read(const void *addr, uint64_t len, struct vma_use *u)
{
	uint64_t lo = (uint64_t)(uintptr_t)addr, hi = lo + len, start, end;
	FILE *f = fopen("/proc/self/smaps", "re");
	bool inside = false, seen = false;
	char line[512];

	memset(u, 0, sizeof(*u));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (vma_header(line, &start, &end)) {
			inside = start >= lo && end <= hi;
			seen |= inside;
		} else if (inside) {
			add_field(line, u);
		}
	}
	fclose(f);
	return seen ? 0 : -ENOENT;
}
