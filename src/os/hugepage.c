/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent huge pages on shmem and the HugeTLB pools. The shmem THP
 * knobs default to never, and then MADV_HUGEPAGE is silently a no-op: so
 * the knobs are read and judged, and what was obtained is measured from
 * smaps rather than assumed. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "os/file.h"
#include "os/host.h"
#include "os/hugepage.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define THP_GLOBAL THP_DIR "/shmem_enabled"
#define THP_PER2M THP_DIR "/hugepages-2048kB/shmem_enabled"
#define HUGETLB_DIR "/sys/kernel/mm/hugepages"

int sseg_os_knob_choice(const char *text, char *value, size_t len)
{
	const char *open = strchr(text, '[');
	const char *close = open ? strchr(open, ']') : NULL;
	size_t n;

	if (!open || !close)
		return sseg_err(-EINVAL, "knob text \"%s\" has no [selected] value", text);
	n = (size_t)(close - open - 1);
	if (n == 0 || n >= len)
		return sseg_err(-EINVAL, "knob text \"%s\" has an empty or too long value", text);
	memcpy(value, open + 1, n);
	value[n] = '\0';
	return 0;
}

static int read_knob(const char *path, char value[16])
{
	char text[256];
	int rc = sseg_os_read_text(path, text, sizeof(text));

	if (rc)
		return rc;
	rc = sseg_os_knob_choice(text, value, 16);
	if (rc)
		return sseg_err_wrap(rc, "%s", path);
	return 0;
}

int sseg_os_thp_shmem_knobs(char global[16], char per2m[16])
{
	int rc = read_knob(THP_GLOBAL, global);

	if (rc)
		return rc;
	/* Kernels before 6.11 have no per-size shmem knobs. */
	if (read_knob(THP_PER2M, per2m))
		per2m[0] = '\0';
	sseg_err_clear();
	return 0;
}

static bool allows_madvise(const char *value)
{
	return !strcmp(value, "always") || !strcmp(value, "within_size") ||
	       !strcmp(value, "advise") || !strcmp(value, "force");
}

/* Measured on 6.18 for a memfd mapping with MADV_HUGEPAGE: deny wins over
 * everything; a per-size value other than inherit decides on its own (even
 * over a global never); inherit defers to the global value. */
bool sseg_os_thp_shmem_allows(const char *global, const char *per2m, char *reason, size_t len)
{
	if (!strcmp(global, "deny")) {
		snprintf(reason, len, "%s is [deny]: echo advise > %s", THP_GLOBAL, THP_GLOBAL);
		return false;
	}
	if (per2m[0] && strcmp(per2m, "inherit")) {
		if (allows_madvise(per2m))
			return true;
		snprintf(reason, len, "%s is [%s]: echo advise > %s", THP_PER2M, per2m,
			 THP_PER2M);
		return false;
	}
	if (allows_madvise(global))
		return true;
	if (per2m[0])
		snprintf(reason, len, "%s is [%s] and %s is [inherit]: echo advise > %s",
			 THP_GLOBAL, global, THP_PER2M, THP_GLOBAL);
	else
		snprintf(reason, len, "%s is [%s]: echo advise > %s", THP_GLOBAL, global,
			 THP_GLOBAL);
	return false;
}

bool sseg_os_thp_shmem_usable(char *reason, size_t len)
{
	char global[16], per2m[16];

	if (sseg_os_thp_shmem_knobs(global, per2m)) {
		snprintf(reason, len, "%s cannot be read: the kernel has no shmem THP",
			 THP_GLOBAL);
		sseg_err_clear();
		return false;
	}
	return sseg_os_thp_shmem_allows(global, per2m, reason, len);
}

int sseg_os_madvise_hugepage(void *addr, uint64_t len)
{
	if (madvise(addr, len, MADV_HUGEPAGE))
		return sseg_err(-errno, "madvise(MADV_HUGEPAGE) of %" PRIu64 " bytes at %p "
				"failed: %s%s", len, addr, strerror(errno),
				errno == EINVAL ? " (kernel built without THP?)" : "");
	return 0;
}

static int read_pool(const char *dir, uint64_t page_size, struct sseg_hugetlb_pool *pool)
{
	static const char *const files[] = { "nr_hugepages", "free_hugepages",
					     "resv_hugepages" };
	uint64_t *fields[] = { &pool->total, &pool->free, &pool->reserved };
	char path[512];

	pool->page_size = page_size;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		int rc;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		rc = sseg_os_read_u64(path, fields[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int sseg_os_hugetlb_pool(uint64_t page_size, struct sseg_hugetlb_pool *pool)
{
	char dir[256];
	int rc;

	snprintf(dir, sizeof(dir), HUGETLB_DIR "/hugepages-%" PRIu64 "kB", page_size >> 10);
	rc = read_pool(dir, page_size, pool);
	if (rc == -ENOENT)
		return sseg_err(-ENOENT, "the kernel has no HugeTLB pool of %" PRIu64
				"-byte pages (%s is missing)", page_size, dir);
	return rc;
}

static int by_page_size(const void *a, const void *b)
{
	const struct sseg_hugetlb_pool *x = a, *y = b;

	return (x->page_size > y->page_size) - (x->page_size < y->page_size);
}

int sseg_os_hugetlb_pools(struct sseg_hugetlb_pool *pools, int max)
{
	struct dirent *entry;
	unsigned long long kb;
	DIR *dir;
	int n = 0;

	dir = opendir(HUGETLB_DIR);
	if (!dir)
		return 0; /* a kernel without HugeTLB has no pools */
	while (n < max && (entry = readdir(dir))) {
		int used = 0;

		if (sscanf(entry->d_name, "hugepages-%llukB%n", &kb, &used) != 1 ||
		    used == 0 || entry->d_name[used])
			continue;
		if (sseg_os_hugetlb_pool((uint64_t)kb << 10, &pools[n]) == 0)
			n++;
	}
	closedir(dir);
	qsort(pools, (size_t)n, sizeof(*pools), by_page_size);
	return n;
}

/* Sums the PMD-mapped and HugeTLB counters of one smaps field line. */
static void add_huge_field(const char *line, uint64_t *kb)
{
	static const char *const fields[] = { "ShmemPmdMapped:", "FilePmdMapped:",
					      "Shared_Hugetlb:", "Private_Hugetlb:" };

	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		size_t n = strlen(fields[i]);

		if (!strncmp(line, fields[i], n)) {
			*kb += strtoull(line + n, NULL, 10);
			return;
		}
	}
}

int sseg_os_huge_bytes(const void *addr, uint64_t len, uint64_t *bytes)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	unsigned long start, end;
	bool inside = false;
	uint64_t kb = 0;
	char line[4352]; /* a header holds a path of up to PATH_MAX */
	FILE *f;

	f = fopen("/proc/self/smaps", "re");
	if (!f)
		return sseg_err(-errno, "cannot open /proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		/* A VMA header ("start-end perms ..."); field lines never
		 * parse as two hex numbers around a dash. */
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			inside = start >= lo && end <= hi;
			continue;
		}
		if (inside)
			add_huge_field(line, &kb);
	}
	fclose(f);
	*bytes = kb << 10;
	return 0;
}
