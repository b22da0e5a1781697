/* SPDX-License-Identifier: Apache-2.0 */
/* Mappings of a page kind, and population. */
#define _GNU_SOURCE /* MAP_HUGETLB, MADV_* */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "mapping.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

#define PAGE_4K 4096ull

uint64_t pages_size(enum sseg_pages kind)
{
	if (kind == SSEG_PAGES_HUGETLB_1G)
		return 1ull << 30;
	if (kind == SSEG_PAGES_HUGETLB_2M || kind == SSEG_PAGES_THP)
		return SIZE_2M;
	return PAGE_4K;
}

uint64_t pages_round(enum sseg_pages kind, uint64_t size)
{
	uint64_t page = pages_size(kind);

	return (size + page - 1) / page * page;
}

bool pages_hugetlb(enum sseg_pages kind)
{
	return kind == SSEG_PAGES_HUGETLB_2M || kind == SSEG_PAGES_HUGETLB_1G;
}

/* An address range of len bytes on an align boundary: a PROT_NONE mapping
 * with room to spare, trimmed at both ends, that the real mapping then
 * replaces with MAP_FIXED. */
static int find_aligned(struct mapping *m, uint64_t align)
{
	uint64_t room = m->len + align, head, tail;
	char *p = mmap(NULL, room, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	head = (align - (uintptr_t)p % align) % align;
	tail = room - head - m->len;
	if (head)
		munmap(p, head);
	if (tail)
		munmap(p + head + m->len, tail);
	m->base = p + head;
	return 0;
}

/* Over the range find_aligned left; on failure the range is released. */
static int place(struct mapping *m, int flags, int fd)
{
	if (mmap(m->base, m->len, PROT_READ | PROT_WRITE, flags | MAP_FIXED, fd, 0) != MAP_FAILED)
		return 0;
	return -errno;
}

static int advise_kind(struct mapping *m, enum sseg_pages kind)
{
	int advice = kind == SSEG_PAGES_THP ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;

	if (pages_hugetlb(kind))
		return 0;
	return madvise(m->base, m->len, advice) ? -errno : 0;
}

/* size rounded up to the kind's pages, on a page boundary, advised */
static int map_kind(enum sseg_pages kind, uint64_t size, int flags, int fd, struct mapping *m)
{
	int rc;

	memset(m, 0, sizeof(*m));
	m->len = pages_round(kind, size);
	rc = find_aligned(m, pages_size(kind));
	if (!rc)
		rc = place(m, flags, fd);
	if (!rc)
		rc = advise_kind(m, kind);
	if (rc)
		unmap(m);
	return rc;
}

int map_private(enum sseg_pages kind, uint64_t size, struct mapping *m)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;

	if (pages_hugetlb(kind))
		flags |= MAP_HUGETLB | (kind == SSEG_PAGES_HUGETLB_1G ? 30 : 21) << MAP_HUGE_SHIFT;
	return map_kind(kind, size, flags, -1, m);
}

int map_shared_fd(enum sseg_pages kind, int fd, uint64_t size, struct mapping *m)
{
	return map_kind(kind, size, MAP_SHARED, fd, m);
}

int map_shared_anywhere(int fd, uint64_t size, struct mapping *m)
{
	memset(m, 0, sizeof(*m));
	m->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m->base == MAP_FAILED) {
		m->base = NULL;
		return -errno;
	}
	m->len = size;
	return 0;
}

void unmap(struct mapping *m)
{
	if (m->base)
		munmap(m->base, m->len);
	memset(m, 0, sizeof(*m));
}

void touch_write(void *base, uint64_t len)
{
	volatile unsigned char *p = base;

	for (uint64_t off = 0; off < len; off += PAGE_4K)
		p[off] = 1;
}

void touch_read(const void *base, uint64_t len)
{
	const volatile unsigned char *p = base;

	for (uint64_t off = 0; off < len; off += PAGE_4K)
		(void)p[off];
}

int populate_write(void *base, uint64_t len)
{
	if (!len || !madvise(base, len, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL)
		return -errno;
	touch_write(base, len); /* a kernel before 5.14 */
	return 0;
}
