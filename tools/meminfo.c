/* SPDX-License-Identifier: Apache-2.0 */
/* Host-wide shared-memory use (the OS layer's one /proc/meminfo reader),
 * for the demo's progress line, and one process's use of a mapping
 * (/proc/self/smaps): how the demo shows that N ranks hold one copy, not N. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "os/memory.h"

int host_mem_read(struct host_mem *m)
{
	memset(m, 0, sizeof(*m));
	return sseg_os_meminfo(&m->shmem, &m->hugetlb_used);
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
		{ "Shared_Hugetlb:", offsetof(struct vma_use, hugetlb_shared) },
		{ "Private_Hugetlb:", offsetof(struct vma_use, hugetlb_private) },
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
