/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline `sharedseg bench` compares the library against: a memfd of
 * the same page kind, created, mapped and populated directly. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26)
#endif
#ifndef MFD_HUGE_1GB
#define MFD_HUGE_1GB (30u << 26)
#endif

#define SIZE_2M (2ull << 20)
#define SIZE_1G (1ull << 30)

static uint64_t kind_page_size(enum sseg_pages kind)
{
	switch (kind) {
	case SSEG_PAGES_HUGETLB_1G:
		return SIZE_1G;
	case SSEG_PAGES_HUGETLB_2M:
	case SSEG_PAGES_THP:
		return SIZE_2M;
	default:
		return (uint64_t)sysconf(_SC_PAGESIZE);
	}
}

static unsigned memfd_flags(enum sseg_pages kind)
{
	if (kind == SSEG_PAGES_HUGETLB_2M)
		return MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB;
	if (kind == SSEG_PAGES_HUGETLB_1G)
		return MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_1GB;
	return MFD_CLOEXEC;
}

/* THP needs the mapping on a 2 MiB boundary: reserve, then map over it. */
static int map_aligned(struct bare_map *m, uint64_t align)
{
	uintptr_t start;

	m->reservation_len = m->len + align;
	m->reservation = mmap(NULL, m->reservation_len, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->reservation == MAP_FAILED) {
		m->reservation = NULL;
		return -errno;
	}
	start = ((uintptr_t)m->reservation + align - 1) & ~(uintptr_t)(align - 1);
	m->base = mmap((void *)start, m->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		       m->fd, 0);
	if (m->base == MAP_FAILED) {
		m->base = NULL;
		return -errno;
	}
	return 0;
}

int bare_create(enum sseg_pages kind, uint64_t size, struct bare_map *m)
{
	uint64_t page = kind_page_size(kind);
	int rc;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->len = (size + page - 1) / page * page;
	m->fd = memfd_create("sharedseg-bench", memfd_flags(kind));
	if (m->fd < 0)
		return -errno;
	if (ftruncate(m->fd, (off_t)m->len)) {
		rc = -errno;
		goto fail;
	}
	rc = map_aligned(m, kind == SSEG_PAGES_THP ? SIZE_2M : page);
	if (rc)
		goto fail;
	if (kind == SSEG_PAGES_THP && madvise(m->base, m->len, MADV_HUGEPAGE)) {
		rc = -errno;
		goto fail;
	}
	return 0;
fail:
	bare_destroy(m);
	return rc;
}

int bare_populate(struct bare_map *m)
{
	uint64_t step = (uint64_t)sysconf(_SC_PAGESIZE);

	if (!madvise(m->base, m->len, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL)
		return -errno;
	for (uint64_t off = 0; off < m->len; off += step)
		((volatile char *)m->base)[off] = 0; /* a kernel before 5.14 */
	return 0;
}

void bare_destroy(struct bare_map *m)
{
	if (m->reservation)
		munmap(m->reservation, m->reservation_len);
	else if (m->base)
		munmap(m->base, m->len);
	if (m->fd >= 0)
		close(m->fd);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

void bare_pages_label(enum sseg_pages kind, const struct bare_map *m, char *buf, size_t len)
{
	struct vma_use use;

	if (kind == SSEG_PAGES_HUGETLB_2M || kind == SSEG_PAGES_HUGETLB_1G ||
	    vma_use_read(m->base, m->len, &use)) {
		snprintf(buf, len, "%s", sseg_pages_name(kind));
		return;
	}
	if (use.pmd_mapped >= m->len)
		snprintf(buf, len, "thp");
	else if (use.pmd_mapped == 0)
		snprintf(buf, len, "base");
	else
		snprintf(buf, len, "thp (%.0f%% of bytes)", 100.0 * (double)use.pmd_mapped /
			 (double)m->len);
}

uint64_t bench_sum_words(const void *base, uint64_t len)
{
	const uint64_t *w = base;
	uint64_t sum = 0, n = len / 8;

	for (uint64_t i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_stat_of(const double *samples, int n, struct bench_stat *st)
{
	double sorted[BENCH_MAX_REPS];

	memset(st, 0, sizeof(*st));
	if (n <= 0 || n > BENCH_MAX_REPS)
		return;
	memcpy(sorted, samples, (size_t)n * sizeof(*sorted));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
	st->min_s = sorted[0];
	st->median_s = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}
